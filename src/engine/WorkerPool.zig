//! The worker-pool engine: an acceptor thread per listener (SO_REUSEPORT) hands accepted
//! connections through a bounded queue to a fixed pool of threads that serve them with
//! blocking I/O (`blocking_io.zig`), one connection at a time each. A full queue blocks the
//! acceptors, so the kernel's accept queue absorbs bursts: back-pressure, not unbounded memory.
//! Connections queued or served count against `connections_max`; beyond it, 503.
//! The queue is a mutex and two futex condition variables (`sync.Queue`).
const std = @import("std");
const posix = std.posix;
const linux = std.os.linux;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const sync = @import("../sync.zig");
const blocking_io = @import("blocking_io.zig");
const Blocking = @import("Blocking.zig");
const Worker = @import("../Worker.zig");

const log = std.log.scoped(.saker);

const WorkerPool = @This();

shared: *engine.Shared,
queue: sync.Queue(linux.fd_t),
storage: []linux.fd_t,
threads: []std.Thread,

/// Starts `config.pool_threads` serving threads.
pub fn start(pool: *WorkerPool, shared: *engine.Shared) !void {
    const config = shared.config;
    const storage = try shared.gpa.alloc(linux.fd_t, config.pool_queue_max);
    errdefer shared.gpa.free(storage);
    const threads = try shared.gpa.alloc(std.Thread, config.pool_threads);
    errdefer shared.gpa.free(threads);
    pool.* = .{ .shared = shared, .queue = .init(storage), .storage = storage, .threads = threads };
    for (threads, 0..) |*thread, i| {
        thread.* = std.Thread.spawn(.{ .stack_size = config.thread_stack_bytes }, serveLoop, .{pool}) catch |err| {
            pool.queue.close();
            for (threads[0..i]) |t| t.join();
            return err;
        };
    }
}

/// Closes the queue, lets the threads serve what is queued, and joins them.
pub fn stop(pool: *WorkerPool) void {
    pool.queue.close();
    for (pool.threads) |thread| thread.join();
    pool.shared.gpa.free(pool.threads);
    pool.shared.gpa.free(pool.storage);
}

fn serveLoop(pool: *WorkerPool) void {
    var worker: Worker = undefined;
    pool.shared.initWorker(&worker) catch |err| {
        log.err("worker pool thread has no memory: {t}", .{err});
        // Keep taking connections so acceptors are not blocked forever; refuse each.
        while (pool.queue.get()) |fd| {
            engine.refuse(fd);
            pool.shared.releaseConnection();
        }
        return;
    };
    defer worker.deinit();
    var drain_deadline_ms: u64 = std.math.maxInt(u64);
    while (pool.queue.get()) |fd| {
        blocking_io.serveConnection(&worker, fd, null, pool.shared.control, &drain_deadline_ms);
        pool.shared.releaseConnection();
    }
}

/// Queues an accepted connection, counted against `connections_max` (queued or served);
/// beyond it, 503. Blocks while the queue is full. False when the pool has stopped (the
/// connection is then refused).
fn hand(pool: *WorkerPool, fd: linux.fd_t) bool {
    if (!pool.shared.takeConnection()) {
        engine.refuse(fd);
        return true;
    }
    pool.queue.put(fd) catch {
        pool.shared.releaseConnection();
        engine.refuse(fd);
        return false;
    };
    return true;
}

/// An acceptor: accepts on `listener` and queues connections until the server stops. The
/// listener stays open (the server closes it).
pub fn accept(pool: *WorkerPool, listener: socket.Listener) void {
    const control = pool.shared.control;
    var next_tick_ms: u64 = 0;
    while (!control.stopRequested()) {
        var fds = [_]posix.pollfd{
            .{ .fd = listener.fd, .events = posix.POLL.IN, .revents = 0 },
            .{ .fd = control.wake_fd, .events = posix.POLL.IN, .revents = 0 },
        };
        // Wakes at least once per tick interval so the handler's tick hook runs when idle.
        _ = posix.poll(&fds, Worker.tick_interval_ms) catch |err| {
            engine.pauseAccepting(control, err);
            continue;
        };
        pool.shared.tick(&next_tick_ms);
        if (fds[1].revents != 0) break;
        if (fds[0].revents == 0) continue;
        const fd = socket.accept(listener.fd, false) catch |err| switch (err) {
            error.WouldBlock, error.Interrupted, error.ConnectionAborted => continue,
            error.SystemResources, error.ListenerClosed, error.Unexpected => {
                engine.pauseAccepting(control, err);
                continue;
            },
        };
        if (!pool.hand(fd)) return;
    }
    // Connections the kernel had completed when the server stopped (see `engine.Door`).
    for (control.takeDoorstep(listener.fd)) |fd| _ = pool.hand(fd);
}
