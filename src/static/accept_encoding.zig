//! Content negotiation on `Accept-Encoding` (RFC 9110 §12.5.3) for precompressed files:
//! which of the codings a file is available in (`br`, `gzip`) the client prefers, by
//! q-value (§12.4.2), with `*` standing for codings not named and `q=0` meaning "not
//! acceptable". Ties go to br, the smaller encoding.
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
    star: ?u16 = null,
};

/// The preferred coding among `available` (a set), or null for no coding (identity).
pub fn choose(field: ?[]const u8, available: std.EnumSet(Coding)) ?Coding {
    const value = field orelse return null;
    const weights = parse(value);
    var best: ?Coding = null;
    var best_q: u16 = 0;
    // Iterated in declaration order, so br wins ties.
    var it = available.iterator();
    while (it.next()) |coding| {
        const named = switch (coding) {
            .br => weights.br,
            .gzip => weights.gzip,
        };
        const q = named orelse weights.star orelse 0;
        if (q > best_q) {
            best = coding;
            best_q = q;
        }
    }
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

test "accept_encoding: preference by q-value, br on ties" {
    try std.testing.expectEqual(@as(?Coding, .br), choose("gzip, deflate, br", both));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("gzip, br;q=0.5", both));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("gzip", both));
    try std.testing.expectEqual(@as(?Coding, null), choose("br", .initOne(.gzip)));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("x-gzip", both));
    try std.testing.expectEqual(@as(?Coding, .br), choose("*", both));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("*;q=0.1, gzip;q=0.2", both));
}

test "accept_encoding: q=0, absent field, identity and malformed weights" {
    try std.testing.expectEqual(@as(?Coding, null), choose(null, both));
    try std.testing.expectEqual(@as(?Coding, null), choose("", both));
    try std.testing.expectEqual(@as(?Coding, null), choose("identity", both));
    try std.testing.expectEqual(@as(?Coding, null), choose("br;q=0, gzip;q=0", both));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("*;q=0, gzip", both));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("br;q=2, gzip", both));
    try std.testing.expectEqual(@as(?Coding, .gzip), choose("br;q=0.x, gzip;Q=0.001", both));
    try std.testing.expectEqual(@as(?Coding, .br), choose("br ; q=1.000", both));
    try std.testing.expectEqual(@as(?u16, 1000), parseWeight("1.0"));
    try std.testing.expectEqual(@as(?u16, 5), parseWeight("0.005"));
    try std.testing.expectEqual(@as(?u16, null), parseWeight("1.5"));
    try std.testing.expectEqual(@as(?u16, null), parseWeight("0.1234"));
}
