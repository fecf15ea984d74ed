//! WebSocket as a connection's protocol session (RFC 6455 §5-§7): what `Connection.protocol`
//! holds after the HTTP/1 session answered an upgrade with 101 and handed the connection over.
//! It answers the engine contract (`engine_contract.zig`) for the frames: receiving into the
//! exchange's buffer (or straight into a message, `Session.directBuffer`), the send batch the
//! `Session` fills, and the end of the connection (shut the write side down, read until the
//! client closes or `linger_timeout_ms` passes, RFC 6455 §7.1.1). The frames, messages and
//! callbacks are `Session.zig`'s; this file makes no syscalls.
const std = @import("std");
const assert = std.debug.assert;
const Exchange = @import("../Exchange.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");
const contract = @import("../engine_contract.zig");
const Session = @import("Session.zig");

const Protocol = @This();

/// The buffers, borrowed from the worker by the HTTP/1 session and kept while the WebSocket
/// is open (the 101 response may still be in its batch), with the session that handles the
/// frames, messages and callbacks (`Exchange.websocket`).
exchange: *Exchange,
phase: Phase = .open,
/// Close once the current batch has been sent (`Session` asks for it).
close_after_send: bool = false,

pub const Phase = enum(u8) {
    /// Frames flow both ways (including the closing handshake, which `Session` tracks).
    open,
    /// The last frame is out; the engine must shut down the write side.
    shutdown,
    /// Reading and discarding until the client closes or `linger_timeout_ms` passes.
    linger,
    /// Finished: the engine closes the socket and calls `deinit`.
    closed,
};

/// The session for an upgrade whose 101 is in `x`'s batch; `open` starts it once it is in
/// place (it calls back into the handler, which may send). The connection's send deadline
/// carries over; its read deadline becomes the lingering close's once the write side is shut
/// (frames are timed by `Session`'s ping and close timers).
pub fn init(x: *Exchange) Protocol {
    assert(x.websocket != null);
    return .{ .exchange = x };
}

inline fn session(p: *const Protocol) *Session {
    return p.exchange.websocket.?;
}

/// Calls `onOpen` and handles the frames that arrived right behind the handshake.
pub fn open(p: *Protocol) void {
    p.session().open(p.connection(), p.exchange);
    p.armSendDeadline();
}

inline fn connection(p: *const Protocol) *Connection {
    return Connection.owner.of(.websocket, p);
}

inline fn deadlines(p: *const Protocol) *Connection.Deadlines {
    return &p.connection().deadlines;
}

inline fn worker(p: *const Protocol) *Worker {
    return Connection.owner.of(.websocket, p).worker;
}

/// For `Session`: the closing handshake is over (or the connection failed): send what is in
/// the batch, then shut down and linger. Nothing more is read as frames.
pub fn closeAfterBatch(p: *Protocol) void {
    const x = p.exchange;
    x.head_start = x.recv_end;
    p.close_after_send = true;
    if (!x.sending()) p.phase = .shutdown;
}

/// For `Session`: nothing more can be done (the client did not answer the close, a control
/// frame could not be queued): close now.
pub fn closeNow(p: *Protocol) void {
    p.phase = .closed;
}

pub fn deinit(p: *Protocol) void {
    const x = p.exchange;
    p.session().release();
    x.websocket = null;
    assert(x.file == null); // WebSocket sends no files
    x.iovec_index = x.iovec_count;
    p.worker().releaseExchange(x);
    p.phase = .closed;
}

pub fn next(p: *const Protocol) contract.Next {
    switch (p.phase) {
        .closed => return .close,
        .shutdown => return .shutdown,
        .open, .linger => {},
    }
    const x = p.exchange;
    if (x.iovec_index < x.iovec_count) return .{ .send = x.iovecs[x.iovec_index..x.iovec_count] };
    return .recv;
}

pub fn recvBuffer(p: *Protocol) ?[]u8 {
    const x = p.exchange;
    switch (p.phase) {
        .open => {
            if (p.session().directBuffer(x)) |direct| return direct;
            if (x.head_start > 0) x.compact();
            assert(x.recv_end < x.recv.len);
            return x.recv[x.recv_end..];
        },
        .linger => return x.recv_small,
        .shutdown, .closed => unreachable, // next() does not ask for a receive
    }
}

pub fn onRecv(p: *Protocol, n: usize) void {
    if (n == 0) {
        // The client closed the TCP connection (without a closing handshake if still open).
        p.session().onPeerClosed();
        p.phase = .closed;
        return;
    }
    switch (p.phase) {
        .open => {
            p.session().onRecv(p.exchange, n);
            p.armSendDeadline();
        },
        .linger => {},
        .shutdown, .closed => unreachable,
    }
}

pub fn onWouldBlock(_: *Protocol) void {}

pub fn onSend(p: *Protocol, n: usize) void {
    const x = p.exchange;
    p.deadlines().send_ms = p.worker().now_ms + p.worker().config.write_timeout_ms;
    x.advanceIovecs(n);
    if (x.sending()) return;
    x.clearBatch();
    if (p.close_after_send) {
        p.phase = .shutdown;
        return;
    }
    p.session().onBatchSent(x);
    p.armSendDeadline();
}

pub fn fileFollows(_: *const Protocol) ?contract.File {
    return null;
}

pub fn closesAfterSend(p: *const Protocol) bool {
    return p.close_after_send;
}

pub fn onShutdown(p: *Protocol) void {
    assert(p.phase == .shutdown);
    p.phase = .linger;
    p.deadlines().read_ms = p.worker().now_ms + p.worker().config.linger_timeout_ms;
}

pub fn onError(p: *Protocol) void {
    p.phase = .closed;
}

pub fn deadline(p: *const Protocol) u64 {
    if (p.exchange.sending()) return p.deadlines().send_ms;
    return switch (p.phase) {
        .open => p.session().deadline(),
        .linger, .shutdown, .closed => p.deadlines().read_ms,
    };
}

pub fn onTimeout(p: *Protocol) void {
    if (p.exchange.sending()) {
        p.phase = .closed; // the client stopped reading
        return;
    }
    switch (p.phase) {
        .open => {
            p.session().onTimeout(p.exchange);
            p.armSendDeadline();
        },
        .linger, .shutdown, .closed => p.phase = .closed,
    }
}

/// Server shutdown: the client is told 1001; the connection closes once it answers (or
/// `linger_timeout_ms` passes).
pub fn drain(p: *Protocol) void {
    if (p.phase != .open) return;
    p.session().drain(p.exchange);
    p.armSendDeadline();
}

/// Never idle: an open WebSocket is closed by its closing handshake (`drain`).
pub fn idle(_: *const Protocol) bool {
    return false;
}

pub fn onWake(p: *Protocol) void {
    if (p.phase != .open) return;
    p.session().onWake(p.exchange);
    p.armSendDeadline();
}

pub fn holdsState(_: *const Protocol) bool {
    return true;
}

/// WebSocket callbacks run on the engine thread: never on the handler pool.
pub fn handling(_: *const Protocol) bool {
    return false;
}

pub fn onPoolEvent(_: *Protocol) void {
    unreachable; // no handler runs on the pool for a WebSocket (`handling` is false)
}

pub fn runHandlerOnPool(_: *Protocol) void {
    unreachable;
}

pub fn completionLink(p: *Protocol) *Exchange.CompletionLink {
    return &p.exchange.completion;
}

fn armSendDeadline(p: *Protocol) void {
    if (p.exchange.sending()) p.deadlines().send_ms = p.worker().now_ms + p.worker().config.write_timeout_ms;
}
