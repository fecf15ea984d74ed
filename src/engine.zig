//! Engines: the code that waits for sockets and makes the syscalls. Every engine drives the
//! same sans-I/O `Connection`; `Kind` is what `Config.engine` and `--engine` choose from.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const Config = @import("Config.zig");
const Worker = @import("Worker.zig");
const Arena = @import("Arena.zig");
const Connection = @import("Connection.zig");
const clock = @import("clock.zig");
pub const Listening = @import("Listening.zig");

const log = std.log.scoped(.saker);

pub const socket = @import("engine/socket.zig");
pub const Epoll = @import("engine/Epoll.zig");
pub const IoUring = @import("engine/IoUring.zig");
pub const Blocking = @import("engine/Blocking.zig");
pub const ThreadPerConnection = @import("engine/ThreadPerConnection.zig");
pub const WorkerPool = @import("engine/WorkerPool.zig");

/// What engines that make a worker per thread or per connection need from the server.
pub const Shared = struct {
    gpa: std.mem.Allocator,
    config: *const Config,
    dispatch: Worker.Dispatch,
    budget: *Arena.Budget,
    control: *Control,
    /// Where the workers made here take their WebSocket sessions from: a pool that outlives
    /// them, so a `Conn` a handler kept stays safe to call (set up by the server for
    /// thread-based engines when the handler declares `WebSocket`).
    session_pool: @FieldType(Worker.Options, "session_pool") = null,
    /// Where the workers made here are counted (`Metrics`).
    registry: @FieldType(Worker.Options, "registry") = null,
    /// Sets up a worker for one connection at a time, of a listener whose connections share
    /// `listening`.
    pub fn initWorker(shared: *Shared, worker: *Worker, listening: *const Listening) !void {
        try worker.init(shared.gpa, shared.config, shared.dispatch, .{
            .connections_max = 1,
            .stream_exchanges_max = Config.streamExchanges(shared.config, true),
            .large_buffers_max = 1,
            .budget = shared.budget,
            .session_pool = shared.session_pool,
            .listening = listening,
            .registry = shared.registry,
            // Thread-based engines: handlers run on the connection's thread.
            .runs_here = true,
        });
    }

    /// Counts a new connection; false (and nothing counted) at `connections_max`.
    pub fn takeConnection(shared: *Shared) bool {
        return shared.control.admit();
    }

    /// Uncounts a finished connection.
    pub fn releaseConnection(shared: *Shared) void {
        shared.control.release();
    }

    /// Calls the handler's tick hook (worker index 0) at most once per
    /// `Worker.tick_interval_ms`; the accept loops of thread-based engines call it whenever
    /// they wake. `next_tick_ms` is the calling loop's own.
    pub fn tick(shared: *const Shared, next_tick_ms: *u64) void {
        const hook = shared.dispatch.tick orelse return;
        const now_ms = clock.milliseconds(.MONOTONIC_COARSE);
        if (now_ms < next_tick_ms.*) return;
        next_tick_ms.* = now_ms + Worker.tick_interval_ms;
        hook(shared.dispatch.context, 0);
    }
};

/// A non-blocking eventfd for waking an engine thread.
pub fn eventfd() error{SystemResources}!linux.fd_t {
    const rc = linux.eventfd(0, linux.EFD.CLOEXEC | linux.EFD.NONBLOCK);
    if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
    return @intCast(rc);
}

/// Tells a connection the server cannot take it (503) and closes it, without ever waiting
/// (`answerOverloaded`, then close). `over_tls`: its listener speaks TLS.
pub fn refuse(over_tls: bool, fd: linux.fd_t) void {
    defer socket.close(fd);
    answerOverloaded(over_tls, fd);
}

/// Sends the 503 of `connections_max` and ends the connection's write side, without ever
/// waiting: the 503 is written and the write side shut down (FIN), then what the client
/// already sent is read and dropped, so the close that follows does not answer unread bytes
/// with a reset that could destroy the 503 before the client reads it. Bytes that arrive
/// after that still meet a closed socket (a reset); the client has the 503 and the FIN by
/// then. Every engine refuses this way; the caller closes `fd`. A TLS listener's client
/// cannot read a plaintext 503 before its handshake (`over_tls`): it gets the FIN alone.
pub fn answerOverloaded(over_tls: bool, fd: linux.fd_t) void {
    if (over_tls) return socket.shutdownWrite(fd);
    _ = socket.sendNow(fd, Connection.overloaded_response) catch return;
    socket.shutdownWrite(fd);
    var scratch: [4096]u8 = undefined;
    for (0..refuse_reads_max) |_| {
        const n = socket.recvNow(fd, &scratch) catch return;
        if (n < scratch.len) return;
    }
}

/// Reads `answerOverloaded` makes to empty a refused connection's receive queue (16 KiB): enough for
/// any request head that fits in one go; a client still sending a body gets a reset.
const refuse_reads_max = 4;

/// What a server shares with its engine threads: the stop request, the connection count and
/// the listeners' doors.
pub const Control = struct {
    /// Set once when the server should stop accepting, finish in-flight requests and return;
    /// by then the doors are closed.
    stopping: std.atomic.Value(bool) = .init(false),
    /// Taken by the first `stop`, which closes the doors before it sets `stopping`.
    stop_claimed: std.atomic.Value(bool) = .init(false),
    /// An engine could not go on (it said why in the log): the server stops and reports it.
    failed: std.atomic.Value(bool) = .init(false),
    /// An eventfd that becomes readable (and stays so) when `stopping` is set; every engine
    /// thread watches it.
    wake_fd: linux.fd_t,
    /// How long engines may spend finishing in-flight requests after the stop.
    shutdown_timeout_ms: u32,
    /// Connections open on all engine threads of this process, counted at accept by every
    /// engine (`admit`) and uncounted at close (`release`): `connections_max` holds for the
    /// whole server however SO_REUSEPORT spreads connections over the listeners.
    connections: std.atomic.Value(u32) = .init(0),
    /// `Config.connections_max`.
    connections_max: u32,
    /// How long a drain leaves idle keep-alive connections open, so a request they send
    /// meanwhile is answered (with `Connection: close`) rather than cut off: set by the
    /// stopping thread before `stop` (an upgrade sets it; a plain stop closes them at once).
    /// Read by engines once they see the stop. The epoll and io_uring engines apply it.
    idle_grace_ms: u32 = 0,
    /// Connections refused at `connections_max`, and accepts that failed (for metrics).
    connections_refused: std.atomic.Value(u64) = .init(0),
    accept_errors: std.atomic.Value(u64) = .init(0),
    /// When the stop was requested (monotonic clock); valid once `stopping` is set.
    stopped_at_ms: u64 = 0,
    /// One per listener, while `doors_open` (set up by the server before engines start).
    doors: []Door = &.{},
    doors_open: std.atomic.Value(bool) = .init(false),

    /// Creates the eventfd.
    pub fn init(options: struct { shutdown_timeout_ms: u32, connections_max: u32 }) error{SystemResources}!Control {
        const rc = linux.eventfd(0, linux.EFD.CLOEXEC | linux.EFD.NONBLOCK);
        if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
        return .{
            .wake_fd = @intCast(rc),
            .shutdown_timeout_ms = options.shutdown_timeout_ms,
            .connections_max = options.connections_max,
        };
    }

    /// Counts a newly accepted connection: false (and nothing counted) when `connections_max`
    /// are open, and the engine refuses it. One atomic add per accept. Safe from any thread.
    pub fn admit(control: *Control) bool {
        const before = control.connections.fetchAdd(1, .acq_rel);
        if (before < control.connections_max) return true;
        _ = control.connections.fetchSub(1, .acq_rel);
        _ = control.connections_refused.fetchAdd(1, .monotonic);
        return false;
    }

    /// Uncounts a connection `admit` counted, once it is closed. Safe from any thread.
    pub fn release(control: *Control) void {
        const before = control.connections.fetchSub(1, .acq_rel);
        std.debug.assert(before > 0);
    }

    /// Closes the eventfd.
    pub fn deinit(control: *Control) void {
        _ = linux.close(control.wake_fd);
    }

    /// Hands the listeners' doors to `stop`. Call before the engines start.
    pub fn openDoors(control: *Control, doors: []Door) void {
        control.doors = doors;
        control.doors_open.store(true, .release);
    }

    /// Takes the doors back (the engines have returned); returns them.
    pub fn retireDoors(control: *Control) []Door {
        control.doors_open.store(false, .release);
        const doors = control.doors;
        control.doors = &.{};
        return doors;
    }

    /// Asks every engine thread to stop: closes the doors (so connections made from now on
    /// are refused), then wakes the engines. Safe from any thread and from a signal handler;
    /// only the first call does anything.
    pub fn stop(control: *Control) void {
        if (control.stop_claimed.swap(true, .acq_rel)) return;
        if (control.doors_open.load(.acquire)) {
            for (control.doors) |*door| door.close();
        }
        control.stopped_at_ms = monotonicMs();
        control.stopping.store(true, .release);
        const one: u64 = 1;
        _ = linux.write(control.wake_fd, std.mem.asBytes(&one), @sizeOf(u64));
    }

    /// Stops the server because an engine cannot go on; `serve` then returns an error.
    pub fn fail(control: *Control) void {
        control.failed.store(true, .release);
        control.stop();
    }

    /// Whether a stop was requested.
    pub fn stopRequested(control: *const Control) bool {
        return control.stopping.load(.acquire);
    }

    /// Whether an engine failed.
    pub fn hasFailed(control: *const Control) bool {
        return control.failed.load(.acquire);
    }

    /// The connections the door of `listener_fd` took at the stop: the caller, that
    /// listener's engine, now owns them and answers them. Asserts the stop was requested.
    pub fn takeDoorstep(control: *Control, listener_fd: linux.fd_t) []const linux.fd_t {
        assert(control.stopRequested());
        if (!control.doors_open.load(.acquire)) return &.{};
        for (control.doors) |*door| {
            if (door.listener_fd != listener_fd) continue;
            // Threads that share a socket (inherited ones) share its door: one takes what it
            // holds, the others find it empty.
            const taken = @atomicRmw(usize, &door.taken, .Xchg, 0, .acq_rel);
            return door.doorstep[0..taken];
        }
        return &.{};
    }

    /// What is left of `shutdown_timeout_ms` since the stop (all of it before the stop).
    pub fn remainingMs(control: *const Control) u32 {
        if (!control.stopRequested()) return control.shutdown_timeout_ms;
        const elapsed = monotonicMs() -| control.stopped_at_ms;
        return @intCast(@as(u64, control.shutdown_timeout_ms) -| elapsed);
    }
};

/// A listener's door, closed once by `Control.stop` at the moment of the stop, on the thread
/// that asks for it: the connections the kernel had already completed are taken (up to
/// `doorstep.len`; the listener's engine answers them with `Connection: close`), then the
/// listener is shut down, so later connections are refused at once instead of waiting in the
/// accept queue, whatever the engine thread is busy with. The server closes the listener
/// itself once the engines have returned (never an engine: the stopping thread may still be
/// using its descriptor).
pub const Door = struct {
    listener_fd: linux.fd_t,
    /// Whether to shut the listener down. Not when other processes share it (prefork): that
    /// would stop them accepting too; there this process's engines just stop accepting.
    shut: bool,
    /// Whether the taken connections are made non-blocking (event engines).
    nonblocking: bool,
    /// Room for the connections taken at the stop; `taken` of them are.
    doorstep: []linux.fd_t,
    taken: usize = 0,

    fn close(door: *Door) void {
        // Bounded: each round takes a queued connection or ends the loop.
        for (0..door.doorstep.len * 2) |_| {
            if (door.taken == door.doorstep.len) break;
            const fd = socket.accept(door.listener_fd, door.nonblocking) catch |err| switch (err) {
                error.Interrupted, error.ConnectionAborted => continue,
                error.WouldBlock, error.SystemResources, error.ListenerClosed, error.Unexpected => break,
            };
            door.doorstep[door.taken] = fd;
            door.taken += 1;
        }
        if (door.shut) socket.shutdownListener(door.listener_fd);
    }
};

/// How long accepting pauses after an accept error that may last (out of file descriptors or
/// memory, an unexpected errno), so the error is not a busy loop: existing connections go on
/// being served, and accepting resumes when the error clears.
pub const accept_pause_ms = 100;

/// Logs why accepting pauses for `accept_pause_ms` (once per pause; nothing when the
/// listener was shut because the server is stopping).
pub fn logAcceptPause(control: *Control, err: anyerror) void {
    if (err == error.ListenerClosed and control.stop_claimed.load(.acquire)) return;
    _ = control.accept_errors.fetchAdd(1, .monotonic);
    if (err == error.SystemResources) {
        log.warn("accept: out of file descriptors or memory; pausing accepts for {d} ms", .{accept_pause_ms});
    } else {
        log.warn("accept: {t}; pausing accepts for {d} ms", .{ err, accept_pause_ms });
    }
}

/// `logAcceptPause`, then sleeps `accept_pause_ms`, waking early when the server stops. For
/// accept loops that wait with `poll`.
pub fn pauseAccepting(control: *Control, err: anyerror) void {
    logAcceptPause(control, err);
    var fds = [_]std.posix.pollfd{.{ .fd = control.wake_fd, .events = std.posix.POLL.IN, .revents = 0 }};
    _ = std.posix.poll(&fds, accept_pause_ms) catch {
        const pause: linux.timespec = .{ .sec = 0, .nsec = accept_pause_ms * std.time.ns_per_ms };
        _ = linux.nanosleep(&pause, null);
    };
}

/// Connections an event loop accepts in one round before other work gets a turn.
pub const accepts_per_round = 64;

/// Accepts up to `accepts_per_round` connections on the non-blocking listener of an event
/// loop (`epoll`, the `worker_pool`'s pollers) and hands each to `loop.onAccept(fd, peer)`.
/// Clears `loop.listener_ready` once the listener is empty; after an error that may last
/// (out of file descriptors, an unexpected errno) it pauses accepting for `accept_pause_ms`
/// rather than spin, while connections go on being served.
pub fn acceptRound(loop: anytype, control: *Control, now_ms: u64) void {
    const listener = loop.listener.?;
    for (0..accepts_per_round) |_| {
        var peer: ?std.Io.net.IpAddress = null;
        const fd = socket.acceptPeer(listener.fd, true, &peer) catch |err| switch (err) {
            error.WouldBlock => {
                loop.listener_ready = false;
                return;
            },
            error.Interrupted, error.ConnectionAborted => continue,
            error.SystemResources, error.ListenerClosed, error.Unexpected => {
                logAcceptPause(control, err);
                loop.accept_paused_until_ms = now_ms + accept_pause_ms;
                return;
            },
        };
        loop.onAccept(fd, peer);
    }
}

/// What `awaitAccept` came to.
pub const AcceptWait = enum { accept, stop, idle };

/// For accept loops that block (`blocking`, `thread_per_connection`): waits until
/// `listener_fd` has a connection or the server stops, at most `Worker.tick_interval_ms`, so
/// the caller can run the handler's tick hook when idle.
pub fn awaitAccept(control: *Control, listener_fd: linux.fd_t) AcceptWait {
    var fds = [_]std.posix.pollfd{
        .{ .fd = listener_fd, .events = std.posix.POLL.IN, .revents = 0 },
        .{ .fd = control.wake_fd, .events = std.posix.POLL.IN, .revents = 0 },
    };
    _ = std.posix.poll(&fds, Worker.tick_interval_ms) catch |err| {
        pauseAccepting(control, err);
        return .idle;
    };
    if (fds[1].revents != 0) return .stop;
    return if (fds[0].revents != 0) .accept else .idle;
}

/// Milliseconds on the monotonic clock.
pub fn monotonicMs() u64 {
    return clock.milliseconds(.MONOTONIC);
}

/// The engines saker offers (defined beside `Config.engine`, which imports no engine).
pub const Kind = Config.Engine;

test {
    _ = socket;
    _ = @import("engine/slot_table.zig");
    _ = @import("engine/driver.zig");
}

/// A loopback client connected to `port` (blocking, with a 5 s receive timeout).
fn testClient(port: u16) !linux.fd_t {
    const fd: linux.fd_t = @intCast(linux.socket(linux.AF.INET, linux.SOCK.STREAM | linux.SOCK.CLOEXEC, 0));
    errdefer _ = linux.close(fd);
    const timeout: linux.timeval = .{ .sec = 5, .usec = 0 };
    _ = linux.setsockopt(fd, linux.SOL.SOCKET, linux.SO.RCVTIMEO, std.mem.asBytes(&timeout), @sizeOf(linux.timeval));
    var address: linux.sockaddr.in = .{ .port = std.mem.nativeToBig(u16, port), .addr = std.mem.nativeToBig(u32, 0x7f000001) };
    if (linux.errno(linux.connect(fd, @ptrCast(&address), @sizeOf(linux.sockaddr.in))) != .SUCCESS) return error.ConnectFailed;
    return fd;
}

/// Reads until the server's FIN; a reset instead fails.
fn readToFin(fd: linux.fd_t, buffer: []u8) ![]u8 {
    var len: usize = 0;
    while (true) {
        const rc = linux.read(fd, buffer[len..].ptr, buffer.len - len);
        switch (linux.errno(rc)) {
            .SUCCESS => if (rc == 0) return buffer[0..len] else {
                len += rc;
            },
            .INTR => {},
            else => |err| {
                std.debug.print("read after {d} bytes: E.{t}\n", .{ len, err });
                return error.NoFin;
            },
        }
    }
}

test "refuse: the 503 arrives whole and ends with a FIN, also when the request was unread; TLS gets the FIN alone" {
    const listener = try socket.listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 4, .nonblocking = false });
    defer listener.close();
    for ([_]bool{ false, true }) |tls| for ([_]bool{ false, true }) |nonblocking| {
        for ([_][]const u8{ "", "GET / HTTP/1.1\r\nHost: a\r\n\r\n" }) |request| {
            const client = try testClient(listener.port);
            defer _ = linux.close(client);
            _ = linux.write(client, request.ptr, request.len);
            const fd = try socket.accept(listener.fd, nonblocking);
            if (request.len > 0) {
                // The request sits unread in the server's receive queue.
                var fds = [_]linux.pollfd{.{ .fd = fd, .events = linux.POLL.IN, .revents = 0 }};
                try std.testing.expectEqual(@as(usize, 1), linux.poll(&fds, 1, 5000));
            }
            const start_ms = monotonicMs();
            refuse(tls, fd); // must not wait for anything, also on a blocking socket
            try std.testing.expect(monotonicMs() - start_ms < 500);
            var buffer: [512]u8 = undefined;
            try std.testing.expectEqualStrings(if (tls) "" else Connection.overloaded_response, try readToFin(client, &buffer));
        }
    };
}

test "Kind.parse: exactly the five names" {
    try std.testing.expectEqual(Kind.epoll, Kind.parse("epoll").?);
    try std.testing.expectEqual(Kind.thread_per_connection, Kind.parse("thread_per_connection").?);
    try std.testing.expectEqual(@as(?Kind, null), Kind.parse("EPOLL"));
    try std.testing.expectEqual(@as(?Kind, null), Kind.parse("uring"));
}
