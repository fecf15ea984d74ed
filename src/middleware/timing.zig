//! Request timing: measures how long the rest of the chain takes (monotonic clock) and
//! reports it in a `Server-Timing` field (W3C Server Timing), e.g. `app;dur=0.184` in
//! milliseconds. A streamed response has sent its head already and gets no field.
const std = @import("std");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");

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
    var ts: std.os.linux.timespec = undefined;
    _ = std.os.linux.clock_gettime(.MONOTONIC, &ts);
    return @as(u64, @intCast(ts.sec)) * std.time.ns_per_s + @as(u64, @intCast(ts.nsec));
}
