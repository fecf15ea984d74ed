//! echo: answers every request with a JSON description of it: method, raw target, path,
//! query, version, headers (in received order and case) and the decoded body. HEAD gets the
//! same headers and no body. Limits are the defaults: target 8 KiB (414), header section
//! 64 KiB (431), body 8 MiB (413).
//! Usage: echo [--host H] [--port N] [--workers N] [--engine E]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

pub const Echo = struct {
    pub fn handle(_: *Echo, req: *saker.Request, res: *saker.Response) !void {
        res.content_type = "application/json";
        const w = res.writer();
        writeJson(w, req) catch return res.failure orelse error.WriteFailed;
    }

    fn writeJson(w: *std.Io.Writer, req: *const saker.Request) std.Io.Writer.Error!void {
        try w.writeAll("{\"method\":");
        try saker.json.writeString(w, req.method.name());
        try w.writeAll(",\"target\":");
        try saker.json.writeString(w, req.target);
        try w.writeAll(",\"path\":");
        try saker.json.writeString(w, req.path);
        try w.writeAll(",\"query\":");
        try saker.json.writeString(w, req.raw_query);
        try w.writeAll(",\"version\":");
        try saker.json.writeString(w, req.version.text());
        try w.writeAll(",\"headers\":[");
        for (req.headers, 0..) |header, i| {
            if (i > 0) try w.writeByte(',');
            try w.writeByte('[');
            try saker.json.writeString(w, header.name);
            try w.writeByte(',');
            try saker.json.writeString(w, header.value);
            try w.writeByte(']');
        }
        try w.writeAll("],\"body\":");
        try saker.json.writeString(w, req.body());
        try w.writeAll("}");
    }
};

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: echo [options]");
    var echo: Echo = .{};
    var server = try saker.Server(Echo).init(init.gpa, &echo, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
