//! One worker's open-file cache: path → open fd, stat, validators and (for small files) the
//! contents, so a hot file costs a hash lookup instead of `openat2` + `statx` (+ `read`) per
//! request. Absent paths are cached too (so probing for `file.br` is free after the first
//! time). Each entry is revalidated by stat at most once per `revalidate_ms`: a changed file is
//! reloaded, a vanished one forgotten.
//!
//! Bounded: `entries_max` entries, in sets of `ways` (set-associative; the least recently
//! used way is replaced), keys of at most `key_bytes_max` bytes (longer paths are served
//! through a scratch entry, uncached), contents of at most `file_bytes_max` bytes each, in
//! one mapping that is only touched as it fills. Owned by one thread: no locks. Responses never
//! borrow from an entry past the handler's return (they copy contents or `dup` the fd), so
//! replacing an entry is always safe.
const std = @import("std");
const assert = std.debug.assert;
const fs = @import("fs.zig");
const mapped = @import("../../mapped.zig");
const http_date = @import("http_date.zig");

const FileCache = @This();

/// Entries per set.
pub const ways = 4;
/// Longest cached path (relative to the root); longer paths use the scratch entry.
pub const key_bytes_max = 240;
/// Longest entity tag: quotes, three hex numbers and separators.
pub const etag_bytes_max = 2 + 16 + 1 + 16 + 1 + 16;

/// Sizes of the cache.
pub const Options = struct {
    /// Entries (rounded up to a multiple of `ways`); each may hold an open fd.
    entries_max: u32 = 1024,
    /// Files up to this size keep their contents in memory.
    file_bytes_max: u32 = 16 * 1024,
    /// How long an entry is trusted before the file is stat'ed again.
    revalidate_ms: u32 = 1000,
};

/// A cached path: a file, a directory, or the reason it cannot be opened.
pub const Entry = struct {
    hash: u64 = 0,
    /// Bytes of `key` in use; 0 marks an empty slot.
    key_len: u16 = 0,
    key: [key_bytes_max]u8 = undefined,
    /// What opening the path gave.
    state: State = .{ .failed = error.NotFound },
    /// Read-only fd of a file (not kept for directories), or -1.
    fd: fs.fd_t = -1,
    stat: fs.Stat = undefined,
    etag_buffer: [etag_bytes_max]u8 = undefined,
    etag_len: u8 = 0,
    last_modified_buffer: [http_date.imf_fixdate_len]u8 = undefined,
    /// The file's bytes when it is small enough (a slice of the cache's content memory).
    content: ?[]const u8 = null,
    /// When the entry was last checked against the file system (ms, monotonic).
    checked_ms: u64 = 0,
    /// Use counter value of the last lookup (for replacement).
    used: u64 = 0,

    /// The outcome of opening a path.
    pub const State = union(enum) {
        file,
        directory,
        /// Neither a regular file nor a directory (FIFO, socket, device).
        other,
        failed: fs.OpenError,
    };

    /// The strong entity tag, quotes included.
    pub fn etag(entry: *const Entry) []const u8 {
        return entry.etag_buffer[0..entry.etag_len];
    }

    /// The Last-Modified value (IMF-fixdate).
    pub fn lastModified(entry: *const Entry) []const u8 {
        return &entry.last_modified_buffer;
    }

    fn keySlice(entry: *const Entry) []const u8 {
        return entry.key[0..entry.key_len];
    }
};

options: Options,
/// `sets * ways` entries, then the scratch entry.
entries: []Entry,
sets: u32,
/// One `file_bytes_max` slot per entry (the scratch entry's last), mapped lazily.
content_memory: []align(std.heap.page_size_min) u8,
/// The root directory every path is opened beneath.
root: fs.fd_t,
use_counter: u64 = 0,
/// Lookups answered without touching the file system (a metric).
hits: u64 = 0,
/// Lookups that opened or stat'ed (a metric).
misses: u64 = 0,

/// Reserves the entries and content memory. `root` must outlive the cache.
pub fn init(root: fs.fd_t, options: Options) error{OutOfMemory}!FileCache {
    const sets = @max(1, std.math.divCeil(u32, options.entries_max, ways) catch unreachable);
    const count = sets * ways + 1;
    const page = std.heap.page_allocator;
    const entries = try page.alloc(Entry, count);
    errdefer page.free(entries);
    for (entries) |*entry| entry.* = .{};
    const content_memory = try mapped.alloc(u8, @as(usize, count) * options.file_bytes_max);
    return .{
        .options = options,
        .entries = entries,
        .sets = sets,
        .content_memory = content_memory,
        .root = root,
    };
}

/// Closes every cached fd and unmaps the memory.
pub fn deinit(cache: *FileCache) void {
    for (cache.entries) |*entry| cache.clear(entry);
    std.heap.page_allocator.free(cache.entries);
    mapped.free(cache.content_memory);
    cache.* = undefined;
}

/// The entry for `relative` (a resolved path, "" for the root), opened, stat'ed and loaded
/// as needed. It stays valid until the next `lookup` or `releaseScratch`.
pub fn lookup(cache: *FileCache, relative: []const u8, now_ms: u64) *Entry {
    cache.use_counter += 1;
    if (relative.len > key_bytes_max) {
        const scratch = &cache.entries[cache.entries.len - 1];
        cache.clear(scratch);
        cache.misses += 1;
        cache.load(scratch, relative);
        return scratch;
    }
    const hash = std.hash.Wyhash.hash(0, relative);
    const set_index: usize = @intCast(hash % cache.sets);
    const set = cache.entries[set_index * ways ..][0..ways];
    var victim = &set[0];
    for (set) |*entry| {
        if (entry.key_len != 0 and entry.hash == hash and std.mem.eql(u8, entry.keySlice(), relative)) {
            entry.used = cache.use_counter;
            if (now_ms -| entry.checked_ms < cache.options.revalidate_ms) {
                cache.hits += 1;
                return entry;
            }
            cache.misses += 1;
            cache.revalidate(entry, now_ms);
            return entry;
        }
        if (victim.key_len != 0 and (entry.key_len == 0 or entry.used < victim.used)) victim = entry;
    }
    cache.misses += 1;
    cache.clear(victim);
    victim.hash = hash;
    victim.key_len = @intCast(relative.len);
    @memcpy(victim.key[0..relative.len], relative);
    victim.used = cache.use_counter;
    victim.checked_ms = now_ms;
    cache.load(victim, relative);
    return victim;
}

/// Makes the entry of `relative`, if cached, revalidate at its next lookup: the server itself
/// just wrote that file (an upload), and the next request must see it.
pub fn expire(cache: *FileCache, relative: []const u8) void {
    if (relative.len > key_bytes_max) return; // never cached
    const hash = std.hash.Wyhash.hash(0, relative);
    const set_index: usize = @intCast(hash % cache.sets);
    for (cache.entries[set_index * ways ..][0..ways]) |*entry| {
        if (entry.key_len != 0 and entry.hash == hash and std.mem.eql(u8, entry.keySlice(), relative)) entry.checked_ms = 0;
    }
}

/// Closes the scratch entry's fd (call once a response no longer needs an uncached entry).
pub fn releaseScratch(cache: *FileCache) void {
    cache.clear(&cache.entries[cache.entries.len - 1]);
}

/// Forgets an entry, closing its fd.
fn clear(cache: *FileCache, entry: *Entry) void {
    _ = cache;
    if (entry.fd >= 0) fs.close(entry.fd);
    entry.* = .{};
}

/// Re-stats a stale entry; reloads it if the file changed.
fn revalidate(cache: *FileCache, entry: *Entry, now_ms: u64) void {
    entry.checked_ms = now_ms;
    var path_buffer: [key_bytes_max + 1]u8 = undefined;
    const path = terminated(&path_buffer, entry.keySlice());
    const fd = fs.openBeneath(cache.root, path, .{ .path_only = true }) catch |err| {
        if (entry.fd >= 0) fs.close(entry.fd);
        entry.fd = -1;
        entry.content = null;
        entry.state = .{ .failed = err };
        return;
    };
    defer fs.close(fd);
    const now = fs.stat(fd) catch {
        return cache.reload(entry);
    };
    switch (entry.state) {
        .file, .directory, .other => if (now.same(entry.stat)) return,
        .failed => {},
    }
    cache.reload(entry);
}

fn reload(cache: *FileCache, entry: *Entry) void {
    if (entry.fd >= 0) fs.close(entry.fd);
    entry.fd = -1;
    entry.content = null;
    var key: [key_bytes_max]u8 = undefined;
    const len = entry.key_len;
    @memcpy(key[0..len], entry.key[0..len]);
    cache.load(entry, key[0..len]);
}

/// Opens `relative` and fills in `entry` (whose fd is closed).
fn load(cache: *FileCache, entry: *Entry, relative: []const u8) void {
    assert(entry.fd < 0);
    entry.content = null;
    var path_buffer: [4096]u8 = undefined;
    if (relative.len >= path_buffer.len) {
        entry.state = .{ .failed = error.NameTooLong };
        return;
    }
    const path = terminated(&path_buffer, relative);
    const fd = fs.openBeneath(cache.root, path, .{}) catch |err| {
        entry.state = .{ .failed = err };
        return;
    };
    const st = fs.stat(fd) catch |err| {
        fs.close(fd);
        entry.state = .{ .failed = switch (err) {
            error.NotFound => error.NotFound,
            error.AccessDenied => error.AccessDenied,
            error.SystemResources => error.SystemResources,
            error.Unexpected => error.Unexpected,
        } };
        return;
    };
    entry.stat = st;
    setValidators(entry, st);
    switch (st.kind) {
        .directory, .other => {
            fs.close(fd);
            entry.state = if (st.kind == .directory) .directory else .other;
            return;
        },
        .file => {},
    }
    entry.fd = fd;
    entry.state = .file;
    if (st.size <= cache.options.file_bytes_max) {
        const index = entry - cache.entries.ptr;
        const slot = cache.content_memory[index * cache.options.file_bytes_max ..][0..@intCast(st.size)];
        const n = fs.preadAll(fd, slot, 0) catch return; // served by sendfile instead
        // A file that changed size while being read is served from the fd until revalidated.
        if (n == slot.len) entry.content = slot;
    }
}

/// Builds the strong ETag (size, modification time in ns, inode; RFC 9110 §8.8.3) and the
/// Last-Modified date.
fn setValidators(entry: *Entry, st: fs.Stat) void {
    const mtime_ns: u64 = @bitCast(st.mtime_sec *% std.time.ns_per_s +% st.mtime_nsec);
    const tag = std.mem.print(&entry.etag_buffer, "\"{x}-{x}-{x}\"", .{ st.size, mtime_ns, st.ino }) catch unreachable;
    entry.etag_len = @intCast(tag.len);
    http_date.format(&entry.last_modified_buffer, st.mtime_sec);
}

fn terminated(buffer: []u8, text: []const u8) [*:0]const u8 {
    assert(text.len < buffer.len);
    @memcpy(buffer[0..text.len], text);
    buffer[text.len] = 0;
    return buffer[0..text.len :0];
}

test "FileCache: hits, contents, negative entries and revalidation" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = std.testing.io;
    try tmp.dir.writeFile(io, .{ .sub_path = "a.txt", .data = "alpha" });
    try tmp.dir.createDirPath(io, "d");
    var cache: FileCache = try .init(tmp.dir.handle, .{ .entries_max = 8, .file_bytes_max = 8, .revalidate_ms = 100 });
    defer cache.deinit();

    const a = cache.lookup("a.txt", 1000);
    try std.testing.expectEqual(Entry.State.file, a.state);
    try std.testing.expectEqualStrings("alpha", a.content.?);
    try std.testing.expect(a.etag().len > 4);
    try std.testing.expectEqual(a, cache.lookup("a.txt", 1050));
    try std.testing.expectEqual(@as(u64, 1), cache.hits);

    try std.testing.expectEqual(Entry.State.directory, cache.lookup("d", 1000).state);
    try std.testing.expectEqual(Entry.State{ .failed = error.NotFound }, cache.lookup("a.txt.br", 1000).state);

    // Changed on disk: seen once the entry is older than revalidate_ms.
    try tmp.dir.writeFile(io, .{ .sub_path = "a.txt", .data = "alphabet!" });
    try std.testing.expectEqualStrings("alpha", cache.lookup("a.txt", 1090).content.?);
    const changed = cache.lookup("a.txt", 1200);
    try std.testing.expectEqual(@as(u64, 9), changed.stat.size);
    try std.testing.expectEqual(@as(?[]const u8, null), changed.content); // over file_bytes_max
    try std.testing.expect(changed.fd >= 0);
    try tmp.dir.deleteFile(io, "a.txt");
    try std.testing.expectEqual(Entry.State{ .failed = error.NotFound }, cache.lookup("a.txt", 1400).state);
    try tmp.dir.writeFile(io, .{ .sub_path = "a.txt.br", .data = "br" });
    try std.testing.expectEqual(Entry.State.file, cache.lookup("a.txt.br", 1400).state);
}

test "FileCache: bounded, least recently used way replaced, long keys uncached" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = std.testing.io;
    var name_buffer: [16]u8 = undefined;
    for (0..40) |i| try tmp.dir.writeFile(io, .{ .sub_path = try std.mem.print(&name_buffer, "f{d}", .{i}), .data = "x" });
    var cache: FileCache = try .init(tmp.dir.handle, .{ .entries_max = 8, .file_bytes_max = 4 });
    defer cache.deinit();
    try std.testing.expectEqual(@as(usize, 9), cache.entries.len);
    for (0..40) |i| {
        const entry = cache.lookup(try std.mem.print(&name_buffer, "f{d}", .{i}), 0);
        try std.testing.expectEqualStrings("x", entry.content.?);
    }
    var open: usize = 0;
    for (cache.entries) |entry| open += @intFromBool(entry.fd >= 0);
    try std.testing.expect(open <= 8);
    const long: [300]u8 = @splat('a');
    const entry = cache.lookup(&long, 0);
    try std.testing.expect(entry == &cache.entries[8]);
    try std.testing.expect(entry.state == .failed);
    cache.releaseScratch();
}
