//! Compression on the fly for handlers (RFC 9110 §8.4.1, §12.5.3): a middleware, and the
//! two calls it is made of for handlers that run without a `Router`.
//!
//!     const App = saker.Router(void, .{ .routes = ..., .middleware = &.{saker.middleware.Compress(.{})} });
//!
//!     // Or by hand, in any handler:
//!     const job = try saker.middleware.compression.begin(req, res, &policy);
//!     errdefer job.abort();
//!     ... build the response, stream it, or not ...
//!     try job.end();
//!
//! A whole body (written, or set with `setBody`) is encoded at the end with
//! `Encoder.compressAll` into the request arena. A streamed body (`res.flush`, event streams,
//! a body that outgrows the send buffer on a streaming engine) is encoded as it goes: the
//! middleware stands between the response and the connection's `Response.Stream`, and each
//! chunk is written and flushed through one encoder, so each chunk (each SSE event) decodes
//! on arrival; the encoder's end goes out as the last chunk.
//!
//! What is compressed: a response whose media type the `Policy` lists, of at least
//! `Policy.bytes_min` bytes (a stream whatever its length: its length is not known when it
//! starts), with a status that carries content (not 1xx, 204, 206 or 304), no
//! `Content-Encoding` or `Content-Range` of its own, and a body in memory (`sendFile` bodies
//! go out as they are). Each such response says `Vary: Accept-Encoding` whatever the coding,
//! since a request with another Accept-Encoding would get another representation; so does
//! every 304 (RFC 9110 §15.4.5: it carries the Vary a 200 would).
//!
//! Validators: an `ETag` the handler set is for the identity representation; the encoded one
//! gets its own (`Policy.encodedTag`: `"abc"` becomes `"abc-zstd"`), and an `If-None-Match`
//! that names it turns the response into a 304 here, since the handler only knows its own
//! tag. A HEAD response stays identity (its body is never built, so its encoded length is
//! unknown) but says Vary. Memory: the encoded body and every encoder's state come from the
//! request arena (the Encoder's windows, docs/compression.md); nothing is kept across
//! requests.
const std = @import("std");
const assert = std.debug.assert;
const http = @import("../../http.zig");
const Request = @import("../../Request.zig");
const Response = @import("../../Response.zig");
const compress = @import("../../compress.zig");
const etag = @import("../static/etag.zig");

const Policy = compress.Policy;
const Encoder = compress.Encoder;
const Coding = compress.Coding;

/// A compression middleware for `policy` (checked at compile time).
pub fn Compress(comptime policy: Policy) type {
    comptime policy.validate() catch |err| @compileError("saker.middleware.Compress: " ++ @errorName(err));
    return struct {
        const held = policy;

        /// Middleware entry point.
        pub fn handle(req: *Request, res: *Response, next: anytype) !void {
            const job = try begin(req, res, &held);
            errdefer job.abort();
            try next.run(req, res);
            try job.end();
        }
    };
}

/// Most `Accept-Encoding` field lines read; a request with more is answered in identity.
pub const accept_encoding_lines_max = 16;

/// Output buffered per streamed chunk before it is handed on (in the request arena).
pub const stream_output_bytes = 16 * 1024;

/// One response's compression, in the request arena.
pub const Job = struct {
    req: *const Request,
    res: *Response,
    policy: *const Policy,
    /// The connection's stream, which chunks go to once encoded; null where the engine
    /// does not stream.
    inner: ?Response.Stream,
    /// Whether the first streamed chunk has decided the coding.
    decided: bool = false,
    /// The streamed response's encoder, once a coding is chosen.
    encoder: ?*Encoder = null,
    output: []u8 = &.{},
    /// A streamed chunk failed (the client went away, or memory ran out) with the encoder
    /// part-way through a flush: it takes nothing more, and the stream ends there.
    broken: bool = false,

    /// Encodes what is left and puts the connection's stream back: the last streamed chunk
    /// and the encoder's end, or the whole body. `error.OutOfMemory` when the arena cannot
    /// hold an encoded stream's state (a whole body is sent as it is instead).
    pub fn end(job: *Job) Response.Error!void {
        const res = job.res;
        // A stream that began (its coding decided at the first chunk, whether or not its head
        // went out) ends as a stream; anything else is a whole body.
        if (job.decided and job.inner != null) {
            defer job.dropEncoder();
            if (job.broken) {
                res.stream = job.inner;
                return res.failure orelse error.ClientGone;
            }
            try res.flush(); // through `sendChunk` below: the rest of the body, encoded
            res.stream = job.inner;
            if (job.encoder == null or job.broken) return res.failure orelse {};
            return job.drain(.finish);
        }
        res.stream = job.inner;
        assert(job.encoder == null);
        return compressWhole(job.req, res, job.policy);
    }

    /// Puts the connection's stream back after the handler failed.
    pub fn abort(job: *Job) void {
        job.res.stream = job.inner;
        job.dropEncoder();
    }

    fn dropEncoder(job: *Job) void {
        const encoder = job.encoder orelse return;
        encoder.deinit();
        job.encoder = null;
    }

    fn sendChunk(context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void {
        const job: *Job = @ptrCast(@alignCast(context));
        assert(job.res == res);
        const inner = job.inner.?;
        if (!job.decided) {
            job.decided = true;
            job.startStream() catch |err| {
                if (res.failure == null) res.failure = err;
                return error.ClientGone;
            };
        }
        if (job.encoder == null) return inner.sendChunk(inner.context, res, parts);
        if (job.broken) return error.ClientGone;
        for (parts) |part| job.encode(part) catch |err| return job.failed(err);
        job.drain(.flush) catch |err| return job.failed(err);
    }

    fn failed(job: *Job, err: Response.Error) error{ClientGone} {
        job.broken = true;
        if (job.res.failure == null) job.res.failure = err;
        return error.ClientGone;
    }

    /// Decides the coding of a streamed response at its first chunk, while its head can
    /// still change.
    fn startStream(job: *Job) Response.Error!void {
        const res = job.res;
        if (!eligible(res, job.policy)) return;
        try res.header("Vary", "Accept-Encoding");
        if (res.discard_body) return;
        const coding = chooseCoding(job.req, job.policy) orelse return;
        const encoder = res.arena.create(Encoder) catch return error.OutOfMemory;
        encoder.init(res.arena, job.policy.encoderOptions(coding, true)) catch |err| switch (err) {
            error.OutOfMemory => return error.OutOfMemory,
            // `validate` checked the policy's levels and windows.
            error.LevelOutOfRange, error.WindowOutOfRange => unreachable,
        };
        errdefer encoder.deinit();
        job.output = res.arena.alloc(u8, stream_output_bytes) catch return error.OutOfMemory;
        try setCoding(res, coding);
        job.encoder = encoder;
    }

    /// Feeds `input` through the encoder, handing each full output buffer on.
    fn encode(job: *Job, input: []const u8) Response.Error!void {
        const encoder = job.encoder.?;
        var rest = input;
        var produced: usize = 0;
        while (rest.len > 0) {
            if (job.output.len - produced < Encoder.output_bytes_min) {
                try job.hand(job.output[0..produced]);
                produced = 0;
            }
            const p = encoder.write(rest, job.output[produced..]) catch return error.OutOfMemory;
            rest = rest[p.consumed..];
            produced += p.produced;
        }
        try job.hand(job.output[0..produced]);
    }

    /// Flushes or finishes the encoder, handing its output on.
    fn drain(job: *Job, how: enum { flush, finish }) Response.Error!void {
        const encoder = job.encoder.?;
        while (true) {
            const d = switch (how) {
                .flush => encoder.flush(job.output),
                .finish => encoder.finish(job.output),
            } catch return error.OutOfMemory;
            try job.hand(job.output[0..d.produced]);
            if (d.done) return;
        }
    }

    /// Sends encoded bytes as a chunk; an empty chunk would end an HTTP/1.1 chunked body.
    fn hand(job: *Job, bytes: []const u8) Response.Error!void {
        if (bytes.len == 0) return;
        const inner = job.inner.?;
        inner.sendChunk(inner.context, job.res, &.{bytes}) catch return error.ClientGone;
    }
};

/// Starts compressing `res` under `policy` (which must outlive the response and be valid):
/// where the engine streams, chunks pass through the returned job from now on. Call `end`
/// once the response is built, or `abort` when building it failed.
pub fn begin(req: *const Request, res: *Response, policy: *const Policy) error{OutOfMemory}!*Job {
    const job = res.arena.create(Job) catch return error.OutOfMemory;
    job.* = .{ .req = req, .res = res, .policy = policy, .inner = res.stream };
    if (res.stream != null) res.stream = .{ .context = job, .sendChunk = Job.sendChunk };
    return job;
}

/// Whether a response may be sent in a coding (see the top of this file); not its length.
fn eligible(res: *const Response, policy: *const Policy) bool {
    if (policy.codings.count() == 0) return false;
    const code = res.status.code();
    if (code < 200 or code == 204 or code == 206 or code == 304) return false;
    if (hasField(res, "Content-Encoding") or hasField(res, "Content-Range")) return false;
    return policy.compressible(res.content_type);
}

fn hasField(res: *const Response, name: []const u8) bool {
    for (res.headers()) |field| if (std.ascii.eqlIgnoreCase(field.name, name)) return true;
    return false;
}

/// The coding the request's `Accept-Encoding` prefers among the policy's, or null for
/// identity (also when the field is garbage or refuses everything: identity is what every
/// client reads).
fn chooseCoding(req: *const Request, policy: *const Policy) ?Coding {
    var lines: [accept_encoding_lines_max][]const u8 = undefined;
    var count: usize = 0;
    for (req.headers) |field| {
        if (!std.ascii.eqlIgnoreCase(field.name, "Accept-Encoding")) continue;
        if (count == lines.len) return null;
        lines[count] = field.value;
        count += 1;
    }
    return compress.negotiate.choose(lines[0..count], policy.codings).codingOrIdentity();
}

/// Sets Content-Encoding and turns the handler's ETag into the encoded representation's.
fn setCoding(res: *Response, coding: Coding) Response.Error!void {
    try res.header("Content-Encoding", coding.token());
    const field = etagField(res) orelse return;
    field.value = (try Policy.encodedTag(res.arena, field.value, coding)) orelse return;
}

fn etagField(res: *Response) ?*http.Header {
    for (res.header_list.items) |*field| if (std.ascii.eqlIgnoreCase(field.name, "ETag")) return field;
    return null;
}

/// Encodes a finished body in memory, or leaves it as it is (see the top of this file).
pub fn compressWhole(req: *const Request, res: *Response, policy: *const Policy) Response.Error!void {
    if (res.status == .not_modified and policy.codings.count() > 0) return res.header("Vary", "Accept-Encoding");
    if (!eligible(res, policy)) return;
    const input: []const u8 = switch (res.body) {
        .buffered => res.bufferedBody(),
        .bytes => |bytes| bytes,
        .file => return,
    };
    if (res.contentLength() < policy.bytes_min) return;
    try res.header("Vary", "Accept-Encoding");
    if (res.discard_body) return;
    assert(input.len == res.contentLength());
    const coding = chooseCoding(req, policy) orelse return;
    // RFC 9110 §13.1.2: If-None-Match answers 304 to GET and HEAD only.
    const conditional = req.method == .GET or req.method == .HEAD;
    if (etagField(res)) |field| if (req.header("If-None-Match")) |wanted| if (conditional) {
        const tag = (try Policy.encodedTag(res.arena, field.value, coding)) orelse field.value;
        const opaque_tag = if (std.mem.startsWith(u8, tag, "W/")) tag[2..] else tag;
        if (opaque_tag.len >= 2 and opaque_tag[0] == '"' and etag.listMatches(wanted, opaque_tag, .weak)) {
            field.value = tag;
            res.status = .not_modified;
            res.content_type = null;
            res.setBody("");
            return;
        }
    };
    const output = res.arena.alloc(u8, Encoder.boundBytes(coding, input.len)) catch return error.OutOfMemory;
    const encoded = Encoder.compressAll(res.arena, policy.wholeOptions(coding, input.len), input, output) catch |err| switch (err) {
        // The arena is bounded (`arena_request_bytes_max`): the body goes out as it is.
        error.OutOfMemory => return,
        error.LevelOutOfRange, error.WindowOutOfRange => unreachable, // `validate` checked them
        error.NoSpaceLeft => unreachable, // `boundBytes` always suffices
    };
    // Incompressible after all (the type promised text): the original is smaller.
    if (encoded.len >= input.len) return;
    res.setBody(encoded);
    try setCoding(res, coding);
}

// Tests: unit tests here run handlers through `saker.testing`'s HandlerCall; streams and real
// clients are in tests/compress.zig.

const HandlerCall = @import("../../testing/HandlerCall.zig");
const decode = @import("../../compress/decode.zig");

const text_body = repeat("saker compresses this line of text. ", 64);

fn repeat(comptime text: []const u8, comptime n: usize) []const u8 {
    comptime var out: []const u8 = "";
    inline for (0..n) |_| out = out ++ text;
    return out;
}

const Fixture = struct {
    arena_state: std.heap.ArenaAllocator,
    call: HandlerCall,

    fn run(f: *Fixture, policy: *const Policy, options: HandlerCall.Options, build: *const fn (*Response) anyerror!void) !void {
        f.call.init(options);
        const job = try begin(&f.call.request, &f.call.response, policy);
        errdefer job.abort();
        try build(&f.call.response);
        try job.end();
    }
};

fn textHandler(res: *Response) anyerror!void {
    res.content_type = "text/plain; charset=utf-8";
    try res.header("ETag", "\"v1\"");
    try res.writeAll(text_body);
}

test "compression: every coding round-trips through an independent decoder" {
    const gpa = std.testing.allocator;
    const policy: Policy = .{};
    inline for (.{ "zstd", "br", "gzip", "x-gzip" }, [_]Coding{ .zstd, .br, .gzip, .gzip }) |token, coding| {
        var f: Fixture = .{ .arena_state = .init(gpa), .call = undefined };
        defer f.arena_state.deinit();
        const headers = [_]http.Header{.{ .name = "accept-encoding", .value = token }};
        try f.run(&policy, .{ .headers = &headers, .arena = f.arena_state.allocator() }, textHandler);
        try std.testing.expectEqualStrings(coding.token(), f.call.header("Content-Encoding").?);
        try std.testing.expectEqualStrings("Accept-Encoding", f.call.header("Vary").?);
        const tag = try std.fmt.allocPrint(f.arena_state.allocator(), "\"v1-{s}\"", .{coding.token()});
        try std.testing.expectEqualStrings(tag, f.call.header("ETag").?);
        const body = f.call.response.body.bytes;
        try std.testing.expect(body.len < text_body.len / 4);
        const decoded = try decode.decode(gpa, coding, body);
        defer gpa.free(decoded.bytes);
        try std.testing.expect(decoded.complete);
        try std.testing.expectEqualStrings(text_body, decoded.bytes);
    }
}

test "compression: identity for garbage, absence, refusals, small bodies and other types" {
    const gpa = std.testing.allocator;
    const policy: Policy = .{};
    const Case = struct { accept: ?[]const u8, vary: bool, build: *const fn (*Response) anyerror!void };
    const handlers = struct {
        fn small(res: *Response) anyerror!void {
            res.content_type = "text/plain";
            try res.writeAll("short");
        }
        fn png(res: *Response) anyerror!void {
            res.content_type = "image/png";
            try res.writeAll(text_body);
        }
        fn encoded(res: *Response) anyerror!void {
            res.content_type = "text/plain";
            try res.header("Content-Encoding", "gzip");
            try res.writeAll(text_body);
        }
        fn created(res: *Response) anyerror!void {
            res.status = .no_content;
            res.content_type = "text/plain";
        }
    };
    const cases = [_]Case{
        .{ .accept = null, .vary = true, .build = textHandler },
        .{ .accept = "", .vary = true, .build = textHandler },
        .{ .accept = "gzip;q=2", .vary = true, .build = textHandler },
        .{ .accept = "\x00\xff;;,", .vary = true, .build = textHandler },
        .{ .accept = "gzip;q=0, br;q=0, zstd;q=0", .vary = true, .build = textHandler },
        .{ .accept = "deflate, compress", .vary = true, .build = textHandler },
        .{ .accept = "gzip", .vary = false, .build = handlers.small },
        .{ .accept = "gzip", .vary = false, .build = handlers.png },
        .{ .accept = "gzip", .vary = false, .build = handlers.encoded },
        .{ .accept = "gzip", .vary = false, .build = handlers.created },
    };
    for (cases) |case| {
        var f: Fixture = .{ .arena_state = .init(gpa), .call = undefined };
        defer f.arena_state.deinit();
        const headers = [_]http.Header{.{ .name = "Accept-Encoding", .value = case.accept orelse "" }};
        const fields: []const http.Header = if (case.accept != null) &headers else &.{};
        try f.run(&policy, .{ .headers = fields, .arena = f.arena_state.allocator() }, case.build);
        const expected_coding: ?[]const u8 = if (case.build == handlers.encoded) "gzip" else null;
        try std.testing.expectEqual(expected_coding != null, f.call.header("Content-Encoding") != null);
        try std.testing.expectEqual(case.vary, f.call.header("Vary") != null);
        if (case.build == textHandler) try std.testing.expectEqualStrings("\"v1\"", f.call.header("ETag").?);
    }
}

test "compression: If-None-Match with the encoded tag is a 304; HEAD stays identity" {
    const gpa = std.testing.allocator;
    const policy: Policy = .{};
    {
        var f: Fixture = .{ .arena_state = .init(gpa), .call = undefined };
        defer f.arena_state.deinit();
        const headers = [_]http.Header{
            .{ .name = "Accept-Encoding", .value = "br" },
            .{ .name = "If-None-Match", .value = "\"other\", W/\"v1-br\"" },
        };
        try f.run(&policy, .{ .headers = &headers, .arena = f.arena_state.allocator() }, textHandler);
        try std.testing.expectEqual(http.Status.not_modified, f.call.response.status);
        try std.testing.expectEqualStrings("\"v1-br\"", f.call.header("ETag").?);
        try std.testing.expectEqual(@as(u64, 0), f.call.response.contentLength());
    }
    {
        // The identity tag does not match the br representation: a 200 in br.
        var f: Fixture = .{ .arena_state = .init(gpa), .call = undefined };
        defer f.arena_state.deinit();
        const headers = [_]http.Header{
            .{ .name = "Accept-Encoding", .value = "br" },
            .{ .name = "If-None-Match", .value = "\"v1\"" },
        };
        try f.run(&policy, .{ .headers = &headers, .arena = f.arena_state.allocator() }, textHandler);
        try std.testing.expectEqual(http.Status.ok, f.call.response.status);
        try std.testing.expectEqualStrings("br", f.call.header("Content-Encoding").?);
    }
    {
        var f: Fixture = .{ .arena_state = .init(gpa), .call = undefined };
        defer f.arena_state.deinit();
        const headers = [_]http.Header{.{ .name = "Accept-Encoding", .value = "gzip" }};
        try f.run(&policy, .{ .method = .HEAD, .headers = &headers, .arena = f.arena_state.allocator() }, textHandler);
        try std.testing.expectEqual(@as(?[]const u8, null), f.call.header("Content-Encoding"));
        try std.testing.expectEqualStrings("Accept-Encoding", f.call.header("Vary").?);
        try std.testing.expectEqual(@as(u64, text_body.len), f.call.response.contentLength());
    }
}

test "compression: a streamed body is encoded chunk by chunk, each chunk decodable on arrival" {
    const gpa = std.testing.allocator;
    const Sink = struct {
        sent: std.ArrayList(u8) = .empty,
        chunks: usize = 0,
        fn sendChunk(context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void {
            const sink: *@This() = @ptrCast(@alignCast(context));
            res.streaming = true;
            for (parts) |part| {
                assert(part.len > 0);
                sink.sent.appendSlice(std.testing.allocator, part) catch return error.ClientGone;
            }
            sink.chunks += 1;
        }
    };
    for ([_]Coding{ .zstd, .br, .gzip }) |coding| {
        var arena_state: std.heap.ArenaAllocator = .init(gpa);
        defer arena_state.deinit();
        var sink: Sink = .{};
        defer sink.sent.deinit(gpa);
        var call: HandlerCall = undefined;
        const headers = [_]http.Header{.{ .name = "Accept-Encoding", .value = coding.token() }};
        call.init(.{ .headers = &headers, .arena = arena_state.allocator() });
        const res = &call.response;
        res.stream = .{ .context = &sink, .sendChunk = Sink.sendChunk };
        const policy: Policy = .{ .stream_window_log = 15 };
        const job = try begin(&call.request, res, &policy);
        errdefer job.abort();
        var events = try res.eventStream();
        var expected: std.ArrayList(u8) = .empty;
        defer expected.deinit(gpa);
        for (0..3) |i| {
            const data = try std.fmt.allocPrint(arena_state.allocator(), "event {d}", .{i});
            try events.send(.{ .data = data });
            try expected.print(gpa, "data: event {d}\n\n", .{i});
            // What has arrived so far decodes to every event sent so far.
            const decoded = try decode.decode(gpa, coding, sink.sent.items);
            defer gpa.free(decoded.bytes);
            try std.testing.expect(!decoded.complete);
            try std.testing.expectEqualStrings(expected.items, decoded.bytes);
        }
        try job.end();
        try std.testing.expectEqual(res.stream.?.context, @as(*anyopaque, &sink));
        try std.testing.expectEqualStrings(coding.token(), call.header("Content-Encoding").?);
        const decoded = try decode.decode(gpa, coding, sink.sent.items);
        defer gpa.free(decoded.bytes);
        try std.testing.expect(decoded.complete);
        try std.testing.expectEqualStrings(expected.items, decoded.bytes);
    }
}

test "Compress: a middleware of a Router" {
    const Router = @import("../Router.zig").Router;
    const handlers = struct {
        fn page(req: *Request, res: *Response) !void {
            _ = req;
            res.content_type = "text/html";
            try res.writeAll(text_body);
        }
    };
    const App = Router(void, .{ .routes = &.{.get("/", handlers.page)}, .middleware = &.{Compress(.{ .codings = .initOne(.gzip) })} });
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var app: App = .{ .context = {} };
    var call: HandlerCall = undefined;
    const headers = [_]http.Header{.{ .name = "Accept-Encoding", .value = "zstd, br, gzip;q=0.5" }};
    try call.run(&app, .{ .headers = &headers, .arena = arena_state.allocator() });
    try std.testing.expectEqualStrings("gzip", call.header("Content-Encoding").?);
    const decoded = try decode.decode(std.testing.allocator, .gzip, call.response.body.bytes);
    defer std.testing.allocator.free(decoded.bytes);
    try std.testing.expectEqualStrings(text_body, decoded.bytes);
}

test "compression: a client gone in the middle of a multi-part flush, then the handler returns normally" {
    // review4: a streamed chunk whose flush needs more than `stream_output_bytes` of output
    // (40 KiB that do not compress) reaches `hand` while the encoder is `.flushing`; the
    // client is gone, so `drain(.flush)` stops there. A handler that swallows
    // `error.ClientGone` (`res.flush() catch {}`, an SSE loop that `catch return`s) then
    // returns; `end` flushes the unsent bytes again (`Encoder.write` asserts `.open`) or
    // finishes (`Encoder.finish` asserts `.open` or `.finishing`): an assertion failure.
    const gpa = std.testing.allocator;
    const GoneSink = struct {
        fn sendChunk(context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void {
            _ = context;
            _ = parts;
            res.streaming = true; // the head went out, then the peer closed
            return error.ClientGone;
        }
    };
    for ([_]Coding{ .zstd, .br, .gzip }) |coding| {
        var arena_state: std.heap.ArenaAllocator = .init(gpa);
        defer arena_state.deinit();
        var call: HandlerCall = undefined;
        const headers = [_]http.Header{.{ .name = "Accept-Encoding", .value = coding.token() }};
        call.init(.{ .headers = &headers, .arena = arena_state.allocator() });
        const res = &call.response;
        var dummy: u8 = 0;
        res.stream = .{ .context = &dummy, .sendChunk = GoneSink.sendChunk };
        const policy: Policy = .{};
        const job = try begin(&call.request, res, &policy);
        errdefer job.abort();
        res.content_type = "text/plain";
        var noise: [40 * 1024]u8 = undefined;
        var prng: std.Random.DefaultPrng = .init(0x5a4e);
        prng.random().bytes(&noise);
        try std.testing.expectError(error.ClientGone, res.writeAll(&noise));
        // The handler shrugs the disconnect off and returns; the middleware ends the job.
        job.end() catch {};
        job.abort();
    }
}

test "compression: the first streamed chunk fails before the head goes out, then the handler returns normally" {
    // review4: `startStream` makes an encoder, then the connection's `sendChunk` fails before
    // it sets `res.streaming` (HTTP/1's `sendEarlier` failing for a pipelined request, or
    // the head's arena allocation). A handler that swallows `error.ClientGone` returns;
    // `end` sees `res.streaming` false, takes the whole-body path and asserts
    // `job.encoder == null`: an assertion failure (and the encoder is never freed).
    const gpa = std.testing.allocator;
    const FailingSink = struct {
        fn sendChunk(context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void {
            _ = context;
            _ = res;
            _ = parts;
            return error.ClientGone; // before any head: `res.streaming` stays false
        }
    };
    var arena_state: std.heap.ArenaAllocator = .init(gpa);
    defer arena_state.deinit();
    var call: HandlerCall = undefined;
    const headers = [_]http.Header{.{ .name = "Accept-Encoding", .value = "gzip" }};
    call.init(.{ .headers = &headers, .arena = arena_state.allocator() });
    const res = &call.response;
    var dummy: u8 = 0;
    res.stream = .{ .context = &dummy, .sendChunk = FailingSink.sendChunk };
    const policy: Policy = .{};
    const job = try begin(&call.request, res, &policy);
    errdefer job.abort();
    res.content_type = "text/plain";
    try res.writeAll(text_body[0..100]);
    try std.testing.expectError(error.ClientGone, res.flush());
    // The handler shrugs the disconnect off and returns; the middleware ends the job.
    job.end() catch {};
    job.abort();
}

test "compression: If-None-Match on a POST is not answered 304" {
    // review4: `compressWhole` turns any response whose encoded tag the request's
    // If-None-Match names into a 304, whatever the method; RFC 9110 §13.1.2 allows 304 only
    // for GET and HEAD (other methods get 412, and a handler that did not evaluate the
    // precondition itself meant its 200).
    const gpa = std.testing.allocator;
    const policy: Policy = .{};
    var f: Fixture = .{ .arena_state = .init(gpa), .call = undefined };
    defer f.arena_state.deinit();
    const headers = [_]http.Header{
        .{ .name = "Accept-Encoding", .value = "gzip" },
        .{ .name = "If-None-Match", .value = "*" },
    };
    try f.run(&policy, .{ .method = .POST, .headers = &headers, .arena = f.arena_state.allocator() }, textHandler);
    try std.testing.expect(f.call.response.status != .not_modified);
}
