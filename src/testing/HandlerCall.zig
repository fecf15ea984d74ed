//! A request and a response set up as a connection would hand them to a handler, without a
//! connection: for unit tests of handlers, routers and middleware. The response is never
//! sent; tests read its status, headers and body.
const std = @import("std");
const http = @import("../http.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");

const HandlerCall = @This();

head: http.RequestHead,
request: Request,
header_storage: [16]http.Header,
body_buffer: [512]u8,
response: Response,

/// What the request looks like.
pub const Options = struct {
    method: http.Method = .GET,
    /// Path and query, as in a request-target.
    target: []const u8 = "/",
    headers: []const http.Header = &.{},
    body: []const u8 = "",
    /// `req.arena` and `res.arena`; `std.testing.failing_allocator` proves a path allocates
    /// nothing.
    arena: std.mem.Allocator,
};

/// Sets up `call` (it must not move afterwards: the request points into it).
pub fn init(call: *HandlerCall, options: Options) void {
    const question = std.mem.findScalar(u8, options.target, '?');
    call.head = .{
        .method = options.method,
        .target = options.target,
        .path = options.target[0 .. question orelse options.target.len],
        .query = if (question) |q| options.target[q + 1 ..] else "",
        .headers = @constCast(options.headers),
    };
    call.request = .init(&call.head, options.body, options.arena);
    call.response = .init(.{
        .arena = options.arena,
        .header_storage = &call.header_storage,
        .body_buffer = &call.body_buffer,
        .body_bytes_max = 1 << 20,
        .discard_body = options.method == .HEAD,
        .stream = null,
    });
}

/// Sets up the request from `options`, then runs `handler.handle(req, res)` on it (a handler
/// type as `Server` takes, a `Router` value, ...). The handler's error is returned as is; the
/// response is left as the handler made it. `call` may be run again (the arena is the
/// caller's to reset).
pub fn run(call: *HandlerCall, handler: anytype, options: Options) !void {
    call.init(options);
    try handler.handle(&call.request, &call.response);
}

/// The value of response header `name` (case-insensitive), or null.
pub fn header(call: *const HandlerCall, name: []const u8) ?[]const u8 {
    for (call.response.headers()) |h| if (std.ascii.eqlIgnoreCase(h.name, name)) return h.value;
    return null;
}

/// The response body (bytes written, or set with `setBody`).
pub fn body(call: *const HandlerCall) []const u8 {
    return switch (call.response.body) {
        .bytes => |bytes| bytes,
        .buffered => call.response.bufferedBody(),
        .file => "<file>",
    };
}
