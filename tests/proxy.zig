//! The PROXY protocol (v1 and v2) on every engine, in plaintext and (when the suite runs over
//! TLS) before the TLS handshake: raw headers written by the test, malformed and late ones,
//! untrusted peers, and a real HAProxy in front with `send-proxy` and `send-proxy-v2`, reached
//! from 127.0.0.7 so that the address the handler sees proves the header was used.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const Client = @import("Client.zig");
const sleepMs = @import("clock.zig").sleepMs;
const nowUs = @import("clock.zig").nowUs;

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

/// Answers with the client's address as the request sees it.
const WhoAmI = struct {
    pub fn handle(_: *WhoAmI, req: *saker.Request, res: *saker.Response) !void {
        const address = req.remoteAddress() orelse return res.print("unknown", .{});
        try res.print("{f}", .{address});
    }
};

const Running = @import("server_thread.zig").ServerThread(WhoAmI);

/// Sends `header` (in pieces of `piece` bytes, 0 for whole), then a request over the suite's
/// transport; returns the body (the address the server saw), in `buffer`.
fn whoAmI(port: u16, source: ?[4]u8, header: []const u8, piece: usize, buffer: []u8) ![]const u8 {
    var client = try Client.connectPlainFrom(source, port, 10_000);
    defer client.close();
    const step = if (piece == 0) header.len else piece;
    var at: usize = 0;
    while (at < header.len) : (at += step) {
        try client.send(header[at..@min(at + step, header.len)]);
        if (piece != 0) sleepMs(1);
    }
    if (Client.overTls()) try client.startTls(null);
    try client.send("GET /who HTTP/1.1\r\nHost: t\r\n\r\n");
    const response = try client.readResponse(testing.allocator, .{});
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 200), response.status);
    @memcpy(buffer[0..response.body.len], response.body);
    return buffer[0..response.body.len];
}

/// Whether the server closed the connection without answering, after `bytes` were sent.
fn closedWithoutAnswer(port: u16, source: ?[4]u8, bytes: []const u8) !bool {
    var client = try Client.connectPlainFrom(source, port, 10_000);
    defer client.close();
    client.send(bytes) catch return true; // already reset
    var scratch: [256]u8 = undefined;
    const n = client.readSome(&scratch) catch return true; // a reset
    return n == 0;
}

const v2_ip4 = saker.proxy_header.v2_signature ++ "\x21\x11\x00\x0c" ++ "\xc6\x33\x64\x04" ++ "\x7f\x00\x00\x01" ++ "\x11\x5c" ++ "\x1f\x90";
const v2_local = saker.proxy_header.v2_signature ++ "\x20\x00\x00\x00";

test "PROXY protocol v1 and v2 on every engine: the header's client address is the request's, whole or in pieces" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .proxy_protocol = .{ .from = &.{ "127.0.0.0/8", "::1" } } });
        defer running.stop();
        const port = running.port();
        var buffer: [128]u8 = undefined;
        const cases = [_]struct { []const u8, []const u8 }{
            .{ "PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n", "203.0.113.9:5555" },
            .{ "PROXY TCP6 2001:db8::7 ::1 40000 443\r\n", "[2001:db8::7]:40000" },
            .{ v2_ip4, "198.51.100.4:4444" },
            // The proxy's own connection (LOCAL, UNKNOWN): the socket's peer stands.
            .{ v2_local, "127.0.0.1:" },
            .{ "PROXY UNKNOWN\r\n", "127.0.0.1:" },
        };
        for (cases) |case| {
            for ([_]usize{ 0, 1, 5 }) |piece| {
                errdefer std.debug.print("header {any} in pieces of {d}\n", .{ case[0], piece });
                const seen = try whoAmI(port, null, case[0], piece, &buffer);
                try testing.expect(std.mem.startsWith(u8, seen, case[1]));
            }
        }
        // The header and the request in one write (plaintext): both are taken from one read.
        if (!Client.overTls()) {
            var client = try Client.connectPlain(port, 10_000);
            defer client.close();
            try client.send("PROXY TCP4 192.0.2.33 127.0.0.1 1234 80\r\nGET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
            for (0..2) |_| {
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try testing.expectEqualStrings("192.0.2.33:1234", response.body);
            }
        }
    }
}

test "PROXY protocol: no header, a malformed one, a late one and an untrusted peer are closed; the server goes on" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .proxy_protocol = .{ .from = &.{"127.0.0.1"} }, .header_timeout_ms = 300 });
        defer running.stop();
        const port = running.port();
        const bad = [_][]const u8{
            "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
            "PROXY TCP4 300.1.1.1 127.0.0.1 1 2\r\nGET / HTTP/1.1\r\n\r\n",
            "PROXY TCP4 1.2.3.4 127.0.0.1 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5\r\n",
            saker.proxy_header.v2_signature ++ "\x21\x11\x00\x04abcd",
            saker.proxy_header.v2_signature ++ "\x21\x11\x04\x00",
            "\x16\x03\x01\x00\x05hello",
        };
        for (bad) |bytes| {
            errdefer std.debug.print("bytes {any}\n", .{bytes});
            try testing.expect(try closedWithoutAnswer(port, null, bytes));
        }
        // A valid header from a peer not listed.
        try testing.expect(try closedWithoutAnswer(port, .{ 127, 0, 0, 7 }, "PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n"));
        // Half a header, then nothing: closed at header_timeout_ms.
        {
            var client = try Client.connectPlain(port, 10_000);
            defer client.close();
            try client.send("PROXY TCP4 203.0.");
            const start_us = nowUs();
            var scratch: [64]u8 = undefined;
            const n = client.readSome(&scratch) catch 0;
            try testing.expectEqual(@as(usize, 0), n);
            const waited_ms = (nowUs() - start_us) / 1000;
            try testing.expect(waited_ms >= 200 and waited_ms < 5000);
        }
        var buffer: [64]u8 = undefined;
        try testing.expectEqualStrings("203.0.113.1:9", try whoAmI(port, null, "PROXY TCP4 203.0.113.1 127.0.0.1 9 80\r\n", 0, &buffer));
    }
}

test "PROXY protocol behind a real HAProxy (send-proxy and send-proxy-v2): the handler sees the client's 127.0.0.7" {
    // HAProxy speaks plaintext to the backend here; over TLS the suite's servers would need
    // `ssl` on HAProxy's server lines, which the rest of this file covers with raw headers.
    const running = try Running.start(.epoll, .{ .proxy_protocol = .{ .from = &.{"127.0.0.1"} } });
    defer running.stop();
    // Asked once the server started: a server process of an earlier test may have left the
    // client in plaintext (`Client.plaintextServer`), which `start` undoes.
    if (Client.overTls()) return;
    const ports = [2]u16{ try Client.freePort(), try Client.freePort() };
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var config_buffer: [2048]u8 = undefined;
    const config = try std.mem.print(&config_buffer,
        \\global
        \\    maxconn 100
        \\defaults
        \\    mode http
        \\    timeout connect 5s
        \\    timeout client 10s
        \\    timeout server 10s
        \\frontend v1
        \\    bind 127.0.0.1:{d}
        \\    default_backend saker_v1
        \\frontend v2
        \\    bind 127.0.0.1:{d}
        \\    default_backend saker_v2
        \\backend saker_v1
        \\    server s1 127.0.0.1:{d} send-proxy
        \\backend saker_v2
        \\    server s2 127.0.0.1:{d} send-proxy-v2
        \\
    , .{ ports[0], ports[1], running.port(), running.port() });
    try dir.dir.writeFile(testing.io, .{ .sub_path = "haproxy.cfg", .data = config });
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    var cfg_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const cfg_path = try std.mem.print(&cfg_buffer, "{s}/haproxy.cfg", .{dir_path});
    var child = std.process.spawn(testing.io, .{ .argv = &.{ "haproxy", "-db", "-f", cfg_path }, .stdout = .ignore, .stderr = .ignore }) catch |err|
        return skipWithout("haproxy", err);
    defer {
        child.kill(testing.io);
    }
    for (ports) |port| {
        // HAProxy binds its frontends shortly after it starts.
        const deadline_us = nowUs() + 10_000_000;
        var buffer: [64]u8 = undefined;
        while (true) {
            var client = Client.connectPlainFrom(.{ 127, 0, 0, 7 }, port, 10_000) catch {
                if (nowUs() > deadline_us) return error.HaproxyDidNotStart;
                sleepMs(20);
                continue;
            };
            defer client.close();
            try client.send("GET /who HTTP/1.1\r\nHost: t\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 200), response.status);
            @memcpy(buffer[0..response.body.len], response.body);
            try testing.expect(std.mem.startsWith(u8, buffer[0..response.body.len], "127.0.0.7:"));
            break;
        }
    }
}
