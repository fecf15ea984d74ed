//! The opening handshake, server side (RFC 6455 §4.2): checking the client's request, the
//! `Sec-WebSocket-Accept` value (§1.3, §4.2.2), subprotocol selection (§4.2.2 /subprotocol/)
//! and the negotiation of permessage-deflate (RFC 7692 §5, §7.1). Pure functions over header
//! fields: no I/O, no allocation.
const std = @import("std");
const http = @import("../http.zig");

/// The GUID every accept value is derived with (§1.3).
pub const guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// Length of a `Sec-WebSocket-Accept` value (base64 of a SHA-1 digest).
pub const accept_len = 28;
/// The only protocol version saker speaks (§4.1, §11.6).
pub const version = "13";

/// What is wrong with an upgrade request, and the status that answers it (§4.2.1, §4.4).
pub const Problem = enum {
    not_get,
    not_http11,
    no_upgrade_websocket,
    no_connection_upgrade,
    /// 426 with `Sec-WebSocket-Version: 13`.
    bad_version,
    bad_key,

    /// The status to answer with.
    pub fn status(problem: Problem) http.Status {
        return switch (problem) {
            .bad_version => .upgrade_required,
            else => .bad_request,
        };
    }

    /// A short explanation for the response body.
    pub fn message(problem: Problem) []const u8 {
        return switch (problem) {
            .not_get => "a WebSocket handshake must be a GET request",
            .not_http11 => "a WebSocket handshake needs HTTP/1.1",
            .no_upgrade_websocket => "the Upgrade field must name websocket",
            .no_connection_upgrade => "the Connection field must list upgrade",
            .bad_version => "unsupported Sec-WebSocket-Version; this server speaks 13",
            .bad_key => "Sec-WebSocket-Key must be 16 bytes in base64, sent once",
        };
    }
};

/// What the handshake check needs from a request.
pub const RequestView = struct {
    method: http.Method,
    version: http.Version,
    upgrade: ?[]const u8,
    connection_upgrade: bool,
    headers: []const http.Header,
};

/// Checks an upgrade request; null when it is a valid version-13 handshake.
pub fn check(req: RequestView) ?Problem {
    if (req.method != .GET) return .not_get;
    if (req.version != .http11) return .not_http11;
    if (!upgradesToWebSocket(req.upgrade)) return .no_upgrade_websocket;
    if (!req.connection_upgrade) return .no_connection_upgrade;
    var versions = fieldValues(req.headers, "sec-websocket-version");
    const v = versions.next() orelse return .bad_version;
    if (versions.next() != null or !std.mem.eql(u8, v, version)) return .bad_version;
    var keys = fieldValues(req.headers, "sec-websocket-key");
    const value = keys.next() orelse return .bad_key;
    if (keys.next() != null or !validKey(value)) return .bad_key;
    return null;
}

/// Whether an Upgrade field value lists the websocket protocol (case-insensitive).
pub fn upgradesToWebSocket(upgrade: ?[]const u8) bool {
    var it: http.ListIterator = .init(upgrade orelse return false);
    while (it.next()) |item| if (http.eqlLower(item, "websocket")) return true;
    return false;
}

/// The request's key (assumes `check` passed).
pub fn key(headers: []const http.Header) []const u8 {
    var keys = fieldValues(headers, "sec-websocket-key");
    return keys.next().?;
}

/// Whether `text` is base64 for exactly 16 bytes (§4.1 item 7).
pub fn validKey(text: []const u8) bool {
    if (text.len != 24 or !std.mem.endsWith(u8, text, "==")) return false;
    var decoded: [16]u8 = undefined;
    std.base64.standard.Decoder.decode(&decoded, text) catch return false;
    // The last character before the padding may only carry the 4 bits that are used.
    const last = std.mem.findScalar(u8, std.base64.standard_alphabet_chars[0..], text[21]) orelse return false;
    return last & 0x0f == 0;
}

/// The `Sec-WebSocket-Accept` value for `client_key`: base64(SHA-1(key ++ GUID)) (§1.3).
pub fn acceptKey(client_key: []const u8) [accept_len]u8 {
    var sha1: std.crypto.hash.Sha1 = .init(.{});
    sha1.update(client_key);
    sha1.update(guid);
    var digest: [std.crypto.hash.Sha1.digest_length]u8 = undefined;
    sha1.final(&digest);
    var out: [accept_len]u8 = undefined;
    _ = std.base64.standard.Encoder.encode(&out, &digest);
    return out;
}

/// The first of `supported` (the server's preference order) that the client offered in any
/// `Sec-WebSocket-Protocol` field, or null (§4.2.2: the response then names none).
pub fn selectSubprotocol(headers: []const http.Header, supported: []const []const u8) ?[]const u8 {
    for (supported) |wanted| {
        var fields = fieldValues(headers, "sec-websocket-protocol");
        while (fields.next()) |value| {
            var it: http.ListIterator = .init(value);
            while (it.next()) |offered| if (std.mem.eql(u8, offered, wanted)) return wanted;
        }
    }
    return null;
}

/// Values of every field called `name` (lowercase), in order.
pub const FieldIterator = struct {
    headers: []const http.Header,
    name: []const u8,
    index: usize = 0,

    /// The next value, or null.
    pub fn next(it: *FieldIterator) ?[]const u8 {
        while (it.index < it.headers.len) {
            const field = it.headers[it.index];
            it.index += 1;
            if (field.name.len == it.name.len and std.ascii.eqlIgnoreCase(field.name, it.name)) return field.value;
        }
        return null;
    }
};

fn fieldValues(headers: []const http.Header, comptime name: []const u8) FieldIterator {
    return .{ .headers = headers, .name = name };
}

/// permessage-deflate parameters agreed for one connection (RFC 7692 §7.1).
pub const Deflate = struct {
    /// The server resets its compressor after every message.
    server_no_context_takeover: bool = false,
    /// The client resets its compressor after every message, so the server's decompressor
    /// starts fresh for every message.
    client_no_context_takeover: bool = false,
    /// The LZ77 window the server may use when compressing (2^bits bytes).
    server_max_window_bits: u4 = 15,

    /// The response's extension field value, written into `buffer`.
    pub fn responseValue(d: Deflate, buffer: *[128]u8) []const u8 {
        var w: std.Io.Writer = .fixed(buffer);
        w.writeAll("permessage-deflate") catch unreachable;
        if (d.server_no_context_takeover) w.writeAll("; server_no_context_takeover") catch unreachable;
        if (d.client_no_context_takeover) w.writeAll("; client_no_context_takeover") catch unreachable;
        if (d.server_max_window_bits != 15) w.print("; server_max_window_bits={d}", .{d.server_max_window_bits}) catch unreachable;
        return w.buffered();
    }
};

/// Picks the first acceptable permessage-deflate offer in the `Sec-WebSocket-Extensions`
/// fields (RFC 7692 §5.1); null when there is none. Offers with unknown, repeated or invalid
/// parameters are declined (§7.1).
pub fn negotiateDeflate(headers: []const http.Header) ?Deflate {
    var fields = fieldValues(headers, "sec-websocket-extensions");
    while (fields.next()) |value| {
        var offers: ListSplitter = .init(value, ',');
        while (offers.next()) |offer| {
            if (parseDeflateOffer(offer)) |accepted| return accepted;
        }
    }
    return null;
}

fn parseDeflateOffer(offer: []const u8) ?Deflate {
    var parts: ListSplitter = .init(offer, ';');
    const name = parts.next() orelse return null;
    if (!std.mem.eql(u8, name, "permessage-deflate")) return null;
    var result: Deflate = .{};
    var seen: struct { snct: bool = false, cnct: bool = false, smwb: bool = false, cmwb: bool = false } = .{};
    while (parts.next()) |param| {
        const eq = std.mem.findScalar(u8, param, '=');
        const param_name = std.mem.trim(u8, param[0 .. eq orelse param.len], " \t");
        const value: ?[]const u8 = if (eq) |i| unquote(std.mem.trim(u8, param[i + 1 ..], " \t")) orelse return null else null;
        if (std.mem.eql(u8, param_name, "server_no_context_takeover")) {
            if (seen.snct or value != null) return null;
            seen.snct = true;
            result.server_no_context_takeover = true;
        } else if (std.mem.eql(u8, param_name, "client_no_context_takeover")) {
            if (seen.cnct or value != null) return null;
            seen.cnct = true;
            result.client_no_context_takeover = true;
        } else if (std.mem.eql(u8, param_name, "server_max_window_bits")) {
            if (seen.smwb) return null;
            seen.smwb = true;
            result.server_max_window_bits = windowBits(value orelse return null) orelse return null;
        } else if (std.mem.eql(u8, param_name, "client_max_window_bits")) {
            // The client may limit its own window; saker's decompressor takes any size.
            if (seen.cmwb) return null;
            seen.cmwb = true;
            if (value) |v| _ = windowBits(v) orelse return null;
        } else return null;
    }
    return result;
}

/// 8..15 in decimal without leading zeros (RFC 7692 §7.1.2).
fn windowBits(text: []const u8) ?u4 {
    if (text.len == 0 or text.len > 2 or text[0] == '0') return null;
    for (text) |c| if (c < '0' or c > '9') return null;
    const n = std.fmt.parseInt(u8, text, 10) catch return null;
    if (n < 8 or n > 15) return null;
    return @intCast(n);
}

fn unquote(text: []const u8) ?[]const u8 {
    if (text.len >= 2 and text[0] == '"' and text[text.len - 1] == '"') {
        const inner = text[1 .. text.len - 1];
        if (std.mem.findAny(u8, inner, "\"\\") != null) return null;
        return inner;
    }
    if (std.mem.findScalar(u8, text, '"') != null) return null;
    return text;
}

/// Splits on `separator` outside double quotes, trimming spaces and tabs, skipping empties.
const ListSplitter = struct {
    rest: []const u8,
    separator: u8,

    fn init(text: []const u8, separator: u8) ListSplitter {
        return .{ .rest = text, .separator = separator };
    }

    fn next(s: *ListSplitter) ?[]const u8 {
        while (s.rest.len > 0) {
            var quoted = false;
            var i: usize = 0;
            while (i < s.rest.len) : (i += 1) {
                const c = s.rest[i];
                if (c == '"') quoted = !quoted;
                if (c == s.separator and !quoted) break;
            }
            const item = std.mem.trim(u8, s.rest[0..i], " \t");
            s.rest = if (i < s.rest.len) s.rest[i + 1 ..] else s.rest[s.rest.len..];
            if (item.len > 0) return item;
        }
        return null;
    }
};

const testing = std.testing;

test "handshake: RFC 6455 §1.3 accept example" {
    try testing.expectEqualStrings("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", &acceptKey("dGhlIHNhbXBsZSBub25jZQ=="));
}

test "handshake: keys must be base64 of 16 bytes" {
    try testing.expect(validKey("dGhlIHNhbXBsZSBub25jZQ=="));
    try testing.expect(validKey("AAAAAAAAAAAAAAAAAAAAAA=="));
    try testing.expect(!validKey("dGhlIHNhbXBsZSBub25jZQ")); // no padding
    try testing.expect(!validKey("dGhlIHNhbXBsZSBub25jZQ=")); // 23 chars
    try testing.expect(!validKey("dGhlIHNhbXBsZSBub25jZQ===")); // 25 chars
    try testing.expect(!validKey("dGhlIHNhbXBsZSBub25j*Q==")); // not base64
    try testing.expect(!validKey("dGhlIHNhbXBsZSBub25jZR==")); // unused bits set
    try testing.expect(!validKey(""));
}

fn view(headers: []const http.Header) RequestView {
    return .{ .method = .GET, .version = .http11, .upgrade = "websocket", .connection_upgrade = true, .headers = headers };
}

test "handshake: check names the problem and its status" {
    const good = [_]http.Header{
        .{ .name = "Sec-WebSocket-Key", .value = "dGhlIHNhbXBsZSBub25jZQ==" },
        .{ .name = "Sec-WebSocket-Version", .value = "13" },
    };
    try testing.expectEqual(@as(?Problem, null), check(view(&good)));
    var r = view(&good);
    r.method = .POST;
    try testing.expectEqual(Problem.not_get, check(r).?);
    r = view(&good);
    r.version = .http10;
    try testing.expectEqual(Problem.not_http11, check(r).?);
    r = view(&good);
    r.upgrade = "h2c";
    try testing.expectEqual(Problem.no_upgrade_websocket, check(r).?);
    r.upgrade = "foo, WebSocket";
    try testing.expectEqual(@as(?Problem, null), check(r));
    r.connection_upgrade = false;
    try testing.expectEqual(Problem.no_connection_upgrade, check(r).?);

    const old = [_]http.Header{
        .{ .name = "Sec-WebSocket-Key", .value = "dGhlIHNhbXBsZSBub25jZQ==" },
        .{ .name = "Sec-WebSocket-Version", .value = "8" },
    };
    try testing.expectEqual(Problem.bad_version, check(view(&old)).?);
    try testing.expectEqual(http.Status.upgrade_required, Problem.bad_version.status());
    const no_version = [_]http.Header{.{ .name = "Sec-WebSocket-Key", .value = "dGhlIHNhbXBsZSBub25jZQ==" }};
    try testing.expectEqual(Problem.bad_version, check(view(&no_version)).?);
    const bad_key = [_]http.Header{
        .{ .name = "Sec-WebSocket-Key", .value = "short" },
        .{ .name = "Sec-WebSocket-Version", .value = "13" },
    };
    try testing.expectEqual(Problem.bad_key, check(view(&bad_key)).?);
    try testing.expectEqual(http.Status.bad_request, Problem.bad_key.status());
    const two_keys = good ++ [_]http.Header{.{ .name = "sec-websocket-key", .value = "AAAAAAAAAAAAAAAAAAAAAA==" }};
    try testing.expectEqual(Problem.bad_key, check(view(&two_keys)).?);
    const no_key = [_]http.Header{.{ .name = "Sec-WebSocket-Version", .value = "13" }};
    try testing.expectEqual(Problem.bad_key, check(view(&no_key)).?);
}

test "handshake: the server's preferred subprotocol among those offered" {
    const headers = [_]http.Header{
        .{ .name = "Sec-WebSocket-Protocol", .value = "chat, superchat" },
        .{ .name = "sec-websocket-protocol", .value = "v2.json" },
    };
    try testing.expectEqualStrings("superchat", selectSubprotocol(&headers, &.{ "superchat", "chat" }).?);
    try testing.expectEqualStrings("v2.json", selectSubprotocol(&headers, &.{ "v3", "v2.json" }).?);
    try testing.expectEqual(@as(?[]const u8, null), selectSubprotocol(&headers, &.{"mqtt"}));
    try testing.expectEqual(@as(?[]const u8, null), selectSubprotocol(&.{}, &.{"chat"}));
}

test "handshake: permessage-deflate offers" {
    const Case = struct { value: []const u8, expected: ?Deflate };
    const cases = [_]Case{
        .{ .value = "permessage-deflate", .expected = .{} },
        .{ .value = "permessage-deflate; client_max_window_bits", .expected = .{} },
        .{ .value = "permessage-deflate; client_max_window_bits=10", .expected = .{} },
        .{ .value = "permessage-deflate;server_no_context_takeover", .expected = .{ .server_no_context_takeover = true } },
        .{ .value = "permessage-deflate; client_no_context_takeover", .expected = .{ .client_no_context_takeover = true } },
        .{ .value = "permessage-deflate; server_max_window_bits=9", .expected = .{ .server_max_window_bits = 9 } },
        .{ .value = "permessage-deflate; server_max_window_bits=\"12\"", .expected = .{ .server_max_window_bits = 12 } },
        .{ .value = "x-webkit-deflate-frame", .expected = null },
        .{ .value = "permessage-deflate; server_max_window_bits", .expected = null },
        .{ .value = "permessage-deflate; server_max_window_bits=7", .expected = null },
        .{ .value = "permessage-deflate; server_max_window_bits=16", .expected = null },
        .{ .value = "permessage-deflate; server_max_window_bits=010", .expected = null },
        .{ .value = "permessage-deflate; server_no_context_takeover; server_no_context_takeover", .expected = null },
        .{ .value = "permessage-deflate; server_no_context_takeover=1", .expected = null },
        .{ .value = "permessage-deflate; unknown", .expected = null },
        // The first acceptable offer wins; a declined one is skipped.
        .{ .value = "permessage-deflate; bogus, permessage-deflate; client_no_context_takeover", .expected = .{ .client_no_context_takeover = true } },
        .{ .value = "foo, permessage-deflate; server_max_window_bits=10, permessage-deflate", .expected = .{ .server_max_window_bits = 10 } },
    };
    for (cases) |case| {
        errdefer std.debug.print("offer: {s}\n", .{case.value});
        const headers = [_]http.Header{.{ .name = "Sec-WebSocket-Extensions", .value = case.value }};
        try testing.expectEqual(case.expected, negotiateDeflate(&headers));
    }
    var buffer: [128]u8 = undefined;
    const all: Deflate = .{ .server_no_context_takeover = true, .client_no_context_takeover = true, .server_max_window_bits = 10 };
    try testing.expectEqualStrings(
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10",
        all.responseValue(&buffer),
    );
    try testing.expectEqualStrings("permessage-deflate", (Deflate{}).responseValue(&buffer));
}
