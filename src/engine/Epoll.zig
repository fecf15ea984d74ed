//! The epoll engine: one thread per worker, each with its own SO_REUSEPORT listener and epoll
//! instance, sharing nothing. Sockets are non-blocking and registered once, edge-triggered, for
//! reading and writing; each connection remembers whether it may read or write without
//! waiting, and `drive` runs its `Connection` until it has to wait. Timeouts are checked by a
//! sweep over the connections a few times per shortest timeout, so the hot path arms no timers.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");
const driver = @import("driver.zig");
const SlotTable = @import("slot_table.zig").SlotTable;

const log = std.log.scoped(.saker);

const Epoll = @This();

worker: *Worker,
listener: ?socket.Listener,
control: *engine.Control,
epoll_fd: linux.fd_t,
slots: SlotTable(Slot),
/// Accepting stops until then after EMFILE/ENFILE, so a full fd table is not a busy loop.
accept_paused_until_ms: u64 = 0,
/// Whether the listener may have pending connections (edge-triggered).
listener_ready: bool = false,
/// Deadline sweeps and the drain (see `driver.Sweeper`).
sweeper: driver.Sweeper,

/// epoll_wait batch size.
const events_max = 256;
const listener_tag: u64 = std.math.maxInt(u64);
const connection_events = linux.EPOLL.IN | linux.EPOLL.RDHUP | linux.EPOLL.ET;
const wake_tag: u64 = std.math.maxInt(u64) - 1;
const completion_tag: u64 = std.math.maxInt(u64) - 2;
/// The worker's WebSocket eventfd: work queued by other threads.
const websocket_wake_tag: u64 = std.math.maxInt(u64) - 3;

const Slot = struct {
    connection: Connection,
    fd: linux.fd_t,
    /// Bumped on every reuse, so an event for a previous occupant is recognised.
    generation: u32,
    next_free: u32,
    in_use: bool,
    /// Whether a read might find data (edge-triggered readiness not yet consumed).
    readable: bool,
    /// Whether a write might find room.
    writable: bool,
    /// Whether EPOLLOUT is in the registration (only while a write is waiting for room:
    /// otherwise every ACK would wake the loop for nothing).
    watching_out: bool,
    /// The peer closed its side (EPOLLRDHUP): keep reading until EOF is seen.
    peer_closed: bool,
    /// The client's address (the connection points at it).
    peer: ?std.Io.net.IpAddress,
    file_send: socket.FileSend,
};

/// Runs an epoll engine on the calling thread until the server stops (or, if the engine
/// cannot run, stops the server with an error). The listener stays open (the server closes
/// it).
pub fn run(worker: *Worker, listener: socket.Listener, control: *engine.Control, connections_max: u32) void {
    Worker.current = worker;
    defer Worker.current = null;
    var loop = Epoll.init(worker, listener, control, connections_max) catch |err| {
        log.err("epoll engine failed to start: {t}; stopping the server", .{err});
        return control.fail();
    };
    defer loop.deinit();
    loop.serve();
}

fn init(worker: *Worker, listener: socket.Listener, control: *engine.Control, connections_max: u32) !Epoll {
    const rc = linux.epoll_create1(linux.EPOLL.CLOEXEC);
    if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
    const epoll_fd: linux.fd_t = @intCast(rc);
    errdefer _ = linux.close(epoll_fd);
    var slots: SlotTable(Slot) = try .init(connections_max);
    errdefer slots.deinit(false);
    try add(epoll_fd, listener.fd, linux.EPOLL.IN | linux.EPOLL.ET, listener_tag);
    try add(epoll_fd, control.wake_fd, linux.EPOLL.IN, wake_tag);
    if (worker.websocket_wake_fd != -1) try add(epoll_fd, worker.websocket_wake_fd, linux.EPOLL.IN, websocket_wake_tag);
    if (worker.handler_pool != null) {
        worker.wake_fd = try engine.eventfd();
        errdefer _ = linux.close(worker.wake_fd);
        try add(epoll_fd, worker.wake_fd, linux.EPOLL.IN, completion_tag);
    }
    return .{
        .worker = worker,
        .listener = listener,
        .control = control,
        .epoll_fd = epoll_fd,
        .slots = slots,
        .sweeper = .init(worker.config, worker.now_ms),
    };
}

fn deinit(loop: *Epoll) void {
    for (loop.slots.touchedSlots()) |*slot| {
        if (!slot.in_use) continue;
        if (slot.connection.handling()) {
            // A handler thread still uses it: leave its memory to the process exit.
            loop.worker.abandoned = true;
            continue;
        }
        loop.closeSlot(slot);
    }
    loop.slots.deinit(loop.worker.abandoned);
    _ = linux.close(loop.epoll_fd);
    if (loop.worker.wake_fd >= 0 and !loop.worker.abandoned) {
        _ = linux.close(loop.worker.wake_fd);
        loop.worker.wake_fd = -1;
    }
}

fn add(epoll_fd: linux.fd_t, fd: linux.fd_t, events: u32, data: u64) error{SystemResources}!void {
    var event: linux.epoll_event = .{ .events = events, .data = .{ .u64 = data } };
    const rc = linux.epoll_ctl(epoll_fd, linux.EPOLL.CTL_ADD, fd, &event);
    if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
}

fn serve(loop: *Epoll) void {
    var events: [events_max]linux.epoll_event = undefined;
    loop.worker.updateClock();
    loop.sweeper = .init(loop.worker.config, loop.worker.now_ms);
    while (true) {
        const timeout: i32 = if (loop.listener_ready and loop.acceptAllowed())
            0
        else
            @intCast(loop.sweeper.waitMs(loop.worker.now_ms));
        const rc = linux.epoll_wait(loop.epoll_fd, &events, events_max, timeout);
        loop.worker.updateClock();
        const count: usize = switch (linux.errno(rc)) {
            .SUCCESS => rc,
            .INTR => 0,
            else => |err| {
                log.err("epoll_wait: E.{t}; stopping the server", .{err});
                return loop.control.fail();
            },
        };
        for (events[0..count]) |event| switch (event.data.u64) {
            listener_tag => loop.listener_ready = true,
            wake_tag => loop.beginDrain(),
            completion_tag => loop.onCompletions(),
            websocket_wake_tag => loop.worker.clearWake(),
            else => loop.onEvent(event),
        };
        loop.runWoken();
        if (loop.listener_ready and loop.acceptAllowed()) engine.acceptRound(loop, loop.control, loop.worker.now_ms);
        if (loop.sweeper.due(loop.worker.now_ms)) loop.sweep();
        if (loop.sweeper.finished(loop.slots.active, loop.worker.now_ms)) return;
    }
}

fn acceptAllowed(loop: *const Epoll) bool {
    return loop.listener != null and loop.worker.now_ms >= loop.accept_paused_until_ms;
}

pub fn onAccept(loop: *Epoll, fd: linux.fd_t, peer: ?std.Io.net.IpAddress) void {
    // Over connections_max (server-wide): say so and close, without a slot or an exchange.
    const slot = loop.slots.admit(loop.control, fd, loop.worker.listening.tls != null) orelse return;
    socket.setNoDelay(fd);
    slot.fd = fd;
    slot.readable = false;
    slot.writable = true;
    slot.watching_out = false;
    slot.peer_closed = false;
    slot.file_send = .{};
    slot.connection = .init(loop.worker);
    slot.peer = peer;
    if (slot.peer) |*address| slot.connection.peer = address;
    const index = loop.slots.index(slot);
    const data = @as(u64, slot.generation) << 32 | index;
    add(loop.epoll_fd, fd, connection_events, data) catch {
        loop.closeSlot(slot);
        return;
    };
    // Draining: answer what the client may already have sent; close it if it sent nothing.
    if (loop.sweeper.draining) loop.sweepSlot(slot);
}

fn closeSlot(loop: *Epoll, slot: *Slot) void {
    assert(slot.in_use);
    // close() removes the fd from the epoll set.
    socket.close(slot.fd);
    slot.connection.deinit();
    loop.slots.release(loop.control, slot);
}

fn onEvent(loop: *Epoll, event: linux.epoll_event) void {
    const index: u32 = @truncate(event.data.u64);
    const generation: u32 = @intCast(event.data.u64 >> 32);
    const slot = &loop.slots.slots[index];
    if (!slot.in_use or slot.generation != generation) return; // stale
    const flags = event.events;
    if (flags & (linux.EPOLL.IN | linux.EPOLL.HUP | linux.EPOLL.ERR | linux.EPOLL.RDHUP) != 0) slot.readable = true;
    if (flags & (linux.EPOLL.OUT | linux.EPOLL.HUP | linux.EPOLL.ERR) != 0) slot.writable = true;
    if (flags & (linux.EPOLL.RDHUP | linux.EPOLL.HUP) != 0) slot.peer_closed = true;
    loop.drive(slot);
}

/// Handler pool threads have finished handlers or have chunks to send.
fn onCompletions(loop: *Epoll) void {
    var taken = loop.worker.takeCompletions();
    while (taken.next()) |connection| {
        connection.onPoolEvent();
        loop.drive(@fieldParentPtr("connection", connection));
    }
}

/// Runs the connection until it must wait for the socket (or is closed).
fn drive(loop: *Epoll, slot: *Slot) void {
    if (driver.drive(SlotIo{ .loop = loop, .slot = slot }, &slot.connection) == .close) loop.closeSlot(slot);
}

/// How the epoll engine waits, for `driver.drive`: edge-triggered readiness remembered per
/// slot, EPOLLOUT watched only while a write waits for room.
const SlotIo = struct {
    loop: *Epoll,
    slot: *Slot,

    pub inline fn beforeStep(_: SlotIo, _: *Connection) ?driver.Stop {
        return null;
    }

    pub inline fn awaitRecv(io: SlotIo, _: *Connection) driver.Await {
        if (io.slot.watching_out) {
            io.loop.watch(io.slot, connection_events);
            return .again;
        }
        return if (io.slot.readable) .ready else .later;
    }

    pub inline fn recv(io: SlotIo, buffer: []u8) driver.Result {
        const slot = io.slot;
        const n = socket.recv(slot.fd, buffer) catch |err| {
            if (err == error.WouldBlock) slot.readable = false;
            return driver.fromError(err);
        };
        // A short read drained the socket: the next data raises a new edge.
        if (n > 0 and n < buffer.len and !slot.peer_closed) slot.readable = false;
        return .{ .done = n };
    }

    pub inline fn awaitSend(io: SlotIo, _: *Connection) driver.Await {
        return if (io.slot.writable) .ready else .later;
    }

    pub inline fn writev(io: SlotIo, iovecs: []const std.posix.iovec_const) driver.Result {
        const n = socket.writev(io.slot.fd, iovecs) catch |err| return io.sendFailed(err);
        return .{ .done = n };
    }

    pub inline fn sendfile(io: SlotIo, file: Connection.File) driver.Result {
        const n = socket.sendfile(io.slot.fd, file.fd, file.offset, file.len) catch |err| return io.sendFailed(err);
        return .{ .done = n };
    }

    fn sendFailed(io: SlotIo, err: socket.IoError) driver.Result {
        if (err == error.WouldBlock) io.loop.waitWritable(io.slot);
        return driver.fromError(err);
    }

    pub inline fn shutdownWrite(io: SlotIo) void {
        socket.shutdownWrite(io.slot.fd);
    }

    pub inline fn fileSend(io: SlotIo) ?*socket.FileSend {
        return &io.slot.file_send;
    }

    pub inline fn fd(io: SlotIo) linux.fd_t {
        return io.slot.fd;
    }

    /// Edge-triggered readiness may have been consumed while the connection was busy: read to
    /// find out.
    pub fn unread(io: SlotIo, _: *const Connection) driver.Unread {
        io.slot.readable = true;
        return .maybe;
    }
};

/// Drives the connections that have WebSocket work queued for them (from other threads, or
/// from callbacks of other connections on this one).
fn runWoken(loop: *Epoll) void {
    while (loop.worker.takeWoken()) |session| {
        const c = session.connection orelse continue; // released since it was queued
        const slot: *Slot = @fieldParentPtr("connection", c);
        assert(slot.in_use);
        c.onWake();
        loop.drive(slot);
    }
}

/// The socket is full: ask for EPOLLOUT until it has room again.
fn waitWritable(loop: *Epoll, slot: *Slot) void {
    slot.writable = false;
    if (!slot.watching_out) loop.watch(slot, connection_events | linux.EPOLL.OUT);
}

/// Changes the events the connection is registered for.
fn watch(loop: *Epoll, slot: *Slot, events: u32) void {
    const index = loop.slots.index(slot);
    var event: linux.epoll_event = .{
        .events = events,
        .data = .{ .u64 = @as(u64, slot.generation) << 32 | index },
    };
    const rc = linux.epoll_ctl(loop.epoll_fd, linux.EPOLL.CTL_MOD, slot.fd, &event);
    slot.watching_out = events & linux.EPOLL.OUT != 0;
    if (linux.errno(rc) != .SUCCESS) slot.connection.onError();
}

/// Applies timeouts (and, while draining, closes connections that went idle).
fn sweep(loop: *Epoll) void {
    loop.worker.tick();
    for (loop.slots.touchedSlots()) |*slot| {
        if (slot.in_use) loop.sweepSlot(slot);
    }
    loop.runWoken();
}

fn sweepSlot(loop: *Epoll, slot: *Slot) void {
    const io: SlotIo = .{ .loop = loop, .slot = slot };
    if (driver.sweep(io, &slot.connection, loop.worker.now_ms, loop.sweeper.closingIdle(loop.worker.now_ms)) == .close) loop.closeSlot(slot);
}

fn beginDrain(loop: *Epoll) void {
    if (!loop.sweeper.beginDrain(loop.worker.now_ms, loop.control.shutdown_timeout_ms, loop.control.idle_grace_ms)) return;
    @atomicStore(bool, &loop.worker.draining, true, .monotonic); // read by handler threads
    // Level-triggered and never reset: stop watching it so epoll_wait does not spin.
    _ = linux.epoll_ctl(loop.epoll_fd, linux.EPOLL.CTL_DEL, loop.control.wake_fd, null);
    if (loop.listener) |l| {
        _ = linux.epoll_ctl(loop.epoll_fd, linux.EPOLL.CTL_DEL, l.fd, null);
        loop.listener = null;
        loop.listener_ready = false;
        // Connections the kernel had completed at the stop may have sent requests: answer
        // them (with `Connection: close`) rather than reset them (see `engine.Door`).
        for (loop.control.takeDoorstep(l.fd)) |fd| loop.onAccept(fd, socket.peerName(fd));
    }
    loop.sweep();
}
