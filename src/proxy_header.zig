//! The PROXY protocol header (versions 1 and 2, haproxy.org's `proxy-protocol.txt`): what a
//! load balancer such as HAProxy sends first on a connection so that the server learns the
//! client's address. Sans-I/O: `parse` looks at the bytes received so far and says whether the
//! header is whole, how long it is and whom it names, or that it is malformed.
const std = @import("std");
const assert = std.debug.assert;
const IpAddress = std.Io.net.IpAddress;

/// The 12 bytes that start a version 2 header.
pub const v2_signature = "\r\n\r\n\x00\r\nQUIT\n";
/// The longest version 1 header, CRLF included (the specification's bound).
pub const v1_bytes_max = 107;

/// What `parse` found.
pub const Parsed = union(enum) {
    /// Not whole yet: at least this many bytes in all are needed.
    incomplete: usize,
    /// A whole header of `len` bytes. `source` is the client's address, or null when the
    /// header names none (v1 `UNKNOWN`, v2 `LOCAL`: the proxy's own connection, such as a
    /// health check, or an address family other than IPv4 and IPv6): the connection's own
    /// peer address stands.
    header: struct { len: usize, source: ?IpAddress },
    /// Not a PROXY header, or a malformed one: the connection must be closed.
    invalid: []const u8,
};

/// Parses the header at the start of `bytes`; `bytes_max` bounds a version 2 header's length
/// (a longer one is invalid).
pub fn parse(bytes: []const u8, bytes_max: usize) Parsed {
    assert(bytes_max >= 16 + 36);
    // Decide the version from the first bytes that differ.
    const v1_prefix = "PROXY ";
    const probe = @min(bytes.len, v1_prefix.len);
    if (std.mem.eql(u8, bytes[0..probe], v1_prefix[0..probe])) {
        if (bytes.len < v1_prefix.len) return .{ .incomplete = v1_prefix.len };
        return parseV1(bytes);
    }
    const probe2 = @min(bytes.len, v2_signature.len);
    if (std.mem.eql(u8, bytes[0..probe2], v2_signature[0..probe2])) return parseV2(bytes, bytes_max);
    return .{ .invalid = "not a PROXY protocol header" };
}

fn parseV1(bytes: []const u8) Parsed {
    const window = bytes[0..@min(bytes.len, v1_bytes_max)];
    const end = std.mem.find(u8, window, "\r\n") orelse {
        if (bytes.len >= v1_bytes_max) return .{ .invalid = "a PROXY v1 line longer than 107 bytes" };
        // Anything but the line's characters is wrong at once.
        for (window) |c| if (c < 0x20 and c != '\r') return .{ .invalid = "a control character in a PROXY v1 line" };
        return .{ .incomplete = bytes.len + 1 };
    };
    const line = window["PROXY ".len..end];
    const len = end + 2;
    var fields = std.mem.splitScalar(u8, line, ' ');
    const protocol = fields.next().?;
    if (std.mem.eql(u8, protocol, "UNKNOWN")) return .{ .header = .{ .len = len, .source = null } };
    const ip6 = std.mem.eql(u8, protocol, "TCP6");
    if (!ip6 and !std.mem.eql(u8, protocol, "TCP4")) return .{ .invalid = "a PROXY v1 protocol other than TCP4, TCP6 and UNKNOWN" };
    var text: [4][]const u8 = undefined;
    for (&text) |*field| field.* = fields.next() orelse return .{ .invalid = "a PROXY v1 line with fields missing" };
    if (fields.next() != null) return .{ .invalid = "a PROXY v1 line with extra fields" };
    const source_port = port(text[2]) orelse return .{ .invalid = "a bad port in a PROXY v1 line" };
    _ = port(text[3]) orelse return .{ .invalid = "a bad port in a PROXY v1 line" };
    const source = (if (ip6) IpAddress.parseIp6(text[0], source_port) else IpAddress.parseIp4(text[0], source_port)) catch
        return .{ .invalid = "a bad address in a PROXY v1 line" };
    _ = (if (ip6) IpAddress.parseIp6(text[1], 0) else IpAddress.parseIp4(text[1], 0)) catch
        return .{ .invalid = "a bad address in a PROXY v1 line" };
    // A scope (`%eth0`) has no place here: the address is the client's, seen by the proxy.
    if (ip6 and std.mem.findScalar(u8, text[0], '%') != null) return .{ .invalid = "a bad address in a PROXY v1 line" };
    return .{ .header = .{ .len = len, .source = source } };
}

/// A decimal port, 0-65535, without a sign or leading zeros.
fn port(text: []const u8) ?u16 {
    if (text.len == 0 or text.len > 5) return null;
    if (text.len > 1 and text[0] == '0') return null;
    for (text) |c| if (!std.ascii.isDigit(c)) return null;
    return std.fmt.parseInt(u16, text, 10) catch null;
}

fn parseV2(bytes: []const u8, bytes_max: usize) Parsed {
    if (bytes.len < 16) return .{ .incomplete = 16 };
    const version_command = bytes[12];
    if (version_command >> 4 != 2) return .{ .invalid = "a PROXY v2 header of another version" };
    const command = version_command & 0xf;
    if (command > 1) return .{ .invalid = "a PROXY v2 header with an unknown command" };
    const family = bytes[13];
    const length = std.mem.readInt(u16, bytes[14..16], .big);
    const len = 16 + @as(usize, length);
    if (len > bytes_max) return .{ .invalid = "a PROXY v2 header longer than the limit" };
    if (bytes.len < len) return .{ .incomplete = len };
    // LOCAL: the proxy speaks for itself (a health check); the addresses are to be ignored.
    if (command == 0) return .{ .header = .{ .len = len, .source = null } };
    const body = bytes[16..len];
    switch (family) {
        0x11 => { // TCP over IPv4
            if (body.len < 12) return .{ .invalid = "a PROXY v2 IPv4 header too short for its addresses" };
            return .{ .header = .{ .len = len, .source = .{ .ip4 = .{
                .bytes = body[0..4].*,
                .port = std.mem.readInt(u16, body[8..10], .big),
            } } } };
        },
        0x21 => { // TCP over IPv6
            if (body.len < 36) return .{ .invalid = "a PROXY v2 IPv6 header too short for its addresses" };
            return .{ .header = .{ .len = len, .source = .{ .ip6 = .{
                .bytes = body[0..16].*,
                .port = std.mem.readInt(u16, body[32..34], .big),
            } } } };
        },
        // UNSPEC, UDP, UNIX sockets: no IP client address to take.
        0x00, 0x12, 0x22, 0x31, 0x32 => return .{ .header = .{ .len = len, .source = null } },
        else => return .{ .invalid = "a PROXY v2 header with an unknown address family" },
    }
}

/// An IPv4 or IPv6 network (`10.0.0.0/8`, `::1/128`, or one address): the peers a PROXY
/// header is taken from.
pub const Cidr = struct {
    address: IpAddress,
    prefix_bits: u8,

    /// `ADDRESS` or `ADDRESS/BITS`; null when it is neither.
    pub fn parse(text: []const u8) ?Cidr {
        const slash = std.mem.findScalar(u8, text, '/');
        const address = IpAddress.parse(text[0 .. slash orelse text.len], 0) catch return null;
        const all: u8 = switch (address) {
            .ip4 => 32,
            .ip6 => 128,
        };
        const bits = if (slash) |s| std.fmt.parseInt(u8, text[s + 1 ..], 10) catch return null else all;
        if (bits > all) return null;
        // An IPv4-mapped network (::ffff:10.0.0.0/104) is the IPv4 one, as peers are matched.
        if (address == .ip6 and std.mem.eql(u8, address.ip6.bytes[0..12], &mapped_prefix)) {
            if (bits < 96) return null;
            return .{ .address = .{ .ip4 = .{ .bytes = address.ip6.bytes[12..16].*, .port = 0 } }, .prefix_bits = bits - 96 };
        }
        return .{ .address = address, .prefix_bits = bits };
    }

    const mapped_prefix = [12]u8{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

    /// Whether `peer` is in the network (an IPv4 address in `::ffff:0:0/96` counts as IPv4).
    pub fn contains(cidr: Cidr, peer: IpAddress) bool {
        var mine: [16]u8 = undefined;
        var theirs: [16]u8 = undefined;
        const my_len = bytesOf(cidr.address, &mine);
        const their_len = bytesOf(peer, &theirs);
        if (my_len != their_len) return false;
        const full = cidr.prefix_bits / 8;
        if (!std.mem.eql(u8, mine[0..full], theirs[0..full])) return false;
        const rest: u3 = @intCast(cidr.prefix_bits % 8);
        if (rest == 0) return true;
        const mask: u8 = @as(u8, 0xff) << @intCast(8 - @as(u4, rest));
        return mine[full] & mask == theirs[full] & mask;
    }

    fn bytesOf(address: IpAddress, out: *[16]u8) usize {
        switch (address) {
            .ip4 => |a| {
                out[0..4].* = a.bytes;
                return 4;
            },
            .ip6 => |a| {
                if (std.mem.eql(u8, a.bytes[0..12], &mapped_prefix)) {
                    out[0..4].* = a.bytes[12..16].*;
                    return 4;
                }
                out.* = a.bytes;
                return 16;
            },
        }
    }
};

const testing = std.testing;

fn zeros(comptime n: usize) *const [n]u8 {
    const bytes: [n]u8 = @splat(0);
    return &bytes;
}

fn expectSource(parsed: Parsed, len: usize, text: ?[]const u8) !void {
    const header = switch (parsed) {
        .header => |h| h,
        else => return error.TestExpectedHeader,
    };
    try testing.expectEqual(len, header.len);
    if (text) |expected| {
        var buffer: [64]u8 = undefined;
        try testing.expectEqualStrings(expected, try std.fmt.bufPrint(&buffer, "{f}", .{header.source.?}));
    } else try testing.expectEqual(@as(?IpAddress, null), header.source);
}

/// `parse` on every proper prefix of `bytes` says incomplete, asking for more than it has.
fn expectPrefixesIncomplete(bytes: []const u8) !void {
    for (0..bytes.len) |n| {
        switch (parse(bytes[0..n], 256)) {
            .incomplete => |needed| try testing.expect(needed > n and needed <= bytes.len),
            else => return error.TestExpectedIncomplete,
        }
    }
}

test "proxy header: version 1 lines of the specification, and each of their prefixes" {
    const cases = [_]struct { []const u8, ?[]const u8 }{
        .{ "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n", "192.168.0.1:56324" },
        .{ "PROXY TCP6 2001:db8::1 2001:db8::2 4000 80\r\n", "[2001:db8::1]:4000" },
        .{ "PROXY UNKNOWN\r\n", null },
        .{ "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n", null },
    };
    for (cases) |case| {
        var bytes: [128]u8 = undefined;
        @memcpy(bytes[0..case[0].len], case[0]);
        @memcpy(bytes[case[0].len..][0..4], "GET ");
        try expectSource(parse(bytes[0 .. case[0].len + 4], 256), case[0].len, case[1]);
        try expectPrefixesIncomplete(case[0]);
    }
}

test "proxy header: malformed version 1 lines are refused" {
    const spaces: [80]u8 = @splat(' ');
    const bad = [_][]const u8{
        "GET / HTTP/1.1\r\n",
        "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
        "PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n",
        "PROXY TCP4 ::1 ::1 1 2\r\n",
        "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
        "PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4\n5.6.7.8 1 2\r\n",
        "PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2" ++ spaces,
    };
    for (bad) |bytes| {
        errdefer std.debug.print("{s}\n", .{bytes});
        try testing.expect(parse(bytes, 256) == .invalid);
    }
}

test "proxy header: version 2, IPv4 and IPv6 with TLVs after the addresses, LOCAL, UNSPEC" {
    const ip4 = v2_signature ++ "\x21\x11\x00\x0f" ++ "\xc0\x00\x02\x07" ++ "\x0a\x00\x00\x01" ++ "\xd4\x31" ++ "\x01\xbb" ++ "\x04\x00\x00";
    try expectSource(parse(ip4 ++ "GET", 256), ip4.len, "192.0.2.7:54321");
    try expectPrefixesIncomplete(ip4);
    const ip6 = v2_signature ++ "\x21\x21\x00\x24" ++ "\x20\x01\x0d\xb8" ++ zeros(11) ++ "\x09" ++ zeros(15) ++ "\x01" ++ "\x00\x50" ++ "\x00\x51";
    try expectSource(parse(ip6, 256), ip6.len, "[2001:db8::9]:80");
    const local = v2_signature ++ "\x20\x00\x00\x00";
    try expectSource(parse(local, 256), 16, null);
    const unspecified = v2_signature ++ "\x21\x00\x00\x00";
    try expectSource(parse(unspecified, 256), 16, null);
}

test "proxy header: malformed version 2 headers are refused" {
    const bad = [_][]const u8{
        v2_signature ++ "\x11\x11\x00\x0c" ++ zeros(12), // version 1 in a v2 header
        v2_signature ++ "\x22\x11\x00\x0c" ++ zeros(12), // command 2
        v2_signature ++ "\x21\x11\x00\x08" ++ zeros(8), // IPv4 without room for its addresses
        v2_signature ++ "\x21\x21\x00\x0c" ++ zeros(12), // IPv6 likewise
        v2_signature ++ "\x21\x41\x00\x00", // an unknown family
        v2_signature ++ "\x21\x11\x01\x00", // 256 bytes of addresses: longer than the limit
        "\r\n\r\n\x00\r\nQUIZ\n\x21\x11\x00\x00",
    };
    for (bad) |bytes| try testing.expect(parse(bytes, 256) == .invalid);
}

test "proxy header: networks hold their addresses, IPv4-mapped IPv6 included" {
    const net8 = Cidr.parse("10.0.0.0/8").?;
    try testing.expect(net8.contains(try IpAddress.parse("10.200.1.2", 9)));
    try testing.expect(!net8.contains(try IpAddress.parse("11.0.0.1", 9)));
    try testing.expect(net8.contains(try IpAddress.parse("::ffff:10.1.2.3", 9)));
    const loopback = Cidr.parse("127.0.0.1").?;
    try testing.expect(loopback.contains(try IpAddress.parse("127.0.0.1", 1)));
    try testing.expect(!loopback.contains(try IpAddress.parse("127.0.0.7", 1)));
    const odd = Cidr.parse("192.168.0.0/23").?;
    try testing.expect(odd.contains(try IpAddress.parse("192.168.1.255", 1)));
    try testing.expect(!odd.contains(try IpAddress.parse("192.168.2.0", 1)));
    const six = Cidr.parse("2001:db8::/32").?;
    try testing.expect(six.contains(try IpAddress.parse("2001:db8:ffff::1", 1)));
    try testing.expect(!six.contains(try IpAddress.parse("10.0.0.1", 1)));
    try testing.expect(Cidr.parse("0.0.0.0/0").?.contains(try IpAddress.parse("8.8.8.8", 1)));
    // A mapped network is its IPv4 network.
    const mapped = Cidr.parse("::ffff:10.0.0.0/104").?;
    try testing.expectEqual(@as(u8, 8), mapped.prefix_bits);
    try testing.expect(mapped.contains(try IpAddress.parse("10.9.9.9", 1)));
    try testing.expect(!mapped.contains(try IpAddress.parse("11.0.0.1", 1)));
    try testing.expectEqual(@as(?Cidr, null), Cidr.parse("::ffff:10.0.0.0/90"));
    for ([_][]const u8{ "10.0.0.0/33", "::/129", "10.0.0/8", "x", "10.0.0.0/", "10.0.0.0/a" }) |text| try testing.expectEqual(@as(?Cidr, null), Cidr.parse(text));
}
