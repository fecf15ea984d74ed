//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte header, each type's payload, the rules a frame
//! must meet on its own (length, stream, padding), and encoders for the frames a server sends.
//! Sans-I/O: `parse` takes the bytes received so far and returns a whole frame or says how
//! many more it needs, so a frame split anywhere reads the same.
const std = @import("std");
const assert = std.debug.assert;

/// What a client sends first on every HTTP/2 connection (RFC 9113 §3.4).
pub const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const header_len = 9;

/// The smallest SETTINGS_MAX_FRAME_SIZE, and the initial one (RFC 9113 §6.5.2).
pub const frame_size_initial = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE.
pub const frame_size_max = (1 << 24) - 1;
/// The largest flow-control window (RFC 9113 §6.9.1).
pub const window_max = (1 << 31) - 1;
/// The initial flow-control window of a connection and of each stream (RFC 9113 §6.9.2).
pub const window_initial = 65_535;

pub const Type = enum(u8) {
    data = 0x0,
    headers = 0x1,
    priority = 0x2,
    rst_stream = 0x3,
    settings = 0x4,
    push_promise = 0x5,
    ping = 0x6,
    goaway = 0x7,
    window_update = 0x8,
    continuation = 0x9,
    /// Types this side does not know are ignored (RFC 9113 §4.1, §5.5).
    _,
};

pub const Flags = struct {
    pub const end_stream = 0x1;
    pub const ack = 0x1;
    pub const end_headers = 0x4;
    pub const padded = 0x8;
    pub const priority = 0x20;
};

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
pub const ErrorCode = enum(u32) {
    no_error = 0x0,
    protocol_error = 0x1,
    internal_error = 0x2,
    flow_control_error = 0x3,
    settings_timeout = 0x4,
    stream_closed = 0x5,
    frame_size_error = 0x6,
    refused_stream = 0x7,
    cancel = 0x8,
    compression_error = 0x9,
    connect_error = 0xa,
    enhance_your_calm = 0xb,
    inadequate_security = 0xc,
    http_1_1_required = 0xd,
    /// Unknown codes mean nothing special (RFC 9113 §7).
    _,
};

/// SETTINGS parameters (RFC 9113 §6.5.2; RFC 8441 §3; RFC 9218 §2.1).
pub const Setting = enum(u16) {
    header_table_size = 0x1,
    enable_push = 0x2,
    max_concurrent_streams = 0x3,
    initial_window_size = 0x4,
    max_frame_size = 0x5,
    max_header_list_size = 0x6,
    enable_connect_protocol = 0x8,
    no_rfc7540_priorities = 0x9,
    /// Unknown parameters are ignored (RFC 9113 §6.5.2).
    _,
};

pub const Header = struct {
    /// Payload length.
    length: u24,
    type: Type,
    flags: u8,
    /// The reserved bit is dropped (RFC 9113 §4.1: ignored on receipt).
    stream_id: u31,

    pub fn read(bytes: *const [header_len]u8) Header {
        return .{
            .length = std.mem.readInt(u24, bytes[0..3], .big),
            .type = @fromBackingInt(@intCast(bytes[3])),
            .flags = bytes[4],
            .stream_id = @truncate(std.mem.readInt(u32, bytes[5..9], .big)),
        };
    }

    pub fn write(h: Header, out: *[header_len]u8) void {
        std.mem.writeInt(u24, out[0..3], h.length, .big);
        out[3] = @backingInt(h.type);
        out[4] = h.flags;
        std.mem.writeInt(u32, out[5..9], h.stream_id, .big);
    }

    pub fn has(h: Header, flag: u8) bool {
        return h.flags & flag != 0;
    }
};

/// A frame whose whole payload has arrived.
pub const Frame = struct {
    header: Header,
    payload: []const u8,
};

/// A rule a frame broke, and how much of the connection it costs (RFC 9113 §5.4).
pub const Violation = struct {
    code: ErrorCode,
    /// A connection error ends the connection with GOAWAY; a stream error resets the stream.
    scope: enum { connection, stream },
    why: []const u8,
};

/// What `parse` found at the start of the bytes.
pub const Parsed = union(enum) {
    /// A frame, and the bytes it took (header and payload).
    frame: struct { frame: Frame, len: usize },
    /// Not a whole frame yet: at least this many bytes in all are needed.
    incomplete: usize,
    /// The frame breaks a rule that its header alone shows (its length, its stream); no
    /// need to wait for its payload.
    violation: Violation,
};

/// Reads the frame at the start of `bytes`. `max_frame_size` is this side's
/// SETTINGS_MAX_FRAME_SIZE: a longer frame is a FRAME_SIZE_ERROR (RFC 9113 §4.2), said as soon
/// as the header is in, so a peer cannot make this side wait for (or buffer) a frame it will
/// refuse.
pub fn parse(bytes: []const u8, max_frame_size: u24) Parsed {
    assert(max_frame_size >= frame_size_initial);
    if (bytes.len < header_len) return .{ .incomplete = header_len };
    const header = Header.read(bytes[0..header_len]);
    if (check(header, max_frame_size)) |violation| return .{ .violation = violation };
    const len = header_len + @as(usize, header.length);
    if (bytes.len < len) return .{ .incomplete = len };
    return .{ .frame = .{ .frame = .{ .header = header, .payload = bytes[header_len..len] }, .len = len } };
}

/// The rules of RFC 9113 §6 that a frame's header alone shows.
pub fn check(h: Header, max_frame_size: u24) ?Violation {
    if (h.length > max_frame_size) return connectionError(.frame_size_error, "a frame longer than SETTINGS_MAX_FRAME_SIZE");
    const on_stream = h.stream_id != 0;
    switch (h.type) {
        .data, .headers, .continuation => if (!on_stream) return connectionError(.protocol_error, "DATA, HEADERS or CONTINUATION on stream 0"),
        .priority => {
            if (!on_stream) return connectionError(.protocol_error, "PRIORITY on stream 0");
            if (h.length != 5) return .{ .code = .frame_size_error, .scope = .stream, .why = "a PRIORITY frame not 5 bytes long" };
        },
        .rst_stream => {
            if (!on_stream) return connectionError(.protocol_error, "RST_STREAM on stream 0");
            if (h.length != 4) return connectionError(.frame_size_error, "an RST_STREAM frame not 4 bytes long");
        },
        .settings => {
            if (on_stream) return connectionError(.protocol_error, "SETTINGS on a stream");
            if (h.has(Flags.ack) and h.length != 0) return connectionError(.frame_size_error, "a SETTINGS acknowledgement with a payload");
            if (h.length % 6 != 0) return connectionError(.frame_size_error, "a SETTINGS frame not a multiple of 6 bytes long");
        },
        // A client cannot push (RFC 9113 §8.4).
        .push_promise => return connectionError(.protocol_error, "PUSH_PROMISE from a client"),
        .ping => {
            if (on_stream) return connectionError(.protocol_error, "PING on a stream");
            if (h.length != 8) return connectionError(.frame_size_error, "a PING frame not 8 bytes long");
        },
        .goaway => {
            if (on_stream) return connectionError(.protocol_error, "GOAWAY on a stream");
            if (h.length < 8) return connectionError(.frame_size_error, "a GOAWAY frame shorter than 8 bytes");
        },
        .window_update => if (h.length != 4) return connectionError(.frame_size_error, "a WINDOW_UPDATE frame not 4 bytes long"),
        _ => {},
    }
    return null;
}

fn connectionError(code: ErrorCode, why: []const u8) Violation {
    return .{ .code = code, .scope = .connection, .why = why };
}

/// The payload of a DATA or HEADERS frame without its padding (RFC 9113 §6.1, §6.2), and for
/// HEADERS without its priority fields.
pub fn content(f: Frame) error{Padding}![]const u8 {
    assert(f.header.type == .data or f.header.type == .headers);
    var payload = f.payload;
    if (f.header.has(Flags.padded)) {
        if (payload.len == 0) return error.Padding;
        const pad = payload[0];
        // The padding may not take the whole payload (RFC 9113 §6.1: PROTOCOL_ERROR).
        if (pad >= payload.len) return error.Padding;
        payload = payload[1 .. payload.len - pad];
    }
    if (f.header.type == .headers and f.header.has(Flags.priority)) {
        if (payload.len < 5) return error.Padding;
        payload = payload[5..];
    }
    return payload;
}

/// The stream a HEADERS frame with priority fields, or a PRIORITY frame, depends on (for the
/// rule that a stream cannot depend on itself, RFC 9113 §5.3.1).
pub fn dependency(f: Frame) ?u31 {
    var payload = f.payload;
    switch (f.header.type) {
        .priority => {},
        .headers => {
            if (!f.header.has(Flags.priority)) return null;
            if (f.header.has(Flags.padded)) payload = if (payload.len > 0) payload[1..] else payload;
        },
        else => return null,
    }
    if (payload.len < 5) return null;
    return @truncate(std.mem.readInt(u32, payload[0..4], .big));
}

/// One parameter of a SETTINGS payload.
pub const SettingValue = struct { id: Setting, value: u32 };

/// The parameters of a SETTINGS payload, in order (its length is checked by `check`).
pub const SettingsIterator = struct {
    payload: []const u8,

    pub fn next(it: *SettingsIterator) ?SettingValue {
        if (it.payload.len < 6) return null;
        defer it.payload = it.payload[6..];
        return .{
            .id = @fromBackingInt(@intCast(std.mem.readInt(u16, it.payload[0..2], .big))),
            .value = std.mem.readInt(u32, it.payload[2..6], .big),
        };
    }
};

/// The window increment of a WINDOW_UPDATE payload (checked to be 4 bytes long).
pub fn windowIncrement(payload: []const u8) u31 {
    return @truncate(std.mem.readInt(u32, payload[0..4], .big));
}

/// The error code of an RST_STREAM payload.
pub fn rstCode(payload: []const u8) ErrorCode {
    return @fromBackingInt(@intCast(std.mem.readInt(u32, payload[0..4], .big)));
}

/// The fields of a GOAWAY payload.
pub fn goaway(payload: []const u8) struct { last_stream_id: u31, code: ErrorCode, debug: []const u8 } {
    return .{
        .last_stream_id = @truncate(std.mem.readInt(u32, payload[0..4], .big)),
        .code = @fromBackingInt(@intCast(std.mem.readInt(u32, payload[4..8], .big))),
        .debug = payload[8..],
    };
}

// Encoders. Each writes a whole frame into `out` and returns its length.

pub fn writeSettings(out: []u8, values: []const SettingValue) usize {
    const len = header_len + 6 * values.len;
    assert(out.len >= len);
    (Header{ .length = @intCast(6 * values.len), .type = .settings, .flags = 0, .stream_id = 0 }).write(out[0..header_len]);
    for (values, 0..) |v, i| {
        const at = out[header_len + 6 * i ..][0..6];
        std.mem.writeInt(u16, at[0..2], @backingInt(v.id), .big);
        std.mem.writeInt(u32, at[2..6], v.value, .big);
    }
    return len;
}

pub fn writeSettingsAck(out: []u8) usize {
    (Header{ .length = 0, .type = .settings, .flags = Flags.ack, .stream_id = 0 }).write(out[0..header_len]);
    return header_len;
}

pub fn writePing(out: []u8, ack: bool, data: *const [8]u8) usize {
    (Header{ .length = 8, .type = .ping, .flags = if (ack) Flags.ack else 0, .stream_id = 0 }).write(out[0..header_len]);
    @memcpy(out[header_len..][0..8], data);
    return header_len + 8;
}

pub fn writeGoaway(out: []u8, last_stream_id: u31, code: ErrorCode, debug: []const u8) usize {
    const len = header_len + 8 + debug.len;
    assert(out.len >= len);
    (Header{ .length = @intCast(8 + debug.len), .type = .goaway, .flags = 0, .stream_id = 0 }).write(out[0..header_len]);
    std.mem.writeInt(u32, out[header_len..][0..4], last_stream_id, .big);
    std.mem.writeInt(u32, out[header_len + 4 ..][0..4], @backingInt(code), .big);
    @memcpy(out[header_len + 8 ..][0..debug.len], debug);
    return len;
}

pub fn writeWindowUpdate(out: []u8, stream_id: u31, increment: u31) usize {
    assert(increment > 0);
    (Header{ .length = 4, .type = .window_update, .flags = 0, .stream_id = stream_id }).write(out[0..header_len]);
    std.mem.writeInt(u32, out[header_len..][0..4], increment, .big);
    return header_len + 4;
}

pub fn writeRstStream(out: []u8, stream_id: u31, code: ErrorCode) usize {
    assert(stream_id != 0);
    (Header{ .length = 4, .type = .rst_stream, .flags = 0, .stream_id = stream_id }).write(out[0..header_len]);
    std.mem.writeInt(u32, out[header_len..][0..4], @backingInt(code), .big);
    return header_len + 4;
}

const testing = std.testing;

test "frame: the header reads what it wrote, and the reserved bit is dropped" {
    var bytes: [header_len]u8 = undefined;
    const h: Header = .{ .length = 0x123456, .type = .headers, .flags = Flags.end_stream | Flags.end_headers, .stream_id = 0x7fff_ffff };
    h.write(&bytes);
    try testing.expectEqualSlices(u8, &.{ 0x12, 0x34, 0x56, 0x01, 0x05, 0x7f, 0xff, 0xff, 0xff }, &bytes);
    try testing.expectEqual(h, Header.read(&bytes));
    bytes[5] |= 0x80;
    try testing.expectEqual(h.stream_id, Header.read(&bytes).stream_id);
}

/// Frames parsed from `stream`, fed to `parse` the way a receive buffer fills: `cuts` says
/// where each read ends. Returns the frames' types and payloads, joined, or the violation.
fn parseAll(stream: []const u8, cuts: []const usize, out: []u8) ![]const u8 {
    var buffer: [256]u8 = undefined;
    var have: usize = 0;
    var fed: usize = 0;
    var n: usize = 0;
    var cut_index: usize = 0;
    while (true) {
        switch (parse(buffer[0..have], frame_size_initial)) {
            .frame => |f| {
                out[n] = @backingInt(f.frame.header.type);
                @memcpy(out[n + 1 ..][0..f.frame.payload.len], f.frame.payload);
                n += 1 + f.frame.payload.len;
                std.mem.copyForwards(u8, buffer[0 .. have - f.len], buffer[f.len..have]);
                have -= f.len;
            },
            .incomplete => {
                if (fed == stream.len) return out[0..n];
                const end = if (cut_index < cuts.len) @max(cuts[cut_index], fed + 1) else stream.len;
                cut_index += 1;
                const next = @min(end, stream.len);
                @memcpy(buffer[have..][0 .. next - fed], stream[fed..next]);
                have += next - fed;
                fed = next;
            },
            .violation => return error.Violation,
        }
    }
}

test "frame: a stream of frames reads the same whole, byte by byte, and split at every offset" {
    var stream: [128]u8 = undefined;
    var len: usize = 0;
    len += writeSettings(stream[len..], &.{ .{ .id = .max_concurrent_streams, .value = 100 }, .{ .id = .initial_window_size, .value = 1 << 20 } });
    len += writePing(stream[len..], false, "saker!!!");
    len += writeWindowUpdate(stream[len..], 3, 1000);
    len += writeSettingsAck(stream[len..]);
    len += writeGoaway(stream[len..], 7, .enhance_your_calm, "calm");
    var whole: [256]u8 = undefined;
    const expected = try parseAll(stream[0..len], &.{}, &whole);
    try testing.expectEqual(@as(usize, 5 + 12 + 8 + 4 + 0 + 12), expected.len);
    var ones: [128]usize = undefined;
    for (&ones, 1..) |*cut, i| cut.* = i;
    var got: [256]u8 = undefined;
    try testing.expectEqualSlices(u8, expected, try parseAll(stream[0..len], ones[0..len], &got));
    for (1..len) |cut| try testing.expectEqualSlices(u8, expected, try parseAll(stream[0..len], &.{cut}, &got));
}

test "frame: each type's length and stream rules" {
    const Case = struct { Header, ?ErrorCode };
    const cases = [_]Case{
        .{ .{ .length = frame_size_initial + 1, .type = .data, .flags = 0, .stream_id = 1 }, .frame_size_error },
        .{ .{ .length = 0, .type = .data, .flags = 0, .stream_id = 0 }, .protocol_error },
        .{ .{ .length = 0, .type = .headers, .flags = 0, .stream_id = 0 }, .protocol_error },
        .{ .{ .length = 0, .type = .continuation, .flags = 0, .stream_id = 0 }, .protocol_error },
        .{ .{ .length = 4, .type = .priority, .flags = 0, .stream_id = 1 }, .frame_size_error },
        .{ .{ .length = 5, .type = .priority, .flags = 0, .stream_id = 0 }, .protocol_error },
        .{ .{ .length = 5, .type = .priority, .flags = 0, .stream_id = 1 }, null },
        .{ .{ .length = 3, .type = .rst_stream, .flags = 0, .stream_id = 1 }, .frame_size_error },
        .{ .{ .length = 4, .type = .rst_stream, .flags = 0, .stream_id = 0 }, .protocol_error },
        .{ .{ .length = 6, .type = .settings, .flags = 0, .stream_id = 1 }, .protocol_error },
        .{ .{ .length = 6, .type = .settings, .flags = Flags.ack, .stream_id = 0 }, .frame_size_error },
        .{ .{ .length = 7, .type = .settings, .flags = 0, .stream_id = 0 }, .frame_size_error },
        .{ .{ .length = 12, .type = .settings, .flags = 0, .stream_id = 0 }, null },
        .{ .{ .length = 4, .type = .push_promise, .flags = 0, .stream_id = 1 }, .protocol_error },
        .{ .{ .length = 8, .type = .ping, .flags = 0, .stream_id = 1 }, .protocol_error },
        .{ .{ .length = 7, .type = .ping, .flags = 0, .stream_id = 0 }, .frame_size_error },
        .{ .{ .length = 7, .type = .goaway, .flags = 0, .stream_id = 0 }, .frame_size_error },
        .{ .{ .length = 8, .type = .goaway, .flags = 0, .stream_id = 3 }, .protocol_error },
        .{ .{ .length = 5, .type = .window_update, .flags = 0, .stream_id = 0 }, .frame_size_error },
        .{ .{ .length = 4, .type = .window_update, .flags = 0, .stream_id = 0 }, null },
        .{ .{ .length = 100, .type = @fromBackingInt(@intCast(0xfa)), .flags = 0xff, .stream_id = 0 }, null },
    };
    for (cases) |case| {
        const got = check(case[0], frame_size_initial);
        if (case[1]) |code| {
            try testing.expectEqual(code, got.?.code);
        } else try testing.expectEqual(@as(?Violation, null), got);
    }
    // A frame too long is refused from its header: no wait for the payload.
    var bytes: [header_len]u8 = undefined;
    (Header{ .length = frame_size_initial + 1, .type = .data, .flags = 0, .stream_id = 1 }).write(&bytes);
    try testing.expectEqual(ErrorCode.frame_size_error, parse(&bytes, frame_size_initial).violation.code);
    try testing.expectEqual(@as(usize, header_len), parse(bytes[0..5], frame_size_initial).incomplete);
}

test "frame: padding and priority fields are taken off; padding as long as the payload is refused" {
    const h: Header = .{ .length = 0, .type = .data, .flags = Flags.padded, .stream_id = 1 };
    try testing.expectEqualStrings("abc", try content(.{ .header = h, .payload = "\x02abcxx" }));
    try testing.expectEqualStrings("", try content(.{ .header = h, .payload = "\x00" }));
    try testing.expectEqualStrings("", try content(.{ .header = h, .payload = "\x03abc" }));
    try testing.expectError(error.Padding, content(.{ .header = h, .payload = "\x04abc" }));
    try testing.expectError(error.Padding, content(.{ .header = h, .payload = "" }));
    const plain: Header = .{ .length = 0, .type = .data, .flags = Flags.end_stream, .stream_id = 1 };
    try testing.expectEqualStrings("\x03abc", try content(.{ .header = plain, .payload = "\x03abc" }));
    const with_priority: Header = .{ .length = 0, .type = .headers, .flags = Flags.padded | Flags.priority, .stream_id = 5 };
    const payload = "\x01\x00\x00\x00\x05\x10block!";
    try testing.expectEqualStrings("block", try content(.{ .header = with_priority, .payload = payload }));
    try testing.expectEqual(@as(?u31, 5), dependency(.{ .header = with_priority, .payload = payload }));
    try testing.expectError(error.Padding, content(.{ .header = with_priority, .payload = "\x00\x00\x00" }));
}

test "frame: SETTINGS parameters, GOAWAY, WINDOW_UPDATE and RST_STREAM payloads" {
    var out: [64]u8 = undefined;
    const n = writeSettings(&out, &.{ .{ .id = .header_table_size, .value = 0 }, .{ .id = @fromBackingInt(@intCast(0x99)), .value = 7 } });
    var it: SettingsIterator = .{ .payload = out[header_len..n] };
    try testing.expectEqual(Setting.header_table_size, it.next().?.id);
    const unknown = it.next().?;
    try testing.expectEqual(@as(u16, 0x99), @backingInt(unknown.id));
    try testing.expectEqual(@as(u32, 7), unknown.value);
    try testing.expectEqual(@as(?SettingValue, null), it.next());
    const g = writeGoaway(&out, 9, .protocol_error, "why");
    const fields = goaway(out[header_len..g]);
    try testing.expectEqual(@as(u31, 9), fields.last_stream_id);
    try testing.expectEqual(ErrorCode.protocol_error, fields.code);
    try testing.expectEqualStrings("why", fields.debug);
    _ = writeWindowUpdate(&out, 0, window_max);
    try testing.expectEqual(@as(u31, window_max), windowIncrement(out[header_len..][0..4]));
    _ = writeRstStream(&out, 3, .cancel);
    try testing.expectEqual(ErrorCode.cancel, rstCode(out[header_len..][0..4]));
    try testing.expectEqual(@as(u31, 3), Header.read(out[0..header_len]).stream_id);
}
