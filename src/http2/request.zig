//! From an HTTP/2 stream's decoded header list to the request head every protocol yields
//! (`http.RequestHead`), with the checks of RFC 9113 §8.1.1, §8.2 and §8.3: lowercase names,
//! pseudo-header fields first and only the request's, no connection-specific fields, `te`
//! only `trailers`, and the required `:method`, `:scheme` and `:path`. Names and values are
//! copied out of the decoder's scratch into the stream's own memory, so the head lives as long
//! as the stream. No allocation beyond what the caller's `spill` gives; no I/O.
const std = @import("std");
const assert = std.debug.assert;
const http = @import("../http.zig");
const hpack = @import("hpack.zig");
const scan = @import("../http1/scan.zig");

/// What a header list amounts to.
pub const Outcome = union(enum) {
    /// A request to hand to the handler.
    head: Head,
    /// The list breaks RFC 9113's rules for requests: the stream is reset with
    /// PROTOCOL_ERROR (§8.1.1).
    malformed: []const u8,
    /// A well-formed request this server answers itself with `status` (too many fields, a
    /// method it does not know).
    refuse: Refusal,
};

pub const Refusal = struct { status: http.Status, why: []const u8 };

/// The head, and what HTTP/2 says beside it.
pub const Head = struct {
    head: http.RequestHead,
    /// `expect: 100-continue` was asked for.
    expect_continue: bool = false,
};

/// Where the fields are copied to: `bytes` first, then `spill` (the stream's arena).
pub const Storage = struct {
    bytes: []u8,
    used: usize = 0,
    spill: std.mem.Allocator,

    fn copy(s: *Storage, text: []const u8) error{OutOfMemory}![]const u8 {
        if (s.bytes.len - s.used >= text.len) {
            const at = s.bytes[s.used..][0..text.len];
            @memcpy(at, text);
            s.used += text.len;
            return at;
        }
        return s.spill.dupe(u8, text);
    }
};

/// Builds the request head from `fields` (a complete, decoded header block), copying names
/// and values into `storage` and the field list into `headers`. `cookie` fields are joined
/// into one with "; " (§8.2.3); a `host` field is added from `:authority` when the request
/// has none, so handlers see what an HTTP/1.1 request would show them.
pub fn build(fields: []const hpack.Field, storage: *Storage, headers: []http.Header) Outcome {
    var method_text: ?[]const u8 = null;
    var scheme: ?[]const u8 = null;
    var path: ?[]const u8 = null;
    var authority: ?[]const u8 = null;
    var regular_seen = false;
    var count: usize = 0;
    var cookie_len: usize = 0;
    var cookie_count: usize = 0;
    var host_index: ?usize = null;
    var result: Head = .{ .head = .{ .version = .http2 } };
    for (fields) |field| {
        if (field.name.len == 0) return .{ .malformed = "an empty field name" };
        if (!validValue(field.value)) return .{ .malformed = "a field value with a control byte or surrounding whitespace" };
        if (field.name[0] == ':') {
            if (regular_seen) return .{ .malformed = "a pseudo-header field after a regular one" };
            const slot: *?[]const u8 = if (std.mem.eql(u8, field.name, ":method"))
                &method_text
            else if (std.mem.eql(u8, field.name, ":scheme"))
                &scheme
            else if (std.mem.eql(u8, field.name, ":path"))
                &path
            else if (std.mem.eql(u8, field.name, ":authority"))
                &authority
            else
                return .{ .malformed = "an unknown or response pseudo-header field" };
            if (slot.* != null) return .{ .malformed = "a repeated pseudo-header field" };
            slot.* = field.value;
            continue;
        }
        regular_seen = true;
        if (!validName(field.name)) return .{ .malformed = "a field name with an uppercase or non-token byte" };
        if (connectionSpecific(field.name)) return .{ .malformed = "a connection-specific field" };
        if (std.mem.eql(u8, field.name, "te") and !std.mem.eql(u8, field.value, "trailers"))
            return .{ .malformed = "te other than trailers" };
        if (std.mem.eql(u8, field.name, "cookie")) {
            cookie_len += field.value.len + 2;
            cookie_count += 1;
            continue;
        }
        if (std.mem.eql(u8, field.name, "content-length")) {
            const len = parseLength(field.value) orelse return .{ .malformed = "an invalid content-length" };
            if (result.head.content_length) |earlier| if (earlier != len) return .{ .malformed = "conflicting content-length fields" };
            result.head.content_length = len;
        }
        if (std.mem.eql(u8, field.name, "expect") and std.ascii.eqlIgnoreCase(field.value, "100-continue"))
            result.expect_continue = true;
        if (std.mem.eql(u8, field.name, "host")) host_index = count;
        if (count == headers.len) return tooMany();
        headers[count] = .{
            .name = storage.copy(field.name) catch return outOfMemory(),
            .value = storage.copy(field.value) catch return outOfMemory(),
        };
        count += 1;
    }
    const method_token = method_text orelse return .{ .malformed = "no :method" };
    if (!scan.isToken(method_token)) return .{ .malformed = "a :method that is not a token" };
    if (std.mem.eql(u8, method_token, "CONNECT")) {
        // RFC 9113 §8.5: only :method and :authority. This server is no tunnel.
        if (scheme != null or path != null or authority == null) return .{ .malformed = "a CONNECT request with :scheme or :path, or without :authority" };
        return .{ .refuse = .{ .status = .not_implemented, .why = "CONNECT is not supported" } };
    }
    if (scheme == null) return .{ .malformed = "no :scheme" };
    const target = path orelse return .{ .malformed = "no :path" };
    if (target.len == 0) return .{ .malformed = "an empty :path" };
    const method = http.Method.parse(method_token);
    if (target[0] != '/' and !(method == .OPTIONS and std.mem.eql(u8, target, "*")))
        return .{ .malformed = "a :path that is neither absolute nor \"*\" for OPTIONS" };
    if (!validTarget(target)) return .{ .malformed = "a :path with a byte outside the request-target's" };
    if (cookie_count > 0) {
        if (count == headers.len) return tooMany();
        const joined = storage.spill.alloc(u8, cookie_len - 2) catch return outOfMemory();
        var at: usize = 0;
        var first = true;
        for (fields) |field| {
            if (!std.mem.eql(u8, field.name, "cookie")) continue;
            if (!first) {
                @memcpy(joined[at..][0..2], "; ");
                at += 2;
            }
            @memcpy(joined[at..][0..field.value.len], field.value);
            at += field.value.len;
            first = false;
        }
        assert(at == joined.len);
        headers[count] = .{ .name = "cookie", .value = joined };
        count += 1;
    }
    if (authority) |a| {
        if (!validValue(a) or a.len == 0) return .{ .malformed = "an invalid :authority" };
        const copied = storage.copy(a) catch return outOfMemory();
        result.head.host = copied;
        if (host_index == null) {
            if (count == headers.len) return tooMany();
            headers[count] = .{ .name = "host", .value = copied };
            count += 1;
        }
    } else if (host_index) |i| result.head.host = headers[i].value;
    const copied_target = storage.copy(target) catch return outOfMemory();
    const query_at = std.mem.indexOfScalar(u8, copied_target, '?');
    result.head.target = copied_target;
    result.head.path = if (query_at) |q| copied_target[0..q] else copied_target;
    result.head.query = if (query_at) |q| copied_target[q + 1 ..] else "";
    result.head.headers = headers[0..count];
    result.head.method = method orelse
        return .{ .refuse = .{ .status = .not_implemented, .why = "unknown method" } };
    return .{ .head = result };
}

/// Checks a trailer section (§8.1): no pseudo-header fields, and the same rules for names
/// and values as the head's. Returns what is wrong, or null.
pub fn checkTrailers(fields: []const hpack.Field) ?[]const u8 {
    for (fields) |field| {
        if (field.name.len == 0) return "an empty field name";
        if (field.name[0] == ':') return "a pseudo-header field in trailers";
        if (!validName(field.name)) return "a field name with an uppercase or non-token byte";
        if (connectionSpecific(field.name)) return "a connection-specific field";
        if (!validValue(field.value)) return "a field value with a control byte or surrounding whitespace";
    }
    return null;
}

fn tooMany() Outcome {
    return .{ .refuse = .{ .status = .request_header_fields_too_large, .why = "too many header fields" } };
}

fn outOfMemory() Outcome {
    return .{ .refuse = .{ .status = .service_unavailable, .why = "server out of memory for request heads" } };
}

/// Fields that mean something only to one HTTP/1.1 connection (§8.2.2): never in an HTTP/2
/// request, never sent in a response.
pub fn connectionSpecific(name: []const u8) bool {
    const names = [_][]const u8{ "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade" };
    for (names) |n| if (std.mem.eql(u8, name, n)) return true;
    return false;
}

/// A token with no uppercase letter (§8.2.1: names are lowercase in HTTP/2).
fn validName(name: []const u8) bool {
    if (!scan.isToken(name)) return false;
    for (name) |c| if (c >= 'A' and c <= 'Z') return false;
    return true;
}

/// No NUL, CR or LF anywhere, no other control byte but HTAB, and no whitespace at either end
/// (§8.2.1).
fn validValue(value: []const u8) bool {
    if (value.len == 0) return true;
    if (value[0] == ' ' or value[0] == '\t') return false;
    if (value[value.len - 1] == ' ' or value[value.len - 1] == '\t') return false;
    for (value) |c| if ((c < 0x20 and c != '\t') or c == 0x7f) return false;
    return true;
}

/// Visible ASCII only, as an HTTP/1 request-target.
fn validTarget(target: []const u8) bool {
    for (target) |c| if (c <= 0x20 or c >= 0x7f) return false;
    return true;
}

fn parseLength(text: []const u8) ?u64 {
    if (text.len == 0 or text.len > 19) return null;
    var n: u64 = 0;
    for (text) |c| {
        if (c < '0' or c > '9') return null;
        n = n * 10 + (c - '0');
    }
    return n;
}

const testing = std.testing;

fn buildFrom(fields: []const hpack.Field, bytes: []u8, headers: []http.Header) Outcome {
    var storage: Storage = .{ .bytes = bytes, .spill = testing.failing_allocator };
    return build(fields, &storage, headers);
}

test "request: a GET with authority, query and cookies" {
    var arena_state: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena_state.deinit();
    var bytes: [256]u8 = undefined;
    var headers: [8]http.Header = undefined;
    var storage: Storage = .{ .bytes = &bytes, .spill = arena_state.allocator() };
    const fields = [_]hpack.Field{
        .{ .name = ":method", .value = "GET" },
        .{ .name = ":scheme", .value = "https" },
        .{ .name = ":authority", .value = "example.com" },
        .{ .name = ":path", .value = "/a/b?x=1" },
        .{ .name = "cookie", .value = "a=1" },
        .{ .name = "accept", .value = "*/*" },
        .{ .name = "cookie", .value = "b=2" },
    };
    const outcome = build(&fields, &storage, &headers);
    const head = outcome.head.head;
    try testing.expectEqual(http.Method.GET, head.method);
    try testing.expectEqualStrings("/a/b?x=1", head.target);
    try testing.expectEqualStrings("/a/b", head.path);
    try testing.expectEqualStrings("x=1", head.query);
    try testing.expectEqualStrings("example.com", head.host.?);
    try testing.expectEqual(http.Version.http2, head.version);
    try testing.expectEqual(@as(usize, 3), head.headers.len);
    try testing.expectEqualStrings("accept", head.headers[0].name);
    try testing.expectEqualStrings("a=1; b=2", head.headers[1].value);
    try testing.expectEqualStrings("host", head.headers[2].name);
}

test "request: malformed lists (RFC 9113 §8.1.1, §8.2, §8.3)" {
    var bytes: [256]u8 = undefined;
    var headers: [8]http.Header = undefined;
    const base = [_]hpack.Field{
        .{ .name = ":method", .value = "GET" },
        .{ .name = ":scheme", .value = "http" },
        .{ .name = ":path", .value = "/" },
    };
    const cases = [_][]const hpack.Field{
        &.{ base[0], base[1] }, // no :path
        &.{ base[1], base[2] }, // no :method
        &.{ base[0], base[2] }, // no :scheme
        &.{ base[0], base[1], .{ .name = ":path", .value = "" } },
        &.{ base[0], base[1], base[2], base[2] },
        &.{ base[0], base[1], base[2], .{ .name = ":status", .value = "200" } },
        &.{ base[0], base[1], .{ .name = "accept", .value = "x" }, base[2] },
        &.{ base[0], base[1], base[2], .{ .name = "Accept", .value = "x" } },
        &.{ base[0], base[1], base[2], .{ .name = "connection", .value = "close" } },
        &.{ base[0], base[1], base[2], .{ .name = "te", .value = "gzip" } },
        &.{ base[0], base[1], base[2], .{ .name = "x", .value = "a\r\nb" } },
        &.{ base[0], base[1], base[2], .{ .name = "x", .value = " padded" } },
        &.{ base[0], base[1], base[2], .{ .name = "content-length", .value = "1x" } },
        &.{ base[0], base[1], .{ .name = ":path", .value = "relative" } },
    };
    for (cases) |fields| {
        try testing.expect(buildFrom(fields, &bytes, &headers) == .malformed);
    }
    const ok = buildFrom(&(base ++ [_]hpack.Field{.{ .name = "te", .value = "trailers" }}), &bytes, &headers);
    try testing.expect(ok == .head);
    const unknown = buildFrom(&.{ .{ .name = ":method", .value = "BREW" }, base[1], base[2] }, &bytes, &headers);
    try testing.expectEqual(http.Status.not_implemented, unknown.refuse.status);
    var one: [1]http.Header = undefined;
    const many = buildFrom(&(base ++ [_]hpack.Field{ .{ .name = "a", .value = "1" }, .{ .name = "b", .value = "2" } }), &bytes, &one);
    try testing.expectEqual(http.Status.request_header_fields_too_large, many.refuse.status);
}

test "request: empty cookie fields join without gaps or stray bytes" {
    var arena_state: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena_state.deinit();
    var bytes: [256]u8 = undefined;
    var headers: [8]http.Header = undefined;
    var storage: Storage = .{ .bytes = &bytes, .spill = arena_state.allocator() };
    const fields = [_]hpack.Field{
        .{ .name = ":method", .value = "GET" }, .{ .name = ":scheme", .value = "https" },
        .{ .name = ":path", .value = "/" },     .{ .name = "cookie", .value = "" },
        .{ .name = "cookie", .value = "" },     .{ .name = "cookie", .value = "a=1" },
    };
    const head = build(&fields, &storage, &headers).head.head;
    try testing.expectEqualStrings("; ; a=1", head.headers[0].value);
}

test "request: trailers carry no pseudo-header fields" {
    try testing.expect(checkTrailers(&.{.{ .name = "x-sum", .value = "1" }}) == null);
    try testing.expect(checkTrailers(&.{.{ .name = ":path", .value = "/" }}) != null);
    try testing.expect(checkTrailers(&.{.{ .name = "X-Sum", .value = "1" }}) != null);
}
