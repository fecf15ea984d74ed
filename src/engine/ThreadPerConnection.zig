//! The thread-per-connection engine: an accept loop per listener starts a thread for every
//! connection, which serves it with blocking I/O (`blocking_io.zig`) and exits. At most
//! `connections_max` connections are served at once; beyond that a connection gets a 503 and
//! is closed. Each thread has a worker of its own sized for one connection.
const std = @import("std");
const posix = std.posix;
const linux = std.os.linux;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const blocking_io = @import("blocking_io.zig");
const Worker = @import("../Worker.zig");
const sync = @import("../sync.zig");

const log = std.log.scoped(.saker);

/// Accepts on `listener` (whose connections share `listening`) until the server stops, then
/// waits for the connection threads. The listener stays open (the server closes it).
pub fn run(shared: *engine.Shared, listener: socket.Listener, listening: *const Listening) void {
    defer waitForConnections(shared);
    const control = shared.control;
    var next_tick_ms: u64 = 0;
    while (!control.stopRequested()) {
        const wait = engine.awaitAccept(control, listener.fd);
        shared.tick(&next_tick_ms);
        switch (wait) {
            .stop => break,
            .idle => continue,
            .accept => {},
        }
        const fd = socket.accept(listener.fd, false) catch |err| switch (err) {
            error.WouldBlock, error.Interrupted, error.ConnectionAborted => continue,
            error.SystemResources, error.ListenerClosed, error.Unexpected => {
                engine.pauseAccepting(control, err);
                continue;
            },
        };
        start(shared, fd, listening);
    }
    // Connections the kernel had completed when the server stopped get their requests
    // answered (see `engine.Door`).
    for (control.takeDoorstep(listener.fd)) |fd| start(shared, fd, listening);
}

const Listening = engine.Listening;

fn start(shared: *engine.Shared, fd: linux.fd_t, listening: *const Listening) void {
    if (!shared.takeConnection()) return engine.refuse(listening.tls != null, fd);
    const thread = std.Thread.spawn(.{ .stack_size = sync.threadStackBytes(shared.config.thread_stack_bytes) }, connectionMain, .{ shared, fd, listening }) catch |err| {
        log.warn("cannot start a connection thread: {t}", .{err});
        shared.releaseConnection();
        return engine.refuse(listening.tls != null, fd);
    };
    thread.detach();
}

fn connectionMain(shared: *engine.Shared, fd: linux.fd_t, listening: *const Listening) void {
    defer shared.releaseConnection();
    var worker: Worker = undefined;
    shared.initWorker(&worker, listening) catch |err| {
        log.warn("no memory for a connection: {t}", .{err});
        return engine.refuse(listening.tls != null, fd);
    };
    defer worker.deinit();
    var drain_deadline_ms: u64 = std.math.maxInt(u64);
    blocking_io.serveConnection(&worker, fd, null, shared.control, &drain_deadline_ms);
}

/// Waits until every connection thread has finished. They close their connections by
/// `shutdown_timeout_ms` after the stop, but a handler is never interrupted: one still running
/// is waited for (the threads use the server's memory, which must outlive them). `run` exits
/// the process if that takes too long (see `Server.run`).
fn waitForConnections(shared: *engine.Shared) void {
    var waited_ms: u64 = 0;
    var warned = false;
    const warn_after_ms = @as(u64, shared.config.shutdown_timeout_ms) + 1000;
    while (shared.control.connections.load(.acquire) > 0) : (waited_ms += 5) {
        if (waited_ms >= warn_after_ms and !warned) {
            log.warn("shutdown: {d} connection threads still busy in their handlers; waiting for them", .{shared.control.connections.load(.acquire)});
            warned = true;
        }
        var none: [0]posix.pollfd = .{};
        _ = posix.poll(&none, 5) catch {};
    }
}
