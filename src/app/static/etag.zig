//! Entity tags (RFC 9110 §8.8.3) and the list fields that carry them, `If-Match` and
//! `If-None-Match` (§13.1.1, §13.1.2): strong and weak comparison (§8.8.3.2) against the
//! server's own tag. Members are scanned with quotes respected, since an opaque tag may
//! contain commas.
const std = @import("std");

/// How two tags are compared.
pub const Comparison = enum {
    /// Both tags strong and identical (If-Match, If-Range).
    strong,
    /// Opaque tags identical, either or both may be weak (If-None-Match).
    weak,
};

/// Whether the list `field` (or `*`) matches `ours`, a strong tag with its quotes.
/// A malformed member ends the scan; what matched before it still counts.
pub fn listMatches(field: []const u8, ours: []const u8, comparison: Comparison) bool {
    std.debug.assert(ours.len >= 2 and ours[0] == '"');
    var i: usize = 0;
    while (i < field.len) {
        const c = field[i];
        if (c == ' ' or c == '\t' or c == ',') {
            i += 1;
            continue;
        }
        if (c == '*') return true;
        var weak = false;
        if (c == 'W' and i + 1 < field.len and field[i + 1] == '/') {
            weak = true;
            i += 2;
        }
        if (i >= field.len or field[i] != '"') return false;
        const close = std.mem.findScalarPos(u8, field, i + 1, '"') orelse return false;
        const tag = field[i .. close + 1];
        i = close + 1;
        if (!std.mem.eql(u8, tag, ours)) continue;
        if (comparison == .weak or !weak) return true;
    }
    return false;
}

/// Whether `value` is a strong entity tag equal to `ours` (If-Range, §13.1.5).
pub fn strongEqual(value: []const u8, ours: []const u8) bool {
    return std.mem.eql(u8, std.mem.trim(u8, value, " \t"), ours);
}

/// Whether `value` looks like an entity tag rather than a date (If-Range holds either).
pub fn isTag(value: []const u8) bool {
    const v = std.mem.trim(u8, value, " \t");
    return std.mem.startsWith(u8, v, "\"") or std.mem.startsWith(u8, v, "W/\"");
}

test "etag: RFC 9110 §8.8.3.2 comparison table" {
    // W/"1" vs W/"1": weak match only; W/"1" vs "1": weak match only; "1" vs "1": both.
    try std.testing.expect(listMatches("W/\"1\"", "\"1\"", .weak));
    try std.testing.expect(!listMatches("W/\"1\"", "\"1\"", .strong));
    try std.testing.expect(listMatches("\"1\"", "\"1\"", .strong));
    try std.testing.expect(listMatches("\"1\"", "\"1\"", .weak));
    try std.testing.expect(!listMatches("\"2\"", "\"1\"", .weak));
}

test "etag: lists, star, quoted commas and malformed members" {
    const ours = "\"a,b\"";
    try std.testing.expect(listMatches("\"x\", \"a,b\"", ours, .strong));
    try std.testing.expect(listMatches(" , W/\"y\" ,\t\"a,b\"", ours, .weak));
    try std.testing.expect(listMatches("*", ours, .strong));
    try std.testing.expect(!listMatches("\"a\", \"b\"", ours, .weak));
    try std.testing.expect(!listMatches("a,b", ours, .weak));
    try std.testing.expect(!listMatches("\"a,b", ours, .weak));
    try std.testing.expect(!listMatches("", ours, .weak));
    try std.testing.expect(strongEqual(" \"a,b\" ", ours));
    try std.testing.expect(!strongEqual("W/\"a,b\"", ours));
    try std.testing.expect(isTag("W/\"x\""));
    try std.testing.expect(!isTag("Sun, 06 Nov 1994 08:49:37 GMT"));
}
