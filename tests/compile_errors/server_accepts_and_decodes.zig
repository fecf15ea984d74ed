//! `accepts_content_encoding` and `decodes_content_encoding` together: the handler would get
//! the body both coded and decoded.
const saker = @import("saker");

const App = struct {
    pub const accepts_content_encoding = true;
    pub const decodes_content_encoding = true;

    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        _ = app;
        _ = req;
        _ = res;
    }
};

comptime {
    _ = saker.Server(App);
}
