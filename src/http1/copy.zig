//! Copies of short byte strings (a status line, a response head's field values, a small body)
//! done inline:
//! two overlapping loads and stores of the widest size that fits, instead of a call to
//! `memcpy`, whose call and size dispatch cost more than the copy itself for a dozen bytes.
const std = @import("std");

/// Longest copy done inline; longer ones call `@memcpy`.
pub const inline_max = 64;

/// Copies `src` to `dest[0..src.len]`. For `src.len <= inline_max` every byte is loaded before
/// any is stored, so overlapping ranges are copied correctly too; longer ranges must not
/// overlap. Reads and writes only the bytes of the two ranges.
pub inline fn short(dest: [*]u8, src: []const u8) void {
    const n = src.len;
    if (n >= 16) {
        if (n > inline_max) return @memcpy(dest[0..n], src);
        if (n >= 32) pair(32, dest, src) else pair(16, dest, src);
    } else if (n >= 8) {
        pair(8, dest, src);
    } else if (n >= 4) {
        pair(4, dest, src);
    } else if (n > 0) {
        const first = src[0];
        const middle = src[n / 2];
        const last = src[n - 1];
        dest[0] = first;
        dest[n / 2] = middle;
        dest[n - 1] = last;
    }
}

/// Copies `size <= src.len <= 2 * size` bytes as the first and the last `size` of them.
inline fn pair(comptime size: usize, dest: [*]u8, src: []const u8) void {
    const n = src.len;
    const head: @Vector(size, u8) = src[0..size].*;
    const tail: @Vector(size, u8) = src[n - size ..][0..size].*;
    dest[0..size].* = head;
    dest[n - size ..][0..size].* = tail;
}

test "copy.short: every length up to past the inline limit, bytes around untouched" {
    var source: [inline_max + 9]u8 = undefined;
    for (&source, 0..) |*b, i| b.* = @intCast('A' + i % 26);
    for (0..source.len + 1) |len| {
        var dest: [source.len + 2]u8 = @splat('.');
        short(dest[1..].ptr, source[0..len]);
        try std.testing.expectEqual(@as(u8, '.'), dest[0]);
        try std.testing.expectEqualStrings(source[0..len], dest[1..][0..len]);
        for (dest[1 + len ..]) |b| try std.testing.expectEqual(@as(u8, '.'), b);
    }
}

test "copy.short: overlapping ranges up to the inline limit copy like memmove" {
    for (0..inline_max + 1) |len| {
        for (0..8) |shift| {
            var buffer: [inline_max + 8]u8 = undefined;
            for (&buffer, 0..) |*b, i| b.* = @intCast(i);
            var expected = buffer;
            std.mem.copyForwards(u8, expected[0..len], buffer[shift..][0..len]);
            short(&buffer, buffer[shift..][0..len]);
            try std.testing.expectEqualSlices(u8, &expected, &buffer);

            for (&buffer, 0..) |*b, i| b.* = @intCast(i);
            expected = buffer;
            std.mem.copyBackwards(u8, expected[shift..][0..len], buffer[0..len]);
            short(buffer[shift..].ptr, buffer[0..len]);
            try std.testing.expectEqualSlices(u8, &expected, &buffer);
        }
    }
}
