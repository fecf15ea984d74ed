//! `onDone` taking the request instead of the `saker.Done` record.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        _ = app;
        _ = req;
        _ = res;
    }
    pub fn onDone(app: *App, req: *const saker.Request) void {
        _ = app;
        _ = req;
    }
};

comptime {
    _ = saker.Server(App);
}
