//! Per-request scratch memory: a bump allocator over a fixed region that a busy connection
//! owns, falling back to the heap when a request needs more. `reset` runs after every response
//! batch; it drops the fallback blocks, so a large request never pins memory. Fallback bytes
//! are charged to a budget shared by the worker, so one worker's heap use has a hard bound.
const std = @import("std");
const assert = std.debug.assert;
const Allocator = std.mem.Allocator;
const Alignment = std.mem.Alignment;

const Arena = @This();

/// The preallocated region.
region: []u8,
/// Bytes of `region` in use.
used: usize = 0,
/// Heap blocks taken since the last reset, newest first.
overflow: ?*Block = null,
/// Where fallback blocks come from.
backing: Allocator,
/// Fallback bytes the owning worker may still take; shared by all its arenas.
budget: *Budget,
/// Number of fallback allocations since start (a metric).
fallback_count: u64 = 0,

/// A bound on heap use shared by the arenas of one worker (and its handler threads).
pub const Budget = struct {
    remaining: std.atomic.Value(u64),

    /// A budget of `bytes`.
    pub fn init(bytes: u64) Budget {
        return .{ .remaining = .init(bytes) };
    }

    /// Takes `bytes` from the budget; false (and nothing taken) when there is not enough.
    pub fn take(budget: *Budget, bytes: u64) bool {
        var current = budget.remaining.load(.monotonic);
        while (true) {
            if (current < bytes) return false;
            current = budget.remaining.cmpxchgWeak(current, current - bytes, .monotonic, .monotonic) orelse
                return true;
        }
    }

    /// Returns `bytes` taken earlier.
    pub fn give(budget: *Budget, bytes: u64) void {
        _ = budget.remaining.fetchAdd(bytes, .monotonic);
    }
};

const Block = struct {
    next: ?*Block,
    /// Total bytes of the allocation, this header included.
    len: usize,
};

const block_alignment: Alignment = .of(Block);

/// An arena over `region`, falling back to `backing` within `budget`.
pub fn init(region: []u8, backing: Allocator, budget: *Budget) Arena {
    return .{ .region = region, .backing = backing, .budget = budget };
}

/// The `std.mem.Allocator` interface to this arena.
pub fn allocator(arena: *Arena) Allocator {
    return .{ .ptr = arena, .vtable = &vtable };
}

const vtable: Allocator.VTable = .{
    .alloc = alloc,
    .resize = resize,
    .remap = remap,
    .free = free,
};

/// A snapshot of an arena's counters.
pub const Stats = struct {
    /// Size of the preallocated region.
    region_bytes: usize,
    /// Bytes of the region in use by the current request.
    region_used_bytes: usize,
    /// Fallback (heap) allocations made by this arena since start.
    fallback_count: u64,
    /// Heap bytes the owning worker may still take (shared by all its arenas).
    budget_remaining_bytes: u64,
};

/// The arena's counters now.
pub fn stats(arena: *const Arena) Stats {
    return .{
        .region_bytes = arena.region.len,
        .region_used_bytes = arena.used,
        .fallback_count = arena.fallback_count,
        .budget_remaining_bytes = arena.budget.remaining.load(.monotonic),
    };
}

/// The arena behind `a`, or null when `a` is another kind of allocator.
pub fn fromAllocator(a: Allocator) ?*Arena {
    if (a.vtable != &vtable) return null;
    return @ptrCast(@alignCast(a.ptr));
}

/// Frees every fallback block and makes the whole region available again.
pub fn reset(arena: *Arena) void {
    var block = arena.overflow;
    while (block) |b| {
        block = b.next;
        const len = b.len;
        const bytes: [*]align(block_alignment.toByteUnits()) u8 = @ptrCast(b);
        arena.backing.rawFree(bytes[0..len], block_alignment, @returnAddress());
        arena.budget.give(len);
    }
    arena.overflow = null;
    arena.used = 0;
}

/// Whether `memory` lies in the preallocated region.
fn inRegion(arena: *const Arena, memory: []const u8) bool {
    const start = @intFromPtr(arena.region.ptr);
    const p = @intFromPtr(memory.ptr);
    return p >= start and p + memory.len <= start + arena.region.len;
}

fn alloc(context: *anyopaque, len: usize, alignment: Alignment, ret_addr: usize) ?[*]u8 {
    const arena: *Arena = @ptrCast(@alignCast(context));
    const base = @intFromPtr(arena.region.ptr);
    const start = alignment.forward(base + arena.used) - base;
    if (start + len <= arena.region.len) {
        arena.used = start + len;
        return arena.region.ptr + start;
    }
    return arena.allocOverflow(len, alignment, ret_addr);
}

fn allocOverflow(arena: *Arena, len: usize, alignment: Alignment, ret_addr: usize) ?[*]u8 {
    @branchHint(.unlikely);
    const header = alignment.forward(@sizeOf(Block));
    const total = std.math.add(usize, header, len) catch return null;
    if (!arena.budget.take(total)) return null;
    const block_alignment_used = Alignment.max(alignment, block_alignment);
    const bytes = arena.backing.rawAlloc(total, block_alignment_used, ret_addr) orelse {
        arena.budget.give(total);
        return null;
    };
    const block: *Block = @ptrCast(@alignCast(bytes));
    block.* = .{ .next = arena.overflow, .len = total };
    arena.overflow = block;
    arena.fallback_count += 1;
    return bytes + header;
}

fn resize(context: *anyopaque, memory: []u8, alignment: Alignment, new_len: usize, ret_addr: usize) bool {
    _ = alignment;
    _ = ret_addr;
    const arena: *Arena = @ptrCast(@alignCast(context));
    if (new_len <= memory.len) return true;
    // Only the newest allocation in the region can grow in place.
    if (!arena.inRegion(memory)) return false;
    const start = @intFromPtr(memory.ptr) - @intFromPtr(arena.region.ptr);
    if (start + memory.len != arena.used) return false;
    if (start + new_len > arena.region.len) return false;
    arena.used = start + new_len;
    return true;
}

fn remap(context: *anyopaque, memory: []u8, alignment: Alignment, new_len: usize, ret_addr: usize) ?[*]u8 {
    return if (resize(context, memory, alignment, new_len, ret_addr)) memory.ptr else null;
}

fn free(context: *anyopaque, memory: []u8, alignment: Alignment, ret_addr: usize) void {
    _ = alignment;
    _ = ret_addr;
    const arena: *Arena = @ptrCast(@alignCast(context));
    // Give back the newest region allocation; everything else waits for `reset`.
    if (arena.inRegion(memory)) {
        const start = @intFromPtr(memory.ptr) - @intFromPtr(arena.region.ptr);
        if (start + memory.len == arena.used) arena.used = start;
    }
}

test "Arena: region first, then budgeted fallback, all released by reset" {
    var region: [256]u8 = undefined;
    var budget: Budget = .init(4096);
    var arena: Arena = .init(&region, std.testing.allocator, &budget);
    defer arena.reset();
    const a = arena.allocator();

    const small = try a.alloc(u8, 100);
    try std.testing.expect(arena.inRegion(small));
    const aligned = try a.alloc(u64, 4);
    try std.testing.expect(@intFromPtr(aligned.ptr) % 8 == 0);
    const big = try a.alloc(u8, 1000);
    try std.testing.expect(!arena.inRegion(big));
    try std.testing.expect(budget.remaining.load(.monotonic) < 4096 - 1000);
    try std.testing.expectError(error.OutOfMemory, a.alloc(u8, 5000));
    try std.testing.expectEqual(@as(u64, 1), arena.fallback_count);

    const counters = fromAllocator(a).?.stats();
    try std.testing.expectEqual(@as(u64, 1), counters.fallback_count);
    try std.testing.expectEqual(@as(usize, 256), counters.region_bytes);
    try std.testing.expect(counters.budget_remaining_bytes < 4096 - 1000);
    try std.testing.expectEqual(@as(?*Arena, null), fromAllocator(std.testing.allocator));

    arena.reset();
    try std.testing.expectEqual(@as(u64, 4096), budget.remaining.load(.monotonic));
    try std.testing.expectEqual(@as(usize, 0), arena.used);
}

test "Arena: the newest region allocation grows in place" {
    var region: [1024]u8 = undefined;
    var budget: Budget = .init(0);
    var arena: Arena = .init(&region, std.testing.allocator, &budget);
    const a = arena.allocator();
    var list: std.ArrayList(u8) = .empty;
    try list.appendSlice(a, "hello");
    try list.appendSlice(a, " world");
    try std.testing.expectEqualStrings("hello world", list.items);
    try std.testing.expect(arena.inRegion(list.items));
    arena.reset();
}
