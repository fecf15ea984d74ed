//! The integration suite: real servers on ephemeral loopback ports, real sockets, raw bytes
//! (and curl). Every scenario runs on every engine in `engines`.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const build_options = @import("build_options");
const Client = @import("Client.zig");

test {
    _ = @import("static.zig");
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
        } else {
            res.status = .not_found;
        }
    }
};

/// A server for `Handler` serving on its own thread, on an ephemeral port.
fn ServerThread(comptime Handler: type) type {
    return struct {
        const This = @This();
        handler: Handler = .{},
        server: saker.Server(Handler),
        thread: std.Thread,

        fn start(kind: saker.engine.Kind, overrides: saker.Config) !*This {
            var config = overrides;
            config.host = "127.0.0.1";
            config.port = 0;
            config.engine = kind;
            if (config.workers == 0) config.workers = 2;
            const running = try testing.allocator.create(This);
            errdefer testing.allocator.destroy(running);
            running.* = .{ .server = undefined, .thread = undefined };
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

const Running = ServerThread(TestHandler);

fn expectBody(response: Client.Response, status: u16, body: []const u8) !void {
    try testing.expectEqual(status, response.status);
    try testing.expectEqualStrings(body, response.body);
}

test "keep-alive: several requests on one connection" {
    for (engines) |kind| {
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
    for (engines) |kind| {
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

test "pipelining: 64 requests in one write are answered in order" {
    for (engines) |kind| {
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
    for (engines) |kind| {
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
        // Engines that run handlers on their own thread stream (chunked); event loops send
        // the whole body when the handler returns (Content-Length).
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
    for (engines) |kind| {
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
        try testing.expect(try client.isClosed());
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
    .{ .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9000000000\r\n\r\n", .status = 413 },
};

test "every error status is followed by a close, and the server goes on serving" {
    for (engines) |kind| {
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
        // 414 and 431 need long input.
        const long_target = try testing.allocator.alloc(u8, 9000);
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
    for (engines) |kind| {
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
    for (engines) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        try client.send("GET /fail HTTP/1.1\r\nHost: t\r\n\r\n");
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 500), response.status);
        try testing.expect(try client.isClosed());
    }
}

test "a slow head gets 408; an idle keep-alive connection is closed" {
    for (engines) |kind| {
        const running = try Running.start(kind, .{ .header_timeout_ms = 200, .idle_timeout_ms = 300 });
        defer running.stop();
        {
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
    for (engines) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
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
            const response = try c.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            var expected: [64]u8 = undefined;
            try expectBody(response, 200, try std.mem.print(&expected, "GET /echo?c={d} body=", .{i}));
        }
    }
}

test "idle keep-alive and half-sent requests beyond pool_threads do not hold up a new client" {
    for (engines) |kind| {
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
    for (engines) |kind| {
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
    for (engines) |kind| {
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

test "a client that never reads a large response does not hold a thread" {
    for (engines) |kind| {
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

test "connections over connections_max get 503 and the rest are served" {
    for ([_]saker.engine.Kind{ .epoll, .io_uring, .thread_per_connection, .worker_pool }) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .workers = 1, .connections_max = 2 });
        defer running.stop();
        var a = try Client.connect(running.port(), 10_000);
        defer a.close();
        var b = try Client.connect(running.port(), 10_000);
        defer b.close();
        try a.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const first = try a.readResponse(testing.allocator, .{});
        first.deinit(testing.allocator);
        try b.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const second = try b.readResponse(testing.allocator, .{});
        second.deinit(testing.allocator);
        var refused = try Client.connect(running.port(), 10_000);
        defer refused.close();
        const response = try refused.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 503), response.status);
        try testing.expect(try refused.isClosed());
        try a.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const again = try a.readResponse(testing.allocator, .{});
        defer again.deinit(testing.allocator);
        try expectBody(again, 200, "Hello, World!");
    }
}

test "large bodies in and out" {
    for (engines) |kind| {
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
    for (engines) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var started = try spawnExample(build_options.echo_exe, kind);
        var client = try Client.connect(started.port, 10_000);
        defer client.close();
        try client.send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
        // Let the server take the head before the signal arrives.
        var idle: [1]linux.pollfd = .{.{ .fd = client.fd, .events = linux.POLL.IN, .revents = 0 }};
        _ = linux.poll(&idle, 1, 200);
        _ = linux.kill(started.child.id.?, linux.SIG.TERM);
        _ = linux.poll(&idle, 1, 200);
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
        try testing.expectError(error.ConnectFailed, Client.connect(started.port, 1000));
    }
}

test "curl as a real client: keep-alive, POST, HEAD and chunked upload" {
    const io = testing.io;
    for (engines) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var url_buffer: [2][64]u8 = undefined;
        const root = try std.mem.print(&url_buffer[0], "http://127.0.0.1:{d}/", .{running.port()});
        const echo = try std.mem.print(&url_buffer[1], "http://127.0.0.1:{d}/echo", .{running.port()});
        const result = std.process.run(testing.allocator, io, .{ .argv = &.{
            "curl",                       "--silent",      "--show-error", "--fail", root,     root,
            "--next",                     "--data-binary", "abc",          echo,     "--next", "--header",
            "Transfer-Encoding: chunked", "--data-binary", "chunky",       echo,
        } }) catch |err| {
            std.debug.print("curl could not run ({t}); .ci/run installs it\n", .{err});
            return err;
        };
        defer testing.allocator.free(result.stdout);
        defer testing.allocator.free(result.stderr);
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, result.term);
        try testing.expectEqualStrings("Hello, World!Hello, World!POST /echo body=abcPOST /echo body=chunky", result.stdout);

        const head = try std.process.run(testing.allocator, io, .{ .argv = &.{ "curl", "--silent", "--head", root } });
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
    try testing.expectEqualStrings(
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
    for (engines) |kind| {
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
        try testing.expect(try client.isClosed());
    }
}

/// A handler that may block: the event engines run it on the handler pool.
const Sleepy = struct {
    pub const blocking = true;

    pub fn handle(_: *Sleepy, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/slow")) {
            sleepMs(300);
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

fn sleepMs(ms: u64) void {
    const ts: linux.timespec = .{ .sec = @intCast(ms / 1000), .nsec = @intCast((ms % 1000) * std.time.ns_per_ms) };
    _ = linux.nanosleep(&ts, null);
}

fn readable(client: *Client) bool {
    if (client.end > client.start) return true;
    var fds = [_]linux.pollfd{.{ .fd = client.fd, .events = linux.POLL.IN, .revents = 0 }};
    return linux.poll(&fds, 1, 0) > 0;
}

const event_engines = [_]saker.engine.Kind{ .epoll, .io_uring };

test "handler pool: a blocking handler does not hold up the event loop" {
    for (event_engines) |kind| {
        const running = try ServerThread(Sleepy).start(kind, .{ .workers = 1 });
        defer running.stop();
        var slow = try Client.connect(running.port(), 10_000);
        defer slow.close();
        try slow.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
        // With one worker, this is the same event loop as the slow request's.
        for (0..5) |i| {
            var request: [64]u8 = undefined;
            const response = try Client.fetch(testing.allocator, running.port(), try std.mem.print(&request, "GET /f{d} HTTP/1.1\r\nHost: t\r\n\r\n", .{i}));
            defer response.deinit(testing.allocator);
            var expected: [16]u8 = undefined;
            try expectBody(response, 200, try std.mem.print(&expected, "fast /f{d}", .{i}));
        }
        // The fast requests were all answered while the slow handler was still sleeping.
        try testing.expect(!readable(&slow));
        const response = try slow.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try expectBody(response, 200, "slow");
    }
}

test "handler pool: responses stream while the handler runs, and pipelining keeps order" {
    for (event_engines) |kind| {
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
            const rc = linux.read(client.fd, &buffer, buffer.len);
            try testing.expect(linux.errno(rc) == .SUCCESS and rc > 0);
            try got.appendSlice(testing.allocator, buffer[0..rc]);
        }
        try testing.expect(std.mem.startsWith(u8, got.items, "HTTP/1.1 200 OK\r\n"));
        try testing.expect(std.mem.find(u8, got.items, "Transfer-Encoding: chunked\r\n") != null);
        try testing.expect(std.mem.find(u8, got.items, "data: 2") == null);
        while (!std.mem.endsWith(u8, got.items, "0\r\n\r\n")) {
            var buffer: [512]u8 = undefined;
            const rc = linux.read(client.fd, &buffer, buffer.len);
            try testing.expect(linux.errno(rc) == .SUCCESS and rc > 0);
            try got.appendSlice(testing.allocator, buffer[0..rc]);
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
    var path: [64]u8 = undefined;
    const file_path = try std.mem.print(&path, "/proc/{d}/task/{d}/children", .{ parent, parent });
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

test {
    _ = @import("websocket.zig");
}
