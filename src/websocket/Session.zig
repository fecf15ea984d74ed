//! One WebSocket connection after the upgrade (RFC 6455 §5-§7, RFC 7692 §6-§7): turns the
//! bytes the connection received into frames, messages and callbacks, and turns messages the
//! handler sends into frames in the connection's send batch. It makes no syscalls: the
//! `Connection` it belongs to keeps driving the engine with the same `Next` contract as for
//! HTTP/1, and reports bytes, sends and timeouts here.
//!
//! Receiving: headers are checked as they arrive (masking, reserved bits and opcodes, control
//! frame rules, fragmentation order, `websocket_message_bytes_max`); a whole unfragmented
//! message that fits the receive buffer is unmasked in place and handed over without a copy;
//! other messages are gathered in a heap buffer charged to the worker's memory budget. Text is
//! validated as its bytes arrive (also before a frame is whole), so invalid UTF-8 fails at
//! once (1007); compressed text is validated as it is inflated, once its message is whole.
//!
//! Sending: frame headers go into the exchange's send buffer next to small payloads (so a batch
//! of frames is one iovec and one writev); large payloads that live until the batch is sent
//! (the message just received) go as their own iovec, others are copied into arena memory that
//! is reset when the batch has gone. Nothing is read while a batch is being sent, so a client
//! that does not read cannot make the server queue replies; messages the application sends are
//! bounded by `websocket_send_queue_bytes_max` (then 1008).
//!
//! Threads: everything here runs on the connection's engine thread, except `send` and
//! `requestClose`, which other threads may call; they queue under `mutex` and wake the engine.
const std = @import("std");
const assert = std.debug.assert;
const Worker = @import("../Worker.zig");
const Connection = @import("../Connection.zig");
const Protocol = @import("Protocol.zig");
const Exchange = @import("../Exchange.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const Mutex = @import("../sync.zig").Mutex;
const websocket = @import("../websocket.zig");
const frame = @import("frame.zig");
const handshake = @import("handshake.zig");
const Utf8Validator = @import("Utf8Validator.zig");
const Deflate = @import("Deflate.zig");
const Conn = @import("Conn.zig");
const Outbox = @import("Outbox.zig");

const CloseCode = websocket.CloseCode;
const Message = websocket.Message;
const log = std.log.scoped(.saker);

const Session = @This();

// Shared with other threads: under `mutex`.

mutex: Mutex = .{},
/// Bumped when the connection ends; a `Conn` made before then no longer matches.
generation: u32 = 0,
/// Whether sends are taken (false once closing has started). Written under `mutex`; read
/// without it on the engine thread.
accepting: std.atomic.Value(bool) = .init(false),
/// Messages queued by other threads, oldest first.
inbox_head: ?*Block = null,
inbox_tail: ?*Block = null,
inbox_bytes: u64 = 0,
/// A close asked for by `Conn.close`, handled on the engine thread.
close_request: ?CloseRequest = null,
/// A send found the queue full: the engine thread closes with 1008.
overflowed: bool = false,
/// Bytes in the send batch, as last published by the engine thread (an upper bound).
batch_bytes: std.atomic.Value(u64) = .init(0),
/// Link in the worker's wake list, and whether the session is on it (under the worker's
/// wake mutex).
wake_next: ?*Session = null,
wake_queued: bool = false,

/// The worker of the engine thread that owns the session. Set when the session is handed
/// out (under `mutex`); other threads read it only under `mutex` with a matching
/// `generation`, when the session is live and its worker too.
worker: *Worker,

// Engine thread only (except `subprotocol` and `user_data`, which `Conn` reads under `mutex`).

/// The connection, while the session is in use.
connection: ?*Connection = null,
/// Link in the worker's free list.
next_free: ?*Session = null,
/// The agreed subprotocol (one of the handler's strings).
subprotocol: ?[]const u8 = null,
user_data: ?*anyopaque = null,
/// permessage-deflate state, when agreed.
deflate: ?*Deflate = null,
state: State = .open,
frame_state: FrameState = .header,
message: Incoming = .{},
/// The message being gathered (or its compressed bytes); heap, charged to the worker budget.
buffer: std.ArrayList(u8) = .empty,
/// The decompressed message.
inflated: std.ArrayList(u8) = .empty,
/// A message delivered from `buffer` or `inflated` may be referenced by the send batch:
/// gathering the next one waits until the batch has gone.
pinned: bool = false,
/// Writes outgoing frames into the connection's send batch.
outbox: Outbox = .{},
/// When bytes last arrived, and when a keep-alive ping went out unanswered.
last_receive_ms: u64 = 0,
ping_sent_ms: ?u64 = null,
/// When a close we started gives up waiting for the client's close.
close_deadline_ms: u64 = std.math.maxInt(u64),
close_sent_code: CloseCode = .normal,
close_reported: bool = false,
/// The last `Connection.recvBuffer` was the message buffer (`directBuffer`).
direct: bool = false,

/// Where the session is in the closing handshake (§7).
pub const State = enum {
    /// Messages flow both ways.
    open,
    /// We sent a close frame and wait for the client's.
    closing,
    /// The handshake is over (or failed); the connection is being shut down.
    closed,
};

const FrameState = union(enum) {
    /// Waiting for (the rest of) a frame header.
    header,
    /// Receiving the payload of this frame.
    payload: Payload,
};

const Payload = struct {
    header: frame.Header,
    /// Payload bytes consumed so far.
    done: u64,
    /// Payload bytes unmasked (and, for uncompressed text, fed to the UTF-8 validator) so
    /// far: the consumed ones and those waiting in the receive buffer. Checking bytes as soon
    /// as they arrive, before the frame is whole, is what makes bad UTF-8 fail fast.
    checked: u64 = 0,
};

/// The data message being received.
const Incoming = struct {
    active: bool = false,
    kind: Message.Kind = .text,
    compressed: bool = false,
    /// Payload bytes received so far (compressed bytes for a compressed message).
    len: u64 = 0,
    utf8: Utf8Validator = .{},
};

/// A message queued by another thread: this header, then the payload.
const Block = struct {
    next: ?*Block,
    opcode: frame.Opcode,
    len: usize,

    fn payload(block: *Block) []u8 {
        const bytes: [*]u8 = @ptrCast(block);
        return bytes[@sizeOf(Block)..][0..block.len];
    }

    fn allocation(block: *Block) []align(@alignOf(Block)) u8 {
        const bytes: [*]align(@alignOf(Block)) u8 = @ptrCast(block);
        return bytes[0 .. @sizeOf(Block) + block.len];
    }
};

const CloseRequest = struct {
    code: CloseCode,
    reason: [reason_bytes_max]u8,
    reason_len: u8,
};

/// A close frame carries a 2-byte code and at most 123 bytes of reason (§5.5).
const reason_bytes_max = frame.control_payload_bytes_max - 2;
/// Payload still to come of at least this size is read straight into the message buffer.
const direct_bytes_min = 8 * 1024;
/// Message buffers larger than this are freed between messages rather than kept.
const keep_bytes_max = 64 * 1024;

/// Sets up a session taken from a pool. It keeps its mutex and generation: a stale `Conn`
/// on another thread may be holding the lock right now (and is refused by the generation),
/// so the fields other threads read are reset under the lock, one by one.
pub fn init(s: *Session, worker: *Worker) void {
    s.mutex.lock();
    s.worker = worker;
    s.accepting.store(false, .release);
    s.inbox_head = null;
    s.inbox_tail = null;
    s.inbox_bytes = 0;
    s.close_request = null;
    s.overflowed = false;
    s.batch_bytes.store(0, .monotonic);
    s.subprotocol = null;
    s.user_data = null;
    s.mutex.unlock();
    // The wake-list links belong to the worker's wake lock; `release` took the session off
    // any list, and a stale handle never queues it (the generation refuses it first).
    assert(!s.wake_queued);
    s.wake_next = null;
    // The engine thread's own state.
    s.connection = null;
    s.next_free = null;
    s.deflate = null;
    s.state = .open;
    s.frame_state = .header;
    s.message = .{};
    s.buffer = .empty;
    s.inflated = .empty;
    s.pinned = false;
    s.outbox = .{};
    s.last_receive_ms = 0;
    s.ping_sent_ms = null;
    s.close_deadline_ms = std.math.maxInt(u64);
    s.close_sent_code = .normal;
    s.close_reported = false;
    s.direct = false;
}

/// Whether `generation` is the session's current one (call with `mutex` held).
fn live(s: *const Session, generation: u32) bool {
    return s.generation == generation;
}

// Opening.

/// Why an upgrade the handler accepted cannot go ahead.
pub const AcceptError = error{
    /// The handler has no `WebSocket` declaration (500).
    NoCallbacks,
    /// The server is shutting down (503).
    Draining,
    /// Every session of this worker is in use (503).
    Unavailable,
    /// The response could not take the handshake's header fields (500).
    HeaderFailed,
};

/// Completes the handshake the handler accepted: takes a session, agrees on a subprotocol
/// and permessage-deflate, and adds the 101 response's fields to `res`. The session starts
/// with `open` once the response is in the send batch.
pub fn accept(worker: *Worker, req: *const Request, res: *Response, options: websocket.UpgradeOptions) AcceptError!*Session {
    if (worker.dispatch.websocket == null) return error.NoCallbacks;
    if (worker.draining) return error.Draining;
    const s = worker.acquireSession() orelse return error.Unavailable;
    errdefer worker.releaseSession(s);
    const accept_value = res.arena.dupe(u8, &handshake.acceptKey(handshake.key(req.headers))) catch
        return error.HeaderFailed;
    res.header("Upgrade", "websocket") catch return error.HeaderFailed;
    res.header("Sec-WebSocket-Accept", accept_value) catch return error.HeaderFailed;
    if (handshake.selectSubprotocol(req.headers, options.subprotocols)) |chosen| {
        res.header("Sec-WebSocket-Protocol", chosen) catch return error.HeaderFailed;
        s.subprotocol = chosen;
    }
    if (options.compression and worker.config.websocket_deflate) {
        if (handshake.negotiateDeflate(req.headers)) |params| {
            if (worker.acquireDeflate()) |d| {
                errdefer worker.releaseDeflate(d);
                d.init(params);
                var buffer: [128]u8 = undefined;
                const value = res.arena.dupe(u8, params.responseValue(&buffer)) catch return error.HeaderFailed;
                res.header("Sec-WebSocket-Extensions", value) catch return error.HeaderFailed;
                s.deflate = d;
            }
        }
    }
    s.user_data = options.user_data;
    return s;
}

/// Starts the session on `c` once the 101 response is in the batch: calls `onOpen`, then
/// handles any frames that arrived right behind the handshake.
pub fn open(s: *Session, c: *Connection, x: *Exchange) void {
    s.connection = c;
    s.state = .open;
    s.last_receive_ms = s.worker.now_ms;
    s.mutex.lock();
    s.accepting.store(true, .release);
    s.mutex.unlock();
    const callbacks = s.worker.dispatch.websocket.?;
    if (callbacks.onOpen) |onOpen| {
        const previous = s.enterCallback();
        defer s.worker.callback_session = previous;
        onOpen(s.worker.dispatch.context, s.handle()) catch |err| {
            log.warn("WebSocket onOpen failed: {t}", .{err});
            return s.fail(x, .internal_error, "the handler failed");
        };
    }
    s.process(x);
}

/// The connection's protocol session, which carries this one (its exchange holds the
/// buffers).
fn protocol(s: *Session) *Protocol {
    return &s.connection.?.protocol.websocket;
}

fn handle(s: *Session) Conn {
    return .{ .session = s, .generation = s.generation };
}

fn enterCallback(s: *Session) ?*Session {
    const previous = s.worker.callback_session;
    s.worker.callback_session = s;
    return previous;
}

/// Gives everything back to the worker; reports the end to `onClose` if that has not
/// happened. Called once, from `Connection.deinit`.
pub fn release(s: *Session) void {
    s.end(.abnormal, "");
    s.mutex.lock();
    var block = s.inbox_head;
    s.inbox_head = null;
    s.inbox_tail = null;
    s.inbox_bytes = 0;
    s.close_request = null;
    s.overflowed = false;
    s.mutex.unlock();
    while (block) |b| {
        block = b.next;
        s.freeBlock(b);
    }
    s.worker.unqueueWake(s);
    s.freeBuffer(&s.buffer);
    s.freeBuffer(&s.inflated);
    if (s.deflate) |d| s.worker.releaseDeflate(d);
    s.deflate = null;
    s.connection = null;
    s.worker.releaseSession(s);
}

// Receiving.

/// `n` bytes were read into the buffer `Connection.recvBuffer` gave: the exchange's receive
/// buffer, or the message buffer (`directBuffer`).
pub fn onRecv(s: *Session, x: *Exchange, n: usize) void {
    s.last_receive_ms = s.worker.now_ms;
    s.ping_sent_ms = null; // any traffic shows the client is there
    if (s.direct) {
        s.direct = false;
        s.takeDirect(x, n);
    } else {
        x.recv_end += @intCast(n);
    }
    s.process(x);
}

/// In the middle of a large data frame with nothing else buffered, the rest of its payload is
/// read straight into the message buffer (saving a copy, and reading more per syscall).
/// Null when the receive buffer should be used.
pub fn directBuffer(s: *Session, x: *Exchange) ?[]u8 {
    s.direct = false;
    if (s.state == .closed or s.pinned or x.head_start != x.recv_end) return null;
    const p = switch (s.frame_state) {
        .payload => |*p| p,
        .header => return null,
    };
    if (p.header.opcode.isControl()) return null;
    const remaining = p.header.payload_len - p.done;
    if (remaining < direct_bytes_min) return null;
    s.grow(&s.buffer, @intCast(remaining + Deflate.tail.len)) catch return null;
    s.direct = true;
    return s.buffer.unusedCapacitySlice()[0..@intCast(remaining)];
}

/// Bytes read by `directBuffer`: the same checks as `takePayload`, on the message buffer.
fn takeDirect(s: *Session, x: *Exchange, n: usize) void {
    const p = &s.frame_state.payload;
    const h = p.header;
    assert(n <= h.payload_len - p.done);
    assert(p.checked == p.done); // nothing was waiting in the receive buffer
    const chunk = s.buffer.unusedCapacitySlice()[0..n];
    if (!s.check(p, chunk)) return s.fail(x, .invalid_payload, "text message is not UTF-8");
    s.buffer.items.len += n;
    p.done += n;
    s.message.len += n;
    if (p.done < h.payload_len) return;
    s.frame_state = .header;
    if (h.fin) s.finishMessage(x);
}

/// Unmasks `fresh`, the payload bytes from `p.checked` on, in place and validates them when
/// the message is uncompressed text. False when they cannot be UTF-8.
fn check(s: *Session, p: *Payload, fresh: []u8) bool {
    frame.unmask(fresh, p.header.mask.?, p.checked);
    p.checked += fresh.len;
    if (s.message.kind == .text and !s.message.compressed) {
        s.message.utf8.feed(fresh) catch return false;
    }
    return true;
}

/// Handles every complete frame in the receive buffer (or as much of a large one as has
/// arrived), until more bytes are needed, the session stalls on a pinned buffer, or it ends.
fn process(s: *Session, x: *Exchange) void {
    while (s.state != .closed) {
        const available = x.recv[x.head_start..x.recv_end];
        switch (s.frame_state) {
            .header => {
                const parsed = frame.parseHeader(available) catch
                    return s.fail(x, .protocol_error, "frame length with the most significant bit set");
                const p = parsed orelse return;
                if (s.checkHeader(p.header)) |problem| return s.fail(x, problem.code, problem.reason);
                x.head_start += p.len;
                const opcode = p.header.opcode;
                if (opcode == .text or opcode == .binary) {
                    s.message = .{
                        .active = true,
                        .kind = if (opcode == .text) .text else .binary,
                        .compressed = p.header.rsv1,
                    };
                }
                s.frame_state = .{ .payload = .{ .header = p.header, .done = 0 } };
            },
            .payload => |*p| if (!s.takePayload(x, p)) return,
        }
    }
}

const Problem = struct { code: CloseCode, reason: []const u8 };

/// Checks a header against the rules that depend on the session's state (§5.2-§5.5).
fn checkHeader(s: *const Session, h: frame.Header) ?Problem {
    if (h.rsv2 or h.rsv3) return .{ .code = .protocol_error, .reason = "reserved bits set" };
    if (!h.opcode.isKnown()) return .{ .code = .protocol_error, .reason = "reserved opcode" };
    if (h.mask == null) return .{ .code = .protocol_error, .reason = "client frames must be masked" };
    if (h.opcode.isControl()) {
        if (!h.fin) return .{ .code = .protocol_error, .reason = "fragmented control frame" };
        if (h.payload_len > frame.control_payload_bytes_max)
            return .{ .code = .protocol_error, .reason = "control frame longer than 125 bytes" };
        if (h.rsv1) return .{ .code = .protocol_error, .reason = "RSV1 set on a control frame" };
        return null;
    }
    if (h.opcode == .continuation) {
        if (!s.message.active) return .{ .code = .protocol_error, .reason = "continuation frame without a message" };
        if (h.rsv1) return .{ .code = .protocol_error, .reason = "RSV1 set on a continuation frame" };
    } else {
        if (s.message.active) return .{ .code = .protocol_error, .reason = "new message before the last one ended" };
        if (h.rsv1 and s.deflate == null) return .{ .code = .protocol_error, .reason = "RSV1 set without permessage-deflate" };
    }
    const so_far = if (h.opcode == .continuation) s.message.len else 0;
    if (so_far + h.payload_len > s.worker.config.websocket_message_bytes_max)
        return .{ .code = .message_too_big, .reason = "message longer than websocket_message_bytes_max" };
    return null;
}

/// Consumes payload bytes of the current frame. Returns true when the frame is done and the
/// next header may follow; false to wait (more bytes, or the batch to be sent) or when ended.
fn takePayload(s: *Session, x: *Exchange, p: *Payload) bool {
    const h = p.header;
    const available = x.recv[x.head_start..x.recv_end];
    const remaining = h.payload_len - p.done;
    if (h.opcode.isControl()) {
        if (available.len < remaining) return false; // at most 125 bytes: it will fit
        const payload = available[0..@intCast(remaining)];
        frame.unmask(payload, h.mask.?, 0);
        x.head_start += @intCast(remaining);
        s.frame_state = .header;
        s.onControl(x, h.opcode, payload);
        return true;
    }
    // Check what arrived (once), whether or not it can be consumed yet.
    const here: usize = @intCast(@min(available.len, remaining));
    const unchecked: usize = @intCast(p.checked - p.done);
    if (here > unchecked and !s.check(p, available[unchecked..here])) {
        s.fail(x, .invalid_payload, "text message is not UTF-8");
        return false;
    }
    const whole = h.fin and h.opcode != .continuation and !h.rsv1 and p.done == 0;
    if (whole) {
        if (available.len >= remaining) {
            // The common case: the whole message is here, unmasked in place; no copy.
            const payload = available[0..@intCast(remaining)];
            x.head_start += @intCast(remaining);
            s.frame_state = .header;
            s.message.active = false;
            if (s.message.kind == .text and !s.message.utf8.complete()) {
                s.fail(x, .invalid_payload, "text message is not UTF-8");
                return false;
            }
            s.deliver(x, s.message.kind, payload);
            return true;
        }
        // It will fit the receive buffer once the bytes before it are moved out.
        if (remaining < x.recv.len) return false;
    }
    if (s.pinned) return false;
    if (here > 0) {
        const chunk = available[0..here];
        if (p.done == 0 and h.fin and h.opcode != .continuation) {
            // A single-frame message: room for all of it at once (and the inflate tail).
            s.grow(&s.buffer, @intCast(remaining + Deflate.tail.len)) catch {
                s.fail(x, .internal_error, "out of memory for messages");
                return false;
            };
        }
        s.grow(&s.buffer, here + Deflate.tail.len) catch {
            s.fail(x, .internal_error, "out of memory for messages");
            return false;
        };
        s.buffer.appendSliceAssumeCapacity(chunk);
        x.head_start += @intCast(here);
        p.done += here;
        s.message.len += here;
    }
    if (p.done < h.payload_len) return false;
    s.frame_state = .header;
    if (h.fin) s.finishMessage(x);
    return true;
}

/// The last frame of a gathered message arrived: inflate it if compressed, check it, hand it
/// to the handler.
fn finishMessage(s: *Session, x: *Exchange) void {
    const kind = s.message.kind;
    s.message.active = false;
    var data = s.buffer.items;
    if (s.message.compressed) {
        s.inflated.clearRetainingCapacity();
        var sink: InflateSink = .{ .session = s, .utf8 = if (kind == .text) &s.message.utf8 else null };
        const limit = s.worker.config.websocket_message_bytes_max;
        const len = s.buffer.items.len;
        // Room for the tail the decompressor appends: growing as bytes came made it, but a
        // message with no payload bytes at all never grew the buffer.
        s.grow(&s.buffer, Deflate.tail.len) catch return s.fail(x, .internal_error, "out of memory for messages");
        s.deflate.?.decompress(s.buffer.allocatedSlice(), len, limit, &sink) catch |err| return switch (err) {
            error.TooLarge => s.fail(x, .message_too_big, "message inflates past websocket_message_bytes_max"),
            error.InvalidData => s.fail(x, .invalid_payload, "invalid compressed data"),
            error.InvalidUtf8 => s.fail(x, .invalid_payload, "text message is not UTF-8"),
            error.OutOfMemory => s.fail(x, .internal_error, "out of memory for messages"),
        };
        data = s.inflated.items;
    }
    if (kind == .text and !s.message.utf8.complete()) return s.fail(x, .invalid_payload, "text message is not UTF-8");
    s.deliver(x, kind, data);
    if (s.state == .closed) return;
    if (x.sending()) {
        s.pinned = true; // the reply may point into the buffer
    } else {
        s.clearBuffers();
    }
}

const InflateSink = struct {
    session: *Session,
    utf8: ?*Utf8Validator,

    pub const Error = error{ InvalidUtf8, OutOfMemory };

    pub fn write(sink: *InflateSink, bytes: []const u8) Error!void {
        if (sink.utf8) |v| v.feed(bytes) catch return error.InvalidUtf8;
        const s = sink.session;
        try s.grow(&s.inflated, bytes.len);
        s.inflated.appendSliceAssumeCapacity(bytes);
    }
};

/// Makes room for `additional` bytes, charging growth to the worker's budget.
fn grow(s: *Session, list: *std.ArrayList(u8), additional: usize) error{OutOfMemory}!void {
    const needed = list.items.len + additional;
    if (needed <= list.capacity) return;
    const cap_max = s.worker.config.websocket_message_bytes_max + Deflate.tail.len;
    const wanted = @max(needed, @min(list.capacity * 2, cap_max), 4096);
    const extra = wanted - list.capacity;
    if (!s.worker.budget.take(extra)) return error.OutOfMemory;
    list.ensureTotalCapacityPrecise(s.worker.gpa, wanted) catch {
        s.worker.budget.give(extra);
        return error.OutOfMemory;
    };
    assert(list.capacity == wanted); // what `freeBuffer` gives back
}

fn freeBuffer(s: *Session, list: *std.ArrayList(u8)) void {
    s.worker.budget.give(list.capacity);
    list.deinit(s.worker.gpa);
    list.* = .empty;
}

fn clearBuffers(s: *Session) void {
    s.pinned = false;
    s.message.len = 0;
    s.message.utf8.reset();
    if (s.buffer.capacity > keep_bytes_max) s.freeBuffer(&s.buffer) else s.buffer.clearRetainingCapacity();
    if (s.inflated.capacity > keep_bytes_max) s.freeBuffer(&s.inflated) else s.inflated.clearRetainingCapacity();
}

/// Calls `onMessage` (messages arriving while closing are dropped, §5.5.1).
fn deliver(s: *Session, x: *Exchange, kind: Message.Kind, data: []const u8) void {
    if (s.state != .open) return;
    const callbacks = s.worker.dispatch.websocket.?;
    const previous = s.enterCallback();
    defer s.worker.callback_session = previous;
    callbacks.onMessage(s.worker.dispatch.context, s.handle(), .{ .kind = kind, .data = data }) catch |err| {
        log.warn("WebSocket onMessage failed: {t}", .{err});
        s.fail(x, .internal_error, "the handler failed");
    };
}

fn onControl(s: *Session, x: *Exchange, opcode: frame.Opcode, payload: []const u8) void {
    const callbacks = s.worker.dispatch.websocket.?;
    switch (opcode) {
        .ping => {
            if (s.state == .open) s.queueControl(x, .pong, payload);
            if (callbacks.onPing) |onPing| {
                const previous = s.enterCallback();
                defer s.worker.callback_session = previous;
                onPing(s.worker.dispatch.context, s.handle(), payload);
            }
        },
        .pong => {
            s.ping_sent_ms = null;
            if (callbacks.onPong) |onPong| {
                const previous = s.enterCallback();
                defer s.worker.callback_session = previous;
                onPong(s.worker.dispatch.context, s.handle(), payload);
            }
        },
        .close => s.onCloseFrame(x, payload),
        else => unreachable, // checkHeader refused the reserved control opcodes
    }
}

/// The client's close frame (§5.5.1, §7.1.5, §7.4): check it, answer it, end.
fn onCloseFrame(s: *Session, x: *Exchange, payload: []const u8) void {
    var code: CloseCode = .no_status;
    var reason: []const u8 = "";
    if (payload.len == 1) return s.fail(x, .protocol_error, "close frame with a 1-byte payload");
    if (payload.len >= 2) {
        const value = std.mem.readInt(u16, payload[0..2], .big);
        if (!CloseCode.isValidOnWire(value)) return s.fail(x, .protocol_error, "invalid close code");
        code = @fromBackingInt(@intCast(value));
        reason = payload[2..];
        if (!Utf8Validator.validate(reason)) return s.fail(x, .invalid_payload, "close reason is not UTF-8");
    }
    if (s.state == .open) s.queueClose(x, if (payload.len >= 2) code else null, "");
    s.end(code, reason);
    s.closeConnection(x);
}

/// Fails the connection (§7.1.7): a close frame with `code`, then shut down without waiting.
fn fail(s: *Session, x: *Exchange, code: CloseCode, reason: []const u8) void {
    if (s.state == .closed) return;
    log.debug("WebSocket closed with {d}: {s}", .{ @backingInt(code), reason });
    if (s.state == .open) s.queueClose(x, code, reason);
    s.end(code, reason);
    s.closeConnection(x);
}

/// Starts the closing handshake (§7.1.2): send close, then wait for the client's.
fn beginClose(s: *Session, x: *Exchange, code: CloseCode, reason: []const u8) void {
    if (s.state != .open) return;
    s.queueClose(x, code, reason);
    s.state = .closing;
    s.close_sent_code = code;
    s.close_deadline_ms = s.worker.now_ms + s.worker.config.linger_timeout_ms;
    s.mutex.lock();
    s.accepting.store(false, .release);
    s.mutex.unlock();
}

/// The connection is over as far as the protocol goes: no more sends; `onClose` once.
fn end(s: *Session, code: CloseCode, reason: []const u8) void {
    if (s.close_reported) return;
    s.close_reported = true;
    s.state = .closed;
    const conn = s.handle();
    s.mutex.lock();
    s.accepting.store(false, .release);
    s.generation +%= 1;
    s.mutex.unlock();
    if (s.connection == null) return; // never opened
    const callbacks = s.worker.dispatch.websocket.?;
    if (callbacks.onClose) |onClose| {
        const previous = s.enterCallback();
        defer s.worker.callback_session = previous;
        onClose(s.worker.dispatch.context, conn, code, reason);
    }
}

/// After the close frame (if any) is sent: shut down the write side, then read and discard
/// until the client closes (the server closes the TCP connection first, §7.1.1).
fn closeConnection(s: *Session, x: *Exchange) void {
    assert(x == s.protocol().exchange);
    s.protocol().closeAfterBatch();
}

// Timers.

/// When `onTimeout` is due (worker clock).
pub fn deadline(s: *const Session) u64 {
    if (s.state == .closing) return s.close_deadline_ms;
    const config = s.worker.config;
    if (config.websocket_ping_interval_ms == 0) return std.math.maxInt(u64);
    if (s.ping_sent_ms) |sent| return sent + config.websocket_pong_timeout_ms;
    return s.last_receive_ms + config.websocket_ping_interval_ms;
}

/// Keep-alive: ping a quiet client; give up on one that does not answer; give up on a close
/// the client does not answer.
pub fn onTimeout(s: *Session, x: *Exchange) void {
    const now = s.worker.now_ms;
    if (now < s.deadline()) return;
    switch (s.state) {
        .closing => {
            s.end(s.close_sent_code, "");
            s.protocol().closeNow();
        },
        .open => if (s.ping_sent_ms != null) {
            s.fail(x, .internal_error, "no pong within websocket_pong_timeout_ms");
        } else {
            s.queueControl(x, .ping, "");
            s.ping_sent_ms = now;
        },
        .closed => {},
    }
}

/// Server shutdown: close with 1001.
pub fn drain(s: *Session, x: *Exchange) void {
    s.beginClose(x, .going_away, "server shutting down");
}

/// The client closed the TCP connection without a closing handshake.
pub fn onPeerClosed(s: *Session) void {
    s.end(.abnormal, "");
}

// Sending.

/// The send batch went out: forget its memory and go on with what waited for it.
pub fn onBatchSent(s: *Session, x: *Exchange) void {
    x.arena.reset();
    s.outbox.reset();
    s.batch_bytes.store(0, .monotonic);
    if (s.pinned) s.clearBuffers();
    if (s.state != .closed) s.process(x);
}

/// Queued work from other threads (or other connections on this thread): messages, a close
/// request, a full queue.
pub fn onWake(s: *Session, x: *Exchange) void {
    s.mutex.lock();
    var block = s.inbox_head;
    s.inbox_head = null;
    s.inbox_tail = null;
    s.inbox_bytes = 0;
    const request = s.close_request;
    s.close_request = null;
    const overflowed = s.overflowed;
    s.overflowed = false;
    s.mutex.unlock();
    if (overflowed) s.fail(x, .policy_violation, "send queue full: the client reads too slowly");
    while (block) |b| {
        block = b.next;
        if (s.state == .open) s.queueQueued(x, b);
        s.freeBlock(b);
    }
    if (request) |r| s.beginClose(x, r.code, r.reason[0..r.reason_len]);
}

fn queueQueued(s: *Session, x: *Exchange, b: *Block) void {
    if (b.opcode == .ping) return s.queueControl(x, .ping, b.payload());
    s.queueData(x, b.opcode, b.payload(), false) catch |err| switch (err) {
        error.SendQueueFull => s.fail(x, .policy_violation, "send queue full: the client reads too slowly"),
        error.OutOfMemory => s.fail(x, .internal_error, "out of memory for the send queue"),
    };
}

/// `Conn.send`: from the engine thread, straight into the batch; from another thread, into
/// the inbox, and the engine thread is woken. The generation is checked under `mutex` before
/// anything else is read: a stale handle may point at a session that is free, or in use by a
/// later connection on another worker.
pub fn send(s: *Session, generation: u32, opcode: frame.Opcode, data: []const u8) Conn.SendError!void {
    s.mutex.lock();
    if (!s.live(generation) or !s.accepting.load(.acquire)) {
        s.mutex.unlock();
        return error.Closed;
    }
    if (Worker.current == s.worker) {
        // Only this thread can end the session, so it stays live without the lock.
        s.mutex.unlock();
        return s.sendOwn(opcode, data);
    }
    defer s.mutex.unlock();
    return s.sendQueued(opcode, data);
}

/// A send on the session's engine thread: into the batch.
fn sendOwn(s: *Session, opcode: frame.Opcode, data: []const u8) Conn.SendError!void {
    const x = s.protocol().exchange;
    const queued = s.queuedBytes(x);
    const limit = s.worker.config.websocket_send_queue_bytes_max;
    if (opcode != .ping and queued > 0 and queued + data.len > limit) {
        s.markOverflow();
        return error.SendQueueFull;
    }
    if (opcode == .ping) {
        s.queueControl(x, .ping, data);
    } else {
        s.queueData(x, opcode, data, s.holds(x, data)) catch |err| switch (err) {
            error.SendQueueFull => {
                s.markOverflow();
                return error.SendQueueFull;
            },
            error.OutOfMemory => return error.OutOfMemory,
        };
    }
    // Another connection's batch grew: the engine drives it after the current work.
    if (s.worker.callback_session != s) s.worker.queueWake(s, false);
}

/// A send from another thread (`mutex` held, session live): a copy into the inbox.
fn sendQueued(s: *Session, opcode: frame.Opcode, data: []const u8) Conn.SendError!void {
    const queued = s.inbox_bytes + s.batch_bytes.load(.monotonic);
    if (queued > 0 and queued + data.len > s.worker.config.websocket_send_queue_bytes_max) {
        s.overflowed = true;
        s.accepting.store(false, .release);
        s.worker.queueWake(s, true);
        return error.SendQueueFull;
    }
    const bytes = @sizeOf(Block) + data.len;
    if (!s.worker.budget.take(bytes)) return error.OutOfMemory;
    const memory = s.worker.gpa.alignedAlloc(u8, .of(Block), bytes) catch {
        s.worker.budget.give(bytes);
        return error.OutOfMemory;
    };
    const block: *Block = @ptrCast(memory.ptr);
    block.* = .{ .next = null, .opcode = opcode, .len = data.len };
    @memcpy(block.payload(), data);
    if (s.inbox_tail) |tail| tail.next = block else s.inbox_head = block;
    s.inbox_tail = block;
    s.inbox_bytes += data.len;
    s.worker.queueWake(s, true);
}

/// `Conn.subprotocol`: null once the handle is stale.
pub fn subprotocolFor(s: *Session, generation: u32) ?[]const u8 {
    s.mutex.lock();
    defer s.mutex.unlock();
    return if (s.live(generation)) s.subprotocol else null;
}

/// `Conn.userData`: null once the handle is stale.
pub fn userDataFor(s: *Session, generation: u32) ?*anyopaque {
    s.mutex.lock();
    defer s.mutex.unlock();
    return if (s.live(generation)) s.user_data else null;
}

/// `Conn.setUserData`: ignored once the handle is stale.
pub fn setUserDataFor(s: *Session, generation: u32, data: ?*anyopaque) void {
    s.mutex.lock();
    defer s.mutex.unlock();
    if (s.live(generation)) s.user_data = data;
}

/// Whether `data` lies in memory that stays unchanged until the batch is sent: the receive
/// buffer (compacted only once the batch is out) or a message buffer (pinned until then).
fn holds(s: *const Session, x: *const Exchange, data: []const u8) bool {
    return within(data, x.recv) or within(data, s.buffer.items) or within(data, s.inflated.items);
}

fn within(inner: []const u8, outer: []const u8) bool {
    const start = @intFromPtr(inner.ptr);
    const outer_start = @intFromPtr(outer.ptr);
    return start >= outer_start and start + inner.len <= outer_start + outer.len;
}

/// Marks the queue as full (engine thread): the session closes with 1008 when next woken,
/// outside any callback that may be running now.
fn markOverflow(s: *Session) void {
    s.mutex.lock();
    s.overflowed = true;
    s.accepting.store(false, .release);
    s.mutex.unlock();
    s.worker.queueWake(s, false);
}

/// `Conn.close`: handled on the engine thread (now, if this is the session's own callback).
/// A code a server may not send (`CloseCode.isSendable`) becomes 1000; a reason that is not
/// UTF-8 is left out.
pub fn requestClose(s: *Session, generation: u32, code: CloseCode, reason: []const u8) void {
    const cut = if (Utf8Validator.validate(reason)) utf8Prefix(reason, reason_bytes_max) else "";
    const sent: CloseCode = if (CloseCode.isSendable(@backingInt(code))) code else .normal;
    s.mutex.lock();
    if (!s.live(generation)) return s.mutex.unlock();
    if (Worker.current == s.worker and s.worker.callback_session == s) {
        s.mutex.unlock();
        return s.beginClose(s.protocol().exchange, sent, cut);
    }
    defer s.mutex.unlock();
    if (!s.accepting.load(.acquire)) return;
    var request: CloseRequest = .{ .code = sent, .reason = undefined, .reason_len = @intCast(cut.len) };
    @memcpy(request.reason[0..cut.len], cut);
    s.close_request = request;
    s.accepting.store(false, .release);
    s.worker.queueWake(s, Worker.current != s.worker);
}

/// The longest prefix of `text` of at most `max` bytes that ends at a character boundary.
fn utf8Prefix(text: []const u8, max: usize) []const u8 {
    if (text.len <= max) return text;
    var cut = max;
    while (cut > 0 and text[cut] & 0xC0 == 0x80) cut -= 1;
    return text[0..cut];
}

fn freeBlock(s: *Session, b: *Block) void {
    const memory = b.allocation();
    s.worker.budget.give(memory.len);
    s.worker.gpa.free(memory);
}

/// Bytes of the batch still to be sent.
fn queuedBytes(s: *const Session, x: *const Exchange) u64 {
    _ = s;
    return Outbox.queuedBytes(x);
}

/// Adds a data message to the batch, compressed when agreed and worth it. `stable` says the
/// payload stays valid until the batch is sent.
fn queueData(s: *Session, x: *Exchange, opcode: frame.Opcode, payload: []const u8, stable: bool) error{ SendQueueFull, OutOfMemory }!void {
    if (s.deflate) |d| if (payload.len >= Deflate.compress_bytes_min) {
        if (s.outbox.addCompressed(x, d, opcode, payload, s.worker.config.websocket_send_queue_bytes_max)) {
            s.publishBatch(x);
            return;
        } else |err| switch (err) {
            error.CompressFailed => {}, // sent uncompressed below
            else => |e| return e,
        }
    };
    try s.outbox.add(x, .{ .opcode = opcode, .payload_len = payload.len }, payload, .{
        .stable = stable,
        .queue_bytes_max = s.worker.config.websocket_send_queue_bytes_max,
    });
    s.publishBatch(x);
}

fn publishBatch(s: *Session, x: *const Exchange) void {
    s.batch_bytes.store(s.queuedBytes(x), .monotonic);
}

/// Adds a control frame; they are small and always fit (a close that cannot be queued
/// ends the connection at once).
fn queueControl(s: *Session, x: *Exchange, opcode: frame.Opcode, payload: []const u8) void {
    assert(payload.len <= frame.control_payload_bytes_max);
    s.outbox.add(x, .{ .opcode = opcode, .payload_len = payload.len }, payload, .{
        .stable = false,
        .queue_bytes_max = s.worker.config.websocket_send_queue_bytes_max,
    }) catch {
        s.protocol().closeNow();
        return;
    };
    s.publishBatch(x);
}

fn queueClose(s: *Session, x: *Exchange, code: ?CloseCode, reason: []const u8) void {
    var payload: [frame.control_payload_bytes_max]u8 = undefined;
    var len: usize = 0;
    if (code) |c| {
        assert(CloseCode.isValidOnWire(@backingInt(c))); // `requestClose` maps the others
        std.mem.writeInt(u16, payload[0..2], @backingInt(c), .big);
        const cut = utf8Prefix(reason, reason_bytes_max);
        @memcpy(payload[2..][0..cut.len], cut);
        len = 2 + cut.len;
    }
    s.queueControl(x, .close, payload[0..len]);
}
