//! Resumable, zero-copy parser for an HTTP/1.x request head (RFC 9112 §2–§3, §5–§7, §9.3).
//!
//! The caller keeps the head's bytes in one buffer and calls `feed` with everything received
//! so far; the parser resumes at the first line it has not finished. Every slice in `head`
//! points into that buffer. Validation is strict: anything RFC 9112 lets a server reject, or
//! that could frame a message two ways (request smuggling), is an error with its own name, and
//! `status` maps each error to its answer (README.md, Limits and "What the HTTP/1 core does").
const std = @import("std");
const assert = std.debug.assert;
const http = @import("../http.zig");
const scan = @import("scan.zig");
const HeadBlocks = @import("HeadBlocks.zig");

const RequestParser = @This();

/// Where the parser is in the head.
state: State = .request_line,
/// Offset of the first byte of the line the parser has not finished yet.
offset: u32 = 0,
/// Offset of the request line (after any empty lines sent before it).
line_start: u32 = 0,
/// The result; valid once `feed` returned `.complete`.
head: Head,
/// Storage for the header fields; its length is the header count limit.
header_storage: []http.Header,
/// Limits applied while parsing.
limits: Limits,
/// Framing and connection facts gathered during the one pass over the fields.
facts: Facts = .{},

/// Size limits checked while parsing. Assumes `request_line_bytes_max <= header_bytes_max`.
pub const Limits = struct {
    /// Longest request line, CRLF included (414 beyond).
    request_line_bytes_max: u32 = 9 * 1024,
    /// Longest head: request line, fields and the final CRLF (431 beyond).
    header_bytes_max: u32 = 64 * 1024,
};

/// Progress of the parser through the head.
pub const State = enum { request_line, fields, complete };

/// What `feed` reports when it did not fail.
pub const Progress = enum {
    /// The head is incomplete: call `feed` again when more bytes arrived.
    need_more,
    /// The head is complete; `head` is filled in and `head.len` bytes were consumed.
    complete,
};

/// How the message body is delimited (RFC 9112 §6.3).
pub const Framing = union(enum) {
    /// No body.
    none,
    /// Exactly this many bytes follow the head.
    content_length: u64,
    /// The body is chunked-encoded.
    chunked,
};

/// The parsed request head. Slices borrow the buffer passed to `feed`.
pub const Head = struct {
    method: http.Method = .GET,
    /// The request-target exactly as sent.
    target: []const u8 = "",
    /// The path part of the target, still percent-encoded; "*" for `OPTIONS *`, "" for the
    /// authority-form of CONNECT.
    path: []const u8 = "",
    /// The query without its '?', still percent-encoded; "" when there is none.
    query: []const u8 = "",
    version: http.Version = .http11,
    /// The header fields in the order received.
    headers: []http.Header = &.{},
    /// The Host field value, or the authority of an absolute-form target.
    host: ?[]const u8 = null,
    framing: Framing = .none,
    /// Whether the connection may stay open after this request (RFC 9112 §9.3).
    keep_alive: bool = true,
    /// Whether the client sent `Expect: 100-continue` (ignored for HTTP/1.0, RFC 9110 §10.1.1).
    expect_continue: bool = false,
    /// The Upgrade field value, if any.
    upgrade: ?[]const u8 = null,
    /// Whether the Connection field lists "upgrade".
    connection_upgrade: bool = false,
    /// Bytes of the head, the final CRLF included.
    len: u32 = 0,

    /// The protocol-neutral head a `Request` is made from.
    pub inline fn requestHead(head: *const Head) http.RequestHead {
        return .{
            .method = head.method,
            .target = head.target,
            .path = head.path,
            .query = head.query,
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
        };
    }
};

const Facts = struct {
    host_count: u8 = 0,
    /// Whether a field `finish` must look at again was seen: Content-Length,
    /// Transfer-Encoding, or an Expect other than 100-continue.
    unusual: bool = false,
    connection_close: bool = false,
    connection_keep_alive: bool = false,
    content_length: ?u64 = null,
    transfer_encoding: bool = false,
    chunked: bool = false,
    unsupported_coding: bool = false,
    unsupported_expectation: bool = false,
};

/// Every way a request head can be rejected. `status` gives the response for each.
pub const Error = error{
    /// The request line does not have the form `method SP target SP version CRLF`.
    InvalidRequestLine,
    /// The method is not a token.
    InvalidMethod,
    /// The method is a valid token that saker does not implement (501).
    MethodNotImplemented,
    /// The request-target is not in origin, absolute, authority or asterisk form.
    InvalidTarget,
    /// The version is not `HTTP/DIGIT.DIGIT`.
    InvalidVersion,
    /// The version is well-formed but not 1.0 or 1.1 (505).
    VersionNotSupported,
    /// The request line exceeds `request_line_bytes_max` (414).
    RequestLineTooLong,
    /// A CR not followed by LF.
    BareCarriageReturn,
    /// A line ending in LF without CR.
    BareLineFeed,
    /// A field name that is empty or not a token.
    InvalidHeaderName,
    /// Whitespace between a field name and its colon (RFC 9112 §5.1).
    WhitespaceBeforeColon,
    /// A field line starting with whitespace (obs-fold, RFC 9112 §5.2).
    ObsoleteLineFolding,
    /// A field value containing NUL, another control byte or DEL.
    InvalidHeaderValue,
    /// The head exceeds `header_bytes_max` (431).
    HeaderSectionTooLarge,
    /// More fields than the header array holds (431).
    TooManyHeaders,
    /// An HTTP/1.1 request without Host (RFC 9112 §3.2).
    MissingHost,
    /// More than one Host field line.
    DuplicateHost,
    /// A Host value that is not `uri-host [":" port]`.
    InvalidHost,
    /// A Content-Length that is not a decimal number that fits 64 bits.
    InvalidContentLength,
    /// Content-Length values that disagree.
    ConflictingContentLength,
    /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.3, smuggling defence).
    ContentLengthWithTransferEncoding,
    /// A transfer coding after chunked, chunked twice, or an empty Transfer-Encoding.
    ChunkedNotFinal,
    /// Transfer-Encoding in an HTTP/1.0 request (RFC 9112 §6.1).
    TransferEncodingInHttp10,
    /// A transfer coding other than chunked (501).
    UnsupportedTransferEncoding,
    /// An Expect value other than 100-continue (417).
    UnsupportedExpectation,
};

/// Creates a parser that stores fields in `header_storage`.
/// Asserts the limits are consistent.
pub fn init(header_storage: []http.Header, limits: Limits) RequestParser {
    assert(limits.request_line_bytes_max <= limits.header_bytes_max);
    assert(header_storage.len > 0);
    return .{ .head = .{}, .header_storage = header_storage, .limits = limits };
}

/// Forgets the current request so the parser can take the next one.
pub fn reset(parser: *RequestParser) void {
    parser.* = .init(parser.header_storage, parser.limits);
}

/// Parses as much of the head in `bytes` as it can. `bytes` must start where the previous
/// call's `bytes` started and hold at least as many bytes. On `.complete`, `head` describes the
/// request and its slices point into `bytes`.
pub fn feed(parser: *RequestParser, bytes: []const u8) Error!Progress {
    // A fresh parser (only one still at the request line has `offset` 0) and a head that ends
    // within the first `scan.Short.len` bytes: the short path, unless the lines are unusual.
    // This test is all a longer head pays for it.
    if (parser.offset == 0 and bytes.len >= 32 and
        parser.limits.request_line_bytes_max >= scan.Short.len)
    {
        assert(parser.state == .request_line);
        const short: scan.Short = .load(bytes);
        const lf = short.lineFeeds();
        // The empty line that ends the head: an LF two bytes after an LF.
        const ends = lf & (lf << 2);
        if (ends != 0) return parser.feedShort(bytes, lf, @ctz(ends));
    }
    return parser.feedGeneral(bytes);
}

/// `feed` for a head that ends at the LF at `end`, within the first `scan.Short.len` bytes,
/// whose line feeds are `lf`. Not inlined, so a longer head does not pay for its registers and
/// stack frame.
noinline fn feedShort(
    parser: *RequestParser,
    bytes: []const u8,
    lf: u64,
    end: usize,
) Error!Progress {
    if (try parser.parseShort(bytes, .load(bytes), lf, end)) return .complete;
    return parser.feedGeneral(bytes);
}

/// `feed` for every head `parseShort` does not take. Not inlined, so the short path does not
/// pay for this one's registers and stack frame.
noinline fn feedGeneral(parser: *RequestParser, bytes: []const u8) Error!Progress {
    return parser.feedWith(bytes, .blocks);
}

/// `feed` without the block fast path: field lines are parsed one at a time. Gives the same
/// result as `feed` for every input; the fuzzer checks that.
pub fn feedLineByLine(parser: *RequestParser, bytes: []const u8) Error!Progress {
    return parser.feedWith(bytes, .lines);
}

const FieldsPath = enum { blocks, lines };

inline fn feedWith(parser: *RequestParser, bytes: []const u8, comptime path: FieldsPath) Error!Progress {
    assert(parser.state != .complete);
    assert(parser.offset <= bytes.len);
    if (parser.state == .request_line) {
        if (try parser.parseRequestLine(bytes) == .need_more) return .need_more;
        assert(parser.state == .fields);
    }
    const fields_done = switch (path) {
        .blocks => !endsSoon(bytes, parser.offset) and try parser.parseFieldsBlocks(bytes),
        .lines => false,
    };
    if (!fields_done and try parser.parseFieldsLines(bytes) == .need_more) {
        if (bytes.len - parser.line_start > parser.limits.header_bytes_max)
            return error.HeaderSectionTooLarge;
        return .need_more;
    }
    try parser.finish();
    parser.state = .complete;
    return .complete;
}

/// The short-head path, for a head that ends within the first `scan.Short.len` bytes (a
/// request line and a field or two, as load generators such as wrk send): the lines are found
/// in the masks of one classification of those bytes instead of by a scan each. It takes a head
/// whose lines all end in CRLF with no other control byte (nor DEL, nor a byte above 0x7F),
/// whose version is 1.0 or 1.1 and whose method is one saker implements; for anything else it
/// returns false, with the parser as `reset` leaves it, and `feedGeneral` decides. Every error
/// it returns comes from the functions the general path calls for the same line, in the same
/// order, so both give the same head or the same error for every input. Assumes a fresh parser
/// and a request line limit of at least `scan.Short.len` bytes (so no limit can be exceeded).
inline fn parseShort(
    parser: *RequestParser,
    bytes: []const u8,
    short: scan.Short,
    lf: u64,
    end: usize,
) Error!bool {
    assert(parser.state == .request_line and parser.offset == 0);
    assert(parser.limits.request_line_bytes_max >= scan.Short.len);
    assert(end < scan.Short.len and lf >> @intCast(end) & 1 == 1);
    const through_end = (@as(u64, 2) << @intCast(end)) -% 1;
    // Every control byte up to the end is an LF or right before one (each line checks that
    // this one is its CR), so no value or target holds one, nor a tab; no byte is DEL or
    // above 0x7F (rare in a short head, and left to the general path).
    if ((short.irregulars() ^ (lf | lf >> 1)) & through_end != 0) return false;

    // The request line: "HTTP/1.1" or "HTTP/1.0" before its CRLF, SP before that.
    const line_lf: usize = @ctz(lf);
    if (line_lf < "M / HTTP/1.1\r".len or bytes[line_lf - 1] != '\r') return false;
    const version_name = std.mem.readInt(u64, bytes[line_lf - 9 ..][0..8], .little);
    const version: http.Version = switch (version_name) {
        std.mem.readInt(u64, "HTTP/1.1", .little) => .http11,
        std.mem.readInt(u64, "HTTP/1.0", .little) => .http10,
        else => return false,
    };
    const target_end = line_lf - 10;
    // What ends a method or a target, and '?': the first after the method must be its SP.
    const stops = short.targetStops();
    const get = short.firstWord() == std.mem.readInt(u32, "GET ", .little);
    const method: http.Method, const target_start: usize = if (get) .{ .GET, 4 } else blk: {
        const space: usize = @ctz(stops); // at the request line's CR at the latest
        if (bytes[space] != ' ') return false;
        break :blk .{ http.Method.parse(bytes[0..space]) orelse return false, space + 1 };
    };
    // The target: nothing but '?' that `stops` has before the SP at `target_end`.
    if (target_end <= target_start or bytes[target_end] != ' ') return false;
    const target_bits = (@as(u64, 1) << @intCast(target_end - target_start)) - 1;
    const in_target = stops >> @intCast(target_start) & target_bits;
    var marks = in_target;
    while (marks != 0) : (marks &= marks - 1) {
        if (bytes[target_start + @ctz(marks)] != '?') return false;
    }

    const head = &parser.head;
    try parser.setRequestLine(method, version, bytes[target_start..target_end], if (in_target != 0) @ctz(in_target) else null);

    // The field lines, up to the empty line.
    const others = short.others();
    const storage = parser.header_storage;
    var count: usize = 0;
    var feeds = lf & through_end;
    feeds &= feeds - 1; // the request line's
    var start = line_lf + 1;
    while (true) {
        const field_lf: usize = @ctz(feeds);
        if (bytes[field_lf - 1] != '\r') break;
        if (field_lf == end) {
            head.headers = storage[0..count];
            parser.offset = @intCast(end + 1);
            try parser.finish();
            parser.state = .complete;
            return true;
        }
        feeds &= feeds - 1;
        // The name's end is nearly always its colon; other token bytes take the table.
        var colon: usize = start + @ctz(others >> @intCast(start));
        if (bytes[colon] != ':') {
            while (scan.token_table[bytes[colon]]) colon += 1; // stops at the CR at the latest
            if (bytes[colon] != ':') break;
        }
        if (colon == start) break;
        try parser.addField(bytes, storage, &count, start, colon, field_lf - 1, others);
        start = field_lf + 1;
    }
    parser.reset();
    return false;
}

fn parseRequestLine(parser: *RequestParser, bytes: []const u8) Error!Progress {
    // RFC 9112 §2.2: ignore empty lines received before the request line.
    var start: usize = parser.offset;
    while (start + 1 < bytes.len and bytes[start] == '\r' and bytes[start + 1] == '\n') {
        start += 2;
        if (start > parser.limits.request_line_bytes_max) return error.InvalidRequestLine;
    }
    parser.offset = @intCast(start);
    parser.line_start = @intCast(start);
    if (bytes.len - start < 2) return .need_more; // "" or a lone CR that may start a CRLF
    const line_max = parser.limits.request_line_bytes_max;
    const line_len = parser.requestLineLength(bytes[start..]) catch |err| switch (err) {
        error.NeedMore => {
            if (bytes.len - start >= line_max) return error.RequestLineTooLong;
            return .need_more;
        },
        else => |e| return e,
    };
    if (line_len > line_max) return error.RequestLineTooLong;
    parser.offset = @intCast(start + line_len);
    parser.state = .fields;
    return .complete;
}

/// Parses `method SP target SP version CRLF` at the start of `line`; returns its length.
fn requestLineLength(parser: *RequestParser, line: []const u8) (Error || error{NeedMore})!usize {
    // Method: a token, then one SP. "GET " is nearly every request: one 4-byte compare.
    const known_method: ?http.Method, const method_len: usize = if (line.len >= 4 and
        std.mem.readInt(u32, line[0..4], .little) == std.mem.readInt(u32, "GET ", .little))
        .{ .GET, 3 }
    else
        .{ null, try methodLength(line) };
    const method_token = line[0..method_len];

    // Target: everything up to the next byte that cannot be in a target, which must be SP.
    const target_start = method_len + 1;
    const target_scan = scan.findTarget(line, target_start) orelse return error.NeedMore;
    const target_end = target_scan.end;
    if (line[target_end] != ' ') return switch (line[target_end]) {
        '\r', '\n' => error.InvalidRequestLine, // HTTP/0.9 form or missing version
        else => error.InvalidTarget,
    };
    if (target_end == target_start) return error.InvalidTarget;
    const target = line[target_start..target_end];

    // Version: exactly "HTTP/1.1" or "HTTP/1.0", then CRLF.
    const v = target_end + 1;
    if (line.len < v + "HTTP/1.1\r\n".len) {
        // Reject early what can never become a version.
        const have = line[v..];
        const prefix = "HTTP/1.1"[0..@min(have.len, 5)];
        if (!std.mem.eql(u8, have[0..prefix.len], prefix)) return error.InvalidVersion;
        return error.NeedMore;
    }
    const version = try parseVersion(line[v..][0..10]);

    const method = known_method orelse
        http.Method.parse(method_token) orelse return error.MethodNotImplemented;
    try parser.setRequestLine(method, version, target, if (target_scan.query) |q| q - target_start else null);
    return v + 10;
}

/// Sets the head's method, version and target, and splits an origin-form target at its first
/// '?' (`query_at`, an index into `target`, found by the caller's scan); other forms go to
/// `splitTarget`. Both paths through `feed` end their request line here.
inline fn setRequestLine(parser: *RequestParser, method: http.Method, version: http.Version, target: []const u8, query_at: ?usize) Error!void {
    const head = &parser.head;
    head.method = method;
    head.version = version;
    head.target = target;
    if (target[0] == '/') { // origin-form
        if (query_at) |q| {
            assert(target[q] == '?');
            head.path = target[0..q];
            head.query = target[q + 1 ..];
        } else {
            head.path = target;
            head.query = "";
        }
    } else {
        try parser.splitTarget(method, target);
    }
}

/// Length of the method token at the start of `line`, which must be followed by SP.
fn methodLength(line: []const u8) (Error || error{NeedMore})!usize {
    var i: usize = 0;
    while (i < line.len and scan.token_table[line[i]]) i += 1;
    if (i == line.len) return error.NeedMore;
    if (line[i] != ' ') return if (i == 0 and line[0] == '\n')
        error.BareLineFeed
    else
        error.InvalidMethod;
    if (i == 0) return error.InvalidMethod;
    return i;
}

/// Parses "HTTP/1.1\r\n" or "HTTP/1.0\r\n": two integer compares in the common case.
fn parseVersion(text: *const [10]u8) Error!http.Version {
    const name = std.mem.readInt(u64, text[0..8], .little);
    if (std.mem.readInt(u16, text[8..10], .little) == std.mem.readInt(u16, "\r\n", .little)) {
        if (name == std.mem.readInt(u64, "HTTP/1.1", .little)) return .http11;
        if (name == std.mem.readInt(u64, "HTTP/1.0", .little)) return .http10;
    }
    const version: http.Version = if (std.mem.eql(u8, text[0..8], "HTTP/1.1"))
        .http11
    else if (std.mem.eql(u8, text[0..8], "HTTP/1.0"))
        .http10
    else if (std.mem.eql(u8, text[0..7], "HTTP/1.") and std.ascii.isDigit(text[7]))
        // A later HTTP/1 minor version is processed as the highest this server speaks
        // (RFC 9110 §2.5); the response says HTTP/1.1.
        .http11
    else {
        const well_formed = std.mem.eql(u8, text[0..5], "HTTP/") and std.ascii.isDigit(text[5]) and
            text[6] == '.' and std.ascii.isDigit(text[7]);
        return if (well_formed) error.VersionNotSupported else error.InvalidVersion;
    };
    if (text[8] != '\r') return if (text[8] == '\n') error.BareLineFeed else error.InvalidVersion;
    if (text[9] != '\n') return error.BareCarriageReturn;
    return version;
}

/// Splits an asterisk-, authority- or absolute-form target into path and query (RFC 9112 §3.2).
fn splitTarget(parser: *RequestParser, method: http.Method, target: []const u8) Error!void {
    const head = &parser.head;
    assert(target[0] != '/'); // origin-form is split by `requestLineLength`
    if (method == .OPTIONS and target.len == 1 and target[0] == '*') { // asterisk-form
        head.path = target;
        return;
    }
    if (method == .CONNECT) { // authority-form
        try validateHost(target);
        head.host = target;
        return;
    }
    // absolute-form: "http://" or "https://" authority path-abempty ["?" query]
    const scheme_end = std.mem.find(u8, target, "://") orelse return error.InvalidTarget;
    const scheme = target[0..scheme_end];
    if (!http.eqlLower(scheme, "http") and !http.eqlLower(scheme, "https"))
        return error.InvalidTarget;
    const rest = target[scheme_end + 3 ..];
    const authority_end = std.mem.findAny(u8, rest, "/?") orelse rest.len;
    const authority = rest[0..authority_end];
    if (authority.len == 0) return error.InvalidTarget;
    validateHost(authority) catch return error.InvalidTarget;
    head.host = authority;
    const path_and_query = rest[authority_end..];
    const q = std.mem.findScalar(u8, path_and_query, '?');
    const path = if (q) |p| path_and_query[0..p] else path_and_query;
    head.path = if (path.len == 0) "/" else path;
    head.query = if (q) |p| path_and_query[p + 1 ..] else "";
}

/// Whether the head ends within 32 bytes of `start` (or `bytes` is shorter than a block): a
/// field or two, as most API clients and load generators send. Line by line is cheaper then
/// than classifying a whole block.
inline fn endsSoon(bytes: []const u8, start: usize) bool {
    if (bytes.len - start < HeadBlocks.block_len) return true;
    const chunk: @Vector(32, u8) = bytes[start..][0..32].*;
    const lf: u32 = @bitCast(chunk == @as(@Vector(32, u8), @splat('\n')));
    // An LF two bytes after an LF; the request line's LF is just before `start`.
    return lf & ((lf << 2) | 2) != 0;
}

/// The fast path: takes the field lines from `HeadBlocks`' bitmaps while every line is plain
/// (a letters-digits-dashes or token name, a colon, a value without control bytes, CRLF).
/// Returns true when it reached the end of the head; false, with `offset` and `head.headers`
/// at the first line it did not take, when the line-by-line parser must go on (an unusual or
/// invalid line, a long or incomplete head). It returns only errors that line-by-line parsing
/// would return for the same line.
fn parseFieldsBlocks(parser: *RequestParser, bytes: []const u8) Error!bool {
    var blocks: HeadBlocks = undefined;
    if (!blocks.index(bytes, parser.offset)) return false;
    const storage = parser.header_storage;
    var count = parser.head.headers.len;
    var start: usize = parser.offset;
    defer {
        parser.offset = @intCast(start);
        parser.head.headers = storage[0..count];
    }
    var feeds: HeadBlocks.LineFeeds = .init(&blocks);
    while (true) {
        const lf = feeds.next();
        if (bytes[lf - 1] != '\r') return false;
        if (lf == blocks.end) {
            start = lf + 1;
            if (start - parser.line_start > parser.limits.header_bytes_max)
                return error.HeaderSectionTooLarge;
            return true;
        }
        // The name's end is nearly always its colon; other token bytes ('_', '.', …) take the
        // table, and any other line the line-by-line parser.
        var colon = blocks.nameEnd(start);
        if (bytes[colon] != ':') {
            colon = std.mem.findScalarPos(u8, bytes[0..lf], colon, ':') orelse return false;
            if (!scan.isToken(bytes[start..colon])) return false;
        }
        if (colon == start) return false;
        try parser.addField(bytes, storage, &count, start, colon, lf - 1, {});
        start = lf + 1;
    }
}

/// Parses field lines one at a time; resumes at the line `offset` points to. `offset` and
/// `head.headers` advance a whole line at a time, so a head cut anywhere resumes at the line it
/// cut; while the loop runs they live in registers.
fn parseFieldsLines(parser: *RequestParser, bytes: []const u8) Error!Progress {
    const storage = parser.header_storage;
    var count = parser.head.headers.len;
    var start: usize = parser.offset;
    defer {
        parser.offset = @intCast(start);
        parser.head.headers = storage[0..count];
    }
    while (true) {
        if (start >= bytes.len) return .need_more;
        switch (bytes[start]) {
            '\r' => {
                if (start + 1 >= bytes.len) return .need_more;
                if (bytes[start + 1] != '\n') return error.BareCarriageReturn;
                start += 2;
                if (start - parser.line_start > parser.limits.header_bytes_max)
                    return error.HeaderSectionTooLarge;
                return .complete;
            },
            '\n' => return error.BareLineFeed,
            ' ', '\t' => return error.ObsoleteLineFolding,
            else => {},
        }
        const i = scan.findNameEnd(bytes, start);
        if (i == bytes.len) return .need_more;
        switch (bytes[i]) {
            ':' => if (i == start) return error.InvalidHeaderName,
            ' ', '\t' => return error.WhitespaceBeforeColon,
            '\r' => return error.InvalidHeaderName,
            '\n' => return error.BareLineFeed,
            else => return error.InvalidHeaderName,
        }
        // The line's end first: then trimming the value's whitespace needs no bounds checks.
        const stop = scan.findValueEnd(bytes, i + 1);
        if (stop == bytes.len) return .need_more;
        switch (bytes[stop]) {
            '\r' => {
                if (stop + 1 >= bytes.len) return .need_more;
                if (bytes[stop + 1] != '\n') return error.BareCarriageReturn;
            },
            '\n' => return error.BareLineFeed,
            else => return error.InvalidHeaderValue,
        }
        try parser.addField(bytes, storage, &count, start, i, stop, {});
        start = stop + 2;
    }
}

/// Stores the field whose name is `bytes[start..colon]` and whose line ends with the CR at
/// `cr`, and notes what it says about framing and the connection. `others` is the short-head
/// path's `scan.Short.others` mask, or void.
inline fn addField(
    parser: *RequestParser,
    bytes: []const u8,
    storage: []http.Header,
    count: *usize,
    start: usize,
    colon: usize,
    cr: usize,
    others: anytype,
) Error!void {
    // Optional whitespace around the value (RFC 9112 §5.1): nearly always one SP before
    // it and none after, which one test settles (`bytes[cr]` is the CR, and `bytes[cr - 1]` at
    // worst the colon). On the short path no value holds a tab: SP is all there is to look for.
    const ows = if (@TypeOf(others) == void) isWhitespace else isSpace;
    var value_start = colon + 1 + @intFromBool(bytes[colon + 1] == ' ');
    var value_end = cr;
    if (ows(bytes[value_start]) or ows(bytes[cr - 1])) {
        while (value_start < cr and ows(bytes[value_start])) value_start += 1;
        while (value_end > value_start and ows(bytes[value_end - 1])) value_end -= 1;
    }
    // The head's size is checked when its end is found, or by `feed` while it is incomplete.
    if (count.* == storage.len) return error.TooManyHeaders;
    const name = bytes[start..colon];
    storage[count.*] = .{ .name = name, .value = bytes[value_start..value_end] };
    count.* += 1;
    try parser.noteField(bytes, name, value_start, value_end, others);
}

inline fn isWhitespace(c: u8) bool {
    return whitespace_table[c];
}

inline fn isSpace(c: u8) bool {
    return c == ' ';
}

/// SP and HTAB, the optional whitespace around field values.
const whitespace_table: [256]bool = blk: {
    var table: [256]bool = @splat(false);
    table[' '] = true;
    table['\t'] = true;
    break :blk table;
};

/// Records what the fields that affect framing and the connection say (one pass). Inlined
/// into the field loop: most names match none of its cases, and the call would cost more.
/// `others` is the short-head path's `scan.Short.others` mask (a Host value it shows to be
/// simple needs no other check), or void.
inline fn noteField(
    parser: *RequestParser,
    bytes: []const u8,
    name: []const u8,
    value_start: usize,
    value_end: usize,
    others: anytype,
) Error!void {
    if (@TypeOf(others) != void) {
        // The short path: Host inline, any other field (few short heads have one) out of line.
        if (name.len == 4 and http.eqlLower(name, "host"))
            return parser.noteHost(bytes, value_start, value_end, others);
        return parser.noteFieldOutOfLine(bytes, name, value_start, value_end);
    }
    const facts = &parser.facts;
    const value = bytes[value_start..value_end];
    switch (name.len) {
        4 => if (http.eqlLower(name, "host")) {
            try parser.noteHost(bytes, value_start, value_end, others);
        },
        6 => if (http.eqlLower(name, "expect")) {
            if (http.eqlLower(value, "100-continue")) {
                parser.head.expect_continue = true;
            } else {
                facts.unsupported_expectation = true;
                facts.unusual = true;
            }
        },
        7 => if (http.eqlLower(name, "upgrade")) {
            parser.head.upgrade = value;
        },
        10 => if (http.eqlLower(name, "connection")) {
            // The two common values first, without splitting a list.
            if (http.eqlLower(value, "keep-alive")) {
                facts.connection_keep_alive = true;
                return;
            }
            if (http.eqlLower(value, "close")) {
                facts.connection_close = true;
                return;
            }
            var it: http.ListIterator = .init(value);
            while (it.next()) |option| {
                if (http.eqlLower(option, "close")) facts.connection_close = true;
                if (http.eqlLower(option, "keep-alive")) facts.connection_keep_alive = true;
                if (http.eqlLower(option, "upgrade")) parser.head.connection_upgrade = true;
            }
        },
        14 => if (http.eqlLower(name, "content-length")) {
            const length = try parseContentLength(value);
            if (facts.content_length) |previous| {
                if (previous != length) return error.ConflictingContentLength;
            }
            facts.content_length = length;
            facts.unusual = true;
        },
        17 => if (http.eqlLower(name, "transfer-encoding")) {
            facts.transfer_encoding = true;
            facts.unusual = true;
            var it: http.ListIterator = .init(value);
            while (it.next()) |coding| {
                if (facts.chunked) return error.ChunkedNotFinal;
                if (http.eqlLower(coding, "chunked"))
                    facts.chunked = true
                else
                    facts.unsupported_coding = true;
            }
        },
        else => {},
    }
}

/// `noteField` for the short path's fields other than Host.
noinline fn noteFieldOutOfLine(
    parser: *RequestParser,
    bytes: []const u8,
    name: []const u8,
    value_start: usize,
    value_end: usize,
) Error!void {
    return parser.noteField(bytes, name, value_start, value_end, {});
}

/// Notes the Host field whose value is `bytes[value_start..value_end]`. `others` as for
/// `noteField`.
inline fn noteHost(
    parser: *RequestParser,
    bytes: []const u8,
    value_start: usize,
    value_end: usize,
    others: anytype,
) Error!void {
    const facts = &parser.facts;
    if (facts.host_count > 0) return error.DuplicateHost;
    facts.host_count = 1;
    if (@TypeOf(others) == void or !simpleHost(bytes, others, value_start, value_end))
        try validateHostIn(bytes, value_start, value_end);
    // An absolute-form target's authority wins over Host (RFC 9112 §3.2.2).
    if (parser.head.host == null) parser.head.host = bytes[value_start..value_end];
}

/// Parses a Content-Length value: one decimal number, or a list of identical numbers
/// (RFC 9110 §8.6). Signs, hex, spaces inside numbers and overflow are errors.
pub fn parseContentLength(value: []const u8) Error!u64 {
    var result: ?u64 = null;
    var it: http.ListIterator = .init(value);
    while (it.next()) |member| {
        var length: u64 = 0;
        for (member) |c| {
            if (c < '0' or c > '9') return error.InvalidContentLength;
            length = std.math.mul(u64, length, 10) catch return error.InvalidContentLength;
            length = std.math.add(u64, length, c - '0') catch return error.InvalidContentLength;
        }
        if (result) |r| if (r != length) return error.ConflictingContentLength;
        result = length;
    }
    return result orelse error.InvalidContentLength;
}

/// Checks `uri-host [":" port]` (RFC 9110 §7.2, RFC 3986 §3.2.2) loosely enough for real
/// clients and strictly enough to keep whitespace, '@', '/' and friends out. Empty is allowed.
fn validateHost(value: []const u8) Error!void {
    if (value.len > 0 and value[0] == '[') { // IP-literal
        const close = std.mem.findScalar(u8, value, ']') orelse return error.InvalidHost;
        for (value[1..close]) |c| {
            if (!(std.ascii.isHex(c) or c == ':' or c == '.')) return error.InvalidHost;
        }
        return validatePort(value[close + 1 ..]);
    }
    var i: usize = 0;
    while (i < value.len and scan.host_table[value[i]]) i += 1;
    return validatePort(value[i..]);
}

/// `validateHost` for a Host value at `bytes[start..end]`. A value of up to 16 bytes is
/// classified with one vector load from `bytes` (neighbouring bytes are loaded and ignored):
/// reg-name bytes up to an optional ':' and at most five digits. Anything else (an IP literal,
/// a longer value, an error) takes the byte loop of `validateHost`, which decides.
inline fn validateHostIn(bytes: []const u8, start: usize, end: usize) Error!void {
    const len = end - start;
    if (len == 0) return; // an empty Host is allowed (RFC 9112 §3.2)
    if (len <= 16 and bytes.len >= 16) {
        // A window that holds the value: from its start, or the last 16 bytes of `bytes`.
        const base = @min(start, bytes.len - 16);
        const shift: u4 = @intCast(start - base);
        const chunk: @Vector(16, u8) = bytes[base..][0..16].*;
        const in_value: u16 = @truncate((@as(u32, 1) << @intCast(len)) - 1);
        const not_host = ~(scan.hostLanes(chunk) >> shift) & in_value;
        if (not_host == 0) return; // a reg-name or IPv4 address without a port
        const colon = @ctz(not_host);
        if (bytes[start + colon] == ':') {
            const port_lanes = in_value & ~((@as(u32, 2) << colon) - 1);
            const port_ok = port_lanes & ~(scan.digitLanes(chunk) >> shift) == 0;
            if (port_ok and len - colon - 1 <= 5) return;
            return error.InvalidHost;
        }
    }
    return validateHost(bytes[start..end]);
}

/// Whether the Host value at `bytes[start..end]`, within the short-head window, is letters,
/// digits, '-' and '.' with at most a ':' and five digits after them: a reg-name or IPv4
/// address `validateHost` accepts. `others` has the bits of the bytes that are none of letters,
/// digits, '-' and '.'. False leaves the value to `validateHostIn`.
inline fn simpleHost(bytes: []const u8, others: u64, start: usize, end: usize) bool {
    assert(start <= end and end < scan.Short.len and end >= 8);
    const len = end - start;
    const odd = others >> @intCast(start) & ((@as(u64, 1) << @intCast(len)) - 1);
    if (odd == 0) return true;
    const colon: usize = @ctz(odd);
    if (bytes[start + colon] != ':' or odd & (odd - 1) != 0) return false;
    const port_len = len - colon - 1;
    if (port_len > 5) return false;
    // The port's bytes are letters, digits, '-' or '.': the digits are those of the form 0x3?.
    const word = std.mem.readInt(u64, bytes[end - 8 ..][0..8], .little);
    const port = ~(~@as(u64, 0) >> @intCast(8 * port_len)); // its bytes, the last of `word`
    return (word ^ 0x3030303030303030) & 0xf0f0f0f0f0f0f0f0 & port == 0;
}

fn validatePort(rest: []const u8) Error!void {
    if (rest.len == 0) return;
    if (rest[0] != ':' or rest.len > 6) return error.InvalidHost;
    for (rest[1..]) |c| if (!std.ascii.isDigit(c)) return error.InvalidHost;
}

/// Decides framing and persistence once all fields are in (RFC 9112 §6.3, §9.3). An HTTP/1.1
/// request without Content-Length, Transfer-Encoding or an odd Expect (nearly every request
/// without a body) needs only its Host and Connection facts.
inline fn finish(parser: *RequestParser) Error!void {
    const head = &parser.head;
    const facts = &parser.facts;
    head.len = parser.offset;
    if (head.version == .http11 and !facts.unusual) {
        if (facts.host_count == 0) return error.MissingHost;
        head.keep_alive = !facts.connection_close;
        return;
    }
    return parser.finishUnusual();
}

/// `finish` for HTTP/1.0 and for heads with framing fields or an unsupported expectation.
fn finishUnusual(parser: *RequestParser) Error!void {
    const head = &parser.head;
    const facts = &parser.facts;
    if (head.version == .http11 and facts.host_count == 0) return error.MissingHost;
    if (facts.transfer_encoding) {
        if (facts.content_length != null) return error.ContentLengthWithTransferEncoding;
        if (head.version == .http10) return error.TransferEncodingInHttp10;
        if (facts.unsupported_coding) return error.UnsupportedTransferEncoding;
        if (!facts.chunked) return error.ChunkedNotFinal;
        head.framing = .chunked;
    } else if (facts.content_length) |length| {
        head.framing = if (length == 0) .none else .{ .content_length = length };
    }
    if (facts.unsupported_expectation and head.version == .http11)
        return error.UnsupportedExpectation;
    if (head.version == .http10) head.expect_continue = false;
    head.keep_alive = switch (head.version) {
        .http11 => !facts.connection_close,
        .http10 => facts.connection_keep_alive and !facts.connection_close,
        .http2 => unreachable, // an HTTP/1 request line names 1.0 or 1.1
    };
}

/// The response status for a parse error (RFC 9112 and RFC 9110; README.md, Limits).
pub fn status(err: Error) http.Status {
    return switch (err) {
        error.MethodNotImplemented, error.UnsupportedTransferEncoding => .not_implemented,
        error.VersionNotSupported => .http_version_not_supported,
        error.RequestLineTooLong => .uri_too_long,
        error.HeaderSectionTooLarge, error.TooManyHeaders => .request_header_fields_too_large,
        error.UnsupportedExpectation => .expectation_failed,
        error.InvalidRequestLine,
        error.InvalidMethod,
        error.InvalidTarget,
        error.InvalidVersion,
        error.BareCarriageReturn,
        error.BareLineFeed,
        error.InvalidHeaderName,
        error.WhitespaceBeforeColon,
        error.ObsoleteLineFolding,
        error.InvalidHeaderValue,
        error.MissingHost,
        error.DuplicateHost,
        error.InvalidHost,
        error.InvalidContentLength,
        error.ConflictingContentLength,
        error.ContentLengthWithTransferEncoding,
        error.ChunkedNotFinal,
        error.TransferEncodingInHttp10,
        => .bad_request,
    };
}

/// A short explanation of a parse error, sent as the error response's body.
pub fn message(err: Error) []const u8 {
    return switch (err) {
        error.InvalidRequestLine => "malformed request line",
        error.InvalidMethod => "method is not a token",
        error.MethodNotImplemented => "method not implemented",
        error.InvalidTarget => "invalid request-target",
        error.InvalidVersion => "malformed HTTP version",
        error.VersionNotSupported => "only HTTP/1.0 and HTTP/1.1 are supported",
        error.RequestLineTooLong => "request line too long",
        error.BareCarriageReturn => "CR not followed by LF",
        error.BareLineFeed => "line ends in LF without CR",
        error.InvalidHeaderName => "invalid header field name",
        error.WhitespaceBeforeColon => "whitespace between header name and colon",
        error.ObsoleteLineFolding => "obsolete line folding is not allowed",
        error.InvalidHeaderValue => "control character in header field value",
        error.HeaderSectionTooLarge => "request header section too large",
        error.TooManyHeaders => "too many header fields",
        error.MissingHost => "HTTP/1.1 request without Host",
        error.DuplicateHost => "more than one Host header",
        error.InvalidHost => "invalid Host header",
        error.InvalidContentLength => "invalid Content-Length",
        error.ConflictingContentLength => "conflicting Content-Length values",
        error.ContentLengthWithTransferEncoding => "both Content-Length and Transfer-Encoding",
        error.ChunkedNotFinal => "chunked must be the final transfer coding, exactly once",
        error.TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
        error.UnsupportedTransferEncoding => "transfer coding not implemented",
        error.UnsupportedExpectation => "only 100-continue is supported in Expect",
    };
}

test "validateHostIn: agrees with validateHost for every value, offset and buffer end" {
    const values = [_][]const u8{
        "",                   "a",                "127.0.0.1:8080",   "shop.example.com",
        "shop.example.com:1", "localhost:",       "a:65535",          "a:123456",
        "a:1:2",              ":80",              ":",                "a b",
        "u@a",                "a/b",              "a?b",              "a#b",
        "a:80x",              "a:8 0",            "[::1]:8080",       "[::1]",
        "[::1]x",             "[",                "a[b]",             "x.example.org:8001",
        "~!$&'()*+,;=%-._",   "A-Z.a-z_0-9~:0",   "a\x80",            "a\\b",
        "a\"b",               "a<b>",             "a^b",              "a`b",
        "a{b}",               "a|b",              "a\x7f",            "sixteen-bytes.ab",
        "seventeen-bytes.a",  "sixteen-bytes:12", "fifteen-byte:123", "fifteen-byte:1234",
    };
    var buffer: [48]u8 = undefined;
    for (values) |value| {
        const expected = validateHost(value);
        for (0..buffer.len - value.len + 1) |start| {
            const end = start + value.len;
            const ends = [_]usize{ end, @min(end + 1, buffer.len), @min(end + 7, buffer.len), 48 };
            for (ends) |buffer_end| {
                for ([_]u8{ '\r', ':', '1', 'a' }) |filler| {
                    @memset(&buffer, filler);
                    @memcpy(buffer[start..end], value);
                    const result = validateHostIn(buffer[0..buffer_end], start, end);
                    std.testing.expectEqual(expected, result) catch |err| {
                        std.debug.print("value \"{f}\" at {d}, buffer end {d}\n", .{
                            std.zig.fmtString(value), start, buffer_end,
                        });
                        return err;
                    };
                }
            }
        }
    }
}

test {
    _ = @import("request_parser_test.zig");
}
