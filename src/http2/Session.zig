//! HTTP/2 as a protocol session (RFC 9113): one connection's frames, streams, HPACK state,
//! flow control and scheduling, as a state machine that makes no syscalls. The connection
//! (`Connection.zig`) forwards the engine contract to it, as it does for HTTP/1.
//!
//! A connection switches to this session when its first bytes are the client connection
//! preface (§3.4): h2c with prior knowledge on a cleartext port, or `h2` chosen by ALPN over
//! TLS (the client sends the same preface). The HTTP/1 session hands over its exchange, whose
//! receive buffer holds the preface; that exchange stays the connection's own: its receive
//! buffer takes the socket's bytes, its send buffer the frames, its arena a header block
//! being received.
//!
//! Each stream borrows an exchange of its own from the worker (the same pool HTTP/1 requests
//! use), so a stream's request and response are the `Request` and `Response` every handler
//! knows, and its memory is bounded like an HTTP/1 request's. No exchange left: the stream is
//! refused (REFUSED_STREAM, which a client retries).
//!
//! Frames are read incrementally: a DATA payload goes to its stream as it arrives, so a frame
//! may be larger than the receive buffer. Other frames are handled where they lie when whole,
//! or gathered in the connection's arena (at most SETTINGS_MAX_FRAME_SIZE bytes).
//!
//! Output: control frames are written into the send buffer as they are made; `fill` then
//! adds the streams' HEADERS and DATA, one DATA frame per stream per round (round-robin, so a
//! large download cannot starve the small responses beside it: RFC 9218's urgency is not
//! used, as handlers cannot set it). A DATA payload is sent from where the handler left it (its
//! exchange's buffer, its arena, or the file with `sendfile`), without a copy, unless it is
//! small enough that copying beats another iovec.
//!
//! Abuse (RFC 9113 §10.5, CVE-2019-9511..9518, CVE-2023-44487, CVE-2025-8671, CVE-2024-27316):
//! every frame that costs work and serves no request (a reset stream, a refused stream, an
//! empty frame, a PRIORITY, a WINDOW_UPDATE for nothing, a stream error the client provoked)
//! takes a token from the connection's glitch budget (`Config.http2_glitch_burst`, refilled at
//! `http2_glitch_rate_per_s`); an empty budget ends the connection with GOAWAY
//! ENHANCE_YOUR_CALM. Control frames the client makes the server answer are bounded by the
//! send buffer: a client that does not read them is ended the same way. A header block is
//! bounded by `header_bytes_max`, decoded or not; a stream whose response waits on a closed
//! flow-control window for `write_timeout_ms` ends the connection.
const std = @import("std");
const assert = std.debug.assert;
const posix = std.posix;
const http = @import("../http.zig");
const Worker = @import("../Worker.zig");
const Exchange = @import("../Exchange.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const Connection = @import("../Connection.zig");
const Handoff = @import("../Handoff.zig");
const HandlerPool = @import("../HandlerPool.zig");
const contract = @import("../engine_contract.zig");
const client_error = @import("../client_error.zig");
const frame = @import("frame.zig");
const hpack = @import("hpack.zig");
const request = @import("request.zig");

const log = std.log.scoped(.saker);

const Session = @This();

/// Everything the session holds, allocated when the connection switches to HTTP/2 (a
/// connection stays small while it speaks HTTP/1).
state: ?*State = null,

const Next = contract.Next;

/// Where the connection is.
pub const Phase = enum {
    /// Matching the client connection preface.
    preface,
    /// Exchanging frames.
    frames,
    /// A GOAWAY that ends the connection is queued: send what is left, then shut down.
    closing,
    /// Everything is sent: the engine must shut down the write side.
    shutdown,
    /// Reading and discarding until the client closes or `linger_timeout_ms` passes.
    linger,
    /// Finished: the engine closes the socket and calls `deinit`.
    closed,
};

/// One stream the client opened and this side still holds.
const Stream = struct {
    id: u31,
    /// The request, the response and their memory.
    x: *Exchange,
    /// Whether the client has ended its side (END_STREAM received: half-closed remote).
    remote_closed: bool = false,
    /// What the client may still send on the stream before a WINDOW_UPDATE.
    recv_window: i64,
    /// Bytes received since the last WINDOW_UPDATE for the stream.
    recv_unacked: u32 = 0,
    /// What this side may still send before the client opens the window further.
    send_window: i64,
    /// DATA payload bytes received (checked against content-length).
    received: u64 = 0,
    /// When the request last made progress (opened, or body bytes came): a body that stops
    /// coming for `body_timeout_ms` is answered 408, whatever else the connection sends.
    progress_ms: u64,
    /// How the request body is taken.
    body_mode: BodyMode = .buffer,
    /// The body buffered so far (in the stream's arena).
    body: std.ArrayList(u8) = .empty,
    /// Where the response is.
    send: Send = .waiting,
    /// Body bytes still to send.
    body_left: []const u8 = "",
    /// File range still to send.
    file: ?http.FileRange = null,
    /// The content-length the response announces (what a GET would send, for HEAD too).
    content_length: u64 = 0,
    /// A 100 (Continue) to send before the request body is read.
    continue_pending: bool = false,
    /// A 100 (Continue) the client asked for, owed once the handler first reads the body it
    /// pulls (`readArrived`): a handler that answers without reading never invites the body
    /// (RFC 9110 §10.1.1), as over HTTP/1.1.
    continue_deferred: bool = false,
    /// The response has been queued in full (or the stream reset): the stream goes once the
    /// batch it is in has been sent.
    finished: bool = false,
    /// The response was given before the whole request came: the rest is refused with
    /// RST_STREAM NO_ERROR once the response is out (§8.1).
    early: bool = false,
    /// Its handler streams (on the handler pool): the head went out without content-length,
    /// and DATA frames follow as the handler flushes.
    streaming: bool = false,
    /// `body_left` is a piece of the chunk the pool handler waits on (its iovecs in the
    /// exchange's hand-off); `chunk_framed`: all of it is in the batch, and the handler goes
    /// on once that batch is out.
    chunk_pending: bool = false,
    chunk_framed: bool = false,
    /// Its request is complete, but a handler of this connection runs on the pool: it is
    /// dispatched once that one returns.
    deferred: bool = false,
    /// Bytes of `body` the pool handler has read (`.pull`).
    body_read: usize = 0,
    /// Bytes this stream counts in `State.body_bytes`: what its buffer holds, or the whole
    /// declared length once it was taken at once.
    body_counted: u64 = 0,
    /// `body` comes from the worker's allocator (a pulled body), not the stream's arena.
    body_from_gpa: bool = false,
    /// The last frame of the response is in a batch: the response is complete once that
    /// batch is out (`batchSent`).
    ended_whole: bool = false,
    /// Why the pulled body can no longer be read (told to the handler at its next read).
    pull_failure: ?Request.BodyReadFailure = null,

    /// `pull`: read by a pool handler through `req.bodyReader()` as it arrives (`body` holds
    /// what came and it has not read yet, `body_read` of it taken; the stream's window is
    /// credited as the handler reads, so the client's flow control is the back-pressure).
    const BodyMode = enum { buffer, stream, discard, pull };
    const Send = enum { waiting, headers, body, trailers, done };
};

/// Bytes a control frame the client asks for may take at most (a PING acknowledgement is 17,
/// a SETTINGS acknowledgement 9, a WINDOW_UPDATE 13, an RST_STREAM 13).
const control_frame_bytes_max = 17;
/// Bytes of the send buffer kept for the GOAWAY that ends the connection.
const goaway_reserve = 128;
/// Body bytes copied behind their DATA frame header rather than sent from where they lie.
const copy_payload_max = 1024;
/// A WINDOW_UPDATE is sent once this fraction of a window has been consumed.
const window_update_divisor = 2;
/// Stream ids remembered as reset by this side.
const reset_ids_len = 32;
/// Bytes of the response encoder's HPACK table. The decoder's must be the protocol's 4096 (a
/// client may use that much before it has seen this side's SETTINGS); the encoder may use less
/// (RFC 7541 §4.2), and a response head's fields (date, content-type, content-length, a few
/// more) fit in 1 KiB: 3 KiB less per connection, idle ones included.
const encoder_table_bytes = 1024;
/// Streams a connection's table holds at first; it doubles, up to `http2_streams_max`, when a
/// client keeps more open (so an idle connection stays small).
const streams_initial = 4;

pub const State = struct {
    worker_gpa: std.mem.Allocator,
    /// The connection's buffers: `recv` for the socket's bytes (`head_start` is the first not
    /// yet read), `out` and the iovecs for the batch, the arena for a header block. Given back
    /// while the connection is idle (no stream, nothing to send, no frame half read), as an
    /// idle HTTP/1 connection gives its back, and borrowed again for the next bytes.
    x: ?*Exchange,
    /// The link in the worker's list of connections the handler pool posted.
    completion: Exchange.CompletionLink = .{},
    /// The stream whose handler runs on the handler pool now (0: none). Meanwhile the loop
    /// leaves the connection alone (`next` says wait), so the pool thread may use the stream's
    /// exchange (`pool_exchange`) as its own; the remaining bytes are read when it is done.
    /// Only its response, as the handler streams it, touches the session on the loop.
    pool_stream: u31 = 0,
    pool_exchange: ?*Exchange = null,
    pool_error: ?anyerror = null,
    /// The pool handler streams its response (from its first chunk) or pulls its body (from
    /// its start): until it returns, the loop runs the connection as usual (reads frames,
    /// sends DATA as the windows allow, answers PINGs) while the handler waits on each chunk
    /// or read. Streams whose requests need the pool meanwhile are deferred (one pool handler
    /// at a time per connection).
    pool_live: bool = false,
    phase: Phase = .preface,
    preface_matched: u8 = 0,

    // The frame being received.
    in: ?frame.Header = null,
    in_left: u32 = 0,
    /// The payload is ignored (a frame broke a rule only its stream pays for).
    in_skip: bool = false,
    /// A control frame's payload gathered across reads (in the connection's arena).
    in_payload: std.ArrayList(u8) = .empty,
    /// The stream a DATA frame's content goes to (0: none, it is dropped).
    data_stream: u31 = 0,
    data_pad_pending: bool = false,
    data_content_left: u32 = 0,

    // The header block being received.
    block: std.ArrayList(u8) = .empty,
    /// The stream whose block is being received (0: none; then no CONTINUATION may come).
    block_stream: u31 = 0,
    block_end_stream: bool = false,
    /// Where the current frame's fragment starts in `block`.
    block_frame_start: usize = 0,
    /// The block's HEADERS made its stream depend on itself (§5.3.1).
    block_self_dependent: bool = false,

    decoder: hpack.Decoder,
    encoder: hpack.Encoder,

    streams: []Stream,
    stream_count: u32 = 0,
    /// Where the next scheduling round starts.
    round_robin: u32 = 0,
    /// The highest stream id the client has used.
    last_stream: u31 = 0,

    // Flow control (§6.9).
    conn_send_window: i64 = frame.window_initial,
    conn_recv_window: i64 = frame.window_initial,
    conn_recv_unacked: u32 = 0,
    /// The client's SETTINGS_INITIAL_WINDOW_SIZE: new streams' send window.
    peer_initial_window: i64 = frame.window_initial,
    /// The client's SETTINGS_MAX_FRAME_SIZE: the largest frame this side may send.
    peer_frame_max: u32 = frame.frame_size_initial,
    /// Since when a stream has had bytes to send and no window (0: none waits).
    blocked_since_ms: u64 = 0,

    /// Streams this side reset or refused lately: frames the client had in flight for them
    /// are dropped without a word (§5.1), and without spending the glitch budget.
    reset_ids: [reset_ids_len]u31 = @splat(0),
    reset_next: u8 = 0,
    /// Request body bytes buffered by the streams held now (`http2_connection_body_bytes_max`).
    body_bytes: u64 = 0,

    /// A GOAWAY has been sent: no new stream is taken.
    goaway_sent: bool = false,
    /// A graceful GOAWAY waits for room in the next batch (a drain while one was in flight).
    goaway_pending: bool = false,

    /// Glitch budget (tokens) and when it was last refilled.
    glitch_tokens: u32,
    glitch_refilled_ms: u64,

    /// Whether bytes of a batch remain to be sent.
    fn sending(state: *const State) bool {
        const x = state.x orelse return false;
        return x.sending();
    }

    /// Whether the loop may work the connection: no pool handler, or one that streams.
    fn live(state: *const State) bool {
        return state.pool_stream == 0 or state.pool_live;
    }
};

/// The connection this session belongs to.
inline fn connection(s: *const Session) *Connection {
    return Connection.owner.of(.http2, s);
}

inline fn worker(s: *const Session) *Worker {
    return s.connection().worker;
}

inline fn deadlines(s: *const Session) *Connection.Deadlines {
    return &s.connection().deadlines;
}

/// Takes over `x` (from the HTTP/1 session, holding the bytes received so far, the preface
/// first) and queues this side's SETTINGS. False when there is no memory for the session's
/// state (the connection then closes).
pub fn open(s: *Session, x: *Exchange) bool {
    const w = s.worker();
    const config = w.config;
    const gpa = w.gpa;
    const state = gpa.create(State) catch return s.refuse(x);
    const streams = gpa.alloc(Stream, @min(config.http2_streams_max, streams_initial)) catch {
        gpa.destroy(state);
        return s.refuse(x);
    };
    const table = gpa.alloc(u8, encoder_table_bytes) catch {
        gpa.free(streams);
        gpa.destroy(state);
        return s.refuse(x);
    };
    const ring = gpa.alloc(hpack.DynamicTable.Entry, hpack.DynamicTable.ringLength(encoder_table_bytes)) catch {
        gpa.free(table);
        gpa.free(streams);
        gpa.destroy(state);
        return s.refuse(x);
    };
    state.* = .{
        .worker_gpa = gpa,
        .x = x,
        // The peer's table grows as its entries need (an idle connection holds little of it).
        .decoder = .initGrowable(gpa, config.http2_header_table_bytes),
        .encoder = .init(table, ring),
        .streams = streams,
        .glitch_tokens = config.http2_glitch_burst,
        .glitch_refilled_ms = w.now_ms,
    };
    s.state = state;
    x.arena.reset();
    s.deadlines().read_ms = w.now_ms + config.header_timeout_ms;
    // This side's settings, then the connection window raised to what it wants (§6.9.2: the
    // connection's initial window can only change by WINDOW_UPDATE).
    var settings: [5]frame.SettingValue = .{
        .{ .id = .max_concurrent_streams, .value = config.http2_streams_max },
        .{ .id = .initial_window_size, .value = config.http2_stream_window_bytes },
        .{ .id = .max_header_list_size, .value = config.header_bytes_max },
        .{ .id = .enable_push, .value = 0 },
        .{ .id = .max_frame_size, .value = config.http2_frame_bytes_max },
    };
    const setting_count: usize = if (config.http2_frame_bytes_max == frame.frame_size_initial) 4 else 5;
    const out = x.reserveOut(frame.header_len + 6 * settings.len + 13).?;
    var n = frame.writeSettings(out, settings[0..setting_count]);
    const raise = config.http2_connection_window_bytes - frame.window_initial;
    if (raise > 0) n += frame.writeWindowUpdate(out[n..], 0, @intCast(raise));
    state.conn_recv_window = config.http2_connection_window_bytes;
    x.appendIovec(out[0..n]);
    s.consume();
    s.fill();
    s.settle();
    return true;
}

fn refuse(s: *Session, x: *Exchange) bool {
    x.iovec_index = x.iovec_count;
    x.file = null;
    s.worker().releaseExchange(x);
    return false;
}

/// Gives back everything the session holds. Call once, after the socket is closed.
pub fn deinit(s: *Session) void {
    const state = s.state orelse return;
    const w = s.worker();
    w.metrics.http2Open(false);
    for (state.streams[0..state.stream_count]) |*st| s.dropStream(st);
    state.stream_count = 0;
    if (state.x) |x| {
        x.iovec_index = x.iovec_count;
        x.file = null;
        w.releaseExchange(x);
    }
    const gpa = state.worker_gpa;
    state.decoder.deinit();
    gpa.free(state.encoder.table.bytes);
    gpa.free(state.encoder.table.ring);
    gpa.free(state.streams);
    gpa.destroy(state);
    s.state = null;
}

/// Gives back a stream's exchange and its file, whatever state it is in.
fn dropStream(s: *Session, st: *Stream) void {
    const state = s.state.?;
    state.body_bytes -= st.body_counted;
    // A pulled body's buffer is the worker's (its arena is the pool thread's meanwhile).
    if (st.body_from_gpa) st.body.deinit(state.worker_gpa);
    if (st.file) |f| f.done();
    st.file = null;
    const x = st.x;
    if (x.done.active) {
        const peer: ?std.Io.net.IpAddress = if (s.connection().peer) |p| p.* else null;
        s.worker().reportDone(x, peer, .http2, "");
    }
    x.iovec_index = x.iovec_count;
    x.file = null;
    s.worker().releaseExchange(x);
}

/// What the engine must do next.
pub fn next(s: *const Session) Next {
    const state = s.state orelse return .close;
    if (state.pool_stream != 0) {
        // A pool handler runs: the loop works the connection only while it streams, and
        // never shuts it down or closes it under the handler (its exchange is the stream's).
        if (!state.pool_live) return .wait;
        if (state.phase != .frames and !state.sending()) return .wait;
    }
    switch (state.phase) {
        .closed => return .close,
        .shutdown => return .shutdown,
        .linger => return .recv,
        else => {},
    }
    if (state.x) |x| {
        if (x.iovec_index < x.iovec_count) return .{ .send = x.iovecs[x.iovec_index..x.iovec_count] };
        if (x.file) |file| return .{ .send_file = file };
    }
    if (state.phase == .closing) return .shutdown;
    return .recv;
}

/// Never a file to cork around: a DATA frame's file bytes follow a 9-byte frame header in
/// every batch, and a cork held across batches stalls the tail of each in the kernel (up to
/// 200 ms) whenever the send buffer fills.
pub fn fileFollows(_: *const Session) ?contract.File {
    return null;
}

/// HTTP/2 sends no file bodies with sendfile: nothing for the engine to set up around them.
pub fn closesAfterSend(_: *const Session) bool {
    return false;
}

/// Whether a pool thread is running a stream's handler (the connection must not be freed,
/// nor touched by the loop, until it posts its completion).
pub fn handling(s: *const Session) bool {
    const state = s.state orelse return false;
    return state.pool_stream != 0;
}

pub fn holdsState(s: *const Session) bool {
    return s.state != null;
}

/// At shutdown a connection speaking HTTP/2 is never just idle: `drain` says GOAWAY first.
pub fn idle(_: *const Session) bool {
    return false;
}

pub fn completionLink(s: *Session) *Exchange.CompletionLink {
    return &s.state.?.completion;
}

pub fn onWake(_: *Session) void {}

/// The handler pool finished the handler of `pool_stream`: its response is sent, and the
/// bytes that came behind its request are read.
pub fn onPoolEvent(s: *Session) void {
    const state = s.state.?;
    assert(state.pool_stream != 0);
    const w = s.worker();
    const id = state.pool_stream;
    const pool_x = state.pool_exchange.?;
    if (!state.completion.takeReturn()) {
        if (pool_x.handoff.readPending()) return s.readArrived();
        return s.chunkArrived();
    }
    const result: anyerror!void = if (state.pool_error) |err| err else {};
    state.pool_stream = 0;
    state.pool_exchange = null;
    state.pool_error = null;
    state.pool_live = false;
    w.metrics.handlerEnded();
    if (state.phase == .closed) return;
    if (s.find(id)) |index| {
        const st = &state.streams[index];
        // Reset while its handler ran: it goes now.
        if (st.finished) s.forget(index) else s.handlerReturned(st, result);
    }
    s.dispatchDeferred();
    // The loop neither read nor sent while the handler ran: streams waiting for their bodies
    // were held up by this side, not by their clients.
    for (state.streams[0..state.stream_count]) |*st| {
        if (!st.remote_closed and st.send == .waiting) st.progress_ms = w.now_ms;
    }
    if (s.runsHere()) {
        // A handler on the connection's own thread: the requests that came behind this one
        // are read (and their handlers run) first, as a thread-based engine's handlers always
        // were, so the requests that came together are answered in one batch.
        s.consume();
        s.fill();
    } else {
        // This response (and the acknowledgements queued before it) first; the bytes that
        // came behind its request are read once the batch is out (`batchSent`), or now if
        // none is.
        s.fill();
        if (!state.sending()) {
            s.consume();
            s.fill();
        }
    }
    s.settle();
    s.releaseIfIdle();
}

/// Runs the handler of `pool_stream`; called on a handler pool thread, which owns that
/// stream's exchange until it posts the completion.
pub fn runHandlerOnPool(s: *Session) void {
    const state = s.state.?;
    const x = state.pool_exchange.?;
    const w = s.worker();
    w.dispatch.handle(w.dispatch.context, &x.request, &x.response) catch |err| {
        state.pool_error = err;
    };
    w.handlerReturned(s.connection());
}

/// For `Handoff.writeAll`: wakes the loop (the worker's completion list).
pub fn post(s: *Session) void {
    s.worker().postCompletion(s.connection());
}

/// For `Handoff.writeAll`: the hand-off of the pool handler's stream.
pub fn handoff(s: *Session) *Handoff {
    return &s.state.?.pool_exchange.?.handoff;
}

/// `Response.Stream` of a handler on the pool (its thread): hands the chunk to the loop, which
/// frames it as DATA (after the head, the first time) as the windows allow, and waits until
/// the frames are out; `error.ClientGone` when the stream or the connection ended first.
fn sendChunk(context: *anyopaque, res: *Response, parts: []const []const u8) error{ClientGone}!void {
    const s: *Session = @ptrCast(@alignCast(context));
    if (!res.streaming) {
        if (!res.status.valid() or res.status.code() < 200) {
            // No head can carry it; `handlerReturned` answers 500 once the handler returns.
            if (res.failure == null) res.failure = error.InvalidStatus;
            return error.ClientGone;
        }
        res.streaming = true;
    }
    var iovecs: [Handoff.iovec_max]posix.iovec_const = undefined;
    var n: usize = 0;
    for (parts) |part| {
        if (part.len == 0) continue;
        // More parts than a hand-off holds: the rest go in the next round.
        if (n == iovecs.len) {
            try s.handoff().writeAll(iovecs[0..n], s);
            n = 0;
        }
        iovecs[n] = .{ .base = part.ptr, .len = part.len };
        n += 1;
    }
    // An empty chunk still sends the head the first time.
    if (n == 0) iovecs[0] = .{ .base = "".ptr, .len = 0 };
    try s.handoff().writeAll(iovecs[0..@max(n, 1)], s);
}

/// The pool handler handed over a chunk (`sendChunk`): frame it behind the head.
fn chunkArrived(s: *Session) void {
    const state = s.state.?;
    const x = state.pool_exchange.?;
    // Refused already (`abandonIfEnding` saw it before this post was looked at): the handler
    // has its `error.ClientGone`.
    const pending = x.handoff.pendingSend() orelse return;
    const index = s.find(state.pool_stream) orelse return x.handoff.fail(false);
    const st = &state.streams[index];
    if (st.finished or state.phase != .frames) return x.handoff.fail(false); // reset, or ending
    state.pool_live = true;
    st.chunk_pending = true;
    st.chunk_framed = false;
    st.body_left = pending[0].base[0..pending[0].len];
    if (!st.streaming) {
        st.streaming = true;
        st.send = .headers;
        // From its head on, the response is reported to `onDone` however it ends.
        st.x.done.active = s.worker().dispatch.on_done != null;
        st.x.done.status = st.x.response.status;
    } else {
        st.send = .body;
        s.nextChunkPiece(st);
    }
    s.fill();
    if (!state.sending()) {
        s.consume();
        s.fill();
    }
    s.settle();
    s.chunkSent();
    s.abandonIfEnding();
}

/// Moves `body_left` on to the next non-empty piece of the pending chunk; once none is left,
/// the chunk is framed: the stream waits (for the handler's next chunk or its return).
fn nextChunkPiece(s: *Session, st: *Stream) void {
    const h = &st.x.handoff;
    while (st.body_left.len == 0) {
        h.iovec_index += 1;
        if (h.iovec_index >= h.iovec_count) {
            h.iovec_index = h.iovec_count - 1; // still pending: `Handoff.fail` must see it
            st.chunk_framed = true;
            st.send = .waiting;
            _ = s;
            return;
        }
        const v = h.iovecs[h.iovec_index];
        st.body_left = v.base[0..v.len];
    }
}

/// Once a framed chunk's batch is out (or no batch held it), the pool handler goes on.
fn chunkSent(s: *Session) void {
    const state = s.state.?;
    if (!state.pool_live) return;
    const index = s.find(state.pool_stream) orelse return;
    const st = &state.streams[index];
    if (!st.chunk_pending or !st.chunk_framed or state.sending()) return;
    st.chunk_pending = false;
    st.chunk_framed = false;
    st.x.handoff.sentByProtocol();
}

/// While a pool handler streams, the connection ends (closed, or closing with its batch
/// out): the handler's wait ends with `error.ClientGone`, and the loop leaves the connection
/// alone until it returns.
fn abandonIfEnding(s: *Session) void {
    const state = s.state orelse return;
    if (!state.pool_live or state.phase == .frames) return;
    if (state.phase != .closed and state.sending()) return; // once the batch is out
    state.pool_live = false;
    state.pool_exchange.?.handoff.fail(false);
}

/// The pool handler asks for body bytes (`pullBody`): give what came, or wait for DATA.
fn readArrived(s: *Session) void {
    const state = s.state.?;
    const x = state.pool_exchange.?;
    const index = s.find(state.pool_stream) orelse return x.handoff.fail(false);
    const st = &state.streams[index];
    if (st.finished or state.phase != .frames) return x.handoff.fail(false); // reset, or ending
    if (st.continue_deferred) {
        st.continue_deferred = false;
        // The first read: now the body is wanted, unless it is coming already.
        if (st.received == 0 and !st.remote_closed and st.send == .waiting) {
            st.continue_pending = true;
            st.send = .headers;
        }
    }
    s.serveRead(st);
    s.fill();
    s.settle();
    s.abandonIfEnding();
}

/// Answers the pool handler's pending read of `st`'s body from what has arrived: bytes, the
/// end of the body, a failure, or nothing yet (then DATA answers it). The window is credited
/// for what it takes.
fn serveRead(s: *Session, st: *Stream) void {
    const state = s.state.?;
    const config = s.worker().config;
    assert(st.body_mode == .pull and st.id == state.pool_stream);
    const h = &st.x.handoff;
    if (!h.readPending()) return;
    if (st.finished) return h.fail(false); // reset: the body will not come
    if (st.pull_failure) |failure| {
        st.x.body_reader.stream.failure = failure;
        return h.fail(false);
    }
    const available = st.body.items[st.body_read..];
    if (available.len == 0) {
        if (st.remote_closed) _ = h.deliver(""); // the end of the body
        return;
    }
    const n = h.deliver(available);
    st.body_read += n;
    // What was read goes once it is at least what is left (each byte moves about once, and
    // the buffer stays within twice the window).
    if (st.body_read >= st.body.items.len - st.body_read) {
        const left = st.body.items.len - st.body_read;
        std.mem.copyForwards(u8, st.body.items[0..left], st.body.items[st.body_read..]);
        state.body_bytes -= st.body_read;
        st.body_counted -= st.body_read;
        st.body.items.len = left;
        st.body_read = 0;
    }
    if (st.remote_closed) return;
    st.recv_unacked += @intCast(n);
    if (st.recv_unacked >= config.http2_stream_window_bytes / window_update_divisor) {
        s.writeControl(frame.header_len + 4, .window_update, st.id, .no_error, @intCast(st.recv_unacked), undefined);
        st.recv_window += st.recv_unacked;
        st.recv_unacked = 0;
    }
}

/// `req.bodyReader()` of a handler on the pool reading a body as it arrives (its thread):
/// each read waits for the loop to hand over bytes (`serveRead`).
fn pullBody(context: *anyopaque, dest: []u8) error{ ReadFailed, EndOfStream }!usize {
    const s: *Session = @ptrCast(@alignCast(context));
    const x = s.state.?.pool_exchange.?;
    const stream = &x.body_reader.stream;
    if (stream.failure != null) return error.ReadFailed;
    if (dest.len == 0) return 0;
    const n = x.handoff.read(dest, s) catch |err| {
        // A failure the loop named (too large) stands; otherwise the wait's own.
        if (stream.failure == null) stream.failure = switch (err) {
            error.ClientGone => .client_gone,
            error.Timeout => .timeout,
        };
        return error.ReadFailed;
    };
    if (n == 0) return error.EndOfStream;
    return n;
}

/// Dispatches the streams whose requests completed while a pool handler ran, until one goes
/// to the pool again.
fn dispatchDeferred(s: *Session) void {
    const state = s.state.?;
    var i: u32 = 0;
    while (i < state.stream_count and state.pool_stream == 0) : (i += 1) {
        const st = &state.streams[i];
        if (!st.deferred) continue;
        st.deferred = false;
        if (st.send != .waiting or st.finished) continue; // answered meanwhile (a 408)
        const count = state.stream_count;
        s.dispatch(st);
        // A dispatch that answered at once may have removed the stream (not while sending):
        // look at the same place again.
        if (state.stream_count < count) i -%= 1;
    }
}

/// When the engine must call `onTimeout`.
pub fn deadline(s: *const Session) u64 {
    const state = s.state orelse return std.math.maxInt(u64);
    if (!state.live()) return std.math.maxInt(u64); // handlers are not timed
    if (state.sending()) return s.deadlines().send_ms;
    if (state.phase != .frames or state.stream_count == 0) return s.deadlines().read_ms;
    // Each request whose body is still coming has its own deadline; a response waiting on a
    // closed window has the connection's. Frames that serve no stream move neither.
    const config = s.worker().config;
    var soonest: u64 = std.math.maxInt(u64);
    for (state.streams[0..state.stream_count]) |*st| {
        if (st.remote_closed or st.send != .waiting) continue;
        soonest = @min(soonest, st.progress_ms + config.body_timeout_ms);
    }
    if (state.blocked_since_ms != 0) soonest = @min(soonest, state.blocked_since_ms + config.write_timeout_ms);
    return soonest;
}

/// The buffer to read into.
pub fn recvBuffer(s: *Session) ?[]u8 {
    const state = s.state orelse return null;
    const x = state.x orelse blk: {
        const x = s.worker().acquireExchange() orelse return null;
        state.x = x;
        break :blk x;
    };
    if (state.phase == .linger) return x.recv_small;
    assert(!x.sending());
    if (x.head_start > 0) {
        // Only the start of a frame header is ever left behind (see `consume`).
        const left = x.recv_end - x.head_start;
        assert(left < frame.header_len);
        std.mem.copyForwards(u8, x.recv[0..left], x.recv[x.head_start..x.recv_end]);
        x.head_start = 0;
        x.recv_end = left;
    }
    return x.recv[x.recv_end..];
}

/// The read found nothing: give the exchange back if the connection is idle.
pub fn onWouldBlock(s: *Session) void {
    s.releaseIfIdle();
}

/// Gives the connection's exchange back when nothing needs it: no stream, nothing to send, no
/// frame or header block half read, no GOAWAY waiting to go.
fn releaseIfIdle(s: *Session) void {
    const state = s.state orelse return;
    const x = state.x orelse return;
    if (state.phase != .frames or state.stream_count > 0 or state.goaway_pending) return;
    if (x.sending() or x.head_start != x.recv_end or state.in != null or state.block_stream != 0) return;
    s.worker().releaseExchange(x);
    state.x = null;
}

/// `n` bytes were read into `recvBuffer()`; 0 means the client closed its side.
pub fn onRecv(s: *Session, n: usize) void {
    const state = s.state orelse return;
    if (n == 0) {
        // Nothing can reach the client any more than it has read.
        state.phase = .closed;
        s.abandonIfEnding();
        return;
    }
    if (state.phase == .linger) return;
    assert(state.live());
    state.x.?.recv_end += @intCast(n);
    s.consume();
    s.fill();
    s.settle();
    s.chunkSent();
    s.abandonIfEnding();
    s.releaseIfIdle();
}

/// `n` bytes of the batch (iovecs, then file) were sent.
pub fn onSend(s: *Session, n: usize) void {
    const state = s.state orelse return;
    const x = state.x.?; // a batch is being sent
    const w = s.worker();
    s.deadlines().send_ms = w.now_ms + w.config.write_timeout_ms;
    if (x.iovec_index < x.iovec_count) {
        x.advanceIovecs(n);
    } else {
        const file = &x.file.?;
        assert(n <= file.len);
        file.offset += n;
        file.len -= n;
        if (file.len == 0) x.file = null;
    }
    if (x.sending()) return;
    x.clearBatch();
    s.batchSent();
}

/// The batch is out: streams finished in it go, and the next batch is made.
fn batchSent(s: *Session) void {
    const state = s.state.?;
    var i: u32 = 0;
    while (i < state.stream_count) {
        const st = &state.streams[i];
        // The pool handler's stream stays while the handler runs (it owns the exchange).
        if (st.finished and st.id != state.pool_stream) {
            if (st.ended_whole) st.x.done.complete = true;
            s.removeStream(i);
            continue;
        }
        i += 1;
    }
    s.chunkSent();
    if (state.phase == .frames or state.phase == .preface) {
        // Bytes received behind the frame a GOAWAY-free batch answered wait in the buffer
        // only when the batch filled up mid-way; there are none otherwise.
        s.consume();
    }
    s.fill();
    s.settle();
    s.chunkSent();
    s.abandonIfEnding();
    s.releaseIfIdle();
}

/// Sets the read deadline for what the connection waits for now, and starts closing a
/// connection that said GOAWAY once its last stream is done.
fn settle(s: *Session) void {
    const state = s.state.?;
    const w = s.worker();
    if (state.phase != .frames) return;
    if (state.stream_count == 0) {
        if (state.goaway_sent and !state.sending()) {
            state.phase = .closing;
            return;
        }
        s.deadlines().read_ms = w.now_ms + w.config.idle_timeout_ms;
    }
}

/// The write side was shut down; start lingering.
pub fn onShutdown(s: *Session) void {
    const state = s.state orelse return;
    state.phase = .linger;
    s.deadlines().read_ms = s.worker().now_ms + s.worker().config.linger_timeout_ms;
}

/// The socket failed: nothing more can be done but close.
pub fn onError(s: *Session) void {
    const state = s.state orelse return;
    state.phase = .closed;
    s.abandonIfEnding();
}

/// `deadline()` has passed.
pub fn onTimeout(s: *Session) void {
    const state = s.state orelse return;
    if (!state.live()) return;
    defer s.abandonIfEnding();
    const w = s.worker();
    if (state.sending()) {
        state.phase = .closed; // the client stopped reading
        return;
    }
    switch (state.phase) {
        .preface, .shutdown, .linger, .closed, .closing => state.phase = .closed,
        .frames => {
            if (state.blocked_since_ms != 0 and w.now_ms >= state.blocked_since_ms + w.config.write_timeout_ms) {
                // Zero-window slow read: the client holds responses without reading them.
                return s.goAway(.enhance_your_calm, "flow-control window closed for too long");
            }
            if (state.stream_count == 0) return s.goAway(.no_error, "idle");
            // Requests whose bodies stopped coming are answered 408, the others go on.
            for (state.streams[0..state.stream_count]) |*st| {
                if (st.remote_closed or st.send != .waiting) continue;
                if (w.now_ms < st.progress_ms + w.config.body_timeout_ms) continue;
                if (st.id == state.pool_stream) {
                    // Its handler reads the body: a read waiting on it fails (then 408).
                    if (st.x.handoff.readPending()) st.x.handoff.fail(true);
                    st.progress_ms = w.now_ms;
                    continue;
                }
                s.answer(st, .request_timeout, "request body not received in time");
            }
            s.fill();
        },
    }
}

/// Server shutdown: GOAWAY, then the streams in flight finish and the connection closes.
pub fn drain(s: *Session) void {
    const state = s.state orelse return;
    if (!state.live()) return; // again at the next sweep
    if (state.goaway_sent or state.goaway_pending) return;
    if (state.phase != .frames and state.phase != .preface) return;
    if (state.sending()) {
        state.goaway_pending = true;
        return;
    }
    s.sendGoaway(.no_error, "shutting down");
    s.settle();
    s.abandonIfEnding();
}

// ---------------------------------------------------------------------------------------------
// Input.

/// Reads every whole frame (and the start of a DATA frame's payload) in the receive buffer.
fn consume(s: *Session) void {
    const state = s.state.?;
    const x = state.x orelse return; // nothing received since it was given back
    while (x.head_start < x.recv_end) {
        if (!state.live()) return; // the rest waits for the handler (`onPoolEvent`)
        if (state.phase != .preface and state.phase != .frames) {
            x.head_start = x.recv_end; // a connection that is closing reads no more
            return;
        }
        const bytes = x.recv[x.head_start..x.recv_end];
        if (state.phase == .preface) {
            const want = frame.preface[state.preface_matched..];
            const n = @min(want.len, bytes.len);
            if (!std.mem.eql(u8, bytes[0..n], want[0..n])) {
                x.head_start = x.recv_end;
                return s.goAway(.protocol_error, "not the HTTP/2 connection preface");
            }
            state.preface_matched += @intCast(n);
            x.head_start += @intCast(n);
            if (state.preface_matched == frame.preface.len) state.phase = .frames;
            continue;
        }
        if (state.in == null) {
            if (bytes.len < frame.header_len) return;
            x.head_start += frame.header_len;
            s.beginFrame(frame.Header.read(bytes[0..frame.header_len]));
            continue;
        }
        const take: u32 = @intCast(@min(state.in_left, bytes.len));
        x.head_start += take;
        s.payload(bytes[0..take]);
    }
}

/// A frame header arrived.
fn beginFrame(s: *Session, h: frame.Header) void {
    const state = s.state.?;
    const config = s.worker().config;
    if (state.block_stream != 0 and (h.type != .continuation or h.stream_id != state.block_stream))
        return s.goAway(.protocol_error, "a frame other than CONTINUATION inside a header block");
    if (h.type == .continuation and state.block_stream == 0)
        return s.goAway(.protocol_error, "CONTINUATION without a header block before it");
    state.in = h;
    state.in_left = h.length;
    state.in_skip = false;
    if (frame.check(h, @intCast(config.http2_frame_bytes_max))) |violation| {
        if (violation.scope == .connection) return s.goAway(violation.code, violation.why);
        s.glitch();
        s.resetStream(h.stream_id, violation.code);
        state.in_skip = true;
    } else switch (h.type) {
        .data => s.dataBegin(h),
        .headers => s.headersBegin(h),
        .goaway => {
            // The client is leaving: no new stream will come; those it keeps finish. Its
            // payload (last stream id, code, debug text) changes nothing here.
            state.goaway_sent = true;
            state.in_skip = true;
        },
        .settings, .ping, .window_update, .rst_stream, .priority, .continuation => {},
        else => state.in_skip = true, // unknown types are ignored (§4.1, §5.5)
    }
    if (state.phase != .frames) return;
    if (h.length == 0) s.payload("");
}

/// `chunk`, the next bytes of the current frame's payload, arrived.
fn payload(s: *Session, chunk: []const u8) void {
    const state = s.state.?;
    const h = state.in.?;
    assert(chunk.len <= state.in_left);
    state.in_left -= @intCast(chunk.len);
    const last = state.in_left == 0;
    defer if (last and state.phase == .frames) {
        state.in = null;
    };
    if (state.in_skip) return;
    switch (h.type) {
        .data => {
            s.dataChunk(h, chunk);
            if (last and state.phase == .frames) s.dataEnd(h);
        },
        .headers, .continuation => {
            if (state.block.items.len + chunk.len > s.worker().config.header_bytes_max)
                return s.goAway(.enhance_your_calm, "a header block larger than header_bytes_max");
            state.block.appendSlice(state.x.?.arena.allocator(), chunk) catch
                return s.goAway(.internal_error, "out of memory for a header block");
            if (last) s.blockFrameEnd(h);
        },
        else => {
            if (last and state.in_payload.items.len == 0) return s.control(h, chunk);
            state.in_payload.appendSlice(state.x.?.arena.allocator(), chunk) catch
                return s.goAway(.internal_error, "out of memory for a frame");
            if (!last) return;
            s.control(h, state.in_payload.items);
            state.in_payload = .empty;
            if (state.block_stream == 0) state.x.?.arena.reset();
        },
    }
}

/// A whole frame other than DATA, HEADERS or CONTINUATION.
fn control(s: *Session, h: frame.Header, bytes: []const u8) void {
    const state = s.state.?;
    switch (h.type) {
        .settings => {
            if (h.has(frame.Flags.ack)) return;
            var it: frame.SettingsIterator = .{ .payload = bytes };
            while (it.next()) |setting| {
                switch (setting.id) {
                    .header_table_size => state.encoder.setPeerLimit(setting.value),
                    .enable_push => if (setting.value > 1) return s.goAway(.protocol_error, "SETTINGS_ENABLE_PUSH other than 0 or 1"),
                    .initial_window_size => {
                        if (setting.value > frame.window_max) return s.goAway(.flow_control_error, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1");
                        const delta = @as(i64, setting.value) - state.peer_initial_window;
                        state.peer_initial_window = setting.value;
                        // §6.9.2: every open stream's window moves by the difference.
                        for (state.streams[0..state.stream_count]) |*st| {
                            st.send_window += delta;
                            if (st.send_window > frame.window_max) return s.goAway(.flow_control_error, "a stream window above 2^31-1");
                        }
                    },
                    .max_frame_size => {
                        if (setting.value < frame.frame_size_initial or setting.value > frame.frame_size_max)
                            return s.goAway(.protocol_error, "SETTINGS_MAX_FRAME_SIZE out of range");
                        state.peer_frame_max = setting.value;
                    },
                    else => {}, // unknown settings are ignored (§6.5.2)
                }
            }
            s.writeControl(frame.header_len, .settings_ack, 0, .no_error, 0, undefined);
        },
        .ping => {
            if (h.has(frame.Flags.ack)) return;
            s.writeControl(frame.header_len + 8, .ping_ack, 0, .no_error, 0, bytes[0..8]);
        },
        .window_update => s.windowUpdate(h.stream_id, frame.windowIncrement(bytes)),
        .rst_stream => {
            if (h.stream_id > state.last_stream) return s.goAway(.protocol_error, "RST_STREAM on an idle stream");
            const index = s.find(h.stream_id) orelse return;
            const st = &state.streams[index];
            // A stream reset before its response was out is work thrown away: Rapid Reset.
            if (st.send != .done) s.glitch();
            s.forget(index);
        },
        .priority => {
            if (frame.dependency(.{ .header = h, .payload = bytes }) == h.stream_id) {
                s.glitch();
                return s.resetStream(h.stream_id, .protocol_error);
            }
            // RFC 9113 §5.3.2 deprecates the priority scheme: the signal is ignored, but a
            // flood of them costs a little each.
            s.glitch();
        },
        else => {}, // unknown frame types are ignored (§4.1, §5.5)
    }
}

fn windowUpdate(s: *Session, stream_id: u31, increment: u31) void {
    const state = s.state.?;
    if (stream_id == 0) {
        if (increment == 0) return s.goAway(.protocol_error, "WINDOW_UPDATE of 0 on the connection");
        state.conn_send_window += increment;
        if (state.conn_send_window > frame.window_max) return s.goAway(.flow_control_error, "connection window above 2^31-1");
        return;
    }
    if (stream_id > state.last_stream) return s.goAway(.protocol_error, "WINDOW_UPDATE on an idle stream");
    const index = s.find(stream_id) orelse {
        // A stream just closed may still get these (§6.9); a flood of them is a glitch.
        s.glitch();
        return;
    };
    const st = &state.streams[index];
    // Its response is queued in full or it was reset: it stays only until its batch is out,
    // and window for it does no work, as for a stream already gone.
    if (st.finished) return s.glitch();
    if (increment == 0) {
        s.glitch();
        return s.resetStream(stream_id, .protocol_error);
    }
    st.send_window += increment;
    if (st.send_window > frame.window_max) {
        s.glitch(); // a reset the client provoked: MadeYouReset
        return s.resetStream(stream_id, .flow_control_error);
    }
}

/// A DATA frame's header arrived: flow control and the stream's state.
fn dataBegin(s: *Session, h: frame.Header) void {
    const state = s.state.?;
    state.data_stream = 0;
    state.data_pad_pending = h.has(frame.Flags.padded);
    state.data_content_left = h.length;
    if (state.data_pad_pending and h.length == 0) return s.goAway(.protocol_error, "a padded DATA frame without its pad length");
    if (h.stream_id > state.last_stream) return s.goAway(.protocol_error, "DATA on an idle stream");
    // §6.9.1: the whole payload counts, padding included, whatever becomes of it.
    if (h.length > state.conn_recv_window) return s.goAway(.flow_control_error, "DATA beyond the connection window");
    state.conn_recv_window -= h.length;
    const index = s.find(h.stream_id) orelse {
        if (s.resetLately(h.stream_id)) return; // in flight when this side reset it
        s.glitch();
        return s.resetStream(h.stream_id, .stream_closed);
    };
    const st = &state.streams[index];
    if (st.remote_closed) {
        s.glitch();
        return s.resetStream(h.stream_id, .stream_closed);
    }
    if (h.length > st.recv_window) {
        s.glitch();
        return s.resetStream(h.stream_id, .flow_control_error);
    }
    st.recv_window -= h.length;
    state.data_stream = h.stream_id;
}

/// Bytes of a DATA frame's payload: the pad length, then content, then padding.
fn dataChunk(s: *Session, h: frame.Header, chunk: []const u8) void {
    const state = s.state.?;
    var rest = chunk;
    if (state.data_pad_pending and rest.len > 0) {
        state.data_pad_pending = false;
        const pad = rest[0];
        rest = rest[1..];
        if (pad >= h.length) return s.goAway(.protocol_error, "DATA padding as long as the payload");
        state.data_content_left = h.length - 1 - pad;
    }
    const take = @min(state.data_content_left, rest.len);
    state.data_content_left -= @intCast(take);
    if (take == 0 or state.data_stream == 0) return;
    const index = s.find(state.data_stream) orelse return;
    s.bodyBytes(&state.streams[index], rest[0..take]);
}

/// A DATA frame is complete: windows are credited back, and END_STREAM ends the request.
fn dataEnd(s: *Session, h: frame.Header) void {
    const state = s.state.?;
    const config = s.worker().config;
    // The connection window is credited whatever became of the bytes.
    state.conn_recv_unacked += h.length;
    if (state.conn_recv_unacked >= config.http2_connection_window_bytes / window_update_divisor) {
        s.writeControl(frame.header_len + 4, .window_update, 0, .no_error, @intCast(state.conn_recv_unacked), undefined);
        state.conn_recv_window += state.conn_recv_unacked;
        state.conn_recv_unacked = 0;
    }
    if (state.data_stream == 0) return;
    const index = s.find(state.data_stream) orelse return;
    const st = &state.streams[index];
    if (h.length == 0 and !h.has(frame.Flags.end_stream)) s.glitch(); // an empty frame does nothing
    if (st.x.request.content_length) |declared| if (st.received > declared)
        return s.malformed(index, "more DATA than content-length");
    if (h.has(frame.Flags.end_stream)) return s.endOfRequest(index);
    if (st.body_mode == .pull) return; // credited as the handler reads (`serveRead`)
    if (st.send != .waiting) return; // answered early: the rest is refused after the response
    st.recv_unacked += h.length;
    if (st.recv_unacked >= config.http2_stream_window_bytes / window_update_divisor) {
        s.writeControl(frame.header_len + 4, .window_update, st.id, .no_error, @intCast(st.recv_unacked), undefined);
        st.recv_window += st.recv_unacked;
        st.recv_unacked = 0;
    }
}

/// Request body bytes for `st`.
fn bodyBytes(s: *Session, st: *Stream, bytes: []const u8) void {
    const state = s.state.?;
    const config = s.worker().config;
    st.received += bytes.len;
    st.progress_ms = s.worker().now_ms;
    if (st.body_mode == .pull) {
        // The handler reads on, whatever it has sent (a response may stream meanwhile); a
        // stream reset meanwhile takes nothing more.
        if (st.pull_failure != null or st.finished) return;
        if (st.received > config.streamed_body_bytes_max) {
            st.pull_failure = .too_large;
        } else if (state.body_bytes + bytes.len > config.http2_connection_body_bytes_max) {
            st.pull_failure = .client_gone; // the connection holds too much: this one stops
        } else if (st.body.appendSlice(state.worker_gpa, bytes)) |_| {
            state.body_bytes += bytes.len;
            st.body_counted += bytes.len;
        } else |_| st.pull_failure = .client_gone;
        if (st.id == state.pool_stream) s.serveRead(st);
        return;
    }
    if (st.send != .waiting) return; // answered already: dropped
    switch (st.body_mode) {
        .discard => {},
        .buffer => {
            if (st.received > config.body_bytes_max) return s.answer(st, .content_too_large, "request body too large");
            // Counted as it comes, unless the declared length was counted at once.
            const uncounted = (st.body.items.len + bytes.len) -| st.body_counted;
            if (state.body_bytes + uncounted > config.http2_connection_body_bytes_max)
                return s.answer(st, .service_unavailable, "too many request body bytes buffered on this connection");
            st.body.appendSlice(st.x.arena.allocator(), bytes) catch
                return s.answer(st, .service_unavailable, "server out of memory for request bodies");
            state.body_bytes += uncounted;
            st.body_counted += uncounted;
        },
        .pull => unreachable, // above
        .stream => {
            if (st.received > config.streamed_body_bytes_max) return s.answer(st, .content_too_large, "request body too large");
            const on_body = s.worker().dispatch.on_body.?;
            const x = st.x;
            on_body(s.worker().dispatch.context, &x.request, &x.response, bytes) catch |err| s.hookFailed(st, err);
        },
    }
}

/// A HEADERS frame's header arrived.
fn headersBegin(s: *Session, h: frame.Header) void {
    const state = s.state.?;
    if (h.stream_id % 2 == 0) return s.goAway(.protocol_error, "a stream id a client may not use");
    state.block_stream = h.stream_id;
    state.block_end_stream = h.has(frame.Flags.end_stream);
    state.block_frame_start = 0;
    state.block_self_dependent = false;
    state.block = .empty;
}

/// A HEADERS or CONTINUATION frame's fragment is in `block`.
fn blockFrameEnd(s: *Session, h: frame.Header) void {
    const state = s.state.?;
    if (h.type == .headers) {
        const raw = state.block.items[state.block_frame_start..];
        const f: frame.Frame = .{ .header = h, .payload = raw };
        if (frame.dependency(f) == h.stream_id) state.block_self_dependent = true;
        const fragment = frame.content(f) catch return s.goAway(.protocol_error, "HEADERS padding as long as the payload");
        std.mem.copyForwards(u8, state.block.items[state.block_frame_start..][0..fragment.len], fragment);
        state.block.items.len = state.block_frame_start + fragment.len;
    } else if (h.length == 0 and !h.has(frame.Flags.end_headers)) {
        s.glitch(); // an empty CONTINUATION carries nothing: a flood of them is an attack
    }
    if (!h.has(frame.Flags.end_headers)) {
        state.block_frame_start = state.block.items.len;
        return;
    }
    const id = state.block_stream;
    state.block_stream = 0;
    s.headerBlock(id, state.block_end_stream, state.block.items);
    state.block = .empty;
    if (state.phase == .frames) state.x.?.arena.reset();
}

/// A whole header block for stream `id`.
fn headerBlock(s: *Session, id: u31, end_stream: bool, block: []const u8) void {
    const state = s.state.?;
    const w = s.worker();
    const scratch = decodeScratch(w) orelse return s.goAway(.internal_error, "out of memory for header decoding");
    var decoded = state.decoder.decode(block, scratch.bytes, scratch.fields) catch |err| switch (err) {
        error.Compression => return s.goAway(.compression_error, "a header block that does not decode"),
        error.OutOfMemory => return s.goAway(.internal_error, "out of memory for the header table"),
    };
    if (!decoded.too_large) {
        var list_bytes: usize = 0;
        for (decoded.fields) |f| list_bytes += f.name.len + f.value.len;
        if (list_bytes > w.config.header_bytes_max) decoded = .{ .fields = &.{}, .too_large = true };
    }
    if (s.find(id)) |index| {
        // A second block on an open stream: its trailers (§8.1).
        const st = &state.streams[index];
        if (st.remote_closed) {
            s.glitch();
            return s.resetStream(id, .stream_closed);
        }
        if (!end_stream) return s.malformed(index, "a second HEADERS without END_STREAM");
        if (decoded.too_large) return s.malformed(index, "trailers larger than the header list limit");
        if (request.checkTrailers(decoded.fields)) |why| return s.malformed(index, why);
        return s.endOfRequest(index);
    }
    if (id <= state.last_stream) {
        if (s.resetLately(id)) return; // trailers in flight when this side reset the stream
        return s.goAway(.stream_closed, "HEADERS on a closed stream");
    }
    state.last_stream = id;
    if (state.goaway_sent) return; // after GOAWAY new streams are ignored (§6.8)
    if (state.block_self_dependent) {
        s.glitch();
        return s.resetStream(id, .protocol_error);
    }
    if (state.stream_count == w.config.http2_streams_max) {
        // §5.1.2: more than SETTINGS_MAX_CONCURRENT_STREAMS.
        s.glitch();
        return s.resetStream(id, .refused_stream);
    }
    if (state.stream_count == state.streams.len) {
        const larger = @min(2 * state.streams.len, w.config.http2_streams_max);
        state.streams = state.worker_gpa.realloc(state.streams, larger) catch
            return s.resetStream(id, .refused_stream);
    }
    const x = w.acquireStreamExchange(state.stream_count) orelse return s.resetStream(id, .refused_stream);
    const index = state.stream_count;
    state.stream_count += 1;
    state.streams[index] = .{
        .id = id,
        .x = x,
        .remote_closed = end_stream,
        .recv_window = w.config.http2_stream_window_bytes,
        .send_window = state.peer_initial_window,
        .progress_ms = w.now_ms,
    };
    const st = &state.streams[index];
    x.arena.beginRequest();
    x.started_ms = w.now_ms;
    w.beginDone(x);
    if (decoded.too_large) {
        s.prepare(st, &.{ .version = .http2 });
        return s.answer(st, .request_header_fields_too_large, "request header list too large");
    }
    var storage: request.Storage = .{ .bytes = x.recv_small, .spill = x.arena.allocator() };
    switch (request.build(decoded.fields, &storage, x.header_storage)) {
        .malformed => |why| return s.malformed(index, why),
        .refuse => |r| {
            s.prepare(st, &.{ .version = .http2 });
            return s.answer(st, r.status, r.why);
        },
        .head => |head| {
            s.prepare(st, &head.head);
            x.done.request_known = true;
            // `onHead` sees every request, as over HTTP/1.1 (a handler may set up state there
            // that `handle` expects); without a body its answer does not matter.
            if (end_stream) if (w.dispatch.on_head) |on_head| {
                _ = on_head(w.dispatch.context, &x.request, &x.response) catch |err| return s.hookFailed(st, err);
            };
            if (!end_stream) {
                if (w.dispatch.on_head) |on_head| {
                    const action = on_head(w.dispatch.context, &x.request, &x.response) catch |err| return s.hookFailed(st, err);
                    st.body_mode = switch (action) {
                        .buffer => .buffer,
                        // A body to pull as it comes needs a thread of the handler's own to
                        // wait on it; without one it is buffered first (`bodyReader()` then
                        // reads it whole).
                        .reader => if (s.handlerRunner() != null) .pull else .buffer,
                        .stream => if (w.dispatch.on_body != null) .stream else .buffer,
                        .skip => .discard,
                    };
                    if (action == .skip) return s.dispatch(st);
                }
                // A body read or pushed as it comes is bounded by streamed_body_bytes_max: one
                // declared longer is refused before the handler runs, as over HTTP/1.1.
                if (st.body_mode == .pull or st.body_mode == .stream) if (x.request.content_length) |length| {
                    if (length > w.config.streamed_body_bytes_max) return s.answer(st, .content_too_large, "request body too large");
                };
                if (st.body_mode == .buffer) if (x.request.content_length) |length| {
                    // A declared length is taken whole at once (growing the buffer in the
                    // arena as DATA comes would hold about three times the body), and counts
                    // against the connection's bound from now on.
                    if (length > w.config.body_bytes_max) return s.answer(st, .content_too_large, "request body too large");
                    if (state.body_bytes + length > w.config.http2_connection_body_bytes_max)
                        return s.answer(st, .service_unavailable, "too many request body bytes buffered on this connection");
                    st.body.ensureTotalCapacityPrecise(x.arena.allocator(), @intCast(length)) catch
                        return s.answer(st, .service_unavailable, "server out of memory for request bodies");
                    state.body_bytes += length;
                    st.body_counted = length;
                };
                if (st.body_mode == .pull) st.body_from_gpa = true;
                if (head.expect_continue) {
                    if (st.body_mode == .pull) st.continue_deferred = true else st.continue_pending = true;
                }
                s.deadlines().read_ms = w.now_ms + w.config.body_timeout_ms;
                if (st.continue_pending) st.send = .headers; // the 100 goes out first
                // The handler starts now and reads the body as it arrives.
                if (st.body_mode == .pull) s.dispatch(st);
                return;
            }
            s.dispatch(st);
        },
    }
}

/// Where header blocks are decoded: the worker's scratch (one block at a time per thread),
/// `header_bytes_max` bytes of names and values behind room for the fields.
fn decodeScratch(w: *Worker) ?struct { bytes: []u8, fields: []hpack.Field } {
    const field_count = @as(usize, w.config.header_count_max) + 8;
    const fields_bytes = field_count * @sizeOf(hpack.Field);
    // The decoder needs room for its largest table entry, even when the list limit is lower
    // (`headerBlock` checks that limit after decoding).
    const storage_bytes = @max(w.config.header_bytes_max, w.config.http2_header_table_bytes);
    const memory = w.scratch(fields_bytes + storage_bytes) orelse return null;
    const fields: [*]hpack.Field = @ptrCast(@alignCast(memory.ptr));
    return .{ .bytes = memory[fields_bytes..], .fields = fields[0..field_count] };
}

/// The client ended stream `index` (END_STREAM).
fn endOfRequest(s: *Session, index: u32) void {
    const state = s.state.?;
    const st = &state.streams[index];
    st.remote_closed = true;
    if (st.x.request.content_length) |declared| if (st.received != declared)
        return s.malformed(index, "DATA not as long as content-length");
    if (st.body_mode == .pull) {
        // Dispatched already (or deferred): a read waiting hears of the end.
        if (st.id == state.pool_stream) s.serveRead(st);
        return;
    }
    if (st.send == .waiting or (st.send == .headers and st.continue_pending)) {
        st.continue_pending = false;
        st.send = .waiting;
        return s.dispatch(st);
    }
    if (st.send == .done and st.finished) return;
}

/// Builds the stream's request view and an empty response (the body comes at `dispatch`).
fn prepare(s: *Session, st: *Stream, head: *const http.RequestHead) void {
    const w = s.worker();
    const x = st.x;
    x.request = .init(head, "", x.arena.allocator());
    x.request_bound = null; // every field is the stream's now
    x.request.worker_index = w.index;
    x.request.peer = if (s.connection().peer) |peer| peer.* else null;
    x.request.tls_session = s.connection().transport.facts();
    x.request.server_draining = @atomicLoad(bool, &w.draining, .monotonic);
    x.request.body_decoding.bytes_max = w.config.decodedBodyBytesMax();
    x.request.keep_alive = true;
    // A body follows whose length was not declared: what `chunked` says over HTTP/1.1.
    x.request.chunked = !st.remote_closed and x.request.content_length == null;
    if (x.response_ready) {
        x.response.reset(.{ .body_buffer = x.out, .discard_body = head.method == .HEAD, .stream = null });
    } else {
        x.response = .init(.{
            .arena = x.arena.allocator(),
            .header_storage = x.response_header_storage,
            .body_buffer = x.out,
            .body_bytes_max = w.config.response_body_bytes_max,
            .discard_body = head.method == .HEAD,
            .stream = null,
        });
        x.response_ready = true;
    }
    if (w.config.request_id) {
        const sent = x.request.header("x-request-id");
        const usable = if (sent) |id| Request.usableRequestId(id) else false;
        const id = if (usable) sent.? else w.newRequestId(&x.request_id_storage);
        x.request.request_id = id;
        x.response.header("X-Request-Id", id) catch {};
    }
}

/// Runs the handler for the stream's complete request: here, on the loop's thread, where a
/// response is built whole before it is sent (`Response.stream` is null), or on the handler
/// pool, where it may stream (`sendChunk`). A body the handler wants to pull has been
/// buffered (`bodyReader()` reads it).
fn dispatch(s: *Session, st: *Stream) void {
    const state = s.state.?;
    const w = s.worker();
    const x = st.x;
    const pull = st.body_mode == .pull;
    if (!pull) x.request.body_bytes = st.body.items;
    if (pull or mayBlock(w, &x.request)) if (s.handlerRunner()) |runner| {
        if (state.pool_stream != 0) {
            // A pool handler of this connection streams: one on the pool at a time, so this
            // one waits for it (handlers that need no pool run meanwhile).
            st.deferred = true;
            return;
        }
        // A handler that may block runs on the pool; the connection waits for it (its other
        // streams too: one handler at a time per connection, as HTTP/1 runs one request),
        // unless it streams its response (`sendChunk`).
        state.pool_stream = st.id;
        state.pool_exchange = x;
        x.handoff.begin();
        x.response.stream = .{ .context = s, .sendChunk = sendChunk };
        if (pull) {
            x.body_reader = .init(s, pullBody);
            x.request.body_source = .{ .stream = &x.body_reader.stream };
        }
        switch (runner) {
            .pool => |pool| pool.submit(s.connection()) catch {
                state.pool_stream = 0;
                state.pool_exchange = null;
                x.response.stream = null;
                if (pull) x.request.body_source = .unavailable;
                return s.answer(st, .service_unavailable, "all handler threads are busy");
            },
            .here => w.runHere(s.connection()),
        }
        // A handler reading its body as it comes needs the loop to receive it meanwhile.
        if (pull) state.pool_live = true;
        w.metrics.handlerStarted();
        return;
    };
    w.metrics.handlerStarted();
    const result = w.dispatch.handle(w.dispatch.context, &x.request, &x.response);
    w.metrics.handlerEnded();
    s.handlerReturned(st, result);
}

/// Where a stream's handler runs free to block, so that it may stream its response and pull
/// its body while the frames move: an event-loop engine's handler pool, or, on a thread-based
/// engine (whose handlers run on the connection's thread, so it sets a sink), that thread at
/// the top of the engine's loop, which lends the loop out meanwhile (`Worker.runHere`).
/// Null: the handler runs here and now, and its response is sent whole.
const Runner = union(enum) { pool: *HandlerPool, here };

/// Whether stream handlers that may block run on the connection's own thread (`Runner.here`).
fn runsHere(s: *const Session) bool {
    return s.connection().sink != null and s.worker().runs_here;
}

fn handlerRunner(s: *const Session) ?Runner {
    const w = s.worker();
    if (s.connection().sink == null) return if (w.handler_pool) |pool| .{ .pool = pool } else null;
    return if (s.runsHere()) .here else null;
}

/// Whether the handler may block on this request (it then runs where it may: `handlerRunner`).
fn mayBlock(w: *const Worker, req: *const Request) bool {
    const may_block = w.dispatch.may_block orelse return true;
    return may_block(w.dispatch.context, req);
}

/// The handler of `st` returned `result`: its response, or the error's, waits to be sent.
fn handlerReturned(s: *Session, st: *Stream, result: anyerror!void) void {
    const res = &st.x.response;
    if (st.body_mode == .pull) {
        // What the handler left unread is dropped (and the rest refused after the response).
        const state = s.state.?;
        state.body_bytes -= st.body_counted;
        st.body_counted = 0;
        st.body.clearAndFree(state.worker_gpa);
        st.body_read = 0;
        st.body_mode = .discard;
        // A read failure the handler passed on is answered with its own status.
        if (st.x.body_reader.stream.failure) |failure| if (result) |_| {} else |_| if (!st.streaming) {
            return switch (failure) {
                .too_large => s.answer(st, .content_too_large, "request body too large"),
                .timeout => s.answer(st, .request_timeout, "request body not received in time"),
                .malformed => s.answer(st, .bad_request, "malformed request body"),
                .client_gone => s.resetStream(st.id, .cancel),
            };
        };
    }
    if (st.streaming) {
        // The head is out: a failure can only reset the stream.
        const failure: ?anyerror = if (result) |_| res.failure else |err| err;
        if (failure) |err| {
            if (err != error.ClientGone) {
                s.worker().metrics.handlerFailed();
                log.warn("handler failed on {s} {s} while streaming: {t}", .{ st.x.request.method.name(), st.x.request.path, err });
            }
            // Reported as a response that did not go out whole.
            st.x.done.active = s.worker().dispatch.on_done != null;
            st.x.done.status = res.status;
            return s.resetStream(st.id, .internal_error);
        }
    }
    result catch |err| return s.handlerFailed(st, err);
    if (res.failure) |err| return s.handlerFailed(st, err);
    if (!res.status.valid()) return s.handlerFailed(st, error.InvalidStatus);
    if (res.status.code() < 200) return s.handlerFailed(st, error.InterimStatusFromHandler);
    if (res.websocket_upgrade != null) {
        // RFC 8441 (WebSockets over HTTP/2) is not spoken: say so plainly.
        return s.answer(st, .not_implemented, "WebSockets over HTTP/2 are not supported; use HTTP/1.1");
    }
    s.responseReady(st);
}

fn hookFailed(s: *Session, st: *Stream, err: anyerror) void {
    const res = &st.x.response;
    if (res.status.code() >= 400 and res.status.valid() and res.failure == null) {
        st.body_mode = .discard;
        return s.responseReady(st);
    }
    s.handlerFailed(st, err);
}

fn handlerFailed(s: *Session, st: *Stream, err: anyerror) void {
    const w = s.worker();
    const x = st.x;
    const reply = client_error.answer(err);
    if (reply == null) {
        w.metrics.handlerFailed();
        log.warn("handler failed on {s} {s}: {t}", .{ x.request.method.name(), x.request.path, err });
    }
    if (reply) |r| {
        var buffer: [client_error.reason_bytes_max]u8 = undefined;
        const parameter = x.request.fault.nameFor(err) orelse return s.answer(st, r.status, r.reason);
        return s.answer(st, r.status, client_error.reasonNaming(&buffer, r, parameter));
    }
    s.answer(st, .internal_server_error, "the handler failed");
}

/// Answers the stream with an error status and a short text body.
fn answer(s: *Session, st: *Stream, status: http.Status, message: []const u8) void {
    const x = st.x;
    const res = &x.response;
    if (res.body == .file) res.body.file.done();
    res.status = status;
    res.content_type = "text/plain; charset=utf-8";
    res.header_list.items.len = 0;
    res.trailer_list = .empty;
    res.failure = null;
    res.body = .buffered;
    res.body_writer.end = 0;
    res.discarded_len = 0;
    if (x.request.request_id) |id| res.header("X-Request-Id", id) catch {};
    const text = std.fmt.allocPrint(x.arena.allocator(), "{d} {s}: {s}\n", .{ status.code(), status.phrase(), message }) catch "";
    res.setBody(text);
    if (status != .internal_server_error) s.worker().metrics.refusedFor(status);
    st.body_mode = .discard;
    x.done.core_response = true;
    s.responseReady(st);
}

/// The response is complete: it waits for `fill` to send it.
fn responseReady(s: *Session, st: *Stream) void {
    const w = s.worker();
    const x = st.x;
    const res = &x.response;
    w.metrics.answered(x.request.method, res.status, w.now_ms -| x.started_ms);
    w.requests_total += 1;
    x.done.active = w.dispatch.on_done != null;
    x.done.status = res.status;
    if (!st.remote_closed) st.early = true;
    st.continue_pending = false;
    // A streamed response's head is out: what the handler left in its buffer follows.
    st.send = if (st.streaming) .body else .headers;
    const send_body = !res.status.forbidsContent() and !res.discard_body;
    st.content_length = res.contentLength();
    switch (res.body) {
        .buffered => st.body_left = if (send_body) res.bufferedBody() else "",
        .bytes => |bytes| st.body_left = if (send_body) bytes else "",
        .file => |file| {
            if (send_body and file.len > 0) st.file = file else file.done();
            res.body = .buffered; // the stream owns the file now
        },
    }
}

/// The request broke HTTP/2's rules for messages (§8.1.1): PROTOCOL_ERROR on the stream.
fn malformed(s: *Session, index: u32, why: []const u8) void {
    const state = s.state.?;
    log.debug("HTTP/2 stream {d} malformed: {s}", .{ state.streams[index].id, why });
    s.glitch();
    const id = state.streams[index].id;
    s.forget(index);
    s.resetStream(id, .protocol_error);
}

// ---------------------------------------------------------------------------------------------
// Streams.

fn find(s: *const Session, id: u31) ?u32 {
    const state = s.state.?;
    for (state.streams[0..state.stream_count], 0..) |*st, i| {
        if (st.id == id) return @intCast(i);
    }
    return null;
}

/// The stream is over for this side: it goes now, or once the batch holding its bytes is out.
fn forget(s: *Session, index: u32) void {
    const state = s.state.?;
    const st = &state.streams[index];
    if (st.id == state.pool_stream) {
        // Its handler still runs and owns the exchange: the stream goes once it returns, and
        // a chunk it waits on is not sent (frames of it in the batch in flight still point
        // at the handler's memory: it goes on once they are out, and its next chunk fails).
        if (st.chunk_pending) {
            if (state.sending()) {
                st.chunk_framed = true;
            } else {
                st.chunk_pending = false;
                st.x.handoff.fail(false);
            }
        }
        // A read it waits on ends too (the body will not come).
        if (st.body_mode == .pull and st.x.handoff.readPending()) st.x.handoff.fail(false);
        st.finished = true;
        st.send = .done;
        st.body_left = "";
        return;
    }
    if (state.sending()) {
        // Its bytes may be in the batch (its file too): release it when the batch is out.
        st.finished = true;
        st.send = .done;
        st.body_left = "";
        return;
    }
    s.removeStream(index);
}

fn removeStream(s: *Session, index: u32) void {
    const state = s.state.?;
    s.dropStream(&state.streams[index]);
    state.stream_count -= 1;
    if (index != state.stream_count) state.streams[index] = state.streams[state.stream_count];
}

/// RST_STREAM for `id`, and the stream forgotten if this side holds it.
fn resetStream(s: *Session, id: u31, code: frame.ErrorCode) void {
    if (s.find(id)) |index| s.forget(index);
    s.rememberReset(id);
    s.writeControl(frame.header_len + 4, .rst_stream, id, code, 0, undefined);
}

fn rememberReset(s: *Session, id: u31) void {
    const state = s.state.?;
    state.reset_ids[state.reset_next] = id;
    state.reset_next = @intCast((state.reset_next + 1) % reset_ids_len);
}

/// Whether this side reset stream `id` lately (see `State.reset_ids`).
fn resetLately(s: *const Session, id: u31) bool {
    const state = s.state.?;
    return std.mem.findScalar(u31, &state.reset_ids, id) != null;
}

/// One more frame that did no useful work; too many in too short a time end the connection.
fn glitch(s: *Session) void {
    const state = s.state.?;
    const w = s.worker();
    const config = w.config;
    const elapsed = w.now_ms -| state.glitch_refilled_ms;
    const refill = elapsed * config.http2_glitch_rate_per_s / 1000;
    if (refill > 0) {
        state.glitch_tokens = @intCast(@min(@as(u64, config.http2_glitch_burst), state.glitch_tokens + refill));
        state.glitch_refilled_ms = w.now_ms;
    }
    if (state.glitch_tokens == 0) return s.goAway(.enhance_your_calm, "too many frames that do no work");
    state.glitch_tokens -= 1;
}

// ---------------------------------------------------------------------------------------------
// Output.

const ControlKind = enum { settings_ack, ping_ack, window_update, rst_stream };

/// Writes a control frame into the batch. A client that makes this side answer more than the
/// send buffer holds (it sends faster than it reads) is flooding: GOAWAY.
fn writeControl(s: *Session, len: usize, kind: ControlKind, stream_id: u31, code: frame.ErrorCode, increment: u31, ping: ?*const [8]u8) void {
    const state = s.state.?;
    if (state.phase != .frames and state.phase != .preface) return;
    assert(len <= control_frame_bytes_max);
    const x = state.x.?; // control frames answer frames just read
    if (x.file != null or x.out.len - x.out_len < len + goaway_reserve or x.iovec_count + 2 > Exchange.iovec_max)
        return s.goAway(.enhance_your_calm, "control frames faster than they are read");
    const out = x.reserveOut(len).?;
    const n = switch (kind) {
        .settings_ack => frame.writeSettingsAck(out),
        .ping_ack => frame.writePing(out, true, ping.?),
        .window_update => frame.writeWindowUpdate(out, stream_id, increment),
        .rst_stream => frame.writeRstStream(out, stream_id, code),
    };
    assert(n == len);
    x.appendIovec(out);
}

/// Ends the connection: GOAWAY with `code`, then shut down once the batch is out.
fn goAway(s: *Session, code: frame.ErrorCode, why: []const u8) void {
    const state = s.state.?;
    if (state.phase == .closing or state.phase == .closed or state.phase == .shutdown or state.phase == .linger) return;
    if (code != .no_error) log.debug("HTTP/2 connection error {t}: {s}", .{ code, why });
    s.sendGoaway(code, why);
    state.phase = .closing;
}

fn sendGoaway(s: *Session, code: frame.ErrorCode, why: []const u8) void {
    const state = s.state.?;
    const x = state.x orelse blk: {
        // Idle, with its exchange given back: borrow one to say it.
        const x = s.worker().acquireExchange() orelse {
            state.phase = .closed;
            return;
        };
        state.x = x;
        break :blk x;
    };
    state.goaway_sent = true;
    state.goaway_pending = false;
    const debug = why[0..@min(why.len, goaway_reserve - frame.header_len - 8)];
    const len = frame.header_len + 8 + debug.len;
    if (x.file != null or x.iovec_count + 1 > Exchange.iovec_max) {
        // No room in a batch in flight: the connection just closes.
        state.phase = .closed;
        return;
    }
    const out = x.reserveOut(len) orelse {
        state.phase = .closed;
        return;
    };
    _ = frame.writeGoaway(out, state.last_stream, code, debug);
    x.appendIovec(out);
    s.deadlines().send_ms = s.worker().now_ms + s.worker().config.write_timeout_ms;
}

/// Adds the streams' HEADERS and DATA frames to the batch, round-robin, as the flow-control
/// windows and the batch's room allow.
fn fill(s: *Session) void {
    const state = s.state.?;
    const w = s.worker();
    if (state.phase != .frames and state.phase != .closing) return;
    if (!state.live()) return; // after the handler (`onPoolEvent`)
    if (state.stream_count == 0 and !state.goaway_pending) {
        state.blocked_since_ms = 0;
        // Control frames alone (acks, resets) may be in the batch: they are timed too.
        if (state.sending()) s.deadlines().send_ms = w.now_ms + w.config.write_timeout_ms;
        return;
    }
    const x = state.x.?; // held while a stream is, and while a GOAWAY waits
    if (state.goaway_pending and x.file == null) s.sendGoaway(.no_error, "shutting down");
    var blocked = false;
    var data_sent = false;
    var progress = true;
    rounds: while (progress and state.stream_count > 0) {
        progress = false;
        blocked = false;
        const count = state.stream_count;
        var k: u32 = 0;
        while (k < count) : (k += 1) {
            if (x.file != null or x.iovec_count + 3 > Exchange.iovec_max) break :rounds;
            const st = &state.streams[(state.round_robin + k) % count];
            if (st.finished) continue;
            switch (st.send) {
                .waiting, .done => {},
                .headers => {
                    if (!s.writeHeaders(st)) break :rounds;
                    progress = true;
                },
                .trailers => {
                    if (!s.writeTrailers(st)) break :rounds;
                    progress = true;
                },
                .body => switch (s.writeData(st)) {
                    .sent => {
                        progress = true;
                        data_sent = true;
                    },
                    .blocked => blocked = true,
                    .full => break :rounds,
                },
            }
        }
        state.round_robin +%= 1;
    }
    if (x.sending()) s.deadlines().send_ms = w.now_ms + w.config.write_timeout_ms;
    // Only DATA going out is progress for a response waiting on a window (a PING answered
    // is not).
    if (data_sent or !blocked) {
        state.blocked_since_ms = 0;
    } else if (state.blocked_since_ms == 0) state.blocked_since_ms = w.now_ms;
}

/// Encodes the stream's response head (or its 100 Continue) into HEADERS (and CONTINUATION)
/// frames. False when the batch has no room for it now.
fn writeHeaders(s: *Session, st: *Stream) bool {
    const state = s.state.?;
    const x = state.x.?;
    const w = s.worker();
    if (st.continue_pending) {
        var block: [24]u8 = undefined;
        var n = state.encoder.begin(&block) catch unreachable; // size updates come first
        n += state.encoder.encode(block[n..], ":status", "100", .allowed) catch unreachable;
        const out = x.reserveOut(frame.header_len + n) orelse return false;
        (frame.Header{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers, .stream_id = st.id }).write(out[0..frame.header_len]);
        @memcpy(out[frame.header_len..][0..n], block[0..n]);
        x.appendIovec(out);
        st.continue_pending = false;
        // A streamed head (a pool handler's first chunk) may wait behind the 100.
        st.send = if (st.chunk_pending) .headers else .waiting;
        return true;
    }
    const res = &st.x.response;
    // A streamed response's body follows as its handler flushes, and its end comes after.
    const has_body = st.body_left.len > 0 or st.file != null or st.streaming;
    // An upper bound of the block: every field as literals with long length prefixes.
    var bound: usize = 192; // size updates, :status, date, content-length
    if (res.content_type) |t| bound += 16 + t.len;
    for (res.headers()) |f| bound += 16 + f.name.len + f.value.len;
    const frames_max = bound / state.peer_frame_max + 1;
    const room_needed = bound + frames_max * frame.header_len;
    var staging: []u8 = undefined;
    const in_out = x.out.len - x.out_len >= room_needed + goaway_reserve;
    if (in_out) {
        staging = x.out[x.out_len..][0..room_needed];
    } else {
        if (x.iovec_count > 0) return false; // wait for this batch to go
        staging = st.x.arena.allocator().alloc(u8, room_needed) catch {
            s.resetWhileFilling(st);
            return true;
        };
    }
    // The block goes first behind room for one frame header; split into frames afterwards.
    const block_start = frame.header_len;
    var n: usize = block_start;
    n += state.encoder.begin(staging[n..]) catch unreachable;
    var status_text: [3]u8 = undefined;
    _ = std.fmt.bufPrint(&status_text, "{d}", .{res.status.code()}) catch unreachable;
    n += state.encoder.encode(staging[n..], ":status", &status_text, .allowed) catch unreachable;
    const date_line = w.date.line();
    n += state.encoder.encode(staging[n..], "date", date_line[6 .. date_line.len - 2], .allowed) catch unreachable;
    if (res.content_type) |t| n += state.encoder.encode(staging[n..], "content-type", t, .allowed) catch unreachable;
    if (!res.status.forbidsContent() and !st.streaming) {
        var length_text: [20]u8 = undefined;
        const length = std.fmt.bufPrint(&length_text, "{d}", .{st.content_length}) catch unreachable;
        n += state.encoder.encode(staging[n..], "content-length", length, .allowed) catch unreachable;
    }
    n += s.encodeFields(st, staging[n..], res.headers());
    const block_len = n - block_start;
    const has_trailers = res.trailers().len > 0 and !res.discard_body;
    const end_stream: u8 = if (has_body or has_trailers) 0 else frame.Flags.end_stream;
    if (block_len <= state.peer_frame_max) {
        (frame.Header{
            .length = @intCast(block_len),
            .type = .headers,
            .flags = frame.Flags.end_headers | end_stream,
            .stream_id = st.id,
        }).write(staging[0..frame.header_len]);
        if (in_out) {
            x.appendIovec(x.reserveOut(n).?);
        } else x.appendIovec(staging[0..n]);
    } else {
        // HEADERS then CONTINUATION frames: the block is moved along to make room for each
        // frame's header (rare: a head larger than the client's frame size).
        const block = st.x.arena.allocator().dupe(u8, staging[block_start..n]) catch {
            // The encoder's table has moved on: nothing can be said on this connection now.
            s.goAway(.internal_error, "out of memory for a response head");
            return false;
        };
        var at: usize = 0;
        var written: usize = 0;
        var first = true;
        while (at < block.len) {
            const piece = @min(block.len - at, state.peer_frame_max);
            const last = at + piece == block.len;
            var flags: u8 = if (last) frame.Flags.end_headers else 0;
            if (first) flags |= end_stream;
            (frame.Header{
                .length = @intCast(piece),
                .type = if (first) .headers else .continuation,
                .flags = flags,
                .stream_id = st.id,
            }).write(staging[written..][0..frame.header_len]);
            @memcpy(staging[written + frame.header_len ..][0..piece], block[at..][0..piece]);
            written += frame.header_len + piece;
            at += piece;
            first = false;
        }
        if (in_out) {
            x.appendIovec(x.reserveOut(written).?);
        } else x.appendIovec(staging[0..written]);
    }
    if (has_body) {
        st.send = .body;
        if (st.chunk_pending and st.body_left.len == 0) s.nextChunkPiece(st);
    } else if (has_trailers) {
        st.send = .trailers;
    } else s.responseDone(st);
    return true;
}

/// Encodes a handler's fields into `out` (sized by the caller's bound): names lowercased, as
/// HTTP/2 has them, and connection-specific fields left out (§8.2.2). Returns the bytes
/// written.
fn encodeFields(s: *Session, st: *Stream, out: []u8, fields: []const http.Header) usize {
    const state = s.state.?;
    var n: usize = 0;
    for (fields) |f| {
        var lower_buffer: [128]u8 = undefined;
        const name = if (f.name.len <= lower_buffer.len)
            std.ascii.lowerString(&lower_buffer, f.name)
        else
            std.ascii.allocLowerString(st.x.arena.allocator(), f.name) catch continue;
        if (request.connectionSpecific(name)) continue;
        n += state.encoder.encode(out[n..], name, f.value, .allowed) catch unreachable;
    }
    return n;
}

/// Encodes the response's trailer fields into a HEADERS frame that ends the stream. False when
/// the batch has no room for it now.
fn writeTrailers(s: *Session, st: *Stream) bool {
    const state = s.state.?;
    const x = state.x.?;
    const res = &st.x.response;
    var bound: usize = 16;
    for (res.trailers()) |f| bound += 16 + f.name.len + f.value.len;
    if (bound > state.peer_frame_max or bound + frame.header_len + goaway_reserve > x.out.len) {
        log.warn("HTTP/2 stream {d}: trailers larger than a frame; the stream is reset", .{st.id});
        s.resetWhileFilling(st);
        return true;
    }
    if (x.out.len - x.out_len < bound + frame.header_len + goaway_reserve) return false;
    const staging = x.out[x.out_len..][0 .. frame.header_len + bound];
    var n: usize = frame.header_len;
    n += state.encoder.begin(staging[n..]) catch unreachable;
    n += s.encodeFields(st, staging[n..], res.trailers());
    (frame.Header{
        .length = @intCast(n - frame.header_len),
        .type = .headers,
        .flags = frame.Flags.end_headers | frame.Flags.end_stream,
        .stream_id = st.id,
    }).write(staging[0..frame.header_len]);
    x.appendIovec(x.reserveOut(n).?);
    s.responseDone(st);
    return true;
}

/// The last frame of the stream's response is in the batch.
fn responseDone(s: *Session, st: *Stream) void {
    st.send = .done;
    st.finished = true;
    st.ended_whole = true; // complete once its batch is out (`batchSent`)
    // A response given before the whole request came: the rest of it is not wanted. (Behind
    // a file's last frame nothing may follow in the batch: the client then learns it from
    // the STREAM_CLOSED its next DATA gets.)
    if (!st.remote_closed and s.state.?.x.?.file == null) {
        s.writeControlForStream(st.id, .no_error);
        s.rememberReset(st.id);
    }
}

/// Resets `st` from inside `fill`, whose loop holds the stream table: the stream stays in it,
/// finished, until the batch is out (`batchSent`).
fn resetWhileFilling(s: *Session, st: *Stream) void {
    st.send = .done;
    st.finished = true;
    st.body_left = "";
    // A pool handler waiting on a chunk goes on once the batch is out; its next chunk fails.
    if (st.chunk_pending) st.chunk_framed = true;
    s.writeControlForStream(st.id, .internal_error);
    s.rememberReset(st.id);
}

/// RST_STREAM written while filling a batch (not a flood answer: room was checked).
fn writeControlForStream(s: *Session, id: u31, code: frame.ErrorCode) void {
    const x = s.state.?.x.?;
    const out = x.reserveOut(frame.header_len + 4) orelse return;
    x.appendIovec(out[0..frame.writeRstStream(out, id, code)]);
}

const DataOutcome = enum { sent, blocked, full };

/// Adds one DATA frame of the stream's body to the batch.
fn writeData(s: *Session, st: *Stream) DataOutcome {
    const state = s.state.?;
    const x = state.x.?;
    const remaining: u64 = if (st.file) |f| f.len else st.body_left.len;
    if (remaining == 0) return s.endStreamed(st);
    const window = @min(st.send_window, state.conn_send_window);
    if (window <= 0) return .blocked;
    const n: u32 = @intCast(@min(remaining, @as(u64, @intCast(window)), state.peer_frame_max));
    // A piece of a streamed chunk is never the last: the handler's return is.
    const last = n == remaining and !st.chunk_pending;
    const trailers_follow = st.x.response.trailers().len > 0;
    const copy = st.file == null and n <= copy_payload_max;
    const header_room: usize = frame.header_len + (if (copy) n else 0) + @as(usize, if (last and !st.remote_closed) frame.header_len + 4 else 0);
    if (x.out.len - x.out_len < header_room + goaway_reserve) return .full;
    const out = x.reserveOut(frame.header_len + (if (copy) n else 0)).?;
    (frame.Header{
        .length = @intCast(n),
        .type = .data,
        .flags = if (last and !trailers_follow) frame.Flags.end_stream else 0,
        .stream_id = st.id,
    }).write(out[0..frame.header_len]);
    if (copy) {
        @memcpy(out[frame.header_len..][0..n], st.body_left[0..n]);
        x.appendIovec(out);
        st.body_left = st.body_left[n..];
    } else if (st.file) |*f| {
        x.appendIovec(out);
        x.file = .{ .fd = f.fd, .offset = f.offset, .len = n };
        // The range in the batch does not own the descriptor: the stream's does, and it is
        // closed once the batch is out (`dropStream`).
        f.offset += n;
        f.len -= n;
    } else {
        x.appendIovec(out);
        x.appendIovec(st.body_left[0..n]);
        st.body_left = st.body_left[n..];
    }
    st.send_window -= n;
    state.conn_send_window -= n;
    st.x.done.sent_bytes += n;
    if (last) {
        if (trailers_follow) st.send = .trailers else s.responseDone(st);
    } else if (st.chunk_pending and st.body_left.len == 0) s.nextChunkPiece(st);
    return .sent;
}

/// Ends a streamed response whose handler returned with nothing more to send: an empty DATA
/// frame with END_STREAM (no window needed), or its trailers.
fn endStreamed(s: *Session, st: *Stream) DataOutcome {
    const state = s.state.?;
    const x = state.x.?;
    assert(st.streaming and !st.chunk_pending);
    if (st.x.response.trailers().len > 0) {
        st.send = .trailers;
        return .sent;
    }
    const room: usize = frame.header_len + @as(usize, if (st.remote_closed) 0 else frame.header_len + 4);
    if (x.out.len - x.out_len < room + goaway_reserve) return .full;
    const out = x.reserveOut(frame.header_len).?;
    (frame.Header{ .length = 0, .type = .data, .flags = frame.Flags.end_stream, .stream_id = st.id }).write(out[0..frame.header_len]);
    x.appendIovec(out);
    s.responseDone(st);
    return .sent;
}

test {
    _ = request; // the session's own tests run on the simulated engine: src/http2_test.zig
}
