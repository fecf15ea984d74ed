//! What a server compresses on the fly and how (RFC 9110 §8.4.1): which codings it offers,
//! the smallest body worth a coding's framing, the media types that compress (text does;
//! images, audio, video and archives are compressed already), and each coding's level.
//! The same policy serves `saker.middleware.Compress`, `Config.compression` and
//! `saker serve --compress`. Sans-I/O: it decides, it never encodes.
const std = @import("std");
const assert = std.debug.assert;
const negotiate = @import("negotiate.zig");
const Encoder = @import("Encoder.zig");
const Coding = negotiate.Coding;

const Policy = @This();

/// The codings offered; empty turns compression off.
codings: negotiate.Offered = .full,
/// Smaller bodies are sent as they are: below about 1 KiB a coding's header, trailer and
/// lost TCP segment slack eat most of the gain, and the encoder's set-up dominates the time.
bytes_min: u32 = 1024,
/// Media types that are compressed, compared without parameters and ASCII
/// case-insensitively: `type/subtype` exactly, or `type/*` for a whole top-level type.
types: []const []const u8 = &default_types,
/// The level of each coding (`Encoder.levels` gives their ranges).
levels: std.EnumArray(Coding, u8) = Encoder.default_levels,
/// log2 of the window of a streamed response's encoder (`Encoder.Options.window_log`); null:
/// the encoder's default (1 MiB for zstd and br, 32 KiB for gzip). A long-lived event stream
/// holds its encoder for its whole life, so a smaller window (16: 64 KiB) bounds it tighter.
stream_window_log: ?u5 = null,

/// What `types` holds unless set: text, the structured text formats of the web, and
/// WebAssembly (which compresses to about a third).
pub const default_types = [_][]const u8{
    "text/*",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/wasm",
    "image/svg+xml",
    "application/ld+json",
    "application/manifest+json",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/yaml",
    "application/toml",
    "application/x-ndjson",
    "application/grpc-web-text",
};

/// Why a policy is refused.
pub const Error = error{
    /// A level outside `Encoder.levels(coding)`.
    LevelOutOfRange,
    /// `stream_window_log` outside `Encoder.windowLogs(coding)` of an offered coding.
    WindowOutOfRange,
    /// A member of `types` that is not `type/subtype` or `type/*`.
    InvalidType,
};

/// Checks every field against what the encoders take.
pub fn validate(policy: Policy) Error!void {
    var it = policy.codings.iterator();
    while (it.next()) |coding| {
        const range = Encoder.levels(coding);
        const level = policy.levels.get(coding);
        if (level < range.min or level > range.max) return error.LevelOutOfRange;
        if (policy.stream_window_log) |log| {
            const logs = Encoder.windowLogs(coding);
            if (log < logs.min or log > logs.max) return error.WindowOutOfRange;
        }
    }
    for (policy.types) |media_type| {
        const slash = std.mem.findScalar(u8, media_type, '/') orelse return error.InvalidType;
        if (slash == 0 or slash + 1 == media_type.len) return error.InvalidType;
    }
}

/// Whether a body of `content_type` is worth compressing; a missing type is not (it could be
/// anything, and a client sniffing it would see a coding first).
pub fn compressible(policy: Policy, content_type: ?[]const u8) bool {
    const value = content_type orelse return false;
    const end = std.mem.findScalar(u8, value, ';') orelse value.len;
    const media_type = std.mem.trim(u8, value[0..end], " \t");
    const slash = std.mem.findScalar(u8, media_type, '/') orelse return false;
    for (policy.types) |listed| {
        if (std.mem.endsWith(u8, listed, "/*")) {
            if (listed.len - 1 == slash + 1 and std.ascii.eqlIgnoreCase(listed[0 .. slash + 1], media_type[0 .. slash + 1]))
                return true;
        } else if (std.ascii.eqlIgnoreCase(listed, media_type)) {
            return true;
        }
    }
    return false;
}

/// The encoder options for a coding of this policy; `streamed` picks the stream window.
pub fn encoderOptions(policy: Policy, coding: Coding, streamed: bool) Encoder.Options {
    assert(policy.codings.contains(coding));
    return .{
        .coding = coding,
        .level = policy.levels.get(coding),
        .window_log = if (streamed) policy.stream_window_log else null,
    };
}

/// Options for a whole body of `len` bytes: a window no larger than the body needs.
pub fn wholeOptions(policy: Policy, coding: Coding, len: usize) Encoder.Options {
    var options = policy.encoderOptions(coding, false);
    options.window_log = Encoder.windowLogFor(coding, len);
    return options;
}

/// Parses a `--compress` value: `off`, or a comma-separated list of `zstd`, `br`, `gzip`
/// (optionally `CODING:LEVEL`, e.g. `br:4`) into `policy`. Null for anything else; `policy`
/// is then unchanged.
pub fn parseList(policy: *Policy, text: []const u8) ?void {
    if (std.mem.eql(u8, text, "off")) {
        policy.codings = .empty;
        return;
    }
    var next = policy.*;
    next.codings = .empty;
    var it = std.mem.splitScalar(u8, text, ',');
    while (it.next()) |raw| {
        const item = std.mem.trim(u8, raw, " ");
        const colon = std.mem.findScalar(u8, item, ':');
        const name = item[0 .. colon orelse item.len];
        const coding = std.meta.stringToEnum(Coding, name) orelse return null;
        if (next.codings.contains(coding)) return null;
        next.codings.insert(coding);
        if (colon) |at| {
            const level = std.fmt.parseInt(u8, item[at + 1 ..], 10) catch return null;
            next.levels.set(coding, level);
        }
    }
    next.validate() catch return null;
    policy.* = next;
}

/// The entity tag of the `coding` representation of a resource whose identity tag is `tag`
/// (RFC 9110 §8.8.3: a different representation needs a different tag): the coding's name
/// is added inside the quotes, `"abc"` becomes `"abc-zstd"` and `W/"abc"` `W/"abc-zstd"`.
/// Null when `tag` is not an entity tag. Allocated in `arena`.
pub fn encodedTag(arena: std.mem.Allocator, tag: []const u8, coding: Coding) error{OutOfMemory}!?[]const u8 {
    const weak = std.mem.startsWith(u8, tag, "W/");
    const opaque_tag = if (weak) tag[2..] else tag;
    if (opaque_tag.len < 2 or opaque_tag[0] != '"' or opaque_tag[opaque_tag.len - 1] != '"') return null;
    if (std.mem.findScalar(u8, opaque_tag[1 .. opaque_tag.len - 1], '"') != null) return null;
    return try std.mem.concat(arena, u8, &.{ tag[0 .. tag.len - 1], "-", coding.token(), "\"" });
}

test "Policy: compressible types by exact name and by top-level type" {
    const policy: Policy = .{};
    for ([_][]const u8{ "text/html; charset=utf-8", "TEXT/Plain", "application/json", "image/svg+xml;charset=utf-8", "text/event-stream", " application/wasm " }) |t|
        try std.testing.expect(policy.compressible(t));
    for ([_][]const u8{ "image/png", "application/octet-stream", "text", "", "application/jsonx", "texts/html", "video/mp4" }) |t|
        try std.testing.expect(!policy.compressible(t));
    try std.testing.expect(!policy.compressible(null));
    const custom: Policy = .{ .types = &.{"application/*"} };
    try std.testing.expect(custom.compressible("application/x-anything"));
    try std.testing.expect(!custom.compressible("text/html"));
}

test "Policy: --compress lists, levels and refusals" {
    var policy: Policy = .{};
    try std.testing.expect(policy.parseList("gzip") != null);
    try std.testing.expect(policy.codings.contains(.gzip) and !policy.codings.contains(.br));
    try std.testing.expect(policy.parseList("zstd,br:4, gzip:9") != null);
    try std.testing.expectEqual(@as(usize, 3), policy.codings.count());
    try std.testing.expectEqual(@as(u8, 4), policy.levels.get(.br));
    try std.testing.expectEqual(@as(u8, 9), policy.levels.get(.gzip));
    try std.testing.expect(policy.parseList("off") != null);
    try std.testing.expectEqual(@as(usize, 0), policy.codings.count());
    const before = policy;
    for ([_][]const u8{ "", "deflate", "gzip,gzip", "gzip:0", "zstd:20", "br:12", "br:x", "zstd;q=1" }) |bad| {
        try std.testing.expect(policy.parseList(bad) == null);
        try std.testing.expectEqual(before.codings, policy.codings);
    }
}

test "Policy: validate refuses levels, windows and types the encoders do not take" {
    try (Policy{}).validate();
    var levels = Encoder.default_levels;
    levels.set(.gzip, 0);
    try std.testing.expectError(error.LevelOutOfRange, (Policy{ .levels = levels }).validate());
    try std.testing.expectError(error.WindowOutOfRange, (Policy{ .stream_window_log = 16 }).validate());
    try (Policy{ .stream_window_log = 15 }).validate();
    try std.testing.expectError(error.InvalidType, (Policy{ .types = &.{"text"} }).validate());
    try std.testing.expectError(error.InvalidType, (Policy{ .types = &.{"/html"} }).validate());
}

test "Policy: an encoded representation's entity tag" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    try std.testing.expectEqualStrings("\"abc-zstd\"", (try encodedTag(arena, "\"abc\"", .zstd)).?);
    try std.testing.expectEqualStrings("W/\"abc-br\"", (try encodedTag(arena, "W/\"abc\"", .br)).?);
    try std.testing.expectEqualStrings("\"-gzip\"", (try encodedTag(arena, "\"\"", .gzip)).?);
    for ([_][]const u8{ "abc", "\"abc", "W/abc", "", "\"", "\"a\"b\"" }) |bad|
        try std.testing.expectEqual(@as(?[]const u8, null), try encodedTag(arena, bad, .gzip));
}
