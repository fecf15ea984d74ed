//! Micro-benchmarks of the hot path, on fixed realistic input:
//! - request parsing: a ~500-byte browser request with 10 header fields;
//! - response head serialisation: status line, Date, Content-Type, Content-Length.
//! Prints ns of thread CPU time per operation (median of several runs). `zig build bench`;
//! ReleaseFast always.
//! The tests at the bottom run the same code once for correctness (no timing assertions).
const std = @import("std");
const saker = @import("saker");
const linux = std.os.linux;

/// A request as a desktop browser sends it: 10 header fields, 500-odd bytes.
pub const browser_request =
    "GET /products/search?q=mechanical+keyboard&sort=price_asc&page=2 HTTP/1.1\r\n" ++
    "Host: shop.example.com\r\n" ++
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36\r\n" ++
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n" ++
    "Accept-Language: en-US,en;q=0.9,de;q=0.8\r\n" ++
    "Accept-Encoding: gzip, deflate, br, zstd\r\n" ++
    "Referer: https://shop.example.com/products?category=keyboards\r\n" ++
    "Cookie: session=8f2a1c9e4b7d6a3f; theme=dark; consent=1\r\n" ++
    "Connection: keep-alive\r\n" ++
    "Upgrade-Insecure-Requests: 1\r\n" ++
    "Sec-Fetch-Mode: navigate\r\n" ++
    "\r\n";

/// Parses `browser_request` once; returns the number of header fields (for checking).
pub fn parseOnce(parser: *saker.http1.RequestParser) usize {
    parser.reset();
    const progress = parser.feed(browser_request) catch unreachable; // fixed valid input
    std.debug.assert(progress == .complete);
    return parser.head.headers.len;
}

/// The variable parts of a typical response head. The benchmark keeps them in memory that
/// every round may change (`doNotOptimizeAway`), so the head is written from runtime values
/// as in a server, not folded into constants by the compiler.
pub const HeadFields = struct {
    status: saker.http.Status = .ok,
    content_type: []const u8 = "text/plain",
    length: u64 = 13,
};

/// Writes a typical response head once; returns its length.
pub fn writeHeadOnce(buffer: []u8, date: *const saker.DateCache, fields: *const HeadFields) usize {
    const head: saker.http1.ResponseHead = .{
        .status = fields.status,
        .date_line = date.line(),
        .content_type = fields.content_type,
        .framing = .{ .length = fields.length },
    };
    return head.write(buffer).len;
}

/// What wrk sends, 16 deep: the pipelined benchmark's request.
const pipelined_request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";
const pipeline_depth = 16;
const pipelined_input: [pipelined_request.len * pipeline_depth]u8 = blk: {
    var bytes: [pipelined_request.len * pipeline_depth]u8 = undefined;
    for (0..pipeline_depth) |i| @memcpy(bytes[i * pipelined_request.len ..][0..pipelined_request.len], pipelined_request);
    break :blk bytes;
};

const Hello = struct {
    fn handle(_: *anyopaque, _: *saker.Request, res: *saker.Response) anyerror!void {
        res.content_type = "text/plain";
        res.setBody("Hello, World!");
    }
};

/// One read of 16 pipelined requests through a connection, and the one write of their
/// responses: everything saker does per request apart from the syscalls themselves.
/// Returns the bytes the connection would write.
pub fn connectionCycle(connection: *saker.Connection, input: []const u8) usize {
    const buffer = connection.recvBuffer().?;
    @memcpy(buffer[0..input.len], input);
    connection.onRecv(input.len);
    var written: usize = 0;
    while (true) switch (connection.next()) {
        .send => |iovecs| {
            var n: usize = 0;
            for (iovecs) |iov| n += iov.len;
            written += n;
            connection.onSend(n);
        },
        .recv => return written,
        else => |other| std.debug.panic("unexpected {t} after {d} bytes", .{ other, written }), // hello keeps the connection open
    };
}

/// This thread's CPU time: on a shared machine, time spent descheduled does not count.
fn nowNs() u64 {
    var ts: linux.timespec = undefined;
    _ = linux.clock_gettime(.THREAD_CPUTIME_ID, &ts);
    return @as(u64, @intCast(ts.sec)) * std.time.ns_per_s + @as(u64, @intCast(ts.nsec));
}

const runs = 7;

/// Times `runs` runs of `rounds` calls of `op.once()`, each standing for `per_round`
/// operations; returns the median in picoseconds per operation.
fn timeMedian(op: anytype, rounds: usize, per_round: usize) u64 {
    var results: [runs]u64 = undefined;
    for (&results) |*result| {
        const start = nowNs();
        var sink: usize = 0;
        for (0..rounds) |_| {
            sink +%= op.once();
            std.mem.doNotOptimizeAway(op);
        }
        std.mem.doNotOptimizeAway(sink);
        result.* = (nowNs() - start) * 1000 / (rounds * per_round);
    }
    std.mem.sort(u64, &results, {}, std.sort.asc(u64));
    return results[runs / 2];
}

const ParseOp = struct {
    parser: saker.http1.RequestParser,
    fn once(op: *ParseOp) usize {
        return parseOnce(&op.parser);
    }
};

const HeadOp = struct {
    buffer: [256]u8 = undefined,
    date: *const saker.DateCache,
    fields: HeadFields = .{},
    fn once(op: *HeadOp) usize {
        return writeHeadOnce(&op.buffer, op.date, &op.fields);
    }
};

const CycleOp = struct {
    connection: *saker.Connection,
    input: []const u8,
    fn once(op: *CycleOp) usize {
        return connectionCycle(op.connection, op.input);
    }
};

/// The benchmarks, by the name that runs one alone (`bench-micro N NAME`, e.g. under
/// `valgrind --tool=callgrind`, which counts instructions repeatably on a noisy machine).
const Benchmark = enum { parse, head, pipelined, single };

pub fn main(init: std.process.Init) !void {
    const args = try init.minimal.args.toSlice(init.arena.allocator());
    const iterations: usize = if (args.len > 1) try std.fmt.parseInt(usize, args[1], 10) else 2_000_000;
    const only: ?Benchmark = if (args.len > 2) std.meta.stringToEnum(Benchmark, args[2]) orelse {
        std.debug.print("usage: bench-micro [ITERATIONS] [parse|head|pipelined|single]\n", .{});
        std.process.exit(2);
    } else null;
    var out_buffer: [512]u8 = undefined;
    var out: std.Io.File.Writer = .initStreaming(.stdout(), init.io, &out_buffer);
    const w = &out.interface;

    if (only == null or only == .parse) {
        var storage: [64]saker.http.Header = undefined;
        var op: ParseOp = .{ .parser = .init(&storage, .{}) };
        const ps = timeMedian(&op, iterations, 1);
        try w.print("request parse ({d} bytes, 10 fields): {d}.{d:0>3} ns/request (median of {d} x {d})\n", .{
            browser_request.len, ps / 1000, ps % 1000, runs, iterations,
        });
    }

    var date: saker.DateCache = .{};
    date.update(1795317694);
    if (only == null or only == .head) {
        var op: HeadOp = .{ .date = &date };
        const ps = timeMedian(&op, iterations, 1);
        try w.print("response head ({d} bytes):           {d}.{d:0>3} ns/response\n", .{
            writeHeadOnce(&op.buffer, &date, &op.fields), ps / 1000, ps % 1000,
        });
    }

    var budget: saker.Arena.Budget = .init(1 << 20);
    // One connection carries every benchmarked request.
    const config: saker.Config = .{ .requests_per_connection_max = std.math.maxInt(u32) };
    var context: u8 = 0;
    var worker: saker.Worker = undefined;
    try worker.init(init.gpa, &config, .{ .context = &context, .handle = Hello.handle }, .{
        .connections_max = 1,
        .large_buffers_max = 1,
        .budget = &budget,
    });
    defer worker.deinit();
    worker.date.update(1795317694);
    var connection: saker.Connection = .init(&worker);
    defer connection.deinit();
    const cycles = @max(iterations / pipeline_depth, 1);
    if (only == null or only == .pipelined) {
        var op: CycleOp = .{ .connection = &connection, .input = &pipelined_input };
        const ps = timeMedian(&op, cycles, pipeline_depth);
        try w.print("connection, 16 pipelined requests:   {d}.{d:0>3} ns/request (parse, handler, head, batch)\n", .{
            ps / 1000, ps % 1000,
        });
    }
    if (only == null or only == .single) {
        var op: CycleOp = .{ .connection = &connection, .input = pipelined_input[0..pipelined_request.len] };
        const ps = timeMedian(&op, cycles, 1);
        try w.print("connection, 1 request per read:      {d}.{d:0>3} ns/request (the same, keep-alive)\n", .{
            ps / 1000, ps % 1000,
        });
    }
    try w.flush();
}

test "micro: the benchmarked request parses as expected" {
    var storage: [64]saker.http.Header = undefined;
    var parser: saker.http1.RequestParser = .init(&storage, .{});
    try std.testing.expectEqual(@as(usize, 10), parseOnce(&parser));
    try std.testing.expectEqualStrings("/products/search", parser.head.path);
    try std.testing.expect(browser_request.len > 450 and browser_request.len < 600);
}

test "micro: the connection cycle answers all 16 pipelined requests in one write" {
    var budget: saker.Arena.Budget = .init(1 << 20);
    const config: saker.Config = .{};
    var context: u8 = 0;
    var worker: saker.Worker = undefined;
    try worker.init(std.testing.allocator, &config, .{ .context = &context, .handle = Hello.handle }, .{
        .connections_max = 1,
        .large_buffers_max = 1,
        .budget = &budget,
    });
    defer worker.deinit();
    worker.date.update(784111777);
    var connection: saker.Connection = .init(&worker);
    defer connection.deinit();
    const one_response = "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Type: text/plain\r\n" ++
        "Content-Length: 13\r\n\r\nHello, World!";
    for (0..3) |_| {
        try std.testing.expectEqual(one_response.len * pipeline_depth, connectionCycle(&connection, &pipelined_input));
    }
}

test "micro: the benchmarked head is what a client should get" {
    var date: saker.DateCache = .{};
    date.update(784111777);
    var buffer: [256]u8 = undefined;
    const len = writeHeadOnce(&buffer, &date, &.{});
    try std.testing.expectEqualStrings("HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n" ++
        "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n", buffer[0..len]);
}
