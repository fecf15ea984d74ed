//! Status lines ("HTTP/1.1 200 OK\r\n") for every registered status, built at compile time so
//! the hot path copies bytes instead of formatting numbers. saker answers every request with
//! HTTP/1.1, the highest version it implements, as RFC 9110 §2.5 asks of a server, also when
//! the request was HTTP/1.0 (the response's framing and Connection field follow the request's
//! version).
const std = @import("std");
const http = @import("../http.zig");

const code_min = 100;
const code_max = 599;

const table: [code_max - code_min + 1][]const u8 = blk: {
    @setEvalBranchQuota(100_000);
    var lines: [code_max - code_min + 1][]const u8 = undefined;
    for (&lines, code_min..) |*line, code| {
        const status: http.Status = @fromBackingInt(@intCast(code));
        const digits = [3]u8{ '0' + code / 100, '0' + code / 10 % 10, '0' + code % 10 };
        line.* = "HTTP/1.1 " ++ digits ++ " " ++ status.phrase() ++ "\r\n";
    }
    break :blk lines;
};

/// The longest status line in the table.
pub const len_max = blk: {
    var max: usize = 0;
    for (table) |line| max = @max(max, line.len);
    break :blk max;
};

/// The status line for `status`, CRLF included. Asserts the code is in 100–599.
pub fn get(status: http.Status) []const u8 {
    const code = status.code();
    std.debug.assert(code >= code_min and code <= code_max);
    return table[code - code_min];
}

test "status_line: registered and unregistered codes" {
    try std.testing.expectEqualStrings("HTTP/1.1 200 OK\r\n", get(.ok));
    try std.testing.expectEqualStrings("HTTP/1.1 404 Not Found\r\n", get(.not_found));
    try std.testing.expectEqualStrings("HTTP/1.1 599 \r\n", get(@fromBackingInt(@intCast(599))));
    try std.testing.expect(len_max < 64);
}
