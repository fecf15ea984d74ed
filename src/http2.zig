//! HTTP/2 (RFC 9113) and its header compression, HPACK (RFC 7541): the wire format a session
//! will speak, sans-I/O. `frame` reads and writes frames and checks the rules each frame
//! meets on its own; `hpack` decodes and encodes header blocks with bounded tables; `huffman`
//! is HPACK's string code.
const std = @import("std");

pub const frame = @import("http2/frame.zig");
pub const hpack = @import("http2/hpack.zig");
pub const huffman = @import("http2/huffman.zig");

test {
    std.testing.refAllDecls(@This());
}
