//! Request bodies in a `Content-Encoding`, decoded by the server for a handler that declares
//! `decodes_content_encoding`, over real sockets on every engine: bodies coded by Python's
//! gzip, zlib, brotli and zstandard modules (one coding or two stacked) come back decoded
//! and the request no longer says it was coded; a decompression bomb is 413, garbage and cut
//! bodies 400, an unknown coding and a body read as it arrives 415, a handler without the
//! declaration 415; and the same over HTTP/2 with curl.
const std = @import("std");
const testing = std.testing;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const Client = @import("Client.zig");
const ServerThread = @import("server_thread.zig").ServerThread;

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const python = "/usr/bin/python3";

/// Echoes the decoded body, and says in fields what the request told the handler.
fn echo(req: *saker.Request, res: *saker.Response) !void {
    try res.header("X-Seen-Encoding", req.header("content-encoding") orelse "none");
    try res.header("X-Seen-Length", if (req.content_length) |n| try req.arena.print("{d}", .{n}) else "none");
    try res.header("X-Seen-Length-Field", req.header("content-length") orelse "none");
    try res.header("X-Seen-Coded", if (req.hasCodedBody()) "yes" else "no");
    res.content_type = "application/octet-stream";
    res.setBody(req.body());
}

const Echo = struct {
    pub const decodes_content_encoding = true;

    pub fn handle(_: *Echo, req: *saker.Request, res: *saker.Response) !void {
        return echo(req, res);
    }
};

/// Echo without the declaration.
const Refusing = struct {
    pub fn handle(_: *Refusing, req: *saker.Request, res: *saker.Response) !void {
        return echo(req, res);
    }
};

/// Chooses how each body is received by its path.
const Hooked = struct {
    pub const decodes_content_encoding = true;

    pub fn onHead(_: *Hooked, req: *saker.Request, _: *saker.Response) !saker.BodyAction {
        if (std.mem.eql(u8, req.path, "/stream")) return .stream;
        if (std.mem.eql(u8, req.path, "/reader")) return .reader;
        if (std.mem.eql(u8, req.path, "/skip")) return .skip;
        return .buffer;
    }

    pub fn onBody(_: *Hooked, _: *saker.Request, _: *saker.Response, _: []const u8) !void {}

    pub fn handle(_: *Hooked, req: *saker.Request, res: *saker.Response) !void {
        return echo(req, res);
    }
};

/// Makes a body in Python and codes it with Python's modules, the first coding named first;
/// writes the coded bytes to the file and the body to stdout. `zstd-stream` is a zstd frame
/// made by a streaming compressor (no content size in its header).
const code_script =
    \\import sys, gzip, zlib, brotli, zstandard
    \\out, kind, codings = sys.argv[1], sys.argv[2], sys.argv[3:]
    \\name, n = kind.split(":")
    \\n = int(n)
    \\if name == "zeros":
    \\    plain = bytes(n)
    \\else:
    \\    plain = "".join('{"id":%d,"name":"item %d","square":%d},\n' % (i, i, i * i) for i in range(n)).encode()
    \\data = plain
    \\for coding in codings:
    \\    if coding in ("gzip", "x-gzip"):
    \\        data = gzip.compress(data)
    \\    elif coding == "deflate":
    \\        data = zlib.compress(data)
    \\    elif coding == "br":
    \\        data = brotli.compress(data)
    \\    elif coding == "zstd":
    \\        data = zstandard.ZstdCompressor().compress(data)
    \\    elif coding == "zstd-stream":
    \\        o = zstandard.ZstdCompressor().compressobj()
    \\        data = o.compress(data) + o.flush()
    \\    else:
    \\        raise SystemExit("unknown coding " + coding)
    \\open(out, "wb").write(data)
    \\if name != "zeros":
    \\    sys.stdout.buffer.write(plain)
;

/// A body made and coded by Python (`code_script`), in a file of its own for curl.
const Coded = struct {
    tmp: testing.TmpDir,
    /// What the body decodes to ("" for zeros).
    plain: []u8,
    coded: []u8,
    /// `@path` of the coded file, for curl's `--data-binary`.
    data_arg: []u8,

    /// `kind` is `json:N` (N lines of JSON text) or `zeros:N` (N zero bytes); `codings` in
    /// the order applied.
    fn make(kind: []const u8, codings: []const []const u8) !Coded {
        var tmp = testing.tmpDir(.{});
        errdefer tmp.cleanup();
        const io = testing.io;
        const path = try tmp.dir.realPathFileAlloc(io, ".", testing.allocator);
        defer testing.allocator.free(path);
        const file = try std.fmt.allocPrint(testing.allocator, "{s}/coded.bin", .{path});
        defer testing.allocator.free(file);
        var argv: std.ArrayList([]const u8) = .empty;
        defer argv.deinit(testing.allocator);
        try argv.appendSlice(testing.allocator, &.{ python, "-c", code_script, file, kind });
        try argv.appendSlice(testing.allocator, codings);
        const result = std.process.run(testing.allocator, io, .{
            .argv = argv.items,
            .timeout = .{ .duration = .{ .raw = .fromSeconds(60), .clock = .awake } },
        }) catch |err| return skipWithout("python3", err);
        defer testing.allocator.free(result.stderr);
        errdefer testing.allocator.free(result.stdout);
        if (result.term != .exited or result.term.exited != 0) {
            std.debug.print("python3 failed: {s}\n", .{result.stderr});
            if (std.mem.find(u8, result.stderr, "ModuleNotFoundError") != null)
                return skipWithout("python3-brotli and python3-zstandard", error.FileNotFound);
            return error.PythonFailed;
        }
        const coded = try tmp.dir.readFileAlloc(io, "coded.bin", testing.allocator, .unlimited);
        errdefer testing.allocator.free(coded);
        return .{ .tmp = tmp, .plain = result.stdout, .coded = coded, .data_arg = try std.fmt.allocPrint(testing.allocator, "@{s}", .{file}) };
    }

    fn destroy(coded: *Coded) void {
        testing.allocator.free(coded.plain);
        testing.allocator.free(coded.coded);
        testing.allocator.free(coded.data_arg);
        coded.tmp.cleanup();
    }
};

const Framing = enum { length, chunked };

/// Sends `body` to `target` with `Content-Encoding: coding` (none when null) and a
/// Content-Length, or chunked in pieces of 1000 bytes; reads the response.
fn post(client: *Client, target: []const u8, coding: ?[]const u8, body: []const u8, framing: Framing) !Client.Response {
    var head: std.ArrayList(u8) = .empty;
    defer head.deinit(testing.allocator);
    try head.print(testing.allocator, "POST {s} HTTP/1.1\r\nHost: t\r\n", .{target});
    if (coding) |value| try head.print(testing.allocator, "Content-Encoding: {s}\r\n", .{value});
    switch (framing) {
        .length => {
            try head.print(testing.allocator, "Content-Length: {d}\r\n\r\n", .{body.len});
            try client.send(head.items);
            try client.send(body);
        },
        .chunked => {
            try head.appendSlice(testing.allocator, "Transfer-Encoding: chunked\r\n\r\n");
            var rest = body;
            while (rest.len > 0) {
                const piece = rest[0..@min(rest.len, 1000)];
                try head.print(testing.allocator, "{x}\r\n{s}\r\n", .{ piece.len, piece });
                rest = rest[piece.len..];
            }
            try head.appendSlice(testing.allocator, "0\r\n\r\n");
            try client.send(head.items);
        },
    }
    return client.readResponse(testing.allocator, .{});
}

fn expectStatus(response: Client.Response, status: u16, says: []const u8) !void {
    errdefer std.debug.print("{s}\n{s}\n", .{ response.raw_head, response.body[0..@min(response.body.len, 300)] });
    try testing.expectEqual(status, response.status);
    try testing.expect(std.mem.find(u8, response.body, says) != null);
}

test "body_decoding: bodies coded by Python arrive decoded on every engine, one coding or two stacked" {
    const Case = struct { field: []const u8, codings: []const []const u8 };
    const cases = [_]Case{
        .{ .field = "gzip", .codings = &.{"gzip"} },
        .{ .field = "x-gzip", .codings = &.{"gzip"} },
        .{ .field = "deflate", .codings = &.{"deflate"} },
        .{ .field = "br", .codings = &.{"br"} },
        .{ .field = "zstd", .codings = &.{"zstd"} },
        .{ .field = "ZSTD", .codings = &.{"zstd-stream"} },
        .{ .field = "gzip, br", .codings = &.{ "gzip", "br" } },
        .{ .field = "identity, deflate,zstd", .codings = &.{ "deflate", "zstd-stream" } },
    };
    // 30 lines (about 1 KiB, decoded through the scratch alone) and 4000 (about 180 KiB,
    // measured, then decoded into its own memory).
    var bodies: [cases.len * 2]Coded = undefined;
    var made: usize = 0;
    defer for (bodies[0..made]) |*body| body.destroy();
    for ([_][]const u8{ "json:30", "json:4000" }, 0..) |kind, k| {
        for (cases, 0..) |case, i| {
            bodies[k * cases.len + i] = try .make(kind, case.codings);
            made += 1;
        }
    }
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Echo).start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        for (bodies, 0..) |body, i| {
            const case = cases[i % cases.len];
            errdefer std.debug.print("{s}, {d} bytes coded, {d} decoded\n", .{ case.field, body.coded.len, body.plain.len });
            for ([_]Framing{ .length, .chunked }) |framing| {
                const response = try post(&client, "/", case.field, body.coded, framing);
                defer response.deinit(testing.allocator);
                try testing.expectEqual(@as(u16, 200), response.status);
                try testing.expectEqualSlices(u8, body.plain, response.body);
                try testing.expectEqualStrings("none", response.header("X-Seen-Encoding").?);
                try testing.expectEqualStrings("no", response.header("X-Seen-Coded").?);
                var digits: [16]u8 = undefined;
                const length = try std.mem.print(&digits, "{d}", .{body.plain.len});
                // Sent with a length, the request has the decoded one; sent chunked, none.
                try testing.expectEqualStrings(if (framing == .length) length else "none", response.header("X-Seen-Length").?);
                try testing.expectEqualStrings(if (framing == .length) length else "none", response.header("X-Seen-Length-Field").?);
            }
        }
    }
}

test "body_decoding: a bomb is 413 as it decodes, at decoded_body_bytes_max exactly, and the connection serves on" {
    // 10 MiB of zeros, coded to a few KiB; the decoded limit is body_bytes_max's 8 MiB.
    var bombs = [_]Coded{
        try .make("zeros:10485760", &.{"gzip"}),
        try .make("zeros:10485760", &.{"br"}),
        try .make("zeros:10485760", &.{"zstd"}),
        try .make("zeros:10485760", &.{"zstd-stream"}),
        try .make("zeros:10485760", &.{ "gzip", "gzip" }),
    };
    defer for (&bombs) |*bomb| bomb.destroy();
    const fields = [_][]const u8{ "gzip", "br", "zstd", "zstd", "gzip, gzip" };
    var small: Coded = try .make("json:4000", &.{"gzip"});
    defer small.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        {
            const running = try ServerThread(Echo).start(kind, .{});
            defer running.stop();
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            for (bombs, fields) |bomb, field| {
                errdefer std.debug.print("{s}: {d} bytes\n", .{ field, bomb.coded.len });
                try testing.expect(bomb.coded.len < 64 * 1024);
                const refused = try post(&client, "/", field, bomb.coded, .length);
                defer refused.deinit(testing.allocator);
                try expectStatus(refused, 413, "decodes to more than 8388608 bytes");
                const served = try post(&client, "/", "gzip", small.coded, .length);
                defer served.deinit(testing.allocator);
                try testing.expectEqual(@as(u16, 200), served.status);
                try testing.expectEqualSlices(u8, small.plain, served.body);
            }
        }
        // The limit is the decoded length: taken at it, refused one byte below.
        for ([_]u64{ small.plain.len, small.plain.len - 1 }) |limit| {
            const running = try ServerThread(Echo).start(kind, .{ .decoded_body_bytes_max = limit });
            defer running.stop();
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            const response = try post(&client, "/", "gzip", small.coded, .length);
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, if (limit == small.plain.len) 200 else 413), response.status);
        }
    }
}

test "body_decoding: garbage and cut bodies are 400, unknown codings 415, and 415 without the declaration" {
    var body: Coded = try .make("json:100", &.{"br"});
    defer body.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        {
            const running = try ServerThread(Echo).start(kind, .{});
            defer running.stop();
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            const Case = struct { field: []const u8, body: []const u8, status: u16, says: []const u8 };
            const cases = [_]Case{
                .{ .field = "gzip", .body = "this is not gzip", .status = 400, .says = "not valid gzip data" },
                .{ .field = "deflate", .body = "nor is this deflate", .status = 400, .says = "not valid deflate data" },
                .{ .field = "zstd", .body = "nor zstd", .status = 400, .says = "not valid zstd data" },
                .{ .field = "br", .body = body.coded[0 .. body.coded.len - 2], .status = 400, .says = "ends before its br data does" },
                .{ .field = "gzip, br", .body = body.coded, .status = 400, .says = "not valid gzip data" },
                .{ .field = "compress", .body = body.coded, .status = 415, .says = "does not decode" },
                .{ .field = "br, x-bzip2", .body = body.coded, .status = 415, .says = "does not decode" },
                .{ .field = "br, br, br, br, br", .body = body.coded, .status = 415, .says = "more than 4" },
            };
            for (cases) |case| {
                errdefer std.debug.print("{s}\n", .{case.field});
                const response = try post(&client, "/", case.field, case.body, .length);
                defer response.deinit(testing.allocator);
                try expectStatus(response, case.status, case.says);
                if (case.status == 415) try testing.expectEqualStrings("zstd, br, gzip, deflate", response.header("Accept-Encoding").?);
                // A refusal before the body was read closes the connection.
                if (response.header("Connection")) |value| if (std.ascii.eqlIgnoreCase(value, "close")) {
                    client.close();
                    client = try Client.connect(running.port(), 10_000);
                };
            }
            // The body the handler sees as it came: identity.
            const plain = try post(&client, "/", null, body.plain, .length);
            defer plain.deinit(testing.allocator);
            try testing.expectEqualSlices(u8, body.plain, plain.body);
        }
        const running = try ServerThread(Refusing).start(kind, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        const refused = try post(&client, "/", "br", body.coded, .length);
        defer refused.deinit(testing.allocator);
        try expectStatus(refused, 415, "not accepted here");
        try testing.expectEqualStrings("identity", refused.header("Accept-Encoding").?);
    }
}

test "body_decoding: a coded body read as it arrives is 415; one onHead skips reaches handle as it came" {
    var body: Coded = try .make("json:100", &.{"zstd"});
    defer body.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Hooked).start(kind, .{ .handler_threads = if (kind == .epoll or kind == .io_uring) 2 else 0 });
        defer running.stop();
        for ([_][]const u8{ "/stream", "/reader" }) |target| {
            errdefer std.debug.print("{s}\n", .{target});
            {
                // Closed before the next connection: over HTTP/2 the server keeps it open,
                // and the blocking engine serves one connection at a time.
                var client = try Client.connect(running.port(), 10_000);
                defer client.close();
                const refused = try post(&client, target, "zstd", body.coded, .length);
                defer refused.deinit(testing.allocator);
                try expectStatus(refused, 415, "read as it arrives");
                try testing.expectEqualStrings("identity", refused.header("Accept-Encoding").?);
            }
            // Without a coding it is read as asked.
            var again = try Client.connect(running.port(), 10_000);
            defer again.close();
            const served = try post(&again, target, null, body.plain, .length);
            defer served.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 200), served.status);
        }
        {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            const skipped = try post(&client, "/skip", "zstd", body.coded, .length);
            defer skipped.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 200), skipped.status);
            try testing.expectEqualStrings("zstd", skipped.header("X-Seen-Encoding").?);
            try testing.expectEqualStrings("yes", skipped.header("X-Seen-Coded").?);
            try testing.expectEqual(0, skipped.body.len);
        }
        var buffered_client = try Client.connect(running.port(), 10_000);
        defer buffered_client.close();
        const buffered = try post(&buffered_client, "/buffer", "zstd", body.coded, .length);
        defer buffered.deinit(testing.allocator);
        try testing.expectEqualSlices(u8, body.plain, buffered.body);
    }
}

test "body_decoding: over HTTP/2 curl's coded uploads arrive decoded, and a bomb is 413" {
    var bodies = [_]Coded{
        try .make("json:4000", &.{"gzip"}),
        try .make("json:4000", &.{"br"}),
        try .make("json:4000", &.{"zstd-stream"}),
        try .make("json:4000", &.{ "deflate", "br" }),
    };
    defer for (&bodies) |*body| body.destroy();
    const fields = [_][]const u8{ "gzip", "br", "zstd", "deflate, br" };
    var bomb: Coded = try .make("zeros:10485760", &.{"br"});
    defer bomb.destroy();
    const io = testing.io;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try ServerThread(Echo).start(kind, .{});
        defer running.stop();
        var url_buffer: [64]u8 = undefined;
        const url = if (Client.overTls())
            try std.mem.print(&url_buffer, "https://127.0.0.1:{d}/", .{running.port()})
        else
            try std.mem.print(&url_buffer, "http://127.0.0.1:{d}/", .{running.port()});
        const version = if (Client.overTls()) "--http2" else "--http2-prior-knowledge";
        for (bodies, fields) |body, field| {
            errdefer std.debug.print("{s}\n", .{field});
            var header: [64]u8 = undefined;
            const result = std.process.run(testing.allocator, io, .{
                .argv = &.{ "curl", "--silent", "--show-error", "--insecure", version, "--data-binary", body.data_arg, "-H", try std.mem.print(&header, "Content-Encoding: {s}", .{field}), "-w", "\n%{http_code} %{http_version}", url },
                .timeout = .{ .duration = .{ .raw = .fromSeconds(30), .clock = .awake } },
            }) catch |err| return skipWithout("curl", err);
            defer testing.allocator.free(result.stdout);
            defer testing.allocator.free(result.stderr);
            const end = std.mem.findScalarLast(u8, result.stdout, '\n') orelse return error.TestUnexpectedResult;
            try testing.expectEqualStrings("200 2", result.stdout[end + 1 ..]);
            try testing.expectEqualSlices(u8, body.plain, result.stdout[0..end]);
        }
        var header: [64]u8 = undefined;
        const result = std.process.run(testing.allocator, io, .{
            .argv = &.{ "curl", "--silent", "--show-error", "--insecure", version, "--data-binary", bomb.data_arg, "-H", try std.mem.print(&header, "Content-Encoding: br", .{}), "-o", "/dev/null", "-w", "%{http_code} %{http_version}", url },
            .timeout = .{ .duration = .{ .raw = .fromSeconds(30), .clock = .awake } },
        }) catch |err| return skipWithout("curl", err);
        defer testing.allocator.free(result.stdout);
        defer testing.allocator.free(result.stderr);
        try testing.expectEqualStrings("413 2", result.stdout);
    }
}
