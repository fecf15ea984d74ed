//! One client connection, whatever its protocol and transport: what engines drive. It holds
//! what every protocol shares (the worker serving it, the client's address, the sink of an
//! engine that runs handlers on the connection's own thread, the read and send deadlines),
//! the transport between socket and protocol bytes (`transport.zig`), and the active
//! protocol session as a tagged union, and it forwards the engine contract
//! (`engine_contract.zig`) to them. It makes no syscalls and holds no protocol framing:
//! adding a protocol is a variant of `Protocol` and a session file; adding a transport, a
//! variant of `Transport` and its file.
const std = @import("std");
const Worker = @import("Worker.zig");
const Config = @import("Config.zig");
const Handoff = @import("Handoff.zig");
const Exchange = @import("Exchange.zig");
const contract = @import("engine_contract.zig");
const Transport = @import("transport.zig").Transport;
const Tls = @import("transport.zig").Tls;
const Listening = @import("Listening.zig");
const Proxy = @import("transport/Proxy.zig");
const Http1 = @import("http1/Session.zig");
const WebSocket = @import("websocket/Protocol.zig");
const Http2 = @import("http2/Session.zig");

const Connection = @This();

/// The worker serving the connection (a `worker_pool` connection may change workers
/// between turns).
worker: *Worker,
/// The client's address, owned by the engine (for `Request.peer`); a pointer keeps the
/// connection small.
peer: ?*const std.Io.net.IpAddress = null,
/// Set by engines that run handlers on a thread of their own, to stream responses and to read
/// bodies the handler pulls (`req.bodyReader()`).
sink: ?*const Handoff.Sink = null,
transport: Transport = .{},
/// When the read and send sides time out, whatever protocol the connection speaks: the
/// active protocol sets them, and says which one applies now (`deadline`).
deadlines: Deadlines,
protocol: Protocol,

/// Deadlines on the worker's clock (milliseconds).
pub const Deadlines = struct {
    /// The read side: idle, request head, body or lingering close, as the protocol sets it.
    read_ms: u64,
    /// A batch being sent that makes no progress.
    send_ms: u64 = 0,
};

/// The protocol sessions a connection can speak. Each offers the engine contract's calls
/// (see `engine_contract.zig`); the connection picks the active one. Every connection starts
/// as HTTP/1; an accepted upgrade switches it to WebSocket (`upgrade`).
pub const Protocol = union(enum) {
    http1: Http1,
    websocket: WebSocket,
    http2: Http2,
};

/// How a protocol session reaches the connection it lives in (`protocol.<its tag>`): the
/// worker serving it, the client's address, the sink.
pub const owner = struct {
    pub fn of(comptime tag: std.meta.Tag(Protocol), session: *const @FieldType(Protocol, @tagName(tag))) *Connection {
        const protocol: *const Protocol = @fieldParentPtr(@tagName(tag), session);
        const c: *const Connection = @fieldParentPtr("protocol", protocol);
        return @constCast(c);
    }
};

/// What the engine must do next (see `engine_contract.zig`).
pub const Next = contract.Next;
/// The file range of `Next.send_file`.
pub const File = contract.File;
/// Blocking I/O for handlers that run on a thread of their own (see `Handoff.Sink`).
pub const Sink = Handoff.Sink;

comptime {
    contract.check(Connection, Worker);
}

/// What an engine sends to a connection it cannot take (over `connections_max`) before
/// closing it.
pub const overloaded_response = "HTTP/1.1 503 Service Unavailable\r\n" ++
    "Content-Type: text/plain; charset=utf-8\r\nContent-Length: " ++
    std.fmt.comptimePrint("{d}", .{overloaded_body.len}) ++ "\r\nConnection: close\r\n\r\n" ++
    overloaded_body;
const overloaded_body = "503 Service Unavailable: too many connections\n";

/// A new connection, idle until its first byte arrives. Every connection starts as HTTP/1,
/// over TLS when the worker's listener has a TLS context, behind a PROXY header when the
/// listener requires one.
pub fn init(worker: *Worker) Connection {
    return .{
        .worker = worker,
        .transport = openTransport(worker.listening, worker.now_ms, worker.config),
        .deadlines = .{ .read_ms = worker.now_ms + worker.config.idle_timeout_ms },
        .protocol = .{ .http1 = .{} },
    };
}

/// A new connection that has no worker yet (a `worker_pool` poller parks it; a pool thread
/// lends it a worker when it has work). `now_ms` is the poller's clock; `listening` what the
/// listener's connections share.
pub fn initParked(now_ms: u64, config: *const Config, sink: *const Sink, listening: *const Listening) Connection {
    return .{
        .worker = undefined,
        .sink = sink,
        .transport = openTransport(listening, now_ms, config),
        .deadlines = .{ .read_ms = now_ms + config.idle_timeout_ms },
        .protocol = .{ .http1 = .{} },
    };
}

fn openTransport(listening: *const Listening, now_ms: u64, config: *const Config) Transport {
    var transport: Transport = .{};
    if (listening.tls) |context| transport.tls = context.open(now_ms, config.tls_handshake_timeout_ms) orelse &Tls.refused;
    if (listening.proxy) |*policy| transport.proxy = Proxy.create(policy, now_ms) orelse &Proxy.refused;
    return transport;
}

/// Gives back everything the connection holds. Call once, after the socket is closed.
pub fn deinit(c: *Connection) void {
    // A WebSocket connection always has its worker (it keeps it while it lives).
    if (c.protocol == .websocket) c.worker.metrics.websocketClosed();
    switch (c.protocol) {
        inline else => |*session| session.deinit(),
    }
    c.transport.deinit();
}

/// What the engine must do next.
pub fn next(c: *const Connection) Next {
    const wanted = switch (c.protocol) {
        inline else => |*session| session.next(),
    };
    const action = c.transport.next(wanted);
    if (action == .close and wanted != .close) {
        // The transport failed (a bad record, a handshake that failed or timed out): the
        // protocol learns it as a socket error. A handler still running on the pool is waited
        // for; it must not lose its exchange under it. (Engines hold connections mutably; the
        // contract's `next` is const only because it asks.)
        const connection = @constCast(c);
        switch (connection.protocol) {
            inline else => |*session| session.onError(),
        }
        if (c.handling()) return .wait;
    }
    return action;
}

/// The buffer to read into; null when the worker has no buffer left (the engine then closes
/// the connection).
pub fn recvBuffer(c: *Connection) ?[]u8 {
    const buffer = switch (c.protocol) {
        inline else => |*session| session.recvBuffer(),
    } orelse return null;
    // Engines that run handlers on this thread set their sink after `init`: the protocol
    // must reach the socket through the transport. (A handler pool's sink, set while a pool
    // thread handles, goes through the loop, and so through the transport, already.)
    if (c.sink) |raw| if (!c.handling()) {
        c.sink = c.transport.sink(raw);
    };
    if (c.transport.proxy) |p| if (p.phase == .reading) return p.recvBuffer(c.peer);
    return c.transport.recvBuffer(buffer);
}

/// `n` bytes were read into `recvBuffer()`; 0 means the client closed its side.
pub fn onRecv(c: *Connection, n: usize) void {
    c.worker.metrics.received(n);
    const delivered = c.transport.received(n);
    // The client's address from a PROXY header is the connection's peer from now on.
    if (c.transport.proxy) |p| if (p.source) |*source| {
        c.peer = source;
    };
    c.deliver(delivered orelse return);
}

/// Hands the protocol `n` bytes now in its buffer (0: the end of the stream).
fn deliver(c: *Connection, n: usize) void {
    switch (c.protocol) {
        .http1 => |*session| {
            if (session.firstBytes()) {
                // ALPN chose h2, or a cleartext listener speaks h2c alone: whatever comes is
                // HTTP/2's (a wrong preface is its error).
                const http2 = if (c.transport.tls) |tls| tls.alpnHttp2() else c.worker.config.h2c_only;
                if (http2) {
                    session.switchToHttp2(n);
                    return c.startHttp2();
                }
            }
            session.onRecv(n);
            if (session.upgraded()) c.upgrade();
            if (session.wantsHttp2()) c.startHttp2();
        },
        inline else => |*session| session.onRecv(n),
    }
}

/// Bytes the transport held back wait (`Next.recv_held`): they go to the protocol.
pub fn onHeld(c: *Connection) void {
    const buffer = switch (c.protocol) {
        inline else => |*session| session.recvBuffer(),
    } orelse return c.onError();
    c.deliver(c.transport.deliverHeld(buffer) orelse return);
}

/// `n` file bytes were read for `Next.pread` (0: the file ended early).
pub fn onFileRead(c: *Connection, n: usize) void {
    if (!c.transport.onFileRead(n)) c.onError();
}

/// The read found nothing (EAGAIN).
pub fn onWouldBlock(c: *Connection) void {
    switch (c.protocol) {
        inline else => |*session| session.onWouldBlock(),
    }
}

/// `n` bytes of the batch (iovecs, then file) were sent.
pub fn onSend(c: *Connection, n: usize) void {
    c.worker.metrics.sent(n);
    const taken = c.transport.sent(n) orelse return;
    switch (c.protocol) {
        .http1 => |*session| {
            session.onSend(taken);
            // Pipelined requests run once a batch is out: one may be an upgrade.
            if (session.upgraded()) c.upgrade();
        },
        inline else => |*session| session.onSend(taken),
    }
}

/// The file body that ends the batch being sent, if any (engines may cork the socket while
/// its head goes out).
pub fn fileFollows(c: *const Connection) ?File {
    // Over TLS a file goes out as records the transport writes: nothing to cork around.
    if (c.transport.tls != null) return null;
    return switch (c.protocol) {
        inline else => |*session| session.fileFollows(),
    };
}

/// Whether the connection closes once the batch being sent is out (its last response: engines
/// then leave the rest of a file body to the kernel, see `engine/socket.zig` `FileSend`).
pub fn closesAfterSend(c: *const Connection) bool {
    return switch (c.protocol) {
        inline else => |*session| session.closesAfterSend(),
    };
}

/// The write side was shut down.
pub fn onShutdown(c: *Connection) void {
    switch (c.protocol) {
        inline else => |*session| session.onShutdown(),
    }
}

/// The socket failed (reset, broken pipe): nothing more can be done but close.
pub fn onError(c: *Connection) void {
    c.transport.onError();
    switch (c.protocol) {
        inline else => |*session| session.onError(),
    }
}

/// When the engine must call `onTimeout` (worker clock, milliseconds).
pub fn deadline(c: *const Connection) u64 {
    if (c.transport.deadline()) |handshake| return handshake;
    return switch (c.protocol) {
        inline else => |*session| session.deadline(),
    };
}

/// `deadline()` has passed.
pub fn onTimeout(c: *Connection) void {
    if (c.transport.deadline() != null) return c.transport.onTimeout();
    switch (c.protocol) {
        inline else => |*session| session.onTimeout(),
    }
}

/// Server shutdown: idle connections close, requests in flight finish, open WebSockets are
/// told 1001. Engines call it on every sweep while draining; it acts only when there is
/// something to do.
pub fn drain(c: *Connection) void {
    // A TLS handshake under way finishes first (bounded by its deadline): its request is
    // then answered with `Connection: close`.
    if (c.transport.negotiating()) return;
    switch (c.protocol) {
        inline else => |*session| session.drain(),
    }
}

/// Whether the connection waits for a request's first byte and holds nothing: at shutdown
/// `drain` closes it, once the engine has made sure no request waits in the socket.
pub fn idle(c: *const Connection) bool {
    if (c.transport.negotiating()) return false;
    return switch (c.protocol) {
        inline else => |*session| session.idle(),
    };
}

/// Whether the session itself tells the peer that the server stops (WebSocket's close 1001,
/// HTTP/2's GOAWAY), so an engine hands it `drain` at shutdown though it is never `idle`.
pub fn saysGoodbye(c: *const Connection) bool {
    return c.protocol == .websocket or c.protocol == .http2;
}

/// Whether the connection speaks WebSocket (it then takes work queued by other threads:
/// `onWake`).
pub fn websocketOpen(c: *const Connection) bool {
    return c.protocol == .websocket;
}

/// WebSocket work was queued for this connection from elsewhere (`Worker.takeWoken`).
pub fn onWake(c: *Connection) void {
    switch (c.protocol) {
        inline else => |*session| session.onWake(),
    }
}

/// Whether the connection holds buffers or a WebSocket (a `worker_pool` connection then keeps
/// its worker while it waits).
pub fn holdsState(c: *const Connection) bool {
    return switch (c.protocol) {
        inline else => |*session| session.holdsState(),
    };
}

/// Whether a pool thread is running a handler for this connection (it must not be freed).
pub fn handling(c: *const Connection) bool {
    return switch (c.protocol) {
        inline else => |*session| session.handling(),
    };
}

/// The worker's completion event fired for this connection: a streamed chunk to send (then
/// `next()` says so), or the handler is done.
pub fn onPoolEvent(c: *Connection) void {
    switch (c.protocol) {
        .http1 => |*session| {
            session.onPoolEvent();
            if (session.upgraded()) c.upgrade();
        },
        inline else => |*session| session.onPoolEvent(),
    }
}

/// The HTTP/1 session answered an upgrade with 101: from here on the connection speaks
/// WebSocket, with the same buffers (the 101 is still in their batch).
fn upgrade(c: *Connection) void {
    const handover = c.protocol.http1.takeUpgrade();
    c.protocol.http1.deinit();
    c.protocol = .{ .websocket = .init(handover) };
    c.protocol.websocket.open();
    c.worker.metrics.websocketOpened();
}

/// The client's first bytes were the HTTP/2 preface (h2c, or h2 chosen by ALPN): from here on
/// the connection speaks HTTP/2, with the exchange the bytes are in.
fn startHttp2(c: *Connection) void {
    const x = c.protocol.http1.takeHttp2();
    c.protocol.http1.deinit();
    c.protocol = .{ .http2 = .{} };
    // Without memory for its state the session holds nothing and says close.
    if (c.protocol.http2.open(x)) c.worker.metrics.http2Open(true);
}

/// Runs the handler for the current request; called on a handler pool thread, which owns the
/// connection's request state until it posts the completion.
pub fn runHandlerOnPool(c: *Connection) void {
    switch (c.protocol) {
        inline else => |*session| session.runHandlerOnPool(),
    }
}

/// The link in the worker's list of connections the handler pool posted.
pub fn completionLink(c: *Connection) *Exchange.CompletionLink {
    return switch (c.protocol) {
        inline else => |*session| session.completionLink(),
    };
}

test {
    _ = @import("Handoff.zig");
    _ = Proxy;
    _ = @import("testing/bytes.zig");
    _ = Http1;
    _ = WebSocket;
    _ = Http2;
}
