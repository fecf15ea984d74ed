//! A stream's handler run on the connection's own thread by a thread-based engine
//! (`blocking`, `thread_per_connection`, `worker_pool`), for a protocol that serves several
//! requests on one connection (HTTP/2): the session hands the handler over with
//! `Worker.runHere`, and the engine calls `run` at the top of its loop, where no protocol code
//! is on the stack.
//!
//! The handler runs as it would on a handler pool (the session's `runHandlerOnPool`), with
//! this thread as the pool thread. A handler that only builds its response costs nothing more:
//! its return is handed to the connection here, with no other thread and no system call. Its
//! first streamed chunk or body read, which must wait for the connection's frames to move,
//! lends the connection's loop to a helper thread: the helper drives the connection as an
//! event loop would (sends the chunk as DATA within the client's windows, reads WINDOW_UPDATE,
//! PING, the body's DATA and other streams' requests) and serves the handler's hand-offs, until
//! the handler returns; then it gives the connection back and ends. So a thread is spent only
//! on a handler that streams or pulls, for as long as it does, as a thread-based engine
//! spends one on each connection.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const posix = std.posix;
const socket = @import("socket.zig");
const sync = @import("../sync.zig");
const engine = @import("../engine.zig");
const driver = @import("driver.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");

const log = std.log.scoped(.saker);

const Here = @This();

worker: *Worker,
connection: *Connection,
/// The connection's socket: non-blocking (`worker_pool`), or blocking with SO_SNDTIMEO.
fd: linux.fd_t,
nonblocking: bool,
control: *engine.Control,
/// The thread the loop is lent to, from the handler's first hand-off on.
helper: ?std.Thread = null,
/// The helper ended the connection: the engine closes it.
closed: bool = false,

/// Runs the handler the session handed over (`worker.here_job`) on this thread. `.close`:
/// the connection ended meanwhile.
pub fn run(worker: *Worker, fd: linux.fd_t, nonblocking: bool, control: *engine.Control) driver.Stop {
    const c = worker.here_job.?;
    worker.here_job = null;
    var here: Here = .{ .worker = worker, .connection = c, .fd = fd, .nonblocking = nonblocking, .control = control };
    assert(worker.here == null);
    worker.here = .{ .context = &here, .posted = posted, .returned = returned };
    c.runHandlerOnPool();
    worker.here = null;
    if (here.helper) |thread| {
        // The helper handed the handler's return to the connection before it ended.
        thread.join();
        // The helper took the return with its listing (`Worker.handlerReturned`): nothing is
        // listed now, but the wake event may still count the return's post.
        assert(worker.takeCompletions().rest == null);
        return if (here.closed) .close else .later;
    }
    c.onPoolEvent();
    return .later;
}

/// Handler's thread (this one): a chunk to send or a read to serve. The first lends the loop.
fn posted(context: *anyopaque, c: *Connection) void {
    const here: *Here = @ptrCast(@alignCast(context));
    assert(c == here.connection);
    if (here.helper == null) {
        here.helper = lend(here) catch |err| {
            // Nothing can move the frames: the hand-off fails (the client is gone, as far as
            // the handler can tell), and the connection closes once it returns.
            log.warn("no thread to stream an HTTP/2 response or read its body ({t}); closing the connection", .{err});
            c.onError();
            c.onPoolEvent();
            return;
        };
    }
    here.worker.wakeLoop(c, .posted);
}

fn lend(here: *Here) !std.Thread {
    _ = try here.worker.wakeFd();
    // The helper runs protocol code only, but the thread's static TLS comes out of its stack:
    // sized as the server's other threads are.
    const stack_bytes = sync.threadStackBytes(here.worker.config.thread_stack_bytes);
    return std.Thread.spawn(.{ .stack_size = stack_bytes }, drive, .{here});
}

/// Handler's thread: the handler returned. With the loop lent, the helper hands it over;
/// otherwise `run` does, on this thread.
fn returned(context: *anyopaque, c: *Connection) void {
    const here: *Here = @ptrCast(@alignCast(context));
    if (here.helper != null) return here.worker.wakeLoop(c, .returned);
    c.completionLink().return_taken = true;
}

/// Whether the helper still has the connection: its handler runs, and no other waits to run.
fn lent(here: *const Here) bool {
    return here.connection.handling() and here.worker.here_job == null;
}

/// The helper thread: drives the connection until its handler has returned. Each wait ends
/// a drive (`Io` says `.later`), so a stream that runs for hours never meets the driver's step
/// bound.
fn drive(here: *Here) void {
    const c = here.connection;
    Worker.current = here.worker;
    defer Worker.current = null;
    var io: Io = .{ .here = here };
    while (lent(here)) switch (driver.drive(&io, c)) {
        // The socket is not ready, the handler neither streams nor reads right now (`.wait`),
        // or it returned.
        .later => if (lent(here)) {
            const events = io.want;
            io.want = 0;
            if (io.wait(if (events != 0) here.fd else -1, events, c.deadline()) == .ready) {
                if (events == posix.POLL.IN) io.readable = true else io.writable = true;
            }
        },
        .close => {
            // Its hand-offs fail from here on; its return is still awaited.
            here.closed = true;
            c.onError();
            while (lent(here)) _ = io.wait(-1, 0, std.math.maxInt(u64));
            return;
        },
    };
}

/// How the helper waits, for `driver.drive`: a socket that is not known to be ready ends the
/// drive (`.later`, with what to wait for in `want`); `drive` above then waits with `poll` on
/// the socket, the worker's wake event (what the handler posts) and the server's stop, bounded
/// by the connection's deadline.
const Io = struct {
    here: *Here,
    /// `poll` said so; one receive consumes it (a blocking socket is read only after `poll`).
    readable: bool = false,
    writable: bool = true,
    /// What the drive that ended waits for on the socket (0: nothing, only the handler).
    want: i16 = 0,
    /// The server's stop was seen: its event, readable from then on, is not watched again.
    stop_seen: bool = false,
    /// When the server stopped, the connection's last moment, on the whole shutdown's clock.
    drain_deadline_ms: u64 = std.math.maxInt(u64),

    pub fn beforeStep(io: *Io, c: *Connection) ?driver.Stop {
        const here = io.here;
        here.worker.updateClock();
        if (!lent(here)) return .later;
        if (io.drain_deadline_ms == std.math.maxInt(u64) and here.control.stopRequested()) {
            // What is left of shutdown_timeout_ms since the stop, whichever thread saw it first.
            io.drain_deadline_ms = here.worker.now_ms + here.control.remainingMs();
            c.drain();
        }
        if (here.worker.now_ms >= io.drain_deadline_ms) return .close;
        return null;
    }

    pub fn awaitRecv(io: *Io, c: *Connection) driver.Await {
        if (io.here.worker.now_ms >= c.deadline()) return .timed_out;
        if (io.readable) return .ready;
        io.want = posix.POLL.IN;
        return .later;
    }

    pub fn awaitSend(io: *Io, c: *Connection) driver.Await {
        if (io.writable) return .ready;
        if (io.here.worker.now_ms >= c.deadline()) return .timed_out;
        io.want = posix.POLL.OUT;
        return .later;
    }

    /// What a wait came to.
    const Waited = enum {
        /// The socket is ready.
        ready,
        /// The handler posted something, now handed to the connection.
        woken,
        /// The deadline, the stop, or a bounded wait's end.
        nothing,
    };

    /// Waits for `events` on `socket_fd` (-1: none), what the handler posts, the deadline or
    /// the stop.
    fn wait(io: *Io, socket_fd: linux.fd_t, events: i16, deadline_ms: u64) Waited {
        const here = io.here;
        const worker = here.worker;
        const wait_ms: i32 = @intCast(@min(deadline_ms -| worker.now_ms, 1000));
        var fds = [_]posix.pollfd{
            .{ .fd = socket_fd, .events = events, .revents = 0 },
            .{ .fd = worker.wake_fd, .events = posix.POLL.IN, .revents = 0 },
            .{ .fd = here.control.wake_fd, .events = posix.POLL.IN, .revents = 0 },
        };
        const count: usize = if (io.stop_seen) 2 else 3;
        _ = posix.poll(fds[0..count], wait_ms) catch return .nothing;
        worker.updateClock();
        if (count == 3 and fds[2].revents != 0) io.stop_seen = true;
        if (fds[1].revents != 0) {
            var taken = worker.takeCompletions();
            while (taken.next()) |connection| connection.onPoolEvent();
            return .woken;
        }
        return if (fds[0].revents != 0) .ready else .nothing;
    }

    pub fn recv(io: *Io, buffer: []u8) driver.Result {
        io.readable = false;
        const n = socket.recv(io.here.fd, buffer) catch |err| return driver.fromError(err);
        return .{ .done = n };
    }

    pub fn writev(io: *Io, iovecs: []const posix.iovec_const) driver.Result {
        const n = socket.writev(io.here.fd, iovecs) catch |err| return io.sendFailed(err);
        return .{ .done = n };
    }

    pub fn sendfile(io: *Io, file: Connection.File) driver.Result {
        const n = socket.sendfile(io.here.fd, file.fd, file.offset, file.len) catch |err| return io.sendFailed(err);
        return .{ .done = n };
    }

    fn sendFailed(io: *Io, err: socket.IoError) driver.Result {
        if (err == error.WouldBlock) {
            // A blocking socket says so only when SO_SNDTIMEO expired: the client is not
            // reading.
            if (!io.here.nonblocking) return .failed;
            io.writable = false;
        }
        return driver.fromError(err);
    }

    pub fn shutdownWrite(io: *Io) void {
        socket.shutdownWrite(io.here.fd);
    }

    /// HTTP/2 corks nothing around file bodies (see its `fileFollows`).
    pub fn fileSend(_: *Io) ?*socket.FileSend {
        return null;
    }

    pub fn fd(io: *Io) linux.fd_t {
        return io.here.fd;
    }
};
