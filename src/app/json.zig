//! Small JSON output helpers for handlers that write JSON by hand.
const std = @import("std");

/// Writes `bytes` as a JSON string (RFC 8259 §7). Valid UTF-8 passes through; `"`, `\` and
/// control characters are escaped; a byte that is not valid UTF-8 becomes U+FFFD, since a
/// JSON string can only hold Unicode text.
pub fn writeString(w: *std.Io.Writer, bytes: []const u8) std.Io.Writer.Error!void {
    try w.writeByte('"');
    var i: usize = 0;
    var plain_start: usize = 0;
    while (i < bytes.len) {
        const c = bytes[i];
        if (c >= 0x20 and c != '"' and c != '\\' and c < 0x80) {
            i += 1;
            continue;
        }
        try w.writeAll(bytes[plain_start..i]);
        if (c >= 0x80) {
            const len = std.unicode.utf8ByteSequenceLength(c) catch 0;
            if (len > 0 and i + len <= bytes.len and std.unicode.utf8ValidateSlice(bytes[i..][0..len])) {
                try w.writeAll(bytes[i..][0..len]);
                i += len;
            } else {
                try w.writeAll("\u{FFFD}");
                i += 1;
            }
        } else {
            switch (c) {
                '"' => try w.writeAll("\\\""),
                '\\' => try w.writeAll("\\\\"),
                '\n' => try w.writeAll("\\n"),
                '\r' => try w.writeAll("\\r"),
                '\t' => try w.writeAll("\\t"),
                else => try w.print("\\u{x:0>4}", .{c}),
            }
            i += 1;
        }
        plain_start = i;
    }
    try w.writeAll(bytes[plain_start..]);
    try w.writeByte('"');
}

test writeString {
    var buffer: [128]u8 = undefined;
    var w: std.Io.Writer = .fixed(&buffer);
    try writeString(&w, "a\"b\\c\n\x01é\xff\xc3");
    try std.testing.expectEqualStrings("\"a\\\"b\\\\c\\n\\u0001é\u{FFFD}\u{FFFD}\"", w.buffered());
}
