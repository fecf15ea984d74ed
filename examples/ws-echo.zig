//! ws-echo: a WebSocket echo server. Every message comes back as it was sent (text as text,
//! binary as binary), compressed when the client offers permessage-deflate. Other requests
//! get a one-line page. The Autobahn|Testsuite run (tests/autobahn/run) and the WebSocket
//! benchmark (bench/ws/run) use it.
//! Usage: ws-echo [--host H] [--port N] [--workers N] [--engine E]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

const Echo = struct {
    pub fn handle(_: *Echo, req: *saker.Request, res: *saker.Response) !void {
        if (req.isWebSocketUpgrade()) return res.upgradeWebSocket(req, .{});
        res.content_type = "text/plain";
        res.setBody("ws-echo: connect with a WebSocket client; every message is sent back\n");
    }

    pub const WebSocket = struct {
        pub fn onMessage(_: *Echo, conn: saker.websocket.Conn, message: saker.websocket.Message) !void {
            try conn.send(message.kind, message.data);
        }
    };
};

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: ws-echo [options]");
    var echo: Echo = .{};
    var server = try saker.Server(Echo).init(init.gpa, &echo, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
