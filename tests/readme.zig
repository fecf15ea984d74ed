//! The README's handler and its "Testing a handler" example, compiled and run as they are
//! written there (keep the two in step).
const std = @import("std");
const saker = @import("saker");

const App = struct {
    hits: std.atomic.Value(u64) = .init(0),

    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        if (!std.mem.eql(u8, req.path, "/")) {
            res.status = .not_found;
            return;
        }
        const n = app.hits.fetchAdd(1, .monotonic) + 1;
        res.content_type = "text/plain";
        try res.print("hits: {d}\n", .{n});
    }
};

test "App counts hits on /, and anything else is 404" {
    var arena: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena.deinit();
    var app: App = .{};
    var call: saker.testing.Call = undefined;

    try call.run(&app, .{ .target = "/", .arena = arena.allocator() });
    try std.testing.expectEqual(saker.http.Status.ok, call.response.status);
    try std.testing.expectEqualStrings("text/plain", call.response.content_type.?);
    try std.testing.expectEqualStrings("hits: 1\n", call.body());

    try call.run(&app, .{ .target = "/", .arena = arena.allocator() });
    try std.testing.expectEqualStrings("hits: 2\n", call.body());

    try call.run(&app, .{ .method = .POST, .target = "/elsewhere?x=1", .body = "data", .arena = arena.allocator() });
    try std.testing.expectEqual(saker.http.Status.not_found, call.response.status);
}
