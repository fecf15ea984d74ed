//! A group prefix that ends in '/'.
const saker = @import("saker");

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

comptime {
    _ = saker.Router(void, .{ .routes = &.{.group("/api/", &.{.get("/x", h)})} });
}
