//! A route and a grouped route that resolve to the same method and path.
const saker = @import("saker");

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

comptime {
    _ = saker.Router(void, .{ .routes = &.{ .post("/api/items", h), .group("/api", &.{.post("/items", h)}) } });
}
