//! Request timing: measures how long the rest of the chain takes (monotonic clock) and
//! reports it in a `Server-Timing` field (W3C Server Timing), e.g. `app;dur=0.184` in
//! milliseconds. A streamed response has sent its head already and gets no field.
const std = @import("std");
const Request = @import("../../Request.zig");
const Response = @import("../../Response.zig");

/// How the timing is reported.
pub const Options = struct {
    /// The metric name in `Server-Timing`.
    metric: []const u8 = "app",
};

/// A timing middleware for `options`.
pub fn Timing(comptime options: Options) type {
    return struct {
        /// Middleware entry point.
        pub fn handle(req: *Request, res: *Response, next: anytype) !void {
            const start = nowNs();
            try next.run(req, res);
            if (res.streaming) return;
            const elapsed_us = (nowNs() -| start) / std.time.ns_per_us;
            const value = std.fmt.allocPrint(res.arena, options.metric ++ ";dur={d}.{d:0>3}", .{
                elapsed_us / 1000,
                elapsed_us % 1000,
            }) catch return error.OutOfMemory;
            try res.header("Server-Timing", value);
        }
    };
}

fn nowNs() u64 {
    return @import("../../clock.zig").nanoseconds(.MONOTONIC);
}

test "Timing: a Server-Timing field in milliseconds" {
    const Router = @import("../Router.zig").Router;
    const HandlerCall = @import("../../testing/HandlerCall.zig");
    const handlers = struct {
        fn slow(req: *Request, res: *Response) !void {
            _ = req;
            _ = res;
            const pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 3 * std.time.ns_per_ms };
            _ = std.os.linux.nanosleep(&pause, null);
        }
    };
    const App = Router(void, .{ .routes = &.{.get("/", handlers.slow)}, .middleware = &.{Timing(.{ .metric = "total" })} });
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var app: App = .{ .context = {} };
    var call: HandlerCall = undefined;
    call.init(.{ .arena = arena_state.allocator() });
    try app.handle(&call.request, &call.response);
    const value = call.header("Server-Timing").?;
    try std.testing.expect(std.mem.startsWith(u8, value, "total;dur="));
    const ms = try std.fmt.parseFloat(f64, value["total;dur=".len..]);
    try std.testing.expect(ms >= 3.0 and ms < 10_000.0);
}
