//! One streaming encoder for the content codings `zstd` (RFC 8878), `br` (RFC 7932) and
//! `gzip` (RFC 1952), over libzstd, libbrotlienc and zlib. Sans-I/O: each call takes input and
//! a caller's output buffer, writes at most `output.len` bytes, and says how much it consumed
//! and produced, so the caller loops without hidden buffers of its own.
//!
//!     var encoder: Encoder = undefined;
//!     try encoder.init(allocator, .{ .coding = .br, .level = 5 });
//!     defer encoder.deinit();
//!     while (input.len > 0) {          // for each piece of the body
//!         const p = try encoder.write(input, &out);
//!         send(out[0..p.produced]);
//!         input = input[p.consumed..];
//!     }
//!     while (true) {                   // the chunk (or SSE event) is decodable once sent
//!         const d = try encoder.flush(&out);
//!         send(out[0..d.produced]);
//!         if (d.done) break;
//!     }
//!     ... then `finish` the same way.
//!
//! Memory. The C libraries allocate their state through `init`'s allocator (callbacks that
//! the three libraries accept), never behind its back (br's one exception: see `init`), so a
//! fixed buffer bounds it and a leak-checking allocator checks `deinit`. The windows are
//! chosen for HTTP responses, most of which are far below 1 MiB: a larger window would cost
//! memory on every stream and gain nothing on them. What a stream holds at most, measured
//! by `zig build bench-compress` (docs/compression.md) on a 200 KiB page in 16 KiB writes:
//! - zstd: a window of 2^windowLog bytes plus match tables set by the level. windowLog 20
//!   (1 MiB) by default: 2.5 MiB at level 3. RFC 8878 §3.1.1.1.2 and RFC 9659 cap a window
//!   for HTTP at 8 MiB; `window_log` goes to 23 at most, levels 20..22 (which need more)
//!   are refused, and a test reads the window back from the frame header.
//! - br: a ring buffer of up to 2^lgwin bytes plus hash tables set by the quality. lgwin 20
//!   by default (brotli's own is 22, RFC 7932 allows 24): 4.4 MiB at quality 5, against
//!   10.4 MiB with lgwin 22; `window_log` goes to 22 at most.
//! - gzip: deflate's 32 KiB window (windowBits 15) doubled, plus memLevel 8's hash and
//!   pending buffers: 261 KiB whatever the level and input.
//! `compressAll` holds less: with the whole body in view, zstd and brotli size their tables
//! to it.
//!
//! The encoder must not move after `init`: zlib's stream and the allocation callbacks point
//! into it.
const Encoder = @This();

const std = @import("std");
const assert = std.debug.assert;
const c = @import("c.zig");
const Coding = @import("negotiate.zig").Coding;
const Memory = @import("Memory.zig");

coding: Coding,
phase: Phase,
/// Where the C state's allocations go (the callbacks' `opaque` points here).
memory: Memory,
native: Native,
/// Set by `init`; asserted, so a moved encoder fails loudly instead of corrupting zlib.
address: *const Encoder,

/// What `init` takes.
pub const Options = struct {
    coding: Coding,
    /// zstd 1..19, br 0..11, gzip 1..9 (`levels`); `default_levels` holds saker's choice.
    level: u8,
    /// log2 of the window in bytes: zstd 10..23, br 10..22, gzip 9..15. Null: 20 for zstd and
    /// br (1 MiB), 15 for gzip (its largest, 32 KiB). See the top of this file.
    window_log: ?u5 = null,
};

/// The range of `Options.level` for a coding, both ends included.
pub const LevelRange = struct { min: u8, max: u8 };

/// The levels each coding accepts. zstd's 20..22 ("ultra") are left out: they need windows
/// past the 8 MiB that HTTP clients decode; negative zstd levels and gzip's 0 (stored) are
/// left out as compression in name only.
pub fn levels(coding: Coding) LevelRange {
    return switch (coding) {
        .zstd => .{ .min = 1, .max = 19 },
        .br => .{ .min = c.BROTLI_MIN_QUALITY, .max = c.BROTLI_MAX_QUALITY },
        .gzip => .{ .min = 1, .max = 9 },
    };
}

/// The smallest window of `coding` that covers `len` bytes, or null when its default window
/// is no larger: a whole body needs no window beyond its own length, and a smaller one is
/// cheaper to set up (zlib's hash tables, zstd's and brotli's match finders).
pub fn windowLogFor(coding: Coding, len: usize) ?u5 {
    const range = windowLogs(coding);
    const fit: u5 = @intCast(@min(range.max, @max(range.min, std.math.log2_int_ceil(usize, @max(len, 1)))));
    return if (fit < defaultWindowLog(coding)) fit else null;
}

test windowLogFor {
    try std.testing.expectEqual(@as(?u5, 13), windowLogFor(.gzip, 8000));
    try std.testing.expectEqual(@as(?u5, 9), windowLogFor(.gzip, 10));
    try std.testing.expectEqual(@as(?u5, null), windowLogFor(.gzip, 1 << 20));
    try std.testing.expectEqual(@as(?u5, 10), windowLogFor(.zstd, 100));
    try std.testing.expectEqual(@as(?u5, null), windowLogFor(.br, 1 << 22));
}

/// The window range of a coding, both ends included (see `Options.window_log`).
pub fn windowLogs(coding: Coding) struct { min: u5, max: u5 } {
    return switch (coding) {
        .zstd => .{ .min = 10, .max = 23 },
        .br => .{ .min = c.BROTLI_MIN_WINDOW_BITS, .max = 22 },
        .gzip => .{ .min = 9, .max = 15 },
    };
}

/// Levels for responses made on the fly, chosen by measurement (docs/compression.md): for
/// each coding the last level before speed falls much faster than the ratio climbs; br 5 is
/// also the first quality that compresses better than gzip 6.
pub const default_levels: std.EnumArray(Coding, u8) = .init(.{ .zstd = 3, .br = 5, .gzip = 6 });

/// The least output space each call must be given. zlib needs more than 6 bytes to finish a
/// sync flush marker in one call (otherwise it writes the marker again).
pub const output_bytes_min = 16;

/// zlib's memLevel: 8 is its default; 9 doubles the hash table for a ratio gain under 1%.
const gzip_mem_level = 8;

const Phase = enum {
    /// Takes input.
    open,
    /// A flush has started and not completed: only `flush` may be called.
    flushing,
    /// A finish has started: only `finish` may be called.
    finishing,
    /// The stream is complete; only `deinit` remains.
    finished,
    /// A call failed (out of memory): only `deinit` remains.
    failed,
};

const Native = union(Coding) {
    zstd: *c.ZSTD_CCtx,
    br: *c.BrotliEncoderState,
    /// Inline: zlib keeps a pointer back to it.
    gzip: c.z_stream,
};

pub const InitError = error{
    /// `Options.level` is outside `levels(coding)`.
    LevelOutOfRange,
    /// `Options.window_log` is outside `windowLogs(coding)`.
    WindowOutOfRange,
    OutOfMemory,
};

/// The C libraries fail only when an allocation fails; every other failure is a misuse, a bug
/// of this file, and panics with the library's message.
pub const Error = error{OutOfMemory};

/// What `write` did.
pub const Progress = struct {
    /// Bytes of the input taken (the rest is given again in the next call).
    consumed: usize,
    /// Bytes written to the start of the output buffer.
    produced: usize,
};

/// What `flush` or `finish` did.
pub const Drain = struct {
    /// Bytes written to the start of the output buffer.
    produced: usize,
    /// True when the flush or finish is complete; otherwise call it again with fresh output.
    done: bool,
};

/// Sets up a stream. Asserts that `encoder` is not moved afterwards (see the top of this
/// file). The allocator holds the C libraries' state until `deinit`; zstd and brotli
/// allocate most of it on the first `write`, zlib all of it here. zstd and gzip report a
/// refused allocation as `error.OutOfMemory`. br cannot: libbrotlienc ends the process when
/// an allocation fails, so a block the allocator refuses comes from the C heap (malloc)
/// instead, counted in `stateBytes().c_heap_blocks`; size a bounded allocator for br from
/// the table in docs/compression.md.
pub fn init(encoder: *Encoder, allocator: std.mem.Allocator, options: Options) InitError!void {
    const range = levels(options.coding);
    if (options.level < range.min or options.level > range.max) return error.LevelOutOfRange;
    const window_log = options.window_log orelse defaultWindowLog(options.coding);
    const logs = windowLogs(options.coding);
    if (window_log < logs.min or window_log > logs.max) return error.WindowOutOfRange;
    encoder.* = .{
        .coding = options.coding,
        .phase = .open,
        .memory = .{ .allocator = allocator, .c_heap_fallback = options.coding == .br },
        .native = undefined,
        .address = encoder,
    };
    errdefer assert(encoder.memory.bytes == 0);
    encoder.native = switch (options.coding) {
        .zstd => .{ .zstd = try initZstd(&encoder.memory, options.level, window_log) },
        .br => .{ .br = try initBrotli(&encoder.memory, options.level, window_log) },
        .gzip => .{ .gzip = .{} },
    };
    if (options.coding == .gzip) try initGzip(&encoder.native.gzip, &encoder.memory, options.level, window_log);
}

fn defaultWindowLog(coding: Coding) u5 {
    return switch (coding) {
        .zstd, .br => 20,
        .gzip => 15,
    };
}

fn initZstd(memory: *Memory, level: u8, window_log: u5) InitError!*c.ZSTD_CCtx {
    const cctx = c.ZSTD_createCCtx_advanced(.{
        .customAlloc = Memory.allocSized,
        .customFree = Memory.free,
        .@"opaque" = memory,
    }) orelse return error.OutOfMemory;
    errdefer assert(c.ZSTD_isError(c.ZSTD_freeCCtx(cctx)) == 0);
    // Setting a parameter allocates nothing, and the values were checked by `init`.
    _ = zstdCheck(c.ZSTD_CCtx_setParameter(cctx, .compressionLevel, level), memory) catch unreachable;
    _ = zstdCheck(c.ZSTD_CCtx_setParameter(cctx, .windowLog, window_log), memory) catch unreachable;
    return cctx;
}

fn initBrotli(memory: *Memory, quality: u8, lgwin: u5) InitError!*c.BrotliEncoderState {
    const state = c.BrotliEncoderCreateInstance(Memory.allocSized, Memory.free, memory) orelse
        return error.OutOfMemory;
    // Setting a parameter fails only once the stream has started.
    assert(c.BrotliEncoderSetParameter(state, .quality, quality) != 0);
    assert(c.BrotliEncoderSetParameter(state, .lgwin, lgwin) != 0);
    return state;
}

fn initGzip(stream: *c.z_stream, memory: *Memory, level: u8, window_bits: u5) InitError!void {
    stream.* = .{ .zalloc = Memory.allocItems, .zfree = Memory.free, .@"opaque" = memory };
    const rc = c.deflateInit2_(
        stream,
        level,
        c.Z_DEFLATED,
        @as(c_int, window_bits) + c.gzip_window_bits_offset,
        // A smaller window gets a hash table to match (zlib's sizes: window 2^bits, hash
        // 2^(memLevel+7) entries): its setup is paid by every response.
        @min(gzip_mem_level, @max(1, @as(c_int, window_bits) - 7)),
        c.Z_DEFAULT_STRATEGY,
        c.ZLIB_VERSION,
        @sizeOf(c.z_stream),
    );
    switch (rc) {
        c.Z_OK => {},
        c.Z_MEM_ERROR => return error.OutOfMemory,
        // Parameters were checked above, and libz.so.1 is zlib 1.x.
        else => std.debug.panic("zlib: deflateInit2 returned {d}", .{rc}),
    }
}

/// Frees the C state. Asserts that every byte the libraries allocated came back.
pub fn deinit(encoder: *Encoder) void {
    assert(encoder.address == encoder);
    switch (encoder.native) {
        .zstd => |cctx| assert(c.ZSTD_isError(c.ZSTD_freeCCtx(cctx)) == 0),
        .br => |state| c.BrotliEncoderDestroyInstance(state),
        .gzip => |*stream| {
            // Z_DATA_ERROR: freed before the end of the stream, which is allowed.
            const rc = c.deflateEnd(stream);
            assert(rc == c.Z_OK or rc == c.Z_DATA_ERROR);
        },
    }
    assert(encoder.memory.bytes == 0);
    encoder.* = undefined;
}

/// Compresses from `input` into `output`. Asserts that no flush or finish is under way and
/// that `output.len >= output_bytes_min`. Each call consumes or produces at least one byte
/// while `input` is not empty; the libraries keep some input back until a flush.
pub fn write(encoder: *Encoder, input: []const u8, output: []u8) Error!Progress {
    assert(encoder.phase == .open);
    if (input.len == 0) return .{ .consumed = 0, .produced = 0 };
    const result = try encoder.step(.process, input, output);
    assert(result.consumed > 0 or result.produced > 0);
    return .{ .consumed = result.consumed, .produced = result.produced };
}

/// Writes out everything written so far, so that the bytes produced up to the end of the
/// flush decode to exactly the input so far (a streamed chunk or an SSE event is readable
/// on arrival). Call again with fresh output until `done`. Costs a few bytes per flush.
pub fn flush(encoder: *Encoder, output: []u8) Error!Drain {
    assert(encoder.phase == .open or encoder.phase == .flushing);
    encoder.phase = .flushing;
    const result = try encoder.step(.flush, "", output);
    if (result.done) encoder.phase = .open;
    return .{ .produced = result.produced, .done = result.done };
}

/// Ends the stream. Call again with fresh output until `done`; then only `deinit` remains.
pub fn finish(encoder: *Encoder, output: []u8) Error!Drain {
    assert(encoder.phase == .open or encoder.phase == .finishing);
    encoder.phase = .finishing;
    const result = try encoder.step(.finish, "", output);
    if (result.done) encoder.phase = .finished;
    return .{ .produced = result.produced, .done = result.done };
}

/// Bytes of C state the encoder holds now and the most it has held, and how many blocks br
/// took from the C heap because the allocator refused them (see `init`).
pub fn stateBytes(encoder: *const Encoder) struct { now: usize, peak: usize, c_heap_blocks: usize } {
    return .{ .now = encoder.memory.bytes, .peak = encoder.memory.bytes_peak, .c_heap_blocks = encoder.memory.fallbacks };
}

/// The most bytes `compressAll` can produce for `input_len` bytes of input. Asserts that the
/// bound fits a usize.
pub fn boundBytes(coding: Coding, input_len: usize) usize {
    return switch (coding) {
        .zstd => c.ZSTD_compressBound(input_len),
        // 0 when the size overflows.
        .br => nonZero(c.BrotliEncoderMaxCompressedSize(input_len)),
        // zlib's deflateBound for any windowBits and memLevel, with the gzip header and
        // trailer (18 bytes, no name or extra field).
        .gzip => input_len + ((input_len + 7) >> 3) + ((input_len + 63) >> 6) + 5 + 18,
    };
}

fn nonZero(n: usize) usize {
    assert(n > 0);
    return n;
}

/// Compresses a whole body in one stream, into `output`; returns the compressed bytes. With
/// the whole input at hand the libraries size their state to it (zstd shrinks its window to
/// the input), so this holds less memory than streaming. `output.len >= boundBytes(...)`
/// always suffices; a shorter output that turns out too small gives `error.NoSpaceLeft`.
pub fn compressAll(
    allocator: std.mem.Allocator,
    options: Options,
    input: []const u8,
    output: []u8,
) (InitError || Error || error{NoSpaceLeft})![]u8 {
    assert(output.len >= output_bytes_min);
    var encoder: Encoder = undefined;
    try encoder.init(allocator, options);
    defer encoder.deinit();
    if (options.coding == .br) {
        // A hint, not a promise: lets brotli pick smaller tables for small bodies.
        const hint: u32 = @intCast(@min(input.len, std.math.maxInt(u32)));
        assert(c.BrotliEncoderSetParameter(encoder.native.br, .size_hint, hint) != 0);
    }
    encoder.phase = .finishing;
    var consumed: usize = 0;
    var produced: usize = 0;
    while (true) {
        if (output.len - produced < output_bytes_min) return error.NoSpaceLeft;
        const result = try encoder.step(.finish, input[consumed..], output[produced..]);
        consumed += result.consumed;
        produced += result.produced;
        if (result.done) break;
    }
    assert(consumed == input.len);
    encoder.phase = .finished;
    return output[0..produced];
}

const Operation = enum { process, flush, finish };

const Step = struct { consumed: usize, produced: usize, done: bool };

/// One call into the library. `done`: for `flush` and `finish`, complete (with every byte of
/// input consumed); for `process`, always false.
fn step(encoder: *Encoder, operation: Operation, input: []const u8, output: []u8) Error!Step {
    assert(encoder.address == encoder);
    assert(output.len >= output_bytes_min);
    if (operation == .flush) assert(input.len == 0);
    encoder.memory.failed = false;
    const outcome: Error!Step = switch (encoder.native) {
        .zstd => |cctx| stepZstd(cctx, &encoder.memory, operation, input, output),
        .br => |state| stepBrotli(state, &encoder.memory, operation, input, output),
        .gzip => |*stream| stepGzip(stream, operation, input, output),
    };
    const result = outcome catch |err| {
        encoder.phase = .failed;
        return err;
    };
    assert(result.consumed <= input.len);
    assert(result.produced <= output.len);
    if (result.done) assert(result.consumed == input.len);
    return result;
}

fn stepZstd(cctx: *c.ZSTD_CCtx, memory: *Memory, operation: Operation, input: []const u8, output: []u8) Error!Step {
    var in: c.ZSTD_inBuffer = .{ .src = input.ptr, .size = input.len, .pos = 0 };
    var out: c.ZSTD_outBuffer = .{ .dst = output.ptr, .size = output.len, .pos = 0 };
    const directive: c.ZSTD_EndDirective = switch (operation) {
        .process => .e_continue,
        .flush => .e_flush,
        .finish => .e_end,
    };
    // For e_flush and e_end: the bytes left to write, 0 once complete.
    const left = try zstdCheck(c.ZSTD_compressStream2(cctx, &out, &in, directive), memory);
    return .{ .consumed = in.pos, .produced = out.pos, .done = operation != .process and left == 0 };
}

fn zstdCheck(code: usize, memory: *const Memory) Error!usize {
    if (c.ZSTD_isError(code) == 0) return code;
    if (c.ZSTD_getErrorCode(code) == c.ZSTD_error_memory_allocation) {
        assert(memory.failed);
        return error.OutOfMemory;
    }
    std.debug.panic("zstd: {s}", .{c.ZSTD_getErrorName(code)});
}

fn stepBrotli(state: *c.BrotliEncoderState, memory: *const Memory, operation: Operation, input: []const u8, output: []u8) Error!Step {
    var available_in = input.len;
    var next_in: ?[*]const u8 = input.ptr;
    var available_out = output.len;
    var next_out: ?[*]u8 = output.ptr;
    const op: c.BrotliEncoderOperation = switch (operation) {
        .process => .process,
        .flush => .flush,
        .finish => .finish,
    };
    if (c.BrotliEncoderCompressStream(state, op, &available_in, &next_in, &available_out, &next_out, null) == 0) {
        if (memory.failed) return error.OutOfMemory;
        @panic("brotli: BrotliEncoderCompressStream failed");
    }
    const done = switch (operation) {
        .process => false,
        .flush => available_in == 0 and c.BrotliEncoderHasMoreOutput(state) == 0,
        .finish => c.BrotliEncoderIsFinished(state) != 0,
    };
    return .{ .consumed = input.len - available_in, .produced = output.len - available_out, .done = done };
}

/// deflate allocates nothing after `deflateInit2`, so it cannot run out of memory here.
fn stepGzip(stream: *c.z_stream, operation: Operation, input: []const u8, output: []u8) Step {
    const in_len: c_uint = @intCast(@min(input.len, std.math.maxInt(c_uint)));
    const out_len: c_uint = @intCast(@min(output.len, std.math.maxInt(c_uint)));
    stream.next_in = input.ptr;
    stream.avail_in = in_len;
    stream.next_out = output.ptr;
    stream.avail_out = out_len;
    // Finishing with part of a larger input: Z_FINISH only once all of it is in view.
    const flush_mode: c_int = switch (operation) {
        .process => c.Z_NO_FLUSH,
        .flush => c.Z_SYNC_FLUSH,
        .finish => if (in_len == input.len) c.Z_FINISH else c.Z_NO_FLUSH,
    };
    const rc = c.deflate(stream, flush_mode);
    const consumed = in_len - stream.avail_in;
    const produced = out_len - stream.avail_out;
    const done = switch (rc) {
        // A flush is complete when deflate stops short of the end of the output.
        c.Z_OK => operation == .flush and stream.avail_out != 0,
        c.Z_STREAM_END => blk: {
            assert(flush_mode == c.Z_FINISH);
            break :blk true;
        },
        // No progress possible: a flush with nothing written since the last one.
        c.Z_BUF_ERROR => blk: {
            assert(operation == .flush and produced == 0);
            break :blk true;
        },
        else => std.debug.panic("zlib: deflate returned {d}", .{rc}),
    };
    return .{ .consumed = consumed, .produced = produced, .done = done };
}

const testing = std.testing;
const decode = @import("decode.zig");

/// Text with the repetition of a web page (words from a small vocabulary, markup) and a few
/// runs of random bytes that do not compress, from a fixed seed.
fn testInput(gpa: std.mem.Allocator, len: usize, seed: u64) ![]u8 {
    const words = [_][]const u8{ "<div class=\"item\">", "</div>\n", "price", "quantity", "{\"id\":", "saker", "the ", "of ", "and ", "HTTP ", "compression ", "\t", "1234", ", " };
    var prng: std.Random.DefaultPrng = .init(seed);
    const random = prng.random();
    const bytes = try gpa.alloc(u8, len);
    var i: usize = 0;
    while (i < len) {
        if (random.uintLessThan(u8, 50) == 0) {
            const run = @min(len - i, random.uintLessThan(usize, 300));
            random.bytes(bytes[i..][0..run]);
            i += run;
        } else {
            const word = words[random.uintLessThan(usize, words.len)];
            const n = @min(len - i, word.len);
            @memcpy(bytes[i..][0..n], word[0..n]);
            i += n;
        }
    }
    return bytes;
}

fn expectDecodes(coding: Coding, encoded: []const u8, expected: []const u8, complete: bool) !void {
    const decoded = try decode.decode(testing.allocator, coding, encoded);
    defer testing.allocator.free(decoded.bytes);
    try testing.expectEqualSlices(u8, expected, decoded.bytes);
    try testing.expectEqual(complete, decoded.complete);
}

test "Encoder: compressAll round-trips at every level of every coding" {
    const gpa = testing.allocator;
    const input = try testInput(gpa, 48 * 1024, 1);
    defer gpa.free(input);
    for (std.enums.values(Coding)) |coding| {
        const output = try gpa.alloc(u8, boundBytes(coding, input.len));
        defer gpa.free(output);
        const range = levels(coding);
        for (range.min..range.max + 1) |level| {
            errdefer std.debug.print("{t} level {d}\n", .{ coding, level });
            const encoded = try compressAll(gpa, .{ .coding = coding, .level = @intCast(level) }, input, output);
            try testing.expect(encoded.len < input.len);
            try expectDecodes(coding, encoded, input, true);
        }
    }
}

test "Encoder: empty and one-byte bodies round-trip" {
    const gpa = testing.allocator;
    for (std.enums.values(Coding)) |coding| {
        var output: [64]u8 = undefined;
        for ([_][]const u8{ "", "x" }) |input| {
            const encoded = try compressAll(gpa, .{ .coding = coding, .level = default_levels.get(coding) }, input, &output);
            try expectDecodes(coding, encoded, input, true);
        }
    }
}

test "Encoder: after each flush the bytes so far decode to exactly the input so far" {
    const gpa = testing.allocator;
    const input = try testInput(gpa, 40 * 1024, 2);
    defer gpa.free(input);
    var prng: std.Random.DefaultPrng = .init(3);
    const random = prng.random();
    for (std.enums.values(Coding)) |coding| {
        for ([_]u8{ levels(coding).min, default_levels.get(coding), levels(coding).max }) |level| {
            errdefer std.debug.print("{t} level {d}\n", .{ coding, level });
            var encoder: Encoder = undefined;
            try encoder.init(gpa, .{ .coding = coding, .level = level });
            defer encoder.deinit();
            var encoded: std.ArrayList(u8) = .empty;
            defer encoded.deinit(gpa);
            var out_storage: [256]u8 = undefined;
            var written: usize = 0;
            while (written < input.len) {
                // A chunk of 0..4 KiB, written through output buffers of 16..256 bytes.
                const chunk_end = @min(input.len, written + random.uintAtMost(usize, 4096));
                while (written < chunk_end) {
                    const out = out_storage[0..random.intRangeAtMost(usize, output_bytes_min, out_storage.len)];
                    const progress = try encoder.write(input[written..chunk_end], out);
                    try encoded.appendSlice(gpa, out[0..progress.produced]);
                    written += progress.consumed;
                }
                while (true) {
                    const out = out_storage[0..random.intRangeAtMost(usize, output_bytes_min, out_storage.len)];
                    const drain = try encoder.flush(out);
                    try encoded.appendSlice(gpa, out[0..drain.produced]);
                    if (drain.done) break;
                }
                try expectDecodes(coding, encoded.items, input[0..written], false);
            }
            while (true) {
                const drain = try encoder.finish(out_storage[0..output_bytes_min]);
                try encoded.appendSlice(gpa, out_storage[0..drain.produced]);
                if (drain.done) break;
            }
            try expectDecodes(coding, encoded.items, input, true);
            try testing.expect(encoder.stateBytes().peak > 0);
        }
    }
}

test "Encoder: a flush with nothing new written, and a finish right after a flush" {
    const gpa = testing.allocator;
    for (std.enums.values(Coding)) |coding| {
        var encoder: Encoder = undefined;
        try encoder.init(gpa, .{ .coding = coding, .level = default_levels.get(coding) });
        defer encoder.deinit();
        var encoded: [256]u8 = undefined;
        var len: usize = 0;
        const progress = try encoder.write("hello, hello, hello", encoded[len..]);
        try testing.expectEqual(19, progress.consumed);
        len += progress.produced;
        for (0..3) |_| {
            const drain = try encoder.flush(encoded[len..]);
            try testing.expect(drain.done);
            len += drain.produced;
            try expectDecodes(coding, encoded[0..len], "hello, hello, hello", false);
        }
        const drain = try encoder.finish(encoded[len..]);
        try testing.expect(drain.done);
        len += drain.produced;
        try expectDecodes(coding, encoded[0..len], "hello, hello, hello", true);
    }
}

test "Encoder: levels and windows outside their ranges are refused" {
    var encoder: Encoder = undefined;
    const gpa = testing.allocator;
    const Case = struct { Options, InitError };
    for ([_]Case{
        .{ .{ .coding = .zstd, .level = 0 }, error.LevelOutOfRange },
        .{ .{ .coding = .zstd, .level = 20 }, error.LevelOutOfRange },
        .{ .{ .coding = .br, .level = 12 }, error.LevelOutOfRange },
        .{ .{ .coding = .gzip, .level = 0 }, error.LevelOutOfRange },
        .{ .{ .coding = .gzip, .level = 10 }, error.LevelOutOfRange },
        .{ .{ .coding = .zstd, .level = 3, .window_log = 24 }, error.WindowOutOfRange },
        .{ .{ .coding = .zstd, .level = 3, .window_log = 9 }, error.WindowOutOfRange },
        .{ .{ .coding = .br, .level = 5, .window_log = 23 }, error.WindowOutOfRange },
        .{ .{ .coding = .gzip, .level = 6, .window_log = 16 }, error.WindowOutOfRange },
        .{ .{ .coding = .gzip, .level = 6, .window_log = 8 }, error.WindowOutOfRange },
    }) |case| {
        try testing.expectError(case[1], encoder.init(gpa, case[0]));
    }
    // The ends of each range are accepted.
    for (std.enums.values(Coding)) |coding| {
        for ([_]u8{ levels(coding).min, levels(coding).max }) |level| {
            for ([_]u5{ windowLogs(coding).min, windowLogs(coding).max }) |window_log| {
                try encoder.init(gpa, .{ .coding = coding, .level = level, .window_log = window_log });
                encoder.deinit();
            }
        }
    }
}

test "Encoder: a small window round-trips and holds less memory" {
    const gpa = testing.allocator;
    const input = try testInput(gpa, 256 * 1024, 4);
    defer gpa.free(input);
    var out: [4096]u8 = undefined;
    for (std.enums.values(Coding)) |coding| {
        var peaks: [2]usize = undefined;
        for ([_]?u5{ null, windowLogs(coding).min }, &peaks) |window_log, *peak| {
            var encoder: Encoder = undefined;
            try encoder.init(gpa, .{ .coding = coding, .level = default_levels.get(coding), .window_log = window_log });
            defer encoder.deinit();
            var encoded: std.ArrayList(u8) = .empty;
            defer encoded.deinit(gpa);
            var rest: []const u8 = input;
            while (rest.len > 0) {
                const progress = try encoder.write(rest, &out);
                try encoded.appendSlice(gpa, out[0..progress.produced]);
                rest = rest[progress.consumed..];
            }
            while (true) {
                const drain = try encoder.finish(&out);
                try encoded.appendSlice(gpa, out[0..drain.produced]);
                if (drain.done) break;
            }
            try expectDecodes(coding, encoded.items, input, true);
            peak.* = encoder.stateBytes().peak;
        }
        errdefer std.debug.print("{t}: default window {d} bytes, smallest {d}\n", .{ coding, peaks[0], peaks[1] });
        try testing.expect(peaks[1] < peaks[0]);
    }
}

test "Encoder: a streamed zstd frame with the largest window asks for 8 MiB at most" {
    // Frame header (RFC 8878 §3.1.1.1): magic, descriptor, then the window descriptor unless
    // the frame is a single segment (which a stream of unknown size never is).
    const gpa = testing.allocator;
    for (levels(.zstd).min..levels(.zstd).max + 1) |level| {
        var encoder: Encoder = undefined;
        try encoder.init(gpa, .{ .coding = .zstd, .level = @intCast(level), .window_log = windowLogs(.zstd).max });
        defer encoder.deinit();
        var out: [256]u8 = undefined;
        const progress = try encoder.write("a streamed response", &out);
        var len = progress.produced;
        while (true) {
            const drain = try encoder.flush(out[len..]);
            len += drain.produced;
            if (drain.done) break;
        }
        try testing.expectEqual(0xFD2FB528, std.mem.readInt(u32, out[0..4], .little));
        const single_segment = out[4] & 0x20 != 0;
        try testing.expect(!single_segment);
        const exponent: u6 = @intCast(out[5] >> 3);
        const base = @as(u64, 1) << (10 + exponent);
        const window = base + (base / 8) * (out[5] & 7);
        errdefer std.debug.print("level {d}: window {d}\n", .{ level, window });
        try testing.expect(window <= decode.zstd_window_bytes_max);
    }
}

test "Encoder: running out of memory anywhere is reported, and frees everything" {
    const input = try testInput(testing.allocator, 64 * 1024, 5);
    defer testing.allocator.free(input);
    const output = try testing.allocator.alloc(u8, boundBytes(.zstd, input.len) + boundBytes(.gzip, input.len));
    defer testing.allocator.free(output);
    for (std.enums.values(Coding)) |coding| {
        const Run = struct {
            fn run(gpa: std.mem.Allocator, options: Options, in: []const u8, out: []u8) !void {
                _ = try compressAll(gpa, options, in, out);
            }
        };
        errdefer std.debug.print("{t}\n", .{coding});
        const options: Options = .{ .coding = coding, .level = default_levels.get(coding) };
        if (coding == .br) continue; // below: br never fails
        try testing.checkAllAllocationFailures(testing.allocator, Run.run, .{ options, input, output });
    }
}

test "Encoder: br takes from the C heap what the allocator refuses, and returns it" {
    const input = try testInput(testing.allocator, 64 * 1024, 6);
    defer testing.allocator.free(input);
    const output = try testing.allocator.alloc(u8, boundBytes(.br, input.len));
    defer testing.allocator.free(output);
    for ([_]usize{ 0, 1, 2, 5, 10 }) |fail_index| {
        var failing: std.testing.FailingAllocator = .init(testing.allocator, .{ .fail_index = fail_index });
        var encoder: Encoder = undefined;
        try encoder.init(failing.allocator(), .{ .coding = .br, .level = default_levels.get(.br) });
        defer encoder.deinit();
        var rest: []const u8 = input;
        var produced: usize = 0;
        while (rest.len > 0) {
            const progress = try encoder.write(rest, output[produced..]);
            rest = rest[progress.consumed..];
            produced += progress.produced;
        }
        while (true) {
            const drain = try encoder.finish(output[produced..]);
            produced += drain.produced;
            if (drain.done) break;
        }
        try testing.expect(encoder.stateBytes().c_heap_blocks > 0);
        try expectDecodes(.br, output[0..produced], input, true);
    }
}
