//! Serving one connection with blocking socket I/O on the calling thread: what the `blocking`,
//! `thread_per_connection` and `worker_pool` engines do once they have a connection. `poll`
//! bounds every wait by the connection's deadline and watches the server's stop event;
//! SO_SNDTIMEO bounds every write. Handlers run on this thread, so a response can stream
//! (chunked) through the connection's sink while the handler runs.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const posix = std.posix;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");
const driver = @import("driver.zig");
const Here = @import("Here.zig");

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
    var sink_context: SinkContext = .{ .fd = fd, .worker = worker };
    const sink: Connection.Sink = .{ .context = &sink_context, .writeAll = sinkWriteAll, .read = sinkRead };
    c.sink = &sink;
    var io: ThreadIo = .{ .socket_fd = fd, .worker = worker, .control = control, .drain_deadline_ms = drain_deadline_ms };
    while (true) {
        const stop = driver.drive(&io, &c);
        if (worker.here_job != null) {
            // An HTTP/2 stream's handler, run here (it may lend the loop meanwhile). One the
            // session handed over as the connection ended runs too, and finds its client gone.
            if (stop == .close) c.onError();
            const ran = Here.run(worker, fd, false, control);
            io.readable = false; // a lent loop may have read the socket dry
            if (stop == .close or ran == .close) return;
            continue;
        }
        if (stop == .close) return;
        // The connection has a sink, so handlers run on this thread: it never waits for a pool.
        assert(c.next() == .recv);
        io.waitForRecv(&c);
    }
}

/// How a thread with a connection of its own waits, for `driver.drive`: every receive is
/// preceded by a `poll` bounded by the connection's deadline (so a blocking `recv` never
/// outlasts it); writes block, bounded by SO_SNDTIMEO.
const ThreadIo = struct {
    socket_fd: linux.fd_t,
    worker: *Worker,
    control: *engine.Control,
    drain_deadline_ms: *u64,
    file_send: socket.FileSend = .{},
    /// `poll` said the socket is readable; one receive consumes it.
    readable: bool = false,

    pub fn beforeStep(io: *ThreadIo, c: *Connection) ?driver.Stop {
        const worker = io.worker;
        worker.updateClock();
        worker.tick();
        if (io.control.stopRequested() and !worker.draining) {
            @atomicStore(bool, &worker.draining, true, .monotonic); // read by handler threads
            io.drain_deadline_ms.* = worker.now_ms + io.control.shutdown_timeout_ms;
        }
        if (worker.draining) {
            // Idle means nothing to read right now, not merely nothing read yet.
            if (!c.idle() or !readableNow(io.socket_fd)) c.drain();
            if (worker.now_ms >= io.drain_deadline_ms.*) return .close;
        }
        if (worker.here_job != null) return .later; // the caller runs it first
        return null;
    }

    pub fn awaitRecv(io: *ThreadIo, c: *Connection) driver.Await {
        if (io.worker.now_ms >= c.deadline()) return .timed_out;
        return if (io.readable) .ready else .later;
    }

    /// Waits (poll) until the socket is readable, the connection's deadline passes, the
    /// server stops or WebSocket work is queued for the connection.
    fn waitForRecv(io: *ThreadIo, c: *Connection) void {
        if (waitReadable(io.socket_fd, io.control, io.worker, c.deadline())) {
            io.readable = true;
        } else {
            runWoken(io.worker);
        }
    }

    pub fn recv(io: *ThreadIo, buffer: []u8) driver.Result {
        io.readable = false;
        const n = socket.recv(io.socket_fd, buffer) catch |err| return switch (err) {
            error.WouldBlock, error.Interrupted => .would_block,
            error.ConnectionLost, error.Unexpected => .failed,
        };
        return .{ .done = n };
    }

    pub fn awaitSend(_: *ThreadIo, _: *Connection) driver.Await {
        return .ready;
    }

    pub fn writev(io: *ThreadIo, iovecs: []const posix.iovec_const) driver.Result {
        const n = socket.writev(io.socket_fd, iovecs) catch |err| return sendFailed(err);
        return .{ .done = n };
    }

    pub fn sendfile(io: *ThreadIo, file: Connection.File) driver.Result {
        const n = socket.sendfile(io.socket_fd, file.fd, file.offset, file.len) catch |err| return sendFailed(err);
        return .{ .done = n };
    }

    fn sendFailed(err: socket.IoError) driver.Result {
        return switch (err) {
            error.Interrupted => .interrupted,
            // SO_SNDTIMEO expired: the client is not reading.
            error.WouldBlock, error.ConnectionLost, error.Unexpected => .failed,
        };
    }

    pub fn shutdownWrite(io: *ThreadIo) void {
        socket.shutdownWrite(io.socket_fd);
    }

    pub fn fileSend(io: *ThreadIo) ?*socket.FileSend {
        return &io.file_send;
    }

    pub fn fd(io: *ThreadIo) linux.fd_t {
        return io.socket_fd;
    }
};

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
