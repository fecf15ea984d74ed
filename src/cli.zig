//! Command-line helpers shared by the `saker` CLI and the examples: the server flags every
//! program takes (`--host`, `--port`, `--workers`, `--engine`), a one-line error for bad input,
//! and the `listening on http://HOST:PORT` line printed once the port is bound (followed, for
//! an address that means every interface, by the URL of each address it reaches).
const std = @import("std");
const Config = @import("Config.zig");
const engine = @import("engine.zig");
const proxy_header = @import("proxy_header.zig");

/// Why a flag was rejected; `Diagnostic.message` says which flag and why.
pub const FlagError = error{ UnknownFlag, MissingValue, InvalidValue };

/// A human-readable reason for the last `FlagError`.
pub const Diagnostic = struct {
    buffer: [256]u8 = undefined,
    message: []const u8 = "",

    fn set(d: *Diagnostic, comptime format: []const u8, args: anytype) void {
        d.message = std.mem.print(&d.buffer, format, args) catch format;
    }
};

/// Help text for the server flags.
pub const server_flags_help =
    \\  -b, --host ADDRESS  IPv4 or IPv6 address to listen on, or localhost (default 127.0.0.1)
    \\  -p, --port N        TCP port, 0 for any free port (default 8080)
    \\  --workers N         engine threads, 0 for one per CPU (default 0)
    \\  --engine NAME       blocking, thread_per_connection, worker_pool, epoll, io_uring
    \\  --processes N       serve from N forked processes, restarted if they crash (default 1)
    \\  --tls-cert FILE     serve HTTPS with this PEM certificate chain (with --tls-key); give
    \\                      both again for more certificates, chosen by the name asked (SNI)
    \\  --tls-key FILE      the PEM private key of the --tls-cert before it
    \\  --tls-self-signed   serve HTTPS with a certificate made at start for localhost
    \\  --tls-client-ca FILE  require client certificates signed by these CAs (mutual TLS)
    \\  --tls-no-tickets    no session tickets: every connection makes a full handshake
    \\  --tls-port N        serve HTTPS on port N and keep plaintext HTTP on --port (one
    \\                      server, two listeners)
    \\  --request-id        give each request an id (the client's X-Request-Id, or a new
    \\                      one), sent back in X-Request-Id
    \\  --h2c-only          the plaintext port speaks HTTP/2 alone (h2c with prior knowledge)
    \\  --proxy-protocol    every connection starts with a PROXY protocol header (v1 or v2,
    \\                      as HAProxy's send-proxy sends): its client address is the peer's
    \\  --proxy-protocol-from CIDR,...  take the header only from these peers (addresses or
    \\                      networks); implies --proxy-protocol
    \\  --limit NAME=VALUE  set one of the server's limits (a number of Config), e.g.
    \\                      --limit connections_max=2000 --limit idle_timeout_ms=15s;
    \\                      sizes take K/M/G, times ms/s/m/h; --limits lists them
    \\  Every flag that takes a value also takes it as --flag=value.
    \\
;

/// A command-line argument as a flag name and, for `--name=value`, its value.
pub const Flag = struct {
    name: []const u8,
    /// The value given with `=`; null when the value, if any, is the next argument.
    value: ?[]const u8,
};

/// Splits `--name=value` into its name and value, and turns the short forms `-p` and `-b`
/// into `--port` and `--host` (as `python -m http.server -b` does).
pub fn splitFlag(arg: []const u8) Flag {
    if (std.mem.eql(u8, arg, "-p")) return .{ .name = "--port", .value = null };
    if (std.mem.eql(u8, arg, "-b")) return .{ .name = "--host", .value = null };
    if (std.mem.startsWith(u8, arg, "--")) {
        if (std.mem.findScalar(u8, arg, '=')) |eq| return .{ .name = arg[0..eq], .value = arg[eq + 1 ..] };
    }
    return .{ .name = arg, .value = null };
}

/// `localhost` (RFC 6761 §6.3: always the loopback) as an address; any other name is not
/// resolved.
fn hostAddress(value: []const u8) ?[]const u8 {
    if (std.ascii.eqlIgnoreCase(value, "localhost")) return "127.0.0.1";
    if (std.Io.net.IpAddress.parse(value, 0)) |_| return value else |_| return null;
}

/// Applies the server flag at `args[index.*]` (and its value) to `config`, advancing `index`.
/// Returns false, consuming nothing, when `args[index.*]` is not a server flag. Takes
/// `--flag value`, `--flag=value`, and `-p`/`-b` for `--port`/`--host`.
pub fn applyServerFlag(config: *Config, args: []const []const u8, index: *usize, diagnostic: *Diagnostic) FlagError!bool {
    const split = splitFlag(args[index.*]);
    const flag = split.name;
    if (std.mem.eql(u8, flag, "--request-id") or std.mem.eql(u8, flag, "--h2c-only")) {
        if (split.value != null) {
            diagnostic.set("{s} takes no value", .{flag});
            return error.InvalidValue;
        }
        index.* += 1;
        if (std.mem.eql(u8, flag, "--request-id")) config.request_id = true else config.h2c_only = true;
        return true;
    }
    if (std.mem.eql(u8, flag, "--proxy-protocol")) {
        if (split.value != null) {
            diagnostic.set("{s} takes no value", .{flag});
            return error.InvalidValue;
        }
        index.* += 1;
        if (config.proxy_protocol == null) config.proxy_protocol = .{};
        return true;
    }
    if (std.mem.eql(u8, flag, "--tls-self-signed") or std.mem.eql(u8, flag, "--tls-no-tickets")) {
        if (split.value != null) {
            diagnostic.set("{s} takes no value", .{flag});
            return error.InvalidValue;
        }
        index.* += 1;
        var tls = config.tls orelse Config.Tls{};
        if (std.mem.eql(u8, flag, "--tls-self-signed")) tls.self_signed = true else tls.ticket_key_rotation_s = 0;
        config.tls = tls;
        return true;
    }
    const names = [_][]const u8{ "--host", "--port", "--workers", "--engine", "--processes", "--tls-cert", "--tls-key", "--tls-client-ca", "--tls-port", "--proxy-protocol-from", "--limit" };
    const known = for (names) |name| {
        if (std.mem.eql(u8, flag, name)) break true;
    } else false;
    if (!known) return false;
    const value = split.value orelse blk: {
        if (index.* + 1 >= args.len) {
            diagnostic.set("{s} needs a value", .{flag});
            return error.MissingValue;
        }
        index.* += 1;
        break :blk args[index.*];
    };
    index.* += 1;
    if (std.mem.eql(u8, flag, "--host")) {
        config.host = hostAddress(value) orelse {
            diagnostic.set("--host: '{s}' is not an IPv4 or IPv6 address, nor localhost", .{value});
            return error.InvalidValue;
        };
    } else if (std.mem.eql(u8, flag, "--port")) {
        config.port = std.fmt.parseInt(u16, value, 10) catch {
            diagnostic.set("--port: '{s}' is not a port number (0-65535)", .{value});
            return error.InvalidValue;
        };
    } else if (std.mem.eql(u8, flag, "--workers")) {
        config.workers = std.fmt.parseInt(u16, value, 10) catch {
            diagnostic.set("--workers: '{s}' is not a number", .{value});
            return error.InvalidValue;
        };
        if (config.workers > 1024) {
            diagnostic.set("--workers: at most 1024", .{});
            return error.InvalidValue;
        }
    } else if (std.mem.eql(u8, flag, "--tls-cert") or std.mem.eql(u8, flag, "--tls-key")) {
        var tls = config.tls orelse Config.Tls{};
        const is_cert = std.mem.eql(u8, flag, "--tls-cert");
        // Pairs in order: the Nth --tls-key belongs to the Nth --tls-cert.
        const count = if (is_cert) &tls_files.certs else &tls_files.keys;
        if (count.* == tls_files.storage.len) {
            diagnostic.set("{s}: at most {d} certificates", .{ flag, tls_files.storage.len });
            return error.InvalidValue;
        }
        const slot = &tls_files.storage[count.*];
        if (is_cert) slot.chain_file = value else slot.key_file = value;
        count.* += 1;
        tls.certificates = tls_files.storage[0..@max(tls_files.certs, tls_files.keys)];
        config.tls = tls;
    } else if (std.mem.eql(u8, flag, "--tls-client-ca")) {
        var tls = config.tls orelse Config.Tls{};
        tls.client_ca_file = value;
        config.tls = tls;
    } else if (std.mem.eql(u8, flag, "--proxy-protocol-from")) {
        var networks = std.mem.splitScalar(u8, value, ',');
        while (networks.next()) |network| {
            if (proxy_from.count == proxy_from.storage.len) {
                diagnostic.set("--proxy-protocol-from: at most {d} networks", .{proxy_from.storage.len});
                return error.InvalidValue;
            }
            if (proxy_header.Cidr.parse(network) == null) {
                diagnostic.set("--proxy-protocol-from: '{s}' is not an address or a network (ADDRESS/BITS)", .{network});
                return error.InvalidValue;
            }
            proxy_from.storage[proxy_from.count] = network;
            proxy_from.count += 1;
        }
        config.proxy_protocol = .{ .from = proxy_from.storage[0..proxy_from.count] };
    } else if (std.mem.eql(u8, flag, "--tls-port")) {
        tls_listener.port = std.fmt.parseInt(u16, value, 10) catch {
            diagnostic.set("--tls-port: '{s}' is not a port number (0-65535)", .{value});
            return error.InvalidValue;
        };
    } else if (std.mem.eql(u8, flag, "--limit")) {
        try applyLimit(config, value, diagnostic);
    } else if (std.mem.eql(u8, flag, "--processes")) {
        config.processes = std.fmt.parseInt(u16, value, 10) catch 0;
        if (config.processes < 1 or config.processes > 256) {
            diagnostic.set("--processes: '{s}' is not a number from 1 to 256", .{value});
            return error.InvalidValue;
        }
    } else {
        config.engine = engine.Kind.parse(value) orelse {
            diagnostic.set("--engine: '{s}' is not one of blocking, thread_per_connection, worker_pool, epoll, io_uring", .{value});
            return error.InvalidValue;
        };
    }
    return true;
}

/// Whether `Config.name`, of type `T`, is a limit `--limit` sets: every number of `Config`
/// but those with flags of their own.
fn isLimit(comptime name: []const u8, comptime T: type) bool {
    const own_flag = [_][]const u8{ "port", "workers", "processes" };
    for (own_flag) |flag| if (std.mem.eql(u8, name, flag)) return false;
    return switch (@typeInfo(T)) {
        .int => true,
        .optional => |optional| @typeInfo(optional.child) == .int,
        else => false,
    };
}

fn LimitInt(comptime T: type) type {
    return switch (@typeInfo(T)) {
        .optional => |optional| optional.child,
        else => T,
    };
}

/// `--limit NAME=VALUE`: NAME is a field of `Config` (`_` or `-` between words).
fn applyLimit(config: *Config, text: []const u8, diagnostic: *Diagnostic) FlagError!void {
    const eq = std.mem.findScalar(u8, text, '=') orelse {
        diagnostic.set("--limit '{s}': not NAME=VALUE (--limits lists the names)", .{text});
        return error.InvalidValue;
    };
    const name = text[0..eq];
    const value = text[eq + 1 ..];
    @setEvalBranchQuota(100_000);
    const info = @typeInfo(Config).@"struct";
    inline for (info.field_names, info.field_types) |field, T| {
        if (comptime isLimit(field, T)) if (sameLimitName(name, field)) {
            const Int = LimitInt(T);
            const number = parseLimit(field, value) orelse {
                diagnostic.set("--limit {s}: '{s}' is not {s}", .{ field, value, comptime limitUnit(field) });
                return error.InvalidValue;
            };
            @field(config, field) = std.math.cast(Int, number) orelse {
                diagnostic.set("--limit {s}: {d} is more than {d}", .{ field, number, std.math.maxInt(Int) });
                return error.InvalidValue;
            };
            return;
        };
    }
    diagnostic.set("--limit: no limit named '{s}' (--limits lists them)", .{name});
    return error.InvalidValue;
}

fn sameLimitName(given: []const u8, field: []const u8) bool {
    if (given.len != field.len) return false;
    for (given, field) |a, b| if (a != b and !(a == '-' and b == '_')) return false;
    return true;
}

/// What a limit's value is, by its name: a time in milliseconds, a size, or a count.
fn limitUnit(comptime field: []const u8) []const u8 {
    if (std.mem.endsWith(u8, field, "_ms")) return "a time (a number of milliseconds, or with ms, s, m or h)";
    if (std.mem.find(u8, field, "bytes") != null) return "a size (a number of bytes, or with K, M, G or T)";
    return "a whole number";
}

/// The number `value` gives for the limit `field` (see `limitUnit`); null when it is none.
fn parseLimit(comptime field: []const u8, value: []const u8) ?u64 {
    if (std.fmt.parseInt(u64, value, 10)) |number| return number else |_| {}
    if (std.mem.endsWith(u8, field, "_ms")) return parseMilliseconds(value);
    if (std.mem.find(u8, field, "bytes") != null) return parseBytes(value);
    return null;
}

/// `250ms`, `15s`, `2m` or `1h` in milliseconds; null for anything else or an overflow.
pub fn parseMilliseconds(text: []const u8) ?u64 {
    var end: usize = 0;
    while (end < text.len and std.ascii.isDigit(text[end])) end += 1;
    if (end == 0) return null;
    const number = std.fmt.parseInt(u64, text[0..end], 10) catch return null;
    const units = [_]struct { []const u8, u64 }{ .{ "ms", 1 }, .{ "s", 1000 }, .{ "m", 60_000 }, .{ "h", 3_600_000 } };
    for (units) |unit| if (std.mem.eql(u8, text[end..], unit[0])) return std.math.mul(u64, number, unit[1]) catch null;
    return null;
}

/// Every limit `--limit` sets, with its value in `config`, a line each (for `--limits`).
pub fn printLimits(io: std.Io, config: *const Config) void {
    var buffer: [4096]u8 = undefined;
    var writer: std.Io.File.Writer = .initStreaming(.stdout(), io, &buffer);
    const out = &writer.interface;
    out.writeAll("limits (--limit NAME=VALUE), with the values this program starts with:\n") catch return;
    @setEvalBranchQuota(100_000);
    const info = @typeInfo(Config).@"struct";
    inline for (info.field_names, info.field_types) |field, T| {
        if (comptime isLimit(field, T)) {
            const current = @field(config, field);
            if (@typeInfo(T) == .optional) {
                if (current) |number| {
                    out.print("  {s} = {d}\n", .{ field, number }) catch return;
                } else {
                    out.print("  {s} = (unset)\n", .{field}) catch return;
                }
            } else {
                out.print("  {s} = {d}\n", .{ field, current }) catch return;
            }
        }
    }
    out.writeAll("The meaning of each is in Config.zig; sizes are bytes, _ms times milliseconds.\n") catch return;
    out.flush() catch return;
}

/// Completes `config` once every flag was applied: with `--tls-port`, the TLS settings move
/// from the first listener to a second one on that port (same host), and the first serves
/// plaintext. Then checks the whole configuration, so that a limit that does not fit the
/// others is named now rather than when the server starts.
pub fn finishServerFlags(config: *Config, diagnostic: *Diagnostic) FlagError!void {
    try finishTlsPort(config, diagnostic);
    var reason: []const u8 = "";
    config.validate(&reason) catch {
        diagnostic.set("invalid configuration: {s}", .{reason});
        return error.InvalidValue;
    };
}

fn finishTlsPort(config: *Config, diagnostic: *Diagnostic) FlagError!void {
    const port = tls_listener.port orelse return;
    const tls = config.tls orelse {
        diagnostic.set("--tls-port needs --tls-cert and --tls-key, or --tls-self-signed", .{});
        return error.InvalidValue;
    };
    if (port != 0 and port == config.port) {
        diagnostic.set("--tls-port {d}: the same port as --port", .{port});
        return error.InvalidValue;
    }
    tls_listener.storage[0] = .{ .host = config.host, .port = port, .tls = tls, .proxy_protocol = config.proxy_protocol };
    config.tls = null;
    config.listeners = &tls_listener.storage;
}

/// The networks `--proxy-protocol-from` names (a command line is parsed once per process).
const proxy_from = struct {
    var storage: [32][]const u8 = undefined;
    var count: usize = 0;
};

/// The listener `--tls-port` adds (a command line is parsed once per process).
const tls_listener = struct {
    var port: ?u16 = null;
    var storage: [1]Config.Listener = undefined;
};

/// The certificate files the command line names (`--tls-cert`, `--tls-key`), for
/// `Config.tls.certificates`: a command line is parsed once per process.
const tls_files = struct {
    var storage: [16]Config.Certificate = @splat(.{ .chain_file = "", .key_file = "" });
    var certs: usize = 0;
    var keys: usize = 0;
};

/// Parses an example's arguments (server flags only). On bad input, prints one line and the
/// usage to stderr and exits with status 2.
pub fn parseExampleArgs(init: std.process.Init, config: *Config, comptime usage: []const u8) void {
    const args = init.minimal.args.toSlice(init.arena.allocator()) catch fatalUsage(init.io, "out of memory", usage);
    var diagnostic: Diagnostic = .{};
    // `--limits`: listed once every other flag is applied.
    var list_limits = false;
    var index: usize = 1;
    while (index < args.len) {
        if (std.mem.eql(u8, args[index], "--help") or std.mem.eql(u8, args[index], "-h")) {
            printTo(init.io, .stdout(), usage ++ "\n" ++ server_flags_help);
            std.process.exit(0);
        }
        if (std.mem.eql(u8, args[index], "--limits")) {
            list_limits = true;
            index += 1;
            continue;
        }
        const applied = applyServerFlag(config, args, &index, &diagnostic) catch
            fatalUsage(init.io, diagnostic.message, usage);
        if (!applied) {
            diagnostic.set("unknown argument '{s}'", .{args[index]});
            fatalUsage(init.io, diagnostic.message, usage);
        }
    }
    if (list_limits) {
        printLimits(init.io, config);
        std.process.exit(0);
    }
    finishServerFlags(config, &diagnostic) catch fatalUsage(init.io, diagnostic.message, usage);
}

/// Prints `error: message` and the usage on stderr and exits with status 2.
pub fn fatalUsage(io: std.Io, message: []const u8, comptime usage: []const u8) noreturn {
    var buffer: [512]u8 = undefined;
    const line = std.mem.print(&buffer, "error: {s}\n", .{message}) catch "error\n";
    printTo(io, .stderr(), line);
    printTo(io, .stderr(), usage ++ "\n" ++ server_flags_help);
    std.process.exit(2);
}

fn printTo(io: std.Io, file: std.Io.File, text: []const u8) void {
    var buffer: [1024]u8 = undefined;
    var writer: std.Io.File.Writer = .initStreaming(file, io, &buffer);
    writer.interface.writeAll(text) catch return;
    writer.interface.flush() catch return;
}

/// Runs `server` (a `saker.Server(H)`) until SIGINT/SIGTERM, printing a
/// `listening on http://HOST:PORT` line for each of its listeners once signals are caught: a
/// script that reads the lines and then sends SIGTERM always gets a graceful shutdown.
pub fn run(io: std.Io, server: anytype) !void {
    const Server = @TypeOf(server.*);
    const Context = struct {
        io: std.Io,
        server: *const Server,
        fn call(context: ?*anyopaque, port: u16) void {
            const self: *@This() = @ptrCast(@alignCast(context.?));
            std.debug.assert(port == self.server.port());
            announceAll(self.io, self.server);
        }
    };
    var context: Context = .{ .io = io, .server = server };
    try server.runWith(.{ .ready = .{ .context = &context, .call = Context.call } });
}

/// The listening lines of every listener of `server` (a `saker.Server(H)`), in the order of
/// `Config.listenerAt`.
pub fn announceAll(io: std.Io, server: anytype) void {
    for (server.endpoints, 0..) |endpoint, i| announce(io, endpoint.host, endpoint.port, listenerOf(server, i));
}

/// A byte count as a user writes it: digits with an optional K, M, G or T (powers of 1024,
/// either case, an optional trailing `B` or `iB`); null when it is not one, is 0, or
/// overflows.
pub fn parseBytes(text: []const u8) ?u64 {
    var end: usize = 0;
    while (end < text.len and std.ascii.isDigit(text[end])) end += 1;
    if (end == 0) return null;
    const number = std.fmt.parseInt(u64, text[0..end], 10) catch return null;
    const suffix = text[end..];
    const shift: u6 = if (suffix.len == 0) 0 else switch (std.ascii.toUpper(suffix[0])) {
        'B' => if (suffix.len == 1) 0 else return null,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        else => return null,
    };
    if (suffix.len > 1 and shift > 0) {
        const rest = suffix[1..];
        if (!std.ascii.eqlIgnoreCase(rest, "B") and !std.ascii.eqlIgnoreCase(rest, "iB")) return null;
    }
    const bytes = std.math.shlExact(u64, number, shift) catch return null;
    return if (bytes == 0) null else bytes;
}

test "parseBytes: plain counts and binary suffixes" {
    const cases = [_]struct { []const u8, ?u64 }{
        .{ "1048576", 1048576 }, .{ "8M", 8 << 20 },                .{ "500m", 500 << 20 },    .{ "2G", 2 << 30 },
        .{ "2GiB", 2 << 30 },    .{ "64KB", 64 << 10 },             .{ "10B", 10 },            .{ "", null },
        .{ "0", null },          .{ "M", null },                    .{ "5X", null },           .{ "5MBB", null },
        .{ "-1", null },         .{ "99999999999999999999", null }, .{ "17179869184T", null },
    };
    for (cases) |case| try std.testing.expectEqual(case[1], parseBytes(case[0]));
}

/// Prints `listening on http://HOST:PORT` on stdout, flushed at once, so scripts can read the
/// real port. For `0.0.0.0` or `::` (every interface) a line follows for each address of the
/// machine that reaches the server, so a user has a URL to open (IPv6 link-local addresses,
/// which need a zone in a URL, are left out).
pub fn announce(io: std.Io, host: []const u8, port: u16, listener: Listener) void {
    var buffer: [4096]u8 = undefined;
    var writer: std.Io.File.Writer = .initStreaming(.stdout(), io, &buffer);
    writeAnnouncement(&writer.interface, host, port, listener) catch return;
    writer.interface.flush() catch return;
}

/// What the listening line of listener `index` of `server` (a `saker.Server(H)`) says
/// besides its address.
pub fn listenerOf(server: anytype, index: usize) Listener {
    const tls = server.endpoints[index].listening.tls orelse return .{};
    return .{
        .scheme = "https",
        .self_signed_fingerprint = if (tls.settings.self_signed) tls.fingerprint else null,
    };
}

/// What the listening line says of a listener besides its address.
pub const Listener = struct {
    scheme: []const u8 = "http",
    /// Said after the address, in parentheses (e.g. "redirects to https").
    note: ?[]const u8 = null,
    /// For a self-signed certificate: its SHA-256 fingerprint, printed with how to trust it.
    self_signed_fingerprint: ?[32]u8 = null,
};

fn writeAnnouncement(w: *std.Io.Writer, host: []const u8, port: u16, listener: Listener) std.Io.Writer.Error!void {
    const is_ip6 = std.mem.findScalar(u8, host, ':') != null;
    const scheme = listener.scheme;
    if (is_ip6) {
        try w.print("listening on {s}://[{s}]:{d}", .{ scheme, host, port });
    } else {
        try w.print("listening on {s}://{s}:{d}", .{ scheme, host, port });
    }
    if (listener.note) |note| try w.print(" ({s})", .{note});
    try w.writeByte('\n');
    if (listener.self_signed_fingerprint) |fingerprint| {
        try w.writeAll("  self-signed certificate for localhost, 127.0.0.1 and ::1 (made now, valid a year)\n  SHA-256 fingerprint ");
        for (fingerprint, 0..) |byte, i| try w.print("{s}{X:0>2}", .{ if (i == 0) "" else ":", byte });
        try w.print(
            \\
            \\  to trust it: check that fingerprint where your browser shows the certificate, or save
            \\  it and hand it to your client (it changes at each start):
            \\    openssl s_client -connect {s}:{d} </dev/null 2>/dev/null | openssl x509 > saker.pem
            \\    curl --cacert saker.pem https://localhost:{d}/
            \\
        , .{ if (is_ip6) "[::1]" else "127.0.0.1", port, port });
    }
    const every: ?Family = if (std.mem.eql(u8, host, "0.0.0.0"))
        .ip4
    else if (std.mem.eql(u8, host, "::"))
        .ip6
    else
        null;
    const family = every orelse return;
    var addresses: [interfaces_max * 2]std.Io.net.IpAddress = undefined;
    for (localAddresses(family, port, &addresses)) |address| try w.print("  {s}://{f}\n", .{ scheme, address });
}

const Family = enum { ip4, ip6 };

/// Interfaces looked at for `localAddresses` (per family).
const interfaces_max = 64;

/// The addresses of this machine a server bound to the unspecified address of `family`
/// reaches, with `port`: IPv4 ones for `0.0.0.0`; for `::`, IPv6 ones (without link-local
/// ones) and, unless the system makes IPv6 sockets IPv6-only, IPv4 ones too. Empty when they
/// cannot be read.
fn localAddresses(family: Family, port: u16, buffer: []std.Io.net.IpAddress) []std.Io.net.IpAddress {
    var count: usize = 0;
    if (family == .ip6) count += ip6Addresses(port, buffer);
    if (family == .ip4 or !ip6Only()) count += ip4Addresses(port, buffer[count..]);
    return buffer[0..count];
}

/// IPv4 addresses of the interfaces that are up (SIOCGIFCONF).
fn ip4Addresses(port: u16, buffer: []std.Io.net.IpAddress) usize {
    const linux = std.os.linux;
    const rc = linux.socket(linux.AF.INET, linux.SOCK.DGRAM | linux.SOCK.CLOEXEC, 0);
    if (linux.errno(rc) != .SUCCESS) return 0;
    const fd: linux.fd_t = @intCast(rc);
    defer _ = linux.close(fd);
    var requests: [interfaces_max]linux.ifreq = undefined;
    const Ifconf = extern struct { len: i32, buf: [*]linux.ifreq };
    var conf: Ifconf = .{ .len = @sizeOf(@TypeOf(requests)), .buf = &requests };
    if (linux.errno(linux.ioctl(fd, linux.SIOCGIFCONF, @intFromPtr(&conf))) != .SUCCESS) return 0;
    const found: usize = @intCast(@divFloor(conf.len, @sizeOf(linux.ifreq)));
    var count: usize = 0;
    for (requests[0..found]) |request| {
        if (count == buffer.len) break;
        if (request.ifru.addr.family != linux.AF.INET) continue;
        const in: *const linux.sockaddr.in = @ptrCast(&request.ifru.addr);
        const address: std.Io.net.IpAddress = .{ .ip4 = .{ .bytes = @bitCast(in.addr), .port = port } };
        if (!contains(buffer[0..count], address)) {
            buffer[count] = address;
            count += 1;
        }
    }
    return count;
}

/// IPv6 addresses from /proc/net/if_inet6 (`ADDRESS IFINDEX PREFIX SCOPE FLAGS NAME` per
/// line, the address as 32 hex digits), link-local ones left out.
fn ip6Addresses(port: u16, buffer: []std.Io.net.IpAddress) usize {
    var text_buffer: [interfaces_max * 64]u8 = undefined;
    const text = readProcFile("/proc/net/if_inet6", &text_buffer) orelse return 0;
    var count: usize = 0;
    var lines = std.mem.tokenizeScalar(u8, text, '\n');
    while (lines.next()) |line| {
        if (count == buffer.len) break;
        if (line.len < 32) continue;
        var bytes: [16]u8 = undefined;
        _ = std.fmt.hexToBytes(&bytes, line[0..32]) catch continue;
        const ip6: std.Io.net.Ip6Address = .{ .bytes = bytes, .port = port };
        if (ip6.isLinkLocal()) continue;
        const address: std.Io.net.IpAddress = .{ .ip6 = ip6 };
        if (!contains(buffer[0..count], address)) {
            buffer[count] = address;
            count += 1;
        }
    }
    return count;
}

/// Whether IPv6 sockets take no IPv4 connections by default (`net.ipv6.bindv6only`).
fn ip6Only() bool {
    var buffer: [8]u8 = undefined;
    const text = readProcFile("/proc/sys/net/ipv6/bindv6only", &buffer) orelse return false;
    return text.len > 0 and text[0] == '1';
}

fn readProcFile(path: [*:0]const u8, buffer: []u8) ?[]const u8 {
    const linux = std.os.linux;
    const rc = linux.open(path, .{ .CLOEXEC = true }, 0);
    if (linux.errno(rc) != .SUCCESS) return null;
    const fd: linux.fd_t = @intCast(rc);
    defer _ = linux.close(fd);
    var len: usize = 0;
    while (len < buffer.len) {
        const n = linux.read(fd, buffer[len..].ptr, buffer.len - len);
        if (linux.errno(n) != .SUCCESS) return null;
        if (n == 0) break;
        len += n;
    }
    return buffer[0..len];
}

fn contains(addresses: []const std.Io.net.IpAddress, address: std.Io.net.IpAddress) bool {
    for (addresses) |a| if (a.eql(&address)) return true;
    return false;
}

test "announce: every interface is listed for 0.0.0.0 and ::, loopback among them" {
    var buffer: [4096]u8 = undefined;
    var w: std.Io.Writer = .fixed(&buffer);
    try writeAnnouncement(&w, "0.0.0.0", 8080, .{});
    const text = w.buffered();
    try std.testing.expect(std.mem.startsWith(u8, text, "listening on http://0.0.0.0:8080\n"));
    try std.testing.expect(std.mem.find(u8, text, "\n  http://127.0.0.1:8080\n") != null);

    w = .fixed(&buffer);
    try writeAnnouncement(&w, "127.0.0.1", 8080, .{});
    try std.testing.expectEqualStrings("listening on http://127.0.0.1:8080\n", w.buffered());
    w = .fixed(&buffer);
    try writeAnnouncement(&w, "::1", 80, .{});
    try std.testing.expectEqualStrings("listening on http://[::1]:80\n", w.buffered());

    var addresses: [interfaces_max * 2]std.Io.net.IpAddress = undefined;
    const ip6 = localAddresses(.ip6, 80, &addresses);
    for (ip6) |address| if (address == .ip6) try std.testing.expect(!address.ip6.isLinkLocal());
    // Where the kernel has IPv6, its loopback is there.
    if (readProcFile("/proc/net/if_inet6", &buffer)) |text6| if (std.mem.find(u8, text6, "00000000000000000000000000000001") != null) {
        try std.testing.expect(contains(ip6, .{ .ip6 = .loopback(80) }));
    };
}

test "applyServerFlag: values, errors and unknown flags" {
    var config: Config = .{};
    var diagnostic: Diagnostic = .{};
    const args = [_][]const u8{ "--port", "0", "--engine", "blocking", "--workers", "3", "--host", "::1", "--h2c-only", "--x" };
    var index: usize = 0;
    while (index < 9) try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expect(config.h2c_only);
    try std.testing.expectEqual(@as(u16, 0), config.port);
    try std.testing.expectEqual(engine.Kind.blocking, config.engine);
    try std.testing.expectEqual(@as(u16, 3), config.workers);
    try std.testing.expectEqualStrings("::1", config.host);
    try std.testing.expect(!try applyServerFlag(&config, &args, &index, &diagnostic));

    const bad = [_][]const u8{ "--engine", "fast" };
    index = 0;
    try std.testing.expectError(error.InvalidValue, applyServerFlag(&config, &bad, &index, &diagnostic));
    try std.testing.expect(std.mem.find(u8, diagnostic.message, "fast") != null);
    const missing = [_][]const u8{"--port"};
    index = 0;
    try std.testing.expectError(error.MissingValue, applyServerFlag(&config, &missing, &index, &diagnostic));
    const port = [_][]const u8{ "--port", "70000" };
    index = 0;
    try std.testing.expectError(error.InvalidValue, applyServerFlag(&config, &port, &index, &diagnostic));
}

test "applyServerFlag: --flag=value, -p, -b and localhost" {
    var config: Config = .{};
    var diagnostic: Diagnostic = .{};
    const args = [_][]const u8{ "--port=8000", "-b", "localhost", "--engine=worker_pool", "-p", "9000", "--host=::1" };
    var index: usize = 0;
    try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expectEqual(@as(u16, 8000), config.port);
    try std.testing.expectEqual(@as(usize, 1), index);
    try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expectEqualStrings("127.0.0.1", config.host);
    try std.testing.expectEqual(@as(usize, 3), index);
    try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expectEqual(engine.Kind.worker_pool, config.engine);
    try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expectEqual(@as(u16, 9000), config.port);
    try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expectEqualStrings("::1", config.host);
    try std.testing.expectEqual(args.len, index);

    for ([_][]const u8{ "--port=", "--host=example.invalid", "--workers=x" }) |arg| {
        index = 0;
        try std.testing.expectError(error.InvalidValue, applyServerFlag(&config, &.{arg}, &index, &diagnostic));
    }
    // Not server flags: left to the caller.
    for ([_][]const u8{ "--portal=1", "-P", "--index=a.html" }) |arg| {
        index = 0;
        try std.testing.expect(!try applyServerFlag(&config, &.{arg}, &index, &diagnostic));
        try std.testing.expectEqual(@as(usize, 0), index);
    }
}

test "parseMilliseconds: a number with its unit" {
    const cases = [_]struct { []const u8, ?u64 }{
        .{ "250ms", 250 },  .{ "15s", 15_000 }, .{ "2m", 120_000 },                  .{ "1h", 3_600_000 },
        .{ "0s", 0 },       .{ "15", null },    .{ "s", null },                      .{ "15 s", null },
        .{ "15sec", null }, .{ "-1s", null },   .{ "99999999999999999999ms", null }, .{ "9999999999999999h", null },
    };
    for (cases) |case| try std.testing.expectEqual(case[1], parseMilliseconds(case[0]));
}

test "applyServerFlag --limit: any Config number, by name, in its unit" {
    var config: Config = .{};
    var diagnostic: Diagnostic = .{};
    const args = [_][]const u8{
        "--limit",                       "connections_max=2000",
        "--limit=idle-timeout-ms=15s",   "--limit",
        "header_bytes_max=32K",          "--limit",
        "unsent_bytes_max=0",            "--limit=decoded_body_bytes_max=1M",
        "--limit=write_timeout_ms=2500",
    };
    var index: usize = 0;
    while (index < args.len) try std.testing.expect(try applyServerFlag(&config, &args, &index, &diagnostic));
    try std.testing.expectEqual(@as(u32, 2000), config.connections_max);
    try std.testing.expectEqual(@as(u32, 15_000), config.idle_timeout_ms);
    try std.testing.expectEqual(@as(u32, 32 * 1024), config.header_bytes_max);
    try std.testing.expectEqual(@as(u32, 0), config.unsent_bytes_max);
    try std.testing.expectEqual(@as(?u64, 1 << 20), config.decoded_body_bytes_max);
    try std.testing.expectEqual(@as(u32, 2500), config.write_timeout_ms);
    try finishServerFlags(&config, &diagnostic);

    const bad = [_]struct { []const u8, []const u8 }{
        .{ "port=1", "no limit named 'port'" },
        .{ "host=1", "no limit named 'host'" },
        .{ "connections_max=2K", "'2K' is not a whole number" },
        .{ "idle_timeout_ms=5M", "'5M' is not a time" },
        .{ "header_bytes_max=5s", "'5s' is not a size" },
        .{ "backlog=4294967296", "more than 2147483647" },
        .{ "connections-max", "not NAME=VALUE" },
        .{ "=5", "no limit named ''" },
    };
    for (bad) |case| {
        const one = [_][]const u8{ "--limit", case[0] };
        index = 0;
        try std.testing.expectError(error.InvalidValue, applyServerFlag(&config, &one, &index, &diagnostic));
        try std.testing.expect(std.mem.find(u8, diagnostic.message, case[1]) != null);
    }

    // Each limit is checked against the others once every flag is in.
    config = .{};
    const misfit = [_][]const u8{ "--limit", "request_line_bytes_max=128K" };
    index = 0;
    try std.testing.expect(try applyServerFlag(&config, &misfit, &index, &diagnostic));
    try std.testing.expectError(error.InvalidValue, finishServerFlags(&config, &diagnostic));
    try std.testing.expectEqualStrings("invalid configuration: request_line_bytes_max must not exceed header_bytes_max", diagnostic.message);
}
