//! `onBody` without `onHead`: nothing would ever ask for a streamed body.
const saker = @import("saker");

const App = struct {
    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        _ = app;
        _ = req;
        _ = res;
    }
    pub fn onBody(app: *App, req: *saker.Request, res: *saker.Response, chunk: []const u8) !void {
        _ = app;
        _ = req;
        _ = res;
        _ = chunk;
    }
};

comptime {
    _ = saker.Server(App);
}
