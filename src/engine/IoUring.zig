//! The io_uring engine: one thread per worker, each with its own ring and SO_REUSEPORT
//! listener. Connections are accepted with a multishot accept; reads are single-shot receives
//! that pick a buffer from a provided-buffer ring (so an idle connection pins no buffer); the
//! data is copied into the connection's exchange when it wants it. Responses go out with
//! writev operations; file bodies with sendfile on the non-blocking socket, waiting for
//! writability with a poll operation when the socket is full. Completions are drained in
//! batches of at most `completions_max`; every submission and wait is one `io_uring_enter`.
//!
//! Timeouts use the same sweep as the epoll engine, driven by a ring timeout: connection
//! deadlines are uniform per phase, so a periodic check costs less than a linked timeout per
//! operation. If the kernel refuses io_uring, the worker falls back to epoll and says so.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const Ring = linux.IoUring;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Epoll = @import("Epoll.zig");
const Worker = @import("../Worker.zig");
const Config = @import("../Config.zig");
const Connection = @import("../Connection.zig");
const driver = @import("driver.zig");
const SlotTable = @import("slot_table.zig").SlotTable;
const mapped = @import("../mapped.zig");

const log = std.log.scoped(.saker);

const IoUring = @This();

worker: *Worker,
listener: ?socket.Listener,
control: *engine.Control,
ring: Ring,
buffers: RecvBuffers,
slots: SlotTable(Slot),
accept_armed: bool = false,
/// Deadline sweeps (on the ring's tick) and the drain (see `driver.Sweeper`).
sweeper: driver.Sweeper,
tick: linux.kernel_timespec,

/// Completions handled per batch.
const completions_max = 256;
/// How long accepting pauses after an error that may last (out of file descriptors, ...).
const accept_pause: linux.kernel_timespec = .{ .sec = 0, .nsec = engine.accept_pause_ms * std.time.ns_per_ms };
/// Submissions tried when the submission queue is full and the kernel refuses one.
const submit_attempts = 3;
/// Consecutive refused waits (about 1 ms apart) before the engine gives up.
const stalls_max = 1000;

const Op = enum(u8) { accept, accept_resume, recv, send, poll_in, poll_out, wake, tick, completions, cancel, websocket_wake };

const UserData = packed struct(u64) {
    index: u32,
    generation: u24,
    op: Op,
};

const Slot = struct {
    connection: Connection,
    fd: linux.fd_t,
    generation: u24,
    next_free: u32,
    in_use: bool,
    flags: Flags,
    /// Data received into a ring buffer that the connection has not taken yet.
    pending: ?Pending,
    /// Bytes a completed writev sent, not yet handed to the connection (`none_sent`: none).
    sent: u32,
    /// The client's address (multishot accept gives none: asked of the socket once).
    peer: ?std.Io.net.IpAddress,

    fn busy(slot: *const Slot) bool {
        return slot.flags.recv_armed or slot.flags.send_armed or slot.flags.poll_armed;
    }
};

/// A slot's states, packed: an idle connection's slot is what it costs (README: bytes per
/// idle connection).
const Flags = packed struct(u16) {
    recv_armed: bool = false,
    send_armed: bool = false,
    poll_armed: bool = false,
    /// The last receive or send found the socket not ready (EAGAIN): wait with a poll first.
    wait_readable: bool = false,
    wait_writable: bool = false,
    /// The connection is done; the socket closes once no operation is in flight.
    closing: bool = false,
    /// A cancel for the armed receive was submitted (shutdown of an idle connection).
    cancel_sent: bool = false,
    /// A receive completed with end of file, not yet handed to the connection.
    eof: bool = false,
    /// No ring buffer was free for a receive: the next one is a plain syscall.
    direct: bool = false,
    _: u7 = 0,
};

const none_sent = std.math.maxInt(u32);

const Pending = struct { buffer_id: u16, offset: u32, len: u32 };

/// The provided-buffer ring receives pick their buffers from (group 0).
const RecvBuffers = struct {
    ring: *align(std.heap.page_size_min) linux.io_uring_buf_ring,
    memory: []u8,
    buffer_bytes: u32,
    count: u16,

    const group_id = 0;

    fn init(ring_fd: linux.fd_t, count: u16, buffer_bytes: u32) !RecvBuffers {
        const memory = try mapped.alloc(u8, @as(usize, count) * buffer_bytes);
        errdefer mapped.free(memory);
        // Without incremental consumption: each receive takes a whole buffer (kernel 5.19+).
        const buf_ring = try Ring.setup_buf_ring(ring_fd, count, group_id, .{ .inc = false });
        Ring.buf_ring_init(buf_ring);
        var buffers: RecvBuffers = .{ .ring = buf_ring, .memory = memory, .buffer_bytes = buffer_bytes, .count = count };
        for (0..count) |i| Ring.buf_ring_add(buf_ring, buffers.get(@intCast(i)), @intCast(i), Ring.buf_ring_mask(count), @intCast(i));
        Ring.buf_ring_advance(buf_ring, count);
        return buffers;
    }

    fn deinit(buffers: *RecvBuffers, ring_fd: linux.fd_t) void {
        Ring.free_buf_ring(ring_fd, buffers.ring, buffers.count, group_id);
        mapped.free(buffers.memory);
    }

    fn get(buffers: *const RecvBuffers, id: u16) []u8 {
        return buffers.memory[@as(usize, id) * buffers.buffer_bytes ..][0..buffers.buffer_bytes];
    }

    /// Gives a buffer back to the kernel.
    fn recycle(buffers: *RecvBuffers, id: u16) void {
        Ring.buf_ring_add(buffers.ring, buffers.get(id), id, Ring.buf_ring_mask(buffers.count), 0);
        Ring.buf_ring_advance(buffers.ring, 1);
    }
};

/// Runs an io_uring engine on the calling thread until the server stops; falls back to epoll
/// when the kernel refuses io_uring. If the ring fails for good, stops the server with an
/// error. The listener stays open (the server closes it).
pub fn run(worker: *Worker, listener: socket.Listener, control: *engine.Control, connections_max: u32) void {
    Worker.current = worker;
    defer Worker.current = null;
    var loop: IoUring = undefined;
    loop.init(worker, listener, control, connections_max) catch |err| {
        log.warn("io_uring unavailable ({t}); this worker uses the epoll engine instead", .{err});
        return Epoll.run(worker, listener, control, connections_max);
    };
    defer loop.deinit();
    loop.serve() catch |err| {
        log.err("io_uring engine failed: {t}; stopping the server", .{err});
        control.fail();
    };
}

/// Whether this kernel lets a worker run io_uring with `config` (the ring and its receive
/// buffers, as `run` sets them up); when it does not, `run` falls back to epoll. Tests use it
/// to skip io_uring cases instead of running them on the fallback.
pub fn probe(config: *const Config) !void {
    var ring = try initRing(config.io_uring_entries);
    defer ring.deinit();
    var buffers = try RecvBuffers.init(ring.fd, config.io_uring_recv_buffers, config.io_uring_recv_buffer_bytes);
    buffers.deinit(ring.fd);
}

fn initRing(entries: u16) !Ring {
    const fast = linux.IORING_SETUP_SINGLE_ISSUER | linux.IORING_SETUP_DEFER_TASKRUN;
    return Ring.init(entries, fast) catch |err| switch (err) {
        error.ArgumentsInvalid => Ring.init(entries, 0), // kernel older than 6.1
        else => return err,
    };
}

fn init(loop: *IoUring, worker: *Worker, listener: socket.Listener, control: *engine.Control, connections_max: u32) !void {
    const config = worker.config;
    var ring = try initRing(config.io_uring_entries);
    errdefer ring.deinit();
    var buffers = try RecvBuffers.init(ring.fd, config.io_uring_recv_buffers, config.io_uring_recv_buffer_bytes);
    errdefer buffers.deinit(ring.fd);
    var slots: SlotTable(Slot) = try .init(connections_max);
    errdefer slots.deinit(false);
    if (worker.handler_pool != null) worker.wake_fd = try engine.eventfd();
    const sweeper: driver.Sweeper = .init(config, worker.now_ms);
    const interval_ms = sweeper.interval_ms;
    loop.* = .{
        .worker = worker,
        .listener = listener,
        .control = control,
        .ring = ring,
        .buffers = buffers,
        .slots = slots,
        .sweeper = sweeper,
        .tick = .{ .sec = @intCast(interval_ms / 1000), .nsec = @intCast((interval_ms % 1000) * std.time.ns_per_ms) },
    };
}

fn deinit(loop: *IoUring) void {
    for (loop.slots.touchedSlots()) |*slot| {
        if (!slot.in_use) continue;
        if (slot.connection.handling()) {
            // A handler thread still uses it: leave its memory to the process exit.
            loop.worker.abandoned = true;
            continue;
        }
        socket.close(slot.fd);
        slot.connection.deinit();
        if (slot.pending) |p| loop.buffers.recycle(p.buffer_id);
        loop.slots.release(loop.control, slot);
    }
    loop.slots.deinit(loop.worker.abandoned);
    loop.buffers.deinit(loop.ring.fd);
    loop.ring.deinit();
    if (loop.worker.wake_fd >= 0 and !loop.worker.abandoned) {
        _ = linux.close(loop.worker.wake_fd);
        loop.worker.wake_fd = -1;
    }
}

/// An SQE. When the submission queue is full, submits what is queued to make room, retrying
/// a refused submission a few times (`submit_attempts`) before giving up.
fn sqe(loop: *IoUring) error{SubmissionQueueFull}!*linux.io_uring_sqe {
    if (loop.ring.get_sqe()) |entry| return entry else |_| {}
    for (0..submit_attempts) |_| {
        if (loop.ring.submit()) |_| {
            if (loop.ring.get_sqe()) |entry| return entry else |_| {}
        } else |err| {
            log.warn("io_uring submit: {t}; retrying", .{err});
            sleepMs(1);
        }
    }
    return error.SubmissionQueueFull;
}

fn sleepMs(ms: u32) void {
    const pause: linux.timespec = .{ .sec = 0, .nsec = @as(isize, ms) * std.time.ns_per_ms };
    _ = linux.nanosleep(&pause, null);
}

fn userData(op: Op, slot_index: u32, generation: u24) u64 {
    return @bitCast(UserData{ .index = slot_index, .generation = generation, .op = op });
}

fn serve(loop: *IoUring) !void {
    loop.worker.updateClock();
    try loop.armAccept();
    try loop.armWake();
    try loop.armTick();
    if (loop.worker.handler_pool != null) try loop.armCompletions();
    if (loop.worker.websocket_wake_fd != -1) try loop.armWebSocketWake();
    var cqes: [completions_max]linux.io_uring_cqe = undefined;
    // Consecutive waits the kernel refused for lack of resources (bounded by `stalls_max`).
    var stalls: u32 = 0;
    while (true) {
        if (loop.ring.submit_and_wait(1)) |_| {
            stalls = 0;
        } else |err| switch (err) {
            error.SignalInterrupt => {},
            // The kernel wants completions reaped (below) or memory back: take what is
            // ready, pause a little, and retry, for a bounded time.
            error.SystemResources, error.CompletionQueueOvercommitted => {
                stalls += 1;
                if (stalls > stalls_max) return err;
                if (stalls == 1) log.warn("io_uring_enter: {t}; retrying", .{err});
                sleepMs(1);
            },
            else => return err,
        }
        const count = loop.ring.copy_cqes(&cqes, 0) catch |err| switch (err) {
            error.SignalInterrupt, error.SystemResources, error.CompletionQueueOvercommitted => 0,
            else => return err,
        };
        loop.worker.updateClock();
        for (cqes[0..count]) |cqe| try loop.complete(cqe);
        loop.runWoken();
        if (loop.sweeper.finished(loop.slots.active, loop.worker.now_ms)) return;
    }
}

fn armAccept(loop: *IoUring) !void {
    const listener = loop.listener orelse return;
    const entry = try loop.sqe();
    entry.prep_multishot_accept(listener.fd, null, null, linux.SOCK.NONBLOCK | linux.SOCK.CLOEXEC);
    entry.user_data = userData(.accept, 0, 0);
    loop.accept_armed = true;
}

fn armWake(loop: *IoUring) !void {
    // A poll, not a read: the eventfd stays readable for every worker watching it.
    const entry = try loop.sqe();
    entry.prep_poll_add(loop.control.wake_fd, linux.POLL.IN);
    entry.user_data = userData(.wake, 0, 0);
}

fn armCompletions(loop: *IoUring) !void {
    const entry = try loop.sqe();
    entry.prep_poll_add(loop.worker.wake_fd, linux.POLL.IN);
    entry.user_data = userData(.completions, 0, 0);
}

/// Handler pool threads have finished handlers or have chunks to send.
fn onCompletions(loop: *IoUring) !void {
    var taken = loop.worker.takeCompletions();
    while (taken.next()) |connection| {
        connection.onPoolEvent();
        loop.drive(@fieldParentPtr("connection", connection));
    }
    try loop.armCompletions();
}

fn armWebSocketWake(loop: *IoUring) !void {
    const entry = try loop.sqe();
    entry.prep_poll_add(loop.worker.websocket_wake_fd, linux.POLL.IN);
    entry.user_data = userData(.websocket_wake, 0, 0);
}

/// Drives the connections that have WebSocket work queued for them (from other threads, or
/// from callbacks of other connections on this one).
fn runWoken(loop: *IoUring) void {
    while (loop.worker.takeWoken()) |session| {
        const c = session.connection orelse continue; // released since it was queued
        const slot: *Slot = @fieldParentPtr("connection", c);
        if (!slot.in_use or slot.flags.closing) continue;
        c.onWake();
        loop.drive(slot);
    }
}

fn armTick(loop: *IoUring) !void {
    const entry = try loop.sqe();
    entry.prep_timeout(&loop.tick, 0, 0);
    entry.user_data = userData(.tick, 0, 0);
}

fn complete(loop: *IoUring, cqe: linux.io_uring_cqe) !void {
    const data: UserData = @bitCast(cqe.user_data);
    switch (data.op) {
        .accept => try loop.onAccept(cqe),
        .accept_resume => if (!loop.sweeper.draining and !loop.accept_armed) try loop.armAccept(),
        .wake => loop.beginDrain(),
        .completions => try loop.onCompletions(),
        .websocket_wake => {
            loop.worker.clearWake();
            try loop.armWebSocketWake();
        },
        .cancel => {}, // the canceled receive reports itself
        .tick => {
            loop.sweep();
            try loop.armTick();
        },
        .recv, .send, .poll_in, .poll_out => {
            const slot = &loop.slots.slots[data.index];
            assert(slot.in_use and slot.generation == data.generation);
            switch (data.op) {
                .recv => loop.onRecv(slot, cqe),
                .send => loop.onSend(slot, cqe),
                .poll_in => {
                    slot.flags.poll_armed = false;
                    slot.flags.wait_readable = false;
                },
                .poll_out => {
                    slot.flags.poll_armed = false;
                    slot.flags.wait_writable = false;
                },
                else => unreachable,
            }
            loop.drive(slot);
        },
    }
}

fn onAccept(loop: *IoUring, cqe: linux.io_uring_cqe) !void {
    // Errors that concern one connection only: accept the next one at once. Anything else
    // may last (out of file descriptors, the listener shut at the stop, an unexpected errno):
    // retrying at once would spin, so accepting pauses while connections go on being served.
    const retry_at_once = switch (cqe.err()) {
        .SUCCESS, .CANCELED, .CONNABORTED, .INTR, .PROTO, .PERM => true,
        .NETDOWN, .NOPROTOOPT, .HOSTDOWN, .NONET, .HOSTUNREACH, .OPNOTSUPP, .NETUNREACH => true,
        else => false,
    };
    if (cqe.flags & linux.IORING_CQE_F_MORE == 0) {
        loop.accept_armed = false;
        if (loop.sweeper.draining) {
            // Accepting is over.
        } else if (!retry_at_once) {
            const entry = try loop.sqe();
            entry.prep_timeout(&accept_pause, 0, 0);
            entry.user_data = userData(.accept_resume, 0, 0);
        } else try loop.armAccept();
    }
    if (cqe.res < 0) {
        if (!retry_at_once) engine.logAcceptPause(loop.control, switch (cqe.err()) {
            .MFILE, .NFILE, .NOBUFS, .NOMEM => error.SystemResources,
            .INVAL, .BADF => error.ListenerClosed,
            else => |err| socket.unexpected("accept", err),
        });
        return;
    }
    loop.takeConnection(cqe.res);
}

/// Starts serving an accepted connection (while draining: answers what it may already have
/// sent, and closes it if it sent nothing).
fn takeConnection(loop: *IoUring, fd: linux.fd_t) void {
    // Over connections_max (server-wide): say so and close, without a slot.
    const slot = loop.slots.admit(loop.control, fd, loop.worker.listening.tls != null) orelse return;
    socket.setNoDelay(fd);
    slot.fd = fd;
    slot.flags = .{};
    slot.pending = null;
    slot.sent = none_sent;
    slot.connection = .init(loop.worker);
    slot.peer = socket.peerName(fd);
    if (slot.peer) |*address| slot.connection.peer = address;
    if (loop.sweeper.draining) {
        // Answer what it may already have sent (read with a plain syscall, see `unread`);
        // close it if it sent nothing.
        slot.flags.direct = true;
        return loop.sweepSlot(slot);
    }
    loop.drive(slot);
}

fn index(loop: *const IoUring, slot: *const Slot) u32 {
    return loop.slots.index(slot);
}

/// Begins closing: operations in flight are ended by shutting the socket down; the slot is
/// freed when the last of them completes.
fn close(loop: *IoUring, slot: *Slot) void {
    if (!slot.flags.closing) {
        slot.flags.closing = true;
        if (slot.pending) |p| loop.buffers.recycle(p.buffer_id);
        slot.pending = null;
        if (slot.busy()) socket.shutdownBoth(slot.fd);
    }
    if (slot.busy()) return;
    socket.close(slot.fd);
    slot.connection.deinit();
    loop.slots.release(loop.control, slot);
}

fn onRecv(loop: *IoUring, slot: *Slot, cqe: linux.io_uring_cqe) void {
    slot.flags.recv_armed = false;
    if (slot.flags.closing) {
        if (cqe.buffer_id()) |id| loop.buffers.recycle(id) else |_| {}
        return;
    }
    if (cqe.res > 0) {
        const id = cqe.buffer_id() catch unreachable; // buffer selection was requested
        slot.pending = .{ .buffer_id = id, .offset = 0, .len = @intCast(cqe.res) };
        return;
    }
    switch (cqe.err()) {
        .SUCCESS => slot.flags.eof = true,
        // Every ring buffer is held by a connection that cannot take its data yet: the next
        // receive goes into the connection's own buffer with a plain syscall instead (rare).
        .NOBUFS => slot.flags.direct = true,
        .AGAIN => slot.flags.wait_readable = true,
        .CANCELED => if (loop.sweeper.draining) slot.connection.drain(),
        .INTR => {},
        else => slot.connection.onError(),
    }
}

fn onSend(loop: *IoUring, slot: *Slot, cqe: linux.io_uring_cqe) void {
    _ = loop;
    slot.flags.send_armed = false;
    if (slot.flags.closing) return;
    if (cqe.res >= 0) {
        slot.sent = @intCast(cqe.res);
        assert(slot.sent != none_sent);
        return;
    }
    switch (cqe.err()) {
        .AGAIN => slot.flags.wait_writable = true,
        .INTR => {}, // drive re-arms it
        else => slot.connection.onError(),
    }
}

/// Runs the connection until it waits for an operation in flight (or is closed).
fn drive(loop: *IoUring, slot: *Slot) void {
    if (driver.drive(SlotIo{ .loop = loop, .slot = slot }, &slot.connection) == .close) loop.close(slot);
}

/// How the io_uring engine waits, for `driver.drive`: a receive or writev is submitted and
/// reports `pending`; its completion is kept in the slot and handed over by the next drive.
const SlotIo = struct {
    loop: *IoUring,
    slot: *Slot,

    pub inline fn beforeStep(io: SlotIo, _: *Connection) ?driver.Stop {
        return if (io.slot.flags.closing) .close else null;
    }

    pub fn awaitRecv(io: SlotIo, _: *Connection) driver.Await {
        const slot = io.slot;
        if (slot.pending != null or slot.flags.eof or slot.flags.direct) return .ready;
        if (slot.flags.recv_armed or slot.flags.poll_armed) return .later;
        const armed = if (slot.flags.wait_readable) io.loop.armPoll(slot, .poll_in) else io.loop.armRecv(slot);
        armed catch return .close;
        return .later;
    }

    /// Hands over what a completed receive brought (copied from its ring buffer), or reads
    /// with a plain syscall when no ring buffer was free.
    pub fn recv(io: SlotIo, buffer: []u8) driver.Result {
        const slot = io.slot;
        if (slot.pending) |*pending| {
            const data = io.loop.buffers.get(pending.buffer_id)[pending.offset..][0..pending.len];
            const n = @min(buffer.len, data.len);
            @memcpy(buffer[0..n], data[0..n]);
            pending.offset += @intCast(n);
            pending.len -= @intCast(n);
            if (pending.len == 0) {
                io.loop.buffers.recycle(pending.buffer_id);
                slot.pending = null;
            }
            return .{ .done = n };
        }
        if (slot.flags.eof) {
            slot.flags.eof = false;
            return .{ .done = 0 };
        }
        assert(slot.flags.direct);
        slot.flags.direct = false;
        const n = socket.recv(slot.fd, buffer) catch |err| return switch (err) {
            error.WouldBlock, error.Interrupted => .would_block,
            error.ConnectionLost, error.Unexpected => .failed,
        };
        return .{ .done = n };
    }

    pub fn awaitSend(io: SlotIo, _: *Connection) driver.Await {
        const slot = io.slot;
        if (slot.flags.poll_armed) return .later;
        if (slot.sent != none_sent) return .ready;
        if (slot.flags.send_armed) return .later;
        if (slot.flags.wait_writable) {
            io.loop.armPoll(slot, .poll_out) catch return .close;
            return .later;
        }
        return .ready;
    }

    pub fn writev(io: SlotIo, iovecs: []const std.posix.iovec_const) driver.Result {
        const slot = io.slot;
        if (slot.sent != none_sent) {
            defer slot.sent = none_sent;
            return .{ .done = slot.sent };
        }
        io.loop.armSend(slot, iovecs) catch return .failed;
        return .pending;
    }

    pub fn sendfile(io: SlotIo, file: Connection.File) driver.Result {
        const n = socket.sendfile(io.slot.fd, file.fd, file.offset, file.len) catch |err| {
            if (err == error.WouldBlock) io.slot.flags.wait_writable = true;
            return driver.fromError(err);
        };
        return .{ .done = n };
    }

    pub fn shutdownWrite(io: SlotIo) void {
        socket.shutdownWrite(io.slot.fd);
    }

    /// Files go out in one sendfile each, from the loop thread: no socket options around them.
    pub inline fn fileSend(_: SlotIo) ?*socket.FileSend {
        return null;
    }

    pub inline fn fd(io: SlotIo) linux.fd_t {
        return io.slot.fd;
    }

    /// A completed receive may hold a request; one in flight may be about to: cancel it and
    /// decide when it completes (with data, or canceled).
    pub fn unread(io: SlotIo, _: *const Connection) driver.Unread {
        const slot = io.slot;
        if (slot.pending != null or slot.flags.eof or slot.flags.direct) return .maybe;
        if (slot.flags.recv_armed) {
            if (!slot.flags.cancel_sent) io.loop.cancelRecv(slot) catch {};
            return .in_flight;
        }
        return .none;
    }
};

fn armRecv(loop: *IoUring, slot: *Slot) !void {
    const entry = try loop.sqe();
    entry.prep_rw(.RECV, slot.fd, 0, 0, 0);
    entry.flags |= linux.IOSQE_BUFFER_SELECT;
    entry.buf_index = RecvBuffers.group_id;
    entry.user_data = userData(.recv, loop.index(slot), slot.generation);
    slot.flags.recv_armed = true;
}

fn armSend(loop: *IoUring, slot: *Slot, iovecs: []const std.posix.iovec_const) !void {
    const entry = try loop.sqe();
    // The iovecs live in the connection's exchange, untouched until `onSend`.
    entry.prep_writev(slot.fd, iovecs[0..@min(iovecs.len, 1024)], 0);
    entry.user_data = userData(.send, loop.index(slot), slot.generation);
    slot.flags.send_armed = true;
}

fn cancelRecv(loop: *IoUring, slot: *Slot) !void {
    const entry = try loop.sqe();
    entry.prep_cancel(userData(.recv, loop.index(slot), slot.generation), 0);
    entry.user_data = userData(.cancel, loop.index(slot), slot.generation);
    slot.flags.cancel_sent = true;
}

fn armPoll(loop: *IoUring, slot: *Slot, op: Op) !void {
    const entry = try loop.sqe();
    entry.prep_poll_add(slot.fd, if (op == .poll_in) linux.POLL.IN else linux.POLL.OUT);
    entry.user_data = userData(op, loop.index(slot), slot.generation);
    slot.flags.poll_armed = true;
}

/// Applies timeouts (and, while draining, closes connections that went idle).
fn sweep(loop: *IoUring) void {
    loop.worker.tick();
    for (loop.slots.touchedSlots()) |*slot| {
        if (slot.in_use and !slot.flags.closing) loop.sweepSlot(slot);
    }
}

fn sweepSlot(loop: *IoUring, slot: *Slot) void {
    const io: SlotIo = .{ .loop = loop, .slot = slot };
    if (driver.sweep(io, &slot.connection, loop.worker.now_ms, loop.sweeper.closingIdle(loop.worker.now_ms)) == .close) loop.close(slot);
}

fn beginDrain(loop: *IoUring) void {
    if (!loop.sweeper.beginDrain(loop.worker.now_ms, loop.control.shutdown_timeout_ms, loop.control.idle_grace_ms)) return;
    @atomicStore(bool, &loop.worker.draining, true, .monotonic); // read by handler threads
    if (loop.listener) |l| {
        loop.listener = null;
        // The ring holds its own reference to the listener: end the multishot accept
        // explicitly (a shut listener ends it too, but a shared one, with prefork, is not shut).
        if (loop.accept_armed) loop.cancelAccept();
        // Connections the kernel had completed at the stop may have sent requests: answer
        // them (with `Connection: close`) rather than reset them (see `engine.Door`).
        for (loop.control.takeDoorstep(l.fd)) |fd| loop.takeConnection(fd);
    }
    loop.sweep();
}

fn cancelAccept(loop: *IoUring) void {
    const entry = loop.sqe() catch {
        log.warn("io_uring: cannot cancel the accept; it ends when the listener closes", .{});
        return;
    };
    entry.prep_cancel(userData(.accept, 0, 0), 0);
    entry.user_data = userData(.cancel, 0, 0);
}
