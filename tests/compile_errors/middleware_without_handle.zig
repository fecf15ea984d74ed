//! A middleware type without `handle`.
const saker = @import("saker");

const NotMiddleware = struct {
    pub fn run() void {}
};

fn h(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    _ = res;
}

const Routes = saker.Router(void, .{ .routes = &.{.get("/", h)}, .middleware = &.{NotMiddleware} });

comptime {
    _ = saker.Server(Routes);
    _ = &Routes.handle;
}
