//! Transports: what lies between a connection's socket and its protocol's bytes. The engine
//! moves bytes for the transport; the transport hands the protocol its bytes and takes the
//! protocol's output. `Plain` is the identity. A transport that rewrites bytes (TLS: records
//! in and out, a handshake before any protocol byte, ALPN choosing the protocol) answers the
//! same four calls with buffers of its own:
//!
//! - `next(wanted)`: the socket action for what the protocol wants (a handshake or records
//!   to flush may come first);
//! - `recvBuffer(protocol_buffer)`: where the socket's bytes go;
//! - `received(n)`: bytes now in the protocol's buffer (null: none yet, read again; 0: the
//!   end of the stream);
//! - `sent(n)`: protocol bytes the socket has taken (null: none yet).
//!
//! TLS adds what plaintext never needs: records decrypted but held back while the
//! protocol's buffer was full (`Next.recv_held`), file bytes read to be encrypted
//! (`Next.pread`), a handshake deadline, and a sink of its own for engines that run handlers
//! on the connection's thread. See docs/architecture.md for adding a transport.
const contract = @import("engine_contract.zig");
const Handoff = @import("Handoff.zig");
const tls_facts = @import("tls/facts.zig");

pub const Plain = @import("transport/Plain.zig");
pub const Tls = @import("transport/Tls.zig");
pub const Proxy = @import("transport/Proxy.zig");

/// A connection's transport: plaintext (the identity, `Plain`) or a TLS session, behind a
/// PROXY header reader on listeners that require one. A plaintext connection pays for two null
/// checks.
pub const Transport = struct {
    tls: ?*Tls = null,
    /// Reads the PROXY header first (`Listening.proxy`); its phase says when it is done.
    proxy: ?*Proxy = null,

    pub inline fn next(t: *const Transport, wanted: contract.Next) contract.Next {
        if (t.proxy) |p| switch (p.phase) {
            // A protocol that closes (a drain) needs no header first.
            .reading => return if (wanted == .close) .close else .recv,
            .holding => return if (wanted == .close) .close else .recv_held,
            .failed => return .close,
            .done => {},
        };
        if (t.tls) |s| return s.next(wanted);
        return plain.next(wanted);
    }

    pub inline fn recvBuffer(t: *Transport, protocol_buffer: []u8) ?[]u8 {
        if (t.tls) |s| return s.recvBuffer(protocol_buffer);
        return plain.recvBuffer(protocol_buffer);
    }

    pub inline fn received(t: *Transport, n: usize) ?usize {
        if (t.proxy) |p| if (p.phase == .reading) {
            // Header bytes: nothing for the layers above yet.
            p.received(n);
            return null;
        };
        if (t.tls) |s| return s.received(n);
        return plain.received(n);
    }

    pub inline fn sent(t: *Transport, n: usize) ?usize {
        if (t.tls) |s| return s.sent(n);
        return plain.sent(n);
    }

    /// Hands bytes held back (`Next.recv_held`) to the protocol's buffer: those that came
    /// behind a PROXY header, as if just received, or records TLS decrypted earlier.
    pub fn deliverHeld(t: *Transport, protocol_buffer: []u8) ?usize {
        if (t.proxy) |p| if (p.phase == .holding) {
            const target = t.recvBuffer(protocol_buffer) orelse return null;
            const n = p.takeHeld(target);
            if (t.tls) |s| return s.received(n);
            return plain.received(n);
        };
        return t.tls.?.deliverHeld(protocol_buffer);
    }

    /// File bytes read for `Next.pread`; false: the connection cannot go on.
    pub fn onFileRead(t: *Transport, n: usize) bool {
        return t.tls.?.onFileRead(n);
    }

    /// The PROXY header's deadline, then the handshake's, while there is one.
    pub inline fn deadline(t: *const Transport) ?u64 {
        if (t.proxy) |p| if (p.phase == .reading) return p.deadline_ms;
        const s = t.tls orelse return null;
        return if (s.handshaking()) s.handshake_deadline_ms else null;
    }

    /// Whether a TLS handshake has begun and the client's first request has not: the
    /// connection is not idle (at shutdown, a client that just connected gets its answer).
    pub inline fn negotiating(t: *const Transport) bool {
        const s = t.tls orelse return false;
        return s.started and !s.delivered and s.phase != .failed;
    }

    pub fn onTimeout(t: *Transport) void {
        if (t.proxy) |p| if (p.phase == .reading) return p.onTimeout();
        t.tls.?.onTimeout();
    }

    pub inline fn onError(t: *Transport) void {
        if (t.tls) |s| s.onError();
    }

    /// The sink the protocol must use for the engine's `raw` one.
    pub inline fn sink(t: *Transport, raw: *const Handoff.Sink) *const Handoff.Sink {
        if (t.tls) |s| return s.wrapSink(raw);
        return raw;
    }

    /// The TLS session as a request sees it (null: plaintext).
    pub inline fn facts(t: *const Transport) ?tls_facts.Session {
        const s = t.tls orelse return null;
        return s.session();
    }

    pub fn deinit(t: *Transport) void {
        if (t.tls) |s| s.destroy();
        t.tls = null;
        if (t.proxy) |p| p.destroy();
        t.proxy = null;
    }
};

const plain: Plain = .{};

comptime {
    // Plaintext adds nothing to a connection.
    if (@sizeOf(Plain) != 0) @compileError("the plaintext transport must cost no bytes");
}
