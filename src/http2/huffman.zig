//! The Huffman code of HPACK string literals (RFC 7541 §5.2, Appendix B). The appendix's code
//! is canonical: codes of one length are consecutive in symbol order, and each length's first
//! code follows the previous length's last. So the 257 bit lengths below (symbols 0-255, then
//! EOS) are the whole table; the codes, and what the decoder needs, are derived from them at
//! compile time, and the tests hold the derivation against rows of the appendix.
const std = @import("std");
const assert = std.debug.assert;

/// Bit length of each symbol's code, as RFC 7541 Appendix B lists them (256 is EOS).
const lengths = [257]u5{
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10,
    13, 6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,
    7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,
    6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
};

const eos = 256;
const length_min = 5;
const length_max = 30;

const Tables = struct {
    /// Each symbol's code, right-aligned.
    codes: [257]u32,
    /// Symbols sorted by (length, symbol): the canonical order.
    sorted: [257]u16,
    /// Per length: the first code of that length, left-aligned in 32 bits, and the index in
    /// `sorted` of the first symbol of that length; `limit` is one past the last code of that
    /// length, left-aligned (0x1_0000_0000 once every code is covered).
    first: [length_max + 1]u32,
    offset: [length_max + 1]u16,
    limit: [length_max + 1]u64,
};

const tables: Tables = blk: {
    @setEvalBranchQuota(100_000);
    var t: Tables = undefined;
    var count: [length_max + 1]u16 = @splat(0);
    for (lengths) |l| count[l] += 1;
    var next: u16 = 0;
    for (length_min..length_max + 1) |l| {
        t.offset[l] = next;
        next += count[l];
    }
    var placed = t.offset;
    for (lengths, 0..) |l, symbol| {
        t.sorted[placed[l]] = symbol;
        placed[l] += 1;
    }
    var code: u64 = 0;
    var previous: u6 = length_min;
    for (t.sorted, 0..) |symbol, i| {
        const l: u6 = lengths[symbol];
        if (i > 0) code = (code + 1) << (l - previous);
        previous = l;
        t.codes[symbol] = code;
    }
    // Every code fits its length, and the last (EOS) is all ones: the code is complete.
    assert(code == (1 << length_max) - 1);
    var first_code: u64 = 0;
    for (length_min..length_max + 1) |l| {
        if (count[l] > 0) first_code = t.codes[t.sorted[t.offset[l]]];
        t.first[l] = if (count[l] > 0) first_code << (32 - l) else 0;
        const end = if (count[l] > 0) first_code + count[l] else 0;
        t.limit[l] = if (count[l] > 0) end << (32 - l) else 0;
    }
    break :blk t;
};

/// The length in bytes of `text` Huffman-coded.
pub fn encodedLength(text: []const u8) usize {
    var bits: usize = 0;
    for (text) |c| bits += lengths[c];
    return (bits + 7) / 8;
}

/// Writes `text` Huffman-coded into `out`, which must hold `encodedLength(text)` bytes; the
/// last byte is padded with the most significant bits of EOS (ones). Returns the length.
pub fn encode(text: []const u8, out: []u8) usize {
    assert(out.len >= encodedLength(text));
    var written: usize = 0;
    var bits: u64 = 0;
    var pending: u6 = 0;
    for (text) |c| {
        const l = lengths[c];
        bits = (bits << l) | tables.codes[c];
        pending += l;
        while (pending >= 8) {
            pending -= 8;
            out[written] = @truncate(bits >> pending);
            written += 1;
        }
    }
    if (pending > 0) {
        out[written] = @truncate((bits << (8 - pending)) | (@as(u64, 0xff) >> pending));
        written += 1;
    }
    return written;
}

pub const DecodeError = error{
    /// The coded string is not a sequence of codes padded with fewer than 8 one bits, or it
    /// holds EOS (RFC 7541 §5.2): a COMPRESSION_ERROR.
    InvalidHuffman,
    /// `out` is too small for the decoded string.
    NoSpaceLeft,
};

/// Decodes Huffman-coded `coded` into `out`; returns the decoded length.
pub fn decode(coded: []const u8, out: []u8) DecodeError!usize {
    return walk(coded, out);
}

/// Whether `coded` is valid Huffman code, without keeping the decoded bytes.
pub fn isValid(coded: []const u8) bool {
    _ = walk(coded, null) catch return false;
    return true;
}

fn walk(coded: []const u8, out: ?[]u8) DecodeError!usize {
    var written: usize = 0;
    // Bits not yet decoded, left-aligned in `window` (the top `available` bits).
    var window: u64 = 0;
    var available: u7 = 0;
    var index: usize = 0;
    while (true) {
        while (available <= 56 and index < coded.len) {
            window |= @as(u64, coded[index]) << @intCast(56 - available);
            available += 8;
            index += 1;
        }
        if (available == 0) break;
        const top: u64 = window >> 32;
        const l = codeLength(top);
        if (l > available) {
            // What is left is shorter than any code it could start: padding, which must be
            // fewer than 8 bits, all ones (a prefix of EOS).
            if (available >= 8) return error.InvalidHuffman;
            const ones = (@as(u64, 1) << @intCast(available)) - 1;
            if ((window >> @intCast(64 - @as(u7, available))) != ones) return error.InvalidHuffman;
            break;
        }
        const symbol = tables.sorted[tables.offset[l] + @as(usize, @intCast((top - tables.first[l]) >> @intCast(32 - @as(u7, l))))];
        if (symbol == eos) return error.InvalidHuffman;
        if (out) |o| {
            if (written == o.len) return error.NoSpaceLeft;
            o[written] = @intCast(symbol);
        }
        written += 1;
        window <<= @intCast(l);
        available -= l;
    }
    return written;
}

/// The length of the code that starts the 32 bits `top` (left-aligned): the shortest length
/// whose codes reach past `top`.
fn codeLength(top: u64) u6 {
    inline for (length_min..length_max + 1) |l| {
        if (tables.limit[l] != 0 and top < tables.limit[l]) return l;
    }
    unreachable; // the code is complete: every 32-bit pattern starts with some code
}

test "huffman: codes derived from the lengths match rows of RFC 7541 Appendix B" {
    const rows = [_]struct { u16, u32, u5 }{
        .{ 0, 0x1ff8, 13 },      .{ 1, 0x7fffd8, 23 },    .{ 9, 0xffffea, 24 },    .{ 10, 0x3ffffffc, 30 },
        .{ ' ', 0x14, 6 },       .{ '!', 0x3f8, 10 },     .{ '0', 0x0, 5 },        .{ '<', 0x7ffc, 15 },
        .{ 'A', 0x21, 6 },       .{ 'X', 0xfc, 8 },       .{ '\\', 0x7fff0, 19 },  .{ 'a', 0x3, 5 },
        .{ 't', 0x9, 5 },        .{ '~', 0x1ffd, 13 },    .{ 127, 0xffffffc, 28 }, .{ 128, 0xfffe6, 20 },
        .{ 199, 0x1ffffec, 25 }, .{ 220, 0xffffffd, 28 }, .{ 255, 0x3ffffee, 26 }, .{ 256, 0x3fffffff, 30 },
    };
    for (rows) |row| {
        try std.testing.expectEqual(row[1], tables.codes[row[0]]);
        try std.testing.expectEqual(row[2], lengths[row[0]]);
    }
}

test "huffman: RFC 7541 Appendix C.4 and C.6 strings" {
    const cases = [_]struct { []const u8, []const u8 }{
        .{ "www.example.com", "\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff" },
        .{ "no-cache", "\xa8\xeb\x10\x64\x9c\xbf" },
        .{ "custom-key", "\x25\xa8\x49\xe9\x5b\xa9\x7d\x7f" },
        .{ "custom-value", "\x25\xa8\x49\xe9\x5b\xb8\xe8\xb4\xbf" },
        .{ "302", "\x64\x02" },
        .{ "private", "\xae\xc3\x77\x1a\x4b" },
        .{ "Mon, 21 Oct 2013 20:13:21 GMT", "\xd0\x7a\xbe\x94\x10\x54\xd4\x44\xa8\x20\x05\x95\x04\x0b\x81\x66\xe0\x82\xa6\x2d\x1b\xff" },
        .{ "https://www.example.com", "\x9d\x29\xad\x17\x18\x63\xc7\x8f\x0b\x97\xc8\xe9\xae\x82\xae\x43\xd3" },
        .{ "gzip", "\x9b\xd9\xab" },
        .{ "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1", "\x94\xe7\x82\x1d\xd7\xf2\xe6\xc7\xb3\x35\xdf\xdf\xcd\x5b\x39\x60\xd5\xaf\x27\x08\x7f\x36\x72\xc1\xab\x27\x0f\xb5\x29\x1f\x95\x87\x31\x60\x65\xc0\x03\xed\x4e\xe5\xb1\x06\x3d\x50\x07" },
    };
    for (cases) |case| {
        var coded: [128]u8 = undefined;
        try std.testing.expectEqual(case[1].len, encodedLength(case[0]));
        try std.testing.expectEqualSlices(u8, case[1], coded[0..encode(case[0], &coded)]);
        var text: [128]u8 = undefined;
        try std.testing.expectEqualStrings(case[0], text[0..try decode(case[1], &text)]);
    }
}

test "huffman: every byte value survives a round trip, alone and together" {
    var all: [256]u8 = undefined;
    for (&all, 0..) |*b, i| b.* = @intCast(i);
    var coded: [1024]u8 = undefined;
    var text: [256]u8 = undefined;
    const n = encode(&all, &coded);
    try std.testing.expectEqualSlices(u8, &all, text[0..try decode(coded[0..n], &text)]);
    for (all) |b| {
        const m = encode(&.{b}, &coded);
        try std.testing.expectEqualSlices(u8, &.{b}, text[0..try decode(coded[0..m], &text)]);
    }
}

test "huffman: bad padding, EOS and a full output are refused" {
    var text: [16]u8 = undefined;
    // 'a' (00011) padded with 0s instead of 1s.
    try std.testing.expectError(error.InvalidHuffman, decode("\x18", &text));
    // 'a' then 11 bits of padding: more than 7.
    try std.testing.expectError(error.InvalidHuffman, decode("\x1f\xff", &text));
    // EOS itself (30 ones), padded.
    try std.testing.expectError(error.InvalidHuffman, decode("\xff\xff\xff\xff", &text));
    // Padding alone (fewer than 8 ones) after a whole byte of codes is fine: "0" is 00000.
    try std.testing.expectEqual(@as(usize, 1), try decode("\x07", &text));
    try std.testing.expectEqual(@as(usize, 0), try decode("", &text));
    try std.testing.expectError(error.NoSpaceLeft, decode("\x00\x00\x00", text[0..2]));
    try std.testing.expect(isValid("\x00\x00\x0f")); // "0000" and four bits of padding
    try std.testing.expect(!isValid("\x00\x00\x00"));
    try std.testing.expect(!isValid("\xff\xff\xff\xff"));
}
