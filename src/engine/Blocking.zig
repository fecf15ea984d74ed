//! The blocking engine: one thread accepts a connection, serves it to its end with blocking
//! reads and writes (`blocking_io.zig`), then accepts the next. It is the simplest driver of
//! `Connection` and the reference the other engines are compared with.
const std = @import("std");
const posix = std.posix;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Worker = @import("../Worker.zig");
const blocking_io = @import("blocking_io.zig");

/// Runs the blocking engine on the calling thread until the server stops. The listener
/// stays open (the server closes it).
pub fn run(worker: *Worker, listener: socket.Listener, control: *engine.Control) void {
    // When the stop arrived (worker clock), once it has; bounds the whole shutdown.
    var drain_deadline_ms: u64 = std.math.maxInt(u64);
    while (!control.stopRequested()) {
        const wait = engine.awaitAccept(control, listener.fd);
        worker.updateClock();
        worker.tick();
        switch (wait) {
            .stop => break,
            .idle => continue,
            .accept => {},
        }
        var peer: ?std.Io.net.IpAddress = null;
        const fd = socket.acceptPeer(listener.fd, false, &peer) catch |err| switch (err) {
            error.WouldBlock, error.Interrupted, error.ConnectionAborted => continue,
            error.SystemResources, error.ListenerClosed, error.Unexpected => {
                engine.pauseAccepting(control, err);
                continue;
            },
        };
        blocking_io.serveConnection(worker, fd, peer, control, &drain_deadline_ms);
    }
    // Connections the kernel had completed when the server stopped (taken then, while this
    // thread may have been busy): their requests are answered rather than reset.
    for (control.takeDoorstep(listener.fd)) |fd| {
        blocking_io.serveConnection(worker, fd, null, control, &drain_deadline_ms);
    }
}

/// Sleeps up to `ms`, waking early when the server stops.
pub fn pollSleep(control: *engine.Control, ms: i32) void {
    var fds = [_]posix.pollfd{.{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 }};
    _ = posix.poll(&fds, ms) catch {};
}
