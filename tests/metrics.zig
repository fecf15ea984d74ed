//! Metrics as a scraper sees them, on every engine: after N requests the response counter has
//! risen by exactly N, refusals are counted by reason, bytes both ways, TLS handshakes; the
//! text parses with Python's `prometheus_client` (Debian's python3-prometheus-client), served
//! by `saker.MetricsHandler` and by `saker serve --metrics`.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const build_options = @import("build_options");
const Client = @import("Client.zig");
const ServerThread = @import("server_thread.zig").ServerThread;

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const App = struct {
    pub fn handle(_: *App, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/fail")) return error.Broken;
        if (std.mem.eql(u8, req.path, "/missing")) {
            res.status = .not_found;
            return;
        }
        try res.print("ok {s}", .{req.path});
    }
};

const Running = ServerThread(App);

/// The value of the sample `name` (with its labels, as written) in exposition `text`.
fn sample(text: []const u8, name: []const u8) !u64 {
    var lines = std.mem.splitScalar(u8, text, '\n');
    while (lines.next()) |line| {
        if (line.len > name.len and std.mem.startsWith(u8, line, name) and line[name.len] == ' ')
            return std.fmt.parseInt(u64, line[name.len + 1 ..], 10);
    }
    std.debug.print("no sample {s} in:\n{s}\n", .{ name, text });
    return error.NoSample;
}

fn scrape(running: *Running, buffer: []u8) ![]const u8 {
    var w: std.Io.Writer = .fixed(buffer);
    try running.server.writeMetrics(&w);
    return w.buffered();
}

test "metrics: after N requests the response counter rose by exactly N, on every engine" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{});
        defer running.stop();
        var before_buffer: [16384]u8 = undefined;
        const before = try scrape(running, &before_buffer);
        const ok_name = "saker_http_responses_total{method=\"GET\",code=\"2xx\"}";
        const ok_before = try sample(before, ok_name);
        const n = 25;
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            for (0..n) |_| {
                try client.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try testing.expectEqual(@as(u16, 200), response.status);
            }
            for ([_][]const u8{ "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n", "POST /fail HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n" }) |request| {
                try client.send(request);
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
            }
        }
        // A request the core refuses: a malformed Content-Length (HTTP/1.1's framing).
        const refusals: u64 = if (Client.overH2c()) 0 else 1;
        if (refusals > 0) {
            const refused = try Client.fetch(testing.allocator, running.port(), "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: zz\r\n\r\n");
            defer refused.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 400), refused.status);
        }
        var after_buffer: [16384]u8 = undefined;
        const after = try scrape(running, &after_buffer);
        try testing.expectEqual(ok_before + n, try sample(after, ok_name));
        try testing.expectEqual(@as(u64, 1), try sample(after, "saker_http_responses_total{method=\"GET\",code=\"4xx\"}"));
        try testing.expectEqual(@as(u64, 1), try sample(after, "saker_http_responses_total{method=\"POST\",code=\"5xx\"}"));
        try testing.expectEqual(@as(u64, 1), try sample(after, "saker_handler_errors_total"));
        try testing.expectEqual(refusals, try sample(after, "saker_http_refused_total{reason=\"bad_request\"}"));
        try testing.expectEqual(@as(u64, n + 2), try sample(after, "saker_http_request_duration_seconds_count"));
        // HPACK makes a repeated HTTP/2 request a few bytes behind its frame header.
        const request_bytes_min = if (Client.overH2c()) saker.http2.frame.header_len else "GET /a HTTP/1.1\r\nHost: t\r\n\r\n".len;
        try testing.expect(try sample(after, "saker_received_bytes_total") > n * request_bytes_min);
        try testing.expect(try sample(after, "saker_sent_bytes_total") > n * "ok /a".len);
        try testing.expectEqual(@as(u64, 0), try sample(after, "saker_handlers_in_flight"));
        if (Client.overTls()) try testing.expect(try sample(after, "saker_tls_handshakes_total{result=\"completed\"}") >= 2);
    }
}

/// Scrapes until `want` holds (the server takes a moment to see what clients did), or 3 s.
fn awaitConnections(running: *Running, want: [4]u64) !void {
    const names = [_][]const u8{
        "saker_connections{protocol=\"http1\",state=\"active\"}",
        "saker_connections{protocol=\"http1\",state=\"idle\"}",
        "saker_connections{protocol=\"http2\",state=\"open\"}",
        "saker_connections{protocol=\"websocket\",state=\"open\"}",
    };
    var got: [4]u64 = undefined;
    for (0..300) |_| {
        var buffer: [16384]u8 = undefined;
        const text = try scrape(running, &buffer);
        for (names, &got) |name, *value| value.* = try sample(text, name);
        if (std.mem.eql(u64, &got, &want)) return;
        var pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 10 * std.time.ns_per_ms };
        _ = std.os.linux.nanosleep(&pause, null);
    }
    std.debug.print("connections (http1 active, http1 idle, http2, websocket): want {any}, got {any}\n", .{ want, got });
    return error.TestUnexpectedConnections;
}

test "metrics: open connections by protocol and state, on every engine that holds several" {
    for (usable(&[_]saker.engine.Kind{ .thread_per_connection, .worker_pool, .epoll, .io_uring })) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{});
        defer running.stop();
        // Kept alive after its answer: idle.
        var idle = try Client.connect(running.port(), 10_000);
        defer idle.close();
        try idle.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
        const response = try idle.readResponse(testing.allocator, .{});
        response.deinit(testing.allocator);
        // Half a head: active.
        var active = try Client.connect(running.port(), 10_000);
        try active.send("GET /a HTTP/1.1\r\nHost");
        // An HTTP/2 connection (h2c: over TLS the suite's clients speak HTTP/1.1).
        var h2: ?Client = null;
        if (!Client.overTls()) {
            h2 = try Client.connectPlain(running.port(), 10_000);
            var settings: [64]u8 = undefined;
            try h2.?.send(saker.http2.frame.preface);
            try h2.?.send(settings[0..saker.http2.frame.writeSettings(&settings, &.{})]);
        }
        if (Client.overH2c()) {
            // The suite's clients speak HTTP/2: three connections of it, one left at the end.
            try awaitConnections(running, .{ 0, 0, 3, 0 });
            active.close();
            if (h2) |*c| c.close();
            try awaitConnections(running, .{ 0, 0, 1, 0 });
            continue;
        }
        try awaitConnections(running, .{ 1, 1, if (h2 != null) 1 else 0, 0 });
        active.close();
        if (h2) |*c| c.close();
        try awaitConnections(running, .{ 0, 1, 0, 0 });
    }
}

test "metrics: refusals at connections_max are counted" {
    const running = try Running.start(.epoll, .{ .connections_max = 1 });
    defer running.stop();
    var held = try Client.connect(running.port(), 10_000);
    defer held.close();
    try held.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    const first = try held.readResponse(testing.allocator, .{});
    defer first.deinit(testing.allocator);
    var refused = try Client.connectPlain(running.port(), 10_000);
    defer refused.close();
    const bytes = try refused.readToEnd(testing.allocator);
    testing.allocator.free(bytes);
    var buffer: [16384]u8 = undefined;
    const text = try scrape(running, &buffer);
    try testing.expectEqual(@as(u64, 1), try sample(text, "saker_connections_refused_total"));
    try testing.expectEqual(@as(u64, 1), try sample(text, "saker_connections_open"));
}

/// Parses exposition `text` with Python's prometheus_client; its output: one line per sample
/// `name{labels} value`, or the error when the text is not valid.
fn parseWithPython(text: []const u8) !std.process.RunResult {
    const script =
        \\import sys
        \\from prometheus_client.parser import text_string_to_metric_families
        \\for family in text_string_to_metric_families(sys.stdin.read()):
        \\    for s in family.samples:
        \\        print(s.name, ",".join(k + "=" + v for k, v in sorted(s.labels.items())), int(s.value))
    ;
    // Debian's python3 (where python3-prometheus-client installs), else the one on PATH.
    const python = if (std.Io.Dir.cwd().access(testing.io, "/usr/bin/python3", .{})) "/usr/bin/python3" else |_| "python3";
    const argv = [_][]const u8{ "sh", "-c", "printf '%s' \"$0\" | \"$1\" -c \"$2\"", text, python, script };
    return std.process.run(testing.allocator, testing.io, .{ .argv = &argv });
}

test "metrics: MetricsHandler on a listener of its own serves text that prometheus_client parses" {
    const running = try Running.start(.epoll, .{});
    defer running.stop();
    const MetricsServer = ServerThread(saker.MetricsHandler);
    const metrics = try MetricsServer.startWith(.epoll, .{ .source = running.server.metricsSource() }, .{ .workers = 1 });
    defer metrics.stop();
    for (0..7) |_| {
        const response = try Client.fetch(testing.allocator, running.port(), "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
    }
    const response = try Client.fetch(testing.allocator, metrics.port(), "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 200), response.status);
    try testing.expectEqualStrings("text/plain; version=0.0.4; charset=utf-8", response.header("Content-Type").?);
    const elsewhere = try Client.fetch(testing.allocator, metrics.port(), "GET /other HTTP/1.1\r\nHost: t\r\n\r\n");
    defer elsewhere.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 404), elsewhere.status);
    const result = try parseWithPython(response.body);
    defer testing.allocator.free(result.stdout);
    defer testing.allocator.free(result.stderr);
    if (std.mem.find(u8, result.stderr, "No module named") != null) return skipWithout("python3-prometheus-client", error.FileNotFound);
    errdefer std.debug.print("{s}\n{s}\n", .{ result.stdout, result.stderr });
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, result.term);
    try testing.expect(std.mem.find(u8, result.stdout, "saker_http_responses_total code=2xx,method=GET 7\n") != null);
    try testing.expect(std.mem.find(u8, result.stdout, "saker_http_request_duration_seconds_count  7\n") != null);
}

test "saker serve --metrics: a second listener announces itself and serves the counts" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    try dir.dir.writeFile(testing.io, .{ .sub_path = "a.txt", .data = "a\n" });
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const root = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    Client.plaintextServer();
    var child = try std.process.spawn(testing.io, .{
        .argv = &.{ build_options.saker_exe, "serve", root, "--port", "0", "--metrics", "127.0.0.1:0", "--access-log", "off" },
        .stdout = .pipe,
        .stderr = .ignore,
    });
    var stopped = false;
    defer if (!stopped) child.kill(testing.io);
    var buffer: [4096]u8 = undefined;
    var reader = child.stdout.?.readerStreaming(testing.io, &buffer);
    var ports: [2]u16 = undefined;
    for (&ports, [_][]const u8{ "", " (metrics at /metrics)" }) |*port, suffix| {
        const line = std.mem.trimEnd(u8, try reader.interface.takeDelimiterInclusive('\n'), "\n");
        const prefix = "listening on http://127.0.0.1:";
        try testing.expect(std.mem.startsWith(u8, line, prefix) and std.mem.endsWith(u8, line, suffix));
        port.* = try std.fmt.parseInt(u16, line[prefix.len .. line.len - suffix.len], 10);
    }
    for (0..3) |_| {
        const response = try Client.fetch(testing.allocator, ports[0], "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 200), response.status);
    }
    const response = try Client.fetch(testing.allocator, ports[1], "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u64, 3), try sample(response.body, "saker_http_responses_total{method=\"GET\",code=\"2xx\"}"));
    stopped = true;
    _ = linux.kill(child.id.?, linux.SIG.INT);
    _ = try reader.interface.discardRemaining();
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try child.wait(testing.io));
}
