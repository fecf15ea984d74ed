//! The engine driver: the one loop that carries out a connection's next actions (receive,
//! writev, sendfile, shutdown, close), written once for every engine and for the simulated
//! one in `testing/Simulation.zig`. An engine differs only in how it waits, so it hands the
//! driver an `io` value whose methods say whether an operation can run now and run it:
//!
//! - `beforeStep(c) ?Stop`: engine housekeeping before each step (clock, stop request);
//!   non-null ends the drive.
//! - `awaitRecv(c) Await`, `awaitSend(c) Await`: whether a receive or a send can be tried now;
//!   `.later` when the engine has arranged to be told (readiness armed, connection parked,
//!   operation in flight).
//! - `recv(buffer) Result`, `writev(iovecs) Result`, `sendfile(file) Result`: one operation;
//!   `.would_block` once the engine has noted that the socket is not ready.
//! - `shutdownWrite()`, and `fileSend() ?*socket.FileSend` with `fd()` for the socket options
//!   around file bodies (null: the engine sets none).
//!
//! Two steps need no wait and are the driver's own: bytes a transport held back
//! (`recv_held`) and file bytes a transport encrypts (`pread`, a read of a regular file).
//!
//! Engines keep their ways of waiting (epoll readiness, io_uring completions, blocking calls);
//! nothing else about a connection's actions is theirs to decide.
//!
//! The driver also holds what an engine thread serving many connections does on its clock:
//! the timeout sweep and the shutdown drain (`Sweeper`, `sweep`). An engine that cannot
//! tell whether bytes wait in an idle connection's socket says how it finds out (`Unread`).
const std = @import("std");
const Connection = @import("../Connection.zig");
const Config = @import("../Config.zig");
const Worker = @import("../Worker.zig");
const socket = @import("socket.zig");

const log = std.log.scoped(.saker);

/// Steps one drive may take. Every step moves bytes or changes the connection's state, so the
/// bound only catches a connection bug.
pub const steps_max = 1_000_000;

/// What an engine's wait for the socket came to.
pub const Await = enum {
    /// The operation can be tried now.
    ready,
    /// The engine calls `drive` again when the socket is ready or the operation completed.
    later,
    /// The connection's deadline passed while it waited: it is told, then asked again.
    timed_out,
    /// Something else happened meanwhile (queued work, a state the engine changed): ask the
    /// connection again.
    again,
    /// The engine cannot wait for this connection (it ran out of submission space): close.
    close,
};

/// How one operation ended.
pub const Result = union(enum) {
    /// Bytes moved; for a receive, 0 means the client closed its side.
    done: usize,
    /// The socket was not ready; the engine noted it, so its next `await*` tells.
    would_block,
    /// Interrupted by a signal: try again.
    interrupted,
    /// Submitted; the completion calls `drive` again (completion-based engines).
    pending,
    /// The connection is broken (reset, broken pipe, a send timeout).
    failed,
};

/// Why a drive ended.
pub const Stop = enum {
    /// The connection waits for the socket, an operation in flight, or the handler pool.
    later,
    /// The connection is finished: the engine closes the socket and calls `deinit`.
    close,
};

/// Runs `c` until it must wait or is finished.
pub fn drive(io: anytype, c: *Connection) Stop {
    for (0..steps_max) |_| {
        if (io.beforeStep(c)) |stop| return stop;
        // Inlined: a call returned the union through memory, at every step (about 60
        // instructions a request without pipelining).
        switch (@call(.always_inline, Connection.next, .{c})) {
            .recv => {
                switch (gate(io.awaitRecv(c), c)) {
                    .go => {},
                    .again => continue,
                    .stop => |stop| return stop,
                }
                const buffer = c.recvBuffer() orelse return .close;
                switch (io.recv(buffer)) {
                    .done => |n| c.onRecv(n),
                    .would_block => c.onWouldBlock(),
                    .interrupted => {},
                    .pending => return .later,
                    .failed => c.onError(),
                }
            },
            .send => |iovecs| {
                switch (gate(io.awaitSend(c), c)) {
                    .go => {},
                    .again => continue,
                    .stop => |stop| return stop,
                }
                if (io.fileSend()) |send| {
                    const file = c.fileFollows();
                    const config = c.worker.config;
                    send.beforeHead(io.fd(), if (file) |f| f.len else null, c.closesAfterSend(), .{
                        .cork_file_bytes_max = config.cork_file_bytes_max,
                        .unsent_bytes_max = config.unsent_bytes_max,
                    });
                }
                switch (io.writev(iovecs)) {
                    .done => |n| c.onSend(n),
                    .would_block, .interrupted => {},
                    .pending => return .later,
                    .failed => c.onError(),
                }
            },
            .send_file => |file| {
                switch (gate(io.awaitSend(c), c)) {
                    .go => {},
                    .again => continue,
                    .stop => |stop| return stop,
                }
                switch (io.sendfile(file)) {
                    // 0: the file shrank under us; the promised length cannot be kept.
                    .done => |n| if (n == 0) c.onError() else {
                        c.onSend(n);
                        if (io.fileSend()) |send| send.afterFile(io.fd(), c.fileFollows() != null);
                    },
                    .would_block, .interrupted => {},
                    .pending => return .later,
                    .failed => c.onError(),
                }
            },
            // The transport's own steps: no waiting on the socket.
            .recv_held => c.onHeld(),
            .pread => |read| c.onFileRead(socket.pread(read.fd, read.buffer, read.offset)),
            .shutdown => {
                io.shutdownWrite();
                c.onShutdown();
            },
            .close => return .close,
            .wait => return .later,
        }
    }
    log.err("connection made no progress in {d} steps; closing it", .{steps_max});
    c.onError();
    return .close;
}

const Gate = union(enum) { go, again, stop: Stop };

/// Applies what a wait came to.
inline fn gate(result: Await, c: *Connection) Gate {
    return switch (result) {
        .ready => .go,
        .later => .{ .stop = .later },
        .close => .{ .stop = .close },
        .timed_out => {
            c.onTimeout();
            return .again;
        },
        .again => .again,
    };
}

/// Maps a socket call's error to a `Result`.
pub fn fromError(err: socket.IoError) Result {
    return switch (err) {
        error.WouldBlock => .would_block,
        error.Interrupted => .interrupted,
        error.ConnectionLost, error.Unexpected => .failed,
    };
}

/// What an engine knows, when the server drains, about bytes waiting in an idle connection's
/// socket. Idle means nothing to read now, not merely nothing read yet: a request that
/// arrived is answered (with `Connection: close`) rather than reset.
pub const Unread = enum {
    /// Perhaps some: the drive reads first, then the connection is drained.
    maybe,
    /// None: the connection is drained (closed) now.
    none,
    /// A receive is in flight: its completion decides, at the next sweep.
    in_flight,
};

/// One connection's turn in a sweep: while the server drains, an idle connection closes once
/// nothing waits in its socket and a busy one is told to finish (`Connection.drain`); a
/// passed deadline is applied (`onTimeout`); then the connection is driven. `io.unread(c)`
/// says what the engine knows of bytes waiting (see `Unread`).
pub fn sweep(io: anytype, c: *Connection, now_ms: u64, draining: bool) Stop {
    if (draining) {
        if (c.idle()) switch (io.unread(c)) {
            .maybe => if (drive(io, c) == .close) return .close,
            .none => {},
            .in_flight => return .later,
        };
        c.drain();
    }
    if (now_ms >= c.deadline()) c.onTimeout();
    return drive(io, c);
}

/// The clock of an engine thread that serves many connections: when to sweep them for
/// deadlines, and the drain once the server stops (every connection finishes, or
/// `shutdown_timeout_ms` passes).
pub const Sweeper = struct {
    interval_ms: u64,
    next_ms: u64 = 0,
    draining: bool = false,
    drain_deadline_ms: u64 = 0,
    /// While draining, idle connections are closed from then on (`closingIdle`).
    idle_close_ms: u64 = 0,

    /// Sweeps a few times per shortest timeout, so the hot path arms no timers.
    pub fn init(config: *const Config, now_ms: u64) Sweeper {
        const handshake_ms = if (config.anyTls()) config.tls_handshake_timeout_ms else std.math.maxInt(u32);
        const shortest = @min(config.header_timeout_ms, config.body_timeout_ms, config.idle_timeout_ms, config.write_timeout_ms, config.linger_timeout_ms, handshake_ms);
        const interval_ms = std.math.clamp(shortest / 4, 5, Worker.tick_interval_ms);
        return .{ .interval_ms = interval_ms, .next_ms = now_ms + interval_ms };
    }

    /// Whether a sweep is due at `now_ms` (and, if so, schedules the next).
    pub fn due(s: *Sweeper, now_ms: u64) bool {
        if (now_ms < s.next_ms) return false;
        s.next_ms = now_ms + s.interval_ms;
        return true;
    }

    /// Milliseconds an engine may wait for events before the next sweep.
    pub fn waitMs(s: *const Sweeper, now_ms: u64) u64 {
        return s.next_ms -| now_ms;
    }

    /// The server stopped (seen at `now_ms`): the drain begins (once). Returns whether it
    /// began now; the engine then stops accepting and sweeps at once. Sweeps come often while
    /// draining, so an idle connection closes promptly.
    pub fn beginDrain(s: *Sweeper, now_ms: u64, shutdown_timeout_ms: u32, idle_grace_ms: u32) bool {
        if (s.draining) return false;
        s.draining = true;
        s.drain_deadline_ms = now_ms + shutdown_timeout_ms;
        s.idle_close_ms = now_ms + @min(idle_grace_ms, shutdown_timeout_ms);
        s.interval_ms = @min(s.interval_ms, 10);
        return true;
    }

    /// Whether the drain closes idle connections at `now_ms`: from its start, or once the
    /// grace given to idle keep-alive connections passed (an upgrade's: a request they send
    /// meanwhile is answered, with `Connection: close`, instead of meeting a closed socket).
    pub fn closingIdle(s: *const Sweeper, now_ms: u64) bool {
        return s.draining and now_ms >= s.idle_close_ms;
    }

    pub const State = enum { serving, draining, drained, timed_out };

    /// Where the engine's loop stands with `active` connections open at `now_ms`.
    pub fn state(s: *const Sweeper, active: usize, now_ms: u64) State {
        if (!s.draining) return .serving;
        if (active == 0) return .drained;
        return if (now_ms < s.drain_deadline_ms) .draining else .timed_out;
    }

    /// Whether the engine's loop is over: draining, and no connection left (`active`) or the
    /// shutdown timeout passed (the engine then closes what is left, and it is logged).
    pub fn finished(s: *const Sweeper, active: usize, now_ms: u64) bool {
        switch (s.state(active, now_ms)) {
            .serving, .draining => return false,
            .drained => return true,
            .timed_out => {
                log.warn("shutdown timeout: closing {d} connections with requests in flight", .{active});
                return true;
            },
        }
    }
};

test "Sweeper: sweeps on its interval, then often while draining, and ends the drain" {
    var config: Config = .{};
    config.header_timeout_ms = 1000;
    var s: Sweeper = .init(&config, 0);
    try std.testing.expectEqual(@as(u64, 250), s.interval_ms);
    try std.testing.expect(!s.due(249));
    try std.testing.expect(s.due(250));
    try std.testing.expect(!s.due(251));
    try std.testing.expectEqual(@as(u64, 249), s.waitMs(251));
    try std.testing.expectEqual(Sweeper.State.serving, s.state(0, 251));
    try std.testing.expect(!s.finished(0, 251));
    try std.testing.expect(s.beginDrain(300, 2000, 0));
    try std.testing.expect(!s.beginDrain(300, 2000, 0));
    try std.testing.expect(s.draining);
    try std.testing.expectEqual(@as(u64, 10), s.interval_ms);
    try std.testing.expectEqual(Sweeper.State.draining, s.state(3, 2299));
    try std.testing.expect(!s.finished(3, 2299));
    try std.testing.expectEqual(Sweeper.State.drained, s.state(0, 301));
    try std.testing.expect(s.finished(0, 301));
    try std.testing.expectEqual(Sweeper.State.timed_out, s.state(3, 2300));
}
