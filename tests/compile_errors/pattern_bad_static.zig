//! A static segment with a character outside unreserved and sub-delims.
const saker = @import("saker");

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

comptime {
    _ = saker.Router(void, .{ .routes = &.{.get("/a%20b", h)} });
}
