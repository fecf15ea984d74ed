//! What one engine thread shares among its connections: the handler dispatch, the pools of
//! exchanges and large buffers (reserved at start-up, handed out without locks or syscalls),
//! the Date line, the clock the engine last read and the heap budget. Pools are carved out of
//! one mapping each and touched lazily, so memory nobody used never becomes resident.
const std = @import("std");
const assert = std.debug.assert;
const Listening = @import("Listening.zig");
const Metrics = @import("Metrics.zig");
const Config = @import("Config.zig");
const mapped = @import("mapped.zig");
const clock = @import("clock.zig");
const Arena = @import("Arena.zig");
const DateCache = @import("DateCache.zig");
const Exchange = @import("Exchange.zig");
const Done = @import("Done.zig");
const http = @import("http.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const websocket = @import("websocket.zig");
const Session = websocket.Session;
const Deflate = websocket.Deflate;
const Connection = @import("Connection.zig");
const HandlerPool = @import("HandlerPool.zig");
const sync = @import("sync.zig");

const Worker = @This();

/// The worker whose engine runs on the calling thread (null on other threads). WebSocket sends
/// use it to tell the engine thread from the rest.
pub threadlocal var current: ?*Worker = null;

gpa: std.mem.Allocator,
config: *const Config,
dispatch: Dispatch,
/// This worker's position among the server's workers (0-based); handlers see it as
/// `Request.worker_index` and may keep per-worker state under it.
index: u32 = 0,
/// When `tick` next calls the handler's tick hook (worker clock).
next_tick_ms: u64 = 0,
/// The Date header line, refreshed by the engine once a second.
date: DateCache = .{},
/// Monotonic clock in milliseconds, as last read by the engine.
now_ms: u64 = 0,
/// Set when the server shuts down: responses say `Connection: close` and idle connections go.
draining: bool = false,
/// Heap bytes the server may still take for large bodies and arena overflow (shared by all
/// workers of a server).
budget: *Arena.Budget,

exchange_layout: Exchange.Layout,
/// The exchanges (touched only when first handed out).
exchanges: []Exchange,
/// Their buffers, `exchange_layout.stride()` bytes each.
exchange_memory: []align(std.heap.page_size_min) u8,
/// Exchanges handed out at least once; those at or past it are untouched.
exchanges_touched: u32 = 0,
free_exchanges: ?*Exchange = null,
/// Exchanges in use.
exchanges_busy: u32 = 0,
/// Of the exchanges, those a connection holds are at most `connections_max`; the rest
/// (`stream_exchanges_max`) are lent to HTTP/2 streams alone, so streams held open on a few
/// connections can never take the exchange another connection needs for its request.
connections_max: u32 = 0,
stream_exchanges_max: u32 = 0,
/// Exchanges lent to streams now.
stream_exchanges_busy: u32 = 0,

/// Large receive buffers (`header_bytes_max` each), for heads that outgrow the small one.
large_memory: []align(std.heap.page_size_min) u8,
large_touched: u32 = 0,
/// Free large buffers (the first bytes of each hold the link).
free_large: ?*LargeLink = null,

/// Scratch memory for work done whole within one call on this thread (an HTTP/2 header block
/// is decoded here before its fields are copied to the stream): made at first use.
scratch_memory: []align(16) u8 = &.{},

/// Requests answered (a metric).
requests_total: u64 = 0,
/// What this worker counts for `Metrics` (in the server's registry while it lives).
metrics: Metrics.Counters = .{},
/// Where made request ids come from (`Config.request_id`); seeded from the kernel at init.
request_ids: std.Random.DefaultPrng = .init(0),

/// WebSocket sessions, one per connection at most (touched only when first handed out). The
/// memory stays mapped while the worker lives, so a stale `Conn` handle never points at
/// freed memory. Empty when `session_pool` is set.
sessions: []Session,
/// Where sessions come from when the worker lives shorter than the server (thread-based
/// engines): the server's pool, so a `Conn` kept past the connection's thread stays safe.
session_pool: ?*websocket.SessionPool = null,
sessions_touched: u32 = 0,
free_sessions: ?*Session = null,
sessions_busy: u32 = 0,
/// permessage-deflate states: made on demand up to `websocket_deflate_connections_max`,
/// then reused.
free_deflates: ?*Deflate = null,
deflates_made: u32 = 0,
deflates_busy: u32 = 0,
/// The session whose callback is running on this worker's thread, if any.
callback_session: ?*Session = null,

/// Sessions with work queued for the engine thread (messages from other threads, close
/// requests, or batches grown by another connection's callback), under
/// `websocket_wake_mutex`.
websocket_wake_mutex: sync.Mutex = .{},
websocket_wake_head: ?*Session = null,
/// An eventfd that other threads write to wake the engine thread for WebSocket work; made
/// only when the handler declares `WebSocket` (-1 otherwise). Engines watch it.
websocket_wake_fd: std.os.linux.fd_t = -1,
/// Whether `websocket_wake_fd` has been written since the engine last read it.
websocket_wake_signaled: std.atomic.Value(bool) = .init(false),

/// Where handlers run when they may block; null runs them on the engine thread.
handler_pool: ?*HandlerPool = null,
/// Thread-based engines run handlers on the connection's own thread. Over HTTP/2 a stream's
/// handler that streams its response or pulls its body needs the connection's frames to move
/// while it waits; the session hands such a handler to the engine as `here_job` (`runHere`)
/// instead of a pool, and the engine runs it at the top of its loop, where no protocol code is
/// on the stack. While it runs there, `here` is set: the handler's first chunk or read lends
/// the connection's loop to a thread of the engine's, which moves the frames until the
/// handler returns (see `engine/Here.zig`). A handler that neither streams nor pulls costs no
/// thread and no system call.
runs_here: bool = false,
here_job: ?*Connection = null,
here: ?Here = null,
/// An eventfd the engine watches: pool threads write to it after posting a completion.
wake_fd: std.os.linux.fd_t = -1,
/// Connections the pool has something for (handler done, or a chunk to send), newest first.
completions: ?*Connection = null,
completions_mutex: sync.Mutex = .{},
/// Set by an engine that had to leave connections to still-running handlers at shutdown:
/// their memory must outlive the process, so `deinit` keeps it.
abandoned: bool = false,
/// What the connections of the listener this worker serves share (TLS, PROXY protocol).
listening: *const Listening = &Listening.plaintext,

/// How a worker calls the handler: type-erased hooks made by `Server(Handler)`.
pub const Dispatch = struct {
    context: *anyopaque,
    /// The handler's `handle`, called once the request (and its body, unless streamed) is in.
    handle: *const fn (context: *anyopaque, req: *Request, res: *Response) anyerror!void,
    /// The handler's `WebSocket` callbacks, when it declares them.
    websocket: ?*const websocket.Callbacks = null,
    /// The handler's optional `onHead`: called when the head is complete, before any body is
    /// read, to choose how the body is received.
    on_head: ?*const fn (context: *anyopaque, req: *Request, res: *Response) anyerror!BodyAction = null,
    /// The handler's optional `onBody`: receives a streamed body piece by piece.
    on_body: ?*const fn (context: *anyopaque, req: *Request, res: *Response, chunk: []const u8) anyerror!void = null,
    /// The handler's optional `mayBlock`: whether this request's `handle` must run on the
    /// handler pool (when there is one); without it, every request does.
    may_block: ?*const fn (context: *anyopaque, req: *const Request) bool = null,
    /// The handler's optional `onTick` hook (per-worker housekeeping such as flushing logs).
    tick: ?*const fn (context: *anyopaque, worker_index: u32) void = null,
    /// The handler's optional `onDone` hook: every response, once it is out (`Done.zig`).
    on_done: ?*const fn (context: *anyopaque, done: *const Done) void = null,
};

/// Microseconds of the monotonic clock (vDSO: no system call, see `clock.zig`), for
/// `Config.fine_durations`.
pub fn fineMicros() u64 {
    return clock.microseconds(.MONOTONIC);
}

/// Marks the start of a request's exchange for `onDone` (its head is whole, or the core is
/// about to refuse it).
pub fn beginDone(worker: *const Worker, x: *Exchange) void {
    if (worker.dispatch.on_done == null) return;
    x.done = .{ .started_us = if (worker.config.fine_durations) fineMicros() else 0 };
}

/// Tells the handler's `onDone` hook about the response `x.done` describes, then forgets it.
/// `request_line` stands in for a request whose head was never whole.
pub fn reportDone(worker: *Worker, x: *Exchange, peer: ?std.Io.net.IpAddress, version: http.Version, request_line: []const u8) void {
    const on_done = worker.dispatch.on_done orelse return;
    const pending = x.done;
    if (!pending.active) return;
    x.done = .{};
    assert(pending.head_bytes <= pending.sent_bytes or !pending.complete);
    const done: Done = .{
        .request = if (pending.request_known) &x.request else null,
        .request_line = if (pending.request_known) "" else Done.firstLine(request_line),
        .peer = peer,
        .worker_index = worker.index,
        .version = version,
        .status = pending.status,
        .body_bytes_sent = pending.sent_bytes -| pending.head_bytes,
        .complete = pending.complete,
        .core_response = pending.core_response,
        .duration_us = if (pending.started_us != 0) fineMicros() -| pending.started_us else null,
    };
    on_done(worker.dispatch.context, &done);
}

/// How often `tick` calls the handler's hook.
pub const tick_interval_ms = 500;

/// Engines call this from their loop whenever they wake (at least every `tick_interval_ms`
/// while running); it calls the handler's tick hook at most once per `tick_interval_ms`.
pub fn tick(worker: *Worker) void {
    const hook = worker.dispatch.tick orelse return;
    // The first call only arms the interval: a worker made per connection (thread-based
    // engines) then does not tick on every new connection.
    if (worker.next_tick_ms == 0) {
        worker.next_tick_ms = worker.now_ms + tick_interval_ms;
        return;
    }
    if (worker.now_ms < worker.next_tick_ms) return;
    worker.next_tick_ms = worker.now_ms + tick_interval_ms;
    hook(worker.dispatch.context, worker.index);
}

/// What a handler's `onHead` wants done with the request body.
pub const BodyAction = enum {
    /// Read it whole (up to `body_bytes_max`); `req.body()` has it in `handle`.
    buffer,
    /// Hand it to `onBody` as it arrives (up to `streamed_body_bytes_max`), then call `handle`.
    stream,
    /// Do not read it: call `handle` now; the connection closes after the response, and a
    /// client that sent `Expect: 100-continue` is not invited to send the body.
    skip,
    /// Call `handle` now, on a thread that may block; it reads the body as it arrives with
    /// `req.bodyReader()` (up to `streamed_body_bytes_max`). On an event loop without the
    /// handler pool `bodyReader()` fails with `error.BodyReaderUnavailable`.
    reader,
};

const LargeLink = struct { next: ?*LargeLink };

/// Sizes of a worker's pools.
pub const Options = struct {
    /// Connections served at once (one exchange each).
    connections_max: u32,
    /// Exchanges for HTTP/2 streams besides (`Worker.stream_exchanges_max`).
    stream_exchanges_max: u32 = 0,
    /// Large receive buffers.
    large_buffers_max: u32,
    /// The server-wide heap budget.
    budget: *Arena.Budget,
    /// Take WebSocket sessions from this pool (which outlives the worker) instead of owning
    /// them.
    session_pool: ?*websocket.SessionPool = null,
    /// What the listener's connections share: TLS, the PROXY protocol.
    listening: *const Listening = &Listening.plaintext,
    /// Where the worker's counters are read from by scrapes (null: nowhere).
    registry: ?*Metrics.Registry = null,
    /// The engine runs handlers on the connection's thread (`runs_here`).
    runs_here: bool = false,
};

/// Reserves the pools. Memory is mapped, not touched.
pub fn init(worker: *Worker, gpa: std.mem.Allocator, config: *const Config, dispatch: Dispatch, options: Options) !void {
    const connections_max = options.connections_max;
    assert(connections_max > 0);
    const layout: Exchange.Layout = .{
        .recv_bytes = config.recv_buffer_bytes,
        .out_bytes = config.send_buffer_bytes,
        .arena_bytes = config.arena_bytes,
        .header_count = config.header_count_max,
        .response_header_count = config.response_header_count_max,
        .arena_request_bytes_max = config.arena_request_bytes_max,
    };
    const exchange_count = @as(usize, connections_max) + options.stream_exchanges_max;
    const exchanges = try mapped.alloc(Exchange, exchange_count);
    errdefer mapped.free(exchanges);
    const exchange_memory = try mapped.alloc(u8, exchange_count * layout.stride());
    errdefer mapped.free(exchange_memory);
    const large_memory = try mapped.alloc(u8, @as(usize, options.large_buffers_max) * config.header_bytes_max);
    errdefer mapped.free(large_memory);
    const own_sessions = dispatch.websocket != null and options.session_pool == null;
    const sessions = try mapped.alloc(Session, if (own_sessions) connections_max else 0);
    errdefer mapped.free(sessions);
    var wake_fd: std.os.linux.fd_t = -1;
    if (dispatch.websocket != null) {
        const rc = std.os.linux.eventfd(0, std.os.linux.EFD.CLOEXEC | std.os.linux.EFD.NONBLOCK);
        if (std.os.linux.errno(rc) != .SUCCESS) return error.SystemResources;
        wake_fd = @intCast(rc);
    }
    worker.* = .{
        .gpa = gpa,
        .config = config,
        .dispatch = dispatch,
        .budget = options.budget,
        .exchange_layout = layout,
        .exchanges = exchanges,
        .exchange_memory = exchange_memory,
        .connections_max = connections_max,
        .stream_exchanges_max = options.stream_exchanges_max,
        .large_memory = large_memory,
        .sessions = sessions,
        .session_pool = options.session_pool,
        .listening = options.listening,
        .websocket_wake_fd = wake_fd,
        .runs_here = options.runs_here,
    };
    if (options.registry) |registry| registry.join(&worker.metrics);
    if (config.request_id) {
        var seed: u64 = 0;
        _ = std.os.linux.getrandom(std.mem.asBytes(&seed), @sizeOf(u64), 0);
        worker.request_ids = .init(seed);
    }
}

/// A new request id: 16 hex digits in `storage`.
pub fn newRequestId(worker: *Worker, storage: *[16]u8) []const u8 {
    const value = worker.request_ids.random().int(u64);
    _ = std.fmt.bufPrint(storage, "{x:0>16}", .{value}) catch unreachable;
    return storage;
}

/// Unmaps the pools. Asserts every exchange was returned (unless `abandoned`).
pub fn deinit(worker: *Worker) void {
    if (worker.metrics.registry) |registry| registry.leave(&worker.metrics);
    if (worker.abandoned) return; // a handler thread may still use this memory
    assert(worker.exchanges_busy == 0);
    assert(worker.sessions_busy == 0);
    assert(worker.deflates_busy == 0);
    mapped.free(worker.exchanges);
    mapped.free(worker.exchange_memory);
    mapped.free(worker.large_memory);
    mapped.free(worker.sessions);
    if (worker.scratch_memory.len > 0) worker.gpa.free(worker.scratch_memory);
    while (worker.free_deflates) |d| {
        worker.free_deflates = d.next_free;
        std.heap.page_allocator.destroy(d);
    }
    if (worker.websocket_wake_fd != -1) _ = std.os.linux.close(worker.websocket_wake_fd);
    // Event-loop engines close the wake event they made; a thread-based engine's is the
    // worker's own (`wakeFd`).
    if (worker.runs_here and worker.wake_fd != -1) _ = std.os.linux.close(worker.wake_fd);
    worker.* = undefined;
}

/// `len` bytes of the worker's scratch memory (see `scratch_memory`), or null when it cannot
/// be had. Each call may return the same memory: use it before the next.
pub fn scratch(worker: *Worker, len: usize) ?[]align(16) u8 {
    if (worker.scratch_memory.len < len) {
        const memory = worker.gpa.alignedAlloc(u8, .@"16", len) catch return null;
        if (worker.scratch_memory.len > 0) worker.gpa.free(worker.scratch_memory);
        worker.scratch_memory = memory;
    }
    return worker.scratch_memory[0..len];
}

/// Hands out a connection's exchange, or null when `connections_max` are busy.
pub fn acquireExchange(worker: *Worker) ?*Exchange {
    if (worker.exchanges_busy - worker.stream_exchanges_busy == worker.connections_max) return null;
    return worker.takeExchange();
}

/// Streams a connection may hold before the stream share's reserve is closed to it (see
/// `acquireStreamExchange`).
pub const streams_held_freely = 4;

/// Lends an HTTP/2 stream an exchange; `held` is how many its connection holds already. Null
/// when `stream_exchanges_max` are lent, or when only the last quarter of them is left and the
/// connection holds `streams_held_freely` or more (the stream is then refused, and the client
/// retries it). That quarter is kept for connections holding few streams: a few connections
/// that open every stream they may and hold them (a body that never comes) cannot take what
/// every other HTTP/2 connection of the worker needs.
pub fn acquireStreamExchange(worker: *Worker, held: u32) ?*Exchange {
    const max = worker.stream_exchanges_max;
    if (worker.stream_exchanges_busy == max) return null;
    // A worker serving one connection keeps no reserve from it.
    const reserve = if (worker.connections_max > 1) max / 4 else 0;
    if (held >= streams_held_freely and max - worker.stream_exchanges_busy <= reserve) return null;
    const exchange = worker.takeExchange() orelse return null;
    exchange.lent_to_stream = true;
    worker.stream_exchanges_busy += 1;
    return exchange;
}

fn takeExchange(worker: *Worker) ?*Exchange {
    // Each kind stays within its share, so the two shares never run the pool dry.
    assert(worker.exchanges_busy < worker.exchanges.len);
    const exchange = if (worker.free_exchanges) |free| blk: {
        worker.free_exchanges = free.next_free;
        break :blk free;
    } else blk: {
        if (worker.exchanges_touched == worker.exchanges.len) return null;
        const index = worker.exchanges_touched;
        worker.exchanges_touched += 1;
        const stride = worker.exchange_layout.stride();
        const memory: []align(64) u8 = @alignCast(worker.exchange_memory[index * stride ..][0..stride]);
        const exchange = &worker.exchanges[index];
        exchange.init(memory, worker.exchange_layout, .{
            .request_line_bytes_max = worker.config.request_line_bytes_max,
            .header_bytes_max = worker.config.header_bytes_max,
        }, worker.gpa, worker.budget);
        break :blk exchange;
    };
    worker.exchanges_busy += 1;
    exchange.next_free = null;
    exchange.request_bound = null; // a new connection: its peer and TLS session differ
    return exchange;
}

/// Takes an exchange back, with any large buffer it holds. Its request state is reset.
pub fn releaseExchange(worker: *Worker, exchange: *Exchange) void {
    assert(worker.exchanges_busy > 0);
    assert(!exchange.sending());
    if (exchange.recv.ptr != exchange.recv_small.ptr) worker.releaseLarge(exchange.recv);
    exchange.arena.reset();
    exchange.recv = exchange.recv_small;
    exchange.head_start = 0;
    exchange.recv_end = 0;
    exchange.body = .none;
    exchange.started_ms = 0;
    exchange.out_len = 0;
    exchange.iovec_count = 0;
    exchange.iovec_index = 0;
    exchange.parser.reset();
    assert(exchange.websocket == null); // given back first
    if (exchange.lent_to_stream) {
        assert(worker.stream_exchanges_busy > 0);
        exchange.lent_to_stream = false;
        worker.stream_exchanges_busy -= 1;
    }
    exchange.next_free = worker.free_exchanges;
    worker.free_exchanges = exchange;
    worker.exchanges_busy -= 1;
}

/// How a handler running on the connection's own thread (`here`) reaches its engine: a
/// chunk or a read it hands over (`posted`), and its return (`returned`), on that thread.
pub const Here = struct {
    context: *anyopaque,
    posted: *const fn (context: *anyopaque, connection: *Connection) void,
    returned: *const fn (context: *anyopaque, connection: *Connection) void,
};

/// A protocol session's handler must run free to block while the connection's frames move:
/// the engine runs it on this thread at the top of its loop (`runs_here` engines).
pub fn runHere(worker: *Worker, connection: *Connection) void {
    assert(worker.runs_here);
    assert(worker.here_job == null);
    worker.here_job = connection;
}

/// The eventfd a thread-based engine's helper waits on for what the handler posts, made on
/// first use.
pub fn wakeFd(worker: *Worker) error{SystemResources}!std.os.linux.fd_t {
    assert(worker.runs_here);
    if (worker.wake_fd == -1) {
        const rc = std.os.linux.eventfd(0, std.os.linux.EFD.CLOEXEC | std.os.linux.EFD.NONBLOCK);
        if (std.os.linux.errno(rc) != .SUCCESS) return error.SystemResources;
        worker.wake_fd = @intCast(rc);
    }
    return worker.wake_fd;
}

/// Handler's thread: the handler has returned (its outcome is in the session). The return is
/// published with the listing that reports it, so the engine never acts on a return whose
/// post is still to come (a later post would list a connection the engine may have closed).
/// The connection must not be touched after this.
pub fn handlerReturned(worker: *Worker, connection: *Connection) void {
    if (worker.here) |here| return here.returned(here.context, connection);
    worker.wakeLoop(connection, .returned);
}

/// Handler's thread: tells the engine `connection` needs attention (a streamed chunk to send,
/// a read to serve).
pub fn postCompletion(worker: *Worker, connection: *Connection) void {
    if (worker.here) |here| return here.posted(here.context, connection);
    worker.wakeLoop(connection, .posted);
}

/// What a handler's thread tells its engine.
pub const Post = enum { posted, returned };

/// Puts `connection` on the completion list and wakes the thread that serves it.
pub fn wakeLoop(worker: *Worker, connection: *Connection, post: Post) void {
    worker.completions_mutex.lock();
    const link = connection.completionLink();
    assert(!link.returned);
    if (post == .returned) link.returned = true;
    // The engine may already have served an earlier post of this connection (a socket event
    // drove it) without taking the list yet: it is still listed, and linking it again would
    // make a cycle. Listed once, it is looked at once for all it posted.
    if (!link.listed) {
        link.listed = true;
        link.next = worker.completions;
        worker.completions = connection;
    }
    // Written before the unlock: once the engine may take a return, it may also stop and
    // close this event. (The engine reads the event before it takes the list, so a wake
    // written here is never lost, at worst one more.)
    const one: u64 = 1;
    _ = std.os.linux.write(worker.wake_fd, std.mem.asBytes(&one), @sizeOf(u64));
    worker.completions_mutex.unlock();
}

/// Called on the engine thread: takes every posted connection. Each must be given
/// `Connection.onPoolEvent` before the next take.
pub fn takeCompletions(worker: *Worker) Taken {
    var counter: u64 = undefined;
    _ = std.os.linux.read(worker.wake_fd, std.mem.asBytes(&counter), @sizeOf(u64));
    worker.completions_mutex.lock();
    defer worker.completions_mutex.unlock();
    const list = worker.completions;
    worker.completions = null;
    var item = list;
    while (item) |connection| : (item = connection.completionLink().next) {
        const link = connection.completionLink();
        link.taken_next = link.next;
        link.listed = false;
        assert(!link.return_taken); // a return is acted on before the next take
        link.return_taken = link.returned;
        link.returned = false;
    }
    return .{ .rest = list };
}

/// The connections one take took, linked through `taken_next`: `next` belongs to the
/// handlers' threads again as soon as the take has unlisted a connection (one may list it
/// anew while the engine serves the list).
pub const Taken = struct {
    rest: ?*Connection,

    pub fn next(taken: *Taken) ?*Connection {
        const connection = taken.rest orelse return null;
        taken.rest = connection.completionLink().taken_next;
        return connection;
    }
};

/// Hands out a large receive buffer, or null when all are in use.
pub fn acquireLarge(worker: *Worker) ?[]u8 {
    const size = worker.config.header_bytes_max;
    if (worker.free_large) |link| {
        worker.free_large = link.next;
        const bytes: [*]u8 = @ptrCast(link);
        return bytes[0..size];
    }
    if (@as(usize, worker.large_touched) * size == worker.large_memory.len) return null;
    const buffer = worker.large_memory[@as(usize, worker.large_touched) * size ..][0..size];
    worker.large_touched += 1;
    return buffer;
}

/// Takes a large buffer back.
pub fn releaseLarge(worker: *Worker, buffer: []u8) void {
    assert(buffer.len == worker.config.header_bytes_max);
    const link: *LargeLink = @ptrCast(@alignCast(buffer.ptr));
    link.* = .{ .next = worker.free_large };
    worker.free_large = link;
}

/// Hands out a WebSocket session, or null when all are in use.
pub fn acquireSession(worker: *Worker) ?*Session {
    const session = if (worker.session_pool) |pool|
        pool.acquire() orelse return null
    else if (worker.free_sessions) |free| blk: {
        worker.free_sessions = free.next_free;
        break :blk free;
    } else blk: {
        if (worker.sessions_touched == worker.sessions.len) return null;
        const session = &worker.sessions[worker.sessions_touched];
        session.* = .{ .worker = worker };
        worker.sessions_touched += 1;
        break :blk session;
    };
    session.init(worker);
    worker.sessions_busy += 1;
    return session;
}

/// Takes a session back.
pub fn releaseSession(worker: *Worker, session: *Session) void {
    assert(worker.sessions_busy > 0);
    worker.sessions_busy -= 1;
    if (worker.session_pool) |pool| return pool.release(session);
    session.next_free = worker.free_sessions;
    worker.free_sessions = session;
}

/// Hands out a permessage-deflate state (made on first use), or null when
/// `websocket_deflate_connections_max` are in use or memory is short.
pub fn acquireDeflate(worker: *Worker) ?*Deflate {
    const d = if (worker.free_deflates) |free| blk: {
        worker.free_deflates = free.next_free;
        break :blk free;
    } else blk: {
        if (worker.deflates_made >= worker.config.websocket_deflate_connections_max) return null;
        const d = std.heap.page_allocator.create(Deflate) catch return null;
        worker.deflates_made += 1;
        break :blk d;
    };
    worker.deflates_busy += 1;
    return d;
}

/// Takes a permessage-deflate state back.
pub fn releaseDeflate(worker: *Worker, d: *Deflate) void {
    assert(worker.deflates_busy > 0);
    d.next_free = worker.free_deflates;
    worker.free_deflates = d;
    worker.deflates_busy -= 1;
}

/// Puts `session` on the wake list (once); `signal` writes the eventfd, for callers on other
/// threads. Safe from any thread.
pub fn queueWake(worker: *Worker, session: *Session, signal: bool) void {
    worker.websocket_wake_mutex.lock();
    if (!session.wake_queued) {
        session.wake_queued = true;
        session.wake_next = worker.websocket_wake_head;
        worker.websocket_wake_head = session;
    }
    worker.websocket_wake_mutex.unlock();
    if (signal and !worker.websocket_wake_signaled.swap(true, .acq_rel)) {
        const one: u64 = 1;
        _ = std.os.linux.write(worker.websocket_wake_fd, std.mem.asBytes(&one), @sizeOf(u64));
    }
}

/// Engine thread: `websocket_wake_fd` was readable; reset it before taking the wake list.
pub fn clearWake(worker: *Worker) void {
    var count: u64 = 0;
    _ = std.os.linux.read(worker.websocket_wake_fd, std.mem.asBytes(&count), @sizeOf(u64));
    worker.websocket_wake_signaled.store(false, .release);
}

/// Engine thread: the next session on the wake list, or null. Call `Connection.onWake` on it
/// and drive its connection.
pub fn takeWoken(worker: *Worker) ?*Session {
    worker.websocket_wake_mutex.lock();
    defer worker.websocket_wake_mutex.unlock();
    const session = worker.websocket_wake_head orelse return null;
    worker.websocket_wake_head = session.wake_next;
    session.wake_next = null;
    session.wake_queued = false;
    return session;
}

/// Engine thread: takes `session` off the wake list (it is being released).
pub fn unqueueWake(worker: *Worker, session: *Session) void {
    worker.websocket_wake_mutex.lock();
    defer worker.websocket_wake_mutex.unlock();
    if (!session.wake_queued) return;
    var link = &worker.websocket_wake_head;
    while (link.*) |s| : (link = &s.wake_next) {
        if (s == session) {
            link.* = s.wake_next;
            break;
        }
    }
    session.wake_next = null;
    session.wake_queued = false;
}

/// Reads the clocks: monotonic milliseconds for timeouts, wall-clock seconds for Date.
pub fn updateClock(worker: *Worker) void {
    worker.now_ms = clock.milliseconds(.MONOTONIC_COARSE);
    worker.date.update(clock.read(.REALTIME_COARSE).sec);
}

/// A worker for the pool tests: `connections_max` and `stream_exchanges_max` exchanges, one
/// large buffer, a handler that does nothing.
const TestPools = struct {
    const config: Config = .{ .large_buffers_max = 1 };
    var context: u8 = 0;

    fn handle(_: *anyopaque, _: *Request, _: *Response) anyerror!void {}

    fn init(worker: *Worker, budget: *Arena.Budget, connections_max: u32, stream_exchanges_max: u32) !void {
        budget.* = .init(config.overflow_bytes_max);
        try worker.init(std.testing.allocator, &config, .{ .context = &context, .handle = handle }, .{
            .connections_max = connections_max,
            .stream_exchanges_max = stream_exchanges_max,
            .large_buffers_max = config.large_buffers_max,
            .budget = budget,
        });
    }
};

test "Worker: pools hand out, take back and refuse when exhausted" {
    var worker: Worker = undefined;
    var budget: Arena.Budget = undefined;
    try TestPools.init(&worker, &budget, 2, 0);
    defer worker.deinit();
    const a = worker.acquireExchange().?;
    const b = worker.acquireExchange().?;
    try std.testing.expect(a != b);
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireExchange());
    worker.releaseExchange(a);
    try std.testing.expectEqual(a, worker.acquireExchange().?);
    worker.releaseExchange(a);
    worker.releaseExchange(b);

    const large = worker.acquireLarge().?;
    try std.testing.expectEqual(@as(?[]u8, null), worker.acquireLarge());
    worker.releaseLarge(large);
    try std.testing.expect(worker.acquireLarge() != null);
}

test "Worker: streams borrow from a share of their own, so connections always find an exchange" {
    var worker: Worker = undefined;
    var budget: Arena.Budget = undefined;
    try TestPools.init(&worker, &budget, 2, 3);
    defer worker.deinit();
    const own = worker.acquireExchange().?;
    var streams: [3]*Exchange = undefined;
    for (&streams) |*x| x.* = worker.acquireStreamExchange(0).?;
    // The stream share is spent; the other connection's exchange is still there.
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireStreamExchange(0));
    const other = worker.acquireExchange().?;
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireExchange());
    // A stream's exchange comes back to the stream share, not to the connections'.
    worker.releaseExchange(streams[0]);
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireExchange());
    try std.testing.expectEqual(@as(u32, 2), worker.stream_exchanges_busy);
    streams[0] = worker.acquireStreamExchange(0).?;
    for (streams) |x| worker.releaseExchange(x);
    worker.releaseExchange(own);
    worker.releaseExchange(other);
    try std.testing.expectEqual(@as(u32, 0), worker.stream_exchanges_busy);
    try std.testing.expectEqual(@as(u32, 0), worker.exchanges_busy);
}

test "Worker: the stream share's last quarter is for connections holding few streams" {
    var worker: Worker = undefined;
    var budget: Arena.Budget = undefined;
    try TestPools.init(&worker, &budget, 2, 8);
    defer worker.deinit();
    // One connection takes streams until only the reserve (8 / 4) is left.
    var greedy: [6]*Exchange = undefined;
    for (&greedy, 0..) |*x, held| x.* = worker.acquireStreamExchange(@intCast(held)).?;
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireStreamExchange(greedy.len));
    // Another, holding fewer than `streams_held_freely`, still gets the reserve, to the end.
    const first = worker.acquireStreamExchange(0).?;
    const second = worker.acquireStreamExchange(1).?;
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireStreamExchange(2));
    // Freed streams open the share to the greedy connection again, down to the reserve.
    worker.releaseExchange(first);
    worker.releaseExchange(second);
    try std.testing.expectEqual(@as(?*Exchange, null), worker.acquireStreamExchange(greedy.len));
    worker.releaseExchange(greedy[5]);
    greedy[5] = worker.acquireStreamExchange(5).?;
    for (greedy) |x| worker.releaseExchange(x);
    try std.testing.expectEqual(@as(u32, 0), worker.stream_exchanges_busy);
}

/// Resident memory of this process, from /proc/self/statm.
fn residentBytes() !usize {
    var buffer: [128]u8 = undefined;
    const text = try std.Io.Dir.cwd().readFile(std.testing.io, "/proc/self/statm", &buffer);
    var fields = std.mem.tokenizeScalar(u8, text, ' ');
    _ = fields.next(); // size
    return try std.fmt.parseInt(usize, fields.next().?, 10) * std.heap.pageSize();
}

test "Worker: pools are address space until used, in every build mode" {
    const Noop = struct {
        fn handle(_: *anyopaque, _: *Request, _: *Response) anyerror!void {}
    };
    var context: u8 = 0;
    const config: Config = .{};
    var budget: Arena.Budget = .init(config.overflow_bytes_max);
    const before = try residentBytes();
    var worker: Worker = undefined;
    // 10,000 exchanges: about 250 MB of address space.
    try worker.init(std.testing.allocator, &config, .{ .context = &context, .handle = Noop.handle }, .{
        .connections_max = 10_000,
        .large_buffers_max = config.large_buffers_max,
        .budget = &budget,
    });
    defer worker.deinit();
    try std.testing.expect(worker.exchange_memory.len > 200 * 1024 * 1024);
    const exchange = worker.acquireExchange().?;
    worker.releaseExchange(exchange);
    const grown = (try residentBytes()) -| before;
    errdefer std.debug.print("resident memory grew by {d} KiB\n", .{grown / 1024});
    try std.testing.expect(grown < 16 * 1024 * 1024);
}
