//! Connection tests on the simulated engine: whole exchanges of bytes, each run with the input
//! and output cut whole, per byte and at seeded random sizes.
const std = @import("std");
const testing = std.testing;
const Config = @import("Config.zig");
const Worker = @import("Worker.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const Simulation = @import("testing/Simulation.zig");
const Done = @import("Done.zig");
const repeat = @import("testing/bytes.zig").repeat;

const date = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";

const TestHandler = struct {
    calls: usize = 0,
    streamed: usize = 0,
    /// What `onDone` heard (with hooks), in order: status, body bytes, and whether the head
    /// was whole.
    dones: std.ArrayList(struct { status: u16, body_bytes: u64, known: bool, complete: bool, line: [32]u8 }) = .empty,

    fn onDone(context: *anyopaque, done: *const Done) void {
        const self: *TestHandler = @ptrCast(@alignCast(context));
        var line: [32]u8 = @splat(0);
        @memcpy(line[0..@min(32, done.request_line.len)], done.request_line[0..@min(32, done.request_line.len)]);
        self.dones.append(testing.allocator, .{ .status = done.status.code(), .body_bytes = done.body_bytes_sent, .known = done.request != null, .complete = done.complete, .line = line }) catch
            @panic("out of memory in a test");
    }

    fn onHead(context: *anyopaque, req: *Request, res: *Response) anyerror!Worker.BodyAction {
        const self: *TestHandler = @ptrCast(@alignCast(context));
        self.streamed = 0;
        if (std.mem.eql(u8, req.path, "/upload") or std.mem.eql(u8, req.path, "/upload-bad")) return .stream;
        if (std.mem.eql(u8, req.path, "/skip")) {
            res.status = .unauthorized;
            return .skip;
        }
        if (std.mem.eql(u8, req.path, "/forbidden")) {
            res.status = .forbidden;
            try res.writeAll("no\n");
            return error.Forbidden;
        }
        if (std.mem.eql(u8, req.path, "/status")) {
            res.status = @fromBackingInt(try std.fmt.parseInt(u16, req.query().get("code").?, 10));
            return error.Refused;
        }
        return .buffer;
    }

    fn onBody(context: *anyopaque, req: *Request, res: *Response, chunk: []const u8) anyerror!void {
        const self: *TestHandler = @ptrCast(@alignCast(context));
        self.streamed += chunk.len;
        if (std.mem.eql(u8, req.path, "/upload-bad") and self.streamed > 100) {
            res.status = .bad_request;
            try res.writeAll("bad upload\n");
            return error.BadUpload;
        }
    }

    fn handle(context: *anyopaque, req: *Request, res: *Response) anyerror!void {
        const self: *TestHandler = @ptrCast(@alignCast(context));
        self.calls += 1;
        const path = req.path;
        if (std.mem.eql(u8, path, "/hello")) {
            res.content_type = "text/plain";
            try res.writeAll("Hello, World!");
        } else if (std.mem.eql(u8, path, "/echo")) {
            try res.print("{s} {s} q={s} body={s}", .{ req.method.name(), req.target, req.raw_query, req.body() });
        } else if (std.mem.eql(u8, path, "/fail")) {
            try res.writeAll("partial");
            return error.Boom;
        } else if (std.mem.eql(u8, path, "/refuse")) {
            try res.writeAll("partial");
            return error.InvalidJson;
        } else if (std.mem.eql(u8, path, "/big")) {
            const n = try std.fmt.parseInt(usize, req.query().get("n").?, 10);
            for (0..n) |i| try res.writer().writeByte(@intCast('a' + i % 26));
        } else if (std.mem.eql(u8, path, "/close")) {
            res.keep_alive = false;
            try res.writeAll("bye");
        } else if (std.mem.eql(u8, path, "/dirty")) {
            // Everything a handler may leave behind in the request.
            const params = struct {
                const list = [_]Request.PathParam{.{ .name = "id", .value = "7" }};
            };
            req.user_data = self;
            req.params = &params.list;
            req.request_id = "left-over";
            req.body_decoding.skipped = true;
            req.body_source = .unavailable;
            req.fault.blame(error.InvalidParameter, "page") catch {};
            try res.writeAll("dirty");
        } else if (std.mem.eql(u8, path, "/fresh")) {
            try res.print("{} {d} {} {} {} {t}", .{
                req.user_data == null,  req.params.len,            req.fault.err == null,
                req.request_id == null, req.body_decoding.skipped, req.body_source,
            });
        } else if (std.mem.eql(u8, path, "/empty")) {
            res.status = .no_content;
        } else if (std.mem.eql(u8, path, "/static")) {
            res.setBody("static body");
        } else if (std.mem.eql(u8, path, "/header")) {
            try res.header("X-Test", "yes");
            try res.writeAll("h");
        } else if (std.mem.eql(u8, path, "/upload")) {
            try res.print("streamed {d}, buffered {d}", .{ self.streamed, req.body().len });
        } else if (std.mem.eql(u8, path, "/skip")) {
            try res.writeAll("login first");
        } else if (std.mem.eql(u8, path, "/len")) {
            try res.print("{d}", .{req.body().len});
        } else if (std.mem.eql(u8, path, "/status")) {
            res.status = @fromBackingInt(try std.fmt.parseInt(u16, req.query().get("code").?, 10));
            try res.writeAll("body");
        } else {
            res.status = .not_found;
        }
    }
};

const Fixture = struct {
    handler: TestHandler = .{},
    config: Config,
    worker: Worker = undefined,
    budget: @import("Arena.zig").Budget = .init(1 << 30),

    fn init(fixture: *Fixture, config: Config) !void {
        return fixture.initHooks(config, false);
    }

    fn initHooks(fixture: *Fixture, config: Config, hooks: bool) !void {
        fixture.* = .{ .config = config };
        var reason: []const u8 = "";
        config.validate(&reason) catch |err| {
            std.debug.print("invalid test config: {s}\n", .{reason});
            return err;
        };
        try fixture.worker.init(testing.allocator, &fixture.config, .{
            .context = &fixture.handler,
            .handle = TestHandler.handle,
            .on_head = if (hooks) TestHandler.onHead else null,
            .on_body = if (hooks) TestHandler.onBody else null,
            .on_done = if (hooks) TestHandler.onDone else null,
        }, .{ .connections_max = 4, .large_buffers_max = config.large_buffers_max, .budget = &fixture.budget });
        fixture.worker.date.update(784111777);
    }

    fn deinit(fixture: *Fixture) void {
        fixture.worker.deinit();
        fixture.handler.dones.deinit(testing.allocator);
    }
};

/// Runs `input` with every kind of cut and checks the client sees `expected` each time.
fn expectExchange(config: Config, input: []const u8, expected: []const u8) !void {
    const cuts = [_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 1 } }, .{ .random = .{ .seed = 7, .max = 5 } } };
    for (cuts) |cut| {
        var fixture: Fixture = undefined;
        try fixture.init(config);
        defer fixture.deinit();
        const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = cut });
        defer testing.allocator.free(result.output);
        testing.expectEqualStrings(expected, result.output) catch |err| {
            std.debug.print("cuts: {any}\n", .{cut});
            return err;
        };
        try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
    }
}

inline fn ok(comptime content_type: ?[]const u8, comptime body: []const u8) []const u8 {
    const ct = if (content_type) |t| "Content-Type: " ++ t ++ "\r\n" else "";
    return std.fmt.comptimePrint("HTTP/1.1 200 OK\r\n" ++ date ++ ct ++ "Content-Length: {d}\r\n\r\n{s}", .{ body.len, body });
}

test "Connection: a GET is answered with Date, Content-Type and Content-Length" {
    try expectExchange(.{}, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", ok("text/plain", "Hello, World!"));
}

test "Connection: pipelined requests are answered in order, in one write" {
    const input = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "GET /echo?x=1 HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
    const expected = ok("text/plain", "Hello, World!") ++ ok(null, "GET /echo?x=1 q=x=1 body=") ++
        ok(null, "POST /echo q= body=abc");
    try expectExchange(.{}, input, expected);
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{});
    defer testing.allocator.free(result.output);
    try testing.expectEqual(@as(usize, 1), result.sends);
}

test "Connection: onDone hears of each pipelined response once it is out, and of a refused request" {
    const input = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "BAD REQUEST LINE\r\n\r\n";
    const cuts = [_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 3 } } };
    for (cuts) |cut| {
        var fixture: Fixture = undefined;
        try fixture.initHooks(.{}, true);
        defer fixture.deinit();
        const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = cut });
        defer testing.allocator.free(result.output);
        // The same bytes as without the hook: one response per batch changes no byte.
        try testing.expect(std.mem.startsWith(u8, result.output, ok("text/plain", "Hello, World!")));
        try testing.expect(std.mem.endsWith(u8, result.output, "400 Bad Request: malformed HTTP version\n"));
        const dones = fixture.handler.dones.items;
        try testing.expectEqual(@as(usize, 4), dones.len);
        for ([_]u64{ 13, 0, 13 }, dones[0..3]) |bytes, d| {
            try testing.expect(d.known and d.complete);
            try testing.expectEqual(@as(u16, 200), d.status);
            try testing.expectEqual(bytes, d.body_bytes);
        }
        try testing.expect(!dones[3].known and dones[3].complete);
        try testing.expectEqual(@as(u16, 400), dones[3].status);
        // As much of the line as had come when the parser gave up (one byte at a time: up to
        // the version's first byte).
        try testing.expect(std.mem.startsWith(u8, "BAD REQUEST LINE", std.mem.sliceTo(&dones[3].line, 0)));
        try testing.expect(std.mem.sliceTo(&dones[3].line, 0).len >= "BAD REQUEST L".len);
        try testing.expectEqual(@as(u64, "400 Bad Request: malformed HTTP version\n".len), dones[3].body_bytes);
    }
}

test "Connection: 64 pipelined requests in one read" {
    const one = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    const input = repeat(one, 64);
    const expected = repeat(ok("text/plain", "Hello, World!"), 64);
    var fixture: Fixture = undefined;
    try fixture.init(.{ .recv_buffer_bytes = 4096 });
    defer fixture.deinit();
    const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{});
    defer testing.allocator.free(result.output);
    try testing.expectEqualStrings(expected, result.output);
    try testing.expectEqual(@as(usize, 64), fixture.handler.calls);
}

test "Connection: chunked body with extensions and trailers" {
    const input = "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" ++
        "3;x=y\r\nabc\r\n2 ;z\r\nde\r\n0\r\nTrailer: t\r\n\r\n" ++
        "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    try expectExchange(.{}, input, ok(null, "POST /echo q= body=abcde") ++ ok("text/plain", "Hello, World!"));
}

test "Connection: a chunked body larger than the receive buffer spills into the arena" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, "POST /len HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (0..100) |_| try input.appendSlice(testing.allocator, "64\r\n" ++ repeat("x", 100) ++ "\r\n");
    try input.appendSlice(testing.allocator, "0\r\n\r\n");
    try expectExchange(.{ .recv_buffer_bytes = 1024 }, input.items, ok(null, "10000"));
}

test "Connection: a Content-Length body larger than the receive buffer" {
    const body = repeat("y", 5000);
    const input = "POST /len HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n" ++ body ++
        "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    try expectExchange(.{ .recv_buffer_bytes = 1024 }, input, ok(null, "5000") ++ ok("text/plain", "Hello, World!"));
}

test "Connection: a head longer than the small buffer moves to a large buffer" {
    const cookie = repeat("c", 3000);
    const input = "GET /hello HTTP/1.1\r\nHost: a\r\nCookie: " ++ cookie ++ "\r\n\r\n";
    try expectExchange(.{ .recv_buffer_bytes = 1024 }, input, ok("text/plain", "Hello, World!"));
}

test "Connection: Expect 100-continue gets an interim response before the body is sent" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    // The client sends the head alone first; the simulation delivers it in one piece, and the
    // body only after the connection asks to read again.
    const head = "POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    const buffer = c.recvBuffer().?;
    @memcpy(buffer[0..head.len], head);
    c.onRecv(head.len);
    const interim = c.next().send;
    try testing.expectEqualStrings("HTTP/1.1 100 Continue\r\n\r\n", interim[0].base[0..interim[0].len]);
    c.onSend(interim[0].len);
    const body_buffer = c.recvBuffer().?;
    @memcpy(body_buffer[0..2], "hi");
    c.onRecv(2);
    const final = c.next().send;
    try testing.expectEqualStrings(ok(null, "POST /echo q= body=hi"), final[0].base[0..final[0].len]);
}

test "Connection: no 100 Continue when the body arrived with the head" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    const input = "POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi";
    const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = .whole });
    defer testing.allocator.free(result.output);
    try testing.expectEqualStrings(ok(null, "POST /echo q= body=hi"), result.output);
}

test "Connection: HTTP/1.0 closes unless asked, and says keep-alive when asked" {
    try expectExchange(.{}, "GET /echo HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Length: 18\r\nConnection: close\r\n\r\nGET /echo q= body=");
    try expectExchange(.{}, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nHello, World!");
}

test "Connection: Connection: close is honoured and later requests are not answered" {
    const input = "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    const expected = "HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, World!";
    try expectExchange(.{}, input, expected);
}

test "Connection: HEAD gets the headers of GET and no body" {
    try expectExchange(.{}, "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n");
    try expectExchange(.{}, "HEAD /big?n=9000 HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Length: 9000\r\n\r\n");
}

test "Connection: 204 has no Content-Length; setBody and handler headers" {
    try expectExchange(.{}, "GET /empty HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 204 No Content\r\n" ++ date ++ "\r\n");
    try expectExchange(.{}, "GET /static HTTP/1.1\r\nHost: a\r\n\r\n", ok(null, "static body"));
    try expectExchange(.{}, "GET /header HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 200 OK\r\n" ++ date ++
        "Content-Length: 1\r\nX-Test: yes\r\n\r\nh");
}

test "Connection: a reused exchange starts each response fresh" {
    // Headers, a status, a HEAD, a body grown into the arena and a set body, each followed by
    // a plain request whose response must show none of it.
    const plain = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    const plain_response = ok("text/plain", "Hello, World!");
    const input = "GET /header HTTP/1.1\r\nHost: a\r\n\r\n" ++ plain ++
        "GET /empty HTTP/1.1\r\nHost: a\r\n\r\n" ++ plain ++
        "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++ plain ++
        "GET /big?n=3000 HTTP/1.1\r\nHost: a\r\n\r\n" ++ plain ++
        "GET /static HTTP/1.1\r\nHost: a\r\n\r\n" ++ plain;
    var big: [3000]u8 = undefined;
    for (&big, 0..) |*b, i| b.* = @intCast('a' + i % 26);
    const expected = try std.mem.concat(testing.allocator, u8, &.{
        "HTTP/1.1 200 OK\r\n" ++ date ++ "Content-Length: 1\r\nX-Test: yes\r\n\r\nh",
        plain_response,
        "HTTP/1.1 204 No Content\r\n" ++ date ++ "\r\n",
        plain_response,
        "HTTP/1.1 200 OK\r\n" ++ date ++ "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n",
        plain_response,
        "HTTP/1.1 200 OK\r\n" ++ date ++ "Content-Length: 3000\r\n\r\n",
        big[0..],
        plain_response,
        ok(null, "static body"),
        plain_response,
    });
    defer testing.allocator.free(expected);
    try expectExchange(.{}, input, expected);
}

test "Connection: a reused exchange starts each request fresh" {
    // What the first handler left in the request must not reach the next request of the same
    // connection, pipelined (the same exchange) or not.
    const input = "GET /dirty HTTP/1.1\r\nHost: a\r\n\r\nGET /fresh HTTP/1.1\r\nHost: a\r\n\r\n";
    try expectExchange(.{}, input, ok(null, "dirty") ++ ok(null, "true 0 true true false buffered"));
}

test "Connection: a body larger than the send buffer" {
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, "HTTP/1.1 200 OK\r\n" ++ date ++ "Content-Length: 20000\r\n\r\n");
    for (0..20000) |i| try expected.append(testing.allocator, @intCast('a' + i % 26));
    try expectExchange(.{}, "GET /big?n=20000 HTTP/1.1\r\nHost: a\r\n\r\n", expected.items);
}

test "Connection: a handler error is a 500 and a close" {
    const saved = testing.log_level;
    testing.log_level = .err; // the failure is logged as a warning, on purpose here
    defer testing.log_level = saved;
    try expectExchange(.{}, "GET /fail HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 500 Internal Server Error\r\n" ++ date ++
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 46\r\nConnection: close\r\n\r\n" ++
        "500 Internal Server Error: the handler failed\n");
}

test "Connection: a ClientError from a handler is its 4xx and a close" {
    try expectExchange(.{}, "POST /refuse HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n{", "HTTP/1.1 400 Bad Request\r\n" ++ date ++
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 35\r\nConnection: close\r\n\r\n" ++
        "400 Bad Request: invalid JSON body\n");
}

test "Connection: a handler status outside 100-599 is a 500 and a close, never a status line" {
    const internal_error = "HTTP/1.1 500 Internal Server Error\r\n" ++ date ++
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 46\r\nConnection: close\r\n\r\n" ++
        "500 Internal Server Error: the handler failed\n";
    const saved = testing.log_level;
    testing.log_level = .err; // each failure is logged as a warning, on purpose here
    defer testing.log_level = saved;
    inline for (.{ "0", "99", "600", "999", "1000", "65535" }) |code| {
        try expectExchange(.{}, "GET /status?code=" ++ code ++ " HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", internal_error);
        // A failing onHead hook with such a status gets the same answer, not its own.
        const run = try runHooks(.{}, "POST /status?code=" ++ code ++ " HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx", .whole);
        defer testing.allocator.free(run.output);
        try testing.expectEqualStrings(internal_error, run.output);
    }
    // The edges of the range are status lines like any other.
    try expectExchange(.{}, "GET /status?code=599 HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 599 \r\n" ++ date ++ "Content-Length: 4\r\n\r\nbody");
}

test "Connection: body_timeout_ms is a no-progress timeout; header_timeout_ms covers the whole head" {
    var fixture: Fixture = undefined;
    try fixture.init(.{ .header_timeout_ms = 100, .body_timeout_ms = 50 });
    defer fixture.deinit();
    const Connection = @import("Connection.zig");
    var c: Connection = .init(&fixture.worker);
    defer c.deinit();
    const head = "POST /len HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
    // The head arrives in two pieces: the second does not move the head deadline.
    var buffer = c.recvBuffer().?;
    @memcpy(buffer[0..5], head[0..5]);
    c.onRecv(5);
    try testing.expectEqual(@as(u64, 100), c.deadline());
    fixture.worker.now_ms = 90;
    buffer = c.recvBuffer().?;
    @memcpy(buffer[0 .. head.len - 5], head[5..]);
    c.onRecv(head.len - 5);
    try testing.expectEqual(@as(u64, 90 + 50), c.deadline());
    // Each byte of body moves the deadline: nine bytes 40 ms apart take 360 ms in all.
    for (0..9) |i| {
        fixture.worker.now_ms += 40;
        try testing.expect(fixture.worker.now_ms < c.deadline());
        buffer = c.recvBuffer().?;
        buffer[0] = @intCast('0' + i);
        c.onRecv(1);
        try testing.expectEqual(fixture.worker.now_ms + 50, c.deadline());
    }
    // Then a stall: 408 once a whole body_timeout_ms passes without a byte.
    fixture.worker.now_ms = c.deadline();
    c.onTimeout();
    const send = c.next().send;
    try testing.expect(std.mem.startsWith(u8, send[0].base[0..send[0].len], "HTTP/1.1 408 Request Timeout\r\n"));
    try testing.expectEqual(@as(usize, 0), fixture.handler.calls);
}

fn expectStatus(config: Config, input: []const u8, comptime status_line: []const u8) !void {
    var fixture: Fixture = undefined;
    try fixture.init(config);
    defer fixture.deinit();
    for ([_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 3 } } }) |cut| {
        errdefer std.debug.print("cuts: {any}\n", .{cut});
        const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = cut });
        defer testing.allocator.free(result.output);
        testing.expect(std.mem.startsWith(u8, result.output, status_line)) catch |err| {
            std.debug.print("input {f}\ngot {f}\n", .{ std.zig.fmtString(input), std.zig.fmtString(result.output) });
            return err;
        };
        try testing.expect(std.mem.find(u8, result.output, "Connection: close\r\n") != null);
        try testing.expect(result.shutdown); // lingering close after an error
        try testing.expectEqual(@as(usize, 0), fixture.handler.calls);
    }
}

test "Connection: every error status, then a lingering close" {
    try expectStatus(.{}, "GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
    try expectStatus(.{}, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 400 ");
    try expectStatus(.{}, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 400 ");
    try expectStatus(.{}, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501 ");
    try expectStatus(.{}, "BREW / HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 501 ");
    try expectStatus(.{}, "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 501 ");
    try expectStatus(.{}, "GET / HTTP/3.0\r\nHost: a\r\n\r\n", "HTTP/1.1 505 ");
    try expectStatus(.{ .request_line_bytes_max = 100 }, "GET /" ++ repeat("a", 200) ++ " HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 414 ");
    try expectStatus(.{ .header_bytes_max = 2048, .recv_buffer_bytes = 1024, .request_line_bytes_max = 1024 }, "GET / HTTP/1.1\r\nHost: a\r\nX: " ++ repeat("a", 3000) ++ "\r\n\r\n", "HTTP/1.1 431 ");
    try expectStatus(.{ .header_count_max = 2 }, "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", "HTTP/1.1 431 ");
    try expectStatus(.{ .body_bytes_max = 10 }, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", "HTTP/1.1 413 ");
    try expectStatus(.{ .body_bytes_max = 10 }, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nabcdef\r\n0\r\n\r\n", "HTTP/1.1 413 ");
    // A chunk that announces more than the limit is refused at its size line.
    try expectStatus(.{ .body_bytes_max = 10 }, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nB\r\n", "HTTP/1.1 413 ");
    try expectStatus(.{}, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n", "HTTP/1.1 413 ");
    try expectStatus(.{}, "POST / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n", "HTTP/1.1 417 ");
}

test "Connection: requests_per_connection_max closes after the last allowed request" {
    const one = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    const last = "HTTP/1.1 200 OK\r\n" ++ date ++ "Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, World!";
    try expectExchange(.{ .requests_per_connection_max = 2 }, repeat(one, 3), ok("text/plain", "Hello, World!") ++ last);
}

test "Connection: a slow head times out with 408, an idle connection just closes" {
    var fixture: Fixture = undefined;
    try fixture.init(.{ .header_timeout_ms = 100, .idle_timeout_ms = 1000 });
    defer fixture.deinit();
    const Connection = @import("Connection.zig");
    var c: Connection = .init(&fixture.worker);
    defer c.deinit();
    try testing.expectEqual(@as(u64, 1000), c.deadline());
    const buffer = c.recvBuffer().?;
    @memcpy(buffer[0..4], "GET ");
    c.onRecv(4);
    try testing.expectEqual(@as(u64, 100), c.deadline());
    fixture.worker.now_ms = 100;
    c.onTimeout();
    const send = c.next().send;
    try testing.expect(std.mem.startsWith(u8, send[0].base[0..send[0].len], "HTTP/1.1 408 Request Timeout\r\n"));

    var idle: Connection = .init(&fixture.worker);
    defer idle.deinit();
    fixture.worker.now_ms = idle.deadline();
    idle.onTimeout();
    try testing.expectEqual(Connection.Next.close, idle.next());
}

test "Connection: an idle connection holds no exchange" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    const Connection = @import("Connection.zig");
    var c: Connection = .init(&fixture.worker);
    defer c.deinit();
    const request = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    const buffer = c.recvBuffer().?;
    @memcpy(buffer[0..request.len], request);
    c.onRecv(request.len);
    try testing.expectEqual(@as(u32, 1), fixture.worker.exchanges_busy);
    const send = c.next().send;
    c.onSend(send[0].len);
    try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
    try testing.expect(c.protocol.http1.exchange == null);
    // Idle connections cost their slot: the transport's TLS and PROXY-header pointers are the
    // two words over a cache line.
    try testing.expect(@sizeOf(Connection) <= 80);
}

test "Connection: random splits of a mixed pipelined stream" {
    const input = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n" ++
        "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n" ++
        "PUT /echo?k=v HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody";
    const expected = ok("text/plain", "Hello, World!") ++ ok(null, "POST /echo q= body=z") ++
        "HTTP/1.1 200 OK\r\n" ++ date ++ "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n" ++
        ok(null, "PUT /echo?k=v q=k=v body=body");
    for (0..200) |seed| {
        errdefer std.debug.print("random splits with seed {d} (Simulation.Cuts.random, max 40)\n", .{seed});
        var fixture: Fixture = undefined;
        try fixture.init(.{});
        defer fixture.deinit();
        const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = .{ .random = .{ .seed = seed, .max = 40 } } });
        defer testing.allocator.free(result.output);
        try testing.expectEqualStrings(expected, result.output);
    }
}

fn runHooks(config: Config, input: []const u8, cut: Simulation.Cuts) !struct { output: []u8, streamed: usize, result: Simulation.Result } {
    var fixture: Fixture = undefined;
    try fixture.initHooks(config, true);
    defer fixture.deinit();
    const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = cut });
    try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
    return .{ .output = result.output, .streamed = fixture.handler.streamed, .result = result };
}

test "Connection hooks: a streamed Content-Length body reaches onBody, not memory" {
    const body = repeat("u", 10000);
    const input = "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 10000\r\n\r\n" ++ body ++
        "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
    for ([_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 5, .max = 700 } } }) |cut| {
        errdefer std.debug.print("cuts: {any}\n", .{cut});
        const run = try runHooks(.{ .recv_buffer_bytes = 1024 }, input, cut);
        defer testing.allocator.free(run.output);
        try testing.expectEqualStrings(ok(null, "streamed 10000, buffered 0") ++ ok("text/plain", "Hello, World!"), run.output);
    }
}

test "Connection hooks: a streamed chunked body" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (0..50) |_| try input.appendSlice(testing.allocator, "64\r\n" ++ repeat("x", 100) ++ "\r\n");
    try input.appendSlice(testing.allocator, "0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n");
    for ([_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 9, .max = 300 } } }) |cut| {
        errdefer std.debug.print("cuts: {any}\n", .{cut});
        const run = try runHooks(.{ .recv_buffer_bytes = 1024 }, input.items, cut);
        defer testing.allocator.free(run.output);
        try testing.expectEqualStrings(ok(null, "streamed 5000, buffered 0") ++ ok("text/plain", "Hello, World!"), run.output);
    }
}

test "Connection hooks: skip answers at once, without 100 Continue, and closes" {
    const input = "POST /skip HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    const run = try runHooks(.{}, input, .whole);
    defer testing.allocator.free(run.output);
    try testing.expectEqualStrings("HTTP/1.1 401 Unauthorized\r\n" ++ date ++
        "Content-Length: 11\r\nConnection: close\r\n\r\nlogin first", run.output);
    try testing.expect(run.result.shutdown);
}

test "Connection hooks: a failing hook sends the response it prepared, then closes" {
    const forbidden = try runHooks(.{}, "POST /forbidden HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", .whole);
    defer testing.allocator.free(forbidden.output);
    try testing.expectEqualStrings("HTTP/1.1 403 Forbidden\r\n" ++ date ++
        "Content-Length: 3\r\nConnection: close\r\n\r\nno\n", forbidden.output);
    const bad = try runHooks(.{}, "POST /upload-bad HTTP/1.1\r\nHost: a\r\nContent-Length: 500\r\n\r\n" ++ repeat("b", 500), .whole);
    defer testing.allocator.free(bad.output);
    try testing.expectEqualStrings("HTTP/1.1 400 Bad Request\r\n" ++ date ++
        "Content-Length: 11\r\nConnection: close\r\n\r\nbad upload\n", bad.output);
}

test "Connection hooks: bodies over streamed_body_bytes_max get 413" {
    const run = try runHooks(.{ .streamed_body_bytes_max = 100 }, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n", .whole);
    defer testing.allocator.free(run.output);
    try testing.expect(std.mem.startsWith(u8, run.output, "HTTP/1.1 413 "));
}
