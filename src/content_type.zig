//! Reading a `Content-Type` value (RFC 9110 §8.3.1): the media type and its parameters,
//! without allocating. `type/subtype` compares case-insensitively; parameter values may be
//! tokens or quoted strings.
const std = @import("std");

/// The media type without parameters ("text/html" of "text/html; charset=utf-8"), trimmed.
pub fn essence(value: []const u8) []const u8 {
    const end = std.mem.findScalar(u8, value, ';') orelse value.len;
    return std.mem.trim(u8, value[0..end], " \t");
}

/// Whether the media type of `value` is `media_type` (ASCII case-insensitive).
pub fn is(value: []const u8, media_type: []const u8) bool {
    return std.ascii.eqlIgnoreCase(essence(value), media_type);
}

/// Whether `value` names JSON: `application/json` or any `+json` subtype (RFC 6839 §3.1).
pub fn isJson(value: []const u8) bool {
    const media_type = essence(value);
    if (std.ascii.eqlIgnoreCase(media_type, "application/json")) return true;
    return media_type.len > 5 and std.ascii.eqlIgnoreCase(media_type[media_type.len - 5 ..], "+json");
}

/// The value of parameter `name` (case-insensitive), without quotes, or null. A quoted value
/// is returned as it appears between the quotes (quoted-pairs are not unescaped).
pub fn parameter(value: []const u8, name: []const u8) ?[]const u8 {
    var rest = value[(std.mem.findScalar(u8, value, ';') orelse return null) + 1 ..];
    while (rest.len > 0) {
        rest = std.mem.trimStart(u8, rest, " \t");
        const eq = std.mem.findScalar(u8, rest, '=') orelse return null;
        const key = std.mem.trim(u8, rest[0..eq], " \t");
        rest = std.mem.trimStart(u8, rest[eq + 1 ..], " \t");
        var param_value: []const u8 = undefined;
        if (rest.len > 0 and rest[0] == '"') {
            // Find the closing quote, skipping quoted-pairs.
            var i: usize = 1;
            while (i < rest.len and rest[i] != '"') : (i += 1) {
                if (rest[i] == '\\') i += 1;
            }
            if (i >= rest.len) return null; // unterminated
            param_value = rest[1..i];
            rest = rest[i + 1 ..];
            const semicolon = std.mem.findScalar(u8, rest, ';') orelse rest.len;
            rest = rest[@min(semicolon + 1, rest.len)..];
        } else {
            const semicolon = std.mem.findScalar(u8, rest, ';') orelse rest.len;
            param_value = std.mem.trimEnd(u8, rest[0..semicolon], " \t");
            rest = rest[@min(semicolon + 1, rest.len)..];
        }
        if (std.ascii.eqlIgnoreCase(key, name)) return param_value;
    }
    return null;
}

test "content_type: essence and parameters" {
    const value = "Multipart/Form-Data ; charset=utf-8; boundary=\"a b;c\" ;x=y";
    try std.testing.expectEqualStrings("Multipart/Form-Data", essence(value));
    try std.testing.expect(is(value, "multipart/form-data"));
    try std.testing.expect(!is(value, "multipart/mixed"));
    try std.testing.expectEqualStrings("utf-8", parameter(value, "charset").?);
    try std.testing.expectEqualStrings("a b;c", parameter(value, "BOUNDARY").?);
    try std.testing.expectEqualStrings("y", parameter(value, "x").?);
    try std.testing.expectEqual(@as(?[]const u8, null), parameter(value, "missing"));
    try std.testing.expectEqual(@as(?[]const u8, null), parameter("text/plain", "charset"));
    try std.testing.expectEqual(@as(?[]const u8, null), parameter("a/b; q=\"open", "q"));
}

test "content_type: JSON media types" {
    try std.testing.expect(isJson("application/json"));
    try std.testing.expect(isJson("Application/JSON; charset=utf-8"));
    try std.testing.expect(isJson("application/problem+json"));
    try std.testing.expect(!isJson("text/plain"));
    try std.testing.expect(!isJson("+json"));
}
