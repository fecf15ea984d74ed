//! A route handler that takes a context the router does not have.
const saker = @import("saker");

const App = struct {};

fn h(app: *App, req: *saker.Request, res: *saker.Response) !void {
    _ = app;
    _ = req;
    _ = res;
}

const Routes = saker.Router(void, .{ .routes = &.{.get("/", h)} });

comptime {
    _ = &Routes.handle;
}
