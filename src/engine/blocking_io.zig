//! Serving one connection with blocking socket I/O on the calling thread: what the `blocking`,
//! `thread_per_connection` and `worker_pool` engines do once they have a connection. `poll`
//! bounds every wait by the connection's deadline and watches the server's stop event;
//! SO_SNDTIMEO bounds every write. Handlers run on this thread, so a response can stream
//! (chunked) through the connection's sink while the handler runs.
const std = @import("std");
const linux = std.os.linux;
const posix = std.posix;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");

const SinkContext = struct { fd: linux.fd_t, worker: *Worker };

/// Serves `fd` to the end and closes it. `drain_deadline_ms` is shared by the connections a
/// thread serves after the stop, so the whole shutdown stays within `shutdown_timeout_ms`.
/// `peer` is the client's address when the engine has it from accept; otherwise it is asked
/// of the socket (for `Request.peer`).
pub fn serveConnection(worker: *Worker, fd: linux.fd_t, peer: ?std.Io.net.IpAddress, control: *engine.Control, drain_deadline_ms: *u64) void {
    Worker.current = worker;
    defer Worker.current = null;
    defer socket.close(fd);
    socket.setNoDelay(fd);
    setSendTimeout(fd, worker.config.write_timeout_ms);
    worker.updateClock();
    var c: Connection = .init(worker);
    defer c.deinit();
    const known_peer = peer orelse socket.peerName(fd);
    if (known_peer) |*address| c.peer = address;
    var cork: socket.Cork = .{};
    var sink_context: SinkContext = .{ .fd = fd, .worker = worker };
    const sink: Connection.Sink = .{ .context = &sink_context, .writeAll = sinkWriteAll, .read = sinkRead };
    c.sink = &sink;
    for (0..std.math.maxInt(u32)) |_| {
        worker.updateClock();
        worker.tick();
        if (control.stopRequested() and !worker.draining) {
            @atomicStore(bool, &worker.draining, true, .monotonic); // read by handler threads
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
                const file = c.fileFollows();
                cork.beforeHead(fd, if (file) |f| f.len else null, worker.config.cork_file_bytes_max);
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
                cork.afterFile(fd, c.fileFollows() != null);
            },
            .shutdown => {
                socket.shutdownWrite(fd);
                c.onShutdown();
            },
            .close => return,
            .wait => unreachable, // handlers run on this thread (the connection has a sink)
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
    // poll ignores a negative fd: no WebSocket handler, no wake event.
    var fds = [_]posix.pollfd{
        .{ .fd = fd, .events = posix.POLL.IN, .revents = 0 },
        .{ .fd = worker.websocket_wake_fd, .events = posix.POLL.IN, .revents = 0 },
        .{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 },
    };
    // Once draining, the stop event stays readable; stop watching it.
    const count: usize = if (worker.draining) 2 else 3;
    const ready = posix.poll(fds[0..count], wait_ms) catch return false;
    if (fds[1].revents != 0) worker.clearWake();
    return ready > 0 and fds[0].revents != 0;
}

/// Hands queued WebSocket work to the connection (one is served at a time here).
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

/// Connection.Sink, read side: waits (poll) until the socket has bytes or the deadline
/// passes, then receives what is there.
fn sinkRead(context: *anyopaque, buffer: []u8, deadline_ms: u64) error{ ClientGone, Timeout }!usize {
    const source: *SinkContext = @ptrCast(@alignCast(context));
    const worker = source.worker;
    while (true) {
        worker.updateClock();
        if (worker.now_ms >= deadline_ms) return error.Timeout;
        const wait_ms: i32 = @intCast(@min(deadline_ms - worker.now_ms, 1000));
        var fds = [_]posix.pollfd{.{ .fd = source.fd, .events = posix.POLL.IN, .revents = 0 }};
        const ready = posix.poll(&fds, wait_ms) catch return error.ClientGone;
        if (ready == 0) continue;
        const n = socket.recv(source.fd, buffer) catch |err| switch (err) {
            error.WouldBlock, error.Interrupted => continue,
            error.ConnectionLost, error.Unexpected => return error.ClientGone,
        };
        if (n == 0) return error.ClientGone;
        return n;
    }
}

/// Connection.Sink: writes everything, resuming after partial writes.
fn sinkWriteAll(context: *anyopaque, iovecs: []const posix.iovec_const) error{ClientGone}!void {
    const sink: *SinkContext = @ptrCast(@alignCast(context));
    // The socket blocks; SO_SNDTIMEO turns a client that stopped reading into WouldBlock.
    return writeAll(sink.fd, iovecs, null);
}

/// Writes all of `iovecs` to `fd`, resuming after partial writes. On a non-blocking socket,
/// `wait_ms` is how long to wait for room each time the socket is full (null: fail at once,
/// as a blocking socket only reports WouldBlock when its SO_SNDTIMEO expired).
pub fn writeAll(fd: linux.fd_t, iovecs: []const posix.iovec_const, wait_ms: ?u32) error{ClientGone}!void {
    var local: [64]posix.iovec_const = undefined;
    var rest = iovecs;
    while (rest.len > 0) {
        const count = @min(rest.len, local.len);
        @memcpy(local[0..count], rest[0..count]);
        rest = rest[count..];
        var index: usize = 0;
        while (index < count) {
            var n = socket.writev(fd, local[index..count]) catch |err| switch (err) {
                error.Interrupted => continue,
                error.WouldBlock => {
                    const ms = wait_ms orelse return error.ClientGone;
                    if (!waitWritable(fd, ms)) return error.ClientGone;
                    continue;
                },
                error.ConnectionLost, error.Unexpected => return error.ClientGone,
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

/// Waits up to `ms` for room to write; false when none came (or the wait failed).
fn waitWritable(fd: linux.fd_t, ms: u32) bool {
    var fds = [_]posix.pollfd{.{ .fd = fd, .events = posix.POLL.OUT, .revents = 0 }};
    const ready = posix.poll(&fds, @intCast(@min(ms, std.math.maxInt(i32)))) catch return false;
    return ready > 0;
}
