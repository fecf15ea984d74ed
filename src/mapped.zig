//! Pools reserved from the kernel at start-up and touched only as they are used.
//!
//! `std.mem.Allocator.alloc` fills new memory with `undefined` (0xAA) in safe builds, which
//! writes every page of a pool sized for `connections_max`: a Debug server would hold hundreds
//! of MiB before its first connection. These helpers map pages without writing them, so the
//! resident size grows with the connections actually served, in every build mode.
const std = @import("std");
const assert = std.debug.assert;

const page_alignment: std.mem.Alignment = .fromByteUnits(std.heap.page_size_min);

/// Maps `count` items of `T`, page-aligned and zero-filled by the kernel, without touching them.
pub fn alloc(comptime T: type, count: usize) error{OutOfMemory}![]align(std.heap.page_size_min) T {
    comptime assert(@alignOf(T) <= std.heap.page_size_min and @sizeOf(T) > 0);
    if (count == 0) return &.{};
    const bytes = std.math.mul(usize, @sizeOf(T), count) catch return error.OutOfMemory;
    const memory = std.heap.page_allocator.rawAlloc(bytes, page_alignment, @returnAddress()) orelse
        return error.OutOfMemory;
    const items: [*]align(std.heap.page_size_min) T = @ptrCast(@alignCast(memory));
    return items[0..count];
}

/// Unmaps what `alloc` mapped (any slice of it whole), without writing to it first.
pub fn free(items: anytype) void {
    const bytes = std.mem.sliceAsBytes(items);
    if (bytes.len == 0) return;
    assert(std.mem.isAligned(@intFromPtr(bytes.ptr), std.heap.page_size_min));
    std.heap.page_allocator.rawFree(@constCast(bytes), page_alignment, @returnAddress());
}

test "mapped: pages are zero and usable, empty pools need no mapping" {
    const items = try alloc(u64, 3 * std.heap.page_size_min / 8);
    defer free(items);
    try std.testing.expect(std.mem.isAligned(@intFromPtr(items.ptr), std.heap.page_size_min));
    try std.testing.expectEqual(@as(u64, 0), items[items.len - 1]);
    items[0] = 7;
    items[items.len - 1] = 9;
    try std.testing.expectEqual(@as(u64, 7), items[0]);
    const none = try alloc(u64, 0);
    defer free(none);
    try std.testing.expectEqual(@as(usize, 0), none.len);
}
