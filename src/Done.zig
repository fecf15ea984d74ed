//! What a handler's optional `onDone` hook learns once an exchange is over: its response was
//! handed to the transport whole, or the connection ended first. The core calls it for every
//! response it began to send, including those it made itself for requests it refused (400,
//! 408, 413, 414, 431, 501, 505, …) before any handler saw them, so an access log written
//! here misses nothing. It runs on the worker's event-loop thread (the connection's thread on
//! thread-based engines), after the last byte of the response reached the transport and before
//! the request's memory is reused. It must not block.
const std = @import("std");
const http = @import("http.zig");
const Request = @import("Request.zig");

const Done = @This();

/// The longest `request_line` kept.
pub const request_line_bytes_max = 256;

/// The request, when its head was whole; null when the core refused it before that (a
/// malformed or oversized head, a head that timed out). Valid only during the call.
request: ?*const Request,
/// The first line the client sent, cut to `request_line_bytes_max`, when `request` is null
/// (raw bytes: escape them before writing them anywhere). Valid only during the call.
request_line: []const u8 = "",
/// The client's address (the PROXY protocol's when the listener uses it).
peer: ?std.Io.net.IpAddress,
/// The worker that served the exchange (`Request.worker_index`).
worker_index: u32,
version: http.Version,
status: http.Status,
/// Bytes of the response after its head (the body, with its chunk framing over HTTP/1.1)
/// that reached the transport: what was sent, not what was meant to be. Over HTTP/2, the DATA
/// payload framed for the stream.
body_bytes_sent: u64,
/// Whether the whole response reached the transport; false when the connection or the stream
/// ended first.
complete: bool,
/// The core made the response itself: a request it refused, a head or body that timed out,
/// a handler that failed. False: the handler's response.
core_response: bool,
/// Microseconds from the request head's arrival to now, when `Config.fine_durations` is set.
duration_us: ?u64 = null,

/// The first line of `bytes` (without its line ending), cut to `request_line_bytes_max`.
pub fn firstLine(bytes: []const u8) []const u8 {
    const end = std.mem.findAny(u8, bytes, "\r\n") orelse bytes.len;
    return bytes[0..@min(end, request_line_bytes_max)];
}

test firstLine {
    try std.testing.expectEqualStrings("GET / HTTP/1.1", firstLine("GET / HTTP/1.1\r\nHost: a\r\n"));
    try std.testing.expectEqualStrings("GARBAGE", firstLine("GARBAGE"));
    try std.testing.expectEqualStrings("", firstLine("\r\n"));
    const long: [request_line_bytes_max + 10]u8 = @splat('a');
    try std.testing.expectEqual(request_line_bytes_max, firstLine(&long).len);
}
