//! The plaintext transport: the identity. The protocol's receive buffer is the socket's, its
//! iovecs and file ranges go to the socket as they are, so plaintext costs no copy and no
//! step (every call inlines to nothing).
const contract = @import("../engine_contract.zig");

const Plain = @This();

/// What the socket must do: what the protocol wants.
pub inline fn next(_: Plain, wanted: contract.Next) contract.Next {
    return wanted;
}

/// Where the socket's bytes go: straight into the protocol's buffer.
pub inline fn recvBuffer(_: Plain, protocol_buffer: []u8) []u8 {
    return protocol_buffer;
}

/// The socket delivered `n` bytes (0: end of stream): all of them are the protocol's.
pub inline fn received(_: Plain, n: usize) ?usize {
    return n;
}

/// The socket took `n` bytes: all of them were the protocol's.
pub inline fn sent(_: Plain, n: usize) ?usize {
    return n;
}
