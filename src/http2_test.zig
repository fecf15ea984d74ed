//! HTTP/2 session tests on the simulated engine: a client's frames, built with the frame and
//! HPACK encoders, fed whole, per byte and at seeded random sizes; the server's frames parsed
//! back and decoded. Attacks are mounted here with their exact frames; tests/http2.zig mounts
//! them again over real sockets.
const std = @import("std");
const testing = std.testing;
const Config = @import("Config.zig");
const Worker = @import("Worker.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const Simulation = @import("testing/Simulation.zig");
const Done = @import("Done.zig");
const frame = @import("http2/frame.zig");
const hpack = @import("http2/hpack.zig");

const Handler = struct {
    calls: usize = 0,
    /// What `onDone` heard, in order (the first `dones.len`).
    dones: [8]DoneSeen = undefined,
    done_count: usize = 0,

    const DoneSeen = struct { path: [16]u8 = @splat(0), status: u16, body_bytes: u64, complete: bool, core: bool, known: bool };

    fn onDone(context: *anyopaque, done: *const Done) void {
        const self: *Handler = @ptrCast(@alignCast(context));
        defer self.done_count += 1;
        if (self.done_count >= self.dones.len) return;
        var seen: DoneSeen = .{ .status = done.status.code(), .body_bytes = done.body_bytes_sent, .complete = done.complete, .core = done.core_response, .known = done.request != null };
        if (done.request) |req| @memcpy(seen.path[0..@min(req.path.len, 16)], req.path[0..@min(req.path.len, 16)]);
        std.debug.assert(done.version == .http2);
        self.dones[self.done_count] = seen;
    }

    fn doneFor(self: *const Handler, path: []const u8) ?DoneSeen {
        for (self.dones[0..@min(self.done_count, self.dones.len)]) |d| {
            if (std.mem.eql(u8, std.mem.sliceTo(&d.path, 0), path)) return d;
        }
        return null;
    }

    fn handle(context: *anyopaque, req: *Request, res: *Response) anyerror!void {
        const self: *Handler = @ptrCast(@alignCast(context));
        self.calls += 1;
        if (std.mem.eql(u8, req.path, "/hello")) {
            res.content_type = "text/plain";
            try res.writeAll("Hello, World!");
        } else if (std.mem.eql(u8, req.path, "/echo")) {
            try res.print("{s} {s} host={s} body={s}", .{ req.method.name(), req.target, req.host orelse "-", req.body() });
        } else if (std.mem.eql(u8, req.path, "/big")) {
            const n = try std.fmt.parseInt(usize, req.query().get("n").?, 10);
            for (0..n) |i| try res.writer().writeByte(@intCast('a' + i % 26));
        } else if (std.mem.eql(u8, req.path, "/fail")) {
            return error.Boom;
        } else if (std.mem.eql(u8, req.path, "/trailers")) {
            res.content_type = "application/grpc";
            try res.writeAll("abc");
            try res.trailer("grpc-status", "0");
            try res.trailer("X-Sum", "6");
        } else if (std.mem.eql(u8, req.path, "/file-big-trailer")) {
            res.sendFile(.{ .fd = test_file_fd, .offset = 0, .len = 100 });
            const long = try res.arena.alloc(u8, 9000);
            @memset(long, 'v');
            try res.trailer("x-big", long);
        } else if (std.mem.eql(u8, req.path, "/trailers-only")) {
            try res.trailer("grpc-status", "12");
        } else if (std.mem.eql(u8, req.path, "/stream")) {
            // Two chunks (on a handler pool each goes out as it is flushed).
            try res.writeAll("abc");
            try res.flush();
            try res.writeAll("def");
            try res.flush();
        } else if (std.mem.eql(u8, req.path, "/header")) {
            try res.header("X-Test", "Yes");
            res.status = .created;
        } else res.status = .not_found;
    }
};

/// The file `/file-big-trailer` sends (a test sets it).
var test_file_fd: std.os.linux.fd_t = -1;

const Fixture = struct {
    handler: Handler = .{},
    config: Config,
    worker: Worker = undefined,
    budget: @import("Arena.zig").Budget = .init(1 << 30),

    fn init(fixture: *Fixture, config: Config) !void {
        fixture.* = .{ .config = config };
        var reason: []const u8 = "";
        config.validate(&reason) catch |err| {
            std.debug.print("invalid test config: {s}\n", .{reason});
            return err;
        };
        try fixture.worker.init(testing.allocator, &fixture.config, .{
            .context = &fixture.handler,
            .handle = Handler.handle,
            // Every test here also runs the bookkeeping of `onDone`.
            .on_done = Handler.onDone,
        }, .{ .connections_max = 1, .stream_exchanges_max = config.http2_streams_max, .large_buffers_max = 2, .budget = &fixture.budget });
        fixture.worker.date.update(784111777);
    }

    fn deinit(fixture: *Fixture) void {
        fixture.worker.deinit();
    }
};

/// A client: frames in, with its own HPACK encoder.
const Client = struct {
    bytes: std.ArrayList(u8) = .empty,
    table: [4096]u8 = undefined,
    ring: [hpack.DynamicTable.ringLength(4096)]hpack.DynamicTable.Entry = undefined,
    encoder: hpack.Encoder = undefined,

    fn init(client: *Client) !void {
        client.* = .{};
        client.encoder = .init(&client.table, &client.ring);
        try client.bytes.appendSlice(testing.allocator, frame.preface);
        try client.settings(&.{});
    }

    fn deinit(client: *Client) void {
        client.bytes.deinit(testing.allocator);
    }

    fn raw(client: *Client, header: frame.Header, payload: []const u8) !void {
        var h: [frame.header_len]u8 = undefined;
        header.write(&h);
        try client.bytes.appendSlice(testing.allocator, &h);
        try client.bytes.appendSlice(testing.allocator, payload);
    }

    fn settings(client: *Client, values: []const frame.SettingValue) !void {
        var out: [128]u8 = undefined;
        try client.bytes.appendSlice(testing.allocator, out[0..frame.writeSettings(&out, values)]);
    }

    fn block(client: *Client, out: []u8, fields: []const hpack.Field) !usize {
        var n = try client.encoder.begin(out);
        for (fields) |f| n += try client.encoder.encode(out[n..], f.name, f.value, .allowed);
        return n;
    }

    fn request(client: *Client, id: u31, method: []const u8, path: []const u8, end_stream: bool) !void {
        var out: [512]u8 = undefined;
        const n = try client.block(&out, &.{
            .{ .name = ":method", .value = method },
            .{ .name = ":scheme", .value = "http" },
            .{ .name = ":authority", .value = "example.com" },
            .{ .name = ":path", .value = path },
        });
        const flags: u8 = frame.Flags.end_headers | @as(u8, if (end_stream) frame.Flags.end_stream else 0);
        try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = flags, .stream_id = id }, out[0..n]);
    }

    fn data(client: *Client, id: u31, payload: []const u8, end_stream: bool) !void {
        try client.raw(.{ .length = @intCast(payload.len), .type = .data, .flags = if (end_stream) frame.Flags.end_stream else 0, .stream_id = id }, payload);
    }

    fn rst(client: *Client, id: u31) !void {
        var out: [13]u8 = undefined;
        try client.bytes.appendSlice(testing.allocator, out[0..frame.writeRstStream(&out, id, .cancel)]);
    }

    fn windowUpdate(client: *Client, id: u31, increment: u31) !void {
        var out: [13]u8 = undefined;
        try client.bytes.appendSlice(testing.allocator, out[0..frame.writeWindowUpdate(&out, id, increment)]);
    }
};

/// What the server sent, per stream and for the connection.
const Seen = struct {
    const Stream = struct {
        id: u31,
        status: ?[]const u8 = null,
        headers: std.ArrayList(hpack.Field) = .empty,
        trailers: std.ArrayList(hpack.Field) = .empty,
        body: std.ArrayList(u8) = .empty,
        ended: bool = false,
        reset: ?frame.ErrorCode = null,
        /// Index among all the server's frames of the frame that ended the stream.
        end_frame: usize = 0,
    };

    arena: std.heap.ArenaAllocator,
    streams: std.ArrayList(Stream) = .empty,
    goaway: ?frame.ErrorCode = null,
    settings: usize = 0,
    settings_acks: usize = 0,
    ping_acks: usize = 0,
    largest_data: usize = 0,
    frames: usize = 0,

    fn deinit(seen: *Seen) void {
        seen.arena.deinit();
    }

    fn stream(seen: *Seen, id: u31) !*Stream {
        for (seen.streams.items) |*s| if (s.id == id) return s;
        try seen.streams.append(seen.arena.allocator(), .{ .id = id });
        return &seen.streams.items[seen.streams.items.len - 1];
    }

    fn get(seen: *const Seen, id: u31) ?*const Stream {
        for (seen.streams.items) |*s| if (s.id == id) return s;
        return null;
    }
};

fn parseOutput(output: []const u8) !Seen {
    var seen: Seen = .{ .arena = .init(testing.allocator) };
    errdefer seen.deinit();
    const a = seen.arena.allocator();
    var table: [4096]u8 = undefined;
    var ring: [hpack.DynamicTable.ringLength(4096)]hpack.DynamicTable.Entry = undefined;
    var decoder: hpack.Decoder = .init(&table, &ring);
    var rest = output;
    while (rest.len > 0) {
        const parsed = frame.parse(rest, frame.frame_size_max);
        const f = switch (parsed) {
            .frame => |f| f,
            .incomplete => return error.TruncatedOutput,
            .violation => return error.BadServerFrame,
        };
        rest = rest[f.len..];
        const h = f.frame.header;
        seen.frames += 1;
        switch (h.type) {
            .settings => if (h.has(frame.Flags.ack)) {
                seen.settings_acks += 1;
            } else {
                seen.settings += 1;
            },
            .ping => seen.ping_acks += 1,
            .window_update => {},
            .goaway => seen.goaway = frame.goaway(f.frame.payload).code,
            .rst_stream => (try seen.stream(h.stream_id)).reset = frame.rstCode(f.frame.payload),
            .headers => {
                const s = try seen.stream(h.stream_id);
                try testing.expect(h.has(frame.Flags.end_headers));
                var storage: [8192]u8 = undefined;
                var fields: [64]hpack.Field = undefined;
                const decoded = try decoder.decode(f.frame.payload, &storage, &fields);
                const is_trailers = s.status != null;
                for (decoded.fields) |field| {
                    const copy: hpack.Field = .{ .name = try a.dupe(u8, field.name), .value = try a.dupe(u8, field.value) };
                    if (std.mem.eql(u8, field.name, ":status")) {
                        s.status = copy.value;
                    } else if (is_trailers) {
                        try s.trailers.append(a, copy);
                    } else try s.headers.append(a, copy);
                }
                if (h.has(frame.Flags.end_stream)) {
                    s.ended = true;
                    s.end_frame = seen.frames;
                }
            },
            .data => {
                const s = try seen.stream(h.stream_id);
                try testing.expect(!s.ended);
                try s.body.appendSlice(a, f.frame.payload);
                seen.largest_data = @max(seen.largest_data, f.frame.payload.len);
                if (h.has(frame.Flags.end_stream)) {
                    s.ended = true;
                    s.end_frame = seen.frames;
                }
            },
            else => return error.UnexpectedServerFrame,
        }
    }
    return seen;
}

const all_cuts = [_]Simulation.Cuts{ .whole, .bytes, .{ .random = .{ .seed = 1 } }, .{ .random = .{ .seed = 11, .max = 3000 } } };

/// Runs the client's frames with each kind of cut; `check` looks at what came back.
fn exchange(config: Config, client: *const Client, cuts: []const Simulation.Cuts, check: fn (*const Seen, *Fixture) anyerror!void) !void {
    for (cuts) |cut| {
        var fixture: Fixture = undefined;
        try fixture.init(config);
        defer fixture.deinit();
        const result = try Simulation.run(testing.allocator, &fixture.worker, client.bytes.items, .{ .cuts = cut });
        defer testing.allocator.free(result.output);
        var seen = try parseOutput(result.output);
        defer seen.deinit();
        check(&seen, &fixture) catch |err| {
            std.debug.print("cuts: {any}\n", .{cut});
            return err;
        };
        try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
    }
}

fn fieldOf(s: *const Seen.Stream, name: []const u8) ?[]const u8 {
    for (s.headers.items) |f| if (std.mem.eql(u8, f.name, name)) return f.value;
    return null;
}

test "http2: a GET over h2c is answered with HEADERS and DATA" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/hello", true);
    try client.request(3, "GET", "/header", true);
    try exchange(.{}, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(@as(usize, 1), seen.settings);
            try testing.expectEqual(@as(usize, 1), seen.settings_acks);
            const hello = seen.get(1).?;
            try testing.expectEqualStrings("200", hello.status.?);
            try testing.expectEqualStrings("Hello, World!", hello.body.items);
            try testing.expectEqualStrings("text/plain", fieldOf(hello, "content-type").?);
            try testing.expectEqualStrings("13", fieldOf(hello, "content-length").?);
            try testing.expectEqualStrings("Sun, 06 Nov 1994 08:49:37 GMT", fieldOf(hello, "date").?);
            try testing.expect(hello.ended);
            const created = seen.get(3).?;
            try testing.expectEqualStrings("201", created.status.?);
            try testing.expectEqualStrings("Yes", fieldOf(created, "x-test").?); // names lowercased
            try testing.expect(created.ended);
            try testing.expect(seen.goaway == null);
        }
    }.check);
}

test "http2: onDone hears of every response once it is out, with the DATA bytes framed" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/hello", true);
    try client.request(3, "POST", "/echo", false);
    try client.data(3, "more than body_bytes_max", true);
    // More than the client's window (65535): the rest waits for a WINDOW_UPDATE that never
    // comes, and the client cancels the stream.
    try client.request(5, "GET", "/big?n=100000", true);
    try client.rst(5);
    try exchange(.{ .body_bytes_max = 8 }, &client, &all_cuts, struct {
        fn check(seen: *const Seen, fixture: *Fixture) !void {
            _ = seen;
            const h = &fixture.handler;
            try testing.expectEqual(@as(usize, 3), h.done_count);
            const hello = h.doneFor("/hello").?;
            try testing.expect(hello.complete and !hello.core and hello.known);
            try testing.expectEqual(@as(u16, 200), hello.status);
            try testing.expectEqual(@as(u64, 13), hello.body_bytes);
            const refused = h.doneFor("/echo").?;
            try testing.expectEqual(@as(u16, 413), refused.status);
            try testing.expect(refused.core and refused.complete);
            try testing.expect(refused.body_bytes > 0); // the explanation
            const big = h.doneFor("/big").?;
            try testing.expect(!big.complete);
            try testing.expect(big.body_bytes <= 65535);
        }
    }.check);
}

test "http2: a request body in padded and plain DATA frames, and trailers" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "POST", "/echo?x=1", false);
    try client.data(1, "ab", false);
    // A padded frame: pad length 3, content "cd", 3 bytes of padding.
    try client.raw(.{ .length = 6, .type = .data, .flags = frame.Flags.padded, .stream_id = 1 }, "\x03cd\x00\x00\x00");
    var out: [64]u8 = undefined;
    const n = try client.block(&out, &.{.{ .name = "x-checksum", .value = "1" }});
    try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers | frame.Flags.end_stream, .stream_id = 1 }, out[0..n]);
    try exchange(.{}, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqualStrings("POST /echo?x=1 host=example.com body=abcd", seen.get(1).?.body.items);
        }
    }.check);
}

test "http2: malformed requests are reset with PROTOCOL_ERROR, the connection goes on" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    // content-length says 5, the DATA says 2.
    var out: [128]u8 = undefined;
    const n = try client.block(&out, &.{
        .{ .name = ":method", .value = "POST" }, .{ .name = ":scheme", .value = "http" },
        .{ .name = ":path", .value = "/echo" },  .{ .name = "content-length", .value = "5" },
    });
    try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers, .stream_id = 1 }, out[0..n]);
    try client.data(1, "ab", true);
    // An uppercase field name.
    const m = try client.block(&out, &.{
        .{ .name = ":method", .value = "GET" },  .{ .name = ":scheme", .value = "http" },
        .{ .name = ":path", .value = "/hello" }, .{ .name = "X-Upper", .value = "1" },
    });
    try client.raw(.{ .length = @intCast(m), .type = .headers, .flags = frame.Flags.end_headers | frame.Flags.end_stream, .stream_id = 3 }, out[0..m]);
    try client.request(5, "GET", "/hello", true);
    try exchange(.{}, &client, &all_cuts, struct {
        fn check(seen: *const Seen, fixture: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.protocol_error, seen.get(1).?.reset.?);
            try testing.expectEqual(frame.ErrorCode.protocol_error, seen.get(3).?.reset.?);
            try testing.expectEqualStrings("Hello, World!", seen.get(5).?.body.items);
            try testing.expectEqual(@as(usize, 1), fixture.handler.calls);
            try testing.expect(seen.goaway == null);
        }
    }.check);
}

test "http2: a handler error is a 500 on its stream" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/fail", true);
    try client.request(3, "GET", "/nope", true);
    const saved = testing.log_level;
    testing.log_level = .err; // the failure is logged as a warning, on purpose here
    defer testing.log_level = saved;
    try exchange(.{}, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqualStrings("500", seen.get(1).?.status.?);
            try testing.expectEqualStrings("404", seen.get(3).?.status.?);
        }
    }.check);
}

test "http2: response DATA keeps to the client's stream window and frame size" {
    var client: Client = undefined;
    try client.init();
    client.bytes.items.len = frame.preface.len; // replace the empty SETTINGS
    try client.settings(&.{.{ .id = .initial_window_size, .value = 1000 }});
    defer client.deinit();
    try client.request(1, "GET", "/big?n=5000", true);
    try exchange(.{}, &client, &.{ .whole, .{ .random = .{ .seed = 3 } } }, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            const s = seen.get(1).?;
            try testing.expectEqualStrings("5000", fieldOf(s, "content-length").?);
            try testing.expectEqual(@as(usize, 1000), s.body.items.len);
            try testing.expect(!s.ended);
        }
    }.check);
    // Opening the window lets the rest go, in frames no larger than 16384.
    try client.windowUpdate(1, 100_000);
    try client.windowUpdate(0, 100_000);
    try exchange(.{}, &client, &.{ .whole, .{ .random = .{ .seed = 4 } } }, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            const s = seen.get(1).?;
            try testing.expectEqual(@as(usize, 5000), s.body.items.len);
            try testing.expect(s.ended);
        }
    }.check);
}

test "http2: a large download does not starve a small response on the same connection" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.windowUpdate(0, 1 << 30);
    try client.settings(&.{.{ .id = .initial_window_size, .value = 1 << 30 }});
    try client.request(1, "GET", "/big?n=1000000", true);
    try client.request(3, "GET", "/hello", true);
    try exchange(.{}, &client, &.{.whole}, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            const big = seen.get(1).?;
            const small = seen.get(3).?;
            try testing.expectEqual(@as(usize, 1_000_000), big.body.items.len);
            try testing.expect(small.ended and big.ended);
            // Round-robin: the small response ends within the first frames of the large one.
            try testing.expect(small.end_frame < 10);
            try testing.expect(big.end_frame > 60);
            try testing.expect(seen.largest_data <= frame.frame_size_initial);
        }
    }.check);
}

test "http2: Rapid Reset (CVE-2023-44487) ends in GOAWAY ENHANCE_YOUR_CALM" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    var id: u31 = 1;
    for (0..1500) |_| {
        try client.request(id, "GET", "/big?n=100000", true);
        try client.rst(id);
        id += 2;
    }
    try exchange(.{}, &client, &.{.whole}, struct {
        fn check(seen: *const Seen, fixture: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.enhance_your_calm, seen.goaway.?);
            // The budget (1000 by default) bounds the work done.
            try testing.expect(fixture.handler.calls <= 1001);
        }
    }.check);
}

test "http2: stream errors a client provokes (MadeYouReset) spend the same budget" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    var id: u31 = 1;
    for (0..1200) |_| {
        // WINDOW_UPDATE of 0 on a stream: the server must reset it.
        try client.request(id, "POST", "/echo", false);
        try client.raw(.{ .length = 4, .type = .window_update, .flags = 0, .stream_id = id }, "\x00\x00\x00\x00");
        id += 2;
    }
    try exchange(.{}, &client, &.{.whole}, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.enhance_your_calm, seen.goaway.?);
        }
    }.check);
}

test "http2: a CONTINUATION flood is cut at header_bytes_max, and empty ones spend the budget" {
    {
        var client: Client = undefined;
        try client.init();
        defer client.deinit();
        var out: [64]u8 = undefined;
        const n = try client.block(&out, &.{.{ .name = ":method", .value = "GET" }});
        try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = 0, .stream_id = 1 }, out[0..n]);
        const filler: [1000]u8 = @splat(0x40); // never decoded: the block is too long first
        for (0..20) |_| try client.raw(.{ .length = filler.len, .type = .continuation, .flags = 0, .stream_id = 1 }, &filler);
        try exchange(.{ .header_bytes_max = 8192, .request_line_bytes_max = 4096 }, &client, &.{ .whole, .{ .random = .{ .seed = 5, .max = 500 } } }, struct {
            fn check(seen: *const Seen, _: *Fixture) !void {
                try testing.expectEqual(frame.ErrorCode.enhance_your_calm, seen.goaway.?);
            }
        }.check);
    }
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    var out: [64]u8 = undefined;
    const n = try client.block(&out, &.{.{ .name = ":method", .value = "GET" }});
    try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = 0, .stream_id = 1 }, out[0..n]);
    for (0..1100) |_| try client.raw(.{ .length = 0, .type = .continuation, .flags = 0, .stream_id = 1 }, "");
    try exchange(.{}, &client, &.{.whole}, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.enhance_your_calm, seen.goaway.?);
        }
    }.check);
}

test "http2: an HPACK bomb gets 431 on its stream; the connection goes on" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    // One 1500-byte entry in the table, then referred to 40 times: 60 KB of fields from a
    // block of a few dozen bytes more.
    var out: [4096]u8 = undefined;
    const bomb: [1500]u8 = @splat('b');
    var n = try client.block(&out, &.{
        .{ .name = ":method", .value = "GET" },  .{ .name = ":scheme", .value = "http" },
        .{ .name = ":path", .value = "/hello" }, .{ .name = "x-bomb", .value = &bomb },
    });
    for (0..40) |_| n += try hpack.encodeInteger(out[n..], 0x80, 7, 62);
    try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers | frame.Flags.end_stream, .stream_id = 1 }, out[0..n]);
    try client.request(3, "GET", "/hello", true);
    try exchange(.{ .header_bytes_max = 16384 }, &client, &.{ .whole, .bytes }, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqualStrings("431", seen.get(1).?.status.?);
            try testing.expectEqualStrings("Hello, World!", seen.get(3).?.body.items);
        }
    }.check);
}

test "http2: one stream more than SETTINGS_MAX_CONCURRENT_STREAMS is refused" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    var id: u31 = 1;
    for (0..4) |_| {
        try client.request(id, "POST", "/echo", false);
        id += 2;
    }
    try client.request(id, "GET", "/hello", true);
    try exchange(.{ .http2_streams_max = 4 }, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.refused_stream, seen.get(9).?.reset.?);
            try testing.expect(seen.get(1) == null);
        }
    }.check);
}

test "http2: a body over body_bytes_max is answered 413 and the stream reset with NO_ERROR" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "POST", "/echo", false);
    const chunk: [3000]u8 = @splat('z');
    try client.data(1, &chunk, false);
    try client.data(1, &chunk, true);
    try exchange(.{ .body_bytes_max = 4000, .arena_request_bytes_max = 1 << 20 }, &client, &all_cuts, struct {
        fn check(seen: *const Seen, fixture: *Fixture) !void {
            const s = seen.get(1).?;
            try testing.expectEqualStrings("413", s.status.?);
            try testing.expect(s.ended);
            try testing.expectEqual(@as(usize, 0), fixture.handler.calls);
        }
    }.check);
}

test "http2: PING is answered, SETTINGS acknowledged" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    var out: [17]u8 = undefined;
    try client.bytes.appendSlice(testing.allocator, out[0..frame.writePing(&out, false, "12345678")]);
    try client.settings(&.{.{ .id = .header_table_size, .value = 0 }});
    try client.request(1, "GET", "/hello", true);
    try exchange(.{}, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(@as(usize, 1), seen.ping_acks);
            try testing.expectEqual(@as(usize, 2), seen.settings_acks);
            try testing.expectEqualStrings("Hello, World!", seen.get(1).?.body.items);
        }
    }.check);
}

/// Feeds `bytes` to a connection and collects what it sends (everything it has to send).
fn feed(c: *@import("Connection.zig"), bytes: []const u8, output: *std.ArrayList(u8)) !void {
    var rest = bytes;
    while (rest.len > 0) {
        const buffer = c.recvBuffer().?;
        const n = @min(buffer.len, rest.len);
        @memcpy(buffer[0..n], rest[0..n]);
        rest = rest[n..];
        c.onRecv(n);
        try drainOutput(c, output);
    }
}

fn drainOutput(c: *@import("Connection.zig"), output: *std.ArrayList(u8)) !void {
    while (true) switch (c.next()) {
        .send => |iovecs| {
            var sent: usize = 0;
            for (iovecs) |v| {
                try output.appendSlice(testing.allocator, v.base[0..v.len]);
                sent += v.len;
            }
            c.onSend(sent);
        },
        else => return,
    };
}

test "http2: PINGs do not keep a stalled request body alive: 408 at its own deadline" {
    var fixture: Fixture = undefined;
    try fixture.init(.{ .body_timeout_ms = 1000 });
    defer fixture.deinit();
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "POST", "/echo", false);
    fixture.worker.now_ms = 10_000;
    try feed(&c, client.bytes.items, &output);
    const due = c.deadline();
    try testing.expectEqual(@as(u64, 11_000), due);
    // A PING now and then: answered, but the body's deadline stays.
    var ping: [17]u8 = undefined;
    fixture.worker.now_ms = 10_900;
    try feed(&c, ping[0..frame.writePing(&ping, false, "keepidle")], &output);
    try testing.expectEqual(due, c.deadline());
    fixture.worker.now_ms = 11_000;
    c.onTimeout();
    try drainOutput(&c, &output);
    var seen = try parseOutput(output.items);
    defer seen.deinit();
    try testing.expectEqual(@as(usize, 1), seen.ping_acks);
    try testing.expectEqualStrings("408", seen.get(1).?.status.?);
    try testing.expectEqual(@as(usize, 0), fixture.handler.calls);
}

test "http2: frames in flight for a stream the server reset are dropped, not punished" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.settings(&.{});
    // Stream 1 is refused (one stream allowed, stream 3 holds it)...
    try client.request(3, "POST", "/echo", false);
    try client.request(5, "POST", "/echo", false);
    // ...and its DATA and trailers were already on the way.
    for (0..50) |_| try client.data(5, "late", false);
    var out: [64]u8 = undefined;
    const n = try client.block(&out, &.{.{ .name = "x-sum", .value = "1" }});
    try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers | frame.Flags.end_stream, .stream_id = 5 }, out[0..n]);
    try client.data(3, "body", true);
    try exchange(.{ .http2_streams_max = 1, .http2_glitch_burst = 10 }, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.refused_stream, seen.get(5).?.reset.?);
            try testing.expectEqualStrings("POST /echo host=example.com body=body", seen.get(3).?.body.items);
            try testing.expect(seen.goaway == null);
        }
    }.check);
}

test "http2: a WINDOW_UPDATE that overflows a stream's window is a reset the budget pays for" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    var id: u31 = 1;
    for (0..1200) |_| {
        try client.request(id, "GET", "/big?n=100000", true);
        try client.windowUpdate(id, std.math.maxInt(u31));
        id += 2;
    }
    try exchange(.{}, &client, &.{.whole}, struct {
        fn check(seen: *const Seen, fixture: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.enhance_your_calm, seen.goaway.?);
            try testing.expect(fixture.handler.calls <= 1001);
        }
    }.check);
}

test "http2: an idle connection gives its exchange back, and borrows one for the next request" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/hello", true);
    try feed(&c, client.bytes.items, &output);
    try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
    client.bytes.clearRetainingCapacity();
    try client.request(3, "GET", "/hello", true);
    try feed(&c, client.bytes.items, &output);
    try testing.expectEqual(@as(u32, 0), fixture.worker.exchanges_busy);
    var seen = try parseOutput(output.items);
    defer seen.deinit();
    try testing.expectEqualStrings("Hello, World!", seen.get(1).?.body.items);
    try testing.expectEqualStrings("Hello, World!", seen.get(3).?.body.items);
}

test "http2: response trailers end the stream in a HEADERS frame after the body" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "POST", "/trailers", true);
    try client.request(3, "GET", "/trailers-only", true);
    try exchange(.{}, &client, &all_cuts, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            const s = seen.get(1).?;
            try testing.expectEqualStrings("abc", s.body.items);
            try testing.expect(s.ended);
            try testing.expectEqual(@as(usize, 2), s.trailers.items.len);
            try testing.expectEqualStrings("grpc-status", s.trailers.items[0].name);
            try testing.expectEqualStrings("0", s.trailers.items[0].value);
            try testing.expectEqualStrings("x-sum", s.trailers.items[1].name);
            const only = seen.get(3).?;
            try testing.expectEqualStrings("200", only.status.?);
            try testing.expectEqualStrings("12", only.trailers.items[0].value);
            try testing.expect(only.ended);
        }
    }.check);
}

test "http2: a header_bytes_max below the HPACK table size still decodes, and holds lists to it" {
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    const long: [1000]u8 = @splat('a'); // Huffman-coded: a block under 1024 bytes, a list over it
    var out: [2048]u8 = undefined;
    const n = try client.block(&out, &.{
        .{ .name = ":method", .value = "GET" },  .{ .name = ":scheme", .value = "http" },
        .{ .name = ":path", .value = "/hello" }, .{ .name = "x-long", .value = &long },
    });
    try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers | frame.Flags.end_stream, .stream_id = 1 }, out[0..n]);
    try client.request(3, "GET", "/hello", true);
    try exchange(.{ .header_bytes_max = 1024, .recv_buffer_bytes = 1024, .request_line_bytes_max = 1024 }, &client, &.{ .whole, .bytes }, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqualStrings("431", seen.get(1).?.status.?);
            try testing.expectEqualStrings("Hello, World!", seen.get(3).?.body.items);
        }
    }.check);
}

test "http2: a PING ack on a stream-less connection gets a fresh send deadline" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    fixture.worker.now_ms = 10_000;
    try feed(&c, client.bytes.items, &output); // preface, SETTINGS: answered and sent
    // 40 s later (idle timeout 60 s, write timeout 30 s) a PING comes; its ack is not sent yet.
    fixture.worker.now_ms = 50_000;
    var ping: [17]u8 = undefined;
    const n = frame.writePing(&ping, false, "keepidle");
    const buffer = c.recvBuffer().?;
    @memcpy(buffer[0..n], ping[0..n]);
    c.onRecv(n);
    // The batch is in flight: it must have write_timeout_ms to go.
    try testing.expect(c.deadline() >= 50_000 + fixture.config.write_timeout_ms);
}

test "http2: trailers too large after a file body: the other stream's DATA is not sent twice" {
    const fd: std.os.linux.fd_t = @intCast(std.os.linux.memfd_create("http2-test", 0));
    defer _ = std.os.linux.close(fd);
    const content: [100]u8 = @splat('f');
    _ = std.os.linux.write(fd, &content, content.len);
    test_file_fd = fd;
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/file-big-trailer", true);
    try client.request(3, "GET", "/big?n=50000", true);
    const saved = testing.log_level;
    testing.log_level = .err;
    defer testing.log_level = saved;
    try exchange(.{}, &client, &.{.whole}, struct {
        fn check(seen: *const Seen, _: *Fixture) !void {
            try testing.expectEqual(frame.ErrorCode.internal_error, seen.get(1).?.reset.?);
            const big = seen.get(3).?;
            try testing.expectEqual(@as(usize, 50000), big.body.items.len);
            try testing.expect(big.ended);
        }
    }.check);
}

/// A one-thread handler pool for `fixture`'s worker (stop it with `pool.stop`).
fn startPool(fixture: *Fixture, pool: *@import("HandlerPool.zig")) !void {
    try pool.start(testing.allocator, .{ .thread_count = 1, .queue_max = 4, .stack_bytes = 1 << 20 });
    fixture.worker.handler_pool = pool;
}

/// The connection the handler pool posted next; fails after 10 s (a handler that waits for
/// something nothing will give it).
fn awaitCompletion(w: *Worker) !*@import("Connection.zig") {
    for (0..10_000) |_| {
        var taken = w.takeCompletions();
        if (taken.next()) |c| {
            try testing.expectEqual(@as(?*@import("Connection.zig"), null), taken.next());
            return c;
        }
        const pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 1_000_000 };
        _ = std.os.linux.nanosleep(&pause, null);
    }
    return error.NoCompletion;
}

test "http2: a handler pool's finished response goes out before the next handler runs" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    var pool: @import("HandlerPool.zig") = undefined;
    try startPool(&fixture, &pool);
    defer _ = pool.stop(1000);
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/hello", true);
    try client.request(3, "GET", "/header", true);
    try feed(&c, client.bytes.items, &output);
    // Stream 1's handler runs on the pool; the connection waits.
    (try awaitCompletion(&fixture.worker)).onPoolEvent();
    try drainOutput(&c, &output);
    {
        var seen = try parseOutput(output.items);
        defer seen.deinit();
        // Stream 1 is answered: its response must not wait for stream 3's handler.
        try testing.expect(seen.get(1) != null and seen.get(1).?.ended);
    }
    (try awaitCompletion(&fixture.worker)).onPoolEvent();
    try drainOutput(&c, &output);
    var seen = try parseOutput(output.items);
    defer seen.deinit();
    try testing.expect(seen.get(3).?.ended);
}

test "http2: a pool handler's return comes with its own post, after a read the socket served" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    // The body of `/pull` is read as it arrives, by a handler that reads five bytes and answers.
    const Pull = struct {
        fn onHead(_: *anyopaque, _: *Request, _: *Response) anyerror!Worker.BodyAction {
            return .reader;
        }
        fn handle(_: *anyopaque, req: *Request, res: *Response) anyerror!void {
            var buffer: [5]u8 = undefined;
            const n = try (try req.bodyReader()).readSliceShort(&buffer);
            try res.print("read {d}", .{n});
        }
    };
    fixture.worker.dispatch.on_head = Pull.onHead;
    fixture.worker.dispatch.handle = Pull.handle;
    var pool: @import("HandlerPool.zig") = undefined;
    try startPool(&fixture, &pool);
    defer _ = pool.stop(1000);
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "POST", "/pull", false);
    try feed(&c, client.bytes.items, &output);
    // The handler's read is posted, and the body arrives before the loop looks at the post:
    // the socket's bytes serve the read, and the handler returns while the post is listed.
    try waitReadPending(&c);
    client.bytes.clearRetainingCapacity();
    try client.data(1, "hello", true);
    try feed(&c, client.bytes.items, &output);
    // One take carries the return (the post listed before it and the return's own), and
    // nothing is listed after it.
    var returned = false;
    for (0..10_000) |_| {
        var list = fixture.worker.takeCompletions();
        const taken = list.next() orelse {
            const pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 1_000_000 };
            _ = std.os.linux.nanosleep(&pause, null);
            continue;
        };
        try testing.expect(taken == &c and list.next() == null);
        returned = taken.completionLink().return_taken;
        taken.onPoolEvent();
        if (returned) break;
    }
    try testing.expect(returned);
    try testing.expect(!c.handling());
    try testing.expectEqual(@as(?*@import("Connection.zig"), null), fixture.worker.takeCompletions().rest);
    try drainOutput(&c, &output);
    var seen = try parseOutput(output.items);
    defer seen.deinit();
    try testing.expectEqualStrings("read 5", seen.get(1).?.body.items);
}

/// Waits until the pool handler of `c` waits for body bytes (its post listed, not taken).
fn waitReadPending(c: *@import("Connection.zig")) !void {
    const state = c.protocol.http2.state.?;
    for (0..10_000) |_| {
        if (state.pool_exchange.?.handoff.readPending()) return;
        const pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 1_000_000 };
        _ = std.os.linux.nanosleep(&pause, null);
    }
    return error.NoRead;
}

// ---------------------------------------------------------------------------------------------
// Review (review3): cases that fail on the code as committed.

test "review: a streamed response whose stream the client resets after its first chunk is reported to onDone (not complete)" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    var pool: @import("HandlerPool.zig") = undefined;
    try startPool(&fixture, &pool);
    defer _ = pool.stop(1000);
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/stream", true);
    try feed(&c, client.bytes.items, &output);
    // The first chunk: HEADERS and DATA "abc" go out; the handler goes on once they are sent.
    (try awaitCompletion(&fixture.worker)).onPoolEvent();
    try drainOutput(&c, &output);
    {
        var seen = try parseOutput(output.items);
        defer seen.deinit();
        try testing.expectEqualStrings("200", seen.get(1).?.status.?);
        try testing.expectEqualStrings("abc", seen.get(1).?.body.items);
    }
    // The client resets the stream: the handler's next chunk fails, and it returns.
    var reset: Client = .{};
    defer reset.deinit();
    try reset.rst(1);
    try feed(&c, reset.bytes.items, &output);
    // The second chunk is refused and the handler returns: two posts, or one when the second
    // comes before the first was taken (the worker lists a connection once).
    while (c.handling()) (try awaitCompletion(&fixture.worker)).onPoolEvent();
    try drainOutput(&c, &output);
    // HEADERS and 3 bytes of DATA went out: onDone must hear of it, not complete.
    try testing.expectEqual(@as(usize, 1), fixture.handler.done_count);
    const d = fixture.handler.doneFor("/stream").?;
    try testing.expectEqual(@as(u16, 200), d.status);
    try testing.expectEqual(@as(u64, 3), d.body_bytes);
    try testing.expect(!d.complete);
}

test "review: a streamed response whose connection closes after its first chunk is reported to onDone (not complete)" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    var pool: @import("HandlerPool.zig") = undefined;
    try startPool(&fixture, &pool);
    defer _ = pool.stop(1000);
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/stream", true);
    {
        var c: @import("Connection.zig") = .init(&fixture.worker);
        defer c.deinit();
        try feed(&c, client.bytes.items, &output);
        (try awaitCompletion(&fixture.worker)).onPoolEvent();
        try drainOutput(&c, &output);
        // The client closes: the handler's next chunk fails, and it returns.
        _ = c.recvBuffer();
        c.onRecv(0);
        // The second chunk is refused and the handler returns: two posts, or one when the
        // second comes before the first was taken (the worker lists a connection once).
        while (c.handling()) (try awaitCompletion(&fixture.worker)).onPoolEvent();
        try testing.expect(c.next() == .close);
    }
    try testing.expectEqual(@as(usize, 1), fixture.handler.done_count);
    const d = fixture.handler.doneFor("/stream").?;
    try testing.expectEqual(@as(u64, 3), d.body_bytes);
    try testing.expect(!d.complete);
}

test "review: a response whose batch never went out (the socket failed) is reported as not complete" {
    var fixture: Fixture = undefined;
    try fixture.init(.{});
    defer fixture.deinit();
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    try client.request(1, "GET", "/hello", true);
    {
        var c: @import("Connection.zig") = .init(&fixture.worker);
        defer c.deinit();
        var rest: []const u8 = client.bytes.items;
        while (rest.len > 0) {
            const buffer = c.recvBuffer().?;
            const n = @min(buffer.len, rest.len);
            @memcpy(buffer[0..n], rest[0..n]);
            rest = rest[n..];
            c.onRecv(n);
        }
        // The response is in the batch, not one byte of it sent; the socket fails.
        try testing.expect(c.next() == .send);
        c.onError();
        try testing.expect(c.next() == .close);
    }
    try testing.expectEqual(@as(usize, 1), fixture.handler.done_count);
    try testing.expect(!fixture.handler.doneFor("/hello").?.complete);
}

test "review: request bodies announced by content-length hold no more than http2_connection_body_bytes_max before they come" {
    var fixture: Fixture = undefined;
    const body_max = 1024 * 1024;
    const connection_max = 64 * 1024;
    try fixture.init(.{ .body_bytes_max = body_max, .http2_connection_body_bytes_max = connection_max, .arena_request_bytes_max = 2 * body_max });
    defer fixture.deinit();
    const budget_before = fixture.budget.remaining.load(.monotonic);
    var c: @import("Connection.zig") = .init(&fixture.worker);
    defer c.deinit();
    var output: std.ArrayList(u8) = .empty;
    defer output.deinit(testing.allocator);
    var client: Client = undefined;
    try client.init();
    defer client.deinit();
    // Eight POSTs that each announce 1 MiB and send not one byte of it.
    var id: u31 = 1;
    while (id < 16) : (id += 2) {
        var out: [512]u8 = undefined;
        const n = try client.block(&out, &.{
            .{ .name = ":method", .value = "POST" },
            .{ .name = ":scheme", .value = "http" },
            .{ .name = ":authority", .value = "example.com" },
            .{ .name = ":path", .value = "/echo" },
            .{ .name = "content-length", .value = "1048576" },
        });
        try client.raw(.{ .length = @intCast(n), .type = .headers, .flags = frame.Flags.end_headers, .stream_id = id }, out[0..n]);
    }
    try feed(&c, client.bytes.items, &output);
    const taken = budget_before - fixture.budget.remaining.load(.monotonic);
    // Nothing came, yet the connection holds 8 MiB of the server's heap budget.
    testing.expect(taken <= connection_max) catch |err| {
        std.debug.print("heap budget taken by 8 empty announced bodies: {d} bytes (connection limit {d})\n", .{ taken, connection_max });
        return err;
    };
}
