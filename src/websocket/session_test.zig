//! WebSocket sessions on the simulated engine: whole conversations (handshake, frames, close)
//! as bytes, each fed whole, one byte at a time and cut at seeded random sizes, with the exact
//! bytes the server must answer.
const std = @import("std");
const testing = std.testing;
const Config = @import("../Config.zig");
const Worker = @import("../Worker.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const Simulation = @import("../testing/Simulation.zig");
const websocket = @import("../websocket.zig");
const frame = websocket.frame;

const date = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
const key = "dGhlIHNhbXBsZSBub25jZQ==";
const handshake_request = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n" ++
    "Connection: Upgrade\r\nSec-WebSocket-Key: " ++ key ++ "\r\nSec-WebSocket-Version: 13\r\n";
/// The RFC 6455 §1.3 example's answer.
const handshake_response = "HTTP/1.1 101 Switching Protocols\r\n" ++ date ++ "Connection: Upgrade\r\n" ++
    "Upgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n";

/// Echoes messages; records what the callbacks saw.
const EchoHandler = struct {
    opens: usize = 0,
    closes: usize = 0,
    close_code: ?websocket.CloseCode = null,
    pings: usize = 0,
    messages: usize = 0,

    fn handle(_: *anyopaque, req: *Request, res: *Response) anyerror!void {
        if (req.isWebSocketUpgrade()) return res.upgradeWebSocket(req, .{ .subprotocols = &.{ "v2", "chat" } });
        res.setBody("not a websocket");
    }

    fn self(context: *anyopaque) *EchoHandler {
        return @ptrCast(@alignCast(context));
    }

    fn onOpen(context: *anyopaque, _: websocket.Conn) anyerror!void {
        self(context).opens += 1;
    }

    fn onMessage(context: *anyopaque, conn: websocket.Conn, message: websocket.Message) anyerror!void {
        self(context).messages += 1;
        if (std.mem.eql(u8, message.data, "fail")) return error.Boom;
        if (std.mem.eql(u8, message.data, "bye")) return conn.close(.normal, "bye");
        if (std.mem.startsWith(u8, message.data, "close:")) {
            const code = try std.fmt.parseInt(u16, message.data["close:".len..], 10);
            return conn.close(@fromBackingInt(code), "asked");
        }
        try conn.send(message.kind, message.data);
    }

    fn onClose(context: *anyopaque, _: websocket.Conn, code: websocket.CloseCode, _: []const u8) void {
        const h = self(context);
        h.closes += 1;
        h.close_code = code;
    }

    fn onPing(context: *anyopaque, _: websocket.Conn, _: []const u8) void {
        self(context).pings += 1;
    }

    const callbacks: websocket.Callbacks = .{
        .onOpen = onOpen,
        .onMessage = onMessage,
        .onClose = onClose,
        .onPing = onPing,
        .onPong = null,
    };
};

const Fixture = struct {
    handler: EchoHandler = .{},
    config: Config,
    budget: @import("../Arena.zig").Budget = .init(1 << 30),
    worker: Worker = undefined,

    fn init(fixture: *Fixture, config: Config) !void {
        fixture.* = .{ .config = config };
        try fixture.worker.init(testing.allocator, &fixture.config, .{
            .context = &fixture.handler,
            .handle = EchoHandler.handle,
            .websocket = &EchoHandler.callbacks,
        }, .{ .connections_max = 4, .large_buffers_max = config.large_buffers_max, .budget = &fixture.budget });
        fixture.worker.date.update(784111777);
        Worker.current = &fixture.worker;
    }

    fn deinit(fixture: *Fixture) void {
        Worker.current = null;
        fixture.worker.deinit();
    }
};

/// A masked client frame.
fn clientFrame(out: *std.ArrayList(u8), options: struct {
    fin: bool = true,
    rsv: u3 = 0,
    opcode: u4,
    payload: []const u8,
    mask: ?[4]u8 = .{ 0x37, 0xfa, 0x21, 0x3d },
}) !void {
    const gpa = testing.allocator;
    try out.append(gpa, (if (options.fin) @as(u8, 0x80) else 0) | @as(u8, options.rsv) << 4 | options.opcode);
    const mask_bit: u8 = if (options.mask != null) 0x80 else 0;
    const len = options.payload.len;
    if (len < 126) {
        try out.append(gpa, mask_bit | @as(u8, @intCast(len)));
    } else if (len <= 0xffff) {
        try out.append(gpa, mask_bit | 126);
        try out.appendSlice(gpa, &std.mem.toBytes(std.mem.nativeToBig(u16, @intCast(len))));
    } else {
        try out.append(gpa, mask_bit | 127);
        try out.appendSlice(gpa, &std.mem.toBytes(std.mem.nativeToBig(u64, len)));
    }
    const start = out.items.len;
    if (options.mask) |mask| try out.appendSlice(gpa, &mask);
    try out.appendSlice(gpa, options.payload);
    if (options.mask) |mask| frame.unmask(out.items[start + 4 ..], mask, 0);
}

/// An unmasked server frame, as the server must write it.
fn serverFrame(out: *std.ArrayList(u8), opcode: frame.Opcode, payload: []const u8) !void {
    var header: [frame.server_header_bytes_max]u8 = undefined;
    try out.appendSlice(testing.allocator, frame.writeHeader(&header, .{ .opcode = opcode, .payload_len = payload.len }));
    try out.appendSlice(testing.allocator, payload);
}

fn closePayload(code: u16, reason: []const u8) [2 + 123]u8 {
    var payload: [125]u8 = undefined;
    std.mem.writeInt(u16, payload[0..2], code, .big);
    @memcpy(payload[2..][0..reason.len], reason);
    return payload;
}

const Expect = struct {
    closes: usize = 1,
    close_code: ?websocket.CloseCode = null,
};

/// Runs `input` with every kind of cut; the server must write exactly `expected`, call
/// `onClose` as told and give every pooled object back.
fn expectConversation(config: Config, input: []const u8, expected: []const u8, expect: Expect) !void {
    const cuts = [_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 3 } }, .{ .random = .{ .seed = 11, .max = 7 } } };
    for (cuts) |cut| {
        var fixture: Fixture = undefined;
        try fixture.init(config);
        defer fixture.deinit();
        const result = try Simulation.run(testing.allocator, &fixture.worker, input, .{ .cuts = cut });
        defer testing.allocator.free(result.output);
        errdefer std.debug.print("cuts: {any}\n", .{cut});
        try testing.expectEqualSlices(u8, expected, result.output);
        try testing.expectEqual(expect.closes, fixture.handler.closes);
        if (expect.close_code) |code| try testing.expectEqual(code, fixture.handler.close_code.?);
        try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
        try testing.expectEqual(@as(u32, 0), fixture.worker.sessions_busy);
        try testing.expectEqual(@as(u32, 0), fixture.worker.deflates_busy);
    }
}

test "Session: handshake, echo of the RFC 6455 §5.7 masked frame, close handshake" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "\r\n");
    try input.appendSlice(testing.allocator, &.{ 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 });
    try clientFrame(&input, .{ .opcode = 0x8, .payload = closePayload(1000, "done")[0..6] });
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "\r\n");
    try expected.appendSlice(testing.allocator, &.{ 0x81, 0x05, 'H', 'e', 'l', 'l', 'o' });
    try expected.appendSlice(testing.allocator, &.{ 0x88, 0x02, 0x03, 0xe8 }); // the code echoed
    try expectConversation(.{}, input.items, expected.items, .{ .close_code = .normal });
}

test "Session: fragments are joined around an interleaved ping; large and binary messages" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "\r\n");
    try clientFrame(&input, .{ .fin = false, .opcode = 0x1, .payload = "Hel" });
    try clientFrame(&input, .{ .opcode = 0x9, .payload = "are you there?" });
    try clientFrame(&input, .{ .fin = false, .opcode = 0x0, .payload = "" });
    try clientFrame(&input, .{ .opcode = 0x0, .payload = "lo \xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5" });
    var big: [70_000]u8 = undefined;
    for (&big, 0..) |*b, i| b.* = @truncate(i * 31);
    try clientFrame(&input, .{ .opcode = 0x2, .payload = &big });
    try clientFrame(&input, .{ .opcode = 0x2, .payload = big[0..3000] });
    try clientFrame(&input, .{ .opcode = 0x8, .payload = "" });
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "\r\n");
    try serverFrame(&expected, .pong, "are you there?");
    try serverFrame(&expected, .text, "Hello \xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5");
    try serverFrame(&expected, .binary, &big);
    try serverFrame(&expected, .binary, big[0..3000]);
    try serverFrame(&expected, .close, ""); // no status code received, none echoed
    try expectConversation(.{}, input.items, expected.items, .{ .close_code = .no_status });
}

const Failure = struct {
    name: []const u8,
    frames: []const u8,
    code: u16,
};

fn failureInput(comptime build: fn (*std.ArrayList(u8)) anyerror!void) !std.ArrayList(u8) {
    var input: std.ArrayList(u8) = .empty;
    errdefer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "\r\n");
    try build(&input);
    return input;
}

fn expectFailure(config: Config, comptime build: fn (*std.ArrayList(u8)) anyerror!void, code: websocket.CloseCode, reason: []const u8) !void {
    var input = try failureInput(build);
    defer input.deinit(testing.allocator);
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "\r\n");
    const payload = closePayload(@backingInt(code), reason);
    try serverFrame(&expected, .close, payload[0 .. 2 + reason.len]);
    try expectConversation(config, input.items, expected.items, .{ .close_code = code });
}

test "Session: protocol errors close with 1002" {
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x1, .payload = "unmasked", .mask = null });
        }
    }.f, .protocol_error, "client frames must be masked");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .rsv = 0b010, .opcode = 0x1, .payload = "x" });
        }
    }.f, .protocol_error, "reserved bits set");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            // RSV1 means compression, which was not agreed.
            try clientFrame(in, .{ .rsv = 0b100, .opcode = 0x1, .payload = "x" });
        }
    }.f, .protocol_error, "RSV1 set without permessage-deflate");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x3, .payload = "" });
        }
    }.f, .protocol_error, "reserved opcode");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .fin = false, .opcode = 0x9, .payload = "" });
        }
    }.f, .protocol_error, "fragmented control frame");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            const long: [126]u8 = @splat('p');
            try clientFrame(in, .{ .opcode = 0x9, .payload = &long });
        }
    }.f, .protocol_error, "control frame longer than 125 bytes");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x0, .payload = "x" });
        }
    }.f, .protocol_error, "continuation frame without a message");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .fin = false, .opcode = 0x1, .payload = "a" });
            try clientFrame(in, .{ .opcode = 0x1, .payload = "b" });
        }
    }.f, .protocol_error, "new message before the last one ended");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x8, .payload = closePayload(1005, "")[0..2] });
        }
    }.f, .protocol_error, "invalid close code");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x8, .payload = "\x03" });
        }
    }.f, .protocol_error, "close frame with a 1-byte payload");
}

test "Session: bad UTF-8 closes with 1007 at once; too long with 1009; handler errors with 1011" {
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x1, .payload = "\xce\xba\xed\xa0\x80" });
        }
    }.f, .invalid_payload, "text message is not UTF-8");
    // Fail-fast: the first fragment already cannot be UTF-8; the message never ends.
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .fin = false, .opcode = 0x1, .payload = "ok\xf5" });
        }
    }.f, .invalid_payload, "text message is not UTF-8");
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x8, .payload = closePayload(1000, "\xff")[0..3] });
        }
    }.f, .invalid_payload, "close reason is not UTF-8");
    try expectFailure(.{ .websocket_message_bytes_max = 200 }, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            const part: [150]u8 = @splat('a');
            try clientFrame(in, .{ .fin = false, .opcode = 0x2, .payload = &part });
            try clientFrame(in, .{ .opcode = 0x0, .payload = &part });
        }
    }.f, .message_too_big, "message longer than websocket_message_bytes_max");
    const saved = testing.log_level;
    testing.log_level = .err; // the failing callback is logged as a warning, on purpose here
    defer testing.log_level = saved;
    try expectFailure(.{}, struct {
        fn f(in: *std.ArrayList(u8)) !void {
            try clientFrame(in, .{ .opcode = 0x1, .payload = "fail" });
        }
    }.f, .internal_error, "the handler failed");
}

test "Session: a close started by the handler waits for the client's answer" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "\r\n");
    try clientFrame(&input, .{ .opcode = 0x1, .payload = "bye" });
    try clientFrame(&input, .{ .opcode = 0x1, .payload = "dropped while closing" });
    try clientFrame(&input, .{ .opcode = 0x8, .payload = closePayload(1000, "")[0..2] });
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "\r\n");
    try serverFrame(&expected, .close, closePayload(1000, "bye")[0..5]);
    try expectConversation(.{}, input.items, expected.items, .{ .close_code = .normal });
}

test "Session: handshake refusals, subprotocol choice, and a client that just disconnects" {
    try expectConversation(.{}, "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ++
        "Sec-WebSocket-Key: " ++ key ++ "\r\nSec-WebSocket-Version: 8\r\n\r\n", "HTTP/1.1 426 Upgrade Required\r\n" ++ date ++
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 79\r\nSec-WebSocket-Version: 13\r\n\r\n" ++
        "426 Upgrade Required: unsupported Sec-WebSocket-Version; this server speaks 13\n", .{ .closes = 0 });
    try expectConversation(.{}, "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ++
        "Sec-WebSocket-Key: tooshort\r\nSec-WebSocket-Version: 13\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n" ++ date ++
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 73\r\n\r\n" ++
        "400 Bad Request: Sec-WebSocket-Key must be 16 bytes in base64, sent once\n", .{ .closes = 0 });
    // The server's preference wins among the offered subprotocols; EOF without a close
    // frame is reported as 1006.
    try expectConversation(.{}, handshake_request ++ "Sec-WebSocket-Protocol: chat, v2\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\n" ++
        date ++ "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" ++
        "Sec-WebSocket-Protocol: v2\r\n\r\n", .{ .close_code = .abnormal });
}

test "Session: permessage-deflate is agreed and RFC 7692 compressed messages are inflated" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n");
    // §7.2.3.1 then §7.2.3.2 (which refers back to the first message).
    try clientFrame(&input, .{ .rsv = 0b100, .opcode = 0x1, .payload = &.{ 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00 } });
    try clientFrame(&input, .{ .rsv = 0b100, .fin = false, .opcode = 0x1, .payload = &.{ 0xf2, 0x00 } });
    try clientFrame(&input, .{ .opcode = 0x0, .payload = &.{ 0x11, 0x00, 0x00 } });
    try clientFrame(&input, .{ .opcode = 0x8, .payload = "" });
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
    // Short messages go back uncompressed.
    try serverFrame(&expected, .text, "Hello");
    try serverFrame(&expected, .text, "Hello");
    try serverFrame(&expected, .close, "");
    try expectConversation(.{}, input.items, expected.items, .{ .close_code = .no_status });
}

test "Session: permessage-deflate declined when turned off; compressed frames then fail" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
    try clientFrame(&input, .{ .rsv = 0b100, .opcode = 0x1, .payload = &.{ 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00 } });
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "\r\n");
    const reason = "RSV1 set without permessage-deflate";
    try serverFrame(&expected, .close, closePayload(1002, reason)[0 .. 2 + reason.len]);
    try expectConversation(.{ .websocket_deflate = false }, input.items, expected.items, .{ .close_code = .protocol_error });
}

test "Session: a quiet client is pinged, then closed with 1011 when no pong comes" {
    var fixture: Fixture = undefined;
    try fixture.init(.{ .websocket_ping_interval_ms = 1000, .websocket_pong_timeout_ms = 500 });
    defer fixture.deinit();
    fixture.worker.now_ms = 10_000;
    var c: @import("../Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    const buffer = c.recvBuffer().?;
    const request = handshake_request ++ "\r\n";
    @memcpy(buffer[0..request.len], request);
    c.onRecv(request.len);
    try testing.expect(c.protocol == .websocket);
    const head = c.next().send;
    c.onSend(head[0].len);
    try testing.expectEqual(@as(u64, 11_000), c.deadline());
    fixture.worker.now_ms = 11_000;
    c.onTimeout();
    const ping = c.next().send;
    try testing.expectEqualSlices(u8, &.{ 0x89, 0x00 }, ping[0].base[0..ping[0].len]);
    c.onSend(2);
    try testing.expectEqual(@as(u64, 11_500), c.deadline());
    fixture.worker.now_ms = 11_500;
    c.onTimeout();
    const close = c.next().send;
    try testing.expectEqual(@as(u8, 0x88), close[0].base[0]);
    try testing.expectEqual(@as(u16, 1011), std.mem.readInt(u16, close[0].base[2..4], .big));
    try testing.expectEqual(websocket.CloseCode.internal_error, fixture.handler.close_code.?);
}

test "Session: sends from another thread are queued and delivered on wake" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    const Connection = @import("../Connection.zig");
    var c: Connection = .init(&fixture.worker);
    defer c.deinit();
    const buffer = c.recvBuffer().?;
    const request = handshake_request ++ "\r\n";
    @memcpy(buffer[0..request.len], request);
    c.onRecv(request.len);
    const head = c.next().send;
    c.onSend(head[0].len);
    const conn: websocket.Conn = .{ .session = c.protocol.websocket.exchange.websocket.?, .generation = c.protocol.websocket.exchange.websocket.?.generation };

    const Sender = struct {
        fn run(handle: websocket.Conn, result: *?websocket.Conn.SendError) void {
            handle.send(.text, "from afar") catch |err| {
                result.* = err;
            };
        }
    };
    var failure: ?websocket.Conn.SendError = null;
    const thread = try std.Thread.spawn(.{}, Sender.run, .{ conn, &failure });
    thread.join();
    try testing.expectEqual(@as(?websocket.Conn.SendError, null), failure);
    try testing.expect(c.next() == .recv); // not in the batch until the engine is woken
    const woken = fixture.worker.takeWoken().?;
    try testing.expectEqual(c.protocol.websocket.exchange.websocket.?, woken);
    fixture.worker.clearWake();
    c.onWake();
    const out = c.next().send;
    try testing.expectEqualSlices(u8, "\x81\x09from afar", out[0].base[0..out[0].len]);
    c.onSend(out[0].len);

    // Once closed, a handle from before is refused, from any thread.
    c.onRecv(0);
    try testing.expectError(error.Closed, conn.send(.text, "late"));
    const thread2 = try std.Thread.spawn(.{}, Sender.run, .{ conn, &failure });
    thread2.join();
    try testing.expectEqual(@as(?websocket.Conn.SendError, error.Closed), failure);
}

test "Session: a close code that may not be sent (1005, 1006, 1010, 1015, 0, 2000, 5000) goes out as 1000" {
    const Case = struct { asked: []const u8, sent: u16 };
    const cases = [_]Case{
        .{ .asked = "close:1005", .sent = 1000 }, .{ .asked = "close:1006", .sent = 1000 },
        .{ .asked = "close:1010", .sent = 1000 }, .{ .asked = "close:1015", .sent = 1000 },
        .{ .asked = "close:0", .sent = 1000 },    .{ .asked = "close:2000", .sent = 1000 },
        .{ .asked = "close:5000", .sent = 1000 }, .{ .asked = "close:1001", .sent = 1001 },
        .{ .asked = "close:4000", .sent = 4000 }, .{ .asked = "close:1014", .sent = 1014 },
    };
    for (cases) |case| {
        errdefer std.debug.print("case {s}\n", .{case.asked});
        var input: std.ArrayList(u8) = .empty;
        defer input.deinit(testing.allocator);
        try input.appendSlice(testing.allocator, handshake_request ++ "\r\n");
        try clientFrame(&input, .{ .opcode = 0x1, .payload = case.asked });
        try clientFrame(&input, .{ .opcode = 0x8, .payload = closePayload(1000, "")[0..2] });
        var expected: std.ArrayList(u8) = .empty;
        defer expected.deinit(testing.allocator);
        try expected.appendSlice(testing.allocator, handshake_response ++ "\r\n");
        try serverFrame(&expected, .close, closePayload(case.sent, "asked")[0..7]);
        try expectConversation(.{}, input.items, expected.items, .{ .close_code = .normal });
    }
}

test "Session: bad UTF-8 in the first piece of a text frame closes with 1007 before the rest arrives" {
    // One unfragmented 100-byte text frame (it fits the receive buffer, so the server would
    // wait for all of it), of which only the first 10 payload bytes arrive, 0xff among them.
    var payload: [100]u8 = @splat('a');
    payload[5] = 0xff;
    const reason = "text message is not UTF-8";
    inline for (.{ false, true }) |compressible| {
        var input: std.ArrayList(u8) = .empty;
        defer input.deinit(testing.allocator);
        // With permessage-deflate agreed, an uncompressed (RSV1 clear) text frame is still
        // checked as it arrives.
        try input.appendSlice(testing.allocator, handshake_request ++
            (if (compressible) "Sec-WebSocket-Extensions: permessage-deflate\r\n" else "") ++ "\r\n");
        try clientFrame(&input, .{ .opcode = 0x1, .payload = &payload });
        const cut = input.items.len - 90;
        var expected: std.ArrayList(u8) = .empty;
        defer expected.deinit(testing.allocator);
        try expected.appendSlice(testing.allocator, handshake_response ++
            (if (compressible) "Sec-WebSocket-Extensions: permessage-deflate\r\n" else "") ++ "\r\n");
        try serverFrame(&expected, .close, closePayload(1007, reason)[0 .. 2 + reason.len]);
        const cuts = [_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 5, .max = 9 } } };
        for (cuts) |c| {
            var fixture: Fixture = undefined;
            try fixture.init(.{});
            defer fixture.deinit();
            const result = try Simulation.run(testing.allocator, &fixture.worker, input.items[0..cut], .{ .cuts = c, .keep_open = true });
            defer testing.allocator.free(result.output);
            try testing.expectEqualSlices(u8, expected.items, result.output);
            try testing.expectEqual(websocket.CloseCode.invalid_payload, fixture.handler.close_code.?);
        }
    }
}

test "Session: reusing a session waits for a stale handle that holds its lock" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    const session = fixture.worker.acquireSession().?;
    fixture.worker.releaseSession(session);
    // Another thread is inside a call on a stale handle: it holds the session's lock.
    const Holder = struct {
        locked: std.atomic.Value(bool) = .init(false),
        released: std.atomic.Value(bool) = .init(false),

        fn run(holder: *@This(), s: *websocket.Session) void {
            s.mutex.lock();
            holder.locked.store(true, .release);
            std.Io.sleep(testing.io, .fromMilliseconds(50), .awake) catch {};
            holder.released.store(true, .release);
            s.mutex.unlock();
        }
    };
    var holder: Holder = .{};
    const thread = try std.Thread.spawn(.{}, Holder.run, .{ &holder, session });
    while (!holder.locked.load(.acquire)) std.Thread.yield() catch {};
    const again = fixture.worker.acquireSession().?;
    // Setting it up took the lock in turn instead of overwriting it under the holder.
    try testing.expect(holder.released.load(.acquire));
    thread.join();
    try testing.expectEqual(session, again);
    again.mutex.lock(); // still a working lock
    again.mutex.unlock();
    fixture.worker.releaseSession(again);
}

test "Session: a compressed message with no payload bytes at all is refused (1007), not a crash" {
    var input: std.ArrayList(u8) = .empty;
    defer input.deinit(testing.allocator);
    try input.appendSlice(testing.allocator, handshake_request ++ "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
    // RSV1 with an empty payload: with the tail appended it is 00 00 FF FF, a stored block
    // header without its length check (a sender's empty message is at least the byte 00).
    try clientFrame(&input, .{ .rsv = 0b100, .opcode = 0x1, .payload = "" });
    var expected: std.ArrayList(u8) = .empty;
    defer expected.deinit(testing.allocator);
    try expected.appendSlice(testing.allocator, handshake_response ++ "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
    const reason = "invalid compressed data";
    try serverFrame(&expected, .close, closePayload(1007, reason)[0 .. 2 + reason.len]);
    try expectConversation(.{}, input.items, expected.items, .{ .close_code = .invalid_payload });
}
