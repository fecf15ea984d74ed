//! SIMD byte scanners for the HTTP/1 request parser. Each finds the first byte of a class in
//! one pass, `vector_len` bytes at a time, with a scalar tail; the parser then checks that the
//! byte found is the delimiter it expected, so finding the end and validating are one pass.
const std = @import("std");

/// Bytes per vector: the target's natural width (32 with AVX2, 16 with SSE2/NEON).
pub const vector_len = std.simd.suggestVectorLength(u8) orelse 16;
const Vector = @Vector(vector_len, u8);
const Mask = @Int(.unsigned, vector_len);

/// Index of the first byte at or after `start` that cannot appear in a request-target
/// (RFC 9112 §3.2: any byte <= 0x20 or DEL; the one expected is the SP that ends it),
/// or null if there is none in `bytes`.
pub fn findTargetEnd(bytes: []const u8, start: usize) ?usize {
    var i = start;
    while (i + vector_len <= bytes.len) : (i += vector_len) {
        const chunk: Vector = bytes[i..][0..vector_len].*;
        const low = chunk <= @as(Vector, @splat(0x20));
        const del = chunk == @as(Vector, @splat(0x7f));
        const mask: Mask = @bitCast(low | del);
        if (mask != 0) return i + @ctz(mask);
    }
    while (i < bytes.len) : (i += 1) {
        if (bytes[i] <= 0x20 or bytes[i] == 0x7f) return i;
    }
    return null;
}

/// Index of the first byte at or after `start` that cannot appear in a field value
/// (RFC 9110 §5.5: CTL other than HTAB, or DEL; the one expected is the CR that ends the
/// line), or null if there is none in `bytes`.
pub fn findValueEnd(bytes: []const u8, start: usize) ?usize {
    var i = start;
    while (i + vector_len <= bytes.len) : (i += vector_len) {
        const chunk: Vector = bytes[i..][0..vector_len].*;
        const ctl = chunk < @as(Vector, @splat(0x20));
        const tab = chunk == @as(Vector, @splat('\t'));
        const del = chunk == @as(Vector, @splat(0x7f));
        const mask: Mask = @as(Mask, @bitCast(ctl)) & ~@as(Mask, @bitCast(tab)) |
            @as(Mask, @bitCast(del));
        if (mask != 0) return i + @ctz(mask);
    }
    while (i < bytes.len) : (i += 1) {
        const c = bytes[i];
        if ((c < 0x20 and c != '\t') or c == 0x7f) return i;
    }
    return null;
}

/// tchar (RFC 9110 §5.6.2): the bytes allowed in a method or field name.
pub const token_table: [256]bool = blk: {
    var table: [256]bool = @splat(false);
    for ("!#$%&'*+-.^_`|~") |c| table[c] = true;
    for ('0'..'9' + 1) |c| table[c] = true;
    for ('a'..'z' + 1) |c| table[c] = true;
    for ('A'..'Z' + 1) |c| table[c] = true;
    break :blk table;
};

/// True when `bytes` is a non-empty token.
pub fn isToken(bytes: []const u8) bool {
    if (bytes.len == 0) return false;
    for (bytes) |c| if (!token_table[c]) return false;
    return true;
}

fn referenceTargetEnd(bytes: []const u8, start: usize) ?usize {
    for (bytes[start..], start..) |c, i| if (c <= 0x20 or c == 0x7f) return i;
    return null;
}

fn referenceValueEnd(bytes: []const u8, start: usize) ?usize {
    for (bytes[start..], start..) |c, i| if ((c < 0x20 and c != '\t') or c == 0x7f) return i;
    return null;
}

test "findTargetEnd: every position and every start agree with a scalar reference" {
    var buf: [3 * vector_len + 5]u8 = undefined;
    for (0..buf.len) |stop| {
        for ([_]u8{ ' ', 0, '\r', 0x7f, 0x1f }) |stop_byte| {
            @memset(&buf, 'a');
            buf[stop] = stop_byte;
            for (0..buf.len) |start| {
                try std.testing.expectEqual(referenceTargetEnd(&buf, start), findTargetEnd(&buf, start));
            }
        }
    }
}

test "findValueEnd: tabs, high bytes and spaces are value bytes" {
    var buf: [2 * vector_len + 3]u8 = undefined;
    for (0..buf.len) |stop| {
        for ([_]u8{ '\r', '\n', 0, 0x7f, 0x01 }) |stop_byte| {
            for (&buf, 0..) |*b, i| b.* = switch (i % 4) {
                0 => '\t',
                1 => 0x80,
                2 => ' ',
                else => 'x',
            };
            buf[stop] = stop_byte;
            for (0..buf.len) |start| {
                try std.testing.expectEqual(referenceValueEnd(&buf, start), findValueEnd(&buf, start));
            }
        }
    }
}

test "isToken" {
    try std.testing.expect(isToken("Content-Type"));
    try std.testing.expect(isToken("x!#$%&'*+-.^_`|~9"));
    try std.testing.expect(!isToken(""));
    try std.testing.expect(!isToken("a b"));
    try std.testing.expect(!isToken("a:b"));
    try std.testing.expect(!isToken("a\"b"));
}
