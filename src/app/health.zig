//! A health check for load balancers: 200 while the server serves, 503 once it drains at
//! shutdown, so a balancer stops sending new requests before the connections close. Mount it
//! in a `Router` (`.get("/healthz", saker.health.check)`), or let `saker serve --health PATH`
//! answer it.
const std = @import("std");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");

/// Answers `ok` (200), or `draining` (503) once the server is shutting down. Never cached.
pub fn check(req: *Request, res: *Response) !void {
    try res.header("Cache-Control", "no-store");
    res.content_type = "text/plain; charset=utf-8";
    if (req.server_draining) {
        res.status = .service_unavailable;
        res.setBody("draining\n");
    } else {
        res.status = .ok;
        res.setBody("ok\n");
    }
}

test "health: ok while serving, 503 while draining, never cached" {
    const HandlerCall = @import("../testing/HandlerCall.zig");
    var arena: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena.deinit();
    var call: HandlerCall = undefined;
    call.init(.{ .target = "/healthz", .arena = arena.allocator() });
    try check(&call.request, &call.response);
    try std.testing.expectEqual(@as(u16, 200), call.response.status.code());
    try std.testing.expectEqualStrings("ok\n", call.body());
    try std.testing.expectEqualStrings("no-store", call.header("Cache-Control").?);

    call.init(.{ .target = "/healthz", .arena = arena.allocator() });
    call.request.server_draining = true;
    try check(&call.request, &call.response);
    try std.testing.expectEqual(@as(u16, 503), call.response.status.code());
    try std.testing.expectEqualStrings("draining\n", call.body());
}
