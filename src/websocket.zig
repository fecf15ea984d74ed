//! WebSockets (RFC 6455) with permessage-deflate (RFC 7692), built into the server. A handler
//! accepts an upgrade with `res.upgradeWebSocket(req, options)` and declares a `WebSocket`
//! namespace with its callbacks; see docs/websocket.md. The protocol code (frames, UTF-8,
//! handshake, compression) does no I/O: `Session` turns received bytes into callbacks and
//! queued messages into frames in the connection's send batch, and every engine drives it
//! through the same `Connection` contract as HTTP/1.
const std = @import("std");

pub const frame = @import("websocket/frame.zig");
pub const handshake = @import("websocket/handshake.zig");
pub const Utf8Validator = @import("websocket/Utf8Validator.zig");
pub const Deflate = @import("websocket/Deflate.zig");
pub const Session = @import("websocket/Session.zig");
pub const Conn = @import("websocket/Conn.zig");
pub const Outbox = @import("websocket/Outbox.zig");
pub const SessionPool = @import("websocket/SessionPool.zig");

/// A whole message as the handler receives it (fragments already joined, decompressed, and
/// text already checked to be UTF-8).
pub const Message = struct {
    kind: Kind,
    /// Valid until the callback returns.
    data: []const u8,

    /// Text (UTF-8) or binary.
    pub const Kind = enum { text, binary };
};

/// Close status codes (RFC 6455 §7.4.1, IANA registry). Any other value in 3000-4999 may be
/// used by applications.
pub const CloseCode = enum(u16) {
    /// The purpose of the connection is fulfilled.
    normal = 1000,
    /// The server is shutting down (or the client leaving the page).
    going_away = 1001,
    /// A frame broke the protocol: unmasked, reserved bits or opcodes, bad control frames.
    protocol_error = 1002,
    /// A kind of data the endpoint cannot accept.
    unsupported_data = 1003,
    /// Reported to `onClose` when the close frame had no status code; never sent.
    no_status = 1005,
    /// Reported to `onClose` when the connection ended without a close frame; never sent.
    abnormal = 1006,
    /// A text message (or close reason) that is not UTF-8, or undecodable compressed data.
    invalid_payload = 1007,
    /// Policy: here, a client that reads too slowly (send queue full).
    policy_violation = 1008,
    /// A message longer than `websocket_message_bytes_max`.
    message_too_big = 1009,
    /// The client expected an extension the server did not agree to.
    mandatory_extension = 1010,
    /// The server failed: a callback returned an error, memory ran out, or no pong came
    /// within `websocket_pong_timeout_ms`.
    internal_error = 1011,
    service_restart = 1012,
    try_again_later = 1013,
    bad_gateway = 1014,
    _,

    /// Whether a peer may send this code in a close frame (§7.4).
    pub fn isValidOnWire(code: u16) bool {
        return switch (code) {
            1000...1003, 1007...1014, 3000...4999 => true,
            else => false,
        };
    }

    /// Whether this server may put the code in a close frame it starts: one valid on the wire
    /// except 1010, which only a client sends (§7.4.1).
    pub fn isSendable(code: u16) bool {
        return isValidOnWire(code) and code != @backingInt(CloseCode.mandatory_extension);
    }
};

/// How a handler accepts an upgrade: `res.upgradeWebSocket(req, options)`.
pub const UpgradeOptions = struct {
    /// Subprotocols this endpoint speaks, most preferred first. The chosen one (if the client
    /// offered any of them) is echoed in the handshake and available as `Conn.subprotocol()`.
    /// The strings must outlive the connection (use literals).
    subprotocols: []const []const u8 = &.{},
    /// Agree to permessage-deflate when the client offers it (and `Config.websocket_deflate`).
    compression: bool = true,
    /// Available to the callbacks as `Conn.userData()`.
    user_data: ?*anyopaque = null,
};

/// The handler's callbacks, type-erased; made by `Server(Handler)` from `Handler.WebSocket`.
pub const Callbacks = struct {
    onOpen: ?*const fn (context: *anyopaque, conn: Conn) anyerror!void,
    onMessage: *const fn (context: *anyopaque, conn: Conn, message: Message) anyerror!void,
    onClose: ?*const fn (context: *anyopaque, conn: Conn, code: CloseCode, reason: []const u8) void,
    onPing: ?*const fn (context: *anyopaque, conn: Conn, payload: []const u8) void,
    onPong: ?*const fn (context: *anyopaque, conn: Conn, payload: []const u8) void,
};

test {
    std.testing.refAllDecls(@This());
    _ = Outbox;
}

test "CloseCode: codes a peer may send" {
    for ([_]u16{ 1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999 }) |code|
        try std.testing.expect(CloseCode.isValidOnWire(code));
    for ([_]u16{ 0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000 }) |code| {
        try std.testing.expect(!CloseCode.isValidOnWire(code));
        try std.testing.expect(!CloseCode.isSendable(code));
    }
    try std.testing.expect(!CloseCode.isSendable(1010));
    try std.testing.expect(CloseCode.isSendable(1000) and CloseCode.isSendable(4999));
}
