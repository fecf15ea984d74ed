//! Per-request scratch memory: a bump allocator over a fixed region that a busy connection
//! owns, falling back to the heap when a request needs more. `reset` runs after every response
//! batch; it drops the fallback blocks, so a large request never pins memory. Heap use has two
//! bounds: one request may take at most `request_bytes_max` (`Config.arena_request_bytes_max`
//! less the region), and every arena of a server draws on one `Budget`
//! (`Config.overflow_bytes_max`), so the whole server's heap use has a hard bound too.
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
/// Heap bytes the whole server may still take; shared by every arena of the server.
budget: *Budget,
/// Heap bytes one request may take (its fallback blocks, headers included).
request_bytes_max: u64 = std.math.maxInt(u64),
/// Heap bytes taken for the current request (since `beginRequest` or `reset`).
request_fallback_bytes: u64 = 0,
/// Heap allocations made for the current request.
request_fallback_count: u64 = 0,
/// Whether an allocation of the current request was refused for `request_bytes_max`.
request_limit_hit: bool = false,

/// A bound on heap use shared by the arenas of a server (every worker, and its handler
/// threads), with a count of the fallback allocations made against it.
pub const Budget = struct {
    remaining: std.atomic.Value(u64),
    /// Fallback allocations by every arena drawing on this budget since start (a metric).
    fallback_total: std.atomic.Value(u64) = .init(0),

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
    /// The alignment it was allocated with (what `rawFree` must be given).
    alignment: Alignment,
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

/// An allocator for memory a request frees block by block before it ends (a decoder's state
/// and scratch buffers, which a library frees and takes again as it goes): blocks straight
/// from `backing`, each taken from the server's budget and given back when freed, so they
/// count toward `overflow_bytes_max` like the arena's own blocks but, unlike them, are reused
/// as soon as they are freed instead of held to the end of the request. Not counted toward
/// `request_bytes_max`: the caller bounds what it takes. Every block must be freed before the
/// request ends (nothing else will).
pub fn heap(arena: *Arena) Allocator {
    return .{ .ptr = arena, .vtable = &heap_vtable };
}

const heap_vtable: Allocator.VTable = .{
    .alloc = heapAlloc,
    .resize = Allocator.noResize,
    .remap = Allocator.noRemap,
    .free = heapFree,
};

fn heapAlloc(context: *anyopaque, len: usize, alignment: Alignment, ret_addr: usize) ?[*]u8 {
    const arena: *Arena = @ptrCast(@alignCast(context));
    if (!arena.budget.take(len)) return null;
    return arena.backing.rawAlloc(len, alignment, ret_addr) orelse {
        arena.budget.give(len);
        return null;
    };
}

fn heapFree(context: *anyopaque, memory: []u8, alignment: Alignment, ret_addr: usize) void {
    const arena: *Arena = @ptrCast(@alignCast(context));
    arena.backing.rawFree(memory, alignment, ret_addr);
    arena.budget.give(memory.len);
}

/// A snapshot of an arena's counters.
pub const Stats = struct {
    /// Size of the preallocated region (`Config.arena_bytes`).
    region_bytes: usize,
    /// Bytes of the region in use.
    region_used_bytes: usize,
    /// Heap (fallback) allocations made for the current request.
    fallback_count: u64,
    /// Heap bytes taken for the current request.
    fallback_bytes: u64,
    /// Heap bytes one request may take (`Config.arena_request_bytes_max` less the region).
    fallback_bytes_max: u64,
    /// Heap allocations made by every request arena of the server since it started.
    server_fallback_count: u64,
    /// Heap bytes the whole server may still take (`Config.overflow_bytes_max` less what its
    /// requests hold now).
    budget_remaining_bytes: u64,
};

/// The arena's counters now.
pub fn stats(arena: *const Arena) Stats {
    return .{
        .region_bytes = arena.region.len,
        .region_used_bytes = arena.used,
        .fallback_count = arena.request_fallback_count,
        .fallback_bytes = arena.request_fallback_bytes,
        .fallback_bytes_max = arena.request_bytes_max,
        .server_fallback_count = arena.budget.fallback_total.load(.monotonic),
        .budget_remaining_bytes = arena.budget.remaining.load(.monotonic),
    };
}

/// The arena behind `a`, or null when `a` is another kind of allocator.
pub fn fromAllocator(a: Allocator) ?*Arena {
    if (a.vtable != &vtable) return null;
    return @ptrCast(@alignCast(a.ptr));
}

/// Starts counting for a new request: pipelined requests share an arena until their batch is
/// sent, but each is held to `request_bytes_max` on its own.
pub fn beginRequest(arena: *Arena) void {
    arena.request_fallback_bytes = 0;
    arena.request_fallback_count = 0;
    arena.request_limit_hit = false;
}

/// Frees every fallback block and makes the whole region available again.
pub fn reset(arena: *Arena) void {
    while (arena.overflow) |b| arena.freeNewestBlock(b);
    arena.used = 0;
    arena.beginRequest();
}

/// Frees `block`, the newest fallback block, and gives its bytes back to the budget.
fn freeNewestBlock(arena: *Arena, block: *Block) void {
    assert(arena.overflow == block);
    arena.overflow = block.next;
    const len = block.len;
    const alignment = block.alignment;
    const bytes: [*]u8 = @ptrCast(block);
    arena.backing.rawFree(bytes[0..len], alignment, @returnAddress());
    arena.budget.give(len);
    arena.request_fallback_bytes -|= len;
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
    if (total > arena.request_bytes_max - @min(arena.request_fallback_bytes, arena.request_bytes_max)) {
        arena.request_limit_hit = true;
        return null;
    }
    if (!arena.budget.take(total)) return null;
    const used_alignment = Alignment.max(alignment, block_alignment);
    const bytes = arena.backing.rawAlloc(total, used_alignment, ret_addr) orelse {
        arena.budget.give(total);
        return null;
    };
    const block: *Block = @ptrCast(@alignCast(bytes));
    block.* = .{ .next = arena.overflow, .len = total, .alignment = used_alignment };
    arena.overflow = block;
    arena.request_fallback_bytes += total;
    arena.request_fallback_count += 1;
    _ = arena.budget.fallback_total.fetchAdd(1, .monotonic);
    return bytes + header;
}

/// The newest fallback block when `memory` (allocated with `alignment`) is its whole payload.
fn newestBlockOf(arena: *const Arena, memory: []const u8, alignment: Alignment) ?*Block {
    const block = arena.overflow orelse return null;
    const header = alignment.forward(@sizeOf(Block));
    if (@intFromPtr(block) + header != @intFromPtr(memory.ptr)) return null;
    if (block.len != header + memory.len) return null;
    return block;
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
    _ = ret_addr;
    const arena: *Arena = @ptrCast(@alignCast(context));
    // Give back the newest region allocation or the newest heap block (a buffer that grew
    // and was replaced); everything else waits for `reset`.
    if (arena.inRegion(memory)) {
        const start = @intFromPtr(memory.ptr) - @intFromPtr(arena.region.ptr);
        if (start + memory.len == arena.used) arena.used = start;
    } else if (arena.newestBlockOf(memory, alignment)) |block| {
        arena.freeNewestBlock(block);
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
    try std.testing.expectEqual(@as(u64, 1), arena.request_fallback_count);

    const counters = fromAllocator(a).?.stats();
    try std.testing.expectEqual(@as(u64, 1), counters.fallback_count);
    try std.testing.expect(counters.fallback_bytes > 1000);
    try std.testing.expectEqual(@as(u64, 1), counters.server_fallback_count);
    try std.testing.expectEqual(@as(usize, 256), counters.region_bytes);
    try std.testing.expect(counters.budget_remaining_bytes < 4096 - 1000);
    try std.testing.expectEqual(@as(?*Arena, null), fromAllocator(std.testing.allocator));

    arena.reset();
    try std.testing.expectEqual(@as(u64, 4096), budget.remaining.load(.monotonic));
    try std.testing.expectEqual(@as(usize, 0), arena.used);
    // Per request: reset; for the server: kept.
    try std.testing.expectEqual(@as(u64, 0), arena.stats().fallback_count);
    try std.testing.expectEqual(@as(u64, 0), arena.stats().fallback_bytes);
    try std.testing.expectEqual(@as(u64, 1), arena.stats().server_fallback_count);
}

test "Arena: one request is held to request_bytes_max; the next starts afresh" {
    var region: [64]u8 = undefined;
    var budget: Budget = .init(1 << 20);
    var arena: Arena = .init(&region, std.testing.allocator, &budget);
    defer arena.reset();
    arena.request_bytes_max = 4096;
    const a = arena.allocator();
    _ = try a.alloc(u8, 3000);
    try std.testing.expect(!arena.request_limit_hit);
    try std.testing.expectError(error.OutOfMemory, a.alloc(u8, 2000));
    try std.testing.expect(arena.request_limit_hit);
    // The server's budget is untouched by the refusal and still has plenty.
    try std.testing.expect(budget.remaining.load(.monotonic) > (1 << 20) - 4096);
    // A pipelined request in the same batch gets its own allowance.
    arena.beginRequest();
    try std.testing.expect(!arena.request_limit_hit);
    _ = try a.alloc(u8, 2000);
    try std.testing.expectEqual(@as(u64, 1), arena.stats().fallback_count);
    try std.testing.expectEqual(@as(u64, 2), arena.stats().server_fallback_count);
}

test "Arena.heap: blocks from the budget, given back as each is freed" {
    var region: [64]u8 = undefined;
    var budget: Budget = .init(10_000);
    var arena: Arena = .init(&region, std.testing.allocator, &budget);
    defer arena.reset();
    const heap_allocator = arena.heap();
    const a = try heap_allocator.alloc(u8, 6000);
    try std.testing.expectEqual(4000, budget.remaining.load(.monotonic));
    try std.testing.expectError(error.OutOfMemory, heap_allocator.alloc(u8, 4001));
    const b = try heap_allocator.alloc(u8, 4000);
    heap_allocator.free(a);
    try std.testing.expectEqual(6000, budget.remaining.load(.monotonic));
    heap_allocator.free(b);
    try std.testing.expectEqual(10_000, budget.remaining.load(.monotonic));
    // The arena's own counts are untouched.
    try std.testing.expectEqual(0, arena.stats().fallback_count);
}

test "Arena: freeing the newest heap block gives it back at once" {
    var region: [64]u8 = undefined;
    var budget: Budget = .init(1 << 20);
    var arena: Arena = .init(&region, std.testing.allocator, &budget);
    defer arena.reset();
    const a = arena.allocator();
    const first = try a.alloc(u8, 1000);
    const taken = (1 << 20) - budget.remaining.load(.monotonic);
    const second = try a.alignedAlloc(u8, .@"64", 5000);
    try std.testing.expectEqual(@as(usize, 0), @intFromPtr(second.ptr) % 64);
    a.free(first); // not the newest: kept until reset
    a.free(second);
    try std.testing.expectEqual(taken, (1 << 20) - budget.remaining.load(.monotonic));
    try std.testing.expectEqual(taken, arena.stats().fallback_bytes);
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
