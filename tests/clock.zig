//! Time helpers shared by the socket-level test suites.
const std = @import("std");
const linux = std.os.linux;

/// Sleeps `ms` milliseconds (a signal may cut it short, which no caller minds).
pub fn sleepMs(ms: u64) void {
    const pause: linux.timespec = .{ .sec = @intCast(ms / 1000), .nsec = @intCast((ms % 1000) * std.time.ns_per_ms) };
    _ = linux.nanosleep(&pause, null);
}

/// Microseconds on the monotonic clock.
pub fn nowUs() u64 {
    var ts: linux.timespec = undefined;
    _ = linux.clock_gettime(.MONOTONIC, &ts);
    return @as(u64, @intCast(ts.sec)) * 1_000_000 + @as(u64, @intCast(ts.nsec)) / 1000;
}
