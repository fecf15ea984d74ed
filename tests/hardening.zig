//! Hostile clients against real servers: request smuggling attempts, slowloris, running out
//! of file descriptors, and a shutdown in the middle of a load. Loopback only, bounded in
//! time and count.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const usableNames = @import("engines.zig").usableNames;
const build_options = @import("build_options");
const Client = @import("Client.zig");
const sleepMs = @import("clock.zig").sleepMs;
const nowUs = @import("clock.zig").nowUs;
const proc_status = @import("proc_status.zig");

const all_engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const Echo = struct {
    pub fn handle(_: *Echo, req: *saker.Request, res: *saker.Response) !void {
        try res.print("{s} {s} body={s}", .{ req.method.name(), req.target, req.body() });
    }
};

const ServerThread = @import("server_thread.zig").ServerThread;

/// A request that could be framed two ways, and what must happen: an error status and a
/// close, so no second request can hide in it.
const Smuggle = struct { name: []const u8, request: []const u8, status: u16 };

const smuggling_corpus = [_]Smuggle{
    .{ .name = "CL.TE", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n" },
    .{ .name = "TE.CL", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n" },
    .{ .name = "TE xchunked", .status = 501, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "TE chunked, identity", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" },
    .{ .name = "TE identity, chunked", .status = 501, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "duplicate TE", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "TE space before colon", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "TE obs-fold", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "TE vertical tab", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "TE in HTTP/1.0", .status = 400, .request = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" },
    .{ .name = "CL +5", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello" },
    .{ .name = "CL 0x5", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello" },
    .{ .name = "CL two values", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello!" },
    .{ .name = "CL twice, different", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!" },
    .{ .name = "CL overflow", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551617\r\n\r\n" },
    .{ .name = "chunk size overflow", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000001\r\nx\r\n0\r\n\r\n" },
    .{ .name = "chunk line LF only", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n" },
    .{ .name = "chunk data LF only", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n" },
    .{ .name = "NUL in chunk extension", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\x00\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "chunk size with sign", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "bare LF in head", .status = 400, .request = "POST / HTTP/1.1\nHost: a\nContent-Length: 5\n\nhello" },
    .{ .name = "bare CR in header", .status = 400, .request = "GET / HTTP/1.1\r\nHost: a\r\nX: a\rContent-Length: 5\r\n\r\nhello" },
    .{ .name = "two Hosts", .status = 400, .request = "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" },
    // "identity" is no transfer coding saker knows (RFC 9112 §6.1: 501 for one it does not
    // understand); the HTAB is plain OWS around the list's comma (RFC 9110 §5.6.1).
    .{ .name = "TE identity HTAB, chunked", .status = 501, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\t,chunked\r\n\r\n0\r\n\r\n" },
    // chunked applied twice (RFC 9112 §6.1: a sender MUST NOT): the framing is invalid.
    .{ .name = "TE chunked HTAB, HTAB chunked", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t,\tchunked\r\n\r\n0\r\n\r\n" },
    // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing, even
    // with a Content-Length.
    .{ .name = "TE in HTTP/1.0 with CL", .status = 400, .request = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello" },
    // Chunk sizes are capped at 16 hex digits (64 bits), so no numeral is ever truncated
    // (RFC 9112 §7.1 asks recipients to guard against overflow); 17 digits are refused even
    // when leading zeros keep the value small, never read as some other length.
    .{ .name = "chunk size 17 hex digits, leading zeros", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000005\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "chunk size 17 hex digits", .status = 400, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000A\r\nx\r\n0\r\n\r\n" },
    // A chunk larger than body_bytes_max is refused at its size line.
    .{ .name = "chunk size over the body limit", .status = 413, .request = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n" },
};

/// A request framed exactly one way although it looks unusual, and the body the handler
/// must see. A pipelined request follows it on the same connection and must be answered as
/// itself, which proves where the first body ended.
const Unambiguous = struct { name: []const u8, request: []const u8, body: []const u8 };

const post = "POST /a HTTP/1.1\r\nHost: a\r\n";
const chunked_hello = "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";

const unambiguous_corpus = [_]Unambiguous{
    // OWS around a field value is SP or HTAB (RFC 9110 §5.6.3) and is not part of the value
    // (RFC 9112 §5.1).
    .{ .name = "TE HTAB before value", .body = "hello", .request = post ++ "Transfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "TE HTAB after value", .body = "hello", .request = post ++ "Transfer-Encoding: chunked\t\r\n\r\n5\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "CL HTAB before value", .body = "hello", .request = post ++ "Content-Length:\t5\r\n\r\nhello" },
    .{ .name = "CL leading zeros", .body = "hello", .request = post ++ "Content-Length: 005\r\n\r\nhello" },
    // A list of identical valid lengths is that length (RFC 9112 §6.3 item 5; RFC 9110 §8.6
    // lets a recipient accept or reject it: saker accepts, as two equal field lines are one
    // list, RFC 9110 §5.3). Different values are refused (the corpus above).
    .{ .name = "CL list of equal values", .body = "hello", .request = post ++ "Content-Length: 5, 5\r\n\r\nhello" },
    .{ .name = "CL twice, equal", .body = "hello", .request = post ++ "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello" },
    // chunk-size = 1*HEXDIG (RFC 9112 §7.1): leading zeros and either case of A-F.
    .{ .name = "chunk size leading zeros", .body = "hello", .request = post ++ "Transfer-Encoding: chunked\r\n\r\n0005\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "chunk size 16 hex digits", .body = "hello", .request = post ++ "Transfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "last chunk 0000", .body = "hello", .request = post ++ "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0000\r\n\r\n" },
    .{ .name = "chunk size uppercase hex", .body = "0123456789", .request = post ++ "Transfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n" },
    .{ .name = "chunk size lowercase hex", .body = "0123456789", .request = post ++ "Transfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0\r\n\r\n" },
    // BWS before a chunk extension is OWS: SP or HTAB (RFC 9112 §7.1.1).
    .{ .name = "HTAB before chunk extension", .body = "hello", .request = post ++ "Transfer-Encoding: chunked\r\n\r\n5\t;x=y\r\nhello\r\n0\r\n\r\n" },
    .{ .name = "plain chunked (reference)", .body = "hello", .request = post ++ chunked_hello },
};

test "smuggling: ambiguous framing is refused and the connection closed, on every engine" {
    for (usable(&all_engines)) |kind| {
        const running = try ServerThread(Echo).start(kind, .{});
        defer running.stop();
        for (smuggling_corpus) |case| {
            errdefer std.debug.print("engine {t}, case {s}\n", .{ kind, case.name });
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            try client.send(case.request);
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try testing.expectEqual(case.status, response.status);
            try testing.expectEqualStrings("close", response.header("Connection").?);
            // Nothing else comes back: no second (smuggled) response.
            try testing.expect(try client.isClosed());
        }
    }
}

test "smuggling: unusual but valid framing is read exactly one way, on every engine" {
    for (usable(&all_engines)) |kind| {
        const running = try ServerThread(Echo).start(kind, .{});
        defer running.stop();
        for (unambiguous_corpus) |case| {
            errdefer std.debug.print("engine {t}, case {s}\n", .{ kind, case.name });
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            var pipelined: [512]u8 = undefined;
            try client.send(try std.mem.print(&pipelined, "{s}GET /next HTTP/1.1\r\nHost: a\r\n\r\n", .{case.request}));
            const first = try client.readResponse(testing.allocator, .{});
            defer first.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 200), first.status);
            var expected: [64]u8 = undefined;
            try testing.expectEqualStrings(try std.mem.print(&expected, "POST /a body={s}", .{case.body}), first.body);
            const second = try client.readResponse(testing.allocator, .{});
            defer second.deinit(testing.allocator);
            try testing.expectEqualStrings("GET /next body=", second.body);
            // Nothing more: no third response from bytes read twice.
            try client.send("GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
            const last = try client.readResponse(testing.allocator, .{});
            defer last.deinit(testing.allocator);
            try testing.expectEqualStrings("GET /last body=", last.body);
            try testing.expect(try client.isClosed());
        }
    }
}

/// Opens `count` connections that send a request head a few bytes at a time, never finishing:
/// over TLS when the suite runs over TLS (each handshake done at the start, so the bytes that
/// dribble are records).
const Slowloris = struct {
    clients: []Client,
    open_count: usize = 0,
    sent: usize = 0,

    fn open(port: u16, count: usize) !Slowloris {
        var slow: Slowloris = .{ .clients = try testing.allocator.alloc(Client, count) };
        errdefer slow.close();
        for (slow.clients) |*client| {
            client.* = try Client.connect(port, 5_000);
            slow.open_count += 1;
            try client.handshake();
        }
        return slow;
    }

    /// Sends the next byte of an endless head on every connection.
    fn dribble(slow: *Slowloris) void {
        const head = "GET / HTTP/1.1\r\nHost: slow\r\nX-a: ";
        const byte: []const u8 = if (slow.sent < head.len) head[slow.sent..][0..1] else "a";
        for (slow.clients[0..slow.open_count]) |*client| client.send(byte) catch {};
        slow.sent += 1;
    }

    fn close(slow: *Slowloris) void {
        for (slow.clients[0..slow.open_count]) |*client| client.close();
        testing.allocator.free(slow.clients);
    }
};

test "slowloris: 1000 dribbling connections do not slow a normal client" {
    // The blocking engine serves one connection at a time, so a slowloris connection holds
    // it until header_timeout_ms; it is not built for this. worker_pool parks them.
    for (usable(&.{ .epoll, .io_uring, .thread_per_connection, .worker_pool })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Echo).start(kind, .{ .header_timeout_ms = 60_000, .thread_stack_bytes = 256 * 1024 });
        defer running.stop();
        var slow = try Slowloris.open(running.port(), 1000);
        defer slow.close();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        var latencies: [200]u64 = undefined;
        for (&latencies, 0..) |*latency, i| {
            if (i % 10 == 0) slow.dribble();
            const start = nowUs();
            try client.send("GET /normal HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            response.deinit(testing.allocator);
            latency.* = nowUs() - start;
        }
        std.mem.sort(u64, &latencies, {}, std.sort.asc(u64));
        const p99 = latencies[latencies.len * 99 / 100];
        errdefer std.debug.print("p99 {d} us\n", .{p99});
        try testing.expect(p99 < 100_000);
    }
}

test "slowloris: the header timeout answers 408 and frees the connection" {
    for (usable(&all_engines)) |kind| {
        const running = try ServerThread(Echo).start(kind, .{ .header_timeout_ms = 300 });
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        for ("GET / HTTP/1.1\r\nHo") |byte| {
            try client.send(&.{byte});
            sleepMs(10);
        }
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 408), response.status);
        try testing.expect(try client.isClosed());
    }
}

fn processCpuMs(pid: linux.pid_t) !u64 {
    var path: [64]u8 = undefined;
    var buffer: [1024]u8 = undefined;
    const text = try std.Io.Dir.cwd().readFile(testing.io, try std.mem.print(&path, "/proc/{d}/stat", .{pid}), &buffer);
    var fields = std.mem.tokenizeScalar(u8, text[std.mem.findScalarLast(u8, text, ')').? + 2 ..], ' ');
    var index: usize = 0;
    var ticks: u64 = 0;
    while (fields.next()) |field| : (index += 1) {
        // After the command: state is field 0; utime and stime are fields 11 and 12.
        if (index == 11 or index == 12) ticks += try std.fmt.parseInt(u64, field, 10);
    }
    return ticks * 10; // USER_HZ is 100 on Linux
}

test "out of file descriptors: accepting backs off, existing connections are served" {
    const io = testing.io;
    for (usableNames(&.{ "epoll", "io_uring", "thread_per_connection", "worker_pool" })) |engine_name| {
        errdefer std.debug.print("engine {s}\n", .{engine_name});
        var script: [512]u8 = undefined;
        // 64 descriptors: the server uses a handful; the rest go quickly.
        const command = try std.mem.print(&script, "ulimit -n 64 && exec {s} --port 0 --workers 1 --engine {s}", .{ build_options.hello_exe, engine_name });
        Client.plaintextServer(); // a server process of its own: plaintext
        var child = try std.process.spawn(io, .{ .argv = &.{ "sh", "-c", command }, .stdout = .pipe, .stderr = .ignore });
        defer {
            _ = linux.kill(child.id.?, linux.SIG.KILL);
            _ = child.wait(io) catch {};
        }
        var buffer: [256]u8 = undefined;
        var reader = child.stdout.?.readerStreaming(io, &buffer);
        const line = try reader.interface.takeDelimiterExclusive('\n');
        const port = try std.fmt.parseInt(u16, line["listening on http://127.0.0.1:".len..], 10);

        var first = try Client.connect(port, 5_000);
        defer first.close();
        try first.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        (try first.readResponse(testing.allocator, .{})).deinit(testing.allocator);

        var crowd: [100]Client = undefined;
        var opened: usize = 0;
        defer for (crowd[0..opened]) |*c| c.close();
        for (&crowd) |*c| {
            c.* = Client.connect(port, 5_000) catch break;
            opened += 1;
        }
        const cpu_before = try processCpuMs(child.id.?);
        sleepMs(1000);
        const cpu_ms = try processCpuMs(child.id.?) - cpu_before;
        // A busy accept loop would burn the whole second.
        errdefer std.debug.print("server CPU while out of descriptors: {d} ms in 1000 ms\n", .{cpu_ms});
        try testing.expect(cpu_ms < 300);
        try first.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        const again = try first.readResponse(testing.allocator, .{});
        defer again.deinit(testing.allocator);
        try testing.expectEqualStrings("Hello, World!", again.body);
        for (crowd[0..opened]) |*c| c.close();
        opened = 0;
        sleepMs(300);
        const later = try Client.fetch(testing.allocator, port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        defer later.deinit(testing.allocator);
        try testing.expectEqualStrings("Hello, World!", later.body);
    }
}

const LoadResult = struct { completed: usize = 0, refused: usize = 0, broken: usize = 0 };

/// Keep-alive requests in a loop until the server goes away. A response must be complete, or
/// the connection must end before any byte of it: a partial response is a lost request.
fn load(port: u16, result: *LoadResult) void {
    outer: while (true) {
        var client = Client.connect(port, 5_000) catch {
            result.refused += 1;
            return;
        };
        defer client.close();
        while (true) {
            client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n") catch continue :outer;
            const received_before = client.received_total;
            const response = client.readResponse(testing.allocator, .{}) catch |err| switch (err) {
                // Closed before the response started: the server had not read the request
                // (an idle keep-alive connection closed by the shutdown, RFC 9112 §9.3.1).
                error.Closed => if (client.received_total == received_before) continue :outer else {
                    result.broken += 1;
                    return;
                },
                else => {
                    result.broken += 1;
                    return;
                },
            };
            defer response.deinit(testing.allocator);
            if (response.status != 200) {
                result.broken += 1;
                return;
            }
            result.completed += 1;
            if (response.header("Connection")) |value| {
                if (std.mem.eql(u8, value, "close")) continue :outer;
            }
        }
    }
}

test "shutdown under load: every request read is answered, then the process exits 0" {
    const io = testing.io;
    for (usableNames(&.{ "epoll", "io_uring", "thread_per_connection", "worker_pool", "blocking" })) |engine_name| {
        errdefer std.debug.print("engine {s}\n", .{engine_name});
        Client.plaintextServer(); // a server process of its own: plaintext
        var child = try std.process.spawn(io, .{
            .argv = &.{ build_options.hello_exe, "--port", "0", "--workers", "2", "--engine", engine_name },
            .stdout = .pipe,
            .stderr = .ignore,
        });
        var buffer: [256]u8 = undefined;
        var reader = child.stdout.?.readerStreaming(io, &buffer);
        const line = try reader.interface.takeDelimiterExclusive('\n');
        const port = try std.fmt.parseInt(u16, line["listening on http://127.0.0.1:".len..], 10);
        var results: [8]LoadResult = @splat(.{});
        var threads: [8]std.Thread = undefined;
        for (&threads, &results) |*t, *r| t.* = try std.Thread.spawn(.{}, load, .{ port, r });
        sleepMs(500);
        _ = linux.kill(child.id.?, linux.SIG.TERM);
        for (threads) |t| t.join();
        const term = try child.wait(io);
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, term);
        var total: LoadResult = .{};
        for (results) |r| {
            total.completed += r.completed;
            total.refused += r.refused;
            total.broken += r.broken;
        }
        errdefer std.debug.print("completed {d}, refused {d}, broken {d}\n", .{ total.completed, total.refused, total.broken });
        try testing.expectEqual(@as(usize, 0), total.broken);
        try testing.expect(total.completed > 0);
        try testing.expectEqual(@as(usize, 8), total.refused); // every client ended refused
    }
}

test "slowhttptest: slowloris, slow body and slow read leave the service available" {
    const io = testing.io;
    for (usableNames(&.{ "epoll", "io_uring", "worker_pool" })) |engine_name| {
        for ([_][]const u8{ "-H", "-B", "-X" }) |mode| {
            errdefer std.debug.print("engine {s}, slowhttptest {s}\n", .{ engine_name, mode });
            Client.plaintextServer(); // a server process of its own: plaintext
            var child = try std.process.spawn(io, .{
                .argv = &.{ build_options.echo_exe, "--port", "0", "--workers", "1", "--engine", engine_name },
                .stdout = .pipe,
                .stderr = .ignore,
            });
            defer {
                _ = linux.kill(child.id.?, linux.SIG.TERM);
                _ = child.wait(io) catch {};
            }
            var buffer: [256]u8 = undefined;
            var reader = child.stdout.?.readerStreaming(io, &buffer);
            const line = try reader.interface.takeDelimiterExclusive('\n');
            const url = try std.fmt.allocPrint(testing.allocator, "{s}/", .{line["listening on ".len..]});
            defer testing.allocator.free(url);
            var prefix_buffer: [64]u8 = undefined;
            const prefix = try std.mem.print(&prefix_buffer, "/tmp/saker-slowhttptest-{d}", .{linux.getpid()});
            // 500 attacking connections for 8 s, the probe waiting at most 3 s for an answer.
            const result = std.process.run(testing.allocator, io, .{ .argv = &.{
                "slowhttptest", mode, "-c", "500", "-r", "250", "-i", "2",  "-l",   "8",
                "-p",           "3",  "-k", "3",   "-u", url,   "-g", "-o", prefix,
            } }) catch |err| return skipWithout("slowhttptest", err);
            defer testing.allocator.free(result.stdout);
            defer testing.allocator.free(result.stderr);
            var csv_path: [96]u8 = undefined;
            var csv_buffer: [16 * 1024]u8 = undefined;
            const csv = try std.Io.Dir.cwd().readFile(io, try std.mem.print(&csv_path, "{s}.csv", .{prefix}), &csv_buffer);
            var lines = std.mem.tokenizeScalar(u8, csv, '\n');
            _ = lines.next(); // Seconds,Closed,Pending,Connected,Service Available
            var rows: usize = 0;
            while (lines.next()) |row| : (rows += 1) {
                const available = row[std.mem.findScalarLast(u8, row, ',').? + 1 ..];
                errdefer std.debug.print("unavailable at: {s}\n", .{row});
                try testing.expect(!std.mem.eql(u8, std.mem.trim(u8, available, " \r"), "0"));
            }
            try testing.expect(rows >= 5);
        }
    }
}

fn rssKib(pid: linux.pid_t) !u64 {
    return proc_status.number(pid, "VmRSS");
}

/// Waits (up to 5 s) until the process's thread count has held still for 100 ms: a
/// connection thread still exiting when RSS is read would count its stack as growth.
fn waitForThreadsSettled(pid: linux.pid_t) !void {
    var last = try proc_status.number(pid, "Threads");
    var same: u32 = 0;
    for (0..500) |_| {
        try testing.io.sleep(.fromMilliseconds(10), .awake);
        const now = try proc_status.number(pid, "Threads");
        same = if (now == last) same + 1 else 0;
        if (same == 10) return;
        last = now;
    }
    return error.Timeout;
}

fn soak(port: u16, requests: usize) !void {
    var client = try Client.connect(port, 10_000);
    defer client.close();
    const batch = 16;
    var pipelined: [batch * 64]u8 = undefined;
    var len: usize = 0;
    for (0..batch) |i| len += (try std.mem.print(pipelined[len..], "POST /s{d} HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc", .{i % 10})).len;
    for (0..requests / batch) |_| {
        try client.send(pipelined[0..len]);
        for (0..batch) |_| (try client.readResponse(testing.allocator, .{})).deinit(testing.allocator);
    }
}

test "soak: memory does not grow over a long keep-alive run" {
    const io = testing.io;
    for (usableNames(&.{ "epoll", "io_uring", "thread_per_connection", "worker_pool" })) |engine_name| {
        errdefer std.debug.print("engine {s}\n", .{engine_name});
        Client.plaintextServer(); // a server process of its own: plaintext
        var child = try std.process.spawn(io, .{
            .argv = &.{ build_options.echo_exe, "--port", "0", "--workers", "1", "--engine", engine_name },
            .stdout = .pipe,
            .stderr = .ignore,
        });
        defer {
            _ = linux.kill(child.id.?, linux.SIG.TERM);
            _ = child.wait(io) catch {};
        }
        var buffer: [256]u8 = undefined;
        var reader = child.stdout.?.readerStreaming(io, &buffer);
        const line = try reader.interface.takeDelimiterExclusive('\n');
        const port = try std.fmt.parseInt(u16, line["listening on http://127.0.0.1:".len..], 10);
        // Warm up, then two equal rounds: whatever the first needed, the second must reuse.
        for (0..4) |_| try soak(port, 2_000);
        try waitForThreadsSettled(child.id.?);
        const after_first = try rssKib(child.id.?);
        for (0..4) |_| try soak(port, 20_000);
        try waitForThreadsSettled(child.id.?);
        const after_second = try rssKib(child.id.?);
        errdefer std.debug.print("RSS {d} KiB, then {d} KiB\n", .{ after_first, after_second });
        // A connection's thread is a pthread (saker links libc): glibc keeps the stack of a
        // finished thread for the next one, but a thread that starts before the previous
        // stack is back takes a fresh one, with its thread-local block (std's 256 KiB signal
        // stack in this Debug build). One such stack is not growth.
        const thread_slack_kib: u64 = if (std.mem.eql(u8, engine_name, "thread_per_connection"))
            (std.options.signal_stack_size orelse 0) / 1024 + 64
        else
            0;
        try testing.expect(after_second <= after_first + 256 + thread_slack_kib);
    }
}

test "accept errors: accepting pauses and resumes once the listener works again" {
    // It logs on purpose; a warning here is expected, an error still shows.
    const log_level = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = log_level;
    // The listener's descriptor is swapped for an eventfd (readable, so poll wakes and accept
    // fails with ENOTSOCK), then swapped back. Engines that poll the listener only; epoll and
    // io_uring registered the socket itself, so the swap is invisible to them.
    for (usable(&.{ .blocking, .thread_per_connection, .worker_pool })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Echo).start(kind, .{ .workers = 1 });
        defer running.stop();
        const listener_fd = running.server.listeners[0].fd;
        const cloexec: u32 = @bitCast(linux.O{ .CLOEXEC = true });
        const saved: linux.fd_t = @intCast(linux.dup(listener_fd));
        defer _ = linux.close(saved);
        const not_a_socket: linux.fd_t = @intCast(linux.eventfd(1, linux.EFD.CLOEXEC | linux.EFD.NONBLOCK));
        defer _ = linux.close(not_a_socket);
        try testing.expectEqual(@as(usize, @intCast(listener_fd)), linux.dup3(not_a_socket, listener_fd, cloexec));
        // Longer than the accept loop's poll interval (500 ms), so accept fails at least once.
        sleepMs(1500);
        try testing.expectEqual(@as(usize, @intCast(listener_fd)), linux.dup3(saved, listener_fd, cloexec));
        const response = try Client.fetch(testing.allocator, running.port(), "GET /again HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
        try testing.expectEqualStrings("GET /again body=", response.body);
    }
}

/// A handler that takes its time on `/slow`, recording when it started and finished.
const Slow = struct {
    started: std.atomic.Value(bool) = .init(false),
    finished: std.atomic.Value(bool) = .init(false),

    pub fn handle(slow: *Slow, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/slow")) {
            slow.started.store(true, .release);
            sleepMs(2_500);
            slow.finished.store(true, .release);
        }
        res.setBody("done");
    }
};

test "shutdown: serve returns only after every connection thread is done, past the timeout" {
    // It logs on purpose; a warning here is expected, an error still shows.
    const log_level = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = log_level;
    // A connection thread still running after `serve` returned would use the server's memory
    // after `deinit`: the thread engines wait for their threads, however long a handler takes.
    for (usable(&.{ .blocking, .thread_per_connection, .worker_pool })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Slow).start(kind, .{ .shutdown_timeout_ms = 100 });
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        try client.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
        for (0..500) |_| {
            if (running.handler.started.load(.acquire)) break;
            sleepMs(10);
        }
        try testing.expect(running.handler.started.load(.acquire));
        running.server.stop();
        running.thread.join();
        const finished = running.handler.finished.load(.acquire);
        running.server.deinit();
        testing.allocator.destroy(running);
        try testing.expect(finished);
    }
}
