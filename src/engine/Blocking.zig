//! The blocking engine: one thread accepts a connection, serves it to its end with blocking
//! reads and writes (`blocking_io.zig`), then accepts the next. It is the simplest driver of
//! `Connection` and the reference the other engines are compared with.
const std = @import("std");
const linux = std.os.linux;
const posix = std.posix;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Worker = @import("../Worker.zig");
const blocking_io = @import("blocking_io.zig");

const log = std.log.scoped(.saker);

/// Runs the blocking engine on the calling thread until the server stops.
pub fn run(worker: *Worker, listener: socket.Listener, control: *engine.Control) void {
    defer listener.close();
    // When the stop arrived (worker clock), once it has; bounds the whole shutdown.
    var drain_deadline_ms: u64 = std.math.maxInt(u64);
    defer drainBacklog(worker, listener, control, &drain_deadline_ms);
    while (!control.stopRequested()) {
        var fds = [_]posix.pollfd{
            .{ .fd = listener.fd, .events = posix.POLL.IN, .revents = 0 },
            .{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 },
        };
        _ = posix.poll(&fds, -1) catch |err| {
            log.err("poll: {t}", .{err});
            return;
        };
        if (fds[1].revents != 0) break;
        if (fds[0].revents == 0) continue;
        const fd = socket.accept(listener.fd, false) catch |err| switch (err) {
            error.WouldBlock, error.Interrupted, error.ConnectionAborted => continue,
            error.SystemResources => {
                log.warn("accept: out of file descriptors or memory; pausing accepts for 100 ms", .{});
                pollSleep(control, 100);
                continue;
            },
            error.ListenerClosed, error.Unexpected => return,
        };
        blocking_io.serveConnection(worker, fd, control, &drain_deadline_ms);
    }
}

/// At shutdown, answers connections the kernel already accepted, so requests they sent are
/// not reset with the listener.
fn drainBacklog(worker: *Worker, listener: socket.Listener, control: *engine.Control, drain_deadline_ms: *u64) void {
    for (0..worker.config.backlog) |_| {
        const fd = socket.accept(listener.fd, false) catch return;
        blocking_io.serveConnection(worker, fd, control, drain_deadline_ms);
    }
}

/// Sleeps up to `ms`, waking early when the server stops.
pub fn pollSleep(control: *engine.Control, ms: i32) void {
    var fds = [_]posix.pollfd{.{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 }};
    _ = posix.poll(&fds, ms) catch {};
}
