//! One worker's cache of files compressed on the fly (`saker serve --compress`): a hot file
//! is compressed once per coding, then served from memory. Keyed by the file's identity
//! (device, inode, size, modification time to the nanosecond) and the coding, so a changed
//! file is a new key and its old variants age out.
//!
//! Bounded, and allocation-free after `init`: one mapping of `bytes_max` bytes (touched only
//! as it fills) used as a ring, and `entries_max` entries. A new variant is compressed straight
//! into the ring at its head; the variants it overwrites, and the oldest entry when every entry
//! is in use, are forgotten (first in, first out: a file hot enough to matter is compressed
//! again after a full turn of the ring, at most). Owned by one thread (the worker's lock):
//! no locks here. Responses copy what they send, so overwriting is always safe.
const std = @import("std");
const assert = std.debug.assert;
const mapped = @import("../../mapped.zig");
const fs = @import("fs.zig");
const Coding = @import("../../compress.zig").Coding;

const CompressedCache = @This();

/// Sizes of the cache.
pub const Options = struct {
    /// Bytes of compressed variants held; 0 caches nothing.
    bytes_max: u64 = 8 * 1024 * 1024,
    /// Variants held.
    entries_max: u32 = 512,
};

/// What a variant is of: a file as it was when compressed, in a coding.
pub const Key = struct {
    dev_major: u32,
    dev_minor: u32,
    ino: u64,
    size: u64,
    mtime_sec: i64,
    mtime_nsec: u32,
    coding: Coding,

    /// The key of `stat`'s file in `coding`.
    pub fn of(stat: fs.Stat, coding: Coding) Key {
        return .{
            .dev_major = stat.dev_major,
            .dev_minor = stat.dev_minor,
            .ino = stat.ino,
            .size = stat.size,
            .mtime_sec = stat.mtime_sec,
            .mtime_nsec = stat.mtime_nsec,
            .coding = coding,
        };
    }

    fn eql(a: Key, b: Key) bool {
        return std.meta.eql(a, b);
    }
};

const Entry = struct {
    key: Key,
    offset: usize,
    len: usize,
    /// Insertion order, for evicting the oldest; 0 marks a free entry.
    sequence: u64 = 0,
};

memory: []align(std.heap.page_size_min) u8,
entries: []Entry,
/// Where the next variant goes in `memory`.
head: usize = 0,
sequence: u64 = 0,
/// A reservation made by `reserve` and not yet committed.
reserved: ?struct { offset: usize, len: usize } = null,

/// Reserves the ring and the entries (mapped, untouched).
pub fn init(options: Options) error{OutOfMemory}!CompressedCache {
    const memory = try mapped.alloc(u8, @intCast(options.bytes_max));
    errdefer mapped.free(memory);
    // Zero-filled by the kernel: every entry starts free (`sequence` 0).
    const entries = try mapped.alloc(Entry, if (options.bytes_max == 0) 0 else options.entries_max);
    return .{ .memory = memory, .entries = entries };
}

/// Unmaps the memory.
pub fn deinit(cache: *CompressedCache) void {
    mapped.free(cache.memory);
    mapped.free(cache.entries);
    cache.* = undefined;
}

/// The compressed bytes of `key`, valid until the next `reserve`.
pub fn get(cache: *const CompressedCache, key: Key) ?[]const u8 {
    for (cache.entries) |*entry| {
        if (entry.sequence != 0 and entry.key.eql(key)) return cache.memory[entry.offset..][0..entry.len];
    }
    return null;
}

/// Room for up to `len` bytes of a new variant at the ring's head, forgetting the variants
/// there; null when `len` exceeds the ring or there are no entries. Follow with `commit`
/// (or nothing: an uncommitted reservation is dropped by the next one).
pub fn reserve(cache: *CompressedCache, len: usize) ?[]u8 {
    if (len == 0 or len > cache.memory.len or cache.entries.len == 0) return null;
    if (cache.head + len > cache.memory.len) cache.head = 0;
    const start = cache.head;
    for (cache.entries) |*entry| {
        if (entry.sequence == 0) continue;
        if (entry.offset < start + len and start < entry.offset + entry.len) entry.sequence = 0;
    }
    cache.reserved = .{ .offset = start, .len = len };
    return cache.memory[start..][0..len];
}

/// Keeps the first `used` bytes of the reservation as `key`'s variant. Asserts a
/// reservation of at least `used` bytes.
pub fn commit(cache: *CompressedCache, key: Key, used: usize) []const u8 {
    const reservation = cache.reserved.?;
    assert(used > 0 and used <= reservation.len);
    cache.reserved = null;
    assert(cache.get(key) == null);
    const slot = cache.freeEntry();
    cache.sequence += 1;
    slot.* = .{ .key = key, .offset = reservation.offset, .len = used, .sequence = cache.sequence };
    cache.head = reservation.offset + used;
    assert(cache.head <= cache.memory.len);
    return cache.memory[reservation.offset..][0..used];
}

/// A free entry, or the oldest one, forgotten.
fn freeEntry(cache: *CompressedCache) *Entry {
    assert(cache.entries.len > 0);
    var oldest = &cache.entries[0];
    for (cache.entries) |*entry| {
        if (entry.sequence == 0) return entry;
        if (entry.sequence < oldest.sequence) oldest = entry;
    }
    oldest.sequence = 0;
    return oldest;
}

fn testKey(ino: u64, coding: Coding) Key {
    return .{ .dev_major = 8, .dev_minor = 1, .ino = ino, .size = 100, .mtime_sec = 1, .mtime_nsec = 2, .coding = coding };
}

test "CompressedCache: variants by file identity and coding; the ring forgets the oldest" {
    var cache: CompressedCache = try .init(.{ .bytes_max = 10, .entries_max = 3 });
    defer cache.deinit();
    @memcpy(cache.reserve(8).?[0..4], "aaaa");
    try std.testing.expectEqualStrings("aaaa", cache.commit(testKey(1, .gzip), 4));
    try std.testing.expectEqualStrings("aaaa", cache.get(testKey(1, .gzip)).?);
    try std.testing.expectEqual(@as(?[]const u8, null), cache.get(testKey(1, .br)));
    var changed = testKey(1, .gzip);
    changed.mtime_nsec += 1;
    try std.testing.expectEqual(@as(?[]const u8, null), cache.get(changed));

    @memcpy(cache.reserve(4).?[0..3], "bbb");
    _ = cache.commit(testKey(1, .br), 3);
    // 4 more do not fit after 7: the ring wraps and overwrites "aaaa".
    @memcpy(cache.reserve(4).?[0..2], "cc");
    _ = cache.commit(testKey(2, .gzip), 2);
    try std.testing.expectEqual(@as(?[]const u8, null), cache.get(testKey(1, .gzip)));
    try std.testing.expectEqualStrings("bbb", cache.get(testKey(1, .br)).?);
    try std.testing.expectEqualStrings("cc", cache.get(testKey(2, .gzip)).?);

    // Too large for the ring: not cached.
    try std.testing.expectEqual(@as(?[]u8, null), cache.reserve(11));
    // Out of entries: the oldest goes.
    @memcpy(cache.reserve(1).?, "d");
    _ = cache.commit(testKey(3, .gzip), 1);
    @memcpy(cache.reserve(1).?, "e");
    _ = cache.commit(testKey(4, .gzip), 1);
    try std.testing.expectEqual(@as(?[]const u8, null), cache.get(testKey(1, .br)));
    try std.testing.expectEqualStrings("e", cache.get(testKey(4, .gzip)).?);
}

test "CompressedCache: a zero bound caches nothing" {
    var cache: CompressedCache = try .init(.{ .bytes_max = 0 });
    defer cache.deinit();
    try std.testing.expectEqual(@as(?[]u8, null), cache.reserve(1));
}
