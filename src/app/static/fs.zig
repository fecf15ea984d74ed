//! The file-system calls the static file handler makes (and `getrandom` for its seeds), each
//! with its own error set and every errno mapped. Files are opened with `openat2` relative to the served root's directory fd
//! and `RESOLVE_BENEATH` (Linux 5.6+), so the kernel refuses any resolution — through `..`,
//! an absolute symlink or a symlink climbing out — that would leave the root. FIFOs and other
//! special files are opened non-blocking, so naming one cannot stall an engine thread.
const std = @import("std");
const linux = std.os.linux;

const log = std.log.scoped(.saker);

pub const fd_t = linux.fd_t;

fn unexpected(operation: []const u8, err: linux.E) error{Unexpected} {
    log.warn("{s}: unexpected E.{t} ({d})", .{ operation, err, @backingInt(err) });
    return error.Unexpected;
}

/// `struct open_how` of openat2(2).
const OpenHow = extern struct {
    flags: u64,
    mode: u64,
    resolve: u64,
};

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_BENEATH: u64 = 0x08;

/// Why a file could not be opened.
pub const OpenError = error{
    /// No such file, or a path component is not a directory (404).
    NotFound,
    /// Permission denied (403).
    AccessDenied,
    /// Resolution would leave the root: `..` or a symlink pointing out (404, never served).
    OutsideRoot,
    /// A path or name component longer than the file system allows (404).
    NameTooLong,
    /// Out of file descriptors or kernel memory (503).
    SystemResources,
    /// openat2 is not available (Linux older than 5.6).
    Unsupported,
    Unexpected,
};

/// How to open.
pub const OpenOptions = struct {
    /// Open only a location (O_PATH): for directories and for checks; no reading.
    path_only: bool = false,
    /// Fail unless it is a directory.
    directory: bool = false,
};

/// Opens `relative` ("" or "." for the root itself) beneath the directory `root`.
pub fn openBeneath(root: fd_t, relative: [*:0]const u8, options: OpenOptions) OpenError!fd_t {
    // openat2 refuses (EINVAL) any flag O_PATH does not take.
    var flags: linux.O = if (options.path_only)
        .{ .PATH = true, .CLOEXEC = true }
    else
        .{ .ACCMODE = .RDONLY, .CLOEXEC = true, .NOCTTY = true, .NONBLOCK = true };
    if (options.directory) flags.DIRECTORY = true;
    var how: OpenHow = .{
        .flags = @as(u32, @bitCast(flags)),
        .mode = 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    // EAGAIN: a rename or mount raced with the lookup; the kernel asks us to retry.
    for (0..8) |_| {
        const path: [*:0]const u8 = if (relative[0] == 0) "." else relative;
        const rc = linux.syscall4(.openat2, @as(usize, @bitCast(@as(isize, root))), @intFromPtr(path), @intFromPtr(&how), @sizeOf(OpenHow));
        switch (linux.errno(rc)) {
            .SUCCESS => return @intCast(rc),
            .INTR, .AGAIN => continue,
            .NOENT, .NOTDIR, .LOOP => return error.NotFound,
            .ACCES, .PERM, .NXIO, .NODEV, .OVERFLOW, .TXTBSY => return error.AccessDenied,
            .XDEV => return error.OutsideRoot,
            .NAMETOOLONG => return error.NameTooLong,
            .MFILE, .NFILE, .NOMEM, .NOSPC => return error.SystemResources,
            .NOSYS => return error.Unsupported,
            else => |err| return unexpected("openat2", err),
        }
    }
    return error.SystemResources;
}

/// Opens a directory by path (relative to the working directory or absolute), for the root.
pub fn openRoot(path: [*:0]const u8) error{ NotFound, NotDirectory, AccessDenied, SystemResources, Unexpected }!fd_t {
    const flags: linux.O = .{ .ACCMODE = .RDONLY, .CLOEXEC = true, .DIRECTORY = true };
    const rc = linux.openat(linux.AT.FDCWD, path, flags, 0);
    return switch (linux.errno(rc)) {
        .SUCCESS => @intCast(rc),
        .NOENT, .LOOP, .NAMETOOLONG => error.NotFound,
        .NOTDIR => error.NotDirectory,
        .ACCES, .PERM => error.AccessDenied,
        .MFILE, .NFILE, .NOMEM => error.SystemResources,
        else => |err| unexpected("open", err),
    };
}

/// What kind of file a stat describes.
pub const Kind = enum { file, directory, other };

/// The attributes the handler uses.
pub const Stat = struct {
    kind: Kind,
    size: u64,
    /// Modification time, seconds since the epoch.
    mtime_sec: i64,
    /// Nanoseconds past `mtime_sec`.
    mtime_nsec: u32,
    ino: u64,
    dev_major: u32,
    dev_minor: u32,

    /// Whether two stats describe the same unchanged file.
    pub fn same(a: Stat, b: Stat) bool {
        return a.kind == b.kind and a.size == b.size and a.mtime_sec == b.mtime_sec and
            a.mtime_nsec == b.mtime_nsec and a.ino == b.ino and a.dev_major == b.dev_major and
            a.dev_minor == b.dev_minor;
    }
};

/// Why a stat failed.
pub const StatError = error{ NotFound, AccessDenied, SystemResources, Unexpected };

/// statx of an open fd.
pub fn stat(fd: fd_t) StatError!Stat {
    return statAt(fd, "", linux.AT.EMPTY_PATH);
}

/// statx of `name` in directory `dir`, not following a final symlink.
pub fn statNoFollow(dir: fd_t, name: [*:0]const u8) StatError!Stat {
    return statAt(dir, name, linux.AT.SYMLINK_NOFOLLOW);
}

fn statAt(dir: fd_t, name: [*:0]const u8, flags: u32) StatError!Stat {
    var buffer: linux.Statx = undefined;
    const mask: linux.STATX = .{ .TYPE = true, .SIZE = true, .MTIME = true, .INO = true };
    const rc = linux.statx(dir, name, flags, mask, &buffer);
    switch (linux.errno(rc)) {
        .SUCCESS => {},
        .NOENT, .NOTDIR, .LOOP, .NAMETOOLONG => return error.NotFound,
        .ACCES, .PERM => return error.AccessDenied,
        .NOMEM => return error.SystemResources,
        else => |err| return unexpected("statx", err),
    }
    const kind: Kind = switch (buffer.mode & linux.S.IFMT) {
        linux.S.IFREG => .file,
        linux.S.IFDIR => .directory,
        else => .other,
    };
    return .{
        .kind = kind,
        .size = buffer.size,
        .mtime_sec = buffer.mtime.sec,
        .mtime_nsec = buffer.mtime.nsec,
        .ino = buffer.ino,
        .dev_major = buffer.dev_major,
        .dev_minor = buffer.dev_minor,
    };
}

/// Why reading a file failed.
pub const ReadError = error{ AccessDenied, SystemResources, Unexpected };

/// Reads up to `buffer.len` bytes at `offset`, resuming short reads; returns the count read
/// (less only at end of file).
pub fn preadAll(fd: fd_t, buffer: []u8, offset: u64) ReadError!usize {
    var done: usize = 0;
    while (done < buffer.len) {
        const rc = linux.pread(fd, buffer[done..].ptr, buffer.len - done, @intCast(offset + done));
        switch (linux.errno(rc)) {
            .SUCCESS => {
                if (rc == 0) return done;
                done += rc;
            },
            .INTR, .AGAIN => continue,
            .ACCES, .PERM, .ISDIR, .INVAL, .IO => return error.AccessDenied,
            .NOMEM, .NOBUFS => return error.SystemResources,
            else => |err| return unexpected("pread", err),
        }
    }
    return done;
}

/// Duplicates `fd` (close-on-exec), so a response can own a descriptor the cache may close.
pub fn dup(fd: fd_t) error{ SystemResources, Unexpected }!fd_t {
    const rc = linux.fcntl(fd, linux.F.DUPFD_CLOEXEC, 0);
    return switch (linux.errno(rc)) {
        .SUCCESS => @intCast(rc),
        .MFILE, .NFILE, .NOMEM => error.SystemResources,
        else => |err| unexpected("fcntl(F_DUPFD_CLOEXEC)", err),
    };
}

/// Fills `buffer` from the kernel's random pool (getrandom), waiting until it is initialised.
pub fn randomBytes(buffer: []u8) error{Unexpected}!void {
    var filled: usize = 0;
    while (filled < buffer.len) {
        const rc = linux.getrandom(buffer[filled..].ptr, buffer.len - filled, 0);
        switch (linux.errno(rc)) {
            .SUCCESS => filled += rc,
            .INTR => continue,
            else => |err| return unexpected("getrandom", err),
        }
    }
}

pub const CreateError = error{ Exists, NoSpace, AccessDenied, Unsupported, SystemResources, Unexpected };

/// Whether `Upload.finish` may replace a file of that name.
pub const Existing = enum { keep, replace };

/// What `Upload.finish` did.
pub const Created = enum { created, replaced };

/// A file written in pieces that appears all or nothing: the bytes go to an unnamed file
/// (O_TMPFILE) in the directory, which is synced and gets its name last (`finish`), so no
/// reader ever sees a partial file. One closed without `finish` (a failed upload) leaves
/// nothing behind. With `.keep` the name is given with linkat, which fails if it exists
/// (`error.Exists`): nothing is ever overwritten. With `.replace`, an existing file is
/// swapped for the new one at once (rename over it); a directory of that name is still
/// `error.Exists`.
pub const Upload = struct {
    fd: fd_t,

    pub fn open(dir: fd_t) CreateError!Upload {
        const flags: linux.O = .{ .ACCMODE = .WRONLY, .CLOEXEC = true, .TMPFILE = true, .DIRECTORY = true };
        const rc = linux.openat(dir, ".", flags, 0o644);
        return switch (linux.errno(rc)) {
            .SUCCESS => .{ .fd = @intCast(rc) },
            .ACCES, .PERM, .ROFS => error.AccessDenied,
            .OPNOTSUPP, .ISDIR, .INVAL => error.Unsupported, // no O_TMPFILE on this file system
            .NOSPC, .DQUOT => error.NoSpace,
            .MFILE, .NFILE, .NOMEM => error.SystemResources,
            else => |err| unexpected("openat(O_TMPFILE)", err),
        };
    }

    /// Appends `bytes`.
    pub fn write(upload: *Upload, bytes: []const u8) CreateError!void {
        var written: usize = 0;
        while (written < bytes.len) {
            const n = linux.write(upload.fd, bytes[written..].ptr, bytes.len - written);
            switch (linux.errno(n)) {
                .SUCCESS => written += n,
                .INTR => {},
                .NOSPC, .DQUOT, .FBIG => return error.NoSpace,
                else => |err| return unexpected("write", err),
            }
        }
    }

    /// Syncs the file and gives it its name.
    pub fn finish(upload: *Upload, dir: fd_t, name: [*:0]const u8, existing: Existing) CreateError!Created {
        switch (linux.errno(linux.fsync(upload.fd))) {
            .SUCCESS => {},
            .NOSPC, .DQUOT => return error.NoSpace,
            else => |err| return unexpected("fsync", err),
        }
        if (link(upload.fd, dir, name)) |_| {
            return .created;
        } else |err| switch (err) {
            error.Exists => if (existing == .keep) return error.Exists,
            else => return err,
        }
        // Replacing: a name of its own first, then renamed over the old file in one step.
        var random: [8]u8 = undefined;
        try randomBytes(&random);
        var temporary_buffer: [40]u8 = undefined;
        const temporary = std.fmt.bufPrintSentinel(&temporary_buffer, ".saker-upload-{x}.tmp", .{random}, 0) catch unreachable;
        try link(upload.fd, dir, temporary);
        switch (linux.errno(linux.renameat(dir, temporary, dir, name))) {
            .SUCCESS => return .replaced,
            else => |rename_err| {
                _ = linux.unlinkat(dir, temporary, 0);
                return switch (rename_err) {
                    .ISDIR, .NOTEMPTY, .EXIST => error.Exists,
                    .ACCES, .PERM, .ROFS => error.AccessDenied,
                    .NOSPC, .DQUOT => error.NoSpace,
                    else => unexpected("renameat", rename_err),
                };
            },
        }
    }

    pub fn close(upload: *Upload) void {
        _ = linux.close(upload.fd);
        upload.fd = -1;
    }
};

/// Whether `name` (one path segment) exists in `dir`, whatever it is (a dangling symbolic
/// link too). A check before an upload is read, to refuse it early; `Upload.finish` still
/// decides.
pub fn exists(dir: fd_t, name: [*:0]const u8) bool {
    var st: linux.Statx = undefined;
    const rc = linux.statx(dir, name, linux.AT.SYMLINK_NOFOLLOW, .{}, &st);
    return linux.errno(rc) == .SUCCESS;
}

/// Gives the unnamed file `fd` the name `name` in `dir`, through its /proc link
/// (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
fn link(fd: fd_t, dir: fd_t, name: [*:0]const u8) CreateError!void {
    var link_buffer: [32]u8 = undefined;
    const path = std.fmt.bufPrintSentinel(&link_buffer, "/proc/self/fd/{d}", .{fd}, 0) catch unreachable;
    switch (linux.errno(linux.linkat(linux.AT.FDCWD, path, dir, name, linux.AT.SYMLINK_FOLLOW))) {
        .SUCCESS => {},
        .EXIST => return error.Exists,
        .ACCES, .PERM, .ROFS => return error.AccessDenied,
        .NOSPC, .DQUOT, .MLINK => return error.NoSpace,
        .NOENT => return error.Unsupported, // no /proc
        else => |err| return unexpected("linkat", err),
    }
}

/// Closes a descriptor.
pub fn close(fd: fd_t) void {
    _ = linux.close(fd);
}

/// A directory entry as `getdents64` returns it.
pub const DirEntry = struct {
    name: []const u8,
    /// d_type: DT_DIR, DT_REG, DT_LNK, ... or DT_UNKNOWN.
    type: u8,
};

/// Reads the entries of an open directory, a buffer at a time.
pub const DirReader = struct {
    fd: fd_t,
    buffer: []align(8) u8,
    start: usize = 0,
    end: usize = 0,

    /// Why reading a directory failed.
    pub const Error = error{ AccessDenied, SystemResources, Unexpected };

    /// The next entry ("." and ".." skipped), or null at the end. The name is valid until the
    /// next call.
    pub fn next(reader: *DirReader) Error!?DirEntry {
        while (true) {
            if (reader.start >= reader.end) {
                const rc = linux.getdents64(reader.fd, reader.buffer.ptr, @intCast(reader.buffer.len));
                switch (linux.errno(rc)) {
                    .SUCCESS => {},
                    .INTR => continue,
                    .NOENT => return null, // the directory was removed
                    .ACCES, .PERM, .NOTDIR, .BADF => return error.AccessDenied,
                    .NOMEM => return error.SystemResources,
                    else => |err| return unexpected("getdents64", err),
                }
                if (rc == 0) return null;
                reader.start = 0;
                reader.end = rc;
            }
            const record: *align(1) const linux.dirent64 = @ptrCast(reader.buffer[reader.start..].ptr);
            reader.start += record.reclen;
            const name_start = @offsetOf(linux.dirent64, "name");
            const raw = reader.buffer[reader.start - record.reclen + name_start .. reader.start];
            const name = raw[0 .. std.mem.findScalar(u8, raw, 0) orelse raw.len];
            if (std.mem.eql(u8, name, ".") or std.mem.eql(u8, name, "..")) continue;
            return .{ .name = name, .type = record.type };
        }
    }
};

test "fs: openBeneath refuses to leave the root, follows links that stay inside" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = std.testing.io;
    try tmp.dir.createDirPath(io, "root/sub");
    try tmp.dir.writeFile(io, .{ .sub_path = "root/sub/a.txt", .data = "hello" });
    try tmp.dir.writeFile(io, .{ .sub_path = "secret.txt", .data = "secret" });
    try tmp.dir.symLink(io, "../secret.txt", "root/out", .{});
    try tmp.dir.symLink(io, "sub/a.txt", "root/in", .{});
    try tmp.dir.symLink(io, "/etc/passwd", "root/abs", .{});
    const root = try openBeneath(tmp.dir.handle, "root", .{ .directory = true });
    defer close(root);

    const in = try openBeneath(root, "in", .{});
    defer close(in);
    const st = try stat(in);
    try std.testing.expectEqual(Kind.file, st.kind);
    try std.testing.expectEqual(@as(u64, 5), st.size);
    var buffer: [16]u8 = undefined;
    try std.testing.expectEqualStrings("hello", buffer[0..try preadAll(in, &buffer, 0)]);

    try std.testing.expectError(error.OutsideRoot, openBeneath(root, "out", .{}));
    try std.testing.expectError(error.OutsideRoot, openBeneath(root, "abs", .{}));
    try std.testing.expectError(error.OutsideRoot, openBeneath(root, "../secret.txt", .{}));
    try std.testing.expectError(error.NotFound, openBeneath(root, "missing", .{}));
    try std.testing.expectError(error.NotFound, openBeneath(root, "sub/a.txt/x", .{}));
    const location = try openBeneath(root, "sub/a.txt", .{ .path_only = true });
    defer close(location);
    try std.testing.expectEqual(@as(u64, 5), (try stat(location)).size);
    try std.testing.expectError(error.OutsideRoot, openBeneath(root, "out", .{ .path_only = true }));
    try std.testing.expectError(error.NotFound, openBeneath(root, "in", .{ .directory = true }));
    const dir = try openBeneath(root, "", .{ .directory = true });
    defer close(dir);
    try std.testing.expectEqual(Kind.directory, (try stat(dir)).kind);

    var names: [4][]const u8 = undefined;
    var count: usize = 0;
    var storage: [1024]u8 align(8) = undefined;
    var reader: DirReader = .{ .fd = dir, .buffer = &storage };
    var seen: [64]u8 = undefined;
    var seen_len: usize = 0;
    while (try reader.next()) |entry| {
        @memcpy(seen[seen_len..][0..entry.name.len], entry.name);
        names[count] = seen[seen_len..][0..entry.name.len];
        seen_len += entry.name.len;
        count += 1;
    }
    try std.testing.expectEqual(@as(usize, 4), count);
}

test "fs: an upload appears whole when finished, never when abandoned, and replaces only when asked" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    const io = std.testing.io;
    const dir = try openBeneath(tmp.dir.handle, "", .{ .directory = true });
    defer close(dir);
    var abandoned: Upload = Upload.open(dir) catch |err| switch (err) {
        error.Unsupported => return error.SkipZigTest, // no O_TMPFILE here
        else => return err,
    };
    try abandoned.write("half");
    abandoned.close();
    try std.testing.expect(!exists(dir, "a.txt"));

    var first: Upload = try .open(dir);
    defer first.close();
    try first.write("hel");
    try first.write("");
    try first.write("lo");
    try std.testing.expect(!exists(dir, "a.txt"));
    try std.testing.expectEqual(Created.created, try first.finish(dir, "a.txt", .keep));
    try std.testing.expect(exists(dir, "a.txt"));
    var buffer: [16]u8 = undefined;
    try std.testing.expectEqualStrings("hello", try tmp.dir.readFile(io, "a.txt", &buffer));

    var second: Upload = try .open(dir);
    defer second.close();
    try second.write("world");
    try std.testing.expectError(error.Exists, second.finish(dir, "a.txt", .keep));
    try std.testing.expectEqualStrings("hello", try tmp.dir.readFile(io, "a.txt", &buffer));
    try std.testing.expectEqual(Created.replaced, try second.finish(dir, "a.txt", .replace));
    try std.testing.expectEqualStrings("world", try tmp.dir.readFile(io, "a.txt", &buffer));

    try tmp.dir.createDirPath(io, "d");
    var third: Upload = try .open(dir);
    defer third.close();
    try std.testing.expectError(error.Exists, third.finish(dir, "d", .replace));
    // Only the two names: no temporary one is left behind.
    var names: usize = 0;
    var listed = try tmp.dir.openDir(io, ".", .{ .iterate = true });
    defer listed.close(io);
    var it = listed.iterate();
    while (try it.next(io)) |_| names += 1;
    try std.testing.expectEqual(@as(usize, 2), names);
}
