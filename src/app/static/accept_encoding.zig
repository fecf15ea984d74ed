//! Content negotiation on `Accept-Encoding` (RFC 9110 §12.5.3) for precompressed files:
//! which of the codings a file is available in (`br`, `gzip`) — or `identity`, the file as it
//! is — the client prefers, by q-value (§12.4.2). `*` stands for every coding the field does
//! not name, identity included; `q=0` means "not acceptable".
//!
//! Decisions where the RFC leaves room:
//! - No field: identity (clients that do not ask for a coding, curl without `--compressed`
//!   say, rarely decode one).
//! - Identity not named (and no `*`): acceptable (§12.5.3), but below any coding the client
//!   names with a non-zero weight: "gzip;q=0.5" asks for gzip.
//! - Equal weights: the coding wins over identity, br over gzip (smaller first).
//! - Identity refused (`identity;q=0`, or `*;q=0` without an `identity` entry) and no
//!   available coding acceptable: identity is sent all the same. The RFC leaves the answer
//!   open (a 406, or disregarding the field); a 406 would leave the client with nothing.
const std = @import("std");
/// A content coding a file may be stored in beside the original (`file.br`, `file.gz`).
pub const Coding = enum {
    br,
    gzip,

    /// The value of Content-Encoding.
    pub fn token(coding: Coding) []const u8 {
        return @tagName(coding);
    }

    /// The file-name suffix of the stored variant.
    pub fn suffix(coding: Coding) []const u8 {
        return switch (coding) {
            .br => ".br",
            .gzip => ".gz",
        };
    }
};

/// Q-values in thousandths, 0..1000, per coding; null when the field does not mention it.
const Weights = struct {
    br: ?u16 = null,
    gzip: ?u16 = null,
    identity: ?u16 = null,
    star: ?u16 = null,

    fn of(weights: Weights, coding: Coding) ?u16 {
        return switch (coding) {
            .br => weights.br,
            .gzip => weights.gzip,
        };
    }
};

/// The preferred coding among `available` (a set), or null for identity (see the rules at
/// the top of this file).
pub fn choose(field: ?[]const u8, available: std.EnumSet(Coding)) ?Coding {
    const value = field orelse return null;
    const weights = parse(value);
    var best: ?Coding = null;
    var best_q: u16 = 0;
    // Iterated in declaration order, so br wins ties.
    var it = available.iterator();
    while (it.next()) |coding| {
        const q = weights.of(coding) orelse weights.star orelse 0;
        if (q > best_q) {
            best = coding;
            best_q = q;
        }
    }
    // Identity named (or covered by `*`) with a higher weight than every coding wins; an
    // identity the field leaves unnamed ranks below any coding with a non-zero weight.
    const identity_q = weights.identity orelse weights.star orelse 0;
    if (identity_q > best_q) return null;
    return best;
}

fn parse(value: []const u8) Weights {
    var weights: Weights = .{};
    var members = std.mem.splitScalar(u8, value, ',');
    while (members.next()) |raw| {
        const member = std.mem.trim(u8, raw, " \t");
        if (member.len == 0) continue;
        const semicolon = std.mem.findScalar(u8, member, ';') orelse member.len;
        const name = std.mem.trim(u8, member[0..semicolon], " \t");
        const q = if (semicolon < member.len) qValue(member[semicolon + 1 ..]) orelse continue else 1000;
        if (std.ascii.eqlIgnoreCase(name, "br")) {
            weights.br = q;
        } else if (std.ascii.eqlIgnoreCase(name, "gzip") or std.ascii.eqlIgnoreCase(name, "x-gzip")) {
            weights.gzip = q;
        } else if (std.ascii.eqlIgnoreCase(name, "identity")) {
            weights.identity = q;
        } else if (std.mem.eql(u8, name, "*")) {
            weights.star = q;
        }
    }
    return weights;
}

/// Parses the parameters after a coding for `q=`: "q=0.5" -> 500. Null when malformed.
fn qValue(parameters: []const u8) ?u16 {
    var params = std.mem.splitScalar(u8, parameters, ';');
    while (params.next()) |raw| {
        const param = std.mem.trim(u8, raw, " \t");
        if (param.len < 2 or (param[0] != 'q' and param[0] != 'Q') or param[1] != '=') continue;
        return parseWeight(param[2..]);
    }
    return 1000;
}

/// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
fn parseWeight(text: []const u8) ?u16 {
    if (text.len == 0 or text.len > 5) return null;
    if (text[0] != '0' and text[0] != '1') return null;
    var value: u16 = @as(u16, text[0] - '0') * 1000;
    if (text.len == 1) return value;
    if (text[1] != '.') return null;
    var scale: u16 = 100;
    for (text[2..]) |c| {
        if (c < '0' or c > '9') return null;
        value += (c - '0') * scale;
        scale /= 10;
    }
    return if (value > 1000) null else value;
}

const both: std.EnumSet(Coding) = .full;
const only_gzip: std.EnumSet(Coding) = .initOne(.gzip);
const none: std.EnumSet(Coding) = .empty;

/// Field value, available codings, expected choice (null: identity).
const Case = struct { ?[]const u8, std.EnumSet(Coding), ?Coding };

fn expectChoices(cases: []const Case) !void {
    for (cases) |case| {
        errdefer std.debug.print("Accept-Encoding: {?s}\n", .{case[0]});
        try std.testing.expectEqual(case[2], choose(case[0], case[1]));
    }
}

test "accept_encoding: preference by q-value, br on ties" {
    try expectChoices(&.{
        .{ "gzip, deflate, br", both, .br },
        .{ "gzip, br;q=0.5", both, .gzip },
        .{ "gzip", both, .gzip },
        .{ "br", only_gzip, null },
        .{ "x-gzip", both, .gzip },
        .{ "*", both, .br },
        .{ "*;q=0.1, gzip;q=0.2", both, .gzip },
        .{ "br;q=0.3, gzip;q=0.3", both, .br },
        .{ "GZIP;Q=0.5, BR;q=0.4", both, .gzip },
    });
}

test "accept_encoding: identity's weight, named or through *" {
    try expectChoices(&.{
        // Identity preferred by weight.
        .{ "gzip;q=0.1, identity", both, null },
        .{ "gzip;q=0.1, identity", only_gzip, null },
        .{ "br;q=0.5, gzip;q=0.5, identity;q=0.6", both, null },
        .{ "identity;q=0.9, gzip", both, .gzip },
        // Equal weights: the coding.
        .{ "gzip;q=0.5, identity;q=0.5", both, .gzip },
        .{ "gzip, identity", only_gzip, .gzip },
        // `*` covers identity when it is not named.
        .{ "gzip;q=0.2, *", only_gzip, null },
        .{ "gzip;q=0.2, *;q=0.1", only_gzip, .gzip },
        .{ "br;q=0.2, *;q=0.5", both, .gzip }, // gzip at 0.5 through `*`, ties with identity
        .{ "br;q=0.2, *;q=0.5, identity;q=0.1", both, .gzip },
        .{ "*;q=0.5, identity", both, null },
        // Identity unnamed and no `*`: below any named coding, however low its weight.
        .{ "gzip;q=0.001", both, .gzip },
        .{ "deflate", both, null },
        // Identity refused: a coding if any is acceptable, else identity all the same.
        .{ "identity;q=0, gzip;q=0.1", both, .gzip },
        .{ "*;q=0, br", both, .br },
        .{ "identity;q=0", both, null },
        .{ "identity;q=0", none, null },
        .{ "*;q=0", both, null },
        .{ "*;q=0, identity;q=0.5, gzip;q=0.4", both, null },
    });
}

test "accept_encoding: q=0, absent field, identity and malformed weights" {
    try expectChoices(&.{
        .{ null, both, null },
        .{ "", both, null },
        .{ "identity", both, null },
        .{ "br;q=0, gzip;q=0", both, null },
        .{ "*;q=0, gzip", both, .gzip },
        .{ "br;q=2, gzip", both, .gzip },
        .{ "br;q=0.x, gzip;Q=0.001", both, .gzip },
        .{ "br ; q=1.000", both, .br },
        .{ "identity;q=bad, gzip;q=0.1", both, .gzip }, // a malformed member is ignored
        .{ " , ,gzip;q=0.3,, ", both, .gzip },
    });
    try std.testing.expectEqual(@as(?u16, 1000), parseWeight("1.0"));
    try std.testing.expectEqual(@as(?u16, 5), parseWeight("0.005"));
    try std.testing.expectEqual(@as(?u16, null), parseWeight("1.5"));
    try std.testing.expectEqual(@as(?u16, null), parseWeight("0.1234"));
}
