//! A pattern that does not start with '/'.
const saker = @import("saker");

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

comptime {
    _ = saker.Router(void, .{ .routes = &.{.get("users", h)} });
}
