//! Thread synchronisation on Linux futexes, for engine threads that have no `std.Io`: a
//! mutex, a condition variable and a bounded blocking queue. Waits are bounded by a timeout so
//! a stopping server is never stuck behind them.
const std = @import("std");
const linux = std.os.linux;

fn futexWait(word: *const std.atomic.Value(u32), expected: u32, timeout_ms: ?u32) void {
    var timeout: linux.timespec = undefined;
    if (timeout_ms) |ms| timeout = .{ .sec = @intCast(ms / 1000), .nsec = @intCast(@as(u64, ms % 1000) * std.time.ns_per_ms) };
    // EINTR, EAGAIN (value changed) and ETIMEDOUT all just mean "look again".
    _ = linux.futex_4arg(&word.raw, .{ .cmd = .WAIT, .private = true }, expected, if (timeout_ms != null) &timeout else null);
}

fn futexWake(word: *const std.atomic.Value(u32), count: u32) void {
    _ = linux.futex_3arg(&word.raw, .{ .cmd = .WAKE, .private = true }, count);
}

/// A mutex: 0 unlocked, 1 locked, 2 locked with waiters.
pub const Mutex = struct {
    state: std.atomic.Value(u32) = .init(0),

    /// Takes the lock, sleeping while another thread holds it.
    pub fn lock(mutex: *Mutex) void {
        if (mutex.state.cmpxchgStrong(0, 1, .acquire, .monotonic) == null) return;
        while (mutex.state.swap(2, .acquire) != 0) futexWait(&mutex.state, 2, null);
    }

    /// Releases the lock. Asserts it was held.
    pub fn unlock(mutex: *Mutex) void {
        const previous = mutex.state.swap(0, .release);
        std.debug.assert(previous != 0);
        if (previous == 2) futexWake(&mutex.state, 1);
    }
};

/// A condition variable (a futex sequence number).
pub const Condition = struct {
    sequence: std.atomic.Value(u32) = .init(0),

    /// Releases `mutex`, sleeps until signalled or `timeout_ms` passes, retakes `mutex`.
    /// Spurious wake-ups happen: callers re-check their predicate.
    pub fn wait(condition: *Condition, mutex: *Mutex, timeout_ms: ?u32) void {
        const sequence = condition.sequence.load(.monotonic);
        mutex.unlock();
        futexWait(&condition.sequence, sequence, timeout_ms);
        mutex.lock();
    }

    /// Wakes one waiter.
    pub fn signal(condition: *Condition) void {
        _ = condition.sequence.fetchAdd(1, .release);
        futexWake(&condition.sequence, 1);
    }

    /// Wakes every waiter.
    pub fn broadcast(condition: *Condition) void {
        _ = condition.sequence.fetchAdd(1, .release);
        futexWake(&condition.sequence, std.math.maxInt(i32));
    }
};

/// A bounded multi-producer, multi-consumer FIFO queue over caller-provided storage. A put
/// or get makes the wake syscall only when a thread is waiting on the other side.
pub fn Queue(comptime T: type) type {
    return struct {
        const QueueOfT = @This();

        mutex: Mutex = .{},
        not_empty: Condition = .{},
        not_full: Condition = .{},
        storage: []T,
        head: usize = 0,
        len: usize = 0,
        closed: bool = false,
        /// Threads waiting in `get` / `put` (under `mutex`).
        getters_waiting: u32 = 0,
        putters_waiting: u32 = 0,

        /// A queue holding at most `storage.len` items.
        pub fn init(storage: []T) QueueOfT {
            std.debug.assert(storage.len > 0);
            return .{ .storage = storage };
        }

        /// Adds `item`, waiting while the queue is full (back-pressure). Fails once closed.
        pub fn put(queue: *QueueOfT, item: T) error{Closed}!void {
            queue.mutex.lock();
            while (queue.len == queue.storage.len and !queue.closed) {
                queue.putters_waiting += 1;
                queue.not_full.wait(&queue.mutex, 100);
                queue.putters_waiting -= 1;
            }
            if (queue.closed) {
                queue.mutex.unlock();
                return error.Closed;
            }
            queue.append(item);
        }

        /// Adds `item` if there is room now; fails when full or closed (never waits).
        pub fn tryPut(queue: *QueueOfT, item: T) error{ Full, Closed }!void {
            queue.mutex.lock();
            if (queue.closed or queue.len == queue.storage.len) {
                const full = !queue.closed;
                queue.mutex.unlock();
                return if (full) error.Full else error.Closed;
            }
            queue.append(item);
        }

        /// Adds `item` and releases the mutex, then wakes a getter if one waits. The wake comes
        /// after the unlock so the woken thread does not find the mutex still held.
        fn append(queue: *QueueOfT, item: T) void {
            queue.storage[(queue.head + queue.len) % queue.storage.len] = item;
            queue.len += 1;
            const wake = queue.getters_waiting > 0;
            queue.mutex.unlock();
            if (wake) queue.not_empty.signal();
        }

        /// Items waiting.
        pub fn count(queue: *QueueOfT) usize {
            queue.mutex.lock();
            defer queue.mutex.unlock();
            return queue.len;
        }

        /// Takes the oldest item, waiting while the queue is empty; null once closed and empty.
        pub fn get(queue: *QueueOfT) ?T {
            queue.mutex.lock();
            while (queue.len == 0) {
                if (queue.closed) {
                    queue.mutex.unlock();
                    return null;
                }
                queue.getters_waiting += 1;
                queue.not_empty.wait(&queue.mutex, 100);
                queue.getters_waiting -= 1;
            }
            const item = queue.storage[queue.head];
            queue.head = (queue.head + 1) % queue.storage.len;
            queue.len -= 1;
            const wake = queue.putters_waiting > 0;
            queue.mutex.unlock();
            if (wake) queue.not_full.signal();
            return item;
        }

        /// Refuses further `put`s; `get` drains what is left, then returns null.
        pub fn close(queue: *QueueOfT) void {
            queue.mutex.lock();
            defer queue.mutex.unlock();
            queue.closed = true;
            queue.not_empty.broadcast();
            queue.not_full.broadcast();
        }
    };
}

test "Queue: FIFO across threads, back-pressure, close drains" {
    var storage: [4]u32 = undefined;
    var queue: Queue(u32) = .init(&storage);
    const Consumer = struct {
        fn run(q: *Queue(u32), sum: *u64) void {
            while (q.get()) |item| sum.* += item;
        }
    };
    var sums: [3]u64 = @splat(0);
    var threads: [3]std.Thread = undefined;
    for (&threads, &sums) |*t, *sum| t.* = try std.Thread.spawn(.{}, Consumer.run, .{ &queue, sum });
    for (1..1001) |i| try queue.put(@intCast(i));
    queue.close();
    for (threads) |t| t.join();
    try std.testing.expectEqual(@as(u64, 500500), sums[0] + sums[1] + sums[2]);
    try std.testing.expectError(error.Closed, queue.put(1));
}
