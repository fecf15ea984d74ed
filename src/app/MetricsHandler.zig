//! Serves a server's metrics in the Prometheus text format (`Metrics.zig`): on a listener of
//! its own (`saker.Server(saker.MetricsHandler)`, as `saker serve --metrics` does), or mounted
//! in a `Router` (with `path = null`, the router choosing the path).
const std = @import("std");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const Metrics = @import("../Metrics.zig");

const MetricsHandler = @This();

/// Whose metrics: `server.metricsSource()` of the server to observe.
source: Metrics.Source,
/// The only path answered (others get 404); null answers every path.
path: ?[]const u8 = "/metrics",

pub fn handle(h: *MetricsHandler, req: *Request, res: *Response) !void {
    if (h.path) |path| if (!std.mem.eql(u8, req.path, path)) {
        res.status = .not_found;
        res.content_type = "text/plain; charset=utf-8";
        return res.print("404 Not Found: metrics are at {s}\n", .{path});
    };
    if (req.method != .GET and req.method != .HEAD) {
        res.status = .method_not_allowed;
        try res.header("Allow", "GET, HEAD");
        return;
    }
    res.content_type = Metrics.content_type;
    // A write that fails sets `res.failure`, which answers 500.
    h.source.write(h.source.context, res.writer()) catch {};
}
