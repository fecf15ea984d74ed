//! saker: an HTTP/1.1 server library for Linux. `Server(Handler)` builds a server around a
//! handler type at compile time; the protocol core does no I/O, and engines drive it.
const std = @import("std");

/// saker's version.
pub const version = "0.1.0";

pub const http = @import("http.zig");
pub const http1 = @import("http1.zig");
pub const Arena = @import("Arena.zig");
pub const cli = @import("cli.zig");
pub const json = @import("json.zig");
pub const Config = @import("Config.zig");
pub const Connection = @import("Connection.zig");
pub const Exchange = @import("Exchange.zig");
pub const Worker = @import("Worker.zig");
pub const DateCache = @import("DateCache.zig");
pub const Request = @import("Request.zig");
pub const Response = @import("Response.zig");
pub const engine = @import("engine.zig");
pub const Server = @import("Server.zig").Server;
pub const websocket = @import("websocket.zig");
pub const Mutex = @import("Mutex.zig");

test {
    std.testing.refAllDecls(@This());
}
