//! HTTP semantics shared by every protocol version (RFC 9110): methods, versions, status codes
//! and the header field type. Nothing here knows about the wire format.
const std = @import("std");

/// The request methods saker understands (RFC 9110 §9 plus PATCH, RFC 5789). A syntactically
/// valid method token that is not in this list is answered with 501 (RFC 9110 §9.1).
pub const Method = enum(u8) {
    GET,
    HEAD,
    POST,
    PUT,
    DELETE,
    CONNECT,
    OPTIONS,
    TRACE,
    PATCH,

    /// The method's name as sent on the wire.
    pub fn name(method: Method) []const u8 {
        return @tagName(method);
    }

    /// Parses a method token (case-sensitive, RFC 9110 §9.1). Null when not one of ours.
    pub fn parse(token: []const u8) ?Method {
        return switch (token.len) {
            3 => if (eql3(token, "GET")) .GET else if (eql3(token, "PUT")) .PUT else null,
            4 => if (std.mem.eql(u8, token, "POST"))
                .POST
            else if (std.mem.eql(u8, token, "HEAD")) .HEAD else null,
            5 => if (std.mem.eql(u8, token, "PATCH"))
                .PATCH
            else if (std.mem.eql(u8, token, "TRACE")) .TRACE else null,
            6 => if (std.mem.eql(u8, token, "DELETE")) .DELETE else null,
            7 => if (std.mem.eql(u8, token, "OPTIONS"))
                .OPTIONS
            else if (std.mem.eql(u8, token, "CONNECT")) .CONNECT else null,
            else => null,
        };
    }

    fn eql3(a: []const u8, comptime b: []const u8) bool {
        return a[0] == b[0] and a[1] == b[1] and a[2] == b[2];
    }
};

/// Protocol versions (RFC 9112 §2.3; RFC 9113).
pub const Version = enum(u2) {
    http10,
    http11,
    /// HTTP/2 (RFC 9113): a stream of an HTTP/2 connection.
    http2,

    /// "HTTP/1.0", "HTTP/1.1" or "HTTP/2.0" (as access logs write it).
    pub fn text(version: Version) []const u8 {
        return switch (version) {
            .http10 => "HTTP/1.0",
            .http11 => "HTTP/1.1",
            .http2 => "HTTP/2.0",
        };
    }
};

/// A byte range of an open file, sent as a body (`Response.File`).
pub const FileRange = struct {
    fd: std.posix.fd_t,
    offset: u64,
    len: u64,
    /// Whether the connection closes `fd` once sent (or if the connection fails first).
    close_when_done: bool = false,

    /// The range is sent, or never will be: closes `fd` if it was handed over for that
    /// (`close_when_done`). Protocol sessions call it; they make no syscalls themselves.
    pub fn done(file: FileRange) void {
        if (file.close_when_done) _ = std.os.linux.close(file.fd);
    }
};

/// A request head as every protocol yields it (HTTP/1's request line and fields, an HTTP/2
/// stream's pseudo-header and header fields): what `Request` is made from, so handlers,
/// `Router` and `StaticFiles` run unchanged whatever protocol carried the request. Slices
/// borrow the connection's buffers; they are valid until the handler returns.
pub const RequestHead = struct {
    method: Method = .GET,
    /// The request-target exactly as sent.
    target: []const u8 = "",
    /// The path part of the target, still percent-encoded.
    path: []const u8 = "",
    /// The query without its '?', still percent-encoded; "" when there is none.
    query: []const u8 = "",
    version: Version = .http11,
    /// The header fields in the order received.
    headers: []Header = &.{},
    /// The request's authority (HTTP/1: the Host field, or an absolute-form target's).
    host: ?[]const u8 = null,
    /// Whether the connection may stay open after this request.
    keep_alive: bool = true,
    /// The Upgrade field value, if any.
    upgrade: ?[]const u8 = null,
    /// Whether the Connection field lists "upgrade".
    connection_upgrade: bool = false,
    /// The body's announced length, when it has one.
    content_length: ?u64 = null,
    /// The body arrives in HTTP/1 chunks (its length is known only at its end).
    chunked: bool = false,
};

/// One header field line as received (RFC 9110 §5). Both slices borrow the connection's
/// receive buffer: they are valid until the handler returns.
pub const Header = struct {
    /// Field name, in the case the client sent it.
    name: []const u8,
    /// Field value with leading and trailing whitespace removed.
    value: []const u8,
};

/// Status codes (RFC 9110 §15 and the IANA registry). Values outside the named set are allowed
/// (`@enumFromInt`) as long as they are three digits, 100–599.
pub const Status = enum(u16) {
    @"continue" = 100,
    switching_protocols = 101,
    processing = 102,
    early_hints = 103,

    ok = 200,
    created = 201,
    accepted = 202,
    non_authoritative_information = 203,
    no_content = 204,
    reset_content = 205,
    partial_content = 206,
    multi_status = 207,
    already_reported = 208,
    im_used = 226,

    multiple_choices = 300,
    moved_permanently = 301,
    found = 302,
    see_other = 303,
    not_modified = 304,
    use_proxy = 305,
    temporary_redirect = 307,
    permanent_redirect = 308,

    bad_request = 400,
    unauthorized = 401,
    payment_required = 402,
    forbidden = 403,
    not_found = 404,
    method_not_allowed = 405,
    not_acceptable = 406,
    proxy_authentication_required = 407,
    request_timeout = 408,
    conflict = 409,
    gone = 410,
    length_required = 411,
    precondition_failed = 412,
    content_too_large = 413,
    uri_too_long = 414,
    unsupported_media_type = 415,
    range_not_satisfiable = 416,
    expectation_failed = 417,
    im_a_teapot = 418,
    misdirected_request = 421,
    unprocessable_content = 422,
    locked = 423,
    failed_dependency = 424,
    too_early = 425,
    upgrade_required = 426,
    precondition_required = 428,
    too_many_requests = 429,
    request_header_fields_too_large = 431,
    unavailable_for_legal_reasons = 451,

    internal_server_error = 500,
    not_implemented = 501,
    bad_gateway = 502,
    service_unavailable = 503,
    gateway_timeout = 504,
    http_version_not_supported = 505,
    variant_also_negotiates = 506,
    insufficient_storage = 507,
    loop_detected = 508,
    not_extended = 510,
    network_authentication_required = 511,
    _,

    /// The reason phrase registered for this code, or "" for unregistered codes
    /// (a reason phrase is optional, RFC 9112 §4).
    pub fn phrase(status: Status) []const u8 {
        return switch (status) {
            .@"continue" => "Continue",
            .switching_protocols => "Switching Protocols",
            .processing => "Processing",
            .early_hints => "Early Hints",
            .ok => "OK",
            .created => "Created",
            .accepted => "Accepted",
            .non_authoritative_information => "Non-Authoritative Information",
            .no_content => "No Content",
            .reset_content => "Reset Content",
            .partial_content => "Partial Content",
            .multi_status => "Multi-Status",
            .already_reported => "Already Reported",
            .im_used => "IM Used",
            .multiple_choices => "Multiple Choices",
            .moved_permanently => "Moved Permanently",
            .found => "Found",
            .see_other => "See Other",
            .not_modified => "Not Modified",
            .use_proxy => "Use Proxy",
            .temporary_redirect => "Temporary Redirect",
            .permanent_redirect => "Permanent Redirect",
            .bad_request => "Bad Request",
            .unauthorized => "Unauthorized",
            .payment_required => "Payment Required",
            .forbidden => "Forbidden",
            .not_found => "Not Found",
            .method_not_allowed => "Method Not Allowed",
            .not_acceptable => "Not Acceptable",
            .proxy_authentication_required => "Proxy Authentication Required",
            .request_timeout => "Request Timeout",
            .conflict => "Conflict",
            .gone => "Gone",
            .length_required => "Length Required",
            .precondition_failed => "Precondition Failed",
            .content_too_large => "Content Too Large",
            .uri_too_long => "URI Too Long",
            .unsupported_media_type => "Unsupported Media Type",
            .range_not_satisfiable => "Range Not Satisfiable",
            .expectation_failed => "Expectation Failed",
            .im_a_teapot => "I'm a teapot",
            .misdirected_request => "Misdirected Request",
            .unprocessable_content => "Unprocessable Content",
            .locked => "Locked",
            .failed_dependency => "Failed Dependency",
            .too_early => "Too Early",
            .upgrade_required => "Upgrade Required",
            .precondition_required => "Precondition Required",
            .too_many_requests => "Too Many Requests",
            .request_header_fields_too_large => "Request Header Fields Too Large",
            .unavailable_for_legal_reasons => "Unavailable For Legal Reasons",
            .internal_server_error => "Internal Server Error",
            .not_implemented => "Not Implemented",
            .bad_gateway => "Bad Gateway",
            .service_unavailable => "Service Unavailable",
            .gateway_timeout => "Gateway Timeout",
            .http_version_not_supported => "HTTP Version Not Supported",
            .variant_also_negotiates => "Variant Also Negotiates",
            .insufficient_storage => "Insufficient Storage",
            .loop_detected => "Loop Detected",
            .not_extended => "Not Extended",
            .network_authentication_required => "Network Authentication Required",
            _ => "",
        };
    }

    /// The numeric code.
    pub fn code(status: Status) u16 {
        return @backingInt(status);
    }

    /// Whether the code is three digits, 100–599 (RFC 9110 §15), so a status line can carry
    /// it. Handlers may set any `u16`; the connection checks this before writing a head.
    pub fn valid(status: Status) bool {
        return status.code() >= 100 and status.code() <= 599;
    }

    /// True for statuses whose responses never carry content (RFC 9110 §6.4.1): 1xx, 204, 304.
    pub fn forbidsContent(status: Status) bool {
        const c = status.code();
        return c < 200 or c == 204 or c == 304;
    }
};

/// ASCII case-insensitive comparison of a field name, token or field value with a lowercase
/// literal made of letters, digits and '-'. Assumes `text` holds no control bytes (the parser
/// has rejected them): then setting bit 0x20 on every byte lowercases letters and maps no other
/// byte onto a character of `lower`, so a few word compares decide: 8 bytes at a time, the
/// last word overlapping the one before it.
pub fn eqlLower(text: []const u8, comptime lower: []const u8) bool {
    comptime for (lower) |l| std.debug.assert(std.ascii.isLower(l) or std.ascii.isDigit(l) or l == '-');
    if (text.len != lower.len) return false;
    const Word = if (lower.len >= 8) u64 else if (lower.len >= 4) u32 else if (lower.len >= 2)
        u16
    else
        u8;
    const size = @sizeOf(Word);
    if (lower.len == 0) return true;
    const case_bits: Word = @truncate(0x2020202020202020);
    var diff: Word = 0;
    comptime var offset: usize = 0;
    inline while (true) {
        // The last word ends at the end of the text, overlapping its predecessor if need be.
        const at = comptime @min(offset, lower.len - size);
        const expected = comptime std.mem.readInt(Word, lower[at..][0..size], .little);
        diff |= (std.mem.readInt(Word, text[at..][0..size], .little) | case_bits) ^ expected;
        offset += size;
        if (offset >= lower.len) break;
    }
    return diff == 0;
}

/// ASCII case-insensitive comparison of two strings.
pub fn eqlIgnoreCase(a: []const u8, b: []const u8) bool {
    return std.ascii.eqlIgnoreCase(a, b);
}

/// Iterates the members of a comma-separated list field value (RFC 9110 §5.6.1), skipping
/// empty members and trimming optional whitespace.
pub const ListIterator = struct {
    rest: []const u8,

    /// Creates an iterator over `value`.
    pub fn init(value: []const u8) ListIterator {
        return .{ .rest = value };
    }

    /// The next non-empty member, or null.
    pub fn next(it: *ListIterator) ?[]const u8 {
        while (it.rest.len > 0) {
            const comma = std.mem.findScalar(u8, it.rest, ',') orelse it.rest.len;
            const member = std.mem.trim(u8, it.rest[0..comma], " \t");
            it.rest = if (comma < it.rest.len) it.rest[comma + 1 ..] else it.rest[it.rest.len..];
            if (member.len > 0) return member;
        }
        return null;
    }
};

test "Method.parse: known tokens, case-sensitive" {
    inline for (@typeInfo(Method).@"enum".field_names) |field_name| {
        try std.testing.expectEqual(@field(Method, field_name), Method.parse(field_name).?);
    }
    try std.testing.expectEqual(@as(?Method, null), Method.parse("get"));
    try std.testing.expectEqual(@as(?Method, null), Method.parse("BREW"));
    try std.testing.expectEqual(@as(?Method, null), Method.parse(""));
}

test "Status: phrases and content rules" {
    try std.testing.expectEqualStrings("Not Found", Status.not_found.phrase());
    try std.testing.expectEqualStrings("", @as(Status, @fromBackingInt(@intCast(599))).phrase());
    try std.testing.expect(Status.not_modified.forbidsContent());
    try std.testing.expect(!Status.ok.forbidsContent());
    try std.testing.expect(Status.ok.valid() and Status.@"continue".valid());
    try std.testing.expect(@as(Status, @fromBackingInt(@intCast(599))).valid());
    for ([_]u16{ 0, 99, 600, 999, 1000, 65535 }) |c| try std.testing.expect(!@as(Status, @fromBackingInt(c)).valid());
}

test "ListIterator: members trimmed, empties skipped" {
    var it: ListIterator = .init(" gzip ,, chunked,\tx ");
    try std.testing.expectEqualStrings("gzip", it.next().?);
    try std.testing.expectEqualStrings("chunked", it.next().?);
    try std.testing.expectEqualStrings("x", it.next().?);
    try std.testing.expectEqual(@as(?[]const u8, null), it.next());
}

test "eqlLower: every length up to 24 against a bytewise reference" {
    const letters = "content-length-0123456789xyz";
    inline for (0..25) |len| {
        const lower = letters[0..len];
        var text: [len]u8 = lower.*;
        try std.testing.expect(eqlLower(&text, lower));
        for (0..len) |i| {
            // The upper-case letter matches; any other change does not. (Flipping 0x20 of a
            // digit or '-' would make a control byte, which the parser has rejected.)
            for ([_]u8{ 0x20, 0x01, 0x40, 0x80 }) |flip| {
                if (flip == 0x20 and !std.ascii.isAlphabetic(text[i])) continue;
                text[i] ^= flip;
                const same = std.ascii.toLower(text[i]) == lower[i];
                try std.testing.expectEqual(same, eqlLower(&text, lower));
                text[i] ^= flip;
            }
        }
        if (len > 0) try std.testing.expect(!eqlLower(text[0 .. len - 1], lower));
    }
}

test "eqlLower" {
    try std.testing.expect(eqlLower("Content-Length", "content-length"));
    try std.testing.expect(!eqlLower("Content-Lengt", "content-length"));
    try std.testing.expect(eqlLower("KEEP-Alive", "keep-alive"));
    try std.testing.expect(eqlLower("100-Continue", "100-continue"));
    try std.testing.expect(!eqlLower("100-continuE!", "100-continue"));
    try std.testing.expect(!eqlLower("keep_alive", "keep-alive"));
}
