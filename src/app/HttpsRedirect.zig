//! A handler that sends every plaintext request to its HTTPS address: 308 Permanent Redirect
//! (the method and body are kept, RFC 9110 §15.4.9) to `https://HOST[:port]TARGET`, with the
//! host the client asked for. What `saker serve --redirect-http PORT` runs beside the HTTPS
//! listener.
const std = @import("std");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");

const HttpsRedirect = @This();

/// The HTTPS port to send clients to (443 is left out of the URL).
https_port: u16,
/// Host used when the request names none (HTTP/1.0 without `Host`).
default_host: []const u8 = "localhost",

pub fn handle(r: *HttpsRedirect, req: *Request, res: *Response) !void {
    const host = hostName(req.header("Host") orelse r.default_host) orelse {
        res.status = .bad_request;
        res.content_type = "text/plain; charset=utf-8";
        res.setBody("400 Bad Request: the Host header is not a host name\n");
        return;
    };
    // An absolute-form target carries its own host: only its path and query are kept.
    const target = if (req.target.len > 0 and req.target[0] == '/') req.target else pathOf(req.target);
    const location = if (r.https_port == 443)
        try std.fmt.allocPrint(res.arena, "https://{s}{s}", .{ host, target })
    else
        try std.fmt.allocPrint(res.arena, "https://{s}:{d}{s}", .{ host, r.https_port, target });
    res.status = .permanent_redirect;
    try res.header("Location", location);
    res.content_type = "text/plain; charset=utf-8";
    res.setBody("308 Permanent Redirect: this site is served over HTTPS\n");
}

/// The host of a `Host` value without its port; null when it holds anything but the
/// characters of a DNS name, an IPv4 address or a bracketed IPv6 literal (it goes into a
/// `Location` header).
fn hostName(value: []const u8) ?[]const u8 {
    if (value.len == 0) return null;
    const host = if (value[0] == '[') blk: {
        const end = std.mem.findScalar(u8, value, ']') orelse return null;
        for (value[1..end]) |c| if (!(std.ascii.isHex(c) or c == ':' or c == '.')) return null;
        break :blk value[0 .. end + 1];
    } else blk: {
        const end = std.mem.findScalar(u8, value, ':') orelse value.len;
        for (value[0..end]) |c| if (!(std.ascii.isAlphanumeric(c) or c == '-' or c == '.')) return null;
        break :blk value[0..end];
    };
    if (host.len == 0 or host.len > 255) return null;
    return host;
}

/// The path and query of an absolute-form target (`http://host/p?q` is `/p?q`).
fn pathOf(target: []const u8) []const u8 {
    const scheme_end = std.mem.find(u8, target, "://") orelse return "/";
    const rest = target[scheme_end + 3 ..];
    const slash = std.mem.findScalar(u8, rest, '/') orelse return "/";
    return rest[slash..];
}

test "HttpsRedirect: 308 to the same host and target on the HTTPS port" {
    const HandlerCall = @import("../testing/HandlerCall.zig");
    var arena: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena.deinit();
    var redirect: HttpsRedirect = .{ .https_port = 8443 };
    const cases = [_]struct { host: []const u8, target: []const u8, location: ?[]const u8 }{
        .{ .host = "example.com:8080", .target = "/a/b?c=d", .location = "https://example.com:8443/a/b?c=d" },
        .{ .host = "example.com", .target = "/", .location = "https://example.com:8443/" },
        .{ .host = "[::1]:8080", .target = "/x", .location = "https://[::1]:8443/x" },
        .{ .host = "127.0.0.1", .target = "http://127.0.0.1/p?q", .location = "https://127.0.0.1:8443/p?q" },
        .{ .host = "evil.com/@x", .target = "/", .location = null },
        .{ .host = "a\"b", .target = "/", .location = null },
        .{ .host = "[::1", .target = "/", .location = null },
    };
    for (cases) |case| {
        var call: HandlerCall = undefined;
        const headers = [_]@import("../http.zig").Header{.{ .name = "Host", .value = case.host }};
        call.init(.{ .target = case.target, .headers = &headers, .arena = arena.allocator() });
        try redirect.handle(&call.request, &call.response);
        if (case.location) |location| {
            try std.testing.expectEqual(@as(u16, 308), call.response.status.code());
            try std.testing.expectEqualStrings(location, call.header("Location").?);
        } else {
            try std.testing.expectEqual(@as(u16, 400), call.response.status.code());
            try std.testing.expect(call.header("Location") == null);
        }
    }
    redirect.https_port = 443;
    var call: HandlerCall = undefined;
    const headers = [_]@import("../http.zig").Header{.{ .name = "Host", .value = "example.com" }};
    call.init(.{ .target = "/", .headers = &headers, .arena = arena.allocator() });
    try redirect.handle(&call.request, &call.response);
    try std.testing.expectEqualStrings("https://example.com/", call.header("Location").?);
}
