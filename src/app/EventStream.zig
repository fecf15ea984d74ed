//! Server-sent events (WHATWG HTML §9.2, `text/event-stream`) on top of a `Response`: each
//! `send` writes one event and flushes it as a chunk.
//!
//! Where it streams: on engines that run the handler on a thread of its own (`blocking`,
//! `thread_per_connection`, `worker_pool`, and handlers on the handler pool: a router route
//! flagged `.with(.{ .blocking = true }, ...)`), over HTTP/1.1 and HTTP/2 alike
//! (docs/http2.md), every event leaves when it is sent, and a
//! client that went away makes the next `send` fail with `error.ClientGone` — the way a
//! long-lived stream ends. A handler on an event loop thread (`epoll`, `io_uring`) sends
//! nothing until it returns: the events are buffered and leave together. `live()` tells which
//! case applies, so a handler can send a finite batch there instead of looping forever and
//! stalling the loop.
const std = @import("std");
const Response = @import("../Response.zig");

const EventStream = @This();

res: *Response,

/// One event. `data` may hold several lines (split on CRLF, LF or CR); `event` and `id` must
/// be single lines.
pub const Event = struct {
    data: []const u8,
    /// The event type (`event:`); clients default to "message".
    event: ?[]const u8 = null,
    /// The last-event ID (`id:`) a reconnecting client sends back in `Last-Event-ID`.
    id: ?[]const u8 = null,
    /// Reconnection delay for the client (`retry:`), in milliseconds.
    retry_ms: ?u32 = null,
};

/// Ways sending can fail.
pub const Error = Response.Error || error{
    /// `event` or `id` holds CR or LF (or `id` a NUL), which would change the stream's framing.
    InvalidEvent,
};

/// Whether events reach the client as they are sent (and a gone client is detected): true on
/// engines that stream, false on event loops and for HEAD requests.
pub fn live(stream: EventStream) bool {
    return stream.res.stream != null and !stream.res.discard_body;
}

/// Writes one event and flushes it. `error.ClientGone` when the client has disconnected.
pub fn send(stream: EventStream, event: Event) Error!void {
    if (event.event) |name| if (!singleLine(name)) return error.InvalidEvent;
    if (event.id) |id| if (!singleLine(id) or std.mem.findScalar(u8, id, 0) != null) return error.InvalidEvent;
    const res = stream.res;
    if (event.event) |name| try res.print("event: {s}\n", .{name});
    if (event.id) |id| try res.print("id: {s}\n", .{id});
    if (event.retry_ms) |retry| try res.print("retry: {d}\n", .{retry});
    var rest = event.data;
    while (true) {
        const end = std.mem.findAny(u8, rest, "\r\n") orelse rest.len;
        try res.print("data: {s}\n", .{rest[0..end]});
        if (end == rest.len) break;
        const skip: usize = if (rest[end] == '\r' and end + 1 < rest.len and rest[end + 1] == '\n') 2 else 1;
        rest = rest[end + skip ..];
    }
    try res.writeAll("\n");
    try res.flush();
}

/// Writes a comment line (ignored by clients) and flushes it: a heartbeat that keeps proxies
/// from timing out an idle stream and finds out whether the client is still there.
pub fn comment(stream: EventStream, text: []const u8) Error!void {
    if (!singleLine(text)) return error.InvalidEvent;
    try stream.res.print(": {s}\n\n", .{text});
    try stream.res.flush();
}

fn singleLine(text: []const u8) bool {
    return std.mem.findAny(u8, text, "\r\n") == null;
}

test "EventStream: event framing" {
    const http = @import("../http.zig");
    var storage: [2]http.Header = undefined;
    var buffer: [512]u8 = undefined;
    var res: Response = .init(.{
        .arena = std.testing.allocator,
        .header_storage = &storage,
        .body_buffer = &buffer,
        .body_bytes_max = 1 << 20,
        .discard_body = false,
        .stream = null,
    });
    const stream = try res.eventStream();
    try std.testing.expect(!stream.live());
    try std.testing.expectEqualStrings("text/event-stream", res.content_type.?);
    try std.testing.expectEqualStrings("no-cache", res.headers()[0].value);
    try stream.send(.{ .data = "one" });
    try stream.send(.{ .data = "a\r\nb\nc\rd", .event = "update", .id = "7", .retry_ms = 1000 });
    try stream.send(.{ .data = "" });
    try stream.comment("ping");
    try std.testing.expectEqualStrings("data: one\n\n" ++
        "event: update\nid: 7\nretry: 1000\ndata: a\ndata: b\ndata: c\ndata: d\n\n" ++
        "data: \n\n" ++
        ": ping\n\n", res.bufferedBody());
    try std.testing.expectError(error.InvalidEvent, stream.send(.{ .data = "x", .event = "a\nb" }));
    try std.testing.expectError(error.InvalidEvent, stream.send(.{ .data = "x", .id = "a\x00" }));
    try std.testing.expectError(error.InvalidEvent, stream.comment("a\rb"));
}
