//! router: a tour of `saker.Router` and the request/response conveniences.
//!
//!   GET  /                    Hello (HEAD too; other methods 405; unknown paths 404)
//!   GET  /hello/:name         a path parameter, percent-decoded
//!   GET  /search?q=..&page=N  query parameters (decoded; page must be a number)
//!   GET  /files/*path         a wildcard parameter
//!   POST /login               an urlencoded form; sets a cookie and redirects (303) to /me
//!   GET  /me                  reads the cookie
//!   POST /api/sum             JSON in ({"values":[1,2,3]}), JSON out ({"sum":6,"count":3})
//!   POST /api/upload          multipart/form-data, parsed as it streams in; a JSON summary
//!   POST /api/digest          any body, read as it arrives (req.bodyReader()); its length
//!                             and CRC-32 as JSON
//!   GET  /api/events?n=N      server-sent events, one every 100 ms
//!   GET  /api/stats           the request arena's counters
//!
//! Every response carries `Server-Timing` (timing middleware); `/api/*` answers CORS
//! preflights and marks responses for any origin. `/api/events` and `/api/digest` are
//! flagged `blocking`: on the event-loop engines they run on the handler pool (started by
//! the server for them), so events are sent as they go and bodies are read as they arrive;
//! every other route runs on the event loop.
//! Usage: router [--host H] [--port N] [--workers N] [--engine E]
const std = @import("std");
const saker = @import("saker");

pub const std_options = saker.std_options;

/// The routes.
pub const Routes = saker.Router(void, .{
    .routes = &.{
        .get("/", index),
        .get("/hello/:name", hello),
        .get("/search", search),
        .get("/files/*path", files),
        .post("/login", login),
        .get("/me", me),
        .group("/api", &.{
            .use(&.{saker.middleware.Cors(.{})}, &.{
                .post("/sum", sum),
                .post("/upload", Upload),
                .with(.{ .body_reader = true }, .post("/digest", digest)),
                .with(.{ .blocking = true }, .get("/events", events)),
                .get("/stats", stats),
            }),
        }),
    },
    .middleware = &.{saker.middleware.Timing(.{})},
});

fn index(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    res.content_type = "text/plain";
    res.setBody("Hello, World!");
}

fn hello(req: *saker.Request, res: *saker.Response) !void {
    const name = (try req.paramDecoded("name")).?;
    res.content_type = "text/plain; charset=utf-8";
    try res.print("Hello, {s}!\n", .{name});
}

fn search(req: *saker.Request, res: *saker.Response) !void {
    const q = try req.queryParam("q") orelse return error.MissingParameter;
    const page = try req.query().getInt(u32, "page") orelse 1;
    try res.json(.{ .query = q, .page = page });
}

fn files(req: *saker.Request, res: *saker.Response) !void {
    res.content_type = "text/plain; charset=utf-8";
    try res.print("path: {s}\n", .{(try req.paramDecoded("path")).?});
}

fn login(req: *saker.Request, res: *saker.Response) !void {
    const form = try req.formData();
    const user = try form.getDecoded(req.arena, "user") orelse return error.MissingParameter;
    // A cookie value holds only cookie-octets: keep what fits, as a demo.
    const value = try req.arena.dupe(u8, user);
    for (value) |*c| if (!std.ascii.isAlphanumeric(c.*)) {
        c.* = '_';
    };
    try res.setCookie("user", value, .{ .path = "/", .http_only = true, .same_site = .lax, .max_age_s = 3600 });
    try res.redirect(.see_other, "/me");
}

fn me(req: *saker.Request, res: *saker.Response) !void {
    res.content_type = "text/plain; charset=utf-8";
    if (try req.cookie("user")) |user| {
        try res.print("you are {s}\n", .{user});
    } else {
        res.status = .unauthorized;
        res.setBody("not logged in\n");
    }
}

fn sum(req: *saker.Request, res: *saker.Response) !void {
    const input = try req.json(struct { values: []const i64 });
    var total: i64 = 0;
    for (input.values) |v| total = std.math.add(i64, total, v) catch return error.InvalidParameter;
    try res.json(.{ .sum = total, .count = input.values.len });
}

/// POST /api/upload: a multipart body parsed as it arrives; only part headers are kept.
const Upload = struct {
    const PartSummary = struct { name: []const u8, filename: ?[]const u8, bytes: u64 };

    const State = struct {
        parser: saker.multipart.Parser,
        parts: std.ArrayList(PartSummary) = .empty,
    };

    pub fn onHead(req: *saker.Request, res: *saker.Response) !saker.BodyAction {
        _ = res;
        const state = try req.arena.create(State);
        state.* = .{ .parser = try req.multipartParser(.{ .part_count_max = 16, .part_bytes_max = 64 * 1024 * 1024 }) };
        req.user_data = state;
        return .stream;
    }

    pub fn onBody(req: *saker.Request, res: *saker.Response, chunk: []const u8) !void {
        _ = res;
        const state: *State = @ptrCast(@alignCast(req.user_data.?));
        var input = chunk;
        while (true) {
            const step = try state.parser.feed(input);
            input = input[step.consumed..];
            switch (step.event) {
                .need_more, .end => return,
                .part => |part| try state.parts.append(req.arena, .{
                    .name = try req.arena.dupe(u8, part.name),
                    .filename = if (part.filename) |f| try req.arena.dupe(u8, f) else null,
                    .bytes = 0,
                }),
                .data => |bytes| state.parts.items[state.parts.items.len - 1].bytes += bytes.len,
                .part_end => {},
            }
        }
    }

    pub fn handle(req: *saker.Request, res: *saker.Response) !void {
        const state: *State = @ptrCast(@alignCast(req.user_data.?));
        if (!state.parser.done()) return error.InvalidMultipart; // the body ended early
        try res.json(.{ .parts = state.parts.items });
    }
};

/// POST /api/digest: reads the body as it arrives, a buffer at a time, without holding it.
fn digest(req: *saker.Request, res: *saker.Response) !void {
    const reader = try req.bodyReader();
    var crc: std.hash.Crc32 = .init();
    var total: u64 = 0;
    while (true) {
        // What the reader has buffered (at least one byte, unless the body has ended).
        const chunk = reader.peekGreedy(1) catch |err| switch (err) {
            error.EndOfStream => break,
            error.ReadFailed => return err, // too large, bad framing, timeout: the server answers
        };
        crc.update(chunk);
        total += chunk.len;
        reader.toss(chunk.len);
    }
    try res.json(.{ .bytes = total, .crc32 = crc.final() });
}

fn events(req: *saker.Request, res: *saker.Response) !void {
    const n = try req.query().getInt(u32, "n") orelse 5;
    const stream = try res.eventStream();
    for (0..n) |i| {
        var id_buffer: [16]u8 = undefined;
        var data_buffer: [64]u8 = undefined;
        try stream.send(.{
            .event = "tick",
            .id = try std.mem.print(&id_buffer, "{d}", .{i}),
            .data = try std.mem.print(&data_buffer, "tick {d} of {d}", .{ i + 1, n }),
        });
        // Pausing only makes sense where each event leaves at once.
        if (stream.live() and i + 1 < n) {
            const pause: std.os.linux.timespec = .{ .sec = 0, .nsec = 100 * std.time.ns_per_ms };
            _ = std.os.linux.nanosleep(&pause, null);
        }
    }
}

fn stats(req: *saker.Request, res: *saker.Response) !void {
    const counters = req.arenaStats() orelse return error.NoArena;
    try res.json(counters);
}

pub fn main(init: std.process.Init) !void {
    var config: saker.Config = .{};
    saker.cli.parseExampleArgs(init, &config, "usage: router [options]");
    var routes: Routes = .{ .context = {} };
    var server = try saker.Server(Routes).init(init.gpa, &routes, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
