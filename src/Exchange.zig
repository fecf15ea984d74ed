//! The memory and per-request state a connection holds only while it has a request in
//! progress: receive buffer, header array, parser, send buffer, the response batch and the
//! request arena. A connection borrows one from its worker when its first byte arrives and
//! gives it back when it goes idle, so an idle keep-alive connection costs a few dozen bytes.
const std = @import("std");
const assert = std.debug.assert;
const posix = std.posix;
const http = @import("http.zig");
const Arena = @import("Arena.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const RequestParser = @import("http1/RequestParser.zig");
const ChunkedDecoder = @import("http1/ChunkedDecoder.zig");
const Connection = @import("Connection.zig");
const Handoff = @import("Handoff.zig");
const WebSocketSession = @import("websocket/Session.zig");

const Exchange = @This();

/// Most iovecs in one response batch (heads and bodies of pipelined responses).
pub const iovec_max = 32;
/// Bytes kept free in front of a buffered body so its head can be written just before it.
pub const head_reserve = 512;
/// Bodies given by reference up to this size are copied into the send buffer behind their
/// head (a copy is cheaper than an iovec per response in a pipelined batch).
pub const copy_body_max = 1024;

/// Link in the worker's free list.
next_free: ?*Exchange = null,
/// Lent to an HTTP/2 stream (`Worker.acquireStreamExchange`) rather than held by a
/// connection.
lent_to_stream: bool = false,
/// This exchange's own receive buffer (`recv_buffer_bytes`).
recv_small: []u8,
/// The receive buffer in use: `recv_small`, or a large buffer borrowed for a long head.
recv: []u8,
/// Storage for the request's header fields.
header_storage: []http.Header,
/// Storage for the response's header fields.
response_header_storage: []http.Header,
/// Response heads and small bodies of the current batch.
out: []u8,
/// Per-request memory.
arena: Arena,
parser: RequestParser,

/// Offset in `recv` of the current request's first byte.
head_start: u32 = 0,
/// Offset in `recv` just past the bytes received.
recv_end: u32 = 0,
/// Offset in `recv` where the current request's body starts (valid in the body phase).
body_start: u32 = 0,
/// How the current request's body is being received.
body: Body = .none,
/// When the current request's head was complete (worker clock; 0: not yet), for metrics.
started_ms: u64 = 0,
/// Room for an id made for the current request (`Config.request_id`).
request_id_storage: [16]u8 = undefined,
/// What the handler's `onDone` hook will be told about the current response.
done: Pending = .{},

/// Bytes of `out` in use.
out_len: usize = 0,
/// The batch to send: iovecs[iovec_index..iovec_count] are still to go.
iovecs: [iovec_max]posix.iovec_const = undefined,
iovec_count: u8 = 0,
iovec_index: u8 = 0,
/// A file body that follows the iovecs (the last item of a batch).
file: ?Response.File = null,

/// The request being handled.
request: Request = undefined,
/// The response being built.
response: Response = undefined,
/// Whether `request` and `response` were set up before the body (for `onHead`).
prepared: bool = false,
/// Whether `response` was made by `Response.init` once, so `Response.reset` can renew it.
response_ready: bool = false,
/// The HTTP/1 connection whose per-connection request fields (arena, worker index, peer,
/// TLS session) `request` holds, so its next request sets only what changes; null once the
/// exchange is lent again (`Worker.takeExchange`) or a stream's request overwrote them.
request_bound: ?*const anyopaque = null,
/// The WebSocket session a handler accepted, from its 101 for as long as the connection
/// speaks WebSocket (kept here, not in the protocol sessions, so a connection stays small).
websocket: ?*WebSocketSession = null,

// While the handler runs on a pool thread:
/// Link in the worker's list of connections the handler pool posted.
completion: CompletionLink = .{},
/// What the handler's thread and the loop hand each other.
handoff: Handoff = .{},
/// The reader behind `req.bodyReader()` for a pulled body.
body_reader: Handoff.BodyReader = undefined,

/// The current response, as far as `Dispatch.on_done` needs it (kept only when the handler
/// declares the hook).
pub const Pending = struct {
    /// A response was made (by the handler or the core) and `on_done` is still to hear of it.
    active: bool = false,
    status: http.Status = .ok,
    /// The core made the response itself (a refusal, a timeout, a failed handler).
    core_response: bool = false,
    /// The request's head was whole and `request` describes it.
    request_known: bool = false,
    /// Whether the whole response reached the transport.
    complete: bool = false,
    /// Bytes of the response's head among `sent_bytes`' (not body).
    head_bytes: u64 = 0,
    /// Bytes of the response that reached the transport (with its head over HTTP/1.1; the DATA
    /// payload over HTTP/2).
    sent_bytes: u64 = 0,
    /// The fine clock when the head was whole (µs, `Config.fine_durations`; 0: not read).
    started_us: u64 = 0,
};

/// A connection's place in its worker's completion list (`Worker.postCompletion`).
pub const CompletionLink = struct {
    next: ?*Connection = null,
    /// Whether the connection is on the list (under the worker's mutex).
    listed: bool = false,
    /// The handler returned: set by its thread together with the listing that reports it,
    /// under the worker's mutex (`Worker.handlerReturned`).
    returned: bool = false,
    /// The engine took the listing that reported the return (`Worker.takeCompletions`). Only
    /// then may it act on the return: the handler's thread is done with the connection, and
    /// no later listing of it can come.
    return_taken: bool = false,

    /// The next connection of the list the engine took: `next` may be rewritten by a
    /// handler's thread as soon as the take has unlisted the connection, this only by the
    /// take.
    taken_next: ?*Connection = null,

    /// Engine thread: whether the handler's return came with the posts just taken; consumes
    /// it. (A return posted since the take may already be set in `returned`: the next take
    /// carries it.)
    pub fn takeReturn(link: *CompletionLink) bool {
        defer link.return_taken = false;
        return link.return_taken;
    }
};

/// How a body is being received.
pub const Body = union(enum) {
    /// No body.
    none,
    /// A Content-Length body that fits the receive buffer: complete once `recv_end >= end`.
    in_place: struct { end: u32 },
    /// A Content-Length body read straight into an arena buffer.
    buffer: struct { bytes: []u8, received: usize },
    /// A Content-Length body handed to the handler's `onBody` as it arrives.
    streamed_length: struct { remaining: u64, next_start: u32 = 0 },
    /// A chunked body, decoded in place behind the raw bytes; spilled into the arena when the
    /// receive buffer fills.
    chunked: Chunked,
    /// A body the handler reads as it arrives (`req.bodyReader()`), decoded on its thread.
    pulled: Pulled,
};

/// State of a body the handler pulls. Raw bytes are received into `recv` from `body_start`
/// and decoded into the reader's buffer; once all are decoded the space is reused.
pub const Pulled = struct {
    framing: union(enum) {
        /// Content-Length bytes still to come.
        length: u64,
        chunked: ChunkedDecoder,
    },
    /// Offset in `recv` of the first received byte not yet decoded.
    raw_pos: u32,
    /// Decoded bytes so far.
    decoded_len: u64 = 0,
    /// Whether the whole body has been decoded (`raw_pos` is then where the next request
    /// starts).
    done: bool = false,
    /// What was wrong with the framing, when reading failed with `.malformed`.
    failure_message: []const u8 = "",
};

/// State of a chunked body.
pub const Chunked = struct {
    decoder: ChunkedDecoder,
    /// Offset just past the decoded bytes kept in `recv` (from `body_start`).
    body_end: u32,
    /// Offset of the first raw byte not yet decoded.
    raw_pos: u32,
    /// Decoded bytes moved out of `recv` when it filled.
    spill: std.ArrayList(u8) = .empty,
    /// Decoded bytes so far (in `recv` and in `spill`, or delivered).
    decoded_len: u64 = 0,
    /// Whether decoded bytes go to the handler's `onBody` instead of being kept.
    stream: bool = false,
};

/// Sizes of the regions carved out of an exchange's memory.
pub const Layout = struct {
    recv_bytes: usize,
    out_bytes: usize,
    arena_bytes: usize,
    header_count: usize,
    response_header_count: usize,
    /// Most memory one request's arena may use, region included (not a region of the layout).
    arena_request_bytes_max: u64 = std.math.maxInt(u64),

    const alignment = 64;

    /// Total bytes of one exchange's memory, rounded to a cache line.
    pub fn stride(layout: Layout) usize {
        return std.mem.alignForward(usize, layout.headersOffset() +
            (layout.header_count + layout.response_header_count) * @sizeOf(http.Header), alignment);
    }

    fn headersOffset(layout: Layout) usize {
        // Header slices need pointer alignment; the byte regions come after them.
        return std.mem.alignForward(usize, layout.recv_bytes + layout.out_bytes + layout.arena_bytes, 16);
    }
};

/// Sets up an exchange over `memory` (`layout.stride()` bytes, 64-byte aligned).
pub fn init(
    exchange: *Exchange,
    memory: []align(64) u8,
    layout: Layout,
    limits: RequestParser.Limits,
    backing: std.mem.Allocator,
    budget: *Arena.Budget,
) void {
    assert(memory.len == layout.stride());
    const recv = memory[0..layout.recv_bytes];
    const out = memory[layout.recv_bytes..][0..layout.out_bytes];
    const arena_region = memory[layout.recv_bytes + layout.out_bytes ..][0..layout.arena_bytes];
    const headers_bytes = memory[layout.headersOffset()..];
    const headers_ptr: [*]http.Header = @ptrCast(@alignCast(headers_bytes.ptr));
    const header_storage = headers_ptr[0..layout.header_count];
    exchange.* = .{
        .recv_small = recv,
        .recv = recv,
        .header_storage = header_storage,
        .response_header_storage = headers_ptr[layout.header_count..][0..layout.response_header_count],
        .out = out,
        .arena = .init(arena_region, backing, budget),
        .parser = .init(header_storage, limits),
    };
    exchange.arena.request_bytes_max = layout.arena_request_bytes_max -| layout.arena_bytes;
}

/// Whether bytes of the batch remain to be sent.
pub fn sending(exchange: *const Exchange) bool {
    return exchange.iovec_index < exchange.iovec_count or exchange.file != null;
}

/// Whether the batch cannot take another response.
pub fn batchFull(exchange: *const Exchange) bool {
    return exchange.iovec_count + 3 > iovec_max or exchange.file != null or
        exchange.out.len - exchange.out_len < head_reserve + 512;
}

/// Adds `bytes` to the batch, merging with the previous iovec when contiguous.
/// Asserts there is room (see `batchFull`).
pub fn appendIovec(exchange: *Exchange, bytes: []const u8) void {
    if (bytes.len == 0) return;
    assert(exchange.file == null);
    if (exchange.iovec_count > exchange.iovec_index) {
        const last = &exchange.iovecs[exchange.iovec_count - 1];
        if (last.base + last.len == bytes.ptr) {
            last.len += bytes.len;
            return;
        }
    }
    assert(exchange.iovec_count < iovec_max);
    exchange.iovecs[exchange.iovec_count] = .{ .base = bytes.ptr, .len = bytes.len };
    exchange.iovec_count += 1;
}

/// Space in `out` for `len` bytes, or null when it is full.
pub fn reserveOut(exchange: *Exchange, len: usize) ?[]u8 {
    if (exchange.out.len - exchange.out_len < len) return null;
    const slice = exchange.out[exchange.out_len..][0..len];
    exchange.out_len += len;
    return slice;
}

/// Marks `n` bytes of the iovecs as sent. Asserts `n` does not exceed them.
pub fn advanceIovecs(exchange: *Exchange, n: usize) void {
    var left = n;
    while (left > 0) {
        assert(exchange.iovec_index < exchange.iovec_count);
        const iov = &exchange.iovecs[exchange.iovec_index];
        if (left < iov.len) {
            iov.base += left;
            iov.len -= left;
            return;
        }
        left -= iov.len;
        exchange.iovec_index += 1;
    }
}

/// Forgets the sent batch. Asserts nothing is left to send.
pub fn clearBatch(exchange: *Exchange) void {
    assert(!exchange.sending());
    exchange.out_len = 0;
    exchange.iovec_count = 0;
    exchange.iovec_index = 0;
}

/// Moves the unparsed bytes of the current request to the front of `recv`, and restarts the
/// parser (its field slices pointed at the old place). Asserts no body is in progress.
pub fn compact(exchange: *Exchange) void {
    assert(exchange.body == .none);
    const start = exchange.head_start;
    if (start == 0) return;
    const len = exchange.recv_end - start;
    std.mem.copyForwards(u8, exchange.recv[0..len], exchange.recv[start..exchange.recv_end]);
    exchange.head_start = 0;
    exchange.recv_end = len;
    exchange.parser.reset();
}

/// Switches to `bigger` as the receive buffer, copying what was received. The parser restarts.
/// Asserts the current request starts at offset 0 and no body is in progress.
pub fn moveTo(exchange: *Exchange, bigger: []u8) void {
    assert(exchange.head_start == 0);
    assert(exchange.body == .none);
    assert(bigger.len > exchange.recv.len);
    @memcpy(bigger[0..exchange.recv_end], exchange.recv[0..exchange.recv_end]);
    exchange.recv = bigger;
    exchange.parser.reset();
}

test "Exchange: appendIovec merges contiguous slices" {
    var exchange: Exchange = undefined;
    exchange.iovec_count = 0;
    exchange.iovec_index = 0;
    exchange.file = null;
    const bytes = "abcdef";
    exchange.appendIovec(bytes[0..2]);
    exchange.appendIovec(bytes[2..4]);
    try std.testing.expectEqual(@as(u8, 1), exchange.iovec_count);
    exchange.appendIovec("xyz");
    try std.testing.expectEqual(@as(u8, 2), exchange.iovec_count);
    exchange.advanceIovecs(3);
    try std.testing.expectEqual(@as(u8, 0), exchange.iovec_index);
    try std.testing.expectEqual(@as(usize, 1), exchange.iovecs[0].len);
    exchange.advanceIovecs(1 + 3);
    try std.testing.expect(!exchange.sending());
}
