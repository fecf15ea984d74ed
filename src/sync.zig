//! Thread synchronisation on Linux futexes, for engine threads that have no `std.Io`: a
//! mutex, a condition variable and a bounded blocking queue. Condition waits are bounded by a
//! timeout, and closing a queue wakes everyone waiting on it, so a stopping server is never
//! stuck behind them.
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

/// A thread sleeping in `Queue.get` or `Queue.put`, on its own futex word (0 while asleep,
/// 1 once woken). It lives on the sleeper's stack.
const Waiter = struct {
    next: ?*Waiter,
    woken: std.atomic.Value(u32) = .init(0),

    /// Releases `mutex`, sleeps until woken, retakes `mutex`. Spurious wake-ups happen.
    fn sleep(waiter: *Waiter, mutex: *Mutex) void {
        mutex.unlock();
        while (waiter.woken.load(.acquire) == 0) futexWait(&waiter.woken, 0, null);
        mutex.lock();
    }
};

/// Pops the most recent waiter off `stack` and marks it woken; call `wake` on the result
/// after releasing the mutex.
fn popWaiter(stack: *?*Waiter) ?*Waiter {
    const waiter = stack.* orelse return null;
    stack.* = waiter.next;
    waiter.woken.store(1, .release);
    return waiter;
}

/// Wakes a popped waiter. Called after the mutex is released, the waiter may already have
/// seen `woken`, left, and reused that stack memory: the wake then reaches whatever sleeps
/// on that address, and every futex sleeper here re-checks its word and sleeps again.
fn wake(waiter: ?*Waiter) void {
    if (waiter) |w| futexWake(&w.woken, 1);
}

/// A bounded multi-producer, multi-consumer FIFO queue over caller-provided storage.
///
/// Sleeping threads wait on a stack, and a put wakes the one that went to sleep last (LIFO):
/// under light load the same few threads, cache-warm, do the work and the rest stay asleep
/// with untouched stacks, rather than every thread taking turns. A put or get makes the wake
/// syscall only when a thread sleeps on the other side, and after releasing the mutex, so the
/// woken thread does not find it held.
pub fn Queue(comptime T: type) type {
    return struct {
        const QueueOfT = @This();

        mutex: Mutex = .{},
        storage: []T,
        head: usize = 0,
        len: usize = 0,
        closed: bool = false,
        /// Threads sleeping in `get` (the queue was empty) and in `put` (it was full).
        getters: ?*Waiter = null,
        putters: ?*Waiter = null,

        /// A queue holding at most `storage.len` items.
        pub fn init(storage: []T) QueueOfT {
            std.debug.assert(storage.len > 0);
            return .{ .storage = storage };
        }

        /// Adds `item`, waiting while the queue is full (back-pressure). Fails once closed.
        pub fn put(queue: *QueueOfT, item: T) error{Closed}!void {
            queue.mutex.lock();
            while (queue.len == queue.storage.len and !queue.closed) {
                var waiter: Waiter = .{ .next = queue.putters };
                queue.putters = &waiter;
                waiter.sleep(&queue.mutex);
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

        /// Adds `item`, releases the mutex, then wakes the latest sleeping getter, if any.
        fn append(queue: *QueueOfT, item: T) void {
            queue.storage[(queue.head + queue.len) % queue.storage.len] = item;
            queue.len += 1;
            const getter = popWaiter(&queue.getters);
            queue.mutex.unlock();
            wake(getter);
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
                var waiter: Waiter = .{ .next = queue.getters };
                queue.getters = &waiter;
                waiter.sleep(&queue.mutex);
            }
            const item = queue.storage[queue.head];
            queue.head = (queue.head + 1) % queue.storage.len;
            queue.len -= 1;
            const putter = popWaiter(&queue.putters);
            queue.mutex.unlock();
            wake(putter);
            return item;
        }

        /// Refuses further `put`s and wakes every sleeper; `get` drains what is left, then
        /// returns null.
        pub fn close(queue: *QueueOfT) void {
            queue.mutex.lock();
            defer queue.mutex.unlock();
            queue.closed = true;
            // Woken under the mutex: a sleeper cannot leave (and free its `Waiter`) before
            // it gets the mutex back, so the stacks stay valid while they are walked.
            while (popWaiter(&queue.getters)) |waiter| wake(waiter);
            while (popWaiter(&queue.putters)) |waiter| wake(waiter);
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

fn sleepingGetters(queue: anytype) usize {
    queue.mutex.lock();
    defer queue.mutex.unlock();
    var n: usize = 0;
    var waiter = queue.getters;
    while (waiter) |w| : (waiter = w.next) n += 1;
    return n;
}

fn sleepMs(ms: u32) void {
    const ts: linux.timespec = .{ .sec = 0, .nsec = @as(isize, ms) * std.time.ns_per_ms };
    _ = linux.nanosleep(&ts, null);
}

test "Queue: the thread that went to sleep last is woken first" {
    var storage: [4]u32 = undefined;
    var queue: Queue(u32) = .init(&storage);
    const Consumer = struct {
        fn run(q: *Queue(u32), got: *std.atomic.Value(u32)) void {
            while (q.get()) |item| got.store(item, .release);
        }
    };
    var got: [3]std.atomic.Value(u32) = @splat(.init(0));
    var threads: [3]std.Thread = undefined;
    var started: usize = 0;
    defer {
        queue.close();
        for (threads[0..started]) |t| t.join();
    }
    for (&threads, &got, 1..) |*t, *g, sleeping| {
        t.* = try std.Thread.spawn(.{}, Consumer.run, .{ &queue, g });
        started += 1;
        // One at a time, so the order they sleep in is known.
        var waited: u32 = 0;
        while (sleepingGetters(&queue) < sleeping) : (waited += 1) {
            if (waited == 5000) return error.ConsumerNeverSlept;
            sleepMs(1);
        }
    }
    try queue.put(7);
    var waited: u32 = 0;
    while (got[2].load(.acquire) == 0) : (waited += 1) {
        if (waited == 5000) return error.LastSleeperNotWoken;
        sleepMs(1);
    }
    try std.testing.expectEqual(@as(u32, 7), got[2].load(.acquire));
    try std.testing.expectEqual(@as(u32, 0), got[0].load(.acquire));
    try std.testing.expectEqual(@as(u32, 0), got[1].load(.acquire));
}

/// The stack size to ask `std.Thread.spawn` for, for `bytes` of usable stack. saker links
/// libc (OpenSSL needs it), so threads are pthreads, and glibc carves the thread-local block
/// out of the requested stack: in builds with std's segfault handler that block holds its
/// 256 KiB alternate signal stack (`std.options.signal_stack_size`), which would leave a
/// small stack nothing, or make the request fail. Pages are touched only as used.
pub fn threadStackBytes(bytes: usize) usize {
    return bytes + (std.options.signal_stack_size orelse 0) + 64 * 1024;
}
