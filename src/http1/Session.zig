//! HTTP/1.1 as a protocol session (RFC 9112): a connection's requests and responses, as a
//! state machine that makes no syscalls. The connection (`Connection.zig`) forwards the engine
//! contract to it; parsing, body framing, 100-continue, calling the handler, error pages and
//! the response writer (with its chunked encoder) all happen here, so every engine behaves
//! alike. §9 persistence, pipelining and closing are this session's too.
//!
//! Pipelining: every complete request in the receive buffer is answered before anything is
//! sent, and the responses leave together in one batch (one `writev`), in request order.
//!
//! An idle connection holds no buffers: the `Exchange` with its buffers is borrowed from the
//! worker when a request's first byte arrives and returned once the connection is idle again.
//!
//! An accepted WebSocket upgrade ends this session: once the 101 is in the batch, the
//! connection hands the exchange and the WebSocket session to `websocket/Protocol.zig`
//! (`takeUpgrade`). The handler pool's hand-off is `Handoff.zig`.
const std = @import("std");
const assert = std.debug.assert;
const posix = std.posix;
const http = @import("../http.zig");
const Worker = @import("../Worker.zig");
const Exchange = @import("../Exchange.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const RequestParser = @import("RequestParser.zig");
const ChunkedDecoder = @import("ChunkedDecoder.zig");
const ResponseHead = @import("ResponseHead.zig");
const byte_copy = @import("copy.zig");
const WebSocketSession = @import("../websocket/Session.zig");
const Handoff = @import("../Handoff.zig");
const Connection = @import("../Connection.zig");
const contract = @import("../engine_contract.zig");
const client_error = @import("../client_error.zig");

const log = std.log.scoped(.saker);

const Session = @This();

/// Buffers and request state, held only while a request is in progress.
exchange: ?*Exchange = null,
phase: Phase = .idle,
/// Close once the current batch has been sent.
close_after_send: bool = false,
/// After the last response, shut down the write side and read until the client closes,
/// so unread request bytes do not turn into a TCP reset that destroys the response.
linger: bool = false,
/// Requests answered on this connection.
requests_served: u32 = 0,

/// Where a connection is in its request/response cycle.
pub const Phase = enum {
    /// Waiting for the first byte of a request; no exchange held.
    idle,
    /// Receiving a request head.
    head,
    /// Receiving a request body.
    body,
    /// The handler runs on a pool thread; the engine waits to be woken.
    handling,
    /// The last response is out; the engine must shut down the write side.
    shutdown,
    /// Reading and discarding until the client closes or `linger_timeout_ms` passes.
    linger,
    /// The 101 response is in the batch: the connection switches to WebSocket
    /// (`takeUpgrade`) before asking anything else of this session.
    upgraded,
    /// The client's first bytes are the HTTP/2 connection preface: the connection switches to
    /// HTTP/2 (`takeHttp2`) before asking anything else of this session.
    http2,
    /// Finished: the engine closes the socket and calls `deinit`.
    closed,
};

const Next = contract.Next;

/// Whether the connection waits for a request's first byte and holds nothing: at shutdown
/// `drain` closes it, once the engine has made sure no request waits in the socket.
pub fn idle(c: *const Session) bool {
    return c.phase == .idle and c.exchange == null;
}

/// Whether the session holds buffers or a WebSocket (a `worker_pool` connection then keeps
/// its worker while it waits).
pub fn holdsState(c: *const Session) bool {
    return c.exchange != null;
}

/// The link in the worker's list of connections the handler pool posted (valid while a
/// request is in progress).
pub fn completionLink(c: *Session) *Exchange.CompletionLink {
    return &c.exchange.?.completion;
}

/// The connection this session belongs to (it lives in `Connection.protocol`).
inline fn connection(c: *const Session) *Connection {
    return Connection.owner.of(.http1, c);
}

/// The connection's deadlines: this session sets them (the read side's by phase: idle, head,
/// body, linger) and says which applies (`deadline`).
inline fn deadlines(c: *const Session) *Connection.Deadlines {
    return &c.connection().deadlines;
}

/// The worker serving the connection now (a `worker_pool` connection changes workers).
inline fn worker(c: *const Session) *Worker {
    return Connection.owner.of(.http1, c).worker;
}

/// Gives back everything the connection holds. Call once, after the socket is closed.
pub fn deinit(c: *Session) void {
    if (c.exchange) |x| {
        if (x.done.active) c.reportDone(x); // the connection ended before the response was out
        if (x.websocket) |session| session.release(); // its 101 could not be sent
        x.websocket = null;
        if (x.file) |file| file.done();
        x.file = null;
        x.iovec_index = x.iovec_count;
        c.worker().releaseExchange(x);
        c.exchange = null;
        c.worker().metrics.http1Active(false);
    }
    c.phase = .closed;
}

/// What the engine must do next.
pub fn next(c: *const Session) Next {
    switch (c.phase) {
        .closed => return .close,
        .shutdown => return .shutdown,
        else => {},
    }
    if (c.exchange) |x| {
        if (c.phase == .handling) {
            if (x.handoff.pendingSend()) |iovecs| return .{ .send = iovecs };
            if (x.handoff.readPending()) return .recv;
            return .wait;
        }
        if (x.iovec_index < x.iovec_count) return .{ .send = x.iovecs[x.iovec_index..x.iovec_count] };
        if (x.file) |file| return .{ .send_file = file };
    }
    return .recv;
}

/// The file body that ends the batch being sent, if any (engines may cork the socket while
/// its head goes out; see `engine/socket.zig` `setCork`).
pub fn fileFollows(c: *const Session) ?contract.File {
    const x = c.exchange orelse return null;
    return x.file;
}

/// Whether the connection closes (or shuts down its write side) once the batch being sent is
/// out.
pub fn closesAfterSend(c: *const Session) bool {
    return c.close_after_send;
}

/// Whether a pool thread is using this connection (it must not be freed).
pub fn handling(c: *const Session) bool {
    return c.phase == .handling;
}

/// When the engine must call `onTimeout` (worker clock, milliseconds).
pub fn deadline(c: *const Session) u64 {
    if (c.phase == .handling) {
        // Only a chunk the handler is streaming can stall; the handler itself is not timed.
        const x = c.exchange.?;
        if (x.handoff.pendingSend() != null) return c.deadlines().send_ms;
        // A body read the handler waits for is timed like any body read.
        if (x.handoff.readPending()) return c.deadlines().read_ms;
        return std.math.maxInt(u64);
    }
    if (c.exchange) |x| if (x.sending()) return c.deadlines().send_ms;
    return c.deadlines().read_ms;
}

/// The buffer to read into. Borrows an exchange if the connection was idle; null when the
/// worker has none left (the engine then closes the connection).
pub fn recvBuffer(c: *Session) ?[]u8 {
    if (c.phase == .handling) {
        const x = c.exchange.?;
        // A pool thread's handler asked for body bytes (`poolRead`). Otherwise this is a
        // receive the engine still had in flight when that read was given up (timeout):
        // its bytes are discarded, as the request is failing anyway.
        return x.handoff.receiveBuffer();
    }
    assert(c.next() == .recv);
    const x = c.exchange orelse blk: {
        const x = c.worker().acquireExchange() orelse return null;
        c.exchange = x;
        c.worker().metrics.http1Active(true);
        break :blk x;
    };
    switch (c.phase) {
        .idle, .head => {
            if (x.head_start > 0) x.compact();
            assert(x.recv_end < x.recv.len);
            return x.recv[x.recv_end..];
        },
        .body => return switch (x.body) {
            .buffer => |b| b.bytes[b.received..],
            .in_place, .chunked, .streamed_length => x.recv[x.recv_end..],
            // Read on the handler's thread, which holds the connection meanwhile.
            .none, .pulled => unreachable,
        },
        .linger => return x.recv_small,
        .shutdown, .closed, .handling, .upgraded, .http2 => unreachable,
    }
}

/// The read found nothing (EAGAIN): give the exchange back if the connection is idle.
pub fn onWouldBlock(c: *Session) void {
    c.releaseIfIdle();
}

/// `n` bytes were read into `recvBuffer()`; 0 means the client closed its side.
pub fn onRecv(c: *Session, n: usize) void {
    const x = c.exchange.?;
    if (c.phase == .handling) {
        // Bytes for a body read the handler waits for: like any body's, its timeout counts
        // the time without progress (the handler's thread waits on it, and reads it again
        // only for its next read).
        if (n > 0) c.deadlines().read_ms = c.worker().now_ms + c.worker().config.body_timeout_ms;
        return x.handoff.received(n);
    }
    if (n == 0) return c.onPeerClosed();
    switch (c.phase) {
        .idle => {
            c.phase = .head;
            c.deadlines().read_ms = c.worker().now_ms + c.worker().config.header_timeout_ms;
            x.recv_end += @intCast(n);
        },
        .head => x.recv_end += @intCast(n),
        .body => {
            switch (x.body) {
                .buffer => |*b| b.received += n,
                .in_place, .chunked, .streamed_length => x.recv_end += @intCast(n),
                .none, .pulled => unreachable, // see recvBuffer
            }
            // `body_timeout_ms` bounds the time without progress, not the whole body: a
            // large upload over a slow link keeps going as long as bytes keep coming.
            c.deadlines().read_ms = c.worker().now_ms + c.worker().config.body_timeout_ms;
        },
        .linger => return,
        .shutdown, .closed, .handling, .upgraded, .http2 => unreachable,
    }
    if (c.requests_served == 0 and x.head_start == 0 and c.phase == .head and c.worker().config.http2) {
        // RFC 9113 §3.4: h2c with prior knowledge, or h2 after ALPN: the same preface.
        const received = x.recv[0..x.recv_end];
        const seen = @min(received.len, http2_preface.len);
        if (std.mem.eql(u8, received[0..seen], http2_preface[0..seen])) {
            if (seen == http2_preface.len) c.phase = .http2;
            return; // the preface, or the start of it: wait for the rest
        }
    }
    c.process();
}

const http2_preface = @import("../http2/frame.zig").preface;

/// Whether the client's first bytes were the HTTP/2 preface: the connection must switch to
/// HTTP/2 (`takeHttp2`) before anything else.
pub inline fn wantsHttp2(c: *const Session) bool {
    return c.phase == .http2;
}

/// Whether no byte of the connection has reached this session yet (the exchange holds the
/// first read's bytes only once `onRecv` takes them).
pub inline fn firstBytes(c: *const Session) bool {
    return c.phase == .idle and c.requests_served == 0;
}

/// The connection speaks HTTP/2 whatever its first `n` bytes (now in `recvBuffer()`) are: ALPN
/// chose it.
pub fn switchToHttp2(c: *Session, n: usize) void {
    assert(c.firstBytes());
    const x = c.exchange.?;
    x.recv_end += @intCast(n);
    c.phase = .http2;
}

/// Hands the exchange over, the preface in its receive buffer; this session then holds
/// nothing.
pub fn takeHttp2(c: *Session) *Exchange {
    assert(c.phase == .http2);
    const x = c.exchange.?;
    assert(!x.done.active); // no response was made on this connection's first bytes
    c.worker().metrics.http1Active(false); // counted as HTTP/2 from here
    c.exchange = null;
    c.phase = .closed;
    return x;
}

/// `n` bytes of the batch (iovecs, then file) were sent.
pub fn onSend(c: *Session, n: usize) void {
    const x = c.exchange.?;
    c.deadlines().send_ms = c.worker().now_ms + c.worker().config.write_timeout_ms;
    if (c.phase == .handling) return x.handoff.sent(n);
    if (x.done.active) x.done.sent_bytes += n;
    if (x.iovec_index < x.iovec_count) {
        x.advanceIovecs(n);
    } else {
        const file = &x.file.?;
        assert(n <= file.len);
        file.offset += n;
        file.len -= n;
        if (file.len == 0) {
            file.done();
            x.file = null;
        }
    }
    if (!x.sending()) c.batchSent();
}

/// The write side was shut down; start lingering.
pub fn onShutdown(c: *Session) void {
    assert(c.phase == .shutdown);
    c.phase = .linger;
    c.deadlines().read_ms = c.worker().now_ms + c.worker().config.linger_timeout_ms;
}

/// The socket failed (reset, broken pipe): nothing more can be done but close.
pub fn onError(c: *Session) void {
    if (c.phase == .handling) {
        // The pool thread still uses the exchange: close once the handler returns.
        c.exchange.?.handoff.fail(false);
        return;
    }
    c.phase = .closed;
}

/// `deadline()` has passed.
pub fn onTimeout(c: *Session) void {
    if (c.phase == .handling) {
        const x = c.exchange.?;
        if (x.handoff.readPending()) {
            // The body stalled: the handler's read fails (then 408), the client may be there.
            return x.handoff.fail(true);
        }
        return c.onError(); // a streamed chunk the client does not read
    }
    if (c.exchange) |x| if (x.sending()) {
        c.phase = .closed; // the client stopped reading
        return;
    };
    switch (c.phase) {
        .idle, .linger, .shutdown, .closed => c.phase = .closed,
        .head => {
            const x = c.exchange.?;
            if (x.head_start == x.recv_end) {
                c.phase = .closed;
            } else {
                c.fail(.request_timeout, "request head not received in time");
            }
        },
        .body => c.fail(.request_timeout, "request body not received in time"),
        .handling => unreachable, // returned above
        .upgraded, .http2 => unreachable, // the connection switched protocols
    }
}

/// Server shutdown: close if idle; otherwise finish the current request, then close.
/// Engines call it again on every sweep while draining; it only acts when there is
/// something to do.
pub fn drain(c: *Session) void {
    if (c.phase == .idle and c.exchange == null) c.phase = .closed;
}

/// HTTP/1 takes no work queued by other threads (WebSocket does, after the switch).
pub fn onWake(_: *Session) void {}

/// Whether the 101 of an accepted WebSocket upgrade is in the batch: the connection must
/// switch protocols (`takeUpgrade`) before anything else.
pub inline fn upgraded(c: *const Session) bool {
    return c.phase == .upgraded;
}

/// Hands the exchange over (with the 101 in its batch, any frames received behind the
/// handshake, and the WebSocket session, `Exchange.websocket`); this session then holds
/// nothing.
pub fn takeUpgrade(c: *Session) *Exchange {
    assert(c.phase == .upgraded);
    const x = c.exchange.?;
    assert(x.websocket != null);
    c.worker().metrics.http1Active(false); // counted as a WebSocket from here
    // The 101 is reported as it goes to the WebSocket side: from here on the bytes are frames.
    if (x.done.active) {
        x.done.complete = true;
        c.reportDone(x);
    }
    c.exchange = null;
    c.phase = .closed;
    return x;
}

fn onPeerClosed(c: *Session) void {
    // Responses already produced were sent before this read (next() puts sends first), so a
    // client that half-closes after a complete request has its answer. A partial request
    // can never be completed.
    c.phase = .closed;
}

fn releaseIfIdle(c: *Session) void {
    const x = c.exchange orelse return;
    if (c.phase != .idle and c.phase != .head) return;
    if (x.sending() or x.head_start != x.recv_end or x.body != .none) return;
    c.worker().releaseExchange(x);
    c.exchange = null;
    c.worker().metrics.http1Active(false);
    if (c.phase == .head) {
        c.phase = .idle;
        c.deadlines().read_ms = c.worker().now_ms + c.worker().config.idle_timeout_ms;
    }
}

/// Parses and answers every complete request in the buffer, until the batch is full, the
/// connection must close, or more bytes are needed.
fn process(c: *Session) void {
    const x = c.exchange.?;
    // With an `onDone` hook a batch holds one response, so each is reported once it is out
    // while its request is still in memory.
    while (!c.close_after_send and !x.done.active) {
        switch (c.phase) {
            // A head just completed goes straight on to its body: nothing it did can have
            // closed the connection or made a response.
            .head => if (!c.processHead(x)) break,
            .body => {},
            else => break,
        }
        assert(c.phase == .body and !c.close_after_send and !x.done.active);
        if (!c.processBody(x)) break;
        c.dispatch(x);
        if (c.phase == .handling) break;
        c.finishRequest(x);
        if (c.startWebSocket(x)) break;
        if (x.batchFull()) break;
    }
    if (x.sending()) c.deadlines().send_ms = c.worker().now_ms + c.worker().config.write_timeout_ms;
}

/// Returns true when a head is complete and the body phase has begun.
fn processHead(c: *Session, x: *Exchange) bool {
    // Nothing after the last request (the usual end of a batch): nothing to parse, and the
    // buffer has room or is compacted by `recvBuffer`.
    if (x.head_start == x.recv_end) return false;
    const bytes = x.recv[x.head_start..x.recv_end];
    const progress = x.parser.feed(bytes) catch |err| {
        c.fail(RequestParser.status(err), RequestParser.message(err));
        return false;
    };
    switch (progress) {
        .need_more => {
            c.makeRoomForHead(x);
            return false;
        },
        .complete => {
            x.started_ms = c.worker().now_ms;
            c.worker().beginDone(x);
            return c.startBody(x);
        },
    }
}

/// Ensures the receive buffer can take more of an incomplete head.
fn makeRoomForHead(c: *Session, x: *Exchange) void {
    if (x.recv_end < x.recv.len) return;
    if (x.head_start > 0) return; // recvBuffer compacts
    if (x.recv.ptr != x.recv_small.ptr) {
        c.fail(.request_header_fields_too_large, "request header section too large");
        return;
    }
    const large = c.worker().acquireLarge() orelse {
        c.fail(.service_unavailable, "too many large request heads in progress");
        return;
    };
    x.moveTo(large);
}

/// Sets up body reception for the head just parsed. Returns false if the request failed.
fn startBody(c: *Session, x: *Exchange) bool {
    const head = &x.parser.head;
    const config = c.worker().config;
    if (head.method == .CONNECT) {
        c.fail(.not_implemented, "CONNECT is not supported");
        return false;
    }
    x.body_start = x.head_start + head.len;
    x.arena.beginRequest();
    c.phase = .body;
    // Without a body the request is complete now; `finishRequest` sets the next deadline.
    if (head.framing != .none) c.deadlines().read_ms = c.worker().now_ms + config.body_timeout_ms;
    x.prepared = false;
    const action: Worker.BodyAction = if (c.worker().dispatch.on_head) |on_head| blk: {
        c.prepare(x, "");
        const action = on_head(c.worker().dispatch.context, &x.request, &x.response) catch |err| {
            c.hookFailed(x, err);
            return false;
        };
        break :blk if (head.framing == .none) .buffer else action;
    } else .buffer;
    switch (action) {
        .buffer => return c.startBufferedBody(x),
        .stream => return c.startStreamedBody(x),
        .reader => return c.startPulledBody(x),
        .skip => {
            // The handler answers without the body; the connection cannot be reused, and no
            // 100 Continue invites the client to send it (RFC 9110 §10.1.1).
            head.expect_continue = false;
            head.keep_alive = false;
            x.body = .none;
            c.linger = true;
            return true;
        },
    }
}

fn startBufferedBody(c: *Session, x: *Exchange) bool {
    const head = &x.parser.head;
    const config = c.worker().config;
    switch (head.framing) {
        .none => assert(x.body == .none),
        .content_length => |length| {
            if (length > config.body_bytes_max) {
                c.fail(.content_too_large, "request body too large");
                return false;
            }
            if (x.body_start + length <= x.recv.len) {
                x.body = .{ .in_place = .{ .end = @intCast(x.body_start + length) } };
            } else {
                const bytes = x.arena.allocator().alloc(u8, @intCast(length)) catch {
                    c.fail(.service_unavailable, "server out of memory for request bodies");
                    return false;
                };
                const have = x.recv_end - x.body_start;
                @memcpy(bytes[0..have], x.recv[x.body_start..x.recv_end]);
                x.recv_end = x.body_start;
                x.body = .{ .buffer = .{ .bytes = bytes, .received = have } };
            }
        },
        .chunked => x.body = .{ .chunked = c.chunkedState(x, false) },
    }
    return true;
}

fn startStreamedBody(c: *Session, x: *Exchange) bool {
    const head = &x.parser.head;
    switch (head.framing) {
        .none => x.body = .none,
        .content_length => |length| {
            if (length > c.worker().config.streamed_body_bytes_max) {
                c.fail(.content_too_large, "request body too large");
                return false;
            }
            if (x.body_start == x.recv.len) {
                c.fail(.request_header_fields_too_large, "request head leaves no room for the body");
                return false;
            }
            x.body = .{ .streamed_length = .{ .remaining = length } };
        },
        .chunked => x.body = .{ .chunked = c.chunkedState(x, true) },
    }
    return true;
}

/// Sets up a body the handler reads itself (`req.bodyReader()`); `handle` runs at once.
fn startPulledBody(c: *Session, x: *Exchange) bool {
    const head = &x.parser.head;
    const config = c.worker().config;
    if (x.body_start == x.recv.len) {
        c.fail(.request_header_fields_too_large, "request head leaves no room for the body");
        return false;
    }
    x.body = .{
        .pulled = .{
            .raw_pos = x.body_start,
            .framing = switch (head.framing) {
                .none => unreachable, // startBody buffers bodies that are absent
                .content_length => |length| blk: {
                    if (length > config.streamed_body_bytes_max) {
                        c.fail(.content_too_large, "request body too large");
                        return false;
                    }
                    break :blk .{ .length = length };
                },
                .chunked => .{ .chunked = .init(.{
                    .extension_bytes_max = config.chunk_extension_bytes_max,
                    .trailer_bytes_max = config.trailer_bytes_max,
                }) },
            },
        },
    };
    return true;
}

fn chunkedState(c: *Session, x: *Exchange, stream: bool) Exchange.Chunked {
    const config = c.worker().config;
    return .{
        .decoder = .init(.{
            .extension_bytes_max = config.chunk_extension_bytes_max,
            .trailer_bytes_max = config.trailer_bytes_max,
        }),
        .body_end = x.body_start,
        .raw_pos = x.body_start,
        .stream = stream,
    };
}

/// Builds the request view and an empty response for the current head and `body`.
fn prepare(c: *Session, x: *Exchange, body: []const u8) void {
    const w = c.worker();
    const head = &x.parser.head;
    const req = &x.request;
    const content_length: ?u64 = switch (head.framing) {
        .content_length => |length| length,
        .none, .chunked => null,
    };
    const draining = @atomicLoad(bool, &w.draining, .monotonic); // set by the engine
    const body_decoding: Request.BodyDecoding = .{ .bytes_max = w.config.decodedBodyBytesMax() };
    if (x.request_bound != @as(*const anyopaque, c)) {
        // The connection's first request on this exchange: the whole request, with what
        // stays the same for the connection's later requests (arena, worker, peer, TLS).
        req.* = .{
            .method = head.method,
            .target = head.target,
            .path = head.path,
            .raw_query = head.query,
            .version = head.version,
            .headers = head.headers,
            .host = head.host,
            .keep_alive = head.keep_alive,
            .upgrade = head.upgrade,
            .connection_upgrade = head.connection_upgrade,
            .content_length = content_length,
            .chunked = head.framing == .chunked,
            .body_bytes = body,
            .arena = x.arena.allocator(),
            .worker_index = w.index,
            .peer = if (c.connection().peer) |peer| peer.* else null,
            .tls_session = c.connection().transport.facts(),
            .server_draining = draining,
            .body_decoding = body_decoding,
        };
        x.request_bound = c;
    } else {
        // A later request: only what a request or its handler may change, field by field.
        // A field added to `Request` must be set here too (or be per connection, above).
        comptime assert(@typeInfo(Request).@"struct".field_names.len == 25);
        req.method = head.method;
        req.target = head.target;
        req.path = head.path;
        req.raw_query = head.query;
        req.version = head.version;
        req.headers = head.headers;
        req.host = head.host;
        req.keep_alive = head.keep_alive;
        req.upgrade = head.upgrade;
        req.connection_upgrade = head.connection_upgrade;
        req.content_length = content_length;
        req.chunked = head.framing == .chunked;
        req.body_bytes = body;
        req.params = &.{};
        req.user_data = null;
        req.request_id = null;
        req.server_draining = draining;
        req.body_source = .buffered;
        req.fault.err = null;
        req.body_decoding = body_decoding;
    }
    const free = x.out.len - x.out_len;
    const body_buffer = if (free >= Exchange.head_reserve + 256)
        x.out[x.out_len + Exchange.head_reserve ..]
    else
        x.out[x.out.len..];
    const stream: ?Response.Stream = if (c.connection().sink != null)
        .{ .context = c, .sendChunk = sendChunk }
    else
        null;
    if (x.response_ready) {
        x.response.reset(.{
            .body_buffer = body_buffer,
            .discard_body = head.method == .HEAD,
            .stream = stream,
        });
    } else {
        x.response = .init(.{
            .arena = x.arena.allocator(),
            .header_storage = x.response_header_storage,
            .body_buffer = body_buffer,
            .body_bytes_max = w.config.response_body_bytes_max,
            .discard_body = head.method == .HEAD,
            .stream = stream,
        });
        x.response_ready = true;
    }
    if (w.config.request_id) {
        const sent = x.request.header("X-Request-Id");
        const usable = if (sent) |id| Request.usableRequestId(id) else false;
        const id = if (usable) sent.? else w.newRequestId(&x.request_id_storage);
        x.request.request_id = id;
        // Every response the handler makes carries it back.
        x.response.header("X-Request-Id", id) catch {};
    }
    x.prepared = true;
}

/// An `onHead` or `onBody` hook failed: send the error response it prepared (status >= 400),
/// or a 500; either way the rest of the body is not read, so the connection closes.
fn hookFailed(c: *Session, x: *Exchange, err: anyerror) void {
    const res = &x.response;
    x.body = .none;
    x.parser.head.expect_continue = false;
    if (res.status.code() >= 400 and res.status.valid() and res.failure == null) {
        log.debug("request hook ended the request on {s}: {t}", .{ x.request.path, err });
        x.parser.head.keep_alive = false; // the rest of the body is never read
        c.linger = true;
        c.finishResponse(x);
        c.finishRequest(x);
        return;
    }
    c.handlerFailed(x, err);
}

/// Hands a piece of a streamed body to the handler's `onBody`. Returns false when the hook
/// failed (the request is then answered and the connection closes).
fn deliver(c: *Session, x: *Exchange, chunk: []const u8) bool {
    if (chunk.len == 0) return true;
    const on_body = c.worker().dispatch.on_body.?;
    on_body(c.worker().dispatch.context, &x.request, &x.response, chunk) catch |err| {
        c.hookFailed(x, err);
        return false;
    };
    return true;
}

/// Receives the body; returns true when it is complete.
fn processBody(c: *Session, x: *Exchange) bool {
    const complete = switch (x.body) {
        .none => true,
        .in_place => |b| x.recv_end >= b.end,
        .buffer => |b| b.received == b.bytes.len,
        .streamed_length => |*b| c.streamLength(x, b) catch return false,
        .chunked => |*chunked| c.decodeChunked(x, chunked) catch return false,
        // The handler reads it (and asks for 100 Continue) as it runs.
        .pulled => true,
    };
    if (!complete and x.parser.head.expect_continue) {
        // RFC 9110 §10.1.1: the client waits for this before sending the body. Sent once,
        // and only when the body is acceptable (limits were checked in startBody).
        x.parser.head.expect_continue = false;
        const interim = "HTTP/1.1 100 Continue\r\n\r\n";
        if (x.reserveOut(interim.len)) |slice| {
            @memcpy(slice, interim);
            x.appendIovec(slice);
        }
    }
    return complete;
}

/// Delivers what arrived of a streamed Content-Length body; returns whether it is complete.
fn streamLength(c: *Session, x: *Exchange, body: *@FieldType(Exchange.Body, "streamed_length")) error{Failed}!bool {
    const available = x.recv_end - x.body_start;
    const take: u32 = @intCast(@min(available, body.remaining));
    if (!c.deliver(x, x.recv[x.body_start..][0..take])) return error.Failed;
    body.remaining -= take;
    if (body.remaining == 0) {
        body.next_start = x.body_start + take;
        return true;
    }
    x.recv_end = x.body_start; // all consumed: the next read reuses the space
    return false;
}

/// Decodes what arrived of a chunked body, keeping decoded bytes in place. Returns whether the
/// body is complete; fails the request (and returns an error) on bad framing or size.
fn decodeChunked(c: *Session, x: *Exchange, chunked: *Exchange.Chunked) error{Failed}!bool {
    const config = c.worker().config;
    const limit = if (chunked.stream) config.streamed_body_bytes_max else config.body_bytes_max;
    while (chunked.raw_pos < x.recv_end and !chunked.decoder.done()) {
        const output = chunked.decoder.feed(x.recv[chunked.raw_pos..x.recv_end]) catch |err| {
            c.fail(.bad_request, ChunkedDecoder.message(err));
            return error.Failed;
        };
        chunked.decoded_len += output.data.len;
        // A chunk announcing more than the limit allows is refused at its size line, not
        // after its bytes arrive. Digits only raise a size, so a partial one counts too.
        if (chunked.decoded_len > limit or chunked.decoder.chunk_remaining > limit - chunked.decoded_len) {
            c.fail(.content_too_large, "request body too large");
            return error.Failed;
        }
        if (output.data.len > 0) {
            // Data moves down over the framing before it; both lie in recv.
            const dest = x.recv[chunked.body_end..][0..output.data.len];
            std.mem.copyForwards(u8, dest, output.data);
            chunked.body_end += @intCast(output.data.len);
        }
        chunked.raw_pos += @intCast(output.consumed);
    }
    if (chunked.stream) {
        if (!c.deliver(x, x.recv[x.body_start..chunked.body_end])) return error.Failed;
        chunked.body_end = x.body_start;
    }
    if (chunked.decoder.done()) return true;
    // Everything received is decoded: the raw area collapses onto the decoded bytes.
    x.recv_end = chunked.body_end;
    chunked.raw_pos = chunked.body_end;
    if (x.recv_end < x.recv.len) return false;
    // The buffer is full of decoded body: move it to the arena and reuse the space.
    const decoded = x.recv[x.body_start..chunked.body_end];
    if (decoded.len == 0) {
        c.fail(.request_header_fields_too_large, "request head leaves no room for the body");
        return error.Failed;
    }
    chunked.spill.appendSlice(x.arena.allocator(), decoded) catch {
        c.fail(.service_unavailable, "server out of memory for request bodies");
        return error.Failed;
    };
    chunked.body_end = x.body_start;
    chunked.raw_pos = x.body_start;
    x.recv_end = x.body_start;
    return false;
}

/// The complete body of the current request, and where the next request starts.
fn takeBody(c: *Session, x: *Exchange) error{Failed}!struct { bytes: []const u8, next_start: u32 } {
    return switch (x.body) {
        .none => .{ .bytes = "", .next_start = x.body_start },
        .streamed_length => |b| .{ .bytes = "", .next_start = b.next_start },
        .pulled => |p| .{ .bytes = "", .next_start = p.raw_pos },
        .in_place => |b| .{ .bytes = x.recv[x.body_start..b.end], .next_start = b.end },
        .buffer => |b| .{ .bytes = b.bytes, .next_start = x.recv_end },
        .chunked => |*chunked| blk: {
            const in_place = x.recv[x.body_start..chunked.body_end];
            if (chunked.spill.items.len == 0)
                break :blk .{ .bytes = in_place, .next_start = chunked.raw_pos };
            chunked.spill.appendSlice(x.arena.allocator(), in_place) catch {
                c.fail(.service_unavailable, "server out of memory for request bodies");
                return error.Failed;
            };
            break :blk .{ .bytes = chunked.spill.items, .next_start = chunked.raw_pos };
        },
    };
}

/// Calls the handler for the complete request and adds its response to the batch.
fn dispatch(c: *Session, x: *Exchange) void {
    const w = c.worker();
    const body = c.takeBody(x) catch return;
    if (x.prepared) {
        x.request.body_bytes = body.bytes;
    } else {
        @call(.always_inline, prepare, .{ c, x, body.bytes });
    }
    const pulled = x.body == .pulled;
    if (pulled) c.preparePull(x);
    if (w.handler_pool) |pool| if (c.connection().sink == null and (pulled or c.mayBlock(x))) {
        c.phase = .handling;
        x.handoff.begin();
        pool.submit(c.connection()) catch {
            c.phase = .body;
            c.fail(.service_unavailable, "all handler threads are busy");
            return;
        };
        w.metrics.handlerStarted();
        return;
    };
    // On an event loop without the pool, `bodyReader()` says it cannot wait for the body.
    if (pulled and c.connection().sink == null) x.request.body_source = .unavailable;
    w.metrics.handlerStarted();
    const result = w.dispatch.handle(w.dispatch.context, &x.request, &x.response);
    w.metrics.handlerEnded();
    c.handlerReturned(x, result);
}

/// Whether the handler may block on this request (it then runs on the handler pool).
fn mayBlock(c: *const Session, x: *const Exchange) bool {
    const may_block = c.worker().dispatch.may_block orelse return true;
    return may_block(c.worker().dispatch.context, &x.request);
}

inline fn handlerReturned(c: *Session, x: *Exchange, result: anyerror!void) void {
    const res = &x.response;
    // Nearly every handler returns a final status without error: that check alone stays
    // inline, so the caller's frame does not carry the failure paths.
    const ok = if (result) |_| true else |_| false;
    if (ok and x.body != .pulled and res.failure == null and res.status.code() >= 200 and
        res.status.code() <= 599)
    {
        return @call(.always_inline, finishResponse, .{ c, x });
    }
    c.handlerReturnedOther(x, result);
}

noinline fn handlerReturnedOther(c: *Session, x: *Exchange, result: anyerror!void) void {
    @branchHint(.cold);
    const res = &x.response;
    if (x.body == .pulled and c.endPull(x, result)) return;
    result catch |err| return c.handlerFailed(x, err);
    if (res.failure) |err| return c.handlerFailed(x, err);
    // A status line holds three digits, 100-599: anything else is the handler's bug.
    if (!res.status.valid()) return c.handlerFailed(x, error.InvalidStatus);
    if (res.status.code() < 200 and res.websocket_upgrade == null) return c.handlerFailed(x, error.InterimStatusFromHandler);
    c.finishResponse(x);
}

/// Runs the handler for the current request; called on a handler pool thread, which owns the
/// exchange until it posts the completion.
pub fn runHandlerOnPool(c: *Session) void {
    const x = c.exchange.?;
    assert(c.phase == .handling);
    c.connection().sink = x.handoff.sink(Session, c);
    x.response.stream = .{ .context = c, .sendChunk = sendChunk };
    c.worker().dispatch.handle(c.worker().dispatch.context, &x.request, &x.response) catch |err| {
        x.handoff.handler_error = err;
    };
    c.connection().sink = null;
    x.response.stream = null;
    c.worker().handlerReturned(c.connection());
}

/// The worker's completion event fired for this connection: a streamed chunk to send (then
/// `next()` says so), or the handler is done.
pub fn onPoolEvent(c: *Session) void {
    assert(c.phase == .handling);
    const x = c.exchange.?;
    if (!x.completion.takeReturn()) return; // a chunk to send: next() returns it
    c.worker().metrics.handlerEnded();
    c.phase = .body;
    if (x.handoff.client_gone) {
        c.phase = .closed;
        return;
    }
    const result: anyerror!void = if (x.handoff.handler_error) |err| err else {};
    c.handlerReturned(x, result);
    c.finishRequest(x);
    if (c.startWebSocket(x)) return;
    if (!x.batchFull() and !c.close_after_send) c.process();
    if (x.sending()) c.deadlines().send_ms = c.worker().now_ms + c.worker().config.write_timeout_ms;
}

/// For `Handoff`: wakes the engine loop, which then looks at this connection's hand-off.
pub fn post(c: *Session) void {
    c.worker().postCompletion(c.connection());
}

/// For `Handoff.sink`: the hand-off of the request in progress.
pub fn handoff(c: *Session) *Handoff {
    return &c.exchange.?.handoff;
}

/// Connects `req.bodyReader()` to this connection for a pulled body.
fn preparePull(c: *Session, x: *Exchange) void {
    x.body_reader = .init(c, pullFromContext);
    x.request.body_source = .{ .stream = &x.body_reader.stream };
}

fn pullFromContext(context: *anyopaque, dest: []u8) error{ ReadFailed, EndOfStream }!usize {
    const c: *Session = @ptrCast(@alignCast(context));
    return c.pull(dest);
}

/// Decodes up to `dest.len` body bytes into `dest`, receiving through the sink as needed;
/// called on the handler's thread. `error.EndOfStream` once the body is complete.
fn pull(c: *Session, dest: []u8) error{ ReadFailed, EndOfStream }!usize {
    const x = c.exchange.?;
    const p = &x.body.pulled;
    const stream = &x.body_reader.stream;
    if (stream.failure != null) return error.ReadFailed;
    if (dest.len == 0) return if (p.done) error.EndOfStream else 0;
    while (!p.done) {
        const n = c.decodePulled(x, p, dest) catch return error.ReadFailed;
        if (n > 0) return n;
        if (p.done) break;
        c.receivePulled(x, p) catch return error.ReadFailed;
    }
    return error.EndOfStream;
}

/// Decodes received bytes into `dest` without receiving more; returns how many it decoded.
fn decodePulled(c: *Session, x: *Exchange, p: *Exchange.Pulled, dest: []u8) error{Failed}!usize {
    switch (p.framing) {
        .length => |*remaining| {
            const available = x.recv_end - p.raw_pos;
            const take: u32 = @intCast(@min(available, remaining.*, dest.len));
            @memcpy(dest[0..take], x.recv[p.raw_pos..][0..take]);
            p.raw_pos += take;
            remaining.* -= take;
            p.decoded_len += take;
            if (remaining.* == 0) p.done = true;
            return take;
        },
        .chunked => |*decoder| {
            const limit = c.worker().config.streamed_body_bytes_max;
            var produced: usize = 0;
            while (p.raw_pos < x.recv_end and !decoder.done() and produced < dest.len) {
                // Feeding no more than the room left keeps every data span within `dest`.
                const end = @min(x.recv_end, p.raw_pos + (dest.len - produced));
                const output = decoder.feed(x.recv[p.raw_pos..end]) catch |err| {
                    p.failure_message = ChunkedDecoder.message(err);
                    return c.pullFailed(x, .malformed);
                };
                @memcpy(dest[produced..][0..output.data.len], output.data);
                produced += output.data.len;
                p.raw_pos += @intCast(output.consumed);
                p.decoded_len += output.data.len;
                if (p.decoded_len > limit) return c.pullFailed(x, .too_large);
            }
            if (decoder.done()) p.done = true;
            return produced;
        },
    }
}

/// Receives more raw body bytes through the sink (after the 100 Continue the client may
/// be waiting for). Asserts every received byte has been decoded.
fn receivePulled(c: *Session, x: *Exchange, p: *Exchange.Pulled) error{Failed}!void {
    assert(p.raw_pos == x.recv_end);
    if (x.parser.head.expect_continue) {
        // RFC 9110 §10.1.1: sent once, when the handler first wants the body.
        x.parser.head.expect_continue = false;
        c.sendContinue(x) catch return c.pullFailed(x, .client_gone);
    }
    // Everything received is decoded: reuse the space.
    p.raw_pos = x.body_start;
    x.recv_end = x.body_start;
    const sink = c.connection().sink.?;
    const n = sink.read(sink.context, x.recv[x.recv_end..], c.deadlines().read_ms) catch |err| switch (err) {
        error.ClientGone => return c.pullFailed(x, .client_gone),
        error.Timeout => return c.pullFailed(x, .timeout),
    };
    assert(n > 0 and n <= x.recv.len - x.recv_end);
    x.recv_end += @intCast(n);
    // Without a handler pool the handler runs on the connection's own thread, which read the
    // bytes itself: the next read gets a fresh no-progress timeout. (With the pool, the loop
    // moved it when the bytes came, `onRecv`.)
    if (c.worker().handler_pool == null) c.deadlines().read_ms = c.worker().now_ms + c.worker().config.body_timeout_ms;
}

/// Sends `100 Continue` through the sink, after earlier pipelined responses.
fn sendContinue(c: *Session, x: *Exchange) error{ClientGone}!void {
    try c.sendEarlier(x);
    const interim = "HTTP/1.1 100 Continue\r\n\r\n";
    const sink = c.connection().sink.?;
    try sink.writeAll(sink.context, &.{iovec(interim)});
}

fn pullFailed(c: *Session, x: *Exchange, failure: Request.BodyReadFailure) error{Failed} {
    _ = c;
    x.body_reader.stream.failure = failure;
    return error.Failed;
}

/// After a handler that pulled its body returned: skips what it left unread if that has all
/// arrived, else marks the connection for closing (after a lingering close, so the response
/// is not lost to a reset). A read failure the handler passed on is answered with its own
/// status. Returns true when the request was answered here.
fn endPull(c: *Session, x: *Exchange, result: anyerror!void) bool {
    const p = &x.body.pulled;
    const failure = x.body_reader.stream.failure;
    if (failure == null) {
        var scratch: [1024]u8 = undefined;
        while (!p.done) {
            const n = c.decodePulled(x, p, &scratch) catch break;
            if (n == 0) break;
        }
    }
    if (p.done) return false;
    x.parser.head.keep_alive = false;
    c.linger = true;
    const why = x.body_reader.stream.failure orelse return false;
    _ = result catch |err| {
        if (x.response.streaming) return false; // the head is out: handlerFailed closes
        log.debug("{s} {s}: body read failed ({t}), handler returned {t}", .{ x.request.method.name(), x.request.path, why, err });
        switch (why) {
            .client_gone => {
                c.linger = false;
                c.close_after_send = true;
            },
            .too_large => c.fail(.content_too_large, "request body too large"),
            .timeout => c.fail(.request_timeout, "request body not received in time"),
            .malformed => c.fail(.bad_request, p.failure_message),
        }
        return true;
    };
    return false;
}

fn handlerFailed(c: *Session, x: *Exchange, err: anyerror) void {
    // Bad input the handler refused (`ClientError`) is the client's fault: its 4xx, not 500.
    const reply = client_error.answer(err);
    if (reply == null) c.worker().metrics.handlerFailed();
    if (err == error.OutOfMemory and x.arena.request_limit_hit) {
        log.warn("handler failed on {s} {s}: its arena reached arena_request_bytes_max ({d} bytes)", .{
            x.request.method.name(), x.request.path, c.worker().config.arena_request_bytes_max,
        });
    } else if (reply == null) {
        log.warn("handler failed on {s} {s}: {t}", .{ x.request.method.name(), x.request.path, err });
    } else {
        log.debug("handler refused {s} {s}: {t}", .{ x.request.method.name(), x.request.path, err });
    }
    if (x.response.streaming) {
        // The head is out; the only honest signal left is an incomplete body.
        c.close_after_send = true;
        return;
    }
    if (reply) |r| {
        var buffer: [client_error.reason_bytes_max]u8 = undefined;
        const parameter = x.request.fault.nameFor(err) orelse return c.fail(r.status, r.reason);
        return c.fail(r.status, client_error.reasonNaming(&buffer, r, parameter));
    }
    c.fail(.internal_server_error, "the handler failed");
}

/// Whether the connection stays open after the current response (RFC 9112 §9.3, §9.6).
fn keepAlive(c: *const Session, x: *const Exchange) bool {
    const draining = @atomicLoad(bool, &c.worker().draining, .monotonic); // also read on pool threads
    return x.parser.head.keep_alive and x.response.keep_alive and !draining and
        c.requests_served + 1 < c.worker().config.requests_per_connection_max;
}

fn connectionField(c: *const Session, x: *const Exchange, keep: bool) ResponseHead.Connection {
    _ = c;
    if (!keep) return .close;
    return if (x.parser.head.version == .http10) .keep_alive else .default;
}

/// Writes the head of the handler's response and adds head and body to the batch.
fn finishResponse(c: *Session, x: *Exchange) void {
    const w = c.worker();
    const res = &x.response;
    w.metrics.answered(x.request.method, res.status, w.now_ms -| x.started_ms);
    if (res.websocket_upgrade) |options| return c.finishUpgrade(x, options);
    const keep = c.keepAlive(x);
    if (!keep) c.close_after_send = true;
    if (res.streaming) {
        // Its head and chunks so far were counted as they went (`sendChunk`).
        if (w.dispatch.on_done != null) c.pendDone(x, res.status, false, 0);
        return c.finishStream(x);
    }
    const no_content = res.status.forbidsContent();
    const send_body = !no_content and !res.discard_body;
    const head: ResponseHead = .{
        .status = res.status,
        .date_line = w.date.line(),
        .content_type = res.content_type,
        .framing = if (no_content) .none else .{ .length = res.contentLength() },
        .connection = c.connectionField(x, keep),
        .headers = res.headers(),
    };
    const head_len = head.len();
    if (w.dispatch.on_done != null) c.pendDone(x, res.status, false, head_len);
    switch (res.body) {
        .buffered => {
            const body = res.bufferedBody();
            const reserved = x.out[x.out_len..];
            const in_out = body.len > 0 and body.ptr == reserved.ptr + Exchange.head_reserve;
            if ((in_out or body.len == 0) and head_len <= Exchange.head_reserve and
                reserved.len >= head_len)
            {
                // Head goes in front of the body, which slides down to meet it: one iovec.
                const written = head.write(reserved);
                const body_len = if (send_body) body.len else 0;
                std.mem.copyForwards(u8, reserved[written.len..][0..body_len], body[0..body_len]);
                x.out_len += written.len + body_len;
                x.appendIovec(reserved[0 .. written.len + body_len]);
            } else {
                c.appendHead(x, &head) catch return;
                if (send_body) x.appendIovec(body);
            }
        },
        .bytes => |bytes| {
            const body_len = if (send_body) bytes.len else 0;
            if (body_len <= Exchange.copy_body_max) {
                // Small bodies are copied behind the head: pipelined responses then stay one
                // contiguous run, one iovec for the whole batch.
                if (x.reserveOut(head_len + body_len)) |out| {
                    _ = @call(.always_inline, ResponseHead.write, .{ &head, out });
                    byte_copy.short(out[head_len..].ptr, bytes[0..body_len]);
                    x.appendIovec(out);
                    return;
                }
            }
            c.appendHead(x, &head) catch return;
            x.appendIovec(bytes[0..body_len]);
        },
        .file => |file| {
            c.appendHead(x, &head) catch return;
            if (send_body and file.len > 0) {
                x.file = file;
            } else file.done();
        },
    }
}

/// After a request whose handler accepted a WebSocket upgrade: asks the connection to switch
/// to the WebSocket protocol (the 101 is in the batch; from here on, bytes are frames).
/// Returns whether it did.
fn startWebSocket(c: *Session, x: *Exchange) bool {
    if (x.websocket == null) return false;
    if (c.close_after_send) return false; // the 101 could not be written; deinit gives it back
    if (x.sending()) c.deadlines().send_ms = c.worker().now_ms + c.worker().config.write_timeout_ms;
    c.phase = .upgraded;
    return true;
}

/// Answers an upgrade the handler accepted with 101 and prepares the WebSocket session
/// (RFC 6455 §4.2.2); it starts once the request is finished.
fn finishUpgrade(c: *Session, x: *Exchange, options: @import("../websocket.zig").UpgradeOptions) void {
    const res = &x.response;
    const session = WebSocketSession.accept(c.worker(), &x.request, res, options) catch |err| switch (err) {
        error.NoCallbacks => {
            log.warn("upgradeWebSocket called, but the handler declares no WebSocket callbacks", .{});
            return c.fail(.internal_server_error, "the handler does not speak WebSocket");
        },
        error.Draining => return c.fail(.service_unavailable, "the server is shutting down"),
        error.Unavailable => return c.fail(.service_unavailable, "too many WebSocket connections"),
        error.HeaderFailed => return c.fail(.internal_server_error, "the handshake response could not be built"),
    };
    const head: ResponseHead = .{
        .status = .switching_protocols,
        .date_line = c.worker().date.line(),
        .framing = .none,
        .connection = .upgrade,
        .headers = res.headers(),
    };
    // Held even if the head cannot be written: `deinit` gives it back.
    x.websocket = session;
    c.appendHead(x, &head) catch return;
    if (c.worker().dispatch.on_done != null) c.pendDone(x, .switching_protocols, false, 0);
}

/// Writes `head` into the send buffer (or the arena when it is full) and adds it to the batch.
fn appendHead(c: *Session, x: *Exchange, head: *const ResponseHead) error{Failed}!void {
    const len = head.len();
    const buffer = x.reserveOut(len) orelse x.arena.allocator().alloc(u8, len) catch {
        c.close_after_send = true;
        c.phase = .closed;
        return error.Failed;
    };
    x.appendIovec(head.write(buffer));
}

/// Ends a streamed response: the rest of the body as a chunk, then the last chunk.
fn finishStream(c: *Session, x: *Exchange) void {
    const res = &x.response;
    const rest = res.bufferedBody();
    if (x.parser.head.version == .http10) {
        // HTTP/1.0 has no chunked coding: the body ends when the connection does.
        const copy = x.arena.allocator().dupe(u8, rest) catch return c.abort();
        x.appendIovec(copy);
        c.close_after_send = true;
        return;
    }
    var size_line: [20]u8 = undefined;
    const size = chunkSizeLine(&size_line, rest.len);
    var trailers_len: usize = 0;
    for (res.trailers()) |t| trailers_len += t.name.len + 2 + t.value.len + 2;
    const framing_len = size.len + rest.len + 2 + "0\r\n\r\n".len + trailers_len;
    const out = x.reserveOut(framing_len) orelse x.arena.allocator().alloc(u8, framing_len) catch
        return c.abort();
    var i: usize = 0;
    if (rest.len > 0) {
        @memcpy(out[i..][0..size.len], size);
        i += size.len;
        // `rest` may sit further along in the same buffer (the reserve in front of it).
        std.mem.copyForwards(u8, out[i..][0..rest.len], rest);
        i += rest.len;
        @memcpy(out[i..][0..2], "\r\n");
        i += 2;
    }
    // The last chunk, with the trailer fields (RFC 9112 §7.1.2).
    @memcpy(out[i..][0..3], "0\r\n");
    i += 3;
    for (res.trailers()) |t| {
        for ([_][]const u8{ t.name, ": ", t.value, "\r\n" }) |part| {
            @memcpy(out[i..][0..part.len], part);
            i += part.len;
        }
    }
    @memcpy(out[i..][0..2], "\r\n");
    i += 2;
    x.appendIovec(out[0..i]);
}

fn chunkSizeLine(buffer: *[20]u8, len: usize) []const u8 {
    return std.mem.print(buffer, "{x}\r\n", .{len}) catch unreachable;
}

fn abort(c: *Session) void {
    c.close_after_send = true;
    c.phase = .closed;
}

/// Response.Stream implementation: send earlier responses, the head once, then a chunk.
fn sendChunk(context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void {
    const c: *Session = @ptrCast(@alignCast(context));
    const sink = c.connection().sink.?;
    const x = c.exchange.?;
    try c.sendEarlier(x);
    var iovecs: [12]posix.iovec_const = undefined;
    var n: usize = 0;
    const http10 = x.parser.head.version == .http10;
    if (!res.streaming) {
        if (!res.status.valid()) {
            // No head can carry it; `handlerReturned` answers 500 once the handler returns.
            if (res.failure == null) res.failure = error.InvalidStatus;
            return error.ClientGone;
        }
        const keep = !http10 and c.keepAlive(x);
        const head: ResponseHead = .{
            .status = res.status,
            .date_line = c.worker().date.line(),
            .content_type = res.content_type,
            .framing = if (http10) .none else .chunked,
            .connection = if (keep) .default else .close,
            .headers = res.headers(),
        };
        const buffer = x.arena.allocator().alloc(u8, head.len()) catch return error.ClientGone;
        iovecs[n] = iovec(head.write(buffer));
        n += 1;
        res.streaming = true;
        if (!keep) c.close_after_send = true;
    }
    var total: usize = 0;
    for (parts) |part| total += part.len;
    const head_bytes: usize = if (n > 0) iovecs[0].len else 0;
    var size_line: [20]u8 = undefined;
    if (!http10) {
        iovecs[n] = iovec(chunkSizeLine(&size_line, total));
        n += 1;
    }
    for (parts) |part| {
        iovecs[n] = iovec(part);
        n += 1;
    }
    if (!http10) {
        iovecs[n] = iovec("\r\n");
        n += 1;
    }
    try sink.writeAll(sink.context, iovecs[0..n]);
    if (c.worker().dispatch.on_done != null) {
        for (iovecs[0..n]) |v| x.done.sent_bytes += v.len;
        x.done.head_bytes += head_bytes;
    }
}

/// Sends, through the sink, the responses of earlier pipelined requests still in the batch:
/// they must precede anything the current handler sends while it runs.
fn sendEarlier(c: *Session, x: *Exchange) error{ClientGone}!void {
    const sink = c.connection().sink.?;
    assert(x.file == null);
    if (x.iovec_index < x.iovec_count) {
        try sink.writeAll(sink.context, x.iovecs[x.iovec_index..x.iovec_count]);
        x.iovec_index = x.iovec_count;
    }
}

fn iovec(bytes: []const u8) posix.iovec_const {
    return .{ .base = bytes.ptr, .len = bytes.len };
}

/// Moves on to the next request after a response was added to the batch.
fn finishRequest(c: *Session, x: *Exchange) void {
    const w = c.worker();
    const next_start = switch (x.body) {
        .none => x.body_start,
        .streamed_length => |b| b.next_start,
        .in_place => |b| b.end,
        .buffer => x.recv_end,
        .chunked => |chunked| chunked.raw_pos,
        .pulled => |p| p.raw_pos,
    };
    x.head_start = next_start;
    if (x.body != .none) x.body = .none; // the tag alone: the payload is large
    x.parser.reset();
    x.started_ms = 0;
    c.requests_served += 1;
    w.requests_total += 1;
    c.phase = .head;
    c.deadlines().read_ms = w.now_ms + w.config.header_timeout_ms;
}

/// Notes the response just made for `onDone` (its head: `head_bytes` more of what the batch
/// sends; a streamed one's went out already).
fn pendDone(c: *const Session, x: *Exchange, status: http.Status, core_response: bool, head_bytes: usize) void {
    _ = c;
    x.done.active = true;
    x.done.status = status;
    x.done.core_response = core_response;
    x.done.request_known = true;
    x.done.head_bytes += head_bytes;
}

/// Tells the handler's `onDone` about the pending response.
fn reportDone(c: *Session, x: *Exchange) void {
    const version: http.Version = if (x.done.request_known) x.request.version else .http11;
    const peer: ?std.Io.net.IpAddress = if (c.connection().peer) |p| p.* else null;
    c.worker().reportDone(x, peer, version, x.recv[x.head_start..x.recv_end]);
}

/// Answers with an error status and closes (see README.md, Limits).
fn fail(c: *Session, status: http.Status, message: []const u8) void {
    const x = c.exchange.?;
    const metrics = &c.worker().metrics;
    const head_received = x.started_ms != 0;
    metrics.answered(if (head_received) x.parser.head.method else null, status, if (head_received) c.worker().now_ms -| x.started_ms else null);
    if (status != .internal_server_error) metrics.refusedFor(status);
    const report = c.worker().dispatch.on_done != null;
    if (report) {
        // The request as far as it came, for `onDone`: its head when that was whole.
        assert(!x.done.active); // a batch with an `onDone` hook holds one response
        if (!head_received) x.done = .{};
        if (head_received and !x.prepared) c.prepare(x, "");
    }
    c.close_after_send = true;
    c.linger = true;
    x.body = .none;
    var body_buffer: [160]u8 = undefined;
    const body = std.mem.print(&body_buffer, "{d} {s}: {s}\n", .{ status.code(), status.phrase(), message }) catch
        unreachable; // messages are short literals
    const head: ResponseHead = .{
        .status = status,
        .date_line = c.worker().date.line(),
        .content_type = "text/plain; charset=utf-8",
        .framing = .{ .length = body.len },
        .connection = .close,
    };
    const len = head.len() + body.len;
    const out = x.reserveOut(len) orelse x.arena.allocator().alloc(u8, len) catch return c.abort();
    const written = head.write(out);
    @memcpy(out[written.len..][0..body.len], body);
    // A file body would have ended the batch, so there is room for one more iovec.
    x.appendIovec(out[0..len]);
    if (report) {
        c.pendDone(x, status, true, written.len);
        x.done.request_known = head_received;
    }
    c.deadlines().send_ms = c.worker().now_ms + c.worker().config.write_timeout_ms;
}

/// Called when the batch has been sent: continue with pipelined requests, go idle, or close.
fn batchSent(c: *Session) void {
    const x = c.exchange.?;
    if (x.done.active) {
        x.done.complete = true;
        c.reportDone(x);
    }
    x.clearBatch();
    if (c.close_after_send) {
        c.phase = if (c.linger) .shutdown else .closed;
        return;
    }
    switch (c.phase) {
        .head => {
            // Nothing of a finished request is referenced any more.
            x.arena.reset();
            if (x.head_start < x.recv_end) {
                c.process();
            } else {
                c.releaseIfIdle();
            }
        },
        .body => {}, // a 100 Continue went out; the body comes next
        else => unreachable,
    }
}
