//! Router integration tests: the `arena` and `router` examples, and routers made here, served
//! on ephemeral loopback ports by every engine, driven with raw bytes over real sockets.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const fixtures = @import("fixtures");
const arena_example = @import("arena_example");
const router_example = @import("router_example");
const Client = @import("Client.zig");

/// The engines every scenario runs on.
const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

/// A server for `Handler` (a value given to `start`) on its own thread.
fn ServerThread(comptime Handler: type) type {
    return struct {
        const This = @This();
        handler: Handler,
        server: saker.Server(Handler),
        thread: std.Thread,

        fn start(kind: saker.engine.Kind, handler: Handler, overrides: saker.Config) !*This {
            var config = overrides;
            config.host = "127.0.0.1";
            config.port = 0;
            config.engine = kind;
            if (config.workers == 0) config.workers = 2;
            const running = try testing.allocator.create(This);
            errdefer testing.allocator.destroy(running);
            running.* = .{ .handler = handler, .server = undefined, .thread = undefined };
            running.server = try .init(testing.allocator, &running.handler, config);
            errdefer running.server.deinit();
            running.thread = try std.Thread.spawn(.{}, serve, .{&running.server});
            return running;
        }

        fn serve(server: *saker.Server(Handler)) void {
            server.serve() catch |err| std.debug.panic("serve failed: {t}", .{err});
        }

        fn stop(running: *This) void {
            running.server.stop();
            running.thread.join();
            running.server.deinit();
            testing.allocator.destroy(running);
        }

        fn port(running: *This) u16 {
            return running.server.port();
        }
    };
}

fn fetch(port: u16, request: []const u8) !Client.Response {
    return Client.fetch(testing.allocator, port, request);
}

fn expectBody(response: Client.Response, status: u16, body: []const u8) !void {
    testing.expectEqual(status, response.status) catch |err| {
        std.debug.print("body: {s}\n", .{response.body});
        return err;
    };
    try testing.expectEqualStrings(body, response.body);
}

/// tests/data/static, beside the dataset.
fn staticDir(gpa: std.mem.Allocator) ![:0]u8 {
    return std.fmt.allocPrintSentinel(gpa, "{s}/static", .{std.fs.path.dirname(fixtures.dataset).?}, 0);
}

/// The arena example's state: the dataset fixture and the static fixture directory.
const ArenaFixture = struct {
    arena_state: std.heap.ArenaAllocator,
    app: arena_example.App,

    fn init(fixture: *ArenaFixture) !void {
        fixture.arena_state = .init(testing.allocator);
        errdefer fixture.arena_state.deinit();
        const arena = fixture.arena_state.allocator();
        const bytes = try std.Io.Dir.cwd().readFileAlloc(testing.io, fixtures.dataset, arena, .limited(1 << 20));
        fixture.app = .{
            .items = try arena_example.parseDataset(arena, bytes),
            .static_dir = try arena_example.openStaticDir(try staticDir(arena)),
        };
    }

    fn deinit(fixture: *ArenaFixture) void {
        _ = linux.close(fixture.app.static_dir.?);
        fixture.arena_state.deinit();
    }
};

const ArenaServer = ServerThread(arena_example.Routes);

test "arena: safe static names" {
    for ([_][]const u8{ "a.css", "dir/b.js", "..a", "a..b" }) |name| try testing.expect(arena_example.safeName(name));
    for ([_][]const u8{ "", "..", "../x", "a/../b", "a//b", "/etc/passwd", "./a", "a/", "a\x00b" }) |name|
        try testing.expect(!arena_example.safeName(name));
}

test "arena: /baseline11 sums the query and the body (length, chunked, split)" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.start(kind, .{ .context = &fixture.app }, .{});
        defer running.stop();
        const port = running.port();
        {
            const r = try fetch(port, "GET /baseline11?a=13&b=42 HTTP/1.1\r\nHost: t\r\n\r\n");
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "55");
            try testing.expectEqualStrings("text/plain", r.header("Content-Type").?);
        }
        {
            const r = try fetch(port, "POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n20");
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "75");
        }
        {
            const r = try fetch(port, "POST /baseline11?a=-3&b=4 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n2\r\n2\r\n00\r\n0\r\n\r\n");
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "201");
        }
        {
            // Fragmented: the request line, the head and the body each split.
            var client = try Client.connect(port, 10_000);
            defer client.close();
            for ([_][]const u8{ "POST /baseli", "ne11?a=13&b=42 HTTP/1.1\r\nHost: t\r\n", "Content-Length: 2\r\n\r\n2", "0" }) |piece| {
                try client.send(piece);
                var idle: [1]linux.pollfd = .{.{ .fd = client.fd, .events = linux.POLL.IN, .revents = 0 }};
                _ = linux.poll(&idle, 1, 20);
            }
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "75");
        }
        // Bad input is a 400 with a reason; the connection stays usable.
        var client = try Client.connect(port, 10_000);
        defer client.close();
        const bad = [_][]const u8{
            "GET /baseline11?a=x&b=1 HTTP/1.1\r\nHost: t\r\n\r\n",
            "GET /baseline11?a=1 HTTP/1.1\r\nHost: t\r\n\r\n",
            "POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
            "GET /baseline11?a=9223372036854775807&b=1 HTTP/1.1\r\nHost: t\r\n\r\n",
        };
        const reasons = [_][]const u8{ "invalid parameter", "missing parameter", "invalid parameter", "invalid parameter" };
        for (bad, reasons) |request, reason| {
            try client.send(request);
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 400), r.status);
            try testing.expect(std.mem.find(u8, r.body, reason) != null);
        }
        try client.send("GET /baseline11?a=1&b=2 HTTP/1.1\r\nHost: t\r\n\r\n");
        const r = try client.readResponse(testing.allocator, .{});
        defer r.deinit(testing.allocator);
        try expectBody(r, 200, "3");
    }
}

test "arena: /pipeline, pipelined; 404, 405 and OPTIONS" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.start(kind, .{ .context = &fixture.app }, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        const one = "GET /pipeline HTTP/1.1\r\nHost: t\r\n\r\n";
        var sixteen: [16 * one.len]u8 = undefined;
        for (0..16) |i| @memcpy(sixteen[i * one.len ..][0..one.len], one);
        try client.send(&sixteen);
        for (0..16) |_| {
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "ok");
            try testing.expectEqualStrings("text/plain", r.header("Content-Type").?);
        }
        try client.send("DELETE /pipeline HTTP/1.1\r\nHost: t\r\n\r\n");
        const not_allowed = try client.readResponse(testing.allocator, .{});
        defer not_allowed.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 405), not_allowed.status);
        try testing.expectEqualStrings("GET, HEAD, OPTIONS", not_allowed.header("Allow").?);
        try client.send("OPTIONS /upload HTTP/1.1\r\nHost: t\r\n\r\n");
        const options = try client.readResponse(testing.allocator, .{});
        defer options.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 204), options.status);
        try testing.expectEqualStrings("POST, OPTIONS", options.header("Allow").?);
        try client.send("GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
        const missing = try client.readResponse(testing.allocator, .{});
        defer missing.deinit(testing.allocator);
        try expectBody(missing, 404, "404 Not Found\n");
        try client.send("HEAD /pipeline HTTP/1.1\r\nHost: t\r\n\r\n");
        const head = try client.readResponse(testing.allocator, .{ .head_request = true });
        defer head.deinit(testing.allocator);
        try testing.expectEqualStrings("2", head.header("Content-Length").?);
    }
}

const JsonReply = struct {
    items: []const struct {
        id: i64,
        name: []const u8,
        category: []const u8,
        price: i64,
        quantity: i64,
        active: bool,
        tags: []const []const u8,
        rating: struct { score: i64, count: i64 },
        total: i64,
    },
    count: usize,
};

test "arena: /json/{count}?m=M serialises the first items with their totals" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    const items = fixture.app.items;
    try testing.expectEqual(@as(usize, 50), items.len);
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.start(kind, .{ .context = &fixture.app }, .{});
        defer running.stop();
        const cases = [_]struct { count: usize, m: i64, expect: usize }{
            .{ .count = 12, .m = 3, .expect = 12 },
            .{ .count = 22, .m = 7, .expect = 22 },
            .{ .count = 50, .m = 5, .expect = 50 },
            .{ .count = 1, .m = 1, .expect = 1 },
            .{ .count = 0, .m = 2, .expect = 0 },
            .{ .count = 500, .m = 2, .expect = 50 },
        };
        for (cases) |case| {
            var request: [96]u8 = undefined;
            const r = try fetch(running.port(), try std.mem.print(&request, "GET /json/{d}?m={d} HTTP/1.1\r\nHost: t\r\n\r\n", .{ case.count, case.m }));
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 200), r.status);
            try testing.expectEqualStrings("application/json", r.header("Content-Type").?);
            const reply = try std.json.parseFromSlice(JsonReply, testing.allocator, r.body, .{});
            defer reply.deinit();
            try testing.expectEqual(case.expect, reply.value.count);
            try testing.expectEqual(case.expect, reply.value.items.len);
            for (reply.value.items, items[0..case.expect]) |got, want| {
                try testing.expectEqual(want.id, got.id);
                try testing.expectEqualStrings(want.name, got.name);
                try testing.expectEqual(want.rating.score, got.rating.score);
                try testing.expectEqual(want.tags.len, got.tags.len);
                try testing.expectEqual(want.price * want.quantity * case.m, got.total);
            }
        }
        // m defaults to 1; bad numbers are 400.
        {
            const r = try fetch(running.port(), "GET /json/2 HTTP/1.1\r\nHost: t\r\n\r\n");
            defer r.deinit(testing.allocator);
            const reply = try std.json.parseFromSlice(JsonReply, testing.allocator, r.body, .{});
            defer reply.deinit();
            try testing.expectEqual(items[1].price * items[1].quantity, reply.value.items[1].total);
        }
        for ([_][]const u8{ "/json/abc", "/json/-1", "/json/5?m=zz", "/json/5?m=9223372036854775807" }) |target| {
            var request: [96]u8 = undefined;
            const r = try fetch(running.port(), try std.mem.print(&request, "GET {s} HTTP/1.1\r\nHost: t\r\n\r\n", .{target}));
            defer r.deinit(testing.allocator);
            testing.expectEqual(@as(u16, 400), r.status) catch |err| {
                std.debug.print("target {s}\n", .{target});
                return err;
            };
        }
    }
}

test "arena: /upload counts a streamed body, 20 MiB included, without buffering it" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    const big = try testing.allocator.alloc(u8, 20 * 1024 * 1024);
    defer testing.allocator.free(big);
    for (big, 0..) |*b, i| b.* = @truncate(i *% 7);
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // body_bytes_max stays far below 20 MiB: buffering would be a 413.
        const running = try ArenaServer.start(kind, .{ .context = &fixture.app }, .{ .body_bytes_max = 64 * 1024 });
        defer running.stop();
        var client = try Client.connect(running.port(), 20_000);
        defer client.close();
        try client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\nContent-Length: 17\r\n\r\nHello, HttpArena!");
        const small = try client.readResponse(testing.allocator, .{});
        defer small.deinit(testing.allocator);
        try expectBody(small, 200, "17");

        var head: [160]u8 = undefined;
        try client.send(try std.mem.print(&head, "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {d}\r\n\r\n", .{big.len}));
        try client.send(big);
        const large = try client.readResponse(testing.allocator, .{});
        defer large.deinit(testing.allocator);
        try expectBody(large, 200, "20971520");

        // Chunked, in uneven chunks; then an empty POST; the connection is still good.
        try client.send("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        var sent: usize = 0;
        var size: usize = 1;
        while (sent < 300_000) : (size = size * 3 + 1) {
            const n = @min(size, 300_000 - sent);
            var line: [32]u8 = undefined;
            try client.send(try std.mem.print(&line, "{x}\r\n", .{n}));
            try client.send(big[sent..][0..n]);
            try client.send("\r\n");
            sent += n;
        }
        try client.send("0\r\n\r\n");
        const chunked = try client.readResponse(testing.allocator, .{});
        defer chunked.deinit(testing.allocator);
        try expectBody(chunked, 200, "300000");
        try client.send("POST /upload HTTP/1.1\r\nHost: t\r\n\r\n");
        const empty = try client.readResponse(testing.allocator, .{});
        defer empty.deinit(testing.allocator);
        try expectBody(empty, 200, "0");
    }
}

test "arena: /static/NAME serves files per request; no way out of the directory" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.start(kind, .{ .context = &fixture.app }, .{});
        defer running.stop();
        const files = [_]struct { name: []const u8, content_type: []const u8 }{
            .{ .name = "reset.css", .content_type = "text/css" },
            .{ .name = "app.js", .content_type = "application/javascript" },
            .{ .name = "manifest.json", .content_type = "application/json" },
            .{ .name = "sub/page.html", .content_type = "text/html; charset=utf-8" },
        };
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        for (files) |file| {
            var request: [96]u8 = undefined;
            try client.send(try std.mem.print(&request, "GET /static/{s} HTTP/1.1\r\nHost: t\r\n\r\n", .{file.name}));
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            const dir = try staticDir(testing.allocator);
            defer testing.allocator.free(dir);
            const path = try std.fs.path.join(testing.allocator, &.{ dir, file.name });
            defer testing.allocator.free(path);
            const expected = try std.Io.Dir.cwd().readFileAlloc(testing.io, path, testing.allocator, .limited(1 << 20));
            defer testing.allocator.free(expected);
            try expectBody(r, 200, expected);
            try testing.expectEqualStrings(file.content_type, r.header("Content-Type").?);
        }
        try client.send("HEAD /static/app.js HTTP/1.1\r\nHost: t\r\n\r\n");
        const head = try client.readResponse(testing.allocator, .{ .head_request = true });
        defer head.deinit(testing.allocator);
        try testing.expectEqualStrings("34", head.header("Content-Length").?);
        for ([_][]const u8{
            "nonexistent.txt", "%2e%2e/httparena-dataset.json", "sub/..%2f..%2fhttparena-dataset.json",
            "escape.json", // a symlink out of the directory
            "sub",
            "",
            "a%00b",
        }) |name| {
            var request: [128]u8 = undefined;
            try client.send(try std.mem.print(&request, "GET /static/{s} HTTP/1.1\r\nHost: t\r\n\r\n", .{name}));
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            testing.expectEqual(@as(u16, 404), r.status) catch |err| {
                std.debug.print("name {s}\n", .{name});
                return err;
            };
        }
        try client.send("GET /static/%zz HTTP/1.1\r\nHost: t\r\n\r\n");
        const bad = try client.readResponse(testing.allocator, .{});
        defer bad.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 400), bad.status);
    }
}

const TourServer = ServerThread(router_example.Routes);

test "router example: parameters, query, forms, cookies, redirects, JSON and errors" {
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try TourServer.start(kind, .{ .context = {} }, .{ .handler_threads = 2 });
        defer running.stop();
        const port = running.port();
        const Case = struct { request: []const u8, status: u16, body: ?[]const u8 = null, contains: ?[]const u8 = null };
        const cases = [_]Case{
            .{ .request = "GET / HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "Hello, World!" },
            .{ .request = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", .status = 405 },
            .{ .request = "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n", .status = 404 },
            .{ .request = "GET /hello/J%C3%BCrgen HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "Hello, Jürgen!\n" },
            .{ .request = "GET /hello/%zz HTTP/1.1\r\nHost: t\r\n\r\n", .status = 400, .contains = "percent-encoding" },
            .{ .request = "GET /search?q=a+b%26c&page=2 HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "{\"query\":\"a b&c\",\"page\":2}" },
            .{ .request = "GET /search?q=x&page=two HTTP/1.1\r\nHost: t\r\n\r\n", .status = 400, .contains = "invalid parameter" },
            .{ .request = "GET /search HTTP/1.1\r\nHost: t\r\n\r\n", .status = 400, .contains = "missing parameter" },
            .{ .request = "GET /files/a/b%20c.txt HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "path: a/b c.txt\n" },
            .{ .request = "GET /me HTTP/1.1\r\nHost: t\r\nCookie: theme=dark; user=ada\r\n\r\n", .status = 200, .body = "you are ada\n" },
            .{ .request = "GET /me HTTP/1.1\r\nHost: t\r\n\r\n", .status = 401 },
            .{ .request = "GET /me HTTP/1.1\r\nHost: t\r\nCookie: broken\r\n\r\n", .status = 400, .contains = "Cookie" },
            .{ .request = "POST /login HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n\r\nuser=ada", .status = 415 },
            .{ .request = "POST /login HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 6\r\n\r\nuser=%", .status = 400 },
            .{ .request = "POST /api/sum HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"values\":[1,2,3.5]}", .status = 400, .contains = "JSON" },
            .{ .request = "POST /api/sum HTTP/1.1\r\nHost: t\r\nContent-Type: text/csv\r\nContent-Length: 5\r\n\r\n1,2,3", .status = 415 },
            .{ .request = "POST /api/sum HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 18\r\n\r\n{\"values\":[1,2,3]}", .status = 200, .body = "{\"sum\":6,\"count\":3}" },
        };
        var client = try Client.connect(port, 10_000);
        defer client.close();
        for (cases) |case| {
            errdefer std.debug.print("request {f}\n", .{std.zig.fmtString(case.request)});
            try client.send(case.request);
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try testing.expectEqual(case.status, r.status);
            if (case.body) |body| try testing.expectEqualStrings(body, r.body);
            if (case.contains) |part| try testing.expect(std.mem.find(u8, r.body, part) != null);
            // The timing middleware wraps every answer, the router's own too.
            try testing.expect(std.mem.startsWith(u8, r.header("Server-Timing").?, "app;dur="));
        }
        try client.send("POST /login HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 13\r\n\r\nuser=ada+l%21");
        const login = try client.readResponse(testing.allocator, .{});
        defer login.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 303), login.status);
        try testing.expectEqualStrings("/me", login.header("Location").?);
        try testing.expectEqualStrings("user=ada_l_; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax", login.header("Set-Cookie").?);
    }
}

test "router example: CORS on /api, arena counters" {
    const running = try TourServer.start(.epoll, .{ .context = {} }, .{ .handler_threads = 2 });
    defer running.stop();
    const preflight = try fetch(running.port(), "OPTIONS /api/sum HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\n" ++
        "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\r\n");
    defer preflight.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 204), preflight.status);
    try testing.expectEqualStrings("*", preflight.header("Access-Control-Allow-Origin").?);
    try testing.expectEqualStrings("content-type", preflight.header("Access-Control-Allow-Headers").?);
    const plain = try fetch(running.port(), "OPTIONS /login HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\nAccess-Control-Request-Method: POST\r\n\r\n");
    defer plain.deinit(testing.allocator);
    try testing.expectEqual(@as(?[]const u8, null), plain.header("Access-Control-Allow-Origin"));
    try testing.expectEqualStrings("POST, OPTIONS", plain.header("Allow").?);

    const stats = try fetch(running.port(), "GET /api/stats HTTP/1.1\r\nHost: t\r\n\r\n");
    defer stats.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 200), stats.status);
    const counters = try std.json.parseFromSlice(saker.Arena.Stats, testing.allocator, stats.body, .{});
    defer counters.deinit();
    try testing.expectEqual(@as(usize, (saker.Config{}).arena_bytes), counters.value.region_bytes);
    try testing.expect(counters.value.budget_remaining_bytes > 0);
}

const multipart_body = "--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHello\r\n" ++
    "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n" ++
    "0123456789\r\n--XyZ--\r\n";

test "router example: a multipart upload is parsed as it streams in" {
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try TourServer.start(kind, .{ .context = {} }, .{ .handler_threads = 2 });
        defer running.stop();
        // Scoped: the blocking engine serves one connection at a time.
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            var head: [200]u8 = undefined;
            try client.send(try std.mem.print(&head, "POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: {d}\r\n\r\n", .{multipart_body.len}));
            // In small pieces, so the parser sees delimiters split between reads.
            var i: usize = 0;
            while (i < multipart_body.len) : (i += 7) {
                try client.send(multipart_body[i..@min(i + 7, multipart_body.len)]);
                var idle: [1]linux.pollfd = .{.{ .fd = client.fd, .events = linux.POLL.IN, .revents = 0 }};
                _ = linux.poll(&idle, 1, 2);
            }
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "{\"parts\":[{\"name\":\"title\",\"filename\":null,\"bytes\":5},{\"name\":\"file\",\"filename\":\"a.bin\",\"bytes\":10}]}");
        }

        // A truncated body, a wrong type, a missing boundary: 400 or 415, then a close.
        const bad = [_]struct { request: []const u8, status: u16 }{
            .{ .request = "POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 19\r\n\r\n--XyZ\r\nbroken\r\n\r\nxx", .status = 400 },
            .{ .request = "POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 5\r\n\r\n--XyZ", .status = 400 },
            .{ .request = "POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi", .status = 415 },
            .{ .request = "POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data\r\nContent-Length: 2\r\n\r\nhi", .status = 400 },
        };
        for (bad) |case| {
            errdefer std.debug.print("request {f}\n", .{std.zig.fmtString(case.request)});
            var other = try Client.connect(running.port(), 10_000);
            defer other.close();
            try other.send(case.request);
            const answer = try other.readResponse(testing.allocator, .{});
            defer answer.deinit(testing.allocator);
            try testing.expectEqual(case.status, answer.status);
        }
    }
}

/// Reads one chunk of a chunked body; null at the last chunk. Owned by the caller.
fn readChunk(client: *Client) !?[]u8 {
    const line = try client.readLine();
    const size = try std.fmt.parseInt(usize, line[0 .. line.len - 2], 16);
    if (size == 0) {
        _ = try client.readLine();
        return null;
    }
    const data = try client.readExact(testing.allocator, size);
    errdefer testing.allocator.free(data);
    if (!std.mem.eql(u8, try client.readLine(), "\r\n")) return error.BadChunk;
    return data;
}

fn nowMs() i64 {
    var ts: linux.timespec = undefined;
    _ = linux.clock_gettime(.MONOTONIC, &ts);
    return @as(i64, ts.sec) * 1000 + @divTrunc(@as(i64, ts.nsec), std.time.ns_per_ms);
}

test "router example: server-sent events leave one by one" {
    // `blocking = true`: on event loops the handler runs on the handler pool and streams.
    for ([_]saker.engine.Kind{ .blocking, .epoll, .io_uring }) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try TourServer.start(kind, .{ .context = {} }, .{ .handler_threads = 2 });
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        const start = nowMs();
        try client.send("GET /api/events?n=10 HTTP/1.1\r\nHost: t\r\n\r\n");
        const head = try client.readResponse(testing.allocator, .{ .head_request = true });
        defer head.deinit(testing.allocator);
        try testing.expectEqualStrings("text/event-stream", head.header("Content-Type").?);
        try testing.expectEqualStrings("chunked", head.header("Transfer-Encoding").?);
        try testing.expectEqualStrings("no-cache", head.header("Cache-Control").?);
        const first = (try readChunk(&client)).?;
        defer testing.allocator.free(first);
        const first_ms = nowMs() - start;
        try testing.expectEqualStrings("event: tick\nid: 0\ndata: tick 1 of 10\n\n", first);
        var count: usize = 1;
        while (try readChunk(&client)) |chunk| {
            defer testing.allocator.free(chunk);
            count += 1;
        }
        const total_ms = nowMs() - start;
        try testing.expectEqual(@as(usize, 10), count);
        // Nine pauses of 100 ms: the first event came long before the last was written.
        try testing.expect(total_ms >= 900);
        try testing.expect(first_ms < total_ms - 500);
    }
}

/// Streams events until the client goes away, and records that it noticed.
const Ticker = struct {
    gone: std.atomic.Value(u32) = .init(0),
    sent: std.atomic.Value(u32) = .init(0),

    fn events(ticker: *Ticker, req: *saker.Request, res: *saker.Response) !void {
        _ = req;
        const stream = try res.eventStream();
        if (!stream.live()) {
            // An event loop without the pool: a finite batch, sent when the handler returns.
            for (0..3) |_| try stream.send(.{ .data = "batch" });
            return;
        }
        while (true) {
            stream.send(.{ .data = "tick" }) catch |err| {
                if (err == error.ClientGone) _ = ticker.gone.fetchAdd(1, .monotonic);
                return err;
            };
            _ = ticker.sent.fetchAdd(1, .monotonic);
            const pause: linux.timespec = .{ .sec = 0, .nsec = 10 * std.time.ns_per_ms };
            _ = linux.nanosleep(&pause, null);
        }
    }
};

fn TickerRoutes(comptime blocking: bool) type {
    return saker.Router(Ticker, .{ .routes = &.{.get("/events", Ticker.events)}, .blocking = blocking });
}

test "EventStream: a client that disconnects is noticed (ClientGone); event loops batch" {
    // The handler's ClientGone is logged as a warning: expected here, so kept out of the output.
    const log_level = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = log_level;
    for ([_]saker.engine.Kind{ .blocking, .thread_per_connection, .epoll }) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var ticker: Ticker = .{};
        const running = try ServerThread(TickerRoutes(true)).start(kind, .{ .context = &ticker }, .{ .handler_threads = 2 });
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        try client.send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
        const head = try client.readResponse(testing.allocator, .{ .head_request = true });
        head.deinit(testing.allocator);
        const chunk = (try readChunk(&client)).?;
        testing.allocator.free(chunk);
        client.close();
        const deadline = nowMs() + 5000;
        while (ticker.gone.load(.monotonic) == 0 and nowMs() < deadline) {
            const pause: linux.timespec = .{ .sec = 0, .nsec = 5 * std.time.ns_per_ms };
            _ = linux.nanosleep(&pause, null);
        }
        try testing.expectEqual(@as(u32, 1), ticker.gone.load(.monotonic));
    }
    // Without the pool an event loop cannot stream: the events arrive together, with a length.
    var ticker: Ticker = .{};
    const running = try ServerThread(TickerRoutes(false)).start(.epoll, .{ .context = &ticker }, .{});
    defer running.stop();
    const r = try fetch(running.port(), "GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
    defer r.deinit(testing.allocator);
    try expectBody(r, 200, "data: batch\n\n" ++ "data: batch\n\n" ++ "data: batch\n\n");
    try testing.expect(!r.chunked);
}
