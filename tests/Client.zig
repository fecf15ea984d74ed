//! A deliberately small HTTP/1.1 test client over a blocking loopback socket: send raw bytes,
//! read responses (Content-Length, chunked or until close), check for a close. Every read has
//! a timeout, so a server bug fails a test instead of hanging it. The suite's transport
//! (`SAKER_TEST_TRANSPORT`) may put TLS under those bytes (`overTls`), or carry them over
//! HTTP/2 (`overH2c`, tests/H2c.zig).
const std = @import("std");
const linux = std.os.linux;
const posix = std.posix;

const ssl = @import("saker").tls.openssl;
const H2c = @import("H2c.zig");

const Client = @This();

fd: linux.fd_t,
/// The TLS session when the suite runs over TLS (`overTls`): every send and read goes
/// through it.
tls: ?*ssl.SSL = null,
/// The HTTP/2 connection when the suite runs over h2c (`overH2c`): the bytes the test sends
/// and reads are HTTP/1.1, carried as streams.
h2: ?*H2c = null,
/// Bytes read but not yet consumed.
buffer: [64 * 1024]u8 = undefined,
start: usize = 0,
end: usize = 0,
/// Bytes read from the socket so far.
received_total: usize = 0,

pub const Error = error{ ConnectFailed, SendFailed, ReadFailed, Timeout, Closed, BadResponse, OutOfMemory };

/// A parsed response; `raw_head` and `body` are owned by the caller (free with `deinit`).
pub const Response = struct {
    status: u16,
    raw_head: []u8,
    body: []u8,
    chunked: bool,

    pub fn deinit(response: Response, gpa: std.mem.Allocator) void {
        gpa.free(response.raw_head);
        gpa.free(response.body);
    }

    /// The value of header `name` (case-insensitive), or null.
    pub fn header(response: Response, name: []const u8) ?[]const u8 {
        var lines = std.mem.splitSequence(u8, response.raw_head, "\r\n");
        _ = lines.next();
        while (lines.next()) |line| {
            const colon = std.mem.findScalar(u8, line, ':') orelse continue;
            if (std.ascii.eqlIgnoreCase(line[0..colon], name)) return std.mem.trim(u8, line[colon + 1 ..], " \t");
        }
        return null;
    }
};

/// What `SAKER_TEST_TRANSPORT` in the environment asks for (the build's later runs of the
/// integration suites set it).
const Transport = enum { plaintext, tls, h2c };

fn suiteTransport() Transport {
    const Static = struct {
        var mode: ?Transport = null;
    };
    if (Static.mode) |mode| return mode;
    const value = std.c.getenv("SAKER_TEST_TRANSPORT");
    const mode: Transport = if (value == null) .plaintext else std.meta.stringToEnum(Transport, std.mem.span(value.?)) orelse .plaintext;
    Static.mode = mode;
    return mode;
}

/// Whether the suite runs over TLS: `SAKER_TEST_TRANSPORT=tls`. Servers the suite starts
/// then serve HTTPS with a self-signed certificate, and `connect` speaks TLS to them.
pub fn overTls() bool {
    if (plaintext_server) return false;
    return suiteTransport() == .tls;
}

/// Whether the suite runs over HTTP/2: `SAKER_TEST_TRANSPORT=h2c`. `connect` then opens h2c
/// connections (prior knowledge, on the port that serves HTTP/1.1 too), and the requests
/// the tests write travel as HTTP/2 streams.
pub fn overH2c() bool {
    return suiteTransport() == .h2c;
}

/// The protocol version the server sees in the suite's requests (as its access log says it).
pub fn httpVersion() []const u8 {
    return if (overH2c()) "HTTP/2.0" else "HTTP/1.1";
}

/// For a test of HTTP/1.1's own framing or connection handling, which has no HTTP/2 form:
/// skips it when the suite runs over h2c, saying so on a `skipped:` line.
pub fn http1Only() error{SkipZigTest}!void {
    return notOverH2c("the tests of HTTP/1.1's own framing and connection handling (they run over plaintext and TLS)");
}

/// Skips a test when the suite runs over h2c, saying why (`what`: the tests, and why) on a
/// `skipped:` line.
pub fn notOverH2c(comptime what: []const u8) error{SkipZigTest}!void {
    if (!overH2c()) return;
    std.debug.print("skipped: over h2c, " ++ what ++ "\n", .{});
    return error.SkipZigTest;
}

/// Whether the server the running test started last is a process of its own (an example, or
/// `saker serve`), which serves plaintext whatever the suite's transport. Tests run one at a
/// time, each starting its servers before connecting to them.
var plaintext_server = false;

/// The test started a server process: clients connect to it in plaintext.
pub fn plaintextServer() void {
    plaintext_server = true;
}

/// `config` with the suite's transport applied (for a server the test runs in-process).
pub fn transport(config: anytype) @TypeOf(config) {
    plaintext_server = false;
    var c = config;
    if (overTls() and c.tls == null) c.tls = .{ .self_signed = true };
    return c;
}

/// Connects to 127.0.0.1:`port` with a receive timeout of `timeout_ms`, over TLS or h2c
/// when the suite runs over them.
pub fn connect(port: u16, timeout_ms: u32) Error!Client {
    var client = try connectPlain(port, timeout_ms);
    errdefer client.close();
    if (overTls()) try client.startTls(null);
    if (overH2c()) client.h2 = try H2c.create(&client);
    return client;
}

/// The TLS context of the suite's clients: TLS 1.2 and 1.3, and no verification (the
/// servers' certificates are self-signed).
fn clientContext() Error!*ssl.SSL_CTX {
    const Static = struct {
        var ctx: ?*ssl.SSL_CTX = null;
        var mutex: std.atomic.Mutex = .unlocked;
    };
    while (!Static.mutex.tryLock()) std.atomic.spinLoopHint();
    defer Static.mutex.unlock();
    if (Static.ctx) |ctx| return ctx;
    _ = ssl.OPENSSL_init_ssl(0, null);
    const ctx = ssl.SSL_CTX_new(ssl.TLS_client_method()) orelse return error.ConnectFailed;
    // A server may close without close_notify (as after an error response): that is the end
    // of the stream, as in plaintext.
    _ = ssl.SSL_CTX_set_options(ctx, ssl.SSL_OP_IGNORE_UNEXPECTED_EOF);
    Static.ctx = ctx;
    return ctx;
}

/// Makes the connection TLS (`server_name` for SNI). The handshake happens with the first
/// send or read, as a browser's does with its first request: a test holding many unused
/// connections to a server that serves one at a time (`blocking`) does not wait for it.
pub fn startTls(client: *Client, server_name: ?[*:0]const u8) Error!void {
    const connection = ssl.SSL_new(try clientContext()) orelse return error.ConnectFailed;
    errdefer ssl.SSL_free(connection);
    if (ssl.SSL_set_fd(connection, client.fd) != 1) return error.ConnectFailed;
    if (server_name) |name| _ = ssl.SSL_ctrl(connection, ssl.SSL_CTRL_SET_TLSEXT_HOSTNAME, ssl.TLSEXT_NAMETYPE_host_name, @constCast(name));
    ssl.SSL_set_connect_state(connection);
    client.tls = connection;
}

/// Completes the TLS handshake now rather than with the first send or read.
pub fn handshake(client: *Client) Error!void {
    const connection = client.tls orelse return;
    while (true) {
        const rc = ssl.SSL_do_handshake(connection);
        if (rc == 1) return;
        switch (failure(connection, rc, "handshake")) {
            .retry => continue,
            .timeout => return error.Timeout,
            .closed, .failed => return error.ConnectFailed,
        }
    }
}

/// What a failed SSL call on the client's blocking socket came to.
const Failure = enum { retry, timeout, closed, failed };

fn failure(connection: *ssl.SSL, rc: c_int, what: []const u8) Failure {
    const code = ssl.SSL_get_error(connection, rc);
    const errno = std.c._errno().*;
    defer ssl.ERR_clear_error();
    return switch (code) {
        ssl.SSL_ERROR_ZERO_RETURN => .closed,
        // A blocking socket reports WANT_* when a signal interrupted it (retry) or its
        // SO_RCVTIMEO/SO_SNDTIMEO passed.
        ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_WANT_WRITE => if (errno == @backingInt(linux.E.INTR)) .retry else .timeout,
        ssl.SSL_ERROR_SYSCALL => if (errno == @backingInt(linux.E.INTR))
            .retry
        else if (errno == @backingInt(linux.E.AGAIN))
            .timeout
        else
            .closed, // EOF or a reset, as for plaintext
        else => {
            var buffer: [256]u8 = undefined;
            std.debug.print("Client: TLS {s} failed: {s}\n", .{ what, ssl.lastError(&buffer, "?") });
            return .failed;
        },
    };
}

/// A free loopback port: bound, read back, released (for a program that needs a port given,
/// such as HAProxy or `systemd-socket-activate`). Another process could take it in between.
pub fn freePort() !u16 {
    const rc = linux.socket(linux.AF.INET, linux.SOCK.STREAM | linux.SOCK.CLOEXEC, 0);
    if (linux.errno(rc) != .SUCCESS) return error.NoSocket;
    const fd: linux.fd_t = @intCast(rc);
    defer _ = linux.close(fd);
    var address: linux.sockaddr.in = .{ .port = 0, .addr = std.mem.nativeToBig(u32, 0x7f000001) };
    if (linux.errno(linux.bind(fd, @ptrCast(&address), @sizeOf(linux.sockaddr.in))) != .SUCCESS) return error.NoPort;
    var len: linux.socklen_t = @sizeOf(linux.sockaddr.in);
    if (linux.errno(linux.getsockname(fd, @ptrCast(&address), &len)) != .SUCCESS) return error.NoPort;
    return std.mem.bigToNative(u16, address.port);
}

/// Connects to 127.0.0.1:`port` with a receive timeout of `timeout_ms`, in plaintext
/// whatever the suite's transport.
pub fn connectPlain(port: u16, timeout_ms: u32) Error!Client {
    return connectPlainFrom(null, port, timeout_ms);
}

/// `connectPlain` from the loopback address `source` (such as 127.0.0.7), so the server sees
/// another peer than 127.0.0.1.
pub fn connectPlainFrom(source: ?[4]u8, port: u16, timeout_ms: u32) Error!Client {
    const rc = linux.socket(linux.AF.INET, linux.SOCK.STREAM | linux.SOCK.CLOEXEC, 0);
    if (linux.errno(rc) != .SUCCESS) return connectFailed("socket", linux.errno(rc), port);
    const fd: linux.fd_t = @intCast(rc);
    errdefer _ = linux.close(fd);
    if (source) |bytes| {
        var local: linux.sockaddr.in = .{ .port = 0, .addr = @bitCast(bytes) };
        const bound = linux.bind(fd, @ptrCast(&local), @sizeOf(linux.sockaddr.in));
        if (linux.errno(bound) != .SUCCESS) return connectFailed("bind", linux.errno(bound), port);
    }
    const timeout: linux.timeval = .{ .sec = @intCast(timeout_ms / 1000), .usec = @intCast((timeout_ms % 1000) * 1000) };
    _ = linux.setsockopt(fd, linux.SOL.SOCKET, linux.SO.RCVTIMEO, std.mem.asBytes(&timeout), @sizeOf(linux.timeval));
    _ = linux.setsockopt(fd, linux.SOL.SOCKET, linux.SO.SNDTIMEO, std.mem.asBytes(&timeout), @sizeOf(linux.timeval));
    var address: linux.sockaddr.in = .{ .port = std.mem.nativeToBig(u16, port), .addr = std.mem.nativeToBig(u32, 0x7f000001) };
    switch (linux.errno(linux.connect(fd, @ptrCast(&address), @sizeOf(linux.sockaddr.in)))) {
        .SUCCESS => {},
        // A signal ended the wait, not the connect, which goes on in the kernel (with a send
        // timeout set, Linux reports EINTR rather than restarting): wait for its outcome.
        .INTR => try awaitConnect(fd, port, timeout_ms),
        else => |err| return connectFailed("connect", err, port),
    }
    return .{ .fd = fd };
}

fn awaitConnect(fd: linux.fd_t, port: u16, timeout_ms: u32) Error!void {
    var poll_fds = [_]linux.pollfd{.{ .fd = fd, .events = linux.POLL.OUT, .revents = 0 }};
    while (true) {
        const rc = linux.poll(&poll_fds, 1, @intCast(timeout_ms));
        switch (linux.errno(rc)) {
            .SUCCESS => if (rc == 0) return connectFailed("connect", .TIMEDOUT, port) else break,
            .INTR => continue,
            else => |err| return connectFailed("poll", err, port),
        }
    }
    var so_error: i32 = 0;
    var len: linux.socklen_t = @sizeOf(i32);
    const rc = linux.getsockopt(fd, linux.SOL.SOCKET, linux.SO.ERROR, std.mem.asBytes(&so_error), &len);
    if (linux.errno(rc) != .SUCCESS) return connectFailed("getsockopt", linux.errno(rc), port);
    if (so_error != 0) return connectFailed("connect", @fromBackingInt(@intCast(so_error)), port);
}

/// Says why a connection could not be made (no descriptors left, the timeout), so that a
/// failure names its cause. A refused port is what tests of a stopped server expect: silent.
fn connectFailed(call: []const u8, err: linux.E, port: u16) Error {
    if (err != .CONNREFUSED) std.debug.print("Client.connect to 127.0.0.1:{d}: {s}: E.{t}\n", .{ port, call, err });
    return error.ConnectFailed;
}

pub fn close(client: *Client) void {
    if (client.h2) |h2| h2.destroy();
    if (client.tls) |connection| ssl.SSL_free(connection);
    _ = linux.close(client.fd);
}

/// Sends all of `bytes`.
pub fn send(client: *Client, bytes: []const u8) Error!void {
    if (client.h2) |h2| return h2.send(client, bytes);
    return client.rawSend(bytes);
}

/// Sends all of `bytes` on the connection as they are (under TLS, if any).
pub fn rawSend(client: *Client, bytes: []const u8) Error!void {
    if (client.tls) |connection| {
        var sent: usize = 0;
        while (sent < bytes.len) {
            var written: usize = 0;
            const rc = ssl.SSL_write_ex(connection, bytes[sent..].ptr, bytes.len - sent, &written);
            if (rc == 1) {
                sent += written;
                continue;
            }
            switch (failure(connection, rc, "send")) {
                .retry => continue,
                .timeout, .closed, .failed => return error.SendFailed,
            }
        }
        return;
    }
    var sent: usize = 0;
    while (sent < bytes.len) {
        const rc = linux.sendto(client.fd, bytes[sent..].ptr, bytes.len - sent, linux.MSG.NOSIGNAL, null, 0);
        switch (linux.errno(rc)) {
            .SUCCESS => sent += rc,
            .INTR => continue,
            else => return error.SendFailed,
        }
    }
}

fn fill(client: *Client) Error!usize {
    if (client.start > 0) {
        std.mem.copyForwards(u8, client.buffer[0 .. client.end - client.start], client.buffer[client.start..client.end]);
        client.end -= client.start;
        client.start = 0;
    }
    if (client.end == client.buffer.len) return error.BadResponse;
    const n = if (client.h2) |h2|
        try h2.fill(client, client.buffer[client.end..])
    else
        try client.rawRead(client.buffer[client.end..]);
    client.end += n;
    return n;
}

/// Reads what the connection brings next into `dest` (under TLS, if any); 0 at its end.
pub fn rawRead(client: *Client, dest: []u8) Error!usize {
    if (client.tls) |connection| {
        while (true) {
            var got: usize = 0;
            const rc = ssl.SSL_read_ex(connection, dest.ptr, dest.len, &got);
            if (rc == 1) {
                client.received_total += got;
                return got;
            }
            switch (failure(connection, rc, "read")) {
                .retry => continue,
                .timeout => return error.Timeout,
                .closed => return 0,
                .failed => return error.ReadFailed,
            }
        }
    }
    while (true) {
        const rc = linux.read(client.fd, dest.ptr, dest.len);
        switch (linux.errno(rc)) {
            .SUCCESS => {
                client.received_total += rc;
                return rc;
            },
            .INTR => continue,
            .AGAIN => return error.Timeout,
            .CONNRESET => return 0,
            else => return error.ReadFailed,
        }
    }
}

fn buffered(client: *Client) []u8 {
    return client.buffer[client.start..client.end];
}

/// Reads exactly `len` bytes.
pub fn readExact(client: *Client, gpa: std.mem.Allocator, len: usize) Error![]u8 {
    const out = try gpa.alloc(u8, len);
    errdefer gpa.free(out);
    var got: usize = 0;
    while (got < len) {
        if (client.end == client.start and try client.fill() == 0) return error.Closed;
        const take = @min(len - got, client.end - client.start);
        @memcpy(out[got..][0..take], client.buffered()[0..take]);
        got += take;
        client.start += take;
    }
    return out;
}

/// Reads up to and including the next CRLF; the line is valid until the next read.
pub fn readLine(client: *Client) Error![]const u8 {
    while (true) {
        if (std.mem.find(u8, client.buffered(), "\r\n")) |i| {
            const line = client.buffered()[0 .. i + 2];
            client.start += i + 2;
            return line;
        }
        if (try client.fill() == 0) return error.Closed;
    }
}

/// Reads one response. `head_request` means the response has no body.
pub fn readResponse(client: *Client, gpa: std.mem.Allocator, options: struct { head_request: bool = false }) Error!Response {
    var head: std.ArrayList(u8) = .empty;
    errdefer head.deinit(gpa);
    while (true) {
        const line = try client.readLine();
        if (line.len == 2) break;
        try head.appendSlice(gpa, line);
    }
    const raw_head = try head.toOwnedSlice(gpa);
    errdefer gpa.free(raw_head);
    if (raw_head.len < 12 or !std.mem.startsWith(u8, raw_head, "HTTP/1.")) return error.BadResponse;
    const status = std.fmt.parseInt(u16, raw_head[9..12], 10) catch return error.BadResponse;
    var response: Response = .{ .status = status, .raw_head = raw_head, .body = &.{}, .chunked = false };
    if (options.head_request or status == 204 or status == 304 or status < 200) {
        response.body = try gpa.alloc(u8, 0);
        return response;
    }
    if (response.header("Content-Length")) |value| {
        const len = std.fmt.parseInt(usize, value, 10) catch return error.BadResponse;
        response.body = try client.readExact(gpa, len);
    } else if (response.header("Transfer-Encoding")) |_| {
        response.chunked = true;
        response.body = try client.readChunked(gpa);
    } else {
        response.body = try client.readToEnd(gpa);
    }
    return response;
}

fn readChunked(client: *Client, gpa: std.mem.Allocator) Error![]u8 {
    var body: std.ArrayList(u8) = .empty;
    errdefer body.deinit(gpa);
    while (true) {
        const line = try client.readLine();
        const size_text = std.mem.trimEnd(u8, line[0 .. std.mem.findAny(u8, line, ";\r") orelse line.len], " ");
        const size = std.fmt.parseInt(usize, size_text, 16) catch return error.BadResponse;
        if (size == 0) {
            while ((try client.readLine()).len != 2) {} // trailers
            return body.toOwnedSlice(gpa);
        }
        const data = try client.readExact(gpa, size);
        defer gpa.free(data);
        try body.appendSlice(gpa, data);
        if (!std.mem.eql(u8, try client.readLine(), "\r\n")) return error.BadResponse;
    }
}

/// Reads until the server closes.
pub fn readToEnd(client: *Client, gpa: std.mem.Allocator) Error![]u8 {
    var all: std.ArrayList(u8) = .empty;
    errdefer all.deinit(gpa);
    while (true) {
        try all.appendSlice(gpa, client.buffered());
        client.start = client.end;
        if (try client.fill() == 0) return all.toOwnedSlice(gpa);
    }
}

/// Waits up to `timeout_ms` for response bytes (or the end of the connection); true when
/// there are some. Over TLS, records that carry no response bytes (session tickets) are
/// taken and do not count, so this works where a poll of the socket would not.
pub fn waitForData(client: *Client, timeout_ms: u32) bool {
    const deadline = nowMs() + timeout_ms;
    while (true) {
        if (client.end > client.start) return true;
        if (client.h2) |h2| if (h2.hasResponseBytes()) return true;
        const now = nowMs();
        const left: i32 = @intCast(@min(deadline -| now, std.math.maxInt(i32)));
        var fds = [_]linux.pollfd{.{ .fd = client.fd, .events = linux.POLL.IN, .revents = 0 }};
        const rc = linux.poll(&fds, 1, left);
        if (linux.errno(rc) == .INTR) continue;
        if (rc == 0) return false;
        if (client.h2) |h2| {
            // Frames arrived: they may carry no response bytes (SETTINGS, WINDOW_UPDATE).
            h2.readFrames(client) catch return true; // a read says what went wrong
            continue;
        }
        const connection = client.tls orelse return true;
        // Something arrived: read it without blocking, then look again.
        const flags = linux.fcntl(client.fd, linux.F.GETFL, 0);
        _ = linux.fcntl(client.fd, linux.F.SETFL, flags | @as(usize, @as(u32, @bitCast(linux.O{ .NONBLOCK = true }))));
        defer _ = linux.fcntl(client.fd, linux.F.SETFL, flags);
        if (client.start > 0) {
            std.mem.copyForwards(u8, client.buffer[0 .. client.end - client.start], client.buffer[client.start..client.end]);
            client.end -= client.start;
            client.start = 0;
        }
        var got: usize = 0;
        const read = ssl.SSL_read_ex(connection, client.buffer[client.end..].ptr, client.buffer.len - client.end, &got);
        if (read == 1) {
            client.end += got;
            client.received_total += got;
            return true;
        }
        const code = ssl.SSL_get_error(connection, read);
        ssl.ERR_clear_error();
        if (code != ssl.SSL_ERROR_WANT_READ) return true; // the end, or an error: a read says which
        if (nowMs() >= deadline) return false;
    }
}

fn nowMs() u64 {
    var now: linux.timespec = undefined;
    _ = linux.clock_gettime(.MONOTONIC, &now);
    return @as(u64, @intCast(now.sec)) * 1000 + @as(u64, @intCast(now.nsec)) / std.time.ns_per_ms;
}

/// Reads what the next read brings (at least one byte; 0 at the end), for tests that look at
/// raw response bytes as they arrive.
pub fn readSome(client: *Client, buffer: []u8) Error!usize {
    if (client.end == client.start and try client.fill() == 0) return 0;
    const n = @min(buffer.len, client.end - client.start);
    @memcpy(buffer[0..n], client.buffered()[0..n]);
    client.start += n;
    return n;
}

/// Whether the connection behaves as it must after an error response: over HTTP/1.1 the
/// server closes it (its framing may be lost); over HTTP/2 only the stream ended, and the
/// connection still serves (a HEAD of "/", answered whatever its status).
pub fn servesAsAfterError(client: *Client) Error!bool {
    const h2 = client.h2 orelse return client.isClosed();
    // The refused request's body is not coming (HTTP/1.1 would have closed).
    h2.outgoing = null;
    try client.send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    const response = try client.readResponse(std.heap.smp_allocator, .{ .head_request = true });
    response.deinit(std.heap.smp_allocator);
    return response.status >= 200;
}

/// Whether the server closed the connection (EOF or reset, with nothing more to read).
pub fn isClosed(client: *Client) Error!bool {
    if (client.end > client.start) return false;
    return try client.fill() == 0;
}

/// One request, one response, on a new plaintext connection whatever the suite's transport.
pub fn fetchPlain(gpa: std.mem.Allocator, port: u16, request: []const u8) Error!Response {
    var client = try connectPlain(port, 10_000);
    defer client.close();
    try client.send(request);
    return client.readResponse(gpa, .{});
}

/// One request, one response, on a new connection.
pub fn fetch(gpa: std.mem.Allocator, port: u16, request: []const u8) Error!Response {
    var client = try connect(port, 10_000);
    defer client.close();
    try client.send(request);
    return client.readResponse(gpa, .{});
}
