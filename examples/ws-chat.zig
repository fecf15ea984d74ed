//! ws-chat: a chat room. `GET /` serves a small HTML page; its WebSocket (any path) joins the
//! room, and every text message is relayed to everyone in it, sender included. Joins and
//! leaves are announced. Members live on different engine threads, so a relay crosses threads:
//! `Conn.send` is safe from any of them.
//! Usage: ws-chat [--host H] [--port N] [--workers N] [--engine E]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;
const websocket = saker.websocket;

const Chat = struct {
    mutex: saker.sync.Mutex = .{},
    /// The members, in no particular order.
    members: std.ArrayList(websocket.Conn) = .empty,
    gpa: std.mem.Allocator,

    const members_max = 10_000;

    pub fn handle(_: *Chat, req: *saker.Request, res: *saker.Response) !void {
        if (req.isWebSocketUpgrade()) return res.upgradeWebSocket(req, .{});
        if (!std.mem.eql(u8, req.path, "/")) {
            res.status = .not_found;
            return res.setBody("Not Found\n");
        }
        res.content_type = "text/html; charset=utf-8";
        res.setBody(page);
    }

    /// Sends `text` to every member; a member whose queue is full is dropped by the server.
    fn relay(chat: *Chat, text: []const u8) void {
        chat.mutex.lock();
        defer chat.mutex.unlock();
        for (chat.members.items) |member| member.send(.text, text) catch {};
    }

    fn announce(chat: *Chat, comptime format: []const u8, args: anytype) void {
        var buffer: [128]u8 = undefined;
        chat.relay(std.mem.print(&buffer, format, args) catch return);
    }

    pub const WebSocket = struct {
        pub fn onOpen(chat: *Chat, conn: websocket.Conn) !void {
            {
                chat.mutex.lock();
                defer chat.mutex.unlock();
                if (chat.members.items.len == members_max) return conn.close(.try_again_later, "the room is full");
                try chat.members.append(chat.gpa, conn);
            }
            chat.announce("* someone joined ({d} here)", .{chat.count()});
        }

        pub fn onMessage(chat: *Chat, _: websocket.Conn, message: websocket.Message) !void {
            if (message.kind == .text) chat.relay(message.data);
        }

        pub fn onClose(chat: *Chat, conn: websocket.Conn, _: websocket.CloseCode, _: []const u8) void {
            {
                chat.mutex.lock();
                defer chat.mutex.unlock();
                for (chat.members.items, 0..) |member, i| if (member.eql(conn)) {
                    _ = chat.members.swapRemove(i);
                    break;
                };
            }
            chat.announce("* someone left ({d} here)", .{chat.count()});
        }
    };

    fn count(chat: *Chat) usize {
        chat.mutex.lock();
        defer chat.mutex.unlock();
        return chat.members.items.len;
    }
};

const page =
    \\<!doctype html>
    \\<html lang="en">
    \\<meta charset="utf-8">
    \\<title>saker chat</title>
    \\<style>
    \\  body { font: 16px system-ui, sans-serif; max-width: 40em; margin: 2em auto; }
    \\  #log { border: 1px solid #ccc; height: 20em; overflow-y: auto; padding: .5em; white-space: pre-wrap; }
    \\  form { display: flex; gap: .5em; margin-top: .5em; } #text { flex: 1; }
    \\</style>
    \\<h1>saker chat</h1>
    \\<p id="status">connecting…</p>
    \\<div id="log"></div>
    \\<form id="form"><input id="name" value="guest" size="8"><input id="text" autocomplete="off" placeholder="say something"><button>Send</button></form>
    \\<script>
    \\const log = document.getElementById("log");
    \\const status = document.getElementById("status");
    \\const params = new URLSearchParams(location.search);
    \\const selftest = params.get("selftest");
    \\const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/chat");
    \\function show(line) { const div = document.createElement("div"); div.textContent = line; log.appendChild(div); log.scrollTop = log.scrollHeight; }
    \\ws.onopen = () => {
    \\  status.textContent = "connected";
    \\  if (selftest) ws.send("selftest " + selftest + ": hello from the browser, ünïcödé ✓");
    \\};
    \\ws.onmessage = (event) => {
    \\  show(event.data);
    \\  if (selftest && event.data.startsWith("selftest " + selftest + ": hello")) {
    \\    status.textContent = "selftest passed";
    \\    ws.send("selftest " + selftest + ": received");
    \\  }
    \\};
    \\ws.onclose = (event) => { status.textContent = "disconnected (" + event.code + ")"; };
    \\document.getElementById("form").onsubmit = (event) => {
    \\  event.preventDefault();
    \\  const text = document.getElementById("text");
    \\  if (text.value && ws.readyState === WebSocket.OPEN) ws.send(document.getElementById("name").value + ": " + text.value);
    \\  text.value = "";
    \\};
    \\</script>
    \\</html>
    \\
;

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: ws-chat [options]");
    var chat: Chat = .{ .gpa = init.gpa };
    defer chat.members.deinit(init.gpa);
    var server = try saker.Server(Chat).init(init.gpa, &chat, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
