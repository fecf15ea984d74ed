//! Engines: the code that waits for sockets and makes the syscalls. Every engine drives the
//! same sans-I/O `Connection`; `Kind` is what `Config.engine` and `--engine` choose from.
const std = @import("std");
const linux = std.os.linux;
const Config = @import("Config.zig");
const Worker = @import("Worker.zig");
const Arena = @import("Arena.zig");
const Connection = @import("Connection.zig");
const SessionPool = @import("websocket/SessionPool.zig");

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
    /// Connections being served by thread-based engines (bounded by `connections_max`).
    connections: std.atomic.Value(u32) = .init(0),
    /// WebSocket sessions for the workers made here, which live shorter than the server (set
    /// up by the server for thread-based engines when the handler declares `WebSocket`).
    sessions: SessionPool = .{},

    /// Sets up a worker for one connection at a time.
    pub fn initWorker(shared: *Shared, worker: *Worker) !void {
        try worker.init(shared.gpa, shared.config, shared.dispatch, .{
            .connections_max = 1,
            .large_buffers_max = 1,
            .budget = shared.budget,
            .session_pool = if (shared.sessions.sessions.len > 0) &shared.sessions else null,
        });
    }

    /// Counts a new connection; false (and nothing counted) at `connections_max`.
    pub fn takeConnection(shared: *Shared) bool {
        const before = shared.connections.fetchAdd(1, .acq_rel);
        if (before < shared.config.connections_max) return true;
        _ = shared.connections.fetchSub(1, .acq_rel);
        return false;
    }

    /// Uncounts a finished connection.
    pub fn releaseConnection(shared: *Shared) void {
        _ = shared.connections.fetchSub(1, .acq_rel);
    }

    /// Calls the handler's tick hook (worker index 0) at most once per
    /// `Worker.tick_interval_ms`; the accept loops of thread-based engines call it whenever
    /// they wake. `next_tick_ms` is the calling loop's own.
    pub fn tick(shared: *const Shared, next_tick_ms: *u64) void {
        const hook = shared.dispatch.tick orelse return;
        var now: linux.timespec = undefined;
        _ = linux.clock_gettime(.MONOTONIC_COARSE, &now);
        const now_ms = @as(u64, @intCast(now.sec)) * 1000 + @as(u64, @intCast(now.nsec)) / std.time.ns_per_ms;
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

/// Tells a connection the server cannot take it (503) and closes it.
pub fn refuse(fd: linux.fd_t) void {
    const response = Connection.overloaded_response;
    _ = socket.writev(fd, &.{.{ .base = response.ptr, .len = response.len }}) catch {};
    socket.close(fd);
}

/// What a server shares with its engine threads: the stop request.
pub const Control = struct {
    /// Set once when the server should stop accepting, finish in-flight requests and return.
    stopping: std.atomic.Value(bool) = .init(false),
    /// An eventfd that becomes readable (and stays so) when `stopping` is set; every engine
    /// thread watches it.
    wake_fd: linux.fd_t,
    /// How long engines may spend finishing in-flight requests after the stop.
    shutdown_timeout_ms: u32,

    /// Creates the eventfd.
    pub fn init(shutdown_timeout_ms: u32) error{SystemResources}!Control {
        const rc = linux.eventfd(0, linux.EFD.CLOEXEC | linux.EFD.NONBLOCK);
        if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
        return .{ .wake_fd = @intCast(rc), .shutdown_timeout_ms = shutdown_timeout_ms };
    }

    /// Closes the eventfd.
    pub fn deinit(control: *Control) void {
        _ = linux.close(control.wake_fd);
    }

    /// Asks every engine thread to stop. Safe from any thread and from a signal handler.
    pub fn stop(control: *Control) void {
        control.stopping.store(true, .release);
        const one: u64 = 1;
        _ = linux.write(control.wake_fd, std.mem.asBytes(&one), @sizeOf(u64));
    }

    /// Whether a stop was requested.
    pub fn stopRequested(control: *const Control) bool {
        return control.stopping.load(.acquire);
    }
};

/// The engines saker offers.
pub const Kind = enum {
    /// One thread: accept a connection, serve it to the end, accept the next.
    blocking,
    /// An accept loop that starts a thread per connection.
    thread_per_connection,
    /// Acceptor threads hand connections to a fixed pool of blocking workers.
    worker_pool,
    /// One thread per worker, each with its own listener and epoll instance.
    epoll,
    /// One thread per worker, each with its own listener and io_uring.
    io_uring,

    /// Parses an engine name as given to `--engine`.
    pub fn parse(name: []const u8) ?Kind {
        return std.meta.stringToEnum(Kind, name);
    }
};

test {
    _ = socket;
}

test "Kind.parse: exactly the five names" {
    try std.testing.expectEqual(Kind.epoll, Kind.parse("epoll").?);
    try std.testing.expectEqual(Kind.thread_per_connection, Kind.parse("thread_per_connection").?);
    try std.testing.expectEqual(@as(?Kind, null), Kind.parse("EPOLL"));
    try std.testing.expectEqual(@as(?Kind, null), Kind.parse("uring"));
}
