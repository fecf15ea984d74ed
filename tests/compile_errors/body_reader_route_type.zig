//! A route flagged `body_reader` whose handler is a type with body hooks.
const saker = @import("saker");

const Upload = struct {
    pub fn onBody(req: *saker.Request, res: *saker.Response, chunk: []const u8) !void {
        _ = req;
        _ = res;
        _ = chunk;
    }
    pub fn handle(req: *saker.Request, res: *saker.Response) !void {
        _ = req;
        _ = res;
    }
};

comptime {
    _ = saker.Router(void, .{ .routes = &.{.with(.{ .body_reader = true }, .post("/upload", Upload))} });
}
