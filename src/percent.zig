//! Percent-decoding (RFC 3986 §2.1) of path segments, and of query and form components, where
//! '+' also stands for a space (`application/x-www-form-urlencoded`, WHATWG URL §5.1).
//! Decoding never grows a string, so it can run in place or into a buffer as long as the input.
const std = @import("std");
const assert = std.debug.assert;

/// Why a string could not be decoded.
pub const Error = error{
    /// A '%' not followed by two hex digits.
    InvalidPercentEncoding,
};

/// Which rules apply.
pub const Mode = enum {
    /// Only `%XX` escapes (path segments).
    path,
    /// `%XX` escapes, and '+' for a space (query strings and urlencoded forms).
    form,
};

/// Whether decoding `text` could change it.
pub fn needsDecoding(text: []const u8, mode: Mode) bool {
    return switch (mode) {
        .path => std.mem.findScalar(u8, text, '%') != null,
        .form => std.mem.findAny(u8, text, "%+") != null,
    };
}

/// Decodes `text` into `out` and returns the decoded bytes (a prefix of `out`). `out` may be
/// `text` itself (in-place decoding). Asserts `out.len >= text.len`.
pub fn decode(out: []u8, text: []const u8, mode: Mode) Error![]u8 {
    assert(out.len >= text.len);
    return decodeBounded(out, text, mode);
}

/// `decode` into an `out` that may be shorter than `text`: running out of room can only
/// happen when an escape is invalid (valid escapes shrink the text), so it is that error.
fn decodeBounded(out: []u8, text: []const u8, mode: Mode) Error![]u8 {
    var i: usize = 0;
    var n: usize = 0;
    while (i < text.len) {
        if (n == out.len) return error.InvalidPercentEncoding;
        const c = text[i];
        if (c == '%') {
            if (text.len - i < 3) return error.InvalidPercentEncoding;
            const high = hexValue(text[i + 1]) orelse return error.InvalidPercentEncoding;
            const low = hexValue(text[i + 2]) orelse return error.InvalidPercentEncoding;
            out[n] = high << 4 | low;
            i += 3;
        } else {
            out[n] = if (c == '+' and mode == .form) ' ' else c;
            i += 1;
        }
        n += 1;
    }
    return out[0..n];
}

/// `text` decoded: `text` itself when there is nothing to decode (no copy), else a copy in
/// `arena`.
pub fn decodeAlloc(arena: std.mem.Allocator, text: []const u8, mode: Mode) (Error || std.mem.Allocator.Error)![]const u8 {
    if (!needsDecoding(text, mode)) return text;
    const out = try arena.alloc(u8, try decodedLength(text));
    errdefer arena.free(out);
    const decoded = try decodeBounded(out, text, mode);
    assert(decoded.len == out.len);
    return decoded;
}

/// The length of `text` decoded; fails on an invalid escape (before anything is allocated).
fn decodedLength(text: []const u8) Error!usize {
    var len: usize = 0;
    var i: usize = 0;
    while (std.mem.findScalarPos(u8, text, i, '%')) |p| {
        if (text.len - p < 3 or hexValue(text[p + 1]) == null or hexValue(text[p + 2]) == null)
            return error.InvalidPercentEncoding;
        len += p - i + 1;
        i = p + 3;
    }
    return len + (text.len - i);
}

/// Whether `raw` decodes to exactly `plain`. False when `raw` holds an invalid escape.
pub fn eqlDecoded(raw: []const u8, plain: []const u8, mode: Mode) bool {
    var i: usize = 0;
    var j: usize = 0;
    while (i < raw.len) : (j += 1) {
        if (j == plain.len) return false;
        const c = raw[i];
        const decoded: u8 = if (c == '%') blk: {
            if (raw.len - i < 3) return false;
            const high = hexValue(raw[i + 1]) orelse return false;
            const low = hexValue(raw[i + 2]) orelse return false;
            i += 3;
            break :blk high << 4 | low;
        } else blk: {
            i += 1;
            break :blk if (c == '+' and mode == .form) ' ' else c;
        };
        if (decoded != plain[j]) return false;
    }
    return j == plain.len;
}

fn hexValue(c: u8) ?u8 {
    return switch (c) {
        '0'...'9' => c - '0',
        'a'...'f' => c - 'a' + 10,
        'A'...'F' => c - 'A' + 10,
        else => null,
    };
}

test "percent.decode: escapes, plus, and the two modes" {
    var buffer: [64]u8 = undefined;
    try std.testing.expectEqualStrings("a b+c/é", try decode(&buffer, "a%20b+c%2F%C3%A9", .path));
    try std.testing.expectEqualStrings("a b c/é", try decode(&buffer, "a%20b+c%2f%c3%a9", .form));
    try std.testing.expectEqualStrings("", try decode(&buffer, "", .form));
    try std.testing.expectEqualStrings("\x00%", try decode(&buffer, "%00%25", .path));
}

test "percent.decode: invalid escapes are errors" {
    var buffer: [16]u8 = undefined;
    for ([_][]const u8{ "%", "%2", "a%", "%zz", "%2g", "%g2", "abc%4" }) |bad| {
        try std.testing.expectError(error.InvalidPercentEncoding, decode(&buffer, bad, .form));
        try std.testing.expect(!eqlDecoded(bad, "x", .form));
    }
}

test "percent.decode: in place" {
    var text = "x%41y+z".*;
    try std.testing.expectEqualStrings("xAy z", try decode(&text, &text, .form));
}

test "percent.decodeAlloc: no copy when nothing is encoded" {
    const plain = "hello";
    try std.testing.expect((try decodeAlloc(std.testing.allocator, plain, .form)).ptr == plain.ptr);
    const decoded = try decodeAlloc(std.testing.allocator, "a%21", .form);
    defer std.testing.allocator.free(decoded);
    try std.testing.expectEqualStrings("a!", decoded);
    for ([_][]const u8{ "abc%", "%%41", "a%zz", "%4" }) |bad| {
        // Rejected before anything is allocated.
        try std.testing.expectError(error.InvalidPercentEncoding, decodeAlloc(std.testing.failing_allocator, bad, .path));
    }
    // '+' is literal in a path.
    const path = "a+b";
    try std.testing.expect((try decodeAlloc(std.testing.allocator, path, .path)).ptr == path.ptr);
}

test "percent.eqlDecoded" {
    try std.testing.expect(eqlDecoded("a%20b", "a b", .path));
    try std.testing.expect(eqlDecoded("a+b", "a b", .form));
    try std.testing.expect(!eqlDecoded("a+b", "a b", .path));
    try std.testing.expect(eqlDecoded("%61", "a", .form));
    try std.testing.expect(!eqlDecoded("ab", "a", .form));
    try std.testing.expect(!eqlDecoded("a", "ab", .form));
    try std.testing.expect(eqlDecoded("", "", .form));
}
