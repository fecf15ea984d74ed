//! A handler without `handle`.
const saker = @import("saker");

const App = struct {
    pub fn serve(app: *App) void {
        _ = app;
    }
};

comptime {
    _ = saker.Server(App);
}
