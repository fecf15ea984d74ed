//! Status lines ("HTTP/1.1 200 OK\r\n") for every registered status, built at compile time so
//! the hot path copies bytes instead of formatting numbers. saker answers every request with
//! HTTP/1.1, the highest version it implements, as RFC 9110 §2.5 asks of a server, also when
//! the request was HTTP/1.0 (the response's framing and Connection field follow the request's
//! version).
//!
//! Each line is stored padded to `padded_len` bytes, so a writer with room behind the line
//! can copy it with one fixed-size copy and advance by its real length.
const std = @import("std");
const http = @import("../http.zig");

const code_min = 100;
const code_max = 599;

/// Bytes of every padded line: the longest line, rounded up to a multiple of 16.
pub const padded_len = 48;

/// A status line, padded with zero bytes to `padded_len`.
pub const Padded = struct {
    bytes: [padded_len]u8 align(64),
    /// Length of the line, CRLF included.
    len: u8,
};

const table: [code_max - code_min + 1]Padded = blk: {
    @setEvalBranchQuota(100_000);
    var lines: [code_max - code_min + 1]Padded = undefined;
    for (&lines, code_min..) |*line, code| {
        const status: http.Status = @fromBackingInt(@intCast(code));
        const digits = [3]u8{ '0' + code / 100, '0' + code / 10 % 10, '0' + code % 10 };
        const text = "HTTP/1.1 " ++ digits ++ " " ++ status.phrase() ++ "\r\n";
        line.* = .{ .bytes = @splat(0), .len = text.len };
        @memcpy(line.bytes[0..text.len], text);
    }
    break :blk lines;
};

/// The longest status line in the table.
pub const len_max = blk: {
    var max: usize = 0;
    for (table) |line| max = @max(max, line.len);
    break :blk max;
};

/// The shortest status line in the table (an unregistered code: "HTTP/1.1 599 \r\n").
pub const len_min = blk: {
    var min: usize = padded_len;
    for (table) |line| min = @min(min, line.len);
    break :blk min;
};

comptime {
    std.debug.assert(len_max <= padded_len);
}

/// The status line for `status`, CRLF included. Asserts the code is in 100–599.
pub fn get(status: http.Status) []const u8 {
    const line = padded(status);
    return line.bytes[0..line.len];
}

/// The status line for `status` with its padding. Asserts the code is in 100–599.
pub fn padded(status: http.Status) *const Padded {
    const code = status.code();
    std.debug.assert(code >= code_min and code <= code_max);
    return &table[code - code_min];
}

test "status_line: registered and unregistered codes" {
    try std.testing.expectEqualStrings("HTTP/1.1 200 OK\r\n", get(.ok));
    try std.testing.expectEqualStrings("HTTP/1.1 404 Not Found\r\n", get(.not_found));
    try std.testing.expectEqualStrings("HTTP/1.1 599 \r\n", get(@fromBackingInt(@intCast(599))));
    try std.testing.expectEqual(@as(usize, "HTTP/1.1 599 \r\n".len), len_min);
    try std.testing.expect(len_max < 64);
}

test "status_line: the padding after every line is zero bytes" {
    for (code_min..code_max + 1) |code| {
        const line = padded(@fromBackingInt(@intCast(code)));
        try std.testing.expect(std.mem.endsWith(u8, line.bytes[0..line.len], "\r\n"));
        for (line.bytes[line.len..]) |b| try std.testing.expectEqual(@as(u8, 0), b);
    }
}
