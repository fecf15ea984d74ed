//! Two routes with the same method and pattern shape.
const saker = @import("saker");

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

comptime {
    _ = saker.Router(void, .{ .routes = &.{ .get("/a/:x", h), .get("/a/:y", h) } });
}
