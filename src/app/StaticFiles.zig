//! `StaticFiles`: a handler serving a directory tree — what `saker serve DIR` runs, usable as
//! a library handler too. GET and HEAD only (405 otherwise).
//!
//! - Paths: percent-decoded, `.`/`..` resolved, NUL and backslash refused (`url_path`), then
//!   opened beneath the root's directory fd with `openat2(RESOLVE_BENEATH)` (`fs`), so no
//!   path or symlink leads out of the root. Dotfiles are 404 unless `dotfiles` is set.
//! - Directories: `/dir` redirects (301) to `/dir/`; `/dir/` serves its index file, or else a
//!   listing (`listing`) when enabled, or 403.
//! - Validators and conditional requests (RFC 9110 §8.8, §13.1-§13.2): a strong `ETag` from
//!   size, mtime and inode, `Last-Modified`; If-Match / If-Unmodified-Since (412),
//!   If-None-Match / If-Modified-Since (304), in the order of §13.2.2.
//! - Ranges (RFC 9110 §14): one range is a 206 with `Content-Range`, several are a
//!   `multipart/byteranges` 206 (up to `multipart_bytes_max`, else the whole 200), none
//!   satisfiable is a 416; `If-Range` by entity tag or date; `Accept-Ranges: bytes`.
//! - Precompressed variants: `file.br` / `file.gz` beside `file` are served when the client
//!   accepts them (`accept_encoding`), with `Content-Encoding` and `Vary: Accept-Encoding`.
//! - Compression on the fly (`compression`): a compressible file of `bytes_min` to
//!   `compress_file_bytes_max` bytes without a precompressed variant the client accepts is
//!   sent in the coding it prefers, compressed once into a bounded per-worker cache
//!   (`CompressedCache`), with its own ETag (`"tag-zstd"`) and `Vary: Accept-Encoding`. Range
//!   requests get the identity bytes. Larger files go out as they are (sendfile).
//! - Bodies: small files from memory (one `writev` with the head), others with `sendfile`
//!   from a `dup` of the cached fd. Per-worker open-file cache (`FileCache`).
//! - An optional access log in the combined format, buffered per worker (`AccessLog`).
//!
//! State (cache, log buffer) is kept per `Request.worker_index`, each behind its own lock: on
//! event engines one thread uses an index, so the lock is never contended; threads that share
//! an index (handler pools, thread-based engines) take turns. Nothing a response refers to
//! after `handle` returns lives in that state (contents are copied, fds duplicated, header
//! values copied into the request arena), so the lock covers `handle` only.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const http = @import("../http.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const ResponseHead = @import("../http1/ResponseHead.zig");
const sync = @import("../sync.zig");
const clocks = @import("../clock.zig");
const AccessLog = @import("AccessLog.zig");
const Done = @import("../Done.zig");
const fs = @import("static/fs.zig");
const url_path = @import("static/url_path.zig");
const mime = @import("static/mime.zig");
const http_date = @import("static/http_date.zig");
const range = @import("static/range.zig");
const etag = @import("static/etag.zig");
const accept_encoding = @import("static/accept_encoding.zig");
const listing = @import("static/listing.zig");
const health = @import("health.zig");
const FileCache = @import("static/FileCache.zig");
const CompressedCache = @import("static/CompressedCache.zig");
const compress = @import("../compress.zig");

const StaticFiles = @This();

/// Parses an HTTP date in any of the three formats of RFC 9110 §5.6.7 (seconds since the epoch).
pub const parseHttpDate = http_date.parse;

/// What to serve and how.
pub const Options = struct {
    /// The directory to serve.
    root: []const u8 = ".",
    /// Workers that will call `handle` (`Server(...).workerCountFor(config)`); each gets its
    /// own cache and log buffer. A `Request.worker_index` at or above it shares a state
    /// (index modulo `workers`).
    workers: u32 = 1,
    /// Serve an HTML listing for directories without an index file (else 403).
    listing: bool = true,
    /// Serve files and directories whose name starts with '.' (else 404).
    dotfiles: bool = false,
    /// The file served for a directory URL.
    index: []const u8 = "index.html",
    /// A Cache-Control value added to file responses.
    cache_control: ?[]const u8 = null,
    /// Cross-origin reads (CORS): `*` for any origin, or one origin (`https://app.example`).
    /// A request whose `Origin` is allowed gets `Access-Control-Allow-Origin`, and its
    /// preflight (OPTIONS with `Access-Control-Request-Method`) a 204 allowing GET and HEAD.
    /// Null: no CORS headers, and OPTIONS is 405 like any other method.
    cors_origin: ?[]const u8 = null,
    /// A path answered by `saker.health.check` (200 `ok`, 503 `draining` at shutdown)
    /// instead of a file, for load balancers' health checks.
    health_path: ?[]const u8 = null,
    /// Accept uploads: PUT writes the request body to a new file at its path (201 Created),
    /// and a directory's listing offers a form whose POST (multipart/form-data) adds its
    /// files to that directory (303 back to the listing). An existing name is 409 and is
    /// never overwritten, a missing directory 409/404. Each file appears whole or not at all
    /// (`fs.Upload`), written and synced on a thread that may block (the server's handler pool
    /// on an event loop, started for it). The size limit is the server's `body_bytes_max`
    /// (413 beyond): a body is buffered whole before it is written. Off: PUT and POST are 405
    /// like any method but GET and HEAD.
    upload: bool = false,
    /// With `upload`: an upload may replace an existing file (PUT answers 204 then), swapped
    /// for the new one in one step, never seen half-written. A PUT with `If-None-Match: *`
    /// still refuses to replace (412). Off: an existing name is 409.
    upload_overwrite: bool = false,
    /// A file (relative to the root) served with 200 for paths that do not exist, for
    /// single-page applications.
    spa_fallback: ?[]const u8 = null,
    /// Look for `.br` / `.gz` variants of files.
    precompressed: bool = true,
    /// The open-file cache of each worker.
    cache: FileCache.Options = .{},
    /// Compression on the fly of files without a precompressed variant; null: off.
    /// `saker serve` sets `Config.compression` here.
    compression: ?compress.Policy = null,
    /// Larger files are sent as they are rather than compressed whole in memory.
    compress_file_bytes_max: u64 = 4 * 1024 * 1024,
    /// Compressed variants kept, for all workers together (each holds an even share).
    compress_cache_bytes_max: u64 = 32 * 1024 * 1024,
    /// Most entries shown in a listing (the rest are counted, not shown).
    listing_entries_max: u32 = 10_000,
    /// Largest multipart/byteranges body; bigger multi-range requests get the whole file.
    multipart_bytes_max: u32 = 1024 * 1024,
    /// Where the access log goes (not owned), or null for none.
    access_log_fd: ?linux.fd_t = null,
    /// How access log lines are written.
    access_log_format: AccessLog.Format = .combined,
    /// Access log buffer per worker.
    access_log_buffer_bytes: u32 = 64 * 1024,
};

gpa: std.mem.Allocator,
options: Options,
root_fd: fs.fd_t,
/// `spa_fallback` resolved to a relative path.
spa_relative: ?[]const u8,
spa_buffer: []u8,
states: []WorkerState,
access_log: ?AccessLog,

const WorkerState = struct {
    mutex: sync.Mutex = .{},
    cache: FileCache,
    compressed: CompressedCache,
    /// Seeded once at start-up: multipart boundaries cost no syscall.
    random: std.Random.DefaultCsprng,
};

/// Why `init` failed.
pub const InitError = error{
    /// The root does not exist.
    NotFound,
    /// The root is not a directory.
    NotDirectory,
    AccessDenied,
    /// `index` is not a plain file name.
    InvalidIndex,
    /// `spa_fallback` is not a relative path that stays beneath the root.
    InvalidFallback,
    /// `spa_fallback` names no regular file beneath the root (missing, a directory, a FIFO,
    /// or a symlink leading out).
    FallbackNotFound,
    /// `cache_control` holds a control character.
    InvalidCacheControl,
    /// `cors_origin` is neither `*` nor `scheme://host[:port]`.
    InvalidCorsOrigin,
    /// `compression` names a level, window or media type the encoders do not take.
    InvalidCompression,
    /// openat2 is missing (Linux older than 5.6).
    Unsupported,
    SystemResources,
    OutOfMemory,
    Unexpected,
};

/// Opens the root and reserves per-worker caches.
pub fn init(gpa: std.mem.Allocator, options: Options) InitError!StaticFiles {
    assert(options.workers >= 1);
    try checkOptions(options);
    const root_path = try gpa.dupeSentinel(u8, options.root, 0);
    defer gpa.free(root_path);
    const root_fd = try fs.openRoot(root_path);
    errdefer fs.close(root_fd);
    // Probe openat2 once, so an old kernel is a start-up error and not a 500 per request.
    const probe = fs.openBeneath(root_fd, ".", .{ .path_only = true }) catch |err| return switch (err) {
        error.Unsupported => error.Unsupported,
        error.AccessDenied => error.AccessDenied,
        error.SystemResources => error.SystemResources,
        else => error.Unexpected,
    };
    fs.close(probe);

    var spa_relative: ?[]const u8 = null;
    const spa_buffer = try gpa.alloc(u8, if (options.spa_fallback) |f| f.len + 1 else 0);
    errdefer gpa.free(spa_buffer);
    if (options.spa_fallback) |fallback| {
        const with_slash = try std.mem.concat(gpa, u8, &.{ "/", fallback });
        defer gpa.free(with_slash);
        const resolved = url_path.resolve(with_slash, spa_buffer) catch return error.InvalidFallback;
        if (resolved.relative.len == 0) return error.InvalidFallback;
        spa_relative = resolved.relative;
        try checkFallback(gpa, root_fd, resolved.relative);
    }

    var cache_options = options.cache;
    cache_options.entries_max = cacheEntriesFor(options);
    const states = try gpa.alloc(WorkerState, options.workers);
    errdefer gpa.free(states);
    const compressed_options: CompressedCache.Options = .{
        .bytes_max = if (options.compression != null) options.compress_cache_bytes_max / options.workers else 0,
    };
    var ready: usize = 0;
    errdefer for (states[0..ready]) |*state| {
        state.cache.deinit();
        state.compressed.deinit();
    };
    for (states) |*state| {
        var seed: [std.Random.DefaultCsprng.secret_seed_length]u8 = undefined;
        try fs.randomBytes(&seed);
        var cache: FileCache = try .init(root_fd, cache_options);
        errdefer cache.deinit();
        state.* = .{ .cache = cache, .compressed = try .init(compressed_options), .random = .init(seed) };
        ready += 1;
    }
    var access_log: ?AccessLog = if (options.access_log_fd) |fd|
        try .init(gpa, fd, options.workers, options.access_log_buffer_bytes)
    else
        null;
    if (access_log) |*l| l.format = options.access_log_format;
    return .{
        .gpa = gpa,
        .options = options,
        .root_fd = root_fd,
        .spa_relative = spa_relative,
        .spa_buffer = spa_buffer,
        .states = states,
        .access_log = access_log,
    };
}

/// Flushes the access log and closes everything. Call after the server has stopped.
pub fn deinit(sf: *StaticFiles) void {
    if (sf.access_log) |*access_log| {
        for (0..sf.states.len) |i| access_log.flush(@intCast(i));
        access_log.deinit(sf.gpa);
    }
    for (sf.states) |*state| {
        state.cache.deinit();
        state.compressed.deinit();
    }
    sf.gpa.free(sf.states);
    sf.gpa.free(sf.spa_buffer);
    fs.close(sf.root_fd);
    sf.* = undefined;
}

fn checkOptions(options: Options) InitError!void {
    const index = options.index;
    if (index.len == 0 or std.mem.findAny(u8, index, "/\\\x00") != null or
        std.mem.eql(u8, index, ".") or std.mem.eql(u8, index, ".."))
    {
        return error.InvalidIndex;
    }
    if (options.cache_control) |value| if (!ResponseHead.validField("Cache-Control", value))
        return error.InvalidCacheControl;
    if (options.cors_origin) |origin| if (!validOrigin(origin)) return error.InvalidCorsOrigin;
    if (options.compression) |policy| policy.validate() catch return error.InvalidCompression;
}

/// `*`, or an origin as browsers send it (RFC 6454 §7): `scheme://host[:port]`, no path,
/// nothing but visible ASCII.
fn validOrigin(origin: []const u8) bool {
    if (std.mem.eql(u8, origin, "*")) return true;
    const scheme_end = std.mem.find(u8, origin, "://") orelse return false;
    if (scheme_end == 0) return false;
    for (origin[0..scheme_end]) |c| if (!std.ascii.isAlphanumeric(c) and c != '+' and c != '-' and c != '.') return false;
    const authority = origin[scheme_end + 3 ..];
    if (authority.len == 0) return false;
    for (authority) |c| if (c <= ' ' or c >= 0x7f or c == '/' or c == '?' or c == '#' or c == ',') return false;
    return true;
}

/// Headers a cross-origin page may send to a file (preflight) and read from its response.
const cors_allowed_headers = "Range, If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, If-Range";
const cors_exposed_headers = "Content-Length, Content-Range, Accept-Ranges, ETag, Last-Modified";

/// Adds the CORS headers `cors_origin` calls for; returns true when the request was a
/// preflight, now answered.
fn applyCors(sf: *const StaticFiles, req: *const Request, res: *Response) !bool {
    const allowed = sf.options.cors_origin orelse return false;
    const any = std.mem.eql(u8, allowed, "*");
    // The answer depends on the request's Origin unless every origin gets the same one.
    if (!any) try res.header("Vary", "Origin");
    const origin = req.header("Origin") orelse return false;
    if (!any and !std.mem.eql(u8, origin, allowed)) return false;
    try res.header("Access-Control-Allow-Origin", if (any) "*" else allowed);
    if (req.method == .OPTIONS and req.header("Access-Control-Request-Method") != null) {
        try res.header("Access-Control-Allow-Methods", "GET, HEAD");
        try res.header("Access-Control-Allow-Headers", cors_allowed_headers);
        try res.header("Access-Control-Max-Age", "600");
        res.status = .no_content;
        res.content_type = null;
        res.setBody("");
        return true;
    }
    try res.header("Access-Control-Expose-Headers", cors_exposed_headers);
    return false;
}

/// A fallback must be a regular file beneath the root when the server starts: a typo would
/// otherwise turn every missing path into a 404 without a word.
fn checkFallback(gpa: std.mem.Allocator, root_fd: fs.fd_t, relative: []const u8) InitError!void {
    const path = try gpa.dupeSentinel(u8, relative, 0);
    defer gpa.free(path);
    const fd = fs.openBeneath(root_fd, path, .{ .path_only = true }) catch |err| return switch (err) {
        error.NotFound, error.OutsideRoot, error.NameTooLong => error.FallbackNotFound,
        error.AccessDenied => error.AccessDenied,
        error.SystemResources => error.SystemResources,
        error.Unsupported => error.Unsupported,
        error.Unexpected => error.Unexpected,
    };
    defer fs.close(fd);
    const st = fs.stat(fd) catch |err| return switch (err) {
        error.NotFound => error.FallbackNotFound,
        error.AccessDenied => error.AccessDenied,
        error.SystemResources => error.SystemResources,
        error.Unexpected => error.Unexpected,
    };
    if (st.kind != .file) return error.FallbackNotFound;
}

/// Caps the per-worker cache so that cached fds of all workers take at most a quarter of the
/// process's file descriptor limit (the rest is for connections).
fn cacheEntriesFor(options: Options) u32 {
    std.process.raiseFileDescriptorLimit();
    const limit = std.posix.getrlimit(.NOFILE) catch return options.cache.entries_max;
    const share = @min(limit.cur, 1 << 30) / 4 / options.workers;
    return @intCast(std.math.clamp(share, FileCache.ways, options.cache.entries_max));
}

/// The handler's entry point.
pub fn handle(sf: *StaticFiles, req: *Request, res: *Response) !void {
    if (sf.isUpload(req)) {
        // Without the worker's state: writing and syncing a large file takes a while, and the
        // engine's loop needs that state meanwhile (another request, `onDone`).
        if (try sf.applyCors(req, res)) return;
        return if (req.method == .PUT) sf.serveUpload(req, res) else sf.serveUploadForm(req, res);
    }
    const index = req.worker_index % @as(u32, @intCast(sf.states.len));
    const state = &sf.states[index];
    // Nothing streams while the worker's state is held: a streamed chunk waits for the
    // engine's loop, which may itself wait for this mutex (another request, `onDone`,
    // `onTick`). Listings larger than the buffer grow in the arena instead; files go out as
    // files.
    const stream = res.stream;
    res.stream = null;
    defer res.stream = stream;
    state.mutex.lock();
    defer state.mutex.unlock();
    defer state.cache.releaseScratch();
    try sf.respond(state, req, res, Clock.read());
}

/// Whether `req` is an upload: `upload` is on and it is a PUT or a POST.
fn isUpload(sf: *const StaticFiles, req: *const Request) bool {
    return sf.options.upload and (req.method == .PUT or req.method == .POST);
}

/// Uploads write and sync files: on an event loop they run on the handler pool, once their
/// body is in (no thread waits for a slow client).
pub fn mayBlock(sf: *const StaticFiles, req: *const Request) bool {
    return sf.isUpload(req);
}

/// Without uploads nothing blocks, and no handler pool is started.
pub fn wantsMayBlock(sf: *const StaticFiles) bool {
    return sf.options.upload;
}

/// Whether `onDone` is wanted: only with an access log.
pub fn wantsDone(sf: *const StaticFiles) bool {
    return sf.access_log != null;
}

/// Writes the access log line of every response once it is out, including those the server
/// made itself for requests it refused (`saker.Done`): the bytes are those actually sent.
pub fn onDone(sf: *StaticFiles, done: *const Done) void {
    const access_log = if (sf.access_log) |*l| l else return;
    const index = done.worker_index % @as(u32, @intCast(sf.states.len));
    const state = &sf.states[index];
    state.mutex.lock();
    defer state.mutex.unlock();
    const clock = Clock.read();
    var time: AccessLog.Time = .{ .unix_seconds = clock.unix_seconds };
    if (access_log.format == .json) {
        // The JSON format's microseconds: a fine clock read, only there.
        const now = clocks.read(.REALTIME);
        time.unix_microseconds = @as(i64, now.sec) * std.time.us_per_s + @divFloor(now.nsec, std.time.ns_per_us);
    }
    access_log.append(index, done, time);
    // Engines without a tick (thread-based) still see lines written within a second of a
    // later request, not only when the buffer fills.
    access_log.flushIfOlder(index, clock.ms, 1000);
}

/// Flushes the worker's access log buffer (called by the server on every tick and at exit).
pub fn onTick(sf: *StaticFiles, worker_index: u32) void {
    const access_log = if (sf.access_log) |*l| l else return;
    const index = worker_index % @as(u32, @intCast(sf.states.len));
    const state = &sf.states[index];
    state.mutex.lock();
    defer state.mutex.unlock();
    access_log.flush(index);
}

/// The clocks a request needs, read once.
const Clock = struct {
    /// Monotonic, for cache revalidation.
    ms: u64,
    /// Wall clock, for dates.
    unix_seconds: i64,

    fn read() Clock {
        return .{
            .ms = clocks.milliseconds(.MONOTONIC_COARSE),
            .unix_seconds = clocks.read(.REALTIME_COARSE).sec,
        };
    }
};

fn respond(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, clock: Clock) !void {
    if (try sf.applyCors(req, res)) return;
    if (sf.options.health_path) |path| if (std.mem.eql(u8, req.path, path) and (req.method == .GET or req.method == .HEAD))
        return health.check(req, res);
    assert(!sf.isUpload(req)); // `handle` serves those
    if (req.method != .GET and req.method != .HEAD) {
        if (sf.options.upload) {
            try res.header("Allow", "GET, HEAD, PUT, POST");
            return plain(res, .method_not_allowed, "405 Method Not Allowed: only GET, HEAD, PUT and POST are served\n");
        }
        try res.header("Allow", "GET, HEAD");
        return plain(res, .method_not_allowed, "405 Method Not Allowed: only GET and HEAD are served\n");
    }
    const buffer = try req.arena.alloc(u8, req.path.len);
    const resolved = url_path.resolve(req.path, buffer) catch |err| return plain(res, .bad_request, switch (err) {
        error.NotAbsolute => "400 Bad Request: the path must start with '/'\n",
        error.InvalidEncoding => "400 Bad Request: malformed percent-encoding in the path\n",
        error.NulByte => "400 Bad Request: NUL byte in the path\n",
        error.Backslash => "400 Bad Request: backslash in the path\n",
        error.EscapesRoot => "400 Bad Request: the path climbs above the root\n",
    });
    if (resolved.dot_segment and !sf.options.dotfiles) return sf.notFound(state, req, res, clock);
    const entry = state.cache.lookup(resolved.relative, clock.ms);
    switch (entry.state) {
        .failed => |err| return sf.openFailed(state, req, res, err, clock),
        .other => return plain(res, .forbidden, "403 Forbidden: not a regular file\n"),
        .directory => return sf.serveDirectory(state, req, res, resolved, clock),
        .file => {
            // "/file.txt/" names a directory that is not there.
            if (resolved.trailing_slash) return sf.notFound(state, req, res, clock);
            return sf.serveFile(state, req, res, entry, resolved.relative, clock);
        },
    }
}

/// PUT with `upload`: the body becomes a new file at the request's path.
fn serveUpload(sf: *StaticFiles, req: *Request, res: *Response) !void {
    const buffer = try req.arena.alloc(u8, req.path.len);
    const resolved = url_path.resolve(req.path, buffer) catch
        return plain(res, .bad_request, "400 Bad Request: not a path beneath the served directory\n");
    if (resolved.trailing_slash or resolved.relative.len == 0)
        return plain(res, .bad_request, "400 Bad Request: an upload needs a file name, not a directory\n");
    if (resolved.dot_segment and !sf.options.dotfiles)
        return plain(res, .forbidden, "403 Forbidden: names starting with '.' are not served\n");
    const slash = std.mem.findScalarLast(u8, resolved.relative, '/');
    const parent = try req.arena.dupeSentinel(u8, if (slash) |s| resolved.relative[0..s] else "", 0);
    const name = try req.arena.dupeSentinel(u8, resolved.relative[if (slash) |s| s + 1 else 0..], 0);
    const dir = (openDirectory(sf, res, parent, .conflict, "409 Conflict: the directory does not exist\n") catch
        return error.UploadFailed) orelse return;
    defer fs.close(dir);
    // `If-None-Match: *` asks for a new file only (RFC 9110 §13.1.2).
    const only_new = if (req.header("If-None-Match")) |value| std.mem.eql(u8, std.mem.trim(u8, value, " \t"), "*") else false;
    const existing: fs.Existing = if (sf.options.upload_overwrite and !only_new) .replace else .keep;
    const exists_answer = if (only_new)
        "412 Precondition Failed: the file exists (If-None-Match: *)\n"
    else
        "409 Conflict: the file exists (uploads never overwrite without --upload-overwrite)\n";
    const exists_status: http.Status = if (only_new) .precondition_failed else .conflict;
    // Refused before anything is written; the file's naming still decides, should the name
    // appear meanwhile.
    if (existing == .keep and fs.exists(dir, name)) return plain(res, exists_status, exists_answer);
    const done = writeFile(dir, name, req.body(), existing) catch |err| return switch (err) {
        error.Exists => if (existing == .replace)
            plain(res, .conflict, "409 Conflict: a directory has that name\n")
        else
            plain(res, exists_status, exists_answer),
        error.NoSpace => plain(res, .insufficient_storage, "507 Insufficient Storage\n"),
        error.AccessDenied => plain(res, .forbidden, "403 Forbidden: the directory is not writable\n"),
        error.SystemResources => plain(res, .service_unavailable, "503 Service Unavailable\n"),
        error.Unsupported, error.Unexpected => error.UploadFailed,
    };
    sf.expireCached(resolved.relative);
    if (done == .replaced) {
        res.status = .no_content;
        return;
    }
    try res.header("Location", req.path);
    plain(res, .created, "201 Created\n");
}

/// Has every worker's cache look at `relative` afresh: a request right after an upload sees
/// the new file, not what was cached before it (a 404, the replaced file).
fn expireCached(sf: *StaticFiles, relative: []const u8) void {
    for (sf.states) |*state| {
        state.mutex.lock();
        defer state.mutex.unlock();
        state.cache.expire(relative);
    }
}

/// Writes `bytes` to the new file `name` of `dir`, all or nothing (`fs.Upload`).
fn writeFile(dir: fs.fd_t, name: [*:0]const u8, bytes: []const u8, existing: fs.Existing) fs.CreateError!fs.Created {
    var upload: fs.Upload = try .open(dir);
    defer upload.close();
    try upload.write(bytes);
    return upload.finish(dir, name, existing);
}

/// POST with `upload` to a directory's URL: the files of a multipart/form-data body (the
/// listing's form) become new files in that directory, in order; then 303 back to the
/// listing. A file that cannot be created stops there (409 for a name that exists), and the
/// answer says which were created before it.
fn serveUploadForm(sf: *StaticFiles, req: *Request, res: *Response) !void {
    const buffer = try req.arena.alloc(u8, req.path.len);
    const resolved = url_path.resolve(req.path, buffer) catch
        return plain(res, .bad_request, "400 Bad Request: not a path beneath the served directory\n");
    if (!resolved.trailing_slash and resolved.relative.len > 0)
        return plain(res, .bad_request, "400 Bad Request: post uploads to a directory URL (ending in /)\n");
    if (resolved.dot_segment and !sf.options.dotfiles) return plain(res, .not_found, "404 Not Found\n");
    const dir_path = try req.arena.dupeSentinel(u8, resolved.relative, 0);
    const dir = (openDirectory(sf, res, dir_path, .not_found, "404 Not Found\n") catch
        return error.UploadFailed) orelse return;
    defer fs.close(dir);
    var reader = req.multipart(.{}) catch |err| return switch (err) {
        error.UnsupportedMediaType => plain(res, .unsupported_media_type, "415 Unsupported Media Type: post multipart/form-data\n"),
        error.OutOfMemory => error.OutOfMemory,
        else => plain(res, .bad_request, "400 Bad Request: malformed multipart body\n"),
    };
    const existing: fs.Existing = if (sf.options.upload_overwrite) .replace else .keep;
    var form: Form = .{ .existing = existing };
    while (true) {
        const entry = (reader.next() catch |err| return switch (err) {
            error.MultipartPartTooLarge, error.MultipartTooManyParts, error.MultipartHeadersTooLarge => plain(res, .content_too_large, "413 Content Too Large\n"),
            error.InvalidMultipart => plain(res, .bad_request, "400 Bad Request: malformed multipart body\n"),
        }) orelse break;
        const sent_name = entry.part.filename orelse continue; // a field, not a file
        const name = uploadName(sent_name, sf.options.dotfiles) orelse
            return plain(res, .bad_request, "400 Bad Request: a file name must be one plain path segment\n");
        form.name = try req.arena.dupeSentinel(u8, name, 0);
        if (existing == .keep and fs.exists(dir, form.name)) return form.refuse(res, error.Exists);
        _ = writeFile(dir, form.name, entry.data, existing) catch |err| return form.refuse(res, err);
        const relative = if (dir_path.len == 0)
            form.name
        else
            try std.fmt.allocPrint(req.arena, "{s}/{s}", .{ dir_path, form.name });
        sf.expireCached(relative);
        try form.created.print(req.arena, " {s}", .{form.name});
        form.count += 1;
    }
    if (form.count == 0) return plain(res, .bad_request, "400 Bad Request: the form holds no file\n");
    try res.header("Location", req.path);
    res.status = .see_other;
    res.content_type = "text/plain; charset=utf-8";
    try res.print("303 See Other: created {d}:{s}\n", .{ form.count, form.created.items });
}

/// Where a posted form's upload is: the name of its current file, and the files created before it.
const Form = struct {
    existing: fs.Existing,
    name: [:0]const u8 = "",
    created: std.ArrayList(u8) = .empty,
    count: usize = 0,

    /// Answers why the current file cannot be created, with the files created before it.
    fn refuse(form: *const Form, res: *Response, err: fs.CreateError) !void {
        const status: http.Status, const why = switch (err) {
            error.Exists => if (form.existing == .replace)
                .{ .conflict, "is the name of a directory" }
            else
                .{ .conflict, "exists (uploads never overwrite without --upload-overwrite)" },
            error.NoSpace => .{ .insufficient_storage, "does not fit on the disk" },
            error.AccessDenied => .{ .forbidden, "cannot be written here" },
            error.SystemResources => .{ .service_unavailable, "cannot be written now" },
            error.Unsupported, error.Unexpected => return error.UploadFailed,
        };
        res.status = status;
        res.content_type = "text/plain; charset=utf-8";
        try res.print("{d} {s}: {s} {s}; created before it: {d}{s}\n", .{ status.code(), status.phrase(), form.name, why, form.count, form.created.items });
    }
};

/// The name a posted file gets: the last segment of what the browser sent (some send a
/// whole path), refused (null) when empty, `.`, `..`, holding NUL or a control byte, or a
/// dotfile (unless served).
fn uploadName(sent: []const u8, dotfiles: bool) ?[]const u8 {
    const start = if (std.mem.findLastAny(u8, sent, "/\\")) |i| i + 1 else 0;
    const name = sent[start..];
    if (name.len == 0 or std.mem.eql(u8, name, ".") or std.mem.eql(u8, name, "..")) return null;
    for (name) |c| if (c < 0x20 or c == 0x7f) return null;
    if (name[0] == '.' and !dotfiles) return null;
    return name;
}

fn openFailed(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, err: fs.OpenError, clock: Clock) !void {
    switch (err) {
        error.NotFound, error.OutsideRoot, error.NameTooLong => return sf.notFound(state, req, res, clock),
        error.AccessDenied => return plain(res, .forbidden, "403 Forbidden\n"),
        error.SystemResources => return plain(res, .service_unavailable, "503 Service Unavailable: out of file descriptors\n"),
        error.Unsupported, error.Unexpected => return plain(res, .internal_server_error, "500 Internal Server Error\n"),
    }
}

/// 404, or the single-page-application fallback file when configured.
fn notFound(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, clock: Clock) !void {
    if (sf.spa_relative) |fallback| {
        const entry = state.cache.lookup(fallback, clock.ms);
        if (entry.state == .file) return sf.serveFile(state, req, res, entry, fallback, clock);
    }
    return plain(res, .not_found, "404 Not Found\n");
}

fn serveDirectory(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, resolved: url_path.Resolved, clock: Clock) !void {
    const relative = resolved.relative;
    if (!resolved.trailing_slash) {
        // Built from the resolved path, never echoed: "//evil.example/x" must not become a
        // scheme-relative Location.
        var location: std.Io.Writer.Allocating = .init(req.arena);
        const w = &location.writer;
        w.writeByte('/') catch return error.OutOfMemory;
        url_path.writeEncoded(w, relative, true) catch return error.OutOfMemory;
        w.writeByte('/') catch return error.OutOfMemory;
        if (req.raw_query.len > 0) w.print("?{s}", .{req.raw_query}) catch return error.OutOfMemory;
        try res.header("Location", location.written());
        return plain(res, .moved_permanently, "301 Moved Permanently\n");
    }
    const index_path = if (relative.len == 0)
        sf.options.index
    else
        try std.mem.concat(req.arena, u8, &.{ relative, "/", sf.options.index });
    const index = state.cache.lookup(index_path, clock.ms);
    if (index.state == .file) return sf.serveFile(state, req, res, index, index_path, clock);
    if (!sf.options.listing) return plain(res, .forbidden, "403 Forbidden: directory listing is off\n");
    return sf.serveListing(req, res, relative);
}

const Variants = struct {
    available: std.EnumSet(accept_encoding.Coding) = .empty,
    entries: std.EnumArray(accept_encoding.Coding, ?*FileCache.Entry) = .initFill(null),
};

fn findVariants(sf: *StaticFiles, state: *WorkerState, req: *Request, relative: []const u8, clock: Clock) !Variants {
    var variants: Variants = .{};
    if (!sf.options.precompressed) return variants;
    // Beyond the key limit paths use the scratch entry, which a second lookup would reuse.
    if (relative.len + 3 > FileCache.key_bytes_max) return variants;
    for ([_]accept_encoding.Coding{ .br, .gzip }) |coding| {
        const path = try std.mem.concat(req.arena, u8, &.{ relative, coding.suffix() });
        const entry = state.cache.lookup(path, clock.ms);
        if (entry.state != .file) continue;
        variants.available.insert(coding);
        variants.entries.set(coding, entry);
    }
    return variants;
}

fn serveFile(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, original: *FileCache.Entry, relative: []const u8, clock: Clock) !void {
    // Variant lookups come first: an entry stays put while younger entries are looked up
    // (the least recently used way of a set is replaced), so `original` remains valid.
    const variants = try sf.findVariants(state, req, relative, clock);
    const coding = accept_encoding.choose(req.header("Accept-Encoding"), variants.available);
    const chosen = if (coding) |c| variants.entries.get(c).? else original;
    const fly: OnTheFly = if (coding == null) sf.onTheFly(state, req, original, relative) else .{};
    const tag = if (fly.coding) |c|
        (try compress.Policy.encodedTag(req.arena, chosen.etag(), c)).?
    else
        try req.arena.dupe(u8, chosen.etag());
    const size = chosen.stat.size;
    const mtime = chosen.stat.mtime_sec;

    try res.header("ETag", tag);
    try res.header("Last-Modified", try req.arena.dupe(u8, chosen.lastModified()));
    if (variants.available.count() > 0 or fly.eligible) try res.header("Vary", "Accept-Encoding");
    if (sf.options.cache_control) |value| try res.header("Cache-Control", value);

    // RFC 9110 §13.2.2: If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since, If-Range.
    if (req.header("If-Match")) |value| {
        if (!etag.listMatches(value, tag, .strong)) return precondition(res);
    } else if (req.header("If-Unmodified-Since")) |value| {
        if (http_date.parse(value)) |date| if (mtime > date) return precondition(res);
    }
    if (req.header("If-None-Match")) |value| {
        if (etag.listMatches(value, tag, .weak)) return notModified(res);
    } else if (req.header("If-Modified-Since")) |value| {
        // A date in the future is not a valid validator (§13.1.3).
        if (http_date.parse(value)) |date| if (date <= clock.unix_seconds and mtime <= date) return notModified(res);
    }

    res.content_type = mime.forName(relative);
    try res.header("Accept-Ranges", "bytes");
    if (req.method == .GET) if (req.header("Range")) |value| {
        if (ifRangeAllows(req.header("If-Range"), tag, mtime)) {
            var storage: range.Ranges = .{};
            switch (range.evaluate(value, size, &storage)) {
                .full => {},
                .unsatisfiable => {
                    try res.header("Content-Range", try std.fmt.allocPrint(req.arena, "bytes */{d}", .{size}));
                    res.content_type = null;
                    return plain(res, .range_not_satisfiable, "416 Range Not Satisfiable\n");
                },
                .ranges => |spans| {
                    if (spans.len == 1) {
                        const span = spans[0];
                        res.status = .partial_content;
                        try res.header("Content-Range", try std.fmt.allocPrint(req.arena, "bytes {d}-{d}/{d}", .{ span.first, span.last, size }));
                        if (coding) |c| try res.header("Content-Encoding", c.token());
                        return sendBody(req, res, chosen, span.first, span.len());
                    }
                    // Parts of an encoded variant would need per-part codings: send it whole.
                    if (coding == null and try sf.sendMultipart(state, req, res, chosen, spans)) return;
                },
            }
        }
    };
    if (coding) |c| try res.header("Content-Encoding", c.token());
    if (fly.coding) |c| {
        if (try sf.sendCompressed(state, req, res, chosen, c)) return;
        // Not smaller, or no memory to compress it: the file as it is, under its own tag.
        setField(res, "ETag", try req.arena.dupe(u8, chosen.etag()));
    }
    return sendBody(req, res, chosen, 0, size);
}

/// Whether a file without a precompressed variant is compressed on the fly for this
/// request, and in which coding.
const OnTheFly = struct {
    /// The response could be encoded differently for another Accept-Encoding (it says Vary).
    eligible: bool = false,
    /// The coding to send it in; null for identity.
    coding: ?compress.Coding = null,
};

fn onTheFly(sf: *const StaticFiles, state: *const WorkerState, req: *const Request, entry: *const FileCache.Entry, relative: []const u8) OnTheFly {
    const policy = sf.options.compression orelse return .{};
    const size = entry.stat.size;
    if (policy.codings.count() == 0 or size < policy.bytes_min or size > sf.options.compress_file_bytes_max) return .{};
    // A file the worker's share of the cache cannot hold would be compressed on every
    // request, on the worker's thread: it goes out as it is. With no cache at all
    // (`compress_cache_bytes_max` 0) every request compresses, as asked.
    // The ring reserves the encoder's bound for the output, a little over the file's size.
    const ring = state.compressed.memory.len;
    var bound: u64 = 0;
    for ([_]compress.Coding{ .zstd, .br, .gzip }) |coding| bound = @max(bound, compress.Encoder.boundBytes(coding, @intCast(size)));
    if (ring > 0 and bound > ring) return .{};
    if (!policy.compressible(mime.forName(relative))) return .{};
    // A range is of the identity bytes, so its offsets mean what the client thinks.
    if (req.method == .GET and req.header("Range") != null) return .{ .eligible = true };
    var lines: [accept_encoding_lines_max][]const u8 = undefined;
    var count: usize = 0;
    for (req.headers) |field| {
        if (!std.ascii.eqlIgnoreCase(field.name, "Accept-Encoding")) continue;
        if (count == lines.len) return .{ .eligible = true };
        lines[count] = field.value;
        count += 1;
    }
    return .{ .eligible = true, .coding = compress.negotiate.choose(lines[0..count], policy.codings).codingOrIdentity() };
}

/// Most `Accept-Encoding` field lines read; a request with more gets identity.
const accept_encoding_lines_max = 16;

/// Sends the file in `coding`, from the worker's cache or compressed now (and cached). False,
/// having sent nothing, when the coding does not make it smaller or the request arena cannot
/// hold the encoder.
fn sendCompressed(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, entry: *FileCache.Entry, coding: compress.Coding) !bool {
    const policy = sf.options.compression.?;
    const key: CompressedCache.Key = .of(entry.stat, coding);
    const encoded = state.compressed.get(key) orelse encoded: {
        const size: usize = @intCast(entry.stat.size);
        assert(size <= sf.options.compress_file_bytes_max);
        const input = entry.content orelse read: {
            const buffer = try req.arena.alloc(u8, size);
            const n = fs.preadAll(entry.fd, buffer, 0) catch return error.ReadFailed;
            if (n != size) return error.ReadFailed; // the file shrank
            break :read buffer;
        };
        const bound = compress.Encoder.boundBytes(coding, size);
        const reserved = state.compressed.reserve(bound);
        const output = reserved orelse try req.arena.alloc(u8, bound);
        const bytes = compress.Encoder.compressAll(req.arena, policy.wholeOptions(coding, input.len), input, output) catch |err| switch (err) {
            error.OutOfMemory => return false,
            error.LevelOutOfRange, error.WindowOutOfRange => unreachable, // `checkOptions`
            error.NoSpaceLeft => unreachable, // `boundBytes` suffices
        };
        if (bytes.len >= size) return false;
        break :encoded if (reserved != null) state.compressed.commit(key, bytes.len) else bytes;
    };
    try res.header("Content-Encoding", coding.token());
    // The cache may overwrite its copy once the lock is released: the response owns one.
    const room = res.body_writer.buffer.len - res.body_writer.end;
    if (req.method == .HEAD or encoded.len <= room) {
        try res.writeAll(encoded);
    } else {
        res.setBody(try req.arena.dupe(u8, encoded));
    }
    return true;
}

/// Replaces the value of the first field called `name` (which must be there).
fn setField(res: *Response, name: []const u8, value: []const u8) void {
    for (res.header_list.items) |*field| if (std.ascii.eqlIgnoreCase(field.name, name)) {
        field.value = value;
        return;
    };
    unreachable;
}

/// If-Range (RFC 9110 §13.1.5): honour Range only when the validator still matches.
fn ifRangeAllows(value: ?[]const u8, tag: []const u8, mtime: i64) bool {
    const v = value orelse return true;
    if (etag.isTag(v)) return etag.strongEqual(v, tag);
    const date = http_date.parse(std.mem.trim(u8, v, " \t")) orelse return false;
    return date == mtime;
}

/// Sends `len` bytes of the entry from `offset`: copied from memory when the file is cached
/// and fits the send buffer (head and body then leave in one writev), else by sendfile.
fn sendBody(req: *Request, res: *Response, entry: *FileCache.Entry, offset: u64, len: u64) !void {
    if (len == 0) return res.setBody("");
    if (entry.content) |content| {
        const room = res.body_writer.buffer.len - res.body_writer.end;
        if (req.method == .HEAD or len <= room) {
            const start: usize = @intCast(offset);
            return res.writeAll(content[start..][0..@intCast(len)]);
        }
    }
    if (req.method == .HEAD) {
        // Only the length is used; the connection never reads the fd for HEAD.
        return res.sendFile(.{ .fd = entry.fd, .offset = offset, .len = len, .close_when_done = false });
    }
    // The response owns a duplicate: the cache may close its fd before the body is sent.
    const fd = fs.dup(entry.fd) catch return plain(res, .service_unavailable, "503 Service Unavailable: out of file descriptors\n");
    res.sendFile(.{ .fd = fd, .offset = offset, .len = len, .close_when_done = true });
}

/// The random part of a multipart boundary: 128 bits, so no file (not even one made to
/// contain earlier boundaries) holds the next one, except by a 2^-128 chance per offset.
pub const boundary_random_bytes = 16;

/// A fresh multipart/byteranges boundary, "saker-" and 32 hex digits.
fn multipartBoundary(random: *std.Random.DefaultCsprng) [6 + 2 * boundary_random_bytes]u8 {
    var bytes: [boundary_random_bytes]u8 = undefined;
    random.fill(&bytes);
    return ("saker-" ++ std.fmt.bytesToHex(bytes, .lower)).*;
}

/// A multipart/byteranges body (RFC 9110 §14.6) built in memory. Returns false, sending
/// nothing, when it would exceed `multipart_bytes_max` (the caller sends the whole file).
fn sendMultipart(sf: *StaticFiles, state: *WorkerState, req: *Request, res: *Response, entry: *FileCache.Entry, spans: []const range.Span) !bool {
    var total: u64 = 0;
    for (spans) |span| total += span.len();
    if (total > sf.options.multipart_bytes_max) return false;
    const media_type = res.content_type orelse mime.default_type;
    const boundary_bytes = multipartBoundary(&state.random);
    const boundary: []const u8 = &boundary_bytes;
    res.status = .partial_content;
    res.content_type = try std.fmt.allocPrint(req.arena, "multipart/byteranges; boundary={s}", .{boundary});
    const w = res.writer();
    for (spans) |span| {
        w.print("\r\n--{s}\r\nContent-Type: {s}\r\nContent-Range: bytes {d}-{d}/{d}\r\n\r\n", .{
            boundary, media_type, span.first, span.last, entry.stat.size,
        }) catch return res.failure orelse error.WriteFailed;
        if (entry.content) |content| {
            w.writeAll(content[@intCast(span.first)..][0..@intCast(span.len())]) catch
                return res.failure orelse error.WriteFailed;
        } else {
            const part = try req.arena.alloc(u8, @intCast(span.len()));
            const n = fs.preadAll(entry.fd, part, span.first) catch return error.ReadFailed;
            if (n != part.len) return error.ReadFailed; // the file shrank
            w.writeAll(part) catch return res.failure orelse error.WriteFailed;
        }
    }
    w.print("\r\n--{s}--\r\n", .{boundary}) catch return res.failure orelse error.WriteFailed;
    return true;
}

fn precondition(res: *Response) void {
    plain(res, .precondition_failed, "412 Precondition Failed\n");
}

fn notModified(res: *Response) void {
    res.status = .not_modified;
    res.content_type = null;
    res.setBody("");
}

fn plain(res: *Response, status: http.Status, body: []const u8) void {
    res.status = status;
    res.content_type = "text/plain; charset=utf-8";
    res.setBody(body);
}

/// Opens the directory `relative` beneath the root for a request. When it cannot be, answers
/// the request (`missing_status` and `missing_body` for one that is not there) and returns
/// null; fails only where the answer is the caller's to choose (an unexpected error).
fn openDirectory(
    sf: *const StaticFiles,
    res: *Response,
    relative: [:0]const u8,
    missing_status: http.Status,
    missing_body: []const u8,
) error{Unexpected}!?fs.fd_t {
    return fs.openBeneath(sf.root_fd, relative, .{ .directory = true }) catch |err| switch (err) {
        error.NotFound, error.OutsideRoot, error.NameTooLong => {
            plain(res, missing_status, missing_body);
            return null;
        },
        error.AccessDenied => {
            plain(res, .forbidden, "403 Forbidden\n");
            return null;
        },
        error.SystemResources => {
            plain(res, .service_unavailable, "503 Service Unavailable\n");
            return null;
        },
        error.Unsupported, error.Unexpected => error.Unexpected,
    };
}

fn serveListing(sf: *StaticFiles, req: *Request, res: *Response, relative: []const u8) !void {
    const arena = req.arena;
    const dir_path = try arena.dupeSentinel(u8, relative, 0);
    const dir = (openDirectory(sf, res, dir_path, .not_found, "404 Not Found\n") catch
        return error.ListingFailed) orelse return;
    defer fs.close(dir);
    var items: std.ArrayList(listing.Item) = .empty;
    var omitted: usize = 0;
    const buffer = try arena.alignedAlloc(u8, .@"8", 32 * 1024);
    var reader: fs.DirReader = .{ .fd = dir, .buffer = buffer };
    while (reader.next() catch |err| switch (err) {
        error.AccessDenied => return plain(res, .forbidden, "403 Forbidden\n"),
        error.SystemResources => return plain(res, .service_unavailable, "503 Service Unavailable\n"),
        error.Unexpected => return error.ListingFailed,
    }) |entry| {
        if (entry.name[0] == '.' and !sf.options.dotfiles) continue;
        if (items.items.len >= sf.options.listing_entries_max) {
            omitted += 1;
            continue;
        }
        const name = try arena.dupeSentinel(u8, entry.name, 0);
        const st = sf.listedStat(arena, dir, relative, name, entry.type) orelse continue;
        try items.append(arena, .{
            .name = name,
            .directory = st.kind == .directory,
            .size = st.size,
            .mtime_sec = st.mtime_sec,
        });
    }
    const order: listing.Order = .fromQuery(req.raw_query);
    listing.sort(items.items, order);
    res.content_type = "text/html; charset=utf-8";
    listing.write(res.writer(), .{ .relative = relative, .items = items.items, .omitted = omitted, .order = order, .upload_form = sf.options.upload }) catch
        return res.failure orelse error.WriteFailed;
}

/// The stat shown for a directory entry, or null to hide it: symlinks are shown only when
/// they resolve beneath the root, and only files and directories are shown.
fn listedStat(sf: *StaticFiles, arena: std.mem.Allocator, dir: fs.fd_t, relative: []const u8, name: [:0]const u8, d_type: u8) ?fs.Stat {
    const DT_DIR = 4;
    const DT_REG = 8;
    const st = if (d_type == DT_DIR or d_type == DT_REG)
        fs.statNoFollow(dir, name) catch return null
    else blk: {
        const path = (if (relative.len == 0)
            arena.dupeSentinel(u8, name, 0)
        else
            std.mem.concatWithSentinel(arena, u8, &.{ relative, "/", name }, 0)) catch return null;
        const fd = fs.openBeneath(sf.root_fd, path, .{ .path_only = true }) catch return null;
        defer fs.close(fd);
        break :blk fs.stat(fd) catch return null;
    };
    return if (st.kind == .other) null else st;
}

test {
    _ = fs;
    _ = url_path;
    _ = mime;
    _ = http_date;
    _ = range;
    _ = etag;
    _ = accept_encoding;
    _ = listing;
    _ = FileCache;
    _ = CompressedCache;
    _ = AccessLog;
}

test "StaticFiles.init: refuses a missing root, a file root and malformed options" {
    const gpa = std.testing.allocator;
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    try tmp.dir.writeFile(std.testing.io, .{ .sub_path = "file.txt", .data = "x" });
    const root = try tmp.dir.realPathFileAlloc(std.testing.io, ".", gpa);
    defer gpa.free(root);
    const file = try std.fmt.allocPrint(gpa, "{s}/file.txt", .{root});
    defer gpa.free(file);
    const missing = try std.fmt.allocPrint(gpa, "{s}/missing", .{root});
    defer gpa.free(missing);

    try std.testing.expectError(error.NotFound, init(gpa, .{ .root = missing }));
    try std.testing.expectError(error.NotDirectory, init(gpa, .{ .root = file }));
    for ([_][]const u8{ "", ".", "..", "a/b", "a\\b" }) |index|
        try std.testing.expectError(error.InvalidIndex, init(gpa, .{ .root = root, .index = index }));
    try std.testing.expectError(error.InvalidFallback, init(gpa, .{ .root = root, .spa_fallback = "../x" }));
    try std.testing.expectError(error.InvalidFallback, init(gpa, .{ .root = root, .spa_fallback = "/" }));
    try std.testing.expectError(error.InvalidCacheControl, init(gpa, .{ .root = root, .cache_control = "a\r\nb" }));
    for ([_][]const u8{ "", "example.com", "https://", "https://a.example/path", "https://a b", "https://a\r\n", "*, https://a.example", "://a" }) |origin| {
        try std.testing.expectError(error.InvalidCorsOrigin, init(gpa, .{ .root = root, .cors_origin = origin }));
    }
    try tmp.dir.createDirPath(std.testing.io, "app");
    try tmp.dir.writeFile(std.testing.io, .{ .sub_path = "index.html", .data = "<p>app</p>" });
    try tmp.dir.symLink(std.testing.io, "../outside.html", "escape.html", .{});
    for ([_][]const u8{ "nope.html", "app", "app/", "escape.html", "file.txt/x" }) |fallback|
        try std.testing.expectError(error.FallbackNotFound, init(gpa, .{ .root = root, .spa_fallback = fallback }));

    var files = try init(gpa, .{ .root = root, .workers = 3, .spa_fallback = "./app/../index.html" });
    defer files.deinit();
    try std.testing.expectEqualStrings("index.html", files.spa_relative.?);
    try std.testing.expectEqual(@as(usize, 3), files.states.len);
}

test "multipartBoundary: a fresh 128-bit boundary each time" {
    var seed: [std.Random.DefaultCsprng.secret_seed_length]u8 = undefined;
    try fs.randomBytes(&seed);
    var random: std.Random.DefaultCsprng = .init(seed);
    var seen: [64][38]u8 = undefined;
    for (&seen, 0..) |*boundary, i| {
        boundary.* = multipartBoundary(&random);
        try std.testing.expect(std.mem.startsWith(u8, boundary, "saker-"));
        for (boundary[6..]) |c| try std.testing.expect(std.ascii.isDigit(c) or (c >= 'a' and c <= 'f'));
        for (seen[0..i]) |earlier| try std.testing.expect(!std.mem.eql(u8, &earlier, boundary));
    }
}

test "uploadName: one plain segment, the last of a sent path" {
    try std.testing.expectEqualStrings("a.txt", uploadName("a.txt", false).?);
    try std.testing.expectEqualStrings("b.txt", uploadName("C:\\Users\\me\\b.txt", false).?);
    try std.testing.expectEqualStrings("c.txt", uploadName("../../c.txt", false).?);
    try std.testing.expectEqualStrings(".env", uploadName(".env", true).?);
    for ([_][]const u8{ "", ".", "..", "dir/", ".env", "a\x00b", "new\nline" }) |bad| {
        try std.testing.expectEqual(@as(?[]const u8, null), uploadName(bad, false));
    }
}
