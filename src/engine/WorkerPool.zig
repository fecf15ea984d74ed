//! The worker-pool engine: an acceptor thread per listener (SO_REUSEPORT), each with a poller
//! (`Poller.zig`), and a fixed pool of `pool_threads` threads. Pool threads only ever hold
//! connections that have work: a poller parks new, idle and half-received connections in its
//! epoll set (EPOLLONESHOT) and puts one on the bounded queue when it becomes readable; a pool
//! thread serves it with non-blocking I/O through the same `Connection` state machine until a
//! read or write would block, then parks it again. An idle keep-alive connection or a
//! slowloris therefore costs a parked slot, not a thread. Handlers run on the pool thread, so
//! a streamed response (`res.flush`) blocks that thread while the client reads, each stall
//! bounded by `write_timeout_ms`.
//!
//! A full queue blocks the poller handing work over, so the kernel's queues absorb bursts:
//! back-pressure, not unbounded memory. The queue (`sync.Queue`) is a mutex whose sleepers
//! are woken last-in first-out, so under light load a few warm threads do the work;
//! `bench/queue.zig` measures it against a lock-free ring (README, Engines).
//!
//! Memory: a connection borrows a `Worker` (exchange buffers, WebSocket session) from a
//! shared set while it holds request state, and gives it back when it goes idle; each pool
//! thread keeps one spare so the common case takes no lock.
const std = @import("std");
const assert = std.debug.assert;
const posix = std.posix;
const linux = std.os.linux;
const socket = @import("socket.zig");
const engine = @import("../engine.zig");
const sync = @import("../sync.zig");
const blocking_io = @import("blocking_io.zig");
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");
const driver = @import("driver.zig");
const Here = @import("Here.zig");
const Poller = @import("Poller.zig");
const Slot = Poller.Slot;

const log = std.log.scoped(.saker);

const WorkerPool = @This();

shared: *engine.Shared,
queue: sync.Queue(*Slot),
queue_storage: []*Slot,
threads: []std.Thread,
/// One per listener; each acceptor thread claims the next.
pollers: []Poller,
pollers_claimed: std.atomic.Value(u32) = .init(0),
workers: WorkerSet,
/// When in-flight requests must be finished after a stop (monotonic ms; max until then).
drain_deadline_ms: std.atomic.Value(u64) = .init(std.math.maxInt(u64)),

/// A worker lent to connections one at a time.
pub const PoolWorker = struct {
    worker: Worker,
    next_free: ?*PoolWorker,
    /// `worker` was initialised.
    ready: bool,
};

/// The workers connections borrow, made on first use: at most one per connection plus one
/// spare per pool thread.
const WorkerSet = struct {
    entries: []PoolWorker,
    touched: u32 = 0,
    free: ?*PoolWorker = null,
    mutex: sync.Mutex = .{},

    fn acquire(set: *WorkerSet, shared: *engine.Shared) ?*PoolWorker {
        set.mutex.lock();
        const pw = if (set.free) |free| blk: {
            set.free = free.next_free;
            break :blk free;
        } else blk: {
            if (set.touched == set.entries.len) {
                set.mutex.unlock();
                return null;
            }
            const pw = &set.entries[set.touched];
            pw.ready = false;
            set.touched += 1;
            break :blk pw;
        };
        set.mutex.unlock();
        if (!pw.ready) {
            // Lent to connections of every listener: each brings its own transport (see
            // `Connection.initParked`), so the worker serves no listener in particular.
            shared.initWorker(&pw.worker, &engine.Listening.plaintext) catch |err| {
                log.warn("worker pool: cannot set up a worker: {t}", .{err});
                set.release(pw);
                return null;
            };
            pw.ready = true;
        }
        return pw;
    }

    fn release(set: *WorkerSet, pw: *PoolWorker) void {
        assert(!pw.ready or pw.worker.exchanges_busy == 0);
        set.mutex.lock();
        pw.next_free = set.free;
        set.free = pw;
        set.mutex.unlock();
    }

    /// Once every thread has stopped.
    fn deinit(set: *WorkerSet) void {
        for (set.entries[0..set.touched]) |*pw| if (pw.ready) pw.worker.deinit();
        std.heap.page_allocator.free(set.entries);
    }
};

/// Starts `config.pool_threads` serving threads and prepares `poller_count` pollers, one per
/// listening socket.
pub fn start(pool: *WorkerPool, shared: *engine.Shared, poller_count: usize) !void {
    const config = shared.config;
    const gpa = shared.gpa;
    const queue_storage = try gpa.alloc(*Slot, config.pool_queue_max);
    errdefer gpa.free(queue_storage);
    const threads = try gpa.alloc(std.Thread, config.pool_threads);
    errdefer gpa.free(threads);
    const pollers = try gpa.alloc(Poller, poller_count);
    errdefer gpa.free(pollers);
    const entries = try std.heap.page_allocator.alloc(PoolWorker, @as(usize, config.connections_max) + config.pool_threads);
    errdefer std.heap.page_allocator.free(entries);
    pool.* = .{
        .shared = shared,
        .queue = .init(queue_storage),
        .queue_storage = queue_storage,
        .threads = threads,
        .pollers = pollers,
        .workers = .{ .entries = entries },
    };
    for (pollers, 0..) |*poller, i| {
        poller.* = Poller.init(pool, config.connections_max) catch |err| {
            for (pollers[0..i]) |*p| p.deinit();
            return err;
        };
    }
    errdefer for (pollers) |*p| p.deinit();
    for (threads, 0..) |*thread, i| {
        thread.* = std.Thread.spawn(.{ .stack_size = sync.threadStackBytes(config.thread_stack_bytes) }, threadMain, .{pool}) catch |err| {
            pool.queue.close();
            for (threads[0..i]) |t| t.join();
            return err;
        };
    }
}

/// Closes the queue, lets the threads serve what is queued, joins them, and closes whatever
/// connection is still parked. Call after every acceptor thread has returned.
pub fn stop(pool: *WorkerPool) void {
    pool.queue.close();
    for (pool.threads) |thread| thread.join();
    for (pool.pollers) |*poller| {
        for (poller.touchedSlots()) |*slot| {
            if (!Poller.inUse(slot)) continue;
            Poller.takeForCleanup(slot);
            pool.closeSlot(slot, null);
        }
        poller.deinit();
    }
    pool.workers.deinit();
    const gpa = pool.shared.gpa;
    gpa.free(pool.pollers);
    gpa.free(pool.threads);
    gpa.free(pool.queue_storage);
}

/// An acceptor thread: runs the next poller on `listener` (whose connections share
/// `listening`) until the server stops.
pub fn accept(pool: *WorkerPool, listener: socket.Listener, listening: *const engine.Listening) void {
    const index = pool.pollers_claimed.fetchAdd(1, .acq_rel);
    if (index >= pool.pollers.len) {
        log.err("worker pool: more listeners than pollers", .{});
        return pool.shared.control.fail();
    }
    pool.pollers[index].run(listener, listening);
}

/// A poller: `slot` has work; queue it for a pool thread (waiting while the queue is full).
pub fn hand(pool: *WorkerPool, slot: *Slot) void {
    pool.queue.put(slot) catch pool.closeSlot(slot, null); // closed: the pool is gone
}

/// The server is stopping (seen first at `now_ms`): fixes the drain deadline.
pub fn beginDrain(pool: *WorkerPool, now_ms: u64) void {
    const deadline = now_ms + pool.shared.config.shutdown_timeout_ms;
    _ = pool.drain_deadline_ms.cmpxchgStrong(std.math.maxInt(u64), deadline, .acq_rel, .acquire);
}

/// When connections still open after a stop are closed.
pub fn drainDeadline(pool: *const WorkerPool) u64 {
    return pool.drain_deadline_ms.load(.acquire);
}

/// Closes the connection in `slot` (owned by the caller) and frees the slot. Its worker
/// goes to `thread`'s spare, or back to the set.
pub fn closeSlot(pool: *WorkerPool, slot: *Slot, thread: ?*PoolThread) void {
    const c = &slot.connection;
    const pw = slot.worker;
    const previous = Worker.current;
    defer Worker.current = previous;
    if (pw) |w| {
        c.worker = &w.worker;
        Worker.current = &w.worker;
        slot.unwatchWake(w.worker.websocket_wake_fd);
    }
    socket.close(slot.fd);
    c.deinit();
    slot.worker = null;
    if (pw) |w| {
        if (thread) |t| t.putSpare(w) else pool.workers.release(w);
    }
    slot.poller.release(slot);
}

/// Connection.Sink for handlers that stream: the socket is non-blocking, so wait for room,
/// up to `write_timeout_ms` each time it is full.
pub fn sinkWriteAll(context: *anyopaque, iovecs: []const posix.iovec_const) error{ClientGone}!void {
    const slot: *Slot = @ptrCast(@alignCast(context));
    return blocking_io.writeAll(slot.fd, iovecs, slot.connection.worker.config.write_timeout_ms);
}

/// Connection.Sink, read side (`req.bodyReader()`): the handler runs on this pool thread and
/// the socket is non-blocking, so wait for bytes until `deadline_ms`.
pub fn sinkRead(context: *anyopaque, buffer: []u8, deadline_ms: u64) error{ ClientGone, Timeout }!usize {
    const slot: *Slot = @ptrCast(@alignCast(context));
    const worker = slot.connection.worker;
    while (true) {
        const n = socket.recv(slot.fd, buffer) catch |err| switch (err) {
            error.Interrupted => continue,
            error.WouldBlock => {
                worker.updateClock();
                if (worker.now_ms >= deadline_ms) return error.Timeout;
                const wait_ms: i32 = @intCast(@min(deadline_ms - worker.now_ms, 1000));
                var fds = [_]posix.pollfd{.{ .fd = slot.fd, .events = posix.POLL.IN, .revents = 0 }};
                _ = posix.poll(&fds, wait_ms) catch return error.ClientGone;
                continue;
            },
            error.ConnectionLost, error.Unexpected => return error.ClientGone,
        };
        if (n == 0) return error.ClientGone;
        return n;
    }
}

fn threadMain(pool: *WorkerPool) void {
    var thread: PoolThread = .{ .pool = pool };
    while (pool.queue.get()) |slot| thread.serve(slot);
    if (thread.spare) |pw| pool.workers.release(pw);
}

/// Whether a read may find data.
const Readiness = enum {
    yes,
    /// The last read was short: the socket is most likely empty, so park without asking.
    probably_not,
    /// The last read found nothing.
    no,
};

/// What waiting for the socket came to.
const Wait = enum {
    /// The poller has the connection now.
    parked,
    /// An event arrived meanwhile: go on serving.
    resumed,
    /// The deadline passed instead: the connection is told, then asked again.
    timed_out,
    /// The connection broke while it was being parked (it was told): ask it again.
    failed,
};

const PoolThread = struct {
    pool: *WorkerPool,
    /// A worker kept for the next connection, so borrowing one rarely takes the lock.
    spare: ?*PoolWorker = null,

    fn takeWorker(t: *PoolThread) ?*PoolWorker {
        if (t.spare) |pw| {
            t.spare = null;
            return pw;
        }
        return t.pool.workers.acquire(t.pool.shared);
    }

    fn putSpare(t: *PoolThread, pw: *PoolWorker) void {
        if (t.spare == null) {
            t.spare = pw;
        } else {
            t.pool.workers.release(pw);
        }
    }

    /// Serves `slot` until its connection would block (then parks it) or closes.
    fn serve(t: *PoolThread, slot: *Slot) void {
        const pool = t.pool;
        const c = &slot.connection;
        const pw = slot.worker orelse t.takeWorker() orelse return t.refuse(slot);
        slot.worker = pw;
        const worker = &pw.worker;
        c.worker = worker;
        Worker.current = worker;
        defer Worker.current = null;
        worker.updateClock();
        if (pool.shared.control.stopRequested() and !worker.draining) {
            @atomicStore(bool, &worker.draining, true, .monotonic); // read by handler code
            pool.beginDrain(worker.now_ms);
        }
        var timed_out = false;
        if (worker.now_ms >= c.deadline()) {
            c.onTimeout();
            timed_out = true;
        }
        // An open WebSocket is told 1001 and closes once the client answers; HTTP/2 says
        // GOAWAY and closes once its streams are done.
        if (worker.draining and c.saysGoodbye()) c.drain();
        var io: ThreadIo = .{ .thread = t, .slot = slot, .timed_out = timed_out };
        const outcome = while (true) {
            const outcome = driver.drive(&io, c);
            // After a `.later` that parked the connection, the slot is the poller's (another
            // thread may be serving it): only `here_pending`, set before any park, is asked.
            const job_waits = switch (outcome) {
                .later => io.here_pending,
                .close => worker.here_job != null,
            };
            if (!job_waits) break outcome;
            io.here_pending = false;
            // An HTTP/2 stream's handler, run on this thread (it may lend the loop meanwhile).
            // One the session handed over as the connection ended runs too, and finds its
            // client gone.
            if (outcome == .close) c.onError();
            const ran = Here.run(worker, slot.fd, true, pool.shared.control);
            if (outcome == .close or ran == .close) break .close;
        };
        switch (outcome) {
            .later => {}, // parked with the poller
            .close => pool.closeSlot(slot, t),
        }
    }

    /// How a pool thread waits, for `driver.drive`: a socket that is not ready parks the
    /// connection with its poller and frees the thread.
    const ThreadIo = struct {
        thread: *PoolThread,
        slot: *Slot,
        readable: Readiness = .yes,
        writable: bool = true,
        /// A timeout was applied during this turn: the next wait parks instead.
        timed_out: bool,
        /// The drive stopped for an HTTP/2 stream's handler to run here (`Worker.here_job`).
        here_pending: bool = false,

        pub fn beforeStep(io: *ThreadIo, c: *Connection) ?driver.Stop {
            const worker = c.worker;
            const pool = io.thread.pool;
            worker.updateClock();
            if (pool.shared.control.stopRequested() and !worker.draining) {
                // Seen here too: `serve` may keep a connection across HTTP/2 handlers.
                @atomicStore(bool, &worker.draining, true, .monotonic); // read by handler code
                pool.beginDrain(worker.now_ms);
                if (c.saysGoodbye()) c.drain();
            }
            if (c.websocketOpen()) runWoken(worker);
            if (worker.draining and worker.now_ms >= pool.drainDeadline()) return .close;
            if (worker.here_job != null) {
                io.here_pending = true; // `serve` runs it first
                return .later;
            }
            return null;
        }

        pub fn awaitRecv(io: *ThreadIo, c: *Connection) driver.Await {
            if (io.readable == .yes) return .ready;
            if (c.worker.draining and c.idle()) {
                // Idle means nothing to read now, not merely nothing read yet.
                if (io.readable == .probably_not) {
                    io.readable = .yes;
                } else {
                    c.drain();
                }
                return .again;
            }
            return io.park(Poller.wait_readable);
        }

        pub fn recv(io: *ThreadIo, buffer: []u8) driver.Result {
            const n = socket.recv(io.slot.fd, buffer) catch |err| {
                if (err == error.WouldBlock) io.readable = .no;
                return driver.fromError(err);
            };
            if (n > 0 and n < buffer.len) io.readable = .probably_not;
            return .{ .done = n };
        }

        pub fn awaitSend(io: *ThreadIo, _: *Connection) driver.Await {
            if (io.writable) return .ready;
            return io.park(Poller.wait_writable);
        }

        fn park(io: *ThreadIo, events: u32) driver.Await {
            return switch (io.thread.wait(io.slot, events, io.timed_out)) {
                .parked => .later,
                .resumed => {
                    if (events == Poller.wait_readable) io.readable = .yes else io.writable = true;
                    return .again;
                },
                .timed_out => {
                    io.timed_out = true;
                    return .timed_out;
                },
                .failed => .again,
            };
        }

        pub fn writev(io: *ThreadIo, iovecs: []const posix.iovec_const) driver.Result {
            const n = socket.writev(io.slot.fd, iovecs) catch |err| return io.sendFailed(err);
            return .{ .done = n };
        }

        pub fn sendfile(io: *ThreadIo, file: Connection.File) driver.Result {
            const n = socket.sendfile(io.slot.fd, file.fd, file.offset, file.len) catch |err| return io.sendFailed(err);
            return .{ .done = n };
        }

        fn sendFailed(io: *ThreadIo, err: socket.IoError) driver.Result {
            if (err == error.WouldBlock) io.writable = false;
            return driver.fromError(err);
        }

        pub fn shutdownWrite(io: *ThreadIo) void {
            socket.shutdownWrite(io.slot.fd);
        }

        pub fn fileSend(io: *ThreadIo) ?*socket.FileSend {
            return &io.slot.file_send;
        }

        pub fn fd(io: *ThreadIo) linux.fd_t {
            return io.slot.fd;
        }
    };

    /// The connection must wait for `events`: apply its timeout if due, else park it with
    /// the poller. A connection that holds no buffers gives its worker back first.
    fn wait(t: *PoolThread, slot: *Slot, events: u32, timed_out: bool) Wait {
        const c = &slot.connection;
        const pw = slot.worker.?;
        const worker = &pw.worker;
        if (!timed_out and worker.now_ms >= c.deadline()) return .timed_out;
        if (c.websocketOpen()) {
            slot.watchWake(worker.websocket_wake_fd) catch {
                c.onError();
                return .failed;
            };
        }
        const keep_worker = c.holdsState();
        if (!keep_worker) slot.worker = null;
        if (slot.park(events)) {
            if (!keep_worker) t.putSpare(pw);
            return .parked;
        }
        slot.worker = pw;
        return .resumed;
    }

    /// No worker could be had (out of memory): say so and close.
    fn refuse(t: *PoolThread, slot: *Slot) void {
        engine.answerOverloaded(slot.connection.transport.tls != null, slot.fd);
        t.pool.closeSlot(slot, t);
    }
};

/// Hands queued WebSocket work (messages sent from other threads, close requests) to the
/// connection. The worker is this connection's alone while it is a WebSocket.
fn runWoken(worker: *Worker) void {
    if (worker.websocket_wake_signaled.load(.acquire)) worker.clearWake();
    while (worker.takeWoken()) |session| {
        if (session.connection) |c| c.onWake();
    }
}
