//! arena: the HTTP/1.1 endpoints of the public HttpArena benchmark, so saker can be measured
//! with its request shapes. Every response is built per request (nothing is cached):
//!
//!   GET|POST /baseline11?a=A&b=B  text/plain: A + B + the integer body (Content-Length or
//!                                 chunked; none counts as 0)
//!   GET  /pipeline                text/plain: ok
//!   GET  /json/{count}?m=M        application/json: {"items":[...],"count":N}, the first
//!                                 `count` items of the dataset (at most all of them), each
//!                                 with total = price * quantity * M (M defaults to 1);
//!                                 compressed when the client accepts it (zstd, br or gzip,
//!                                 each at its fastest level: HttpArena's json-comp profile
//!                                 compares servers at nginx's default gzip level, 1)
//!   POST /upload                  text/plain: the number of body bytes received; the body is
//!                                 streamed through and never held in memory
//!   GET  /static/NAME             the file NAME from the static directory (sendfile)
//!
//! Usage: arena [--dataset PATH] [--static DIR] [--host H] [--port N] [--workers N] [--engine E]
//! Without --dataset, /json answers 404; without --static, /static/ does.
const std = @import("std");
const linux = std.os.linux;
const saker = @import("saker");

pub const std_options = saker.std_options;

/// One item of the dataset (the file is a JSON array of these).
pub const Item = struct {
    id: i64,
    name: []const u8,
    category: []const u8,
    price: i64,
    quantity: i64,
    active: bool,
    tags: []const []const u8,
    rating: struct { score: i64, count: i64 },
};

/// How `/json` is compressed: every coding, at its fastest level.
const json_compression: saker.compress.Policy = .{ .levels = .init(.{ .zstd = 1, .br = 1, .gzip = 1 }) };

/// The application state the routes share (read-only while serving).
pub const App = struct {
    /// The dataset; empty when none was given.
    items: []const Item = &.{},
    /// The static directory, opened once; null when none was given.
    static_dir: ?linux.fd_t = null,
};

/// The routes.
pub const Routes = saker.Router(App, .{ .routes = &.{
    .route(&.{ .GET, .POST }, "/baseline11", baseline),
    .get("/pipeline", pipeline),
    .use(&.{saker.middleware.Compress(json_compression)}, &.{
        .get("/json/:count", jsonItems),
    }),
    .post("/upload", Upload),
    .get("/static/*name", static),
} });

fn baseline(req: *saker.Request, res: *saker.Response) !void {
    const query = req.query();
    const a = try query.getInt(i64, "a") orelse return error.MissingParameter;
    const b = try query.getInt(i64, "b") orelse return error.MissingParameter;
    const text = std.mem.trim(u8, req.body(), " \t\r\n");
    const body_value: i64 = if (text.len == 0) 0 else std.fmt.parseInt(i64, text, 10) catch
        return error.InvalidParameter;
    const sum = std.math.add(i64, a, b) catch return error.InvalidParameter;
    res.content_type = "text/plain";
    try res.print("{d}", .{std.math.add(i64, sum, body_value) catch return error.InvalidParameter});
}

fn pipeline(req: *saker.Request, res: *saker.Response) !void {
    _ = req;
    res.content_type = "text/plain";
    res.setBody("ok");
}

/// An item as served: the dataset's fields and the computed total.
const ItemOut = struct {
    id: i64,
    name: []const u8,
    category: []const u8,
    price: i64,
    quantity: i64,
    active: bool,
    tags: []const []const u8,
    rating: @FieldType(Item, "rating"),
    total: i64,
};

fn jsonItems(app: *App, req: *saker.Request, res: *saker.Response) !void {
    if (app.items.len == 0) {
        res.status = .not_found;
        return res.setBody("no dataset loaded (--dataset)\n");
    }
    const count = @min(try req.paramInt(usize, "count"), app.items.len);
    const m = try req.query().getInt(i64, "m") orelse 1;
    res.content_type = "application/json";
    writeItems(res.writer(), app.items[0..count], m) catch |err| switch (err) {
        error.Overflow => return error.InvalidParameter,
        error.WriteFailed => return res.failure orelse error.WriteFailed,
    };
}

fn writeItems(w: *std.Io.Writer, items: []const Item, m: i64) (std.Io.Writer.Error || error{Overflow})!void {
    try w.writeAll("{\"items\":[");
    for (items, 0..) |item, i| {
        if (i > 0) try w.writeByte(',');
        const total = try std.math.mul(i64, try std.math.mul(i64, item.price, item.quantity), m);
        try std.json.Stringify.value(ItemOut{
            .id = item.id,
            .name = item.name,
            .category = item.category,
            .price = item.price,
            .quantity = item.quantity,
            .active = item.active,
            .tags = item.tags,
            .rating = item.rating,
            .total = total,
        }, .{}, w);
    }
    try w.print("],\"count\":{d}}}", .{items.len});
}

/// POST /upload: counts the body as it streams through (`onBody`), then answers the count.
const Upload = struct {
    pub fn onHead(app: *App, req: *saker.Request, res: *saker.Response) !saker.BodyAction {
        _ = app;
        _ = res;
        const received = try req.arena.create(u64);
        received.* = 0;
        req.user_data = received;
        return .stream;
    }

    pub fn onBody(app: *App, req: *saker.Request, res: *saker.Response, chunk: []const u8) !void {
        _ = app;
        _ = res;
        const received: *u64 = @ptrCast(@alignCast(req.user_data.?));
        received.* += chunk.len;
    }

    pub fn handle(app: *App, req: *saker.Request, res: *saker.Response) !void {
        _ = app;
        const received: *u64 = @ptrCast(@alignCast(req.user_data.?));
        res.content_type = "text/plain";
        try res.print("{d}", .{received.*});
    }
};

fn static(app: *App, req: *saker.Request, res: *saker.Response) !void {
    const dir = app.static_dir orelse return notFound(res);
    const name = (try req.paramDecoded("name")).?;
    if (!safeName(name)) return notFound(res);
    const path = try req.arena.dupeSentinel(u8, name, 0);
    const rc = linux.openat(dir, path, .{ .ACCMODE = .RDONLY, .CLOEXEC = true, .NOFOLLOW = true }, 0);
    switch (linux.errno(rc)) {
        .SUCCESS => {},
        .NOENT, .NOTDIR, .LOOP, .ISDIR, .NAMETOOLONG => return notFound(res),
        .ACCES, .PERM => return answer(res, .forbidden, "403 Forbidden\n"),
        .MFILE, .NFILE, .NOMEM => return answer(res, .service_unavailable, "503 Service Unavailable: out of file descriptors\n"),
        else => return error.OpenFailed,
    }
    const fd: linux.fd_t = @intCast(rc);
    var stat: linux.Statx = undefined;
    const stat_rc = linux.statx(fd, "", linux.AT.EMPTY_PATH, .{ .TYPE = true, .SIZE = true }, &stat);
    if (linux.errno(stat_rc) != .SUCCESS or !linux.S.ISREG(stat.mode)) {
        _ = linux.close(fd);
        return notFound(res);
    }
    res.content_type = contentType(name);
    res.sendFile(.{ .fd = fd, .offset = 0, .len = stat.size, .close_when_done = true });
}

/// A relative path with no empty, "." or ".." segment and no NUL: it cannot leave the
/// directory (symlinks in the last segment are refused by O_NOFOLLOW).
pub fn safeName(name: []const u8) bool {
    if (name.len == 0 or std.mem.findScalar(u8, name, 0) != null) return false;
    var segments = std.mem.splitScalar(u8, name, '/');
    while (segments.next()) |segment| {
        if (segment.len == 0 or std.mem.eql(u8, segment, ".") or std.mem.eql(u8, segment, "..")) return false;
    }
    return true;
}

fn contentType(name: []const u8) []const u8 {
    const dot = std.mem.findScalarLast(u8, name, '.') orelse return "application/octet-stream";
    const types = [_]struct { []const u8, []const u8 }{
        .{ "css", "text/css" },
        .{ "js", "application/javascript" },
        .{ "json", "application/json" },
        .{ "html", "text/html; charset=utf-8" },
        .{ "txt", "text/plain; charset=utf-8" },
        .{ "svg", "image/svg+xml" },
        .{ "webp", "image/webp" },
        .{ "png", "image/png" },
        .{ "jpg", "image/jpeg" },
        .{ "woff2", "font/woff2" },
        .{ "ico", "image/x-icon" },
    };
    for (types) |entry| if (std.ascii.eqlIgnoreCase(name[dot + 1 ..], entry[0])) return entry[1];
    return "application/octet-stream";
}

fn notFound(res: *saker.Response) void {
    answer(res, .not_found, "404 Not Found\n");
}

fn answer(res: *saker.Response, status: saker.http.Status, body: []const u8) void {
    res.status = status;
    res.content_type = "text/plain; charset=utf-8";
    res.setBody(body);
}

/// Parses the dataset (a JSON array of items) into `arena`.
pub fn parseDataset(arena: std.mem.Allocator, bytes: []const u8) ![]const Item {
    return std.json.parseFromSliceLeaky([]const Item, arena, bytes, .{ .ignore_unknown_fields = true });
}

/// Opens `path` as the static directory.
pub fn openStaticDir(path: [:0]const u8) error{OpenFailed}!linux.fd_t {
    const rc = linux.open(path, .{ .ACCMODE = .RDONLY, .DIRECTORY = true, .CLOEXEC = true }, 0);
    if (linux.errno(rc) != .SUCCESS) return error.OpenFailed;
    return @intCast(rc);
}

const usage = "usage: arena [--dataset PATH] [--static DIR] [options]";

pub fn main(init: std.process.Init) !void {
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    var config: saker.Config = .{};
    var app: App = .{};
    var diagnostic: saker.cli.Diagnostic = .{};
    var index: usize = 1;
    while (index < args.len) {
        const flag = args[index];
        if (std.mem.eql(u8, flag, "--dataset") or std.mem.eql(u8, flag, "--static")) {
            if (index + 1 == args.len) saker.cli.fatalUsage(init.io, "missing value", usage);
            const value = args[index + 1];
            index += 2;
            if (std.mem.eql(u8, flag, "--dataset")) {
                const bytes = std.Io.Dir.cwd().readFileAlloc(init.io, value, arena, .limited(64 * 1024 * 1024)) catch |err|
                    saker.cli.fatalUsage(init.io, try std.fmt.allocPrint(arena, "--dataset {s}: {t}", .{ value, err }), usage);
                app.items = parseDataset(arena, bytes) catch |err|
                    saker.cli.fatalUsage(init.io, try std.fmt.allocPrint(arena, "--dataset {s}: not a JSON array of items ({t})", .{ value, err }), usage);
            } else {
                app.static_dir = openStaticDir(try arena.dupeSentinel(u8, value, 0)) catch
                    saker.cli.fatalUsage(init.io, try std.fmt.allocPrint(arena, "--static {s}: cannot open the directory", .{value}), usage);
            }
            continue;
        }
        if (std.mem.eql(u8, flag, "--help") or std.mem.eql(u8, flag, "-h")) {
            std.debug.print("{s}\n{s}", .{ usage, saker.cli.server_flags_help });
            return;
        }
        if (std.mem.eql(u8, flag, "--limits")) return saker.cli.printLimits(init.io, &config);
        const applied = saker.cli.applyServerFlag(&config, args, &index, &diagnostic) catch
            saker.cli.fatalUsage(init.io, diagnostic.message, usage);
        if (!applied) saker.cli.fatalUsage(init.io, try std.fmt.allocPrint(arena, "unknown argument '{s}'", .{flag}), usage);
    }
    saker.cli.finishServerFlags(&config, &diagnostic) catch saker.cli.fatalUsage(init.io, diagnostic.message, usage);
    // HttpArena uploads up to 20 MiB; /upload streams, so only the limit for streamed bodies
    // matters (the default is 1 GiB).
    var routes: Routes = .{ .context = &app };
    var server = try saker.Server(Routes).init(init.gpa, &routes, config);
    defer server.deinit();
    try saker.cli.run(init.io, &server);
}
