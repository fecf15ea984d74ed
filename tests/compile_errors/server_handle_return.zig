//! `handle` that returns a value.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) u16 {
        _ = app;
        _ = req;
        _ = res;
        return 200;
    }
};

comptime {
    _ = saker.Server(App);
}
