//! Decoders for the tests: Zig's own zstd and gzip decoders (`std.compress`), which share no
//! code with libzstd and zlib, and libbrotlidec. saker never decodes a response; these check
//! that what `Encoder` writes is what a client reads, including a stream cut short after a
//! flush (decoded as far as its complete blocks go).
const std = @import("std");
const assert = std.debug.assert;
const c = @import("c.zig");
const Coding = @import("negotiate.zig").Coding;

/// What a stream decodes to.
pub const Decoded = struct {
    /// Owned by the caller (the allocator given to `decode`).
    bytes: []u8,
    /// The stream ended (a zstd frame's last block, brotli's last meta-block, gzip's trailer)
    /// and nothing follows it; false for a stream that stops between blocks.
    complete: bool,
};

pub const Error = error{ Corrupt, TrailingBytes, OutOfMemory };

/// The window RFC 8878 §3.1.1.1.2 and RFC 9659 let an HTTP client insist on: a zstd frame
/// that needs more does not decode here.
pub const zstd_window_bytes_max = 8 * 1024 * 1024;

/// Decodes `encoded` as far as it goes. A stream cut anywhere but between blocks, or
/// corrupt, is an error.
pub fn decode(gpa: std.mem.Allocator, coding: Coding, encoded: []const u8) Error!Decoded {
    return switch (coding) {
        .zstd => decodeZstd(gpa, encoded),
        .gzip => decodeGzip(gpa, encoded),
        .br => decodeBrotli(gpa, encoded),
    };
}

fn decodeZstd(gpa: std.mem.Allocator, encoded: []const u8) Error!Decoded {
    var input: std.Io.Reader = .fixed(encoded);
    var decompress: std.compress.zstd.Decompress = .init(&input, &.{}, .{ .window_len = zstd_window_bytes_max });
    // Streaming straight into the output: the writer's buffer holds the window.
    var output = try std.Io.Writer.Allocating.initCapacity(gpa, zstd_window_bytes_max + std.compress.zstd.block_size_max);
    defer output.deinit();
    const complete = blk: {
        _ = decompress.reader.streamRemaining(&output.writer) catch |err| switch (err) {
            error.WriteFailed => return error.OutOfMemory,
            error.ReadFailed => switch (decompress.err.?) {
                error.EndOfStream => break :blk false,
                else => return error.Corrupt,
            },
        };
        break :blk true;
    };
    return .{ .bytes = try output.toOwnedSlice(), .complete = complete };
}

fn decodeGzip(gpa: std.mem.Allocator, encoded: []const u8) Error!Decoded {
    var input: std.Io.Reader = .fixed(encoded);
    var decompress: std.compress.flate.Decompress = .init(&input, .gzip, &.{});
    var output = try std.Io.Writer.Allocating.initCapacity(gpa, std.compress.flate.max_window_len);
    defer output.deinit();
    const complete = blk: {
        _ = decompress.reader.streamRemaining(&output.writer) catch |err| switch (err) {
            error.WriteFailed => return error.OutOfMemory,
            error.ReadFailed => switch (decompress.err.?) {
                error.EndOfStream => break :blk false,
                else => return error.Corrupt,
            },
        };
        break :blk true;
    };
    // One gzip member is one response: bytes after its trailer are not part of it.
    if (complete and input.bufferedLen() != 0) return error.TrailingBytes;
    return .{ .bytes = try output.toOwnedSlice(), .complete = complete };
}

fn decodeBrotli(gpa: std.mem.Allocator, encoded: []const u8) Error!Decoded {
    const state = c.BrotliDecoderCreateInstance(null, null, null) orelse return error.OutOfMemory;
    defer c.BrotliDecoderDestroyInstance(state);
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(gpa);
    var available_in = encoded.len;
    var next_in: ?[*]const u8 = encoded.ptr;
    while (true) {
        try output.ensureUnusedCapacity(gpa, 64 * 1024);
        const unused = output.unusedCapacitySlice();
        var available_out = unused.len;
        var next_out: ?[*]u8 = unused.ptr;
        const result = c.BrotliDecoderDecompressStream(state, &available_in, &next_in, &available_out, &next_out, null);
        output.items.len += unused.len - available_out;
        switch (result) {
            .success => {
                if (available_in != 0) return error.TrailingBytes;
                return .{ .bytes = try output.toOwnedSlice(gpa), .complete = true };
            },
            .needs_more_input => {
                assert(available_in == 0);
                return .{ .bytes = try output.toOwnedSlice(gpa), .complete = false };
            },
            .needs_more_output => continue,
            .@"error" => return error.Corrupt,
        }
    }
}
