//! A request as a handler sees it. Every slice borrows the connection's receive buffer (or,
//! for a large body, the request arena) and is valid until the handler returns; copy what
//! must live longer into `arena`, which lives until the response has been sent.
const std = @import("std");
const http = @import("http.zig");
const RequestParser = @import("http1/RequestParser.zig");
const handshake = @import("websocket/handshake.zig");

const Request = @This();

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
/// Whether the body was sent chunked.
chunked: bool,
/// The whole body, decoded.
body_bytes: []const u8,
/// Memory for the handler, freed after the response has been sent.
arena: std.mem.Allocator,

/// Builds the request view of a parsed head and its body.
pub fn init(head: *const RequestParser.Head, body_bytes: []const u8, arena: std.mem.Allocator) Request {
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
        .content_length = switch (head.framing) {
            .content_length => |length| length,
            .none, .chunked => null,
        },
        .chunked = head.framing == .chunked,
        .body_bytes = body_bytes,
        .arena = arena,
    };
}

/// The value of the first field called `name` (ASCII case-insensitive), or null.
pub fn header(req: *const Request, name: []const u8) ?[]const u8 {
    for (req.headers) |field| {
        if (field.name.len == name.len and std.ascii.eqlIgnoreCase(field.name, name)) return field.value;
    }
    return null;
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

/// The query string, parsed lazily: nothing is scanned until it is asked for.
pub fn query(req: *const Request) Query {
    return .{ .raw = req.raw_query };
}

/// A lazily parsed `application/x-www-form-urlencoded` query (names and values not decoded).
pub const Query = struct {
    /// The query without its '?'.
    raw: []const u8,

    /// One `name=value` pair, still percent-encoded.
    pub const Param = struct { name: []const u8, value: []const u8 };

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

    /// The raw value of the first pair named `name` (compared as sent), or null.
    pub fn get(q: Query, name: []const u8) ?[]const u8 {
        var it = q.iterator();
        while (it.next()) |param| if (std.mem.eql(u8, param.name, name)) return param.value;
        return null;
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
    var head: RequestParser.Head = .{ .headers = @constCast(&headers) };
    head.host = "a";
    const req: Request = .init(&head, "", std.testing.allocator);
    try std.testing.expectEqualStrings("1", req.header("X-TWICE").?);
    try std.testing.expectEqualStrings("a", req.header("host").?);
    try std.testing.expectEqual(@as(?[]const u8, null), req.header("Missing"));
}
