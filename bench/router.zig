//! Micro-benchmark of `saker.Router` dispatch: a 24-route REST-like table, requests that hit a
//! static route, a route with two parameters, a wildcard, and a miss (404), through the whole
//! `handle` (match, parameters, call; no middleware). Prints ns per request (median of 7 runs).
//! `zig build bench`; ReleaseFast always. The test at the bottom checks the routing once.
const std = @import("std");
const saker = @import("saker");
const linux = std.os.linux;

const Counter = struct { calls: u64 = 0 };

fn hit(counter: *Counter, req: *saker.Request, res: *saker.Response) !void {
    _ = res;
    counter.calls +%= req.params.len + 1;
}

/// A table shaped like a small REST API.
pub const Routes = saker.Router(Counter, .{ .routes = &.{
    .get("/", hit),
    .get("/health", hit),
    .get("/about", hit),
    .group("/api/v1", &.{
        .get("/users", hit),
        .post("/users", hit),
        .get("/users/:id", hit),
        .put("/users/:id", hit),
        .delete("/users/:id", hit),
        .get("/users/:id/posts", hit),
        .get("/users/:id/posts/:post", hit),
        .get("/posts", hit),
        .get("/posts/:id", hit),
        .get("/posts/:id/comments", hit),
        .post("/posts/:id/comments", hit),
        .get("/search", hit),
        .get("/tags/:tag", hit),
        .get("/orders", hit),
        .get("/orders/:id", hit),
        .patch("/orders/:id", hit),
        .get("/products/:sku", hit),
    }),
    .get("/static/*path", hit),
    .get("/login", hit),
    .post("/login", hit),
} });

pub const paths = [_][]const u8{
    "/health",
    "/api/v1/users/12345/posts/678",
    "/static/css/site/main.css",
    "/api/v1/nothing/here",
};

/// Routes one request for `path` and returns the response status code.
pub fn routeOnce(router: *Routes, path: []const u8, storage: []saker.http.Header, buffer: []u8) u16 {
    var head: saker.http.RequestHead = .{ .method = .GET, .path = path, .target = path };
    var req: saker.Request = .init(&head, "", std.heap.page_allocator);
    var res: saker.Response = .init(.{
        .arena = std.heap.page_allocator,
        .header_storage = storage,
        .body_buffer = buffer,
        .body_bytes_max = 1 << 20,
        .discard_body = false,
        .stream = null,
    });
    router.handle(&req, &res) catch unreachable; // the handlers cannot fail
    return res.status.code();
}

fn nowNs() u64 {
    var ts: linux.timespec = undefined;
    _ = linux.clock_gettime(.MONOTONIC, &ts);
    return @as(u64, @intCast(ts.sec)) * std.time.ns_per_s + @as(u64, @intCast(ts.nsec));
}

pub fn main(init: std.process.Init) !void {
    const args = try init.minimal.args.toSlice(init.arena.allocator());
    const iterations: usize = if (args.len > 1) try std.fmt.parseInt(usize, args[1], 10) else 2_000_000;
    const runs = 7;
    var out_buffer: [1024]u8 = undefined;
    var out: std.Io.File.Writer = .initStreaming(.stdout(), init.io, &out_buffer);
    const w = &out.interface;
    var counter: Counter = .{};
    var router: Routes = .{ .context = &counter };
    var storage: [8]saker.http.Header = undefined;
    var buffer: [256]u8 = undefined;
    for (paths) |path| {
        var results: [runs]u64 = undefined;
        for (&results) |*result| {
            const start = nowNs();
            var sink: u64 = 0;
            for (0..iterations) |_| {
                var p = path;
                std.mem.doNotOptimizeAway(&p);
                sink +%= routeOnce(&router, p, &storage, &buffer);
            }
            std.mem.doNotOptimizeAway(sink);
            result.* = (nowNs() - start) * 1000 / iterations;
        }
        std.mem.sort(u64, &results, {}, std.sort.asc(u64));
        const ns = results[runs / 2];
        try w.print("router dispatch {s:<32} {d}.{d:0>3} ns/request\n", .{ path, ns / 1000, ns % 1000 });
    }
    try w.flush();
}

test "bench router: the benchmarked paths route as expected" {
    var counter: Counter = .{};
    var router: Routes = .{ .context = &counter };
    var storage: [8]saker.http.Header = undefined;
    var buffer: [256]u8 = undefined;
    const expected = [_]u16{ 200, 200, 200, 404 };
    const calls = [_]u64{ 1, 3, 2, 0 };
    for (paths, expected, calls) |path, status, added| {
        const before = counter.calls;
        try std.testing.expectEqual(status, routeOnce(&router, path, &storage, &buffer));
        try std.testing.expectEqual(added, counter.calls - before);
    }
}
