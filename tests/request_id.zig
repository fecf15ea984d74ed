//! Request ids (`Config.request_id`, `saker serve --request-id`) on every engine: a usable
//! `X-Request-Id` from the client is the request's and comes back; without one (or with an
//! unusable one) the server makes one, distinct per request, which the handler sees too.
const std = @import("std");
const testing = std.testing;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const Client = @import("Client.zig");
const ServerThread = @import("server_thread.zig").ServerThread;

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

/// Answers with the id the request carries.
const Echo = struct {
    pub fn handle(_: *Echo, req: *saker.Request, res: *saker.Response) !void {
        try res.print("{s}", .{req.request_id orelse "none"});
    }
};

const Running = ServerThread(Echo);

fn ask(port: u16, header: []const u8, body_buffer: []u8) !struct { body: []const u8, echoed: []const u8 } {
    var request: [512]u8 = undefined;
    const response = try Client.fetch(testing.allocator, port, try std.mem.print(&request, "GET / HTTP/1.1\r\nHost: t\r\n{s}\r\n", .{header}));
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 200), response.status);
    const echoed = response.header("X-Request-Id") orelse "";
    @memcpy(body_buffer[0..response.body.len], response.body);
    @memcpy(body_buffer[response.body.len..][0..echoed.len], echoed);
    return .{ .body = body_buffer[0..response.body.len], .echoed = body_buffer[response.body.len..][0..echoed.len] };
}

test "request ids: the client's is kept and sent back; otherwise one is made, on every engine" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, .{ .request_id = true });
        defer running.stop();
        var buffers: [3][512]u8 = undefined;
        const kept = try ask(running.port(), "X-Request-Id: trace-42.a\r\n", &buffers[0]);
        try testing.expectEqualStrings("trace-42.a", kept.body);
        try testing.expectEqualStrings("trace-42.a", kept.echoed);
        const made = try ask(running.port(), "", &buffers[1]);
        try testing.expectEqual(@as(usize, 16), made.body.len);
        for (made.body) |c| try testing.expect(std.ascii.isHex(c));
        try testing.expectEqualStrings(made.body, made.echoed);
        // Too long to be an id: replaced by a made one.
        const long: [200]u8 = @splat('x');
        var header: [256]u8 = undefined;
        const replaced = try ask(running.port(), try std.mem.print(&header, "X-Request-Id: {s}\r\n", .{long}), &buffers[2]);
        try testing.expectEqual(@as(usize, 16), replaced.body.len);
        try testing.expect(!std.mem.eql(u8, replaced.body, made.body));
    }
    // Off: no id, nothing added.
    const running = try Running.start(.epoll, .{});
    defer running.stop();
    var buffer: [512]u8 = undefined;
    const off = try ask(running.port(), "X-Request-Id: trace-1\r\n", &buffer);
    try testing.expectEqualStrings("none", off.body);
    try testing.expectEqualStrings("", off.echoed);
}
