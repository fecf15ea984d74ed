//! An access log in the combined log format (the Common Log Format plus referer and user
//! agent), or as JSON lines (`Format.json`), buffered per worker: appending a line is a copy into that worker's buffer, and the
//! buffer reaches the file descriptor in one `write` when it is full, on the handler's tick
//! (at least every `Worker.tick_interval_ms`) and at shutdown — never a syscall per request.
//! Each write holds whole lines, so workers' lines never interleave within a line. Quotes,
//! backslashes and bytes outside printable ASCII in logged fields are escaped (`\"`, `\\`,
//! `\xHH`), so a client cannot forge log lines.
const std = @import("std");
const linux = std.os.linux;
const Request = @import("../Request.zig");
const Done = @import("../Done.zig");
const http = @import("../http.zig");

const AccessLog = @This();

/// Longest line written; longer fields are cut to fit.
pub const line_bytes_max = 4096;

/// Where lines go (stdout or an append-only file); not owned.
fd: linux.fd_t,
format: Format = .combined,
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

/// How lines are written.
pub const Format = enum {
    /// `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 12 "-" "curl/7.88.1"`
    combined,
    /// One JSON object per line: `time` (ISO 8601, UTC, microseconds), `remote`, `method`,
    /// `target` (both null, and `request_line` holds the client's first line, for a request
    /// the server refused before its head was whole), `protocol`, `status`, `bytes` (body
    /// bytes actually sent), `complete` (false: the connection ended before the whole response
    /// was sent), `duration_us` (from the head's arrival to the response's end, with
    /// `Config.fine_durations`), `user_agent`, `referer`, `request_id` (null when absent).
    /// Strings are escaped so every line is valid JSON, in ASCII.
    json,

    pub fn parse(text: []const u8) ?Format {
        return std.meta.stringToEnum(Format, text);
    }
};

/// A line of the JSON format, as `std.json` reads it back (a line written again for being too
/// long also has `"cut":true`).
pub const JsonLine = struct {
    time: []const u8,
    remote: ?[]const u8,
    /// Null, with `request_line` instead, for a request refused before its head was whole.
    method: ?[]const u8,
    target: ?[]const u8,
    request_line: ?[]const u8 = null,
    protocol: []const u8,
    status: u16,
    bytes: u64,
    complete: bool,
    duration_us: ?u64,
    user_agent: ?[]const u8,
    referer: ?[]const u8,
    request_id: ?[]const u8,
    cut: bool = false,
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

/// When a line's exchange ended.
pub const Time = struct {
    /// Seconds since the epoch.
    unix_seconds: i64,
    /// Microseconds since the epoch (the JSON format's time); 0: `unix_seconds` alone.
    unix_microseconds: i64 = 0,
};

/// Appends the line for the exchange `done` describes to the worker's buffer, writing the
/// buffer out first when the line does not fit. Only the worker's own thread may call it.
pub fn append(log: *AccessLog, worker_index: u32, done: *const Done, time: Time) void {
    const buffer = &log.buffers[worker_index];
    var line_buffer: [line_bytes_max]u8 = undefined;
    var w: std.Io.Writer = .fixed(&line_buffer);
    const formatted = switch (log.format) {
        .combined => formatLine(&w, buffer, done, time),
        .json => formatJson(&w, done, time, false),
    };
    formatted catch switch (log.format) {
        // Cut: end the line where it was cut.
        .combined => w.end = line_buffer.len - 1,
        // A cut object is no JSON: write it again with its strings shortened (and say so).
        .json => {
            w.end = 0;
            formatJson(&w, done, time, true) catch unreachable; // fits: see `cut_string_bytes`
        },
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

fn formatLine(w: *std.Io.Writer, buffer: *Buffer, done: *const Done, time: Time) std.Io.Writer.Error!void {
    if (done.peer) |peer| switch (peer) {
        .ip4 => |ip4| try w.print("{d}.{d}.{d}.{d}", .{ ip4.bytes[0], ip4.bytes[1], ip4.bytes[2], ip4.bytes[3] }),
        .ip6 => |ip6| try w.print("{f}", .{std.Io.net.Ip6Address.Unresolved{ .bytes = ip6.bytes, .interface_name = null }}),
    } else try w.writeByte('-');
    if (buffer.second != time.unix_seconds) {
        buffer.second = time.unix_seconds;
        formatDate(&buffer.date, time.unix_seconds);
    }
    try w.print(" - - {s} \"", .{&buffer.date});
    if (done.request) |req| {
        try writeEscaped(w, req.method.name());
        try w.writeByte(' ');
        try writeEscaped(w, req.target);
        try w.print(" {s}", .{req.version.text()});
    } else {
        // The head never came whole: what the client sent as its first line, as it was.
        try writeEscaped(w, done.request_line);
    }
    try w.print("\" {d} {d}", .{ done.status.code(), done.body_bytes_sent });
    inline for (.{ "Referer", "User-Agent" }) |name| {
        try w.writeAll(" \"");
        const value = if (done.request) |req| req.header(name) else null;
        if (value) |v| try writeEscaped(w, v) else try w.writeByte('-');
        try w.writeByte('"');
    }
}

/// The raw bytes each string keeps in a JSON line written again for being too long: four
/// strings of at most 6 escaped bytes per byte, a request id of at most 128 bytes, and the
/// fixed fields stay well within `line_bytes_max`.
const cut_string_bytes = 128;

fn formatJson(w: *std.Io.Writer, done: *const Done, time: Time, cut: bool) std.Io.Writer.Error!void {
    const micros: i64 = if (time.unix_microseconds != 0) time.unix_microseconds else time.unix_seconds * std.time.us_per_s;
    const epoch_seconds: std.time.epoch.EpochSeconds = .{ .secs = @intCast(std.math.clamp(@divFloor(micros, std.time.us_per_s), 0, 253402300799)) };
    const year_day = epoch_seconds.getEpochDay().calculateYearDay();
    const month_day = year_day.calculateMonthDay();
    const day_seconds = epoch_seconds.getDaySeconds();
    try w.print("{{\"time\":\"{d:0>4}-{d:0>2}-{d:0>2}T{d:0>2}:{d:0>2}:{d:0>2}.{d:0>6}Z\",\"remote\":", .{
        year_day.year,                                       @backingInt(month_day.month),     month_day.day_index + 1,
        day_seconds.getHoursIntoDay(),                       day_seconds.getMinutesIntoHour(), day_seconds.getSecondsIntoMinute(),
        @as(u64, @intCast(@mod(micros, std.time.us_per_s))),
    });
    if (done.peer) |peer| switch (peer) {
        .ip4 => |ip4| try w.print("\"{d}.{d}.{d}.{d}\"", .{ ip4.bytes[0], ip4.bytes[1], ip4.bytes[2], ip4.bytes[3] }),
        .ip6 => |ip6| try w.print("\"{f}\"", .{std.Io.net.Ip6Address.Unresolved{ .bytes = ip6.bytes, .interface_name = null }}),
    } else try w.writeAll("null");
    const req = done.request;
    try w.writeAll(",\"method\":");
    if (req) |r| try writeJsonString(w, r.method.name(), cut) else try w.writeAll("null");
    try w.writeAll(",\"target\":");
    if (req) |r| try writeJsonString(w, r.target, cut) else try w.writeAll("null");
    if (req == null) {
        try w.writeAll(",\"request_line\":");
        try writeJsonString(w, done.request_line, cut);
    }
    const version = if (req) |r| r.version else done.version;
    try w.print(",\"protocol\":\"{s}\",\"status\":{d},\"bytes\":{d},\"complete\":{},\"duration_us\":", .{
        version.text(), done.status.code(), done.body_bytes_sent, done.complete,
    });
    if (done.duration_us) |us| try w.print("{d}", .{us}) else try w.writeAll("null");
    inline for (.{ .{ "user_agent", "User-Agent" }, .{ "referer", "Referer" } }) |field| {
        try w.writeAll(",\"" ++ field[0] ++ "\":");
        const value = if (req) |r| r.header(field[1]) else null;
        if (value) |v| try writeJsonString(w, v, cut) else try w.writeAll("null");
    }
    try w.writeAll(",\"request_id\":");
    const id = if (req) |r| r.request_id else null;
    if (id) |text| try writeJsonString(w, text, cut) else try w.writeAll("null");
    if (cut) try w.writeAll(",\"cut\":true");
    try w.writeByte('}');
}

/// A JSON string of `text`: quotes, backslashes, control bytes and every byte above 0x7E
/// escaped (`\u00XX`, each byte as its own code point), so the line stays valid JSON whatever
/// bytes a client sent.
fn writeJsonString(w: *std.Io.Writer, text: []const u8, cut: bool) std.Io.Writer.Error!void {
    try w.writeByte('"');
    try writeEscapedAs(w, if (cut) text[0..@min(text.len, cut_string_bytes)] else text, .json);
    try w.writeByte('"');
}

fn writeEscaped(w: *std.Io.Writer, text: []const u8) std.Io.Writer.Error!void {
    return writeEscapedAs(w, text, .combined);
}

/// `text` with quotes and backslashes escaped by a backslash, and control bytes and bytes
/// above 0x7E as `\xHH` (combined) or `\u00HH` (JSON).
fn writeEscapedAs(w: *std.Io.Writer, text: []const u8, comptime format: Format) std.Io.Writer.Error!void {
    var start: usize = 0;
    for (text, 0..) |c, i| {
        if (c >= 0x20 and c < 0x7f and c != '"' and c != '\\') continue;
        try w.writeAll(text[start..i]);
        switch (c) {
            '"', '\\' => try w.writeAll(&.{ '\\', c }),
            else => switch (format) {
                .combined => try w.print("\\x{x:0>2}", .{c}),
                .json => try w.print("\\u{x:0>4}", .{c}),
            },
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

fn testDone(req: ?*const Request, status: http.Status, bytes: u64) Done {
    return .{
        .request = req,
        .peer = if (req) |r| r.peer else null,
        .worker_index = 0,
        .version = .http11,
        .status = status,
        .body_bytes_sent = bytes,
        .complete = true,
        .core_response = false,
    };
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

test "AccessLog: JSON lines parse, with every field, and hostile bytes escaped" {
    const gpa = std.testing.allocator;
    var fds: [2]linux.fd_t = undefined;
    try std.testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.pipe2(&fds, .{ .CLOEXEC = true, .NONBLOCK = true })));
    defer for (fds) |fd| {
        _ = linux.close(fd);
    };
    var log: AccessLog = try .init(gpa, fds[1], 1, 8192);
    defer log.deinit(gpa);
    log.format = .json;
    const headers = [_]@import("../http.zig").Header{
        .{ .name = "User-Agent", .value = "evil\"agent\\\n\xff" },
    };
    var req = testRequest("/a?\"b\"", &headers, .{ .ip4 = .{ .bytes = .{ 192, 0, 2, 9 }, .port = 1 } });
    req.request_id = "id-7";
    var done = testDone(&req, .ok, 12);
    done.duration_us = 42;
    log.append(0, &done, .{ .unix_seconds = 0, .unix_microseconds = 1_795_683_218_123_456 });
    req.request_id = null;
    done = testDone(&req, .not_modified, 0);
    done.complete = false;
    log.append(0, &done, .{ .unix_seconds = 1_795_683_219 });
    // A request refused before its head was whole: its first line stands in for it.
    done = testDone(null, .bad_request, 61);
    done.request_line = "GET /\"x\" HTTP/9";
    done.core_response = true;
    log.append(0, &done, .{ .unix_seconds = 1_795_683_219 });
    log.flush(0);
    var buffer: [4096]u8 = undefined;
    const n = linux.read(fds[0], &buffer, buffer.len);
    var lines = std.mem.splitScalar(u8, buffer[0..n], '\n');
    const first = try std.json.parseFromSlice(JsonLine, gpa, lines.next().?, .{});
    defer first.deinit();
    try std.testing.expectEqualStrings("2026-11-26T08:53:38.123456Z", first.value.time);
    try std.testing.expectEqualStrings("192.0.2.9", first.value.remote.?);
    try std.testing.expectEqualStrings("/a?\"b\"", first.value.target.?);
    try std.testing.expectEqualStrings("GET", first.value.method.?);
    try std.testing.expect(first.value.complete);
    try std.testing.expectEqualStrings("evil\"agent\\\n\u{ff}", first.value.user_agent.?);
    try std.testing.expectEqual(@as(u64, 12), first.value.bytes);
    try std.testing.expectEqual(@as(?u64, 42), first.value.duration_us);
    try std.testing.expectEqual(@as(?[]const u8, null), first.value.referer);
    try std.testing.expectEqualStrings("id-7", first.value.request_id.?);
    const second = try std.json.parseFromSlice(JsonLine, gpa, lines.next().?, .{});
    defer second.deinit();
    try std.testing.expectEqualStrings("2026-11-26T08:53:39.000000Z", second.value.time);
    try std.testing.expectEqual(@as(u16, 304), second.value.status);
    try std.testing.expectEqual(@as(u64, 0), second.value.bytes);
    try std.testing.expect(!second.value.complete);
    try std.testing.expectEqual(@as(?[]const u8, null), second.value.request_id);
    const third = try std.json.parseFromSlice(JsonLine, gpa, lines.next().?, .{});
    defer third.deinit();
    try std.testing.expectEqual(@as(u16, 400), third.value.status);
    try std.testing.expectEqual(@as(?[]const u8, null), third.value.method);
    try std.testing.expectEqual(@as(?[]const u8, null), third.value.target);
    try std.testing.expectEqualStrings("GET /\"x\" HTTP/9", third.value.request_line.?);
    try std.testing.expectEqual(@as(u64, 61), third.value.bytes);
    try std.testing.expectEqualStrings("", lines.next().?);

    // A line too long for `line_bytes_max` is written again with its strings cut: still JSON.
    const long: [9000]u8 = @splat('"');
    const long_request = testRequest(&long, &headers, null);
    done = testDone(&long_request, .uri_too_long, 0);
    log.append(0, &done, .{ .unix_seconds = 1_795_683_219 });
    log.flush(0);
    const m = linux.read(fds[0], &buffer, buffer.len);
    const cut = try std.json.parseFromSlice(JsonLine, gpa, std.mem.trimEnd(u8, buffer[0..m], "\n"), .{});
    defer cut.deinit();
    try std.testing.expectEqual(@as(usize, cut_string_bytes), cut.value.target.?.len);
    try std.testing.expect(cut.value.cut);
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
    var done = testDone(&req, .ok, 1234);
    log.append(1, &done, .{ .unix_seconds = 784111777 });
    req = testRequest("/x", &.{}, null);
    done = testDone(&req, .not_modified, 0);
    log.append(1, &done, .{ .unix_seconds = 784111777 });
    done = testDone(null, .request_timeout, 0);
    done.request_line = "GET /slow\x00";
    log.append(1, &done, .{ .unix_seconds = 784111777 });

    var out: [512]u8 = undefined;
    try std.testing.expectEqual(linux.E.AGAIN, linux.errno(linux.read(fds[0], &out, out.len)));
    log.flush(1);
    const n = linux.read(fds[0], &out, out.len);
    try std.testing.expectEqualStrings(
        "192.0.2.7 - - [06/Nov/1994:08:49:37 +0000] \"GET /a%20b?q=1 HTTP/1.1\" 200 1234 \"http://r/\" \"curl/8 \\\"evil\\\"\\x01\"\n" ++
            "- - - [06/Nov/1994:08:49:37 +0000] \"GET /x HTTP/1.1\" 304 0 \"-\" \"-\"\n" ++
            "- - - [06/Nov/1994:08:49:37 +0000] \"GET /slow\\x00\" 408 0 \"-\" \"-\"\n",
        out[0..n],
    );
}
