//! The blocking engine: one thread accepts a connection, serves it to its end with blocking
//! reads and writes, then accepts the next. It is the simplest driver of `Connection` and the
//! reference the other engines are compared with. `poll` bounds every wait by the connection's
//! deadline and watches the server's stop event; SO_SNDTIMEO bounds every write.
const std = @import("std");
const linux = std.os.linux;
const posix = std.posix;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");

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
        serveConnection(worker, fd, control, &drain_deadline_ms);
    }
}

/// At shutdown, answers connections the kernel already accepted, so requests they sent are
/// not reset with the listener.
fn drainBacklog(worker: *Worker, listener: socket.Listener, control: *engine.Control, drain_deadline_ms: *u64) void {
    for (0..worker.config.backlog) |_| {
        const fd = socket.accept(listener.fd, false) catch return;
        serveConnection(worker, fd, control, drain_deadline_ms);
    }
}

fn pollSleep(control: *engine.Control, ms: i32) void {
    var fds = [_]posix.pollfd{.{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 }};
    _ = posix.poll(&fds, ms) catch {};
}

const SinkContext = struct { fd: linux.fd_t };

fn serveConnection(worker: *Worker, fd: linux.fd_t, control: *engine.Control, drain_deadline_ms: *u64) void {
    defer socket.close(fd);
    socket.setNoDelay(fd);
    setSendTimeout(fd, worker.config.write_timeout_ms);
    worker.updateClock();
    var c: Connection = .init(worker);
    defer c.deinit();
    var sink_context: SinkContext = .{ .fd = fd };
    const sink: Connection.Sink = .{ .context = &sink_context, .writeAll = sinkWriteAll };
    c.sink = &sink;
    for (0..std.math.maxInt(u32)) |_| {
        worker.updateClock();
        if (control.stopRequested() and !worker.draining) {
            worker.draining = true;
            drain_deadline_ms.* = worker.now_ms + control.shutdown_timeout_ms;
        }
        if (worker.draining) {
            // Idle means nothing to read right now, not merely nothing read yet.
            if ((c.phase == .idle and !readableNow(fd)) or c.phase == .websocket) c.drain();
            if (worker.now_ms >= drain_deadline_ms.*) return;
        }
        switch (c.next()) {
            .recv => {
                if (worker.now_ms >= c.deadline()) {
                    c.onTimeout();
                    continue;
                }
                if (!waitReadable(fd, control, worker, c.deadline())) {
                    runWoken(worker);
                    continue;
                }
                const buffer = c.recvBuffer() orelse return;
                const n = socket.recv(fd, buffer) catch |err| switch (err) {
                    error.WouldBlock, error.Interrupted => {
                        c.onWouldBlock();
                        continue;
                    },
                    error.ConnectionLost, error.Unexpected => {
                        c.onError();
                        continue;
                    },
                };
                c.onRecv(n);
            },
            .send => |iovecs| {
                const n = socket.writev(fd, iovecs) catch |err| {
                    onWriteError(&c, err);
                    continue;
                };
                c.onSend(n);
            },
            .send_file => |file| {
                const n = socket.sendfile(fd, file.fd, file.offset, file.len) catch |err| {
                    onWriteError(&c, err);
                    continue;
                };
                if (n == 0) c.onError() else c.onSend(n);
            },
            .shutdown => {
                socket.shutdownWrite(fd);
                c.onShutdown();
            },
            .close => return,
        }
    }
}

fn onWriteError(c: *Connection, err: socket.IoError) void {
    switch (err) {
        error.Interrupted => {},
        // SO_SNDTIMEO expired: the client is not reading.
        error.WouldBlock => c.onError(),
        error.ConnectionLost, error.Unexpected => c.onError(),
    }
}

/// Waits until `fd` is readable (true), or the deadline passes, a stop arrives or WebSocket
/// work is queued for the connection (false).
fn waitReadable(fd: linux.fd_t, control: *engine.Control, worker: *Worker, deadline_ms: u64) bool {
    const wait_ms: i32 = @intCast(@min(deadline_ms -| worker.now_ms, 1000));
    var fds = [_]posix.pollfd{
        .{ .fd = fd, .events = posix.POLL.IN, .revents = 0 },
        .{ .fd = worker.wake_fd, .events = posix.POLL.IN, .revents = 0 },
        .{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 },
    };
    // Once draining, the stop event stays readable; stop watching it.
    const count: usize = if (worker.draining) 2 else 3;
    const ready = posix.poll(fds[0..count], wait_ms) catch return false;
    if (fds[1].revents != 0) worker.clearWake();
    return ready > 0 and fds[0].revents != 0;
}

/// Hands queued WebSocket work to the connection (this engine serves one at a time).
fn runWoken(worker: *Worker) void {
    while (worker.takeWoken()) |session| {
        if (session.connection) |c| c.onWake();
    }
}

fn readableNow(fd: linux.fd_t) bool {
    var fds = [_]posix.pollfd{.{ .fd = fd, .events = posix.POLL.IN, .revents = 0 }};
    const ready = posix.poll(&fds, 0) catch return false;
    return ready > 0;
}

fn setSendTimeout(fd: linux.fd_t, ms: u32) void {
    const timeout: linux.timeval = .{ .sec = @intCast(ms / 1000), .usec = @intCast(@as(u64, ms % 1000) * 1000) };
    _ = linux.setsockopt(fd, linux.SOL.SOCKET, linux.SO.SNDTIMEO, std.mem.asBytes(&timeout), @sizeOf(linux.timeval));
}

/// Connection.Sink: writes everything, resuming after partial writes.
fn sinkWriteAll(context: *anyopaque, iovecs: []const posix.iovec_const) error{ClientGone}!void {
    const sink: *SinkContext = @ptrCast(@alignCast(context));
    var local: [64]posix.iovec_const = undefined;
    var rest = iovecs;
    while (rest.len > 0) {
        const count = @min(rest.len, local.len);
        @memcpy(local[0..count], rest[0..count]);
        rest = rest[count..];
        var index: usize = 0;
        while (index < count) {
            var n = socket.writev(sink.fd, local[index..count]) catch |err| switch (err) {
                error.Interrupted => continue,
                error.WouldBlock, error.ConnectionLost, error.Unexpected => return error.ClientGone,
            };
            while (n > 0 and index < count) {
                if (n >= local[index].len) {
                    n -= local[index].len;
                    index += 1;
                } else {
                    local[index].base += n;
                    local[index].len -= n;
                    n = 0;
                }
            }
            while (index < count and local[index].len == 0) index += 1;
        }
    }
}
