//! saker: an HTTP/1.1 server library for Linux. `Server(Handler)` builds a server around a
//! handler type at compile time; the protocol core does no I/O, and engines drive it.
const std = @import("std");

pub const http = @import("http.zig");
pub const http1 = @import("http1.zig");
pub const Arena = @import("Arena.zig");
pub const Config = @import("Config.zig");
pub const Connection = @import("Connection.zig");
pub const Exchange = @import("Exchange.zig");
pub const Worker = @import("Worker.zig");
pub const DateCache = @import("DateCache.zig");
pub const Request = @import("Request.zig");
pub const Response = @import("Response.zig");
pub const engine = @import("engine.zig");

test {
    std.testing.refAllDecls(@This());
}
