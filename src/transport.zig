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
//! See docs/architecture.md for adding one.
const contract = @import("engine_contract.zig");

pub const Plain = @import("transport/Plain.zig");

/// The transports a connection can have.
pub const Transport = union(enum) {
    plain: Plain,

    pub inline fn next(t: *const Transport, wanted: contract.Next) contract.Next {
        return switch (t.*) {
            inline else => |*transport| transport.next(wanted),
        };
    }

    pub inline fn recvBuffer(t: *Transport, protocol_buffer: []u8) []u8 {
        return switch (t.*) {
            inline else => |*transport| transport.recvBuffer(protocol_buffer),
        };
    }

    pub inline fn received(t: *Transport, n: usize) ?usize {
        return switch (t.*) {
            inline else => |*transport| transport.received(n),
        };
    }

    pub inline fn sent(t: *Transport, n: usize) ?usize {
        return switch (t.*) {
            inline else => |*transport| transport.sent(n),
        };
    }
};

comptime {
    // Plaintext adds nothing to a connection.
    if (@sizeOf(Plain) != 0) @compileError("the plaintext transport must cost no bytes");
}
