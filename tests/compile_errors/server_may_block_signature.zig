//! `mayBlock` with the wrong return type.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        _ = app;
        _ = req;
        _ = res;
    }
    pub fn mayBlock(app: *const App, req: *const saker.Request) !bool {
        _ = app;
        _ = req;
        return true;
    }
};

comptime {
    _ = saker.Server(App);
}
