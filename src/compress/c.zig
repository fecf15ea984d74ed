//! The part of the C APIs of libzstd (1.5), libbrotlienc/libbrotlidec (1.0) and zlib (1.2)
//! that saker uses, declared by hand so that building needs only the runtime libraries
//! (`libzstd.so.1`, `libbrotlienc.so.1`, `libbrotlidec.so.1`, `libz.so.1`) and no `-dev`
//! headers, as for OpenSSL (`tls/openssl.zig`). Each declaration follows the library's header
//! of the same version (`zstd.h`, `brotli/encode.h`, `brotli/decode.h`, `zlib.h`); the
//! constants are those headers' values, which each library keeps stable across its ABI
//! (`.so.1`). The decoders undo a request body's `Content-Encoding` (`Decoder.zig`).

// zstd (zstd.h, zstd_errors.h).

pub const ZSTD_CCtx = opaque {};

pub const ZSTD_inBuffer = extern struct {
    src: ?*const anyopaque,
    size: usize,
    pos: usize,
};

pub const ZSTD_outBuffer = extern struct {
    dst: ?*anyopaque,
    size: usize,
    pos: usize,
};

/// `ZSTD_cParameter`: only the values saker sets.
pub const ZSTD_cParameter = enum(c_int) {
    compressionLevel = 100,
    windowLog = 101,
    checksumFlag = 201,
};

/// `ZSTD_EndDirective`.
pub const ZSTD_EndDirective = enum(c_int) {
    e_continue = 0,
    e_flush = 1,
    e_end = 2,
};

/// `ZSTD_ErrorCode` values below 100 are stable since zstd 1.3.1 (`zstd_errors.h`).
pub const ZSTD_error_memory_allocation: c_int = 64;
pub const ZSTD_error_frameParameter_windowTooLarge: c_int = 16;

pub const ZSTD_allocFunction = fn (state: ?*anyopaque, size: usize) callconv(.c) ?*anyopaque;
pub const ZSTD_freeFunction = fn (state: ?*anyopaque, address: ?*anyopaque) callconv(.c) void;

/// `ZSTD_customMem`, passed by value. Its layout has not changed since zstd 1.0; the
/// function that takes it (`ZSTD_createCCtx_advanced`) is in the "static linking only" part
/// of `zstd.h`, but libzstd.so.1 exports it and it has kept this signature since 1.0.
pub const ZSTD_customMem = extern struct {
    customAlloc: ?*const ZSTD_allocFunction,
    customFree: ?*const ZSTD_freeFunction,
    @"opaque": ?*anyopaque,
};

pub extern fn ZSTD_versionNumber() c_uint;
pub extern fn ZSTD_createCCtx_advanced(custom_mem: ZSTD_customMem) ?*ZSTD_CCtx;
pub extern fn ZSTD_freeCCtx(cctx: ?*ZSTD_CCtx) usize;
pub extern fn ZSTD_CCtx_setParameter(cctx: *ZSTD_CCtx, param: ZSTD_cParameter, value: c_int) usize;
pub extern fn ZSTD_compressStream2(cctx: *ZSTD_CCtx, output: *ZSTD_outBuffer, input: *ZSTD_inBuffer, end_op: ZSTD_EndDirective) usize;
pub extern fn ZSTD_compressBound(src_size: usize) usize;
pub extern fn ZSTD_isError(code: usize) c_uint;
pub extern fn ZSTD_getErrorCode(code: usize) c_int;
pub extern fn ZSTD_getErrorName(code: usize) [*:0]const u8;

pub const ZSTD_DCtx = opaque {};

/// `ZSTD_dParameter`: only the value saker sets.
pub const ZSTD_dParameter = enum(c_int) {
    /// log2 of the largest window a frame may ask for; a frame that asks for more fails with
    /// `frameParameter_windowTooLarge` before anything is allocated for it.
    windowLogMax = 100,
};

/// `ZSTD_ResetDirective`.
pub const ZSTD_ResetDirective = enum(c_int) {
    session_only = 1,
    parameters = 2,
    session_and_parameters = 3,
};

/// In the "static linking only" part of `zstd.h`, exported by libzstd.so.1 with this
/// signature since 1.0, as `ZSTD_createCCtx_advanced`.
pub extern fn ZSTD_createDCtx_advanced(custom_mem: ZSTD_customMem) ?*ZSTD_DCtx;
pub extern fn ZSTD_freeDCtx(dctx: ?*ZSTD_DCtx) usize;
pub extern fn ZSTD_DCtx_setParameter(dctx: *ZSTD_DCtx, param: ZSTD_dParameter, value: c_int) usize;
pub extern fn ZSTD_DCtx_reset(dctx: *ZSTD_DCtx, reset: ZSTD_ResetDirective) usize;
/// 0 once a frame is decoded and flushed whole; otherwise a hint of the input still wanted,
/// or an error code.
pub extern fn ZSTD_decompressStream(dctx: *ZSTD_DCtx, output: *ZSTD_outBuffer, input: *ZSTD_inBuffer) usize;

// brotli (brotli/encode.h, brotli/decode.h, brotli/types.h). BROTLI_BOOL is a C int.

pub const BrotliEncoderState = opaque {};
pub const BrotliDecoderState = opaque {};

pub const brotli_alloc_func = fn (state: ?*anyopaque, size: usize) callconv(.c) ?*anyopaque;
pub const brotli_free_func = fn (state: ?*anyopaque, address: ?*anyopaque) callconv(.c) void;

/// `BrotliEncoderOperation`.
pub const BrotliEncoderOperation = enum(c_int) {
    process = 0,
    flush = 1,
    finish = 2,
};

/// `BrotliEncoderParameter`: only the values saker sets.
pub const BrotliEncoderParameter = enum(c_int) {
    mode = 0,
    quality = 1,
    lgwin = 2,
    size_hint = 5,
};

pub const BROTLI_MIN_QUALITY = 0;
pub const BROTLI_MAX_QUALITY = 11;
pub const BROTLI_MIN_WINDOW_BITS = 10;
/// RFC 7932 allows up to 24; `BROTLI_DEFAULT_WINDOW` is 22.
pub const BROTLI_MAX_WINDOW_BITS = 24;

pub extern fn BrotliEncoderCreateInstance(alloc_func: ?*const brotli_alloc_func, free_func: ?*const brotli_free_func, state: ?*anyopaque) ?*BrotliEncoderState;
pub extern fn BrotliEncoderDestroyInstance(state: ?*BrotliEncoderState) void;
pub extern fn BrotliEncoderSetParameter(state: *BrotliEncoderState, param: BrotliEncoderParameter, value: u32) c_int;
pub extern fn BrotliEncoderCompressStream(
    state: *BrotliEncoderState,
    op: BrotliEncoderOperation,
    available_in: *usize,
    next_in: *?[*]const u8,
    available_out: *usize,
    next_out: *?[*]u8,
    total_out: ?*usize,
) c_int;
pub extern fn BrotliEncoderIsFinished(state: *BrotliEncoderState) c_int;
pub extern fn BrotliEncoderHasMoreOutput(state: *BrotliEncoderState) c_int;
pub extern fn BrotliEncoderMaxCompressedSize(input_size: usize) usize;
pub extern fn BrotliEncoderVersion() u32;

/// `BrotliDecoderResult`.
pub const BrotliDecoderResult = enum(c_int) {
    @"error" = 0,
    success = 1,
    needs_more_input = 2,
    needs_more_output = 3,
};

pub extern fn BrotliDecoderCreateInstance(alloc_func: ?*const brotli_alloc_func, free_func: ?*const brotli_free_func, state: ?*anyopaque) ?*BrotliDecoderState;
pub extern fn BrotliDecoderDestroyInstance(state: ?*BrotliDecoderState) void;
pub extern fn BrotliDecoderDecompressStream(
    state: *BrotliDecoderState,
    available_in: *usize,
    next_in: *?[*]const u8,
    available_out: *usize,
    next_out: *?[*]u8,
    total_out: ?*usize,
) BrotliDecoderResult;

// zlib (zlib.h, zconf.h): uInt is a C unsigned int, uLong a C unsigned long.

pub const alloc_func = fn (state: ?*anyopaque, items: c_uint, size: c_uint) callconv(.c) ?*anyopaque;
pub const free_func = fn (state: ?*anyopaque, address: ?*anyopaque) callconv(.c) void;

pub const z_stream = extern struct {
    next_in: ?[*]const u8 = null,
    avail_in: c_uint = 0,
    total_in: c_ulong = 0,
    next_out: ?[*]u8 = null,
    avail_out: c_uint = 0,
    total_out: c_ulong = 0,
    msg: ?[*:0]const u8 = null,
    state: ?*anyopaque = null,
    zalloc: ?*const alloc_func = null,
    zfree: ?*const free_func = null,
    @"opaque": ?*anyopaque = null,
    data_type: c_int = 0,
    adler: c_ulong = 0,
    reserved: c_ulong = 0,
};

pub const Z_NO_FLUSH = 0;
pub const Z_SYNC_FLUSH = 2;
pub const Z_FINISH = 4;

pub const Z_OK = 0;
pub const Z_STREAM_END = 1;
pub const Z_STREAM_ERROR = -2;
pub const Z_DATA_ERROR = -3;
pub const Z_MEM_ERROR = -4;
pub const Z_BUF_ERROR = -5;
pub const Z_VERSION_ERROR = -6;

pub const Z_DEFLATED = 8;
pub const Z_DEFAULT_STRATEGY = 0;
/// `windowBits` above 15 asks deflate for a gzip wrapper (RFC 1952) instead of zlib's
/// (RFC 1950): `15 + 16` is a 32 KiB window in a gzip member.
pub const gzip_window_bits_offset = 16;

/// What `deflateInit2` checks against the library's own version: only the major digit must
/// match, so any zlib 1.x accepts it.
pub const ZLIB_VERSION = "1.2.13";

pub extern fn zlibVersion() [*:0]const u8;
pub extern fn deflateInit2_(strm: *z_stream, level: c_int, method: c_int, window_bits: c_int, mem_level: c_int, strategy: c_int, version: [*:0]const u8, stream_size: c_int) c_int;
pub extern fn deflate(strm: *z_stream, flush: c_int) c_int;
pub extern fn deflateEnd(strm: *z_stream) c_int;

pub const Z_NEED_DICT = 2;

pub extern fn inflateInit2_(strm: *z_stream, window_bits: c_int, version: [*:0]const u8, stream_size: c_int) c_int;
pub extern fn inflate(strm: *z_stream, flush: c_int) c_int;
/// Starts a new stream, keeping the state and window allocated.
pub extern fn inflateReset(strm: *z_stream) c_int;
pub extern fn inflateEnd(strm: *z_stream) c_int;
