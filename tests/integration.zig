//! The integration suite: real servers on ephemeral loopback ports, real sockets, raw bytes
//! (and curl). Every scenario runs on every engine in `engines`.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const build_options = @import("build_options");
const Client = @import("Client.zig");
const sleepMs = @import("clock.zig").sleepMs;
const nowUs = @import("clock.zig").nowUs;

test {
    _ = @import("static.zig");
    _ = @import("compress.zig");
    _ = @import("body_decoding.zig");
    _ = @import("proxy.zig");
    _ = @import("metrics.zig");
    _ = @import("request_id.zig");
    _ = @import("server_allocator.zig");
}

/// The engines the suite runs on.
const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const TestHandler = struct {
    pub fn handle(_: *TestHandler, req: *saker.Request, res: *saker.Response) !void {
        const path = req.path;
        if (std.mem.eql(u8, path, "/")) {
            res.content_type = "text/plain";
            res.setBody("Hello, World!");
        } else if (std.mem.eql(u8, path, "/echo")) {
            try res.print("{s} {s} body={s}", .{ req.method.name(), req.target, req.body() });
        } else if (std.mem.eql(u8, path, "/len")) {
            try res.print("{d}", .{req.body().len});
        } else if (std.mem.eql(u8, path, "/big")) {
            const n = try std.fmt.parseInt(usize, req.query().get("n") orelse "0", 10);
            const w = res.writer();
            for (0..n) |i| try w.writeByte(@intCast('a' + i % 26));
        } else if (std.mem.eql(u8, path, "/bytes")) {
            // A body handed over whole (not streamed while the handler runs).
            const n = try std.fmt.parseInt(usize, req.query().get("n") orelse "0", 10);
            const body = try res.arena.alloc(u8, n);
            @memset(body, 'b');
            res.setBody(body);
        } else if (std.mem.eql(u8, path, "/stream")) {
            const n = try std.fmt.parseInt(usize, req.query().get("n") orelse "3", 10);
            for (0..n) |i| {
                try res.print("line {d}\n", .{i});
                try res.flush();
            }
        } else if (std.mem.eql(u8, path, "/fail")) {
            return error.HandlerFailed;
        } else if (std.mem.eql(u8, path, "/status")) {
            // Any u16 a handler may set, valid or not; `flush` sends the head at once where
            // the engine streams.
            res.status = @fromBackingInt(try std.fmt.parseInt(u16, req.query().get("code") orelse "200", 10));
            try res.writeAll("status body");
            if (req.query().get("flush") != null) try res.flush();
        } else {
            res.status = .not_found;
        }
    }
};

const ServerThread = @import("server_thread.zig").ServerThread;

const Running = ServerThread(TestHandler);

fn expectBody(response: Client.Response, status: u16, body: []const u8) !void {
    try testing.expectEqual(status, response.status);
    try testing.expectEqualStrings(body, response.body);
}

/// Raises the log threshold to `err` while a test provokes saker's warnings on purpose (a
/// failing handler, a client gone mid-response), so a passing run prints nothing and the
/// build runner does not show its command as if it had failed; errors still print and still
/// fail the test. Returns the level for the caller to restore.
fn quietWarnings() std.log.Level {
    const saved = testing.log_level;
    testing.log_level = .err;
    return saved;
}

/// Waits up to `timeout_ms` for `flag` to become true.
fn waitFor(flag: *const std.atomic.Value(bool), timeout_ms: u64) !void {
    const deadline = nowUs() + timeout_ms * 1000;
    while (!flag.load(.acquire)) {
        if (nowUs() >= deadline) return error.Timeout;
        sleepMs(1);
    }
}

test "keep-alive: several requests on one connection" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        for (0..5) |_| {
            try client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
            try testing.expect(response.header("Date") != null);
            try testing.expectEqual(@as(?[]const u8, null), response.header("Connection"));
        }
    }
}

test "HTTP/1.0: closed after the response unless keep-alive was asked" {
    try Client.http1Only();
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("GET / HTTP/1.0\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
            try testing.expectEqualStrings("close", response.header("Connection").?);
            try testing.expect(try client.isClosed());
        }
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            for (0..2) |_| {
                try client.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try expectBody(response, 200, "Hello, World!");
                try testing.expectEqualStrings("keep-alive", response.header("Connection").?);
            }
        }
    }
}

test "HTTP/1.2: a later minor version is served as HTTP/1.1, kept alive (RFC 9110 §2.5)" {
    try Client.http1Only();
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        for (0..2) |_| {
            try client.send("GET / HTTP/1.2\r\nHost: a\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
            try testing.expect(std.mem.startsWith(u8, response.raw_head, "HTTP/1.1 200 OK\r\n"));
        }
    }
}

test "pipelining: 64 requests in one write are answered in order" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        var requests: std.ArrayList(u8) = .empty;
        defer requests.deinit(testing.allocator);
        for (0..64) |i| try requests.print(testing.allocator, "GET /echo?i={d} HTTP/1.1\r\nHost: t\r\n\r\n", .{i});
        try client.send(requests.items);
        for (0..64) |i| {
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            var expected: [64]u8 = undefined;
            try expectBody(response, 200, try std.mem.print(&expected, "GET /echo?i={d} body=", .{i}));
        }
    }
}

test "chunked request bodies, and a streamed response" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" ++
            "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: 1\r\n\r\n");
        const echoed = try client.readResponse(testing.allocator, .{});
        defer echoed.deinit(testing.allocator);
        try expectBody(echoed, 200, "POST /echo body=hello world");

        try client.send("GET /stream?n=3 HTTP/1.1\r\nHost: t\r\n\r\n");
        const streamed = try client.readResponse(testing.allocator, .{});
        defer streamed.deinit(testing.allocator);
        try expectBody(streamed, 200, "line 0\nline 1\nline 2\n");
        // Engines that run handlers on the connection's thread stream (chunked; over HTTP/2,
        // DATA frames without content-length); event loops without a handler pool send the
        // whole body when the handler returns (Content-Length).
        const handler_thread = switch (kind) {
            .blocking, .thread_per_connection, .worker_pool => true,
            .epoll, .io_uring => false,
        };
        try testing.expectEqual(handler_thread, streamed.chunked);

        try client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const after = try client.readResponse(testing.allocator, .{});
        defer after.deinit(testing.allocator);
        try expectBody(after, 200, "Hello, World!");
    }
}

test "Expect: 100-continue is answered before the body is sent" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
        const interim = try client.readResponse(testing.allocator, .{});
        defer interim.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 100), interim.status);
        try client.send("data");
        const final = try client.readResponse(testing.allocator, .{});
        defer final.deinit(testing.allocator);
        try expectBody(final, 200, "POST /echo body=data");

        // Over the limit: 413 at once, no 100 Continue.
        try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 99999999999\r\n\r\n");
        const refused = try client.readResponse(testing.allocator, .{});
        defer refused.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 413), refused.status);
        try testing.expect(try client.servesAsAfterError());
    }
}

const ErrorCase = struct { request: []const u8, status: u16 };

const error_cases = [_]ErrorCase{
    .{ .request = "GET / HTTP/1.1\r\n\r\n", .status = 400 },
    .{ .request = "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .status = 400 },
    .{ .request = "GET / HTTP/1.1\r\nHost : a\r\n\r\n", .status = 400 },
    .{ .request = "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n  folded\r\n\r\n", .status = 400 },
    .{ .request = "GET / HTTP/1.1\r\nHost: a\rX: 1\r\n\r\n", .status = 400 },
    .{ .request = "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", .status = 501 },
    .{ .request = "BREW / HTTP/1.1\r\nHost: a\r\n\r\n", .status = 501 },
    .{ .request = "GET / HTTP/2.0\r\nHost: a\r\n\r\n", .status = 505 },
    .{ .request = "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", .status = 400 },
    .{ .request = "GET /page#top HTTP/1.1\r\nHost: a\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n0\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\r\nhello\r\n0\r\n\r\n", .status = 400 },
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9000000000\r\n\r\n", .status = 413 },
};

test "every error status is followed by a close, and the server goes on serving" {
    try Client.http1Only();
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        for (error_cases) |case| {
            errdefer std.debug.print("engine {t}, request {f}\n", .{ kind, std.zig.fmtString(case.request) });
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send(case.request);
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try testing.expectEqual(case.status, response.status);
            try testing.expectEqualStrings("close", response.header("Connection").?);
            try testing.expect(try client.isClosed());
        }
        // An 8 KiB target is served (RFC 9112 §3: at least 8000 octets): this handler has no
        // such path, so 404.
        {
            var target: [8192]u8 = undefined;
            @memset(&target, 'a');
            const request = try std.fmt.allocPrint(testing.allocator, "GET /{s} HTTP/1.1\r\nHost: a\r\n\r\n", .{target[1..]});
            defer testing.allocator.free(request);
            const response = try Client.fetch(testing.allocator, running.port(), request);
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 404), response.status);
        }
        // 414 and 431 need long input.
        const long_target = try testing.allocator.alloc(u8, 10_000);
        defer testing.allocator.free(long_target);
        @memset(long_target, 'a');
        const long_header = try testing.allocator.alloc(u8, 70_000);
        defer testing.allocator.free(long_header);
        @memset(long_header, 'b');
        inline for (.{ .{ 414, "GET /{s} HTTP/1.1\r\nHost: a\r\n\r\n", long_target }, .{ 431, "GET / HTTP/1.1\r\nHost: a\r\nX: {s}\r\n\r\n", long_header } }) |case| {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            const request = try std.fmt.allocPrint(testing.allocator, case[1], .{case[2]});
            defer testing.allocator.free(request);
            client.send(request) catch {}; // the server may close before it has read it all
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, case[0]), response.status);
            try testing.expect(try client.isClosed());
        }
        const response = try Client.fetch(testing.allocator, running.port(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
        try expectBody(response, 200, "Hello, World!");
    }
}

test "a 60 KiB head borrows a large buffer and is answered" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        const cookie = try testing.allocator.alloc(u8, 60 * 1024);
        defer testing.allocator.free(cookie);
        @memset(cookie, 'c');
        const request = try std.fmt.allocPrint(testing.allocator, "GET /echo HTTP/1.1\r\nHost: t\r\nCookie: {s}\r\n\r\n", .{cookie});
        defer testing.allocator.free(request);
        for (0..2) |_| {
            try client.send(request);
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "GET /echo body=");
        }
    }
}

test "a handler error is a 500 and a close" {
    const log_level = quietWarnings();
    defer testing.log_level = log_level;
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        try client.send("GET /fail HTTP/1.1\r\nHost: t\r\n\r\n");
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 500), response.status);
        try testing.expect(try client.servesAsAfterError());
    }
}

test "a slow head gets 408; an idle keep-alive connection is closed" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{ .header_timeout_ms = 200, .idle_timeout_ms = 300 });
        defer running.stop();
        // A head in pieces is HTTP/1.1's: an HTTP/2 header block arrives whole.
        if (!Client.overH2c()) {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("GET / HTTP/1.1\r\nHost:");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 408), response.status);
            try testing.expect(try client.isClosed());
        }
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
            try testing.expect(try client.isClosed()); // after idle_timeout_ms, no bytes
        }
    }
}

test "500 concurrent clients" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{});
        defer running.stop();
        // Over h2c each of these connections stays open until the test reads its response
        // (HTTP/1.1 closes it at once), so thread_per_connection holds 500 threads at a time,
        // and worker_pool's 128 pool threads open 500 HTTP/2 sessions at once: the servers'
        // allocator must not spin (`server_allocator.zig`).
        var clients: [500]Client = undefined;
        var connected: usize = 0;
        defer for (clients[0..connected]) |*c| c.close();
        for (&clients) |*c| {
            c.* = try Client.connect(running.port(), 20_000);
            connected += 1;
        }
        for (&clients, 0..) |*c, i| {
            var request: [96]u8 = undefined;
            try c.send(try std.mem.print(&request, "GET /echo?c={d} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", .{i}));
        }
        for (&clients, 0..) |*c, i| {
            errdefer std.debug.print("client {d}\n", .{i});
            const response = try c.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            var expected: [64]u8 = undefined;
            try expectBody(response, 200, try std.mem.print(&expected, "GET /echo?c={d} body=", .{i}));
        }
    }
}

test "idle keep-alive and half-sent requests beyond pool_threads do not hold up a new client" {
    for (usable(&engines)) |kind| {
        // The blocking engine serves one connection at a time by design.
        if (kind == .blocking) continue;
        errdefer std.debug.print("engine {t}\n", .{kind});
        // Four pool threads (worker_pool) against 20 idle and 10 half-sent connections: each
        // would hold a thread until its 60 s timeout if threads served connections to the end.
        const running = try Running.start(kind, .{ .pool_threads = 4 });
        defer running.stop();
        var idle: [20]Client = undefined;
        var idle_open: usize = 0;
        defer for (idle[0..idle_open]) |*c| c.close();
        for (&idle) |*c| {
            c.* = try Client.connect(running.port(), 10_000);
            idle_open += 1;
            try c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try c.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
        }
        var partial: [10]Client = undefined;
        var partial_open: usize = 0;
        defer for (partial[0..partial_open]) |*c| c.close();
        for (&partial) |*c| {
            c.* = try Client.connect(running.port(), 10_000);
            partial_open += 1;
            try c.send("GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ");
        }
        const start = std.Io.Clock.awake.now(testing.io);
        // The client's receive timeout (3 s) fails the test if no answer comes.
        var fresh = try Client.connect(running.port(), 3_000);
        defer fresh.close();
        try fresh.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const response = try fresh.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try expectBody(response, 200, "Hello, World!");
        const elapsed_ms = start.untilNow(testing.io, .awake).toMilliseconds();
        errdefer std.debug.print("answered after {d} ms\n", .{elapsed_ms});
        try testing.expect(elapsed_ms < 1_000);
        // The parked connections are still served: idle ones ask again, half-sent ones finish.
        for (&idle) |*c| {
            try c.send("GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
            const again = try c.readResponse(testing.allocator, .{});
            defer again.deinit(testing.allocator);
            try expectBody(again, 200, "GET /echo body=");
        }
        for (&partial) |*c| {
            try c.send("1\r\n\r\n");
            const finished = try c.readResponse(testing.allocator, .{});
            defer finished.deinit(testing.allocator);
            try expectBody(finished, 200, "Hello, World!");
        }
    }
}

test "a client that disconnects mid-request does not disturb anyone" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        for ([_][]const u8{ "GET / HT", "POST /len HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc" }) |partial| {
            var quitter = try Client.connect(running.port(), 10_000);
            try quitter.send(partial);
            quitter.close();
            const response = try Client.fetch(testing.allocator, running.port(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
        }
    }
}

test "a client that never reads its response does not stop others being served" {
    // Engines that stream the body log the handler's failed write when the client is dropped.
    const log_level = quietWarnings();
    defer testing.log_level = log_level;
    for (usable(&engines)) |kind| {
        // The blocking engine serves one connection at a time: it gets to the next client
        // once the write timeout has dropped the one that does not read.
        const running = try Running.start(kind, .{ .write_timeout_ms = 500 });
        defer running.stop();
        var sluggard = try Client.connect(running.port(), 10_000);
        defer sluggard.close();
        try sluggard.send("GET /big?n=50000000 HTTP/1.1\r\nHost: t\r\n\r\n");
        for (0..3) |_| {
            const response = try Client.fetch(testing.allocator, running.port(), "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
        }
    }
}

/// Expects a 503 on a new connection, followed by the server's FIN: a clean close, not a
/// reset that could have destroyed the response.
fn expectRefused(port: u16) !void {
    if (Client.overH2c()) {
        // The refusal comes before the client's first bytes say which protocol it speaks:
        // it is HTTP/1.1's.
        const response = try Client.fetchPlain(testing.allocator, port, "");
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 503), response.status);
        return;
    }
    if (Client.overTls()) {
        // A TLS client cannot read a plaintext 503: the refusal is the FIN alone.
        var client = try Client.connectPlain(port, 10_000);
        defer client.close();
        try testing.expect(try client.isClosed());
        return;
    }
    var client = try Client.connect(port, 10_000);
    defer client.close();
    const response = try client.readResponse(testing.allocator, .{});
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 503), response.status);
    try testing.expectEqualStrings("close", response.header("Connection").?);
    try testing.expectEqual(client.start, client.end);
    try testing.expect(try client.isClosed());
}

test "connections_max holds for the whole server: one more gets 503 and a FIN, on every engine" {
    const connections_max = 8;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // Four listeners (SO_REUSEPORT): the kernel spreads the connections unevenly, and
        // the limit must still be the server's, not a quarter of it per listener.
        const running = try Running.start(kind, .{ .workers = 4, .connections_max = connections_max, .pool_threads = connections_max });
        defer running.stop();
        var clients: [connections_max]Client = undefined;
        var connected: usize = 0;
        defer for (clients[0..connected]) |*c| c.close();
        // `blocking` serves one connection at a time and accepts the next only then, so it
        // never has more open than the one it serves; the others wait in the listen backlog.
        const open_max: usize = if (kind == .blocking) 1 else connections_max;
        for (clients[0..open_max]) |*c| {
            c.* = try Client.connect(running.port(), 10_000);
            connected += 1;
            try c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try c.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
        }
        if (kind == .blocking and Client.overTls()) {
            // A TLS client's first bytes wait for its handshake, which the server gives only
            // when it takes the connection: nothing can wait in the backlog to be answered.
            continue;
        }
        if (kind == .blocking) {
            // The next connection waits, then is served once the first closes.
            var next = try Client.connect(running.port(), 10_000);
            defer next.close();
            try next.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            sleepMs(100);
            try testing.expect(!readable(&next));
            clients[0].close();
            connected = 0;
            const response = try next.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
            continue;
        }
        try expectRefused(running.port());
        try expectRefused(running.port());
        // The open connections are still served.
        for (clients[0..connected]) |*c| {
            try c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try c.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
        }
        // A closed connection frees its place (once the server has seen the close).
        clients[connected - 1].close();
        connected -= 1;
        const deadline = nowUs() + 5_000_000;
        while (true) {
            const response = Client.fetch(testing.allocator, running.port(), "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n") catch |err| {
                // Over TLS a refusal is a close during the handshake; over h2c an HTTP/1.1
                // 503 where frames were due.
                if (!Client.overTls() and !Client.overH2c()) return err;
                if (nowUs() >= deadline) return error.PlaceNotFreed;
                sleepMs(10);
                continue;
            };
            defer response.deinit(testing.allocator);
            if (response.status == 200) break;
            try testing.expectEqual(@as(u16, 503), response.status);
            if (nowUs() >= deadline) return error.PlaceNotFreed;
            sleepMs(10);
        }
    }
}

test "body_timeout_ms: a body trickling in steadily succeeds, a stalled one gets 408 and a close" {
    const body_timeout_ms = 400;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .body_timeout_ms = body_timeout_ms });
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        // 12 bytes 80 ms apart: about a second in all, more than twice the timeout, but
        // never more than a fifth of it without progress.
        try client.send("POST /len HTTP/1.1\r\nHost: t\r\nContent-Length: 12\r\n\r\n");
        for (0..12) |_| {
            sleepMs(80);
            try client.send("x");
        }
        const trickled = try client.readResponse(testing.allocator, .{});
        defer trickled.deinit(testing.allocator);
        try expectBody(trickled, 200, "12");
        // A chunked body the same way, on the same connection.
        try client.send("POST /len HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (0..6) |_| {
            sleepMs(80);
            try client.send("2\r\nxx\r\n");
        }
        try client.send("0\r\n\r\n");
        const chunked = try client.readResponse(testing.allocator, .{});
        defer chunked.deinit(testing.allocator);
        try expectBody(chunked, 200, "12");

        // Part of a body, then nothing: 408 once body_timeout_ms passes without a byte.
        try client.send("POST /len HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
        const stalled_at = nowUs();
        const stalled = try client.readResponse(testing.allocator, .{});
        defer stalled.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 408), stalled.status);
        try testing.expect(nowUs() - stalled_at >= (body_timeout_ms - 50) * 1000);
        try testing.expect(try client.servesAsAfterError());
    }
}

test "a handler status outside 100-599 is a 500 and a close, on every engine" {
    const log_level = quietWarnings();
    defer testing.log_level = log_level;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{});
        defer running.stop();
        for ([_][]const u8{ "0", "99", "600", "1000", "65535" }) |code| {
            // Buffered, and flushed (the head would go out at once on engines that stream).
            for ([_][]const u8{ "", "&flush" }) |flush| {
                errdefer std.debug.print("code {s}{s}\n", .{ code, flush });
                var client = try Client.connect(running.port(), 10_000);
                defer client.close();
                var request: [96]u8 = undefined;
                try client.send(try std.mem.print(&request, "GET /status?code={s}{s} HTTP/1.1\r\nHost: t\r\n\r\n", .{ code, flush }));
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try testing.expectEqual(@as(u16, 500), response.status);
                try testing.expect(try client.servesAsAfterError());
            }
        }
        const edge = try Client.fetch(testing.allocator, running.port(), "GET /status?code=599&flush HTTP/1.1\r\nHost: t\r\n\r\n");
        defer edge.deinit(testing.allocator);
        try expectBody(edge, 599, "status body");
    }
}

test "a client that never reads a large response does not hold a thread" {
    for (usable(&engines)) |kind| {
        // The blocking engine serves one connection at a time by design.
        if (kind == .blocking) continue;
        errdefer std.debug.print("engine {t}\n", .{kind});
        // One pool thread (worker_pool) and a write timeout longer than the test: a thread
        // waiting for the sluggard to read would keep everyone else waiting.
        const running = try Running.start(kind, .{ .pool_threads = 1, .write_timeout_ms = 60_000 });
        defer running.stop();
        var sluggard = try Client.connect(running.port(), 10_000);
        defer sluggard.close(); // before the stop, so the shutdown need not wait for it
        // More than the loopback socket buffers hold on both sides.
        try sluggard.send("GET /bytes?n=32000000 HTTP/1.1\r\nHost: t\r\n\r\n");
        for (0..3) |_| {
            // The client's receive timeout (3 s) fails the test if no answer comes.
            var client = try Client.connect(running.port(), 3_000);
            defer client.close();
            try client.send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectBody(response, 200, "Hello, World!");
        }
    }
}

test "large bodies in and out" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        const body = try testing.allocator.alloc(u8, 3 * 1024 * 1024);
        defer testing.allocator.free(body);
        @memset(body, 'z');
        var head: [128]u8 = undefined;
        try client.send(try std.mem.print(&head, "POST /len HTTP/1.1\r\nHost: t\r\nContent-Length: {d}\r\n\r\n", .{body.len}));
        try client.send(body);
        const length = try client.readResponse(testing.allocator, .{});
        defer length.deinit(testing.allocator);
        try expectBody(length, 200, "3145728");
        try client.send("GET /big?n=2000000 HTTP/1.1\r\nHost: t\r\n\r\n");
        const big = try client.readResponse(testing.allocator, .{});
        defer big.deinit(testing.allocator);
        try testing.expectEqual(@as(usize, 2_000_000), big.body.len);
        try testing.expectEqual(@as(u8, 'a' + 1_999_999 % 26), big.body[1_999_999]);
    }
}

/// Starts an example executable on an ephemeral port; returns it and the port it printed.
fn spawnExample(path: []const u8, kind: saker.engine.Kind) !struct { child: std.process.Child, port: u16 } {
    const io = testing.io;
    Client.plaintextServer(); // a server process of its own: plaintext
    var child = try std.process.spawn(io, .{
        .argv = &.{ path, "--port", "0", "--engine", @tagName(kind), "--workers", "2" },
        .stdout = .pipe,
        .stderr = .ignore,
    });
    errdefer child.kill(io);
    var buffer: [256]u8 = undefined;
    var reader = child.stdout.?.readerStreaming(io, &buffer);
    const line = try reader.interface.takeDelimiterExclusive('\n');
    const prefix = "listening on http://127.0.0.1:";
    if (!std.mem.startsWith(u8, line, prefix)) return error.UnexpectedOutput;
    const port = try std.fmt.parseInt(u16, line[prefix.len..], 10);
    return .{ .child = child, .port = port };
}

test "SIGTERM: the request in flight is answered, then the process exits 0" {
    const io = testing.io;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var started = try spawnExample(build_options.echo_exe, kind);
        var client = try Client.connect(started.port, 10_000);
        defer client.close();
        try client.send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
        // Let the server take the head before the signal arrives.
        _ = client.waitForData(200);
        _ = linux.kill(started.child.id.?, linux.SIG.TERM);
        _ = client.waitForData(200);
        try client.send("world");
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 200), response.status);
        try testing.expect(std.mem.find(u8, response.body, "\"body\":\"helloworld\"") != null);
        // Usually `Connection: close`; if the loop answered before it saw the signal, the
        // connection is closed right after, idle. Either way it ends.
        try testing.expect(try client.isClosed());
        const term = try started.child.wait(io);
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, term);
    }
}

/// `spawnExample` with the example's log on a pipe, so a test can wait for a log line.
fn spawnLogged(path: []const u8, kind: saker.engine.Kind) !struct { child: std.process.Child, port: u16 } {
    const io = testing.io;
    Client.plaintextServer(); // a server process of its own: plaintext
    var child = try std.process.spawn(io, .{
        .argv = &.{ path, "--port", "0", "--engine", @tagName(kind), "--workers", "2" },
        .stdout = .pipe,
        .stderr = .pipe,
    });
    errdefer child.kill(io);
    var buffer: [256]u8 = undefined;
    var reader = child.stdout.?.readerStreaming(io, &buffer);
    const line = try reader.interface.takeDelimiterExclusive('\n');
    const prefix = "listening on http://127.0.0.1:";
    if (!std.mem.startsWith(u8, line, prefix)) return error.UnexpectedOutput;
    return .{ .child = child, .port = try std.fmt.parseInt(u16, line[prefix.len..], 10) };
}

/// Reads `child`'s stderr until `needle` appears (within `timeout_ms`).
fn waitForLog(child: *std.process.Child, needle: []const u8, timeout_ms: u32) !void {
    const fd = child.stderr.?.handle;
    var seen: [8 * 1024]u8 = undefined;
    var len: usize = 0;
    const deadline_us = nowUs() + @as(u64, timeout_ms) * 1000;
    while (std.mem.find(u8, seen[0..len], needle) == null) {
        const now_us = nowUs();
        if (now_us >= deadline_us) return error.Timeout;
        var fds = [_]linux.pollfd{.{ .fd = fd, .events = linux.POLL.IN, .revents = 0 }};
        _ = linux.poll(&fds, 1, @intCast((deadline_us - now_us) / 1000 + 1));
        if (fds[0].revents == 0) continue;
        if (len > seen.len / 2) { // keep the tail, where a partial line may be
            std.mem.copyForwards(u8, seen[0 .. seen.len / 2], seen[len - seen.len / 2 .. len]);
            len = seen.len / 2;
        }
        const rc = linux.read(fd, seen[len..].ptr, seen.len - len);
        if (linux.errno(rc) != .SUCCESS or rc == 0) return error.Closed;
        len += rc;
    }
}

/// Sends a POST head and half its body, and waits a moment so the server reads the head: a
/// request that stays in flight until the rest is sent.
fn holdRequest(port: u16) !Client {
    var client = try Client.connect(port, 10_000);
    errdefer client.close();
    try client.send("POST /held HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
    _ = client.waitForData(200);
    return client;
}

test "SIGTERM: connections made after the signal get no answer; the exit follows the held request" {
    const io = testing.io;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var started = try spawnLogged(build_options.echo_exe, kind);
        var exited = false;
        defer if (!exited) { // a check failed before the exit
            _ = linux.kill(started.child.id.?, linux.SIG.KILL);
            _ = started.child.wait(io) catch {};
        };
        var held = try holdRequest(started.port);
        defer held.close();
        _ = linux.kill(started.child.id.?, linux.SIG.TERM);
        try waitForLog(&started.child, "signal received", 10_000);
        sleepMs(100);
        // New clients, each with a complete request: refused, or closed unanswered.
        var late: [6]?Client = @splat(null);
        defer for (&late) |*slot| if (slot.*) |*client| client.close();
        for (&late) |*slot| {
            slot.* = Client.connect(started.port, 5_000) catch continue;
            slot.*.?.send("GET /late HTTP/1.1\r\nHost: t\r\n\r\n") catch {};
        }
        try held.send("world");
        const response = try held.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        const held_done_us = nowUs();
        try testing.expectEqual(@as(u16, 200), response.status);
        try testing.expect(std.mem.find(u8, response.body, "\"body\":\"helloworld\"") != null);
        for (&late) |*slot| {
            const client = if (slot.*) |*c| c else continue;
            if (client.readResponse(testing.allocator, .{})) |answer| {
                defer answer.deinit(testing.allocator);
                std.debug.print("a connection made after SIGTERM got {d}\n", .{answer.status});
                return error.AnsweredAfterStop;
            } else |err| switch (err) {
                error.Closed, error.ReadFailed => {}, // reset or closed, never answered
                else => return err,
            }
        }
        const term = try started.child.wait(io);
        exited = true;
        const exit_ms = (nowUs() - held_done_us) / 1000;
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, term);
        // shutdown_timeout_ms is 10 s: the exit must follow the last request, not the timeout.
        errdefer std.debug.print("exited {d} ms after the held request was answered\n", .{exit_ms});
        try testing.expect(exit_ms < 5_000);
        try testing.expectError(error.ConnectFailed, Client.connect(started.port, 1000));
    }
}

test "SIGTERM twice: the process exits at once with status 1, even with a request in flight" {
    const io = testing.io;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var started = try spawnLogged(build_options.echo_exe, kind);
        var exited = false;
        defer if (!exited) { // a check failed before the exit
            _ = linux.kill(started.child.id.?, linux.SIG.KILL);
            _ = started.child.wait(io) catch {};
        };
        var held = try holdRequest(started.port);
        defer held.close();
        _ = linux.kill(started.child.id.?, linux.SIG.TERM);
        try waitForLog(&started.child, "signal received", 10_000);
        // Let the first shutdown reach its waits (engines, pools), then insist.
        sleepMs(300);
        _ = linux.kill(started.child.id.?, linux.SIG.TERM);
        const second_us = nowUs();
        const term = try started.child.wait(io);
        exited = true;
        const exit_ms = (nowUs() - second_us) / 1000;
        try testing.expectEqual(std.process.Child.Term{ .exited = 1 }, term);
        // Well before shutdown_timeout_ms (10 s).
        errdefer std.debug.print("exited {d} ms after the second signal\n", .{exit_ms});
        try testing.expect(exit_ms < 5_000);
    }
}

test "curl as a real client: keep-alive, POST, HEAD and chunked upload" {
    const io = testing.io;
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var url_buffer: [2][64]u8 = undefined;
        const scheme = if (Client.overTls()) "https" else "http";
        const root = try std.mem.print(&url_buffer[0], "{s}://127.0.0.1:{d}/", .{ scheme, running.port() });
        const echo = try std.mem.print(&url_buffer[1], "{s}://127.0.0.1:{d}/echo", .{ scheme, running.port() });
        const result = std.process.run(testing.allocator, io, .{
            .argv = &.{
                // HTTP/1.1 even over TLS, where curl would choose h2 (tests/http2.zig covers that).
                "curl",       "--http1.1", "--insecure",                 "--silent",      "--show-error", "--fail", root,     root,
                "--next",     "--http1.1", "--insecure",                 "--data-binary", "abc",          echo,     "--next", "--http1.1",
                "--insecure", "--header",  "Transfer-Encoding: chunked", "--data-binary", "chunky",       echo,
            },
        }) catch |err| return skipWithout("curl", err);
        defer testing.allocator.free(result.stdout);
        defer testing.allocator.free(result.stderr);
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, result.term);
        try testing.expectEqualStrings("Hello, World!Hello, World!POST /echo body=abcPOST /echo body=chunky", result.stdout);

        const head = try std.process.run(testing.allocator, io, .{ .argv = &.{ "curl", "--http1.1", "--insecure", "--silent", "--head", root } });
        defer testing.allocator.free(head.stdout);
        defer testing.allocator.free(head.stderr);
        try testing.expect(std.mem.startsWith(u8, head.stdout, "HTTP/1.1 200 OK\r\n"));
        try testing.expect(std.mem.find(u8, head.stdout, "Content-Length: 13\r\n") != null);
    }
}

test "the examples: hello routes and 405, counter counts, echo describes" {
    const io = testing.io;
    inline for (.{ build_options.hello_exe, build_options.counter_exe }) |path| {
        var started = try spawnExample(path, .epoll);
        defer {
            _ = linux.kill(started.child.id.?, linux.SIG.TERM);
            _ = started.child.wait(io) catch {};
        }
        if (std.mem.eql(u8, path, build_options.hello_exe)) {
            const ok = try Client.fetch(testing.allocator, started.port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            defer ok.deinit(testing.allocator);
            try expectBody(ok, 200, "Hello, World!");
            try testing.expectEqualStrings("text/plain", ok.header("Content-Type").?);
            const missing = try Client.fetch(testing.allocator, started.port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
            defer missing.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 404), missing.status);
            const not_allowed = try Client.fetch(testing.allocator, started.port, "DELETE / HTTP/1.1\r\nHost: t\r\n\r\n");
            defer not_allowed.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 405), not_allowed.status);
            try testing.expectEqualStrings("GET, HEAD", not_allowed.header("Allow").?);
        } else {
            for (1..4) |i| {
                const response = try Client.fetch(testing.allocator, started.port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                defer response.deinit(testing.allocator);
                var expected: [32]u8 = undefined;
                try expectBody(response, 200, try std.mem.print(&expected, "hits: {d}\n", .{i}));
            }
        }
    }
    var echo = try spawnExample(build_options.echo_exe, .epoll);
    defer {
        _ = linux.kill(echo.child.id.?, linux.SIG.TERM);
        _ = echo.child.wait(io) catch {};
    }
    const response = try Client.fetch(testing.allocator, echo.port, "PUT /a%20b?x=1&y HTTP/1.1\r\nHost: t\r\nX-Case: MiXed \r\nContent-Length: 5\r\n\r\n\"q\"\n\x01");
    defer response.deinit(testing.allocator);
    try testing.expectEqualStrings("application/json", response.header("Content-Type").?);
    // Over HTTP/2 the request has its version, field names in lower case (RFC 9113 §8.2.1),
    // and :authority as the host field, last.
    try testing.expectEqualStrings(if (Client.overH2c())
        \\{"method":"PUT","target":"/a%20b?x=1&y","path":"/a%20b","query":"x=1&y","version":"HTTP/2.0","headers":[["x-case","MiXed"],["content-length","5"],["host","t"]],"body":"\"q\"\n\u0001"}
    else
        \\{"method":"PUT","target":"/a%20b?x=1&y","path":"/a%20b","query":"x=1&y","version":"HTTP/1.1","headers":[["Host","t"],["X-Case","MiXed"],["Content-Length","5"]],"body":"\"q\"\n\u0001"}
    , response.body);
}

/// Counts uploaded bytes without buffering them (onHead/onBody hooks).
const Uploader = struct {
    pub fn onHead(_: *Uploader, req: *saker.Request, res: *saker.Response) !saker.BodyAction {
        if (std.mem.eql(u8, req.path, "/private")) {
            res.status = .unauthorized;
            return .skip;
        }
        const count = try req.arena.create(u64);
        count.* = 0;
        req.user_data = count;
        return .stream;
    }

    pub fn onBody(_: *Uploader, req: *saker.Request, _: *saker.Response, chunk: []const u8) !void {
        const count: *u64 = @ptrCast(@alignCast(req.user_data.?));
        count.* += chunk.len;
    }

    pub fn handle(_: *Uploader, req: *saker.Request, res: *saker.Response) !void {
        if (res.status == .unauthorized) return res.writeAll("no\n");
        const count: *u64 = @ptrCast(@alignCast(req.user_data.?));
        try res.print("{d}", .{count.*});
    }
};

test "hooks: a 20 MiB upload streams through onBody; skip refuses without 100 Continue" {
    for (usable(&engines)) |kind| {
        const running = try ServerThread(Uploader).start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        const piece = try testing.allocator.alloc(u8, 1024 * 1024);
        defer testing.allocator.free(piece);
        @memset(piece, 'u');
        try client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 20971520\r\n\r\n");
        for (0..20) |_| try client.send(piece);
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try expectBody(response, 200, "20971520");

        try client.send("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
        const chunked = try client.readResponse(testing.allocator, .{});
        defer chunked.deinit(testing.allocator);
        try expectBody(chunked, 200, "5");

        try client.send("POST /private HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n");
        const refused = try client.readResponse(testing.allocator, .{});
        defer refused.deinit(testing.allocator);
        try expectBody(refused, 401, "no\n");
        try testing.expect(try client.servesAsAfterError());
    }
}

/// A handler that may block: the event engines run it on the handler pool.
const Sleepy = struct {
    pub const blocking = true;
    /// Set when `/slow` has started sleeping, and when it has finished.
    slow_started: std.atomic.Value(bool) = .init(false),
    slow_done: std.atomic.Value(bool) = .init(false),

    pub fn handle(sleepy: *Sleepy, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/slow")) {
            sleepy.slow_started.store(true, .release);
            sleepMs(200);
            sleepy.slow_done.store(true, .release);
            return res.writeAll("slow");
        }
        if (std.mem.eql(u8, req.path, "/events")) {
            // Server-sent-events style: each flush must reach the client while the handler
            // is still running.
            res.content_type = "text/event-stream";
            for (0..3) |i| {
                try res.print("data: {d}\n\n", .{i});
                try res.flush();
                sleepMs(100);
            }
            return;
        }
        try res.print("fast {s}", .{req.target});
    }
};

fn readable(client: *Client) bool {
    return client.waitForData(0);
}

const event_engines = [_]saker.engine.Kind{ .epoll, .io_uring };

test "handler pool: a handler sleeping 200 ms does not delay fast requests on other connections" {
    for (usable(&event_engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Sleepy).start(kind, .{ .workers = 1 });
        defer running.stop();
        const sleepy = &running.handler;
        var slow = try Client.connect(running.port(), 10_000);
        defer slow.close();
        try slow.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
        try waitFor(&sleepy.slow_started, 5_000);
        // With one worker, this is the same event loop as the slow request's. Each fast
        // request (connect, request, response) must take a few ms, not wait for the slow
        // handler; 50 ms leaves room for a loaded machine.
        for (0..5) |i| {
            const start = nowUs();
            var request: [64]u8 = undefined;
            const response = try Client.fetch(testing.allocator, running.port(), try std.mem.print(&request, "GET /f{d} HTTP/1.1\r\nHost: t\r\n\r\n", .{i}));
            defer response.deinit(testing.allocator);
            const elapsed_us = nowUs() - start;
            errdefer std.debug.print("fast request {d} took {d} us\n", .{ i, elapsed_us });
            var expected: [16]u8 = undefined;
            try expectBody(response, 200, try std.mem.print(&expected, "fast /f{d}", .{i}));
            try testing.expect(elapsed_us < 50_000);
            // The first was answered while the slow handler was still asleep.
            if (i == 0) try testing.expect(!sleepy.slow_done.load(.acquire));
        }
        const response = try slow.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try expectBody(response, 200, "slow");
        try testing.expect(sleepy.slow_done.load(.acquire));
    }
}

/// A blocking handler whose `/hold` keeps its pool thread until the test opens the gate.
const Gate = struct {
    pub const blocking = true;
    held: std.atomic.Value(bool) = .init(false),
    open: std.atomic.Value(bool) = .init(false),

    pub fn handle(gate: *Gate, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/hold")) {
            gate.held.store(true, .release);
            // Bounded, so a failing test cannot hang the server's shutdown.
            for (0..10_000) |_| {
                if (gate.open.load(.acquire)) break;
                sleepMs(1);
            }
        }
        try res.print("done {s}", .{req.path});
    }
};

/// Waits up to 5 s until one of `a` and `b` has bytes to read; returns it (null: neither).
fn firstReadable(a: *Client, b: *Client) ?*Client {
    for (0..500) |_| {
        if (a.waitForData(5)) return a;
        if (b.waitForData(5)) return b;
    }
    return null;
}

test "handler pool: a full queue answers 503; the queued request is served when a thread frees" {
    for (usable(&event_engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // One handler thread and room for one waiting request.
        const running = try ServerThread(Gate).start(kind, .{ .workers = 1, .handler_threads = 1, .handler_queue_max = 1 });
        defer running.stop();
        const gate = &running.handler;
        defer gate.open.store(true, .release); // before the stop: never leave a handler held
        var holder = try Client.connect(running.port(), 10_000);
        defer holder.close();
        try holder.send("GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
        try waitFor(&gate.held, 5_000);
        // Two more requests while the only thread is held: one waits in the queue, the
        // other finds it full.
        var b = try Client.connect(running.port(), 10_000);
        defer b.close();
        var c = try Client.connect(running.port(), 10_000);
        defer c.close();
        try b.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n");
        try c.send("GET /c HTTP/1.1\r\nHost: t\r\n\r\n");
        const refused = firstReadable(&b, &c) orelse return error.NoAnswer;
        const queued = if (refused == &b) &c else &b;
        const busy = try refused.readResponse(testing.allocator, .{});
        defer busy.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 503), busy.status);
        if (!Client.overH2c()) try testing.expectEqualStrings("close", busy.header("Connection").?);
        try testing.expect(try refused.servesAsAfterError());
        try testing.expect(!readable(queued)); // still waiting for the thread
        gate.open.store(true, .release);
        const held = try holder.readResponse(testing.allocator, .{});
        defer held.deinit(testing.allocator);
        try expectBody(held, 200, "done /hold");
        const served = try queued.readResponse(testing.allocator, .{});
        defer served.deinit(testing.allocator);
        try expectBody(served, 200, if (queued == &b) "done /b" else "done /c");
        const after = try Client.fetch(testing.allocator, running.port(), "GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
        defer after.deinit(testing.allocator);
        try expectBody(after, 200, "done /after");
    }
}

test "handler pool: responses stream while the handler runs, and pipelining keeps order" {
    for (usable(&event_engines)) |kind| {
        const running = try ServerThread(Sleepy).start(kind, .{ .workers = 1, .handler_threads = 4 });
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        try client.send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
        // The head and the first event arrive before the handler has finished (it sleeps
        // 100 ms after each event): read them as they come.
        var got: std.ArrayList(u8) = .empty;
        defer got.deinit(testing.allocator);
        while (std.mem.find(u8, got.items, "data: 0\n\n") == null) {
            var buffer: [512]u8 = undefined;
            const n = try client.readSome(&buffer);
            try testing.expect(n > 0);
            try got.appendSlice(testing.allocator, buffer[0..n]);
        }
        try testing.expect(std.mem.startsWith(u8, got.items, "HTTP/1.1 200 OK\r\n"));
        try testing.expect(std.mem.find(u8, got.items, "Transfer-Encoding: chunked\r\n") != null);
        try testing.expect(std.mem.find(u8, got.items, "data: 2") == null);
        while (!std.mem.endsWith(u8, got.items, "0\r\n\r\n")) {
            var buffer: [512]u8 = undefined;
            const n = try client.readSome(&buffer);
            try testing.expect(n > 0);
            try got.appendSlice(testing.allocator, buffer[0..n]);
        }
        try testing.expect(std.mem.find(u8, got.items, "data: 2\n\n") != null);

        // The same connection goes on: pipelined requests through the pool, in order.
        var requests: std.ArrayList(u8) = .empty;
        defer requests.deinit(testing.allocator);
        for (0..32) |i| try requests.print(testing.allocator, "GET /p{d} HTTP/1.1\r\nHost: t\r\n\r\n", .{i});
        try client.send(requests.items);
        for (0..32) |i| {
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            var expected: [16]u8 = undefined;
            try expectBody(response, 200, try std.mem.print(&expected, "fast /p{d}", .{i}));
        }
    }
}

fn childPids(parent: linux.pid_t, out: []linux.pid_t) ![]linux.pid_t {
    return taskChildPids(parent, parent, out);
}

/// The children forked by thread `tid` of process `pid`.
fn taskChildPids(pid: linux.pid_t, tid: linux.pid_t, out: []linux.pid_t) ![]linux.pid_t {
    var path: [64]u8 = undefined;
    const file_path = try std.mem.print(&path, "/proc/{d}/task/{d}/children", .{ pid, tid });
    var buffer: [256]u8 = undefined;
    const text = std.Io.Dir.cwd().readFile(testing.io, file_path, &buffer) catch return out[0..0];
    var n: usize = 0;
    var it = std.mem.tokenizeScalar(u8, text, ' ');
    while (it.next()) |field| : (n += 1) {
        if (n == out.len) break;
        out[n] = try std.fmt.parseInt(linux.pid_t, std.mem.trim(u8, field, " \n"), 10);
    }
    return out[0..n];
}

test "processes: children serve the port, a crashed one is replaced, SIGTERM stops all" {
    const io = testing.io;
    Client.plaintextServer(); // a server process of its own: plaintext
    var child = try std.process.spawn(io, .{
        .argv = &.{ build_options.echo_exe, "--port", "0", "--processes", "2", "--workers", "1" },
        .stdout = .pipe,
        .stderr = .ignore,
    });
    var buffer: [256]u8 = undefined;
    var reader = child.stdout.?.readerStreaming(io, &buffer);
    const line = try reader.interface.takeDelimiterExclusive('\n');
    const port = try std.fmt.parseInt(u16, line["listening on http://127.0.0.1:".len..], 10);
    const parent = child.id.?;

    var pids_buffer: [8]linux.pid_t = undefined;
    var pids = try childPids(parent, &pids_buffer);
    for (0..100) |_| {
        if (pids.len == 2) break;
        sleepMs(20);
        pids = try childPids(parent, &pids_buffer);
    }
    try testing.expectEqual(@as(usize, 2), pids.len);
    for (0..4) |_| {
        const response = try Client.fetch(testing.allocator, port, "GET /p HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 200), response.status);
    }
    const victim = pids[0];
    _ = linux.kill(victim, linux.SIG.KILL);
    var replaced = false;
    for (0..200) |_| {
        sleepMs(20);
        const now = try childPids(parent, &pids_buffer);
        if (now.len == 2 and std.mem.findScalar(linux.pid_t, now, victim) == null) {
            replaced = true;
            break;
        }
    }
    try testing.expect(replaced);
    const response = try Client.fetch(testing.allocator, port, "GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 200), response.status);

    _ = linux.kill(parent, linux.SIG.TERM);
    const term = try child.wait(io);
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, term);
    try testing.expectError(error.ConnectFailed, Client.connect(port, 1000));
}

/// Whether process `pid` has exited (gone, or a zombie waiting for its new parent).
fn processGone(pid: linux.pid_t) bool {
    var path: [64]u8 = undefined;
    const file_path = std.mem.print(&path, "/proc/{d}/stat", .{pid}) catch return false;
    var buffer: [512]u8 = undefined;
    const text = std.Io.Dir.cwd().readFile(testing.io, file_path, &buffer) catch return true;
    const after_name = std.mem.findScalarLast(u8, text, ')') orelse return false;
    return text.len > after_name + 2 and text[after_name + 2] == 'Z';
}

test "processes: the children exit when the parent is killed" {
    const io = testing.io;
    Client.plaintextServer(); // a server process of its own: plaintext
    var child = try std.process.spawn(io, .{
        .argv = &.{ build_options.echo_exe, "--port", "0", "--processes", "2", "--workers", "1" },
        .stdout = .pipe,
        .stderr = .ignore,
    });
    var buffer: [256]u8 = undefined;
    var reader = child.stdout.?.readerStreaming(io, &buffer);
    const line = reader.interface.takeDelimiterExclusive('\n') catch |err| {
        child.kill(io);
        return err;
    };
    const port = try std.fmt.parseInt(u16, line["listening on http://127.0.0.1:".len..], 10);
    var pids_buffer: [8]linux.pid_t = undefined;
    var pids = try childPids(child.id.?, &pids_buffer);
    for (0..250) |_| {
        if (pids.len == 2) break;
        sleepMs(20);
        pids = try childPids(child.id.?, &pids_buffer);
    }
    // Whatever happens below, no child outlives the test.
    defer for (pids) |pid| if (!processGone(pid)) {
        _ = linux.kill(pid, linux.SIG.KILL);
    };
    _ = linux.kill(child.id.?, linux.SIG.KILL);
    const term = try child.wait(io);
    try testing.expectEqual(std.process.Child.Term{ .signal = .KILL }, term);
    try testing.expectEqual(@as(usize, 2), pids.len);
    for (pids) |pid| {
        var gone = processGone(pid);
        for (0..500) |_| {
            if (gone) break;
            sleepMs(20);
            gone = processGone(pid);
        }
        errdefer std.debug.print("process {d} outlived its parent\n", .{pid});
        try testing.expect(gone);
    }
    try testing.expectError(error.ConnectFailed, Client.connect(port, 1000));
}

/// Runs a prefork server on its own thread (`run` forks from it).
const PreforkThread = struct {
    server: *saker.Server(TestHandler),
    /// The thread's id, so a test can signal it (it blocks SIGINT/SIGTERM for `run`).
    tid: std.atomic.Value(linux.pid_t) = .init(0),
    returned: std.atomic.Value(bool) = .init(false),
    failed: bool = false,

    fn main(runner: *PreforkThread) void {
        runner.tid.store(linux.gettid(), .release);
        runner.server.run() catch {
            runner.failed = true;
        };
        runner.returned.store(true, .release);
    }
};

test "processes: server.stop() from another thread stops the children and run returns" {
    var handler: TestHandler = .{};
    // Not the testing allocator: the children are forks of this process, and a fork must not
    // inherit a lock another thread holds.
    var server = try saker.Server(TestHandler).init(std.heap.page_allocator, &handler, .{
        .host = "127.0.0.1",
        .port = 0,
        .processes = 2,
        .workers = 1,
        .engine = .epoll,
    });
    defer server.deinit();
    const port = server.port();
    var runner: PreforkThread = .{ .server = &server };
    const thread = try std.Thread.spawn(.{}, PreforkThread.main, .{&runner});
    var served = false;
    for (0..500) |_| {
        if (Client.fetch(testing.allocator, port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")) |response| {
            response.deinit(testing.allocator);
            served = true;
            break;
        } else |_| sleepMs(20);
    }
    var pids_buffer: [8]linux.pid_t = undefined;
    var pids = try taskChildPids(linux.getpid(), runner.tid.load(.acquire), &pids_buffer);
    for (0..250) |_| {
        if (pids.len == 2) break;
        sleepMs(20);
        pids = try taskChildPids(linux.getpid(), runner.tid.load(.acquire), &pids_buffer);
    }
    server.stop();
    var returned = false;
    for (0..1000) |_| {
        returned = runner.returned.load(.acquire);
        if (returned) break;
        sleepMs(10);
    }
    // If stop() did nothing, a signal to the server's thread ends `run`, so the test fails
    // instead of hanging.
    if (!returned) _ = linux.tgkill(linux.getpid(), runner.tid.load(.acquire), .TERM);
    thread.join();
    try testing.expect(served);
    try testing.expectEqual(@as(usize, 2), pids.len);
    try testing.expect(returned);
    try testing.expect(!runner.failed);
    for (pids) |pid| try testing.expect(processGone(pid));
}

test {
    _ = @import("websocket.zig");
}
