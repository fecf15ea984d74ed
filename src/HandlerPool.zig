//! A bounded pool of threads that run handlers which may block (a handler declaring
//! `pub const blocking = true`, the requests a handler's `mayBlock` picks, such as router
//! routes flagged `blocking`, or any handler when `Config.handler_threads > 0`), so an event
//! loop never waits for one. The loop hands a connection whose request is complete to the pool
//! through a bounded queue (`handler_queue_max`; full means 503); a pool thread runs `handle`,
//! then puts the connection on its worker's completion list and wakes the loop, which writes
//! the response. A handler that streams (`res.flush()`, `res.writer()` past the send buffer)
//! hands each chunk to the loop the same way and waits until it has been written; a handler
//! that reads its body as it arrives (`req.bodyReader()`) hands each read to the loop too.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const sync = @import("sync.zig");
const Connection = @import("Connection.zig");

const log = std.log.scoped(.saker);

const HandlerPool = @This();

queue: sync.Queue(*Connection),
storage: []*Connection,
threads: []std.Thread,
/// Threads currently running a handler.
busy: std.atomic.Value(u32) = .init(0),
gpa: std.mem.Allocator,

/// Starts `thread_count` threads with `stack_bytes` stacks and a queue of `queue_max`.
pub fn start(pool: *HandlerPool, gpa: std.mem.Allocator, options: struct {
    thread_count: u16,
    queue_max: u32,
    stack_bytes: u32,
}) !void {
    const storage = try gpa.alloc(*Connection, options.queue_max);
    errdefer gpa.free(storage);
    const threads = try gpa.alloc(std.Thread, options.thread_count);
    errdefer gpa.free(threads);
    pool.* = .{ .queue = .init(storage), .storage = storage, .threads = threads, .gpa = gpa };
    for (threads, 0..) |*thread, i| {
        thread.* = std.Thread.spawn(.{ .stack_size = sync.threadStackBytes(options.stack_bytes) }, work, .{pool}) catch |err| {
            pool.queue.close();
            for (threads[0..i]) |t| t.join();
            return err;
        };
    }
}

/// Queues `connection` (its request is complete). Fails when the queue is full or closed.
pub fn submit(pool: *HandlerPool, connection: *Connection) error{Overloaded}!void {
    pool.queue.tryPut(connection) catch return error.Overloaded;
}

/// Stops taking work and waits up to `timeout_ms` for running handlers. Returns false when
/// some handler is still running (its thread is then left to the process exit).
pub fn stop(pool: *HandlerPool, timeout_ms: u32) bool {
    pool.queue.close();
    var waited_ms: u32 = 0;
    while (pool.busy.load(.acquire) > 0 or pool.queue.count() > 0) : (waited_ms += 5) {
        if (waited_ms >= timeout_ms) {
            log.warn("shutdown: {d} handlers still running; not waiting for them", .{pool.busy.load(.acquire)});
            return false;
        }
        var none: [0]std.posix.pollfd = .{};
        _ = std.posix.poll(&none, 5) catch {};
    }
    for (pool.threads) |thread| thread.join();
    pool.gpa.free(pool.threads);
    pool.gpa.free(pool.storage);
    return true;
}

fn work(pool: *HandlerPool) void {
    while (pool.queue.get()) |connection| {
        _ = pool.busy.fetchAdd(1, .acq_rel);
        connection.runHandlerOnPool();
        _ = pool.busy.fetchSub(1, .acq_rel);
    }
}
