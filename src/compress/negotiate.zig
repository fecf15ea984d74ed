//! Content negotiation on `Accept-Encoding` (RFC 9110 §12.5.3) for compression on the fly:
//! which of the codings the server offers (`zstd`, `br`, `gzip`) — or `identity`, the
//! representation as it is — the client prefers, by q-value (§12.4.2). Sans-I/O: field values
//! in, a `Choice` out; nothing is allocated and nothing fails.
//!
//! The grammar read (RFC 9110 §12.5.3, §12.4.2, §5.6):
//!   Accept-Encoding = #( codings [ OWS ";" OWS "q=" qvalue ] )
//!   codings         = token / "identity" / "*"
//!   qvalue          = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
//!
//! Decisions where the RFC leaves room (each one a row of the tests below):
//! - No field, or fields with no member (`""`, `" , "`): identity. The RFC lets a server send
//!   any coding when the field is absent, but a client that does not ask (curl without
//!   `--compressed`, most scripts) rarely decodes one. An empty field means "no coding".
//! - Garbage means identity: one malformed member (a bad token, a qvalue outside the grammar,
//!   `q=0.0001`, `q=1.5`, a parameter other than `q`, anything after the weight) makes the
//!   whole field — all its lines together — unreadable, and the answer is `identity`, never
//!   an error and never `unacceptable`. Ignoring only the bad member would be a guess: a
//!   client that wrote `gzip;q=0.00` meant to refuse gzip, and a `*` elsewhere in the field
//!   would then hand gzip back to it. Identity is what every client decodes.
//! - Several field lines are one comma-separated list (RFC 9110 §5.3): `choose` takes them
//!   all and reads them as if joined by commas.
//! - A coding named more than once gets the lowest of its weights: a refusal anywhere wins.
//!   `x-gzip` is gzip (§12.5.3), so `gzip` and `x-gzip` count as the same name.
//! - Tokens are case-insensitive (§8.4.1); `q` is too (ABNF strings). Unknown codings
//!   (`deflate`, `compress`, `foo`) are read and ignored.
//! - A coding the field does not name takes the weight of `*`, or is not acceptable without
//!   one. Identity not named and not covered by `*` is acceptable (§12.5.3) but ranks below
//!   every coding with a non-zero weight: `gzip;q=0.1` asks for gzip.
//! - Equal weights: a coding over identity (the client said it does not mind, and the
//!   response gets smaller), and among codings zstd over br over gzip (the declaration order
//!   of `Coding`: zstd decodes fastest at a ratio near br's; br is smaller than gzip).
//! - Identity refused (`identity;q=0`, or `*;q=0` with no `identity` member) and no offered
//!   coding acceptable: `unacceptable`. The caller decides: RFC 9110 §12.5.3 allows a 406
//!   (Not Acceptable) or disregarding the field and sending identity. saker's handlers
//!   should send identity (a 406 leaves the client with nothing); a strict API may answer 406.
const std = @import("std");
const assert = std.debug.assert;
const token_table = @import("../http1/scan.zig").token_table;

/// A content coding saker can apply on the fly. The declaration order is the preference on
/// equal weights.
pub const Coding = enum {
    zstd,
    br,
    gzip,

    /// The value of `Content-Encoding` (and of `Accept-Encoding` members) for this coding.
    pub fn token(coding: Coding) []const u8 {
        return @tagName(coding);
    }
};

/// The codings a server offers for one response.
pub const Offered = std.EnumSet(Coding);

/// What to send.
pub const Choice = union(enum) {
    /// Send the content in this coding, with `Content-Encoding: coding.token()`.
    coding: Coding,
    /// Send the content as it is.
    identity,
    /// The field refuses identity and accepts none of the offered codings. The caller answers
    /// 406 or sends identity all the same (see the top of this file).
    unacceptable,

    /// The coding to apply, or null for identity (what `unacceptable` falls back to when the
    /// caller sends identity anyway).
    pub fn codingOrIdentity(choice: Choice) ?Coding {
        return switch (choice) {
            .coding => |coding| coding,
            .identity, .unacceptable => null,
        };
    }
};

/// A weight in thousandths: 0 (not acceptable) to 1000 (q=1).
const Weight = u16;
const weight_max: Weight = 1000;

/// The weights a field gives; null where it does not name the coding.
const Weights = struct {
    codings: std.EnumArray(Coding, ?Weight) = .initFill(null),
    identity: ?Weight = null,
    star: ?Weight = null,

    fn lower(slot: *?Weight, weight: Weight) void {
        slot.* = if (slot.*) |old| @min(old, weight) else weight;
    }
};

/// The preferred choice among `offered` for a request whose `Accept-Encoding` field lines are
/// `fields` (zero or more, in the order received). See the top of this file for the rules.
pub fn choose(fields: []const []const u8, offered: Offered) Choice {
    const weights = parseFields(fields) orelse return .identity;
    var best: ?Coding = null;
    var best_weight: Weight = 0;
    // Declaration order, and a strict `>`: the earlier coding wins a tie.
    var it = offered.iterator();
    while (it.next()) |coding| {
        const weight = weights.codings.get(coding) orelse weights.star orelse 0;
        assert(weight <= weight_max);
        if (weight > best_weight) {
            best = coding;
            best_weight = weight;
        }
    }
    if (best) |coding| assert(best_weight > 0 and offered.contains(coding));
    const identity_weight = weights.identity orelse weights.star;
    if (identity_weight) |weight| {
        // Named (or covered by `*`): compared with the best coding; a tie goes to the coding.
        if (best) |coding| return if (weight > best_weight) .identity else .{ .coding = coding };
        return if (weight > 0) .identity else .unacceptable;
    }
    // Not named: acceptable, below every coding with a non-zero weight.
    if (best) |coding| return .{ .coding = coding };
    return .identity;
}

/// The weights of every member of every line, or null when the field is garbage or names
/// nothing (both mean identity).
fn parseFields(fields: []const []const u8) ?Weights {
    var weights: Weights = .{};
    var members_count: usize = 0;
    for (fields) |field| {
        var members = std.mem.splitScalar(u8, field, ',');
        while (members.next()) |member| {
            const parsed = parseMember(member) catch return null;
            const named = parsed orelse continue; // an empty list element (RFC 9110 §5.6.1)
            members_count += 1;
            switch (named.name) {
                .coding => |coding| Weights.lower(weights.codings.getPtr(coding), named.weight),
                .identity => Weights.lower(&weights.identity, named.weight),
                .star => Weights.lower(&weights.star, named.weight),
                .other => {},
            }
        }
    }
    return if (members_count == 0) null else weights;
}

const Name = union(enum) { coding: Coding, identity, star, other };
const Member = struct { name: Name, weight: Weight };

/// One list member: null when it is empty (only whitespace), an error when it is malformed.
fn parseMember(text: []const u8) error{Malformed}!?Member {
    const member = std.mem.trim(u8, text, " \t");
    if (member.len == 0) return null;
    var end: usize = 0;
    while (end < member.len and token_table[member[end]]) end += 1;
    if (end == 0) return error.Malformed;
    const name = nameOf(member[0..end]);
    var rest = std.mem.trimStart(u8, member[end..], " \t");
    if (rest.len == 0) return .{ .name = name, .weight = weight_max };
    if (rest[0] != ';') return error.Malformed;
    rest = std.mem.trimStart(u8, rest[1..], " \t");
    if (rest.len < 2 or (rest[0] != 'q' and rest[0] != 'Q') or rest[1] != '=') return error.Malformed;
    // `member` is trimmed, so the qvalue runs to its end: anything after it is malformed.
    return .{ .name = name, .weight = try parseQvalue(rest[2..]) };
}

fn nameOf(token: []const u8) Name {
    if (std.mem.eql(u8, token, "*")) return .star;
    if (std.ascii.eqlIgnoreCase(token, "identity")) return .identity;
    if (std.ascii.eqlIgnoreCase(token, "x-gzip")) return .{ .coding = .gzip };
    inline for (comptime std.enums.values(Coding)) |coding| {
        if (std.ascii.eqlIgnoreCase(token, coding.token())) return .{ .coding = coding };
    }
    return .other;
}

/// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths.
fn parseQvalue(text: []const u8) error{Malformed}!Weight {
    if (text.len == 0 or text.len > "0.000".len) return error.Malformed;
    if (text[0] != '0' and text[0] != '1') return error.Malformed;
    var weight: Weight = @as(Weight, text[0] - '0') * 1000;
    if (text.len == 1) return weight;
    if (text[1] != '.') return error.Malformed;
    var scale: Weight = 100;
    for (text[2..]) |c| {
        if (!std.ascii.isDigit(c)) return error.Malformed;
        weight += (c - '0') * scale;
        scale /= 10;
    }
    if (weight > weight_max) return error.Malformed;
    return weight;
}

const all: Offered = .full;
const no_zstd: Offered = .initMany(&.{ .br, .gzip });
const only_gzip: Offered = .initOne(.gzip);
const none: Offered = .empty;

/// One field value, the codings offered, and the expected choice.
const Case = struct { []const u8, Offered, Choice };

fn zstd() Choice {
    return .{ .coding = .zstd };
}
fn br() Choice {
    return .{ .coding = .br };
}
fn gzip() Choice {
    return .{ .coding = .gzip };
}

fn expectChoices(cases: []const Case) !void {
    for (cases) |case| {
        errdefer std.debug.print("Accept-Encoding: \"{s}\"\n", .{case[0]});
        try std.testing.expectEqual(case[2], choose(&.{case[0]}, case[1]));
    }
}

test "negotiate: the RFC 9110 §12.5.3 examples" {
    try expectChoices(&.{
        .{ "compress, gzip", all, gzip() },
        .{ "", all, .identity },
        .{ "*", all, zstd() },
        .{ "compress;q=0.5, gzip;q=1.0", all, gzip() },
        .{ "gzip;q=1.0, identity; q=0.5, *;q=0", all, gzip() },
        .{ "gzip;q=1.0, identity; q=0.5, *;q=0", no_zstd, gzip() },
        // The same example when gzip is not offered: `*;q=0` refuses the others, identity 0.5.
        .{ "gzip;q=1.0, identity; q=0.5, *;q=0", .initOne(.br), .identity },
    });
}

test "negotiate: q-values rank the codings, zstd over br over gzip on ties" {
    try expectChoices(&.{
        .{ "gzip, deflate, br, zstd", all, zstd() },
        .{ "gzip, deflate, br, zstd", no_zstd, br() },
        .{ "gzip, deflate, br", all, br() },
        .{ "gzip, br;q=0.5", all, gzip() },
        .{ "br;q=0.3, gzip;q=0.3, zstd;q=0.3", all, zstd() },
        .{ "zstd;q=0.2, br;q=0.3, gzip;q=0.1", all, br() },
        .{ "br", only_gzip, .identity },
        .{ "x-gzip", all, gzip() },
        .{ "X-GZIP;Q=0.7, ZSTD;q=0.6", all, gzip() },
        .{ "Br;Q=1", all, br() },
        .{ "*;q=0.1, gzip;q=0.2", all, gzip() },
        .{ "*;q=0.3, gzip;q=0.2", all, zstd() },
        .{ "gzip;q=0.001", all, gzip() },
        .{ "gzip;q=1.000, br;q=0.999", all, gzip() },
        .{ "gzip ; q=0.5 ,\tbr\t;\tq=0.4", all, gzip() },
        .{ "zstd", none, .identity },
        .{ "deflate, compress", all, .identity },
    });
}

test "negotiate: identity's weight, named or through *" {
    try expectChoices(&.{
        .{ "gzip;q=0.1, identity", all, .identity },
        .{ "identity;q=0.9, gzip", all, gzip() },
        .{ "gzip;q=0.5, identity;q=0.5", all, gzip() }, // a tie goes to the coding
        .{ "gzip;q=0.2, *", only_gzip, .identity }, // `*` covers identity at q=1
        .{ "gzip;q=0.2, *;q=0.1", only_gzip, gzip() },
        .{ "br;q=0.2, *;q=0.5", no_zstd, gzip() }, // gzip at 0.5 through `*` ties identity
        .{ "*;q=0.5, identity", all, .identity },
        .{ "identity", all, .identity },
        .{ "identity;q=0.5", none, .identity },
    });
}

test "negotiate: q=0 refuses a coding, identity and *" {
    try expectChoices(&.{
        .{ "gzip;q=0", all, .identity },
        .{ "br;q=0, gzip;q=0, zstd;q=0.000", all, .identity },
        .{ "*;q=0, gzip", all, gzip() },
        .{ "*;q=0, br", only_gzip, .unacceptable },
        .{ "identity;q=0, gzip;q=0.1", all, gzip() },
        .{ "identity;q=0", all, .unacceptable },
        .{ "identity;q=0", none, .unacceptable },
        .{ "identity;q=0, *", all, zstd() },
        .{ "identity;q=0, *", none, .unacceptable },
        .{ "*;q=0", all, .unacceptable },
        .{ "*;q=0, identity;q=0.5, gzip;q=0.4", all, .identity },
        .{ "*;q=0, identity", none, .identity },
        .{ "gzip;q=0, x-gzip", all, .identity }, // the same coding twice: the lower weight
        .{ "gzip, gzip;q=0", all, .identity },
        .{ "identity;q=0.5, identity;q=0", only_gzip, .unacceptable },
    });
}

test "negotiate: garbage means identity, never unacceptable" {
    try expectChoices(&.{
        .{ "br;q=2, gzip", all, .identity },
        .{ "br;q=1.5", all, .identity },
        .{ "br;q=1.0001", all, .identity },
        .{ "br;q=0.0001", all, .identity },
        .{ "br;q=0.x, gzip", all, .identity },
        .{ "br;q=, gzip", all, .identity },
        .{ "br;q, gzip", all, .identity },
        .{ "br;q =0.5", all, .identity },
        .{ "br;q= 0.5", all, .identity },
        .{ "br;q=.5", all, .identity },
        .{ "br;q=-0", all, .identity },
        .{ "br;level=5", all, .identity },
        .{ "br;q=0.5;q=0.6", all, .identity },
        .{ "br;", all, .identity },
        .{ "br q=0.5", all, .identity },
        .{ "gz ip", all, .identity },
        .{ "\"gzip\"", all, .identity },
        .{ ";q=0.5", all, .identity },
        .{ "gzip\x00", all, .identity },
        .{ "gzip\r\n", all, .identity },
        .{ "identity;q=0, br;q=oops", all, .identity },
        .{ "*;q=0, gzip;q=5", only_gzip, .identity },
        .{ "\xff\xfe", all, .identity },
    });
}

test "negotiate: empty elements and whitespace" {
    try expectChoices(&.{
        .{ " , ,gzip;q=0.3,, ", all, gzip() },
        .{ ",", all, .identity },
        .{ " \t ", all, .identity },
        .{ "\tzstd\t", all, zstd() },
        .{ "zstd , br", all, zstd() },
    });
}

test "negotiate: several field lines read as one list" {
    const expectEqual = std.testing.expectEqual;
    try expectEqual(Choice.identity, choose(&.{}, all));
    try expectEqual(gzip(), choose(&.{ "br;q=0.1", "gzip" }, all));
    try expectEqual(Choice.identity, choose(&.{ "", "" }, all));
    try expectEqual(br(), choose(&.{ "", "br" }, all));
    try expectEqual(Choice.unacceptable, choose(&.{ "identity;q=0", "br" }, only_gzip));
    try expectEqual(Choice.identity, choose(&.{ "gzip", "br;q=9" }, all)); // garbage in one line
    try expectEqual(Choice.identity, choose(&.{ "gzip", "gzip;q=0" }, all));
}

test "negotiate: qvalues in thousandths" {
    try std.testing.expectEqual(@as(Weight, 1000), try parseQvalue("1"));
    try std.testing.expectEqual(@as(Weight, 1000), try parseQvalue("1."));
    try std.testing.expectEqual(@as(Weight, 1000), try parseQvalue("1.000"));
    try std.testing.expectEqual(@as(Weight, 0), try parseQvalue("0."));
    try std.testing.expectEqual(@as(Weight, 5), try parseQvalue("0.005"));
    try std.testing.expectEqual(@as(Weight, 120), try parseQvalue("0.12"));
    try std.testing.expectError(error.Malformed, parseQvalue("1.001"));
    try std.testing.expectError(error.Malformed, parseQvalue("0.1234"));
    try std.testing.expectError(error.Malformed, parseQvalue("2"));
}

test "negotiate: Choice.codingOrIdentity" {
    try std.testing.expectEqual(@as(?Coding, .br), br().codingOrIdentity());
    try std.testing.expectEqual(@as(?Coding, null), @as(Choice, .identity).codingOrIdentity());
    try std.testing.expectEqual(@as(?Coding, null), @as(Choice, .unacceptable).codingOrIdentity());
}
