//! A request body's `Content-Encoding` (RFC 9110 §8.4): the codings the sender applied, in the
//! order it applied them, and undoing them, the last first, each within the limit on the
//! decoded size (`Decoder`). Sans-I/O: field values and the coded bytes in, the decoded bytes
//! out.
//!
//! The grammar read (RFC 9110 §8.4, §5.6.1): `Content-Encoding = #content-coding`, a
//! content-coding being a token, compared case-insensitively; several field lines are one
//! list. Decisions:
//! - Empty list members (`"gzip, , br"`) are skipped, as §5.6.1 has recipients do.
//! - `identity` members are skipped: it means no coding (§12.5.3), and `Request.hasCodedBody`
//!   does not count them either.
//! - A member that is not a coding saker decodes (`compress`, `x-compress`, `bzip2`, a stray
//!   `;q=1`) makes the whole body undecodable: `unknown`, which the server answers 415.
//! - At most `codings_max` codings: more is `too_many` (415 too). Each one costs a pass over
//!   data of up to the limit, and no client stacks more than two.
const std = @import("std");
const assert = std.debug.assert;
const Decoder = @import("Decoder.zig");
const Coding = Decoder.Coding;

/// Most codings a body may be in; each is undone in turn.
pub const codings_max = 4;

/// The codings of a body, in the order they were applied.
pub const Codings = struct {
    buffer: [codings_max]Coding = undefined,
    len: u8 = 0,

    /// The codings, the first applied first.
    pub fn slice(codings: *const Codings) []const Coding {
        return codings.buffer[0..codings.len];
    }
};

/// What the fields say.
pub const Parsed = union(enum) {
    /// The codings to undo, the last first; empty when the fields name none (only
    /// `identity` or empty members).
    codings: Codings,
    /// A member that names no coding saker decodes.
    unknown,
    /// More than `codings_max` codings.
    too_many,
};

/// Reads every `Content-Encoding` field line of a request, in order.
pub fn parse(fields: []const []const u8) Parsed {
    var codings: Codings = .{};
    for (fields) |field| {
        var members = std.mem.splitScalar(u8, field, ',');
        while (members.next()) |member| {
            const name = std.mem.trim(u8, member, " \t");
            if (name.len == 0 or std.ascii.eqlIgnoreCase(name, "identity")) continue;
            const coding = Coding.parse(name) orelse return .unknown;
            if (codings.len == codings_max) return .too_many;
            codings.buffer[codings.len] = coding;
            codings.len += 1;
        }
    }
    return .{ .codings = codings };
}

/// Errors of `decode`: `Decoder.decodeAll`'s, for the coding `Failure` names.
pub const Error = Decoder.WholeError;

/// Which coding failed, for the answer to say.
pub const Failure = struct {
    coding: ?Coding = null,
};

/// Undoes `codings` (in the order they were applied, as `parse` gives them) on `coded`, the
/// last first, each through `Decoder.decodeAll`: every stage, not only the last, decodes to at
/// most `decoded_bytes_max` bytes. The decoded body comes from `allocators.output` (the
/// caller owns it); the stages between come from `allocators.scratch`, freed as soon as the
/// next stage is done. On failure `failure.coding` names the coding that failed.
pub fn decode(
    allocators: Decoder.Allocators,
    codings: []const Coding,
    coded: []const u8,
    decoded_bytes_max: usize,
    failure: *Failure,
) Error![]u8 {
    assert(codings.len > 0 and codings.len <= codings_max);
    var input = coded;
    var held: ?[]u8 = null; // `input`, when it is a stage's output
    defer if (held) |bytes| allocators.scratch.free(bytes);
    var index = codings.len;
    while (index > 0) {
        index -= 1;
        const coding = codings[index];
        const last = index == 0;
        const into: Decoder.Allocators = .{
            .output = if (last) allocators.output else allocators.scratch,
            .scratch = allocators.scratch,
        };
        const decoded = Decoder.decodeAll(into, .{ .coding = coding, .decoded_bytes_max = decoded_bytes_max }, input) catch |err| {
            failure.coding = coding;
            return err;
        };
        if (last) return decoded;
        if (held) |bytes| allocators.scratch.free(bytes);
        held = decoded;
        input = decoded;
    }
    unreachable; // the last coding returns
}

const testing = std.testing;

test "content_encoding.parse: lists, lines, case, identity and empty members" {
    const Case = struct { fields: []const []const u8, expected: []const Coding };
    const cases = [_]Case{
        .{ .fields = &.{"gzip"}, .expected = &.{.gzip} },
        .{ .fields = &.{"X-Gzip"}, .expected = &.{.gzip} },
        .{ .fields = &.{"gzip, br"}, .expected = &.{ .gzip, .br } },
        .{ .fields = &.{ "deflate", " zstd ,\t", "BR" }, .expected = &.{ .deflate, .zstd, .br } },
        .{ .fields = &.{"identity, gzip, , identity"}, .expected = &.{.gzip} },
        .{ .fields = &.{ "", " , ", "identity" }, .expected = &.{} },
        .{ .fields = &.{}, .expected = &.{} },
        .{ .fields = &.{"gzip, gzip, gzip, gzip"}, .expected = &.{ .gzip, .gzip, .gzip, .gzip } },
    };
    for (cases) |case| {
        const parsed = parse(case.fields);
        try testing.expect(parsed == .codings);
        try testing.expectEqualSlices(Coding, case.expected, parsed.codings.slice());
    }
    for ([_][]const []const u8{ &.{"compress"}, &.{"gzip, bzip2"}, &.{ "br", "gzip;q=1" }, &.{"gzip br"}, &.{"*"} }) |fields|
        try testing.expectEqual(Parsed.unknown, parse(fields));
    try testing.expectEqual(Parsed.too_many, parse(&.{ "gzip, br", "zstd, deflate", "gzip" }));
}

test "content_encoding.decode: stacked codings come off the last first, each within the limit" {
    const gpa = testing.allocator;
    const Encoder = @import("Encoder.zig");
    const padding: [300]u8 = @splat('a');
    const body = "{\"stacked\": true, \"codings\": [\"gzip\", \"br\"], \"padding\": \"" ++ padding ++ "\"}";
    // gzip first, then br over the gzip data: `Content-Encoding: gzip, br`.
    var gzip_buffer: [512]u8 = undefined;
    const gzip = try Encoder.compressAll(gpa, .{ .coding = .gzip, .level = 6 }, body, &gzip_buffer);
    var br_buffer: [512]u8 = undefined;
    const both = try Encoder.compressAll(gpa, .{ .coding = .br, .level = 5 }, gzip, &br_buffer);
    const allocators: Decoder.Allocators = .{ .output = gpa, .scratch = gpa };
    var failure: Failure = .{};
    const decoded = try decode(allocators, &.{ .gzip, .br }, both, body.len, &failure);
    defer gpa.free(decoded);
    try testing.expectEqualStrings(body, decoded);
    try testing.expectEqual(null, failure.coding);
    // In the wrong order the br stage sees gzip data.
    try testing.expectError(error.Corrupt, decode(allocators, &.{ .br, .gzip }, both, body.len, &failure));
    try testing.expectEqual(Coding.gzip, failure.coding.?);
    // The limit holds for the last stage, and for a stage between that is larger.
    failure = .{};
    try testing.expectError(error.TooLarge, decode(allocators, &.{ .gzip, .br }, both, body.len - 1, &failure));
    try testing.expectEqual(Coding.gzip, failure.coding.?);
    try testing.expectError(error.TooLarge, decode(allocators, &.{ .gzip, .br }, both, gzip.len - 1, &failure));
    try testing.expectEqual(Coding.br, failure.coding.?);
    // Memory runs out anywhere: an error, and nothing leaks.
    const Run = struct {
        fn run(allocator: std.mem.Allocator, data: []const u8, expected: []const u8) !void {
            var ignored: Failure = .{};
            const bytes = try decode(.{ .output = allocator, .scratch = allocator }, &.{ .gzip, .br }, data, expected.len, &ignored);
            defer allocator.free(bytes);
            try testing.expectEqualStrings(expected, bytes);
        }
    };
    try testing.checkAllAllocationFailures(gpa, Run.run, .{ both, body });
}
