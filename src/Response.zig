//! The response a handler fills in. Nothing is sent while the handler runs (unless it streams
//! on an engine that can): when it returns, the connection writes the head after the fact, so
//! the body's length is known and the head and body leave together in one `writev`.
//!
//! Body bytes written with `print`, `writeAll` or `writer()` land in the connection's send
//! buffer and spill into the request arena when they outgrow it (up to
//! `response_body_bytes_max`). On engines that run handlers on their own thread (`blocking`),
//! a body that outgrows the buffer, or `flush()`, switches to chunked transfer and sends as it
//! goes; elsewhere the whole body is sent when the handler returns.
const std = @import("std");
const assert = std.debug.assert;
const http = @import("http.zig");
const ResponseHead = @import("http1/ResponseHead.zig");
const Request = @import("Request.zig");
const websocket = @import("websocket.zig");
const cookies = @import("app/cookies.zig");
const EventStream = @import("app/EventStream.zig");

const Response = @This();

/// The status code (200 unless set).
status: http.Status = .ok,
/// The Content-Type value, if any.
content_type: ?[]const u8 = null,
/// Set to false to close the connection after this response.
keep_alive: bool = true,
/// Memory that lives until the response has been sent: use it for bodies given to `setBody`.
arena: std.mem.Allocator,
/// Fields added with `header`, in order.
header_list: std.ArrayList(http.Header),
/// Trailer fields added with `trailer`, in order (in `arena`).
trailer_list: std.ArrayList(http.Header) = .empty,
/// Where the body comes from.
body: Body = .buffered,
/// Buffers the body written with `print`, `writeAll` and `writer()`.
body_writer: std.Io.Writer,
/// Largest body that may be buffered.
body_bytes_max: u64,
/// Whether body bytes are counted but dropped (a HEAD request).
discard_body: bool = false,
/// Body bytes dropped so far for HEAD (they still count towards Content-Length).
discarded_len: u64 = 0,
/// How to send chunks now, when the engine can; null on event-loop engines.
stream: ?Stream = null,
/// Whether the head has gone out already with chunked framing.
streaming: bool = false,
/// The first error a body write hit; the connection answers 500 if the handler ignored it.
failure: ?Error = null,
/// Set by `upgradeWebSocket` when the handshake is valid: the connection answers 101 and
/// switches to the WebSocket protocol.
websocket_upgrade: ?websocket.UpgradeOptions = null,

/// Ways building a response can fail.
pub const Error = error{
    /// More fields than `response_header_count_max`.
    TooManyHeaders,
    /// A field name that is not a token, or a value with CR, LF or another control byte.
    InvalidHeader,
    /// The body outgrew `response_body_bytes_max`.
    BodyTooLarge,
    /// The request arena could not grow (worker overflow budget exhausted).
    OutOfMemory,
    /// A streamed chunk could not be sent: the client went away.
    ClientGone,
    /// `status` is outside 100–599, so no status line can carry it (answered with 500).
    InvalidStatus,
};

/// Where a response body comes from.
pub const Body = union(enum) {
    /// Bytes written through `print`, `writeAll` or `writer()` (the default).
    buffered,
    /// A slice set with `setBody`; it must stay valid until the response is sent
    /// (static memory or `arena`).
    bytes: []const u8,
    /// Part of a file, sent with sendfile.
    file: File,
};

/// A byte range of an open file to send as the body.
pub const File = http.FileRange;

/// Sends chunks while the handler runs; provided by the connection on engines that can block.
pub const Stream = struct {
    context: *anyopaque,
    /// Sends the head (on the first call) and one chunk made of `parts`; blocks until written.
    sendChunk: *const fn (context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void,
};

/// A response whose body buffer starts as `body_buffer`.
pub fn init(options: struct {
    arena: std.mem.Allocator,
    header_storage: []http.Header,
    body_buffer: []u8,
    body_bytes_max: u64,
    discard_body: bool,
    stream: ?Stream,
}) Response {
    return .{
        .arena = options.arena,
        .header_list = .initBuffer(options.header_storage),
        .body_writer = .{ .vtable = &body_vtable, .buffer = options.body_buffer },
        .body_bytes_max = options.body_bytes_max,
        .discard_body = options.discard_body,
        .stream = options.stream,
    };
}

/// Empties a response made by `init` for the next request, keeping what `init` set that
/// stays the same (arena, header storage, body size limit): cheaper than `init` per request.
/// Assumes the same arena and header storage as before.
pub fn reset(res: *Response, options: struct {
    body_buffer: []u8,
    discard_body: bool,
    stream: ?Stream,
}) void {
    res.status = .ok;
    res.content_type = null;
    res.keep_alive = true;
    res.header_list.items.len = 0;
    res.trailer_list = .empty; // its memory went with the arena
    res.body = .buffered;
    res.body_writer.buffer = options.body_buffer;
    res.body_writer.end = 0;
    res.discard_body = options.discard_body;
    res.discarded_len = 0;
    res.stream = options.stream;
    res.streaming = false;
    res.failure = null;
    res.websocket_upgrade = null;
}

/// Adds a header field. Content-Length, Transfer-Encoding, Connection and Date are managed by
/// the server and rejected here; set `content_type` and `keep_alive` instead of their fields.
pub fn header(res: *Response, name: []const u8, value: []const u8) Error!void {
    if (!ResponseHead.validField(name, value)) return res.fail(error.InvalidHeader);
    if (managed(name)) return res.fail(error.InvalidHeader);
    res.header_list.appendBounded(.{ .name = name, .value = value }) catch
        return res.fail(error.TooManyHeaders);
}

/// Adds a trailer field, sent after the body: over HTTP/2 as a HEADERS frame that ends the
/// stream (gRPC's `grpc-status` travels so), over HTTP/1.1 in the last chunk of a chunked
/// (streamed) body. A response sent with Content-Length over HTTP/1.1 has no place for them:
/// they are dropped there. At most `response_header_count_max` of them.
pub fn trailer(res: *Response, name: []const u8, value: []const u8) Error!void {
    if (!ResponseHead.validField(name, value)) return res.fail(error.InvalidHeader);
    if (managed(name)) return res.fail(error.InvalidHeader);
    if (res.trailer_list.items.len >= res.header_list.capacity) return res.fail(error.TooManyHeaders);
    res.trailer_list.append(res.arena, .{ .name = name, .value = value }) catch
        return res.fail(error.OutOfMemory);
}

/// The trailer fields added so far.
pub fn trailers(res: *const Response) []const http.Header {
    return res.trailer_list.items;
}

fn managed(name: []const u8) bool {
    return http.eqlLower(name, "content-length") or http.eqlLower(name, "transfer-encoding") or
        http.eqlLower(name, "connection") or http.eqlLower(name, "date");
}

/// The fields added so far.
pub fn headers(res: *const Response) []const http.Header {
    return res.header_list.items;
}

/// Appends formatted text to the body.
pub fn print(res: *Response, comptime format: []const u8, args: anytype) Error!void {
    res.body_writer.print(format, args) catch return res.failure orelse error.ClientGone;
}

/// Appends bytes to the body.
pub fn writeAll(res: *Response, bytes: []const u8) Error!void {
    res.body_writer.writeAll(bytes) catch return res.failure orelse error.ClientGone;
}

/// The body as a `std.Io.Writer` (for `std.json.Stringify` and friends). After a write error,
/// `failure` says what went wrong.
pub fn writer(res: *Response) *std.Io.Writer {
    return &res.body_writer;
}

/// Uses `bytes` as the body instead of anything written. `bytes` must stay valid until the
/// response is sent: static memory or `arena`.
pub fn setBody(res: *Response, bytes: []const u8) void {
    res.body_writer.end = 0;
    res.body = .{ .bytes = bytes };
}

/// Sends part of a file as the body (sendfile; no copy through user space).
pub fn sendFile(res: *Response, file: File) void {
    res.body_writer.end = 0;
    res.body = .{ .file = file };
}

/// Answers a WebSocket handshake (RFC 6455 §4.2). When `req` is a valid version-13
/// handshake, the connection responds 101 Switching Protocols once the handler returns and
/// the handler's `WebSocket` callbacks take over (`onOpen` first). Otherwise the response
/// becomes 400 (or 426 with `Sec-WebSocket-Version: 13` for another version) with a short
/// reason. Header fields added before or after are sent with the 101.
pub fn upgradeWebSocket(res: *Response, req: *const Request, options: websocket.UpgradeOptions) Error!void {
    const problem = websocket.handshake.check(.{
        .method = req.method,
        .version = req.version,
        .upgrade = req.upgrade,
        .connection_upgrade = req.connection_upgrade,
        .headers = req.headers,
    }) orelse {
        res.status = .switching_protocols;
        res.content_type = null;
        res.body_writer.end = 0;
        res.body = .buffered;
        res.websocket_upgrade = options;
        return;
    };
    res.status = problem.status();
    res.content_type = "text/plain; charset=utf-8";
    if (problem == .bad_version) try res.header("Sec-WebSocket-Version", websocket.handshake.version);
    res.body_writer.end = 0;
    res.body = .buffered;
    try res.print("{d} {s}: {s}\n", .{ problem.status().code(), problem.status().phrase(), problem.message() });
}

/// Writes `value` as the JSON body (`std.json.Stringify`) and sets Content-Type to
/// `application/json`.
pub fn json(res: *Response, value: anytype) Error!void {
    res.content_type = "application/json";
    std.json.Stringify.value(value, .{}, &res.body_writer) catch
        return res.failure orelse error.ClientGone;
}

/// Redirects to `location` with a 3xx `status` (e.g. `.see_other`, `.found`,
/// `.permanent_redirect`) and an empty body. `location` must stay valid until the response is
/// sent (static memory or `arena`). Asserts `status` is a redirection.
pub fn redirect(res: *Response, status: http.Status, location: []const u8) Error!void {
    assert(status.code() >= 300 and status.code() < 400);
    try res.header("Location", location);
    res.status = status;
    res.setBody("");
}

/// Adds a `Set-Cookie` field (RFC 6265 §4.1). `error.InvalidHeader` when `name` is not a
/// token, `value` holds bytes outside cookie-octet (encode it first), or an attribute is
/// invalid; the value is built in `arena`.
pub fn setCookie(res: *Response, name: []const u8, value: []const u8, options: cookies.Options) Error!void {
    var buffer: [cookies.set_cookie_bytes_max]u8 = undefined;
    const line = cookies.format(&buffer, name, value, options) catch return res.fail(error.InvalidHeader);
    const copy = res.arena.dupe(u8, line) catch return res.fail(error.OutOfMemory);
    try res.header("Set-Cookie", copy);
}

/// Starts a server-sent event stream (`text/event-stream`, WHATWG HTML §9.2): sets the
/// Content-Type and `Cache-Control: no-cache`. Each `send` is flushed as a chunk where the
/// engine streams; see `EventStream` for event-loop engines.
pub fn eventStream(res: *Response) Error!EventStream {
    res.content_type = "text/event-stream";
    try res.header("Cache-Control", "no-cache");
    return .{ .res = res };
}

/// A point in building a response that `rollback` can return to.
pub const Mark = struct { header_count: usize };

/// The current point: headers added so far.
pub fn mark(res: *const Response) Mark {
    return .{ .header_count = res.header_list.items.len };
}

/// Drops the headers added since `point`, the body, the status and the Content-Type, so an
/// error answer can replace a half-built response. False (and nothing changed) when the
/// head has been streamed already.
pub fn rollback(res: *Response, point: Mark) bool {
    if (res.streaming) return false;
    assert(point.header_count <= res.header_list.items.len);
    res.header_list.shrinkRetainingCapacity(point.header_count);
    res.trailer_list = .empty;
    if (res.body == .file) res.body.file.done();
    res.body = .buffered;
    res.body_writer.end = 0;
    res.discarded_len = 0;
    res.status = .ok;
    res.content_type = null;
    res.failure = null;
    return true;
}

/// Sends what has been written so far as a chunk, when the engine can stream; otherwise a
/// no-op (the body goes out when the handler returns).
pub fn flush(res: *Response) Error!void {
    const stream = res.stream orelse return;
    if (res.discard_body or res.body != .buffered) return;
    const pending = res.body_writer.buffered();
    if (pending.len == 0) return;
    stream.sendChunk(stream.context, res, &.{pending}) catch {
        res.noteFailure(error.ClientGone);
        return res.failure.?; // the first failure says why (e.g. `InvalidStatus`)
    };
    res.body_writer.end = 0;
}

/// The buffered body bytes (for `.buffered` bodies).
pub fn bufferedBody(res: *const Response) []const u8 {
    return res.body_writer.buffered();
}

/// The body length to announce: what a GET would send, also for HEAD.
pub fn contentLength(res: *const Response) u64 {
    return switch (res.body) {
        .buffered => res.body_writer.end + res.discarded_len,
        .bytes => |bytes| bytes.len,
        .file => |file| file.len,
    };
}

fn fail(res: *Response, err: Error) Error {
    res.noteFailure(err);
    return err;
}

fn noteFailure(res: *Response, err: Error) void {
    if (res.failure == null) res.failure = err;
}

const body_vtable: std.Io.Writer.VTable = .{
    .drain = drain,
    .flush = std.Io.Writer.noopFlush,
};

/// Called when the body buffer is full: drop (HEAD), stream a chunk, or grow into the arena.
fn drain(w: *std.Io.Writer, data: []const []const u8, splat: usize) std.Io.Writer.Error!usize {
    const res: *Response = @alignCast(@fieldParentPtr("body_writer", w));
    const count = std.Io.Writer.countSplat(data, splat);
    if (res.discard_body) {
        res.discarded_len += w.end + count;
        w.end = 0;
        return count;
    }
    if (res.stream) |stream| {
        var parts: [8][]const u8 = undefined;
        var n: usize = 0;
        parts[n] = w.buffered();
        n += 1;
        for (data[0 .. data.len - 1]) |part| {
            if (n == parts.len) break;
            parts[n] = part;
            n += 1;
        }
        if (n < parts.len and splat == 1) {
            parts[n] = data[data.len - 1];
            n += 1;
        }
        stream.sendChunk(stream.context, res, parts[0..n]) catch {
            res.noteFailure(error.ClientGone);
            return error.WriteFailed;
        };
        w.end = 0;
        var consumed: usize = 0;
        for (parts[1..n]) |part| consumed += part.len;
        return consumed;
    }
    try res.grow(count);
    return w.writeSplat(data, splat);
}

/// Moves the body into an arena buffer with room for `additional` more bytes.
fn grow(res: *Response, additional: usize) std.Io.Writer.Error!void {
    const w = &res.body_writer;
    const needed = w.end + additional;
    if (needed > res.body_bytes_max) {
        res.noteFailure(error.BodyTooLarge);
        return error.WriteFailed;
    }
    const wanted = @max(needed, w.buffer.len * 2, 4096);
    const capacity: usize = @intCast(@min(wanted, res.body_bytes_max));
    const bigger = res.arena.alloc(u8, capacity) catch {
        res.noteFailure(error.OutOfMemory);
        return error.WriteFailed;
    };
    @memcpy(bigger[0..w.end], w.buffer[0..w.end]);
    w.buffer = bigger;
}

fn testResponse(body_buffer: []u8, storage: []http.Header) Response {
    return .init(.{
        .arena = std.testing.allocator,
        .header_storage = storage,
        .body_buffer = body_buffer,
        .body_bytes_max = 1 << 20,
        .discard_body = false,
        .stream = null,
    });
}

test "Response: body spills from the send buffer into the arena" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var storage: [2]http.Header = undefined;
    var small: [8]u8 = undefined;
    var res = testResponse(&small, &storage);
    res.arena = arena_state.allocator();
    try res.writeAll("Hello");
    try std.testing.expect(res.bufferedBody().ptr == &small);
    try res.print(", {s}! {d}", .{ "World", 42 });
    try std.testing.expectEqualStrings("Hello, World! 42", res.bufferedBody());
    try std.testing.expectEqual(@as(u64, 16), res.contentLength());
}

test "Response: header limits and response splitting" {
    var storage: [1]http.Header = undefined;
    var buffer: [8]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    try std.testing.expectError(error.InvalidHeader, res.header("X-A", "a\r\nB: c"));
    try std.testing.expectError(error.InvalidHeader, res.header("Content-Length", "5"));
    try res.header("X-A", "1");
    try std.testing.expectError(error.TooManyHeaders, res.header("X-B", "2"));
    try std.testing.expectEqual(@as(usize, 1), res.headers().len);
}

test "Response: HEAD counts the body without keeping it" {
    var storage: [1]http.Header = undefined;
    var buffer: [4]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    res.discard_body = true;
    try res.writeAll("0123456789");
    try res.writeAll("ab");
    try std.testing.expectEqual(@as(u64, 12), res.contentLength());
}

test "Response: json, redirect, cookies" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var storage: [4]http.Header = undefined;
    var buffer: [256]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    res.arena = arena_state.allocator();
    try res.json(.{ .a = 1, .b = "x\"y", .c = [_]bool{ true, false } });
    try std.testing.expectEqualStrings("{\"a\":1,\"b\":\"x\\\"y\",\"c\":[true,false]}", res.bufferedBody());
    try std.testing.expectEqualStrings("application/json", res.content_type.?);

    try res.setCookie("session", "abc123", .{ .path = "/", .http_only = true });
    try std.testing.expectEqualStrings("session=abc123; Path=/; HttpOnly", res.headers()[0].value);
    try std.testing.expectError(error.InvalidHeader, res.setCookie("bad name", "x", .{}));

    try res.redirect(.see_other, "/next");
    try std.testing.expectEqual(http.Status.see_other, res.status);
    try std.testing.expectEqualStrings("Location", res.headers()[1].name);
    try std.testing.expectEqual(@as(u64, 0), res.contentLength());
}

test "Response: trailers are checked like header fields and bounded like them" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var storage: [2]http.Header = undefined;
    var buffer: [8]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    res.arena = arena_state.allocator();
    try res.trailer("grpc-status", "0");
    try std.testing.expectError(error.InvalidHeader, res.trailer("Content-Length", "1"));
    try std.testing.expectError(error.InvalidHeader, res.trailer("x", "a\r\nb"));
    try res.trailer("x-sum", "6");
    try std.testing.expectError(error.TooManyHeaders, res.trailer("x-more", "1"));
    try std.testing.expectEqual(@as(usize, 2), res.trailers().len);
    try std.testing.expectEqualStrings("x-sum", res.trailers()[1].name);
}

test "Response: rollback drops what came after the mark" {
    var storage: [4]http.Header = undefined;
    var buffer: [64]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    try res.header("X-Before", "1");
    const point = res.mark();
    try res.header("X-After", "2");
    res.status = .created;
    res.content_type = "text/html";
    try res.writeAll("partial");
    try std.testing.expect(res.rollback(point));
    try std.testing.expectEqual(@as(usize, 1), res.headers().len);
    try std.testing.expectEqual(http.Status.ok, res.status);
    try std.testing.expectEqual(@as(?[]const u8, null), res.content_type);
    try std.testing.expectEqual(@as(u64, 0), res.contentLength());
    res.streaming = true;
    try std.testing.expect(!res.rollback(point));
}

test "Response: reset leaves nothing of the previous response behind" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var storage: [4]http.Header = undefined;
    var buffer: [8]u8 = undefined;
    var next_buffer: [64]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    res.arena = arena_state.allocator();
    // Dirty every field a handler and the connection can touch.
    res.status = .created;
    res.content_type = "text/html";
    res.keep_alive = false;
    try res.header("X-A", "1");
    try res.writeAll("more than eight bytes: the body moves to the arena");
    try std.testing.expect(res.body_writer.buffer.ptr != &buffer);
    res.setBody("bytes");
    res.discard_body = true;
    res.discarded_len = 7;
    res.streaming = true;
    res.failure = error.TooManyHeaders;
    res.websocket_upgrade = .{};

    res.reset(.{ .body_buffer = &next_buffer, .discard_body = false, .stream = null });
    var fresh = testResponse(&next_buffer, &storage);
    fresh.arena = arena_state.allocator();
    const fields = .{
        "status",         "content_type",      "keep_alive",    "body",
        "body_bytes_max", "discard_body",      "discarded_len", "streaming",
        "failure",        "websocket_upgrade",
    };
    inline for (fields) |field| {
        try std.testing.expectEqual(@field(fresh, field), @field(res, field));
    }
    try std.testing.expectEqual(fresh.headers().len, res.headers().len);
    try std.testing.expectEqual(fresh.header_list.capacity, res.header_list.capacity);
    try std.testing.expectEqual(fresh.body_writer.buffer, res.body_writer.buffer);
    try std.testing.expectEqual(fresh.body_writer.end, res.body_writer.end);
    try std.testing.expectEqual(fresh.body_writer.vtable, res.body_writer.vtable);
    // And it works like a fresh one.
    try res.header("X-B", "2");
    try res.writeAll("ok");
    try std.testing.expectEqualStrings("X-B", res.headers()[0].name);
    try std.testing.expectEqualStrings("ok", res.bufferedBody());
    try std.testing.expect(res.bufferedBody().ptr == &next_buffer);
}

test "Response: a body over the limit fails with BodyTooLarge" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var storage: [1]http.Header = undefined;
    var buffer: [4]u8 = undefined;
    var res = testResponse(&buffer, &storage);
    res.arena = arena_state.allocator();
    res.body_bytes_max = 10;
    try std.testing.expectError(error.BodyTooLarge, res.writeAll("0123456789abc"));
    try std.testing.expectEqual(@as(?Error, error.BodyTooLarge), res.failure);
}
