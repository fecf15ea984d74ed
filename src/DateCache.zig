//! The `Date` header line (RFC 9110 §6.6.1, IMF-fixdate), rebuilt at most once a second.
//! Each worker thread owns one and updates it; handler pool threads may read it while the
//! engine rebuilds it, so it is double-buffered: a new line is written into the spare buffer
//! and then published with one atomic store.
const std = @import("std");
const assert = std.debug.assert;

const DateCache = @This();

/// Two "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" lines: the published one and the spare.
buffers: [2]Buffer = undefined,
/// Which buffer is published.
published: std.atomic.Value(u8) = .init(0),
/// The second the published line was built for; null before the first update.
second: ?i64 = null,

/// One line, on a cache line of its own: copying it never loads across a line boundary.
const Buffer = struct { bytes: [line_len]u8 align(64) };

/// Length of the header line, CRLF included.
pub const line_len = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n".len;

comptime {
    // Response heads copy the line with a fixed-size copy of this length.
    assert(line_len == @import("http1/ResponseHead.zig").date_line_len);
}

const day_names = [7]*const [3]u8{ "Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed" };
const month_names = [12]*const [3]u8{
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};

/// Rebuilds the line if `unix_seconds` is a new second. A wall clock outside 1970..9999 (set
/// wrong, or by an attacker with access to NTP) gives the nearest representable date.
pub fn update(cache: *DateCache, unix_seconds: i64) void {
    if (unix_seconds == cache.second) return;
    cache.second = unix_seconds;
    const spare = 1 - cache.published.load(.monotonic);
    _ = format(&cache.buffers[spare].bytes, "Date: ", unix_seconds);
    @memcpy(cache.buffers[spare].bytes[line_len - 2 ..], "\r\n");
    cache.published.store(spare, .release);
}

/// The current header line. Asserts `update` was called.
pub fn line(cache: *const DateCache) []const u8 {
    return &cache.buffers[cache.published.load(.acquire)].bytes;
}

/// First second an IMF-fixdate can show (1970-01-01T00:00:00Z, the Unix epoch).
pub const seconds_min: i64 = 0;
/// Last second with a four-digit year (9999-12-31T23:59:59Z).
pub const seconds_max: i64 = 253402300799;

/// Length of an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT").
pub const imf_fixdate_len = "Sun, 06 Nov 1994 08:49:37 GMT".len;

/// Writes `prefix` and the IMF-fixdate for `unix_seconds` into `buffer`; returns the bytes.
/// Times outside `seconds_min..seconds_max` are clamped to it, so the date always has its
/// fixed length. Asserts `buffer` holds `prefix.len + imf_fixdate_len` bytes.
pub fn format(buffer: []u8, prefix: []const u8, unix_seconds: i64) []u8 {
    assert(buffer.len >= prefix.len + imf_fixdate_len);
    const clamped = std.math.clamp(unix_seconds, seconds_min, seconds_max);
    const epoch_seconds: std.time.epoch.EpochSeconds = .{ .secs = @intCast(clamped) };
    const epoch_day = epoch_seconds.getEpochDay();
    const year_day = epoch_day.calculateYearDay();
    const month_day = year_day.calculateMonthDay();
    const day_seconds = epoch_seconds.getDaySeconds();
    const weekday = day_names[@intCast(@mod(epoch_day.day, 7))];
    return std.mem.print(buffer, "{s}{s}, {d:0>2} {s} {d:0>4} {d:0>2}:{d:0>2}:{d:0>2} GMT", .{
        prefix,
        weekday,
        month_day.day_index + 1,
        month_names[@backingInt(month_day.month) - 1],
        year_day.year,
        day_seconds.getHoursIntoDay(),
        day_seconds.getMinutesIntoHour(),
        day_seconds.getSecondsIntoMinute(),
    }) catch unreachable; // the clamped date has a fixed length, and the buffer holds it
}

test "DateCache: RFC 9110 example date" {
    var cache: DateCache = .{};
    cache.update(784111777);
    try std.testing.expectEqualStrings("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n", cache.line());
    cache.update(0);
    try std.testing.expectEqualStrings("Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n", cache.line());
    cache.update(1795317694); // 2026-11-22
    try std.testing.expectEqualStrings("Date: Sun, 22 Nov 2026 03:21:34 GMT\r\n", cache.line());
}

test "DateCache: a wall clock before 1970 or after 9999 is clamped, not a crash" {
    var cache: DateCache = .{};
    cache.update(-1);
    try std.testing.expectEqualStrings("Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n", cache.line());
    cache.update(std.math.minInt(i64));
    try std.testing.expectEqualStrings("Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n", cache.line());
    cache.update(seconds_max);
    try std.testing.expectEqualStrings("Date: Fri, 31 Dec 9999 23:59:59 GMT\r\n", cache.line());
    cache.update(seconds_max + 1);
    try std.testing.expectEqualStrings("Date: Fri, 31 Dec 9999 23:59:59 GMT\r\n", cache.line());
    cache.update(std.math.maxInt(i64));
    try std.testing.expectEqualStrings("Date: Fri, 31 Dec 9999 23:59:59 GMT\r\n", cache.line());
    var buffer: [imf_fixdate_len]u8 = undefined;
    try std.testing.expectEqualStrings("Fri, 31 Dec 9999 23:59:59 GMT", format(&buffer, "", 1 << 40));
}
