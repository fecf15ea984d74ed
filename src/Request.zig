//! A request as a handler sees it. Every slice borrows the connection's receive buffer (or,
//! for a large body, the request arena) and is valid until the handler returns; copy what
//! must live longer into `arena`, which lives until the response has been sent.
const std = @import("std");
const tls_facts = @import("tls/facts.zig");
const http = @import("http.zig");
const handshake = @import("websocket/handshake.zig");
const Arena = @import("Arena.zig");
const percent = @import("percent.zig");
const content_type = @import("content_type.zig");
const cookie_header = @import("app/cookies.zig");
const multipart_body = @import("app/multipart.zig");

const Request = @This();

const log = std.log.scoped(.saker);

method: http.Method,
/// The request-target exactly as sent.
target: []const u8,
/// The path part of the target, still percent-encoded.
path: []const u8,
/// The query without its '?', still percent-encoded; "" when there is none. `query()` parses it.
raw_query: []const u8,
version: http.Version,
/// Header fields in the order received, names in the case sent, values trimmed.
headers: []const http.Header,
/// The Host field, or the authority of an absolute-form target.
host: ?[]const u8,
/// Whether the client allows the connection to stay open after this request.
keep_alive: bool,
/// The Upgrade field value, if any.
upgrade: ?[]const u8,
/// Whether the Connection field lists "upgrade".
connection_upgrade: bool,
/// The body's declared length, if it was sent with a non-zero Content-Length.
content_length: ?u64,
/// Whether a body follows whose length was not declared: sent chunked over HTTP/1.1, in DATA
/// frames without content-length over HTTP/2.
chunked: bool,
/// The whole body, decoded.
body_bytes: []const u8,
/// Memory for the handler, freed after the response has been sent.
arena: std.mem.Allocator,
/// Path parameters captured by a `Router` (`:name` and `*name` segments), still
/// percent-encoded; empty otherwise. Valid while the route's handler runs.
params: []const PathParam = &.{},
/// Free for the handler's use during one request (e.g. state shared by `onHead`, `onBody`
/// and `handle`); null at the start of every request.
user_data: ?*anyopaque = null,

/// Index of the worker running the handler, below `Server(H).workerCountFor(config)`: the
/// engine thread for `epoll`, `io_uring` and `blocking` (its handler pool threads, if any,
/// share it); 0 on the thread-based engines, whose connection threads all share it. State a
/// handler keeps per index may thus be touched by several threads: guard it.
worker_index: u32 = 0,
/// The client's address (and port), when the engine knows it.
peer: ?std.Io.net.IpAddress = null,
/// The connection's TLS session (see `tls()`); null in plaintext.
tls_session: ?tls_facts.Session = null,
/// The request's id, with `Config.request_id` on: the client's `X-Request-Id` when usable (1 to
/// 128 visible ASCII bytes), else one made for it (16 hex digits); null when it is off.
request_id: ?[]const u8 = null,
/// Whether the server was shutting down when the request arrived: it is answered, then the
/// connection closes (health checks answer 503, `saker.health`).
server_draining: bool = false,
/// Where `bodyReader()` reads from; set by the connection.
body_source: BodySource = .buffered,
/// `bodyReader()` over a buffered body.
fixed_reader: std.Io.Reader = undefined,
/// The parameter a convenience call last refused, named in the 400 answer.
fault: Fault = .{},
/// How the server treats a body in a `Content-Encoding` for a handler that declares
/// `decodes_content_encoding`: set by the connection and the server's dispatch.
body_decoding: BodyDecoding = .{},

/// Longest parameter name kept for an error message (longer ones are cut).
pub const fault_name_bytes_max = 32;

/// Which parameter made a convenience call fail, and with what error, kept (in a fixed
/// buffer: no allocation) so the 400 answer can name it: `invalid parameter "page"`.
pub const Fault = struct {
    err: ?anyerror = null,
    name_buffer: [fault_name_bytes_max]u8 = undefined,
    name_len: u8 = 0,

    /// Records that `name` caused `err`; returns `err`.
    pub fn blame(fault: *Fault, err: anytype, name: []const u8) @TypeOf(err) {
        const kept = name[0..@min(name.len, fault_name_bytes_max)];
        @memcpy(fault.name_buffer[0..kept.len], kept);
        fault.name_len = @intCast(kept.len);
        fault.err = err;
        return err;
    }

    /// The parameter to blame for `err`, if the last recorded failure was `err`.
    pub fn nameFor(fault: *const Fault, err: anyerror) ?[]const u8 {
        const recorded = fault.err orelse return null;
        if (recorded != err) return null;
        return fault.name_buffer[0..fault.name_len];
    }
};

/// What the server's dispatch needs to decode a body in a `Content-Encoding` before `handle`
/// (`Server`, docs/compression.md).
pub const BodyDecoding = struct {
    /// The most bytes the body may decode to (`Config.decodedBodyBytesMax()`); 0 until the
    /// connection sets it.
    bytes_max: u64 = 0,
    /// `onHead` chose `.skip`: the body is never read, so there is nothing to decode, and
    /// `handle` sees the request as it came.
    skipped: bool = false,
};

/// Bytes of the buffer `bodyReader()` gives a streamed body's reader (from `arena`): the most
/// a handler can `peek` at once.
pub const body_reader_buffer_bytes = 4096;

/// Where `bodyReader()` gets the body from.
pub const BodySource = union(enum) {
    /// The body is in `body_bytes` (buffered before `handle`).
    buffered,
    /// `fixed_reader` reads `body_bytes`.
    fixed,
    /// The body is read as it arrives, on the handler's thread.
    stream: *BodyStream,
    /// The body was to be read as it arrives, but the handler runs on an event loop thread,
    /// which must not wait for it.
    unavailable,
};

/// A body read as it arrives: the reader, and why it stopped early, if it did.
pub const BodyStream = struct {
    interface: std.Io.Reader,
    failure: ?BodyReadFailure = null,
};

/// Why reading a streamed body failed (`error.ReadFailed` from its reader). When the handler
/// returns an error after one, the server answers with the status named here (or just closes
/// when the client is gone), not 500.
pub const BodyReadFailure = enum {
    /// Over `Config.streamed_body_bytes_max` (413).
    too_large,
    /// Invalid chunked framing (400).
    malformed,
    /// Not received within `Config.body_timeout_ms` (408).
    timeout,
    /// The client closed or reset the connection.
    client_gone,
};

/// Errors of `bodyReader`.
pub const BodyReaderError = error{
    /// The body is streamed to this handler, but it runs on an event loop thread that must not
    /// wait for it: run it on the handler pool (a router route flagged
    /// `.with(.{ .body_reader = true }, ...)`, `pub const blocking = true`, or
    /// `Config.handler_threads`), or on a thread-based engine.
    BodyReaderUnavailable,
    /// The reader's buffer could not be taken from the arena.
    OutOfMemory,
};

/// A path parameter captured by a `Router`.
pub const PathParam = struct { name: []const u8, value: []const u8 };

/// Builds the request view of a parsed head and its body.
/// What the client's TLS session is (version, cipher, SNI name, ALPN); null in plaintext.
pub fn tls(req: *const Request) ?tls_facts.Facts {
    const session = req.tls_session orelse return null;
    return session.describe(session.context);
}

/// The subject of the certificate the client presented (mutual TLS, `Config.Tls.client_ca_file`),
/// written into `buffer` ("/CN=alice/O=example"); null when there is none.
pub fn tlsClientSubject(req: *const Request, buffer: []u8) ?[]const u8 {
    const session = req.tls_session orelse return null;
    return session.client_subject(session.context, buffer);
}

pub fn init(head: *const http.RequestHead, body_bytes: []const u8, arena: std.mem.Allocator) Request {
    return .{
        .method = head.method,
        .target = head.target,
        .path = head.path,
        .raw_query = head.query,
        .version = head.version,
        .headers = head.headers,
        .host = head.host,
        .keep_alive = head.keep_alive,
        .upgrade = head.upgrade,
        .connection_upgrade = head.connection_upgrade,
        .content_length = head.content_length,
        .chunked = head.chunked,
        .body_bytes = body_bytes,
        .arena = arena,
    };
}

/// Whether `value` may be a request id: 1 to 128 visible ASCII bytes (so it can be echoed
/// in a header and logged as it is).
pub fn usableRequestId(value: []const u8) bool {
    if (value.len == 0 or value.len > 128) return false;
    for (value) |c| if (c < 0x21 or c > 0x7e) return false;
    return true;
}

/// The client's address: the peer of the connection, or the address a PROXY protocol header
/// named (`Config.proxy_protocol`); null when the engine could not learn it.
pub fn remoteAddress(req: *const Request) ?std.Io.net.IpAddress {
    return req.peer;
}

/// The value of the first field called `name` (ASCII case-insensitive), or null.
pub fn header(req: *const Request, name: []const u8) ?[]const u8 {
    for (req.headers) |field| {
        if (field.name.len == name.len and std.ascii.eqlIgnoreCase(field.name, name)) return field.value;
    }
    return null;
}

/// Whether the body is sent in a content coding (RFC 9110 §8.4): a body, and a
/// `Content-Encoding` that names anything but `identity`. The server refuses such a request
/// with 415 unless the handler declares `pub const decodes_content_encoding = true` (the
/// server then decodes the body before `handle`, which sees it decoded and this false) or
/// `pub const accepts_content_encoding = true` (the handler decodes it itself).
pub fn hasCodedBody(req: *const Request) bool {
    if (req.content_length == null and !req.chunked) return false;
    for (req.headers) |field| {
        if (!std.ascii.eqlIgnoreCase(field.name, "Content-Encoding")) continue;
        var it = std.mem.splitScalar(u8, field.value, ',');
        while (it.next()) |member| {
            const coding = std.mem.trim(u8, member, " \t");
            if (coding.len > 0 and !std.ascii.eqlIgnoreCase(coding, "identity")) return true;
        }
    }
    return false;
}

/// Whether the client asks to switch to the WebSocket protocol (RFC 6455 §4.1): a GET with
/// `Upgrade: websocket` and `Connection: upgrade`. Answer with `res.upgradeWebSocket`.
pub fn isWebSocketUpgrade(req: *const Request) bool {
    return req.method == .GET and req.connection_upgrade and handshake.upgradesToWebSocket(req.upgrade);
}

/// The request body, decoded from Content-Length or chunked framing ("" when there is none).
pub fn body(req: *const Request) []const u8 {
    return req.body_bytes;
}

/// The body as a `std.Io.Reader`, decoded from Content-Length or chunked framing. When the
/// handler asked for it to be streamed (`BodyAction.reader` from `onHead`; a router route
/// flagged `body_reader`), it reads the body as it arrives, blocking until bytes come, and
/// never holds more than a buffer of it: a `Content-Length` beyond
/// `Config.streamed_body_bytes_max` is refused (413) before `handle` runs, a chunked body
/// that grows beyond it fails the read. The first read answers `Expect: 100-continue`.
/// After `error.ReadFailed`, `bodyReadFailure()` says why. Otherwise it reads the buffered
/// `body()`. Calling it again returns the same reader. Body bytes the handler leaves unread
/// are skipped when they have arrived already; otherwise the connection closes after the
/// response.
pub fn bodyReader(req: *Request) BodyReaderError!*std.Io.Reader {
    switch (req.body_source) {
        .buffered => {
            req.fixed_reader = .fixed(req.body_bytes);
            req.body_source = .fixed;
            return &req.fixed_reader;
        },
        .fixed => return &req.fixed_reader,
        .stream => |stream| {
            if (stream.interface.buffer.len == 0)
                stream.interface.buffer = try req.arena.alloc(u8, body_reader_buffer_bytes);
            return &stream.interface;
        },
        .unavailable => {
            log.warn("{s} {s}: req.bodyReader() needs a handler thread that may block; " ++
                "flag the route .body_reader, declare `pub const blocking = true`, or set Config.handler_threads", .{ req.method.name(), req.path });
            return error.BodyReaderUnavailable;
        },
    }
}

/// Why the streamed body's reader failed, or null when it has not.
pub fn bodyReadFailure(req: *const Request) ?BodyReadFailure {
    return switch (req.body_source) {
        .stream => |stream| stream.failure,
        else => null,
    };
}

/// The query string, parsed lazily: nothing is scanned until it is asked for.
pub fn query(req: *Request) Query {
    return .{ .raw = req.raw_query, .fault = &req.fault };
}

/// The percent-decoded value of the first query parameter named `name`, or null. Copies into
/// `arena` only when the value holds escapes.
pub fn queryParam(req: *Request, name: []const u8) DecodeError!?[]const u8 {
    return req.query().getDecoded(req.arena, name);
}

/// The path parameter `name` captured by the router, as sent (percent-encoded), or null when
/// the route has no such parameter.
pub fn param(req: *const Request, name: []const u8) ?[]const u8 {
    for (req.params) |p| if (std.mem.eql(u8, p.name, name)) return p.value;
    return null;
}

/// The path parameter `name`, percent-decoded (copied into `arena` only when it holds
/// escapes), or null.
pub fn paramDecoded(req: *Request, name: []const u8) DecodeError!?[]const u8 {
    const raw = req.param(name) orelse return null;
    return percent.decodeAlloc(req.arena, raw, .path) catch |err| switch (err) {
        error.InvalidPercentEncoding => req.fault.blame(err, name),
        error.OutOfMemory => err,
    };
}

/// The path parameter `name` as an integer of type `T`. `error.MissingParameter` when the
/// route has no such parameter, `error.InvalidParameter` when it is not a decimal `T`.
pub fn paramInt(req: *Request, comptime T: type, name: []const u8) error{ MissingParameter, InvalidParameter }!T {
    const raw = req.param(name) orelse return req.fault.blame(error.MissingParameter, name);
    return std.fmt.parseInt(T, raw, 10) catch req.fault.blame(error.InvalidParameter, name);
}

/// Errors of the decoding conveniences.
pub const DecodeError = percent.Error || std.mem.Allocator.Error;

/// The request's cookies (every `Cookie` field), parsed lazily.
pub fn cookies(req: *const Request) cookie_header.Jar {
    return .{ .headers = req.headers };
}

/// The value of the cookie `name`, or null; `error.InvalidCookie` for a malformed field.
pub fn cookie(req: *const Request, name: []const u8) cookie_header.Error!?[]const u8 {
    return req.cookies().get(name);
}

/// The body as an `application/x-www-form-urlencoded` form (same syntax and methods as the
/// query). `error.UnsupportedMediaType` when the Content-Type says otherwise.
pub fn formData(req: *Request) error{UnsupportedMediaType}!Query {
    const value = req.header("content-type") orelse return error.UnsupportedMediaType;
    if (!content_type.is(value, "application/x-www-form-urlencoded")) return error.UnsupportedMediaType;
    return .{ .raw = req.body_bytes, .fault = &req.fault };
}

/// Errors of `multipart`.
pub const MultipartError = multipart_body.Error || error{ UnsupportedMediaType, OutOfMemory };

/// Reads the (buffered) body as `multipart/form-data` (RFC 7578), part by part, within
/// `limits`. `error.UnsupportedMediaType` for another Content-Type; `error.InvalidMultipart`
/// when the boundary parameter is missing or invalid (and later for a malformed body).
pub fn multipart(req: *const Request, limits: multipart_body.Limits) MultipartError!multipart_body.Reader {
    const boundary = try multipartBoundary(req);
    const header_buffer = try req.arena.alloc(u8, limits.part_header_bytes_max);
    return .init(req.body_bytes, boundary, header_buffer, limits);
}

/// A streaming `multipart/form-data` parser for this request's body (its header buffer in
/// `arena`), for a route that receives the body piece by piece (`onBody`). Same errors as
/// `multipart`.
pub fn multipartParser(req: *const Request, limits: multipart_body.Limits) MultipartError!multipart_body.Parser {
    const boundary = try multipartBoundary(req);
    const header_buffer = try req.arena.alloc(u8, limits.part_header_bytes_max);
    return .init(boundary, header_buffer, limits);
}

fn multipartBoundary(req: *const Request) MultipartError![]const u8 {
    const value = req.header("content-type") orelse return error.UnsupportedMediaType;
    if (!content_type.is(value, "multipart/form-data")) return error.UnsupportedMediaType;
    return content_type.parameter(value, "boundary") orelse error.InvalidMultipart;
}

/// Errors of `json`.
pub const JsonError = error{ InvalidJson, UnsupportedMediaType, OutOfMemory };

/// Parses the body as JSON into a `T` allocated in `arena` (`std.json`; unknown fields are
/// ignored). `error.InvalidJson` for malformed JSON or a shape that does not fit `T`;
/// `error.UnsupportedMediaType` when a Content-Type is sent and is not JSON.
pub fn json(req: *const Request, comptime T: type) JsonError!T {
    return req.jsonWith(T, .{ .ignore_unknown_fields = true });
}

/// `json` with explicit `std.json` parse options.
pub fn jsonWith(req: *const Request, comptime T: type, options: std.json.ParseOptions) JsonError!T {
    if (req.header("content-type")) |value| {
        if (!content_type.isJson(value)) return error.UnsupportedMediaType;
    }
    return std.json.parseFromSliceLeaky(T, req.arena, req.body_bytes, options) catch |err| switch (err) {
        error.OutOfMemory => error.OutOfMemory,
        else => error.InvalidJson,
    };
}

/// Usage counters of this worker's request arena, or null when `arena` is not one (tests).
pub fn arenaStats(req: *const Request) ?Arena.Stats {
    const arena = Arena.fromAllocator(req.arena) orelse return null;
    return arena.stats();
}

/// A lazily parsed `application/x-www-form-urlencoded` query or form body. Pairs are kept as
/// sent; `getDecoded` and `Param.decodeValue` decode on request.
pub const Query = struct {
    /// The query without its '?' (or the form body).
    raw: []const u8,
    /// Where a failing `getDecoded`/`getInt` records the parameter's name (the request's).
    fault: ?*Fault = null,

    /// One `name=value` pair, still percent-encoded.
    pub const Param = struct {
        name: []const u8,
        value: []const u8,

        /// The name, decoded ('+' is a space); copied into `arena` only when needed.
        pub fn decodeName(p: Param, arena: std.mem.Allocator) DecodeError![]const u8 {
            return percent.decodeAlloc(arena, p.name, .form);
        }

        /// The value, decoded ('+' is a space); copied into `arena` only when needed.
        pub fn decodeValue(p: Param, arena: std.mem.Allocator) DecodeError![]const u8 {
            return percent.decodeAlloc(arena, p.value, .form);
        }
    };

    /// Iterates the pairs in order; empty pairs are skipped, a pair without '=' has value "".
    pub const Iterator = struct {
        rest: []const u8,

        /// The next pair, or null.
        pub fn next(it: *Iterator) ?Param {
            while (it.rest.len > 0) {
                const amp = std.mem.findScalar(u8, it.rest, '&') orelse it.rest.len;
                const pair = it.rest[0..amp];
                it.rest = if (amp < it.rest.len) it.rest[amp + 1 ..] else it.rest[it.rest.len..];
                if (pair.len == 0) continue;
                const eq = std.mem.findScalar(u8, pair, '=') orelse pair.len;
                return .{ .name = pair[0..eq], .value = if (eq < pair.len) pair[eq + 1 ..] else "" };
            }
            return null;
        }
    };

    /// An iterator over the pairs.
    pub fn iterator(q: Query) Iterator {
        return .{ .rest = q.raw };
    }

    /// The raw (still encoded) value of the first pair whose decoded name is `name`, or null.
    pub fn get(q: Query, name: []const u8) ?[]const u8 {
        var it = q.iterator();
        while (it.next()) |p| if (percent.eqlDecoded(p.name, name, .form)) return p.value;
        return null;
    }

    /// The decoded value of the first pair named `name`, or null; copied into `arena` only
    /// when it holds escapes.
    pub fn getDecoded(q: Query, arena: std.mem.Allocator, name: []const u8) DecodeError!?[]const u8 {
        const raw = q.get(name) orelse return null;
        return percent.decodeAlloc(arena, raw, .form) catch |err| switch (err) {
            error.InvalidPercentEncoding => q.blame(err, name),
            error.OutOfMemory => err,
        };
    }

    /// The value of `name` as a decimal integer of type `T`, or null when absent;
    /// `error.InvalidParameter` when it is not one.
    pub fn getInt(q: Query, comptime T: type, name: []const u8) error{InvalidParameter}!?T {
        const raw = q.get(name) orelse return null;
        return std.fmt.parseInt(T, raw, 10) catch q.blame(error.InvalidParameter, name);
    }

    fn blame(q: Query, err: anytype, name: []const u8) @TypeOf(err) {
        const fault = q.fault orelse return err;
        return fault.blame(err, name);
    }
};

test "Request.Query: lazy pairs" {
    const q: Query = .{ .raw = "a=13&b=42&&flag&c=" };
    try std.testing.expectEqualStrings("13", q.get("a").?);
    try std.testing.expectEqualStrings("42", q.get("b").?);
    try std.testing.expectEqualStrings("", q.get("flag").?);
    try std.testing.expectEqualStrings("", q.get("c").?);
    try std.testing.expectEqual(@as(?[]const u8, null), q.get("d"));
    var it = q.iterator();
    var count: usize = 0;
    while (it.next()) |_| count += 1;
    try std.testing.expectEqual(@as(usize, 4), count);
}

test "Request.header: case-insensitive, first wins" {
    const headers = [_]http.Header{
        .{ .name = "Host", .value = "a" },
        .{ .name = "X-Twice", .value = "1" },
        .{ .name = "x-twice", .value = "2" },
    };
    var head: http.RequestHead = .{ .headers = @constCast(&headers) };
    head.host = "a";
    const req: Request = .init(&head, "", std.testing.allocator);
    try std.testing.expectEqualStrings("1", req.header("X-TWICE").?);
    try std.testing.expectEqualStrings("a", req.header("host").?);
    try std.testing.expectEqual(@as(?[]const u8, null), req.header("Missing"));
}

/// A request with `headers` and `body` for the tests below; memory from `arena`.
fn testRequest(head: *http.RequestHead, headers: []const http.Header, query_text: []const u8, body_text: []const u8, arena: std.mem.Allocator) Request {
    head.* = .{ .headers = @constCast(headers), .query = query_text };
    return .init(head, body_text, arena);
}

test "Request.queryParam: decoded on request, names compared decoded" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var head: http.RequestHead = undefined;
    var req = testRequest(&head, &.{}, "q=a+b%21&n%61me=x&n=-12&bad=%zz&big=99999999999", "", arena_state.allocator());
    try std.testing.expectEqualStrings("a b!", (try req.queryParam("q")).?);
    try std.testing.expectEqualStrings("x", (try req.queryParam("name")).?);
    try std.testing.expectEqual(@as(?[]const u8, null), try req.queryParam("missing"));
    try std.testing.expectError(error.InvalidPercentEncoding, req.queryParam("bad"));
    try std.testing.expectEqual(@as(?i32, -12), try req.query().getInt(i32, "n"));
    try std.testing.expectEqual(@as(?i32, null), try req.query().getInt(i32, "zzz"));
    try std.testing.expectError(error.InvalidParameter, req.query().getInt(i32, "q"));
    try std.testing.expectEqualStrings("q", req.fault.nameFor(error.InvalidParameter).?);
    try std.testing.expectError(error.InvalidParameter, req.query().getInt(i32, "big"));
    // The last failure is the one named, and only for its own error.
    try std.testing.expectEqualStrings("big", req.fault.nameFor(error.InvalidParameter).?);
    try std.testing.expectEqual(@as(?[]const u8, null), req.fault.nameFor(error.InvalidPercentEncoding));
    try std.testing.expectError(error.InvalidPercentEncoding, req.queryParam("bad"));
    try std.testing.expectEqualStrings("bad", req.fault.nameFor(error.InvalidPercentEncoding).?);
    var it = req.query().iterator();
    const first = it.next().?;
    try std.testing.expectEqualStrings("a+b%21", first.value);
    try std.testing.expectEqualStrings("a b!", try first.decodeValue(req.arena));
    try std.testing.expectEqualStrings("name", try it.next().?.decodeName(req.arena));
}

test "Request.param: raw, decoded and as an integer" {
    var head: http.RequestHead = undefined;
    var req = testRequest(&head, &.{}, "", "", std.testing.failing_allocator);
    const params = [_]PathParam{ .{ .name = "id", .value = "42" }, .{ .name = "name", .value = "a%2Fb" } };
    req.params = &params;
    try std.testing.expectEqualStrings("a%2Fb", req.param("name").?);
    try std.testing.expectEqual(@as(?[]const u8, null), req.param("other"));
    try std.testing.expectEqual(@as(u32, 42), try req.paramInt(u32, "id"));
    try std.testing.expectError(error.InvalidParameter, req.paramInt(u32, "name"));
    try std.testing.expectEqualStrings("name", req.fault.nameFor(error.InvalidParameter).?);
    try std.testing.expectError(error.MissingParameter, req.paramInt(u32, "other"));
    try std.testing.expectEqualStrings("other", req.fault.nameFor(error.MissingParameter).?);
    // "42" needs no decoding: no allocation.
    try std.testing.expectEqualStrings("42", (try req.paramDecoded("id")).?);
    try std.testing.expectError(error.OutOfMemory, req.paramDecoded("name"));
}

test "Request.formData: urlencoded bodies only" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var head: http.RequestHead = undefined;
    const form_headers = [_]http.Header{.{ .name = "Content-Type", .value = "application/x-www-form-urlencoded; charset=UTF-8" }};
    var req = testRequest(&head, &form_headers, "", "title=Hello+world&tags=a%2Cb", arena_state.allocator());
    const form = try req.formData();
    try std.testing.expectEqualStrings("Hello world", (try form.getDecoded(req.arena, "title")).?);
    try std.testing.expectEqualStrings("a,b", (try form.getDecoded(req.arena, "tags")).?);
    for ([_][]const http.Header{ &.{}, &.{.{ .name = "Content-Type", .value = "text/plain" }} }) |headers| {
        var other_head: http.RequestHead = undefined;
        var other = testRequest(&other_head, headers, "", "a=1", arena_state.allocator());
        try std.testing.expectError(error.UnsupportedMediaType, other.formData());
    }
}

test "Request.multipart: parts of a buffered body; wrong type or boundary" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const body_text = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n" ++
        "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f.bin\"\r\n" ++
        "Content-Type: application/octet-stream\r\n\r\n\x00\x01\r\n--XyZ--\r\n";
    var head: http.RequestHead = undefined;
    const headers = [_]http.Header{.{ .name = "content-type", .value = "multipart/form-data; boundary=\"XyZ\"" }};
    const req = testRequest(&head, &headers, "", body_text, arena);
    var reader = try req.multipart(.{});
    const a = (try reader.next()).?;
    try std.testing.expectEqualStrings("a", a.part.name);
    try std.testing.expectEqualStrings("1", a.data);
    const f = (try reader.next()).?;
    try std.testing.expectEqualStrings("f.bin", f.part.filename.?);
    try std.testing.expectEqualStrings("\x00\x01", f.data);
    try std.testing.expectEqual(null, try reader.next());

    const cases = [_]struct { value: []const u8, err: MultipartError }{
        .{ .value = "application/json", .err = error.UnsupportedMediaType },
        .{ .value = "multipart/form-data", .err = error.InvalidMultipart },
        .{ .value = "multipart/form-data; boundary=\"bad\\\"\"", .err = error.InvalidMultipart },
    };
    for (cases) |case| {
        var other_head: http.RequestHead = undefined;
        const other = testRequest(&other_head, &.{.{ .name = "Content-Type", .value = case.value }}, "", body_text, arena);
        try std.testing.expectError(case.err, other.multipart(.{}));
    }
}

test "Request.json: typed parsing; bad JSON and wrong type are errors" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const Point = struct { x: i32, y: i32, label: []const u8 = "" };
    const json_headers = [_]http.Header{.{ .name = "Content-Type", .value = "application/json" }};
    var head: http.RequestHead = undefined;
    const req = testRequest(&head, &json_headers, "", "{\"x\":1,\"y\":-2,\"extra\":true}", arena);
    const p = try req.json(Point);
    try std.testing.expectEqual(@as(i32, 1), p.x);
    try std.testing.expectEqual(@as(i32, -2), p.y);
    try std.testing.expectError(error.InvalidJson, req.jsonWith(Point, .{}));
    // No Content-Type is accepted; a non-JSON one is not.
    const cases = [_]struct { headers: []const http.Header, body: []const u8, err: ?JsonError }{
        .{ .headers = &.{}, .body = "{\"x\":1,\"y\":2}", .err = null },
        .{ .headers = &json_headers, .body = "{\"x\":1,", .err = error.InvalidJson },
        .{ .headers = &json_headers, .body = "{\"x\":\"one\",\"y\":2}", .err = error.InvalidJson },
        .{ .headers = &json_headers, .body = "{\"x\":1}", .err = error.InvalidJson },
        .{ .headers = &json_headers, .body = "", .err = error.InvalidJson },
        .{ .headers = &.{.{ .name = "Content-Type", .value = "text/plain" }}, .body = "{\"x\":1,\"y\":2}", .err = error.UnsupportedMediaType },
    };
    for (cases) |case| {
        var other_head: http.RequestHead = undefined;
        const other = testRequest(&other_head, case.headers, "", case.body, arena);
        if (case.err) |err| try std.testing.expectError(err, other.json(Point)) else _ = try other.json(Point);
    }
}

test "Request.cookie and arenaStats" {
    var head: http.RequestHead = undefined;
    const headers = [_]http.Header{.{ .name = "Cookie", .value = "theme=dark; sid=\"abc\"" }};
    const req = testRequest(&head, &headers, "", "", std.testing.allocator);
    try std.testing.expectEqualStrings("abc", (try req.cookie("sid")).?);
    try std.testing.expectEqual(@as(?[]const u8, null), try req.cookie("none"));
    var count: usize = 0;
    var it = req.cookies().iterator();
    while (try it.next()) |_| count += 1;
    try std.testing.expectEqual(@as(usize, 2), count);
    try std.testing.expectEqual(@as(?Arena.Stats, null), req.arenaStats());
}

test "Request.hasCodedBody: a body and a coding other than identity" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    const Case = struct { value: ?[]const u8, length: ?u64, chunked: bool = false, coded: bool };
    const cases = [_]Case{
        .{ .value = "gzip", .length = 3, .coded = true },
        .{ .value = "GZIP", .length = null, .chunked = true, .coded = true },
        .{ .value = "identity, br", .length = 3, .coded = true },
        .{ .value = "identity", .length = 3, .coded = false },
        .{ .value = " , ", .length = 3, .coded = false },
        .{ .value = "gzip", .length = null, .coded = false },
        .{ .value = null, .length = 3, .coded = false },
    };
    for (cases) |case| {
        const fields = [_]http.Header{.{ .name = "content-encoding", .value = case.value orelse "" }};
        var head: http.RequestHead = undefined;
        var req = testRequest(&head, if (case.value != null) &fields else &.{}, "", "abc", arena_state.allocator());
        req.content_length = case.length;
        req.chunked = case.chunked;
        try std.testing.expectEqual(case.coded, req.hasCodedBody());
    }
}
