//! Fuzz targets for everything that reads bytes from the network: the request parser, the
//! chunked decoder and a whole connection. Each checks a property, not just "no crash":
//! - the parser gives the same answer however its input is split;
//! - the decoder gives the same bytes (or error) however its input is split;
//! - a connection fed any bytes, cut anywhere, writes a well-framed sequence of responses,
//!   terminates, and returns every buffer.
//! `zig build test` replays the corpus below once per entry; `zig build fuzz --fuzz=N` fuzzes
//! (ReleaseFast; a failure prints the input and saves it under .zig-cache/f/).
const std = @import("std");
const testing = std.testing;
const http = @import("http.zig");
const RequestParser = @import("http1/RequestParser.zig");
const ChunkedDecoder = @import("http1/ChunkedDecoder.zig");
const Config = @import("Config.zig");
const Worker = @import("Worker.zig");
const Arena = @import("Arena.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const Simulation = @import("testing/Simulation.zig");

/// A corpus entry for a target that starts with `smith.slice`: a little-endian u32 length,
/// then the bytes.
fn entry(comptime bytes: []const u8) []const u8 {
    comptime {
        var out: [4 + bytes.len]u8 = undefined;
        std.mem.writeInt(u32, out[0..4], bytes.len, .little);
        @memcpy(out[4..], bytes);
        const final = out;
        return &final;
    }
}

const request_corpus = [_][]const u8{
    entry("GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
    entry("POST /f?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"),
    entry("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: 1\r\n\r\n"),
    entry("GET http://a.example/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"),
    entry("\r\nGET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nHEAD /2 HTTP/1.1\r\nHost: a\r\n\r\n"),
    entry("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc"),
    entry("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"),
    entry("GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n"),
    entry("OPTIONS * HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz"),
    entry("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"),
};

fn fuzzRequestParser(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [1024]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    const limits: RequestParser.Limits = .{ .request_line_bytes_max = 256, .header_bytes_max = 512 };
    var whole_storage: [8]http.Header = undefined;
    var whole: RequestParser = .init(&whole_storage, limits);
    const whole_result = whole.feed(input);

    var split_storage: [8]http.Header = undefined;
    var split: RequestParser = .init(&split_storage, limits);
    var prng: std.Random.DefaultPrng = .init(smith.value(u64));
    var end: usize = 0;
    const split_result: RequestParser.Error!RequestParser.Progress = while (true) {
        end = @min(input.len, end + 1 + prng.random().uintLessThan(usize, 64));
        const progress = split.feed(input[0..end]) catch |err| break err;
        if (progress == .complete or end == input.len) break progress;
    };
    if (whole_result) |progress| {
        try testing.expectEqual(progress, try split_result);
        if (progress == .complete) {
            try testing.expectEqual(whole.head.len, split.head.len);
            try testing.expect(whole.head.len <= input.len);
            try testing.expectEqual(whole.head.headers.len, split.head.headers.len);
            try testing.expectEqual(whole.head.framing, split.head.framing);
            for (whole.head.headers) |header| {
                try testing.expect(within(input, header.name) and within(input, header.value));
                try testing.expect(header.name.len > 0);
            }
            try testing.expect(within(input, whole.head.target));
        }
    } else |err| {
        try testing.expectError(err, split_result);
    }
}

fn within(outer: []const u8, inner: []const u8) bool {
    const start = @intFromPtr(outer.ptr);
    const p = @intFromPtr(inner.ptr);
    return inner.len == 0 or (p >= start and p + inner.len <= start + outer.len);
}

test "fuzz: the request parser agrees with itself however the input is split" {
    try testing.fuzz({}, fuzzRequestParser, .{ .corpus = &request_corpus });
}

const chunked_corpus = [_][]const u8{
    entry("5\r\nhello\r\n0\r\n\r\n"),
    entry("3;a=b;c\r\nabc\r\n0\r\nX: y\r\n\r\n"),
    entry("1 ;x\r\nz\r\n0\r\n\r\n"),
    entry("ffffffffffffffffff\r\n"),
    entry("5\nhello\r\n0\r\n\r\n"),
    entry("2;a\x00\r\nhi\r\n0\r\n\r\n"),
};

fn decode(input: []const u8, cut_seed: ?u64, out: []u8) (ChunkedDecoder.Error || error{Incomplete})![]u8 {
    var decoder: ChunkedDecoder = .init(.{ .extension_bytes_max = 64, .trailer_bytes_max = 128 });
    var prng: std.Random.DefaultPrng = .init(cut_seed orelse 0);
    var pos: usize = 0;
    var out_len: usize = 0;
    while (!decoder.done()) {
        if (pos == input.len) return error.Incomplete;
        const step = if (cut_seed == null) input.len - pos else 1 + prng.random().uintLessThan(usize, @min(16, input.len - pos));
        const output = try decoder.feed(input[pos..][0..step]);
        @memcpy(out[out_len..][0..output.data.len], output.data);
        out_len += output.data.len;
        pos += output.consumed;
    }
    return out[0..out_len];
}

fn fuzzChunkedDecoder(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [1024]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    var out_whole: [1024]u8 = undefined;
    var out_split: [1024]u8 = undefined;
    const whole = decode(input, null, &out_whole);
    const split = decode(input, smith.value(u64), &out_split);
    if (whole) |bytes| {
        try testing.expectEqualSlices(u8, bytes, try split);
        try testing.expect(bytes.len <= input.len);
    } else |err| {
        try testing.expectError(err, split);
    }
}

test "fuzz: the chunked decoder agrees with itself however the input is split" {
    try testing.fuzz({}, fuzzChunkedDecoder, .{ .corpus = &chunked_corpus });
}

const EchoHandler = struct {
    fn handle(_: *anyopaque, req: *Request, res: *Response) anyerror!void {
        if (std.mem.eql(u8, req.path, "/fail")) return error.Fails;
        // Tells the framing check that no body follows this head.
        if (req.method == .HEAD) try res.header("X-Head", "1");
        try res.print("{s} {d}", .{ req.path, req.body().len });
    }
};

/// Checks that `output` is a sequence of complete responses: each head ends with CRLFCRLF and
/// says how long its body is (or has none). Returns how many there were.
fn expectWellFramed(output: []const u8) !usize {
    var rest = output;
    var count: usize = 0;
    while (rest.len > 0) : (count += 1) {
        try testing.expect(std.mem.startsWith(u8, rest, "HTTP/1.1 "));
        const head_end = (std.mem.find(u8, rest, "\r\n\r\n") orelse return error.TestUnframed) + 4;
        const head = rest[0..head_end];
        const status = try std.fmt.parseInt(u16, rest[9..12], 10);
        var body_len: usize = 0;
        if (std.mem.find(u8, head, "\r\nX-Head: 1\r\n") != null) {
            body_len = 0;
        } else if (std.mem.find(u8, head, "\r\nContent-Length: ")) |i| {
            const digits = head[i + 18 ..];
            body_len = try std.fmt.parseInt(usize, digits[0..std.mem.findScalar(u8, digits, '\r').?], 10);
        } else {
            try testing.expect(status < 200 or status == 204 or status == 304);
        }
        try testing.expect(rest.len >= head_end + body_len);
        rest = rest[head_end + body_len ..];
    }
    return count;
}

fn fuzzConnection(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [2048]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    const seed = smith.value(u64);
    const config: Config = .{
        .recv_buffer_bytes = 1024,
        .request_line_bytes_max = 512,
        .header_bytes_max = 2048,
        .body_bytes_max = 4096,
        .send_buffer_bytes = 2048,
        .arena_bytes = 1024,
    };
    var budget: Arena.Budget = .init(1 << 20);
    var context: u8 = 0;
    var worker: Worker = undefined;
    try worker.init(testing.allocator, &config, .{ .context = &context, .handle = EchoHandler.handle }, .{
        .connections_max = 1,
        .large_buffers_max = 1,
        .budget = &budget,
    });
    defer worker.deinit();
    worker.date.update(784111777);
    const result = try Simulation.run(testing.allocator, &worker, input, .{ .cuts = .{ .random = .{ .seed = seed, .max = 97 } } });
    defer testing.allocator.free(result.output);
    _ = try expectWellFramed(result.output);
    try testing.expectEqual(@as(u32, 0), worker.exchanges_busy);
    try testing.expectEqual(@as(u64, 1 << 20), budget.remaining.load(.monotonic));
}

test "fuzz: a connection fed any bytes writes well-framed responses and frees everything" {
    try testing.fuzz({}, fuzzConnection, .{ .corpus = &request_corpus });
}
