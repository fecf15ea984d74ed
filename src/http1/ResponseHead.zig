//! An HTTP/1.1 response head (RFC 9112 §4, §6.1–§6.3, §9.6), measured and then written into a
//! caller's buffer in one pass: the status line and Date line are ready-made bytes, the rest
//! is a handful of copies.
const std = @import("std");
const assert = std.debug.assert;
const http = @import("../http.zig");
const status_line = @import("status_line.zig");
const scan = @import("scan.zig");

const ResponseHead = @This();

status: http.Status,
/// The whole Date line, CRLF included (from `DateCache`), or "" to omit it (1xx responses).
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

const content_type_name = "Content-Type: ";
const content_length_name = "Content-Length: ";
const chunked_line = "Transfer-Encoding: chunked\r\n";
const close_line = "Connection: close\r\n";
const keep_alive_line = "Connection: keep-alive\r\n";
const upgrade_line = "Connection: Upgrade\r\n";

/// Bytes `write` will produce.
pub fn len(head: *const ResponseHead) usize {
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
pub fn write(head: *const ResponseHead, buffer: []u8) []u8 {
    const total = head.len();
    assert(buffer.len >= total);
    var i: usize = 0;
    i = put(buffer, i, status_line.get(head.status));
    i = put(buffer, i, head.date_line);
    if (head.content_type) |value| {
        i = put(buffer, i, content_type_name);
        i = put(buffer, i, value);
        i = put(buffer, i, "\r\n");
    }
    switch (head.framing) {
        .length => |length| {
            i = put(buffer, i, content_length_name);
            i += formatDecimal(buffer[i..], length);
            i = put(buffer, i, "\r\n");
        },
        .chunked => i = put(buffer, i, chunked_line),
        .none => {},
    }
    switch (head.connection) {
        .default => {},
        .close => i = put(buffer, i, close_line),
        .keep_alive => i = put(buffer, i, keep_alive_line),
        .upgrade => i = put(buffer, i, upgrade_line),
    }
    for (head.headers) |header| {
        i = put(buffer, i, header.name);
        i = put(buffer, i, ": ");
        i = put(buffer, i, header.value);
        i = put(buffer, i, "\r\n");
    }
    i = put(buffer, i, "\r\n");
    assert(i == total);
    return buffer[0..i];
}

inline fn put(buffer: []u8, index: usize, bytes: []const u8) usize {
    @memcpy(buffer[index..][0..bytes.len], bytes);
    return index + bytes.len;
}

/// Number of decimal digits of `value`.
pub fn decimalLength(value: u64) usize {
    var n: usize = 1;
    var v = value;
    while (v >= 10) : (v /= 10) n += 1;
    return n;
}

/// Writes `value` in decimal at the start of `buffer`; returns the digit count.
pub fn formatDecimal(buffer: []u8, value: u64) usize {
    const n = decimalLength(value);
    var v = value;
    var i = n;
    while (i > 0) {
        i -= 1;
        buffer[i] = @intCast('0' + v % 10);
        v /= 10;
    }
    return n;
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

test "formatDecimal and decimalLength" {
    var buffer: [20]u8 = undefined;
    for ([_]u64{ 0, 9, 10, 99, 100, 12345, std.math.maxInt(u64) }) |value| {
        const n = formatDecimal(&buffer, value);
        var expected: [20]u8 = undefined;
        try std.testing.expectEqualStrings(try std.mem.print(&expected, "{d}", .{value}), buffer[0..n]);
    }
}

test "validField: no response splitting" {
    try std.testing.expect(validField("X-Ok", "a value\twith tab"));
    try std.testing.expect(!validField("X-Bad", "a\r\nInjected: 1"));
    try std.testing.expect(!validField("Bad Name", "v"));
    try std.testing.expect(!validField("", "v"));
}
