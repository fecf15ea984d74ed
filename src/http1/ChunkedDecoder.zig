//! Streaming decoder for the chunked transfer coding (RFC 9112 §7.1).
//!
//! `feed` walks the framing a byte at a time and hands back chunk data as slices of its input,
//! so the caller decides where data goes (in place, or into a body buffer) and nothing is
//! copied here. Framing is strict, with bounded state: chunk sizes are 1–16 hex digits,
//! extensions follow RFC 9112 §7.1.1 (`;` name, optional `=` token or quoted string, BWS
//! around both), extensions and trailers are length-limited and may not hold control bytes,
//! and every line must end in CRLF. Extensions and trailer fields are validated and then
//! discarded.
const std = @import("std");
const assert = std.debug.assert;
const scan = @import("scan.zig");

const ChunkedDecoder = @This();

state: State = .size_start,
/// Data bytes left in the current chunk.
chunk_remaining: u64 = 0,
/// Hex digits read in the current chunk-size.
size_digits: u8 = 0,
/// Bytes of the current chunk line after the size (extensions), or of the trailer section.
line_bytes: u32 = 0,
/// Total bytes of the trailer section so far.
trailer_bytes: u32 = 0,
/// Whether the current trailer line has passed its colon.
trailer_in_value: bool = false,
limits: Limits,

/// Bounds on framing overhead.
pub const Limits = struct {
    /// Longest chunk extension list on one chunk line.
    extension_bytes_max: u32 = 4 * 1024,
    /// Longest trailer section.
    trailer_bytes_max: u32 = 8 * 1024,
};

const State = enum {
    size_start,
    size,
    size_whitespace,
    // chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
    ext_name_start,
    ext_name,
    ext_after_name,
    ext_value_start,
    ext_value,
    ext_quoted,
    ext_quoted_pair,
    ext_after_value,
    size_lf,
    data,
    data_cr,
    data_lf,
    trailer_start,
    trailer_name,
    trailer_value,
    trailer_lf,
    final_lf,
    done,
};

/// Ways a chunked body can be malformed; each is answered with 400.
pub const Error = error{
    /// A chunk-size that is missing or not hexadecimal.
    InvalidChunkSize,
    /// A chunk-size of more than 16 hex digits (would overflow 64 bits).
    ChunkSizeTooLarge,
    /// A chunk extension that is not `;` name [`=` token or quoted string] (RFC 9112
    /// §7.1.1): an empty name, an unbalanced quoted string, a control byte, whitespace not
    /// followed by `;` or `=`.
    InvalidChunkExtension,
    /// Chunk extensions longer than `extension_bytes_max`.
    ChunkExtensionTooLong,
    /// Chunk data not followed by CRLF.
    InvalidChunkTerminator,
    /// A line ending in LF without CR.
    BareLineFeed,
    /// A CR not followed by LF.
    BareCarriageReturn,
    /// A trailer line that is not `token ":" value`.
    InvalidTrailer,
    /// A trailer section longer than `trailer_bytes_max`.
    TrailerTooLarge,
};

/// What one `feed` call found.
pub const Output = struct {
    /// Bytes of input used (framing and data).
    consumed: usize,
    /// Chunk data found: a slice of the input, possibly empty.
    data: []const u8,
};

/// Creates a decoder for one body.
pub fn init(limits: Limits) ChunkedDecoder {
    return .{ .limits = limits };
}

/// Whether the last chunk and the trailer section have been read.
pub fn done(decoder: *const ChunkedDecoder) bool {
    return decoder.state == .done;
}

/// Decodes from `input` until one span of chunk data is found, the input ends, or the body
/// is complete. Call again with the unconsumed rest. Asserts the body is not already complete.
pub fn feed(decoder: *ChunkedDecoder, input: []const u8) Error!Output {
    assert(decoder.state != .done);
    var i: usize = 0;
    while (i < input.len) {
        if (decoder.state == .data) {
            const available = input.len - i;
            const take: usize = @intCast(@min(decoder.chunk_remaining, available));
            decoder.chunk_remaining -= take;
            if (decoder.chunk_remaining == 0) decoder.state = .data_cr;
            return .{ .consumed = i + take, .data = input[i..][0..take] };
        }
        try decoder.step(input[i]);
        i += 1;
        if (decoder.state == .done) break;
    }
    return .{ .consumed = i, .data = input[i..i] };
}

fn step(decoder: *ChunkedDecoder, c: u8) Error!void {
    switch (decoder.state) {
        .size_start, .size => {
            if (hexValue(c)) |digit| {
                if (decoder.size_digits == 16) return error.ChunkSizeTooLarge;
                decoder.size_digits += 1;
                decoder.chunk_remaining = decoder.chunk_remaining << 4 | digit;
                decoder.state = .size;
                return;
            }
            if (decoder.state == .size_start) return error.InvalidChunkSize;
            decoder.line_bytes = 0;
            switch (c) {
                '\r' => decoder.state = .size_lf,
                ';' => decoder.state = .ext_name_start,
                ' ', '\t' => decoder.state = .size_whitespace,
                '\n' => return error.BareLineFeed,
                else => return error.InvalidChunkSize,
            }
        },
        .size_whitespace => switch (c) {
            ' ', '\t' => try decoder.countExtension(),
            ';' => decoder.state = .ext_name_start,
            else => return error.InvalidChunkExtension,
        },
        .ext_name_start,
        .ext_name,
        .ext_after_name,
        .ext_value_start,
        .ext_value,
        .ext_quoted,
        .ext_quoted_pair,
        .ext_after_value,
        => try decoder.stepExtension(c),
        .size_lf => {
            if (c != '\n') return error.BareCarriageReturn;
            decoder.size_digits = 0;
            if (decoder.chunk_remaining == 0) {
                decoder.state = .trailer_start;
            } else {
                decoder.state = .data;
            }
        },
        .data_cr => decoder.state = if (c == '\r') .data_lf else return error.InvalidChunkTerminator,
        .data_lf => decoder.state = if (c == '\n') .size_start else return error.InvalidChunkTerminator,
        .trailer_start, .trailer_name, .trailer_value, .trailer_lf, .final_lf => try decoder.stepTrailer(c),
        .data, .done => unreachable,
    }
}

/// One byte of a chunk extension (RFC 9112 §7.1.1): chunk-ext-name is a token, chunk-ext-val
/// a token or a quoted-string (RFC 9110 §5.6.4).
fn stepExtension(decoder: *ChunkedDecoder, c: u8) Error!void {
    if (c == '\n') return error.BareLineFeed;
    if (c != '\r') try decoder.countExtension();
    const token = scan.token_table[c];
    const blank = c == ' ' or c == '\t';
    decoder.state = switch (decoder.state) {
        .ext_name_start => if (token) .ext_name else if (blank) .ext_name_start else return error.InvalidChunkExtension,
        .ext_name, .ext_after_name => if (token and decoder.state == .ext_name) .ext_name else switch (c) {
            ' ', '\t' => .ext_after_name,
            '=' => .ext_value_start,
            ';' => .ext_name_start,
            '\r' => .size_lf,
            else => return error.InvalidChunkExtension,
        },
        .ext_value_start => if (token) .ext_value else switch (c) {
            ' ', '\t' => .ext_value_start,
            '"' => .ext_quoted,
            else => return error.InvalidChunkExtension, // CR included: `=` needs a value
        },
        .ext_value, .ext_after_value => if (token and decoder.state == .ext_value) .ext_value else switch (c) {
            ' ', '\t' => .ext_after_value,
            ';' => .ext_name_start,
            '\r' => .size_lf,
            else => return error.InvalidChunkExtension,
        },
        // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text; a CR here leaves the
        // quoted string open.
        .ext_quoted => switch (c) {
            '"' => .ext_after_value,
            '\\' => .ext_quoted_pair,
            '\t', ' ', 0x21, 0x23...0x5b, 0x5d...0x7e, 0x80...0xff => .ext_quoted,
            else => return error.InvalidChunkExtension,
        },
        // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
        .ext_quoted_pair => switch (c) {
            '\t', ' ', 0x21...0x7e, 0x80...0xff => .ext_quoted,
            else => return error.InvalidChunkExtension,
        },
        else => unreachable,
    };
}

fn countExtension(decoder: *ChunkedDecoder) Error!void {
    decoder.line_bytes += 1;
    if (decoder.line_bytes > decoder.limits.extension_bytes_max) return error.ChunkExtensionTooLong;
}

/// trailer-section = *( field-line CRLF ) CRLF (RFC 9112 §7.1.2).
fn stepTrailer(decoder: *ChunkedDecoder, c: u8) Error!void {
    decoder.trailer_bytes += 1;
    if (decoder.trailer_bytes > decoder.limits.trailer_bytes_max) return error.TrailerTooLarge;
    switch (decoder.state) {
        .trailer_start => switch (c) {
            '\r' => decoder.state = .final_lf,
            '\n' => return error.BareLineFeed,
            else => {
                if (!scan.token_table[c]) return error.InvalidTrailer;
                decoder.state = .trailer_name;
            },
        },
        .trailer_name => {
            if (c == ':') {
                decoder.state = .trailer_value;
            } else if (!scan.token_table[c]) return error.InvalidTrailer;
        },
        .trailer_value => switch (c) {
            '\r' => decoder.state = .trailer_lf,
            '\n' => return error.BareLineFeed,
            else => if ((c < 0x20 and c != '\t') or c == 0x7f) return error.InvalidTrailer,
        },
        .trailer_lf => decoder.state = if (c == '\n') .trailer_start else return error.BareCarriageReturn,
        .final_lf => decoder.state = if (c == '\n') .done else return error.BareCarriageReturn,
        else => unreachable,
    }
}

fn hexValue(c: u8) ?u4 {
    return switch (c) {
        '0'...'9' => @intCast(c - '0'),
        'a'...'f' => @intCast(c - 'a' + 10),
        'A'...'F' => @intCast(c - 'A' + 10),
        else => null,
    };
}

/// A short explanation of a decoding error, sent as the error response's body.
pub fn message(err: Error) []const u8 {
    return switch (err) {
        error.InvalidChunkSize => "invalid chunk size",
        error.ChunkSizeTooLarge => "chunk size too large",
        error.InvalidChunkExtension => "invalid chunk extension",
        error.ChunkExtensionTooLong => "chunk extension too long",
        error.InvalidChunkTerminator => "chunk data not followed by CRLF",
        error.BareLineFeed => "chunk line ends in LF without CR",
        error.BareCarriageReturn => "CR not followed by LF in chunked body",
        error.InvalidTrailer => "invalid trailer field",
        error.TrailerTooLarge => "trailer section too large",
    };
}

/// Decodes `input` completely, fed in pieces cut at `cuts`, into `out`; for tests.
fn decodeAll(input: []const u8, cuts: []const usize, out: []u8) (Error || error{Incomplete})![]u8 {
    var decoder: ChunkedDecoder = .init(.{ .extension_bytes_max = 24, .trailer_bytes_max = 64 });
    var out_len: usize = 0;
    var pos: usize = 0;
    var cut_index: usize = 0;
    while (!decoder.done()) {
        const end = if (cut_index < cuts.len) cuts[cut_index] else input.len;
        if (pos == end) {
            if (end == input.len) return error.Incomplete;
            cut_index += 1;
            continue;
        }
        const output = try decoder.feed(input[pos..end]);
        @memcpy(out[out_len..][0..output.data.len], output.data);
        out_len += output.data.len;
        pos += output.consumed;
    }
    if (pos != input.len) return error.Incomplete; // tests put nothing after the body
    return out[0..out_len];
}

const Vector = struct { input: []const u8, decoded: (Error || error{Incomplete})![]const u8 };

const vectors = [_]Vector{
    // RFC 9112 §7.1 shape, with extensions, whitespace before ';' and a trailer.
    .{ .input = "4\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n", .decoded = "Wikipedia in\r\n\r\nchunks." },
    .{ .input = "3;name=value;q=\"x y\"\r\nabc\r\n0\r\n\r\n", .decoded = "abc" },
    .{ .input = "3 ;ext\r\nabc\r\n0 \t; last\r\n\r\n", .decoded = "abc" },
    .{ .input = "0\r\nExpires: never\r\nX-Sum:  1\r\n\r\n", .decoded = "" },
    .{ .input = "00000A\r\n0123456789\r\n0\r\n\r\n", .decoded = "0123456789" },
    .{ .input = "a\r\n0123456789\r\n0\r\n\r\n", .decoded = "0123456789" },
    // chunk-ext (RFC 9112 §7.1.1): BWS around ';' and '=', quoted values with quoted-pairs.
    .{ .input = "3 ; a = b ;c;d=\"\"\r\nabc\r\n0\r\n\r\n", .decoded = "abc" },
    .{ .input = "3;a=\"x\\\"y;z\\\\\"\r\nabc\r\n0\r\n\r\n", .decoded = "abc" },
    .{ .input = "3;a=\"\xc3\xa9\"\r\nabc\r\n0\r\n\r\n", .decoded = "abc" },
    // Invalid framing.
    .{ .input = "\r\n", .decoded = error.InvalidChunkSize },
    .{ .input = "x\r\n", .decoded = error.InvalidChunkSize },
    .{ .input = "-1\r\n", .decoded = error.InvalidChunkSize },
    .{ .input = "0x5\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkSize },
    .{ .input = "+5\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkSize },
    .{ .input = "10000000000000000\r\n", .decoded = error.ChunkSizeTooLarge },
    .{ .input = "5\nhello\r\n0\r\n\r\n", .decoded = error.BareLineFeed },
    .{ .input = "5\rhello\r\n0\r\n\r\n", .decoded = error.BareCarriageReturn },
    .{ .input = "5\r\nhelloX\r\n0\r\n\r\n", .decoded = error.InvalidChunkTerminator },
    .{ .input = "5\r\nhello\n0\r\n\r\n", .decoded = error.InvalidChunkTerminator },
    .{ .input = "5;a\x00b\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5 x\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    // An empty name, an unbalanced quoted string, a missing value, a name that is not a token.
    .{ .input = "5;\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;=x\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a;;b\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a=\"x\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a=\"x\\\"\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a=\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a b\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a=b c\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a=b\"c\"\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a@b\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n", .decoded = error.InvalidChunkExtension },
    .{ .input = "5;aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nhello\r\n0\r\n\r\n", .decoded = error.ChunkExtensionTooLong },
    .{ .input = "0\r\nBad Name: x\r\n\r\n", .decoded = error.InvalidTrailer },
    .{ .input = "0\r\nX: a\x01\r\n\r\n", .decoded = error.InvalidTrailer },
    .{ .input = "0\r\n\n", .decoded = error.BareLineFeed },
    .{ .input = "0\r\nX: 0123456789012345678901234567890123456789012345678901234567890123\r\n\r\n", .decoded = error.TrailerTooLarge },
    .{ .input = "5\r\nhel", .decoded = error.Incomplete },
    .{ .input = "0\r\n", .decoded = error.Incomplete },
};

fn expectVector(vector: Vector, cuts: []const usize) !void {
    var out: [128]u8 = undefined;
    const got = decodeAll(vector.input, cuts, &out);
    if (vector.decoded) |expected| {
        try std.testing.expectEqualStrings(expected, try got);
    } else |expected_err| {
        try std.testing.expectError(expected_err, got);
    }
}

test "ChunkedDecoder: vectors fed whole, per byte and split at every offset" {
    for (vectors) |vector| {
        errdefer std.debug.print("input: {f}\n", .{std.zig.fmtString(vector.input)});
        try expectVector(vector, &.{});
        var every: [256]usize = undefined;
        for (every[0..vector.input.len], 0..) |*cut, i| cut.* = i + 1;
        try expectVector(vector, every[0..vector.input.len]);
        for (1..vector.input.len) |cut| try expectVector(vector, &.{cut});
    }
}

test "ChunkedDecoder: stops at the end of the body, leaving a pipelined request" {
    var decoder: ChunkedDecoder = .init(.{});
    const input = "2\r\nhi\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
    const first = try decoder.feed(input);
    try std.testing.expectEqualStrings("hi", first.data);
    const second = try decoder.feed(input[first.consumed..]);
    try std.testing.expect(decoder.done());
    try std.testing.expectEqualStrings("GET / HTTP/1.1\r\n", input[first.consumed + second.consumed ..]);
}
