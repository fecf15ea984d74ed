//! An HTTP/1.1 response head (RFC 9112 §4, §6.1–§6.3, §9.6), measured and then written into a
//! caller's buffer in one pass: the status line and Date line are ready-made bytes, the rest
//! is a handful of copies.
const std = @import("std");
const assert = std.debug.assert;
const http = @import("../http.zig");
const status_line = @import("status_line.zig");
const scan = @import("scan.zig");
const copy = @import("copy.zig");

const ResponseHead = @This();

status: http.Status,
/// The whole Date line, CRLF included (from `DateCache`, `date_line_len` bytes), or "" to
/// omit it (1xx responses).
date_line: []const u8,
/// Content-Type value, if any.
content_type: ?[]const u8 = null,
framing: Framing,
connection: Connection = .default,
/// Fields added by the handler, written in order after the ones above.
headers: []const http.Header = &.{},

/// How the body is delimited.
pub const Framing = union(enum) {
    /// `Content-Length: n` (also for HEAD: the length a GET would have).
    length: u64,
    /// `Transfer-Encoding: chunked`.
    chunked,
    /// No length field: statuses that never have content (1xx, 204, 304).
    none,
};

/// What the Connection field says (RFC 9112 §9.3, §9.6).
pub const Connection = enum {
    /// Nothing: the version's default applies (persistent for HTTP/1.1).
    default,
    /// `Connection: close`: the server closes after this response.
    close,
    /// `Connection: keep-alive`: an HTTP/1.0 client asked to keep the connection.
    keep_alive,
    /// `Connection: Upgrade`: a 101 response switching protocols (RFC 9110 §7.8).
    upgrade,
};

/// Length of a Date line, "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" (IMF-fixdate,
/// RFC 9110 §5.6.7).
pub const date_line_len = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n".len;

const content_type_name = "Content-Type: ";
const content_length_name = "Content-Length: ";
const chunked_line = "Transfer-Encoding: chunked\r\n";
const close_line = "Connection: close\r\n";
const keep_alive_line = "Connection: keep-alive\r\n";
const upgrade_line = "Connection: Upgrade\r\n";

/// Bytes `write` will produce.
pub inline fn len(head: *const ResponseHead) usize {
    var n = status_line.get(head.status).len + head.date_line.len + 2;
    if (head.content_type) |value| n += content_type_name.len + value.len + 2;
    n += switch (head.framing) {
        .length => |length| content_length_name.len + decimalLength(length) + 2,
        .chunked => chunked_line.len,
        .none => 0,
    };
    n += switch (head.connection) {
        .default => 0,
        .close => close_line.len,
        .keep_alive => keep_alive_line.len,
        .upgrade => upgrade_line.len,
    };
    for (head.headers) |header| n += header.name.len + 2 + header.value.len + 2;
    return n;
}

/// Writes the head into `buffer`; returns the bytes written. Asserts `buffer` holds `len()`.
/// Fixed strings are stored whole and short ones copied inline (`copy.short`): most heads
/// are written without a call.
pub fn write(head: *const ResponseHead, buffer: []u8) []u8 {
    if (std.debug.runtime_safety) assert(buffer.len >= head.len());
    const out = buffer.ptr;
    var i: usize = 0;
    if (head.date_line.len == date_line_len) {
        // The head is longer than a padded status line: one fixed copy of the line, the date
        // over its padding.
        comptime assert(status_line.len_min + date_line_len + "\r\n".len >= status_line.padded_len);
        const line = status_line.padded(head.status);
        out[0..status_line.padded_len].* = line.bytes;
        i = line.len;
        out[i..][0..date_line_len].* = head.date_line[0..date_line_len].*;
        i += date_line_len;
    } else {
        i = put(out, i, status_line.get(head.status));
        i = put(out, i, head.date_line);
    }
    if (head.content_type) |value| {
        i = putLiteral(out, i, content_type_name);
        i = put(out, i, value);
        i = putLiteral(out, i, "\r\n");
    }
    switch (head.framing) {
        .length => |length| {
            i = putLiteral(out, i, content_length_name);
            const digits = decimalLength(length);
            writeDigits(out[i..][0..digits], length);
            i += digits;
            i = putLiteral(out, i, "\r\n");
        },
        .chunked => i = putLiteral(out, i, chunked_line),
        .none => {},
    }
    switch (head.connection) {
        .default => {},
        .close => i = putLiteral(out, i, close_line),
        .keep_alive => i = putLiteral(out, i, keep_alive_line),
        .upgrade => i = putLiteral(out, i, upgrade_line),
    }
    for (head.headers) |header| {
        i = put(out, i, header.name);
        i = putLiteral(out, i, ": ");
        i = put(out, i, header.value);
        i = putLiteral(out, i, "\r\n");
    }
    i = putLiteral(out, i, "\r\n");
    if (std.debug.runtime_safety) assert(i == head.len());
    return buffer[0..i];
}

inline fn put(out: [*]u8, index: usize, bytes: []const u8) usize {
    copy.short(out + index, bytes);
    return index + bytes.len;
}

inline fn putLiteral(out: [*]u8, index: usize, comptime bytes: []const u8) usize {
    out[index..][0..bytes.len].* = bytes[0..bytes.len].*;
    return index + bytes.len;
}

/// Number of decimal digits of `value`.
pub fn decimalLength(value: u64) usize {
    var n: usize = 1;
    var v = value;
    while (v >= 100) : (v /= 100) n += 2;
    return n + @intFromBool(v >= 10);
}

/// "00" to "99": two digits per division.
const digit_pairs: [100][2]u8 = blk: {
    var pairs: [100][2]u8 = undefined;
    for (&pairs, 0..) |*pair, i| pair.* = .{ '0' + i / 10, '0' + i % 10 };
    break :blk pairs;
};

/// Writes `value` in decimal at the start of `buffer`; returns the digit count.
/// Asserts `buffer` holds `decimalLength(value)` bytes.
pub fn formatDecimal(buffer: []u8, value: u64) usize {
    const n = decimalLength(value);
    writeDigits(buffer[0..n], value);
    return n;
}

/// Writes `value` in decimal into exactly `digits` (`decimalLength(value)` bytes).
inline fn writeDigits(digits: []u8, value: u64) void {
    assert(digits.len == decimalLength(value));
    var v = value;
    var i = digits.len;
    while (v >= 100) : (v /= 100) {
        i -= 2;
        digits[i..][0..2].* = digit_pairs[v % 100];
    }
    if (v >= 10) {
        digits[0..2].* = digit_pairs[v];
    } else {
        digits[0] = @intCast('0' + v);
    }
}

/// Checks a handler-supplied field: the name must be a token and the value may not hold CR,
/// LF, NUL or other control bytes (no response splitting, RFC 9110 §5.5).
pub fn validField(name: []const u8, value: []const u8) bool {
    if (name.len == 0) return false;
    for (name) |c| if (!scan.token_table[c]) return false;
    for (value) |c| if ((c < 0x20 and c != '\t') or c == 0x7f) return false;
    return true;
}

test "ResponseHead: measured length matches what is written" {
    const date = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
    const head: ResponseHead = .{
        .status = .ok,
        .date_line = date,
        .content_type = "text/plain",
        .framing = .{ .length = 13 },
        .headers = &.{.{ .name = "X-A", .value = "b" }},
    };
    var buffer: [256]u8 = undefined;
    const bytes = head.write(&buffer);
    try std.testing.expectEqualStrings("HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Type: text/plain\r\nContent-Length: 13\r\nX-A: b\r\n\r\n", bytes);
    try std.testing.expectEqual(head.len(), bytes.len);
}

test "ResponseHead: chunked, close, keep-alive and no framing" {
    var buffer: [256]u8 = undefined;
    const chunked: ResponseHead = .{ .status = .ok, .date_line = "", .framing = .chunked, .connection = .close };
    try std.testing.expectEqualStrings(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        chunked.write(&buffer),
    );
    const not_modified: ResponseHead = .{ .status = .not_modified, .date_line = "", .framing = .none, .connection = .keep_alive };
    try std.testing.expectEqualStrings(
        "HTTP/1.1 304 Not Modified\r\nConnection: keep-alive\r\n\r\n",
        not_modified.write(&buffer),
    );
}

test "ResponseHead: every status, field lengths around the copy sizes, exactly sized buffer" {
    const date = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
    const filler = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789";
    var expected: [512]u8 = undefined;
    var buffer: [512]u8 = undefined;
    for (100..600) |code| {
        const status: http.Status = @fromBackingInt(@intCast(code));
        for ([_]usize{ 0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 70 }) |n| {
            const value = filler[0..n];
            const head: ResponseHead = .{
                .status = status,
                .date_line = if (n % 2 == 0) date else "",
                .content_type = value,
                .framing = .{ .length = n * 1000 + code },
                .connection = .keep_alive,
                .headers = &.{.{ .name = filler[0 .. n / 2 + 1], .value = value }},
            };
            const want = try std.mem.print(&expected, "{s}{s}Content-Type: {s}\r\nContent-Length: {d}\r\n" ++
                "Connection: keep-alive\r\n{s}: {s}\r\n\r\n", .{
                status_line.get(status), head.date_line, value, n * 1000 + code, filler[0 .. n / 2 + 1], value,
            });
            try std.testing.expectEqual(want.len, head.len());
            @memset(&buffer, '#');
            const written = head.write(buffer[1..][0..want.len]);
            try std.testing.expectEqualStrings(want, written);
            try std.testing.expectEqual(@as(u8, '#'), buffer[0]);
            try std.testing.expectEqual(@as(u8, '#'), buffer[want.len + 1]);
        }
    }
}

test "formatDecimal and decimalLength" {
    var buffer: [20]u8 = undefined;
    for ([_]u64{ 0, 9, 10, 99, 100, 101, 999, 1000, 12345, 99999, 100000, std.math.maxInt(u64) }) |value| {
        const n = formatDecimal(&buffer, value);
        var expected: [20]u8 = undefined;
        try std.testing.expectEqualStrings(try std.mem.print(&expected, "{d}", .{value}), buffer[0..n]);
        try std.testing.expectEqual(n, decimalLength(value));
    }
}

test "validField: no response splitting" {
    try std.testing.expect(validField("X-Ok", "a value\twith tab"));
    try std.testing.expect(!validField("X-Bad", "a\r\nInjected: 1"));
    try std.testing.expect(!validField("Bad Name", "v"));
    try std.testing.expect(!validField("", "v"));
}
