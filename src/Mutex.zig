//! A small mutex over a Linux futex, for the few places where threads that own no `std.Io`
//! share state (WebSocket sends from any thread). Uncontended lock and unlock are one atomic
//! operation each; a contended lock sleeps in the kernel.
const std = @import("std");
const linux = std.os.linux;

const Mutex = @This();

state: std.atomic.Value(u32) = .init(unlocked),

const unlocked: u32 = 0;
const locked: u32 = 1;
/// Locked, and a thread may be sleeping on it.
const contended: u32 = 2;

/// Takes the lock, sleeping while another thread holds it.
pub fn lock(m: *Mutex) void {
    if (m.state.cmpxchgStrong(unlocked, locked, .acquire, .monotonic) == null) return;
    while (m.state.swap(contended, .acquire) != unlocked) {
        // Returns at once if the state changed since the swap (EAGAIN) or on a signal.
        _ = linux.futex_4arg(&m.state.raw, .{ .cmd = .WAIT, .private = true }, contended, null);
    }
}

/// Releases the lock. Asserts it is held.
pub fn unlock(m: *Mutex) void {
    const previous = m.state.swap(unlocked, .release);
    std.debug.assert(previous != unlocked);
    if (previous == contended) _ = linux.futex_3arg(&m.state.raw, .{ .cmd = .WAKE, .private = true }, 1);
}

test "Mutex: threads take turns" {
    const Shared = struct {
        mutex: Mutex = .{},
        count: u64 = 0,

        fn work(shared: *@This()) void {
            for (0..20_000) |_| {
                shared.mutex.lock();
                defer shared.mutex.unlock();
                shared.count += 1;
            }
        }
    };
    var shared: Shared = .{};
    var threads: [4]std.Thread = undefined;
    for (&threads) |*t| t.* = try std.Thread.spawn(.{}, Shared.work, .{&shared});
    for (threads) |t| t.join();
    try std.testing.expectEqual(@as(u64, 80_000), shared.count);
}
