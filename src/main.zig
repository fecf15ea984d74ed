//! The `saker` command line: `saker serve [DIR]` serves a directory over HTTP/1.1 with
//! `saker.StaticFiles`. Bad input is one line on stderr and exit status 2; Ctrl-C (SIGINT) or
//! SIGTERM finishes the requests in flight and exits 0.
const std = @import("std");
const linux = std.os.linux;
const assert = std.debug.assert;
const saker = @import("saker");

pub const std_options = saker.std_options;

const usage =
    \\usage: saker serve [DIR] [options]    serve DIR (default: the current directory)
    \\       saker --help | --version
    \\
    \\options:
    \\  -b, --host ADDRESS     IPv4 or IPv6 address, or localhost, to listen on (default 127.0.0.1)
    \\  -p, --port N           TCP port, 0 for any free port (default 8080)
    \\  --workers N            engine threads, 0 for one per CPU (default 0)
    \\  --engine NAME          epoll (default), io_uring, blocking, thread_per_connection,
    \\                         worker_pool
    \\  --processes N          serve from N processes sharing the port (default 1)
    \\  --no-listing           answer 403 for directories without an index file
    \\  --dotfiles             serve names starting with '.' (hidden by default)
    \\  --index NAME           file served for a directory (default index.html)
    \\  --spa FILE             serve FILE (relative to DIR) for paths that do not exist
    \\  --cache-control VALUE  Cache-Control header for files, e.g. "public, max-age=3600"
    \\  --cors ORIGIN          let pages from ORIGIN (https://app.example, or * for any) read
    \\                         the files: CORS headers, and 204 for preflights
    \\  --health PATH          answer PATH with 200 "ok", or 503 "draining" at shutdown,
    \\                         for load balancers (e.g. --health /healthz)
    \\  --upload               accept PUT (the body becomes a new file at the path) and the
    \\                         listing's upload form; existing files are never overwritten
    \\  --upload-max SIZE      largest upload, e.g. 500M or 2G (default 8M)
    \\  --upload-overwrite     --upload, and an upload may replace an existing file (atomically)
    \\  --tls-cert FILE        serve HTTPS with this PEM certificate chain (with --tls-key);
    \\                         give both again for more certificates, chosen by SNI
    \\  --tls-key FILE         the PEM private key of the --tls-cert before it
    \\  --tls-self-signed      serve HTTPS with a certificate made at start for localhost
    \\  --tls-client-ca FILE   require client certificates signed by these CAs (mutual TLS)
    \\  --tls-no-tickets       no session tickets: every connection makes a full handshake
    \\  --tls-port N           serve HTTPS on port N and keep plaintext HTTP on --port
    \\  --request-id           give each request an id (its X-Request-Id, or a new one),
    \\                         sent back in X-Request-Id
    \\  --h2c-only             the plaintext port speaks HTTP/2 alone (h2c with prior
    \\                         knowledge); HTTPS still offers h2 and http/1.1
    \\  --proxy-protocol       every connection starts with a PROXY header (v1 or v2, as
    \\                         HAProxy's send-proxy sends); its client address is logged
    \\  --proxy-protocol-from CIDR,...  take the header only from these peers; implies
    \\                         --proxy-protocol
    \\  --redirect-http PORT   with HTTPS: also listen on PORT in plaintext and answer every
    \\                         request with 308 to its https:// URL
    \\  --pid-file FILE        write the pid to FILE once serving (SIGUSR2 upgrades the
    \\                         binary in place: the new process rewrites it)
    \\  --metrics [HOST:]PORT  serve Prometheus metrics at GET /metrics on a listener of its
    \\                         own (HOST defaults to --host)
    \\  --basic-auth FILE      require a user name and password from FILE, an htpasswd file of
    \\                         bcrypt hashes (htpasswd -B); others get 401
    \\  --access-log DEST      FILE, - for stdout (default), or off
    \\  --access-log-format F combined (default) or json (a JSON object per line, with
    \\                         microsecond times and durations, and the request id)
    \\  --no-precompressed     do not look for FILE.br / FILE.gz variants
    \\  --compress LIST        codings to compress text files of 1 KiB or more in, on the fly:
    \\                         off, or some of zstd,br,gzip, each with :LEVEL if wanted
    \\                         (default zstd:3,br:5,gzip:6); .br/.gz files beside still win
    \\  --compress-max SIZE    send larger files uncompressed (default 4M)
    \\  --compress-cache SIZE  memory for compressed files, all workers together (default 32M)
    \\  --limit NAME=VALUE     set one of the server's limits, e.g. --limit connections_max=2000
    \\                         --limit idle_timeout_ms=15s (sizes take K/M/G, times ms/s/m/h)
    \\  --limits               list every limit --limit sets, with its value here
    \\
    \\Options that take a value also take it as --option=value.
    \\
;

/// The parsed command line of `saker serve`.
const ServeArgs = struct {
    config: saker.Config,
    static: saker.StaticFiles.Options = .{},
    access_log: []const u8 = "-",
    /// `--redirect-http PORT`: a plaintext listener that redirects to the HTTPS one.
    redirect_port: ?u16 = null,
    /// `--basic-auth FILE`: an htpasswd file of bcrypt hashes every request must match.
    basic_auth: ?[]const u8 = null,
    /// `--metrics [HOST:]PORT`: where a second listener serves `GET /metrics`.
    metrics: ?MetricsAddress = null,
    /// `--pid-file FILE`: where the pid goes once the server serves.
    pid_file: ?[]const u8 = null,
};

const MetricsAddress = struct { host: []const u8, port: u16 };

/// `--metrics`' value: `PORT` (on --host's address), `HOST:PORT` or `[IPv6]:PORT`.
fn parseMetricsAddress(text: []const u8, default_host: []const u8) ?MetricsAddress {
    var host: []const u8 = default_host;
    var port_text = text;
    if (std.mem.startsWith(u8, text, "[")) {
        const end = std.mem.findScalar(u8, text, ']') orelse return null;
        if (end + 1 >= text.len or text[end + 1] != ':') return null;
        host = text[1..end];
        port_text = text[end + 2 ..];
    } else if (std.mem.findScalarLast(u8, text, ':')) |colon| {
        host = text[0..colon];
        port_text = text[colon + 1 ..];
    }
    if (std.ascii.eqlIgnoreCase(host, "localhost")) host = "127.0.0.1";
    _ = std.Io.net.IpAddress.parse(host, 0) catch return null;
    const port = std.fmt.parseInt(u16, port_text, 10) catch return null;
    return .{ .host = host, .port = port };
}

pub fn main(init: std.process.Init) !void {
    const args = init.minimal.args.toSlice(init.arena.allocator()) catch fatal(init.io, "out of memory", .{});
    if (args.len < 2) fatal(init.io, "missing command; try 'saker serve .' or 'saker --help'", .{});
    const command = args[1];
    if (std.mem.eql(u8, command, "--version") or std.mem.eql(u8, command, "-V")) {
        printTo(init.io, .stdout(), "saker " ++ saker.version ++ "\n");
        return;
    }
    if (std.mem.eql(u8, command, "--help") or std.mem.eql(u8, command, "-h") or std.mem.eql(u8, command, "help")) {
        printTo(init.io, .stdout(), usage);
        return;
    }
    if (!std.mem.eql(u8, command, "serve")) fatal(init.io, "unknown command '{s}'; try 'saker --help'", .{command});
    var serve_args = parseServe(init.io, args[2..]);
    try serve(init, &serve_args);
}

fn parseServe(io: std.Io, args: []const []const u8) ServeArgs {
    var parsed: ServeArgs = .{ .config = .{} };
    // Small files are sent from memory together with their head: make room for them.
    parsed.config.send_buffer_bytes = 24 * 1024;
    // Large files: at most 64 KiB unsent in the kernel per connection, and TCP_CORK only up
    // to 256 KiB bodies; together the cheapest for server and client (see Config). A
    // connection's last response is corked and unlimited whatever its size.
    parsed.config.unsent_bytes_max = 64 * 1024;
    parsed.config.cork_file_bytes_max = 256 * 1024;
    var directory: ?[]const u8 = null;
    var metrics_text: ?[]const u8 = null;
    // `--limits`: listed once every other flag is applied.
    var list_limits = false;
    var diagnostic: saker.cli.Diagnostic = .{};
    var index: usize = 0;
    while (index < args.len) {
        const arg = args[index];
        if (std.mem.eql(u8, arg, "--help") or std.mem.eql(u8, arg, "-h")) {
            printTo(io, .stdout(), usage);
            std.process.exit(0);
        }
        if (std.mem.eql(u8, arg, "--limits")) {
            list_limits = true;
            index += 1;
            continue;
        }
        const applied = saker.cli.applyServerFlag(&parsed.config, args, &index, &diagnostic) catch
            fatal(io, "{s}", .{diagnostic.message});
        if (applied) continue;
        index += 1;
        const flag = saker.cli.splitFlag(arg);
        if (std.mem.eql(u8, flag.name, "--no-listing")) {
            noValue(io, flag);
            parsed.static.listing = false;
        } else if (std.mem.eql(u8, flag.name, "--dotfiles")) {
            noValue(io, flag);
            parsed.static.dotfiles = true;
        } else if (std.mem.eql(u8, flag.name, "--no-precompressed")) {
            noValue(io, flag);
            parsed.static.precompressed = false;
        } else if (std.mem.eql(u8, flag.name, "--compress")) {
            const text = value(io, args, &index, flag);
            parsed.config.compression.parseList(text) orelse
                fatal(io, "--compress '{s}': off, or a list such as zstd,br,gzip (levels: zstd:1-19, br:0-11, gzip:1-9)", .{text});
        } else if (std.mem.eql(u8, flag.name, "--compress-max")) {
            const text = value(io, args, &index, flag);
            parsed.static.compress_file_bytes_max = saker.cli.parseBytes(text) orelse
                fatal(io, "--compress-max '{s}': a size such as 512K or 4M", .{text});
        } else if (std.mem.eql(u8, flag.name, "--compress-cache")) {
            const text = value(io, args, &index, flag);
            parsed.static.compress_cache_bytes_max = saker.cli.parseBytes(text) orelse
                fatal(io, "--compress-cache '{s}': a size such as 0, 64M or 1G", .{text});
        } else if (std.mem.eql(u8, flag.name, "--index")) {
            parsed.static.index = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--spa")) {
            parsed.static.spa_fallback = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--cache-control")) {
            parsed.static.cache_control = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--upload")) {
            noValue(io, flag);
            parsed.static.upload = true;
        } else if (std.mem.eql(u8, flag.name, "--upload-overwrite")) {
            noValue(io, flag);
            parsed.static.upload = true;
            parsed.static.upload_overwrite = true;
        } else if (std.mem.eql(u8, flag.name, "--upload-max")) {
            const text = value(io, args, &index, flag);
            parsed.config.body_bytes_max = saker.cli.parseBytes(text) orelse
                fatal(io, "--upload-max '{s}': a size such as 500M, 2G or 1048576", .{text});
        } else if (std.mem.eql(u8, flag.name, "--health")) {
            const path = value(io, args, &index, flag);
            if (path.len == 0 or path[0] != '/') fatal(io, "--health '{s}': must be a path starting with /", .{path});
            parsed.static.health_path = path;
        } else if (std.mem.eql(u8, flag.name, "--cors")) {
            parsed.static.cors_origin = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--redirect-http")) {
            const text = value(io, args, &index, flag);
            parsed.redirect_port = std.fmt.parseInt(u16, text, 10) catch
                fatal(io, "--redirect-http '{s}': not a port number (1-65535)", .{text});
        } else if (std.mem.eql(u8, flag.name, "--pid-file")) {
            parsed.pid_file = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--metrics")) {
            metrics_text = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--basic-auth")) {
            parsed.basic_auth = value(io, args, &index, flag);
        } else if (std.mem.eql(u8, flag.name, "--access-log-format")) {
            const text = value(io, args, &index, flag);
            parsed.static.access_log_format = saker.AccessLog.Format.parse(text) orelse
                fatal(io, "--access-log-format '{s}': not combined or json", .{text});
        } else if (std.mem.eql(u8, flag.name, "--access-log")) {
            parsed.access_log = value(io, args, &index, flag);
        } else if (arg.len > 1 and arg[0] == '-' and !std.mem.eql(u8, arg, "-")) {
            fatal(io, "unknown option '{s}'; try 'saker serve --help'", .{arg});
        } else if (directory != null) {
            fatal(io, "more than one directory given ('{s}' and '{s}')", .{ directory.?, arg });
        } else {
            directory = arg;
        }
    }
    // Uploads are buffered whole in the request arena (StaticFiles writes each at once), so
    // the largest one must fit the arena and the server's heap allowance.
    const arena_needed = parsed.config.arena_bytes + parsed.config.body_bytes_max;
    parsed.config.arena_request_bytes_max = @max(parsed.config.arena_request_bytes_max, arena_needed);
    parsed.config.overflow_bytes_max = @max(parsed.config.overflow_bytes_max, parsed.config.arena_request_bytes_max);
    if (list_limits) {
        saker.cli.printLimits(io, &parsed.config);
        std.process.exit(0);
    }
    parsed.static.root = directory orelse ".";
    if (metrics_text) |text| parsed.metrics = parseMetricsAddress(text, parsed.config.host) orelse
        fatal(io, "--metrics '{s}': not PORT, HOST:PORT or [IPv6]:PORT", .{text});
    saker.cli.finishServerFlags(&parsed.config, &diagnostic) catch fatal(io, "{s}", .{diagnostic.message});
    if (parsed.redirect_port != null and !parsed.config.anyTls())
        fatal(io, "--redirect-http needs HTTPS (--tls-cert and --tls-key, or --tls-self-signed)", .{});
    if (parsed.redirect_port != null and parsed.config.listeners.len > 0)
        fatal(io, "--redirect-http and --tls-port: choose one (--port already serves plaintext with --tls-port)", .{});
    return parsed;
}

/// The value of `flag`: given with `=`, or the next argument.
fn value(io: std.Io, args: []const []const u8, index: *usize, flag: saker.cli.Flag) []const u8 {
    if (flag.value) |v| return v;
    if (index.* >= args.len) fatal(io, "{s} needs a value", .{flag.name});
    const v = args[index.*];
    index.* += 1;
    return v;
}

fn noValue(io: std.Io, flag: saker.cli.Flag) void {
    if (flag.value != null) fatal(io, "{s} takes no value", .{flag.name});
}

fn serve(init: std.process.Init, args: *ServeArgs) !void {
    const io = init.io;
    const gpa = init.gpa;
    var log_fd: ?linux.fd_t = null;
    var close_log = false;
    if (std.mem.eql(u8, args.access_log, "-")) {
        log_fd = linux.STDOUT_FILENO;
    } else if (!std.mem.eql(u8, args.access_log, "off")) {
        log_fd = openLog(io, gpa, args.access_log);
        close_log = true;
    }
    defer if (close_log) {
        _ = linux.close(log_fd.?);
    };
    args.static.access_log_fd = log_fd;
    // The JSON lines' `duration_us`: a fine clock at each head and response end.
    if (log_fd != null and args.static.access_log_format == .json) args.config.fine_durations = true;
    args.static.workers = saker.Server(saker.StaticFiles).workerCountFor(&args.config);
    if (args.config.compression.codings.count() > 0) args.static.compression = args.config.compression;

    var files = saker.StaticFiles.init(gpa, args.static) catch |err| {
        const root = args.static.root;
        switch (err) {
            error.NotFound => fatal(io, "'{s}': no such directory", .{root}),
            error.NotDirectory => fatal(io, "'{s}' is not a directory", .{root}),
            error.AccessDenied => fatal(io, "'{s}': permission denied", .{root}),
            error.InvalidIndex => fatal(io, "--index '{s}': must be a plain file name", .{args.static.index}),
            error.InvalidFallback => fatal(io, "--spa '{s}': must name a file inside the served directory", .{args.static.spa_fallback.?}),
            error.FallbackNotFound => fatal(io, "--spa '{s}': no such file in '{s}'", .{ args.static.spa_fallback.?, root }),
            error.InvalidCacheControl => fatal(io, "--cache-control: control characters are not allowed", .{}),
            error.InvalidCorsOrigin => fatal(io, "--cors '{s}': must be * or an origin such as https://app.example", .{args.static.cors_origin.?}),
            // `--compress` was checked as it was parsed.
            error.InvalidCompression => unreachable,
            error.Unsupported => fatal(io, "this kernel lacks openat2 (Linux 5.6 or later is needed)", .{}),
            error.SystemResources, error.OutOfMemory => fatal(io, "out of memory or file descriptors", .{}),
            error.Unexpected => fatal(io, "cannot serve '{s}' (unexpected error)", .{root}),
        }
    };
    defer files.deinit();
    const path = args.basic_auth orelse return serveWith(saker.StaticFiles, &files, io, gpa, args);
    var diagnostic: saker.BasicAuth.Diagnostic = .{};
    var auth = saker.BasicAuth.load(gpa, path, .{}, &diagnostic) catch |err| switch (err) {
        error.InvalidLine => fatal(io, "--basic-auth '{s}': line {d}: {s}", .{ path, diagnostic.line, diagnostic.reason }),
        error.Unreadable, error.NoUsers => fatal(io, "--basic-auth '{s}': {s}", .{ path, diagnostic.reason }),
        error.OutOfMemory => fatal(io, "out of memory", .{}),
    };
    defer auth.deinit();
    var guarded: saker.BasicAuth.Guard(saker.StaticFiles) = .{ .inner = &files, .auth = &auth };
    return serveWith(saker.BasicAuth.Guard(saker.StaticFiles), &guarded, io, gpa, args);
}

/// Serves `handler` (the files, or the files behind `--basic-auth`) as the flags say.
fn serveWith(comptime Handler: type, handler: *Handler, io: std.Io, gpa: std.mem.Allocator, args: *const ServeArgs) !void {
    const config = args.config;
    var server = saker.Server(Handler).init(gpa, handler, config) catch |err| switch (err) {
        error.AddressInUse => if (config.listeners.len > 0)
            fatal(io, "port {d} or --tls-port {d} on {s} is already in use", .{ config.port, config.listeners[0].port, config.host })
        else
            fatal(io, "port {d} on {s} is already in use", .{ config.port, config.host }),
        error.AddressNotAvailable => fatal(io, "--host {s}: not an address of this machine", .{config.host}),
        error.AccessDenied => fatal(io, "port {d}: permission denied (ports below 1024 need privileges)", .{config.port}),
        error.InvalidAddress => fatal(io, "--host {s}: not a usable address", .{config.host}),
        error.InvalidConfig => fatal(io, "invalid configuration", .{}),
        error.TlsSetupFailed => fatal(io, "TLS could not be set up (the line above says why)", .{}),
        error.SystemResources, error.OutOfMemory => fatal(io, "out of memory or file descriptors", .{}),
        error.Unexpected => fatal(io, "cannot listen on {s}:{d}", .{ config.host, config.port }),
    };
    defer server.deinit();
    // Servers beside the main one: they start once the main one has caught the signals (their
    // threads inherit that), and stop when it has.
    var redirect: saker.HttpsRedirect = .{ .https_port = firstTlsPort(&server), .default_host = config.host };
    var redirect_side: ?Side(saker.HttpsRedirect) = null;
    if (args.redirect_port) |port| redirect_side = .{
        .what = "--redirect-http",
        .note = "redirects to https",
        .server = saker.Server(saker.HttpsRedirect).init(gpa, &redirect, .{ .host = config.host, .port = port, .workers = 1 }) catch |err| switch (err) {
            error.AddressInUse => fatal(io, "--redirect-http {d}: the port is already in use on {s}", .{ port, config.host }),
            else => fatal(io, "--redirect-http {d}: cannot listen ({t})", .{ port, err }),
        },
    };
    defer if (redirect_side) |*side| side.server.deinit();
    var metrics: saker.MetricsHandler = .{ .source = server.metricsSource() };
    var metrics_side: ?Side(saker.MetricsHandler) = null;
    if (args.metrics) |address| metrics_side = .{
        .what = "--metrics",
        .note = "metrics at /metrics",
        .server = saker.Server(saker.MetricsHandler).init(gpa, &metrics, .{ .host = address.host, .port = address.port, .workers = 1 }) catch |err| switch (err) {
            error.AddressInUse => fatal(io, "--metrics {s}:{d}: the port is already in use", .{ address.host, address.port }),
            else => fatal(io, "--metrics {s}:{d}: cannot listen ({t})", .{ address.host, address.port, err }),
        },
    };
    defer if (metrics_side) |*side| side.server.deinit();
    const Ready = struct {
        io: std.Io,
        server: *const saker.Server(Handler),
        redirect: ?*Side(saker.HttpsRedirect),
        metrics: ?*Side(saker.MetricsHandler),

        fn call(context: ?*anyopaque, port: u16) void {
            const ready: *@This() = @ptrCast(@alignCast(context.?));
            assert(port == ready.server.port());
            saker.cli.announceAll(ready.io, ready.server);
            if (ready.redirect) |side| side.start(ready.io);
            if (ready.metrics) |side| side.start(ready.io);
        }
    };
    var ready: Ready = .{
        .io = io,
        .server = &server,
        .redirect = if (redirect_side) |*side| side else null,
        .metrics = if (metrics_side) |*side| side else null,
    };
    defer {
        if (ready.redirect) |side| side.stop();
        if (ready.metrics) |side| side.stop();
    }
    var reopen: LogReopen = .{ .path = args.access_log, .fd = args.static.access_log_fd orelse -1 };
    const log_file = args.static.access_log_fd != null and args.static.access_log_fd.? != linux.STDOUT_FILENO;
    try server.runWith(.{
        .ready = .{ .context = &ready, .call = Ready.call },
        .pid_file = args.pid_file,
        .on_reload = if (log_file) .{ .context = &reopen, .call = LogReopen.call } else null,
    });
}

/// SIGHUP reopens the access log file, for logrotate: lines then go to a file made anew at
/// its path (the one moved away gets what was written before). The descriptor number stays
/// (the new file is put in its place with dup3), so workers writing at that moment finish
/// on the old file and the next write goes to the new one.
const LogReopen = struct {
    path: []const u8,
    fd: linux.fd_t,

    fn call(context: ?*anyopaque) void {
        const reopen: *LogReopen = @ptrCast(@alignCast(context.?));
        var buffer: [std.fs.max_path_bytes]u8 = undefined;
        const path = std.fmt.bufPrintSentinel(&buffer, "{s}", .{reopen.path}, 0) catch return;
        const rc = linux.openat(linux.AT.FDCWD, path, log_flags, 0o644);
        if (linux.errno(rc) != .SUCCESS) {
            std.log.err("--access-log '{s}': cannot reopen it ({t}); lines go on to the file in use", .{ reopen.path, linux.errno(rc) });
            return;
        }
        const fresh: linux.fd_t = @intCast(rc);
        defer _ = linux.close(fresh);
        if (linux.errno(linux.dup3(fresh, reopen.fd, @as(u32, @bitCast(linux.O{ .CLOEXEC = true })))) != .SUCCESS) {
            std.log.err("--access-log '{s}': cannot reopen it; lines go on to the file in use", .{reopen.path});
            return;
        }
        std.log.info("access log reopened: {s}", .{reopen.path});
    }
};

/// The port of the server's first TLS listener (where `--redirect-http` sends clients).
fn firstTlsPort(server: anytype) u16 {
    for (server.endpoints) |endpoint| if (endpoint.listening.tls != null) return endpoint.port;
    return server.port();
}

/// A server beside the main one (`--redirect-http`, `--metrics`), on a thread of its own.
fn Side(comptime Handler: type) type {
    return struct {
        server: saker.Server(Handler),
        /// The flag that asked for it, for messages.
        what: []const u8,
        /// Said after its listening line.
        note: []const u8,
        thread: ?std.Thread = null,

        fn start(side: *@This(), io: std.Io) void {
            saker.cli.announce(io, side.server.endpoints[0].host, side.server.port(), .{ .note = side.note });
            side.thread = std.Thread.spawn(.{}, run, .{side}) catch |err| {
                std.log.err("{s}: cannot start its thread: {t}", .{ side.what, err });
                return;
            };
        }

        fn run(side: *@This()) void {
            side.server.serve() catch |err| std.log.err("{s}: {t}", .{ side.what, err });
        }

        fn stop(side: *@This()) void {
            const thread = side.thread orelse return;
            side.server.stop();
            thread.join();
        }
    };
}

/// How the access log file is opened (and reopened on SIGHUP): appended to, made if missing.
const log_flags: linux.O = .{ .ACCMODE = .WRONLY, .CREAT = true, .APPEND = true, .CLOEXEC = true };

fn openLog(io: std.Io, gpa: std.mem.Allocator, path: []const u8) linux.fd_t {
    const path_z = gpa.dupeSentinel(u8, path, 0) catch fatal(io, "out of memory", .{});
    defer gpa.free(path_z);
    const rc = linux.openat(linux.AT.FDCWD, path_z, log_flags, 0o644);
    return switch (linux.errno(rc)) {
        .SUCCESS => @intCast(rc),
        else => |e| fatal(io, "--access-log '{s}': cannot open ({t})", .{ path, e }),
    };
}

/// Prints `saker: error: ...` on stderr and exits with status 2.
fn fatal(io: std.Io, comptime format: []const u8, args: anytype) noreturn {
    var buffer: [1024]u8 = undefined;
    const line = std.mem.print(&buffer, "saker: error: " ++ format ++ "\n", args) catch "saker: error\n";
    printTo(io, .stderr(), line);
    std.process.exit(2);
}

fn printTo(io: std.Io, file: std.Io.File, text: []const u8) void {
    var buffer: [1024]u8 = undefined;
    var writer: std.Io.File.Writer = .initStreaming(file, io, &buffer);
    writer.interface.writeAll(text) catch return;
    writer.interface.flush() catch return;
}
