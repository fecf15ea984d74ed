//! counter: a stateful handler; every request, on any worker thread, increments one shared
//! count and gets the new value back.
//! Usage: counter [--host H] [--port N] [--workers N] [--engine E]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

const Counter = struct {
    hits: std.atomic.Value(u64) = .init(0),

    pub fn handle(counter: *Counter, req: *saker.Request, res: *saker.Response) !void {
        _ = req;
        const n = counter.hits.fetchAdd(1, .monotonic) + 1;
        res.content_type = "text/plain";
        try res.print("hits: {d}\n", .{n});
    }
};

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: counter [options]");
    var counter: Counter = .{};
    var server = try saker.Server(Counter).init(init.gpa, &counter, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
