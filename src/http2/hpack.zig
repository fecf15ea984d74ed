//! HPACK, the header compression of HTTP/2 (RFC 7541): integers with a prefix, string literals
//! (raw or Huffman-coded), the static table, a bounded dynamic table, and a decoder and an
//! encoder that each keep one. Sans-I/O and allocation-free: the caller gives every buffer, so
//! the memory of a connection's HPACK state is what its session sized (docs/http2.md).
const std = @import("std");
const assert = std.debug.assert;
const huffman = @import("huffman.zig");

/// A header field. The decoder's fields point into the storage the caller gave it.
pub const Field = struct {
    name: []const u8,
    value: []const u8,
};

/// The size RFC 7541 §4.1 counts for a table entry (and RFC 9113 §6.5.2 for a header list).
pub fn entrySize(name_len: usize, value_len: usize) usize {
    return name_len + value_len + 32;
}

/// RFC 7541 Appendix A; index 1 is `static_table[0]`.
pub const static_table = [61]Field{
    .{ .name = ":authority", .value = "" },
    .{ .name = ":method", .value = "GET" },
    .{ .name = ":method", .value = "POST" },
    .{ .name = ":path", .value = "/" },
    .{ .name = ":path", .value = "/index.html" },
    .{ .name = ":scheme", .value = "http" },
    .{ .name = ":scheme", .value = "https" },
    .{ .name = ":status", .value = "200" },
    .{ .name = ":status", .value = "204" },
    .{ .name = ":status", .value = "206" },
    .{ .name = ":status", .value = "304" },
    .{ .name = ":status", .value = "400" },
    .{ .name = ":status", .value = "404" },
    .{ .name = ":status", .value = "500" },
    .{ .name = "accept-charset", .value = "" },
    .{ .name = "accept-encoding", .value = "gzip, deflate" },
    .{ .name = "accept-language", .value = "" },
    .{ .name = "accept-ranges", .value = "" },
    .{ .name = "accept", .value = "" },
    .{ .name = "access-control-allow-origin", .value = "" },
    .{ .name = "age", .value = "" },
    .{ .name = "allow", .value = "" },
    .{ .name = "authorization", .value = "" },
    .{ .name = "cache-control", .value = "" },
    .{ .name = "content-disposition", .value = "" },
    .{ .name = "content-encoding", .value = "" },
    .{ .name = "content-language", .value = "" },
    .{ .name = "content-length", .value = "" },
    .{ .name = "content-location", .value = "" },
    .{ .name = "content-range", .value = "" },
    .{ .name = "content-type", .value = "" },
    .{ .name = "cookie", .value = "" },
    .{ .name = "date", .value = "" },
    .{ .name = "etag", .value = "" },
    .{ .name = "expect", .value = "" },
    .{ .name = "expires", .value = "" },
    .{ .name = "from", .value = "" },
    .{ .name = "host", .value = "" },
    .{ .name = "if-match", .value = "" },
    .{ .name = "if-modified-since", .value = "" },
    .{ .name = "if-none-match", .value = "" },
    .{ .name = "if-range", .value = "" },
    .{ .name = "if-unmodified-since", .value = "" },
    .{ .name = "last-modified", .value = "" },
    .{ .name = "link", .value = "" },
    .{ .name = "location", .value = "" },
    .{ .name = "max-forwards", .value = "" },
    .{ .name = "proxy-authenticate", .value = "" },
    .{ .name = "proxy-authorization", .value = "" },
    .{ .name = "range", .value = "" },
    .{ .name = "referer", .value = "" },
    .{ .name = "refresh", .value = "" },
    .{ .name = "retry-after", .value = "" },
    .{ .name = "server", .value = "" },
    .{ .name = "set-cookie", .value = "" },
    .{ .name = "strict-transport-security", .value = "" },
    .{ .name = "transfer-encoding", .value = "" },
    .{ .name = "user-agent", .value = "" },
    .{ .name = "vary", .value = "" },
    .{ .name = "via", .value = "" },
    .{ .name = "www-authenticate", .value = "" },
};

/// The first static index of each name (the encoder's name lookup).
const static_names = blk: {
    @setEvalBranchQuota(10_000);
    var pairs: [static_table.len]struct { []const u8, u8 } = undefined;
    var count: usize = 0;
    for (static_table, 1..) |field, index| {
        const seen = for (pairs[0..count]) |pair| {
            if (std.mem.eql(u8, pair[0], field.name)) break true;
        } else false;
        if (seen) continue;
        pairs[count] = .{ field.name, index };
        count += 1;
    }
    const final = pairs[0..count].*;
    break :blk std.StaticStringMap(u8).initComptime(final);
};

/// The dynamic table (RFC 7541 §2.3.2, §4): entries newest first, evicted oldest first so
/// that their sizes stay within `capacity`. Entry bytes live in one buffer, appended at its
/// end and moved back to its start when the end is reached; a ring of descriptors indexes
/// them. A fixed table has both at their largest from the start (`init`); a growable one
/// (`initGrowable`) starts empty and doubles them as entries need, up to the same largest: a
/// connection whose peer indexes a few short fields holds a few hundred bytes, not 4 KiB.
pub const DynamicTable = struct {
    /// Room for entry bytes now (at most `limit`).
    bytes: []u8,
    /// The largest capacity the table may be given.
    limit: usize,
    /// Where a growable table's memory comes from (null: fixed).
    gpa: ?std.mem.Allocator = null,
    /// Live bytes are `bytes[start..end]`, oldest entry first.
    start: usize = 0,
    end: usize = 0,
    /// Descriptor ring: `count` entries, the newest at `newest`.
    ring: []Entry,
    newest: usize = 0,
    count: usize = 0,
    /// The RFC size of the entries (`entrySize` summed).
    size: usize = 0,
    /// The size the entries may reach now (the last size update, at most `bytes.len`).
    capacity: usize,

    pub const Entry = struct {
        offset: u32,
        name_len: u32,
        value_len: u32,
    };

    /// The descriptors a table of `bytes_max` bytes may need: every entry costs at least 32.
    pub fn ringLength(bytes_max: usize) usize {
        return bytes_max / 32 + 1;
    }

    /// The smallest buffers a growable table takes when it first needs room.
    const grow_bytes_min = 256;
    const grow_ring_min = 8;

    /// A fixed table with `bytes` for entries (its largest capacity) and `ring` for
    /// descriptors (`ringLength(bytes.len)` of them); it starts at its largest capacity.
    pub fn init(bytes: []u8, ring: []Entry) DynamicTable {
        assert(ring.len >= ringLength(bytes.len));
        return .{ .bytes = bytes, .limit = bytes.len, .ring = ring, .capacity = bytes.len };
    }

    /// A growable table of at most `limit` bytes that holds no memory until its first entry;
    /// it starts at its largest capacity. `deinit` frees what it took.
    pub fn initGrowable(gpa: std.mem.Allocator, limit: usize) DynamicTable {
        return .{ .bytes = &.{}, .limit = limit, .gpa = gpa, .ring = &.{}, .capacity = limit };
    }

    /// Frees a growable table's memory.
    pub fn deinit(t: *DynamicTable) void {
        const gpa = t.gpa orelse return;
        gpa.free(t.bytes);
        gpa.free(t.ring);
        t.bytes = &.{};
        t.ring = &.{};
    }

    /// Sets the capacity (a size update), evicting what no longer fits.
    pub fn setCapacity(t: *DynamicTable, capacity: usize) void {
        assert(capacity <= t.limit);
        t.capacity = capacity;
        t.evictTo(capacity);
    }

    /// Adds an entry (RFC 7541 §4.4): older entries are evicted to make room; an entry larger
    /// than the capacity empties the table and is not added. `name` and `value` must not point
    /// into the table. Only a growable table can fail, when it cannot grow.
    pub fn insert(t: *DynamicTable, name: []const u8, value: []const u8) error{OutOfMemory}!void {
        assert(!t.holds(name) and !t.holds(value));
        const size = entrySize(name.len, value.len);
        if (size > t.capacity) return t.evictTo(0);
        t.evictTo(t.capacity - size);
        const len = name.len + value.len;
        if (t.end + len > t.bytes.len) t.compact();
        if (t.end + len > t.bytes.len or t.count == t.ring.len) try t.grow(t.end + len);
        assert(t.end + len <= t.bytes.len and t.count < t.ring.len);
        @memcpy(t.bytes[t.end..][0..name.len], name);
        @memcpy(t.bytes[t.end + name.len ..][0..value.len], value);
        t.newest = if (t.count == 0) t.newest else (t.newest + 1) % t.ring.len;
        t.ring[t.newest] = .{ .offset = @intCast(t.end), .name_len = @intCast(name.len), .value_len = @intCast(value.len) };
        t.count += 1;
        assert(t.count <= t.ring.len);
        t.end += len;
        t.size += size;
        assert(t.size <= t.capacity);
    }

    /// Entry `index` (1 is the newest), or null past the last.
    pub fn get(t: *const DynamicTable, index: usize) ?Field {
        if (index == 0 or index > t.count) return null;
        const entry = t.ring[(t.newest + t.ring.len - (index - 1)) % t.ring.len];
        const name = t.bytes[entry.offset..][0..entry.name_len];
        return .{ .name = name, .value = t.bytes[entry.offset + entry.name_len ..][0..entry.value_len] };
    }

    /// Evicts every entry.
    pub fn clear(t: *DynamicTable) void {
        t.evictTo(0);
    }

    fn oldest(t: *const DynamicTable) *const Entry {
        return &t.ring[(t.newest + t.ring.len - (t.count - 1)) % t.ring.len];
    }

    fn evictTo(t: *DynamicTable, size: usize) void {
        while (t.size > size) {
            const entry = t.oldest();
            t.size -= entrySize(entry.name_len, entry.value_len);
            t.start = entry.offset + entry.name_len + entry.value_len;
            t.count -= 1;
        }
        if (t.count == 0) {
            assert(t.size == 0);
            t.start = 0;
            t.end = 0;
        }
    }

    /// Gives a growable table room for `bytes_needed` entry bytes and one more descriptor
    /// (doubling, up to `limit`), moving its entries over, oldest first. A fixed table always
    /// has room: its bytes hold `limit` and its ring `ringLength(limit)`, and the entries'
    /// sizes (at least 32 each) stay within the capacity.
    fn grow(t: *DynamicTable, bytes_needed: usize) error{OutOfMemory}!void {
        const gpa = t.gpa.?;
        assert(bytes_needed <= t.limit);
        const bytes_len = @min(t.limit, @max(bytes_needed, t.bytes.len * 2, grow_bytes_min));
        const ring_len = @min(ringLength(t.limit), @max(t.count + 1, t.ring.len * 2, grow_ring_min));
        assert(ring_len > t.count);
        const bytes = try gpa.alloc(u8, bytes_len);
        errdefer gpa.free(bytes);
        const ring = try gpa.alloc(Entry, ring_len);
        var end: usize = 0;
        var i = t.count;
        while (i > 0) : (i -= 1) {
            const entry = t.ring[(t.newest + t.ring.len - (i - 1)) % t.ring.len];
            const len = entry.name_len + entry.value_len;
            @memcpy(bytes[end..][0..len], t.bytes[entry.offset..][0..len]);
            ring[t.count - i] = .{ .offset = @intCast(end), .name_len = entry.name_len, .value_len = entry.value_len };
            end += len;
        }
        gpa.free(t.bytes);
        gpa.free(t.ring);
        t.bytes = bytes;
        t.ring = ring;
        t.start = 0;
        t.end = end;
        t.newest = if (t.count == 0) 0 else t.count - 1;
    }

    /// Moves the live bytes to the start of the buffer.
    fn compact(t: *DynamicTable) void {
        const shift = t.start;
        if (shift == 0) return;
        std.mem.copyForwards(u8, t.bytes[0 .. t.end - shift], t.bytes[shift..t.end]);
        for (0..t.count) |i| t.ring[(t.newest + t.ring.len - i) % t.ring.len].offset -= @intCast(shift);
        t.start = 0;
        t.end -= shift;
    }

    fn holds(t: *const DynamicTable, bytes: []const u8) bool {
        if (bytes.len == 0) return false;
        const base = @intFromPtr(t.bytes.ptr);
        const at = @intFromPtr(bytes.ptr);
        return at >= base and at < base + t.bytes.len;
    }
};

/// Why a header block could not be decoded: each is a connection error of type
/// COMPRESSION_ERROR (RFC 9113 §4.3), since the decoder's table can no longer be trusted.
pub const DecodeError = error{
    /// A truncated or overlong integer or string, an index of 0 or past the tables, a size
    /// update above the limit or after a field, or bad Huffman code.
    Compression,
    /// A growable table could not grow (the connection cannot go on either).
    OutOfMemory,
};

/// Decodes integer with an `prefix_bits`-bit prefix at `block[index.*]` (RFC 7541 §5.1).
/// Values above 2^32 - 1 are refused: nothing in HTTP/2 needs them.
pub fn decodeInteger(block: []const u8, index: *usize, comptime prefix_bits: u4) DecodeError!u32 {
    const mask: u8 = (1 << prefix_bits) - 1;
    if (index.* >= block.len) return error.Compression;
    var value: u64 = block[index.*] & mask;
    index.* += 1;
    if (value < mask) return @intCast(value);
    var shift: u6 = 0;
    while (true) {
        if (index.* >= block.len) return error.Compression;
        const byte = block[index.*];
        index.* += 1;
        value += @as(u64, byte & 0x7f) << shift;
        if (value > std.math.maxInt(u32)) return error.Compression;
        if (byte & 0x80 == 0) return @intCast(value);
        shift += 7;
        if (shift > 28) return error.Compression;
    }
}

/// Writes `value` with an `prefix_bits`-bit prefix, `first` holding the bits above the prefix.
pub fn encodeInteger(out: []u8, first: u8, comptime prefix_bits: u4, value: u32) error{NoSpaceLeft}!usize {
    const mask: u8 = (1 << prefix_bits) - 1;
    assert(first & mask == 0);
    if (out.len == 0) return error.NoSpaceLeft;
    if (value < mask) {
        out[0] = first | @as(u8, @intCast(value));
        return 1;
    }
    out[0] = first | mask;
    var rest = value - mask;
    var n: usize = 1;
    while (rest >= 0x80) : (rest >>= 7) {
        if (n == out.len) return error.NoSpaceLeft;
        out[n] = @as(u8, @truncate(rest)) | 0x80;
        n += 1;
    }
    if (n == out.len) return error.NoSpaceLeft;
    out[n] = @intCast(rest);
    return n + 1;
}

/// What `Decoder.decode` found.
pub const Decoded = struct {
    /// The fields, in order (empty when `too_large`).
    fields: []const Field,
    /// The header list was larger than the storage or had more fields than the field array
    /// (RFC 9113 §6.5.2's SETTINGS_MAX_HEADER_LIST_SIZE): the block was still decoded, so the
    /// table stays in step, but its fields were dropped. The stream gets 431.
    too_large: bool,
};

/// The receiving side's HPACK state: one per connection.
pub const Decoder = struct {
    table: DynamicTable,
    /// The largest size update the peer may send: what our SETTINGS_HEADER_TABLE_SIZE says.
    capacity_max: usize,

    /// `bytes` is the most our SETTINGS_HEADER_TABLE_SIZE allows.
    pub fn init(bytes: []u8, ring: []DynamicTable.Entry) Decoder {
        return .{ .table = .init(bytes, ring), .capacity_max = bytes.len };
    }

    /// A decoder whose table takes memory only as the peer's entries need it, up to `limit`
    /// (our SETTINGS_HEADER_TABLE_SIZE). `deinit` frees it.
    pub fn initGrowable(gpa: std.mem.Allocator, limit: usize) Decoder {
        return .{ .table = .initGrowable(gpa, limit), .capacity_max = limit };
    }

    pub fn deinit(d: *Decoder) void {
        d.table.deinit();
    }

    /// Decodes a whole header block into `fields`, copying names and values into `storage`
    /// (which must hold at least `table.bytes.len` bytes). The list may take up to
    /// `storage.len` bytes of names and values; beyond that, or beyond `fields.len` fields,
    /// the result is `too_large`.
    pub fn decode(d: *Decoder, block: []const u8, storage: []u8, fields: []Field) DecodeError!Decoded {
        assert(storage.len >= d.table.limit);
        var used: usize = 0; // bytes of `storage` the kept fields take
        var count: usize = 0;
        var too_large = false;
        var fields_seen = false;
        var index: usize = 0;
        while (index < block.len) {
            const first = block[index];
            if (first & 0x80 != 0) {
                // Indexed field (RFC 7541 §6.1).
                const field = try d.lookup(try decodeInteger(block, &index, 7));
                fields_seen = true;
                if (too_large) continue;
                const kept = place(storage[used..], .{ .bytes = field.name }, .{ .bytes = field.value }) catch unreachable;
                if (kept == null or count == fields.len) {
                    too_large = true;
                    continue;
                }
                fields[count] = kept.?;
                count += 1;
                used += field.name.len + field.value.len;
                continue;
            }
            if (first & 0xe0 == 0x20) {
                // Dynamic table size update (§6.3): only before the block's first field (§4.2).
                if (fields_seen) return error.Compression;
                const size = try decodeInteger(block, &index, 5);
                if (size > d.capacity_max) return error.Compression;
                d.table.setCapacity(size);
                continue;
            }
            // Literal field, with incremental indexing (§6.2.1), without (§6.2.2), or never
            // indexed (§6.2.3).
            fields_seen = true;
            const indexing = first & 0xc0 == 0x40;
            const name_index = if (indexing) try decodeInteger(block, &index, 6) else try decodeInteger(block, &index, 4);
            const name: Literal = if (name_index == 0) try readString(block, &index) else .{ .bytes = (try d.lookup(name_index)).name };
            const value = try readString(block, &index);
            if (!too_large) {
                if (try place(storage[used..], name, value)) |field| {
                    if (indexing) try d.table.insert(field.name, field.value);
                    if (count == fields.len) {
                        too_large = true;
                        continue;
                    }
                    fields[count] = field;
                    count += 1;
                    used += field.name.len + field.value.len;
                    continue;
                }
                too_large = true;
            }
            // Too large for the list: the table may still want the entry, and the strings
            // must still be valid.
            if (try place(storage, name, value)) |field| {
                if (indexing) try d.table.insert(field.name, field.value);
                continue;
            }
            if (!name.isValid() or !value.isValid()) return error.Compression;
            // Larger than the storage, so larger than the table: it empties the table (§4.4).
            if (indexing) d.table.clear();
        }
        return .{ .fields = if (too_large) &.{} else fields[0..count], .too_large = too_large };
    }

    /// Field `index` of the static table (1-61), then the dynamic table.
    fn lookup(d: *const Decoder, index: u32) DecodeError!Field {
        if (index == 0) return error.Compression;
        if (index <= static_table.len) return static_table[index - 1];
        return d.table.get(index - static_table.len) orelse error.Compression;
    }

    /// Copies `field` into `storage` at `used.*`; null when it does not fit.
    fn store(storage: []u8, used: *usize, field: Field) ?Field {
        const len = field.name.len + field.value.len;
        if (storage.len - used.* < len) return null;
        const at = used.*;
        @memcpy(storage[at..][0..field.name.len], field.name);
        @memcpy(storage[at + field.name.len ..][0..field.value.len], field.value);
        used.* += len;
        return .{ .name = storage[at..][0..field.name.len], .value = storage[at + field.name.len ..][0..field.value.len] };
    }
};

/// A string of a header block: raw, or Huffman-coded.
const Literal = struct {
    bytes: []const u8,
    huffman: bool = false,

    /// Decodes into `out`; null when it does not fit.
    fn decodeInto(literal: Literal, out: []u8) DecodeError!?usize {
        if (!literal.huffman) {
            if (literal.bytes.len > out.len) return null;
            @memcpy(out[0..literal.bytes.len], literal.bytes);
            return literal.bytes.len;
        }
        return huffman.decode(literal.bytes, out) catch |err| switch (err) {
            error.InvalidHuffman => error.Compression,
            error.NoSpaceLeft => null,
        };
    }

    fn isValid(literal: Literal) bool {
        return !literal.huffman or huffman.isValid(literal.bytes);
    }
};

/// The string literal at `block[index.*]` (RFC 7541 §5.2), not yet decoded.
fn readString(block: []const u8, index: *usize) DecodeError!Literal {
    if (index.* >= block.len) return error.Compression;
    const coded = block[index.*] & 0x80 != 0;
    const len = try decodeInteger(block, index, 7);
    if (block.len - index.* < len) return error.Compression;
    defer index.* += len;
    return .{ .bytes = block[index.*..][0..len], .huffman = coded };
}

/// Decodes `name` then `value` into the start of `out`; null when they do not fit.
fn place(out: []u8, name: Literal, value: Literal) DecodeError!?Field {
    const name_len = try name.decodeInto(out) orelse return null;
    const value_len = try value.decodeInto(out[name_len..]) orelse return null;
    return .{ .name = out[0..name_len], .value = out[name_len..][0..value_len] };
}

/// How the encoder may treat a field.
pub const Indexing = enum {
    /// Into the dynamic table when that pays (the default).
    allowed,
    /// Never into a table, here or at any intermediary (RFC 7541 §7.1.3): for secrets.
    never,
};

/// The sending side's HPACK state: one per connection.
pub const Encoder = struct {
    table: DynamicTable,
    /// A size update to send at the start of the next block (RFC 7541 §4.2), after the peer's
    /// SETTINGS_HEADER_TABLE_SIZE changed the table's capacity; and the smallest capacity
    /// since the last block, which goes first when it is smaller.
    pending_update: ?u32 = null,
    pending_smallest: u32 = std.math.maxInt(u32),
    /// Huffman-code strings when that is no longer than the raw bytes (RFC 7541's examples in
    /// Appendix C.4 and C.6 do; C.3 and C.5 do not).
    huffman: bool = true,
    /// Never index cookies, credentials and secrets (`isSensitive`).
    guard_sensitive: bool = true,

    /// `bytes` is the most this side ever uses, whatever the peer allows (RFC 7541 §4.2: an
    /// encoder may use less than the peer's maximum). It starts at the protocol's initial
    /// 4096, or less if `bytes` is smaller.
    pub fn init(bytes: []u8, ring: []DynamicTable.Entry) Encoder {
        var encoder: Encoder = .{ .table = .init(bytes, ring) };
        const initial = @min(bytes.len, 4096);
        if (initial != bytes.len) encoder.table.setCapacity(initial);
        // Below the initial 4096, the peer must hear of it before the first field.
        if (initial < 4096) encoder.pending_update = @intCast(initial);
        return encoder;
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the table uses at most that (and at most its
    /// buffer), announced with the next block.
    pub fn setPeerLimit(e: *Encoder, peer_max: u32) void {
        const capacity: u32 = @intCast(@min(peer_max, e.table.limit));
        if (capacity == e.table.capacity and e.pending_update == null) return;
        e.table.setCapacity(capacity);
        e.pending_update = capacity;
        e.pending_smallest = @min(e.pending_smallest, capacity);
    }

    /// Starts a header block: writes the pending size updates, if any (the smallest since
    /// the last block first, when the table shrank and grew again: RFC 7541 §4.2).
    pub fn begin(e: *Encoder, out: []u8) error{NoSpaceLeft}!usize {
        const update = e.pending_update orelse return 0;
        var n: usize = 0;
        if (e.pending_smallest < update) n += try encodeInteger(out, 0x20, 5, e.pending_smallest);
        n += try encodeInteger(out[n..], 0x20, 5, update);
        e.pending_update = null;
        e.pending_smallest = std.math.maxInt(u32);
        return n;
    }

    /// Writes one field into `out`; returns the bytes written. Names must be lowercase (HTTP/2
    /// fields are). On `error.NoSpaceLeft` the table is unchanged, so the caller may retry
    /// with more room.
    pub fn encode(e: *Encoder, out: []u8, name: []const u8, value: []const u8, indexing: Indexing) error{NoSpaceLeft}!usize {
        const never = indexing == .never or (e.guard_sensitive and isSensitive(name));
        var name_index: u32 = 0;
        if (!never) {
            if (e.find(name, value)) |found| {
                if (found.exact) return encodeInteger(out, 0x80, 7, found.index);
                name_index = found.index;
            }
        } else if (e.find(name, value)) |found| name_index = found.index;
        // Index it unless it is a secret or would push out most of the table.
        const index_it = !never and entrySize(name.len, value.len) <= e.table.capacity / 2;
        var n: usize = if (index_it)
            try encodeInteger(out, 0x40, 6, name_index)
        else
            try encodeInteger(out, if (never) 0x10 else 0x00, 4, name_index);
        if (name_index == 0) n += try e.writeString(out[n..], name);
        n += try e.writeString(out[n..], value);
        // The encoder's table is fixed: it never needs to grow.
        if (index_it) e.table.insert(name, value) catch unreachable;
        return n;
    }

    const Found = struct { index: u32, exact: bool };

    /// The best table match for the field: an exact one, or one with the name (static first).
    fn find(e: *const Encoder, name: []const u8, value: []const u8) ?Found {
        var by_name: ?u32 = null;
        if (static_names.get(name)) |first| {
            var i: usize = first;
            while (i <= static_table.len and std.mem.eql(u8, static_table[i - 1].name, name)) : (i += 1) {
                if (std.mem.eql(u8, static_table[i - 1].value, value)) return .{ .index = @intCast(i), .exact = true };
            }
            by_name = first;
        }
        for (1..e.table.count + 1) |i| {
            const entry = e.table.get(i).?;
            if (!std.mem.eql(u8, entry.name, name)) continue;
            const index: u32 = @intCast(static_table.len + i);
            if (std.mem.eql(u8, entry.value, value)) return .{ .index = index, .exact = true };
            if (by_name == null) by_name = index;
        }
        return if (by_name) |index| .{ .index = index, .exact = false } else null;
    }

    fn writeString(e: *const Encoder, out: []u8, text: []const u8) error{NoSpaceLeft}!usize {
        const coded_len = if (e.huffman) huffman.encodedLength(text) else text.len + 1;
        if (coded_len <= text.len) {
            const n = try encodeInteger(out, 0x80, 7, @intCast(coded_len));
            if (out.len - n < coded_len) return error.NoSpaceLeft;
            return n + huffman.encode(text, out[n..]);
        }
        const n = try encodeInteger(out, 0x00, 7, @intCast(text.len));
        if (out.len - n < text.len) return error.NoSpaceLeft;
        @memcpy(out[n..][0..text.len], text);
        return n + text.len;
    }
};

/// Fields whose values are secrets a table's compression could leak (RFC 7541 §7.1.3):
/// credentials and cookies, never indexed.
pub fn isSensitive(name: []const u8) bool {
    const names = [_][]const u8{ "authorization", "proxy-authorization", "cookie", "set-cookie" };
    for (names) |secret| if (std.mem.eql(u8, name, secret)) return true;
    return false;
}

const testing = std.testing;

/// Bytes from the RFC's hex dumps ("8286 8441 ..."), at compile time.
inline fn hex(comptime text: []const u8) []const u8 {
    comptime {
        @setEvalBranchQuota(100_000);
        var out: [text.len / 2]u8 = undefined;
        var n: usize = 0;
        var i: usize = 0;
        while (i < text.len) {
            if (text[i] == ' ' or text[i] == '\n') {
                i += 1;
                continue;
            }
            out[n] = std.fmt.parseInt(u8, text[i..][0..2], 16) catch unreachable;
            n += 1;
            i += 2;
        }
        const final = out[0..n].*;
        return &final;
    }
}

/// A decoder and an encoder with tables of `capacity` bytes, and room for their work.
fn Pair(comptime capacity: usize) type {
    return struct {
        decoder_bytes: [capacity]u8 = undefined,
        decoder_ring: [DynamicTable.ringLength(capacity)]DynamicTable.Entry = undefined,
        encoder_bytes: [capacity]u8 = undefined,
        encoder_ring: [DynamicTable.ringLength(capacity)]DynamicTable.Entry = undefined,
        decoder: Decoder = undefined,
        encoder: Encoder = undefined,
        storage: [4096]u8 = undefined,
        fields: [16]Field = undefined,

        fn init(pair: *@This()) void {
            pair.decoder = .init(&pair.decoder_bytes, &pair.decoder_ring);
            pair.encoder = .init(&pair.encoder_bytes, &pair.encoder_ring);
            // RFC 7541's examples assume both sides already agreed on the table size.
            pair.encoder.pending_update = null;
            pair.encoder.pending_smallest = std.math.maxInt(u32);
        }
    };
}

const Example = struct {
    block: []const u8,
    fields: []const Field,
    /// The dynamic table after the block, newest first, and its size.
    table: []const Field,
    size: usize,
};

/// Runs RFC 7541 Appendix C examples through a decoder (the fields and the table after each
/// block) and an encoder (the same bytes, from the fields).
fn expectExamples(comptime capacity: usize, use_huffman: bool, examples: []const Example) !void {
    var pair: Pair(capacity) = .{};
    pair.init();
    pair.encoder.huffman = use_huffman;
    // Appendix C.5 and C.6 index `set-cookie`; saker never would.
    pair.encoder.guard_sensitive = false;
    for (examples) |example| {
        const decoded = try pair.decoder.decode(example.block, &pair.storage, &pair.fields);
        try testing.expect(!decoded.too_large);
        try testing.expectEqual(example.fields.len, decoded.fields.len);
        for (example.fields, decoded.fields) |want, got| {
            try testing.expectEqualStrings(want.name, got.name);
            try testing.expectEqualStrings(want.value, got.value);
        }
        try expectTable(&pair.decoder.table, example.table, example.size);
        var out: [512]u8 = undefined;
        var n = try pair.encoder.begin(&out);
        for (example.fields) |field| n += try pair.encoder.encode(out[n..], field.name, field.value, .allowed);
        try testing.expectEqualSlices(u8, example.block, out[0..n]);
        try expectTable(&pair.encoder.table, example.table, example.size);
    }
}

fn expectTable(table: *const DynamicTable, entries: []const Field, size: usize) !void {
    try testing.expectEqual(entries.len, table.count);
    try testing.expectEqual(size, table.size);
    for (entries, 1..) |want, i| {
        const got = table.get(i).?;
        try testing.expectEqualStrings(want.name, got.name);
        try testing.expectEqualStrings(want.value, got.value);
    }
    try testing.expectEqual(@as(?Field, null), table.get(entries.len + 1));
}

test "hpack: integers of RFC 7541 C.1, and overlong or truncated ones" {
    var out: [8]u8 = undefined;
    try testing.expectEqualSlices(u8, &.{0x0a}, out[0..try encodeInteger(&out, 0, 5, 10)]);
    try testing.expectEqualSlices(u8, &.{ 0x1f, 0x9a, 0x0a }, out[0..try encodeInteger(&out, 0, 5, 1337)]);
    try testing.expectEqualSlices(u8, &.{0x2a}, out[0..try encodeInteger(&out, 0, 8, 42)]);
    for ([_]u32{ 0, 30, 31, 127, 128, 255, 1337, 65535, std.math.maxInt(u32) }) |value| {
        inline for (.{ 4, 5, 6, 7, 8 }) |prefix| {
            const n = try encodeInteger(&out, 0, prefix, value);
            var index: usize = 0;
            try testing.expectEqual(value, try decodeInteger(out[0..n], &index, prefix));
            try testing.expectEqual(n, index);
            // Every shorter prefix of it is truncated.
            for (0..n) |cut| {
                index = 0;
                try testing.expectError(error.Compression, decodeInteger(out[0..cut], &index, prefix));
            }
        }
    }
    var index: usize = 0;
    // 2^32 and a six-byte continuation: refused.
    try testing.expectError(error.Compression, decodeInteger(&.{ 0x1f, 0xe1, 0xff, 0xff, 0xff, 0x0f }, &index, 5));
    index = 0;
    try testing.expectError(error.Compression, decodeInteger(&.{ 0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, &index, 5));
    try testing.expectError(error.NoSpaceLeft, encodeInteger(out[0..2], 0, 5, 1337));
}

test "hpack: RFC 7541 C.2 literal and indexed fields" {
    var pair: Pair(4096) = .{};
    pair.init();
    const cases = [_]struct { []const u8, Field, usize }{
        .{ hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"), .{ .name = "custom-key", .value = "custom-header" }, 1 },
        .{ hex("040c 2f73 616d 706c 652f 7061 7468"), .{ .name = ":path", .value = "/sample/path" }, 1 },
        .{ hex("1008 7061 7373 776f 7264 0673 6563 7265 74"), .{ .name = "password", .value = "secret" }, 1 },
        .{ hex("82"), .{ .name = ":method", .value = "GET" }, 1 },
    };
    for (cases) |case| {
        const decoded = try pair.decoder.decode(case[0], &pair.storage, &pair.fields);
        try testing.expectEqual(@as(usize, 1), decoded.fields.len);
        try testing.expectEqualStrings(case[1].name, decoded.fields[0].name);
        try testing.expectEqualStrings(case[1].value, decoded.fields[0].value);
        // Only the first (with indexing) entered the table: 10 + 13 + 32.
        try expectTable(&pair.decoder.table, &.{.{ .name = "custom-key", .value = "custom-header" }}, 55);
    }
}

const request_1: []const Field = &.{
    .{ .name = ":method", .value = "GET" }, .{ .name = ":scheme", .value = "http" },
    .{ .name = ":path", .value = "/" },     .{ .name = ":authority", .value = "www.example.com" },
};
const request_2: []const Field = &.{
    .{ .name = ":method", .value = "GET" },            .{ .name = ":scheme", .value = "http" },
    .{ .name = ":path", .value = "/" },                .{ .name = ":authority", .value = "www.example.com" },
    .{ .name = "cache-control", .value = "no-cache" },
};
const request_3: []const Field = &.{
    .{ .name = ":method", .value = "GET" },             .{ .name = ":scheme", .value = "https" },
    .{ .name = ":path", .value = "/index.html" },       .{ .name = ":authority", .value = "www.example.com" },
    .{ .name = "custom-key", .value = "custom-value" },
};
const authority: Field = .{ .name = ":authority", .value = "www.example.com" };
const no_cache: Field = .{ .name = "cache-control", .value = "no-cache" };
const custom: Field = .{ .name = "custom-key", .value = "custom-value" };

test "hpack: RFC 7541 C.3 and C.4, three requests, raw and Huffman-coded" {
    try expectExamples(4096, false, &.{
        .{ .block = hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"), .fields = request_1, .table = &.{authority}, .size = 57 },
        .{ .block = hex("8286 84be 5808 6e6f 2d63 6163 6865"), .fields = request_2, .table = &.{ no_cache, authority }, .size = 110 },
        .{ .block = hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"), .fields = request_3, .table = &.{ custom, no_cache, authority }, .size = 164 },
    });
    try expectExamples(4096, true, &.{
        .{ .block = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"), .fields = request_1, .table = &.{authority}, .size = 57 },
        .{ .block = hex("8286 84be 5886 a8eb 1064 9cbf"), .fields = request_2, .table = &.{ no_cache, authority }, .size = 110 },
        .{ .block = hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"), .fields = request_3, .table = &.{ custom, no_cache, authority }, .size = 164 },
    });
}

const status_302: Field = .{ .name = ":status", .value = "302" };
const status_307: Field = .{ .name = ":status", .value = "307" };
const private: Field = .{ .name = "cache-control", .value = "private" };
const date_21: Field = .{ .name = "date", .value = "Mon, 21 Oct 2013 20:13:21 GMT" };
const date_22: Field = .{ .name = "date", .value = "Mon, 21 Oct 2013 20:13:22 GMT" };
const location: Field = .{ .name = "location", .value = "https://www.example.com" };
const gzip: Field = .{ .name = "content-encoding", .value = "gzip" };
const cookie: Field = .{ .name = "set-cookie", .value = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1" };

test "hpack: RFC 7541 C.5 and C.6, three responses evicting from a 256-byte table" {
    const response_3: []const Field = &.{ .{ .name = ":status", .value = "200" }, private, date_22, location, gzip, cookie };
    try expectExamples(256, false, &.{
        .{
            .block = hex("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
            .fields = &.{ status_302, private, date_21, location },
            .table = &.{ location, date_21, private, status_302 },
            .size = 222,
        },
        .{ .block = hex("4803 3330 37c1 c0bf"), .fields = &.{ status_307, private, date_21, location }, .table = &.{ status_307, location, date_21, private }, .size = 222 },
        .{
            .block = hex("88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31"),
            .fields = response_3,
            .table = &.{ cookie, gzip, date_22 },
            .size = 215,
        },
    });
    try expectExamples(256, true, &.{
        .{
            .block = hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
            .fields = &.{ status_302, private, date_21, location },
            .table = &.{ location, date_21, private, status_302 },
            .size = 222,
        },
        .{ .block = hex("4883 640e ffc1 c0bf"), .fields = &.{ status_307, private, date_21, location }, .table = &.{ status_307, location, date_21, private }, .size = 222 },
        .{
            .block = hex("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07"),
            .fields = response_3,
            .table = &.{ cookie, gzip, date_22 },
            .size = 215,
        },
    });
}

test "hpack: blocks that break the rules are compression errors" {
    var pair: Pair(4096) = .{};
    pair.init();
    const bad = [_][]const u8{
        hex("80"), // index 0
        hex("be"), // index 62, and the dynamic table is empty
        hex("3fe21f"), // a size update to 4097, above the 4096 announced
        hex("82 3f e1 1f"), // a size update after a field
        hex("40"), // a literal cut before its name
        hex("400a 6375 7374"), // a name cut short
        hex("4001 61 85 ffff"), // a value cut short
        hex("0081 ff 00"), // a Huffman name that is EOS padding longer than 7 bits
        hex("0081 18 00"), // a Huffman name padded with zeros
    };
    for (bad) |block| try testing.expectError(error.Compression, pair.decoder.decode(block, &pair.storage, &pair.fields));
}

test "hpack: a header list too large is dropped, yet its entries still enter the table" {
    var pair: Pair(4096) = .{};
    pair.init();
    // Three literals with indexing, each 10 + 100 bytes; the list may take 4096 bytes, but the
    // field array holds two.
    var block: [512]u8 = undefined;
    var n: usize = 0;
    const value: [100]u8 = @splat('v');
    for ([_][]const u8{ "x-field-aa", "x-field-bb", "x-field-cc" }) |name| {
        n += try pair.encoder.encode(block[n..], name, &value, .allowed);
    }
    var two: [2]Field = undefined;
    const decoded = try pair.decoder.decode(block[0..n], &pair.storage, &two);
    try testing.expect(decoded.too_large);
    try testing.expectEqual(@as(usize, 0), decoded.fields.len);
    try testing.expectEqual(@as(usize, 3), pair.decoder.table.count);
    try testing.expectEqualStrings("x-field-aa", pair.decoder.table.get(3).?.name);
    // The next block refers to them by index, as the encoder's table says.
    n = 0;
    for ([_][]const u8{ "x-field-aa", "x-field-cc" }) |name| n += try pair.encoder.encode(block[n..], name, &value, .allowed);
    try testing.expectEqualSlices(u8, &.{ 0x80 | 64, 0x80 | 62 }, block[0..n]);
    const again = try pair.decoder.decode(block[0..n], &pair.storage, &pair.fields);
    try testing.expect(!again.too_large);
    try testing.expectEqualStrings("x-field-aa", again.fields[0].name);
    try testing.expectEqualStrings(&value, again.fields[1].value);

    // A list larger than the storage: dropped; a value too large for any table empties it.
    var small: [4096]u8 = undefined;
    var huge_block: [6000]u8 = undefined;
    n = try encodeInteger(&huge_block, 0x40, 6, 0);
    n += try encodeInteger(huge_block[n..], 0, 7, 1);
    huge_block[n] = 'h';
    n += 1;
    n += try encodeInteger(huge_block[n..], 0, 7, 5000);
    @memset(huge_block[n..][0..5000], 'z');
    n += 5000;
    const dropped = try pair.decoder.decode(huge_block[0..n], &small, &pair.fields);
    try testing.expect(dropped.too_large);
    try testing.expectEqual(@as(usize, 0), pair.decoder.table.count);
}

test "hpack: credentials and cookies are never indexed; a shrinking peer limit is announced" {
    var pair: Pair(4096) = .{};
    pair.init();
    var out: [128]u8 = undefined;
    var n = try pair.encoder.encode(&out, "authorization", "Basic c2VjcmV0", .allowed);
    // 0001xxxx with the static name index 23 (15 + 8).
    try testing.expectEqualSlices(u8, &.{ 0x1f, 0x08 }, out[0..2]);
    n += try pair.encoder.encode(out[n..], "cookie", "a=b", .allowed);
    n += try pair.encoder.encode(out[n..], "x-token", "t", .never);
    try testing.expectEqual(@as(usize, 0), pair.encoder.table.count);
    const decoded = try pair.decoder.decode(out[0..n], &pair.storage, &pair.fields);
    try testing.expectEqual(@as(usize, 3), decoded.fields.len);
    try testing.expectEqualStrings("a=b", decoded.fields[1].value);
    try testing.expectEqual(@as(usize, 0), pair.decoder.table.count);

    n = try pair.encoder.encode(&out, "x-a", "1", .allowed);
    _ = try pair.decoder.decode(out[0..n], &pair.storage, &pair.fields);
    // The peer lowers its limit to 0 and raises it to 100 between two blocks: both updates
    // go out, the smaller first, and the tables empty on both sides.
    pair.encoder.setPeerLimit(0);
    pair.encoder.setPeerLimit(100);
    n = try pair.encoder.begin(&out);
    try testing.expectEqualSlices(u8, &.{ 0x20, 0x3f, 0x45 }, out[0..n]);
    n += try pair.encoder.encode(out[n..], "x-b", "2", .allowed);
    const after = try pair.decoder.decode(out[0..n], &pair.storage, &pair.fields);
    try testing.expectEqualStrings("x-b", after.fields[0].name);
    try testing.expectEqual(@as(usize, 100), pair.decoder.table.capacity);
    try expectTable(&pair.decoder.table, &.{.{ .name = "x-b", .value = "2" }}, 36);
    try expectTable(&pair.encoder.table, &.{.{ .name = "x-b", .value = "2" }}, 36);
}

test "hpack: random header lists survive encoding and decoding, with the tables in step" {
    var pair: Pair(512) = .{};
    pair.init();
    var prng: std.Random.DefaultPrng = .init(0x5a4e_12);
    const random = prng.random();
    const names = [_][]const u8{ ":status", "content-type", "x-a", "x-bb", "set-cookie", "date", "server", "x-long-name-for-eviction" };
    var values: [8][40]u8 = undefined;
    for (0..2000) |_| {
        var fields: [6]Field = undefined;
        const count = random.intRangeAtMost(usize, 1, fields.len);
        for (fields[0..count], 0..) |*field, i| {
            const len = random.intRangeAtMost(usize, 0, values[i].len);
            for (values[i][0..len]) |*b| b.* = random.intRangeAtMost(u8, 0, 3) + if (random.boolean()) @as(u8, 'a') else 0xf0;
            field.* = .{ .name = names[random.uintLessThan(usize, names.len)], .value = values[i][0..len] };
        }
        if (random.uintLessThan(u8, 16) == 0) pair.encoder.setPeerLimit(random.uintLessThan(u32, 600));
        var block: [1024]u8 = undefined;
        var n = try pair.encoder.begin(&block);
        for (fields[0..count]) |field| n += try pair.encoder.encode(block[n..], field.name, field.value, .allowed);
        const decoded = try pair.decoder.decode(block[0..n], &pair.storage, &pair.fields);
        try testing.expectEqual(count, decoded.fields.len);
        for (fields[0..count], decoded.fields) |want, got| {
            try testing.expectEqualStrings(want.name, got.name);
            try testing.expectEqualStrings(want.value, got.value);
        }
        try testing.expectEqual(pair.encoder.table.count, pair.decoder.table.count);
        try testing.expectEqual(pair.encoder.table.size, pair.decoder.table.size);
    }
}

test "DynamicTable: a growable table holds the same entries as a fixed one, and grows no further than its limit" {
    const limit = 1024;
    var fixed_bytes: [limit]u8 = undefined;
    var fixed_ring: [DynamicTable.ringLength(limit)]DynamicTable.Entry = undefined;
    var fixed: DynamicTable = .init(&fixed_bytes, &fixed_ring);
    var growable: DynamicTable = .initGrowable(testing.allocator, limit);
    defer growable.deinit();
    try testing.expectEqual(@as(usize, 0), growable.bytes.len); // nothing until an entry comes
    var prng: std.Random.DefaultPrng = .init(0x7ab1e);
    const random = prng.random();
    var text: [300]u8 = undefined;
    for (&text, 0..) |*b, i| b.* = @intCast('a' + i % 26);
    for (0..5000) |round| {
        // Empty fields too: 32 bytes of size and none of text, the most descriptors per byte.
        const name_len = random.uintAtMost(usize, if (round % 3 == 0) 0 else 40);
        const value_len = random.uintAtMost(usize, if (round % 3 == 0) 0 else 300 - 40);
        const name = text[0..name_len];
        const value = text[40..][0..value_len];
        if (random.uintLessThan(u8, 50) == 0) {
            const capacity = random.uintAtMost(usize, limit);
            fixed.setCapacity(capacity);
            growable.setCapacity(capacity);
        }
        try fixed.insert(name, value);
        try growable.insert(name, value);
        try testing.expectEqual(fixed.count, growable.count);
        try testing.expectEqual(fixed.size, growable.size);
        try testing.expect(growable.bytes.len <= limit and growable.ring.len <= DynamicTable.ringLength(limit));
        for (1..fixed.count + 1) |i| {
            try testing.expectEqualStrings(fixed.get(i).?.name, growable.get(i).?.name);
            try testing.expectEqualStrings(fixed.get(i).?.value, growable.get(i).?.value);
        }
    }
}

test "DynamicTable: a growable table that cannot grow fails the insert and keeps its entries" {
    var failing: std.testing.FailingAllocator = .init(testing.allocator, .{ .fail_index = 2 });
    var table: DynamicTable = .initGrowable(failing.allocator(), 4096);
    defer table.deinit();
    try table.insert("x-first", "1"); // the first buffers: two allocations
    var i: usize = 0;
    const err = while (i < 1000) : (i += 1) {
        table.insert("x-more", "a value of some length to fill the table") catch |e| break e;
    } else unreachable;
    try testing.expectEqual(error.OutOfMemory, err);
    try testing.expect(table.count > 0);
    try testing.expectEqualStrings("x-first", table.get(table.count).?.name);
}
