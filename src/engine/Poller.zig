//! One acceptor of the `worker_pool` engine: it accepts on its SO_REUSEPORT listener and parks
//! connections that have nothing to do (new, idle between requests, waiting for more of a
//! head or body, waiting for room to write) in its epoll instance, each registered with
//! EPOLLONESHOT. When one becomes ready it goes on the pool's queue, and a pool thread serves
//! it until it would block, then parks it here again (`Slot.park`). Timeouts of parked
//! connections are applied by a sweep, a few times per shortest timeout, as in the epoll
//! engine: the sweep hands an expired connection to the pool, which answers or closes it.
//!
//! Who owns a slot is one atomic word (`Slot.state`): the poller thread while it is parked,
//! one pool thread while it is queued or being served. Only the poller thread takes a parked
//! slot; only the owning pool thread parks one, so every field but `state` has one owner.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const sync = @import("../sync.zig");
const clock = @import("../clock.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");
const WorkerPool = @import("WorkerPool.zig");
const driver = @import("driver.zig");

const log = std.log.scoped(.saker);

const Poller = @This();

pool: *WorkerPool,
epoll_fd: linux.fd_t,
/// Connection slots, touched lazily; `slots_touched` have been used at least once (the
/// poller thread alone grows it).
slots: []Slot,
slots_touched: u32 = 0,
/// Free slots, pushed by whichever thread closes a connection.
free_mutex: sync.Mutex = .{},
free_slot: u32 = none,
/// Slots in use (parked, queued or being served).
active: std.atomic.Value(u32) = .init(0),

// The rest belongs to the poller thread.
listener: ?socket.Listener = null,
/// What the listener's connections share (TLS, PROXY protocol).
listening: *const engine.Listening = &engine.Listening.plaintext,
/// Whether the listener may have pending connections (edge-triggered).
listener_ready: bool = false,
/// Accepting stops until then after an accept error, so it is never a busy loop.
accept_paused_until_ms: u64 = 0,
now_ms: u64 = 0,
/// Deadline sweeps and the drain (see `driver.Sweeper`; the drain's deadline is the pool's,
/// shared by its pollers).
sweeper: driver.Sweeper,
next_tick_ms: u64 = 0,

const none = std.math.maxInt(u32);
/// epoll_wait batch size.
const events_max = 256;
const listener_tag: u64 = std.math.maxInt(u64);
const stop_tag: u64 = std.math.maxInt(u64) - 1;

/// What a parked connection waits for.
pub const wait_readable = linux.EPOLL.IN | linux.EPOLL.RDHUP | linux.EPOLL.ONESHOT;
pub const wait_writable = linux.EPOLL.OUT | linux.EPOLL.ONESHOT;

/// One connection and what travels with it between the poller and the pool.
pub const Slot = struct {
    connection: Connection,
    poller: *Poller,
    fd: linux.fd_t,
    /// Generation (high 32 bits, bumped on every reuse so stale events are recognised) and
    /// `State` (low bits).
    state: std.atomic.Value(u64),
    next_free: u32,
    /// The client's address (the connection points at it).
    peer: ?std.Io.net.IpAddress,
    /// The worker whose buffers (exchange, WebSocket session) the connection holds; null
    /// while it holds none (idle between requests), so idle connections pin no memory.
    worker: ?*WorkerPool.PoolWorker,
    /// Blocking output for handlers that stream (they run on the pool thread).
    sink: Connection.Sink,
    file_send: socket.FileSend,
    /// The worker's WebSocket wake eventfd is in this poller's epoll set (edge-triggered),
    /// so messages sent from other threads wake a parked WebSocket connection.
    wake_registered: bool,

    pub const State = enum(u32) {
        free,
        /// In the epoll set; the poller owns it.
        parked,
        /// Queued or being served; a pool thread owns it.
        active,
        /// Active, and an event arrived meanwhile: the owner must look again before parking.
        notified,
    };

    fn pack(generation: u32, state: State) u64 {
        return @as(u64, generation) << 32 | @backingInt(state);
    }

    fn generationOf(word: u64) u32 {
        return @intCast(word >> 32);
    }

    fn stateOf(word: u64) State {
        return @fromBackingInt(@as(u32, @truncate(word)));
    }

    /// The epoll data of this slot's registrations: generation and index.
    pub fn tag(slot: *const Slot) u64 {
        const index: u32 = @intCast(slot - slot.poller.slots.ptr);
        // The generation changes only while the slot is free; the owner calls this.
        return @as(u64, generationOf(slot.state.load(.monotonic))) << 32 | index;
    }

    /// Pool thread: registers for `events` (one shot) and gives the slot to the poller.
    /// Returns false when an event arrived meanwhile or the registration failed (then the
    /// connection is marked failed): the caller still owns the slot and goes on serving it.
    pub fn park(slot: *Slot, events: u32) bool {
        var event: linux.epoll_event = .{ .events = events, .data = .{ .u64 = slot.tag() } };
        const rc = linux.epoll_ctl(slot.poller.epoll_fd, linux.EPOLL.CTL_MOD, slot.fd, &event);
        if (linux.errno(rc) != .SUCCESS) {
            slot.connection.onError();
            return false;
        }
        return slot.transfer(.parked);
    }

    /// Moves an owned (active or notified) slot to `to`; false, leaving it active, if it
    /// was notified.
    fn transfer(slot: *Slot, to: State) bool {
        const word = slot.state.load(.acquire);
        const generation = generationOf(word);
        switch (stateOf(word)) {
            .active => if (slot.state.cmpxchgStrong(word, pack(generation, to), .acq_rel, .acquire) == null) return true,
            .notified => {},
            .free, .parked => unreachable, // the caller owns it
        }
        // Notified (the only change another thread makes to an active slot).
        slot.state.store(pack(generation, .active), .release);
        return false;
    }

    /// Registers the worker's WebSocket wake eventfd with the poller (once per connection).
    pub fn watchWake(slot: *Slot, wake_fd: linux.fd_t) error{SystemResources}!void {
        if (slot.wake_registered) return;
        var event: linux.epoll_event = .{ .events = linux.EPOLL.IN | linux.EPOLL.ET, .data = .{ .u64 = slot.tag() } };
        const rc = linux.epoll_ctl(slot.poller.epoll_fd, linux.EPOLL.CTL_ADD, wake_fd, &event);
        if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
        slot.wake_registered = true;
    }

    /// Removes the wake eventfd again (the worker outlives the connection).
    pub fn unwatchWake(slot: *Slot, wake_fd: linux.fd_t) void {
        if (!slot.wake_registered) return;
        _ = linux.epoll_ctl(slot.poller.epoll_fd, linux.EPOLL.CTL_DEL, wake_fd, null);
        slot.wake_registered = false;
    }
};

/// Creates the epoll instance and reserves `slots_max` slots (mapped, not touched).
pub fn init(pool: *WorkerPool, slots_max: u32) error{ SystemResources, OutOfMemory }!Poller {
    const rc = linux.epoll_create1(linux.EPOLL.CLOEXEC);
    if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
    const epoll_fd: linux.fd_t = @intCast(rc);
    errdefer _ = linux.close(epoll_fd);
    const slots = try std.heap.page_allocator.alloc(Slot, slots_max);
    return .{
        .pool = pool,
        .epoll_fd = epoll_fd,
        .slots = slots,
        .sweeper = .init(pool.shared.config, 0),
    };
}

/// Frees the slots and closes the epoll instance. Every slot must be free (see
/// `WorkerPool.stop`); pool threads must be gone.
pub fn deinit(poller: *Poller) void {
    assert(poller.active.load(.acquire) == 0);
    std.heap.page_allocator.free(poller.slots);
    _ = linux.close(poller.epoll_fd);
}

/// The slots that may be in use (for clean-up once every thread has stopped).
pub fn touchedSlots(poller: *Poller) []Slot {
    return poller.slots[0..poller.slots_touched];
}

/// Whether `slot` holds a connection (single-threaded callers only).
pub fn inUse(slot: *const Slot) bool {
    return Slot.stateOf(slot.state.load(.monotonic)) != .free;
}

/// Takes a parked slot for closing once every other thread has stopped.
pub fn takeForCleanup(slot: *Slot) void {
    slot.state.store(Slot.pack(Slot.generationOf(slot.state.load(.monotonic)), .active), .monotonic);
}

/// Accepts, parks and hands over connections until the server stops and the connections
/// this poller accepted are finished (or `shutdown_timeout_ms` has passed).
pub fn run(poller: *Poller, listener: socket.Listener, listening: *const engine.Listening) void {
    poller.listener = listener;
    poller.listening = listening;
    const control = poller.pool.shared.control;
    // An acceptor that cannot watch its listener or the stop cannot go on: the server stops
    // and reports it (the server, not an engine, closes listeners).
    add(poller.epoll_fd, listener.fd, linux.EPOLL.IN | linux.EPOLL.ET, listener_tag) catch {
        log.err("worker pool: cannot watch the listener", .{});
        return control.fail();
    };
    // Level-triggered: it stays readable once stopped; it is removed when the drain begins.
    add(poller.epoll_fd, control.wake_fd, linux.EPOLL.IN, stop_tag) catch {
        log.err("worker pool: cannot watch the stop event", .{});
        return control.fail();
    };
    poller.updateClock();
    poller.sweeper = .init(poller.pool.shared.config, poller.now_ms);
    var events: [events_max]linux.epoll_event = undefined;
    while (true) {
        const timeout: i32 = if (poller.listener_ready and poller.acceptAllowed()) 0 else poller.waitMs();
        const rc = linux.epoll_wait(poller.epoll_fd, &events, events_max, timeout);
        poller.updateClock();
        poller.pool.shared.tick(&poller.next_tick_ms);
        const count: usize = switch (linux.errno(rc)) {
            .SUCCESS => rc,
            .INTR => 0,
            else => |err| blk: {
                // Only EBADF/EFAULT/EINVAL, none of which a retry mends; wait, never spin.
                log.err("epoll_wait: E.{t}", .{err});
                sleepMs(100);
                break :blk 0;
            },
        };
        for (events[0..count]) |event| switch (event.data.u64) {
            listener_tag => poller.listener_ready = true,
            stop_tag => poller.beginDrain(),
            else => poller.onEvent(event.data.u64),
        };
        if (poller.listener_ready and poller.acceptAllowed()) engine.acceptRound(poller, poller.pool.shared.control, poller.now_ms);
        if (poller.sweeper.due(poller.now_ms)) poller.sweep();
        if (poller.sweeper.draining) {
            if (poller.active.load(.acquire) == 0) return;
            if (poller.now_ms >= poller.pool.drainDeadline()) {
                poller.closeParked();
                return;
            }
        }
    }
}

/// How long epoll_wait may sleep: until the next sweep, the end of an accept pause or the
/// next tick, whichever comes first.
fn waitMs(poller: *const Poller) i32 {
    var until = poller.sweeper.next_ms;
    if (poller.listener_ready) until = @min(until, poller.accept_paused_until_ms);
    return @intCast(@min(until -| poller.now_ms, Worker.tick_interval_ms));
}

fn updateClock(poller: *Poller) void {
    poller.now_ms = clock.milliseconds(.MONOTONIC_COARSE);
}

fn add(epoll_fd: linux.fd_t, fd: linux.fd_t, events: u32, data: u64) error{SystemResources}!void {
    var event: linux.epoll_event = .{ .events = events, .data = .{ .u64 = data } };
    const rc = linux.epoll_ctl(epoll_fd, linux.EPOLL.CTL_ADD, fd, &event);
    if (linux.errno(rc) != .SUCCESS) return error.SystemResources;
}

fn acceptAllowed(poller: *const Poller) bool {
    return poller.listener != null and poller.now_ms >= poller.accept_paused_until_ms;
}

pub fn onAccept(poller: *Poller, fd: linux.fd_t, peer: ?std.Io.net.IpAddress) void {
    const shared = poller.pool.shared;
    if (!shared.takeConnection()) return engine.refuse(poller.listening.tls != null, fd); // over connections_max
    const slot = poller.takeSlot() orelse {
        shared.releaseConnection();
        return engine.refuse(poller.listening.tls != null, fd);
    };
    socket.setNoDelay(fd);
    slot.fd = fd;
    slot.peer = peer;
    slot.worker = null;
    slot.file_send = .{};
    slot.wake_registered = false;
    slot.sink = .{ .context = slot, .writeAll = WorkerPool.sinkWriteAll, .read = WorkerPool.sinkRead };
    // No worker yet: a pool thread lends one when the connection has work (see `Slot`).
    slot.connection = .initParked(poller.now_ms, shared.config, &slot.sink, poller.listening);
    if (slot.peer) |*address| slot.connection.peer = address;
    const generation = Slot.generationOf(slot.state.load(.monotonic));
    slot.state.store(Slot.pack(generation, .parked), .release);
    add(poller.epoll_fd, fd, wait_readable, slot.tag()) catch {
        slot.state.store(Slot.pack(generation, .active), .release);
        socket.close(fd);
        slot.connection.deinit();
        poller.release(slot);
        return;
    };
    // Connections the kernel completed before the stop may have sent requests: the pool
    // reads what is there and answers it (with `Connection: close`) or closes.
    if (poller.sweeper.draining) poller.takeParked(slot, slot.state.load(.monotonic));
}

fn takeSlot(poller: *Poller) ?*Slot {
    poller.free_mutex.lock();
    const free = poller.free_slot;
    if (free != none) poller.free_slot = poller.slots[free].next_free;
    poller.free_mutex.unlock();
    const slot = if (free != none) &poller.slots[free] else blk: {
        if (poller.slots_touched == poller.slots.len) return null;
        const slot = &poller.slots[poller.slots_touched];
        slot.poller = poller;
        slot.state = .init(Slot.pack(0, .free));
        poller.slots_touched += 1;
        break :blk slot;
    };
    const word = slot.state.load(.monotonic);
    assert(Slot.stateOf(word) == .free);
    slot.state.store(Slot.pack(Slot.generationOf(word) +% 1, .active), .monotonic);
    _ = poller.active.fetchAdd(1, .acq_rel);
    return slot;
}

/// Any thread that owns `slot` and has closed its connection: frees the slot.
pub fn release(poller: *Poller, slot: *Slot) void {
    assert(slot.poller == poller);
    const generation = Slot.generationOf(slot.state.load(.monotonic));
    const index: u32 = @intCast(slot - poller.slots.ptr);
    poller.free_mutex.lock();
    slot.state.store(Slot.pack(generation, .free), .release);
    slot.next_free = poller.free_slot;
    poller.free_slot = index;
    poller.free_mutex.unlock();
    poller.pool.shared.releaseConnection();
    _ = poller.active.fetchSub(1, .acq_rel);
}

/// An event for a connection: take it if parked (and queue it), or tell its owner.
fn onEvent(poller: *Poller, data: u64) void {
    const index: u32 = @truncate(data);
    if (index >= poller.slots_touched) return;
    const slot = &poller.slots[index];
    const generation: u32 = @intCast(data >> 32);
    var word = slot.state.load(.acquire);
    while (Slot.generationOf(word) == generation) {
        const to: Slot.State = switch (Slot.stateOf(word)) {
            .parked => .active,
            .active => .notified,
            .notified, .free => return,
        };
        word = slot.state.cmpxchgWeak(word, Slot.pack(generation, to), .acq_rel, .acquire) orelse {
            if (to == .active) poller.pool.hand(slot);
            return;
        };
    }
}

/// Takes a parked slot (the poller's own) and queues it for the pool.
fn takeParked(poller: *Poller, slot: *Slot, word: u64) void {
    assert(Slot.stateOf(word) == .parked);
    // Only this thread changes a parked slot.
    slot.state.store(Slot.pack(Slot.generationOf(word), .active), .release);
    poller.pool.hand(slot);
}

/// Hands connections whose timeout has passed to the pool (which answers 408 or closes);
/// while draining, hands over every parked connection so idle ones close.
fn sweep(poller: *Poller) void {
    for (poller.slots[0..poller.slots_touched]) |*slot| {
        const word = slot.state.load(.acquire);
        if (Slot.stateOf(word) != .parked) continue;
        // Parked: the fields are this thread's to read.
        const c = &slot.connection;
        if (poller.now_ms >= c.deadline() or (poller.sweeper.draining and (c.idle() or c.saysGoodbye()))) {
            poller.takeParked(slot, word);
        }
    }
}

/// The server is stopping: answer the connections the kernel had completed at the stop,
/// stop watching the listener (the server closes it) and let the pool close idle
/// connections; in-flight requests finish.
fn beginDrain(poller: *Poller) void {
    if (!poller.sweeper.beginDrain(poller.now_ms, poller.pool.shared.config.shutdown_timeout_ms, 0)) return;
    poller.pool.beginDrain(poller.now_ms);
    const control = poller.pool.shared.control;
    // Level-triggered and never reset: stop watching it so epoll_wait does not spin.
    _ = linux.epoll_ctl(poller.epoll_fd, linux.EPOLL.CTL_DEL, control.wake_fd, null);
    if (poller.listener) |l| {
        _ = linux.epoll_ctl(poller.epoll_fd, linux.EPOLL.CTL_DEL, l.fd, null);
        poller.listener = null;
        poller.listener_ready = false;
        // They may have sent requests: answer them (with `Connection: close`) rather than
        // reset them (see `engine.Door`).
        for (control.takeDoorstep(l.fd)) |fd| poller.onAccept(fd, socket.peerName(fd));
    }
    poller.sweep();
}

/// The shutdown timeout passed: closes the connections still parked here. (Those a pool
/// thread holds are closed by it; any parked later are closed by `WorkerPool.stop`.)
fn closeParked(poller: *Poller) void {
    var closed: u32 = 0;
    for (poller.slots[0..poller.slots_touched]) |*slot| {
        const word = slot.state.load(.acquire);
        if (Slot.stateOf(word) != .parked) continue;
        slot.state.store(Slot.pack(Slot.generationOf(word), .active), .release);
        poller.pool.closeSlot(slot, null);
        closed += 1;
    }
    if (closed > 0) log.warn("shutdown timeout: closed {d} connections with requests in flight", .{closed});
}

fn sleepMs(ms: u32) void {
    var none_ready: [0]std.posix.pollfd = .{};
    _ = std.posix.poll(&none_ready, @intCast(ms)) catch {};
}
