//! Micro-benchmark of the `worker_pool` engine's hand-off queue under its real pattern: a few
//! producers (the acceptors' pollers) and many consumers (pool threads) that sleep when the
//! queue is empty. It compares `saker.sync.Queue` (a mutex, and sleepers on a stack, each on
//! its own futex word, woken last-in first-out) with `Ring`, a bounded lock-free MPMC ring
//! (Vyukov's sequence numbers) whose consumers sleep on a futex event count. Prints, per
//! scenario, the median of several runs:
//! - throughput: producers put as fast as they can, consumers take and do a little work;
//!   ns per item of wall time;
//! - latency: one producer puts an item every ~50 us (the queue mostly empty, consumers
//!   asleep), the time from put to get; median and 99th percentile.
//! `zig build bench-queue` (or as part of `zig build bench`); ReleaseFast always. The tests
//! at the bottom check both queues once (correctness, never timing).
const std = @import("std");
const saker = @import("saker");
const linux = std.os.linux;

fn futexWait(word: *const std.atomic.Value(u32), expected: u32, timeout_ms: u32) void {
    const timeout: linux.timespec = .{ .sec = @intCast(timeout_ms / 1000), .nsec = @intCast(@as(u64, timeout_ms % 1000) * std.time.ns_per_ms) };
    _ = linux.futex_4arg(&word.raw, .{ .cmd = .WAIT, .private = true }, expected, &timeout);
}

fn futexWake(word: *const std.atomic.Value(u32), count: u32) void {
    _ = linux.futex_3arg(&word.raw, .{ .cmd = .WAKE, .private = true }, count);
}

/// A bounded lock-free multi-producer, multi-consumer ring (D. Vyukov's algorithm): each cell
/// carries a sequence number telling producers and consumers whose turn it is. Sleeping is
/// an event count per direction: a waiter reads the count, announces itself, checks the
/// ring once more and sleeps only if the count is unchanged; the other side bumps the count
/// after every put (take) and makes the wake syscall only when someone announced itself.
pub fn Ring(comptime T: type) type {
    return struct {
        const RingOfT = @This();

        pub const Cell = struct {
            sequence: std.atomic.Value(usize),
            item: T,
        };

        cells: []Cell,
        mask: usize,
        enqueue_pos: std.atomic.Value(usize) align(std.atomic.cache_line) = .init(0),
        dequeue_pos: std.atomic.Value(usize) align(std.atomic.cache_line) = .init(0),
        items_event: std.atomic.Value(u32) align(std.atomic.cache_line) = .init(0),
        sleeping_consumers: std.atomic.Value(u32) = .init(0),
        space_event: std.atomic.Value(u32) align(std.atomic.cache_line) = .init(0),
        sleeping_producers: std.atomic.Value(u32) = .init(0),
        closed: std.atomic.Value(bool) = .init(false),

        /// A ring over `cells` (a power of two of them).
        pub fn init(cells: []Cell) RingOfT {
            std.debug.assert(std.math.isPowerOfTwo(cells.len));
            for (cells, 0..) |*cell, i| cell.sequence = .init(i);
            return .{ .cells = cells, .mask = cells.len - 1 };
        }

        fn tryPut(ring: *RingOfT, item: T) bool {
            var pos = ring.enqueue_pos.load(.monotonic);
            while (true) {
                const cell = &ring.cells[pos & ring.mask];
                const sequence = cell.sequence.load(.acquire);
                const difference = @as(isize, @bitCast(sequence -% pos));
                if (difference == 0) {
                    pos = ring.enqueue_pos.cmpxchgWeak(pos, pos +% 1, .monotonic, .monotonic) orelse {
                        cell.item = item;
                        cell.sequence.store(pos +% 1, .release);
                        return true;
                    };
                } else if (difference < 0) {
                    return false; // full
                } else {
                    pos = ring.enqueue_pos.load(.monotonic);
                }
            }
        }

        fn tryGet(ring: *RingOfT) ?T {
            var pos = ring.dequeue_pos.load(.monotonic);
            while (true) {
                const cell = &ring.cells[pos & ring.mask];
                const sequence = cell.sequence.load(.acquire);
                const difference = @as(isize, @bitCast(sequence -% (pos +% 1)));
                if (difference == 0) {
                    pos = ring.dequeue_pos.cmpxchgWeak(pos, pos +% 1, .monotonic, .monotonic) orelse {
                        const item = cell.item;
                        cell.sequence.store(pos +% ring.mask +% 1, .release);
                        return item;
                    };
                } else if (difference < 0) {
                    return null; // empty
                } else {
                    pos = ring.dequeue_pos.load(.monotonic);
                }
            }
        }

        /// Adds `item`, sleeping while the ring is full. Fails once closed.
        pub fn put(ring: *RingOfT, item: T) error{Closed}!void {
            if (ring.closed.load(.acquire)) return error.Closed;
            while (!ring.tryPut(item)) {
                if (ring.closed.load(.acquire)) return error.Closed;
                const key = ring.space_event.load(.seq_cst);
                _ = ring.sleeping_producers.fetchAdd(1, .seq_cst);
                defer _ = ring.sleeping_producers.fetchSub(1, .seq_cst);
                if (ring.tryPut(item)) break;
                futexWait(&ring.space_event, key, 100);
            }
            _ = ring.items_event.fetchAdd(1, .seq_cst);
            if (ring.sleeping_consumers.load(.seq_cst) > 0) futexWake(&ring.items_event, 1);
        }

        /// Takes an item, sleeping while the ring is empty; null once closed and empty.
        pub fn get(ring: *RingOfT) ?T {
            while (true) {
                if (ring.tryGet()) |item| return ring.took(item);
                const key = ring.items_event.load(.seq_cst);
                _ = ring.sleeping_consumers.fetchAdd(1, .seq_cst);
                defer _ = ring.sleeping_consumers.fetchSub(1, .seq_cst);
                if (ring.tryGet()) |item| return ring.took(item);
                if (ring.closed.load(.acquire)) return null;
                futexWait(&ring.items_event, key, 100);
            }
        }

        fn took(ring: *RingOfT, item: T) T {
            _ = ring.space_event.fetchAdd(1, .seq_cst);
            if (ring.sleeping_producers.load(.seq_cst) > 0) futexWake(&ring.space_event, 1);
            return item;
        }

        /// Refuses further puts and wakes every sleeper; gets drain what is left.
        pub fn close(ring: *RingOfT) void {
            ring.closed.store(true, .release);
            _ = ring.items_event.fetchAdd(1, .seq_cst);
            _ = ring.space_event.fetchAdd(1, .seq_cst);
            futexWake(&ring.items_event, std.math.maxInt(i32));
            futexWake(&ring.space_event, std.math.maxInt(i32));
        }
    };
}

/// The two queues behind one interface, each with storage for `capacity` items.
const Kind = enum { mutex_lifo, lock_free_ring };

fn Queue(comptime kind: Kind) type {
    return switch (kind) {
        .mutex_lifo => struct {
            const Self = @This();
            inner: saker.sync.Queue(usize),
            storage: []usize,

            fn create(gpa: std.mem.Allocator, capacity: usize) !*Self {
                const self = try gpa.create(Self);
                errdefer gpa.destroy(self);
                self.storage = try gpa.alloc(usize, capacity);
                self.inner = .init(self.storage);
                return self;
            }
            fn destroy(self: *Self, gpa: std.mem.Allocator) void {
                gpa.free(self.storage);
                gpa.destroy(self);
            }
            fn put(self: *Self, item: usize) !void {
                return self.inner.put(item);
            }
            fn get(self: *Self) ?usize {
                return self.inner.get();
            }
            fn close(self: *Self) void {
                self.inner.close();
            }
        },
        .lock_free_ring => struct {
            const Self = @This();
            inner: Ring(usize),
            cells: []Ring(usize).Cell,

            fn create(gpa: std.mem.Allocator, capacity: usize) !*Self {
                const self = try gpa.create(Self);
                errdefer gpa.destroy(self);
                self.cells = try gpa.alloc(Ring(usize).Cell, try std.math.ceilPowerOfTwo(usize, capacity));
                self.inner = .init(self.cells);
                return self;
            }
            fn destroy(self: *Self, gpa: std.mem.Allocator) void {
                gpa.free(self.cells);
                gpa.destroy(self);
            }
            fn put(self: *Self, item: usize) !void {
                return self.inner.put(item);
            }
            fn get(self: *Self) ?usize {
                return self.inner.get();
            }
            fn close(self: *Self) void {
                self.inner.close();
            }
        },
    };
}

fn nowNs() u64 {
    var ts: linux.timespec = undefined;
    _ = linux.clock_gettime(.MONOTONIC, &ts);
    return @as(u64, @intCast(ts.sec)) * std.time.ns_per_s + @as(u64, @intCast(ts.nsec));
}

/// Stands in for serving a connection: `iterations` rounds of arithmetic.
fn work(iterations: u32) void {
    var x: u64 = 0x9e3779b97f4a7c15;
    for (0..iterations) |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std.mem.doNotOptimizeAway(x);
}

const Scenario = struct {
    producers: u32,
    consumers: u32,
    items: usize,
    /// `work` iterations per item taken.
    work_iterations: u32,
    capacity: usize = 4096,
};

/// Runs `scenario` once; returns the wall time in ns and checks every item arrived once.
fn throughputOnce(comptime kind: Kind, gpa: std.mem.Allocator, scenario: Scenario) !u64 {
    const Q = Queue(kind);
    const queue = try Q.create(gpa, scenario.capacity);
    defer queue.destroy(gpa);
    const Consumer = struct {
        fn run(q: *Q, iterations: u32, sum: *u64, count: *u64) void {
            var local_sum: u64 = 0;
            var local_count: u64 = 0;
            while (q.get()) |item| {
                local_sum +%= item;
                local_count += 1;
                work(iterations);
            }
            sum.* = local_sum;
            count.* = local_count;
        }
    };
    const Producer = struct {
        fn run(q: *Q, first: usize, count: usize) void {
            // The queue closes only after the producers finish.
            for (first..first + count) |item| q.put(item) catch return;
        }
    };
    const sums = try gpa.alloc(u64, scenario.consumers);
    defer gpa.free(sums);
    const counts = try gpa.alloc(u64, scenario.consumers);
    defer gpa.free(counts);
    const consumers = try gpa.alloc(std.Thread, scenario.consumers);
    defer gpa.free(consumers);
    const producers = try gpa.alloc(std.Thread, scenario.producers);
    defer gpa.free(producers);
    for (consumers, sums, counts) |*t, *sum, *count| t.* = try std.Thread.spawn(.{ .stack_size = saker.sync.threadStackBytes(64 * 1024) }, Consumer.run, .{ queue, scenario.work_iterations, sum, count });
    const per_producer = scenario.items / scenario.producers;
    const start = nowNs();
    for (producers, 0..) |*t, i| t.* = try std.Thread.spawn(.{ .stack_size = saker.sync.threadStackBytes(64 * 1024) }, Producer.run, .{ queue, i * per_producer, per_producer });
    for (producers) |t| t.join();
    queue.close();
    for (consumers) |t| t.join();
    const elapsed = nowNs() - start;
    const total = per_producer * scenario.producers;
    var sum: u64 = 0;
    var count: u64 = 0;
    for (sums, counts) |s, c| {
        sum +%= s;
        count += c;
    }
    if (count != total or sum != total * (total - 1) / 2) return error.ItemsLost;
    return elapsed;
}

/// One producer puts an item about every `gap_us` while consumers sleep between items;
/// fills `latencies` (ns from put to get, one per item).
fn latencyOnce(comptime kind: Kind, gpa: std.mem.Allocator, consumers_count: u32, gap_us: u32, latencies: []u64) !void {
    const Q = Queue(kind);
    const queue = try Q.create(gpa, 4096);
    defer queue.destroy(gpa);
    const stamps = try gpa.alloc(u64, latencies.len);
    defer gpa.free(stamps);
    const Consumer = struct {
        fn run(q: *Q, put_at: []const u64, out: []u64) void {
            while (q.get()) |index| out[index] = nowNs() - put_at[index];
        }
    };
    const consumers = try gpa.alloc(std.Thread, consumers_count);
    defer gpa.free(consumers);
    for (consumers) |*t| t.* = try std.Thread.spawn(.{ .stack_size = saker.sync.threadStackBytes(64 * 1024) }, Consumer.run, .{ queue, stamps, latencies });
    const gap: linux.timespec = .{ .sec = 0, .nsec = @as(isize, gap_us) * std.time.ns_per_us };
    for (0..latencies.len) |i| {
        _ = linux.nanosleep(&gap, null);
        stamps[i] = nowNs();
        try queue.put(i);
    }
    queue.close();
    for (consumers) |t| t.join();
}

fn median(values: []u64) u64 {
    std.mem.sort(u64, values, {}, std.sort.asc(u64));
    return values[values.len / 2];
}

const runs = 5;

fn reportThroughput(w: *std.Io.Writer, gpa: std.mem.Allocator, scenario: Scenario) !void {
    try w.print("throughput, {d} producers, {d} consumers, work {d}: ", .{ scenario.producers, scenario.consumers, scenario.work_iterations });
    inline for (.{ Kind.mutex_lifo, Kind.lock_free_ring }) |kind| {
        var ns: [runs]u64 = undefined;
        // Interleaved runs would share the machine's noise; these are back to back per kind.
        for (&ns) |*result| result.* = try throughputOnce(kind, gpa, scenario) / scenario.items;
        try w.print("{t} {d} ns/item  ", .{ kind, median(&ns) });
    }
    try w.print("\n", .{});
    try w.flush();
}

fn reportLatency(w: *std.Io.Writer, gpa: std.mem.Allocator, consumers: u32, items: usize) !void {
    try w.print("latency, 1 producer every 50 us, {d} consumers: ", .{consumers});
    const latencies = try gpa.alloc(u64, items);
    defer gpa.free(latencies);
    inline for (.{ Kind.mutex_lifo, Kind.lock_free_ring }) |kind| {
        var medians: [runs]u64 = undefined;
        var p99s: [runs]u64 = undefined;
        for (&medians, &p99s) |*m, *p| {
            try latencyOnce(kind, gpa, consumers, 50, latencies);
            std.mem.sort(u64, latencies, {}, std.sort.asc(u64));
            m.* = latencies[latencies.len / 2];
            p.* = latencies[latencies.len * 99 / 100];
        }
        try w.print("{t} median {d} ns, p99 {d} ns  ", .{ kind, median(&medians), median(&p99s) });
    }
    try w.print("\n", .{});
    try w.flush();
}

pub fn main(init: std.process.Init) !void {
    const gpa = init.gpa;
    const args = try init.minimal.args.toSlice(init.arena.allocator());
    const items: usize = if (args.len > 1) try std.fmt.parseInt(usize, args[1], 10) else 50_000;
    var out_buffer: [1024]u8 = undefined;
    var out: std.Io.File.Writer = .initStreaming(.stdout(), init.io, &out_buffer);
    const w = &out.interface;
    var calibration: [runs]u64 = undefined;
    for (&calibration) |*c| {
        const start = nowNs();
        for (0..1000) |_| work(1000);
        c.* = (nowNs() - start) / 1000;
    }
    try w.print("queue hand-off, median of {d} runs ({d} items; work 1000 = {d} ns per item)\n", .{ runs, items, median(&calibration) });
    for ([_]Scenario{
        .{ .producers = 2, .consumers = 4, .items = items, .work_iterations = 0 },
        .{ .producers = 2, .consumers = 128, .items = items, .work_iterations = 0 },
        .{ .producers = 2, .consumers = 4, .items = items, .work_iterations = 1000 },
        .{ .producers = 2, .consumers = 128, .items = items, .work_iterations = 1000 },
    }) |scenario| try reportThroughput(w, gpa, scenario);
    try reportLatency(w, gpa, 4, 2000);
    try reportLatency(w, gpa, 128, 2000);
}

test "queue bench: both queues deliver every item once across threads" {
    inline for (.{ Kind.mutex_lifo, Kind.lock_free_ring }) |kind| {
        _ = try throughputOnce(kind, std.testing.allocator, .{ .producers = 2, .consumers = 8, .items = 20_000, .work_iterations = 10, .capacity = 16 });
    }
}

test "queue bench: the ring refuses puts once closed and drains what is left" {
    var cells: [4]Ring(u32).Cell = undefined;
    var ring: Ring(u32) = .init(&cells);
    for (0..4) |i| try ring.put(@intCast(i));
    try std.testing.expect(!ring.tryPut(9)); // full
    ring.close();
    try std.testing.expectError(error.Closed, ring.put(5));
    for (0..4) |i| try std.testing.expectEqual(@as(?u32, @intCast(i)), ring.get());
    try std.testing.expectEqual(@as(?u32, null), ring.get());
}
