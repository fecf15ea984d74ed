//! The `Range` request field for the `bytes` unit (RFC 9110 §14.1-§14.2): parses a range set
//! against a representation length and says what to send. A set this parser does not
//! understand (another unit, bad syntax, first > last) is ignored — the full representation
//! is sent, as §14.2 allows. Unsatisfiable ranges are dropped; when none is left the answer is
//! 416. Overlapping or excessive sets (more than `Ranges.max`) are also ignored (§15.3.7
//! permits refusing to serve ranges that look like an attack).
const std = @import("std");

/// One satisfiable byte range, clamped to the representation: `first` and `last` inclusive.
pub const Span = struct {
    first: u64,
    last: u64,

    /// Number of bytes in the range.
    pub fn len(span: Span) u64 {
        return span.last - span.first + 1;
    }
};

/// What to do with a `Range` field.
pub const Outcome = union(enum) {
    /// Ignore it: send the whole representation (200).
    full,
    /// No range is satisfiable: 416 with `Content-Range: bytes */length`.
    unsatisfiable,
    /// Send these ranges (206): one, or several as multipart/byteranges.
    ranges: []const Span,
};

/// Room for the parsed spans of one request.
pub const Ranges = struct {
    /// Most ranges honoured in one request; a larger set is ignored (full response).
    pub const max = 16;
    spans: [max]Span = undefined,
};

/// Evaluates `value` (the field value) against a representation of `length` bytes.
pub fn evaluate(value: []const u8, length: u64, storage: *Ranges) Outcome {
    const prefix = "bytes=";
    if (value.len < prefix.len or !std.ascii.eqlIgnoreCase(value[0..prefix.len], prefix)) return .full;
    var count: usize = 0;
    var specs: usize = 0;
    var it = std.mem.splitScalar(u8, value[prefix.len..], ',');
    while (it.next()) |raw| {
        const spec = std.mem.trim(u8, raw, " \t");
        if (spec.len == 0) continue; // empty list members are allowed (§5.6.1)
        specs += 1;
        if (specs > Ranges.max) return .full;
        const span = parseSpec(spec, length) catch return .full;
        if (span) |s| {
            storage.spans[count] = s;
            count += 1;
        }
    }
    if (specs == 0) return .full;
    if (count == 0) return .unsatisfiable;
    const spans = storage.spans[0..count];
    if (count > 1) {
        // Overlapping ranges are refused as a whole rather than merged.
        std.mem.sort(Span, spans, {}, lessThan);
        for (spans[1..], spans[0 .. count - 1]) |b, a| if (b.first <= a.last) return .full;
    }
    return .{ .ranges = spans };
}

fn lessThan(_: void, a: Span, b: Span) bool {
    return a.first < b.first;
}

/// Parses one range-spec: a span when satisfiable, null when not, an error when malformed.
fn parseSpec(spec: []const u8, length: u64) error{Malformed}!?Span {
    const dash = std.mem.findScalar(u8, spec, '-') orelse return error.Malformed;
    const first_text = spec[0..dash];
    const last_text = spec[dash + 1 ..];
    if (first_text.len == 0) {
        // suffix-range: the last N bytes.
        const suffix = try number(last_text);
        if (suffix == 0 or length == 0) return null;
        return .{ .first = length - @min(suffix, length), .last = length - 1 };
    }
    const first = try number(first_text);
    const last: ?u64 = if (last_text.len == 0) null else try number(last_text);
    if (last) |l| if (l < first) return error.Malformed;
    if (first >= length) return null;
    return .{ .first = first, .last = @min(last orelse length - 1, length - 1) };
}

fn number(text: []const u8) error{Malformed}!u64 {
    if (text.len == 0 or text.len > 19) return error.Malformed;
    var value: u64 = 0;
    for (text) |c| {
        if (c < '0' or c > '9') return error.Malformed;
        value = value * 10 + (c - '0');
    }
    return value;
}

fn expectSpans(value: []const u8, length: u64, expected: []const Span) !void {
    var storage: Ranges = .{};
    const outcome = evaluate(value, length, &storage);
    errdefer std.debug.print("Range: {s} (length {d}) gave {any}\n", .{ value, length, outcome });
    try std.testing.expect(outcome == .ranges);
    try std.testing.expectEqualSlices(Span, expected, outcome.ranges);
}

fn expectOutcome(value: []const u8, length: u64, expected: std.meta.Tag(Outcome)) !void {
    var storage: Ranges = .{};
    const outcome = evaluate(value, length, &storage);
    errdefer std.debug.print("Range: {s} (length {d}) gave {any}\n", .{ value, length, outcome });
    try std.testing.expectEqual(expected, std.meta.activeTag(outcome));
}

test "range: the examples of RFC 9110 §14.1.2 on a 10000-byte representation" {
    try expectSpans("bytes=0-499", 10000, &.{.{ .first = 0, .last = 499 }});
    try expectSpans("bytes=500-999", 10000, &.{.{ .first = 500, .last = 999 }});
    try expectSpans("bytes=-500", 10000, &.{.{ .first = 9500, .last = 9999 }});
    try expectSpans("bytes=9500-", 10000, &.{.{ .first = 9500, .last = 9999 }});
    try expectSpans("bytes=0-0,-1", 10000, &.{ .{ .first = 0, .last = 0 }, .{ .first = 9999, .last = 9999 } });
    try expectSpans("bytes= 0-999, 4500-5499, -1000", 10000, &.{
        .{ .first = 0, .last = 999 }, .{ .first = 4500, .last = 5499 }, .{ .first = 9000, .last = 9999 },
    });
    try expectSpans("bytes=500-600,601-999", 10000, &.{ .{ .first = 500, .last = 600 }, .{ .first = 601, .last = 999 } });
}

test "range: clamping, unsatisfiable and empty representations" {
    try expectSpans("bytes=0-99999", 100, &.{.{ .first = 0, .last = 99 }});
    try expectSpans("bytes=-500", 100, &.{.{ .first = 0, .last = 99 }});
    try expectSpans("BYTES=5-5", 100, &.{.{ .first = 5, .last = 5 }});
    try expectSpans("bytes=100-200,5-6", 100, &.{.{ .first = 5, .last = 6 }});
    try expectOutcome("bytes=100-200", 100, .unsatisfiable);
    try expectOutcome("bytes=-0", 100, .unsatisfiable);
    try expectOutcome("bytes=0-", 0, .unsatisfiable);
    try expectOutcome("bytes=-5", 0, .unsatisfiable);
}

test "range: what is ignored (full response)" {
    const ignored = [_][]const u8{
        "",
        "items=0-5",
        "bytes=",
        "bytes=,",
        "bytes=5",
        "bytes=a-b",
        "bytes=5-4",
        "bytes=--5",
        "bytes=0-1-2",
        "bytes=1 -2",
        "bytes=0-99999999999999999999",
        "bytes=0-10,5-20", // overlapping
        "bytes=0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8,9-9,10-10,11-11,12-12,13-13,14-14,15-15,16-16",
    };
    for (ignored) |value| try expectOutcome(value, 1000, .full);
}
