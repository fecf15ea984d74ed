//! Clock reads, from the vDSO: no system call. saker links libc, and libc's clock_gettime
//! reads the vDSO. `std.os.linux.clock_gettime` finds the vDSO through the auxiliary vector
//! that only Zig's own start-up code records; in a program linked with libc it finds none and
//! makes the system call every time (strace counted ~6 per request of `saker serve` under
//! `ab`: the worker's clocks after each epoll_wait, and StaticFiles' per request).
const std = @import("std");
const builtin = @import("builtin");
const linux = std.os.linux;

/// The time of clock `id` (for the coarse clocks, as of the last tick).
pub fn read(id: linux.clockid_t) linux.timespec {
    var now: linux.timespec = undefined;
    // Only fails for an unknown clock, which would be our bug.
    if (builtin.link_libc) {
        _ = std.c.clock_gettime(id, &now);
    } else {
        _ = linux.clock_gettime(id, &now);
    }
    return now;
}

/// Milliseconds of clock `id`.
pub fn milliseconds(id: linux.clockid_t) u64 {
    const now = read(id);
    return @as(u64, @intCast(now.sec)) * std.time.ms_per_s + @as(u64, @intCast(now.nsec)) / std.time.ns_per_ms;
}

/// Microseconds of clock `id`.
pub fn microseconds(id: linux.clockid_t) u64 {
    const now = read(id);
    return @as(u64, @intCast(now.sec)) * std.time.us_per_s + @as(u64, @intCast(now.nsec)) / std.time.ns_per_us;
}

/// Nanoseconds of clock `id`.
pub fn nanoseconds(id: linux.clockid_t) u64 {
    const now = read(id);
    return @as(u64, @intCast(now.sec)) * std.time.ns_per_s + @as(u64, @intCast(now.nsec));
}

test "clock: agrees with the system call and does not go back" {
    var kernel: linux.timespec = undefined;
    try std.testing.expectEqual(@as(usize, 0), linux.clock_gettime(.MONOTONIC, &kernel));
    const first = nanoseconds(.MONOTONIC);
    const kernel_ns = @as(u64, @intCast(kernel.sec)) * std.time.ns_per_s + @as(u64, @intCast(kernel.nsec));
    try std.testing.expect(first >= kernel_ns);
    try std.testing.expect(first - kernel_ns < std.time.ns_per_s);
    try std.testing.expect(nanoseconds(.MONOTONIC) >= first);
    try std.testing.expect(milliseconds(.MONOTONIC_COARSE) > 0);
    try std.testing.expect(read(.REALTIME_COARSE).sec > 1_600_000_000);
}
