//! SIMD byte scanners for the HTTP/1 request parser. Each finds the first byte of a class in
//! one pass, `vector_len` bytes at a time, with a scalar tail; the parser then checks that the
//! byte found is the delimiter it expected, so finding the end and validating are one pass.
const std = @import("std");
const assert = std.debug.assert;

/// Bytes per vector: the target's natural width (32 with AVX2, 16 with SSE2/NEON), at most 32.
/// Most request lines and field lines are shorter than 64 bytes, so 64-byte vectors (AVX-512)
/// would mostly scan past the line's end and take the tail path; measured on an AVX-512
/// machine (bench-micro, thread CPU time) 32 bytes parse about 10% faster.
pub const vector_len = @min(32, std.simd.suggestVectorLength(u8) orelse 16);
const Vector = @Vector(vector_len, u8);
const Mask = @Int(.unsigned, vector_len);

/// Index of the first byte at or after `start` that cannot appear in a request-target
/// (RFC 9112 §3.2, RFC 3986 §3: a byte <= 0x20, DEL, a byte above 0x7F, which must be
/// percent-encoded, or `#`, as a fragment is never sent; the one expected is the SP that
/// ends it), or null if there is none in `bytes`.
pub fn findTargetEnd(bytes: []const u8, start: usize) ?usize {
    const target = findTarget(bytes, start) orelse return null;
    return target.end;
}

/// Index of the first byte at or after `start` that cannot appear in a field value
/// (RFC 9110 §5.5: CTL other than HTAB, or DEL; the one expected is the CR that ends the
/// line), or `bytes.len` if there is none in `bytes`.
pub fn findValueEnd(bytes: []const u8, start: usize) usize {
    return findFirst(bytes, start, .value_end);
}

/// Where a request-target ends and where its query starts.
pub const Target = struct {
    /// Index of the first byte that cannot appear in a target (see `findTargetEnd`).
    end: usize,
    /// Index of the first '?' before `end`, or null.
    query: ?usize,
};

/// `findTargetEnd`, and the first '?' before the end found in the same pass (origin-form
/// targets split there into path and query), or null if no end is in `bytes`. Full vectors,
/// then one vector ending at the end of `bytes`, then single bytes, as `findFirst`.
pub fn findTarget(bytes: []const u8, start: usize) ?Target {
    var query: ?usize = null;
    var i = start;
    while (i + vector_len <= bytes.len) : (i += vector_len) {
        const chunk: Vector = bytes[i..][0..vector_len].*;
        if (targetStep(i, chunk, 0, &query)) |target| return target;
    }
    if (i < bytes.len and bytes.len >= vector_len) {
        const base = bytes.len - vector_len;
        const chunk: Vector = bytes[base..][0..vector_len].*;
        return targetStep(i, chunk, @intCast(i - base), &query);
    }
    while (i < bytes.len) : (i += 1) {
        const c = bytes[i];
        if (matchesByte(.target_end, c)) return .{ .end = i, .query = query };
        if (c == '?' and query == null) query = i;
    }
    return null;
}

/// One vector of `findTarget`: lane `shift` of `chunk` is the byte at `i`.
inline fn targetStep(
    i: usize,
    chunk: Vector,
    shift: std.math.Log2Int(Mask),
    query: *?usize,
) ?Target {
    const end_mask = matches(.target_end, vector_len, chunk) >> shift;
    const query_mask = @as(Mask, @bitCast(chunk == @as(Vector, @splat('?')))) >> shift;
    if (end_mask == 0) {
        if (query.* == null and query_mask != 0) query.* = i + @ctz(query_mask);
        return null;
    }
    const end = @ctz(end_mask);
    const before_end = query_mask & ((@as(Mask, 1) << @intCast(end)) -% 1);
    if (query.* == null and before_end != 0) query.* = i + @ctz(before_end);
    return .{ .end = i + end, .query = query.* };
}

const Class = enum { target_end, value_end };

inline fn matches(comptime class: Class, comptime len: usize, chunk: @Vector(len, u8)) @Int(.unsigned, len) {
    const V = @Vector(len, u8);
    const hit = switch (class) {
        .target_end => (chunk <= @as(V, @splat(0x20))) | (chunk >= @as(V, @splat(0x7f))) |
            (chunk == @as(V, @splat('#'))),
        .value_end => ((chunk < @as(V, @splat(0x20))) & (chunk != @as(V, @splat('\t')))) |
            (chunk == @as(V, @splat(0x7f))),
    };
    return @bitCast(hit);
}

inline fn matchesByte(comptime class: Class, c: u8) bool {
    return switch (class) {
        .target_end => c <= 0x20 or c >= 0x7f or c == '#',
        .value_end => (c < 0x20 and c != '\t') or c == 0x7f,
    };
}

/// The first index at or after `start` whose byte is in `class`, or `bytes.len`: full vectors,
/// then one vector ending at the end of `bytes`, then single bytes, so short fields (most of
/// them) take few steps.
inline fn findFirst(bytes: []const u8, start: usize, comptime class: Class) usize {
    var i = start;
    while (i + vector_len <= bytes.len) : (i += vector_len) {
        const mask = matches(class, vector_len, bytes[i..][0..vector_len].*);
        if (mask != 0) return i + @ctz(mask);
    }
    if (i < bytes.len and bytes.len >= vector_len) {
        // The tail: one vector ending at the end of `bytes`, lanes before `i` shifted out.
        const base = bytes.len - vector_len;
        const mask = matches(class, vector_len, bytes[base..][0..vector_len].*) >> @intCast(i - base);
        return if (mask != 0) i + @ctz(mask) else bytes.len;
    }
    while (i < bytes.len) : (i += 1) {
        if (matchesByte(class, bytes[i])) return i;
    }
    return bytes.len;
}

/// Index of the first byte at or after `start` that is not a tchar (the one expected is the
/// ':' after a field name), or `bytes.len`. Nearly every name is letters, digits and '-': one
/// vector finds the first other byte (usually the ':'), and the tchar table walk takes over
/// from there for the rest of the token class and the last few bytes of `bytes`.
pub fn findNameEnd(bytes: []const u8, start: usize) usize {
    var i = start;
    while (i + vector_len <= bytes.len) : (i += vector_len) {
        const mask = notNameFast(vector_len, bytes[i..][0..vector_len].*);
        if (mask != 0) return tokenEnd(bytes, i + @ctz(mask));
    }
    if (vector_len > 16 and i + 16 <= bytes.len) {
        const mask = notNameFast(16, bytes[i..][0..16].*);
        if (mask != 0) return tokenEnd(bytes, i + @ctz(mask));
        i += 16;
    }
    return tokenEnd(bytes, i);
}

/// The table walk from `start`, which is usually already the ':'.
inline fn tokenEnd(bytes: []const u8, start: usize) usize {
    var i = start;
    while (i < bytes.len and token_table[bytes[i]]) i += 1;
    return i;
}

/// The lanes of `chunk` that are not a letter, a digit or '-' (the common name bytes).
pub inline fn notNameFast(comptime len: usize, chunk: @Vector(len, u8)) @Int(.unsigned, len) {
    const V = @Vector(len, u8);
    const lower = chunk | @as(V, @splat(0x20));
    const alpha = (lower -% @as(V, @splat('a'))) < @as(V, @splat(26));
    const digit = (chunk -% @as(V, @splat('0'))) < @as(V, @splat(10));
    const dash = chunk == @as(V, @splat('-'));
    const fast: @Int(.unsigned, len) = @bitCast(alpha | digit | dash);
    return ~fast;
}

fn referenceNameEnd(bytes: []const u8, start: usize) usize {
    var i = start;
    while (i < bytes.len and token_table[bytes[i]]) i += 1;
    return i;
}

test "findNameEnd: agrees with the tchar table at every position" {
    var buf: [2 * vector_len + 7]u8 = undefined;
    for (0..buf.len) |stop| {
        for ([_]u8{ ':', ' ', 0, 0x80, '@', '[', '`', '{', 0xda }) |stop_byte| {
            for (&buf, 0..) |*b, i| b.* = "aZ9-_.x!~"[i % 9];
            buf[stop] = stop_byte;
            for (0..buf.len) |start| {
                try std.testing.expectEqual(referenceNameEnd(&buf, start), findNameEnd(&buf, start));
            }
        }
    }
}

/// The lanes of `chunk` that may appear in a reg-name or IPv4address (RFC 3986 §3.2.2):
/// unreserved, sub-delims and '%'. By range: '!', '$' to '.', digits, ';', '=', letters, '_'
/// and '~'.
pub inline fn hostLanes(chunk: @Vector(16, u8)) u16 {
    const V = @Vector(16, u8);
    const lower = chunk | @as(V, @splat(0x20));
    const alpha = (lower -% @as(V, @splat('a'))) < @as(V, @splat(26));
    const dollar_to_dot = (chunk -% @as(V, @splat('$'))) < @as(V, @splat('.' - '$' + 1));
    const single = (chunk == @as(V, @splat('!'))) | (chunk == @as(V, @splat(';'))) |
        (chunk == @as(V, @splat('='))) | (chunk == @as(V, @splat('_'))) |
        (chunk == @as(V, @splat('~')));
    return @bitCast(alpha | digitLanesBool(chunk) | dollar_to_dot | single);
}

/// The lanes of `chunk` that are ASCII digits.
pub inline fn digitLanes(chunk: @Vector(16, u8)) u16 {
    return @bitCast(digitLanesBool(chunk));
}

inline fn digitLanesBool(chunk: @Vector(16, u8)) @Vector(16, bool) {
    const V = @Vector(16, u8);
    return (chunk -% @as(V, @splat('0'))) < @as(V, @splat(10));
}

/// reg-name and IPv4address bytes (RFC 3986 §3.2.2), as a table: unreserved, sub-delims, '%'.
pub const host_table: [256]bool = blk: {
    var table: [256]bool = @splat(false);
    for ("-._~%!$&'()*+,;=") |c| table[c] = true;
    for ('0'..'9' + 1) |c| table[c] = true;
    for ('a'..'z' + 1) |c| table[c] = true;
    for ('A'..'Z' + 1) |c| table[c] = true;
    break :blk table;
};

test "hostLanes and digitLanes: agree with the tables for every byte" {
    for (0..256 / 16) |block| {
        var bytes: [16]u8 = undefined;
        for (&bytes, 0..) |*b, i| b.* = @intCast(block * 16 + i);
        const host = hostLanes(bytes);
        const digit = digitLanes(bytes);
        for (bytes, 0..) |b, i| {
            const bit: u16 = @as(u16, 1) << @intCast(i);
            try std.testing.expectEqual(host_table[b], host & bit != 0);
            try std.testing.expectEqual(std.ascii.isDigit(b), digit & bit != 0);
        }
    }
}

/// The first `Short.len` bytes of a request (fewer when `bytes` is shorter), classified per
/// byte for the parser's short-head path: bit i of each mask describes byte i, and bits past
/// the end of `bytes` are clear. Two 32-byte halves: the second is the last 32 bytes of `bytes`
/// when it holds fewer than 64, its lanes moved into place by shifting the masks. Each mask is
/// computed where it is first asked for, so a head that does not fit costs only `lineFeeds`.
pub const Short = struct {
    lo: Half,
    hi: Half,
    /// Lanes of `hi` before byte 32 (0 when `bytes` holds 64 bytes or more).
    shift: u6,

    pub const len = 64;
    const Half = @Vector(32, u8);

    /// Asserts `bytes` holds at least 32 bytes.
    pub inline fn load(bytes: []const u8) Short {
        assert(bytes.len >= 32);
        const hi_at = @min(bytes.len, len) - 32;
        return .{
            .lo = bytes[0..32].*,
            .hi = bytes[hi_at..][0..32].*,
            .shift = @intCast(32 - hi_at),
        };
    }

    inline fn join(short: Short, lo: @Vector(32, bool), hi: @Vector(32, bool)) u64 {
        const lo_bits: u32 = @bitCast(lo);
        const hi_bits: u32 = @bitCast(hi);
        return (@as(u64, hi_bits) >> short.shift << 32) | lo_bits;
    }

    /// The first four bytes, little-endian.
    pub inline fn firstWord(short: Short) u32 {
        const words: @Vector(8, u32) = @bitCast(short.lo);
        return words[0];
    }

    /// Line feeds.
    pub inline fn lineFeeds(short: Short) u64 {
        return short.join(short.lo == splat('\n'), short.hi == splat('\n'));
    }

    /// Control bytes (CR and LF among them), DEL and bytes above 0x7F: what the short path
    /// takes only as the CR and LF that end a line.
    pub inline fn irregulars(short: Short) u64 {
        return short.join(isIrregular(short.lo), isIrregular(short.hi));
    }

    /// Bytes other than a letter, a digit, '-' or '.': the first one after a field name is
    /// nearly always its colon, and a Host value of only those bytes is a valid reg-name.
    pub inline fn others(short: Short) u64 {
        return short.join(isOther(short.lo), isOther(short.hi));
    }

    /// SP, '#', bytes above 0x7F and control bytes (what ends a request-target), and '?'
    /// (what starts its query).
    pub inline fn targetStops(short: Short) u64 {
        return short.join(isTargetStop(short.lo), isTargetStop(short.hi));
    }

    inline fn splat(byte: u8) Half {
        return @splat(byte);
    }

    inline fn isIrregular(chunk: Half) @Vector(32, bool) {
        // One add and one signed compare: 0x00-0x1F become 1-0x20, 0x7F-0xFE become negative
        // and 0xFF becomes 0.
        const next: @Vector(32, i8) = @bitCast(chunk +% splat(1));
        return next <= @as(@Vector(32, i8), @splat(0x20));
    }

    inline fn isOther(chunk: Half) @Vector(32, bool) {
        const alpha = inRange(chunk | splat(0x20), 'a', 'z');
        // '-', '.' and the digits: '-' to '9' but '/'.
        const common = alpha | (inRange(chunk, '-', '9') & (chunk != splat('/')));
        return ~common;
    }

    /// `low <= chunk <= high` per lane, in one add and one signed compare.
    inline fn inRange(chunk: Half, comptime low: u8, comptime high: u8) @Vector(32, bool) {
        const shifted: @Vector(32, i8) = @bitCast(chunk -% splat(low) +% splat(0x80));
        return shifted <= @as(@Vector(32, i8), @splat(@as(i8, @bitCast(high -% low +% 0x80))));
    }

    inline fn isTargetStop(chunk: Half) @Vector(32, bool) {
        // SP and the bytes above 0x7F in one signed compare (control bytes come along).
        const signed: @Vector(32, i8) = @bitCast(chunk);
        return (signed <= @as(@Vector(32, i8), @splat(' '))) | (chunk == splat('#')) |
            (chunk == splat('?'));
    }
};

test "Short: every mask agrees with a per-byte reference, for every length" {
    var buf: [Short.len + 9]u8 = undefined;
    for (0..256 / buf.len + 1) |round| {
        for (&buf, 0..) |*b, i| b.* = @truncate(round * buf.len + i);
        for (32..buf.len + 1) |end| {
            const bytes = buf[0..end];
            const short: Short = .load(bytes);
            const masks = [_]u64{
                short.lineFeeds(), short.irregulars(), short.others(), short.targetStops(),
            };
            for (0..Short.len) |i| {
                const bit: u64 = @as(u64, 1) << @intCast(i);
                const c: ?u8 = if (i < bytes.len) bytes[i] else null;
                const expected = [_]bool{
                    if (c) |b| b == '\n' else false,
                    if (c) |b| b < 0x20 or b >= 0x7f else false,
                    if (c) |b| !(std.ascii.isAlphanumeric(b) or b == '-' or b == '.') else false,
                    if (c) |b| b <= ' ' or b == '#' or b == '?' or b >= 0x80 else false,
                };
                for (masks, expected) |mask, want| try std.testing.expectEqual(want, mask & bit != 0);
            }
        }
    }
}

/// tchar (RFC 9110 §5.6.2): the bytes allowed in a method or field name.
pub const token_table: [256]bool = blk: {
    var table: [256]bool = @splat(false);
    for ("!#$%&'*+-.^_`|~") |c| table[c] = true;
    for ('0'..'9' + 1) |c| table[c] = true;
    for ('a'..'z' + 1) |c| table[c] = true;
    for ('A'..'Z' + 1) |c| table[c] = true;
    break :blk table;
};

/// True when `bytes` is a non-empty token.
pub fn isToken(bytes: []const u8) bool {
    if (bytes.len == 0) return false;
    for (bytes) |c| if (!token_table[c]) return false;
    return true;
}

fn referenceTargetEnd(bytes: []const u8, start: usize) ?usize {
    for (bytes[start..], start..) |c, i| if (c <= 0x20 or c == 0x7f) return i;
    return null;
}

fn referenceValueEnd(bytes: []const u8, start: usize) ?usize {
    for (bytes[start..], start..) |c, i| if ((c < 0x20 and c != '\t') or c == 0x7f) return i;
    return null;
}

test "findTargetEnd: every position and every start agree with a scalar reference" {
    var buf: [3 * vector_len + 5]u8 = undefined;
    for (0..buf.len) |stop| {
        for ([_]u8{ ' ', 0, '\r', 0x7f, 0x1f }) |stop_byte| {
            @memset(&buf, 'a');
            buf[stop] = stop_byte;
            for (0..buf.len) |start| {
                try std.testing.expectEqual(referenceTargetEnd(&buf, start), findTargetEnd(&buf, start));
            }
        }
    }
}

test "findTarget: the end and the first '?' before it, at every position" {
    var buf: [3 * vector_len + 5]u8 = undefined;
    for (0..buf.len) |stop| {
        // Question marks before, at and after the end, and near vector boundaries.
        const marks = [_]?usize{
            null, 0, stop -| 1, stop + 1, vector_len - 1, vector_len, 2 * vector_len + 1,
        };
        for (marks) |first| for (marks) |second| {
            @memset(&buf, 'a');
            for ([_]?usize{ first, second }) |mark| if (mark) |q| if (q < buf.len) {
                buf[q] = '?';
            };
            buf[stop] = ' ';
            for (0..buf.len) |start| {
                const end = referenceTargetEnd(&buf, start);
                const found = findTarget(&buf, start);
                try std.testing.expectEqual(end, if (found) |f| f.end else null);
                if (found) |f| try std.testing.expectEqual(
                    if (std.mem.findScalar(u8, buf[start..f.end], '?')) |q| start + q else null,
                    f.query,
                );
            }
        };
    }
}

test "findValueEnd: tabs, high bytes and spaces are value bytes" {
    var buf: [2 * vector_len + 3]u8 = undefined;
    for (0..buf.len) |stop| {
        for ([_]u8{ '\r', '\n', 0, 0x7f, 0x01 }) |stop_byte| {
            for (&buf, 0..) |*b, i| b.* = switch (i % 4) {
                0 => '\t',
                1 => 0x80,
                2 => ' ',
                else => 'x',
            };
            buf[stop] = stop_byte;
            for (0..buf.len) |start| {
                const expected = referenceValueEnd(&buf, start) orelse buf.len;
                try std.testing.expectEqual(expected, findValueEnd(&buf, start));
            }
        }
    }
}

test "isToken" {
    try std.testing.expect(isToken("Content-Type"));
    try std.testing.expect(isToken("x!#$%&'*+-.^_`|~9"));
    try std.testing.expect(!isToken(""));
    try std.testing.expect(!isToken("a b"));
    try std.testing.expect(!isToken("a:b"));
    try std.testing.expect(!isToken("a\"b"));
}
