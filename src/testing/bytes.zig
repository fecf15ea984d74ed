//! Byte-string helpers for tests (`"ab" ** n` no longer exists in Zig 0.17).
const std = @import("std");

/// `text` repeated `count` times, built at compile time.
pub inline fn repeat(comptime text: []const u8, comptime count: usize) *const [text.len * count]u8 {
    comptime {
        @setEvalBranchQuota(count * 10 + 1000);
        var buffer: [text.len * count]u8 = undefined;
        for (0..count) |i| @memcpy(buffer[i * text.len ..][0..text.len], text);
        const final = buffer;
        return &final;
    }
}

test repeat {
    try std.testing.expectEqualStrings("abab", repeat("ab", 2));
    try std.testing.expectEqualStrings("", repeat("x", 0));
}
