//! HTTP/1.0 and HTTP/1.1 (RFC 9112): the protocol session a connection runs (`Session`), and
//! the wire format under it: request parsing, chunked bodies and response heads. No sockets;
//! the session's time is the worker's clock, passed in.
const std = @import("std");

pub const Session = @import("http1/Session.zig");
pub const RequestParser = @import("http1/RequestParser.zig");
pub const ChunkedDecoder = @import("http1/ChunkedDecoder.zig");
pub const ResponseHead = @import("http1/ResponseHead.zig");
pub const scan = @import("http1/scan.zig");
pub const HeadBlocks = @import("http1/HeadBlocks.zig");
pub const status_line = @import("http1/status_line.zig");
pub const copy = @import("http1/copy.zig");

test {
    std.testing.refAllDecls(@This());
}
