//! A handle on one open WebSocket connection, given to the handler's `WebSocket` callbacks.
//! It is a small value (copy it freely, e.g. into a chat room's member list) and it is safe to
//! use from any thread: a send from the connection's own engine thread goes straight into its
//! send batch; from any other thread it is queued under a lock and the engine thread is woken.
//! Once the connection is closed (from `onClose` on), every call fails with `error.Closed`, on
//! every engine; a handle is never confused with a later connection that reuses the same
//! memory. A handle must not be used once the server's `serve`/`run` has returned.
const std = @import("std");
const Session = @import("Session.zig");
const websocket = @import("../websocket.zig");

const Conn = @This();

session: *Session,
/// The session's generation when the handle was made.
generation: u32,

/// Why a send was refused.
pub const SendError = error{
    /// The connection is closed or closing.
    Closed,
    /// More than `websocket_send_queue_bytes_max` bytes already wait for this client; the
    /// connection is being closed with 1008 (the client reads too slowly).
    SendQueueFull,
    /// The server's memory budget for queued messages is exhausted.
    OutOfMemory,
    /// A control payload (ping) longer than 125 bytes.
    PayloadTooLong,
};

/// Sends one whole message. `data` is copied (or sent before the call returns); text must be
/// valid UTF-8. Messages are compressed when permessage-deflate was negotiated.
pub fn send(conn: Conn, kind: websocket.Message.Kind, data: []const u8) SendError!void {
    return conn.session.send(conn.generation, switch (kind) {
        .text => .text,
        .binary => .binary,
    }, data);
}

/// Sends a ping with up to 125 bytes of payload; the client answers with a pong (`onPong`).
pub fn ping(conn: Conn, payload: []const u8) SendError!void {
    if (payload.len > 125) return error.PayloadTooLong;
    return conn.session.send(conn.generation, .ping, payload);
}

/// Starts the closing handshake with `code` and a reason of at most 123 bytes (longer ones are
/// cut at a character boundary). `onClose` follows when the client answers (or after
/// `linger_timeout_ms`). Does nothing if the connection is already closing or closed.
/// A code that must not appear in a close frame (RFC 6455 §7.4.1: 1005, 1006, 1015, the
/// client-only 1010, anything outside 1000-1014 and 3000-4999; see `CloseCode.isSendable`)
/// is sent as 1000. A reason that is not UTF-8 is left out.
pub fn close(conn: Conn, code: websocket.CloseCode, reason: []const u8) void {
    conn.session.requestClose(conn.generation, code, reason);
}

/// The subprotocol agreed in the handshake, if any (null once the connection is closed).
pub fn subprotocol(conn: Conn) ?[]const u8 {
    return conn.session.subprotocolFor(conn.generation);
}

/// The pointer given as `user_data` in the upgrade options (or set with `setUserData`); null
/// once the connection is closed.
pub fn userData(conn: Conn) ?*anyopaque {
    return conn.session.userDataFor(conn.generation);
}

/// Replaces the user data (ignored once the connection is closed).
pub fn setUserData(conn: Conn, data: ?*anyopaque) void {
    conn.session.setUserDataFor(conn.generation, data);
}

/// Whether two handles name the same connection.
pub fn eql(a: Conn, b: Conn) bool {
    return a.session == b.session and a.generation == b.generation;
}
