//! A route handler that does not take the response.
const saker = @import("saker");

fn h(req: *saker.Request) !void {
    _ = req;
}

const Routes = saker.Router(void, .{ .routes = &.{.get("/", h)} });

comptime {
    _ = &Routes.handle;
}
