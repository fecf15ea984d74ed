//! Router integration tests: the `arena` and `router` examples, and routers made here, served
//! on ephemeral loopback ports by every engine, driven with raw bytes over real sockets.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const fixtures = @import("fixtures");
const arena_example = @import("arena_example");
const router_example = @import("router_example");
const Client = @import("Client.zig");
const sleepMs = @import("clock.zig").sleepMs;
const proc_status = @import("proc_status.zig");

/// The engines every scenario runs on.
const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const ServerThread = @import("server_thread.zig").ServerThread;

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
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.startWith(kind, .{ .context = &fixture.app }, .{});
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
                _ = client.waitForData(20);
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
        // A query parameter that does not parse is named; the others are the handler's own.
        const reasons = [_][]const u8{ "invalid parameter \"a\"\n", "missing parameter\n", "invalid parameter\n", "invalid parameter\n" };
        for (bad, reasons) |request, reason| {
            try client.send(request);
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 400), r.status);
            try testing.expect(std.mem.endsWith(u8, r.body, reason));
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
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.startWith(kind, .{ .context = &fixture.app }, .{});
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
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.startWith(kind, .{ .context = &fixture.app }, .{});
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

test "arena: HttpArena's json-comp checks: br or gzip when asked, decoded by curl; identity when not" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    const items = fixture.app.items;
    const running = try ArenaServer.startWith(.epoll, .{ .context = &fixture.app }, .{});
    defer running.stop();
    const scheme = if (Client.overTls()) "https" else "http";
    var url_buffer: [96]u8 = undefined;
    {
        const url = try std.mem.print(&url_buffer, "{s}://127.0.0.1:{d}/json/50?m=1", .{ scheme, running.port() });
        const asked = try curl(&.{ "-D-", "-o", "/dev/null", "-H", "Accept-Encoding: gzip, br", url });
        defer testing.allocator.free(asked);
        try testing.expect(std.mem.find(u8, asked, "Content-Encoding: br\r\n") != null or std.mem.find(u8, asked, "Content-Encoding: gzip\r\n") != null);
        try testing.expect(std.mem.find(u8, asked, "Vary: Accept-Encoding\r\n") != null);
        const plain = try curl(&.{ "-D-", "-o", "/dev/null", url });
        defer testing.allocator.free(plain);
        try testing.expect(std.ascii.findIgnoreCase(plain, "content-encoding") == null);
    }
    for ([_][2]i64{ .{ 25, 3 }, .{ 40, 7 }, .{ 50, 2 } }) |case| {
        const url = try std.mem.print(&url_buffer, "{s}://127.0.0.1:{d}/json/{d}?m={d}", .{ scheme, running.port(), case[0], case[1] });
        const body = try curl(&.{ "--compressed", "-H", "Accept-Encoding: gzip, br", url });
        defer testing.allocator.free(body);
        const reply = try std.json.parseFromSlice(JsonReply, testing.allocator, body, .{});
        defer reply.deinit();
        try testing.expectEqual(@as(usize, @intCast(case[0])), reply.value.count);
        for (reply.value.items, items[0..reply.value.items.len]) |got, want| {
            try testing.expectEqual(want.price * want.quantity * case[1], got.total);
        }
    }
}

/// curl's output for `args` over HTTP/1.1 (and `--insecure` when the suite runs over TLS); the
/// caller frees it.
fn curl(args: []const []const u8) ![]u8 {
    var argv: std.ArrayList([]const u8) = .empty;
    defer argv.deinit(testing.allocator);
    // HTTP/1.1 as HttpArena's checks speak it (over TLS curl would choose h2).
    try argv.appendSlice(testing.allocator, &.{ "curl", "--silent", "--show-error", "--max-time", "30", "--http1.1" });
    if (Client.overTls()) try argv.append(testing.allocator, "--insecure");
    try argv.appendSlice(testing.allocator, args);
    const result = std.process.run(testing.allocator, testing.io, .{ .argv = argv.items }) catch |err| return skipWithout("curl", err);
    testing.allocator.free(result.stderr);
    return result.stdout;
}

test "arena: /upload counts a streamed body, 20 MiB included, without buffering it" {
    var fixture: ArenaFixture = undefined;
    try fixture.init();
    defer fixture.deinit();
    const big = try testing.allocator.alloc(u8, 20 * 1024 * 1024);
    defer testing.allocator.free(big);
    for (big, 0..) |*b, i| b.* = @truncate(i *% 7);
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // body_bytes_max stays far below 20 MiB: buffering would be a 413.
        const running = try ArenaServer.startWith(kind, .{ .context = &fixture.app }, .{ .body_bytes_max = 64 * 1024 });
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
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ArenaServer.startWith(kind, .{ .context = &fixture.app }, .{});
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
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try TourServer.startWith(kind, .{ .context = {} }, .{ .handler_threads = 2 });
        defer running.stop();
        const port = running.port();
        const Case = struct { request: []const u8, status: u16, body: ?[]const u8 = null, contains: ?[]const u8 = null };
        const cases = [_]Case{
            .{ .request = "GET / HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "Hello, World!" },
            .{ .request = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", .status = 405 },
            .{ .request = "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n", .status = 404 },
            .{ .request = "GET /hello/J%C3%BCrgen HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "Hello, Jürgen!\n" },
            .{ .request = "GET /hello/%zz HTTP/1.1\r\nHost: t\r\n\r\n", .status = 400, .body = "400 Bad Request: invalid percent-encoding \"name\"\n" },
            .{ .request = "GET /search?q=a+b%26c&page=2 HTTP/1.1\r\nHost: t\r\n\r\n", .status = 200, .body = "{\"query\":\"a b&c\",\"page\":2}" },
            .{ .request = "GET /search?q=x&page=two HTTP/1.1\r\nHost: t\r\n\r\n", .status = 400, .body = "400 Bad Request: invalid parameter \"page\"\n" },
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
    const running = try TourServer.startWith(.epoll, .{ .context = {} }, .{ .handler_threads = 2 });
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
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try TourServer.startWith(kind, .{ .context = {} }, .{ .handler_threads = 2 });
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
                _ = client.waitForData(2);
            }
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "{\"parts\":[{\"name\":\"title\",\"filename\":null,\"bytes\":5},{\"name\":\"file\",\"filename\":\"a.bin\",\"bytes\":10}]}");
        }

        // A truncated body, a wrong type, a missing boundary: 400 or 415; more parts than
        // `part_count_max` (16): 413. Then a close.
        const seventeen_parts = comptime parts: {
            var text: []const u8 = "";
            for (0..17) |_| text = text ++ "--XyZ\r\nContent-Disposition: form-data; name=\"p\"\r\n\r\nx\r\n";
            break :parts text ++ "--XyZ--\r\n";
        };
        const bad = [_]struct { request: []const u8, status: u16 }{
            .{ .request = std.fmt.comptimePrint("POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: {d}\r\n\r\n", .{seventeen_parts.len}) ++ seventeen_parts, .status = 413 },
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
    // The route is flagged `blocking`: on event loops it runs on the handler pool (started
    // for it, no `handler_threads` needed) and streams.
    for (usable(&.{ .blocking, .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try TourServer.startWith(kind, .{ .context = {} }, .{});
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

/// Only the event route is flagged; the pool is started for it.
const TickerRouteFlagged = saker.Router(Ticker, .{ .routes = &.{
    .get("/", Ticker.events),
    .with(.{ .blocking = true }, .get("/events", Ticker.events)),
} });

test "EventStream: a route flagged blocking streams on the event loops and notices a client gone" {
    for (usable(&.{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var ticker: Ticker = .{};
        const running = try ServerThread(TickerRouteFlagged).startWith(kind, .{ .context = &ticker }, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        try client.send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
        const head = try client.readResponse(testing.allocator, .{ .head_request = true });
        defer head.deinit(testing.allocator);
        try testing.expectEqualStrings("chunked", head.header("Transfer-Encoding").?);
        // Events arrive one by one while the handler is still running.
        for (0..3) |_| {
            const chunk = (try readChunk(&client)).?;
            defer testing.allocator.free(chunk);
            try testing.expectEqualStrings("data: tick\n\n", chunk);
        }
        try testing.expectEqual(@as(u32, 0), ticker.gone.load(.monotonic));
        client.close();
        const deadline = nowMs() + 5000;
        while (ticker.gone.load(.monotonic) == 0 and nowMs() < deadline) sleepMs(5);
        try testing.expectEqual(@as(u32, 1), ticker.gone.load(.monotonic));
        // The unflagged route stays on the loop: it cannot stream, so it sends a batch.
        const r = try fetch(running.port(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        defer r.deinit(testing.allocator);
        try expectBody(r, 200, "data: batch\n\n" ++ "data: batch\n\n" ++ "data: batch\n\n");
    }
}

test "EventStream: a client that disconnects is noticed (ClientGone); event loops batch" {
    // The handler's ClientGone is logged as a warning: expected here, so kept out of the output.
    const log_level = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = log_level;
    for (usable(&.{ .blocking, .thread_per_connection, .epoll })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var ticker: Ticker = .{};
        const running = try ServerThread(TickerRoutes(true)).startWith(kind, .{ .context = &ticker }, .{ .handler_threads = 2 });
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
    const running = try ServerThread(TickerRoutes(false)).startWith(.epoll, .{ .context = &ticker }, .{});
    defer running.stop();
    const r = try fetch(running.port(), "GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
    defer r.deinit(testing.allocator);
    try expectBody(r, 200, "data: batch\n\n" ++ "data: batch\n\n" ++ "data: batch\n\n");
    try testing.expect(!r.chunked);
}

// Bodies read as they arrive: `req.bodyReader()`.

/// The server's resident memory now and at its peak since `resetPeakRss` (KiB; the server
/// runs in this process).
fn rssKib(field: []const u8) !u64 {
    return proc_status.number(null, field);
}

/// Makes the peak resident size (VmHWM) start again from the current one.
fn resetPeakRss() !void {
    const fd = try std.posix.openat(std.posix.AT.FDCWD, "/proc/self/clear_refs", .{ .ACCMODE = .WRONLY }, 0);
    defer _ = linux.close(fd);
    if (linux.errno(linux.write(fd, "5", 1)) != .SUCCESS) return error.ClearRefsFailed;
}

const Digest = struct { bytes: u64, crc32: u32 };

/// Sends `body` to `target` with Content-Length or in chunks, and returns the digest answered.
fn uploadDigest(client: *Client, target: []const u8, body: []const u8, chunked: bool) !Digest {
    var head: [200]u8 = undefined;
    if (chunked) {
        try client.send(try std.mem.print(&head, "POST {s} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", .{target}));
        var sent: usize = 0;
        var size: usize = 1;
        while (sent < body.len) : (size = @min(size * 3 + 1, 300_000)) {
            const n = @min(size, body.len - sent);
            var line: [32]u8 = undefined;
            try client.send(try std.mem.print(&line, "{x}\r\n", .{n}));
            try client.send(body[sent..][0..n]);
            try client.send("\r\n");
            sent += n;
        }
        try client.send("0\r\n\r\n");
    } else {
        try client.send(try std.mem.print(&head, "POST {s} HTTP/1.1\r\nHost: t\r\nContent-Length: {d}\r\n\r\n", .{ target, body.len }));
        try client.send(body);
    }
    const r = try client.readResponse(testing.allocator, .{});
    defer r.deinit(testing.allocator);
    testing.expectEqual(@as(u16, 200), r.status) catch |err| {
        std.debug.print("body: {s}\n", .{r.body});
        return err;
    };
    const parsed = try std.json.parseFromSlice(Digest, testing.allocator, r.body, .{});
    defer parsed.deinit();
    return parsed.value;
}

test "bodyReader: 20 MiB uploads (length and chunked) are read as they arrive, in bounded memory" {
    const big = try testing.allocator.alloc(u8, 20 * 1024 * 1024);
    defer testing.allocator.free(big);
    for (big, 0..) |*b, i| b.* = @truncate(i *% 31 +% (i >> 12));
    const expected: Digest = .{ .bytes = big.len, .crc32 = std.hash.Crc32.hash(big) };
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // No handler_threads: the route's flag starts the pool on the event loops. Buffering
        // would be refused (body_bytes_max) long before 20 MiB.
        const running = try TourServer.startWith(kind, .{ .context = {} }, .{ .body_bytes_max = 64 * 1024 });
        defer running.stop();
        var client = try Client.connect(running.port(), 20_000);
        defer client.close();
        const small = try uploadDigest(&client, "/api/digest", "hello", false);
        try testing.expectEqual(Digest{ .bytes = 5, .crc32 = std.hash.Crc32.hash("hello") }, small);
        try resetPeakRss();
        const before = try rssKib("VmRSS");
        try testing.expectEqual(expected, try uploadDigest(&client, "/api/digest", big, false));
        try testing.expectEqual(expected, try uploadDigest(&client, "/api/digest", big, true));
        const growth = (try rssKib("VmHWM")) -| before;
        // Generous: a buffered body alone would add 20 MiB.
        testing.expect(growth < 8 * 1024) catch |err| {
            std.debug.print("peak RSS grew by {d} KiB\n", .{growth});
            return err;
        };
        // The connection is still in step: a pipelined pair after the uploads.
        try client.send("POST /api/digest HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc" ++
            "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const pair = try client.readResponse(testing.allocator, .{});
        defer pair.deinit(testing.allocator);
        try testing.expect(std.mem.find(u8, pair.body, "\"bytes\":3") != null);
        const after = try client.readResponse(testing.allocator, .{});
        defer after.deinit(testing.allocator);
        try expectBody(after, 200, "Hello, World!");
    }
}

test "bodyReader: the RSS check sees a buffered 20 MiB body" {
    // The control for the test above: the same measurement notices a body held whole.
    const big = try testing.allocator.alloc(u8, 20 * 1024 * 1024);
    defer testing.allocator.free(big);
    @memset(big, 'x');
    const running = try ServerThread(PullRoutes).startWith(.epoll, .{ .context = &pull_app }, .{
        .body_bytes_max = 32 * 1024 * 1024,
        .arena_request_bytes_max = 64 * 1024 * 1024,
    });
    defer running.stop();
    var client = try Client.connect(running.port(), 20_000);
    defer client.close();
    try resetPeakRss();
    const before = try rssKib("VmRSS");
    var head: [128]u8 = undefined;
    try client.send(try std.mem.print(&head, "POST /buffered HTTP/1.1\r\nHost: t\r\nContent-Length: {d}\r\n\r\n", .{big.len}));
    try client.send(big);
    const r = try client.readResponse(testing.allocator, .{});
    defer r.deinit(testing.allocator);
    try expectBody(r, 200, "20971520");
    try testing.expect((try rssKib("VmHWM")) -| before > 16 * 1024);
}

/// What the `PullRoutes` handlers saw.
const PullApp = struct {
    /// Body read failures, by kind.
    failures: [4]std.atomic.Value(u32) = @splat(.init(0)),
    /// Handler calls of `/refuse`, and of `/` (which reads).
    refused: std.atomic.Value(u32) = .init(0),
    started: std.atomic.Value(u32) = .init(0),
    /// Thread of the last `/where` and `/where-blocking` call.
    loop_thread: std.atomic.Value(u64) = .init(0),
    pool_thread: std.atomic.Value(u64) = .init(0),

    fn failed(app: *PullApp, kind: saker.Request.BodyReadFailure) u32 {
        return app.failures[@backingInt(kind)].load(.acquire);
    }

    fn record(app: *PullApp, req: *saker.Request, err: anyerror) anyerror {
        if (req.bodyReadFailure()) |kind| _ = app.failures[@backingInt(kind)].fetchAdd(1, .acq_rel);
        return err;
    }

    /// Reads `?n=` bytes of the body (all of it without `n`) and answers them.
    fn head(app: *PullApp, req: *saker.Request, res: *saker.Response) !void {
        const limit = try req.query().getInt(usize, "n") orelse std.math.maxInt(usize);
        _ = app.started.fetchAdd(1, .acq_rel);
        const reader = try req.bodyReader();
        var taken: usize = 0;
        while (taken < limit) {
            const chunk = reader.peekGreedy(1) catch |err| switch (err) {
                error.EndOfStream => break,
                error.ReadFailed => return app.record(req, err),
            };
            const n = @min(chunk.len, limit - taken);
            try res.writeAll(chunk[0..n]);
            reader.toss(n);
            taken += n;
        }
    }

    /// Answers 401 without reading the body.
    fn refuse(app: *PullApp, req: *saker.Request, res: *saker.Response) !void {
        _ = req;
        _ = app.refused.fetchAdd(1, .acq_rel);
        res.status = .unauthorized;
        res.setBody("no\n");
    }

    /// Counts a body buffered whole.
    fn buffered(req: *saker.Request, res: *saker.Response) !void {
        try res.print("{d}", .{req.body().len});
    }

    fn where(app: *PullApp, req: *saker.Request, res: *saker.Response) !void {
        _ = req;
        _ = res;
        app.loop_thread.store(std.Thread.getCurrentId(), .release);
    }

    fn whereBlocking(app: *PullApp, req: *saker.Request, res: *saker.Response) !void {
        _ = req;
        _ = res;
        app.pool_thread.store(std.Thread.getCurrentId(), .release);
    }
};

var pull_app: PullApp = .{};

const PullRoutes = saker.Router(PullApp, .{ .routes = &.{
    .with(.{ .body_reader = true }, .group("/read", &.{
        .post("/", PullApp.head),
        .post("/refuse", PullApp.refuse),
    })),
    .post("/buffered", PullApp.buffered),
    .get("/where", PullApp.where),
    .with(.{ .blocking = true }, .get("/where-blocking", PullApp.whereBlocking)),
} });

test "bodyReader: a partly read body is skipped when it has arrived, else the connection closes" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var app: PullApp = .{};
        const running = try ServerThread(PullRoutes).startWith(kind, .{ .context = &app }, .{});
        defer running.stop();
        {
            // Body and the next request in one write: the unread rest is skipped in place.
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read?n=3 HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789" ++
                "POST /read?n=2 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n" ++
                "POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nwxyz");
            for ([_][]const u8{ "012", "ab", "wxyz" }) |body| {
                const r = try client.readResponse(testing.allocator, .{});
                defer r.deinit(testing.allocator);
                try expectBody(r, 200, body);
                try testing.expectEqual(@as(?[]const u8, null), r.header("Connection"));
            }
        }
        // Most of the body is still to come: answered, then closed (not misread as a next
        // request). Over HTTP/2 only the stream ends (RFC 9113 §8.1).
        if (!Client.overH2c()) {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read?n=4 HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n0123456789");
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "0123");
            try testing.expectEqualStrings("close", r.header("Connection").?);
            client.send("GET /where HTTP/1.1\r\nHost: t\r\n\r\n") catch {};
            try testing.expect(try client.isClosed());
        }
    }
}

test "bodyReader: 100 Continue is sent when the reader is first used, not before" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var app: PullApp = .{};
        const running = try ServerThread(PullRoutes).startWith(kind, .{ .context = &app }, .{});
        defer running.stop();
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
            const interim = try client.readResponse(testing.allocator, .{});
            defer interim.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 100), interim.status);
            try client.send("hello");
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "hello");
        }
        {
            // A handler that never reads: no 100, its answer, and a close (the body never came;
            // over HTTP/2 the stream ends, and the connection serves on).
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read/refuse HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 401, "no\n");
            try testing.expect(try client.servesAsAfterError());
            try testing.expectEqual(@as(u32, 1), app.refused.load(.acquire));
        }
    }
}

test "bodyReader: too large (413), bad framing (400), slow but steady (200), stalled (408), and a client gone mid-body" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var app: PullApp = .{};
        const running = try ServerThread(PullRoutes).startWith(kind, .{ .context = &app }, .{
            .streamed_body_bytes_max = 1000,
            .body_timeout_ms = 1000,
        });
        defer running.stop();
        {
            // Declared too large: refused before the handler runs.
            const r = try fetch(running.port(), "POST /read/refuse HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n");
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 413), r.status);
            try testing.expectEqual(@as(u32, 0), app.refused.load(.acquire));
        }
        {
            // Chunked, growing too large while read.
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
            const chunk: [600]u8 = @splat('a');
            for (0..2) |_| {
                try client.send("258\r\n");
                try client.send(&chunk);
                try client.send("\r\n");
            }
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 413), r.status);
            try testing.expect(try client.servesAsAfterError());
            try testing.expectEqual(@as(u32, 1), app.failed(.too_large));
        }
        // Chunk syntax is HTTP/1.1's: HTTP/2 frames the body itself.
        if (!Client.overH2c()) {
            const r = try fetch(running.port(), "POST /read HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n");
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 400), r.status);
            try testing.expectEqual(@as(u32, 1), app.failed(.malformed));
        }
        {
            // A body that keeps coming, slowly: body_timeout_ms bounds the time without
            // progress, not the whole body (6 bytes 250 ms apart take 1.5 s).
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\n");
            for ("slowly") |byte| {
                sleepMs(250);
                try client.send(&.{byte});
            }
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try expectBody(r, 200, "slowly");
            try testing.expectEqual(@as(u32, 0), app.failed(.timeout));
        }
        {
            // The rest of the body never comes: 408 once body_timeout_ms has passed.
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\nstalled");
            const r = try client.readResponse(testing.allocator, .{});
            defer r.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 408), r.status);
            try testing.expectEqual(@as(u32, 1), app.failed(.timeout));
        }
        {
            // Gone once the handler reads: over HTTP/2 a request whose connection ended before
            // its handler started is dropped unhandled.
            const started = app.started.load(.acquire);
            var client = try Client.connect(running.port(), 10_000);
            try client.send("POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\nonly part of it");
            const start_deadline = nowMs() + 5000;
            while (app.started.load(.acquire) == started and nowMs() < start_deadline) sleepMs(1);
            client.close();
            const deadline = nowMs() + 5000;
            while (app.failed(.client_gone) == 0 and nowMs() < deadline) sleepMs(5);
            try testing.expectEqual(@as(u32, 1), app.failed(.client_gone));
        }
    }
}

/// A plain handler that asks for its body to be read as it arrives, without a pool.
const NoPool = struct {
    unavailable: std.atomic.Value(u32) = .init(0),

    pub fn onHead(_: *NoPool, _: *saker.Request, _: *saker.Response) !saker.BodyAction {
        return .reader;
    }

    pub fn handle(app: *NoPool, req: *saker.Request, res: *saker.Response) !void {
        _ = res;
        _ = req.bodyReader() catch |err| {
            if (err == error.BodyReaderUnavailable) _ = app.unavailable.fetchAdd(1, .acq_rel);
            return err;
        };
    }
};

test "bodyReader: an event loop without the handler pool says BodyReaderUnavailable" {
    // It logs on purpose; a warning here is expected, an error still shows.
    const log_level = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = log_level;
    for (usable(&.{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(NoPool).startWith(kind, .{}, .{});
        defer running.stop();
        const r = try fetch(running.port(), "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
        defer r.deinit(testing.allocator);
        if (Client.overH2c()) {
            // Over HTTP/2 such a body is buffered first, and the reader reads it whole
            // (docs/http2.md).
            try testing.expectEqual(@as(u16, 200), r.status);
            try testing.expectEqual(@as(u32, 0), running.handler.unavailable.load(.acquire));
            continue;
        }
        try testing.expectEqual(@as(u16, 500), r.status);
        try testing.expectEqual(@as(u32, 1), running.handler.unavailable.load(.acquire));
    }
}

test "per-route blocking: only flagged routes leave the event loop; the pool starts by itself" {
    for (usable(&.{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var app: PullApp = .{};
        const running = try ServerThread(PullRoutes).startWith(kind, .{ .context = &app }, .{ .workers = 1 });
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        var loop_threads: [2]u64 = undefined;
        for (&loop_threads) |*thread| {
            try client.send("GET /where HTTP/1.1\r\nHost: t\r\n\r\n");
            const r = try client.readResponse(testing.allocator, .{});
            r.deinit(testing.allocator);
            thread.* = app.loop_thread.load(.acquire);
        }
        try client.send("GET /where-blocking HTTP/1.1\r\nHost: t\r\n\r\n");
        const r = try client.readResponse(testing.allocator, .{});
        r.deinit(testing.allocator);
        // One worker: both plain requests ran on its loop thread; the flagged one elsewhere.
        try testing.expectEqual(loop_threads[0], loop_threads[1]);
        try testing.expect(app.pool_thread.load(.acquire) != 0);
        try testing.expect(app.pool_thread.load(.acquire) != loop_threads[0]);
        try testing.expect(loop_threads[0] != std.Thread.getCurrentId());
    }
}

// The request arena's bounds and counters.

/// Makes `?n=` heap allocations (5000 bytes each: more than the 4 KiB region) in the request
/// arena, then answers the arena's counters.
fn hog(req: *saker.Request, res: *saker.Response) !void {
    const n = try req.query().getInt(usize, "n") orelse 0;
    for (0..n) |_| _ = try req.arena.alloc(u8, 5000);
    try res.json(req.arenaStats().?);
}

const HogRoutes = saker.Router(void, .{ .routes = &.{.get("/hog", hog)} });

fn hogStats(client: *Client, n: usize) !?saker.Arena.Stats {
    var request: [64]u8 = undefined;
    try client.send(try std.mem.print(&request, "GET /hog?n={d} HTTP/1.1\r\nHost: t\r\n\r\n", .{n}));
    const r = try client.readResponse(testing.allocator, .{});
    defer r.deinit(testing.allocator);
    if (r.status != 200) return null;
    const parsed = try std.json.parseFromSlice(saker.Arena.Stats, testing.allocator, r.body, .{});
    defer parsed.deinit();
    return parsed.value;
}

test "arena: one request is held to arena_request_bytes_max (500); its memory comes back" {
    // It logs on purpose; a warning here is expected, an error still shows.
    const log_level = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = log_level;
    const overflow_max = 1024 * 1024;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(HogRoutes).startWith(kind, .{ .context = {} }, .{
            .arena_bytes = 4096,
            .body_bytes_max = 16 * 1024,
            .arena_request_bytes_max = 64 * 1024,
            .overflow_bytes_max = overflow_max,
        });
        defer running.stop();
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            // Counters are per request; the server's total keeps counting.
            const three = (try hogStats(&client, 3)).?;
            try testing.expectEqual(@as(u64, 3), three.fallback_count);
            try testing.expect(three.fallback_bytes >= 3 * 5000);
            try testing.expectEqual(@as(u64, 60 * 1024), three.fallback_bytes_max);
            try testing.expect(three.server_fallback_count >= 3);
            try testing.expect(three.budget_remaining_bytes <= overflow_max - 3 * 5000);
            const none = (try hogStats(&client, 0)).?;
            try testing.expectEqual(@as(u64, 0), none.fallback_count);
            try testing.expectEqual(@as(u64, 0), none.fallback_bytes);
            try testing.expect(none.server_fallback_count >= three.server_fallback_count);
            // 20 x 5000 bytes is over the request's 60 KiB, though well within the server's
            // 1 MiB: 500, and the connection closes.
            try testing.expectEqual(@as(?saker.Arena.Stats, null), try hogStats(&client, 20));
            try testing.expect(try client.servesAsAfterError());
        }
        // Everything that request took is given back to the server's budget.
        const deadline = nowMs() + 5000;
        var remaining: u64 = 0;
        while (nowMs() < deadline) {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            remaining = (try hogStats(&client, 0)).?.budget_remaining_bytes;
            if (remaining == overflow_max) break;
            sleepMs(10);
        }
        try testing.expectEqual(@as(u64, overflow_max), remaining);
    }
}

test {
    // The README's "Testing a handler", with the README's handler.
    _ = @import("readme.zig");
}

test "health: ok while serving; a request that arrives during the drain gets 503 and a close" {
    const Gate = struct {
        var entered: std.atomic.Value(bool) = .init(false);
        var released: std.atomic.Value(bool) = .init(false);

        fn block(req: *saker.Request, res: *saker.Response) !void {
            _ = req;
            entered.store(true, .release);
            // Bounded: the test releases it (or 10 s pass).
            var waited_ms: u32 = 0;
            while (!released.load(.acquire) and waited_ms < 10_000) : (waited_ms += 5) sleepMs(5);
            try res.writeAll("done");
        }
    };
    const App = saker.Router(void, .{ .routes = &.{
        .get("/block", Gate.block),
        .get("/healthz", saker.health.check),
    } });
    // `blocking` serves one connection at a time, so a second client waits in the listen
    // backlog while the first is handled: the stop hands it over, and it is answered while the
    // server drains.
    if (Client.overTls()) {
        // Over TLS the late client's handshake needs the server before the stop, which this
        // test can only give after it: the drain of TLS connections is tested in tests/tls.zig.
        std.debug.print("skipped: health during the drain over TLS (a blocking-engine backlog client cannot finish its handshake)\n", .{});
        return error.SkipZigTest;
    }
    const running = try ServerThread(App).startWith(.blocking, .{ .context = {} }, .{ .workers = 1 });
    var joined = false;
    defer if (!joined) running.stop();
    {
        const response = try fetch(running.port(), "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
        defer response.deinit(testing.allocator);
        try expectBody(response, 200, "ok\n");
        try testing.expectEqualStrings("no-store", response.header("Cache-Control").?);
    }
    var holder = try Client.connect(running.port(), 10_000);
    defer holder.close();
    try holder.send("GET /block HTTP/1.1\r\nHost: a\r\n\r\n");
    var waited_ms: u32 = 0;
    while (!Gate.entered.load(.acquire)) : (waited_ms += 5) {
        if (waited_ms > 10_000) return error.HandlerNeverRan;
        sleepMs(5);
    }
    var late = try Client.connect(running.port(), 10_000);
    defer late.close();
    try late.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    running.server.stop();
    Gate.released.store(true, .release);

    const held = try holder.readResponse(testing.allocator, .{});
    defer held.deinit(testing.allocator);
    try expectBody(held, 200, "done");
    const draining = try late.readResponse(testing.allocator, .{});
    defer draining.deinit(testing.allocator);
    try expectBody(draining, 503, "draining\n");
    if (!Client.overH2c()) try testing.expectEqualStrings("close", draining.header("Connection").?);

    joined = true;
    running.thread.join();
    running.server.deinit();
    testing.allocator.destroy(running);
}
