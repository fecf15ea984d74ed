//! WebSocket frames (RFC 6455 §5.2): the header parser, the header writer for server frames
//! (never masked, §5.1) and payload unmasking (§5.3) with SIMD. Byte-level only: which frames
//! are acceptable in which state is decided by `Session`.
const std = @import("std");
const assert = std.debug.assert;

/// Frame opcodes (§5.2, §11.8). Values not named here are reserved.
pub const Opcode = enum(u4) {
    continuation = 0x0,
    text = 0x1,
    binary = 0x2,
    close = 0x8,
    ping = 0x9,
    pong = 0xA,
    _,

    /// Whether this is a control opcode (close, ping, pong, or a reserved 0xB-0xF).
    pub fn isControl(opcode: Opcode) bool {
        return @backingInt(opcode) & 0x8 != 0;
    }

    /// Whether the opcode is one RFC 6455 defines (the others must fail the connection).
    pub fn isKnown(opcode: Opcode) bool {
        return switch (opcode) {
            .continuation, .text, .binary, .close, .ping, .pong => true,
            _ => false,
        };
    }
};

/// A parsed frame header.
pub const Header = struct {
    fin: bool,
    rsv1: bool,
    rsv2: bool,
    rsv3: bool,
    opcode: Opcode,
    /// The masking key, when the MASK bit is set.
    mask: ?[4]u8,
    payload_len: u64,
};

/// A header and the bytes it took.
pub const Parsed = struct {
    header: Header,
    len: u8,
};

/// The longest header a client can send: 2 + 8 (length) + 4 (mask).
pub const header_bytes_max = 14;
/// The longest header a server sends (no mask).
pub const server_header_bytes_max = 10;
/// The longest payload of a control frame (§5.5).
pub const control_payload_bytes_max = 125;

/// Why a header cannot be accepted whatever the connection's state.
pub const HeaderError = error{
    /// A 64-bit length with the most significant bit set (§5.2).
    LengthTooLarge,
};

/// Parses the header at the start of `bytes`; null when more bytes are needed.
pub fn parseHeader(bytes: []const u8) HeaderError!?Parsed {
    if (bytes.len < 2) return null;
    const b0 = bytes[0];
    const b1 = bytes[1];
    const masked = b1 & 0x80 != 0;
    const len7: u7 = @truncate(b1);
    const length_bytes: u8 = switch (len7) {
        126 => 2,
        127 => 8,
        else => 0,
    };
    const total: u8 = 2 + length_bytes + (if (masked) @as(u8, 4) else 0);
    if (bytes.len < total) return null;
    const payload_len: u64 = switch (length_bytes) {
        0 => len7,
        2 => std.mem.readInt(u16, bytes[2..4], .big),
        8 => blk: {
            const value = std.mem.readInt(u64, bytes[2..10], .big);
            if (value >> 63 != 0) return error.LengthTooLarge;
            break :blk value;
        },
        else => unreachable,
    };
    return .{
        .header = .{
            .fin = b0 & 0x80 != 0,
            .rsv1 = b0 & 0x40 != 0,
            .rsv2 = b0 & 0x20 != 0,
            .rsv3 = b0 & 0x10 != 0,
            .opcode = @fromBackingInt(@as(u4, @truncate(b0))),
            .mask = if (masked) bytes[total - 4 ..][0..4].* else null,
            .payload_len = payload_len,
        },
        .len = total,
    };
}

/// What a server frame header says.
pub const Options = struct {
    fin: bool = true,
    /// Set on the first frame of a compressed message (RFC 7692 §6).
    rsv1: bool = false,
    opcode: Opcode,
    payload_len: u64,
};

/// Bytes of the header of an unmasked frame with `payload_len` bytes of payload.
pub fn headerLen(payload_len: u64) usize {
    if (payload_len < 126) return 2;
    if (payload_len <= std.math.maxInt(u16)) return 4;
    return 10;
}

/// Writes an unmasked (server) frame header at the start of `buffer`; returns it.
/// Asserts `buffer` holds `headerLen(options.payload_len)` bytes.
pub fn writeHeader(buffer: []u8, options: Options) []u8 {
    const len = headerLen(options.payload_len);
    assert(buffer.len >= len);
    assert(options.payload_len >> 63 == 0);
    buffer[0] = (if (options.fin) @as(u8, 0x80) else 0) | (if (options.rsv1) @as(u8, 0x40) else 0) |
        @as(u8, @backingInt(options.opcode));
    switch (len) {
        2 => buffer[1] = @intCast(options.payload_len),
        4 => {
            buffer[1] = 126;
            std.mem.writeInt(u16, buffer[2..4], @intCast(options.payload_len), .big);
        },
        10 => {
            buffer[1] = 127;
            std.mem.writeInt(u64, buffer[2..10], options.payload_len, .big);
        },
        else => unreachable,
    }
    return buffer[0..len];
}

const vector_len = std.simd.suggestVectorLength(u8) orelse 16;
const Vector = @Vector(vector_len, u8);
comptime {
    assert(vector_len % 4 == 0);
}

/// XORs `bytes` in place with the masking key (§5.3), the key starting at its byte
/// `offset % 4` (for a payload unmasked in pieces: pass the payload bytes done so far).
pub fn unmask(bytes: []u8, mask: [4]u8, offset: u64) void {
    var key: [4]u8 = undefined;
    for (&key, 0..) |*k, i| k.* = mask[@intCast((offset + i) % 4)];
    var i: usize = 0;
    if (bytes.len >= vector_len) {
        var pattern: [vector_len]u8 = undefined;
        for (&pattern, 0..) |*p, j| p.* = key[j % 4];
        const key_vector: Vector = pattern;
        while (i + vector_len <= bytes.len) : (i += vector_len) {
            const chunk: Vector = bytes[i..][0..vector_len].*;
            bytes[i..][0..vector_len].* = chunk ^ key_vector;
        }
    }
    // vector_len is a multiple of 4, so the key phase is unchanged here.
    while (i < bytes.len) : (i += 1) bytes[i] ^= key[i % 4];
}

const testing = std.testing;

test "frame: RFC 6455 §5.7 examples parse" {
    // A single-frame unmasked text message "Hello".
    const unmasked = [_]u8{ 0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f };
    const a = (try parseHeader(&unmasked)).?;
    try testing.expect(a.header.fin);
    try testing.expectEqual(Opcode.text, a.header.opcode);
    try testing.expectEqual(@as(?[4]u8, null), a.header.mask);
    try testing.expectEqual(@as(u64, 5), a.header.payload_len);
    try testing.expectEqual(@as(u8, 2), a.len);

    // A single-frame masked text message "Hello".
    var masked = [_]u8{ 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
    const b = (try parseHeader(&masked)).?;
    try testing.expectEqual([4]u8{ 0x37, 0xfa, 0x21, 0x3d }, b.header.mask.?);
    try testing.expectEqual(@as(u8, 6), b.len);
    unmask(masked[b.len..], b.header.mask.?, 0);
    try testing.expectEqualStrings("Hello", masked[b.len..]);

    // A fragmented unmasked text message: "Hel" then "lo".
    const first = (try parseHeader(&.{ 0x01, 0x03, 0x48, 0x65, 0x6c })).?;
    try testing.expect(!first.header.fin);
    try testing.expectEqual(Opcode.text, first.header.opcode);
    const last = (try parseHeader(&.{ 0x80, 0x02, 0x6c, 0x6f })).?;
    try testing.expect(last.header.fin);
    try testing.expectEqual(Opcode.continuation, last.header.opcode);

    // Unmasked ping, masked pong.
    const ping = (try parseHeader(&.{ 0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f })).?;
    try testing.expectEqual(Opcode.ping, ping.header.opcode);
    try testing.expect(ping.header.opcode.isControl());
    const pong = (try parseHeader(&.{ 0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 })).?;
    try testing.expectEqual(Opcode.pong, pong.header.opcode);

    // 256 bytes binary (16-bit length), 64 KiB binary (64-bit length).
    const medium = (try parseHeader(&.{ 0x82, 0x7E, 0x01, 0x00 })).?;
    try testing.expectEqual(@as(u64, 256), medium.header.payload_len);
    try testing.expectEqual(@as(u8, 4), medium.len);
    const large = (try parseHeader(&.{ 0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0 })).?;
    try testing.expectEqual(@as(u64, 65536), large.header.payload_len);
    try testing.expectEqual(@as(u8, 10), large.len);
}

test "frame: every incomplete prefix needs more; the top length bit is refused" {
    const full = [_]u8{ 0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4 };
    for (0..full.len) |n| try testing.expectEqual(@as(?Parsed, null), try parseHeader(full[0..n]));
    const parsed = (try parseHeader(&full)).?;
    try testing.expectEqual(@as(u8, 14), parsed.len);
    try testing.expectEqual([4]u8{ 1, 2, 3, 4 }, parsed.header.mask.?);
    try testing.expectError(error.LengthTooLarge, parseHeader(&.{ 0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0 }));
    const reserved = (try parseHeader(&.{ 0x7B, 0x00 })).?;
    try testing.expect(reserved.header.rsv1 and reserved.header.rsv2 and reserved.header.rsv3);
    try testing.expect(!reserved.header.opcode.isKnown());
    try testing.expect(reserved.header.opcode.isControl());
}

test "frame: writeHeader round-trips through parseHeader at each length size" {
    for ([_]u64{ 0, 125, 126, 65535, 65536, 1 << 40 }) |len| {
        var buffer: [server_header_bytes_max]u8 = undefined;
        const written = writeHeader(&buffer, .{ .opcode = .binary, .payload_len = len, .rsv1 = len == 126 });
        try testing.expectEqual(headerLen(len), written.len);
        const parsed = (try parseHeader(written)).?;
        try testing.expectEqual(len, parsed.header.payload_len);
        try testing.expectEqual(Opcode.binary, parsed.header.opcode);
        try testing.expectEqual(len == 126, parsed.header.rsv1);
        try testing.expect(parsed.header.fin and parsed.header.mask == null);
    }
    var hello: [2]u8 = undefined;
    try testing.expectEqualSlices(u8, &.{ 0x81, 0x05 }, writeHeader(&hello, .{ .opcode = .text, .payload_len = 5 }));
}

test "frame: unmask in pieces at every split equals unmasking whole" {
    var original: [300]u8 = undefined;
    for (&original, 0..) |*b, i| b.* = @truncate(i *% 7 +% 3);
    const mask = [4]u8{ 0xde, 0xad, 0xbe, 0xef };
    var whole = original;
    unmask(&whole, mask, 0);
    for (whole, original, 0..) |w, o, i| try testing.expectEqual(o ^ mask[i % 4], w);
    for (0..original.len + 1) |split| {
        var pieces = original;
        unmask(pieces[0..split], mask, 0);
        unmask(pieces[split..], mask, split);
        try testing.expectEqualSlices(u8, &whole, &pieces);
    }
}
