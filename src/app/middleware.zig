//! Ready-made middleware for `Router`. A middleware is a type declaring
//! `pub fn handle(req: *saker.Request, res: *saker.Response, next: anytype) !void`; it calls
//! `next.run(req, res)` to pass the request on, or answers itself. Options are given at
//! compile time, so each configuration is its own type: `saker.middleware.Cors(.{ ... })`.
pub const Cors = @import("middleware/cors.zig").Cors;
pub const CorsOptions = @import("middleware/cors.zig").Options;
pub const Timing = @import("middleware/timing.zig").Timing;
/// Compression on the fly (zstd, br, gzip) for a `saker.compress.Policy`.
pub const Compress = @import("middleware/compress.zig").Compress;
/// The calls `Compress` is made of, for handlers without a `Router`: `begin`, `Job.end`.
pub const compression = @import("middleware/compress.zig");
pub const TimingOptions = @import("middleware/timing.zig").Options;

test {
    _ = @import("middleware/cors.zig");
    _ = @import("middleware/timing.zig");
    _ = @import("middleware/compress.zig");
}
