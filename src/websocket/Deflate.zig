//! One connection's permessage-deflate state (RFC 7692 §7.2) over `std.compress.flate`: a raw
//! DEFLATE compressor and decompressor, each with its own 32 KiB LZ77 history, kept across
//! messages unless the peer negotiated "no context takeover". Works on whole messages held in
//! memory: no I/O, and no allocation (the caller gives the output buffers).
//!
//! Framing per message (§7.2.1, §7.2.2): the sender flushes, ends with an empty stored block
//! and removes its last four bytes (00 00 FF FF); the receiver appends them back before
//! inflating. `server_max_window_bits` below 15 is honoured by compressing without
//! back-references (Huffman-only), which fits any window.
const std = @import("std");
const assert = std.debug.assert;
const flate = std.compress.flate;
const handshake = @import("handshake.zig");

const Deflate = @This();

params: handshake.Deflate,
/// Link in the worker's free list.
next_free: ?*Deflate = null,

compressor: Compressor = .none,
/// Where the compressor writes; re-pointed at the caller's buffer for each message.
output: std.Io.Writer = .failing,
/// The compressor's history (and input buffer).
compress_window: [flate.max_window_len]u8 = undefined,

decompressor: flate.Decompress = undefined,
decompressor_ready: bool = false,
/// The current message's compressed bytes, as a reader for the decompressor.
input: std.Io.Reader = .fixed(""),
/// The decompressor's history (and output buffer).
decompress_window: [flate.max_window_len]u8 = undefined,

const Compressor = union(enum) {
    none,
    /// LZ77 + Huffman, with a 32 KiB window.
    full: flate.Compress,
    /// Huffman codes only: no back-references, so any window size is honoured.
    huffman: flate.Compress.Huffman,
};

/// The four bytes a sender strips from a compressed message and a receiver appends back.
pub const tail = [4]u8{ 0x00, 0x00, 0xff, 0xff };

/// Messages shorter than this are sent uncompressed (RSV1 clear): for them DEFLATE's block
/// headers cost more than they save.
pub const compress_bytes_min = 64;

/// Why a compressed message could not be inflated.
pub const InflateError = error{
    /// Not a valid DEFLATE stream, or one that does not end where the message does.
    InvalidData,
    /// It inflates to more than the limit given.
    TooLarge,
};

/// Sets up `d` for a connection that agreed on `params`.
pub fn init(d: *Deflate, params: handshake.Deflate) void {
    d.params = params;
    d.next_free = null;
    d.compressor = .none;
    d.output = .failing;
    d.decompressor_ready = false;
    d.input = .fixed("");
}

/// The most bytes `compress` can produce for `len` bytes of input.
pub fn compressBound(len: usize) usize {
    // Stored blocks cost 5 bytes per 64 KiB; alignment blocks and the end marker a few more.
    return len + len / 8 + 64;
}

/// Compresses one whole message into `out` (at least `compressBound(payload.len)` bytes) and
/// returns the message payload to send with RSV1 set. On failure the compressor is reset, and
/// the caller sends the message uncompressed instead.
pub fn compress(d: *Deflate, payload: []const u8, out: []u8) error{CompressFailed}![]u8 {
    assert(out.len >= compressBound(payload.len));
    d.output = .fixed(out);
    if (d.compressor == .none or d.params.server_no_context_takeover) d.startCompressor() catch {
        d.compressor = .none;
        return error.CompressFailed;
    };
    const writer = switch (d.compressor) {
        .full => |*c| &c.writer,
        .huffman => |*h| &h.writer,
        .none => unreachable,
    };
    writer.writeAll(payload) catch return d.compressFailed();
    writer.flush() catch return d.compressFailed();
    // The flush left the stream byte-aligned after a complete block. An empty stored block
    // is 0x00 then 00 00 FF FF; the latter four are removed (§7.2.1), leaving 0x00.
    d.output.writeByte(0x00) catch return d.compressFailed();
    return d.output.buffered();
}

fn compressFailed(d: *Deflate) error{CompressFailed} {
    d.compressor = .none;
    return error.CompressFailed;
}

fn startCompressor(d: *Deflate) std.Io.Writer.Error!void {
    if (d.params.server_max_window_bits < 15) {
        d.compressor = .{ .huffman = try .init(&d.output, &d.compress_window, .raw) };
    } else {
        d.compressor = .{ .full = try .init(&d.output, &d.compress_window, .raw, .level_1) };
    }
}

/// Inflates one whole message: `message` holds the compressed payload followed by four spare
/// bytes of room for the tail. Decompressed bytes go to `sink.write` as they are produced;
/// more than `limit` in all fails with `TooLarge`.
pub fn decompress(d: *Deflate, message: []u8, payload_len: usize, limit: u64, sink: anytype) (InflateError || std.meta.Child(@TypeOf(sink)).Error)!void {
    assert(message.len >= payload_len + tail.len);
    @memcpy(message[payload_len..][0..tail.len], &tail);
    d.input = .fixed(message[0 .. payload_len + tail.len]);
    if (!d.decompressor_ready or d.params.client_no_context_takeover) {
        d.decompressor = .init(&d.input, .raw, &d.decompress_window);
        d.decompressor_ready = true;
    } else {
        // A message may end its DEFLATE stream with a final block (RFC 7692 §7.2.3.4); the
        // next message continues with the same history.
        if (d.decompressor.state == .end or d.decompressor.state == .protocol_footer) d.decompressor.state = .block_header;
        d.decompressor.final_block = false;
        d.decompressor.err = null;
    }
    const reader = &d.decompressor.reader;
    var total: u64 = 0;
    while (true) {
        const bytes = reader.buffered();
        if (bytes.len > 0) {
            total += bytes.len;
            if (total > limit) {
                d.decompressor_ready = false;
                return error.TooLarge;
            }
            try sink.write(bytes);
            reader.tossBuffered();
        }
        reader.fillMore() catch {
            if (reader.bufferedLen() > 0) continue;
            switch (d.decompressor.state) {
                // A final block ends the stream; what follows it (the tail) is ignored.
                .end => return,
                .block_header => if (d.input.bufferedLen() == 0) return,
                else => {},
            }
            d.decompressor_ready = false;
            return error.InvalidData;
        };
    }
}

const testing = std.testing;

const Collect = struct {
    list: std.ArrayList(u8) = .empty,
    const Error = error{OutOfMemory};
    fn write(c: *Collect, bytes: []const u8) Error!void {
        try c.list.appendSlice(testing.allocator, bytes);
    }
};

fn inflateVector(d: *Deflate, compressed: []const u8) ![]u8 {
    var buffer: [64]u8 = undefined;
    @memcpy(buffer[0..compressed.len], compressed);
    var collect: Collect = .{};
    errdefer collect.list.deinit(testing.allocator);
    try d.decompress(&buffer, compressed.len, 1 << 20, &collect);
    return collect.list.toOwnedSlice(testing.allocator);
}

fn newDeflate(params: handshake.Deflate) !*Deflate {
    const d = try testing.allocator.create(Deflate);
    d.init(params);
    return d;
}

test "Deflate: RFC 7692 §7.2.3 examples inflate" {
    const d = try newDeflate(.{});
    defer testing.allocator.destroy(d);
    // §7.2.3.1 "Hello" compressed; §7.2.3.2 the same again, referring to the first.
    const first = try inflateVector(d, &.{ 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00 });
    defer testing.allocator.free(first);
    try testing.expectEqualStrings("Hello", first);
    const second = try inflateVector(d, &.{ 0xf2, 0x00, 0x11, 0x00, 0x00 });
    defer testing.allocator.free(second);
    try testing.expectEqualStrings("Hello", second);
    // §7.2.3.3 a stored (uncompressed) block.
    const stored = try inflateVector(d, &.{ 0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00 });
    defer testing.allocator.free(stored);
    try testing.expectEqualStrings("Hello", stored);
    // §7.2.3.4 a final block (BFINAL set); the next message goes on.
    const final = try inflateVector(d, &.{ 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00 });
    defer testing.allocator.free(final);
    try testing.expectEqualStrings("Hello", final);
}

test "Deflate: a message that refers to history it does not have is invalid" {
    const d = try newDeflate(.{ .client_no_context_takeover = true });
    defer testing.allocator.destroy(d);
    const first = try inflateVector(d, &.{ 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00 });
    defer testing.allocator.free(first);
    // Without context takeover the second vector's back-reference points at nothing.
    try testing.expectError(error.InvalidData, inflateVector(d, &.{ 0xf2, 0x00, 0x11, 0x00, 0x00 }));
    // Block type 3 is reserved.
    try testing.expectError(error.InvalidData, inflateVector(d, &.{ 0xff, 0xff, 0xff }));
    // A stored block whose length check fails.
    try testing.expectError(error.InvalidData, inflateVector(d, &.{ 0x00, 0x05, 0x00, 0xfb, 0xff, 0x48 }));
}

fn roundTrip(params: handshake.Deflate, messages: []const []const u8) !void {
    const sender = try newDeflate(params);
    defer testing.allocator.destroy(sender);
    const receiver = try newDeflate(params);
    defer testing.allocator.destroy(receiver);
    for (messages) |message| {
        const out = try testing.allocator.alloc(u8, compressBound(message.len) + tail.len);
        defer testing.allocator.free(out);
        const compressed = try sender.compress(message, out);
        var collect: Collect = .{};
        defer collect.list.deinit(testing.allocator);
        try receiver.decompress(out, compressed.len, 1 << 24, &collect);
        try testing.expectEqualStrings(message, collect.list.items);
    }
}

test "Deflate: round trips with and without context takeover and small windows" {
    var big: [100_000]u8 = undefined;
    for (&big, 0..) |*b, i| b.* = "abcabcabdxyz"[i % 12] +% @as(u8, @truncate(i / 5000));
    const messages = [_][]const u8{ "Hello", "Hello", "", "Hello, Hello, Hello, Hello!", &big, "Hello" };
    try roundTrip(.{}, &messages);
    try roundTrip(.{ .server_no_context_takeover = true }, &messages);
    try roundTrip(.{ .server_max_window_bits = 9 }, &messages);
}

test "Deflate: compression pays off on repetitive text; the limit stops a bomb" {
    const d = try newDeflate(.{});
    defer testing.allocator.destroy(d);
    const zeros: [64 * 1024]u8 = @splat('a');
    const out = try testing.allocator.alloc(u8, compressBound(zeros.len) + tail.len);
    defer testing.allocator.free(out);
    const compressed = try d.compress(&zeros, out);
    try testing.expect(compressed.len < 1024);
    const receiver = try newDeflate(.{});
    defer testing.allocator.destroy(receiver);
    var collect: Collect = .{};
    defer collect.list.deinit(testing.allocator);
    try testing.expectError(error.TooLarge, receiver.decompress(out, compressed.len, 1000, &collect));
}

test "Deflate: server_max_window_bits below 15 costs ratio (Huffman only), never correctness" {
    // A repetitive 6600-byte text message, as a chat or JSON feed sends: LZ77 finds the
    // repeats; Huffman coding alone only shortens the symbols.
    var message: [6600]u8 = undefined;
    const line = "{\"user\":\"alice\",\"text\":\"hello, world\",\"room\":42}\n";
    for (&message, 0..) |*b, i| b.* = line[i % line.len];
    var sizes: [2]usize = undefined;
    for ([_]u4{ 15, 9 }, &sizes) |bits, *size| {
        const d = try newDeflate(.{ .server_max_window_bits = bits });
        defer testing.allocator.destroy(d);
        const out = try testing.allocator.alloc(u8, compressBound(message.len) + tail.len);
        defer testing.allocator.free(out);
        size.* = (try d.compress(&message, out)).len;
    }
    // Measured: 6600 bytes -> 91 with the full window, 3486 with Huffman only.
    try testing.expect(sizes[0] < 200);
    try testing.expect(sizes[1] > 10 * sizes[0] and sizes[1] < message.len);
}
