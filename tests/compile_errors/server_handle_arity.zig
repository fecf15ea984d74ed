//! `handle` without the response parameter.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request) !void {
        _ = app;
        _ = req;
    }
};

comptime {
    _ = saker.Server(App);
}
