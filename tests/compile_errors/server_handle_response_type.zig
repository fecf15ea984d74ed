//! `handle` whose third parameter is not `*saker.Response`.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request, res: *const saker.Response) !void {
        _ = app;
        _ = req;
        _ = res;
    }
};

comptime {
    _ = saker.Server(App);
}
