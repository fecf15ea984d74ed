//! grpc-echo: a gRPC service over HTTP/2 (h2c with prior knowledge, or h2 with --tls-*), with
//! just enough protobuf for its two messages. It shows trailers (`grpc-status`) and the
//! length-prefixed message framing of gRPC over HTTP/2.
//!
//!   service echo.Echo {
//!     rpc Say (EchoRequest) returns (EchoReply);              // unary: the text back
//!     rpc Repeat (EchoRequest) returns (stream EchoReply);    // server streaming: `count` replies
//!   }
//!   message EchoRequest { string text = 1; uint32 count = 2; }
//!   message EchoReply { string text = 1; uint32 index = 2; }
//!
//! `Repeat` runs on the handler pool (`mayBlock`), so each reply leaves as it is written, its
//! own gRPC message in its own DATA frames; `Say` runs on the connection's thread.
//! Usage: grpc-echo [--host H] [--port N] [--workers N] [--engine E] [--tls-cert F --tls-key F]
//! Try: grpcurl -plaintext -proto tests/grpc/echo.proto -d '{"text":"hi"}' 127.0.0.1:8080 echo.Echo/Say
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

/// gRPC status codes this service answers with (grpc/doc/statuscodes.md).
const Code = enum(u8) { ok = 0, invalid_argument = 3, unimplemented = 12, internal = 13 };

/// Most replies one `Repeat` call may ask for.
const repeat_max = 1000;

pub const GrpcEcho = struct {
    /// Streaming calls run on the handler pool, where a response streams (docs/http2.md).
    pub fn mayBlock(_: *const GrpcEcho, req: *const saker.Request) bool {
        return std.mem.eql(u8, req.path, "/echo.Echo/Repeat");
    }

    pub fn handle(_: *GrpcEcho, req: *saker.Request, res: *saker.Response) !void {
        const content_type = req.header("content-type") orelse "";
        if (req.method != .POST or !std.mem.startsWith(u8, content_type, "application/grpc")) {
            res.status = .unsupported_media_type;
            return res.writeAll("415 Unsupported Media Type: a gRPC call is a POST of application/grpc\n");
        }
        res.content_type = "application/grpc";
        const call = Call.parse(req.body()) catch |err| return finish(res, .invalid_argument, switch (err) {
            error.Compressed => "compressed messages are not supported",
            error.Malformed => "the request is not one length-prefixed EchoRequest",
        });
        if (std.mem.eql(u8, req.path, "/echo.Echo/Say")) {
            try writeReply(res, call.text, null);
            return finish(res, .ok, "");
        }
        if (std.mem.eql(u8, req.path, "/echo.Echo/Repeat")) {
            if (call.count > repeat_max) return finish(res, .invalid_argument, "count over 1000");
            for (0..call.count) |i| {
                try writeReply(res, call.text, @intCast(i));
                try res.flush(); // each reply as it is made
            }
            return finish(res, .ok, "");
        }
        return finish(res, .unimplemented, "no such method");
    }
};

/// Ends the call with its status in the trailers.
fn finish(res: *saker.Response, code: Code, message: []const u8) !void {
    var buffer: [3]u8 = undefined;
    const text = try std.fmt.bufPrint(&buffer, "{d}", .{@backingInt(code)});
    try res.trailer("grpc-status", try res.arena.dupe(u8, text));
    if (message.len > 0) try res.trailer("grpc-message", message);
}

/// An EchoRequest, from the request body: one gRPC message (flag byte, 32-bit length, then
/// the protobuf bytes).
const Call = struct {
    text: []const u8 = "",
    count: u32 = 1,

    fn parse(body: []const u8) error{ Compressed, Malformed }!Call {
        if (body.len < 5) return error.Malformed;
        if (body[0] == 1) return error.Compressed;
        if (body[0] != 0) return error.Malformed;
        const len = std.mem.readInt(u32, body[1..5], .big);
        if (body.len - 5 != len) return error.Malformed;
        var call: Call = .{};
        var reader: Protobuf = .{ .bytes = body[5..] };
        while (try reader.next()) |field| switch (field.number) {
            1 => call.text = field.bytes orelse return error.Malformed,
            2 => call.count = std.math.cast(u32, field.varint orelse return error.Malformed) orelse return error.Malformed,
            else => {}, // unknown fields are skipped, as protobuf says
        };
        return call;
    }
};

/// Reads protobuf fields (wire types 0, 1, 2 and 5).
const Protobuf = struct {
    bytes: []const u8,
    pos: usize = 0,

    const Field = struct { number: u64, varint: ?u64 = null, bytes: ?[]const u8 = null };

    fn next(p: *Protobuf) error{Malformed}!?Field {
        if (p.pos == p.bytes.len) return null;
        const key = try p.varint();
        const number = key >> 3;
        if (number == 0) return error.Malformed;
        switch (key & 7) {
            0 => return .{ .number = number, .varint = try p.varint() },
            1 => return .{ .number = number, .bytes = try p.take(8) },
            2 => {
                const len = try p.varint();
                return .{ .number = number, .bytes = try p.take(std.math.cast(usize, len) orelse return error.Malformed) };
            },
            5 => return .{ .number = number, .bytes = try p.take(4) },
            else => return error.Malformed,
        }
    }

    fn varint(p: *Protobuf) error{Malformed}!u64 {
        var value: u64 = 0;
        var shift: u7 = 0;
        while (p.pos < p.bytes.len and shift < 64) : (shift += 7) {
            const byte = p.bytes[p.pos];
            p.pos += 1;
            value |= @as(u64, byte & 0x7f) << @intCast(shift);
            if (byte & 0x80 == 0) return value;
        }
        return error.Malformed;
    }

    fn take(p: *Protobuf, len: usize) error{Malformed}![]const u8 {
        if (p.bytes.len - p.pos < len) return error.Malformed;
        defer p.pos += len;
        return p.bytes[p.pos..][0..len];
    }
};

/// Writes one EchoReply as a gRPC message.
fn writeReply(res: *saker.Response, text: []const u8, index: ?u32) !void {
    var message: [20]u8 = undefined;
    var n: usize = 0;
    // Field 1 (text), length-delimited: its key, its length, then the bytes (written after).
    message[n] = (1 << 3) | 2;
    n += 1;
    n += putVarint(message[n..], text.len);
    const head_len = n;
    var tail: [12]u8 = undefined;
    var t: usize = 0;
    if (index) |i| {
        tail[t] = (2 << 3) | 0;
        t += 1;
        t += putVarint(tail[t..], i);
    }
    var prefix: [5]u8 = undefined;
    prefix[0] = 0; // not compressed
    std.mem.writeInt(u32, prefix[1..5], @intCast(head_len + text.len + t), .big);
    try res.writeAll(&prefix);
    try res.writeAll(message[0..head_len]);
    try res.writeAll(text);
    try res.writeAll(tail[0..t]);
}

fn putVarint(out: []u8, value: u64) usize {
    var v = value;
    var n: usize = 0;
    while (v >= 0x80) : (v >>= 7) {
        out[n] = @as(u8, @truncate(v)) | 0x80;
        n += 1;
    }
    out[n] = @intCast(v);
    return n + 1;
}

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: grpc-echo [options]");
    var service: GrpcEcho = .{};
    var server = try saker.Server(GrpcEcho).init(init.gpa, &service, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
