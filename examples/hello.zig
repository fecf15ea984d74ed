//! hello: `GET /` answers `Hello, World!`; other paths are 404; other methods on `/` are 405.
//! Usage: hello [--host H] [--port N] [--workers N] [--engine E]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

const Hello = struct {
    pub fn handle(_: *Hello, req: *saker.Request, res: *saker.Response) !void {
        if (!std.mem.eql(u8, req.path, "/")) {
            res.status = .not_found;
            res.content_type = "text/plain";
            return res.setBody("Not Found\n");
        }
        switch (req.method) {
            .GET, .HEAD => {
                res.content_type = "text/plain";
                res.setBody("Hello, World!");
            },
            else => {
                res.status = .method_not_allowed;
                res.content_type = "text/plain";
                try res.header("Allow", "GET, HEAD");
                res.setBody("Method Not Allowed\n");
            },
        }
    }
};

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: hello [options]");
    var hello: Hello = .{};
    var server = try saker.Server(Hello).init(init.gpa, &hello, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
