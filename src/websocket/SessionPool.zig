//! WebSocket sessions shared by the workers of the thread-based engines
//! (`thread_per_connection`, `worker_pool`). Their workers live on connection or pool threads
//! and may end long before the server does, but a `Conn` handle the application kept (in a
//! room's member list, say) still points at its session: keeping the sessions here, for the
//! server's lifetime, means such a handle always finds valid memory and a newer generation,
//! and its calls fail with `error.Closed` instead of reading freed memory.
//!
//! Sessions are reserved at start-up (mapped, touched only when first handed out) and handed
//! out under a lock: an upgrade is rare next to the messages that follow it.
const std = @import("std");
const assert = std.debug.assert;
const Mutex = @import("../sync.zig").Mutex;
const Session = @import("Session.zig");
const mapped = @import("../mapped.zig");

const SessionPool = @This();

mutex: Mutex = .{},
sessions: []Session = &.{},
/// Sessions handed out at least once; those at or past it are untouched.
touched: u32 = 0,
free: ?*Session = null,
/// Sessions in use.
busy: u32 = 0,

/// Reserves `count` sessions (mapped, not touched).
pub fn init(pool: *SessionPool, count: u32) error{OutOfMemory}!void {
    pool.* = .{ .sessions = try mapped.alloc(Session, count) };
}

/// Unmaps the sessions. Asserts none is in use: call it once no worker can hand one out.
pub fn deinit(pool: *SessionPool) void {
    assert(pool.busy == 0);
    mapped.free(pool.sessions);
    pool.* = .{};
}

/// A session not in use (fresh ones start at generation 0), or null when all are taken.
/// The caller sets it up with `Session.init`.
pub fn acquire(pool: *SessionPool) ?*Session {
    pool.mutex.lock();
    defer pool.mutex.unlock();
    const session = if (pool.free) |free| blk: {
        pool.free = free.next_free;
        break :blk free;
    } else blk: {
        if (pool.touched == pool.sessions.len) return null;
        const session = &pool.sessions[pool.touched];
        session.* = .{ .worker = undefined };
        pool.touched += 1;
        break :blk session;
    };
    pool.busy += 1;
    return session;
}

/// Takes a session back; its generation has moved on, so handles to it stay refused.
pub fn release(pool: *SessionPool, session: *Session) void {
    pool.mutex.lock();
    defer pool.mutex.unlock();
    assert(pool.busy > 0);
    session.next_free = pool.free;
    pool.free = session;
    pool.busy -= 1;
}

test "SessionPool: hands out each session once, reuses released ones, refuses when empty" {
    var pool: SessionPool = undefined;
    try pool.init(2);
    defer pool.deinit();
    const a = pool.acquire().?;
    const b = pool.acquire().?;
    try std.testing.expect(a != b);
    try std.testing.expectEqual(@as(u32, 0), a.generation);
    try std.testing.expectEqual(@as(?*Session, null), pool.acquire());
    a.generation = 7;
    pool.release(a);
    const again = pool.acquire().?;
    try std.testing.expectEqual(a, again);
    try std.testing.expectEqual(@as(u32, 7), again.generation); // kept across uses
    pool.release(again);
    pool.release(b);
}
