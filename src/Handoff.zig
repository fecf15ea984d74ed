//! The hand-off between a handler running on a thread of its own and the connection's event
//! loop: what a handler on the handler pool sends while it runs (a streamed chunk) or asks to
//! receive (a pulled body), carried to the loop and back. The handler's thread publishes a
//! request and waits on a futex word; the loop, woken by the worker's completion event, does
//! the I/O for it and wakes it with the outcome. Nothing here knows a protocol: the bytes are
//! iovecs out and a buffer in.
//!
//! `Sink` is the blocking I/O a handler's thread uses (the engines' own for thread-based
//! engines, `Handoff`'s for the handler pool); `BodyReader` is the `std.Io.Reader` behind
//! `req.bodyReader()`, over a protocol's `pull`.
const std = @import("std");
const assert = std.debug.assert;
const posix = std.posix;
const linux = std.os.linux;
const Request = @import("Request.zig");

const Handoff = @This();

/// Most iovecs handed over at once; `writeAll` splits larger sets.
pub const iovec_max = 32;

/// Set by the handler's thread when `handle` failed (its return is posted with
/// `Worker.handlerReturned`).
handler_error: ?anyerror = null,
/// The client went away while the handler ran: close once it is done.
client_gone: bool = false,
/// Set by the loop when it gives up the handler's I/O (`fail` without a timeout), read by the
/// handler's thread: a chunk or read it publishes after that fails at once, since the loop
/// answers nothing more for this run.
abandoned: std.atomic.Value(bool) = .init(false),
/// The chunk the handler's thread asked the loop to send, and how far it got.
iovecs: [iovec_max]posix.iovec_const = undefined,
iovec_count: u8 = 0,
iovec_index: u8 = 0,
/// Futex word the handler's thread waits on (`State`).
state: std.atomic.Value(u32) = .init(@backingInt(State.idle)),
/// Where the loop puts bytes the handler's thread asked for (`read_pending`), and how many.
read_buffer: []u8 = &.{},
read_received: usize = 0,
/// The read the handler's thread waited for timed out.
read_timed_out: bool = false,
/// Where a receive the loop still had in flight lands once its read was given up.
discard: [64]u8 = undefined,
/// The sink the handler's thread uses (`sink` binds it).
pool_sink: Sink = undefined,

/// Progress of a chunk handed to the loop (`pending` until `done` or `failed`), or of a read
/// (`read_pending` until `done` or `failed`).
pub const State = enum(u32) { idle, pending, done, failed, read_pending };

/// Blocking I/O for handlers that run on a thread of their own: the write side streams
/// responses while the handler runs, the read side feeds `req.bodyReader()`.
pub const Sink = struct {
    context: *anyopaque,
    /// Writes all of `iovecs`; fails when the client is gone.
    writeAll: *const fn (context: *anyopaque, iovecs: []const posix.iovec_const) error{ClientGone}!void,
    /// Receives at least one byte into `buffer`, waiting until `deadline_ms` (worker clock)
    /// at most; fails when the client closed or reset the connection, or the time is up.
    read: *const fn (context: *anyopaque, buffer: []u8, deadline_ms: u64) error{ ClientGone, Timeout }!usize,
};

/// Readies the hand-off for a handler about to run on the pool.
pub fn begin(h: *Handoff) void {
    assert(h.stateNow() == .idle or h.stateNow() == .done or h.stateNow() == .failed);
    h.handler_error = null;
    h.client_gone = false;
    h.abandoned.store(false, .monotonic); // the handler's thread starts after this is published
}

pub fn stateNow(h: *const Handoff) State {
    return @fromBackingInt(h.state.load(.acquire));
}

/// The chunk still to send for the handler's thread, if one is pending.
pub fn pendingSend(h: *const Handoff) ?[]const posix.iovec_const {
    if (h.iovec_index < h.iovec_count) return h.iovecs[h.iovec_index..h.iovec_count];
    return null;
}

/// Whether the handler's thread waits for bytes to be received for it.
pub fn readPending(h: *const Handoff) bool {
    return h.stateNow() == .read_pending;
}

/// Handler's thread: hands `iovecs` to the loop (`notify` wakes it) and waits until all are
/// sent, or the client is gone.
pub fn writeAll(h: *Handoff, iovecs: []const posix.iovec_const, notify: anytype) error{ClientGone}!void {
    var rest = iovecs;
    while (rest.len > 0) {
        const count = @min(rest.len, h.iovecs.len);
        @memcpy(h.iovecs[0..count], rest[0..count]);
        rest = rest[count..];
        h.iovec_index = 0;
        h.iovec_count = @intCast(count);
        if (h.publishAndWait(.pending, notify) == .failed) return error.ClientGone;
    }
}

/// Handler's thread: asks the loop to receive into `buffer` and waits until it has, the
/// client is gone, or the connection's read deadline passed (the loop applies it).
pub fn read(h: *Handoff, buffer: []u8, notify: anytype) error{ ClientGone, Timeout }!usize {
    h.read_buffer = buffer;
    h.read_received = 0;
    h.read_timed_out = false;
    if (h.publishAndWait(.read_pending, notify) == .failed) {
        return if (h.read_timed_out) error.Timeout else error.ClientGone;
    }
    // 0 only from `deliver`: the end of a body its protocol frames.
    assert(h.read_received <= buffer.len);
    return h.read_received;
}

fn publishAndWait(h: *Handoff, state: State, notify: anytype) State {
    h.state.store(@backingInt(state), .seq_cst);
    if (h.abandoned.load(.seq_cst)) {
        // Given up before it could see this request (`fail`): nothing will answer it.
        h.state.store(@backingInt(State.failed), .release);
        return .failed;
    }
    notify.post();
    while (true) {
        const now = h.state.load(.acquire);
        if (now != @backingInt(state)) return @fromBackingInt(now);
        _ = linux.futex_4arg(&h.state.raw, .{ .cmd = .WAIT, .private = true }, now, null);
    }
}

/// Loop: where to receive for the handler's thread (or, when no read is pending, where a
/// late receive lands to be dropped).
pub fn receiveBuffer(h: *Handoff) []u8 {
    return if (h.readPending()) h.read_buffer else &h.discard;
}

/// Loop: hands the pending read up to `bytes.len` bytes (none: the end of the body, which
/// `read` returns as 0), by a protocol that received them itself (HTTP/2 DATA). Returns how
/// many it took.
pub fn deliver(h: *Handoff, bytes: []const u8) usize {
    assert(h.readPending());
    const n = @min(bytes.len, h.read_buffer.len);
    @memcpy(h.read_buffer[0..n], bytes[0..n]);
    h.read_received = n;
    h.finish(.done);
    return n;
}

/// Loop: `n` bytes were received into `receiveBuffer()` (0: the client closed).
pub fn received(h: *Handoff, n: usize) void {
    if (!h.readPending()) {
        if (n == 0) h.client_gone = true;
        return;
    }
    if (n == 0) {
        h.client_gone = true;
        return h.finish(.failed);
    }
    h.read_received = n;
    h.finish(.done);
}

/// Loop: `n` bytes of the pending chunk were sent.
pub fn sent(h: *Handoff, n: usize) void {
    var left = n;
    while (left > 0) {
        const iov = &h.iovecs[h.iovec_index];
        if (left < iov.len) {
            iov.base += left;
            iov.len -= left;
            return;
        }
        left -= iov.len;
        h.iovec_index += 1;
    }
    if (h.iovec_index == h.iovec_count) h.finish(.done);
}

/// Loop: the pending chunk went out by the protocol's own means (HTTP/2 frames it): the
/// handler's thread goes on.
pub fn sentByProtocol(h: *Handoff) void {
    assert(h.pendingSend() != null);
    h.finish(.done);
}

/// Loop: the client is gone (or, `timed_out`, a pending read outlived its deadline): the
/// handler's thread stops waiting.
pub fn fail(h: *Handoff, timed_out: bool) void {
    if (timed_out) {
        assert(h.readPending());
        h.read_timed_out = true;
    } else {
        h.client_gone = true;
        // With `publishAndWait`'s store and load, a store-then-load pair on each side
        // (sequentially consistent): a request published before this is failed below, one
        // published after it sees the flag.
        h.abandoned.store(true, .seq_cst);
    }
    // Decided on the published state alone: the other thread fills in the iovecs before it
    // publishes `.pending`, so they say nothing until then.
    switch (@as(State, @fromBackingInt(h.state.load(.seq_cst)))) {
        .pending, .read_pending => h.finish(.failed),
        .idle, .done, .failed => {},
    }
}

fn finish(h: *Handoff, state: State) void {
    h.iovec_index = 0;
    h.iovec_count = 0;
    h.state.store(@backingInt(state), .release);
    _ = linux.futex_3arg(&h.state.raw, .{ .cmd = .WAKE, .private = true }, 1);
}

/// Binds the sink a pool thread's handler uses to this hand-off; `Notify` has
/// `fn post(*Notify) void`, which wakes the loop, and `fn handoff(*Notify) *Handoff`.
pub fn sink(h: *Handoff, comptime Notify: type, notify: *Notify) *const Sink {
    const Bound = struct {
        fn writeAll(context: *anyopaque, iovecs: []const posix.iovec_const) error{ClientGone}!void {
            const n: *Notify = @ptrCast(@alignCast(context));
            return n.handoff().writeAll(iovecs, n);
        }
        fn readFn(context: *anyopaque, buffer: []u8, deadline_ms: u64) error{ ClientGone, Timeout }!usize {
            _ = deadline_ms; // the loop applies the connection's read deadline
            const n: *Notify = @ptrCast(@alignCast(context));
            return n.handoff().read(buffer, n);
        }
    };
    h.pool_sink = .{ .context = notify, .writeAll = Bound.writeAll, .read = Bound.readFn };
    return &h.pool_sink;
}

/// The `std.Io.Reader` behind `req.bodyReader()`: each read asks `pull` (the protocol's
/// decoder, on the handler's thread) for body bytes.
pub const BodyReader = struct {
    stream: Request.BodyStream,
    context: *anyopaque,
    /// Decodes up to `dest.len` body bytes into `dest`, receiving as needed;
    /// `error.EndOfStream` once the body is complete.
    pull: *const fn (context: *anyopaque, dest: []u8) error{ ReadFailed, EndOfStream }!usize,

    const vtable: std.Io.Reader.VTable = .{ .stream = readerStream, .discard = readerDiscard };

    pub fn init(context: *anyopaque, pull: @FieldType(BodyReader, "pull")) BodyReader {
        return .{
            .stream = .{ .interface = .{ .vtable = &vtable, .buffer = &.{}, .seek = 0, .end = 0 } },
            .context = context,
            .pull = pull,
        };
    }

    fn fromInterface(r: *std.Io.Reader) *BodyReader {
        const stream: *Request.BodyStream = @alignCast(@fieldParentPtr("interface", r));
        return @alignCast(@fieldParentPtr("stream", stream));
    }

    fn readerStream(r: *std.Io.Reader, w: *std.Io.Writer, limit: std.Io.Limit) std.Io.Reader.StreamError!usize {
        if (limit == .nothing) return 0;
        const reader = fromInterface(r);
        const dest = limit.slice(try w.writableSliceGreedy(1));
        const n = try reader.pull(reader.context, dest);
        w.advance(n);
        return n;
    }

    fn readerDiscard(r: *std.Io.Reader, limit: std.Io.Limit) std.Io.Reader.Error!usize {
        // Called with the buffer empty: it serves as scratch space.
        const reader = fromInterface(r);
        return reader.pull(reader.context, limit.slice(r.buffer));
    }
};

/// The loop's side of a test: counts posts instead of waking an engine.
const TestNotify = struct {
    h: *Handoff,
    posts: std.atomic.Value(u32) = .init(0),

    pub fn post(n: *TestNotify) void {
        _ = n.posts.fetchAdd(1, .release);
    }

    pub fn handoff(n: *TestNotify) *Handoff {
        return n.h;
    }

    /// Waits until the handler's thread has posted.
    fn awaitPost(n: *TestNotify) void {
        while (n.posts.load(.acquire) == 0) std.Thread.yield() catch {};
    }
};

test "Handoff: a chunk handed over is sent in pieces, then the thread is released" {
    var h: Handoff = .{};
    var notify: TestNotify = .{ .h = &h };
    const Thread = struct {
        fn run(n: *TestNotify, result: *?error{ClientGone}) void {
            const iovecs = [_]posix.iovec_const{ .{ .base = "abc", .len = 3 }, .{ .base = "defg", .len = 4 } };
            n.h.writeAll(&iovecs, n) catch |err| {
                result.* = err;
                return;
            };
            result.* = null;
        }
    };
    var result: ?error{ClientGone} = error.ClientGone;
    const thread = try std.Thread.spawn(.{}, Thread.run, .{ &notify, &result });
    // The loop's side: wait for the post, then send 5 bytes, then 2.
    notify.awaitPost();
    try std.testing.expectEqual(@as(usize, 2), h.pendingSend().?.len);
    h.sent(5);
    try std.testing.expectEqual(@as(usize, 1), h.pendingSend().?.len);
    try std.testing.expectEqual(@as(usize, 2), h.pendingSend().?[0].len);
    h.sent(2);
    thread.join();
    try std.testing.expectEqual(@as(?error{ClientGone}, null), result);
    try std.testing.expectEqual(State.done, h.stateNow());
    try std.testing.expectEqual(@as(?[]const posix.iovec_const, null), h.pendingSend());
}

test "Handoff: a pending read fails with Timeout or ClientGone as the loop says" {
    for ([_]bool{ true, false }) |timed_out| {
        var h: Handoff = .{};
        var notify: TestNotify = .{ .h = &h };
        const Thread = struct {
            fn run(n: *TestNotify, result: *(error{ ClientGone, Timeout }!usize)) void {
                var buffer: [16]u8 = undefined;
                result.* = n.h.read(&buffer, n);
            }
        };
        var result: error{ ClientGone, Timeout }!usize = 0;
        const thread = try std.Thread.spawn(.{}, Thread.run, .{ &notify, &result });
        notify.awaitPost();
        try std.testing.expect(h.readPending());
        try std.testing.expectEqual(@as(usize, 16), h.receiveBuffer().len);
        h.fail(timed_out);
        thread.join();
        try std.testing.expectError(if (timed_out) error.Timeout else error.ClientGone, result);
        try std.testing.expectEqual(!timed_out, h.client_gone);
    }
}

test "Handoff: after the loop gave up (ClientGone) before the thread asked, its read and write fail at once" {
    var h: Handoff = .{};
    h.begin();
    var notify: TestNotify = .{ .h = &h };
    // The loop abandons the handler's I/O while nothing is pending (an HTTP/2 connection that
    // ended before the pulled body's handler first read): nothing will answer later requests.
    h.fail(false);
    try std.testing.expectEqual(State.idle, h.stateNow());
    var buffer: [16]u8 = undefined;
    try std.testing.expectError(error.ClientGone, h.read(&buffer, &notify));
    const iovecs = [_]posix.iovec_const{.{ .base = "abc", .len = 3 }};
    try std.testing.expectError(error.ClientGone, h.writeAll(&iovecs, &notify));
    try std.testing.expectEqual(@as(u32, 0), notify.posts.load(.acquire));
    try std.testing.expectEqual(State.failed, h.stateNow());
    // The next handler run starts afresh.
    h.begin();
    try std.testing.expect(!h.abandoned.load(.acquire));
}
