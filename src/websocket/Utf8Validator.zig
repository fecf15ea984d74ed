//! Incremental UTF-8 validation for text messages (RFC 6455 §8.1, RFC 3629 §4): bytes are fed
//! as they arrive, in any pieces, and the first byte that can never be part of valid UTF-8
//! fails at once (fail-fast), even in the middle of a fragmented message. Runs of ASCII are
//! skipped a vector at a time.
const std = @import("std");

const Utf8Validator = @This();

state: State = .accept,

/// What the validator expects next (RFC 3629 §4, UTF8-2..UTF8-4).
const State = enum(u8) {
    /// Between characters.
    accept,
    /// One continuation byte (80-BF) to go.
    tail1,
    /// Two continuation bytes to go.
    tail2,
    /// Three continuation bytes to go.
    tail3,
    /// After E0: A0-BF, then one more.
    after_e0,
    /// After ED: 80-9F (no surrogates), then one more.
    after_ed,
    /// After F0: 90-BF, then two more.
    after_f0,
    /// After F4: 80-8F (at most U+10FFFF), then two more.
    after_f4,
};

/// Why text is refused.
pub const Error = error{InvalidUtf8};

const vector_len = std.simd.suggestVectorLength(u8) orelse 16;
const Vector = @Vector(vector_len, u8);

/// Validates the next piece of the text.
pub fn feed(v: *Utf8Validator, bytes: []const u8) Error!void {
    var state = v.state;
    var i: usize = 0;
    while (i < bytes.len) {
        if (state == .accept) {
            // Skip ASCII a vector at a time.
            while (i + vector_len <= bytes.len) {
                const chunk: Vector = bytes[i..][0..vector_len].*;
                if (@reduce(.Or, chunk) & 0x80 != 0) break;
                i += vector_len;
            }
            if (i == bytes.len) break;
        }
        const byte = bytes[i];
        i += 1;
        state = try step(state, byte);
    }
    v.state = state;
}

/// Whether the text fed so far ends at a character boundary (a message must).
pub fn complete(v: *const Utf8Validator) bool {
    return v.state == .accept;
}

/// Starts over for a new message.
pub fn reset(v: *Utf8Validator) void {
    v.state = .accept;
}

fn step(state: State, byte: u8) Error!State {
    return switch (state) {
        .accept => switch (byte) {
            0x00...0x7F => .accept,
            0xC2...0xDF => .tail1,
            0xE0 => .after_e0,
            0xE1...0xEC, 0xEE...0xEF => .tail2,
            0xED => .after_ed,
            0xF0 => .after_f0,
            0xF1...0xF3 => .tail3,
            0xF4 => .after_f4,
            else => error.InvalidUtf8, // 80-C1 (stray or overlong lead), F5-FF
        },
        .tail1 => if (isTail(byte)) .accept else error.InvalidUtf8,
        .tail2 => if (isTail(byte)) .tail1 else error.InvalidUtf8,
        .tail3 => if (isTail(byte)) .tail2 else error.InvalidUtf8,
        .after_e0 => if (byte >= 0xA0 and byte <= 0xBF) .tail1 else error.InvalidUtf8,
        .after_ed => if (byte >= 0x80 and byte <= 0x9F) .tail1 else error.InvalidUtf8,
        .after_f0 => if (byte >= 0x90 and byte <= 0xBF) .tail2 else error.InvalidUtf8,
        .after_f4 => if (byte >= 0x80 and byte <= 0x8F) .tail2 else error.InvalidUtf8,
    };
}

fn isTail(byte: u8) bool {
    return byte & 0xC0 == 0x80;
}

/// Validates a whole text at once.
pub fn validate(bytes: []const u8) bool {
    var v: Utf8Validator = .{};
    v.feed(bytes) catch return false;
    return v.complete();
}

const testing = std.testing;

const Case = struct { bytes: []const u8, valid: bool };

const cases = [_]Case{
    .{ .bytes = "", .valid = true },
    .{ .bytes = "Hello-µ@ßöäüàá-UTF-8!!", .valid = true },
    .{ .bytes = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", .valid = true }, // κόσμε
    .{ .bytes = "\x7f", .valid = true },
    .{ .bytes = "\xdf\xbf", .valid = true },
    .{ .bytes = "\xef\xbf\xbf", .valid = true }, // U+FFFF
    .{ .bytes = "\xf4\x8f\xbf\xbf", .valid = true }, // U+10FFFF
    .{ .bytes = "\xf0\x90\x80\x80", .valid = true }, // U+10000
    .{ .bytes = "\xed\x9f\xbf", .valid = true }, // U+D7FF
    .{ .bytes = "\xee\x80\x80", .valid = true }, // U+E000
    .{ .bytes = "\x80", .valid = false }, // stray continuation
    .{ .bytes = "\xc0\xaf", .valid = false }, // overlong '/'
    .{ .bytes = "\xc1\xbf", .valid = false }, // overlong
    .{ .bytes = "\xe0\x80\xaf", .valid = false }, // overlong
    .{ .bytes = "\xe0\x9f\xbf", .valid = false }, // overlong
    .{ .bytes = "\xf0\x80\x80\xaf", .valid = false }, // overlong
    .{ .bytes = "\xf0\x8f\xbf\xbf", .valid = false }, // overlong
    .{ .bytes = "\xed\xa0\x80", .valid = false }, // U+D800 surrogate
    .{ .bytes = "\xed\xbf\xbf", .valid = false }, // U+DFFF surrogate
    .{ .bytes = "\xf4\x90\x80\x80", .valid = false }, // U+110000
    .{ .bytes = "\xf5\x80\x80\x80", .valid = false },
    .{ .bytes = "\xff", .valid = false },
    .{ .bytes = "\xfe", .valid = false },
    .{ .bytes = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited", .valid = false },
    .{ .bytes = "\xc2", .valid = false }, // truncated
    .{ .bytes = "\xe1\x80", .valid = false }, // truncated
    .{ .bytes = "\xf1\x80\x80", .valid = false }, // truncated
    .{ .bytes = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\xc3\xa9", .valid = true },
    .{ .bytes = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\xc3", .valid = false },
    .{ .bytes = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\xc3(", .valid = false },
};

test "Utf8Validator: vectors fed whole, per byte and split at every offset" {
    for (cases) |case| {
        errdefer std.debug.print("case: {f}\n", .{std.zig.fmtString(case.bytes)});
        try testing.expectEqual(case.valid, validate(case.bytes));
        // Agrees with the standard library's whole-text check.
        try testing.expectEqual(std.unicode.utf8ValidateSlice(case.bytes), case.valid);
        var per_byte: Utf8Validator = .{};
        const ok = for (case.bytes) |b| {
            per_byte.feed(&.{b}) catch break false;
        } else per_byte.complete();
        try testing.expectEqual(case.valid, ok);
        for (0..case.bytes.len + 1) |split| {
            var v: Utf8Validator = .{};
            const split_ok = blk: {
                v.feed(case.bytes[0..split]) catch break :blk false;
                v.feed(case.bytes[split..]) catch break :blk false;
                break :blk v.complete();
            };
            try testing.expectEqual(case.valid, split_ok);
        }
    }
}

test "Utf8Validator: fails at the first impossible byte, before the text ends" {
    var v: Utf8Validator = .{};
    try v.feed("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5");
    try testing.expectError(error.InvalidUtf8, v.feed("\xf4\x90"));
    var w: Utf8Validator = .{};
    try w.feed("\xf0");
    try testing.expect(!w.complete());
    try w.feed("\x90\x80");
    try w.feed("\x80");
    try testing.expect(w.complete());
}
