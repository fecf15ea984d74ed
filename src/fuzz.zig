//! Fuzz targets for everything that reads bytes from the network: the request parser, the
//! chunked decoder, a whole connection, the WebSocket frame parser and a WebSocket session.
//! Each checks a property, not just "no crash":
//! - the parser gives the same answer however its input is split, and with or without its
//!   fast paths (short heads, field blocks);
//! - the decoder gives the same bytes (or error) however its input is split;
//! - a connection fed any bytes, cut anywhere, writes a well-framed sequence of responses,
//!   terminates, and returns every buffer;
//! - the frame header parser needs more bytes for every proper prefix of a header and then
//!   gives the same header;
//! - an HTTP/2 session fed any frames after the preface, whole or cut anywhere, writes whole
//!   frames, terminates, and returns every buffer;
//! - a WebSocket session (with or without permessage-deflate) fed any frames, cut anywhere,
//!   answers with well-formed server frames (at most one close, last, with a code allowed on
//!   the wire), terminates, and returns every buffer;
//! - `Accept-Encoding` negotiation answers any bytes with an offered coding (or identity), the
//!   same whether the field comes whole, cut into several lines at a comma, or uppercased;
//! - a request body in a content coding decodes to the same bytes (or fails) whole and fed in
//!   pieces through small buffers, never past its limit, freeing everything.
//! `zig build test` replays the corpus below once per entry; `zig build fuzz --fuzz=N` fuzzes
//! (ReleaseFast; a failure prints the input and saves it under .zig-cache/f/).
const std = @import("std");
const assert = std.debug.assert;
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
const websocket = @import("websocket.zig");
const frame = websocket.frame;
const http2 = @import("http2.zig");
const proxy_header = @import("proxy_header.zig");
const compress = @import("compress.zig");

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
    // Short heads (64 bytes at most), which `feed` takes on its short path.
    entry("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\nGET /?q HTTP/1.0\r\nHost: [::1]:1\r\n\r\n"),
    entry("POST /f?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"),
    entry("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: 1\r\n\r\n"),
    entry("GET http://a.example/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"),
    entry("\r\nGET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nHEAD /2 HTTP/1.1\r\nHost: a\r\n\r\n"),
    entry("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc"),
    entry("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"),
    entry("GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n"),
    entry("OPTIONS * HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz"),
    entry("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"),
    // Longer than the fast path's 64-byte blocks: lines and names across block boundaries.
    entry("GET /search?q=x HTTP/1.1\r\nHost: shop.example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" ++
        "Accept: text/html,application/xhtml+xml;q=0.9\r\nX_Odd.Name: 1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n"),
    entry("POST /u HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\nContent-Length: 40\r\n\r\n" ++
        "\x00\x01\r\r\n\n\x7f\x00\x01\r\r\n\n\x7f\x00\x01\r\r\n\n\x7f\x00\x01\r\r\n\n\x7f\x00\x01\r\r\n\n\x7f\x00\x01\r\r\n\n\x7f"),
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
    // The block fast path and the line-by-line parser agree exactly.
    var lines_storage: [8]http.Header = undefined;
    var lines: RequestParser = .init(&lines_storage, limits);
    const lines_result = lines.feedLineByLine(input);
    if (lines_result) |progress| {
        try testing.expectEqual(progress, try whole_result);
        if (progress == .complete) try expectSameHead(lines.head, whole.head);
    } else |err| try testing.expectError(err, whole_result);

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

fn expectSameHead(expected: RequestParser.Head, actual: RequestParser.Head) !void {
    try testing.expectEqual(expected.len, actual.len);
    try testing.expectEqual(expected.headers.len, actual.headers.len);
    for (expected.headers, actual.headers) |e, a| {
        try testing.expectEqual(e.name.ptr, a.name.ptr);
        try testing.expectEqual(e.name.len, a.name.len);
        try testing.expectEqual(e.value.ptr, a.value.ptr);
        try testing.expectEqual(e.value.len, a.value.len);
    }
    try testing.expectEqual(expected.framing, actual.framing);
    try testing.expectEqual(expected.keep_alive, actual.keep_alive);
    try testing.expectEqual(expected.expect_continue, actual.expect_continue);
    try testing.expectEqual(expected.connection_upgrade, actual.connection_upgrade);
    try testing.expectEqual(expected.host == null, actual.host == null);
    if (expected.host) |host| try testing.expectEqual(host.ptr, actual.host.?.ptr);
}

fn within(outer: []const u8, inner: []const u8) bool {
    const start = @intFromPtr(outer.ptr);
    const p = @intFromPtr(inner.ptr);
    return inner.len == 0 or (p >= start and p + inner.len <= start + outer.len);
}

test "fuzz: the request parser agrees with itself however the input is split and parsed" {
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

/// Masked client frames (mask 37 fa 21 3d), as a corpus entry's bytes.
fn clientFrames(comptime frames: []const struct { b0: u8, payload: []const u8 }) []const u8 {
    comptime {
        var out: []const u8 = "";
        for (frames) |f| {
            const len = f.payload.len;
            assert(len < 126);
            const mask = [4]u8{ 0x37, 0xfa, 0x21, 0x3d };
            var masked: [len]u8 = undefined;
            for (&masked, f.payload, 0..) |*m, byte, i| m.* = byte ^ mask[i % 4];
            out = out ++ [_]u8{ f.b0, 0x80 | len } ++ mask ++ masked;
        }
        return out;
    }
}

const websocket_corpus = [_][]const u8{
    entry(clientFrames(&.{ .{ .b0 = 0x81, .payload = "Hello" }, .{ .b0 = 0x88, .payload = "\x03\xe8bye" } })),
    entry(clientFrames(&.{
        .{ .b0 = 0x01, .payload = "Hel" }, .{ .b0 = 0x89, .payload = "ping" },
        .{ .b0 = 0x80, .payload = "lo" },  .{ .b0 = 0x82, .payload = "\x00\xff" },
        .{ .b0 = 0x8a, .payload = "" },    .{ .b0 = 0x88, .payload = "" },
    })),
    // RFC 7692 §7.2.3.1 and §7.2.3.2, compressed (RSV1), then fragmented.
    entry(clientFrames(&.{
        .{ .b0 = 0xc1, .payload = "\xf2\x48\xcd\xc9\xc9\x07\x00" },
        .{ .b0 = 0x41, .payload = "\xf2\x00" },
        .{ .b0 = 0x80, .payload = "\x11\x00\x00" },
    })),
    entry(clientFrames(&.{ .{ .b0 = 0x81, .payload = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5" }, .{ .b0 = 0x81, .payload = "\xed\xa0\x80" } })),
    entry(clientFrames(&.{ .{ .b0 = 0x88, .payload = "\x03\xed" }, .{ .b0 = 0x83, .payload = "" } })),
    entry("\x82\xfe\x01\x00\x37\xfa\x21\x3d" ++ @as([40]u8, @splat(0x4f))),
    entry("\x81\x05Hello\x81\xff\x80\x00\x00\x00\x00\x00\x00\x00"),
    // The handler closes with a code made from the length: 655 must go out as 1000.
    entry(clientFrames(&.{.{ .b0 = 0x81, .payload = "close" }})), // Found by the fuzzer: (the raw input, with its length and seed).
    "\x9b\x00\x00\x00\xc2\x80\xd9\xf5\x5e\xbe\x41\xd4\xc1\x87\x37\xfa\xf4\xf3\xae\x05\x41\x9c\xe3\xeb" ++
        "\xe4\x66\xe5\x00\x2a\xa6\x30\xb2\x1c\x55\xe5\x1a\x05\x4f\xa7\x95\x86\xfb\xa7\xab\xca\xc2\x80\xd9" ++
        "\xf5\x5e\xbe\x41\xd4\xe3\x1b\xb5\x90\x92\x15\x14\x27\xf4\xb5\xa5\x48\x52\xa3\xf4\x5c\xe4\x80\x98" ++
        "\x8e\xfe\x8b\xb9\x67\x1f\xb0\x8c\x8c\x4e\xf7\xa3\x08\xeb\xe7\xdb\xd6\xbf\xf8\x7c\xa7\x9b\x0c\x7e" ++
        "\x8b\x4f\x3a\xd4\xf5\x90\xe0\x4a\x21\x3d\xc5\xb2\xec\xf4\xfe\xfd\x21\x41\x82\x37\xfa\x21\x3d\xc5" ++
        "\xfa\x80\x75\x77\xba\xd8\x53\x5d\xa5\x5b\x1c\xce\xc8\x0f\xfe\x09\xa5\x2d\xaa\xf7\x83\x64\xfe\x28" ++
        "\x78\x66\x91\xf8\x63\x9d\xcf\x57\xaf\x20\xd0\xf8\x68\x4d\x54\x25\xca\x9b\xf0\x15\xa0\x9d\x42",
};

fn fuzzFrameHeader(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [frame.header_bytes_max + 2]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    const whole = frame.parseHeader(input) catch |err| {
        try testing.expectEqual(error.LengthTooLarge, err);
        return;
    };
    const parsed = whole orelse {
        // Not enough: neither is any prefix.
        for (0..input.len) |n| try testing.expectEqual(@as(?frame.Parsed, null), try frame.parseHeader(input[0..n]));
        return;
    };
    try testing.expect(parsed.len >= 2 and parsed.len <= frame.header_bytes_max and parsed.len <= input.len);
    for (0..parsed.len) |n| try testing.expectEqual(@as(?frame.Parsed, null), try frame.parseHeader(input[0..n]));
    try testing.expectEqual(parsed, (try frame.parseHeader(input[0..parsed.len])).?);
    try testing.expect(parsed.header.payload_len >> 63 == 0);
}

test "fuzz: the WebSocket frame header parser needs every byte of a header, then agrees with itself" {
    try testing.fuzz({}, fuzzFrameHeader, .{ .corpus = &websocket_corpus });
}

const WebSocketEcho = struct {
    fn handle(_: *anyopaque, req: *Request, res: *Response) anyerror!void {
        if (req.isWebSocketUpgrade()) return res.upgradeWebSocket(req, .{});
        res.setBody("not a websocket");
    }

    fn onMessage(_: *anyopaque, conn: websocket.Conn, message: websocket.Message) anyerror!void {
        // Any code (a forbidden one goes out as 1000), and a reason that may be too long.
        if (std.mem.startsWith(u8, message.data, "close")) return conn.close(@fromBackingInt(@as(u16, @truncate(message.data.len *% 131))), message.data);
        try conn.send(message.kind, message.data);
    }

    const callbacks: websocket.Callbacks = .{
        .onOpen = null,
        .onMessage = onMessage,
        .onClose = null,
        .onPing = null,
        .onPong = null,
    };
};

/// Checks that `output` is a sequence of server frames: unmasked, known opcodes, RSV1 only on
/// the first frame of a data message and only with `deflate`, control frames whole and short,
/// at most one close frame and nothing after it, close codes allowed on the wire and reasons
/// UTF-8, uncompressed text UTF-8.
fn expectServerFrames(output: []const u8, deflate: bool) !void {
    var rest = output;
    var closed = false;
    while (rest.len > 0) {
        try testing.expect(!closed); // nothing follows a close frame
        const parsed = (try frame.parseHeader(rest)) orelse return error.TestTruncatedFrame;
        const h = parsed.header;
        try testing.expect(h.mask == null and !h.rsv2 and !h.rsv3 and h.opcode.isKnown());
        try testing.expect(rest.len - parsed.len >= h.payload_len);
        const payload = rest[parsed.len..][0..@intCast(h.payload_len)];
        rest = rest[parsed.len + payload.len ..];
        if (h.opcode.isControl()) {
            try testing.expect(h.fin and !h.rsv1 and payload.len <= frame.control_payload_bytes_max);
        } else {
            try testing.expect(h.opcode != .continuation); // the server never fragments
            if (h.rsv1) try testing.expect(deflate);
            if (h.opcode == .text and !h.rsv1) try testing.expect(std.unicode.utf8ValidateSlice(payload));
        }
        if (h.opcode == .close) {
            closed = true;
            try testing.expect(payload.len != 1);
            if (payload.len >= 2) {
                try testing.expect(websocket.CloseCode.isValidOnWire(std.mem.readInt(u16, payload[0..2], .big)));
                try testing.expect(std.unicode.utf8ValidateSlice(payload[2..]));
            }
        }
    }
}

fn fuzzWebSocketSession(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [4096]u8 = undefined;
    const frames = buffer[0..smith.slice(&buffer)];
    const seed = smith.value(u64);
    const deflate = seed & 1 == 1;
    const request = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ++
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
    const offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n";
    var input_buffer: [request.len + offer.len + 2 + buffer.len]u8 = undefined;
    var input: std.ArrayList(u8) = .initBuffer(&input_buffer);
    input.appendSliceAssumeCapacity(request);
    if (deflate) input.appendSliceAssumeCapacity(offer);
    input.appendSliceAssumeCapacity("\r\n");
    input.appendSliceAssumeCapacity(frames);
    const config: Config = .{
        .recv_buffer_bytes = 1024,
        .send_buffer_bytes = 2048,
        .arena_bytes = 1024,
        .websocket_message_bytes_max = 3000,
        .websocket_send_queue_bytes_max = 8192,
    };
    const budget_bytes = 1 << 22;
    var budget: Arena.Budget = .init(budget_bytes);
    var context: u8 = 0;
    var worker: Worker = undefined;
    try worker.init(testing.allocator, &config, .{ .context = &context, .handle = WebSocketEcho.handle, .websocket = &WebSocketEcho.callbacks }, .{
        .connections_max = 1,
        .large_buffers_max = 1,
        .budget = &budget,
    });
    defer worker.deinit();
    Worker.current = &worker;
    defer Worker.current = null;
    worker.date.update(784111777);
    const result = try Simulation.run(testing.allocator, &worker, input.items, .{ .cuts = .{ .random = .{ .seed = seed >> 1, .max = 97 } } });
    defer testing.allocator.free(result.output);
    try testing.expect(std.mem.startsWith(u8, result.output, "HTTP/1.1 101 Switching Protocols\r\n"));
    const head_end = (std.mem.find(u8, result.output, "\r\n\r\n") orelse return error.TestUnframed) + 4;
    const agreed = std.mem.find(u8, result.output[0..head_end], "permessage-deflate") != null;
    try testing.expectEqual(deflate, agreed);
    try expectServerFrames(result.output[head_end..], deflate);
    try testing.expectEqual(@as(u32, 0), worker.exchanges_busy);
    try testing.expectEqual(@as(u32, 0), worker.sessions_busy);
    try testing.expectEqual(@as(u32, 0), worker.deflates_busy);
    try testing.expectEqual(@as(u64, budget_bytes), budget.remaining.load(.monotonic));
}

test "fuzz: a WebSocket session fed any frames, cut anywhere, answers with well-formed frames and frees everything" {
    try testing.fuzz({}, fuzzWebSocketSession, .{ .corpus = &websocket_corpus });
}

/// HTTP/2 frames as `parse` sees them, one after another, as a receive buffer fills in reads
/// that end at `cuts` (null: the whole input at once). Each frame is written to `out` as its
/// header and payload; a violation ends the list with its error code.
fn parseHttp2Frames(input: []const u8, cuts: ?u64, out: []u8) []const u8 {
    var prng: std.Random.DefaultPrng = .init(cuts orelse 0);
    var buffer: [2048]u8 = undefined;
    var have: usize = 0;
    var fed: usize = 0;
    var n: usize = 0;
    while (true) {
        switch (http2.frame.parse(buffer[0..have], http2.frame.frame_size_initial)) {
            .frame => |f| {
                f.frame.header.write(out[n..][0..http2.frame.header_len]);
                n += http2.frame.header_len;
                @memcpy(out[n..][0..f.frame.payload.len], f.frame.payload);
                n += f.frame.payload.len;
                std.mem.copyForwards(u8, buffer[0 .. have - f.len], buffer[f.len..have]);
                have -= f.len;
            },
            .incomplete => |needed| {
                assert(needed > have);
                if (fed == input.len) return out[0..n];
                const step = if (cuts == null) input.len - fed else prng.random().intRangeAtMost(usize, 1, 40);
                const next = @min(fed + step, input.len, fed + (buffer.len - have));
                @memcpy(buffer[have..][0 .. next - fed], input[fed..next]);
                have += next - fed;
                fed = next;
            },
            .violation => |v| {
                std.mem.writeInt(u32, out[n..][0..4], @backingInt(v.code), .big);
                return out[0 .. n + 4];
            },
        }
    }
}

fn fuzzHttp2Frames(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [1024]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    var whole: [1100]u8 = undefined;
    var split: [1100]u8 = undefined;
    const expected = parseHttp2Frames(input, null, &whole);
    try testing.expectEqualSlices(u8, expected, parseHttp2Frames(input, smith.value(u64), &split));
}

const http2_corpus = [_][]const u8{
    entry("\x00\x00\x0c\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64\x00\x04\x00\x10\x00\x00"),
    entry("\x00\x00\x08\x06\x00\x00\x00\x00\x00saker!!!\x00\x00\x04\x08\x00\x00\x00\x00\x03\x00\x00\x03\xe8"),
    entry("\x00\x00\x05\x00\x08\x00\x00\x00\x01\x02abxx"),
    entry("\x00\x40\x01\x00\x00\x00\x00\x00\x01"),
    entry("\x00\x00\x07\x06\x00\x00\x00\x00\x00"),
};

test "fuzz: the HTTP/2 frame parser agrees with itself however the input is split" {
    try testing.fuzz({}, fuzzHttp2Frames, .{ .corpus = &http2_corpus });
}

fn fuzzHpack(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [512]u8 = undefined;
    const block = buffer[0..smith.slice(&buffer)];
    const hpack = http2.hpack;
    var table_bytes: [2][256]u8 = undefined;
    var rings: [2][hpack.DynamicTable.ringLength(256)]hpack.DynamicTable.Entry = undefined;
    var decoder: hpack.Decoder = .init(&table_bytes[0], &rings[0]);
    var storage: [1024]u8 = undefined;
    var fields: [32]hpack.Field = undefined;
    // Twice: the second block meets the table the first one left.
    for (0..2) |_| {
        const decoded = decoder.decode(block, &storage, &fields) catch |err| {
            try testing.expectEqual(error.Compression, err);
            return;
        };
        try testing.expect(decoder.table.size <= decoder.table.capacity);
        if (decoded.too_large) continue;
        // What was decoded encodes, and decodes back the same, with the tables in step.
        var encoder: hpack.Encoder = .init(&table_bytes[1], &rings[1]);
        var again_bytes: [256]u8 = undefined;
        var again_ring: [hpack.DynamicTable.ringLength(256)]hpack.DynamicTable.Entry = undefined;
        var again: hpack.Decoder = .init(&again_bytes, &again_ring);
        var encoded: [4096]u8 = undefined;
        var n = try encoder.begin(&encoded);
        for (decoded.fields) |field| n += try encoder.encode(encoded[n..], field.name, field.value, .allowed);
        var storage_again: [1024]u8 = undefined;
        var fields_again: [32]hpack.Field = undefined;
        const round = try again.decode(encoded[0..n], &storage_again, &fields_again);
        try testing.expect(!round.too_large);
        try testing.expectEqual(decoded.fields.len, round.fields.len);
        for (decoded.fields, round.fields) |a, b| {
            try testing.expectEqualStrings(a.name, b.name);
            try testing.expectEqualStrings(a.value, b.value);
        }
        try testing.expectEqual(encoder.table.size, again.table.size);
    }
}

const hpack_corpus = [_][]const u8{
    entry("\x82\x86\x84\x41\x8c\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff"),
    entry("\x48\x82\x64\x02\x58\x85\xae\xc3\x77\x1a\x4b\xc1"),
    entry("\x3f\xe1\x01\x40\x01\x61\x01\x62\xbe"),
    entry("\x10\x08password\x06secret"),
    entry("\x00\x81\xff\x00"),
};

test "fuzz: HPACK decodes any block within its bounds, and what it decodes round-trips" {
    try testing.fuzz({}, fuzzHpack, .{ .corpus = &hpack_corpus });
}

/// HTTP/2 frames from the server: each header's length is honoured and the bytes end on a
/// frame boundary; a GOAWAY, if any, comes last but for the frames already in its batch.
fn expectHttp2Frames(output: []const u8) !void {
    var rest = output;
    while (rest.len > 0) {
        switch (http2.frame.parse(rest, http2.frame.frame_size_max)) {
            .frame => |f| rest = rest[f.len..],
            .incomplete => return error.TruncatedFrame,
            .violation => return error.InvalidServerFrame,
        }
    }
}

fn fuzzHttp2Session(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [2048]u8 = undefined;
    const frames = buffer[0..smith.slice(&buffer)];
    const seed = smith.value(u64);
    var input: [http2.frame.preface.len + buffer.len]u8 = undefined;
    @memcpy(input[0..http2.frame.preface.len], http2.frame.preface);
    @memcpy(input[http2.frame.preface.len..][0..frames.len], frames);
    const config: Config = .{
        .recv_buffer_bytes = 1024,
        .request_line_bytes_max = 512,
        .header_bytes_max = 2048,
        .body_bytes_max = 4096,
        .send_buffer_bytes = 2048,
        .arena_bytes = 1024,
        .http2_streams_max = 4,
        .http2_glitch_burst = 20,
    };
    var outputs: [2][]u8 = undefined;
    for (&outputs, [_]Simulation.Cuts{ .whole, .{ .random = .{ .seed = seed, .max = 97 } } }) |*output, cuts| {
        var budget: Arena.Budget = .init(1 << 20);
        var context: u8 = 0;
        var worker: Worker = undefined;
        try worker.init(testing.allocator, &config, .{ .context = &context, .handle = EchoHandler.handle }, .{
            .connections_max = 1,
            .stream_exchanges_max = config.http2_streams_max,
            .large_buffers_max = 1,
            .budget = &budget,
        });
        defer worker.deinit();
        worker.date.update(784111777);
        const result = try Simulation.run(testing.allocator, &worker, input[0 .. http2.frame.preface.len + frames.len], .{ .cuts = cuts });
        output.* = result.output;
        try expectHttp2Frames(result.output);
        try testing.expectEqual(@as(u32, 0), worker.exchanges_busy);
        try testing.expectEqual(@as(u64, 1 << 20), budget.remaining.load(.monotonic));
    }
    defer for (outputs) |o| testing.allocator.free(o);
}

const http2_session_corpus = [_][]const u8{
    // SETTINGS, then GET / on stream 1 (HPACK: :method GET, :scheme http, :path /).
    entry("\x00\x00\x00\x04\x00\x00\x00\x00\x00" ++ "\x00\x00\x03\x01\x05\x00\x00\x00\x01\x82\x86\x84"),
    // A POST with a padded DATA frame and a WINDOW_UPDATE.
    entry("\x00\x00\x03\x01\x04\x00\x00\x00\x01\x83\x86\x84" ++ "\x00\x00\x04\x00\x09\x00\x00\x00\x01\x01ab\x00" ++
        "\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00\x00\x10\x00"),
    // HEADERS then CONTINUATION, a PING, an RST_STREAM.
    entry("\x00\x00\x01\x01\x01\x00\x00\x00\x03\x82" ++ "\x00\x00\x02\x09\x04\x00\x00\x00\x03\x86\x84" ++
        "\x00\x00\x08\x06\x00\x00\x00\x00\x00saker!!!" ++ "\x00\x00\x04\x03\x00\x00\x00\x00\x03\x00\x00\x00\x08"),
};

test "fuzz: an HTTP/2 session fed any frames, cut anywhere, writes whole frames and frees everything" {
    try testing.fuzz({}, fuzzHttp2Session, .{ .corpus = &http2_session_corpus });
}

fn fuzzProxyHeader(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [300]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    const whole = proxy_header.parse(input, 256);
    // Every prefix agrees with the whole: still incomplete before a header ends, invalid
    // once a prefix is, and never asking for bytes it has.
    for (0..input.len) |n| {
        switch (proxy_header.parse(input[0..n], 256)) {
            .incomplete => |needed| try testing.expect(needed > n),
            .invalid => try testing.expect(whole == .invalid),
            .header => |h| {
                try testing.expect(whole == .header and whole.header.len == h.len);
                try testing.expectEqual(h.source, whole.header.source);
            },
        }
    }
    switch (whole) {
        .incomplete => |needed| try testing.expect(needed > input.len),
        .header => |h| try testing.expect(h.len <= input.len and h.len <= 256),
        .invalid => {},
    }
}

const proxy_corpus = [_][]const u8{
    entry("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET"),
    entry("PROXY TCP6 2001:db8::1 2001:db8::2 4000 80\r\n"),
    entry("PROXY UNKNOWN\r\n"),
    entry("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc0\x00\x02\x07\x0a\x00\x00\x01\xd4\x31\x01\xbb"),
    entry("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"),
};

test "fuzz: the PROXY header parser agrees with every prefix of its input" {
    try testing.fuzz({}, fuzzProxyHeader, .{ .corpus = &proxy_corpus });
}

const accept_encoding_corpus = [_][]const u8{
    entry("gzip, deflate, br, zstd"),
    entry("gzip;q=1.0, identity; q=0.5, *;q=0"),
    entry("br;q=0.3, gzip;q=0.3, zstd;q=0.3,,"),
    entry("identity;q=0, *;q=0"),
    entry("X-GZIP;Q=0.7, ZSTD;q=0.600"),
    entry(" , ,gzip;q=0.3,, \t"),
    entry("br;q=1.0001, gzip"),
    entry("*;q=0, identity;q=0.5, gzip;q=0.4"),
};

fn fuzzAcceptEncoding(_: void, smith: *testing.Smith) anyerror!void {
    var buffer: [256]u8 = undefined;
    const input = buffer[0..smith.slice(&buffer)];
    const offered: compress.Offered = .{ .bits = .{ .mask = smith.value(u3) } };
    const choice = compress.negotiate.choose(&.{input}, offered);
    if (choice == .coding) try testing.expect(offered.contains(choice.coding));
    // Several field lines are one list: cut at any comma, the answer is the same.
    for (input, 0..) |byte, i| {
        if (byte != ',') continue;
        try testing.expectEqual(choice, compress.negotiate.choose(&.{ input[0..i], input[i + 1 ..] }, offered));
    }
    // Tokens and "q" are case-insensitive; qvalues are digits.
    var upper: [256]u8 = undefined;
    const upper_input = std.ascii.upperString(upper[0..input.len], input);
    try testing.expectEqual(choice, compress.negotiate.choose(&.{upper_input}, offered));
    // Offering a coding that the answer did not pick never turns a coding into identity.
    if (choice == .coding) {
        try testing.expect(compress.negotiate.choose(&.{input}, .full) == .coding);
    }
}

test "fuzz: Accept-Encoding negotiation never fails and reads split or uppercased lines the same" {
    try testing.fuzz({}, fuzzAcceptEncoding, .{ .corpus = &accept_encoding_corpus });
}

/// A corpus entry for `fuzzBodyDecoding`: the coded bytes, then the coding, the limit's choice
/// and the seed, as the 8-byte little-endian values `smith.value` reads.
fn codedEntry(comptime bytes: []const u8, comptime coding: compress.Decoder.Coding, comptime limit: u8) []const u8 {
    comptime {
        var values: [24]u8 = @splat(0);
        values[0] = @backingInt(coding);
        values[8] = limit;
        values[16] = bytes.len % 251;
        const final = values;
        return entry(bytes) ++ &final;
    }
}

const body_decoding_corpus = [_][]const u8{
    // "hello, saker\n" by Python's gzip, zlib, brotli and zstandard (decoder tests).
    codedEntry("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xd7\x51\x28\x4e\xcc\x4e\x2d\xe2\x02\x00\x69\x1e\xdd\xee\x0d\x00\x00\x00", .gzip, 0),
    codedEntry("\x78\x9c\xcb\x48\xcd\xc9\xc9\xd7\x51\x28\x4e\xcc\x4e\x2d\xe2\x02\x00\x21\x74\x04\x81", .deflate, 1),
    codedEntry("\x0b\x06\x80\x68\x65\x6c\x6c\x6f\x2c\x20\x73\x61\x6b\x65\x72\x0a\x03", .br, 0),
    codedEntry("\x28\xb5\x2f\xfd\x20\x0d\x69\x00\x00\x68\x65\x6c\x6c\x6f\x2c\x20\x73\x61\x6b\x65\x72\x0a", .zstd, 1),
    codedEntry("\x28\xb5\x2f\xfd\x00\x58\x69\x00\x00\x68\x65\x6c\x6c\x6f\x2c\x20\x73\x61\x6b\x65\x72\x0a", .zstd, 2),
    // Two gzip members; a cut one; a zstd frame asking for a 16 MiB window; a br stream
    // declaring a 16 MiB meta-block.
    codedEntry("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xd7\x51\x28\x4e\xcc\x4e\x2d\xe2\x02\x00\x69\x1e\xdd\xee\x0d\x00\x00\x00" ++
        "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xd7\x51\x28\x4e\xcc\x4e\x2d\xe2\x02\x00\x69\x1e\xdd\xee\x0d\x00\x00\x00", .gzip, 0),
    codedEntry("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xd7\x51\x28", .gzip, 0),
    codedEntry("\x28\xb5\x2f\xfd\x00\x70\x01\x00\x00", .zstd, 0),
    codedEntry("\xcf\xff\xff\xff" ++ "abc", .br, 1),
    codedEntry("not compressed at all", .br, 0),
};

fn fuzzBodyDecoding(_: void, smith: *testing.Smith) anyerror!void {
    const Decoder = compress.Decoder;
    const gpa = testing.allocator;
    var buffer: [1024]u8 = undefined;
    const coded = buffer[0..smith.slice(&buffer)];
    const coding = smith.value(Decoder.Coding);
    const limit: usize = switch (smith.value(u2)) {
        0 => 64 * 1024,
        1 => 13,
        2 => 12,
        3 => 0,
    };
    var prng: std.Random.DefaultPrng = .init(smith.value(u64));
    const random = prng.random();
    const options: Decoder.Options = .{ .coding = coding, .decoded_bytes_max = limit };
    const whole = Decoder.decodeAll(.{ .output = gpa, .scratch = gpa }, options, coded);
    defer if (whole) |bytes| gpa.free(bytes) else |_| {};
    if (whole) |bytes| try testing.expect(bytes.len <= limit) else |err| try testing.expect(err != error.OutOfMemory);
    if (coded.len == 0) return testing.expectEqual(0, (try whole).len);

    // The same bytes in pieces of any length, through output buffers of 1 to 64 bytes.
    var decoder: Decoder = undefined;
    try decoder.init(gpa, options);
    defer decoder.deinit();
    var streamed: std.ArrayList(u8) = .empty;
    defer streamed.deinit(gpa);
    const outcome: Decoder.WholeError!void = feed: {
        var rest: []const u8 = coded;
        var window: [64]u8 = undefined;
        while (rest.len > 0) {
            var piece = rest[0..random.intRangeAtMost(usize, 1, rest.len)];
            rest = rest[piece.len..];
            while (true) {
                const out = window[0..random.intRangeAtMost(usize, 1, window.len)];
                const progress = decoder.write(piece, out) catch |err| break :feed err;
                try streamed.appendSlice(gpa, out[0..progress.produced]);
                piece = piece[progress.consumed..];
                if (piece.len == 0 and progress.produced < out.len) break;
                if (progress.consumed == 0 and progress.produced == 0) break :feed error.Corrupt;
            }
        }
        if (!decoder.finished()) break :feed error.Truncated;
    };
    if (whole) |bytes| {
        try outcome;
        try testing.expectEqualSlices(u8, bytes, streamed.items);
    } else |_| {
        if (outcome) |_| return error.TestUnexpectedResult else |err| try testing.expect(err != error.OutOfMemory);
    }
}

test "fuzz: a coded request body decodes the same whole and in pieces, within its limit" {
    try testing.fuzz({}, fuzzBodyDecoding, .{ .corpus = &body_decoding_corpus });
}
