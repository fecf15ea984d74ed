//! HTTP/2 as real clients see it, on every engine, h2c (prior knowledge, on the port that
//! serves HTTP/1.1) and h2 over TLS (ALPN): curl, h2load, h2spec; gRPC clients (grpcio,
//! grpcurl, ghz) against examples/grpc-echo; and attacks mounted with raw frames over a socket
//! (Rapid Reset, a zero-window slow read). The frame-level cases are in src/http2_test.zig on
//! the simulated engine.
const std = @import("std");
const testing = std.testing;
const server_allocator = @import("server_allocator.zig").allocator;
const saker = @import("saker");
const frame = saker.http2.frame;
const hpack = saker.http2.hpack;
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const Client = @import("Client.zig");
const build_options = @import("build_options");

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

/// Lets `/events` finish (a test sets it once the first event has arrived).
var events_release: std.atomic.Value(bool) = .init(false);
/// How `/events` ended: 0 not yet, 1 both events sent, 2 the client was gone.
var events_outcome: std.atomic.Value(u8) = .init(0);

/// Waits up to 5 s for `/events` to end; returns how.
fn eventsOutcome() u8 {
    for (0..1000) |_| {
        const outcome = events_outcome.load(.acquire);
        if (outcome != 0) return outcome;
        var pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 5 * std.time.ns_per_ms };
        _ = std.os.linux.nanosleep(&pause, null);
    }
    return 0;
}

/// `/stream-big`'s body: 200 KiB, flushed 16 KiB at a time.
const stream_big_bytes = 200 * 1024;

fn streamBigByte(i: usize) u8 {
    return @intCast('a' + (i / 7) % 26);
}

/// `App` with streamed responses; every request runs on the handler pool (which declaring
/// `mayBlock` starts) but `/loop/...`.
const StreamApp = struct {
    pub fn mayBlock(_: *const StreamApp, req: *const saker.Request) bool {
        return !std.mem.startsWith(u8, req.path, "/loop/");
    }

    /// `/upload` reads its body as it arrives.
    pub fn onHead(_: *StreamApp, req: *saker.Request, _: *saker.Response) !saker.BodyAction {
        return if (std.mem.eql(u8, req.path, "/upload")) .reader else .buffer;
    }

    pub fn handle(_: *StreamApp, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/upload")) {
            // Reads slowly (a pause per 256 KiB), so the client's window does the waiting.
            const reader = try req.bodyReader();
            var crc: std.hash.Crc32 = .init();
            var total: usize = 0;
            var buffer: [16 * 1024]u8 = undefined;
            while (true) {
                const n = try reader.readSliceShort(&buffer);
                if (n == 0) break;
                crc.update(buffer[0..n]);
                if ((total + n) / (256 * 1024) != total / (256 * 1024)) {
                    var pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 2 * std.time.ns_per_ms };
                    _ = std.os.linux.nanosleep(&pause, null);
                }
                total += n;
            }
            return res.print("{d} {x:0>8}", .{ total, crc.final() });
        }
        if (std.mem.eql(u8, req.path, "/events")) {
            // One event now, the next once the test has seen the first.
            const events = try res.eventStream();
            try events.send(.{ .data = "one" });
            var waited_ms: u32 = 0;
            while (!events_release.load(.acquire)) : (waited_ms += 5) {
                if (waited_ms > 10_000) return error.NeverReleased;
                var pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 5 * std.time.ns_per_ms };
                _ = std.os.linux.nanosleep(&pause, null);
            }
            events.send(.{ .data = "two" }) catch |err| {
                events_outcome.store(2, .release);
                return err;
            };
            events_outcome.store(1, .release);
            return;
        }
        if (std.mem.eql(u8, req.path, "/stream-big")) {
            var piece: [16 * 1024]u8 = undefined;
            var at: usize = 0;
            while (at < stream_big_bytes) {
                const len = @min(piece.len, stream_big_bytes - at);
                for (piece[0..len], 0..) |*b, i| b.* = streamBigByte(at + i);
                try res.writeAll(piece[0..len]);
                try res.flush();
                at += len;
            }
            return;
        }
        var app: App = .{};
        return app.handle(req, res);
    }
};

const App = struct {
    pub fn handle(_: *App, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/big")) {
            const body = try res.arena.alloc(u8, 300 * 1024);
            for (body, 0..) |*b, i| b.* = @intCast('a' + i % 26);
            res.setBody(body);
            return;
        }
        if (std.mem.eql(u8, req.path, "/echo")) return res.print("{d} bytes", .{req.body().len});
        try res.print("{s} over {s}", .{ req.path, req.version.text() });
    }
};

const Running = RunningOf(App);

/// A server with a plaintext listener (h2c and HTTP/1.1) and a TLS one (h2 and HTTP/1.1).
fn RunningOf(comptime Handler: type) type {
    return struct {
        app: Handler = .{},
        server: saker.Server(Handler),
        thread: std.Thread,

        const Self = @This();

        fn start(kind: saker.engine.Kind, overrides: saker.Config) !*Self {
            var config = overrides;
            config.engine = kind;
            config.host = "127.0.0.1";
            config.port = 0;
            config.listeners = &.{.{ .port = 0, .tls = .{ .self_signed = true } }};
            if (config.workers == 0) config.workers = 2;
            const running = try testing.allocator.create(Self);
            errdefer testing.allocator.destroy(running);
            running.* = .{ .server = undefined, .thread = undefined };
            running.server = try .init(server_allocator, &running.app, config);
            errdefer running.server.deinit();
            running.thread = try std.Thread.spawn(.{}, serve, .{&running.server});
            // Real clients do not retry: wait until both listeners take connections.
            for ([_]u16{ running.plainPort(), running.tlsPort() }) |port| {
                var probe = try Client.connectPlain(port, 10_000);
                probe.close();
            }
            return running;
        }

        fn serve(server: *saker.Server(Handler)) void {
            server.serve() catch |err| std.debug.panic("serve failed: {t}", .{err});
        }

        fn stop(running: *Self) void {
            running.server.stop();
            running.thread.join();
            running.server.deinit();
            testing.allocator.destroy(running);
        }

        fn plainPort(running: *Self) u16 {
            return running.server.listenerPort(0);
        }

        fn tlsPort(running: *Self) u16 {
            return running.server.listenerPort(1);
        }
    };
}

fn run(argv: []const []const u8) !std.process.RunResult {
    return std.process.run(testing.allocator, testing.io, .{ .argv = argv });
}

fn freeResult(result: std.process.RunResult) void {
    testing.allocator.free(result.stdout);
    testing.allocator.free(result.stderr);
}

test "curl over h2c and h2 on every engine: GET, a 300 KiB body, a POST body" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var a: [64]u8 = undefined;
        var b: [64]u8 = undefined;
        var c: [64]u8 = undefined;
        const plain = try std.mem.print(&a, "http://127.0.0.1:{d}/hello", .{running.plainPort()});
        const secure = try std.mem.print(&b, "https://127.0.0.1:{d}/big", .{running.tlsPort()});
        const echo = try std.mem.print(&c, "http://127.0.0.1:{d}/echo", .{running.plainPort()});
        {
            const result = run(&.{ "curl", "--silent", "--show-error", "--http2-prior-knowledge", "--write-out", " %{http_version}", plain }) catch |err| return skipWithout("curl", err);
            defer freeResult(result);
            try testing.expectEqualStrings("/hello over HTTP/2.0 2", result.stdout);
        }
        {
            const result = try run(&.{ "curl", "--silent", "--show-error", "--insecure", "--http2", "--output", "/dev/null", "--write-out", "%{http_version} %{size_download}", secure });
            defer freeResult(result);
            testing.expectEqualStrings("2 307200", result.stdout) catch |err| {
                std.debug.print("curl: {s}\n", .{result.stderr});
                return err;
            };
        }
        {
            // 200 KiB from a file: more than the initial windows, so WINDOW_UPDATEs must flow.
            var dir = testing.tmpDir(.{});
            defer dir.cleanup();
            const body: [200 * 1024]u8 = @splat('q');
            try dir.dir.writeFile(testing.io, .{ .sub_path = "body", .data = &body });
            var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
            const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
            var arg: [std.fs.max_path_bytes + 8]u8 = undefined;
            const data = try std.mem.print(&arg, "@{s}/body", .{dir_path});
            const result = try run(&.{ "curl", "--silent", "--show-error", "--http2-prior-knowledge", "--data-binary", data, echo });
            defer freeResult(result);
            try testing.expectEqualStrings("204800 bytes", result.stdout);
        }
    }
}

/// h2load against both listeners of `running`: every request succeeds.
fn h2loadClean(running: *Running, comptime requests: []const u8, comptime connections: []const u8) !void {
    var a: [64]u8 = undefined;
    var b: [64]u8 = undefined;
    const urls = [_][]const u8{
        try std.mem.print(&a, "http://127.0.0.1:{d}/hello", .{running.plainPort()}),
        try std.mem.print(&b, "https://127.0.0.1:{d}/hello", .{running.tlsPort()}),
    };
    for (urls) |url| {
        const result = run(&.{ "h2load", "-n", requests, "-c", connections, "-m", "10", url }) catch |err| return skipWithout("h2load", err);
        defer freeResult(result);
        testing.expect(std.mem.find(u8, result.stdout, requests ++ " succeeded, 0 failed, 0 errored, 0 timeout") != null) catch |err| {
            std.debug.print("{s}\n{s}\n", .{ result.stdout, result.stderr });
            return err;
        };
    }
}

test "h2load over h2c and h2: 0 failed, 0 errored, on epoll and io_uring" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        try h2loadClean(running, "4000", "8");
    }
}

test "handlers on the handler pool over h2c and h2: h2load with 0 errors, curl with a body" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        // Every request's handler runs on a pool thread (the handler says nothing of
        // `mayBlock`, and the pool has threads).
        const running = try Running.start(kind, .{ .handler_threads = 2 });
        defer running.stop();
        try h2loadClean(running, "2000", "4");
        var c: [64]u8 = undefined;
        const echo = try std.mem.print(&c, "http://127.0.0.1:{d}/echo", .{running.plainPort()});
        const result = run(&.{ "curl", "--silent", "--show-error", "--http2-prior-knowledge", "--data-binary", "pooled", echo }) catch |err| return skipWithout("curl", err);
        defer freeResult(result);
        try testing.expectEqualStrings("6 bytes", result.stdout);
    }
}

test "streamed responses over h2c and h2 on every engine (from the handler pool, or the connection's own thread): curl gets 200 KiB flushed in 16 KiB chunks" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2 });
        defer running.stop();
        var expected: [stream_big_bytes]u8 = undefined;
        for (&expected, 0..) |*b, i| b.* = streamBigByte(i);
        var plain: [64]u8 = undefined;
        var tls: [64]u8 = undefined;
        const cases = [_][]const []const u8{
            &.{ "curl", "--silent", "--show-error", "--http2-prior-knowledge", try std.mem.print(&plain, "http://127.0.0.1:{d}/stream-big", .{running.plainPort()}) },
            &.{ "curl", "--silent", "--show-error", "--http2", "--insecure", try std.mem.print(&tls, "https://127.0.0.1:{d}/stream-big", .{running.tlsPort()}) },
        };
        for (cases) |argv| {
            const result = run(argv) catch |err| return skipWithout("curl", err);
            defer freeResult(result);
            try testing.expectEqual(@as(usize, stream_big_bytes), result.stdout.len);
            try testing.expect(std.mem.eql(u8, &expected, result.stdout));
        }
    }
}

/// A request body in a temporary file, and curl's `--data-binary` argument for it.
const BodyFile = struct {
    tmp: std.testing.TmpDir,
    data_arg: []u8,

    fn create(body: []const u8) !BodyFile {
        var tmp = testing.tmpDir(.{});
        errdefer tmp.cleanup();
        try tmp.dir.writeFile(testing.io, .{ .sub_path = "body.bin", .data = body });
        const path = try tmp.dir.realPathFileAlloc(testing.io, "body.bin", testing.allocator);
        defer testing.allocator.free(path);
        return .{ .tmp = tmp, .data_arg = try std.fmt.allocPrint(testing.allocator, "@{s}", .{path}) };
    }

    fn destroy(file: *BodyFile) void {
        testing.allocator.free(file.data_arg);
        file.tmp.cleanup();
    }
};

test "a body pulled with bodyReader() over h2c and h2 as it arrives: 8 MiB through a handler that reads slowly, with body_bytes_max 64 KiB" {
    const upload_len = 8 * 1024 * 1024;
    const body = try testing.allocator.alloc(u8, upload_len);
    defer testing.allocator.free(body);
    var prng: std.Random.DefaultPrng = .init(0x5a6e4);
    prng.random().bytes(body);
    var file: BodyFile = try .create(body);
    defer file.destroy();
    const data_arg = file.data_arg;
    var expected_buffer: [32]u8 = undefined;
    const expected = try std.mem.print(&expected_buffer, "{d} {x:0>8}", .{ upload_len, std.hash.Crc32.hash(body) });
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // A buffered body could not be over 64 KiB: this one never is buffered whole.
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2, .body_bytes_max = 64 * 1024, .streamed_body_bytes_max = 16 * 1024 * 1024 });
        defer running.stop();
        var plain: [64]u8 = undefined;
        var tls: [64]u8 = undefined;
        const cases = [_][]const []const u8{
            &.{ "curl", "--silent", "--show-error", "--http2-prior-knowledge", "--data-binary", data_arg, try std.mem.print(&plain, "http://127.0.0.1:{d}/upload", .{running.plainPort()}) },
            &.{ "curl", "--silent", "--show-error", "--http2", "--insecure", "--data-binary", data_arg, try std.mem.print(&tls, "https://127.0.0.1:{d}/upload", .{running.tlsPort()}) },
        };
        for (cases) |argv| {
            const result = run(argv) catch |err| return skipWithout("curl", err);
            defer freeResult(result);
            try testing.expectEqualStrings(expected, result.stdout);
        }
    }
}

test "a 24 MiB body with a content-length is buffered over h2c in one allocation (not three times over in the arena)" {
    const body = try testing.allocator.alloc(u8, 24 * 1024 * 1024);
    defer testing.allocator.free(body);
    @memset(body, 'b');
    var file: BodyFile = try .create(body);
    defer file.destroy();
    const data_arg = file.data_arg;
    // An arena of 48 MiB at most: room for the body once, not for a buffer grown to it.
    const running = try Running.start(.epoll, .{ .body_bytes_max = 32 * 1024 * 1024, .arena_request_bytes_max = 48 * 1024 * 1024 });
    defer running.stop();
    var url: [64]u8 = undefined;
    const result = run(&.{ "curl", "--silent", "--http2-prior-knowledge", "--data-binary", data_arg, try std.mem.print(&url, "http://127.0.0.1:{d}/echo", .{running.plainPort()}) }) catch |err| return skipWithout("curl", err);
    defer freeResult(result);
    try testing.expectEqualStrings("25165824 bytes", result.stdout);
}

test "a pulled body over h2c beyond streamed_body_bytes_max is answered 413; the connection serves on" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2, .streamed_body_bytes_max = 100 * 1024 });
        defer running.stop();
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close();
        // The 413 may go out before the whole body has come: then RST_STREAM NO_ERROR refuses
        // the rest after it (RFC 9113 §8.1).
        var reader: Reader = .{ .client = &client, .resets_ok = true };
        defer reader.deinit();
        var frames: Frames = undefined;
        try frames.init(&.{});
        defer frames.deinit();
        try frames.post(1, "/upload");
        // 200 KiB in 16 KiB frames: within the stream's window (1 MiB), past the limit.
        const piece: [16 * 1024]u8 = @splat('u');
        for (0..12) |_| try frames.data(1, &piece, false);
        try frames.data(1, piece[0 .. 8 * 1024], true);
        try client.send(frames.bytes.items);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[1];
            }
        }.f);
        try testing.expect(std.mem.startsWith(u8, reader.data[1].items, "413 Content Too Large"));
        frames.bytes.items.len = 0;
        try frames.get(3, "/loop/after");
        try client.send(frames.bytes.items);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[3];
            }
        }.f);
        try testing.expectEqualStrings("/loop/after over HTTP/2.0", reader.data[3].items);
        if (reader.resets[1]) |code| try testing.expectEqual(frame.ErrorCode.no_error, code);
        try testing.expect(reader.resets[3] == null);
    }
}

/// The server's frames as a raw client reads them, gathered per stream.
const Reader = struct {
    client: *Client,
    bytes: std.ArrayList(u8) = .empty,
    /// DATA payload per stream id (ids below 16), and whether each stream ended.
    data: [16]std.ArrayList(u8) = @splat(.empty),
    ended: [16]bool = @splat(false),
    ping_acks: usize = 0,
    /// RST_STREAM from the server is recorded (`resets`) rather than an error.
    resets_ok: bool = false,
    resets: [16]?frame.ErrorCode = @splat(null),

    fn deinit(r: *Reader) void {
        r.bytes.deinit(testing.allocator);
        for (&r.data) |*d| d.deinit(testing.allocator);
    }

    /// Reads until `done(r)` holds; fails if the server closes first or 5 s pass.
    fn until(r: *Reader, done: *const fn (*const Reader) bool) !void {
        var chunk: [16 * 1024]u8 = undefined;
        while (!done(r)) {
            if (!r.client.waitForData(5000)) return error.Timeout;
            const n = try r.client.readSome(&chunk);
            if (n == 0) return error.Closed;
            try r.bytes.appendSlice(testing.allocator, chunk[0..n]);
            var used: usize = 0;
            while (true) {
                switch (frame.parse(r.bytes.items[used..], frame.frame_size_max)) {
                    .frame => |f| {
                        used += f.len;
                        const h = f.frame.header;
                        switch (h.type) {
                            .data => {
                                try r.data[h.stream_id].appendSlice(testing.allocator, f.frame.payload);
                                if (h.has(frame.Flags.end_stream)) r.ended[h.stream_id] = true;
                            },
                            .headers => if (h.has(frame.Flags.end_stream)) {
                                r.ended[h.stream_id] = true;
                            },
                            .rst_stream => {
                                if (!r.resets_ok) return error.StreamReset;
                                r.resets[h.stream_id] = frame.rstCode(f.frame.payload);
                            },
                            .goaway => return error.GoAway,
                            .ping => r.ping_acks += 1,
                            else => {},
                        }
                    },
                    .incomplete => break,
                    .violation => return error.BadServerFrame,
                }
            }
            std.mem.copyForwards(u8, r.bytes.items[0 .. r.bytes.items.len - used], r.bytes.items[used..]);
            r.bytes.items.len -= used;
        }
    }
};

test "an event stream over h2c on every engine: each event arrives as sent, while the connection serves other streams" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        events_release.store(false, .release);
        events_outcome.store(0, .release);
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2 });
        defer running.stop();
        defer events_release.store(true, .release); // a failed test must not leave it waiting
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close();
        var reader: Reader = .{ .client = &client };
        defer reader.deinit();
        var frames: Frames = undefined;
        try frames.init(&.{});
        defer frames.deinit();
        try frames.get(1, "/events");
        try client.send(frames.bytes.items);
        // The first event arrives while the handler still runs (it waits for the second).
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return std.mem.find(u8, r.data[1].items, "data: one\n\n") != null;
            }
        }.f);
        try testing.expect(!reader.ended[1]);
        // Meanwhile the connection goes on: a PING is answered, a request whose handler runs
        // on the loop is answered, and one that needs the pool waits for the stream's handler.
        frames.bytes.items.len = 0;
        var ping: [17]u8 = undefined;
        try frames.bytes.appendSlice(testing.allocator, ping[0..frame.writePing(&ping, false, "saker-01")]);
        try frames.get(3, "/loop/hello");
        try frames.get(5, "/pooled");
        try client.send(frames.bytes.items);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[3] and r.ping_acks == 1;
            }
        }.f);
        try testing.expectEqualStrings("/loop/hello over HTTP/2.0", reader.data[3].items);
        try testing.expect(!reader.ended[1] and !reader.ended[5]);
        events_release.store(true, .release);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[1] and r.ended[5];
            }
        }.f);
        try testing.expectEqualStrings("data: one\n\ndata: two\n\n", reader.data[1].items);
        try testing.expectEqualStrings("/pooled over HTTP/2.0", reader.data[5].items);
        try testing.expectEqual(@as(u8, 1), eventsOutcome());
    }
}

fn firstEventSeen(r: *const Reader) bool {
    return std.mem.find(u8, r.data[1].items, "data: one\n\n") != null;
}

test "a streaming handler learns of a reset stream, a closed connection or a closed window (ClientGone); the server goes on" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2, .write_timeout_ms = 300 });
        defer running.stop();
        defer events_release.store(true, .release);
        for ([_]enum { reset, close }{ .reset, .close }) |how| {
            errdefer std.debug.print("ending by {t}\n", .{how});
            events_release.store(false, .release);
            events_outcome.store(0, .release);
            var client = try Client.connectPlain(running.plainPort(), 10_000);
            var closed = false;
            defer if (!closed) client.close();
            var reader: Reader = .{ .client = &client };
            defer reader.deinit();
            var frames: Frames = undefined;
            try frames.init(&.{});
            defer frames.deinit();
            try frames.get(1, "/events");
            try client.send(frames.bytes.items);
            try reader.until(firstEventSeen);
            switch (how) {
                .reset => {
                    frames.bytes.items.len = 0;
                    try frames.rst(1);
                    try frames.get(3, "/loop/after");
                    try client.send(frames.bytes.items);
                    // The connection serves on while the handler still waits.
                    try reader.until(struct {
                        fn f(r: *const Reader) bool {
                            return r.ended[3];
                        }
                    }.f);
                    try testing.expectEqualStrings("/loop/after over HTTP/2.0", reader.data[3].items);
                },
                .close => {
                    client.close();
                    closed = true;
                },
            }
            events_release.store(true, .release);
            switch (how) {
                .reset => try testing.expectEqual(@as(u8, 2), eventsOutcome()),
                // The kernel may still take the second event if the server writes it before
                // it has read the close: either way the handler's wait ends.
                .close => try testing.expect(eventsOutcome() != 0),
            }
        }
        // A client that opens no window: the streamed chunk cannot go, and after
        // write_timeout_ms the connection ends with GOAWAY (the handler's wait with it).
        var frames: Frames = undefined;
        try frames.init(&.{.{ .id = .initial_window_size, .value = 0 }});
        defer frames.deinit();
        try frames.get(1, "/stream-big");
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close();
        try client.send(frames.bytes.items);
        const answer = try client.readToEnd(testing.allocator);
        defer testing.allocator.free(answer);
        try testing.expectEqual(frame.ErrorCode.enhance_your_calm, goawayCode(answer).?);
        // And the server serves on.
        var url: [64]u8 = undefined;
        const result = run(&.{ "curl", "--silent", "--http2-prior-knowledge", try std.mem.print(&url, "http://127.0.0.1:{d}/stream-big", .{running.plainPort()}) }) catch |err| return skipWithout("curl", err);
        defer freeResult(result);
        try testing.expectEqual(@as(usize, stream_big_bytes), result.stdout.len);
    }
}

/// A Go tool (h2spec, grpcurl, ghz) from tests/tools' build in .tools/bin, from Go's default
/// bin folder, or from PATH. The path is in `buffer` or static.
fn goTool(comptime name: []const u8, buffer: []u8) ![]const u8 {
    const installed = ".tools/bin/" ++ name;
    if (std.Io.Dir.cwd().access(testing.io, installed, .{})) |_| return installed else |_| {}
    if (std.c.getenv("HOME")) |home| {
        const path = try std.mem.print(buffer, "{s}/go/bin/" ++ name, .{std.mem.span(home)});
        if (std.Io.Dir.cwd().access(testing.io, path, .{})) |_| return path else |_| {}
    }
    return name;
}

test "h2spec: every case passes over TLS and over h2c (an h2c-only port); on a port that serves HTTP/1.1 too, all but the invalid preface" {
    // The blocking engine serves one connection at a time; h2spec keeps several open.
    for (usable(&[_]saker.engine.Kind{ .thread_per_connection, .worker_pool, .epoll, .io_uring })) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        const h2c_only = try Running.start(kind, .{ .h2c_only = true });
        defer h2c_only.stop();
        var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
        const tool = try goTool("h2spec", &path_buffer);
        var a: [8]u8 = undefined;
        var b: [8]u8 = undefined;
        for ([_]struct { port: u16, tls: bool }{ .{ .port = running.tlsPort(), .tls = true }, .{ .port = h2c_only.plainPort(), .tls = false } }) |target| {
            const port = try std.mem.print(&a, "{d}", .{target.port});
            const result = run(if (target.tls)
                &.{ tool, "-t", "-k", "-h", "127.0.0.1", "-p", port, "-o", "5" }
            else
                &.{ tool, "-h", "127.0.0.1", "-p", port, "-o", "5" }) catch |err| return skipWithout("h2spec", err);
            defer freeResult(result);
            testing.expect(std.mem.find(u8, result.stdout, "145 tests, 145 passed, 0 skipped, 0 failed") != null) catch |err| {
                std.debug.print("{s}\n", .{result.stdout});
                return err;
            };
        }
        {
            const port = try std.mem.print(&b, "{d}", .{running.plainPort()});
            const result = try run(&.{ tool, "-h", "127.0.0.1", "-p", port, "-o", "5" });
            defer freeResult(result);
            // The one failure: "INVALID CONNECTION PREFACE\r\n\r\n" is answered as the HTTP/1.1
            // request it looks like (400), where h2spec wants a silent close.
            const failures = std.mem.find(u8, result.stdout, "Failures:") orelse return error.NoSummary;
            testing.expect(std.mem.find(u8, result.stdout, "145 tests, 144 passed, 0 skipped, 1 failed") != null and
                std.mem.find(u8, result.stdout[failures..], "Sends invalid connection preface") != null) catch |err| {
                std.debug.print("{s}\n", .{result.stdout});
                return err;
            };
        }
    }
}

/// Frames for a raw client: the preface, SETTINGS, and requests encoded with HPACK.
const Frames = struct {
    bytes: std.ArrayList(u8) = .empty,
    table: [4096]u8 = undefined,
    ring: [hpack.DynamicTable.ringLength(4096)]hpack.DynamicTable.Entry = undefined,
    encoder: hpack.Encoder = undefined,

    fn init(f: *Frames, settings: []const frame.SettingValue) !void {
        f.* = .{};
        f.encoder = .init(&f.table, &f.ring);
        try f.bytes.appendSlice(testing.allocator, frame.preface);
        var out: [64]u8 = undefined;
        try f.bytes.appendSlice(testing.allocator, out[0..frame.writeSettings(&out, settings)]);
    }

    fn deinit(f: *Frames) void {
        f.bytes.deinit(testing.allocator);
    }

    fn get(f: *Frames, id: u31, path: []const u8) !void {
        var block: [256]u8 = undefined;
        var n = try f.encoder.begin(&block);
        const fields = [_]hpack.Field{
            .{ .name = ":method", .value = "GET" },  .{ .name = ":scheme", .value = "http" },
            .{ .name = ":authority", .value = "a" }, .{ .name = ":path", .value = path },
        };
        for (fields) |field| n += try f.encoder.encode(block[n..], field.name, field.value, .allowed);
        var h: [frame.header_len]u8 = undefined;
        (frame.Header{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers | frame.Flags.end_stream, .stream_id = id }).write(&h);
        try f.bytes.appendSlice(testing.allocator, &h);
        try f.bytes.appendSlice(testing.allocator, block[0..n]);
    }

    fn post(f: *Frames, id: u31, path: []const u8) !void {
        var block: [256]u8 = undefined;
        var n = try f.encoder.begin(&block);
        const fields = [_]hpack.Field{
            .{ .name = ":method", .value = "POST" }, .{ .name = ":scheme", .value = "http" },
            .{ .name = ":authority", .value = "a" }, .{ .name = ":path", .value = path },
        };
        for (fields) |field| n += try f.encoder.encode(block[n..], field.name, field.value, .allowed);
        var h: [frame.header_len]u8 = undefined;
        (frame.Header{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers, .stream_id = id }).write(&h);
        try f.bytes.appendSlice(testing.allocator, &h);
        try f.bytes.appendSlice(testing.allocator, block[0..n]);
    }

    fn data(f: *Frames, id: u31, payload: []const u8, end_stream: bool) !void {
        var h: [frame.header_len]u8 = undefined;
        (frame.Header{ .length = @intCast(payload.len), .type = .data, .flags = if (end_stream) frame.Flags.end_stream else 0, .stream_id = id }).write(&h);
        try f.bytes.appendSlice(testing.allocator, &h);
        try f.bytes.appendSlice(testing.allocator, payload);
    }

    fn rst(f: *Frames, id: u31) !void {
        var out: [13]u8 = undefined;
        try f.bytes.appendSlice(testing.allocator, out[0..frame.writeRstStream(&out, id, .cancel)]);
    }
};

/// The error code of the first GOAWAY in `bytes` (the server's frames), if any.
fn goawayCode(bytes: []const u8) ?frame.ErrorCode {
    var rest = bytes;
    while (true) {
        switch (frame.parse(rest, frame.frame_size_max)) {
            .frame => |f| {
                if (f.frame.header.type == .goaway) return frame.goaway(f.frame.payload).code;
                rest = rest[f.len..];
            },
            else => return null,
        }
    }
}

/// Sends `bytes` on a new connection and reads to its end: the server must have ended it with
/// GOAWAY ENHANCE_YOUR_CALM (it may close before it has taken them all).
fn expectCalmed(port: u16, bytes: []const u8) !void {
    var client = try Client.connectPlain(port, 10_000);
    defer client.close();
    client.send(bytes) catch {};
    const answer = try client.readToEnd(testing.allocator);
    defer testing.allocator.free(answer);
    try testing.expectEqual(frame.ErrorCode.enhance_your_calm, goawayCode(answer).?);
}

/// After an attack: curl over h2c is served as before (`skipWithout` skips only for a missing
/// curl).
fn servesAfter(running: *Running) !void {
    var url: [64]u8 = undefined;
    const result = try run(&.{ "curl", "--silent", "--http2-prior-knowledge", try std.mem.print(&url, "http://127.0.0.1:{d}/after", .{running.plainPort()}) });
    defer freeResult(result);
    try testing.expectEqualStrings("/after over HTTP/2.0", result.stdout);
}

test "Rapid Reset over a socket on every engine: GOAWAY ENHANCE_YOUR_CALM, then the server serves on" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .http2_glitch_burst = 200 });
        defer running.stop();
        var frames: Frames = undefined;
        try frames.init(&.{});
        defer frames.deinit();
        var id: u31 = 1;
        for (0..400) |_| {
            try frames.get(id, "/hello");
            try frames.rst(id);
            id += 2;
        }
        try expectCalmed(running.plainPort(), frames.bytes.items);
        // Others are served as before.
        servesAfter(running) catch |err| return skipWithout("curl", err);
    }
}

test "floods over a socket on every engine: PRIORITY, WINDOW_UPDATE for a closed stream and empty DATA end in GOAWAY ENHANCE_YOUR_CALM; the server serves on" {
    const Flood = enum { priority, window_update, empty_data };
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .http2_glitch_burst = 200 });
        defer running.stop();
        for ([_]Flood{ .priority, .window_update, .empty_data }) |flood| {
            errdefer std.debug.print("flood of {t}\n", .{flood});
            var frames: Frames = undefined;
            try frames.init(&.{});
            defer frames.deinit();
            switch (flood) {
                .priority => {},
                // Stream 1 closes at once (the client resets it); what comes for it then is
                // work for nothing.
                .window_update => {
                    try frames.get(1, "/hello");
                    try frames.rst(1);
                },
                // A request whose body is coming, in frames that carry none.
                .empty_data => try frames.post(1, "/echo"),
            }
            for (0..400) |i| {
                var out: [frame.header_len + 5]u8 = undefined;
                const bytes: []const u8 = switch (flood) {
                    // PRIORITY for idle streams (allowed, and deprecated by RFC 9113 §5.3.2).
                    .priority => blk: {
                        (frame.Header{ .length = 5, .type = .priority, .flags = 0, .stream_id = @intCast(3 + 2 * i) }).write(out[0..frame.header_len]);
                        @memcpy(out[frame.header_len..], &[_]u8{ 0, 0, 0, 0, 16 });
                        break :blk &out;
                    },
                    .window_update => out[0..frame.writeWindowUpdate(&out, 1, 1)],
                    .empty_data => blk: {
                        (frame.Header{ .length = 0, .type = .data, .flags = 0, .stream_id = 1 }).write(out[0..frame.header_len]);
                        break :blk out[0..frame.header_len];
                    },
                };
                try frames.bytes.appendSlice(testing.allocator, bytes);
            }
            try expectCalmed(running.plainPort(), frames.bytes.items);
        }
        servesAfter(running) catch |err| return skipWithout("curl", err);
    }
}

test "PING and SETTINGS floods from a client that never reads the answers end its connection, on every engine; the server serves on" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .write_timeout_ms = 300 });
        defer running.stop();
        for ([_]frame.Type{ .ping, .settings }) |flood| {
            errdefer std.debug.print("flood of {t}\n", .{flood});
            // 1 MiB of frames that each ask for an answer, sent up to 64 times over while the
            // server takes them: the answers fill the socket's buffers, then the server's send
            // buffer, and the server must end the connection instead of reading on or waiting.
            var chunk: std.ArrayList(u8) = .empty;
            defer chunk.deinit(testing.allocator);
            while (chunk.items.len < 1024 * 1024) {
                var out: [frame.header_len + 8]u8 = undefined;
                const n = switch (flood) {
                    .ping => frame.writePing(&out, false, "flooding"),
                    else => frame.writeSettings(&out, &.{}),
                };
                try chunk.appendSlice(testing.allocator, out[0..n]);
            }
            var frames: Frames = undefined;
            try frames.init(&.{});
            defer frames.deinit();
            var client = try Client.connectPlain(running.plainPort(), 10_000);
            defer client.close();
            try client.rawSend(frames.bytes.items);
            var sent_all = true;
            for (0..64) |_| client.rawSend(chunk.items) catch {
                sent_all = false;
                break;
            };
            // The server stopped taking the flood: the send failed (reset), or ran into the
            // client's send timeout while the server waited on its own full socket.
            try testing.expect(!sent_all);
            // What the server answered is drained; then the connection must be at its end.
            // Were it still open (the server waiting, or reading on), the read would run
            // into the client's 10 s receive timeout (error.Timeout) instead.
            var drain: [64 * 1024]u8 = undefined;
            while (try client.rawRead(&drain) > 0) {}
        }
        servesAfter(running) catch |err| return skipWithout("curl", err);
    }
}

test "a zero-window slow read ends in GOAWAY after write_timeout_ms, without holding the server" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring, .thread_per_connection })) |kind| {
        const running = try Running.start(kind, .{ .write_timeout_ms = 300 });
        defer running.stop();
        var frames: Frames = undefined;
        try frames.init(&.{.{ .id = .initial_window_size, .value = 0 }});
        defer frames.deinit();
        try frames.get(1, "/big");
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close();
        try client.send(frames.bytes.items);
        const answer = try client.readToEnd(testing.allocator);
        defer testing.allocator.free(answer);
        try testing.expectEqual(frame.ErrorCode.enhance_your_calm, goawayCode(answer).?);
    }
}

/// A server process (an example or `saker serve`) on a free port, read from its first line.
const Process = struct {
    child: std.process.Child,
    buffer: [256]u8,
    reader: std.Io.File.Reader,
    /// The port, as the process printed it.
    port: []const u8,

    fn start(p: *Process, argv: []const []const u8) !void {
        const io = testing.io;
        p.child = try std.process.spawn(io, .{ .argv = argv, .stdout = .pipe, .stderr = .ignore });
        errdefer p.stop();
        p.reader = p.child.stdout.?.readerStreaming(io, &p.buffer);
        const line = try p.reader.interface.takeDelimiterExclusive('\n');
        const prefix = "listening on http://127.0.0.1:";
        if (!std.mem.startsWith(u8, line, prefix)) return error.UnexpectedOutput;
        p.port = std.mem.trimEnd(u8, line[prefix.len..], " ");
    }

    /// SIGINT, then waits for the process to finish its requests and exit.
    fn stop(p: *Process) void {
        _ = std.os.linux.kill(p.child.id.?, std.os.linux.SIG.INT);
        _ = p.child.wait(testing.io) catch {};
    }
};

test "gRPC: examples/grpc-echo answers a real gRPC client (grpcio): unary, server streaming, UNIMPLEMENTED" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        var process: Process = undefined;
        try process.start(&.{ build_options.grpc_echo_exe, "--port", "0", "--engine", @tagName(kind), "--workers", "1" });
        defer process.stop();
        const result = try run(&.{ "/usr/bin/python3", "tests/grpc/client.py", process.port });
        defer freeResult(result);
        if (result.term == .exited and result.term.exited == 127) return skipWithout("python3-grpcio", error.FileNotFound);
        testing.expectEqualStrings(
            "say hello over h2c\nrepeat 0 tick\nrepeat 1 tick\nrepeat 2 tick\nmissing UNIMPLEMENTED no such method\n",
            result.stdout,
        ) catch |err| {
            std.debug.print("{s}\n", .{result.stderr});
            return err;
        };
    }
}

test "examples/router over h2c with curl: parameters, a cookie, JSON, CORS, multipart, a pulled body, live events, 404 and 405" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var process: Process = undefined;
        try process.start(&.{ build_options.router_exe, "--port", "0", "--engine", @tagName(kind), "--workers", "1" });
        defer process.stop();
        var urls: [11][96]u8 = undefined;
        const base = "http://127.0.0.1:";
        const h2 = "--http2-prior-knowledge";
        const Case = struct { argv: []const []const u8, expected: []const u8 };
        const cases = [_]Case{
            // A percent-decoded parameter; the timing middleware's header on every answer.
            .{ .argv = &.{ "curl", "-s", h2, "-D", "-", try std.mem.print(&urls[0], "{s}{s}/hello/w%C3%B6rld", .{ base, process.port }) }, .expected = "Hello, w\xc3\xb6rld!\n" },
            .{ .argv = &.{ "curl", "-s", h2, try std.mem.print(&urls[1], "{s}{s}/search?q=a%20b&page=2", .{ base, process.port }) }, .expected = "{\"query\":\"a b\",\"page\":2}" },
            .{ .argv = &.{ "curl", "-s", h2, try std.mem.print(&urls[2], "{s}{s}/files/x/y.txt", .{ base, process.port }) }, .expected = "path: x/y.txt\n" },
            .{ .argv = &.{ "curl", "-s", h2, "-H", "Origin: http://app.test", "-D", "-", "--json", "{\"values\":[1,2,3]}", try std.mem.print(&urls[3], "{s}{s}/api/sum", .{ base, process.port }) }, .expected = "{\"sum\":6,\"count\":3}" },
            .{ .argv = &.{ "curl", "-s", h2, "-F", "a=1", "-F", "f=@build.zig;filename=b.zig", try std.mem.print(&urls[4], "{s}{s}/api/upload", .{ base, process.port }) }, .expected = "\"name\":\"f\",\"filename\":\"b.zig\"" },
            .{ .argv = &.{ "curl", "-s", h2, "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", try std.mem.print(&urls[5], "{s}{s}/", .{ base, process.port }) }, .expected = "405" },
            .{ .argv = &.{ "curl", "-s", h2, "-o", "/dev/null", "-w", "%{http_code}", try std.mem.print(&urls[6], "{s}{s}/nope", .{ base, process.port }) }, .expected = "404" },
            // The form sets a cookie and redirects (curl follows no redirect over prior
            // knowledge: the cookie goes back by hand).
            .{ .argv = &.{ "curl", "-s", h2, "-D", "-", "-d", "user=ann", try std.mem.print(&urls[7], "{s}{s}/login", .{ base, process.port }) }, .expected = "set-cookie: user=ann; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax" },
            .{ .argv = &.{ "curl", "-s", h2, "-b", "user=ann", try std.mem.print(&urls[10], "{s}{s}/me", .{ base, process.port }) }, .expected = "you are ann\n" },
        };
        for (cases) |case| {
            const result = run(case.argv) catch |err| return skipWithout("curl", err);
            defer freeResult(result);
            testing.expect(std.mem.find(u8, result.stdout, case.expected) != null) catch |err| {
                std.debug.print("{s}\ngot: {s}\n", .{ case.argv[case.argv.len - 1], result.stdout });
                return err;
            };
            if (std.mem.find(u8, case.argv[case.argv.len - 1], "/hello/") != null)
                try testing.expect(std.mem.find(u8, result.stdout, "server-timing: ") != null);
            if (std.mem.find(u8, case.argv[case.argv.len - 1], "/api/sum") != null)
                try testing.expect(std.mem.find(u8, result.stdout, "access-control-allow-origin: *") != null);
        }
        {
            // 3 MiB read as it arrives (the route is flagged body_reader).
            const body = try testing.allocator.alloc(u8, 3 * 1024 * 1024);
            defer testing.allocator.free(body);
            for (body, 0..) |*b, i| b.* = @truncate(i *% 31);
            var file: BodyFile = try .create(body);
            defer file.destroy();
            const data_arg = file.data_arg;
            const result = try run(&.{ "curl", "-s", h2, "--data-binary", data_arg, try std.mem.print(&urls[8], "{s}{s}/api/digest", .{ base, process.port }) });
            defer freeResult(result);
            var expected: [64]u8 = undefined;
            try testing.expectEqualStrings(try std.mem.print(&expected, "{{\"bytes\":{d},\"crc32\":{d}}}", .{ body.len, std.hash.Crc32.hash(body) }), result.stdout);
        }
        {
            // Events leave as they are sent, 100 ms apart: the first byte comes well before
            // the end (a response sent whole would have them together).
            const result = try run(&.{ "curl", "-s", h2, "-N", "-w", "\n%{time_starttransfer} %{time_total}", try std.mem.print(&urls[9], "{s}{s}/api/events?n=3", .{ base, process.port }) });
            defer freeResult(result);
            for ([_][]const u8{ "data: tick 1 of 3\n", "data: tick 2 of 3\n", "data: tick 3 of 3\n" }) |line|
                try testing.expect(std.mem.find(u8, result.stdout, line) != null);
            const times = result.stdout[std.mem.findScalarLast(u8, result.stdout, '\n').? + 1 ..];
            var it = std.mem.splitScalar(u8, times, ' ');
            const first = try std.fmt.parseFloat(f64, it.next().?);
            const total = try std.fmt.parseFloat(f64, it.next().?);
            testing.expect(total - first >= 0.15) catch |err| {
                std.debug.print("first byte at {d} s, end at {d} s\n", .{ first, total });
                return err;
            };
        }
    }
}

test "gRPC: grpcurl calls examples/grpc-echo with tests/grpc/echo.proto: unary Say, server-streaming Repeat, UNIMPLEMENTED" {
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const tool = try goTool("grpcurl", &path_buffer);
    for (usable(&engines)) |kind| {
        var process: Process = undefined;
        try process.start(&.{ build_options.grpc_echo_exe, "--port", "0", "--engine", @tagName(kind), "--workers", "1" });
        defer process.stop();
        var target_buffer: [32]u8 = undefined;
        const target = try std.mem.print(&target_buffer, "127.0.0.1:{s}", .{process.port});
        // -emit-defaults: replies with index 0 show it (JSON output would leave it out).
        const common = [_][]const u8{ "-plaintext", "-max-time", "10", "-emit-defaults", "-import-path", "tests/grpc" };
        {
            const result = run(&(.{tool} ++ common ++ .{ "-proto", "echo.proto", "-d", "{\"text\":\"hello over h2c\"}", target, "echo.Echo/Say" })) catch |err|
                return skipWithout("grpcurl", err);
            defer freeResult(result);
            testing.expectEqualStrings("{\n  \"text\": \"hello over h2c\",\n  \"index\": 0\n}\n", result.stdout) catch |err| {
                std.debug.print("grpcurl: {s}\n", .{result.stderr});
                return err;
            };
        }
        {
            const result = try run(&(.{tool} ++ common ++ .{ "-proto", "echo.proto", "-d", "{\"text\":\"tick\",\"count\":3}", target, "echo.Echo/Repeat" }));
            defer freeResult(result);
            testing.expectEqualStrings(
                "{\n  \"text\": \"tick\",\n  \"index\": 0\n}\n" ++
                    "{\n  \"text\": \"tick\",\n  \"index\": 1\n}\n" ++
                    "{\n  \"text\": \"tick\",\n  \"index\": 2\n}\n",
                result.stdout,
            ) catch |err| {
                std.debug.print("grpcurl: {s}\n", .{result.stderr});
                return err;
            };
        }
        {
            // grpcurl sends only methods its -proto has: unimplemented.proto adds Missing.
            const result = try run(&(.{tool} ++ common ++ .{ "-format-error", "-proto", "unimplemented.proto", "-d", "{}", target, "echo.Echo/Missing" }));
            defer freeResult(result);
            // grpcurl exits with 64 + the status code: UNIMPLEMENTED is 12.
            testing.expect(result.term == .exited and result.term.exited == 64 + 12 and
                std.mem.find(u8, result.stderr, "\"code\": 12,\n  \"message\": \"no such method\"") != null) catch |err| {
                std.debug.print("grpcurl: {any}\n{s}{s}\n", .{ result.term, result.stdout, result.stderr });
                return err;
            };
        }
    }
}

/// What tests read from ghz's JSON report (`-O json`).
const GhzReport = struct {
    count: u64,
    rps: f64,
    errorDistribution: ?std.json.ArrayHashMap(u64) = null,
    statusCodeDistribution: std.json.ArrayHashMap(u64),
};

/// A ghz run: `calls` calls of `method` with `data` (JSON), `concurrency` at a time.
const GhzLoad = struct { method: []const u8, data: []const u8, calls: []const u8, concurrency: []const u8 };

/// ghz runs `load` on one connection to 127.0.0.1:`port`: every call answers OK.
fn ghzClean(port: []const u8, load: GhzLoad) !void {
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const tool = try goTool("ghz", &path_buffer);
    var target_buffer: [32]u8 = undefined;
    const target = try std.mem.print(&target_buffer, "127.0.0.1:{s}", .{port});
    const result = run(&.{ tool, "--insecure", "--proto", "tests/grpc/echo.proto", "--call", load.method, "-d", load.data, "-n", load.calls, "-c", load.concurrency, "--timeout", "10s", "-O", "json", target }) catch |err|
        return skipWithout("ghz", err);
    defer freeResult(result);
    const parsed = std.json.parseFromSlice(GhzReport, testing.allocator, result.stdout, .{ .ignore_unknown_fields = true }) catch |err| {
        std.debug.print("ghz: {any}\n{s}\n", .{ result.term, result.stderr });
        return err;
    };
    defer parsed.deinit();
    const report = parsed.value;
    const expected = try std.fmt.parseInt(u64, load.calls, 10);
    const errors = if (report.errorDistribution) |d| d.map.count() else 0;
    const statuses = report.statusCodeDistribution.map;
    testing.expect(report.count == expected and errors == 0 and statuses.count() == 1 and
        statuses.get("OK") == expected) catch |err| {
        std.debug.print("ghz {s}: {d} calls, {d} kinds of error, statuses:", .{ load.method, report.count, errors });
        for (statuses.keys(), statuses.values()) |status, n| std.debug.print(" {s} {d}", .{ status, n });
        std.debug.print("\n{s}\n", .{result.stderr});
        return err;
    };
}

test "gRPC: ghz puts examples/grpc-echo under load: 2000 unary Say calls and 500 server-streaming Repeat calls, every one OK" {
    for (usable(&engines)) |kind| {
        var process: Process = undefined;
        try process.start(&.{ build_options.grpc_echo_exe, "--port", "0", "--engine", @tagName(kind) });
        defer process.stop();
        try ghzClean(process.port, .{ .method = "echo.Echo/Say", .data = "{\"text\":\"hi\"}", .calls = "2000", .concurrency = "20" });
        try ghzClean(process.port, .{ .method = "echo.Echo/Repeat", .data = "{\"text\":\"hi\",\"count\":10}", .calls = "500", .concurrency = "10" });
    }
}

test "saker serve over h2c: Range, a conditional GET, HEAD, a precompressed variant and a listing" {
    const io = testing.io;
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(io, &path_buffer)];
    try dir.dir.writeFile(io, .{ .sub_path = "a.txt", .data = "0123456789abcdef\n" });
    try dir.dir.writeFile(io, .{ .sub_path = "page.html", .data = "<p>plain</p>\n" });
    try dir.dir.writeFile(io, .{ .sub_path = "page.html.gz", .data = "pretend-gzip" });
    var process: Process = undefined;
    try process.start(&.{ build_options.saker_exe, "serve", dir_path, "--port", "0", "--access-log", "off" });
    defer process.stop();
    const port = process.port;
    var url_buffer: [4][64]u8 = undefined;
    const file = try std.mem.print(&url_buffer[0], "http://127.0.0.1:{s}/a.txt", .{port});
    const page = try std.mem.print(&url_buffer[1], "http://127.0.0.1:{s}/page.html", .{port});
    const root = try std.mem.print(&url_buffer[2], "http://127.0.0.1:{s}/", .{port});
    const h2 = "--http2-prior-knowledge";
    {
        const result = run(&.{ "curl", "--silent", h2, "--range", "2-5", "--write-out", " %{http_code} %{http_version}", file }) catch |err| return skipWithout("curl", err);
        defer freeResult(result);
        try testing.expectEqualStrings("2345 206 2", result.stdout);
    }
    {
        // The ETag of the first answer makes the second a 304 with no body.
        const first = try run(&.{ "curl", "--silent", h2, "--head", file });
        defer freeResult(first);
        try testing.expect(std.mem.startsWith(u8, first.stdout, "HTTP/2 200"));
        try testing.expect(std.mem.find(u8, first.stdout, "content-length: 17") != null);
        const at = std.mem.find(u8, first.stdout, "etag: ") orelse return error.NoEtag;
        const etag = first.stdout[at + "etag: ".len ..][0..std.mem.findScalar(u8, first.stdout[at + "etag: ".len ..], '\r').?];
        var condition: [128]u8 = undefined;
        const second = try run(&.{ "curl", "--silent", h2, "--header", try std.mem.print(&condition, "If-None-Match: {s}", .{etag}), "--write-out", "%{http_code} %{size_download}", file });
        defer freeResult(second);
        try testing.expectEqualStrings("304 0", second.stdout);
    }
    {
        const result = try run(&.{ "curl", "--silent", h2, "--header", "Accept-Encoding: gzip", "--write-out", " %{content_type}", page });
        defer freeResult(result);
        try testing.expect(std.mem.startsWith(u8, result.stdout, "pretend-gzip text/html"));
    }
    {
        const result = try run(&.{ "curl", "--silent", h2, root });
        defer freeResult(result);
        try testing.expect(std.mem.find(u8, result.stdout, "a.txt") != null);
        try testing.expect(std.mem.find(u8, result.stdout, "page.html") != null);
    }
}

// ---------------------------------------------------------------------------------------------
// Review (review3): cases that fail on the code as committed.

fn pauseMs(ms: u64) void {
    var pause: std.os.linux.timespec = .{ .sec = @intCast(ms / 1000), .nsec = @intCast((ms % 1000) * std.time.ns_per_ms) };
    _ = std.os.linux.nanosleep(&pause, null);
}

const PullEnd = enum { client_reset, window_overrun };

/// A pool handler pulls stream 1's body and waits for more; `how` then ends the stream; a
/// request for the pool on stream 3 must be served once that handler has returned.
fn pulledStreamEnds(how: PullEnd) !void {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // A frame size above the stream window lets one DATA frame overrun it.
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2, .http2_stream_window_bytes = 65535, .http2_frame_bytes_max = 128 * 1024 });
        defer running.stop();
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close(); // (the server then ends the stuck handler's wait)
        var reader: Reader = .{ .client = &client, .resets_ok = true };
        defer reader.deinit();
        var frames: Frames = undefined;
        try frames.init(&.{});
        defer frames.deinit();
        try frames.post(1, "/upload");
        const piece: [1024]u8 = @splat('p');
        try frames.data(1, &piece, false);
        try client.send(frames.bytes.items);
        // The handler reads the KiB, then waits for more.
        pauseMs(300);
        frames.bytes.items.len = 0;
        switch (how) {
            // The client gives up on the upload.
            .client_reset => try frames.rst(1),
            // The client sends more than the window: FLOW_CONTROL_ERROR on the stream.
            .window_overrun => {
                const big = try testing.allocator.alloc(u8, 70_000);
                defer testing.allocator.free(big);
                @memset(big, 'o');
                try frames.data(1, big, false);
            },
        }
        // A request that needs the pool: it runs once the upload's handler has returned.
        try frames.get(3, "/pooled");
        try client.send(frames.bytes.items);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[3];
            }
        }.f);
        try testing.expectEqualStrings("/pooled over HTTP/2.0", reader.data[3].items);
        if (how == .window_overrun) try testing.expectEqual(frame.ErrorCode.flow_control_error, reader.resets[1].?);
    }
}

test "review: a pulled body's stream the client resets while its handler waits for a read ends that wait" {
    try pulledStreamEnds(.client_reset);
}

test "review: a pulled body's stream reset for DATA beyond its window while its handler waits for a read ends that wait" {
    try pulledStreamEnds(.window_overrun);
}

test "review: a pulled body deferred behind a streaming pool handler and answered 408 leaks nothing" {
    for (usable(&[_]saker.engine.Kind{.epoll})) |kind| {
        events_release.store(false, .release);
        events_outcome.store(0, .release);
        const running = try RunningOf(StreamApp).start(kind, .{ .handler_threads = 2, .body_timeout_ms = 300 });
        defer running.stop();
        defer events_release.store(true, .release);
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close();
        var reader: Reader = .{ .client = &client, .resets_ok = true };
        defer reader.deinit();
        var frames: Frames = undefined;
        try frames.init(&.{});
        defer frames.deinit();
        // Stream 1 streams events from the pool; stream 3's upload waits for the pool meanwhile,
        // its first KiB buffered, the rest never sent.
        try frames.get(1, "/events");
        try client.send(frames.bytes.items);
        try reader.until(firstEventSeen);
        frames.bytes.items.len = 0;
        try frames.post(3, "/upload");
        const piece: [1024]u8 = @splat('q');
        try frames.data(3, &piece, false);
        try client.send(frames.bytes.items);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[3];
            }
        }.f);
        try testing.expect(std.mem.startsWith(u8, reader.data[3].items, "408 "));
        events_release.store(true, .release);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[1];
            }
        }.f);
        // `running.stop()` (deferred) checks that the worker gave back what it took.
    }
}

/// Three connections that each open 10 streams with a body that never comes (held for
/// `body_timeout_ms`), for the tests of exchanges held open.
const HeldStreams = struct {
    clients: [3]Client = undefined,
    opened: usize = 0,

    fn open(held: *HeldStreams, port: u16) !void {
        for (&held.clients) |*a| {
            var frames: Frames = undefined;
            try frames.init(&.{});
            defer frames.deinit();
            var id: u31 = 1;
            for (0..10) |_| {
                try frames.post(id, "/echo");
                id += 2;
            }
            a.* = try Client.connectPlain(port, 10_000);
            held.opened += 1;
            try a.send(frames.bytes.items);
        }
        // Let the server take every attacker's frames before the clients come.
        var pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 200 * std.time.ns_per_ms };
        _ = std.os.linux.nanosleep(&pause, null);
    }

    fn close(held: *HeldStreams) void {
        for (held.clients[0..held.opened]) |*a| a.close();
    }
};

test "streams held open on a few connections cannot take the exchanges every other connection needs: HTTP/1.1 and h2c clients are still served" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // One worker with 24 exchanges (connections_max); each HTTP/2 connection may open 10
        // streams. Three attackers each open all 10 with a body that never comes (held for
        // body_timeout_ms): 3 × (1 + 10) exchanges wanted, more than the worker has.
        const running = try Running.start(kind, .{ .workers = 1, .connections_max = 24, .http2_streams_max = 10 });
        defer running.stop();
        var attackers: HeldStreams = .{};
        defer attackers.close();
        try attackers.open(running.plainPort());
        for (0..3) |_| {
            const response = try Client.fetchPlain(testing.allocator, running.plainPort(), "GET /h1 HTTP/1.1\r\nHost: t\r\n\r\n");
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 200), response.status);
            try testing.expectEqualStrings("/h1 over HTTP/1.1", response.body);
        }
        var url: [64]u8 = undefined;
        const result = run(&.{ "curl", "--silent", "--http2-prior-knowledge", try std.mem.print(&url, "http://127.0.0.1:{d}/h2", .{running.plainPort()}) }) catch |err| return skipWithout("curl", err);
        defer freeResult(result);
        try testing.expectEqualStrings("/h2 over HTTP/2.0", result.stdout);
    }
}

test "a few connections holding every stream they may cannot take the stream share: another connection's request is still answered" {
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // One worker lends 24 exchanges to streams; each connection may open 10. Three
        // attackers open all 10 with a body that never comes: 30 wanted. Without a reserve the
        // first two would take 20 and the third 4, and every other connection's stream would
        // be refused. With it the second gets 8 and the third 4 (connections holding 4 or more
        // take no more once a quarter is left): 2 are left.
        const running = try Running.start(kind, .{ .workers = 1, .http2_streams_max = 10, .http2_stream_exchanges_max = 24 });
        defer running.stop();
        var attackers: HeldStreams = .{};
        defer attackers.close();
        try attackers.open(running.plainPort());
        var client = try Client.connectPlain(running.plainPort(), 10_000);
        defer client.close();
        var reader: Reader = .{ .client = &client, .resets_ok = true };
        defer reader.deinit();
        var frames: Frames = undefined;
        try frames.init(&.{});
        defer frames.deinit();
        try frames.get(1, "/fair");
        try client.send(frames.bytes.items);
        try reader.until(struct {
            fn f(r: *const Reader) bool {
                return r.ended[1] or r.resets[1] != null;
            }
        }.f);
        try testing.expectEqual(@as(?frame.ErrorCode, null), reader.resets[1]);
        try testing.expectEqualStrings("/fair over HTTP/2.0", reader.data[1].items);
    }
}
