//! The `Date` header line (RFC 9110 §6.6.1, IMF-fixdate), rebuilt at most once a second.
//! Each worker thread owns one and updates it; handler pool threads may read it while the
//! engine rebuilds it, so it is double-buffered: a new line is written into the spare buffer
//! and then published with one atomic store.
const std = @import("std");
const assert = std.debug.assert;

const DateCache = @This();

/// Two "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" lines: the published one and the spare.
buffers: [2][line_len]u8 = undefined,
/// Which buffer is published.
published: std.atomic.Value(u8) = .init(0),
/// The second `line_buffer` describes, or -1 before the first update.
second: i64 = -1,

/// Length of the header line, CRLF included.
pub const line_len = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n".len;

const day_names = [7]*const [3]u8{ "Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed" };
const month_names = [12]*const [3]u8{
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};

/// Rebuilds the line if `unix_seconds` is a new second. Asserts the time is after 1970.
pub fn update(cache: *DateCache, unix_seconds: i64) void {
    assert(unix_seconds >= 0);
    if (unix_seconds == cache.second) return;
    cache.second = unix_seconds;
    const spare = 1 - cache.published.load(.monotonic);
    _ = format(&cache.buffers[spare], "Date: ", unix_seconds);
    @memcpy(cache.buffers[spare][line_len - 2 ..], "\r\n");
    cache.published.store(spare, .release);
}

/// The current header line. Asserts `update` was called.
pub fn line(cache: *const DateCache) []const u8 {
    return &cache.buffers[cache.published.load(.acquire)];
}

/// Writes `prefix` and the IMF-fixdate for `unix_seconds` into `buffer`; returns the bytes.
pub fn format(buffer: []u8, prefix: []const u8, unix_seconds: i64) []u8 {
    const epoch_seconds: std.time.epoch.EpochSeconds = .{ .secs = @intCast(unix_seconds) };
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
    }) catch unreachable; // buffer sized by callers for the fixed-length format
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
