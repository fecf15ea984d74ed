//! Request bodies in a `Content-Encoding` (RFC 9110 §8.4), decoded before `handle` for a
//! handler that declares `pub const decodes_content_encoding = true` (docs/compression.md).
//! `Server`'s dispatch calls it on every engine and protocol, on the thread that runs the
//! handler (a handler-pool thread when the handler may block), once the body is buffered.
//!
//! The handler then sees the request the client would have sent without the coding:
//! - `body()` (and `bodyReader()`) is the decoded body, in the request arena, exactly its
//!   length;
//! - no `Content-Encoding` field, so `hasCodedBody()` is false and nothing decodes it twice;
//! - a body sent with a `Content-Length` has `content_length` and its `Content-Length` field
//!   set to the decoded length (`content_length` null and the field "0" when it decodes to
//!   nothing, as for a body sent empty); a body sent chunked, or over HTTP/2 without a
//!   content-length, stays so: `chunked`, no length. The other fields are as sent.
//!
//! What cannot be decoded is answered here instead of calling `handle`:
//! - 415, with `Accept-Encoding` naming the codings decoded, for a coding saker does not
//!   decode or more than `content_encoding.codings_max` of them;
//! - 400 for data that is not in its coding, or is cut short, naming the coding;
//! - 413 for a body that decodes past `Config.decoded_body_bytes_max` (a stage of stacked
//!   codings too), found as it decodes;
//! - 503 when the server's memory budget cannot hold the decoder or the decoded body.
//!
//! Memory: the decoded body comes from the request arena; the decoders' state, their scratch
//! buffers and the stages between stacked codings come from the heap within the server's
//! budget (`Arena.heap`), freed before `handle` runs.
const std = @import("std");
const assert = std.debug.assert;
const http = @import("http.zig");
const Arena = @import("Arena.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const compress = @import("compress.zig");
const content_encoding = compress.content_encoding;
const Decoder = compress.Decoder;

/// What `decode` did.
pub const Outcome = enum {
    /// The request now holds the decoded body: call `handle`.
    decoded,
    /// `res` holds the answer (415, 400, 413 or 503): do not call `handle`.
    answered,
};

/// `Content-Encoding` field lines read at most; a request with more is answered 415.
const field_lines_max = 8;

/// The codings `Accept-Encoding` names in a 415 for a coding not decoded.
const decoded_codings = "zstd, br, gzip, deflate";

/// Decodes the buffered body of `req` in place of the coded one, or answers in `res`.
/// Asserts that the body is coded, buffered and was not skipped.
pub fn decode(req: *Request, res: *Response) Response.Error!Outcome {
    assert(req.hasCodedBody());
    assert(!req.body_decoding.skipped);
    assert(req.body_source == .buffered);
    const codings = switch (parseFields(req)) {
        .codings => |codings| codings,
        .unknown => return refuse(res, "is in a Content-Encoding the server does not decode " ++
            "(it decodes zstd, br, gzip, x-gzip and deflate)"),
        .too_many => return refuse(res, std.fmt.comptimePrint(
            "is in more than {d} Content-Encodings",
            .{content_encoding.codings_max},
        )),
    };
    // `hasCodedBody` and `parse` skip the same members: a coded body names a coding.
    assert(codings.len > 0);
    const limit: usize = @intCast(@min(req.body_decoding.bytes_max, std.math.maxInt(usize)));
    const allocators: Decoder.Allocators = .{ .output = req.arena, .scratch = scratchAllocator(req) };
    var failure: content_encoding.Failure = .{};
    const decoded = content_encoding.decode(allocators, codings.slice(), req.body_bytes, limit, &failure) catch |err| {
        try answerFailure(res, err, failure.coding.?, limit);
        return .answered;
    };
    present(req, decoded) catch {
        try answer(res, .service_unavailable, "503 Service Unavailable: no memory to decode the request body now\n", .{});
        return .answered;
    };
    assert(!req.hasCodedBody());
    return .decoded;
}

/// Whether the fields of `req` name codings `decode` undoes (not too many, none unknown):
/// otherwise it answers 415 whatever the body, which need not be read.
pub fn decodable(req: *const Request) bool {
    return parseFields(req) == .codings;
}

/// The answer for a coded body the handler's `onHead` wants read as it arrives (`.stream`,
/// `.reader`): only buffered bodies are decoded, and the handler asked for no coding.
pub fn refuseUnbuffered(res: *Response) Response.Error!void {
    try res.header("Accept-Encoding", "identity");
    res.status = .unsupported_media_type;
    res.content_type = "text/plain; charset=utf-8";
    res.setBody("415 Unsupported Media Type: this request body is read as it arrives, " ++
        "and is accepted only without a Content-Encoding\n");
}

fn parseFields(req: *const Request) content_encoding.Parsed {
    var lines: [field_lines_max][]const u8 = undefined;
    var count: usize = 0;
    for (req.headers) |field| {
        if (!std.ascii.eqlIgnoreCase(field.name, "Content-Encoding")) continue;
        if (count == lines.len) return .too_many;
        lines[count] = field.value;
        count += 1;
    }
    return content_encoding.parse(lines[0..count]);
}

/// Where the decoders' state and scratch come from: the heap within the server's budget
/// when the request has a server's arena; otherwise (a test's request) its allocator.
fn scratchAllocator(req: *const Request) std.mem.Allocator {
    const arena = Arena.fromAllocator(req.arena) orelse return req.arena;
    return arena.heap();
}

/// 415 with the codings a body may be in (RFC 9110 §15.5.16, §12.5.3).
fn refuse(res: *Response, comptime why: []const u8) Response.Error!Outcome {
    try res.header("Accept-Encoding", decoded_codings);
    res.status = .unsupported_media_type;
    res.content_type = "text/plain; charset=utf-8";
    res.setBody("415 Unsupported Media Type: the request body " ++ why ++ "\n");
    return .answered;
}

fn answerFailure(res: *Response, err: content_encoding.Error, coding: Decoder.Coding, limit: usize) Response.Error!void {
    return switch (err) {
        error.Corrupt => answer(res, .bad_request, "400 Bad Request: the request body is not valid {s} data\n", .{coding.token()}),
        error.Truncated => answer(res, .bad_request, "400 Bad Request: the request body ends before its {s} data does\n", .{coding.token()}),
        error.TooLarge => answer(res, .content_too_large, "413 Content Too Large: the request body decodes to more than {d} bytes, " ++
            "or needs a larger window to decode than the server keeps\n", .{limit}),
        error.OutOfMemory => answer(res, .service_unavailable, "503 Service Unavailable: no memory to decode the request body now\n", .{}),
    };
}

/// Sets `res` to `status` with a text body.
fn answer(res: *Response, status: http.Status, comptime format: []const u8, args: anytype) Response.Error!void {
    res.status = status;
    res.content_type = "text/plain; charset=utf-8";
    res.setBody(res.arena.print(format, args) catch status.phrase());
}

/// Makes `req` the request as sent without its coding (see the top of this file).
fn present(req: *Request, decoded: []const u8) error{OutOfMemory}!void {
    var kept: usize = 0;
    for (req.headers) |field| {
        if (!std.ascii.eqlIgnoreCase(field.name, "Content-Encoding")) kept += 1;
    }
    const headers = try req.arena.alloc(http.Header, kept);
    const length_text = if (req.content_length != null) try req.arena.print("{d}", .{decoded.len}) else "";
    var index: usize = 0;
    for (req.headers) |field| {
        if (std.ascii.eqlIgnoreCase(field.name, "Content-Encoding")) continue;
        headers[index] = field;
        if (req.content_length != null and std.ascii.eqlIgnoreCase(field.name, "Content-Length"))
            headers[index].value = length_text;
        index += 1;
    }
    assert(index == kept);
    req.headers = headers;
    req.body_bytes = decoded;
    if (req.content_length != null) req.content_length = if (decoded.len == 0) null else decoded.len;
}

const testing = std.testing;

/// A request with `fields` and a coded `body` sent with a Content-Length, over `arena`.
fn testRequest(head: *http.RequestHead, fields: []const http.Header, body: []const u8, arena: std.mem.Allocator) Request {
    head.* = .{ .headers = @constCast(fields) };
    var req: Request = .init(head, body, arena);
    req.content_length = body.len;
    req.body_decoding.bytes_max = 1000;
    return req;
}

fn testResponse(arena: std.mem.Allocator, storage: []http.Header) Response {
    return .init(.{ .arena = arena, .header_storage = storage, .body_buffer = &.{}, .body_bytes_max = 1 << 20, .discard_body = false, .stream = null });
}

test "body_decoding.decode: the handler sees the body decoded, without the coding, with its length" {
    var arena_state: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const body = "hello, saker\n";
    var buffer: [64]u8 = undefined;
    const gzip = try compress.Encoder.compressAll(testing.allocator, .{ .coding = .gzip, .level = 6 }, body, &buffer);
    const fields = [_]http.Header{
        .{ .name = "Host", .value = "t" },
        .{ .name = "content-encoding", .value = "gzip" },
        .{ .name = "Content-Length", .value = "33" },
        .{ .name = "Content-Type", .value = "text/plain" },
    };
    var head: http.RequestHead = undefined;
    var req = testRequest(&head, &fields, gzip, arena);
    var storage: [8]http.Header = undefined;
    var res = testResponse(arena, &storage);
    try testing.expectEqual(Outcome.decoded, try decode(&req, &res));
    try testing.expectEqualStrings(body, req.body());
    try testing.expect(!req.hasCodedBody());
    try testing.expectEqual(@as(?u64, body.len), req.content_length);
    try testing.expectEqual(null, req.header("Content-Encoding"));
    try testing.expectEqualStrings("13", req.header("content-length").?);
    try testing.expectEqualStrings("text/plain", req.header("Content-Type").?);
    try testing.expectEqual(3, req.headers.len);
    try testing.expectEqual(http.Status.ok, res.status);
}

test "body_decoding.decode: 415 for unknown codings, 400 for bad data, 413 past the limit" {
    var arena_state: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    var buffer: [64]u8 = undefined;
    const zstd = try compress.Encoder.compressAll(testing.allocator, .{ .coding = .zstd, .level = 3 }, "0123456789", &buffer);
    const Case = struct { coding: []const u8, body: []const u8, limit: u64 = 1000, status: http.Status, says: []const u8 };
    const cases = [_]Case{
        .{ .coding = "compress", .body = "abc", .status = .unsupported_media_type, .says = "does not decode" },
        .{ .coding = "gzip, gzip, gzip, gzip, gzip", .body = "abc", .status = .unsupported_media_type, .says = "more than 4" },
        .{ .coding = "gzip", .body = "not gzip", .status = .bad_request, .says = "not valid gzip data" },
        .{ .coding = "zstd", .body = zstd[0 .. zstd.len - 1], .status = .bad_request, .says = "ends before its zstd data does" },
        .{ .coding = "zstd", .body = zstd, .limit = 9, .status = .content_too_large, .says = "more than 9 bytes" },
        .{ .coding = "zstd", .body = zstd, .limit = 10, .status = .ok, .says = "" },
    };
    for (cases) |case| {
        errdefer std.debug.print("{s}\n", .{case.coding});
        var head: http.RequestHead = undefined;
        var req = testRequest(&head, &.{.{ .name = "Content-Encoding", .value = case.coding }}, case.body, arena);
        req.body_decoding.bytes_max = case.limit;
        var storage: [8]http.Header = undefined;
        var res = testResponse(arena, &storage);
        const outcome = try decode(&req, &res);
        try testing.expectEqual(case.status, res.status);
        if (case.status == .ok) {
            try testing.expectEqual(Outcome.decoded, outcome);
            try testing.expectEqualStrings("0123456789", req.body());
            continue;
        }
        try testing.expectEqual(Outcome.answered, outcome);
        try testing.expect(std.mem.find(u8, res.body.bytes, case.says) != null);
        // The request is left as it came.
        try testing.expectEqualStrings(case.body, req.body());
        try testing.expect(req.hasCodedBody());
        if (case.status == .unsupported_media_type)
            try testing.expectEqualStrings(decoded_codings, res.headers()[0].value);
    }
}

test "body_decoding.decode: a chunked body stays chunked; an empty result has no length" {
    var arena_state: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    var buffer: [64]u8 = undefined;
    for ([_][]const u8{ "some text", "" }) |body| {
        const br = try compress.Encoder.compressAll(testing.allocator, .{ .coding = .br, .level = 5 }, body, &buffer);
        var head: http.RequestHead = undefined;
        var req = testRequest(&head, &.{.{ .name = "Content-Encoding", .value = "br" }}, br, arena);
        req.content_length = null;
        req.chunked = true;
        var storage: [8]http.Header = undefined;
        var res = testResponse(arena, &storage);
        try testing.expectEqual(Outcome.decoded, try decode(&req, &res));
        try testing.expectEqualStrings(body, req.body());
        try testing.expect(req.chunked);
        try testing.expectEqual(null, req.content_length);
        try testing.expectEqual(0, req.headers.len);
        // The same body with a Content-Length.
        var length_head: http.RequestHead = undefined;
        const fields = [_]http.Header{ .{ .name = "Content-Encoding", .value = "br" }, .{ .name = "Content-Length", .value = "x" } };
        var sized = testRequest(&length_head, &fields, br, arena);
        try testing.expectEqual(Outcome.decoded, try decode(&sized, &res));
        try testing.expectEqual(if (body.len == 0) null else @as(?u64, body.len), sized.content_length);
        var digits: [8]u8 = undefined;
        try testing.expectEqualStrings(try std.mem.print(&digits, "{d}", .{body.len}), sized.header("Content-Length").?);
    }
}
