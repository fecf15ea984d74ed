//! The field lines of a request head as 64-byte blocks of bitmaps, for the parser's fast path.
//!
//! `index` classifies the blocks from the first field line to the empty line that ends the
//! head in one pass, a handful of vector compares per block: where the line feeds are, which
//! bytes are not common field-name bytes (so a name's end is one bit scan away, and nearly
//! always the colon), and whether anything is irregular (a control byte not right before an
//! LF, an LF not right after one). The parser then takes the lines from the bitmaps; no line
//! waits for the scan of the one before it. Nothing here decides an error: a head with
//! anything irregular, longer than `blocks_max` blocks or not complete yet is left to the
//! line-by-line parser, and so is any line the fast path does not take, so both paths reject
//! exactly the same inputs with exactly the same errors.
const std = @import("std");
const assert = std.debug.assert;
const scan = @import("scan.zig");

const HeadBlocks = @This();

pub const block_len = 64;
/// The longest field section the fast path takes: 1 KiB, room for nearly every request.
pub const blocks_max = 16;
const Block = @Vector(block_len, u8);
const Mask = u64;

/// Index in the head's bytes of block 0's first byte (the first field line's).
base: usize,
/// Index of the LF of the empty line that ends the head.
end: usize,
/// Line feeds, per block: bit i of `lf[k]` is byte `base + 64 * k + i`. Clear past `end`.
lf: [blocks_max]Mask,
/// Bytes that are not a letter, a digit or '-', per block (nearly every field name is only
/// those; other names are checked against the token table).
name_other: [blocks_max]Mask,

/// Classifies `bytes[start..]`, where `start` is the first byte of a field line, up to the end
/// of the head. Returns false when the head does not end within `blocks_max` blocks or within
/// `bytes`, or when something before its end is irregular.
pub fn index(blocks: *HeadBlocks, bytes: []const u8, start: usize) bool {
    assert(start > 0 and bytes[start - 1] == '\n');
    blocks.base = start;
    // The byte before `start` is the LF that ended the previous line.
    var previous_lf: Mask = 1 << 63;
    var carry: Mask = 0; // whether the previous block ended with a control byte but LF
    for (0..blocks_max) |k| {
        const at = start + k * block_len;
        if (at >= bytes.len) return false;
        const masks: Masks = if (bytes.len - at >= block_len)
            .of(bytes[at..][0..block_len].*, 0, ~@as(Mask, 0))
        else
            .last(bytes, at);
        const lf = masks.lf;
        blocks.lf[k] = lf;
        blocks.name_other[k] = masks.name_other;

        // Every control byte but LF must come right before an LF, and every LF right after
        // one (the parser checks that it is a CR). So a HTAB or DEL in a value is irregular
        // too: the line-by-line parser takes such heads. The last valid byte's successor is
        // not known yet: the next block, or more bytes, settle it.
        const before_lf = masks.control & ~lf;
        if (carry & ~lf & 1 != 0) return false; // the previous block's last byte is stray
        const stray = before_lf & ~(lf >> 1) & (masks.valid >> 1);
        const bare_lf = lf & ~((before_lf << 1) | carry);
        const irregular = stray | bare_lf;

        // The empty line: an LF two bytes after an LF.
        const ends = lf & ((lf << 2) | (previous_lf >> 62));
        if (ends != 0) {
            const offset: u6 = @intCast(@ctz(ends));
            const through_end = (@as(Mask, 2) << offset) -% 1;
            if (irregular & through_end != 0) return false;
            blocks.end = at + offset;
            blocks.lf[k] = lf & through_end;
            return true;
        }
        if (irregular != 0) return false;
        previous_lf = lf;
        carry = before_lf >> 63;
    }
    return false;
}

/// Index of the first byte at or after `from` that is not a letter, a digit or '-': for a
/// plain field line, the colon after its name. `from` is a line start before `end`, so the
/// search stops at the line's CR at the latest.
pub inline fn nameEnd(blocks: *const HeadBlocks, from: usize) usize {
    assert(from >= blocks.base and from < blocks.end);
    var k = (from - blocks.base) / block_len;
    var mask = blocks.name_other[k] >> @intCast((from - blocks.base) % block_len);
    var at = from;
    while (mask == 0) {
        k += 1;
        at = blocks.base + k * block_len;
        mask = blocks.name_other[k];
    }
    return at + @ctz(mask);
}

/// The line feeds in order, the head's last one included.
pub const LineFeeds = struct {
    blocks: *const HeadBlocks,
    k: usize = 0,
    pending: Mask,

    pub fn init(blocks: *const HeadBlocks) LineFeeds {
        return .{ .blocks = blocks, .pending = blocks.lf[0] };
    }

    /// The next LF's index; there always is one up to and including `end`.
    pub inline fn next(it: *LineFeeds) usize {
        while (it.pending == 0) {
            it.k += 1;
            it.pending = it.blocks.lf[it.k];
        }
        const lf = it.blocks.base + it.k * block_len + @ctz(it.pending);
        it.pending &= it.pending - 1;
        return lf;
    }
};

const Masks = struct {
    lf: Mask,
    control: Mask,
    name_other: Mask,
    /// The lanes that hold bytes of the head; the others are clear in every mask but
    /// `name_other`.
    valid: Mask,

    /// The masks of `chunk` shifted right by `shift` lanes, limited to `valid`.
    inline fn of(chunk: Block, shift: u6, valid: Mask) Masks {
        const name_common = ~scan.notNameFast(block_len, chunk);
        return .{
            .lf = bits(chunk == splat('\n')) >> shift & valid,
            .control = bits((chunk < splat(0x20)) | (chunk == splat(0x7f))) >> shift & valid,
            .name_other = ~(name_common >> shift),
            .valid = valid,
        };
    }

    /// The masks of the block at `at`, which `bytes` ends in (once per head at most).
    inline fn last(bytes: []const u8, at: usize) Masks {
        const available = bytes.len - at;
        assert(available < block_len);
        if (bytes.len < block_len) return short(bytes, at);
        // The last 64 bytes of `bytes`, lanes before `at` shifted out.
        const shift: u6 = @intCast(block_len - available);
        return .of(bytes[bytes.len - block_len ..][0..block_len].*, shift, ~@as(Mask, 0) >> shift);
    }

    /// `last` when all of `bytes` is shorter than a block.
    noinline fn short(bytes: []const u8, at: usize) Masks {
        const available = bytes.len - at;
        var padded: [block_len]u8 = @splat(0);
        @memcpy(padded[0..available], bytes[at..]);
        return .of(padded, 0, (@as(Mask, 1) << @intCast(available)) - 1);
    }
};

inline fn splat(byte: u8) Block {
    return @splat(byte);
}

inline fn bits(lanes: @Vector(block_len, bool)) Mask {
    return @bitCast(lanes);
}

/// What `index` must find, by bytes: the end's LF, or null.
fn referenceEnd(bytes: []const u8, start: usize) ?usize {
    var i = start;
    while (i < bytes.len) : (i += 1) {
        const c = bytes[i];
        const control = c < 0x20 or c == 0x7f;
        if (c == '\n') {
            if (i == start or bytes[i - 1] == '\n' or !(bytes[i - 1] < 0x20 or bytes[i - 1] == 0x7f))
                return null;
            if (i == start + 1 or bytes[i - 2] == '\n') {
                return if (i - start < blocks_max * block_len) i else null;
            }
        } else if (control and i + 1 < bytes.len and bytes[i + 1] != '\n') {
            return null;
        }
    }
    return null;
}

test "HeadBlocks.index: the end, or null, with odd bytes at every position" {
    var buffer: [3 * block_len + 20]u8 = undefined;
    buffer[0] = '\n';
    const fill = "Ab-9: x\r\n";
    for ([_]usize{ 2, 20, block_len, block_len + 1, block_len + 3, buffer.len }) |len| {
        for ([_]?u8{ null, 0, '\r', '\n', 0x7f, '\t', 'z' }) |odd| {
            for (1..len) |at| {
                for (1..len - 1) |end| {
                    const bytes = buffer[0..len];
                    for (bytes[1..], 1..) |*b, i| b.* = fill[(i - 1) % fill.len];
                    if (odd) |o| bytes[at] = o;
                    // An empty line ending at `end`, where there is room for one.
                    if (end < 2) continue;
                    bytes[end - 1] = '\r';
                    bytes[end] = '\n';
                    if (end >= 4) {
                        bytes[end - 2] = '\n';
                        bytes[end - 3] = '\r';
                    }
                    var blocks: HeadBlocks = undefined;
                    const expected = referenceEnd(bytes, 1);
                    const found = blocks.index(bytes, 1);
                    try std.testing.expectEqual(expected != null, found);
                    if (found) {
                        try std.testing.expectEqual(expected.?, blocks.end);
                        var feeds: LineFeeds = .init(&blocks);
                        var from: usize = 1;
                        while (std.mem.findScalarPos(u8, bytes, from, '\n')) |lf| : (from = lf + 1) {
                            try std.testing.expectEqual(lf, feeds.next());
                            if (lf == blocks.end) break;
                        }
                    }
                    if (odd == null) break;
                }
                if (odd == null) break;
            }
        }
    }
}

test "HeadBlocks.nameEnd: within a block, across blocks, at odd bytes" {
    const bytes = "\nContent-Type: text/plain\r\nX_y: 1\r\nN:\r\n" ++ &@as([70]u8, @splat('A')) ++ ": 1\r\n\r\n";
    var blocks: HeadBlocks = undefined;
    try std.testing.expect(blocks.index(bytes, 1));
    try std.testing.expectEqual(bytes.len - 1, blocks.end);
    try std.testing.expectEqual(13, blocks.nameEnd(1)); // the colon
    try std.testing.expectEqual(28, blocks.nameEnd(27)); // the '_'
    try std.testing.expectEqual(36, blocks.nameEnd(35));
    try std.testing.expectEqual(39 + 70, blocks.nameEnd(39)); // across a block boundary
    try std.testing.expectEqual(bytes.len - 2, blocks.nameEnd(bytes.len - 2)); // the final CR
}
