//! RequestParser test vectors (RFC 9112 examples, edge cases and invalid input), each fed
//! three ways: whole, one byte at a time, and split in two at every offset. Every way must give
//! the same result, and every strict prefix of a valid head must ask for more.
const std = @import("std");
const testing = std.testing;
const http = @import("../http.zig");
const RequestParser = @import("RequestParser.zig");

const Expected = struct {
    method: http.Method = .GET,
    target: ?[]const u8 = null,
    path: []const u8 = "/",
    query: []const u8 = "",
    version: http.Version = .http11,
    header_count: ?usize = null,
    host: ?[]const u8 = null,
    framing: RequestParser.Framing = .none,
    keep_alive: bool = true,
    expect_continue: bool = false,
    upgrade: ?[]const u8 = null,
    /// When not empty, the field values in order, whitespace trimmed.
    values: []const []const u8 = &.{},
    /// Bytes of input after the head (a body or a pipelined request), not part of the head.
    trailing: usize = 0,
};

const Outcome = union(enum) {
    ok: Expected,
    err: RequestParser.Error,
};

const Case = struct { bytes: []const u8, outcome: Outcome };

fn repeat(comptime n: usize, comptime byte: u8) [n]u8 {
    return @splat(byte);
}

const limits: RequestParser.Limits = .{ .request_line_bytes_max = 128, .header_bytes_max = 512 };
const header_count_max = 8;

const valid_cases = [_]Case{
    .{ .bytes = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", .outcome = .{ .ok = .{
        .host = "example.com",
        .header_count = 1,
    } } },
    // RFC 9112 §3.2.1 origin-form example.
    .{ .bytes = "GET /where?q=now HTTP/1.1\r\nHost: www.example.org\r\n\r\n", .outcome = .{ .ok = .{
        .path = "/where",
        .query = "q=now",
        .host = "www.example.org",
    } } },
    // RFC 9112 §3.2.2 absolute-form example: the target's authority is the host.
    .{
        .bytes = "GET http://www.example.org/pub/WWW/TheProject.html HTTP/1.1\r\nHost: other\r\n\r\n",
        .outcome = .{ .ok = .{ .path = "/pub/WWW/TheProject.html", .host = "www.example.org" } },
    },
    .{ .bytes = "GET http://a.example?x=1 HTTP/1.1\r\nHost: a.example\r\n\r\n", .outcome = .{ .ok = .{
        .path = "/",
        .query = "x=1",
        .host = "a.example",
    } } },
    // RFC 9112 §3.2.3 authority-form.
    .{ .bytes = "CONNECT www.example.com:80 HTTP/1.1\r\nHost: www.example.com\r\n\r\n", .outcome = .{ .ok = .{
        .method = .CONNECT,
        .path = "",
        .host = "www.example.com:80",
    } } },
    // RFC 9112 §3.2.4 asterisk-form.
    .{ .bytes = "OPTIONS * HTTP/1.1\r\nHost: www.example.org:8001\r\n\r\n", .outcome = .{ .ok = .{
        .method = .OPTIONS,
        .path = "*",
        .host = "www.example.org:8001",
    } } },
    // HTTP/1.0: no Host needed, not persistent unless asked.
    .{ .bytes = "GET /a HTTP/1.0\r\n\r\n", .outcome = .{ .ok = .{
        .path = "/a",
        .version = .http10,
        .keep_alive = false,
        .header_count = 0,
    } } },
    .{ .bytes = "HEAD /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", .outcome = .{ .ok = .{
        .method = .HEAD,
        .path = "/a",
        .version = .http10,
        .keep_alive = true,
    } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n", .outcome = .{ .ok = .{
        .keep_alive = false,
    } } },
    // RFC 9112 §2.2: empty lines before the request line are ignored.
    .{ .bytes = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{ .host = "a" } } },
    // Optional whitespace around values, empty values, tabs and obs-text inside values.
    .{ .bytes = "GET / HTTP/1.1\r\nHost:a\r\nX-Empty:\r\nX-Tab:\t v\tw \t\r\nX-Utf8: \xc3\xa9\r\n\r\n", .outcome = .{ .ok = .{
        .header_count = 4,
        .host = "a",
    } } },
    .{ .bytes = "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", .outcome = .{ .ok = .{
        .method = .POST,
        .path = "/f",
        .framing = .{ .content_length = 5 },
        .trailing = 5,
    } } },
    // Identical Content-Length values, as a list and repeated, are one value (RFC 9110 §8.6).
    .{ .bytes = "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 7, 7\r\ncontent-length: 7\r\n\r\n", .outcome = .{ .ok = .{
        .method = .PUT,
        .framing = .{ .content_length = 7 },
    } } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", .outcome = .{ .ok = .{
        .method = .POST,
        .framing = .none,
    } } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", .outcome = .{ .ok = .{
        .method = .POST,
        .framing = .chunked,
    } } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n\r\n", .outcome = .{ .ok = .{
        .method = .POST,
        .framing = .chunked,
        .expect_continue = true,
    } } },
    // HTTP/1.0 ignores Expect (RFC 9110 §10.1.1).
    .{ .bytes = "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", .outcome = .{ .ok = .{
        .method = .POST,
        .version = .http10,
        .keep_alive = false,
        .framing = .{ .content_length = 1 },
    } } },
    .{ .bytes = "GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", .outcome = .{ .ok = .{
        .path = "/chat",
        .upgrade = "websocket",
    } } },
    // A pipelined second request is not part of the first head.
    .{ .bytes = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{
        .path = "/1",
        .trailing = 28,
    } } },
    .{ .bytes = "DELETE /x HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", .outcome = .{ .ok = .{
        .method = .DELETE,
        .path = "/x",
        .host = "[::1]:8080",
    } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost:\r\n\r\n", .outcome = .{ .ok = .{ .host = "" } } },
    // Whitespace around values in every arrangement: none, SP, HTAB, several, only whitespace.
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nA:x\r\nB: x \r\nC:\tx\t\r\nD:  \t x y\t \r\nE: \r\nF:\t\r\nG:   \r\n\r\n", .outcome = .{ .ok = .{
        .values = &.{ "a", "x", "x", "x", "x y", "", "", "" },
    } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost:a\r\nX-1: \xff \r\nX-2:\t\t\xa0\r\n\r\n", .outcome = .{ .ok = .{
        .values = &.{ "a", "\xff", "\xa0" },
    } } },
    // What load generators send; a Host of 16 bytes and one over, with and without a port.
    .{ .bytes = "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", .outcome = .{ .ok = .{ .host = "127.0.0.1:8080" } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n", .outcome = .{ .ok = .{ .host = "shop.example.com" } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: shop.example.com:443\r\n\r\n", .outcome = .{ .ok = .{ .host = "shop.example.com:443" } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", .outcome = .{ .ok = .{ .host = "a:" } } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a.b:65535 \r\n\r\n", .outcome = .{ .ok = .{ .host = "a.b:65535" } } },
    .{ .bytes = "POST /search?q=1 HTTP/1.0\r\n\r\n", .outcome = .{ .ok = .{
        .method = .POST,
        .path = "/search",
        .query = "q=1",
        .version = .http10,
        .keep_alive = false,
    } } },
    .{ .bytes = "GET /?a HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{ .query = "a" } } },
    .{ .bytes = "PATCH /p HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{ .method = .PATCH, .path = "/p" } } },
    // A later HTTP/1 minor version is processed as HTTP/1.1 (RFC 9110 §2.5).
    .{ .bytes = "GET / HTTP/1.2\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{ .version = .http11 } } },
    .{ .bytes = "GET / HTTP/1.9\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{ .version = .http11 } } },
    // Percent-encoded bytes and every visible ASCII byte but '#' may be in a target.
    .{ .bytes = "GET /caf%C3%A9!$&'()*+,;=:@~-._[]{}|^`\\\"<> HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .ok = .{ .path = "/caf%C3%A9!$&'()*+,;=:@~-._[]{}|^`\\\"<>" } } },
};

const invalid_cases = [_]Case{
    .{ .bytes = "GETX / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.MethodNotImplemented } },
    .{ .bytes = "GE / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.MethodNotImplemented } },
    .{ .bytes = "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidMethod } },
    .{ .bytes = "GET / HTTP/2.0\nHost: a\r\n\r\n", .outcome = .{ .err = error.VersionNotSupported } },
    .{ .bytes = "GET / HTTP/1.0\nHost: a\r\n\r\n", .outcome = .{ .err = error.BareLineFeed } },
    .{ .bytes = "GET / HTTP/1.0\r\rHost: a\r\n\r\n", .outcome = .{ .err = error.BareCarriageReturn } },
    .{ .bytes = "GET / HTTP/1.1x\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidVersion } },
    .{ .bytes = "GET / HTTP/1.10\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidVersion } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: 127.0.0.1:80a0\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: shop.example.co@m\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "get / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.MethodNotImplemented } },
    .{ .bytes = "BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.MethodNotImplemented } },
    .{ .bytes = "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidMethod } },
    .{ .bytes = " GET / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidMethod } },
    .{ .bytes = "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    // A fragment is never sent; bytes above 0x7F must be percent-encoded (RFC 9112 §3.2,
    // RFC 3986 §3.3), here and past the first vector.
    .{ .bytes = "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /a\x80 HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xff HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?q#f HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET a HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET * HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET ftp://a/b HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET http:///b HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidTarget } },
    .{ .bytes = "GET /\r\n\r\n", .outcome = .{ .err = error.InvalidRequestLine } },
    .{ .bytes = "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidVersion } },
    .{ .bytes = "GET / HTTP/1.1\nHost: a\r\n\r\n", .outcome = .{ .err = error.BareLineFeed } },
    .{ .bytes = "GET / HTTP/1.1\rHost: a\r\n\r\n", .outcome = .{ .err = error.BareCarriageReturn } },
    .{ .bytes = "GET / http/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidVersion } },
    .{ .bytes = "GET / HTTP/1.x\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidVersion } },
    .{ .bytes = "GET / HTTP/2.0\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.VersionNotSupported } },
    .{ .bytes = "GET / HTTP/0.9\r\n\r\n", .outcome = .{ .err = error.VersionNotSupported } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nX: 1\n\r\n", .outcome = .{ .err = error.BareLineFeed } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nX: 1\rY: 2\r\n\r\n", .outcome = .{ .err = error.BareCarriageReturn } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\n\n", .outcome = .{ .err = error.BareLineFeed } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\n\rX", .outcome = .{ .err = error.BareCarriageReturn } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost : a\r\n\r\n", .outcome = .{ .err = error.WhitespaceBeforeColon } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", .outcome = .{ .err = error.WhitespaceBeforeColon } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n", .outcome = .{ .err = error.ObsoleteLineFolding } },
    .{ .bytes = "GET / HTTP/1.1\r\n Host: a\r\n\r\n", .outcome = .{ .err = error.ObsoleteLineFolding } },
    .{ .bytes = "GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.InvalidHeaderName } },
    .{ .bytes = "GET / HTTP/1.1\r\nHo\"st: a\r\n\r\n", .outcome = .{ .err = error.InvalidHeaderName } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost\r\n\r\n", .outcome = .{ .err = error.InvalidHeaderName } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n", .outcome = .{ .err = error.InvalidHeaderValue } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", .outcome = .{ .err = error.InvalidHeaderValue } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", .outcome = .{ .err = error.InvalidHeaderValue } },
    .{ .bytes = "GET / HTTP/1.1\r\n\r\n", .outcome = .{ .err = error.MissingHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", .outcome = .{ .err = error.DuplicateHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a:80x\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", .outcome = .{ .err = error.InvalidHost } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", .outcome = .{ .err = error.InvalidContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", .outcome = .{ .err = error.InvalidContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n", .outcome = .{ .err = error.InvalidContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", .outcome = .{ .err = error.InvalidContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", .outcome = .{ .err = error.InvalidContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", .outcome = .{ .err = error.ConflictingContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", .outcome = .{ .err = error.ConflictingContentLength } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", .outcome = .{ .err = error.ContentLengthWithTransferEncoding } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", .outcome = .{ .err = error.ChunkedNotFinal } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", .outcome = .{ .err = error.ChunkedNotFinal } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", .outcome = .{ .err = error.ChunkedNotFinal } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", .outcome = .{ .err = error.UnsupportedTransferEncoding } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", .outcome = .{ .err = error.UnsupportedTransferEncoding } },
    .{ .bytes = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", .outcome = .{ .err = error.TransferEncodingInHttp10 } },
    .{ .bytes = "POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", .outcome = .{ .err = error.UnsupportedExpectation } },
    .{ .bytes = "GET /" ++ &repeat(130, 'a') ++ " HTTP/1.1\r\nHost: a\r\n\r\n", .outcome = .{ .err = error.RequestLineTooLong } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nX: " ++ &repeat(500, 'v') ++ "\r\n\r\n", .outcome = .{ .err = error.HeaderSectionTooLarge } },
    .{ .bytes = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\nH: 1\r\n\r\n", .outcome = .{ .err = error.TooManyHeaders } },
};

/// Parses `bytes` delivered in the pieces given by `cuts` (increasing offsets); returns the
/// error, or the parser after `.complete`, or null if the head never completed.
fn parseInPieces(
    storage: []http.Header,
    bytes: []const u8,
    cuts: []const usize,
) RequestParser.Error!?RequestParser {
    return parseInPiecesWith(.feed, storage, bytes, cuts);
}

const Feed = enum { feed, feedLineByLine };

fn parseInPiecesWith(
    comptime how: Feed,
    storage: []http.Header,
    bytes: []const u8,
    cuts: []const usize,
) RequestParser.Error!?RequestParser {
    var parser: RequestParser = .init(storage, limits);
    const feed = @field(RequestParser, @tagName(how));
    for (cuts) |cut| {
        if (try feed(&parser, bytes[0..cut]) == .complete) return parser;
    }
    if (try feed(&parser, bytes) == .complete) return parser;
    return null;
}

fn expectHead(expected: Expected, case_bytes: []const u8, parser: RequestParser) !void {
    const head = parser.head;
    try testing.expectEqual(expected.method, head.method);
    try testing.expectEqualStrings(expected.path, head.path);
    try testing.expectEqualStrings(expected.query, head.query);
    try testing.expectEqual(expected.version, head.version);
    if (expected.target) |t| try testing.expectEqualStrings(t, head.target);
    if (expected.header_count) |n| try testing.expectEqual(n, head.headers.len);
    if (expected.host) |h| try testing.expectEqualStrings(h, head.host.?);
    try testing.expectEqual(expected.framing, head.framing);
    try testing.expectEqual(expected.keep_alive, head.keep_alive);
    try testing.expectEqual(expected.expect_continue, head.expect_continue);
    if (expected.upgrade) |u| try testing.expectEqualStrings(u, head.upgrade.?);
    if (expected.values.len > 0) {
        try testing.expectEqual(expected.values.len, head.headers.len);
        for (expected.values, head.headers) |value, field|
            try testing.expectEqualStrings(value, field.value);
    }
    try testing.expectEqual(case_bytes.len - expected.trailing, head.len);
}

fn expectOutcome(case: Case, result: RequestParser.Error!?RequestParser) !void {
    switch (case.outcome) {
        .ok => |expected| {
            const parser = (try result) orelse return error.TestHeadIncomplete;
            try expectHead(expected, case.bytes, parser);
        },
        .err => |expected| try testing.expectError(expected, result),
    }
}

fn runCase(case: Case) !void {
    var storage: [header_count_max]http.Header = undefined;
    // Whole.
    try expectOutcome(case, parseInPieces(&storage, case.bytes, &.{}));
    // Whole, without the block fast path.
    try expectOutcome(case, parseInPiecesWith(.feedLineByLine, &storage, case.bytes, &.{}));
    // Whole, in front of bytes that are no part of the head (a binary body, say), which the
    // fast path classifies too and must not take for the head's.
    var padded: [1024 + 70]u8 = undefined;
    @memcpy(padded[0..case.bytes.len], case.bytes);
    for ([_]u8{ 0, '\n', 'a' }) |fill| {
        const bytes = padded[0 .. case.bytes.len + 70];
        @memset(bytes[case.bytes.len..], fill);
        var reference_storage: [header_count_max]http.Header = undefined;
        const reference = parseInPiecesWith(.feedLineByLine, &reference_storage, bytes, &.{});
        const result = parseInPieces(&storage, bytes, &.{});
        if (reference) |maybe_parser| {
            const got = try result;
            try testing.expectEqual(maybe_parser == null, got == null);
            if (maybe_parser) |parser| {
                try testing.expectEqual(parser.head.len, got.?.head.len);
                try testing.expectEqual(parser.head.headers.len, got.?.head.headers.len);
            }
        } else |err| try testing.expectError(err, result);
    }
    // One byte at a time.
    var every: [1024]usize = undefined;
    for (every[0..case.bytes.len], 0..) |*cut, i| cut.* = i;
    try expectOutcome(case, parseInPieces(&storage, case.bytes, every[1..case.bytes.len]));
    // Split at every offset.
    for (1..case.bytes.len) |cut| {
        try expectOutcome(case, parseInPieces(&storage, case.bytes, &.{cut}));
    }
}

test "RequestParser: valid heads, fed whole, per byte and split at every offset" {
    for (valid_cases) |case| {
        runCase(case) catch |err| {
            std.debug.print("case: {f}\n", .{std.zig.fmtString(case.bytes)});
            return err;
        };
    }
}

test "RequestParser: invalid heads give the named error however they are split" {
    for (invalid_cases) |case| {
        runCase(case) catch |err| {
            std.debug.print("case: {f}\n", .{std.zig.fmtString(case.bytes)});
            return err;
        };
    }
}

test "RequestParser: every strict prefix of a valid head asks for more" {
    var storage: [header_count_max]http.Header = undefined;
    for (valid_cases) |case| {
        const complete = (try parseInPieces(&storage, case.bytes, &.{})).?;
        for (0..complete.head.len) |len| {
            var parser: RequestParser = .init(&storage, limits);
            try testing.expectEqual(RequestParser.Progress.need_more, try parser.feed(case.bytes[0..len]));
        }
    }
}

test "RequestParser: error statuses" {
    try testing.expectEqual(http.Status.not_implemented, RequestParser.status(error.MethodNotImplemented));
    try testing.expectEqual(http.Status.http_version_not_supported, RequestParser.status(error.VersionNotSupported));
    try testing.expectEqual(http.Status.uri_too_long, RequestParser.status(error.RequestLineTooLong));
    try testing.expectEqual(http.Status.request_header_fields_too_large, RequestParser.status(error.TooManyHeaders));
    try testing.expectEqual(http.Status.bad_request, RequestParser.status(error.ContentLengthWithTransferEncoding));
}

test "RequestParser: an incomplete request line longer than the limit is 414" {
    var storage: [header_count_max]http.Header = undefined;
    var parser: RequestParser = .init(&storage, limits);
    const long = "GET /" ++ &repeat(200, 'a');
    try testing.expectError(error.RequestLineTooLong, parser.feed(long));
}

test "RequestParser: an incomplete head longer than the limit is 431" {
    var storage: [header_count_max]http.Header = undefined;
    var parser: RequestParser = .init(&storage, limits);
    const long = "GET / HTTP/1.1\r\nX: " ++ &repeat(600, 'a');
    try testing.expectError(error.HeaderSectionTooLarge, parser.feed(long));
}

test "RequestParser.parseContentLength" {
    try testing.expectEqual(@as(u64, 0), try RequestParser.parseContentLength("0"));
    try testing.expectEqual(@as(u64, 5), try RequestParser.parseContentLength("0005"));
    try testing.expectEqual(@as(u64, 18446744073709551615), try RequestParser.parseContentLength("18446744073709551615"));
    try testing.expectError(error.InvalidContentLength, RequestParser.parseContentLength("18446744073709551616"));
    try testing.expectError(error.InvalidContentLength, RequestParser.parseContentLength("-1"));
    try testing.expectError(error.InvalidContentLength, RequestParser.parseContentLength(""));
}

test "RequestParser: the block fast path agrees with line-by-line parsing, behind a long field" {
    // A long first field line puts every case's remaining lines on the fast path.
    const filler = "X-Filler: " ++ &repeat(60, 'f') ++ "\r\n";
    for ([_][]const Case{ &valid_cases, &invalid_cases }) |cases| for (cases) |case| {
        const line_end = (std.mem.find(u8, case.bytes, "\r\n") orelse continue) + 2;
        var buffer: [2048]u8 = undefined;
        const bytes = buffer[0 .. case.bytes.len + filler.len];
        @memcpy(bytes[0..line_end], case.bytes[0..line_end]);
        @memcpy(bytes[line_end..][0..filler.len], filler);
        @memcpy(bytes[line_end + filler.len ..], case.bytes[line_end..]);

        var storage: [header_count_max]http.Header = undefined;
        var reference_storage: [header_count_max]http.Header = undefined;
        const result = parseInPieces(&storage, bytes, &.{});
        const reference = parseInPiecesWith(.feedLineByLine, &reference_storage, bytes, &.{});
        errdefer std.debug.print("case: {f}\n", .{std.zig.fmtString(bytes)});
        if (reference) |maybe_parser| {
            const got = try result;
            try testing.expectEqual(maybe_parser == null, got == null);
            if (maybe_parser) |parser| {
                try testing.expectEqual(parser.head.len, got.?.head.len);
                try testing.expectEqual(parser.head.framing, got.?.head.framing);
                try testing.expectEqual(parser.head.keep_alive, got.?.head.keep_alive);
                try testing.expectEqual(parser.head.headers.len, got.?.head.headers.len);
                for (parser.head.headers, got.?.head.headers) |want, have| {
                    try testing.expectEqualStrings(want.name, have.name);
                    try testing.expectEqualStrings(want.value, have.value);
                }
            }
        } else |err| try testing.expectError(err, result);
    };
}

/// Heads of at most 64 bytes, which `feed` parses on its short path (`parseShort`) when they
/// are regular, and the pieces of each that path treats separately.
const short_heads = [_][]const u8{
    "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
    "GET /a/b?c=d?e HTTP/1.1\r\nhost:x.example-1.org\r\n\r\n",
    "POST /f HTTP/1.0\r\nContent-Length: 5\r\nX_Y.z: 1 \r\n\r\nhello",
    "DELETE /x HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a:65535\r\n\r\n",
    "GET http://a.example/p?q HTTP/1.1\r\nHost: b\r\n\r\n",
    "HEAD /h HTTP/1.1\r\nHost:  a.b:1  \r\nExpect: 100-continue\r\n\r\n",
    "PUT / HTTP/1.1\r\nHost: \r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\nGET / HTTP/1.1\r\nHost: 1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: 1.2.3.4:80:1\r\n\r\n",
};

/// The bytes put at every position of every short head: each delimiter, each class boundary
/// of the short path's masks, and bytes that are valid in some places only.
const odd_bytes = [_]u8{
    0,    '\t', '\n', '\r', 0x1f, ' ', '!', '"', '#', '%', ',', '-', '.', '/',  '0',
    '9',  ':',  ';',  '<',  '?',  '@', 'A', 'Z', '[', '_', '`', 'a', 'z', 0x7f, 0x80,
    0xff,
};

fn expectSameResult(
    reference: RequestParser.Error!RequestParser.Progress,
    reference_parser: *const RequestParser,
    result: RequestParser.Error!RequestParser.Progress,
    parser: *const RequestParser,
) !void {
    const progress = reference catch |err| return testing.expectError(err, result);
    try testing.expectEqual(progress, try result);
    if (progress == .need_more) return;
    const want = reference_parser.head;
    const have = parser.head;
    try testing.expectEqual(want.method, have.method);
    try testing.expectEqual(want.version, have.version);
    inline for (.{ "target", "path", "query" }) |field| {
        try testing.expectEqual(@field(want, field).ptr, @field(have, field).ptr);
        try testing.expectEqual(@field(want, field).len, @field(have, field).len);
    }
    try testing.expectEqual(want.headers.len, have.headers.len);
    for (want.headers, have.headers) |w, h| {
        try testing.expectEqual(w.name.ptr, h.name.ptr);
        try testing.expectEqual(w.name.len, h.name.len);
        try testing.expectEqual(w.value.ptr, h.value.ptr);
        try testing.expectEqual(w.value.len, h.value.len);
    }
    inline for (.{ "host", "upgrade" }) |field| {
        try testing.expectEqual(@field(want, field) == null, @field(have, field) == null);
        if (@field(want, field)) |w| {
            try testing.expectEqual(w.ptr, @field(have, field).?.ptr);
            try testing.expectEqual(w.len, @field(have, field).?.len);
        }
    }
    try testing.expectEqual(want.framing, have.framing);
    try testing.expectEqual(want.keep_alive, have.keep_alive);
    try testing.expectEqual(want.expect_continue, have.expect_continue);
    try testing.expectEqual(want.connection_upgrade, have.connection_upgrade);
    try testing.expectEqual(want.len, have.len);
    try testing.expectEqual(reference_parser.offset, parser.offset);
}

/// `feed` and `feedLineByLine` on `bytes` whole, then on every prefix followed by the whole.
fn expectSameAsLines(bytes: []const u8, parser_limits: RequestParser.Limits) !void {
    var storage: [header_count_max]http.Header = undefined;
    var reference_storage: [header_count_max]http.Header = undefined;
    var parser: RequestParser = .init(&storage, parser_limits);
    var reference: RequestParser = .init(&reference_storage, parser_limits);
    try expectSameResult(reference.feedLineByLine(bytes), &reference, parser.feed(bytes), &parser);
    for (0..bytes.len) |cut| {
        parser.reset();
        reference.reset();
        const reference_first = reference.feedLineByLine(bytes[0..cut]);
        try expectSameResult(reference_first, &reference, parser.feed(bytes[0..cut]), &parser);
        const more = if (reference_first) |progress| progress == .need_more else |_| false;
        if (more) {
            try expectSameResult(reference.feedLineByLine(bytes), &reference, parser.feed(bytes), &parser);
        }
    }
}

test "RequestParser: the short path agrees with line-by-line parsing, an odd byte at every position" {
    var buffer: [80]u8 = undefined;
    for (short_heads) |head| {
        for (0..head.len) |at| for (odd_bytes) |odd| {
            const bytes = buffer[0..head.len];
            @memcpy(bytes, head);
            bytes[at] = odd;
            expectSameAsLines(bytes, limits) catch |err| {
                std.debug.print("case: {f}\n", .{std.zig.fmtString(bytes)});
                return err;
            };
        };
    }
}

test "RequestParser: the short path agrees with line-by-line parsing at every length and limit" {
    var buffer: [80]u8 = undefined;
    for (short_heads) |head| {
        // Every length of what follows the head, up to past the 64 bytes classified, and limits
        // below, at and above the head's size.
        for (0..buffer.len - head.len + 1) |extra| {
            const bytes = buffer[0 .. head.len + extra];
            @memcpy(bytes[0..head.len], head);
            for (bytes[head.len..], 0..) |*b, i| b.* = "\r\nGET / HTTP/1.1\r\n"[i % 18];
            for ([_]u32{ 16, 40, 63, 64, 65, 128 }) |line_max| {
                const parser_limits: RequestParser.Limits = .{
                    .request_line_bytes_max = line_max,
                    .header_bytes_max = @max(line_max, 41),
                };
                expectSameAsLines(bytes, parser_limits) catch |err| {
                    std.debug.print("case: {f} limit {d}\n", .{ std.zig.fmtString(bytes), line_max });
                    return err;
                };
            }
        }
    }
}

test "RequestParser: the short path checks Host values as validateHost does" {
    const values = [_][]const u8{
        "",               "a",          "127.0.0.1:8080",  "shop.example.com", "a:",    "a:65535",
        "a:123456",       "a:1:2",      ":80",             ":",                "a b",   "u@a",
        "a/b",            "a?b",        "a#b",             "a:80x",            "a:8-0", "a:8.0",
        "a:0x1",          "[::1]:8080", "[::1]",           "[::1]x",           "a[b]",  "~!$&'()*+,;=%-._",
        "A-Z.a-z_0-9~:0", "a\\b",       "a\"b",            "a<b>",             "a^b",   "a`b",
        "a{b}",           "a|b",        "fifteen-byte:12", "x:99999",          "x:0",   "-.-:1",
    };
    var buffer: [80]u8 = undefined;
    for (values) |value| {
        for ([_][]const u8{ "", " ", "  " }) |before| for ([_][]const u8{ "", " " }) |after| {
            const bytes = try std.mem.print(&buffer, "GET / HTTP/1.1\r\nHost:{s}{s}{s}\r\n\r\n", .{
                before, value, after,
            });
            expectSameAsLines(bytes, limits) catch |err| {
                std.debug.print("case: {f}\n", .{std.zig.fmtString(bytes)});
                return err;
            };
        };
    }
}
