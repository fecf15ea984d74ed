//! The TLS transport of one connection: the handshake, then records in and out, with OpenSSL
//! doing the cryptography on memory only. OpenSSL reads records from and writes them to a
//! BIO of saker's own whose bytes live in buffers borrowed from the listener's
//! `tls.Context`, so the engine moves ciphertext with its usual syscalls (and io_uring works
//! as epoll does) and this file makes none:
//!
//! - received ciphertext goes into `in`; `received` feeds it to the handshake, then decrypts
//!   into the protocol's receive buffer;
//! - the protocol's iovecs are encrypted into `out` when the engine asks what to send next,
//!   and reported sent once every record of them is out;
//! - a file body cannot go to the socket with sendfile (the kernel would send plaintext): its
//!   bytes are read into `file` (`Next.pread`), encrypted, and sent as records.
//!
//! A connection whose protocol buffer filled while more records waited reports them
//! (`Next.recv_held`), since the socket will not say so again.
const std = @import("std");
const assert = std.debug.assert;
const posix = std.posix;
const ssl = @import("../tls/openssl.zig");
const Context = @import("../tls/Context.zig");
const contract = @import("../engine_contract.zig");
const Handoff = @import("../Handoff.zig");
const facts = @import("../tls/facts.zig");

const log = std.log.scoped(.saker);

const Tls = @This();
const Buffer = Context.Buffer;

context: *Context,
connection: *ssl.SSL,
phase: Phase = .handshake,
/// Handshake deadline, on the worker's clock.
handshake_deadline_ms: u64,
/// Received ciphertext not yet taken by OpenSSL: `in.bytes[in_start..in_end]`.
in: ?*Buffer = null,
in_start: u32 = 0,
in_end: u32 = 0,
/// Records to send: `out.bytes[out_start..out_end]`.
out: ?*Buffer = null,
out_start: u32 = 0,
out_end: u32 = 0,
/// File bytes read for encryption (`Next.pread`).
file: ?*Buffer = null,
/// Protocol bytes sealed into `out`, reported to the protocol once `out` is sent.
sealed: usize = 0,
/// Whether `out` carries protocol bytes (`sealed`, possibly 0 for an empty batch).
sealing: bool = false,
/// The protocol's receive buffer, as last given to `recvBuffer`: where records decrypt to.
target: []u8 = &.{},
/// Decryptable bytes may wait that the protocol's buffer had no room for.
held: bool = false,
/// The first bytes arrived (the plaintext check is done).
started: bool = false,
/// Protocol bytes were decrypted: the client's first request has begun.
delivered: bool = false,
/// The client's close_notify arrived: the protocol is told the stream ended, once its data
/// is delivered.
closed_by_client: bool = false,
/// close_notify was queued (shutdown) or must not be (the connection failed).
notified: bool = false,
iovec: [1]posix.iovec_const = undefined,
/// For engines that run handlers on the connection's thread: the engine's own sink (raw
/// bytes) and the one the protocol uses, which seals and opens records around it.
raw_sink: ?*const Handoff.Sink = null,
sink: Handoff.Sink = undefined,

pub const Phase = enum {
    handshake,
    open,
    /// The handshake failed, a record was bad, or the deadline passed: what is in `out`
    /// (an alert) goes, then the connection closes.
    failed,
};

/// A connection that could not get a session (OpenSSL out of memory): it closes at once.
pub var refused: Tls = .{
    .context = undefined,
    .connection = undefined,
    .phase = .failed,
    .notified = true,
    .handshake_deadline_ms = 0,
};

/// The BIO method of every session's records (one per `tls.Context`).
pub fn newBioMethod() ?*ssl.BIO_METHOD {
    const m = ssl.BIO_meth_new(ssl.BIO_get_new_index() | ssl.BIO_TYPE_SOURCE_SINK, "saker records") orelse return null;
    if (ssl.BIO_meth_set_write_ex(m, bioWrite) != 1 or ssl.BIO_meth_set_read_ex(m, bioRead) != 1 or
        ssl.BIO_meth_set_ctrl(m, bioCtrl) != 1)
    {
        ssl.BIO_meth_free(m);
        return null;
    }
    return m;
}

/// A session on `ctx` for a new connection (see `Context.open`).
pub fn create(context: *Context, ctx: *ssl.SSL_CTX, handshake_deadline_ms: u64) ?*Tls {
    const connection = ssl.SSL_new(ctx) orelse return null;
    const bio = ssl.BIO_new(context.bio_method) orelse {
        ssl.SSL_free(connection);
        return null;
    };
    const s = context.gpa.create(Tls) catch {
        _ = ssl.BIO_free(bio);
        ssl.SSL_free(connection);
        return null;
    };
    s.* = .{ .context = context, .connection = connection, .handshake_deadline_ms = handshake_deadline_ms };
    ssl.BIO_set_data(bio, s);
    ssl.BIO_set_init(bio, 1);
    _ = ssl.BIO_up_ref(bio); // one reference for each direction
    ssl.SSL_set_bio(connection, bio, bio);
    ssl.SSL_set_accept_state(connection);
    _ = context.sessions_open.fetchAdd(1, .monotonic);
    return s;
}

/// Frees the session and gives its buffers back.
pub fn destroy(s: *Tls) void {
    if (s == &refused) return;
    ssl.SSL_free(s.connection); // frees the BIO too
    inline for (.{ "in", "out", "file" }) |name| {
        if (@field(s, name)) |b| s.context.buffers.give(b);
    }
    _ = s.context.sessions_open.fetchSub(1, .monotonic);
    s.context.gpa.destroy(s);
}

/// Whether the handshake is still going (its deadline then applies).
pub fn handshaking(s: *const Tls) bool {
    return s.phase == .handshake;
}

/// The handshake deadline passed: the connection closes without a word.
pub fn onTimeout(s: *Tls) void {
    assert(s.phase == .handshake);
    log.debug("TLS handshake timed out", .{});
    s.fail();
    _ = s.context.handshakes_failed.fetchAdd(1, .monotonic);
}

/// What the socket must do for what the protocol wants: pending records first, then the
/// handshake, then the protocol's own action in TLS terms.
pub fn next(s: *Tls, wanted: contract.Next) contract.Next {
    if (s.out_end > s.out_start) {
        s.iovec[0] = .{ .base = s.out.?.bytes[s.out_start..].ptr, .len = s.out_end - s.out_start };
        return .{ .send = &s.iovec };
    }
    switch (s.phase) {
        .failed => return .close,
        .handshake => return if (wanted == .close) .close else .recv,
        .open => {},
    }
    switch (wanted) {
        .recv => return if (s.held or s.closed_by_client) .recv_held else .recv,
        .send => |iovecs| return s.sealBatch(iovecs),
        .send_file => |file| {
            const buffer = s.file orelse s.context.buffers.take() orelse return s.failNext();
            s.file = buffer;
            const len: usize = @intCast(@min(file.len, 2 * Buffer.record_plain_max));
            return .{ .pread = .{ .fd = file.fd, .offset = file.offset, .buffer = buffer.bytes[0..len] } };
        },
        // close_notify first (RFC 8446 §6.1): the client sees a clean end, not a truncation.
        .shutdown, .close => return if (s.notify()) s.next(wanted) else wanted,
        .wait => return .wait,
        .recv_held, .pread => unreachable, // transport actions, never a protocol's
    }
}

/// Queues close_notify, once; true when it is in `out` to be sent. A socket that fails
/// meanwhile just closes.
fn notify(s: *Tls) bool {
    if (s.notified) return false;
    s.notified = true;
    _ = ssl.SSL_shutdown(s.connection);
    ssl.ERR_clear_error();
    return s.out_end > s.out_start;
}

/// Encrypts as much of `iovecs` as `out` holds and sends it.
fn sealBatch(s: *Tls, iovecs: []const posix.iovec_const) contract.Next {
    const n = s.seal(iovecs, 0) orelse return s.failNext();
    s.sealed = n;
    s.sealing = true;
    if (s.out_end == s.out_start) {
        // Nothing to encrypt (an empty batch): the protocol is told at once through an empty send.
        s.iovec[0] = .{ .base = @ptrCast(&s.iovec), .len = 0 };
        return .{ .send = &s.iovec };
    }
    return s.next(.wait);
}

/// Encrypts `iovecs`, from byte `skip` on, into `out` while whole records fit; returns the
/// plaintext bytes taken (null: the session failed). Small pieces (a response head, a short
/// body) are gathered into one record: each record costs a header, a tag and a cipher call.
fn seal(s: *Tls, iovecs: []const posix.iovec_const, skip: usize) ?usize {
    const overhead = Buffer.record_bytes_max - Buffer.record_plain_max;
    var gather: [Buffer.record_plain_max]u8 = undefined;
    var cursor: Cursor = .{ .iovecs = iovecs };
    cursor.skip(skip);
    var taken: usize = 0;
    while (cursor.left() > 0) {
        const piece = cursor.piece();
        const record = @min(cursor.left(), Buffer.record_plain_max);
        if (s.room() < record + overhead) break;
        const plaintext = if (piece.len >= record) piece[0..record] else cursor.gatherInto(gather[0..record]);
        const written = s.write(plaintext) orelse return null;
        taken += written;
        if (piece.len >= record) cursor.skip(written) else assert(written == plaintext.len or written == 0);
        if (written < plaintext.len) break;
    }
    return taken;
}

/// A position in a list of iovecs.
const Cursor = struct {
    iovecs: []const posix.iovec_const,
    index: usize = 0,
    offset: usize = 0,

    fn skip(c: *Cursor, n: usize) void {
        var rest = n;
        while (rest > 0) {
            const available = c.iovecs[c.index].len - c.offset;
            if (rest < available) {
                c.offset += rest;
                return;
            }
            rest -= available;
            c.index += 1;
            c.offset = 0;
        }
        while (c.index < c.iovecs.len and c.iovecs[c.index].len == c.offset) {
            c.index += 1;
            c.offset = 0;
        }
    }

    fn left(c: *const Cursor) usize {
        if (c.index >= c.iovecs.len) return 0;
        var n = c.iovecs[c.index].len - c.offset;
        for (c.iovecs[c.index + 1 ..]) |iov| n += iov.len;
        return n;
    }

    /// The rest of the current iovec.
    fn piece(c: *const Cursor) []const u8 {
        const iov = c.iovecs[c.index];
        return iov.base[c.offset..iov.len];
    }

    /// Copies the next `buffer.len` bytes into `buffer` and moves past them.
    fn gatherInto(c: *Cursor, buffer: []u8) []const u8 {
        var filled: usize = 0;
        while (filled < buffer.len) {
            const bytes = c.piece();
            const n = @min(bytes.len, buffer.len - filled);
            @memcpy(buffer[filled..][0..n], bytes[0..n]);
            filled += n;
            c.skip(n);
        }
        return buffer;
    }
};

fn room(s: *Tls) usize {
    if (s.out == null) return Buffer.bytes_max;
    return Buffer.bytes_max - s.out_end;
}

/// One SSL_write; the BIO has room for its record.
fn write(s: *Tls, bytes: []const u8) ?usize {
    var written: usize = 0;
    if (ssl.SSL_write_ex(s.connection, bytes.ptr, bytes.len, &written) == 1) return written;
    switch (ssl.SSL_get_error(s.connection, 0)) {
        ssl.SSL_ERROR_WANT_WRITE, ssl.SSL_ERROR_WANT_READ => return 0,
        else => {
            s.logFailure("encrypting");
            return null;
        },
    }
}

/// File bytes were read (`Next.pread`): they are encrypted into records to send. 0 or an
/// error: the file shrank or failed, and the connection cannot keep its promise.
pub fn onFileRead(s: *Tls, n: usize) bool {
    const buffer = s.file.?;
    defer {
        s.file = null;
        s.context.buffers.give(buffer);
    }
    if (n == 0) return false;
    const iov = [_]posix.iovec_const{.{ .base = &buffer.bytes, .len = n }};
    const taken = s.seal(&iov, 0) orelse {
        s.phase = .failed;
        return false;
    };
    assert(taken == n); // `out` was empty, and holds two records
    s.sealed = n;
    s.sealing = true;
    return true;
}

/// Where the socket's bytes go: `in`, after what waits there. `protocol_buffer` is where they
/// will be decrypted to.
pub fn recvBuffer(s: *Tls, protocol_buffer: []u8) ?[]u8 {
    s.target = protocol_buffer;
    const buffer = s.in orelse blk: {
        const b = s.context.buffers.take() orelse return null;
        s.in = b;
        break :blk b;
    };
    if (s.in_start > 0) {
        const len = s.in_end - s.in_start;
        std.mem.copyForwards(u8, buffer.bytes[0..len], buffer.bytes[s.in_start..s.in_end]);
        s.in_start = 0;
        s.in_end = len;
    }
    assert(s.in_end < Buffer.bytes_max);
    return buffer.bytes[s.in_end..];
}

/// The socket delivered `n` bytes of records (0: it closed): returns the protocol bytes now
/// in its buffer (null: none yet; 0: the end of the stream).
pub fn received(s: *Tls, n: usize) ?usize {
    if (n == 0) return 0;
    const first = s.in_end == 0 and !s.started;
    s.in_end += @intCast(n);
    assert(s.in_end <= Buffer.bytes_max);
    if (first) {
        s.started = true;
        // A TLS connection opens with a handshake record (22). Letters are an HTTP request
        // sent in plaintext: it gets a plaintext answer saying so, as nginx's 497 does.
        if (std.ascii.isUpper(s.in.?.bytes[0])) return s.refusePlaintext();
    }
    if (s.phase == .handshake) {
        const rc = ssl.SSL_do_handshake(s.connection);
        if (rc != 1) {
            switch (ssl.SSL_get_error(s.connection, rc)) {
                ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_WANT_WRITE => {},
                else => {
                    s.logFailure("handshake");
                    s.phase = .failed;
                    s.notified = true;
                    _ = s.context.handshakes_failed.fetchAdd(1, .monotonic);
                },
            }
            s.releaseIn();
            return null;
        }
        s.phase = .open;
        _ = s.context.handshakes_completed.fetchAdd(1, .monotonic);
    }
    if (s.phase != .open) return null;
    return s.decrypt(s.target);
}

/// Decrypts what waits into `buffer` (the protocol's, when `Next.recv_held`).
pub fn deliverHeld(s: *Tls, buffer: []u8) ?usize {
    s.target = buffer;
    return s.decrypt(buffer);
}

fn decrypt(s: *Tls, buffer: []u8) ?usize {
    var total: usize = 0;
    s.held = false;
    while (total < buffer.len) {
        var got: usize = 0;
        if (ssl.SSL_read_ex(s.connection, buffer[total..].ptr, buffer.len - total, &got) == 1) {
            total += got;
            continue;
        }
        switch (ssl.SSL_get_error(s.connection, 0)) {
            ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_WANT_WRITE => {},
            ssl.SSL_ERROR_ZERO_RETURN => s.closed_by_client = true,
            else => {
                s.logFailure("decrypting");
                s.phase = .failed;
                s.notified = true;
            },
        }
        break;
    } else s.held = true;
    s.releaseIn();
    if (total > 0) {
        s.delivered = true;
        return total;
    }
    if (s.closed_by_client) return 0;
    return null;
}

fn refusePlaintext(s: *Tls) ?usize {
    s.in_start = s.in_end;
    s.releaseIn();
    s.fail();
    const buffer = s.context.buffers.take() orelse return null;
    s.out = buffer;
    @memcpy(buffer.bytes[0..plaintext_refusal.len], plaintext_refusal);
    s.out_start = 0;
    s.out_end = plaintext_refusal.len;
    return null;
}

const plaintext_refusal_body = "400 Bad Request: this port speaks HTTPS; use an https:// URL\n";
const plaintext_refusal = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " ++
    std.fmt.comptimePrint("{d}", .{plaintext_refusal_body.len}) ++ "\r\nConnection: close\r\n\r\n" ++ plaintext_refusal_body;

fn releaseIn(s: *Tls) void {
    if (s.in_start < s.in_end) return;
    if (s.in) |b| s.context.buffers.give(b);
    s.in = null;
    s.in_start = 0;
    s.in_end = 0;
}

/// The socket took `n` bytes of records: returns the protocol bytes now sent (null: none yet).
pub fn sent(s: *Tls, n: usize) ?usize {
    s.out_start += @intCast(n);
    assert(s.out_start <= s.out_end);
    if (s.out_start < s.out_end) return null;
    if (s.out) |b| s.context.buffers.give(b);
    s.out = null;
    s.out_start = 0;
    s.out_end = 0;
    if (s.phase == .handshake) {
        // A flight larger than `out` waits for room: go on with it.
        const rc = ssl.SSL_do_handshake(s.connection);
        if (rc == 1) {
            s.phase = .open;
            _ = s.context.handshakes_completed.fetchAdd(1, .monotonic);
        } else switch (ssl.SSL_get_error(s.connection, rc)) {
            ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_WANT_WRITE => {},
            else => {
                s.logFailure("handshake");
                s.fail();
                _ = s.context.handshakes_failed.fetchAdd(1, .monotonic);
            },
        }
    }
    if (!s.sealing) return null;
    s.sealing = false;
    defer s.sealed = 0;
    return s.sealed;
}

/// The socket failed: nothing more is sent.
pub fn onError(s: *Tls) void {
    if (s == &refused) return;
    s.fail();
}

fn fail(s: *Tls) void {
    s.phase = .failed;
    s.notified = true;
    s.sealing = false;
    s.out_start = s.out_end;
}

fn failNext(s: *Tls) contract.Next {
    s.fail();
    return .close;
}

fn logFailure(s: *Tls, what: []const u8) void {
    _ = s;
    var buffer: [256]u8 = undefined;
    log.debug("TLS {s} failed: {s}", .{ what, ssl.lastError(&buffer, "the peer went away") });
}

/// Whether ALPN chose HTTP/2 (`h2`) for this session.
pub fn alpnHttp2(s: *const Tls) bool {
    var alpn: ?[*]const u8 = null;
    var alpn_len: c_uint = 0;
    ssl.SSL_get0_alpn_selected(s.connection, &alpn, &alpn_len);
    const chosen = alpn orelse return false;
    return std.mem.eql(u8, chosen[0..alpn_len], "h2");
}

/// The session as `Request.tls()` reads it.
pub fn session(s: *const Tls) facts.Session {
    return .{ .context = s, .describe = describe, .client_subject = clientSubject };
}

fn describe(context: *const anyopaque) facts.Facts {
    const s: *const Tls = @ptrCast(@alignCast(context));
    const connection = s.connection;
    var alpn: ?[*]const u8 = null;
    var alpn_len: c_uint = 0;
    ssl.SSL_get0_alpn_selected(connection, &alpn, &alpn_len);
    const name = ssl.SSL_get_servername(connection, ssl.TLSEXT_NAMETYPE_host_name);
    return .{
        .version = std.mem.span(ssl.SSL_get_version(connection)),
        .cipher = std.mem.span(ssl.SSL_CIPHER_get_name(ssl.SSL_get_current_cipher(connection))),
        .server_name = if (name) |n| std.mem.span(n) else null,
        .alpn = if (alpn) |a| a[0..alpn_len] else null,
        .resumed = ssl.SSL_session_reused(connection) == 1,
    };
}

fn clientSubject(context: *const anyopaque, buffer: []u8) ?[]const u8 {
    const s: *const Tls = @ptrCast(@alignCast(context));
    const certificate = ssl.SSL_get1_peer_certificate(s.connection) orelse return null;
    defer ssl.X509_free(certificate);
    const text = ssl.X509_NAME_oneline(ssl.X509_get_subject_name(certificate), buffer.ptr, @intCast(@min(buffer.len, std.math.maxInt(c_int)))) orelse return null;
    return std.mem.span(text);
}

/// The sink the protocol uses on engines that run handlers on the connection's thread: records
/// sealed and opened around the engine's `raw` sink.
pub fn wrapSink(s: *Tls, raw: *const Handoff.Sink) *const Handoff.Sink {
    if (raw == &s.sink) return raw;
    s.raw_sink = raw;
    s.sink = .{ .context = s, .writeAll = sinkWriteAll, .read = sinkRead };
    return &s.sink;
}

fn sinkWriteAll(context: *anyopaque, iovecs: []const posix.iovec_const) error{ClientGone}!void {
    const s: *Tls = @ptrCast(@alignCast(context));
    const raw = s.raw_sink.?;
    if (s.phase != .open) return error.ClientGone;
    var total: usize = 0;
    for (iovecs) |iov| total += iov.len;
    var done: usize = 0;
    while (true) {
        try s.flushTo(raw);
        if (done == total) return;
        const n = s.seal(iovecs, done) orelse return error.ClientGone;
        done += n;
    }
}

/// Sends what waits in `out` through `raw`.
fn flushTo(s: *Tls, raw: *const Handoff.Sink) error{ClientGone}!void {
    if (s.out_end == s.out_start) return;
    const pending = [_]posix.iovec_const{.{ .base = s.out.?.bytes[s.out_start..].ptr, .len = s.out_end - s.out_start }};
    raw.writeAll(raw.context, &pending) catch |err| {
        s.fail();
        return err;
    };
    s.out_start = s.out_end;
    s.context.buffers.give(s.out.?);
    s.out = null;
    s.out_start = 0;
    s.out_end = 0;
}

fn sinkRead(context: *anyopaque, buffer: []u8, deadline_ms: u64) error{ ClientGone, Timeout }!usize {
    const s: *Tls = @ptrCast(@alignCast(context));
    const raw = s.raw_sink.?;
    while (true) {
        if (s.phase != .open) return error.ClientGone;
        if (s.held) {
            if (s.deliverHeld(buffer)) |n| {
                if (n == 0) return error.ClientGone;
                return n;
            }
        }
        const space = s.recvBuffer(buffer) orelse return error.ClientGone;
        const n = try raw.read(raw.context, space, deadline_ms);
        const got = s.received(n) orelse {
            try s.flushTo(raw); // records OpenSSL wrote while reading (a key update's answer)
            continue;
        };
        if (got == 0) return error.ClientGone;
        return got;
    }
}

// The BIO between OpenSSL and the buffers. OpenSSL calls these on the thread driving the
// connection.

fn bioRead(bio: *ssl.BIO, data: [*]u8, len: usize, read: *usize) callconv(.c) c_int {
    const s: *Tls = @ptrCast(@alignCast(ssl.BIO_get_data(bio).?));
    ssl.BIO_clear_flags(bio, ssl.BIO_FLAGS_RWS | ssl.BIO_FLAGS_SHOULD_RETRY);
    const available = s.in_end - s.in_start;
    if (available == 0) {
        ssl.BIO_set_flags(bio, ssl.BIO_FLAGS_READ | ssl.BIO_FLAGS_SHOULD_RETRY);
        read.* = 0;
        return 0;
    }
    const n = @min(len, available);
    @memcpy(data[0..n], s.in.?.bytes[s.in_start..][0..n]);
    s.in_start += @intCast(n);
    read.* = n;
    return 1;
}

fn bioWrite(bio: *ssl.BIO, data: [*]const u8, len: usize, written: *usize) callconv(.c) c_int {
    const s: *Tls = @ptrCast(@alignCast(ssl.BIO_get_data(bio).?));
    ssl.BIO_clear_flags(bio, ssl.BIO_FLAGS_RWS | ssl.BIO_FLAGS_SHOULD_RETRY);
    if (s.out == null) {
        s.out = s.context.buffers.take() orelse {
            written.* = 0;
            return 0;
        };
    }
    const space = Buffer.bytes_max - s.out_end;
    if (space == 0) {
        ssl.BIO_set_flags(bio, ssl.BIO_FLAGS_WRITE | ssl.BIO_FLAGS_SHOULD_RETRY);
        written.* = 0;
        return 0;
    }
    const n = @min(len, space);
    @memcpy(s.out.?.bytes[s.out_end..][0..n], data[0..n]);
    s.out_end += @intCast(n);
    written.* = n;
    return 1;
}

fn bioCtrl(_: *ssl.BIO, cmd: c_int, _: c_long, _: ?*anyopaque) callconv(.c) c_long {
    return if (cmd == ssl.BIO_CTRL_FLUSH) 1 else 0;
}

/// A TLS client on memory BIOs, for tests that drive a session without sockets.
const TestClient = struct {
    ctx: *ssl.SSL_CTX,
    connection: *ssl.SSL,
    /// Records to the server (OpenSSL writes here).
    to_server: *ssl.BIO,
    /// Records from the server (the test writes here).
    from_server: *ssl.BIO,

    fn init() !TestClient {
        const ctx = ssl.SSL_CTX_new(ssl.TLS_client_method()) orelse return error.OpenSsl;
        errdefer ssl.SSL_CTX_free(ctx);
        const connection = ssl.SSL_new(ctx) orelse return error.OpenSsl;
        const to_server = ssl.BIO_new(ssl.BIO_s_mem()).?;
        const from_server = ssl.BIO_new(ssl.BIO_s_mem()).?;
        ssl.SSL_set_bio(connection, from_server, to_server);
        ssl.SSL_set_connect_state(connection);
        return .{ .ctx = ctx, .connection = connection, .to_server = to_server, .from_server = from_server };
    }

    fn deinit(client: *TestClient) void {
        ssl.SSL_free(client.connection);
        ssl.SSL_CTX_free(client.ctx);
    }

    /// Records the client wants sent, taken out of its BIO.
    fn flight(client: *TestClient, buffer: []u8) []u8 {
        const n = ssl.BIO_read(client.to_server, buffer.ptr, @intCast(buffer.len));
        return buffer[0..@intCast(@max(n, 0))];
    }
};

/// Moves what `s` wants sent to the client; returns whether there was anything.
fn deliverToClient(s: *Tls, client: *TestClient, protocol_wants: contract.Next) !bool {
    const action = s.next(protocol_wants);
    if (action != .send) return false;
    var total: usize = 0;
    for (action.send) |iov| {
        if (iov.len == 0) continue;
        try std.testing.expect(ssl.BIO_write(client.from_server, iov.base, @intCast(iov.len)) == @as(c_int, @intCast(iov.len)));
        total += iov.len;
    }
    _ = s.sent(total);
    return total > 0;
}

/// Runs the handshake between `s` and `client`; records for the server go through
/// `protocol_buffer`'s transport calls as an engine's would.
fn handshakeInMemory(s: *Tls, client: *TestClient, protocol_buffer: []u8) !void {
    var wire: [64 * 1024]u8 = undefined;
    for (0..10) |_| {
        if (s.phase == .open and ssl.SSL_is_init_finished(client.connection) == 1) return;
        _ = ssl.SSL_do_handshake(client.connection);
        const records = client.flight(&wire);
        if (records.len > 0) {
            try std.testing.expectEqual(contract.Next.recv, s.next(.recv));
            const space = s.recvBuffer(protocol_buffer).?;
            @memcpy(space[0..records.len], records);
            try std.testing.expectEqual(@as(?usize, null), s.received(records.len));
        }
        while (try deliverToClient(s, client, .recv)) {}
    }
    return error.HandshakeDidNotFinish;
}

/// A server session and a client on memory, past their handshake: what the tests below share.
const TestPair = struct {
    context: *Context,
    s: *Tls,
    client: TestClient,

    /// Handshakes with the server's records going through `protocol_buffer`'s transport calls.
    fn init(pair: *TestPair, protocol_buffer: []u8) !void {
        pair.context = try Context.init(std.testing.allocator, .{ .self_signed = true });
        errdefer pair.context.deinit();
        pair.s = pair.context.open(0, 10_000).?;
        errdefer pair.s.destroy();
        pair.client = try TestClient.init();
        errdefer pair.client.deinit();
        try handshakeInMemory(pair.s, &pair.client, protocol_buffer);
    }

    fn deinit(pair: *TestPair) void {
        pair.client.deinit();
        pair.s.destroy();
        pair.context.deinit();
    }

    /// Reads exactly `buffer.len` plaintext bytes on the client.
    fn clientReads(pair: *TestPair, buffer: []u8) !void {
        var total: usize = 0;
        while (total < buffer.len) {
            var read: usize = 0;
            try std.testing.expect(ssl.SSL_read_ex(pair.client.connection, buffer[total..].ptr, buffer.len - total, &read) == 1);
            total += read;
        }
    }
};

test "Tls: handshake, then a request fed a byte at a time and a response, through memory" {
    const testing = std.testing;
    var wire: [64 * 1024]u8 = undefined;
    var protocol_buffer: [4096]u8 = undefined;
    // The handshake: client flight, server flight, client Finished.
    var pair: TestPair = undefined;
    try pair.init(&protocol_buffer);
    defer pair.deinit();
    const s = pair.s;
    const client = &pair.client;
    try testing.expect(!s.handshaking());

    // A request, one byte of records at a time: nothing reaches the protocol until a record is
    // whole.
    const request = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    var written: usize = 0;
    try testing.expect(ssl.SSL_write_ex(client.connection, request, request.len, &written) == 1);
    const records = client.flight(&wire);
    var got: usize = 0;
    for (records, 0..) |byte, i| {
        const space = s.recvBuffer(protocol_buffer[got..]).?;
        space[0] = byte;
        if (s.received(1)) |n| {
            try testing.expectEqual(records.len - 1, i);
            got += n;
        }
    }
    try testing.expectEqualStrings(request, protocol_buffer[0..got]);

    // The response, in two iovecs: reported sent once its records are out.
    const parts = [_][]const u8{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "hello" };
    const iovecs = [_]posix.iovec_const{
        .{ .base = parts[0].ptr, .len = parts[0].len },
        .{ .base = parts[1].ptr, .len = parts[1].len },
    };
    const action = s.next(.{ .send = &iovecs });
    const out = action.send[0];
    try testing.expectEqual(@as(?usize, null), s.sent(1)); // partial: not yet the protocol's
    try testing.expect(ssl.BIO_write(client.from_server, out.base, @intCast(out.len)) > 0);
    try testing.expectEqual(@as(?usize, parts[0].len + parts[1].len), s.sent(out.len - 1));
    var response: [parts[0].len + parts[1].len]u8 = undefined;
    try pair.clientReads(&response);
    try testing.expectEqualStrings("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", &response);
}

test "Tls: records that do not fit the protocol's buffer are held back, then delivered" {
    const testing = std.testing;
    var wire: [64 * 1024]u8 = undefined;
    var small: [10]u8 = undefined;
    var pair: TestPair = undefined;
    try pair.init(&small);
    defer pair.deinit();
    const s = pair.s;
    const client = &pair.client;
    const message = "0123456789abcdefghij";
    var written: usize = 0;
    try testing.expect(ssl.SSL_write_ex(client.connection, message, message.len, &written) == 1);
    const records = client.flight(&wire);
    const space = s.recvBuffer(&small).?;
    @memcpy(space[0..records.len], records);
    try testing.expectEqual(@as(?usize, 10), s.received(records.len));
    try testing.expectEqualStrings("0123456789", &small);
    // The socket will not say that the rest is there: the transport does.
    try testing.expectEqual(contract.Next.recv_held, s.next(.recv));
    try testing.expectEqual(@as(?usize, 10), s.deliverHeld(&small));
    try testing.expectEqualStrings("abcdefghij", &small);
    try testing.expectEqual(@as(?usize, null), s.deliverHeld(&small));
    try testing.expectEqual(contract.Next.recv, s.next(.recv));
}

test "Tls: an HTTP request in plaintext gets a plaintext 400, then the close" {
    const testing = std.testing;
    const context = try Context.init(testing.allocator, .{ .self_signed = true });
    defer context.deinit();
    const s = context.open(0, 10_000).?;
    defer s.destroy();
    var protocol_buffer: [512]u8 = undefined;
    const request = "GET / HTTP/1.1\r\n";
    const space = s.recvBuffer(&protocol_buffer).?;
    @memcpy(space[0..request.len], request);
    try testing.expectEqual(@as(?usize, null), s.received(request.len));
    const action = s.next(.recv);
    const bytes = action.send[0].base[0..action.send[0].len];
    try testing.expect(std.mem.startsWith(u8, bytes, "HTTP/1.1 400 Bad Request\r\n"));
    _ = s.sent(bytes.len);
    try testing.expectEqual(contract.Next.close, s.next(.recv));
}

test "Tls: a batch of small and large iovecs, from any offset, arrives whole and in order" {
    const testing = std.testing;
    var protocol_buffer: [4096]u8 = undefined;
    var pair: TestPair = undefined;
    try pair.init(&protocol_buffer);
    defer pair.deinit();
    const s = pair.s;
    const client = &pair.client;

    var body: [40 * 1024]u8 = undefined;
    for (&body, 0..) |*b, i| b.* = @intCast(i % 251);
    const head = "HTTP/1.1 200 OK\r\nContent-Length: 40960\r\n\r\n";
    const iovecs = [_]posix.iovec_const{
        .{ .base = head.ptr, .len = head.len },
        .{ .base = head.ptr, .len = 0 },
        .{ .base = &body, .len = 7 },
        .{ .base = body[7..].ptr, .len = body.len - 7 },
    };
    var expected: [head.len + body.len]u8 = undefined;
    @memcpy(expected[0..head.len], head);
    @memcpy(expected[head.len..], &body);
    // As the protocol does: the batch is offered again, from where the last send ended,
    // until all of it is taken.
    for ([_]usize{ 0, 1, head.len, head.len + 3, head.len + 7, expected.len - 1 }) |skip| {
        var taken: usize = skip;
        while (taken < expected.len) {
            var cursor: Cursor = .{ .iovecs = &iovecs };
            cursor.skip(taken);
            const rest = cursor.iovecs[cursor.index..];
            var local: [4]posix.iovec_const = undefined;
            @memcpy(local[0..rest.len], rest);
            local[0].base += cursor.offset;
            local[0].len -= cursor.offset;
            const action = s.next(.{ .send = local[0..rest.len] });
            const out = action.send[0];
            try testing.expect(ssl.BIO_write(client.from_server, out.base, @intCast(out.len)) > 0);
            const n = s.sent(out.len).?;
            try testing.expect(n > 0);
            taken += n;
        }
        try testing.expectEqual(expected.len, taken);
        var got: [expected.len]u8 = undefined;
        try pair.clientReads(got[0 .. expected.len - skip]);
        try testing.expectEqualSlices(u8, expected[skip..], got[0 .. expected.len - skip]);
    }
}
