//! Cookies (RFC 6265): reading the pairs of the `Cookie` request field (§4.2.1, §5.4) and
//! building `Set-Cookie` values (§4.1.1). Reading borrows the request's header values and
//! allocates nothing; building validates every part, so a handler cannot split a header.
const std = @import("std");
const http = @import("../http.zig");
const DateCache = @import("../DateCache.zig");

/// Why a `Cookie` field or a `Set-Cookie` value was rejected.
pub const Error = error{
    /// A pair without '=', a name that is not a token, or an unbalanced quote (client input);
    /// or a name, value or attribute that a `Set-Cookie` value cannot carry (handler input).
    InvalidCookie,
};

/// One `name=value` pair; the value without its surrounding quotes, if any.
pub const Cookie = struct { name: []const u8, value: []const u8 };

/// The cookies of a request: every `Cookie` field, in order (HTTP/2 splits them into several
/// fields; HTTP/1.1 clients send one).
pub const Jar = struct {
    headers: []const http.Header,

    /// Iterates the pairs in order.
    pub fn iterator(jar: Jar) Iterator {
        return .{ .headers = jar.headers };
    }

    /// The value of the first cookie named `name` (case-sensitive, §5.4), or null. Fails on
    /// a malformed pair before it.
    pub fn get(jar: Jar, name: []const u8) Error!?[]const u8 {
        var it = jar.iterator();
        while (try it.next()) |cookie| if (std.mem.eql(u8, cookie.name, name)) return cookie.value;
        return null;
    }
};

/// Walks the `Cookie` fields of a header list, pair by pair.
pub const Iterator = struct {
    headers: []const http.Header,
    index: usize = 0,
    rest: []const u8 = "",

    /// The next pair, null at the end, or `error.InvalidCookie` for a malformed pair.
    pub fn next(it: *Iterator) Error!?Cookie {
        while (true) {
            while (it.rest.len == 0) {
                if (it.index == it.headers.len) return null;
                const field = it.headers[it.index];
                it.index += 1;
                if (http.eqlLower(field.name, "cookie")) it.rest = field.value;
            }
            const end = std.mem.findScalar(u8, it.rest, ';') orelse it.rest.len;
            const pair = std.mem.trim(u8, it.rest[0..end], " \t");
            it.rest = it.rest[@min(end + 1, it.rest.len)..];
            if (pair.len == 0) continue; // "a=1;;b=2", or a trailing ';'
            return try parsePair(pair);
        }
    }
};

fn parsePair(pair: []const u8) Error!Cookie {
    const eq = std.mem.findScalar(u8, pair, '=') orelse return error.InvalidCookie;
    const name = std.mem.trimEnd(u8, pair[0..eq], " \t");
    if (!isToken(name)) return error.InvalidCookie;
    var value = std.mem.trimStart(u8, pair[eq + 1 ..], " \t");
    if (value.len > 0 and value[0] == '"') {
        if (value.len < 2 or value[value.len - 1] != '"') return error.InvalidCookie;
        value = value[1 .. value.len - 1];
    }
    // Browsers send more than the strict cookie-octet set (spaces, commas); only a quote
    // inside the value is unparseable. Control bytes never pass the request parser.
    if (std.mem.findScalar(u8, value, '"') != null) return error.InvalidCookie;
    return .{ .name = name, .value = value };
}

fn isToken(text: []const u8) bool {
    if (text.len == 0) return false;
    for (text) |c| if (!isTokenChar(c)) return false;
    return true;
}

fn isTokenChar(c: u8) bool {
    return switch (c) {
        'a'...'z', 'A'...'Z', '0'...'9' => true,
        '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~' => true,
        else => false,
    };
}

/// cookie-octet (RFC 6265 §4.1.1): what a value we send may hold.
fn isCookieOctet(c: u8) bool {
    return c == 0x21 or (c >= 0x23 and c <= 0x2B) or (c >= 0x2D and c <= 0x3A) or
        (c >= 0x3C and c <= 0x5B) or (c >= 0x5D and c <= 0x7E);
}

/// Attributes of a `Set-Cookie` value (RFC 6265 §4.1.2; SameSite from RFC 6265bis).
pub const Options = struct {
    /// `Path`; null leaves it to the client (the request path's directory).
    path: ?[]const u8 = null,
    /// `Domain`; null for a host-only cookie.
    domain: ?[]const u8 = null,
    /// `Max-Age` in seconds; 0 or less deletes the cookie.
    max_age_s: ?i64 = null,
    /// `Expires`, as seconds since the Unix epoch (formatted as an IMF-fixdate).
    expires_unix_s: ?i64 = null,
    /// `Secure`: only sent over HTTPS.
    secure: bool = false,
    /// `HttpOnly`: hidden from scripts.
    http_only: bool = false,
    /// `SameSite`; `.none` requires `secure` (clients drop it otherwise).
    same_site: ?SameSite = null,

    pub const SameSite = enum { strict, lax, none };
};

/// Longest `Set-Cookie` value `format` produces (clients keep at least 4096 bytes per
/// cookie, RFC 6265 §6.1).
pub const set_cookie_bytes_max = 4096;

/// Writes the `Set-Cookie` value for `name=value` with `options` into `buffer`. Fails when
/// `name` is not a token, `value` holds bytes outside cookie-octet, an attribute holds ';' or
/// a control byte, SameSite=None lacks Secure, or the result does not fit `buffer`.
pub fn format(buffer: []u8, name: []const u8, value: []const u8, options: Options) Error![]const u8 {
    if (!isToken(name)) return error.InvalidCookie;
    for (value) |c| if (!isCookieOctet(c)) return error.InvalidCookie;
    if (options.same_site == .none and !options.secure) return error.InvalidCookie;
    var w: std.Io.Writer = .fixed(buffer);
    writeSetCookie(&w, name, value, options) catch return error.InvalidCookie;
    return w.buffered();
}

fn writeSetCookie(w: *std.Io.Writer, name: []const u8, value: []const u8, options: Options) (Error || std.Io.Writer.Error)!void {
    try w.print("{s}={s}", .{ name, value });
    if (options.path) |path| try writeAttribute(w, "Path", path);
    if (options.domain) |domain| try writeAttribute(w, "Domain", domain);
    if (options.max_age_s) |max_age| try w.print("; Max-Age={d}", .{@max(max_age, 0)});
    if (options.expires_unix_s) |expires| {
        if (expires < 0) return error.InvalidCookie;
        var date: [64]u8 = undefined;
        try w.print("; Expires={s}", .{DateCache.format(&date, "", expires)});
    }
    if (options.secure) try w.writeAll("; Secure");
    if (options.http_only) try w.writeAll("; HttpOnly");
    if (options.same_site) |same_site| try w.writeAll(switch (same_site) {
        .strict => "; SameSite=Strict",
        .lax => "; SameSite=Lax",
        .none => "; SameSite=None",
    });
}

fn writeAttribute(w: *std.Io.Writer, comptime key: []const u8, value: []const u8) (Error || std.Io.Writer.Error)!void {
    for (value) |c| if (c < 0x20 or c == 0x7F or c == ';') return error.InvalidCookie;
    try w.print("; " ++ key ++ "={s}", .{value});
}

test "cookies: pairs across fields, quotes, empty pieces" {
    const headers = [_]http.Header{
        .{ .name = "Cookie", .value = "a=1; b=\"two\";; c= spaced value " },
        .{ .name = "X-Other", .value = "z=9" },
        .{ .name = "cookie", .value = "d=; e=x=y" },
    };
    const jar: Jar = .{ .headers = &headers };
    var it = jar.iterator();
    const expected = [_]Cookie{
        .{ .name = "a", .value = "1" },
        .{ .name = "b", .value = "two" },
        .{ .name = "c", .value = "spaced value" },
        .{ .name = "d", .value = "" },
        .{ .name = "e", .value = "x=y" },
    };
    for (expected) |want| {
        const got = (try it.next()).?;
        try std.testing.expectEqualStrings(want.name, got.name);
        try std.testing.expectEqualStrings(want.value, got.value);
    }
    try std.testing.expectEqual(@as(?Cookie, null), try it.next());
    try std.testing.expectEqualStrings("x=y", (try jar.get("e")).?);
    try std.testing.expectEqual(@as(?[]const u8, null), try jar.get("z"));
    try std.testing.expectEqual(@as(?[]const u8, null), try jar.get("A"));
}

test "cookies: malformed pairs are errors" {
    for ([_][]const u8{ "novalue", "=1", "a b=1", "q=\"open", "q=in\"side", "ok=1; bad" }) |value| {
        const headers = [_]http.Header{.{ .name = "Cookie", .value = value }};
        const jar: Jar = .{ .headers = &headers };
        try std.testing.expectError(error.InvalidCookie, jar.get("zz"));
    }
    const none: Jar = .{ .headers = &.{} };
    try std.testing.expectEqual(@as(?[]const u8, null), try none.get("a"));
}

test "cookies.format: attributes and validation" {
    var buffer: [set_cookie_bytes_max]u8 = undefined;
    try std.testing.expectEqualStrings("id=abc", try format(&buffer, "id", "abc", .{}));
    try std.testing.expectEqualStrings(
        "id=abc; Path=/; Domain=example.com; Max-Age=3600; Expires=Sun, 06 Nov 1994 08:49:37 GMT; Secure; HttpOnly; SameSite=Lax",
        try format(&buffer, "id", "abc", .{
            .path = "/",
            .domain = "example.com",
            .max_age_s = 3600,
            .expires_unix_s = 784111777,
            .secure = true,
            .http_only = true,
            .same_site = .lax,
        }),
    );
    try std.testing.expectEqualStrings("gone=; Max-Age=0", try format(&buffer, "gone", "", .{ .max_age_s = -5 }));
    try std.testing.expectError(error.InvalidCookie, format(&buffer, "a b", "x", .{}));
    try std.testing.expectError(error.InvalidCookie, format(&buffer, "a", "x;y", .{}));
    try std.testing.expectError(error.InvalidCookie, format(&buffer, "a", "x y", .{}));
    try std.testing.expectError(error.InvalidCookie, format(&buffer, "a", "x", .{ .path = "/;evil" }));
    try std.testing.expectError(error.InvalidCookie, format(&buffer, "a", "x", .{ .domain = "a\r\nb" }));
    try std.testing.expectError(error.InvalidCookie, format(&buffer, "a", "x", .{ .same_site = .none }));
    var tiny: [8]u8 = undefined;
    try std.testing.expectError(error.InvalidCookie, format(&tiny, "name", "value1234", .{}));
}
