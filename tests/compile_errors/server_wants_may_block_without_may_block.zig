//! `wantsMayBlock` without the `mayBlock` it would turn off.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        _ = app;
        _ = req;
        _ = res;
    }
    pub fn wantsMayBlock(app: *const App) bool {
        _ = app;
        return false;
    }
};

comptime {
    _ = saker.Server(App);
}
