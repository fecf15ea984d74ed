//! HTTP dates (RFC 9110 §5.6.7): parsing all three formats a recipient must accept —
//! IMF-fixdate, the obsolete RFC 850 form and asctime — and formatting IMF-fixdate (the only
//! one a sender may produce) through `DateCache.format`. Parsing is strict: a date that does
//! not fit a format exactly is no date, and conditional requests then ignore it (§13.1.3).
const std = @import("std");
const DateCache = @import("../../DateCache.zig");

/// Length of an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT").
pub const imf_fixdate_len = 29;

/// Last second with a four-digit year (9999-12-31T23:59:59Z).
const seconds_max: i64 = 253402300799;

/// Writes the IMF-fixdate of `unix_seconds` into `buffer`, clamped to 1970..9999 (file times
/// outside it exist: `touch -d` sets any).
pub fn format(buffer: *[imf_fixdate_len]u8, unix_seconds: i64) void {
    _ = DateCache.format(buffer, "", std.math.clamp(unix_seconds, 0, seconds_max));
}

const month_names = [12]*const [3]u8{
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};
const day_names = [7]*const [3]u8{ "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
const long_day_names = [7][]const u8{ "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday" };

/// Parses an HTTP date into seconds since the Unix epoch; null when it is not one.
pub fn parse(text: []const u8) ?i64 {
    if (text.len == imf_fixdate_len and text[3] == ',') return parseImfFixdate(text);
    if (text.len == 24 and text[3] == ' ') return parseAsctime(text);
    if (std.mem.findScalar(u8, text, ',')) |comma| return parseRfc850(text, comma);
    return null;
}

/// "Sun, 06 Nov 1994 08:49:37 GMT"
fn parseImfFixdate(text: []const u8) ?i64 {
    if (!isDayName(text[0..3])) return null;
    if (!std.mem.eql(u8, text[4..5], " ") or text[7] != ' ' or text[11] != ' ' or text[16] != ' ') return null;
    if (!std.mem.eql(u8, text[25..], " GMT")) return null;
    const day = digits(text[5..7]) orelse return null;
    const month = monthIndex(text[8..11]) orelse return null;
    const year = digits(text[12..16]) orelse return null;
    const seconds = timeOfDay(text[17..25]) orelse return null;
    return combine(year, month, day, seconds);
}

/// "Sunday, 06-Nov-94 08:49:37 GMT": two-digit years are taken as 1970-2069 (§5.6.7 asks to
/// read a year more than 50 years ahead as the past).
fn parseRfc850(text: []const u8, comma: usize) ?i64 {
    const day_name = text[0..comma];
    const known = for (long_day_names) |name| {
        if (std.mem.eql(u8, name, day_name)) break true;
    } else false;
    if (!known) return null;
    const rest = text[comma + 1 ..];
    // " 06-Nov-94 08:49:37 GMT"
    if (rest.len != 23 or rest[0] != ' ' or rest[3] != '-' or rest[7] != '-' or rest[10] != ' ') return null;
    if (!std.mem.eql(u8, rest[19..], " GMT")) return null;
    const day = digits(rest[1..3]) orelse return null;
    const month = monthIndex(rest[4..7]) orelse return null;
    const short_year = digits(rest[8..10]) orelse return null;
    const year = if (short_year < 70) 2000 + short_year else 1900 + short_year;
    const seconds = timeOfDay(rest[11..19]) orelse return null;
    return combine(year, month, day, seconds);
}

/// "Sun Nov  6 08:49:37 1994"
fn parseAsctime(text: []const u8) ?i64 {
    if (!isDayName(text[0..3])) return null;
    if (text[7] != ' ' or text[10] != ' ' or text[19] != ' ') return null;
    const month = monthIndex(text[4..7]) orelse return null;
    const day_text = text[8..10];
    const day = if (day_text[0] == ' ') digits(day_text[1..2]) orelse return null else digits(day_text) orelse return null;
    const seconds = timeOfDay(text[11..19]) orelse return null;
    const year = digits(text[20..24]) orelse return null;
    return combine(year, month, day, seconds);
}

fn isDayName(text: []const u8) bool {
    for (day_names) |name| if (std.mem.eql(u8, name, text)) return true;
    return false;
}

fn monthIndex(text: []const u8) ?u32 {
    for (month_names, 0..) |name, i| if (std.mem.eql(u8, name, text)) return @intCast(i);
    return null;
}

fn digits(text: []const u8) ?u32 {
    var value: u32 = 0;
    for (text) |c| {
        if (c < '0' or c > '9') return null;
        value = value * 10 + (c - '0');
    }
    return value;
}

/// "08:49:37" -> seconds into the day.
fn timeOfDay(text: []const u8) ?u32 {
    if (text[2] != ':' or text[5] != ':') return null;
    const hours = digits(text[0..2]) orelse return null;
    const minutes = digits(text[3..5]) orelse return null;
    const seconds = digits(text[6..8]) orelse return null;
    // 60 is a leap second.
    if (hours > 23 or minutes > 59 or seconds > 60) return null;
    return hours * 3600 + minutes * 60 + seconds;
}

fn combine(year: u32, month_index: u32, day: u32, seconds: u32) ?i64 {
    if (year < 1900 or day < 1) return null;
    const month_days = [12]u32{ 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    const leap = (year % 4 == 0 and year % 100 != 0) or year % 400 == 0;
    const days_in_month = if (month_index == 1 and leap) 29 else month_days[month_index];
    if (day > days_in_month) return null;
    return daysFromCivil(year, month_index + 1, day) * 86400 + seconds;
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the usual era-based computation).
fn daysFromCivil(year_in: u32, month: u32, day: u32) i64 {
    const y: i64 = @as(i64, year_in) - @intFromBool(month <= 2);
    const era = @divFloor(y, 400);
    const year_of_era = y - era * 400;
    const m: i64 = month;
    const day_of_year = @divFloor(153 * (if (m > 2) m - 3 else m + 9) + 2, 5) + day - 1;
    const day_of_era = year_of_era * 365 + @divFloor(year_of_era, 4) - @divFloor(year_of_era, 100) + day_of_year;
    return era * 146097 + day_of_era - 719468;
}

test "http_date: the three formats of RFC 9110 §5.6.7 name the same instant" {
    const expected: i64 = 784111777;
    try std.testing.expectEqual(@as(?i64, expected), parse("Sun, 06 Nov 1994 08:49:37 GMT"));
    try std.testing.expectEqual(@as(?i64, expected), parse("Sunday, 06-Nov-94 08:49:37 GMT"));
    try std.testing.expectEqual(@as(?i64, expected), parse("Sun Nov  6 08:49:37 1994"));
}

test "http_date: round trip through format, leap years, epoch" {
    var buffer: [imf_fixdate_len]u8 = undefined;
    for ([_]i64{ 0, 951782400, 1709164800, 1795317694, 4102444799 }) |t| {
        format(&buffer, t);
        try std.testing.expectEqual(@as(?i64, t), parse(&buffer));
    }
    try std.testing.expectEqual(@as(?i64, 951782400), parse("Tue, 29 Feb 2000 00:00:00 GMT"));
    try std.testing.expectEqual(@as(?i64, 0), parse("Thursday, 01-Jan-70 00:00:00 GMT"));
    try std.testing.expectEqual(@as(?i64, 1262304000), parse("Friday, 01-Jan-10 00:00:00 GMT"));
}

test "http_date: times outside 1970..9999 are clamped, not a crash" {
    var buffer: [imf_fixdate_len]u8 = undefined;
    format(&buffer, -5);
    try std.testing.expectEqualStrings("Thu, 01 Jan 1970 00:00:00 GMT", &buffer);
    format(&buffer, std.math.maxInt(i64));
    try std.testing.expectEqualStrings("Fri, 31 Dec 9999 23:59:59 GMT", &buffer);
}

test "http_date: malformed dates are not dates" {
    const bad = [_][]const u8{
        "",
        "yesterday",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nox 1994 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT ",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Someday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 19x4",
    };
    for (bad) |text| {
        errdefer std.debug.print("date {s}\n", .{text});
        try std.testing.expectEqual(@as(?i64, null), parse(text));
    }
}
