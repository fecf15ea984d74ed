//! A '*' wildcard followed by another segment.
const saker = @import("saker");

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

comptime {
    _ = saker.Router(void, .{ .routes = &.{.get("/files/*rest/more", h)} });
}
