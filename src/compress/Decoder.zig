//! One streaming decoder for the content codings a request body may arrive in (RFC 9110
//! §8.4.1): `gzip` (RFC 1952; `x-gzip` is the same, §8.4.1.3), `deflate` (the zlib format,
//! RFC 1950, §8.4.1.2), `br` (RFC 7932) and `zstd` (RFC 8878), over zlib, libbrotlidec and
//! libzstd. Sans-I/O like `Encoder`: each `write` takes input and a caller's output buffer and
//! says how much it consumed and produced. `decodeAll` decodes a whole body.
//!
//! Bounds. Decoded data is untrusted: a few KiB can ask for gigabytes (a decompression bomb)
//! or for a window of hundreds of MiB. Both are bounded, and going past either is
//! `error.TooLarge`, found while decoding, never after the memory was taken:
//! - Output: `Options.decoded_bytes_max`, counted across `write`s; the bytes live in the
//!   caller's buffers, so the caller's buffer sizes bound them.
//! - State (`stateBytesMax`), held through `Memory`, which refuses a block beyond the bound:
//!   - zstd: a window of at most 8 MiB (`ZSTD_d_windowLogMax` 23: RFC 9659 has HTTP decoders
//!     take windows up to 8 MiB and encoders use no more), refused from the frame header
//!     before anything is allocated for it, plus buffers and tables: about 8.5 MiB at most.
//!   - br: the format allows 16 MiB windows and libbrotlidec has no parameter to refuse one,
//!     but it grows its ring buffer with the output (from what a meta-block header
//!     declares), so the ring a stream needs is no larger than its decoded size, rounded up
//!     to a power of two: `stateBytesMax` holds the ring to that for `decoded_bytes_max`
//!     (plus 4 MiB for the largest Huffman tables a stream can declare), and a stream that
//!     asks for more would have decoded past the limit anyway.
//!   - gzip and deflate: zlib's 32 KiB window and 7 KiB of state, whatever the data.
//!
//! What may follow the end of a stream: another gzip member (RFC 1952 §2.2) or zstd frame
//! (RFC 8878 §3: a zstd stream is any number of frames, skippable ones included), decoded
//! as one body; anything after a br or zlib stream is `error.Corrupt`.
//!
//! The decoder must not move after `init`: zlib's stream and the allocation callbacks point
//! into it.
const Decoder = @This();

const std = @import("std");
const assert = std.debug.assert;
const c = @import("c.zig");
const Memory = @import("Memory.zig");

coding: Coding,
/// Where the C state's allocations go (the callbacks' `opaque` points here).
memory: Memory,
native: Native,
/// `Options.decoded_bytes_max`.
decoded_bytes_max: usize,
/// Bytes decoded since `init` or `reset`.
produced_total: usize = 0,
/// The input so far ends where a stream (a gzip member, a zstd frame) ends, and every byte it
/// decodes to has been given out.
at_end: bool = false,
/// A call failed: only `deinit` remains.
failed: bool = false,
/// Set by `init`; asserted, so a moved decoder fails loudly instead of corrupting zlib.
address: *const Decoder,

/// A content coding saker decodes.
pub const Coding = enum {
    gzip,
    deflate,
    br,
    zstd,

    /// The coding a `Content-Encoding` member names (case-insensitive, RFC 9110 §8.4.1), or
    /// null for one saker does not decode.
    pub fn parse(token_text: []const u8) ?Coding {
        const names = [_]struct { []const u8, Coding }{
            .{ "gzip", .gzip },
            .{ "x-gzip", .gzip },
            .{ "deflate", .deflate },
            .{ "br", .br },
            .{ "zstd", .zstd },
        };
        for (names) |name| if (std.ascii.eqlIgnoreCase(token_text, name[0])) return name[1];
        return null;
    }

    /// The coding's name in `Content-Encoding`.
    pub fn token(coding: Coding) []const u8 {
        return @tagName(coding);
    }
};

/// What `init` takes.
pub const Options = struct {
    coding: Coding,
    /// Most bytes the stream may decode to, across every `write` (`error.TooLarge` beyond).
    decoded_bytes_max: usize,
};

/// log2 of the largest zstd window a frame may ask for (8 MiB, RFC 9659).
pub const zstd_window_log_max = 23;
/// The largest window of a br stream (RFC 7932 §9.1: WBITS up to 24).
const br_window_log_max = 24;
/// Room for the Huffman tables a br meta-block may declare (at most 256 trees for each of the
/// three alphabets, sized for their largest tables by libbrotlidec: about 2.7 MiB), its
/// context maps and the decoder's own state.
const br_tables_bytes_max = 4 * 1024 * 1024;
/// zlib's inflate state (about 7 KiB) and its 32 KiB window, with the headers `Memory` adds.
const zlib_state_bytes_max = 64 * 1024;
/// zstd's context (tables and literal buffer), its input buffer of one block and the two
/// blocks of output it keeps past the window.
const zstd_buffers_bytes_max = 1024 * 1024;

/// The most bytes of C state a decoder holds at once (see the top of this file).
pub fn stateBytesMax(coding: Coding, decoded_bytes_max: usize) usize {
    return switch (coding) {
        .gzip, .deflate => zlib_state_bytes_max,
        .zstd => (1 << zstd_window_log_max) + zstd_buffers_bytes_max,
        .br => blk: {
            // The ring a stream within the limit needs, and the one it replaces while growing
            // (libbrotlidec holds both while it copies).
            const wanted = @min(@max(decoded_bytes_max, 1024), 1 << br_window_log_max);
            const ring = std.math.ceilPowerOfTwoAssert(usize, wanted);
            break :blk ring + ring / 2 + br_tables_bytes_max;
        },
    };
}

pub const InitError = error{OutOfMemory};

/// Ways decoding fails. Bad data is an error, never a panic; a failure of the C libraries
/// that only misuse can cause panics with the library's message.
pub const Error = error{
    /// Not data in the coding: a bad header, a corrupt block, a checksum that does not match,
    /// a preset dictionary saker does not have, or bytes after the end of a br or zlib stream.
    Corrupt,
    /// The data decodes to more than `Options.decoded_bytes_max` bytes, or needs a larger
    /// window than the bounds at the top of this file allow.
    TooLarge,
    /// The allocator refused the library's state.
    OutOfMemory,
};

/// What `write` did.
pub const Progress = struct {
    /// Bytes of the input taken (the rest is given again in the next call).
    consumed: usize,
    /// Bytes written to the start of the output buffer.
    produced: usize,
};

const Native = union(enum) {
    /// No state: a `reset` of br could not make its new one.
    none,
    zstd: *c.ZSTD_DCtx,
    br: *c.BrotliDecoderState,
    /// Inline: zlib keeps a pointer back to it. gzip and deflate.
    zlib: c.z_stream,
};

/// Sets up a stream; the C state comes from `allocator` (bounded by `stateBytesMax`) until
/// `deinit`. Asserts that `decoder` is not moved afterwards.
pub fn init(decoder: *Decoder, allocator: std.mem.Allocator, options: Options) InitError!void {
    decoder.* = .{
        .coding = options.coding,
        .memory = .{ .allocator = allocator, .bytes_max = stateBytesMax(options.coding, options.decoded_bytes_max) },
        .native = undefined,
        .decoded_bytes_max = options.decoded_bytes_max,
        .address = decoder,
    };
    errdefer assert(decoder.memory.bytes == 0);
    decoder.native = switch (options.coding) {
        .zstd => .{ .zstd = try initZstd(&decoder.memory) },
        .br => .{ .br = try initBrotli(&decoder.memory) },
        .gzip, .deflate => .{ .zlib = .{} },
    };
    switch (options.coding) {
        .gzip => try initZlib(&decoder.native.zlib, &decoder.memory, 15 + c.gzip_window_bits_offset),
        .deflate => try initZlib(&decoder.native.zlib, &decoder.memory, 15),
        .zstd, .br => {},
    }
}

fn initZstd(memory: *Memory) InitError!*c.ZSTD_DCtx {
    const dctx = c.ZSTD_createDCtx_advanced(.{
        .customAlloc = Memory.allocSized,
        .customFree = Memory.free,
        .@"opaque" = memory,
    }) orelse return error.OutOfMemory;
    // Setting a parameter allocates nothing, and the value is in zstd's range.
    assert(c.ZSTD_isError(c.ZSTD_DCtx_setParameter(dctx, .windowLogMax, zstd_window_log_max)) == 0);
    return dctx;
}

fn initBrotli(memory: *Memory) InitError!*c.BrotliDecoderState {
    // libbrotlidec reports a refused allocation as a decoding error (unlike the encoder, it
    // never exits), so `Memory` needs no C heap fallback here.
    return c.BrotliDecoderCreateInstance(Memory.allocSized, Memory.free, memory) orelse
        error.OutOfMemory;
}

fn initZlib(stream: *c.z_stream, memory: *Memory, window_bits: c_int) InitError!void {
    stream.* = .{ .zalloc = Memory.allocItems, .zfree = Memory.free, .@"opaque" = memory };
    const rc = c.inflateInit2_(stream, window_bits, c.ZLIB_VERSION, @sizeOf(c.z_stream));
    switch (rc) {
        c.Z_OK => {},
        c.Z_MEM_ERROR => return error.OutOfMemory,
        // The window bits are zlib's own, and libz.so.1 is zlib 1.x.
        else => std.debug.panic("zlib: inflateInit2 returned {d}", .{rc}),
    }
}

/// Frees the C state. Asserts that every byte the libraries allocated came back.
pub fn deinit(decoder: *Decoder) void {
    assert(decoder.address == decoder);
    switch (decoder.native) {
        .none => {},
        .zstd => |dctx| assert(c.ZSTD_isError(c.ZSTD_freeDCtx(dctx)) == 0),
        .br => |state| c.BrotliDecoderDestroyInstance(state),
        .zlib => |*stream| assert(c.inflateEnd(stream) == c.Z_OK),
    }
    assert(decoder.memory.bytes == 0);
    decoder.* = undefined;
}

/// Starts over: the next `write` begins a new stream, with the count of decoded bytes at 0.
/// zstd and zlib keep the state they allocated; br makes its state afresh.
pub fn reset(decoder: *Decoder) InitError!void {
    assert(decoder.address == decoder);
    decoder.produced_total = 0;
    decoder.at_end = false;
    decoder.failed = false;
    switch (decoder.native) {
        .none => unreachable, // failed: only `deinit` remains
        .zstd => |dctx| assert(c.ZSTD_isError(c.ZSTD_DCtx_reset(dctx, .session_only)) == 0),
        .br => |state| {
            c.BrotliDecoderDestroyInstance(state);
            decoder.native = .none;
            const fresh = initBrotli(&decoder.memory) catch |err| {
                decoder.failed = true;
                return err;
            };
            decoder.native = .{ .br = fresh };
        },
        .zlib => |*stream| assert(c.inflateReset(stream) == c.Z_OK),
    }
}

/// Decodes from `input` into `output` (not empty). Each call consumes or produces at least
/// one byte while there is input, unless the stream needs more input than there is; with no
/// input it gives out what the library still holds. After an error only `deinit` remains.
pub fn write(decoder: *Decoder, input: []const u8, output: []u8) Error!Progress {
    assert(decoder.address == decoder);
    assert(!decoder.failed);
    assert(output.len > 0);
    if (decoder.at_end) {
        // The stream ended with everything given out: what follows is a new one, or nothing.
        if (input.len == 0) return .{ .consumed = 0, .produced = 0 };
        switch (decoder.coding) {
            .gzip => assert(c.inflateReset(&decoder.native.zlib) == c.Z_OK),
            .zstd => {}, // libzstd starts the next frame by itself
            .deflate, .br => return decoder.fail(error.Corrupt),
        }
        decoder.at_end = false;
    }
    decoder.memory.failed = false;
    decoder.memory.refused_over_max = false;
    const outcome: Error!Progress = switch (decoder.native) {
        .none => unreachable, // failed: only `deinit` remains
        .zstd => |dctx| decoder.writeZstd(dctx, input, output),
        .br => |state| decoder.writeBrotli(state, input, output),
        .zlib => |*stream| decoder.writeZlib(stream, input, output),
    };
    const progress = outcome catch |err| return decoder.fail(err);
    assert(progress.consumed <= input.len);
    assert(progress.produced <= output.len);
    decoder.produced_total += progress.produced;
    if (decoder.produced_total > decoder.decoded_bytes_max) return decoder.fail(error.TooLarge);
    return progress;
}

/// Whether the input so far is whole: it ends where a stream ends (for gzip and zstd, where a
/// member or frame ends), and everything it decodes to has been given out. Input that stops
/// anywhere else was cut short.
pub fn finished(decoder: *const Decoder) bool {
    assert(!decoder.failed);
    return decoder.at_end;
}

/// Bytes of C state the decoder holds now and the most it has held.
pub fn stateBytes(decoder: *const Decoder) struct { now: usize, peak: usize } {
    return .{ .now = decoder.memory.bytes, .peak = decoder.memory.bytes_peak };
}

fn fail(decoder: *Decoder, err: Error) Error {
    decoder.failed = true;
    return err;
}

/// The error for a failure the library reports: memory refused by the bound or by the
/// allocator, else bad data.
fn memoryOr(decoder: *const Decoder, otherwise: Error) Error {
    if (decoder.memory.refused_over_max) return error.TooLarge;
    if (decoder.memory.failed) return error.OutOfMemory;
    return otherwise;
}

fn writeZstd(decoder: *Decoder, dctx: *c.ZSTD_DCtx, input: []const u8, output: []u8) Error!Progress {
    var in: c.ZSTD_inBuffer = .{ .src = input.ptr, .size = input.len, .pos = 0 };
    var out: c.ZSTD_outBuffer = .{ .dst = output.ptr, .size = output.len, .pos = 0 };
    const code = c.ZSTD_decompressStream(dctx, &out, &in);
    if (c.ZSTD_isError(code) != 0) {
        return switch (c.ZSTD_getErrorCode(code)) {
            c.ZSTD_error_frameParameter_windowTooLarge => error.TooLarge,
            c.ZSTD_error_memory_allocation => decoder.memoryOr(error.OutOfMemory),
            // Everything else zstd reports about a frame: a bad magic number or header, a
            // corrupt block, a wrong checksum, a dictionary saker does not have.
            else => error.Corrupt,
        };
    }
    // 0: a frame is complete and every byte of it flushed (libzstd stops at a frame's end).
    decoder.at_end = code == 0;
    return .{ .consumed = in.pos, .produced = out.pos };
}

fn writeBrotli(decoder: *Decoder, state: *c.BrotliDecoderState, input: []const u8, output: []u8) Error!Progress {
    var available_in = input.len;
    var next_in: ?[*]const u8 = input.ptr;
    var available_out = output.len;
    var next_out: ?[*]u8 = output.ptr;
    const result = c.BrotliDecoderDecompressStream(state, &available_in, &next_in, &available_out, &next_out, null);
    switch (result) {
        .success => {
            // A br stream is one stream: nothing may follow it.
            if (available_in != 0) return error.Corrupt;
            decoder.at_end = true;
        },
        .needs_more_input => assert(available_in == 0),
        .needs_more_output => {},
        .@"error" => return decoder.memoryOr(error.Corrupt),
    }
    return .{ .consumed = input.len - available_in, .produced = output.len - available_out };
}

fn writeZlib(decoder: *Decoder, stream: *c.z_stream, input: []const u8, output: []u8) Error!Progress {
    const in_len: c_uint = @intCast(@min(input.len, std.math.maxInt(c_uint)));
    const out_len: c_uint = @intCast(@min(output.len, std.math.maxInt(c_uint)));
    stream.next_in = input.ptr;
    stream.avail_in = in_len;
    stream.next_out = output.ptr;
    stream.avail_out = out_len;
    const rc = c.inflate(stream, c.Z_NO_FLUSH);
    switch (rc) {
        c.Z_OK => {},
        c.Z_STREAM_END => decoder.at_end = true,
        // No progress was possible: the stream wants input that is not there yet.
        c.Z_BUF_ERROR => {},
        // A preset dictionary (RFC 1950 FDICT) is not something an HTTP body can use.
        c.Z_NEED_DICT, c.Z_DATA_ERROR => return error.Corrupt,
        c.Z_MEM_ERROR => return decoder.memoryOr(error.OutOfMemory),
        else => std.debug.panic("zlib: inflate returned {d}", .{rc}),
    }
    return .{ .consumed = in_len - stream.avail_in, .produced = out_len - stream.avail_out };
}

/// Where `decodeAll` takes memory from.
pub const Allocators = struct {
    /// The decoded bytes, exactly as many as there are; the caller owns them.
    output: std.mem.Allocator,
    /// The C state and the scratch buffer, all freed before `decodeAll` returns.
    scratch: std.mem.Allocator,
};

/// Most bytes of the scratch buffer `decodeAll` measures through.
pub const scratch_bytes_max = 64 * 1024;

/// Errors of `decodeAll`.
pub const WholeError = Error || error{
    /// The data stops before its stream does (or between a gzip member's or zstd frame's
    /// start and end).
    Truncated,
};

/// Decodes `coded`, a whole body in `options.coding`, into memory from `allocators.output`
/// of exactly its decoded length (the caller owns it; empty for an empty `coded`). The
/// decoded length is measured first, through a scratch buffer of at most
/// `scratch_bytes_max`: a body that decodes past `options.decoded_bytes_max` (a bomb) fails
/// with `error.TooLarge` having taken only the decoder's state and the scratch, and no output
/// memory at all. A body that fits the scratch is copied from it; a longer one is decoded a
/// second time, straight into its own memory, so no buffer ever grows and is copied: the
/// output memory is the decoded length, however the bytes came.
pub fn decodeAll(allocators: Allocators, options: Options, coded: []const u8) WholeError![]u8 {
    if (coded.len == 0) return allocators.output.alloc(u8, 0);
    var decoder: Decoder = undefined;
    try decoder.init(allocators.scratch, options);
    defer decoder.deinit();
    const scratch = try allocators.scratch.alloc(u8, @min(scratch_bytes_max, options.decoded_bytes_max +| 1));
    defer allocators.scratch.free(scratch);
    // Past its end the scratch is written over: only the count matters then.
    const total = try decoder.decodeInto(coded, scratch, scratch);
    assert(total <= options.decoded_bytes_max);
    if (total <= scratch.len) return allocators.output.dupe(u8, scratch[0..total]);
    try decoder.reset();
    const output = try allocators.output.alloc(u8, total);
    errdefer allocators.output.free(output);
    // The same input decodes to the same bytes: the second pass fits `output` exactly, and
    // can fail only for memory.
    var spare: [64]u8 = undefined;
    const again = decoder.decodeInto(coded, output, &spare) catch |err| {
        assert(err == error.OutOfMemory);
        return err;
    };
    assert(again == total);
    return output;
}

/// Feeds all of `coded` through the decoder, writing into `keep` while it has room and into
/// `spare` after; returns how many bytes it decoded to. The stream must end with the input.
fn decodeInto(decoder: *Decoder, coded: []const u8, keep: []u8, spare: []u8) WholeError!usize {
    assert(spare.len > 0);
    var rest = coded;
    var total: usize = 0;
    while (true) {
        const window = if (total < keep.len) keep[total..] else spare;
        const progress = try decoder.write(rest, window);
        rest = rest[progress.consumed..];
        total += progress.produced;
        // The library gives out what it holds until the window has room to spare.
        if (rest.len == 0 and progress.produced < window.len) break;
        // Not expected of the libraries with input and room; data that made one stall is
        // not data this decoder can finish.
        if (progress.consumed == 0 and progress.produced == 0) return decoder.fail(error.Corrupt);
    }
    if (!decoder.finished()) return error.Truncated;
    return total;
}

const testing = std.testing;
const Encoder = @import("Encoder.zig");

/// `input` encoded whole by saker's encoder (libzstd, libbrotlienc, zlib): gzip, br or zstd.
fn encodeTest(gpa: std.mem.Allocator, coding: Coding, input: []const u8) ![]u8 {
    const encoding: @import("negotiate.zig").Coding = switch (coding) {
        .gzip => .gzip,
        .br => .br,
        .zstd => .zstd,
        .deflate => unreachable, // `codedTest`
    };
    const output = try gpa.alloc(u8, @max(Encoder.output_bytes_min, Encoder.boundBytes(encoding, input.len)));
    defer gpa.free(output);
    const options: Encoder.Options = .{ .coding = encoding, .level = Encoder.default_levels.get(encoding) };
    return gpa.dupe(u8, try Encoder.compressAll(gpa, options, input, output));
}

/// `input` in the zlib format (or gzip), made by Zig's own deflate, which shares no code with
/// zlib. Slow in debug builds: for small inputs.
fn flateTest(gpa: std.mem.Allocator, container: std.compress.flate.Container, input: []const u8) ![]u8 {
    var out: std.Io.Writer.Allocating = try .initCapacity(gpa, 4096);
    defer out.deinit();
    const window = try gpa.alloc(u8, std.compress.flate.max_window_len);
    defer gpa.free(window);
    var compress = try std.compress.flate.Compress.init(&out.writer, window, container, .default);
    try compress.writer.writeAll(input);
    try compress.finish();
    return out.toOwnedSlice();
}

/// `input` in the zlib format, made by zlib: the deflate data of saker's gzip encoder (after
/// its fixed 10-byte header, before its 8-byte trailer) in a zlib wrapper (RFC 1950 §2.2).
fn zlibTest(gpa: std.mem.Allocator, input: []const u8) ![]u8 {
    const gzip = try encodeTest(gpa, .gzip, input);
    defer gpa.free(gzip);
    assert(gzip[3] == 0); // no name, comment or extra field: the header is 10 bytes
    const out = try gpa.alloc(u8, 2 + (gzip.len - 18) + 4);
    out[0..2].* = .{ 0x78, 0x9c };
    @memcpy(out[2..][0 .. gzip.len - 18], gzip[10 .. gzip.len - 8]);
    std.mem.writeInt(u32, out[out.len - 4 ..][0..4], std.hash.Adler32.hash(input), .big);
    return out;
}

/// `input` in `coding`: deflate by Zig's deflate up to 1 MiB (an encoder that shares no code
/// with zlib), by zlib beyond; the others by saker's encoder, which the encoder's tests check
/// against decoders that share no code with the libraries.
fn codedTest(gpa: std.mem.Allocator, coding: Coding, input: []const u8) ![]u8 {
    return switch (coding) {
        .deflate => if (input.len <= 1 << 20) flateTest(gpa, .zlib, input) else zlibTest(gpa, input),
        .gzip, .br, .zstd => encodeTest(gpa, coding, input),
    };
}

/// Text that compresses like a JSON API body, from a fixed seed.
fn textTest(gpa: std.mem.Allocator, len: usize, seed: u64) ![]u8 {
    const words = [_][]const u8{ "{\"id\":", "\"name\":\"", "saker", "\",", "true", "null", "}, ", "[", "]", "1234", "\n" };
    var prng: std.Random.DefaultPrng = .init(seed);
    const random = prng.random();
    const bytes = try gpa.alloc(u8, len);
    var i: usize = 0;
    while (i < len) {
        if (random.uintLessThan(u8, 64) == 0) {
            // Now and then a few random bytes, so that no two bodies decode alike.
            const run = @min(len - i, random.uintLessThan(usize, 16));
            random.bytes(bytes[i..][0..run]);
            i += run;
            continue;
        }
        const word = words[random.uintLessThan(usize, words.len)];
        const n = @min(len - i, word.len);
        @memcpy(bytes[i..][0..n], word[0..n]);
        i += n;
    }
    return bytes;
}

fn decodeAllTest(coding: Coding, coded: []const u8, decoded_bytes_max: usize) WholeError![]u8 {
    const allocators: Allocators = .{ .output = testing.allocator, .scratch = testing.allocator };
    return decodeAll(allocators, .{ .coding = coding, .decoded_bytes_max = decoded_bytes_max }, coded);
}

/// An allocator that counts what it holds, and the most it held.
const PeakAllocator = struct {
    child: std.mem.Allocator,
    held: usize = 0,
    peak: usize = 0,

    fn allocator(peak: *PeakAllocator) std.mem.Allocator {
        return .{ .ptr = peak, .vtable = &.{ .alloc = alloc, .resize = resize, .remap = remap, .free = free } };
    }

    fn alloc(context: *anyopaque, len: usize, alignment: std.mem.Alignment, ret_addr: usize) ?[*]u8 {
        const peak: *PeakAllocator = @ptrCast(@alignCast(context));
        const bytes = peak.child.rawAlloc(len, alignment, ret_addr) orelse return null;
        peak.held += len;
        peak.peak = @max(peak.peak, peak.held);
        return bytes;
    }

    fn resize(context: *anyopaque, memory: []u8, alignment: std.mem.Alignment, new_len: usize, ret_addr: usize) bool {
        _ = .{ context, memory, alignment, new_len, ret_addr };
        return false;
    }

    fn remap(context: *anyopaque, memory: []u8, alignment: std.mem.Alignment, new_len: usize, ret_addr: usize) ?[*]u8 {
        _ = .{ context, memory, alignment, new_len, ret_addr };
        return null;
    }

    fn free(context: *anyopaque, memory: []u8, alignment: std.mem.Alignment, ret_addr: usize) void {
        const peak: *PeakAllocator = @ptrCast(@alignCast(context));
        peak.child.rawFree(memory, alignment, ret_addr);
        peak.held -= memory.len;
    }
};

test "Decoder.Coding: the tokens of RFC 9110 §8.4.1, case-insensitive" {
    try testing.expectEqual(Coding.gzip, Coding.parse("gzip").?);
    try testing.expectEqual(Coding.gzip, Coding.parse("X-GZIP").?);
    try testing.expectEqual(Coding.deflate, Coding.parse("Deflate").?);
    try testing.expectEqual(Coding.br, Coding.parse("BR").?);
    try testing.expectEqual(Coding.zstd, Coding.parse("zstd").?);
    for ([_][]const u8{ "", "identity", "compress", "x-compress", "gzip ", "gzi", "brotli", "*" }) |other|
        try testing.expectEqual(@as(?Coding, null), Coding.parse(other));
}

test "Decoder: decodeAll round-trips every coding, small and past the scratch" {
    const gpa = testing.allocator;
    for ([_]usize{ 1, 1000, scratch_bytes_max, scratch_bytes_max + 1, 300 * 1024 }) |len| {
        const input = try textTest(gpa, len, len);
        defer gpa.free(input);
        for (std.enums.values(Coding)) |coding| {
            errdefer std.debug.print("{t}, {d} bytes\n", .{ coding, len });
            const coded = try codedTest(gpa, coding, input);
            defer gpa.free(coded);
            const decoded = try decodeAllTest(coding, coded, 1 << 20);
            defer gpa.free(decoded);
            try testing.expectEqualSlices(u8, input, decoded);
        }
    }
    // Zig's gzip too, and zlib's zlib format.
    const input = try textTest(gpa, 100 * 1024, 5);
    defer gpa.free(input);
    for ([_][]u8{ try flateTest(gpa, .gzip, input), try zlibTest(gpa, input) }, [_]Coding{ .gzip, .deflate }) |coded, coding| {
        defer gpa.free(coded);
        const decoded = try decodeAllTest(coding, coded, 1 << 20);
        defer gpa.free(decoded);
        try testing.expectEqualSlices(u8, input, decoded);
    }
}

test "Decoder: Python's gzip, zlib, brotli and zstandard bodies decode" {
    // Made by Python 3.11: gzip.compress(b"hello, saker\n", mtime=0), zlib.compress(...),
    // brotli.compress(...) (brotli 1.0.9), zstandard.ZstdCompressor().compress(...) (0.20:
    // the frame says its content size) and the same through compressobj() (a streamed frame
    // that does not).
    const cases = [_]struct { Coding, []const u8 }{
        .{ .gzip, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xd7\x51\x28\x4e\xcc\x4e\x2d\xe2\x02\x00\x69\x1e\xdd\xee\x0d\x00\x00\x00" },
        .{ .deflate, "\x78\x9c\xcb\x48\xcd\xc9\xc9\xd7\x51\x28\x4e\xcc\x4e\x2d\xe2\x02\x00\x21\x74\x04\x81" },
        .{ .br, "\x0b\x06\x80\x68\x65\x6c\x6c\x6f\x2c\x20\x73\x61\x6b\x65\x72\x0a\x03" },
        .{ .zstd, "\x28\xb5\x2f\xfd\x20\x0d\x69\x00\x00\x68\x65\x6c\x6c\x6f\x2c\x20\x73\x61\x6b\x65\x72\x0a" },
        .{ .zstd, "\x28\xb5\x2f\xfd\x00\x58\x69\x00\x00\x68\x65\x6c\x6c\x6f\x2c\x20\x73\x61\x6b\x65\x72\x0a" },
    };
    for (cases) |case| {
        errdefer std.debug.print("{t}: {x}\n", .{ case[0], case[1] });
        const decoded = try decodeAllTest(case[0], case[1], 100);
        defer testing.allocator.free(decoded);
        try testing.expectEqualStrings("hello, saker\n", decoded);
        // One byte less decoded is too large.
        try testing.expectError(error.TooLarge, decodeAllTest(case[0], case[1], 12));
    }
}

test "Decoder: the limit holds exactly at the decoded length, whole and streamed" {
    const gpa = testing.allocator;
    for ([_]usize{ 100, scratch_bytes_max, 200 * 1024 }) |len| {
        const input = try textTest(gpa, len, 7);
        defer gpa.free(input);
        for (std.enums.values(Coding)) |coding| {
            errdefer std.debug.print("{t}, {d} bytes\n", .{ coding, len });
            const coded = try codedTest(gpa, coding, input);
            defer gpa.free(coded);
            const decoded = try decodeAllTest(coding, coded, len);
            defer gpa.free(decoded);
            try testing.expectEqualSlices(u8, input, decoded);
            try testing.expectError(error.TooLarge, decodeAllTest(coding, coded, len - 1));
            // Streamed through a small buffer: the same line.
            for ([_]usize{ len, len - 1 }) |limit| {
                var decoder: Decoder = undefined;
                try decoder.init(gpa, .{ .coding = coding, .decoded_bytes_max = limit });
                defer decoder.deinit();
                var out: [1000]u8 = undefined;
                const outcome = decoder.decodeInto(coded, &.{}, &out);
                if (limit == len) try testing.expectEqual(len, try outcome) else try testing.expectError(error.TooLarge, outcome);
            }
        }
    }
}

test "Decoder: a bomb is refused as it decodes, holding no more than the scratch and the state" {
    const gpa = testing.allocator;
    // 16 MiB of zeros, coded to a few KiB.
    const zeros = try gpa.alloc(u8, 16 * 1024 * 1024);
    defer gpa.free(zeros);
    @memset(zeros, 0);
    const limit = 8 * 1024 * 1024;
    for (std.enums.values(Coding)) |coding| {
        errdefer std.debug.print("{t}\n", .{coding});
        const coded = try codedTest(gpa, coding, zeros);
        defer gpa.free(coded);
        try testing.expect(coded.len < 32 * 1024);
        // The output allocator refuses everything: TooLarge, not OutOfMemory, says it was
        // never asked.
        var scratch: PeakAllocator = .{ .child = gpa };
        const allocators: Allocators = .{ .output = std.testing.failing_allocator, .scratch = scratch.allocator() };
        try testing.expectError(error.TooLarge, decodeAll(allocators, .{ .coding = coding, .decoded_bytes_max = limit }, coded));
        errdefer std.debug.print("peak {d} bytes\n", .{scratch.peak});
        try testing.expect(scratch.peak <= scratch_bytes_max + stateBytesMax(coding, limit));
        try testing.expectEqual(0, scratch.held);
        // Just past the bomb's size it decodes, into exactly its size.
        var output: PeakAllocator = .{ .child = gpa };
        const decoded = try decodeAll(.{ .output = output.allocator(), .scratch = gpa }, .{ .coding = coding, .decoded_bytes_max = zeros.len }, coded);
        defer output.allocator().free(decoded);
        try testing.expectEqual(zeros.len, output.peak);
        try testing.expect(std.mem.allEqual(u8, decoded, 0));
    }
}

test "Decoder: corrupt and cut data are errors, and bytes after a br or zlib stream too" {
    const gpa = testing.allocator;
    const input = try textTest(gpa, 20_000, 9);
    defer gpa.free(input);
    for (std.enums.values(Coding)) |coding| {
        errdefer std.debug.print("{t}\n", .{coding});
        const coded = try codedTest(gpa, coding, input);
        defer gpa.free(coded);
        // Proper prefixes are cut short (or, for some, already wrong), never whole.
        var cut: usize = 1;
        while (cut < coded.len) : (cut += @max(1, coded.len / 97)) {
            errdefer std.debug.print("cut at {d} of {d}\n", .{ cut, coded.len });
            if (decodeAllTest(coding, coded[0..cut], 1 << 20)) |decoded| {
                gpa.free(decoded);
                return error.TestUnexpectedResult;
            } else |err| try testing.expect(err == error.Truncated or err == error.Corrupt);
        }
        try testing.expectError(error.Truncated, decodeAllTest(coding, coded[0 .. coded.len - 1], 1 << 20));
        // A byte changed in the middle: a checksum or the structure catches it (a zstd frame
        // from the encoder has no checksum; its blocks catch most changes, not all).
        const changed = try gpa.dupe(u8, coded);
        defer gpa.free(changed);
        changed[changed.len / 2] ^= 0x55;
        if (decodeAllTest(coding, changed, 1 << 20)) |decoded| {
            defer gpa.free(decoded);
            try testing.expect(coding == .zstd);
            try testing.expect(!std.mem.eql(u8, decoded, input));
        } else |err| try testing.expect(err == error.Corrupt or err == error.Truncated or err == error.TooLarge);
        // Text is not data in any of the codings (br has no magic number: it may read as the
        // start of a stream that never ends).
        if (decodeAllTest(coding, "this is not compressed at all, not even a little", 1 << 20)) |decoded| {
            gpa.free(decoded);
            return error.TestUnexpectedResult;
        } else |err| try testing.expect(err == error.Corrupt or (coding == .br and err == error.Truncated));
        // A stream with a byte after it: a br or zlib stream allows nothing; after a gzip
        // member or zstd frame the start of a magic number starts another, cut short, and
        // other bytes are no member or frame.
        const Trailing = struct { []const u8, WholeError };
        const cases: []const Trailing = switch (coding) {
            .br, .deflate => &.{ .{ "\x1f", error.Corrupt }, .{ "\x28\xb5", error.Corrupt } },
            .gzip => &.{ .{ "\x1f", error.Truncated }, .{ "\x28\xb5", error.Corrupt } },
            .zstd => &.{ .{ "\x1f", error.Corrupt }, .{ "\x28", error.Truncated } },
        };
        for (cases) |case| {
            const trailing = try std.mem.concat(gpa, u8, &.{ coded, case[0] });
            defer gpa.free(trailing);
            try testing.expectError(case[1], decodeAllTest(coding, trailing, 1 << 20));
        }
    }
}

test "Decoder: gzip members and zstd frames follow one another; a zstd window past 8 MiB is refused" {
    const gpa = testing.allocator;
    for ([_]Coding{ .gzip, .zstd }) |coding| {
        const one = try codedTest(gpa, coding, "first member, ");
        defer gpa.free(one);
        const two = try codedTest(gpa, coding, "second member");
        defer gpa.free(two);
        const both = try std.mem.concat(gpa, u8, &.{ one, two });
        defer gpa.free(both);
        const decoded = try decodeAllTest(coding, both, 100);
        defer gpa.free(decoded);
        try testing.expectEqualStrings("first member, second member", decoded);
    }
    // A zstd frame (RFC 8878 §3.1.1): magic, a descriptor of 0 (no content size, not a single
    // segment, no checksum), a window descriptor, then one empty raw block that is the last.
    // Exponent 13 is a window of 2^(10+13) = 8 MiB: taken. Exponent 14, 16 MiB: refused.
    const empty = try decodeAllTest(.zstd, "\x28\xb5\x2f\xfd\x00\x68\x01\x00\x00", 1 << 30);
    defer gpa.free(empty);
    try testing.expectEqual(0, empty.len);
    try testing.expectError(error.TooLarge, decodeAllTest(.zstd, "\x28\xb5\x2f\xfd\x00\x70\x01\x00\x00", 1 << 30));
}

test "Decoder: running out of memory anywhere is reported, and frees everything" {
    const gpa = testing.allocator;
    const input = try textTest(gpa, 100 * 1024, 11);
    defer gpa.free(input);
    for (std.enums.values(Coding)) |coding| {
        errdefer std.debug.print("{t}\n", .{coding});
        const coded = try codedTest(gpa, coding, input);
        defer gpa.free(coded);
        const Run = struct {
            fn run(allocator: std.mem.Allocator, run_coding: Coding, data: []const u8, expected: []const u8) !void {
                const options: Options = .{ .coding = run_coding, .decoded_bytes_max = 1 << 20 };
                const decoded = try decodeAll(.{ .output = allocator, .scratch = allocator }, options, data);
                defer allocator.free(decoded);
                try testing.expectEqualSlices(u8, expected, decoded);
            }
        };
        try testing.checkAllAllocationFailures(gpa, Run.run, .{ coding, coded, input });
    }
}

test "Decoder: the state stays within stateBytesMax for every coding" {
    const gpa = testing.allocator;
    const input = try textTest(gpa, 2 * 1024 * 1024, 13);
    defer gpa.free(input);
    for (std.enums.values(Coding)) |coding| {
        const coded = try codedTest(gpa, coding, input);
        defer gpa.free(coded);
        var decoder: Decoder = undefined;
        try decoder.init(gpa, .{ .coding = coding, .decoded_bytes_max = input.len });
        defer decoder.deinit();
        var out: [16 * 1024]u8 = undefined;
        try testing.expectEqual(input.len, try decoder.decodeInto(coded, &.{}, &out));
        errdefer std.debug.print("{t}: peak {d} of {d}\n", .{ coding, decoder.stateBytes().peak, stateBytesMax(coding, input.len) });
        try testing.expect(decoder.stateBytes().peak > 0);
        try testing.expect(decoder.stateBytes().peak <= stateBytesMax(coding, input.len));
    }
}

test "Decoder: a br ring larger than the decoded limit could need is refused before it is taken" {
    // RFC 7932 §9.1-9.2, bits from the lowest: WBITS 24 (1, then 111), ISLAST 0, MNIBBLES 6
    // (01), MLEN-1 = 2^24-1 (24 ones), ISUNCOMPRESSED 1: a 16 MiB raw meta-block, of which
    // three bytes come.
    const header = "\xcf\xff\xff\xff" ++ "abc";
    try testing.expectError(error.TooLarge, decodeAllTest(.br, header, 1 << 20));
    // With room for it the ring is taken, and the body is cut short.
    var decoder: Decoder = undefined;
    try decoder.init(testing.allocator, .{ .coding = .br, .decoded_bytes_max = 1 << 24 });
    defer decoder.deinit();
    var out: [64]u8 = undefined;
    try testing.expectError(error.Truncated, decoder.decodeInto(header, &.{}, &out));
    try testing.expect(decoder.stateBytes().peak > 1 << 24);
}

test "Decoder: streams with the encoder's largest windows decode within stateBytesMax" {
    const gpa = testing.allocator;
    const negotiate = @import("negotiate.zig");
    const input = try textTest(gpa, 9 * 1024 * 1024, 17);
    defer gpa.free(input);
    for ([_]negotiate.Coding{ .zstd, .br }) |encoding| {
        // Streamed, so the window is not shrunk to the input: zstd's 8 MiB, br's 4 MiB.
        var encoder: Encoder = undefined;
        const window_log = Encoder.windowLogs(encoding).max;
        try encoder.init(gpa, .{ .coding = encoding, .level = Encoder.default_levels.get(encoding), .window_log = window_log });
        defer encoder.deinit();
        var coded: std.ArrayList(u8) = .empty;
        defer coded.deinit(gpa);
        var out: [64 * 1024]u8 = undefined;
        var rest: []const u8 = input;
        while (rest.len > 0) {
            const progress = try encoder.write(rest, &out);
            try coded.appendSlice(gpa, out[0..progress.produced]);
            rest = rest[progress.consumed..];
        }
        while (true) {
            const drain = try encoder.finish(&out);
            try coded.appendSlice(gpa, out[0..drain.produced]);
            if (drain.done) break;
        }
        const coding: Coding = if (encoding == .zstd) .zstd else .br;
        var decoder: Decoder = undefined;
        try decoder.init(gpa, .{ .coding = coding, .decoded_bytes_max = input.len });
        defer decoder.deinit();
        try testing.expectEqual(input.len, try decoder.decodeInto(coded.items, &.{}, &out));
        const peak = decoder.stateBytes().peak;
        errdefer std.debug.print("{t}: peak {d} of {d}\n", .{ coding, peak, stateBytesMax(coding, input.len) });
        try testing.expect(peak > @as(usize, 1) << window_log);
        try testing.expect(peak <= stateBytesMax(coding, input.len));
    }
}
