//! Compression on the fly (RFC 9110 §8.4.1, §12.5.3): choosing a content coding from
//! `Accept-Encoding`, and streaming encoders for zstd (RFC 8878), br (RFC 7932) and gzip
//! (RFC 1952) over the C libraries (`libzstd.so.1`, `libbrotlienc.so.1`, `libz.so.1`). And the
//! other way, for request bodies: `content_encoding` reads a body's `Content-Encoding` and
//! undoes it with `Decoder` (zstd, br, gzip, deflate over libzstd, libbrotlidec and zlib),
//! within a limit on the decoded size. Sans-I/O: bytes in, bytes out, into buffers the caller
//! owns.
const std = @import("std");

pub const negotiate = @import("compress/negotiate.zig");
pub const Coding = negotiate.Coding;
pub const Offered = negotiate.Offered;
pub const Choice = negotiate.Choice;
pub const Encoder = @import("compress/Encoder.zig");
pub const Decoder = @import("compress/Decoder.zig");
pub const content_encoding = @import("compress/content_encoding.zig");
pub const Policy = @import("compress/Policy.zig");

test {
    std.testing.refAllDecls(@This());
    _ = negotiate;
    _ = Encoder;
    _ = Decoder;
    _ = content_encoding;
    _ = @import("compress/Memory.zig");
    _ = Policy;
    _ = @import("compress/decode.zig");
}
