//! An access log in the combined log format (the Common Log Format plus referer and user
//! agent), buffered per worker: appending a line is a copy into that worker's buffer, and the
//! buffer reaches the file descriptor in one `write` when it is full, on the handler's tick
//! (at least every `Worker.tick_interval_ms`) and at shutdown — never a syscall per request.
//! Each write holds whole lines, so workers' lines never interleave within a line. Quotes,
//! backslashes and bytes outside printable ASCII in logged fields are escaped (`\"`, `\\`,
//! `\xHH`), so a client cannot forge log lines.
const std = @import("std");
const linux = std.os.linux;
const Request = @import("../Request.zig");

const AccessLog = @This();

/// Longest line written; longer fields are cut to fit.
pub const line_bytes_max = 4096;

/// Where lines go (stdout or an append-only file); not owned.
fd: linux.fd_t,
/// One buffer per worker.
buffers: []Buffer,
memory: []u8,
/// Lines lost because a write failed (a metric).
dropped_lines: std.atomic.Value(u64) = .init(0),

const Buffer = struct {
    bytes: []u8,
    len: usize = 0,
    lines: u64 = 0,
    /// When the buffer was last written out (monotonic ms; 0 before the first time).
    flushed_ms: u64 = 0,
    /// "[10/Oct/2000:13:55:36 +0000]" for `second`.
    date: [28]u8 = undefined,
    second: i64 = -1,
};

/// A log writing to `fd` with `buffer_bytes` of buffer for each of `workers` workers.
pub fn init(gpa: std.mem.Allocator, fd: linux.fd_t, workers: u32, buffer_bytes: u32) error{OutOfMemory}!AccessLog {
    const size = @max(buffer_bytes, line_bytes_max);
    const memory = try gpa.alloc(u8, @as(usize, workers) * size);
    errdefer gpa.free(memory);
    const buffers = try gpa.alloc(Buffer, workers);
    for (buffers, 0..) |*buffer, i| buffer.* = .{ .bytes = memory[i * size ..][0..size] };
    return .{ .fd = fd, .buffers = buffers, .memory = memory };
}

/// Frees the buffers (flush them first).
pub fn deinit(log: *AccessLog, gpa: std.mem.Allocator) void {
    gpa.free(log.buffers);
    gpa.free(log.memory);
    log.* = undefined;
}

/// What a line records besides the request.
pub const Entry = struct {
    status: u16,
    /// Body bytes sent; null for none (logged as "-").
    body_bytes: ?u64,
    /// Seconds since the epoch.
    unix_seconds: i64,
};

/// Appends the line for `req` to the worker's buffer, writing the buffer out first when the
/// line does not fit. Only the worker's own thread may call it.
pub fn append(log: *AccessLog, worker_index: u32, req: *const Request, entry: Entry) void {
    const buffer = &log.buffers[worker_index];
    var line_buffer: [line_bytes_max]u8 = undefined;
    var w: std.Io.Writer = .fixed(&line_buffer);
    formatLine(&w, buffer, req, entry) catch {
        // Cut: end the line where it was cut.
        w.end = line_buffer.len - 1;
    };
    w.buffer[w.end] = '\n';
    const line = line_buffer[0 .. w.end + 1];
    if (buffer.bytes.len - buffer.len < line.len) log.flushBuffer(buffer);
    @memcpy(buffer.bytes[buffer.len..][0..line.len], line);
    buffer.len += line.len;
    buffer.lines += 1;
}

/// Writes out the worker's buffered lines. Only the worker's own thread may call it (or any
/// thread once the workers have stopped).
pub fn flush(log: *AccessLog, worker_index: u32) void {
    log.flushBuffer(&log.buffers[worker_index]);
}

/// Writes out the worker's lines if the last write was `age_ms` or more before `now_ms`.
pub fn flushIfOlder(log: *AccessLog, worker_index: u32, now_ms: u64, age_ms: u64) void {
    const buffer = &log.buffers[worker_index];
    if (buffer.len == 0) return;
    if (buffer.flushed_ms == 0) buffer.flushed_ms = now_ms;
    if (now_ms -| buffer.flushed_ms < age_ms) return;
    log.flushBuffer(buffer);
    buffer.flushed_ms = now_ms;
}

fn flushBuffer(log: *AccessLog, buffer: *Buffer) void {
    var done: usize = 0;
    while (done < buffer.len) {
        const rc = linux.write(log.fd, buffer.bytes[done..].ptr, buffer.len - done);
        switch (linux.errno(rc)) {
            .SUCCESS => done += rc,
            .INTR => continue,
            // A full pipe, a closed reader, a full disk: drop rather than stall serving.
            else => {
                _ = log.dropped_lines.fetchAdd(buffer.lines, .monotonic);
                break;
            },
        }
    }
    buffer.len = 0;
    buffer.lines = 0;
}

fn formatLine(w: *std.Io.Writer, buffer: *Buffer, req: *const Request, entry: Entry) std.Io.Writer.Error!void {
    if (req.peer) |peer| switch (peer) {
        .ip4 => |ip4| try w.print("{d}.{d}.{d}.{d}", .{ ip4.bytes[0], ip4.bytes[1], ip4.bytes[2], ip4.bytes[3] }),
        .ip6 => |ip6| try w.print("{f}", .{std.Io.net.Ip6Address.Unresolved{ .bytes = ip6.bytes, .interface_name = null }}),
    } else try w.writeByte('-');
    if (buffer.second != entry.unix_seconds) {
        buffer.second = entry.unix_seconds;
        formatDate(&buffer.date, entry.unix_seconds);
    }
    try w.print(" - - {s} \"", .{&buffer.date});
    try writeEscaped(w, req.method.name());
    try w.writeByte(' ');
    try writeEscaped(w, req.target);
    try w.print(" {s}\" {d} ", .{ req.version.text(), entry.status });
    if (entry.body_bytes) |n| try w.print("{d}", .{n}) else try w.writeByte('-');
    inline for (.{ "Referer", "User-Agent" }) |name| {
        try w.writeAll(" \"");
        if (req.header(name)) |value| try writeEscaped(w, value) else try w.writeByte('-');
        try w.writeByte('"');
    }
}

fn writeEscaped(w: *std.Io.Writer, text: []const u8) std.Io.Writer.Error!void {
    var start: usize = 0;
    for (text, 0..) |c, i| {
        if (c >= 0x20 and c < 0x7f and c != '"' and c != '\\') continue;
        try w.writeAll(text[start..i]);
        switch (c) {
            '"', '\\' => try w.writeAll(&.{ '\\', c }),
            else => try w.print("\\x{x:0>2}", .{c}),
        }
        start = i + 1;
    }
    try w.writeAll(text[start..]);
}

const month_names = [12]*const [3]u8{
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};

/// "[10/Oct/2000:13:55:36 +0000]"
fn formatDate(out: *[28]u8, unix_seconds: i64) void {
    // The clock's time: a four-digit year until 9999 (clamped there rather than trusted).
    const epoch_seconds: std.time.epoch.EpochSeconds = .{ .secs = @intCast(std.math.clamp(unix_seconds, 0, 253402300799)) };
    const year_day = epoch_seconds.getEpochDay().calculateYearDay();
    const month_day = year_day.calculateMonthDay();
    const day_seconds = epoch_seconds.getDaySeconds();
    _ = std.mem.print(out, "[{d:0>2}/{s}/{d:0>4}:{d:0>2}:{d:0>2}:{d:0>2} +0000]", .{
        month_day.day_index + 1,
        month_names[@backingInt(month_day.month) - 1],
        year_day.year,
        day_seconds.getHoursIntoDay(),
        day_seconds.getMinutesIntoHour(),
        day_seconds.getSecondsIntoMinute(),
    }) catch unreachable;
}

fn testRequest(target: []const u8, headers: []const @import("../http.zig").Header, peer: ?std.Io.net.IpAddress) Request {
    return .{
        .method = .GET,
        .target = target,
        .path = target,
        .raw_query = "",
        .version = .http11,
        .headers = headers,
        .host = "t",
        .keep_alive = true,
        .upgrade = null,
        .connection_upgrade = false,
        .content_length = null,
        .chunked = false,
        .body_bytes = "",
        .arena = std.testing.allocator,
        .peer = peer,
    };
}

test "AccessLog: combined format, escaping, buffered until flushed" {
    const gpa = std.testing.allocator;
    var fds: [2]linux.fd_t = undefined;
    try std.testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.pipe2(&fds, .{ .CLOEXEC = true, .NONBLOCK = true })));
    defer for (fds) |fd| {
        _ = linux.close(fd);
    };
    var log: AccessLog = try .init(gpa, fds[1], 2, 8192);
    defer log.deinit(gpa);

    const headers = [_]@import("../http.zig").Header{
        .{ .name = "User-Agent", .value = "curl/8 \"evil\"\x01" },
        .{ .name = "Referer", .value = "http://r/" },
    };
    const peer: std.Io.net.IpAddress = .{ .ip4 = .{ .bytes = .{ 192, 0, 2, 7 }, .port = 5000 } };
    var req = testRequest("/a%20b?q=1", &headers, peer);
    log.append(1, &req, .{ .status = 200, .body_bytes = 1234, .unix_seconds = 784111777 });
    req = testRequest("/x", &.{}, null);
    log.append(1, &req, .{ .status = 304, .body_bytes = null, .unix_seconds = 784111777 });

    var out: [512]u8 = undefined;
    try std.testing.expectEqual(linux.E.AGAIN, linux.errno(linux.read(fds[0], &out, out.len)));
    log.flush(1);
    const n = linux.read(fds[0], &out, out.len);
    try std.testing.expectEqualStrings(
        "192.0.2.7 - - [06/Nov/1994:08:49:37 +0000] \"GET /a%20b?q=1 HTTP/1.1\" 200 1234 \"http://r/\" \"curl/8 \\\"evil\\\"\\x01\"\n" ++
            "- - - [06/Nov/1994:08:49:37 +0000] \"GET /x HTTP/1.1\" 304 - \"-\" \"-\"\n",
        out[0..n],
    );
}
