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
const mapped = @import("../mapped.zig");

const log = std.log.scoped(.saker);

const Epoll = @This();

worker: *Worker,
listener: ?socket.Listener,
control: *engine.Control,
epoll_fd: linux.fd_t,
/// Connection slots, touched lazily; `slots_touched` have been used at least once.
slots: []Slot,
slots_touched: u32 = 0,
/// Head of the free list of slots (`none` when empty).
free_slot: u32 = none,
/// Slots in use.
active: u32 = 0,
/// Accepting stops until then after EMFILE/ENFILE, so a full fd table is not a busy loop.
accept_paused_until_ms: u64 = 0,
/// Whether the listener may have pending connections (edge-triggered).
listener_ready: bool = false,
draining: bool = false,
drain_deadline_ms: u64 = 0,
next_sweep_ms: u64 = 0,
sweep_interval_ms: u64,

const none = std.math.maxInt(u32);
/// epoll_wait batch size.
const events_max = 256;
/// Connections accepted per loop iteration before other work gets a turn.
const accepts_per_round = 64;
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
    cork: socket.Cork,
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
    const slots = try mapped.alloc(Slot, connections_max);
    errdefer mapped.free(slots);
    try add(epoll_fd, listener.fd, linux.EPOLL.IN | linux.EPOLL.ET, listener_tag);
    try add(epoll_fd, control.wake_fd, linux.EPOLL.IN, wake_tag);
    if (worker.websocket_wake_fd != -1) try add(epoll_fd, worker.websocket_wake_fd, linux.EPOLL.IN, websocket_wake_tag);
    if (worker.handler_pool != null) {
        worker.wake_fd = try engine.eventfd();
        errdefer _ = linux.close(worker.wake_fd);
        try add(epoll_fd, worker.wake_fd, linux.EPOLL.IN, completion_tag);
    }
    const config = worker.config;
    const shortest = @min(config.header_timeout_ms, config.body_timeout_ms, config.idle_timeout_ms, config.write_timeout_ms, config.linger_timeout_ms);
    return .{
        .worker = worker,
        .listener = listener,
        .control = control,
        .epoll_fd = epoll_fd,
        .slots = slots,
        .sweep_interval_ms = std.math.clamp(shortest / 4, 5, Worker.tick_interval_ms),
    };
}

fn deinit(loop: *Epoll) void {
    for (loop.slots[0..loop.slots_touched]) |*slot| {
        if (!slot.in_use) continue;
        if (slot.connection.handling()) {
            // A handler thread still uses it: leave its memory to the process exit.
            loop.worker.abandoned = true;
            continue;
        }
        loop.closeSlot(slot);
    }
    if (!loop.worker.abandoned) mapped.free(loop.slots);
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
    loop.next_sweep_ms = loop.worker.now_ms + loop.sweep_interval_ms;
    while (true) {
        const timeout: i32 = if (loop.listener_ready and loop.acceptAllowed())
            0
        else
            @intCast(loop.next_sweep_ms -| loop.worker.now_ms);
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
        if (loop.listener_ready and loop.acceptAllowed()) loop.acceptRound();
        if (loop.worker.now_ms >= loop.next_sweep_ms) {
            loop.sweep();
            loop.next_sweep_ms = loop.worker.now_ms + loop.sweep_interval_ms;
        }
        if (loop.draining) {
            if (loop.active == 0) return;
            if (loop.worker.now_ms >= loop.drain_deadline_ms) {
                log.warn("shutdown timeout: closing {d} connections with requests in flight", .{loop.active});
                return;
            }
        }
    }
}

fn acceptAllowed(loop: *const Epoll) bool {
    return loop.listener != null and loop.worker.now_ms >= loop.accept_paused_until_ms;
}

fn acceptRound(loop: *Epoll) void {
    const listener = loop.listener.?;
    for (0..accepts_per_round) |_| {
        var peer: ?std.Io.net.IpAddress = null;
        const fd = socket.acceptPeer(listener.fd, true, &peer) catch |err| switch (err) {
            error.WouldBlock => {
                loop.listener_ready = false;
                return;
            },
            error.Interrupted, error.ConnectionAborted => continue,
            error.SystemResources, error.ListenerClosed, error.Unexpected => {
                engine.logAcceptPause(loop.control, err);
                loop.accept_paused_until_ms = loop.worker.now_ms + engine.accept_pause_ms;
                return;
            },
        };
        loop.onAccept(fd, peer);
    }
}

fn onAccept(loop: *Epoll, fd: linux.fd_t, peer: ?std.Io.net.IpAddress) void {
    // Over connections_max (server-wide): say so and close, without a slot or an exchange.
    if (!loop.control.admit()) return engine.refuse(fd);
    const slot = loop.takeSlot() orelse {
        loop.control.release();
        return engine.refuse(fd);
    };
    socket.setNoDelay(fd);
    slot.fd = fd;
    slot.readable = false;
    slot.writable = true;
    slot.watching_out = false;
    slot.peer_closed = false;
    slot.cork = .{};
    slot.connection = .init(loop.worker);
    slot.peer = peer;
    if (slot.peer) |*address| slot.connection.peer = address;
    const index: u32 = @intCast(slot - loop.slots.ptr);
    const data = @as(u64, slot.generation) << 32 | index;
    add(loop.epoll_fd, fd, connection_events, data) catch {
        loop.closeSlot(slot);
        return;
    };
    if (loop.draining) {
        // Read what the client may already have sent before deciding it is idle.
        slot.readable = true;
        loop.drive(slot);
        if (slot.in_use) {
            slot.connection.drain();
            loop.drive(slot);
        }
    }
}

fn takeSlot(loop: *Epoll) ?*Slot {
    const slot = if (loop.free_slot != none) blk: {
        const slot = &loop.slots[loop.free_slot];
        loop.free_slot = slot.next_free;
        break :blk slot;
    } else blk: {
        if (loop.slots_touched == loop.slots.len) return null;
        const slot = &loop.slots[loop.slots_touched];
        slot.generation = 0;
        loop.slots_touched += 1;
        break :blk slot;
    };
    slot.in_use = true;
    slot.generation +%= 1;
    loop.active += 1;
    return slot;
}

fn closeSlot(loop: *Epoll, slot: *Slot) void {
    assert(slot.in_use);
    // close() removes the fd from the epoll set.
    socket.close(slot.fd);
    slot.connection.deinit();
    slot.in_use = false;
    slot.next_free = loop.free_slot;
    loop.free_slot = @intCast(slot - loop.slots.ptr);
    loop.active -= 1;
    loop.control.release();
}

fn onEvent(loop: *Epoll, event: linux.epoll_event) void {
    const index: u32 = @truncate(event.data.u64);
    const generation: u32 = @intCast(event.data.u64 >> 32);
    const slot = &loop.slots[index];
    if (!slot.in_use or slot.generation != generation) return; // stale
    const flags = event.events;
    if (flags & (linux.EPOLL.IN | linux.EPOLL.HUP | linux.EPOLL.ERR | linux.EPOLL.RDHUP) != 0) slot.readable = true;
    if (flags & (linux.EPOLL.OUT | linux.EPOLL.HUP | linux.EPOLL.ERR) != 0) slot.writable = true;
    if (flags & (linux.EPOLL.RDHUP | linux.EPOLL.HUP) != 0) slot.peer_closed = true;
    loop.drive(slot);
}

/// Handler pool threads have finished handlers or have chunks to send.
fn onCompletions(loop: *Epoll) void {
    var list = loop.worker.takeCompletions();
    while (list) |connection| {
        list = connection.exchange.?.next_completion;
        connection.onPoolEvent();
        loop.drive(@fieldParentPtr("connection", connection));
    }
}

/// Runs the connection until it must wait for the socket (or is closed).
fn drive(loop: *Epoll, slot: *Slot) void {
    const c = &slot.connection;
    // Each step moves bytes or changes state; the bound only catches a connection bug.
    for (0..1_000_000) |_| {
        switch (c.next()) {
            .recv => {
                if (slot.watching_out) {
                    loop.watch(slot, connection_events);
                    continue;
                }
                if (!slot.readable) return;
                const buffer = c.recvBuffer() orelse return loop.closeSlot(slot);
                const n = socket.recv(slot.fd, buffer) catch |err| switch (err) {
                    error.WouldBlock => {
                        slot.readable = false;
                        c.onWouldBlock();
                        return;
                    },
                    error.Interrupted => continue,
                    error.ConnectionLost, error.Unexpected => {
                        c.onError();
                        continue;
                    },
                };
                // A short read drained the socket: the next data raises a new edge.
                if (n > 0 and n < buffer.len and !slot.peer_closed) slot.readable = false;
                c.onRecv(n);
            },
            .send => |iovecs| {
                if (!slot.writable) return;
                const file = c.fileFollows();
                slot.cork.beforeHead(slot.fd, if (file) |f| f.len else null, loop.worker.config.cork_file_bytes_max);
                const n = socket.writev(slot.fd, iovecs) catch |err| switch (err) {
                    error.WouldBlock => return loop.waitWritable(slot),
                    error.Interrupted => continue,
                    error.ConnectionLost, error.Unexpected => {
                        c.onError();
                        continue;
                    },
                };
                c.onSend(n);
            },
            .send_file => |file| {
                if (!slot.writable) return;
                const n = socket.sendfile(slot.fd, file.fd, file.offset, file.len) catch |err| switch (err) {
                    error.WouldBlock => return loop.waitWritable(slot),
                    error.Interrupted => continue,
                    error.ConnectionLost, error.Unexpected => {
                        c.onError();
                        continue;
                    },
                };
                if (n == 0) { // the file shrank under us
                    c.onError();
                    continue;
                }
                c.onSend(n);
                slot.cork.afterFile(slot.fd, c.fileFollows() != null);
            },
            .shutdown => {
                socket.shutdownWrite(slot.fd);
                c.onShutdown();
            },
            .close => return loop.closeSlot(slot),
            .wait => return,
        }
    }
    log.err("connection made no progress in 1000000 steps; closing it", .{});
    loop.closeSlot(slot);
}

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
    const index: u32 = @intCast(slot - loop.slots.ptr);
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
    const now = loop.worker.now_ms;
    for (loop.slots[0..loop.slots_touched]) |*slot| {
        if (!slot.in_use) continue;
        if (loop.draining and slot.connection.phase == .idle) {
            // Idle means nothing to read now, not merely nothing read yet: a request may be
            // waiting in the socket.
            slot.readable = true;
            loop.drive(slot);
            if (!slot.in_use) continue;
            slot.connection.drain();
        }
        // An open WebSocket is told 1001 and closes once the client answers.
        if (loop.draining and slot.connection.phase == .websocket) slot.connection.drain();
        if (now >= slot.connection.deadline()) slot.connection.onTimeout();
        loop.drive(slot);
    }
    loop.runWoken();
}

fn beginDrain(loop: *Epoll) void {
    if (loop.draining) return;
    loop.draining = true;
    @atomicStore(bool, &loop.worker.draining, true, .monotonic); // read by handler threads
    loop.drain_deadline_ms = loop.worker.now_ms + loop.control.shutdown_timeout_ms;
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
    loop.sweep_interval_ms = @min(loop.sweep_interval_ms, 10);
    loop.sweep();
}
