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
//! - `shutdownWrite()`, and `cork() ?*socket.Cork` with `fd()` for corking around files.
//!
//! Engines keep their ways of waiting (epoll readiness, io_uring completions, blocking calls);
//! nothing else about a connection's actions is theirs to decide.
const std = @import("std");
const Connection = @import("../Connection.zig");
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
        switch (c.next()) {
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
                if (io.cork()) |cork| {
                    const file = c.fileFollows();
                    cork.beforeHead(io.fd(), if (file) |f| f.len else null, c.worker.config.cork_file_bytes_max);
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
                        if (io.cork()) |cork| cork.afterFile(io.fd(), c.fileFollows() != null);
                    },
                    .would_block, .interrupted => {},
                    .pending => return .later,
                    .failed => c.onError(),
                }
            },
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
