//! The integration suite's HTTP/2 leg: `Client` speaks h2c (prior knowledge) to the server
//! while the tests go on writing and reading HTTP/1.1 bytes. Each request the test writes
//! becomes a stream (HEADERS, DATA within the server's windows, trailers), and each response
//! comes back as the HTTP/1.1 bytes that say the same: a status line, the fields, and the
//! body with its content-length, or chunked when the server sent none (trailers become the
//! last chunk's). Responses come back in the order of their requests, as HTTP/1.1's do, however
//! the server interleaves their frames.
//!
//! What has no HTTP/2 form maps to the closest HTTP/1.1 event: a stream the server resets, a
//! GOAWAY that leaves a stream unanswered, and the end of a response to a request that said
//! `Connection: close` (or was HTTP/1.0 without keep-alive) are the end of the connection for
//! the test, from there on. The tests of HTTP/1.1's own framing (pipelining bytes, chunk
//! syntax, smuggling) have no HTTP/2 leg: they skip (`Client.http1Only`).
//!
//! The framing is saker's own (`saker.http2.frame`, `saker.http2.hpack`); h2spec, curl,
//! h2load, grpcurl and ghz check those against independent implementations (tests/http2.zig).
const std = @import("std");
const assert = std.debug.assert;
const saker = @import("saker");
const frame = saker.http2.frame;
const hpack = saker.http2.hpack;
const Client = @import("Client.zig");

const H2c = @This();

const gpa = std.heap.smp_allocator;

/// HTTP/1.1 request bytes the test sent that are not framed yet.
pending: std.ArrayList(u8) = .empty,
/// The request whose body is being framed, if any.
outgoing: ?Outgoing = null,
next_stream_id: u31 = 1,
/// Requests sent whose responses the test has not had whole, oldest first.
streams: std.ArrayList(*Stream) = .empty,
/// Response bytes in HTTP/1.1 form, ready for the test.
plain: std.ArrayList(u8) = .empty,
/// Taken from `plain` so far.
plain_start: usize = 0,
/// The test's view of the connection ends after `plain` (see the file's comment).
ended: bool = false,
/// The server closed the socket.
socket_closed: bool = false,
/// Bytes from the socket that do not make a whole frame yet.
raw: std.ArrayList(u8) = .empty,
/// A header block split over HEADERS and CONTINUATION frames.
block: std.ArrayList(u8) = .empty,
block_stream: u31 = 0,
block_end_stream: bool = false,
encoder_table: [4096]u8 = undefined,
encoder_ring: [hpack.DynamicTable.ringLength(4096)]hpack.DynamicTable.Entry = undefined,
encoder: hpack.Encoder = undefined,
decoder: hpack.Decoder = undefined,
decoded_storage: [64 * 1024]u8 = undefined,
decoded_fields: [512]hpack.Field = undefined,
/// What the server's SETTINGS allow this side to send.
connection_window: i64 = frame.window_initial,
stream_window_initial: i64 = frame.window_initial,
frame_bytes_max: u32 = frame.frame_size_initial,
/// DATA bytes received since the connection window was last topped up.
received_unacknowledged: u64 = 0,

/// This side's receive windows: as large as the protocol allows, so the server's sending is
/// held back by TCP alone, as over HTTP/1.1.
const receive_window = frame.window_max;

const Outgoing = struct {
    stream_id: u31,
    window: i64,
    body: union(enum) {
        length: u64,
        chunked: Chunked,
    },
    /// The server reset the stream: the rest of the body is dropped.
    dropped: bool = false,
};

/// Where a chunked request body is (RFC 9112 §7.1).
const Chunked = union(enum) {
    size_line,
    data: u64,
    data_end,
    trailers,
};

const Stream = struct {
    id: u31,
    head_request: bool,
    /// The test's connection ends after this response (`Connection: close`, or HTTP/1.0).
    close_after: bool,
    state: enum { head, length, chunked, done } = .head,
    /// The test's connection ends after this response: the server reset the stream or left
    /// it unanswered, or the request said so.
    last: bool = false,
    /// HTTP/1.1 bytes not moved to `plain` yet (a later stream's, waiting for earlier ones).
    out: std.ArrayList(u8) = .empty,
};

pub const Error = Client.Error;

pub fn create(client: *Client) Error!*H2c {
    const h2 = try gpa.create(H2c);
    errdefer gpa.destroy(h2);
    h2.* = .{};
    h2.encoder = .init(&h2.encoder_table, &h2.encoder_ring);
    h2.decoder = .initGrowable(gpa, 4096);
    var out: [128]u8 = undefined;
    var n: usize = 0;
    @memcpy(out[0..frame.preface.len], frame.preface);
    n += frame.preface.len;
    n += frame.writeSettings(out[n..], &.{
        .{ .id = .enable_push, .value = 0 },
        .{ .id = .initial_window_size, .value = receive_window },
        .{ .id = .max_header_list_size, .value = h2.decoded_storage.len },
    });
    n += frame.writeWindowUpdate(out[n..], 0, receive_window - frame.window_initial);
    client.rawSend(out[0..n]) catch |err| {
        h2.destroy();
        return err;
    };
    return h2;
}

pub fn destroy(h2: *H2c) void {
    for (h2.streams.items) |s| {
        s.out.deinit(gpa);
        gpa.destroy(s);
    }
    h2.streams.deinit(gpa);
    h2.pending.deinit(gpa);
    h2.plain.deinit(gpa);
    h2.raw.deinit(gpa);
    h2.block.deinit(gpa);
    h2.decoder.deinit();
    gpa.destroy(h2);
}

// Sending: HTTP/1.1 request bytes to frames.

/// Takes HTTP/1.1 request bytes: frames every request (and as much of a body) as they hold.
pub fn send(h2: *H2c, client: *Client, bytes: []const u8) Error!void {
    if (h2.pending.items.len == 0) {
        // Framed straight from the caller's bytes: a large body is not copied first.
        const used = try h2.frameRequests(client, bytes);
        try h2.pending.appendSlice(gpa, bytes[used..]);
        return;
    }
    try h2.pending.appendSlice(gpa, bytes);
    const used = try h2.frameRequests(client, h2.pending.items);
    std.mem.copyForwards(u8, h2.pending.items[0 .. h2.pending.items.len - used], h2.pending.items[used..]);
    h2.pending.items.len -= used;
}

/// Frames the whole requests and body bytes at the start of `bytes`; returns how many bytes
/// that took (the rest waits for more).
fn frameRequests(h2: *H2c, client: *Client, bytes: []const u8) Error!usize {
    var used: usize = 0;
    while (used < bytes.len) {
        const rest = bytes[used..];
        if (h2.outgoing == null) {
            const head_end = std.mem.find(u8, rest, "\r\n\r\n") orelse break;
            try h2.sendHead(client, rest[0 .. head_end + 4]);
            used += head_end + 4;
            continue;
        }
        const taken = try h2.sendBody(client, rest);
        if (taken == 0) break;
        used += taken;
    }
    return used;
}

/// Frames a request head as HEADERS; a request with a body becomes `outgoing`.
fn sendHead(h2: *H2c, client: *Client, head: []const u8) Error!void {
    var lines = std.mem.splitSequence(u8, head[0 .. head.len - 4], "\r\n");
    const request_line = lines.next().?;
    var parts = std.mem.splitScalar(u8, request_line, ' ');
    const method = parts.next() orelse return error.SendFailed;
    const target = parts.next() orelse return error.SendFailed;
    const version = parts.next() orelse "HTTP/1.1";

    var block: std.ArrayList(u8) = .empty;
    defer block.deinit(gpa);
    try block.ensureTotalCapacity(gpa, head.len * 2 + 256);
    try h2.beginBlock(&block);
    try h2.encodeField(&block, ":method", method);
    try h2.encodeField(&block, ":scheme", "http");
    try h2.encodeField(&block, ":path", target);
    var length: ?u64 = null;
    var chunked = false;
    var keep_alive = std.mem.eql(u8, version, "HTTP/1.1");
    var name_buffer: [256]u8 = undefined;
    while (lines.next()) |line| {
        const colon = std.mem.findScalar(u8, line, ':') orelse return error.SendFailed;
        const raw_name = line[0..colon];
        const value = std.mem.trim(u8, line[colon + 1 ..], " \t");
        if (raw_name.len > name_buffer.len) return error.SendFailed;
        const name = std.ascii.lowerString(&name_buffer, raw_name);
        if (std.mem.eql(u8, name, "host")) {
            try h2.encodeField(&block, ":authority", value);
        } else if (std.mem.eql(u8, name, "connection")) {
            if (std.ascii.findIgnoreCase(value, "close") != null) keep_alive = false;
            if (std.ascii.findIgnoreCase(value, "keep-alive") != null) keep_alive = true;
        } else if (std.mem.eql(u8, name, "transfer-encoding")) {
            chunked = std.ascii.endsWithIgnoreCase(value, "chunked");
        } else if (std.mem.eql(u8, name, "keep-alive") or std.mem.eql(u8, name, "proxy-connection") or std.mem.eql(u8, name, "upgrade")) {
            // Connection-specific: no HTTP/2 form (RFC 9113 §8.2.2).
        } else {
            if (std.mem.eql(u8, name, "content-length")) length = std.fmt.parseInt(u64, value, 10) catch null;
            try h2.encodeField(&block, name, value);
        }
    }

    const id = h2.next_stream_id;
    h2.next_stream_id += 2;
    const stream = try gpa.create(Stream);
    errdefer gpa.destroy(stream);
    stream.* = .{ .id = id, .head_request = std.mem.eql(u8, method, "HEAD"), .close_after = !keep_alive };
    try h2.streams.ensureUnusedCapacity(gpa, 1);
    const has_body = chunked or (length orelse 0) > 0;
    try h2.writeHeaders(client, id, block.items, !has_body);
    h2.streams.appendAssumeCapacity(stream);
    if (has_body) h2.outgoing = .{
        .stream_id = id,
        .window = h2.stream_window_initial,
        .body = if (chunked) .{ .chunked = .size_line } else .{ .length = length.? },
    };
}

/// Starts a header block: a pending table size update, if any.
fn beginBlock(h2: *H2c, block: *std.ArrayList(u8)) Error!void {
    try block.ensureUnusedCapacity(gpa, 16);
    block.items.len += h2.encoder.begin(block.allocatedSlice()[block.items.len..]) catch unreachable;
}

fn encodeField(h2: *H2c, block: *std.ArrayList(u8), name: []const u8, value: []const u8) Error!void {
    // HPACK never makes a field longer than its raw bytes and a few integers.
    try block.ensureUnusedCapacity(gpa, name.len + value.len + 16);
    block.items.len += h2.encoder.encode(block.allocatedSlice()[block.items.len..], name, value, .allowed) catch unreachable;
}

/// Writes a header block as HEADERS and as many CONTINUATION frames as it needs.
fn writeHeaders(h2: *H2c, client: *Client, id: u31, block: []const u8, end_stream: bool) Error!void {
    var rest = block;
    var first = true;
    while (true) {
        const take = @min(rest.len, h2.frame_bytes_max);
        const last = take == rest.len;
        var flags: u8 = 0;
        if (last) flags |= frame.Flags.end_headers;
        if (first and end_stream) flags |= frame.Flags.end_stream;
        try h2.writeFrame(client, if (first) .headers else .continuation, flags, id, rest[0..take]);
        rest = rest[take..];
        first = false;
        if (last) return;
    }
}

fn writeFrame(h2: *H2c, client: *Client, kind: frame.Type, flags: u8, id: u31, payload: []const u8) Error!void {
    _ = h2;
    var h: [frame.header_len]u8 = undefined;
    (frame.Header{ .length = @intCast(payload.len), .type = kind, .flags = flags, .stream_id = id }).write(&h);
    try client.rawSend(&h);
    if (payload.len > 0) try client.rawSend(payload);
}

/// Frames as much of `outgoing`'s body as `bytes` holds; returns the bytes taken. A chunked
/// body's framing is read and dropped (HTTP/2 has its own), and its trailers are sent as a
/// trailing HEADERS.
fn sendBody(h2: *H2c, client: *Client, bytes: []const u8) Error!usize {
    const out = &h2.outgoing.?;
    switch (out.body) {
        .length => |left| {
            const take: usize = @intCast(@min(left, bytes.len));
            out.body.length -= take;
            try h2.sendData(client, bytes[0..take], out.body.length == 0);
            return take;
        },
        .chunked => |state| switch (state) {
            .size_line => {
                const line_end = std.mem.find(u8, bytes, "\r\n") orelse return 0;
                const size_text = std.mem.trim(u8, bytes[0 .. std.mem.findScalar(u8, bytes[0..line_end], ';') orelse line_end], " \t");
                const size = std.fmt.parseInt(u64, size_text, 16) catch return error.SendFailed;
                out.body.chunked = if (size == 0) .trailers else .{ .data = size };
                return line_end + 2;
            },
            .data => |left| {
                const take: usize = @intCast(@min(left, bytes.len));
                try h2.sendData(client, bytes[0..take], false);
                out.body.chunked = if (left == take) .data_end else .{ .data = left - take };
                return take;
            },
            .data_end => {
                if (bytes.len < 2) return 0;
                if (!std.mem.eql(u8, bytes[0..2], "\r\n")) return error.SendFailed;
                out.body.chunked = .size_line;
                return 2;
            },
            .trailers => {
                const end = std.mem.find(u8, bytes, "\r\n") orelse return 0;
                if (end == 0) {
                    // No trailers: the body ends with an empty DATA frame.
                    try h2.sendData(client, &.{}, true);
                    return 2;
                }
                const block_end = std.mem.find(u8, bytes, "\r\n\r\n") orelse return 0;
                var block: std.ArrayList(u8) = .empty;
                defer block.deinit(gpa);
                try h2.beginBlock(&block);
                var lines = std.mem.splitSequence(u8, bytes[0..block_end], "\r\n");
                var name_buffer: [256]u8 = undefined;
                while (lines.next()) |line| {
                    const colon = std.mem.findScalar(u8, line, ':') orelse return error.SendFailed;
                    if (colon > name_buffer.len) return error.SendFailed;
                    try h2.encodeField(&block, std.ascii.lowerString(&name_buffer, line[0..colon]), std.mem.trim(u8, line[colon + 1 ..], " \t"));
                }
                const id = out.stream_id;
                const dropped = out.dropped;
                h2.outgoing = null;
                if (!dropped) try h2.writeHeaders(client, id, block.items, true);
                return block_end + 4;
            },
        },
    }
}

/// Sends `bytes` of `outgoing`'s body as DATA within the server's windows, waiting for
/// WINDOW_UPDATE (and taking the frames that come meanwhile) when they are closed.
fn sendData(h2: *H2c, client: *Client, bytes: []const u8, end_stream: bool) Error!void {
    var rest = bytes;
    while (true) {
        const out = &(h2.outgoing orelse return);
        if (out.dropped) break;
        if (rest.len == 0) {
            if (end_stream) try h2.writeFrame(client, .data, frame.Flags.end_stream, out.stream_id, &.{});
            break;
        }
        const window = @min(h2.connection_window, out.window);
        if (window <= 0) {
            try h2.readFrames(client);
            if (h2.socket_closed) return error.SendFailed;
            continue;
        }
        const take: usize = @intCast(@min(@as(i64, @intCast(rest.len)), window, h2.frame_bytes_max));
        const last = take == rest.len and end_stream;
        try h2.writeFrame(client, .data, if (last) frame.Flags.end_stream else 0, out.stream_id, rest[0..take]);
        h2.connection_window -= @intCast(take);
        out.window -= @intCast(take);
        rest = rest[take..];
        if (last) break;
    }
    if (end_stream) h2.outgoing = null;
}

// Receiving: frames to HTTP/1.1 response bytes.

/// Copies response bytes into `dest`, reading frames until there are some; 0 is the end of
/// the connection as the test sees it.
pub fn fill(h2: *H2c, client: *Client, dest: []u8) Error!usize {
    assert(dest.len > 0);
    while (true) {
        const ready = h2.plain.items[h2.plain_start..];
        if (ready.len > 0) {
            const n = @min(ready.len, dest.len);
            @memcpy(dest[0..n], ready[0..n]);
            h2.plain_start += n;
            if (h2.plain_start == h2.plain.items.len) {
                h2.plain.items.len = 0;
                h2.plain_start = 0;
            }
            return n;
        }
        if (h2.ended or h2.socket_closed) return 0;
        try h2.readFrames(client);
    }
}

/// Whether response bytes (or the end) are ready without reading.
pub fn hasResponseBytes(h2: *const H2c) bool {
    return h2.plain.items.len > h2.plain_start or h2.ended or h2.socket_closed;
}

/// Reads from the socket once (blocking, up to the receive timeout) and takes the whole
/// frames that have arrived.
pub fn readFrames(h2: *H2c, client: *Client) Error!void {
    var chunk: [64 * 1024]u8 = undefined;
    const n = try client.rawRead(&chunk);
    if (n == 0) {
        h2.socket_closed = true;
        // Whatever was not answered never will be.
        for (h2.streams.items) |s| if (s.state != .done) try endStream(s, true);
        try h2.flush(client);
        return;
    }
    try h2.raw.appendSlice(gpa, chunk[0..n]);
    var used: usize = 0;
    defer {
        std.mem.copyForwards(u8, h2.raw.items[0 .. h2.raw.items.len - used], h2.raw.items[used..]);
        h2.raw.items.len -= used;
    }
    while (true) {
        switch (frame.parse(h2.raw.items[used..], frame.frame_size_max)) {
            .frame => |f| {
                used += f.len;
                try h2.takeFrame(client, f.frame);
            },
            .incomplete => break,
            .violation => |v| {
                std.debug.print("H2c: the server sent a bad frame: {s}\n", .{v.why});
                return error.BadResponse;
            },
        }
    }
    try h2.flush(client);
}

fn takeFrame(h2: *H2c, client: *Client, f: frame.Frame) Error!void {
    const h = f.header;
    switch (h.type) {
        .data => {
            h2.received_unacknowledged += f.payload.len;
            if (h2.received_unacknowledged >= receive_window / 2) {
                var out: [16]u8 = undefined;
                try client.rawSend(out[0..frame.writeWindowUpdate(&out, 0, @intCast(h2.received_unacknowledged))]);
                h2.received_unacknowledged = 0;
            }
            const s = h2.find(h.stream_id) orelse return;
            const data = frame.content(f) catch return error.BadResponse;
            switch (s.state) {
                .length => try s.out.appendSlice(gpa, data),
                .chunked => if (data.len > 0) {
                    try s.out.print(gpa, "{x}\r\n", .{data.len});
                    try s.out.appendSlice(gpa, data);
                    try s.out.appendSlice(gpa, "\r\n");
                },
                .head, .done => return error.BadResponse,
            }
            if (h.has(frame.Flags.end_stream)) try endStream(s, false);
        },
        .headers => {
            h2.block.clearRetainingCapacity();
            try h2.block.appendSlice(gpa, frame.content(f) catch return error.BadResponse);
            h2.block_stream = h.stream_id;
            h2.block_end_stream = h.has(frame.Flags.end_stream);
            if (h.has(frame.Flags.end_headers)) try h2.takeBlock();
        },
        .continuation => {
            if (h.stream_id != h2.block_stream) return error.BadResponse;
            try h2.block.appendSlice(gpa, f.payload);
            if (h.has(frame.Flags.end_headers)) try h2.takeBlock();
        },
        .rst_stream => {
            if (h2.outgoing) |*out| {
                if (out.stream_id == h.stream_id) out.dropped = true;
            }
            const s = h2.find(h.stream_id) orelse return;
            try endStream(s, true);
        },
        .settings => {
            if (h.has(frame.Flags.ack)) return;
            var it: frame.SettingsIterator = .{ .payload = f.payload };
            while (it.next()) |setting| switch (setting.id) {
                .initial_window_size => {
                    const delta = @as(i64, setting.value) - h2.stream_window_initial;
                    h2.stream_window_initial = setting.value;
                    if (h2.outgoing) |*out| out.window += delta;
                },
                .max_frame_size => h2.frame_bytes_max = setting.value,
                .header_table_size => h2.encoder.setPeerLimit(setting.value),
                else => {},
            };
            var out: [frame.header_len]u8 = undefined;
            try client.rawSend(out[0..frame.writeSettingsAck(&out)]);
        },
        .ping => {
            if (h.has(frame.Flags.ack)) return;
            var out: [frame.header_len + 8]u8 = undefined;
            try client.rawSend(out[0..frame.writePing(&out, true, f.payload[0..8])]);
        },
        .goaway => {
            const last = frame.goaway(f.payload).last_stream_id;
            for (h2.streams.items) |s| if (s.id > last and s.state != .done) try endStream(s, true);
        },
        .window_update => {
            const increment = frame.windowIncrement(f.payload);
            if (h.stream_id == 0) {
                h2.connection_window += increment;
            } else if (h2.outgoing) |*out| {
                if (out.stream_id == h.stream_id) out.window += increment;
            }
        },
        else => {},
    }
}

/// A whole header block: a response head (1xx ones included) or a response's trailers.
fn takeBlock(h2: *H2c) Error!void {
    const decoded = h2.decoder.decode(h2.block.items, &h2.decoded_storage, &h2.decoded_fields) catch return error.BadResponse;
    if (decoded.too_large) return error.BadResponse;
    const s = h2.find(h2.block_stream) orelse return;
    const fields = decoded.fields;
    switch (s.state) {
        .head => {
            var status: u16 = 0;
            var length = false;
            for (fields) |field| {
                if (std.mem.eql(u8, field.name, ":status")) status = std.fmt.parseInt(u16, field.value, 10) catch return error.BadResponse;
                if (std.mem.eql(u8, field.name, "content-length")) length = true;
            }
            if (status < 100 or status > 999) return error.BadResponse;
            const phrase = (@as(saker.http.Status, @fromBackingInt(status))).phrase();
            try s.out.print(gpa, "HTTP/1.1 {d} {s}\r\n", .{ status, phrase });
            for (fields) |field| {
                if (field.name.len > 0 and field.name[0] == ':') continue;
                try s.out.print(gpa, "{s}: {s}\r\n", .{ field.name, field.value });
            }
            if (status < 200) {
                try s.out.appendSlice(gpa, "\r\n");
                return;
            }
            const bodiless = s.head_request or status == 204 or status == 304;
            if (!bodiless and !length) {
                if (h2.block_end_stream) {
                    try s.out.appendSlice(gpa, "Content-Length: 0\r\n");
                    length = true;
                } else {
                    try s.out.appendSlice(gpa, "Transfer-Encoding: chunked\r\n");
                }
            }
            try s.out.appendSlice(gpa, "\r\n");
            s.state = if (bodiless or length) .length else .chunked;
            if (h2.block_end_stream) try endStream(s, false);
        },
        .length, .chunked => {
            // Trailers: the last chunk's fields; a body with a length has nowhere to put them.
            if (s.state == .chunked) {
                try s.out.appendSlice(gpa, "0\r\n");
                for (fields) |field| try s.out.print(gpa, "{s}: {s}\r\n", .{ field.name, field.value });
                try s.out.appendSlice(gpa, "\r\n");
            }
            s.state = .done;
            if (s.close_after) s.last = true;
        },
        .done => return error.BadResponse,
    }
}

fn find(h2: *H2c, id: u31) ?*Stream {
    for (h2.streams.items) |s| if (s.id == id) return s;
    return null;
}

/// The stream's response is whole (`reset`: or never will be).
fn endStream(s: *Stream, reset: bool) error{OutOfMemory}!void {
    if (s.state == .done) return;
    if (s.state == .chunked and !reset) try s.out.appendSlice(gpa, "0\r\n\r\n");
    s.state = .done;
    if (reset or s.close_after) s.last = true;
}

/// Moves finished responses, and the one in progress that is oldest, to `plain`, in the
/// order of their requests.
fn flush(h2: *H2c, client: *Client) error{OutOfMemory}!void {
    while (h2.streams.items.len > 0 and !h2.ended) {
        const s = h2.streams.items[0];
        try h2.plain.appendSlice(gpa, s.out.items);
        s.out.clearRetainingCapacity();
        if (s.state != .done) return;
        if (s.last) {
            h2.ended = true;
            // As an HTTP/1.1 connection would end: the server hears of it too, so a server
            // that serves one connection at a time moves on.
            var out: [frame.header_len + 8]u8 = undefined;
            // (The server may have closed first: then there is no one to tell.)
            client.rawSend(out[0..frame.writeGoaway(&out, 0, .no_error, "")]) catch {};
            _ = std.os.linux.shutdown(client.fd, std.os.linux.SHUT.WR);
        }
        _ = h2.streams.orderedRemove(0);
        s.out.deinit(gpa);
        gpa.destroy(s);
    }
}
