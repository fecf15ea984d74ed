//! The allocator the suites' servers run on: `std.testing.allocator`, so that leaks still fail
//! tests, entered by one thread at a time behind a sleeping lock.
//!
//! The testing allocator takes its own per-CPU locks by spinning on `tryLock`, without ever
//! sleeping. An engine with many threads (worker_pool's 128 pool threads, or one thread per
//! connection) that all allocate at once, such as 500 h2c connections each opening an HTTP/2
//! session, then has every thread spinning on the two cores of a loaded CI machine, while the
//! one holding the lock (and capturing a stack trace) waits for a turn on a core. Connections
//! were then opened at about 25 a second and a test ran past its read timeout. Behind this
//! lock the waiting threads sleep on a futex, and the testing allocator always finds its lock
//! free.
const std = @import("std");
const Alignment = std.mem.Alignment;
const saker = @import("saker");

var mutex: saker.sync.Mutex = .{};

pub const allocator: std.mem.Allocator = .{ .ptr = &mutex, .vtable = &vtable };

const vtable: std.mem.Allocator.VTable = .{ .alloc = alloc, .resize = resize, .remap = remap, .free = free };

fn alloc(_: *anyopaque, len: usize, alignment: Alignment, ret_addr: usize) ?[*]u8 {
    mutex.lock();
    defer mutex.unlock();
    return std.testing.allocator.rawAlloc(len, alignment, ret_addr);
}

fn resize(_: *anyopaque, memory: []u8, alignment: Alignment, new_len: usize, ret_addr: usize) bool {
    mutex.lock();
    defer mutex.unlock();
    return std.testing.allocator.rawResize(memory, alignment, new_len, ret_addr);
}

fn remap(_: *anyopaque, memory: []u8, alignment: Alignment, new_len: usize, ret_addr: usize) ?[*]u8 {
    mutex.lock();
    defer mutex.unlock();
    return std.testing.allocator.rawRemap(memory, alignment, new_len, ret_addr);
}

fn free(_: *anyopaque, memory: []u8, alignment: Alignment, ret_addr: usize) void {
    mutex.lock();
    defer mutex.unlock();
    std.testing.allocator.rawFree(memory, alignment, ret_addr);
}

test "the servers' allocator hands out memory from many threads at once, and takes it back" {
    const Hammer = struct {
        fn run() void {
            for (0..200) |i| {
                const block = allocator.alloc(u8, 16 + i % 64) catch @panic("out of memory");
                @memset(block, @truncate(i));
                const grown = allocator.realloc(block, 200) catch @panic("out of memory");
                std.debug.assert(grown[0] == @as(u8, @truncate(i)));
                allocator.free(grown);
            }
        }
    };
    var threads: [16]std.Thread = undefined;
    for (&threads) |*t| t.* = try std.Thread.spawn(.{}, Hammer.run, .{});
    for (threads) |t| t.join();
}
