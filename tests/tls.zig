//! TLS as clients see it, on every engine: curl with TLS 1.2 and 1.3, `openssl s_client`
//! (versions, ALPN, SNI, resumption), raw bytes that are not TLS, stalled handshakes, and
//! certificates that cannot be used. (The whole integration suite also runs over TLS: see
//! `Client.overTls`.) Certificates are made by the tests with OpenSSL's API.
const std = @import("std");
const testing = std.testing;
const linux = std.os.linux;
const saker = @import("saker");
const ssl = saker.tls.openssl;
const usable = @import("engines.zig").usable;
const skipWithout = @import("engines.zig").skipWithout;
const Client = @import("Client.zig");
const build_options = @import("build_options");
const sleepMs = @import("clock.zig").sleepMs;
const nowUs = @import("clock.zig").nowUs;

const engines = [_]saker.engine.Kind{ .blocking, .thread_per_connection, .worker_pool, .epoll, .io_uring };

const Hello = struct {
    pub fn handle(_: *Hello, req: *saker.Request, res: *saker.Response) !void {
        if (std.mem.eql(u8, req.path, "/big")) {
            const body = try res.arena.alloc(u8, 300 * 1024);
            for (body, 0..) |*b, i| b.* = @intCast('a' + i % 26);
            res.setBody(body);
            return;
        }
        if (std.mem.eql(u8, req.path, "/worker")) return res.print("{d}", .{req.worker_index});
        if (std.mem.eql(u8, req.path, "/tls")) {
            const facts = req.tls() orelse return res.print("plaintext", .{});
            return res.print("{s} {s} sni={s} alpn={s} resumed={}", .{ facts.version, facts.cipher, facts.server_name orelse "-", facts.alpn orelse "-", facts.resumed });
        }
        try res.print("hello over {s}", .{req.path});
    }
};

/// A `Hello` server for a test, over TLS on its first listener unless the test says which
/// listeners speak it.
const Running = struct {
    const Thread = @import("server_thread.zig").ServerThread(Hello);

    fn start(kind: saker.engine.Kind, config_in: saker.Config) !*Thread {
        var config = config_in;
        if (config.tls == null and config.listeners.len == 0) config.tls = .{ .self_signed = true };
        return Thread.start(kind, config);
    }
};

/// Runs a real client, with `stdin` as its input (through `sh`, which pipes it in);
/// `error.FileNotFound` when the client is not installed.
fn run(argv: []const []const u8, stdin: ?[]const u8) !std.process.RunResult {
    const input = stdin orelse return std.process.run(testing.allocator, testing.io, .{ .argv = argv });
    var with_input: [16][]const u8 = undefined;
    with_input[0] = "sh";
    with_input[1] = "-c";
    with_input[2] = "command -v \"$1\" >/dev/null || exit 127; printf '%s' \"$0\" | \"$@\"";
    with_input[3] = input;
    @memcpy(with_input[4..][0..argv.len], argv);
    const result = try std.process.run(testing.allocator, testing.io, .{ .argv = with_input[0 .. 4 + argv.len] });
    if (result.term == .exited and result.term.exited == 127) {
        freeResult(result);
        return error.FileNotFound;
    }
    return result;
}

/// "127.0.0.1:PORT", as `openssl s_client -connect` takes it.
fn loopback(buffer: []u8, port: u16) ![]const u8 {
    return std.mem.print(buffer, "127.0.0.1:{d}", .{port});
}

fn freeResult(result: std.process.RunResult) void {
    testing.allocator.free(result.stdout);
    testing.allocator.free(result.stderr);
}

test "curl over TLS 1.2 and TLS 1.3 on every engine, keep-alive and a 300 KiB body" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        var url: [2][64]u8 = undefined;
        const small = try std.mem.print(&url[0], "https://127.0.0.1:{d}/a", .{running.port()});
        const big = try std.mem.print(&url[1], "https://127.0.0.1:{d}/big", .{running.port()});
        for ([_][2][]const u8{ .{ "--tlsv1.2", "1.2" }, .{ "--tlsv1.3", "1.3" } }) |version| {
            const result = run(&.{ "curl", "--http1.1", "--insecure", "--silent", "--show-error", "--verbose", version[0], "--tls-max", version[1], small, small, big }, null) catch |err| return skipWithout("curl", err);
            defer freeResult(result);
            try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, result.term);
            try testing.expect(std.mem.startsWith(u8, result.stdout, "hello over /ahello over /aabcdefghijklmnopqrstuvwxyz"));
            try testing.expectEqual(@as(usize, 2 * "hello over /a".len + 300 * 1024), result.stdout.len);
            var expected: [64]u8 = undefined;
            try testing.expect(std.mem.find(u8, result.stderr, try std.mem.print(&expected, "SSL connection using TLSv{s}", .{version[1]})) != null);
            try testing.expect(std.mem.find(u8, result.stderr, "ALPN: server accepted http/1.1") != null);
            // One connection for the three requests.
            try testing.expect(std.mem.find(u8, result.stderr, "Re-using existing connection") != null);
        }
    }
}

test "openssl s_client: TLS 1.0 and 1.1 are refused; ALPN picks h2 first, then http/1.1; an offer of neither is refused" {
    const running = try Running.start(.epoll, .{});
    defer running.stop();
    var connect: [32]u8 = undefined;
    const address = try loopback(&connect, running.port());
    for ([_][]const u8{ "-tls1", "-tls1_1" }) |old| {
        const result = run(&.{ "openssl", "s_client", "-connect", address, old }, "") catch |err| return skipWithout("openssl", err);
        defer freeResult(result);
        try testing.expect(result.term.exited != 0);
        try testing.expect(std.mem.find(u8, result.stdout, "Cipher is (NONE)") != null);
    }
    {
        // h2 chosen: HTTP/1.1 bytes are then not the HTTP/2 preface, answered with GOAWAY.
        const result = try run(&.{ "openssl", "s_client", "-ign_eof", "-connect", address, "-alpn", "h2,http/1.1" }, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        defer freeResult(result);
        try testing.expect(std.mem.find(u8, result.stdout, "ALPN protocol: h2") != null);
        try testing.expect(std.mem.find(u8, result.stdout, "hello over /x") == null);
    }
    {
        const result = try run(&.{ "openssl", "s_client", "-ign_eof", "-connect", address, "-alpn", "http/1.1" }, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        defer freeResult(result);
        try testing.expect(std.mem.find(u8, result.stdout, "ALPN protocol: http/1.1") != null);
        try testing.expect(std.mem.find(u8, result.stdout, "hello over /x") != null);
    }
    {
        const result = try run(&.{ "openssl", "s_client", "-connect", address, "-alpn", "spdy/3" }, "");
        defer freeResult(result);
        try testing.expect(result.term.exited != 0);
        try testing.expect(std.mem.find(u8, result.stderr, "no application protocol") != null);
    }
}

test "openssl s_client: a TLS 1.3 session is resumed with a ticket, and the resumption brings a fresh one" {
    const running = try Running.start(.epoll, .{});
    defer running.stop();
    var connect: [32]u8 = undefined;
    const address = try loopback(&connect, running.port());
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    var session_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const session = try std.mem.print(&session_buffer, "{s}/session.pem", .{dir_path});
    const first = run(&.{ "openssl", "s_client", "-ign_eof", "-connect", address, "-sess_out", session }, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") catch |err| return skipWithout("openssl", err);
    defer freeResult(first);
    try testing.expect(std.mem.find(u8, first.stdout, "New, TLSv1.3") != null);
    // The resumed connection gets a fresh ticket (TLS 1.3 tickets are used once), which
    // resumes the next one: a client that keeps resuming never falls back to a full handshake.
    var renewed_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const renewed = try std.mem.print(&renewed_buffer, "{s}/renewed.pem", .{dir_path});
    const second = try run(&.{ "openssl", "s_client", "-ign_eof", "-connect", address, "-sess_in", session, "-sess_out", renewed }, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    defer freeResult(second);
    try testing.expect(std.mem.find(u8, second.stdout, "Reused, TLSv1.3") != null);
    try testing.expect(std.mem.find(u8, second.stdout, "hello over /") != null);
    const third = try run(&.{ "openssl", "s_client", "-ign_eof", "-connect", address, "-sess_in", renewed }, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    defer freeResult(third);
    try testing.expect(std.mem.find(u8, third.stdout, "Reused, TLSv1.3") != null);
}

/// Writes a certificate for `name` (its CN and only DNS name) and its key as PEM files into
/// `dir`, valid from `not_before_s` to `not_after_s` seconds from now, self-signed.
fn writeCertificate(dir: []const u8, name: []const u8, not_before_s: c_long, not_after_s: c_long, paths: *[2][std.fs.max_path_bytes:0]u8) !saker.Config.Certificate {
    const keygen = ssl.EVP_PKEY_CTX_new_from_name(null, "EC", null) orelse return error.OpenSsl;
    defer ssl.EVP_PKEY_CTX_free(keygen);
    var key: ?*ssl.EVP_PKEY = null;
    if (ssl.EVP_PKEY_keygen_init(keygen) != 1 or ssl.EVP_PKEY_CTX_set_group_name(keygen, "P-256") != 1 or
        ssl.EVP_PKEY_generate(keygen, &key) != 1) return error.OpenSsl;
    defer ssl.EVP_PKEY_free(key);
    const x = ssl.X509_new() orelse return error.OpenSsl;
    defer ssl.X509_free(x);
    var name_z: [128:0]u8 = undefined;
    const cn = try std.fmt.bufPrintSentinel(&name_z, "{s}", .{name}, 0);
    var san_z: [140:0]u8 = undefined;
    const san_text = try std.fmt.bufPrintSentinel(&san_z, "DNS:{s}", .{name}, 0);
    const subject = ssl.X509_get_subject_name(x);
    if (ssl.X509_set_version(x, 2) != 1 or ssl.ASN1_INTEGER_set(ssl.X509_get_serialNumber(x), 7) != 1 or
        ssl.X509_gmtime_adj(ssl.X509_getm_notBefore(x), not_before_s) == null or
        ssl.X509_gmtime_adj(ssl.X509_getm_notAfter(x), not_after_s) == null or
        ssl.X509_set_pubkey(x, key.?) != 1 or
        ssl.X509_NAME_add_entry_by_txt(subject, "CN", ssl.MBSTRING_ASC, cn.ptr, -1, -1, 0) != 1 or
        ssl.X509_set_issuer_name(x, subject) != 1) return error.OpenSsl;
    const san = ssl.X509V3_EXT_conf_nid(null, null, ssl.NID_subject_alt_name, san_text) orelse return error.OpenSsl;
    defer ssl.X509_EXTENSION_free(san);
    if (ssl.X509_add_ext(x, san, -1) != 1 or ssl.X509_sign(x, key.?, ssl.EVP_sha256()) == 0) return error.OpenSsl;
    const chain = try std.fmt.bufPrintSentinel(&paths[0], "{s}/{s}.crt", .{ dir, name }, 0);
    const key_path = try std.fmt.bufPrintSentinel(&paths[1], "{s}/{s}.key", .{ dir, name }, 0);
    {
        const bio = ssl.BIO_new_file(chain, "w") orelse return error.OpenSsl;
        defer _ = ssl.BIO_free(bio);
        if (ssl.PEM_write_bio_X509(bio, x) != 1) return error.OpenSsl;
    }
    {
        const bio = ssl.BIO_new_file(key_path, "w") orelse return error.OpenSsl;
        defer _ = ssl.BIO_free(bio);
        if (ssl.PEM_write_bio_PrivateKey(bio, key.?, null, null, 0, null, null) != 1) return error.OpenSsl;
    }
    return .{ .chain_file = chain, .key_file = key_path };
}

test "SNI: each name gets its certificate; an unknown name gets the first, or an alert when strict" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    var a_paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    var b_paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    const certificates = [_]saker.Config.Certificate{
        try writeCertificate(dir_path, "a.test", -60, 3600, &a_paths),
        try writeCertificate(dir_path, "b.test", -60, 3600, &b_paths),
    };
    for ([_]bool{ false, true }) |strict| {
        const running = try Running.start(.epoll, .{ .tls = .{ .certificates = &certificates, .sni_strict = strict } });
        defer running.stop();
        var connect: [32]u8 = undefined;
        const address = try loopback(&connect, running.port());
        for ([_][2][]const u8{ .{ "a.test", "CN = a.test" }, .{ "b.test", "CN = b.test" }, .{ "c.test", "CN = a.test" } }) |case| {
            const result = run(&.{ "openssl", "s_client", "-connect", address, "-servername", case[0] }, "") catch |err| return skipWithout("openssl", err);
            defer freeResult(result);
            if (strict and std.mem.eql(u8, case[0], "c.test")) {
                try testing.expect(result.term.exited != 0);
                try testing.expect(std.mem.find(u8, result.stderr, "unrecognized name") != null);
            } else {
                var expected: [64]u8 = undefined;
                const subject = try std.mem.print(&expected, "subject={s}", .{case[1]});
                try testing.expect(std.mem.find(u8, result.stdout, subject) != null);
            }
        }
    }
}

test "certificates that cannot be used stop `saker serve` with a message naming the file" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    var expired_paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    var future_paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    var good_paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    const expired = try writeCertificate(dir_path, "expired.test", -7200, -3600, &expired_paths);
    const future = try writeCertificate(dir_path, "future.test", 3600, 7200, &future_paths);
    const good = try writeCertificate(dir_path, "good.test", -60, 3600, &good_paths);
    const Case = struct { chain: []const u8, key: []const u8, says: []const u8, names: []const u8 };
    const cases = [_]Case{
        .{ .chain = expired.chain_file, .key = expired.key_file, .says = "has expired", .names = expired.chain_file },
        .{ .chain = future.chain_file, .key = future.key_file, .says = "is not valid yet", .names = future.chain_file },
        .{ .chain = "/nonexistent/saker.crt", .key = good.key_file, .says = "No such file", .names = "/nonexistent/saker.crt" },
        .{ .chain = good.chain_file, .key = "/nonexistent/saker.key", .says = "No such file", .names = "/nonexistent/saker.key" },
        .{ .chain = good.chain_file, .key = expired.key_file, .says = "key values mismatch", .names = expired.key_file },
        .{ .chain = good.key_file, .key = good.key_file, .says = "no start line", .names = good.key_file },
    };
    for (cases) |case| {
        const result = try run(&.{ build_options.saker_exe, "serve", dir_path, "--port", "0", "--tls-cert", case.chain, "--tls-key", case.key }, null);
        defer freeResult(result);
        errdefer std.debug.print("stderr: {s}\n", .{result.stderr});
        try testing.expectEqual(std.process.Child.Term{ .exited = 2 }, result.term);
        try testing.expectEqualStrings("", result.stdout);
        try testing.expect(std.mem.find(u8, result.stderr, case.says) != null);
        try testing.expect(std.mem.find(u8, result.stderr, case.names) != null);
    }
}

test "plaintext HTTP on a TLS port gets a plaintext 400; garbage records get an alert; the server goes on" {
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{});
        defer running.stop();
        {
            var client = try Client.connectPlain(running.port(), 10_000);
            defer client.close();
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 400), response.status);
            try testing.expect(std.mem.find(u8, response.body, "HTTPS") != null);
            try testing.expect(try client.isClosed());
        }
        {
            var client = try Client.connectPlain(running.port(), 10_000);
            defer client.close();
            // A handshake record whose body is not a ClientHello.
            try client.send("\x16\x03\x01\x00\x05hello");
            const alert = try client.readToEnd(testing.allocator);
            defer testing.allocator.free(alert);
            try testing.expect(alert.len >= 7);
            try testing.expectEqual(@as(u8, 21), alert[0]); // an alert record
            try testing.expectEqual(@as(u8, 2), alert[5]); // fatal
        }
        var client = try Client.connectPlain(running.port(), 10_000);
        defer client.close();
        try client.startTls(null);
        try client.send("GET /after HTTP/1.1\r\nHost: a\r\n\r\n");
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqualStrings("hello over /after", response.body);
    }
}

test "1000 handshakes that stall are closed at tls_handshake_timeout_ms; a real client keeps its p99 under 100 ms" {
    for (usable(&engines)) |kind| {
        errdefer std.debug.print("engine {t}\n", .{kind});
        // The thread engines hold a thread per connection: a few stalls show the deadline.
        const stalls: usize = switch (kind) {
            .blocking => 1,
            .thread_per_connection, .worker_pool => 20,
            .epoll, .io_uring => 1000,
        };
        const running = try Running.start(kind, .{ .tls_handshake_timeout_ms = 1000, .pool_threads = 32 });
        defer running.stop();
        var stalled: [1000]linux.fd_t = undefined;
        var open: usize = 0;
        defer for (stalled[0..open]) |fd| {
            _ = linux.close(fd);
        };
        const start = nowUs();
        for (stalled[0..stalls], 0..) |*fd, i| {
            var c = try Client.connectPlain(running.port(), 5_000);
            fd.* = c.fd;
            open += 1;
            // Half send a truncated ClientHello, half nothing at all.
            if (i % 2 == 0) try c.send("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
        }
        if (kind != .blocking) {
            // While they stall: requests, each on a new connection (a full handshake).
            var latencies: [20]u64 = undefined;
            for (&latencies) |*latency| {
                const begin = nowUs();
                var client = try Client.connectPlain(running.port(), 5_000);
                defer client.close();
                try client.startTls(null);
                try client.send("GET /live HTTP/1.1\r\nHost: a\r\n\r\n");
                const response = try client.readResponse(testing.allocator, .{});
                defer response.deinit(testing.allocator);
                try testing.expectEqualStrings("hello over /live", response.body);
                latency.* = nowUs() - begin;
            }
            std.mem.sort(u64, &latencies, {}, std.sort.asc(u64));
            const p99 = latencies[latencies.len - 1];
            errdefer std.debug.print("p99 {d} us\n", .{p99});
            try testing.expect(p99 < 100_000);
        }
        for (stalled[0..stalls]) |fd| {
            var c: Client = .{ .fd = fd };
            try testing.expect(try c.isClosed());
        }
        const elapsed_ms = (nowUs() - start) / 1000;
        try testing.expect(elapsed_ms >= 900);
        try testing.expect(elapsed_ms < 6_000);
    }
}

test "req.tls(): version, cipher, SNI name and ALPN of the request's connection" {
    const running = try Running.start(.epoll, .{});
    defer running.stop();
    var client = try Client.connectPlain(running.port(), 10_000);
    defer client.close();
    try client.startTls("localhost");
    try client.send("GET /tls HTTP/1.1\r\nHost: a\r\n\r\n");
    const response = try client.readResponse(testing.allocator, .{});
    defer response.deinit(testing.allocator);
    try testing.expectEqualStrings("TLSv1.3 TLS_AES_128_GCM_SHA256 sni=localhost alpn=- resumed=false", response.body);
}

/// The subject of the certificate the server presented on `client`'s connection.
/// One request on a new connection to `port`, over TLS or not; the body, in `buffer`.
fn bodyOf(port: u16, over_tls: bool, path: []const u8, buffer: []u8) ![]const u8 {
    var client = try Client.connectPlain(port, 10_000);
    defer client.close();
    if (over_tls) try client.startTls(null);
    var request: [128]u8 = undefined;
    // Twice on one connection: keep-alive works on every listener.
    for (0..2) |_| try client.send(try std.mem.print(&request, "GET {s} HTTP/1.1\r\nHost: a\r\n\r\n", .{path}));
    var body: []const u8 = "";
    for (0..2) |_| {
        const response = try client.readResponse(testing.allocator, .{});
        defer response.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 200), response.status);
        @memcpy(buffer[0..response.body.len], response.body);
        body = buffer[0..response.body.len];
    }
    return body;
}

test "one server on a plaintext and two TLS listeners, each with its certificate, on every engine" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    var paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    const certificates = [_]saker.Config.Certificate{try writeCertificate(dir_path, "second.test", -60, 3600, &paths)};
    const listeners = [_]saker.Config.Listener{
        .{ .host = "127.0.0.1", .port = 0, .tls = .{ .self_signed = true } },
        .{ .host = "127.0.0.1", .port = 0, .tls = .{ .certificates = &certificates } },
    };
    for (usable(&engines)) |kind| {
        const running = try Running.start(kind, .{ .listeners = &listeners });
        defer running.stop();
        const server = &running.server;
        const plain = server.listenerPort(0);
        const https = [_]u16{ server.listenerPort(1), server.listenerPort(2) };
        try testing.expect(plain != https[0] and plain != https[1] and https[0] != https[1]);
        var buffer: [256]u8 = undefined;
        try testing.expectEqualStrings("plaintext", try bodyOf(plain, false, "/tls", &buffer));
        for (https) |port| try testing.expect(std.mem.startsWith(u8, try bodyOf(port, true, "/tls", &buffer), "TLSv1.3 "));
        // Each TLS listener shows its own certificate.
        try testing.expect(std.mem.find(u8, try subjectOfNewConnection(https[0], &buffer), "CN=localhost") != null);
        try testing.expect(std.mem.find(u8, try subjectOfNewConnection(https[1], &buffer), "CN=second.test") != null);
        // Plaintext HTTP on a TLS listener is refused in plaintext, as on a TLS-only server.
        const refused = try Client.fetchPlain(testing.allocator, https[0], "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        defer refused.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 400), refused.status);
        // Every listener has workers of its own, numbered below `workerCountFor`.
        const count = saker.Server(Hello).workerCountFor(&server.config);
        for ([_]u16{ plain, https[0], https[1] }, [_]bool{ false, true, true }) |port, over_tls| {
            const index = try std.fmt.parseInt(u32, try bodyOf(port, over_tls, "/worker", &buffer), 10);
            try testing.expect(index < count);
        }
    }
}

test "over connections_max, a plaintext listener answers 503 and a TLS listener of the same server closes" {
    const listeners = [_]saker.Config.Listener{.{ .host = "127.0.0.1", .port = 0, .tls = .{ .self_signed = true } }};
    for (usable(&[_]saker.engine.Kind{ .epoll, .io_uring, .worker_pool, .thread_per_connection })) |kind| {
        const running = try Running.start(kind, .{ .listeners = &listeners, .connections_max = 1 });
        defer running.stop();
        // The one connection allowed, held open.
        var held = try Client.connectPlain(running.server.listenerPort(0), 10_000);
        defer held.close();
        try held.send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n");
        const first = try held.readResponse(testing.allocator, .{});
        defer first.deinit(testing.allocator);
        try testing.expectEqual(@as(u16, 200), first.status);
        {
            const response = try Client.fetchPlain(testing.allocator, running.server.listenerPort(0), "GET /b HTTP/1.1\r\nHost: a\r\n\r\n");
            defer response.deinit(testing.allocator);
            try testing.expectEqual(@as(u16, 503), response.status);
        }
        var client = try Client.connectPlain(running.server.listenerPort(1), 10_000);
        defer client.close();
        const bytes = try client.readToEnd(testing.allocator);
        defer testing.allocator.free(bytes);
        try testing.expectEqual(@as(usize, 0), bytes.len); // the FIN alone: no plaintext 503
    }
}

fn peerSubject(client: *Client, buffer: []u8) ![]const u8 {
    const certificate = ssl.SSL_get1_peer_certificate(client.tls.?) orelse return error.NoCertificate;
    defer ssl.X509_free(certificate);
    const text = ssl.X509_NAME_oneline(ssl.X509_get_subject_name(certificate), buffer.ptr, @intCast(buffer.len)) orelse return error.NoCertificate;
    return std.mem.span(text);
}

/// One request on a new TLS connection; returns the subject of the certificate it got.
fn subjectOfNewConnection(port: u16, buffer: []u8) ![]const u8 {
    var client = try Client.connectPlain(port, 10_000);
    defer client.close();
    try client.startTls(null);
    try client.send("GET /s HTTP/1.1\r\nHost: a\r\n\r\n");
    const response = try client.readResponse(testing.allocator, .{});
    defer response.deinit(testing.allocator);
    // The test handler answers it; `saker serve` has no such file.
    try testing.expect(response.status == 200 or response.status == 404);
    return peerSubject(&client, buffer);
}

/// A certificate's files at fixed paths (live.crt, live.key in a test's directory), as a
/// server is configured with them and an operator replaces them.
const LiveFiles = struct {
    dir_buffer: [std.fs.max_path_bytes]u8,
    dir_len: usize,
    chain: [std.fs.max_path_bytes]u8,
    key: [std.fs.max_path_bytes]u8,

    /// The files, holding a certificate for `name`.
    fn init(files: *LiveFiles, parent: std.Io.Dir, name: []const u8) !saker.Config.Certificate {
        files.dir_len = try parent.realPath(testing.io, &files.dir_buffer);
        const live: saker.Config.Certificate = .{
            .chain_file = try std.mem.print(&files.chain, "{s}/live.crt", .{files.dir()}),
            .key_file = try std.mem.print(&files.key, "{s}/live.key", .{files.dir()}),
        };
        try install(files.dir(), name, live);
        return live;
    }

    fn dir(files: *const LiveFiles) []const u8 {
        return files.dir_buffer[0..files.dir_len];
    }
};

/// Makes `name`'s certificate the one at `live` (chain, key), replacing the files whole.
fn install(dir: []const u8, name: []const u8, live: saker.Config.Certificate) !void {
    var paths: [2][std.fs.max_path_bytes:0]u8 = undefined;
    const made = try writeCertificate(dir, name, -60, 3600, &paths);
    try std.Io.Dir.renameAbsolute(made.chain_file, live.chain_file, testing.io);
    try std.Io.Dir.renameAbsolute(made.key_file, live.key_file, testing.io);
}

test "reload under load: no request fails, and new connections get the new certificate" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var files: LiveFiles = undefined;
    const live = try files.init(dir.dir, "one.test");
    const dir_path = files.dir();
    const certificates = [_]saker.Config.Certificate{live};
    const running = try Running.start(.epoll, .{ .tls = .{ .certificates = &certificates } });
    defer running.stop();
    var subject: [256]u8 = undefined;
    try testing.expectEqualStrings("/CN=one.test", try subjectOfNewConnection(running.port(), &subject));

    const Load = struct {
        port: u16,
        stop: std.atomic.Value(bool) = .init(false),
        served: usize = 0,
        failed: usize = 0,

        fn run(load: *@This()) void {
            // Keep-alive connections and new ones, both through the reloads.
            var kept = Client.connectPlain(load.port, 10_000) catch return load.fail();
            defer kept.close();
            kept.startTls(null) catch return load.fail();
            while (!load.stop.load(.acquire)) {
                load.one(&kept) catch load.fail();
                var fresh = Client.connectPlain(load.port, 10_000) catch {
                    load.fail();
                    continue;
                };
                defer fresh.close();
                fresh.startTls(null) catch load.fail();
                load.one(&fresh) catch load.fail();
            }
        }

        fn one(load: *@This(), client: *Client) !void {
            try client.send("GET /load HTTP/1.1\r\nHost: a\r\n\r\n");
            const response = try client.readResponse(testing.allocator, .{});
            defer response.deinit(testing.allocator);
            if (!std.mem.eql(u8, response.body, "hello over /load")) return error.WrongBody;
            load.served += 1;
        }

        fn fail(load: *@This()) void {
            load.failed += 1;
        }
    };
    var load: Load = .{ .port = running.port() };
    const thread = try std.Thread.spawn(.{}, Load.run, .{&load});
    for (0..6) |i| {
        sleepMs(60);
        try install(dir_path, if (i % 2 == 0) "two.test" else "one.test", live);
        try running.server.reload();
    }
    sleepMs(60);
    load.stop.store(true, .release);
    thread.join();
    try testing.expectEqual(@as(usize, 0), load.failed);
    try testing.expect(load.served > 20);
    // The last reload installed one.test again; the one before, two.test.
    try testing.expectEqualStrings("/CN=one.test", try subjectOfNewConnection(running.port(), &subject));
    try install(dir_path, "two.test", live);
    try running.server.reload();
    try testing.expectEqualStrings("/CN=two.test", try subjectOfNewConnection(running.port(), &subject));
}

/// `saker serve` with `args`, and the first `lines` lines it printed.
const Cli = struct {
    child: std.process.Child,
    reader: std.Io.File.Reader,
    buffer: [4096]u8,

    fn start(cli: *Cli, args: []const []const u8) !void {
        var argv: [24][]const u8 = undefined;
        argv[0] = build_options.saker_exe;
        argv[1] = "serve";
        @memcpy(argv[2..][0..args.len], args);
        cli.child = try std.process.spawn(testing.io, .{ .argv = argv[0 .. 2 + args.len], .stdout = .pipe, .stderr = .pipe });
        cli.reader = cli.child.stdout.?.readerStreaming(testing.io, &cli.buffer);
    }

    fn line(cli: *Cli) ![]const u8 {
        return std.mem.trimEnd(u8, try cli.reader.interface.takeDelimiterInclusive('\n'), "\n");
    }

    /// The port of a `listening on SCHEME://127.0.0.1:PORT[ (note)]` line.
    fn port(text: []const u8, scheme: []const u8) !u16 {
        var prefix_buffer: [64]u8 = undefined;
        const prefix = try std.mem.print(&prefix_buffer, "listening on {s}://127.0.0.1:", .{scheme});
        if (!std.mem.startsWith(u8, text, prefix)) return error.UnexpectedLine;
        const rest = text[prefix.len..];
        const end = std.mem.findScalar(u8, rest, ' ') orelse rest.len;
        return std.fmt.parseInt(u16, rest[0..end], 10);
    }

    /// SIGINT; the exit status, and what it wrote on stderr (owned by the caller).
    fn stop(cli: *Cli, stderr_text: *[]u8) !std.process.Child.Term {
        _ = linux.kill(cli.child.id.?, linux.SIG.INT);
        _ = try cli.reader.interface.discardRemaining();
        var buffer: [4096]u8 = undefined;
        var stderr = cli.child.stderr.?.readerStreaming(testing.io, &buffer);
        stderr_text.* = try stderr.interface.allocRemaining(testing.allocator, .limited(1 << 20));
        return cli.child.wait(testing.io);
    }
};

test "saker serve: SIGHUP reloads the certificate; a broken file keeps the one in use" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var files: LiveFiles = undefined;
    const live = try files.init(dir.dir, "one.test");
    const dir_path = files.dir();
    var cli: Cli = undefined;
    try cli.start(&.{ dir_path, "--port", "0", "--workers", "1", "--access-log", "off", "--tls-cert", live.chain_file, "--tls-key", live.key_file });
    var stopped = false;
    defer if (!stopped) cli.child.kill(testing.io);
    const port = try Cli.port(try cli.line(), "https");
    var subject: [256]u8 = undefined;
    try testing.expectEqualStrings("/CN=one.test", try subjectOfNewConnection(port, &subject));

    // A broken certificate file: the reload fails, the certificate in use stays.
    try dir.dir.writeFile(testing.io, .{ .sub_path = "live.crt", .data = "not a certificate\n" });
    _ = linux.kill(cli.child.id.?, linux.SIG.HUP);
    sleepMs(200);
    try testing.expectEqualStrings("/CN=one.test", try subjectOfNewConnection(port, &subject));

    try install(dir_path, "two.test", live);
    _ = linux.kill(cli.child.id.?, linux.SIG.HUP);
    const deadline = nowUs() + 5_000_000;
    while (!std.mem.eql(u8, try subjectOfNewConnection(port, &subject), "/CN=two.test")) {
        if (nowUs() > deadline) return error.NotReloaded;
        sleepMs(20);
    }
    stopped = true;
    var log: []u8 = &.{};
    defer testing.allocator.free(log);
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try cli.stop(&log));
    try testing.expect(std.mem.find(u8, log, "live.crt") != null);
    try testing.expect(std.mem.find(u8, log, "TLS reload failed; the certificates in use stay") != null);
    try testing.expect(std.mem.find(u8, log, "TLS certificates reloaded") != null);
}

test "saker serve --redirect-http: plaintext requests get 308 to their https:// URL" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    try dir.dir.writeFile(testing.io, .{ .sub_path = "a.txt", .data = "over https\n" });
    var cli: Cli = undefined;
    try cli.start(&.{ dir_path, "--port", "0", "--tls-self-signed", "--redirect-http", "0", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) cli.child.kill(testing.io);
    const https_port = try Cli.port(try cli.line(), "https");
    var redirect_line: []const u8 = try cli.line();
    while (std.mem.startsWith(u8, redirect_line, "  ")) redirect_line = try cli.line(); // the certificate's lines
    try testing.expect(std.mem.endsWith(u8, redirect_line, " (redirects to https)"));
    const redirect_port = try Cli.port(redirect_line, "http");
    const response = try Client.fetchPlain(testing.allocator, redirect_port, "POST /a.txt?x=1 HTTP/1.1\r\nHost: localhost:1234\r\nContent-Length: 0\r\n\r\n");
    defer response.deinit(testing.allocator);
    try testing.expectEqual(@as(u16, 308), response.status);
    var expected: [64]u8 = undefined;
    try testing.expectEqualStrings(try std.mem.print(&expected, "https://localhost:{d}/a.txt?x=1", .{https_port}), response.header("Location").?);
    var url: [64]u8 = undefined;
    const result = run(&.{ "curl", "--silent", "--insecure", "--location", try std.mem.print(&url, "http://127.0.0.1:{d}/a.txt", .{redirect_port}) }, null) catch |err| return skipWithout("curl", err);
    defer freeResult(result);
    try testing.expectEqualStrings("over https\n", result.stdout);
    stopped = true;
    var log: []u8 = &.{};
    defer testing.allocator.free(log);
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try cli.stop(&log));
}

test "saker serve --tls-port: one server answers plaintext on --port and HTTPS on the other port" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0..try dir.dir.realPath(testing.io, &path_buffer)];
    try dir.dir.writeFile(testing.io, .{ .sub_path = "a.txt", .data = "either way\n" });
    var cli: Cli = undefined;
    try cli.start(&.{ dir_path, "--port", "0", "--tls-port", "0", "--tls-self-signed", "--access-log", "off" });
    var stopped = false;
    defer if (!stopped) cli.child.kill(testing.io);
    const http_port = try Cli.port(try cli.line(), "http");
    const https_port = try Cli.port(try cli.line(), "https");
    try testing.expect(http_port != https_port);
    var url: [2][64]u8 = undefined;
    const result = run(&.{
        "curl",                                                                 "--silent",                                                               "--show-error", "--insecure",
        try std.mem.print(&url[0], "http://127.0.0.1:{d}/a.txt", .{http_port}), try std.mem.print(&url[1], "https://127.0.0.1:{d}/a.txt", .{https_port}),
    }, null) catch |err| return skipWithout("curl", err);
    defer freeResult(result);
    try testing.expectEqualStrings("either way\neither way\n", result.stdout);
    stopped = true;
    var log: []u8 = &.{};
    defer testing.allocator.free(log);
    try testing.expectEqual(std.process.Child.Term{ .exited = 0 }, try cli.stop(&log));

    // Without certificates, the flag is refused with a reason.
    const refused = try run(&.{ build_options.saker_exe, "serve", dir_path, "--tls-port", "0" }, null);
    defer freeResult(refused);
    try testing.expectEqual(std.process.Child.Term{ .exited = 2 }, refused.term);
    try testing.expect(std.mem.find(u8, refused.stderr, "--tls-port needs") != null);
}
