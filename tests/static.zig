//! Integration tests of `saker.StaticFiles` and `saker serve` over real sockets, on every
//! engine, against a fixture tree made at test time: names with spaces and unicode, a 0-byte
//! file, a 100 MiB sparse file, symlinks inside and out of the root, dotfiles, a FIFO,
//! precompressed variants and a file outside the root that must never be served.
const std = @import("std");
const testing = std.testing;
const server_allocator = @import("server_allocator.zig").allocator;
const linux = std.os.linux;
const saker = @import("saker");
const usable = @import("engines.zig").usable;
const usableNames = @import("engines.zig").usableNames;
const build_options = @import("build_options");
const Client = @import("Client.zig");
const sleepMs = @import("clock.zig").sleepMs;
const nowUs = @import("clock.zig").nowUs;
const proc_status = @import("proc_status.zig");
const skipWithout = @import("engines.zig").skipWithout;

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const secret = "TOP-SECRET-OUTSIDE-THE-ROOT";
const big_size: u64 = 100 * 1024 * 1024;
const js_body = "console.log('identity');\n";

/// The fixture: `tmp/outside.txt` and the served tree, the directory `root` beside it.
const Fixture = struct {
    tmp: testing.TmpDir,
    root_path: [:0]u8,

    fn create() !Fixture {
        const io = testing.io;
        var tmp = testing.tmpDir(.{});
        errdefer tmp.cleanup();
        const d = tmp.dir;
        try d.writeFile(io, .{ .sub_path = "outside.txt", .data = secret });
        try d.createDirPath(io, "root/sub/deeper");
        try d.createDirPath(io, "root/docs");
        try d.createDirPath(io, "root/café");
        try d.createDirPath(io, "root/.git");
        try d.createDirPath(io, "root/empty dir");
        const files = [_]struct { []const u8, []const u8 }{
            .{ "root/index.html", "<!doctype html><title>home</title>\n" },
            .{ "root/hello.txt", "Hello, static world!\n" },
            .{ "root/with space.txt", "spaced out\n" },
            .{ "root/café/日本.txt", "unicode ok\n" },
            .{ "root/empty.txt", "" },
            .{ "root/sub/a.txt", "alpha\n" },
            .{ "root/sub/b.css", "body{}\n" },
            .{ "root/sub/<b>&\"'.txt", "odd name\n" },
            .{ "root/sub/.hidden", "hidden\n" },
            .{ "root/sub/deeper/z.json", "{}\n" },
            .{ "root/docs/index.html", "<p>docs</p>\n" },
            .{ "root/.env", "SECRET=1\n" },
            .{ "root/.git/config", "[core]\n" },
            .{ "root/app.js", js_body },
            .{ "root/app.js.gz", "GZIP-BYTES" },
            .{ "root/app.js.br", "BROTLI-BYTES" },
            .{ "root/only-gz.css", "body{color:red}\n" },
            .{ "root/only-gz.css.gz", "GZ-CSS" },
            .{ "root/spa.html", "<p>app shell</p>\n" },
            .{ "root/sub/far-future.txt", "later\n" },
            .{ "root/sub/before-1970.txt", "earlier\n" },
        };
        for (files) |file| try d.writeFile(io, .{ .sub_path = file[0], .data = file[1] });
        // Times a file may really have, outside what an HTTP date can express.
        const future = [2]linux.timespec{ .{ .sec = 1 << 40, .nsec = 0 }, .{ .sec = 1 << 40, .nsec = 0 } };
        try testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.utimensat(d.handle, "root/sub/far-future.txt", &future, 0)));
        const past = [2]linux.timespec{ .{ .sec = -86400 * 365, .nsec = 0 }, .{ .sec = -86400 * 365, .nsec = 0 } };
        try testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.utimensat(d.handle, "root/sub/before-1970.txt", &past, 0)));
        try d.symLink(io, "../outside.txt", "root/escape", .{});
        try d.symLink(io, "/etc/passwd", "root/absolute", .{});
        try d.symLink(io, "..", "root/sub/up", .{});
        try d.symLink(io, "../..", "root/sub/upup", .{});
        try d.symLink(io, "sub/a.txt", "root/inside", .{});
        // 100 MiB, sparse: the last bytes are "THE-END\n".
        var big = try d.createFile(io, "root/big.bin", .{});
        defer big.close(io);
        try testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.ftruncate(big.handle, @intCast(big_size))));
        _ = linux.pwrite(big.handle, "THE-END\n", 8, @intCast(big_size - 8));
        try testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.mknodat(d.handle, "root/fifo", linux.S.IFIFO | 0o644, 0)));
        // A name longer than the cache's key limit: served through the uncached scratch entry.
        const long_name: [250]u8 = @splat('L');
        try d.writeFile(io, .{ .sub_path = "root/" ++ long_name ++ ".txt", .data = "long name\n" });
        const root_path = try d.realPathFileAlloc(io, "root", testing.allocator);
        return .{ .tmp = tmp, .root_path = root_path };
    }

    fn destroy(fixture: *Fixture) void {
        testing.allocator.free(fixture.root_path);
        fixture.tmp.cleanup();
    }
};

/// A StaticFiles server on an ephemeral port.
const Running = struct {
    files: saker.StaticFiles,
    server: saker.Server(saker.StaticFiles),
    thread: std.Thread,

    fn start(kind: saker.engine.Kind, root: []const u8, options: saker.StaticFiles.Options) !*Running {
        return startTuned(kind, root, options, .{});
    }

    /// Limits a test sets lower than `saker serve`'s.
    const Tune = struct { header_timeout_ms: ?u32 = null, body_bytes_max: ?u64 = null };

    fn startTuned(kind: saker.engine.Kind, root: []const u8, options: saker.StaticFiles.Options, tune: Tune) !*Running {
        var config: saker.Config = .{ .host = "127.0.0.1", .port = 0, .engine = kind, .workers = 2 };
        if (tune.header_timeout_ms) |ms| config.header_timeout_ms = ms;
        if (tune.body_bytes_max) |n| config.body_bytes_max = n;
        // As `saker serve` sets them.
        config.send_buffer_bytes = 24 * 1024;
        config.unsent_bytes_max = 64 * 1024;
        config.cork_file_bytes_max = 256 * 1024;
        config = Client.transport(config);
        var static = options;
        static.root = root;
        static.workers = saker.Server(saker.StaticFiles).workerCountFor(&config);
        const running = try testing.allocator.create(Running);
        errdefer testing.allocator.destroy(running);
        running.files = try .init(testing.allocator, static);
        errdefer running.files.deinit();
        running.server = try .init(server_allocator, &running.files, config);
        errdefer running.server.deinit();
        running.thread = try std.Thread.spawn(.{}, serve, .{&running.server});
        return running;
    }

    fn serve(server: *saker.Server(saker.StaticFiles)) void {
        server.serve() catch |err| std.debug.panic("serve failed: {t}", .{err});
    }

    fn stop(running: *Running) void {
        running.server.stop();
        running.thread.join();
        running.server.deinit();
        running.files.deinit();
        testing.allocator.destroy(running);
    }

    fn port(running: *Running) u16 {
        return running.server.port();
    }

    /// GET/HEAD `target` with extra header lines; the caller frees the response.
    fn request(running: *Running, method: []const u8, target: []const u8, headers: []const u8) !Client.Response {
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        var buffer: [2048]u8 = undefined;
        try client.send(try std.mem.print(&buffer, "{s} {s} HTTP/1.1\r\nHost: t\r\n{s}\r\n", .{ method, target, headers }));
        const response = try client.readResponse(testing.allocator, .{ .head_request = std.mem.eql(u8, method, "HEAD") });
        if (std.mem.find(u8, response.body, secret) != null) return error.SecretLeaked;
        return response;
    }

    fn get(running: *Running, target: []const u8) !Client.Response {
        return running.request("GET", target, "");
    }
};

fn expectStatus(response: Client.Response, status: u16) !void {
    if (response.status != status) {
        std.debug.print("expected {d}, got:\n{s}\n{s}\n", .{ status, response.raw_head, response.body });
        return error.TestUnexpectedStatus;
    }
}

fn expectFile(running: *Running, target: []const u8, body: []const u8, content_type: []const u8) !void {
    const response = try running.get(target);
    defer response.deinit(testing.allocator);
    errdefer std.debug.print("target {s}\n", .{target});
    try expectStatus(response, 200);
    try testing.expectEqualStrings(body, response.body);
    try testing.expectEqualStrings(content_type, response.header("Content-Type").?);
}

test "static: files, index, HEAD, names with spaces and unicode, 0 bytes, 405" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        try expectFile(running, "/", "<!doctype html><title>home</title>\n", "text/html; charset=utf-8");
        try expectFile(running, "/index.html", "<!doctype html><title>home</title>\n", "text/html; charset=utf-8");
        try expectFile(running, "/hello.txt", "Hello, static world!\n", "text/plain; charset=utf-8");
        try expectFile(running, "/with%20space.txt", "spaced out\n", "text/plain; charset=utf-8");
        try expectFile(running, "/caf%C3%A9/%E6%97%A5%E6%9C%AC.txt", "unicode ok\n", "text/plain; charset=utf-8");
        try expectFile(running, "/sub/./deeper/../a.txt", "alpha\n", "text/plain; charset=utf-8");
        try expectFile(running, "//sub//b.css", "body{}\n", "text/css; charset=utf-8");
        try expectFile(running, "/inside", "alpha\n", "application/octet-stream");
        try expectFile(running, "/docs/", "<p>docs</p>\n", "text/html; charset=utf-8");
        try expectFile(running, "/empty.txt", "", "text/plain; charset=utf-8");
        try expectFile(running, "/sub/far-future.txt", "later\n", "text/plain; charset=utf-8");
        const long_name: [250]u8 = @splat('L');
        try expectFile(running, "/" ++ long_name ++ ".txt", "long name\n", "text/plain; charset=utf-8");
        const long_range = try running.request("GET", "/" ++ long_name ++ ".txt", "Range: bytes=5-\r\n");
        defer long_range.deinit(testing.allocator);
        try expectStatus(long_range, 206);
        try testing.expectEqualStrings("name\n", long_range.body);
        const long_head = try running.request("HEAD", "/" ++ long_name ++ ".txt", "");
        defer long_head.deinit(testing.allocator);
        try testing.expectEqualStrings("10", long_head.header("Content-Length").?);
        try expectFile(running, "/sub/before-1970.txt", "earlier\n", "text/plain; charset=utf-8");

        const hello = try running.get("/hello.txt");
        defer hello.deinit(testing.allocator);
        const tag = hello.header("ETag").?;
        try testing.expect(tag.len > 2 and tag[0] == '"' and tag[tag.len - 1] == '"');
        try testing.expect(hello.header("Last-Modified") != null);
        try testing.expectEqualStrings("bytes", hello.header("Accept-Ranges").?);
        try testing.expectEqual(@as(?[]const u8, null), hello.header("Vary"));

        const head = try running.request("HEAD", "/hello.txt", "");
        defer head.deinit(testing.allocator);
        try expectStatus(head, 200);
        try testing.expectEqualStrings("21", head.header("Content-Length").?);
        try testing.expectEqualStrings(tag, head.header("ETag").?);

        const big_head = try running.request("HEAD", "/big.bin", "");
        defer big_head.deinit(testing.allocator);
        try testing.expectEqualStrings("104857600", big_head.header("Content-Length").?);

        const post = try running.request("POST", "/hello.txt", "Content-Length: 0\r\n");
        defer post.deinit(testing.allocator);
        try expectStatus(post, 405);
        try testing.expectEqualStrings("GET, HEAD", post.header("Allow").?);

        // Keep-alive: several files on one connection, cached and uncached.
        var client = try Client.connect(running.port(), 10_000);
        defer client.close();
        for (0..3) |_| {
            for ([_][]const u8{ "/hello.txt", "/sub/a.txt", "/empty.txt" }) |target| {
                var buffer: [128]u8 = undefined;
                try client.send(try std.mem.print(&buffer, "GET {s} HTTP/1.1\r\nHost: t\r\n\r\n", .{target}));
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try expectStatus(response, 200);
            }
        }
    }
}

test "static: directories redirect to the slash form; listing escapes names" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        const cases = [_]struct { []const u8, []const u8 }{
            .{ "/sub", "/sub/" },
            .{ "/sub?x=1", "/sub/?x=1" },
            .{ "/empty%20dir", "/empty%20dir/" },
            .{ "/caf%C3%A9", "/caf%C3%A9/" },
            .{ "//sub", "/sub/" }, // never a scheme-relative "//sub/"
            .{ "/sub/deeper/..", "/sub/" },
        };
        for (cases) |case| {
            const response = try running.get(case[0]);
            defer response.deinit(testing.allocator);
            errdefer std.debug.print("target {s}\n", .{case[0]});
            if (case[0].len > 2 and std.mem.endsWith(u8, case[0], "..")) {
                try expectStatus(response, 200); // "/sub/deeper/.." is the directory form already
                continue;
            }
            try expectStatus(response, 301);
            try testing.expectEqualStrings(case[1], response.header("Location").?);
        }

        const page = try running.get("/sub/");
        defer page.deinit(testing.allocator);
        try expectStatus(page, 200);
        try testing.expectEqualStrings("text/html; charset=utf-8", page.header("Content-Type").?);
        const html = page.body;
        try testing.expect(std.mem.find(u8, html, "href=\"./a.txt\"") != null);
        try testing.expect(std.mem.find(u8, html, "href=\"./deeper/\"") != null);
        try testing.expect(std.mem.find(u8, html, "href=\"./%3Cb%3E%26%22%27.txt\"") != null);
        try testing.expect(std.mem.find(u8, html, "&lt;b&gt;&amp;&quot;&#39;.txt") != null);
        try testing.expect(std.mem.find(u8, html, "<b>") == null);
        try testing.expect(std.mem.find(u8, html, ".hidden") == null);
        // Directories first.
        try testing.expect(std.mem.find(u8, html, "deeper/").? < std.mem.find(u8, html, "a.txt").?);
        // "up" resolves to the root (shown), "upup" leaves it (hidden).
        try testing.expect(std.mem.find(u8, html, "href=\"./up/\"") != null);
        try testing.expect(std.mem.find(u8, html, "upup") == null);
        // The column links sort, largest first here; directories stay first.
        try testing.expect(std.mem.find(u8, html, "<a href=\"?sort=size&amp;order=desc\">Size</a>") != null);
        const by_size = try running.get("/sub/?sort=size&order=desc");
        defer by_size.deinit(testing.allocator);
        try expectStatus(by_size, 200);
        const sized = by_size.body;
        try testing.expect(std.mem.find(u8, sized, "Size ↓</a>") != null);
        const order = [_][]const u8{ "href=\"./deeper/\"", "href=\"./%3Cb%3E", "href=\"./before-1970.txt\"", "href=\"./b.css\"", "href=\"./a.txt\"" };
        for (order[0 .. order.len - 1], order[1..]) |first, second| {
            errdefer std.debug.print("{s} should come before {s}\n", .{ first, second });
            try testing.expect(std.mem.find(u8, sized, first).? < std.mem.find(u8, sized, second).?);
        }

        const root_page = try running.get("/empty%20dir/");
        defer root_page.deinit(testing.allocator);
        try expectStatus(root_page, 200);
        try testing.expect(std.mem.find(u8, root_page.body, "0 directories, 0 files") != null);

        const file_slash = try running.get("/hello.txt/");
        defer file_slash.deinit(testing.allocator);
        try expectStatus(file_slash, 404);
    }
}

test "static: cors_origin answers the allowed origin's preflights and marks its responses, on every engine" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{ .cors_origin = "https://app.example" });
        defer running.stop();
        const preflight = try running.request("OPTIONS", "/hello.txt", "Origin: https://app.example\r\n" ++
            "Access-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: range\r\n");
        defer preflight.deinit(testing.allocator);
        try expectStatus(preflight, 204);
        try testing.expectEqualStrings("https://app.example", preflight.header("Access-Control-Allow-Origin").?);
        try testing.expectEqualStrings("GET, HEAD", preflight.header("Access-Control-Allow-Methods").?);
        try testing.expect(std.mem.find(u8, preflight.header("Access-Control-Allow-Headers").?, "Range") != null);

        const read = try running.request("GET", "/hello.txt", "Origin: https://app.example\r\n");
        defer read.deinit(testing.allocator);
        try expectStatus(read, 200);
        try testing.expectEqualStrings("Hello, static world!\n", read.body);
        try testing.expectEqualStrings("https://app.example", read.header("Access-Control-Allow-Origin").?);
        try testing.expect(std.mem.find(u8, read.header("Access-Control-Expose-Headers").?, "Content-Range") != null);
        try testing.expectEqualStrings("Origin", read.header("Vary").?);

        // Another origin: served (CORS only governs what its page may read), without the header;
        // its preflight is an OPTIONS like any other (405).
        const other = try running.request("GET", "/hello.txt", "Origin: https://evil.example\r\n");
        defer other.deinit(testing.allocator);
        try expectStatus(other, 200);
        try testing.expect(other.header("Access-Control-Allow-Origin") == null);
        const other_preflight = try running.request("OPTIONS", "/hello.txt", "Origin: https://evil.example\r\n" ++
            "Access-Control-Request-Method: GET\r\n");
        defer other_preflight.deinit(testing.allocator);
        try expectStatus(other_preflight, 405);
        try testing.expect(other_preflight.header("Access-Control-Allow-Origin") == null);
    }
    // `*`: every origin, no Vary.
    const running = try Running.start(.epoll, fixture.root_path, .{ .cors_origin = "*" });
    defer running.stop();
    const any = try running.request("GET", "/hello.txt", "Origin: https://anyone.example\r\n");
    defer any.deinit(testing.allocator);
    try testing.expectEqualStrings("*", any.header("Access-Control-Allow-Origin").?);
    try testing.expect(any.header("Vary") == null);
}

test "static: with upload_overwrite a PUT replaces a file whole (204), unless If-None-Match: * (412); a directory never" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // The cache keeps its default revalidation (1 s): an upload expires what it cached, so
        // a read sees the replacement at once.
        const running = try Running.start(kind, fixture.root_path, .{ .upload = true, .upload_overwrite = true });
        defer running.stop();
        var buffer: [96]u8 = undefined;
        const path = try std.mem.print(&buffer, "/sub/over-{t}.txt", .{kind});
        const cases = [_]struct { []const u8, u16, []const u8 }{
            .{ "Content-Length: 6\r\n\r\nfirst\n", 201, "first\n" },
            .{ "Content-Length: 7\r\n\r\nsecond\n", 204, "second\n" },
            .{ "If-None-Match: *\r\nContent-Length: 6\r\n\r\nthird\n", 412, "second\n" },
        };
        for (cases) |case| {
            const put = try running.request("PUT", path, case[0]);
            defer put.deinit(testing.allocator);
            try expectStatus(put, case[1]);
            const read = try running.get(path);
            defer read.deinit(testing.allocator);
            try testing.expectEqualStrings(case[2], read.body);
        }
        const directory = try running.request("PUT", "/sub", "Content-Length: 1\r\n\r\nx");
        defer directory.deinit(testing.allocator);
        try expectStatus(directory, 409);
        const listing = try running.get("/sub/");
        defer listing.deinit(testing.allocator);
        // No temporary name is left behind.
        try testing.expect(std.mem.find(u8, listing.body, ".saker-upload") == null);
    }
    var dir = try std.Io.Dir.cwd().openDir(testing.io, fixture.root_path, .{ .iterate = true });
    defer dir.close(testing.io);
    var sub = try dir.openDir(testing.io, "sub", .{ .iterate = true });
    defer sub.close(testing.io);
    var it = sub.iterate();
    while (try it.next(testing.io)) |entry| try testing.expect(!std.mem.startsWith(u8, entry.name, ".saker-upload"));
}

test "static: upload writes new files whole and never overwrites, on every engine" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{ .upload = true });
        defer running.stop();
        var buffer: [4][96]u8 = undefined;
        const path = try std.mem.print(&buffer[0], "/sub/up-{t}.txt", .{kind});
        const put = try std.mem.print(&buffer[1], "Content-Length: 6\r\n\r\nfirst\n", .{});
        const created = try running.request("PUT", path, put);
        defer created.deinit(testing.allocator);
        try expectStatus(created, 201);
        try testing.expectEqualStrings(path, created.header("Location").?);
        const read = try running.get(path);
        defer read.deinit(testing.allocator);
        try expectStatus(read, 200);
        try testing.expectEqualStrings("first\n", read.body);
        // Never overwritten: 409, and the file is as it was.
        const again = try running.request("PUT", path, "Content-Length: 7\r\n\r\nsecond\n");
        defer again.deinit(testing.allocator);
        try expectStatus(again, 409);
        const still = try running.get(path);
        defer still.deinit(testing.allocator);
        try testing.expectEqualStrings("first\n", still.body);
        const cases = [_]struct { []const u8, u16 }{
            .{ "/hello.txt", 409 }, // an existing file of the fixture
            .{ "/no-such-dir/x.txt", 409 },
            .{ "/sub/", 400 },
            .{ "/sub/../../escape.txt", 400 },
            .{ "/.env2", 403 },
            .{ "/sub", 409 }, // a directory's name
        };
        for (cases) |case| {
            errdefer std.debug.print("PUT {s}\n", .{case[0]});
            const response = try running.request("PUT", case[0], "Content-Length: 1\r\n\r\nx");
            defer response.deinit(testing.allocator);
            try expectStatus(response, case[1]);
        }
        const other = try running.request("DELETE", path, "");
        defer other.deinit(testing.allocator);
        try expectStatus(other, 405);
        try testing.expectEqualStrings("GET, HEAD, PUT, POST", other.header("Allow").?);

        // The listing's form: its files become new files of the directory, then 303 back.
        const listing = try running.get("/sub/");
        defer listing.deinit(testing.allocator);
        try testing.expect(std.mem.find(u8, listing.body, "<form method=\"post\" enctype=\"multipart/form-data\">") != null);
        const form_names = try std.mem.print(&buffer[2], "form-{t}", .{kind});
        var body_buffer: [1024]u8 = undefined;
        const body = try std.mem.print(&body_buffer, "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{s}-a.txt\"\r\n" ++
            "Content-Type: text/plain\r\n\r\nalpha\r\n--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nnot a file\r\n" ++
            "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"C:\\\\Users\\\\me\\\\{s}-b.txt\"\r\n\r\nbeta\r\n--XyZ--\r\n", .{ form_names, form_names });
        var head_buffer: [256]u8 = undefined;
        const head = try std.mem.print(&head_buffer, "Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: {d}\r\n\r\n", .{body.len});
        var request_buffer: [1400]u8 = undefined;
        const request = try std.mem.print(&request_buffer, "{s}{s}", .{ head, body });
        const posted = try running.request("POST", "/sub/", request);
        defer posted.deinit(testing.allocator);
        try expectStatus(posted, 303);
        try testing.expectEqualStrings("/sub/", posted.header("Location").?);
        for ([_][]const u8{ "a.txt", "b.txt" }, [_][]const u8{ "alpha", "beta" }) |suffix, content| {
            const file_path = try std.mem.print(&buffer[3], "/sub/{s}-{s}", .{ form_names, suffix });
            const file = try running.get(file_path);
            defer file.deinit(testing.allocator);
            try expectStatus(file, 200);
            try testing.expectEqualStrings(content, file.body);
        }
        // The same files again: the first exists, nothing is overwritten.
        const again_form = try running.request("POST", "/sub/", request);
        defer again_form.deinit(testing.allocator);
        try expectStatus(again_form, 409);
        try testing.expect(std.mem.find(u8, again_form.body, "created before it: 0") != null);
        const not_dir = try running.request("POST", "/hello.txt", request);
        defer not_dir.deinit(testing.allocator);
        try expectStatus(not_dir, 400);
        const not_multipart = try running.request("POST", "/sub/", "Content-Type: text/plain\r\nContent-Length: 1\r\n\r\nx");
        defer not_multipart.deinit(testing.allocator);
        try expectStatus(not_multipart, 415);
    }
    // Without `upload`, PUT is refused and nothing is written.
    const running = try Running.start(.epoll, fixture.root_path, .{});
    defer running.stop();
    const refused = try running.request("PUT", "/sub/never.txt", "Content-Length: 1\r\n\r\nx");
    defer refused.deinit(testing.allocator);
    try expectStatus(refused, 405);
    try testing.expectEqualStrings("GET, HEAD", refused.header("Allow").?);
    const missing = try running.get("/sub/never.txt");
    defer missing.deinit(testing.allocator);
    try expectStatus(missing, 404);
    const no_form = try running.get("/sub/");
    defer no_form.deinit(testing.allocator);
    try testing.expect(std.mem.find(u8, no_form.body, "<form") == null);
}

test "static: traversal, symlinks out of the root, dotfiles, NUL, backslash, FIFO" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        const cases = [_]struct { []const u8, u16 }{
            .{ "/../outside.txt", 400 },
            .{ "/%2e%2e/outside.txt", 400 },
            .{ "/%2E%2E%2Foutside.txt", 400 },
            .{ "/sub/..%2F..%2Foutside.txt", 400 },
            .{ "/sub/%2e%2e/%2e%2e/outside.txt", 400 },
            .{ "/escape", 404 },
            .{ "/absolute", 404 },
            .{ "/sub/upup/outside.txt", 404 },
            .{ "/sub/upup/", 404 },
            .{ "/.env", 404 },
            .{ "/.git/config", 404 },
            .{ "/sub/.hidden", 404 },
            .{ "/%2eenv", 404 },
            .{ "/hello.txt%00.png", 400 },
            .{ "/sub%5C..%5C..%5Coutside.txt", 400 },
            .{ "/bad%zzescape", 400 },
            .{ "/missing.txt", 404 },
            .{ "/fifo", 403 },
        };
        for (cases) |case| {
            const response = try running.get(case[0]);
            defer response.deinit(testing.allocator);
            errdefer std.debug.print("target {s}\n", .{case[0]});
            try expectStatus(response, case[1]);
        }
        // A symlink to a place inside the root is fine.
        try expectFile(running, "/sub/up/hello.txt", "Hello, static world!\n", "text/plain; charset=utf-8");
    }
}

test "static: dotfiles, no listing, custom index, Cache-Control, SPA fallback" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{
            .dotfiles = true,
            .listing = false,
            .index = "hello.txt",
            .cache_control = "public, max-age=60",
            .spa_fallback = "spa.html",
        });
        defer running.stop();
        try expectFile(running, "/.env", "SECRET=1\n", "application/octet-stream");
        try expectFile(running, "/", "Hello, static world!\n", "text/plain; charset=utf-8");
        const listing = try running.get("/sub/");
        defer listing.deinit(testing.allocator);
        try expectStatus(listing, 403);
        const cached = try running.get("/sub/a.txt");
        defer cached.deinit(testing.allocator);
        try testing.expectEqualStrings("public, max-age=60", cached.header("Cache-Control").?);
        // 304s carry the validators, Vary and Cache-Control of the 200 (RFC 9110 §15.4.5).
        const full = try running.request("GET", "/app.js", "Accept-Encoding: gzip\r\n");
        defer full.deinit(testing.allocator);
        try expectStatus(full, 200);
        var buffer: [256]u8 = undefined;
        const conditional = try std.mem.print(&buffer, "Accept-Encoding: gzip\r\nIf-None-Match: {s}\r\n", .{full.header("ETag").?});
        for ([_][]const u8{ "GET", "HEAD" }) |method| {
            const not_modified = try running.request(method, "/app.js", conditional);
            defer not_modified.deinit(testing.allocator);
            try expectStatus(not_modified, 304);
            try testing.expectEqualStrings(full.header("ETag").?, not_modified.header("ETag").?);
            try testing.expectEqualStrings(full.header("Last-Modified").?, not_modified.header("Last-Modified").?);
            try testing.expectEqualStrings("Accept-Encoding", not_modified.header("Vary").?);
            try testing.expectEqualStrings("public, max-age=60", not_modified.header("Cache-Control").?);
            try testing.expectEqual(@as(?[]const u8, null), not_modified.header("Content-Encoding"));
            try testing.expectEqual(@as(?[]const u8, null), not_modified.header("Content-Length"));
        }
        const by_date = try running.request("GET", "/sub/a.txt", try std.mem.print(&buffer, "If-Modified-Since: {s}\r\n", .{cached.header("Last-Modified").?}));
        defer by_date.deinit(testing.allocator);
        try expectStatus(by_date, 304);
        try testing.expectEqualStrings(cached.header("ETag").?, by_date.header("ETag").?);
        try testing.expectEqualStrings("public, max-age=60", by_date.header("Cache-Control").?);
        try testing.expectEqual(@as(?[]const u8, null), by_date.header("Vary")); // no variants
        try expectFile(running, "/app/route/42", "<p>app shell</p>\n", "text/html; charset=utf-8");
        // Out-of-root links are still refused, never replaced by the fallback's content.
        try expectFile(running, "/escape", "<p>app shell</p>\n", "text/html; charset=utf-8");
    }
}

test "static: validators and conditional requests (RFC 9110 §13)" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        const first = try running.get("/hello.txt");
        defer first.deinit(testing.allocator);
        const tag = first.header("ETag").?;
        const modified = first.header("Last-Modified").?;
        const seconds = saker.StaticFiles.parseHttpDate(modified).?;
        var rfc850: [64]u8 = undefined;
        var asctime: [64]u8 = undefined;
        const dates = try obsoleteDates(seconds, &rfc850, &asctime);

        var buffer: [8][256]u8 = undefined;
        const cases = [_]struct { []const u8, u16 }{
            .{ try std.mem.print(&buffer[0], "If-None-Match: {s}\r\n", .{tag}), 304 },
            .{ try std.mem.print(&buffer[1], "If-None-Match: \"x\", W/{s}\r\n", .{tag}), 304 },
            .{ "If-None-Match: \"other\"\r\n", 200 },
            .{ "If-None-Match: *\r\n", 304 },
            .{ try std.mem.print(&buffer[2], "If-Modified-Since: {s}\r\n", .{modified}), 304 },
            .{ try std.mem.print(&buffer[3], "If-Modified-Since: {s}\r\n", .{dates.rfc850}), 304 },
            .{ try std.mem.print(&buffer[4], "If-Modified-Since: {s}\r\n", .{dates.asctime}), 304 },
            .{ "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", 200 },
            .{ "If-Modified-Since: not a date\r\n", 200 },
            // If-None-Match wins over If-Modified-Since.
            .{ try std.mem.print(&buffer[5], "If-None-Match: \"other\"\r\nIf-Modified-Since: {s}\r\n", .{modified}), 200 },
            .{ "If-Match: \"other\"\r\n", 412 },
            .{ try std.mem.print(&buffer[6], "If-Match: W/{s}\r\n", .{tag}), 412 }, // strong comparison
            .{ try std.mem.print(&buffer[7], "If-Match: \"a\", {s}\r\n", .{tag}), 200 },
            .{ "If-Match: *\r\n", 200 },
            .{ "If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", 412 },
            .{ "If-Unmodified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n", 200 },
        };
        for (cases) |case| {
            errdefer std.debug.print("headers {s}\n", .{case[0]});
            const response = try running.request("GET", "/hello.txt", case[0]);
            defer response.deinit(testing.allocator);
            try expectStatus(response, case[1]);
            if (case[1] == 304) {
                try testing.expectEqualStrings(tag, response.header("ETag").?);
                try testing.expectEqual(@as(?[]const u8, null), response.header("Content-Length"));
            }
        }
        const head = try running.request("HEAD", "/hello.txt", buffer[0][0 .. 17 + tag.len]);
        defer head.deinit(testing.allocator);
        try expectStatus(head, 304);
    }
}

fn obsoleteDates(seconds: i64, rfc850: *[64]u8, asctime: *[64]u8) !struct { rfc850: []const u8, asctime: []const u8 } {
    const epoch_seconds: std.time.epoch.EpochSeconds = .{ .secs = @intCast(seconds) };
    const day = epoch_seconds.getEpochDay();
    const year_day = day.calculateYearDay();
    const month_day = year_day.calculateMonthDay();
    const time = epoch_seconds.getDaySeconds();
    const weekdays = [7][]const u8{ "Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday" };
    const months = [12][]const u8{ "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    const weekday = weekdays[@intCast(@mod(day.day, 7))];
    const month = months[@backingInt(month_day.month) - 1];
    return .{
        .rfc850 = try std.mem.print(rfc850, "{s}, {d:0>2}-{s}-{d:0>2} {d:0>2}:{d:0>2}:{d:0>2} GMT", .{
            weekday,                month_day.day_index + 1,   month,                       year_day.year % 100,
            time.getHoursIntoDay(), time.getMinutesIntoHour(), time.getSecondsIntoMinute(),
        }),
        .asctime = try std.mem.print(asctime, "{s} {s} {d: >2} {d:0>2}:{d:0>2}:{d:0>2} {d}", .{
            weekday[0..3],             month,                       month_day.day_index + 1, time.getHoursIntoDay(),
            time.getMinutesIntoHour(), time.getSecondsIntoMinute(), year_day.year,
        }),
    };
}

test "static: ranges, If-Range, multipart, 416, and the end of a 100 MiB sparse file" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        // "Hello, static world!\n" is 21 bytes.
        const cases = [_]struct { []const u8, u16, []const u8, ?[]const u8 }{
            .{ "Range: bytes=0-4\r\n", 206, "Hello", "bytes 0-4/21" },
            .{ "Range: bytes=7-\r\n", 206, "static world!\n", "bytes 7-20/21" },
            .{ "Range: bytes=-7\r\n", 206, "world!\n", "bytes 14-20/21" },
            .{ "Range: bytes=13-1000\r\n", 206, " world!\n", "bytes 13-20/21" },
            .{ "Range: bytes=21-30\r\n", 416, "416 Range Not Satisfiable\n", "bytes */21" },
            .{ "Range: bytes=5-1\r\n", 200, "Hello, static world!\n", null },
            .{ "Range: items=0-4\r\n", 200, "Hello, static world!\n", null },
            .{ "Range: bytes=0-4\r\nIf-Range: \"stale\"\r\n", 200, "Hello, static world!\n", null },
            .{ "Range: bytes=0-4\r\nIf-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n", 200, "Hello, static world!\n", null },
        };
        for (cases) |case| {
            errdefer std.debug.print("headers {s}\n", .{case[0]});
            const response = try running.request("GET", "/hello.txt", case[0]);
            defer response.deinit(testing.allocator);
            try expectStatus(response, case[1]);
            try testing.expectEqualStrings(case[2], response.body);
            if (case[3]) |content_range| try testing.expectEqualStrings(content_range, response.header("Content-Range").?);
        }
        const full = try running.get("/hello.txt");
        defer full.deinit(testing.allocator);
        var buffer: [256]u8 = undefined;
        const if_range_tag = try running.request("GET", "/hello.txt", try std.mem.print(&buffer, "Range: bytes=0-4\r\nIf-Range: {s}\r\n", .{full.header("ETag").?}));
        defer if_range_tag.deinit(testing.allocator);
        try expectStatus(if_range_tag, 206);
        const if_range_date = try running.request("GET", "/hello.txt", try std.mem.print(&buffer, "Range: bytes=0-4\r\nIf-Range: {s}\r\n", .{full.header("Last-Modified").?}));
        defer if_range_date.deinit(testing.allocator);
        try expectStatus(if_range_date, 206);
        // HEAD ignores Range.
        const head = try running.request("HEAD", "/hello.txt", "Range: bytes=0-4\r\n");
        defer head.deinit(testing.allocator);
        try expectStatus(head, 200);

        const multi = try running.request("GET", "/hello.txt", "Range: bytes=0-4, 14-19\r\n");
        defer multi.deinit(testing.allocator);
        try expectStatus(multi, 206);
        const content_type = multi.header("Content-Type").?;
        const prefix = "multipart/byteranges; boundary=";
        try testing.expect(std.mem.startsWith(u8, content_type, prefix));
        const boundary = content_type[prefix.len..];
        const expected = try std.fmt.allocPrint(testing.allocator, "\r\n--{s}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 0-4/21\r\n\r\nHello" ++
            "\r\n--{s}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 14-19/21\r\n\r\nworld!" ++
            "\r\n--{s}--\r\n", .{ boundary, boundary, boundary });
        defer testing.allocator.free(expected);
        try testing.expectEqualStrings(expected, multi.body);
        // A fresh random boundary per response: a file cannot be made to contain it.
        try testing.expectEqual(@as(usize, "saker-".len + 32), boundary.len);
        const again = try running.request("GET", "/hello.txt", "Range: bytes=0-4, 14-19\r\n");
        defer again.deinit(testing.allocator);
        try expectStatus(again, 206);
        try testing.expect(!std.mem.eql(u8, content_type, again.header("Content-Type").?));

        const empty = try running.request("GET", "/empty.txt", "Range: bytes=0-\r\n");
        defer empty.deinit(testing.allocator);
        try expectStatus(empty, 416);

        const tail = try running.request("GET", "/big.bin", "Range: bytes=-8\r\n");
        defer tail.deinit(testing.allocator);
        try expectStatus(tail, 206);
        try testing.expectEqualStrings("THE-END\n", tail.body);
        try testing.expectEqualStrings("bytes 104857592-104857599/104857600", tail.header("Content-Range").?);
        const middle = try running.request("GET", "/big.bin", "Range: bytes=104857000-104857599\r\n");
        defer middle.deinit(testing.allocator);
        try expectStatus(middle, 206);
        try testing.expectEqual(@as(usize, 600), middle.body.len);
        try testing.expectEqualStrings("THE-END\n", middle.body[592..]);
        try testing.expectEqual(@as(u8, 0), middle.body[0]);
    }
}

/// Bytes that differ at every offset (a generator, not a pattern that repeats), so a part sent
/// twice, skipped or out of order changes the hash.
fn fillLarge(bytes: []u8) void {
    var prng: std.Random.DefaultPrng = .init(0x5a4b_e12f);
    prng.random().bytes(bytes);
}

test "static: a 24 MiB file arrives whole on every engine, sendfile resumed after a full socket" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const size = 24 * 1024 * 1024;
    const data = try testing.allocator.alloc(u8, size);
    defer testing.allocator.free(data);
    fillLarge(data);
    try fixture.tmp.dir.writeFile(testing.io, .{ .sub_path = "root/large.bin", .data = data });
    const expected_hash = std.hash.Wyhash.hash(0, data);
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        var client = try Client.connect(running.port(), 30_000);
        defer client.close();
        for (0..2) |round| {
            try client.send("GET /large.bin HTTP/1.1\r\nHost: t\r\n\r\n");
            // Not reading for a while lets the socket buffers fill (they hold a few MiB, not
            // 24): the server's sendfile must stop part-way and resume when there is room.
            if (round == 0) sleepMs(300);
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectStatus(response, 200);
            try testing.expectEqual(@as(usize, size), response.body.len);
            try testing.expectEqual(expected_hash, std.hash.Wyhash.hash(0, response.body));
        }
        // The connection is still in step after the large bodies.
        try client.send("GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        const after = try client.readResponse(testing.allocator, .{});
        defer after.deinit(testing.allocator);
        try testing.expectEqualStrings("Hello, static world!\n", after.body);
    }
}

test "static: a connection's last response, a large file, arrives whole before the close on every engine" {
    // The last response's socket stays corked and loses its unsent limit (engine/socket.zig
    // `FileSend`): the kernel finishes the body after the server closes, and the close must
    // push its last segment.
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const size = 6 * 1024 * 1024 + 123;
    const data = try testing.allocator.alloc(u8, size);
    defer testing.allocator.free(data);
    fillLarge(data);
    try fixture.tmp.dir.writeFile(testing.io, .{ .sub_path = "root/last.bin", .data = data });
    const expected_hash = std.hash.Wyhash.hash(0, data);
    const mid = data[0 .. 40 * 1024];
    try fixture.tmp.dir.writeFile(testing.io, .{ .sub_path = "root/mid.bin", .data = mid });
    const requests = [_][]const u8{
        "GET /last.bin HTTP/1.0\r\n\r\n",
        "GET /last.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        // A keep-alive response first, then the last one on the same connection.
        "GET /last.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /last.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        // A file body within the unsent limit (not a small file kept in memory): corked, and
        // pushed by the close.
        "GET /mid.bin HTTP/1.0\r\n\r\n",
    };
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        for (requests, 0..) |request, i| {
            errdefer std.debug.print("request {d}\n", .{i});
            var client = try Client.connect(running.port(), 30_000);
            defer client.close();
            try client.send(request);
            // Not reading for a while lets the socket buffers fill.
            sleepMs(100);
            const responses: usize = if (i == 2) 2 else 1;
            for (0..responses) |_| {
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try expectStatus(response, 200);
                if (i == 3) {
                    try testing.expectEqualSlices(u8, mid, response.body);
                } else {
                    try testing.expectEqual(@as(usize, size), response.body.len);
                    try testing.expectEqual(expected_hash, std.hash.Wyhash.hash(0, response.body));
                }
            }
            try testing.expect(try client.isClosed());
        }
    }
}

test "static: precompressed variants by Accept-Encoding, with Vary" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{});
        defer running.stop();
        const cases = [_]struct { []const u8, []const u8, ?[]const u8 }{
            .{ "", js_body, null },
            .{ "Accept-Encoding: gzip\r\n", "GZIP-BYTES", "gzip" },
            .{ "Accept-Encoding: gzip, deflate, br\r\n", "BROTLI-BYTES", "br" },
            .{ "Accept-Encoding: br;q=0.5, gzip\r\n", "GZIP-BYTES", "gzip" },
            .{ "Accept-Encoding: br;q=0, gzip;q=0\r\n", js_body, null },
            .{ "Accept-Encoding: identity\r\n", js_body, null },
            .{ "Accept-Encoding: *\r\n", "BROTLI-BYTES", "br" },
            .{ "Accept-Encoding: gzip;q=0.1, identity\r\n", js_body, null },
            .{ "Accept-Encoding: br;q=0.2, gzip;q=0.4, *;q=0.3\r\n", "GZIP-BYTES", "gzip" },
            .{ "Accept-Encoding: identity;q=0\r\n", js_body, null },
        };
        var tags: [cases.len][64]u8 = undefined;
        for (cases, 0..) |case, i| {
            errdefer std.debug.print("headers {s}\n", .{case[0]});
            const response = try running.request("GET", "/app.js", case[0]);
            defer response.deinit(testing.allocator);
            try expectStatus(response, 200);
            try testing.expectEqualStrings(case[1], response.body);
            try testing.expectEqualStrings("text/javascript; charset=utf-8", response.header("Content-Type").?);
            try testing.expectEqualStrings("Accept-Encoding", response.header("Vary").?);
            try testing.expectEqualDeep(case[2], response.header("Content-Encoding"));
            _ = try std.mem.print(&tags[i], "{s}", .{response.header("ETag").?});
        }
        try testing.expect(!std.mem.eql(u8, &tags[0], &tags[1])); // each variant has its own tag
        try testing.expect(!std.mem.eql(u8, &tags[1], &tags[2]));

        const gz_only = try running.request("GET", "/only-gz.css", "Accept-Encoding: br\r\n");
        defer gz_only.deinit(testing.allocator);
        try testing.expectEqualStrings("body{color:red}\n", gz_only.body);
        try testing.expectEqualStrings("Accept-Encoding", gz_only.header("Vary").?);
        const ranged = try running.request("GET", "/app.js", "Accept-Encoding: gzip\r\nRange: bytes=0-3\r\n");
        defer ranged.deinit(testing.allocator);
        try expectStatus(ranged, 206);
        try testing.expectEqualStrings("GZIP", ranged.body);
        try testing.expectEqualStrings("bytes 0-3/10", ranged.header("Content-Range").?);
    }
}

test "static: the open-file cache notices changed, new and removed files" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const io = testing.io;
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        const running = try Running.start(kind, fixture.root_path, .{ .cache = .{ .revalidate_ms = 20 } });
        defer running.stop();
        try fixture.tmp.dir.writeFile(io, .{ .sub_path = "root/changing.txt", .data = "one" });
        try expectFile(running, "/changing.txt", "one", "text/plain; charset=utf-8");
        try fixture.tmp.dir.writeFile(io, .{ .sub_path = "root/changing.txt", .data = "two, longer" });
        sleepMs(60);
        try expectFile(running, "/changing.txt", "two, longer", "text/plain; charset=utf-8");
        try fixture.tmp.dir.deleteFile(io, "root/changing.txt");
        sleepMs(60);
        const gone = try running.get("/changing.txt");
        defer gone.deinit(testing.allocator);
        try expectStatus(gone, 404);
    }
}

test "static: the access log is buffered and flushed within a second" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var fds: [2]linux.fd_t = undefined;
        try testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.pipe2(&fds, .{ .CLOEXEC = true })));
        defer for (fds) |fd| {
            _ = linux.close(fd);
        };
        const running = try Running.start(kind, fixture.root_path, .{ .access_log_fd = fds[1] });
        var stopped = false;
        defer if (!stopped) running.stop();
        const response = try running.request("GET", "/hello.txt?x=%22", "User-Agent: tester \"quoted\"\r\nReferer: http://ref/\r\n");
        response.deinit(testing.allocator);
        var ready = [_]linux.pollfd{.{ .fd = fds[0], .events = linux.POLL.IN, .revents = 0 }};
        try testing.expectEqual(@as(usize, 1), linux.poll(&ready, 1, 3000));
        var buffer: [1024]u8 = undefined;
        const n = linux.read(fds[0], &buffer, buffer.len);
        const line = buffer[0..n];
        try testing.expect(std.mem.startsWith(u8, line, "127.0.0.1 - - ["));
        var expected: [128]u8 = undefined;
        try testing.expect(std.mem.endsWith(u8, line, try std.mem.print(&expected, "] \"GET /hello.txt?x=%22 {s}\" 200 21 \"http://ref/\" \"tester \\\"quoted\\\"\"\n", .{Client.httpVersion()})));
        // What is still buffered at shutdown is written out.
        const missing = try running.get("/nope");
        missing.deinit(testing.allocator);
        running.stop();
        stopped = true;
        const m = linux.read(fds[0], &buffer, buffer.len);
        try testing.expect(std.mem.find(u8, buffer[0..m], try std.mem.print(&expected, "\"GET /nope {s}\" 404 14", .{Client.httpVersion()})) != null);
    }
}

test "static: the access log has the requests the core refused, and the bytes actually sent" {
    try Client.http1Only();
    var fixture = try Fixture.create();
    defer fixture.destroy();
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        var fds: [2]linux.fd_t = undefined;
        try testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.pipe2(&fds, .{ .CLOEXEC = true })));
        defer for (fds) |fd| {
            _ = linux.close(fd);
        };
        const running = try Running.startTuned(kind, fixture.root_path, .{ .access_log_fd = fds[1] }, .{ .header_timeout_ms = 300, .body_bytes_max = 1024 });
        var stopped = false;
        defer if (!stopped) running.stop();
        const long_target: [10 * 1024]u8 = @splat('a');
        const long_field: [70 * 1024]u8 = @splat('b');
        const refusals = [_]struct { request: []const []const u8, status: u16 }{
            .{ .request = &.{"NOT HTTP AT ALL\r\n\r\n"}, .status = 400 },
            .{ .request = &.{"GET /v HTTP/3.0\r\nHost: t\r\n\r\n"}, .status = 505 },
            .{ .request = &.{ "GET /", &long_target, " HTTP/1.1\r\nHost: t\r\n\r\n" }, .status = 414 },
            .{ .request = &.{ "GET /h HTTP/1.1\r\nHost: t\r\nX-Big: ", &long_field, "\r\n\r\n" }, .status = 431 },
            .{ .request = &.{"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n"}, .status = 413 },
            .{ .request = &.{"GET /te HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n"}, .status = 501 },
            // Half a head, then silence: 408 once `header_timeout_ms` has passed.
            .{ .request = &.{"GET /slow HTTP/1.1\r\nHost"}, .status = 408 },
        };
        for (refusals) |refusal| {
            var client = try Client.connect(running.port(), 10_000);
            defer client.close();
            for (refusal.request) |part| client.send(part) catch {}; // the server may answer (and close) first
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try expectStatus(response, refusal.status);
        }
        // A download the client gives up on: the line says what was sent, not the file's size.
        {
            var client = try Client.connect(running.port(), 10_000);
            const small: c_int = 16 * 1024;
            _ = linux.setsockopt(client.fd, linux.SOL.SOCKET, linux.SO.RCVBUF, std.mem.asBytes(&small), @sizeOf(c_int));
            try client.send("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
            var chunk: [16 * 1024]u8 = undefined;
            var got: usize = 0;
            while (got < 64 * 1024) got += try client.readSome(&chunk);
            client.close(); // unread bytes: the kernel resets the connection
        }
        const whole = try running.get("/hello.txt");
        whole.deinit(testing.allocator);
        // Every line is out before `stop` returns (and the aborted download's once the server
        // saw the reset, which the request above gives it time for).
        running.stop();
        stopped = true;
        var log: std.ArrayList(u8) = .empty;
        defer log.deinit(testing.allocator);
        var buffer: [4096]u8 = undefined;
        var ready = [_]linux.pollfd{.{ .fd = fds[0], .events = linux.POLL.IN, .revents = 0 }};
        while (linux.poll(&ready, 1, 0) == 1) {
            const n = linux.read(fds[0], &buffer, buffer.len);
            if (n == 0 or n > buffer.len) break;
            try log.appendSlice(testing.allocator, buffer[0..n]);
        }
        const expected = [_][]const u8{
            "\"NOT HTTP AT ALL\" 400 ",
            "\"GET /v HTTP/3.0\" 505 ",
            "\"GET /aaaa",
            "\"GET /h HTTP/1.1\" 431 ",
            "\"POST /up HTTP/1.1\" 413 ",
            "\"GET /te HTTP/1.1\" 501 ",
            "\"GET /slow HTTP/1.1\" 408 ",
            "\"GET /hello.txt HTTP/1.1\" 200 21 ",
        };
        for (expected) |text| if (std.mem.find(u8, log.items, text) == null) {
            std.debug.print("no line with {s} in:\n{s}\n", .{ text, log.items });
            return error.TestExpectedLine;
        };
        // The 414's request line is cut, and its status follows it.
        try testing.expect(std.mem.find(u8, log.items, "a\" 414 ") != null);
        const download = std.mem.find(u8, log.items, "\"GET /big.bin HTTP/1.1\" 200 ") orelse {
            std.debug.print("no line for the download in:\n{s}\n", .{log.items});
            return error.TestExpectedLine;
        };
        const rest = log.items[download + "\"GET /big.bin HTTP/1.1\" 200 ".len ..];
        const sent = try std.fmt.parseInt(u64, rest[0..std.mem.findScalar(u8, rest, ' ').?], 10);
        try testing.expect(sent >= 32 * 1024 and sent < big_size);
    }
}

/// Runs the `saker` executable with `args`; returns its exit status and output. Fails with
/// `error.Timeout` when it is silent for 30 s (and kills it).
fn runCli(args: []const []const u8) !struct { term: std.process.Child.Term, stderr: []u8, stdout: []u8 } {
    var argv: std.ArrayList([]const u8) = .empty;
    defer argv.deinit(testing.allocator);
    try argv.append(testing.allocator, build_options.saker_exe);
    try argv.appendSlice(testing.allocator, args);
    // A server that starts when it should have refused would otherwise run forever.
    const result = try std.process.run(testing.allocator, testing.io, .{
        .argv = argv.items,
        .timeout = .{ .duration = .{ .raw = .fromSeconds(30), .clock = .awake } },
    });
    return .{ .term = result.term, .stderr = result.stderr, .stdout = result.stdout };
}

test "saker CLI: bad input is one line on stderr and exit status 2" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const occupied = try saker.engine.socket.listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 1, .nonblocking = true, .reuse_port = false });
    defer occupied.close();
    var port_text: [8]u8 = undefined;
    const busy = try std.mem.print(&port_text, "{d}", .{occupied.port});
    const file_path = try std.fmt.allocPrint(testing.allocator, "{s}/hello.txt", .{fixture.root_path});
    defer testing.allocator.free(file_path);
    const cases = [_]struct { []const []const u8, []const u8 }{
        .{ &.{}, "missing command" },
        .{ &.{"frobnicate"}, "unknown command" },
        .{ &.{ "serve", "/no/such/dir/anywhere" }, "no such directory" },
        .{ &.{ "serve", file_path }, "is not a directory" },
        .{ &.{ "serve", fixture.root_path, "--port", busy }, "already in use" },
        .{ &.{ "serve", fixture.root_path, "--port", "99999" }, "--port" },
        .{ &.{ "serve", fixture.root_path, "--bogus" }, "unknown option '--bogus'" },
        .{ &.{ "serve", fixture.root_path, "--index" }, "--index needs a value" },
        .{ &.{ "serve", fixture.root_path, "--index", "../x" }, "--index" },
        .{ &.{ "serve", fixture.root_path, "--spa", "nope.html" }, "--spa 'nope.html': no such file" },
        .{ &.{ "serve", fixture.root_path, "--spa", "sub" }, "--spa 'sub': no such file" },
        .{ &.{ "serve", fixture.root_path, "--spa", "../outside.txt" }, "--spa" },
        .{ &.{ "serve", fixture.root_path, "--spa" }, "--spa needs a value" },
        .{ &.{ "serve", "a", "b" }, "more than one directory" },
        .{ &.{ "serve", fixture.root_path, "--host", "example.invalid" }, "--host: 'example.invalid'" },
        .{ &.{ "serve", fixture.root_path, "--port=" }, "--port" },
        .{ &.{ "serve", fixture.root_path, "--dotfiles=yes" }, "--dotfiles takes no value" },
        .{ &.{ "serve", fixture.root_path, "-p" }, "--port needs a value" },
        .{ &.{ "serve", fixture.root_path, "--access-log", "/no/such/dir/log" }, "--access-log" },
        .{ &.{ "serve", fixture.root_path, "--cors", "app.example" }, "--cors 'app.example': must be * or an origin" },
        .{ &.{ "serve", fixture.root_path, "--cors" }, "--cors needs a value" },
        .{ &.{ "serve", fixture.root_path, "--health", "healthz" }, "--health 'healthz': must be a path starting with /" },
        .{ &.{ "serve", fixture.root_path, "--upload-max", "lots" }, "--upload-max 'lots': a size such as 500M" },
        .{ &.{ "serve", fixture.root_path, "--upload=yes" }, "--upload takes no value" },
        .{ &.{ "serve", fixture.root_path, "--limit", "nope=1" }, "--limit: no limit named 'nope'" },
        .{ &.{ "serve", fixture.root_path, "--limit", "connections_max" }, "--limit 'connections_max': not NAME=VALUE" },
        .{ &.{ "serve", fixture.root_path, "--limit", "connections_max=many" }, "--limit connections_max: 'many' is not a whole number" },
        .{ &.{ "serve", fixture.root_path, "--limit", "idle_timeout_ms=soon" }, "--limit idle_timeout_ms: 'soon' is not a time" },
        .{ &.{ "serve", fixture.root_path, "--limit", "header_count_max=70000" }, "--limit header_count_max: 70000 is more than 65535" },
        .{ &.{ "serve", fixture.root_path, "--limit", "recv_buffer_bytes=100" }, "invalid configuration: recv_buffer_bytes must be at least 1024" },
        .{ &.{ "serve", fixture.root_path, "--limit" }, "--limit needs a value" },
    };
    for (cases) |case| {
        const result = try runCli(case[0]);
        defer testing.allocator.free(result.stderr);
        defer testing.allocator.free(result.stdout);
        errdefer std.debug.print("args {any}: {any}\nstderr: {s}\n", .{ case[0], result.term, result.stderr });
        try testing.expectEqual(std.process.Child.Term{ .exited = 2 }, result.term);
        try testing.expectEqual(@as(usize, 1), std.mem.countScalar(u8, result.stderr, '\n'));
        try testing.expect(std.mem.startsWith(u8, result.stderr, "saker: error: "));
        try testing.expect(std.mem.find(u8, result.stderr, case[1]) != null);
    }
    const version = try runCli(&.{"--version"});
    defer testing.allocator.free(version.stderr);
    defer testing.allocator.free(version.stdout);
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, version.term);
    try testing.expectEqualStrings("saker " ++ saker.version ++ "\n", version.stdout);
    const help = try runCli(&.{"--help"});
    defer testing.allocator.free(help.stderr);
    defer testing.allocator.free(help.stdout);
    try testing.expect(std.mem.find(u8, help.stdout, "saker serve [DIR]") != null);
}

/// A `saker serve` child process and the port it announced.
const CliServer = struct {
    child: std.process.Child,
    port: u16,
    reader: std.Io.File.Reader,
    buffer: [4096]u8,
    stdout_rest: usize = 0,

    /// Spawns `saker serve ARGS...` (stdout piped) and reads the `listening on` line.
    fn start(server: *CliServer, args: []const []const u8) !void {
        return server.startOn("127.0.0.1", args);
    }

    /// `start`, for a server that listens on `host` (`-b`).
    fn startOn(server: *CliServer, host: []const u8, args: []const []const u8) !void {
        const io = testing.io;
        var argv: std.ArrayList([]const u8) = .empty;
        defer argv.deinit(testing.allocator);
        try argv.appendSlice(testing.allocator, &.{ build_options.saker_exe, "serve" });
        try argv.appendSlice(testing.allocator, args);
        server.stdout_rest = 0;
        Client.plaintextServer(); // a server process of its own: plaintext
        server.child = try std.process.spawn(io, .{ .argv = argv.items, .stdout = .pipe, .stderr = .ignore });
        errdefer server.child.kill(io);
        server.reader = server.child.stdout.?.readerStreaming(io, &server.buffer);
        const line = std.mem.trimEnd(u8, try server.reader.interface.takeDelimiterInclusive('\n'), "\n");
        var prefix_buffer: [64]u8 = undefined;
        const prefix = try std.mem.print(&prefix_buffer, "listening on http://{s}:", .{host});
        if (!std.mem.startsWith(u8, line, prefix)) return error.UnexpectedFirstLine;
        server.port = try std.fmt.parseInt(u16, line[prefix.len..], 10);
    }

    /// SIGINT, then the exit status; `stdout_rest` counts what it printed after the first
    /// line.
    fn stop(server: *CliServer) !std.process.Child.Term {
        _ = linux.kill(server.child.id.?, linux.SIG.INT);
        server.stdout_rest = try server.reader.interface.discardRemaining();
        return server.child.wait(testing.io);
    }
};

test "saker serve -b 0.0.0.0: the URL of every interface address follows, loopback among them" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var server: CliServer = undefined;
    try server.startOn("0.0.0.0", &.{ fixture.root_path, "-b", "0.0.0.0", "-p", "0", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    var expected_buffer: [64]u8 = undefined;
    const expected = try std.mem.print(&expected_buffer, "  http://127.0.0.1:{d}\n", .{server.port});
    // The address lines came with the first, in one write (under PIPE_BUF, so whole): they
    // are in the reader's buffer already, and nothing here waits for more.
    const rest = server.reader.interface.buffered();
    errdefer std.debug.print("after the first line: {s}\n", .{rest});
    try testing.expect(std.mem.find(u8, rest, expected) != null);
    var lines = std.mem.tokenizeScalar(u8, rest, '\n');
    while (lines.next()) |line| try testing.expect(std.mem.startsWith(u8, line, "  http://"));
    const response = try Client.fetch(testing.allocator, server.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer response.deinit(testing.allocator);
    try expectStatus(response, 200);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}

test "saker serve --upload --upload-max 1K: a PUT within the limit is written, a larger one is 413" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var server: CliServer = undefined;
    try server.start(&.{ fixture.root_path, "-p", "0", "--upload", "--upload-max", "1K", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    const small = try Client.fetch(testing.allocator, server.port, "PUT /small.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    defer small.deinit(testing.allocator);
    try expectStatus(small, 201);
    const read = try Client.fetch(testing.allocator, server.port, "GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer read.deinit(testing.allocator);
    try testing.expectEqualStrings("hello", read.body);
    const large = try Client.fetch(testing.allocator, server.port, "PUT /large.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2048\r\n\r\n");
    defer large.deinit(testing.allocator);
    try expectStatus(large, 413);
    const none = try Client.fetch(testing.allocator, server.port, "GET /large.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer none.deinit(testing.allocator);
    try expectStatus(none, 404);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}

test "saker serve --upload-max 64M: the server starts, and uploads above the 8 MiB default are written whole (PUT and the form)" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var server: CliServer = undefined;
    // Buffered uploads live in the request arena: the flag makes room for them (it once made
    // the configuration invalid above 128 MiB less the arena).
    try server.start(&.{ fixture.root_path, "-p", "0", "--upload", "--upload-max", "64M", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    const big = try testing.allocator.alloc(u8, 9 * 1024 * 1024);
    defer testing.allocator.free(big);
    for (big, 0..) |*byte, i| byte.* = @truncate(i *% 7 +% (i >> 13));
    var client = try Client.connectPlain(server.port, 30_000);
    defer client.close();
    var head_buffer: [256]u8 = undefined;
    try client.send(try std.mem.print(&head_buffer, "PUT /up-put.bin HTTP/1.1\r\nHost: t\r\nContent-Length: {d}\r\n\r\n", .{big.len}));
    try client.send(big);
    const put = try client.readResponse(testing.allocator, .{});
    defer put.deinit(testing.allocator);
    try expectStatus(put, 201);
    // Not there yet (and so cached as missing): the upload must expire that.
    const before_form = try Client.fetchPlain(testing.allocator, server.port, "GET /sub/up-form.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    defer before_form.deinit(testing.allocator);
    try expectStatus(before_form, 404);
    // The listing's form: a field, then the same bytes as a file part.
    const form_head = "--B0und\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n" ++
        "--B0und\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up-form.bin\"\r\n\r\n";
    const form_tail = "\r\n--B0und--\r\n";
    try client.send(try std.mem.print(&head_buffer, "POST /sub/ HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=B0und\r\nContent-Length: {d}\r\n\r\n", .{form_head.len + big.len + form_tail.len}));
    try client.send(form_head);
    try client.send(big);
    try client.send(form_tail);
    const posted = try client.readResponse(testing.allocator, .{});
    defer posted.deinit(testing.allocator);
    try expectStatus(posted, 303);
    try testing.expectEqualStrings("303 See Other: created 1: up-form.bin\n", posted.body);
    for ([_][]const u8{ "/up-put.bin", "/sub/up-form.bin" }) |path| {
        var request_buffer: [128]u8 = undefined;
        const read = try Client.fetchPlain(testing.allocator, server.port, try std.mem.print(&request_buffer, "GET {s} HTTP/1.1\r\nHost: t\r\n\r\n", .{path}));
        defer read.deinit(testing.allocator);
        try expectStatus(read, 200);
        try testing.expect(std.mem.eql(u8, big, read.body));
    }
    // A name that exists is refused, and the file is as it was.
    const again = try Client.fetchPlain(testing.allocator, server.port, "PUT /up-put.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    defer again.deinit(testing.allocator);
    try expectStatus(again, 409);
    // Beyond --upload-max: 413 before anything is read or written.
    const large = try Client.fetchPlain(testing.allocator, server.port, "PUT /too-large.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 67108865\r\n\r\n");
    defer large.deinit(testing.allocator);
    try expectStatus(large, 413);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}

test "saker serve --limit: the limits named take effect (414 past the request line limit, an idle close)" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var server: CliServer = undefined;
    try server.start(&.{ fixture.root_path, "-p", "0", "--access-log", "off", "--limit", "request_line_bytes_max=1K", "--limit=idle-timeout-ms=300ms" });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    var long_request: ["GET /".len + 1100 + " HTTP/1.1\r\nHost: t\r\n\r\n".len]u8 = undefined;
    @memcpy(long_request[0.."GET /".len], "GET /");
    @memset(long_request["GET /".len..][0..1100], 'a');
    @memcpy(long_request["GET /".len + 1100 ..], " HTTP/1.1\r\nHost: t\r\n\r\n");
    // Both limits are HTTP/1's (over h2c the path is in HEADERS): plaintext HTTP/1.1 here.
    const long = try Client.fetchPlain(testing.allocator, server.port, &long_request);
    defer long.deinit(testing.allocator);
    try expectStatus(long, 414);
    // A request line within the limit is served.
    const short = try Client.fetchPlain(testing.allocator, server.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer short.deinit(testing.allocator);
    try expectStatus(short, 200);
    // A connection idle after its response is closed after 300 ms, not the default 60 s.
    var client = try Client.connectPlain(server.port, 10_000);
    defer client.close();
    try client.send("GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    const kept = try client.readResponse(testing.allocator, .{});
    defer kept.deinit(testing.allocator);
    try expectStatus(kept, 200);
    const start = nowUs();
    try testing.expect(client.waitForData(10_000));
    try testing.expect(try client.isClosed());
    const waited_ms = (nowUs() - start) / 1000;
    errdefer std.debug.print("closed after {d} ms\n", .{waited_ms});
    try testing.expect(waited_ms >= 250 and waited_ms < 10_000);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}

test "saker serve --limits: every limit with its value, exit 0" {
    // `--limits` shows the flags around it, those after it too.
    const result = try runCli(&.{ "serve", "--limit", "connections_max=123", "--limits", "--limit", "idle_timeout_ms=5s" });
    defer testing.allocator.free(result.stderr);
    defer testing.allocator.free(result.stdout);
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, result.term);
    errdefer std.debug.print("stdout: {s}\n", .{result.stdout});
    try testing.expect(std.mem.find(u8, result.stdout, "\n  connections_max = 123\n") != null);
    // saker serve's own defaults, not Config's.
    try testing.expect(std.mem.find(u8, result.stdout, "\n  unsent_bytes_max = 65536\n") != null);
    try testing.expect(std.mem.find(u8, result.stdout, "\n  idle_timeout_ms = 5000\n") != null);
    try testing.expect(std.mem.find(u8, result.stdout, "\n  header_timeout_ms = 10000\n") != null);
    try testing.expect(std.mem.find(u8, result.stdout, "port") == null);
}

test "saker serve --health /healthz: the path answers ok, files are served as before" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var server: CliServer = undefined;
    try server.start(&.{ fixture.root_path, "-p", "0", "--health", "/healthz", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    const health = try Client.fetch(testing.allocator, server.port, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    defer health.deinit(testing.allocator);
    try expectStatus(health, 200);
    try testing.expectEqualStrings("ok\n", health.body);
    try testing.expectEqualStrings("no-store", health.header("Cache-Control").?);
    const file = try Client.fetch(testing.allocator, server.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer file.deinit(testing.allocator);
    try expectStatus(file, 200);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}

test "saker CLI: a port another saker listens on is in use (exit 2), also for the library" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var first: CliServer = undefined;
    try first.start(&.{ fixture.root_path, "--port", "0", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) first.child.kill(testing.io);
    var port_text: [8]u8 = undefined;
    const port = try std.mem.print(&port_text, "{d}", .{first.port});
    for (usableNames(&.{ "epoll", "blocking" })) |engine_name| {
        const result = try runCli(&.{ "serve", fixture.root_path, "--port", port, "--engine", engine_name });
        defer testing.allocator.free(result.stderr);
        defer testing.allocator.free(result.stdout);
        errdefer std.debug.print("engine {s}: {any}\nstdout: {s}\nstderr: {s}\n", .{ engine_name, result.term, result.stdout, result.stderr });
        try testing.expectEqual(std.process.Child.Term{ .exited = 2 }, result.term);
        try testing.expectEqualStrings("", result.stdout); // never "listening on"
        var expected: [128]u8 = undefined;
        try testing.expectEqualStrings(try std.mem.print(&expected, "saker: error: port {s} on 127.0.0.1 is already in use\n", .{port}), result.stderr);
    }
    // The library's answer is a named error.
    var files = try saker.StaticFiles.init(testing.allocator, .{ .root = fixture.root_path });
    defer files.deinit();
    for (usable(&engines)) |kind| {
        const config: saker.Config = .{ .host = "127.0.0.1", .port = first.port, .engine = kind, .workers = 2 };
        try testing.expectError(error.AddressInUse, saker.Server(saker.StaticFiles).init(testing.allocator, &files, config));
    }
    // The first server still answers, and alone.
    const response = try Client.fetch(testing.allocator, first.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer response.deinit(testing.allocator);
    try expectStatus(response, 200);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try first.stop());
}

test "saker serve: --no-listing, --dotfiles, --index, --spa, --cache-control, --access-log FILE" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const log_path = try std.fmt.allocPrint(testing.allocator, "{s}/../access.log", .{fixture.root_path});
    defer testing.allocator.free(log_path);
    var server: CliServer = undefined;
    try server.start(&.{
        fixture.root_path, "--port",          "0",                  "--no-listing",
        "--dotfiles",      "--index",         "hello.txt",          "--spa",
        "spa.html",        "--cache-control", "public, max-age=60", "--access-log",
        log_path,
    });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    const cases = [_]struct { []const u8, u16, []const u8 }{
        .{ "/.env", 200, "SECRET=1\n" }, // --dotfiles
        .{ "/", 200, "Hello, static world!\n" }, // --index
        .{ "/sub/", 403, "403 Forbidden: directory listing is off\n" }, // --no-listing
        .{ "/no/such/page", 200, "<p>app shell</p>\n" }, // --spa
        .{ "/sub/a.txt", 200, "alpha\n" },
    };
    for (cases) |case| {
        errdefer std.debug.print("target {s}\n", .{case[0]});
        var buffer: [256]u8 = undefined;
        const request = try std.mem.print(&buffer, "GET {s} HTTP/1.1\r\nHost: t\r\nReferer: http://ref/\r\nUser-Agent: cli-test/1.0\r\n\r\n", .{case[0]});
        const response = try Client.fetch(testing.allocator, server.port, request);
        defer response.deinit(testing.allocator);
        try expectStatus(response, case[1]);
        try testing.expectEqualStrings(case[2], response.body);
        if (case[1] == 200) try testing.expectEqualStrings("public, max-age=60", response.header("Cache-Control").?);
    }
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
    // Nothing on stdout but the first line: the log went to the file, flushed at exit.
    try testing.expectEqual(@as(usize, 0), server.stdout_rest);

    const log = try fixture.tmp.dir.readFileAlloc(testing.io, "access.log", testing.allocator, .limited(1 << 20));
    defer testing.allocator.free(log);
    // One line per request; workers keep buffers of their own, so lines of different workers
    // need not be in request order.
    try testing.expectEqual(cases.len, std.mem.countScalar(u8, log, '\n'));
    for (cases) |case| {
        var needle: [128]u8 = undefined;
        const request_line = try std.mem.print(&needle, "\"GET {s} {s}\"", .{ case[0], Client.httpVersion() });
        var lines = std.mem.splitScalar(u8, std.mem.trimEnd(u8, log, "\n"), '\n');
        const line = while (lines.next()) |line| {
            if (std.mem.find(u8, line, request_line) != null) break line;
        } else return error.AccessLogLineMissing;
        errdefer std.debug.print("log line: {s}\n", .{line});
        try expectCombinedLine(line, case[0], case[1], case[2].len);
    }
}

/// `127.0.0.1 - - [22/Nov/2026:04:17:11 +0000] "GET TARGET HTTP/1.1" STATUS BYTES
/// "http://ref/" "cli-test/1.0"`, with a well-formed date.
fn expectCombinedLine(line: []const u8, target: []const u8, status: u16, bytes: usize) !void {
    const prefix = "127.0.0.1 - - [";
    try testing.expect(std.mem.startsWith(u8, line, prefix));
    const date = line[prefix.len..][0..26];
    const months = "JanFebMarAprMayJunJulAugSepOctNovDec";
    try testing.expect(date[2] == '/' and date[6] == '/' and date[11] == ':' and date[14] == ':' and date[17] == ':');
    try testing.expect(std.mem.find(u8, months, date[3..6]) != null);
    for ([_]usize{ 0, 1, 7, 8, 9, 10, 12, 13, 15, 16, 18, 19 }) |i| try testing.expect(std.ascii.isDigit(date[i]));
    try testing.expectEqualStrings(" +0000", date[20..26]);
    var expected: [256]u8 = undefined;
    try testing.expectEqualStrings(
        try std.mem.print(&expected, "] \"GET {s} {s}\" {d} {d} \"http://ref/\" \"cli-test/1.0\"", .{ target, Client.httpVersion(), status, bytes }),
        line[prefix.len + 26 ..],
    );
}

test "saker serve: announces the port, serves, logs, and exits 0 on SIGINT" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const io = testing.io;
    for (usable(&engines)) |kind| {
        Client.plaintextServer(); // a server process of its own: plaintext
        var child = try std.process.spawn(io, .{
            .argv = &.{ build_options.saker_exe, "serve", fixture.root_path, "--port", "0", "--engine", @tagName(kind) },
            .stdout = .pipe,
            .stderr = .ignore,
        });
        var waited = false;
        defer if (!waited) {
            child.kill(io);
        };
        var buffer: [4096]u8 = undefined;
        var reader = child.stdout.?.readerStreaming(io, &buffer);
        const line = std.mem.trimEnd(u8, try reader.interface.takeDelimiterInclusive('\n'), "\n");
        const prefix = "listening on http://127.0.0.1:";
        try testing.expect(std.mem.startsWith(u8, line, prefix));
        const port = try std.fmt.parseInt(u16, line[prefix.len..], 10);
        const response = try Client.fetch(testing.allocator, port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
        try expectStatus(response, 200);
        try testing.expectEqualStrings("Hello, static world!\n", response.body);
        // The log line arrives with the next tick (the log is buffered, not written per request).
        if (std.mem.findScalar(u8, reader.interface.buffered(), '\n') == null) {
            var ready = [_]linux.pollfd{.{ .fd = child.stdout.?.handle, .events = linux.POLL.IN, .revents = 0 }};
            if (linux.poll(&ready, 1, 3000) != 1) return error.AccessLogLineMissing;
        }
        const log_line = try reader.interface.takeDelimiterInclusive('\n');
        errdefer std.debug.print("log line: {s}\n", .{log_line});
        var expected: [64]u8 = undefined;
        try testing.expect(std.mem.find(u8, log_line, try std.mem.print(&expected, "\"GET /hello.txt {s}\" 200 21", .{Client.httpVersion()})) != null);
        _ = linux.kill(child.id.?, linux.SIG.INT);
        const term = try child.wait(io);
        waited = true;
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, term);
    }
}

test "saker serve --basic-auth: 401 with a challenge without the right password, the file with it; passwords stay out of the log" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const htpasswd = try std.fmt.allocPrint(testing.allocator, "{s}/../htpasswd", .{fixture.root_path});
    defer testing.allocator.free(htpasswd);
    const log_path = try std.fmt.allocPrint(testing.allocator, "{s}/../auth.log", .{fixture.root_path});
    defer testing.allocator.free(log_path);
    // `secret`, hashed by libxcrypt at cost 5, as htpasswd -B spells bcrypt ($2y$).
    try std.Io.Dir.cwd().writeFile(testing.io, .{ .sub_path = htpasswd, .data = "# saker test\nalice:$2y$05$Th3YYfxe2JIDTsilk0yLSedf4hkcF5m/zcijsTuo5OSkfyhbo13tK\n" });
    for ([_][]const u8{ "epoll", "worker_pool" }) |engine_name| {
        var server: CliServer = undefined;
        try server.start(&.{ fixture.root_path, "--port", "0", "--engine", engine_name, "--basic-auth", htpasswd, "--access-log", log_path });
        var stopped = false;
        defer if (!stopped) server.child.kill(testing.io);
        const cases = [_]struct { ?[]const u8, u16 }{
            .{ null, 401 },
            .{ "Basic YWxpY2U6d3Jvbmc=", 401 }, // alice:wrong
            .{ "Basic Ym9iOnNlY3JldA==", 401 }, // bob:secret, no such user
            .{ "Basic YWxpY2U6c2VjcmV0", 200 }, // alice:secret
            .{ "Basic YWxpY2U6c2VjcmV0", 200 }, // again, remembered
        };
        for (cases) |case| {
            var buffer: [256]u8 = undefined;
            const request = if (case[0]) |authorization|
                try std.mem.print(&buffer, "GET /hello.txt HTTP/1.1\r\nHost: t\r\nAuthorization: {s}\r\n\r\n", .{authorization})
            else
                "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n";
            const response = try Client.fetch(testing.allocator, server.port, request);
            defer response.deinit(testing.allocator);
            try expectStatus(response, case[1]);
            if (case[1] == 401) {
                try testing.expectEqualStrings("Basic realm=\"saker\", charset=\"UTF-8\"", response.header("WWW-Authenticate").?);
            } else try testing.expectEqualStrings("Hello, static world!\n", response.body);
        }
        stopped = true;
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
    }
    const log = try std.Io.Dir.cwd().readFileAlloc(testing.io, log_path, testing.allocator, .limited(1 << 20));
    defer testing.allocator.free(log);
    // Every request is logged, refused ones too, and no credential is.
    try testing.expectEqual(@as(usize, 6), std.mem.count(u8, log, "\" 401 "));
    try testing.expectEqual(@as(usize, 4), std.mem.count(u8, log, "\" 200 "));
    for ([_][]const u8{ "secret", "wrong", "YWxpY2U6", "Ym9i" }) |credential| try testing.expect(std.mem.find(u8, log, credential) == null);
}

test "saker serve --basic-auth --upload: an upload without the password is 401 and writes nothing; with it, 201" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const htpasswd = try std.fmt.allocPrint(testing.allocator, "{s}/../htpasswd-up", .{fixture.root_path});
    defer testing.allocator.free(htpasswd);
    try std.Io.Dir.cwd().writeFile(testing.io, .{ .sub_path = htpasswd, .data = "alice:$2y$05$Th3YYfxe2JIDTsilk0yLSedf4hkcF5m/zcijsTuo5OSkfyhbo13tK\n" });
    for ([_][]const u8{ "epoll", "worker_pool" }) |engine_name| {
        errdefer std.debug.print("engine {s}\n", .{engine_name});
        var server: CliServer = undefined;
        try server.start(&.{ fixture.root_path, "--port", "0", "--engine", engine_name, "--basic-auth", htpasswd, "--upload", "--access-log", "off" });
        var stopped = false;
        defer if (!stopped) server.child.kill(testing.io);
        var buffer: [256]u8 = undefined;
        const path = try std.mem.print(&buffer, "/auth-{s}.txt", .{engine_name});
        var request_buffer: [512]u8 = undefined;
        const denied = try Client.fetchPlain(testing.allocator, server.port, try std.mem.print(&request_buffer, "PUT {s} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", .{path}));
        defer denied.deinit(testing.allocator);
        try expectStatus(denied, 401);
        const missing = try Client.fetchPlain(testing.allocator, server.port, try std.mem.print(&request_buffer, "GET {s} HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\n\r\n", .{path}));
        defer missing.deinit(testing.allocator);
        try expectStatus(missing, 404);
        const allowed = try Client.fetchPlain(testing.allocator, server.port, try std.mem.print(&request_buffer, "PUT {s} HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\nContent-Length: 5\r\n\r\nhello", .{path}));
        defer allowed.deinit(testing.allocator);
        try expectStatus(allowed, 201);
        const read = try Client.fetchPlain(testing.allocator, server.port, try std.mem.print(&request_buffer, "GET {s} HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\n\r\n", .{path}));
        defer read.deinit(testing.allocator);
        try expectStatus(read, 200);
        try testing.expectEqualStrings("hello", read.body);
        stopped = true;
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
    }
}

test "saker serve: the handler threads are started for --upload only" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    var counts: [2]u64 = undefined;
    for ([_]bool{ false, true }, &counts) |upload, *count| {
        var server: CliServer = undefined;
        const args: []const []const u8 = if (upload)
            &.{ fixture.root_path, "-p", "0", "--workers", "1", "--access-log", "off", "--upload" }
        else
            &.{ fixture.root_path, "-p", "0", "--workers", "1", "--access-log", "off" };
        try server.start(args);
        var stopped = false;
        defer if (!stopped) server.child.kill(testing.io);
        // Once it answers, every thread it starts is running.
        const answer = try Client.fetchPlain(testing.allocator, server.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        defer answer.deinit(testing.allocator);
        try expectStatus(answer, 200);
        count.* = try proc_status.number(server.child.id.?, "Threads");
        stopped = true;
        try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
    }
    errdefer std.debug.print("threads without --upload {d}, with it {d}\n", .{ counts[0], counts[1] });
    // Four per CPU with uploads (one CPU at least).
    try testing.expect(counts[1] >= counts[0] + 4);
}

test "saker serve under systemd-socket-activate: it serves on the socket passed, not a port of its own" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const port = try Client.freePort();
    var address_buffer: [32]u8 = undefined;
    const address = try std.mem.print(&address_buffer, "127.0.0.1:{d}", .{port});
    Client.plaintextServer();
    var child = std.process.spawn(testing.io, .{
        .argv = &.{ "systemd-socket-activate", "-l", address, build_options.saker_exe, "serve", fixture.root_path, "--port", "0", "--workers", "2", "--access-log", "off", "--metrics", "127.0.0.1:0" },
        .stdout = .pipe,
        .stderr = .ignore,
    }) catch |err| return skipWithout("systemd-socket-activate", err);
    var stopped = false;
    defer if (!stopped) child.kill(testing.io);
    // The socket is listening before saker starts: the first connection starts it.
    var response: Client.Response = undefined;
    const deadline_us = nowUs() + 10_000_000;
    while (true) {
        response = Client.fetch(testing.allocator, port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n") catch |err| {
            if (nowUs() > deadline_us) return err;
            sleepMs(20);
            continue;
        };
        break;
    }
    defer response.deinit(testing.allocator);
    try expectStatus(response, 200);
    try testing.expectEqualStrings("Hello, static world!\n", response.body);
    var buffer: [4096]u8 = undefined;
    var reader = child.stdout.?.readerStreaming(testing.io, &buffer);
    const line = std.mem.trimEnd(u8, try reader.interface.takeDelimiterInclusive('\n'), "\n");
    var expected: [64]u8 = undefined;
    try testing.expectEqualStrings(try std.mem.print(&expected, "listening on http://{s}", .{address}), line);
    // The metrics listener binds a port of its own: the passed socket is the main server's.
    const metrics_line = std.mem.trimEnd(u8, try reader.interface.takeDelimiterInclusive('\n'), "\n");
    const prefix = "listening on http://127.0.0.1:";
    try testing.expect(std.mem.startsWith(u8, metrics_line, prefix) and std.mem.endsWith(u8, metrics_line, " (metrics at /metrics)"));
    const metrics_port = try std.fmt.parseInt(u16, metrics_line[prefix.len .. metrics_line.len - " (metrics at /metrics)".len], 10);
    try testing.expect(metrics_port != port);
    const metrics = try Client.fetch(testing.allocator, metrics_port, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    defer metrics.deinit(testing.allocator);
    try expectStatus(metrics, 200);
    for (0..10) |_| {
        const again = try Client.fetch(testing.allocator, port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        defer again.deinit(testing.allocator);
        try expectStatus(again, 200);
    }
    stopped = true;
    _ = linux.kill(child.id.?, linux.SIG.INT);
    _ = try reader.interface.discardRemaining();
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try child.wait(testing.io));
}

test "saker serve under systemd-socket-activate: fewer sockets than listeners stops the start, saying so" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const port = try Client.freePort();
    var address_buffer: [32]u8 = undefined;
    const address = try std.mem.print(&address_buffer, "127.0.0.1:{d}", .{port});
    Client.plaintextServer();
    var child = std.process.spawn(testing.io, .{
        .argv = &.{ "systemd-socket-activate", "-l", address, build_options.saker_exe, "serve", fixture.root_path, "--tls-port", "0", "--tls-self-signed", "--access-log", "off" },
        .stdout = .ignore,
        .stderr = .pipe,
    }) catch |err| return skipWithout("systemd-socket-activate", err);
    var stopped = false;
    defer if (!stopped) child.kill(testing.io);
    // The first connection starts saker, which refuses the one socket for two listeners.
    const deadline_us = nowUs() + 10_000_000;
    while (true) {
        var client = Client.connectPlain(port, 10_000) catch {
            if (nowUs() > deadline_us) return error.NotStarted;
            sleepMs(20);
            continue;
        };
        client.close();
        break;
    }
    var buffer: [4096]u8 = undefined;
    var reader = child.stderr.?.readerStreaming(testing.io, &buffer);
    const text = try reader.interface.allocRemaining(testing.allocator, .limited(1 << 20));
    defer testing.allocator.free(text);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 2 }, try child.wait(testing.io));
    try testing.expect(std.mem.find(u8, text, "passed 1 sockets (LISTEN_FDS), but the configuration has 2 listeners") != null);
}

fn readPid(path: []const u8) !linux.pid_t {
    var buffer: [32]u8 = undefined;
    const text = try std.Io.Dir.cwd().readFile(testing.io, path, &buffer);
    return std.fmt.parseInt(linux.pid_t, std.mem.trimEnd(u8, text, "\n"), 10);
}

/// Waits until `path` names another pid than `old` (the new process wrote it).
fn awaitNewPid(path: []const u8, old: linux.pid_t) !linux.pid_t {
    const deadline_us = nowUs() + 10_000_000;
    while (nowUs() < deadline_us) : (sleepMs(20)) {
        const pid = readPid(path) catch continue;
        if (pid != old) return pid;
    }
    return error.NoUpgrade;
}

/// Whether process `pid` is gone (or a zombie).
fn processGone(pid: linux.pid_t) bool {
    var path_buffer: [64]u8 = undefined;
    const path = std.fmt.bufPrint(&path_buffer, "/proc/{d}/stat", .{pid}) catch return true;
    var buffer: [512]u8 = undefined;
    const text = std.Io.Dir.cwd().readFile(testing.io, path, &buffer) catch return true;
    const close_paren = std.mem.findScalarLast(u8, text, ')') orelse return true;
    return text.len > close_paren + 2 and text[close_paren + 2] == 'Z';
}

test "saker serve: SIGUSR2 upgrades in place; a kept-alive request during the drain gets Connection: close; wrk sees no error" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const pid_path = try std.fmt.allocPrint(testing.allocator, "{s}/../saker.pid", .{fixture.root_path});
    defer testing.allocator.free(pid_path);
    var server: CliServer = undefined;
    try server.start(&.{ fixture.root_path, "--port", "0", "--workers", "2", "--pid-file", pid_path, "--access-log", "off" });
    var reaped = false;
    defer if (!reaped) server.child.kill(testing.io);
    // Written once the engines run, just after the listening line.
    const old = try awaitNewPid(pid_path, 0);
    try testing.expectEqual(server.child.id.?, old);
    // The process serving now, stopped at the end (each upgrade hands over to the next).
    var current = old;
    defer _ = linux.kill(current, linux.SIG.INT);
    // A keep-alive connection to the old process, idle when the upgrade starts.
    var kept = try Client.connectPlain(server.port, 10_000);
    defer kept.close();
    try kept.send("GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    const before = try kept.readResponse(testing.allocator, .{});
    before.deinit(testing.allocator);
    _ = linux.kill(old, linux.SIG.USR2);
    const new = try awaitNewPid(pid_path, old);
    current = new;
    // The old process drains: its kept connection's next request is answered, and closed.
    // The new process wrote its pid file once serving, but the old one hears of that through
    // the readiness pipe in its own time, and answers as usual (keeping the connection) until
    // then: a loaded machine once answered the first request here before the drain began.
    const drain_deadline_us = nowUs() + 10_000_000;
    const during = while (true) {
        try kept.send("GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        const response = try kept.readResponse(testing.allocator, .{});
        if (std.mem.eql(u8, response.header("Connection") orelse "", "close")) break response;
        response.deinit(testing.allocator);
        if (nowUs() > drain_deadline_us) return error.NoDrain;
        sleepMs(20);
    };
    defer during.deinit(testing.allocator);
    try expectStatus(during, 200);
    try testing.expect(try kept.isClosed());
    // The old process exits by itself once drained (its stdout is the new one's too: wait
    // for the process, not for the end of the pipe).
    reaped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.child.wait(testing.io));
    // The new process serves on the same port; under load, a second upgrade loses nothing.
    const fresh = try Client.fetch(testing.allocator, server.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    defer fresh.deinit(testing.allocator);
    try expectStatus(fresh, 200);
    var url_buffer: [64]u8 = undefined;
    const url = try std.mem.print(&url_buffer, "http://127.0.0.1:{d}/hello.txt", .{server.port});
    var wrk = std.process.spawn(testing.io, .{ .argv = &.{ "wrk", "-t2", "-c20", "-d4s", url }, .stdout = .pipe, .stderr = .ignore }) catch |err|
        return skipWithout("wrk", err);
    sleepMs(1000);
    _ = linux.kill(new, linux.SIG.USR2);
    const newer = try awaitNewPid(pid_path, new);
    current = newer; // `new` drains and exits by itself
    var buffer: [4096]u8 = undefined;
    var reader = wrk.stdout.?.readerStreaming(testing.io, &buffer);
    const report = try reader.interface.allocRemaining(testing.allocator, .limited(1 << 20));
    defer testing.allocator.free(report);
    _ = try wrk.wait(testing.io);
    errdefer std.debug.print("wrk:\n{s}\n", .{report});
    try testing.expect(std.mem.find(u8, report, "requests in") != null);
    try testing.expect(std.mem.find(u8, report, "Socket errors") == null);
    try testing.expect(std.mem.find(u8, report, "Non-2xx") == null);
    // The process before it finished and left.
    const deadline_us = nowUs() + 15_000_000;
    while (!processGone(new)) : (sleepMs(20)) if (nowUs() > deadline_us) return error.OldProcessStayed;
}

/// Waits until the file at `path` holds `text` (access log lines reach the file within about a
/// second); returns its contents (owned).
fn awaitInFile(path: []const u8, text: []const u8) ![]u8 {
    const deadline_us = nowUs() + 10_000_000;
    while (true) : (sleepMs(50)) {
        const bytes = std.Io.Dir.cwd().readFileAlloc(testing.io, path, testing.allocator, .limited(1 << 20)) catch |err| {
            if (nowUs() > deadline_us) return err;
            continue;
        };
        if (std.mem.find(u8, bytes, text) != null) return bytes;
        testing.allocator.free(bytes);
        if (nowUs() > deadline_us) return error.NotLogged;
    }
}

test "saker serve: SIGHUP reopens the access log file, as logrotate needs" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const log_path = try std.fmt.allocPrint(testing.allocator, "{s}/../rotated.log", .{fixture.root_path});
    defer testing.allocator.free(log_path);
    const moved_path = try std.fmt.allocPrint(testing.allocator, "{s}.1", .{log_path});
    defer testing.allocator.free(moved_path);
    var server: CliServer = undefined;
    try server.start(&.{ fixture.root_path, "--port", "0", "--access-log", log_path });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    {
        const response = try Client.fetch(testing.allocator, server.port, "GET /hello.txt?before HTTP/1.1\r\nHost: t\r\n\r\n");
        defer response.deinit(testing.allocator);
        try expectStatus(response, 200);
        testing.allocator.free(try awaitInFile(log_path, "?before"));
    }
    try std.Io.Dir.rename(std.Io.Dir.cwd(), log_path, std.Io.Dir.cwd(), moved_path, testing.io);
    _ = linux.kill(server.child.id.?, linux.SIG.HUP);
    // The reopen happens on the signal thread: a request a moment later goes to the new file.
    var after: ?[]u8 = null;
    defer if (after) |bytes| testing.allocator.free(bytes);
    for (0..100) |_| {
        sleepMs(20);
        const response = try Client.fetch(testing.allocator, server.port, "GET /hello.txt?after HTTP/1.1\r\nHost: t\r\n\r\n");
        response.deinit(testing.allocator);
        after = awaitInFile(log_path, "?after") catch continue;
        break;
    }
    try testing.expect(after != null);
    try testing.expect(std.mem.find(u8, after.?, "?before") == null);
    const moved = try std.Io.Dir.cwd().readFileAlloc(testing.io, moved_path, testing.allocator, .limited(1 << 20));
    defer testing.allocator.free(moved);
    try testing.expect(std.mem.find(u8, moved, "?before") != null);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}

test "saker serve --access-log-format json --request-id: each line is a JSON object with the request's facts" {
    var fixture = try Fixture.create();
    defer fixture.destroy();
    const log_path = try std.fmt.allocPrint(testing.allocator, "{s}/../json.log", .{fixture.root_path});
    defer testing.allocator.free(log_path);
    var server: CliServer = undefined;
    try server.start(&.{ fixture.root_path, "--port", "0", "--access-log", log_path, "--access-log-format", "json", "--request-id" });
    var stopped = false;
    defer if (!stopped) server.child.kill(testing.io);
    const response = try Client.fetch(testing.allocator, server.port, "GET /hello.txt?q=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: json-test/1\r\nX-Request-Id: abc-123\r\n\r\n");
    defer response.deinit(testing.allocator);
    try expectStatus(response, 200);
    try testing.expectEqualStrings("abc-123", response.header("X-Request-Id").?);
    const bytes = try awaitInFile(log_path, "abc-123");
    defer testing.allocator.free(bytes);
    const parsed = try std.json.parseFromSlice(saker.AccessLog.JsonLine, testing.allocator, std.mem.trimEnd(u8, bytes, "\n"), .{});
    defer parsed.deinit();
    const line = parsed.value;
    try testing.expectEqual(@as(usize, "2026-11-26T08:53:38.123456Z".len), line.time.len);
    try testing.expect(line.time[10] == 'T' and line.time[line.time.len - 1] == 'Z');
    try testing.expectEqualStrings("127.0.0.1", line.remote.?);
    try testing.expectEqualStrings("GET", line.method.?);
    try testing.expectEqualStrings("/hello.txt?q=1", line.target.?);
    try testing.expectEqualStrings(Client.httpVersion(), line.protocol);
    try testing.expectEqual(@as(u16, 200), line.status);
    try testing.expectEqual(@as(u64, response.body.len), line.bytes);
    try testing.expect(line.complete);
    try testing.expect(line.duration_us != null);
    try testing.expectEqualStrings("json-test/1", line.user_agent.?);
    try testing.expectEqual(@as(?[]const u8, null), line.referer);
    try testing.expectEqualStrings("abc-123", line.request_id.?);
    stopped = true;
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try server.stop());
}
