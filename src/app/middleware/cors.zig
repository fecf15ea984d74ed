//! CORS (Fetch standard §3.2, "CORS protocol"): answers preflight requests from allowed
//! origins and marks other responses to them with `Access-Control-Allow-Origin`. Requests
//! from origins not allowed pass through unmarked (the browser then withholds the response
//! from the page).
//!
//! Caches (Fetch §3.2.5): when the answer depends on the request's `Origin` (a list of
//! origins, or credentials, where the origin is echoed), every response says
//! `Vary: Origin`, marked or not, so a cache never serves one origin's answer to another.
//! With any origin and no credentials the answer is the same for all: every response, with
//! or without `Origin`, gets `Access-Control-Allow-Origin: *` and needs no `Vary`. A
//! preflight answer that echoes the requested headers also varies on
//! `Access-Control-Request-Headers`.
const std = @import("std");
const Request = @import("../../Request.zig");
const Response = @import("../../Response.zig");

/// What a CORS middleware allows.
pub const Options = struct {
    /// Origins allowed, e.g. "https://example.com" (compared exactly); "*" allows any.
    allowed_origins: []const []const u8 = &.{"*"},
    /// `Access-Control-Allow-Methods` for preflights.
    allowed_methods: []const u8 = "GET, HEAD, POST, PUT, PATCH, DELETE",
    /// `Access-Control-Allow-Headers` for preflights; null allows what the client asks for.
    allowed_headers: ?[]const u8 = null,
    /// `Access-Control-Expose-Headers` on responses, if any.
    exposed_headers: ?[]const u8 = null,
    /// Whether credentials (cookies) may be sent; the origin is then echoed, never "*".
    allow_credentials: bool = false,
    /// How long a client may cache a preflight answer (`Access-Control-Max-Age`), in seconds.
    max_age_s: ?u32 = 600,
};

/// A CORS middleware for `options`.
pub fn Cors(comptime options: Options) type {
    const any_origin = comptime for (options.allowed_origins) |o| {
        if (std.mem.eql(u8, o, "*")) break true;
    } else false;
    const max_age: ?[]const u8 = if (options.max_age_s) |s| std.fmt.comptimePrint("{d}", .{s}) else null;
    // Any origin without credentials: the same answer whatever the Origin.
    const same_for_all = any_origin and !options.allow_credentials;
    return struct {
        /// Middleware entry point.
        pub fn handle(req: *Request, res: *Response, next: anytype) !void {
            if (same_for_all) {
                try res.header("Access-Control-Allow-Origin", "*");
            } else {
                try res.header("Vary", "Origin");
            }
            const origin = req.header("Origin") orelse return next.run(req, res);
            if (!allowed(origin)) return next.run(req, res);
            if (!same_for_all) {
                const echoed = res.arena.dupe(u8, origin) catch return error.OutOfMemory;
                try res.header("Access-Control-Allow-Origin", echoed);
            }
            if (options.allow_credentials) try res.header("Access-Control-Allow-Credentials", "true");
            if (req.method == .OPTIONS and req.header("Access-Control-Request-Method") != null) {
                // A preflight: answered here, the route never sees it.
                try res.header("Access-Control-Allow-Methods", options.allowed_methods);
                const headers = options.allowed_headers orelse echo: {
                    try res.header("Vary", "Access-Control-Request-Headers");
                    break :echo req.header("Access-Control-Request-Headers");
                };
                if (headers) |value| {
                    const copy = res.arena.dupe(u8, value) catch return error.OutOfMemory;
                    try res.header("Access-Control-Allow-Headers", copy);
                }
                if (max_age) |value| try res.header("Access-Control-Max-Age", value);
                res.status = .no_content;
                res.setBody("");
                return;
            }
            if (options.exposed_headers) |value| try res.header("Access-Control-Expose-Headers", value);
            return next.run(req, res);
        }

        fn allowed(origin: []const u8) bool {
            if (any_origin) return true;
            inline for (options.allowed_origins) |o| if (std.mem.eql(u8, o, origin)) return true;
            return false;
        }
    };
}

test "Cors: preflights answered, allowed origins marked, others untouched" {
    const http = @import("../../http.zig");
    const Router = @import("../Router.zig").Router;
    const HandlerCall = @import("../../testing/HandlerCall.zig");
    const handlers = struct {
        fn data(req: *Request, res: *Response) !void {
            _ = req;
            try res.writeAll("data");
        }
    };
    const App = Router(void, .{
        .routes = &.{ .get("/data", handlers.data), .put("/data", handlers.data) },
        .middleware = &.{Cors(.{
            .allowed_origins = &.{"https://a.example"},
            .allow_credentials = true,
            .exposed_headers = "X-Total",
        })},
    });
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var app: App = .{ .context = {} };
    var call: HandlerCall = undefined;

    // Preflight from an allowed origin: 204, the route is not called.
    call.init(.{ .method = .OPTIONS, .target = "/data", .arena = arena_state.allocator(), .headers = &.{
        .{ .name = "Origin", .value = "https://a.example" },
        .{ .name = "Access-Control-Request-Method", .value = "PUT" },
        .{ .name = "Access-Control-Request-Headers", .value = "content-type" },
    } });
    try app.handle(&call.request, &call.response);
    try std.testing.expectEqual(http.Status.no_content, call.response.status);
    try std.testing.expectEqualStrings("https://a.example", call.header("Access-Control-Allow-Origin").?);
    try std.testing.expectEqualStrings("true", call.header("Access-Control-Allow-Credentials").?);
    try std.testing.expectEqualStrings("content-type", call.header("Access-Control-Allow-Headers").?);
    try std.testing.expectEqualStrings("600", call.header("Access-Control-Max-Age").?);
    try std.testing.expectEqualStrings("Origin", call.header("Vary").?);

    // An ordinary request from it: marked, and served.
    call.init(.{ .target = "/data", .arena = arena_state.allocator(), .headers = &.{.{ .name = "Origin", .value = "https://a.example" }} });
    try app.handle(&call.request, &call.response);
    try std.testing.expectEqualStrings("data", call.body());
    try std.testing.expectEqualStrings("X-Total", call.header("Access-Control-Expose-Headers").?);

    try std.testing.expectEqualStrings("Origin", call.header("Vary").?);

    // Another origin, or none: unmarked, but still `Vary: Origin` (the answer depends on it);
    // an OPTIONS without preflight fields is the router's.
    for ([_][]const http.Header{ &.{.{ .name = "Origin", .value = "https://evil.example" }}, &.{} }) |headers| {
        call.init(.{ .method = .OPTIONS, .target = "/data", .arena = arena_state.allocator(), .headers = headers });
        try app.handle(&call.request, &call.response);
        try std.testing.expectEqual(@as(?[]const u8, null), call.header("Access-Control-Allow-Origin"));
        try std.testing.expectEqualStrings("GET, HEAD, PUT, OPTIONS", call.header("Allow").?);
        try std.testing.expectEqualStrings("Origin", call.header("Vary").?);
        call.init(.{ .target = "/data", .arena = arena_state.allocator(), .headers = headers });
        try app.handle(&call.request, &call.response);
        try std.testing.expectEqualStrings("data", call.body());
        try std.testing.expectEqualStrings("Origin", call.header("Vary").?);
    }
}

test "Cors: any origin without credentials is \"*\"" {
    const http = @import("../../http.zig");
    const Router = @import("../Router.zig").Router;
    const HandlerCall = @import("../../testing/HandlerCall.zig");
    const handlers = struct {
        fn data(req: *Request, res: *Response) !void {
            _ = req;
            _ = res;
        }
    };
    const App = Router(void, .{ .routes = &.{.get("/", handlers.data)}, .middleware = &.{Cors(.{})} });
    var app: App = .{ .context = {} };
    var call: HandlerCall = undefined;
    // With an Origin or without one: the same answer, so no Vary.
    for ([_][]const http.Header{ &.{.{ .name = "Origin", .value = "https://b.example" }}, &.{} }) |headers| {
        call.init(.{ .arena = std.testing.failing_allocator, .headers = headers });
        try app.handle(&call.request, &call.response);
        try std.testing.expectEqualStrings("*", call.header("Access-Control-Allow-Origin").?);
        try std.testing.expectEqual(@as(?[]const u8, null), call.header("Vary"));
    }
    // A preflight that echoes the requested headers varies on them.
    call.init(.{ .method = .OPTIONS, .arena = std.testing.failing_allocator, .headers = &.{
        .{ .name = "Origin", .value = "https://b.example" },
        .{ .name = "Access-Control-Request-Method", .value = "PUT" },
    } });
    try app.handle(&call.request, &call.response);
    try std.testing.expectEqual(http.Status.no_content, call.response.status);
    try std.testing.expectEqualStrings("Access-Control-Request-Headers", call.header("Vary").?);
}
