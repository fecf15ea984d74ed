//! The C libraries' allocation callbacks (libzstd's `ZSTD_customMem`, brotli's
//! `brotli_alloc_func`, zlib's `zalloc`), over a Zig allocator, for `Encoder` and `Decoder`.
//! Each block carries its size and source in a header, since the libraries free by address
//! alone. The counts say what a coder holds, and `bytes_max` bounds it: a decoder fed data
//! that asks for a larger window or more tables gets a refusal, never the memory.
//!
//! A `Memory` must not move while a library holds it: the callbacks' `opaque` points here.
const Memory = @This();

const std = @import("std");
const assert = std.debug.assert;

allocator: std.mem.Allocator,
/// When `allocator` refuses, take the block from the C heap instead of failing. For the br
/// encoder: libbrotlienc as Debian (and brotli's own build) ships it calls
/// `exit(EXIT_FAILURE)` when an allocation fails (`BROTLI_ENCODER_EXIT_ON_OOM`), which would
/// end the server. `bytes_max` still refuses first.
c_heap_fallback: bool = false,
/// Most bytes held at once, headers included: a block that would take `bytes` beyond it is
/// refused (`refused_over_max`).
bytes_max: usize = std.math.maxInt(usize),
/// Bytes held now and at most, headers included, from both sources.
bytes: usize = 0,
bytes_peak: usize = 0,
/// Blocks taken from the C heap because `allocator` refused.
fallbacks: usize = 0,
/// An allocation failed during the current call: tells out of memory from misuse (or from
/// corrupt data) when a library reports a failure. The caller clears it before each call.
failed: bool = false,
/// An allocation was refused for `bytes_max` (not by the allocator) since the caller last
/// cleared it.
refused_over_max: bool = false,

/// glibc's malloc alignment, which the libraries assume.
const alignment: std.mem.Alignment = .@"16";
const header_bytes = alignment.toByteUnits();
const Source = enum(usize) { allocator, c_heap };
comptime {
    assert(header_bytes >= 2 * @sizeOf(usize));
}

/// The callback of libzstd and brotli.
pub fn allocSized(context: ?*anyopaque, size: usize) callconv(.c) ?*anyopaque {
    const memory: *Memory = @ptrCast(@alignCast(context.?));
    return memory.alloc(size);
}

/// zlib's `zalloc`.
pub fn allocItems(context: ?*anyopaque, items: c_uint, size: c_uint) callconv(.c) ?*anyopaque {
    const memory: *Memory = @ptrCast(@alignCast(context.?));
    // Two 32-bit factors: the product fits a 64-bit usize.
    comptime assert(@bitSizeOf(usize) >= 2 * @bitSizeOf(c_uint));
    return memory.alloc(@as(usize, items) * size);
}

fn alloc(memory: *Memory, size: usize) ?*anyopaque {
    const total = std.math.add(usize, size, header_bytes) catch {
        memory.failed = true;
        return null;
    };
    if (total > memory.bytes_max - @min(memory.bytes, memory.bytes_max)) {
        memory.failed = true;
        memory.refused_over_max = true;
        return null;
    }
    var source: Source = .allocator;
    const block = memory.allocator.alignedAlloc(u8, alignment, total) catch blk: {
        if (!memory.c_heap_fallback) {
            memory.failed = true;
            return null;
        }
        source = .c_heap;
        memory.fallbacks += 1;
        break :blk std.heap.c_allocator.alignedAlloc(u8, alignment, total) catch {
            memory.failed = true;
            return null;
        };
    };
    const words: *[2]usize = @ptrCast(block.ptr);
    words.* = .{ total, @backingInt(source) };
    memory.bytes += total;
    memory.bytes_peak = @max(memory.bytes_peak, memory.bytes);
    assert(memory.bytes <= memory.bytes_max);
    return block.ptr + header_bytes;
}

/// The free callback of all three libraries.
pub fn free(context: ?*anyopaque, address: ?*anyopaque) callconv(.c) void {
    const memory: *Memory = @ptrCast(@alignCast(context.?));
    const user: [*]align(header_bytes) u8 = @ptrCast(@alignCast(address orelse return));
    const block: [*]align(header_bytes) u8 = @alignCast(user - header_bytes);
    const words: *const [2]usize = @ptrCast(block);
    const total = words[0];
    assert(total >= header_bytes and total <= memory.bytes);
    memory.bytes -= total;
    switch (@as(Source, @fromBackingInt(words[1]))) {
        .allocator => memory.allocator.free(block[0..total]),
        .c_heap => std.heap.c_allocator.free(block[0..total]),
    }
}

test "Memory: counts what it holds, and refuses beyond bytes_max without asking the allocator" {
    var memory: Memory = .{ .allocator = std.testing.failing_allocator, .bytes_max = 1024 };
    try std.testing.expectEqual(null, allocSized(&memory, 100));
    try std.testing.expect(memory.failed and !memory.refused_over_max);
    memory = .{ .allocator = std.testing.allocator, .bytes_max = 2048 };
    const a = allocSized(&memory, 500).?;
    const b = allocItems(&memory, 25, 20).?;
    try std.testing.expectEqual(2 * header_bytes + 1000, memory.bytes);
    try std.testing.expect(!memory.failed);
    try std.testing.expectEqual(null, allocSized(&memory, 2048 - memory.bytes));
    try std.testing.expect(memory.failed and memory.refused_over_max);
    free(&memory, a);
    free(&memory, b);
    free(&memory, null);
    try std.testing.expectEqual(0, memory.bytes);
    try std.testing.expectEqual(2 * header_bytes + 1000, memory.bytes_peak);
}
