//! The server `bench/h2-settings/run` measures: every request's body is read and answered
//! with its length, and the HTTP/2 SETTINGS under test come from the environment
//! (`SAKER_H2_STREAM_WINDOW`, `SAKER_H2_CONNECTION_WINDOW`, `SAKER_H2_FRAME`, bytes), so one
//! binary serves every variant. Usage: server --port N [--engine E] [--workers N]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

const Sink = struct {
    pub fn handle(_: *Sink, req: *saker.Request, res: *saker.Response) !void {
        try res.print("{d}", .{req.body().len});
    }
};

fn fromEnv(name: [*:0]const u8, default: u32) u32 {
    const text = std.c.getenv(name) orelse return default;
    return std.fmt.parseInt(u32, std.mem.span(text), 10) catch default;
}

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: server [options]");
    config.body_bytes_max = 64 * 1024 * 1024;
    config.http2_stream_window_bytes = fromEnv("SAKER_H2_STREAM_WINDOW", config.http2_stream_window_bytes);
    config.http2_connection_window_bytes = fromEnv("SAKER_H2_CONNECTION_WINDOW", config.http2_connection_window_bytes);
    config.http2_frame_bytes_max = fromEnv("SAKER_H2_FRAME", config.http2_frame_bytes_max);
    var sink: Sink = .{};
    var server = try saker.Server(Sink).init(init.gpa, &sink, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
