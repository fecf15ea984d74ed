//! The socket syscalls engines make, each with its own error set and every errno mapped:
//! errors a peer or the system can cause are named, errors only a bug in saker can cause are
//! `unreachable`, and anything else is `Unexpected` (logged once here with its errno).
const std = @import("std");
const linux = std.os.linux;
const posix = std.posix;
const assert = std.debug.assert;

const log = std.log.scoped(.saker);

pub const fd_t = linux.fd_t;

/// Logs an errno saker has no name for and returns `error.Unexpected`.
pub fn unexpected(operation: []const u8, err: linux.E) error{Unexpected} {
    log.warn("{s}: unexpected E.{t} ({d})", .{ operation, err, @backingInt(err) });
    return error.Unexpected;
}

/// Why a listener could not be created.
pub const ListenError = error{
    /// `host` is not an IPv4 or IPv6 literal.
    InvalidAddress,
    /// Another socket holds the port: `checkPortFree` found a listener (also one with
    /// SO_REUSEPORT, such as another server), or bind found one without SO_REUSEPORT.
    AddressInUse,
    /// The address is not one of this machine's.
    AddressNotAvailable,
    /// A privileged port without the privilege.
    AccessDenied,
    /// Out of file descriptors or kernel memory.
    SystemResources,
    Unexpected,
};

/// A listening TCP socket and the port it is bound to.
pub const Listener = struct {
    fd: fd_t,
    port: u16,

    /// Closes the socket.
    pub fn close(listener: Listener) void {
        _ = linux.close(listener.fd);
    }
};

/// How to create a listener.
pub const ListenOptions = struct {
    /// An IPv4 or IPv6 literal.
    host: []const u8,
    /// 0 lets the kernel pick.
    port: u16,
    backlog: u31,
    /// Non-blocking accept (event engines).
    nonblocking: bool,
    /// SO_REUSEPORT, so each worker can own a listener on the same port.
    reuse_port: bool = true,
    /// TCP_NOTSENT_LOWAT for the connections accepted (`Config.unsent_bytes_max`); 0: unset.
    unsent_bytes_max: u32 = 0,
};

fn mapListen(operation: []const u8, rc: usize) ListenError!usize {
    return switch (linux.errno(rc)) {
        .SUCCESS => rc,
        .ADDRINUSE => error.AddressInUse,
        .ADDRNOTAVAIL => error.AddressNotAvailable,
        .ACCES, .PERM => error.AccessDenied,
        .NOBUFS, .NOMEM, .MFILE, .NFILE => error.SystemResources,
        .AFNOSUPPORT, .INVAL => error.InvalidAddress,
        else => |err| unexpected(operation, err),
    };
}

const SocketAddress = union(enum) {
    in: linux.sockaddr.in,
    in6: linux.sockaddr.in6,

    fn parse(host: []const u8, port_number: u16) error{InvalidAddress}!SocketAddress {
        const address = std.Io.net.IpAddress.parse(host, port_number) catch return error.InvalidAddress;
        return switch (address) {
            .ip4 => |ip4| .{ .in = .{
                .port = std.mem.nativeToBig(u16, port_number),
                .addr = @bitCast(ip4.bytes),
            } },
            .ip6 => |ip6| .{ .in6 = .{
                .port = std.mem.nativeToBig(u16, port_number),
                .flowinfo = 0,
                .addr = ip6.bytes,
                .scope_id = 0,
            } },
        };
    }

    fn family(address: *const SocketAddress) u32 {
        return switch (address.*) {
            .in => linux.AF.INET,
            .in6 => linux.AF.INET6,
        };
    }

    fn ptr(address: *SocketAddress) *linux.sockaddr {
        return switch (address.*) {
            .in => |*in| @ptrCast(in),
            .in6 => |*in6| @ptrCast(in6),
        };
    }

    fn len(address: *const SocketAddress) linux.socklen_t {
        return switch (address.*) {
            .in => @sizeOf(linux.sockaddr.in),
            .in6 => @sizeOf(linux.sockaddr.in6),
        };
    }

    fn port(address: *const SocketAddress) u16 {
        return switch (address.*) {
            .in => |in| std.mem.bigToNative(u16, in.port),
            .in6 => |in6| std.mem.bigToNative(u16, in6.port),
        };
    }
};

/// socket + SO_REUSEADDR (+ SO_REUSEPORT) + bind + listen; reads back the bound port.
pub fn listen(options: ListenOptions) ListenError!Listener {
    var address = try SocketAddress.parse(options.host, options.port);
    const flags: u32 = linux.SOCK.STREAM | linux.SOCK.CLOEXEC |
        (if (options.nonblocking) @as(u32, linux.SOCK.NONBLOCK) else 0);
    const fd: fd_t = @intCast(try mapListen("socket", linux.socket(address.family(), flags, linux.IPPROTO.TCP)));
    errdefer _ = linux.close(fd);
    try setOption(fd, linux.SOL.SOCKET, linux.SO.REUSEADDR, 1);
    if (options.reuse_port) try setOption(fd, linux.SOL.SOCKET, linux.SO.REUSEPORT, 1);
    if (options.unsent_bytes_max > 0) {
        const value: c_int = @intCast(@min(options.unsent_bytes_max, std.math.maxInt(c_int)));
        try setOption(fd, linux.IPPROTO.TCP, linux.TCP.NOTSENT_LOWAT, value);
    }
    _ = try mapListen("bind", linux.bind(fd, address.ptr(), address.len()));
    _ = try mapListen("listen", linux.listen(fd, options.backlog));
    var bound_len = address.len();
    _ = try mapListen("getsockname", linux.getsockname(fd, address.ptr(), &bound_len));
    return .{ .fd = fd, .port = address.port() };
}

/// Fails with `AddressInUse` when any socket already listens on `host:port`, also one that
/// set SO_REUSEPORT (another saker, say), which `listen` would silently share the port with.
/// Binds a probe socket with SO_REUSEADDR but without SO_REUSEPORT, so connections in
/// TIME_WAIT do not count; the probe is closed before returning. Asserts `port` is not 0.
pub fn checkPortFree(host: []const u8, port: u16) ListenError!void {
    assert(port != 0);
    var address = try SocketAddress.parse(host, port);
    const flags: u32 = linux.SOCK.STREAM | linux.SOCK.CLOEXEC;
    const fd: fd_t = @intCast(try mapListen("socket", linux.socket(address.family(), flags, linux.IPPROTO.TCP)));
    defer _ = linux.close(fd);
    try setOption(fd, linux.SOL.SOCKET, linux.SO.REUSEADDR, 1);
    _ = try mapListen("bind", linux.bind(fd, address.ptr(), address.len()));
}

fn setOption(fd: fd_t, level: i32, name: u32, value: c_int) ListenError!void {
    const rc = linux.setsockopt(fd, level, name, std.mem.asBytes(&value), @sizeOf(c_int));
    _ = try mapListen("setsockopt", rc);
}

/// Why accept found no connection.
pub const AcceptError = error{
    /// No pending connection (non-blocking listener).
    WouldBlock,
    /// The connection was reset before it was accepted, or the network reported an error
    /// for it (accept(2) says to retry as for EAGAIN); try the next one.
    ConnectionAborted,
    /// Out of file descriptors (EMFILE/ENFILE) or memory: back off, keep serving.
    SystemResources,
    /// The listener was shut down (server stopping).
    ListenerClosed,
    /// Interrupted by a signal.
    Interrupted,
    Unexpected,
};

/// accept4 with CLOEXEC (and NONBLOCK if asked).
pub fn accept(listener_fd: fd_t, nonblocking: bool) AcceptError!fd_t {
    return acceptPeer(listener_fd, nonblocking, null);
}

/// `accept`, also storing the client's address in `peer` when given (null if the kernel
/// reports another family).
pub fn acceptPeer(listener_fd: fd_t, nonblocking: bool, peer: ?*?std.Io.net.IpAddress) AcceptError!fd_t {
    const flags: u32 = linux.SOCK.CLOEXEC | (if (nonblocking) @as(u32, linux.SOCK.NONBLOCK) else 0);
    var storage: linux.sockaddr.in6 = undefined;
    var storage_len: linux.socklen_t = @sizeOf(linux.sockaddr.in6);
    const rc = if (peer == null)
        linux.accept4(listener_fd, null, null, flags)
    else
        linux.accept4(listener_fd, @ptrCast(&storage), &storage_len, flags);
    if (peer) |out| out.* = if (linux.errno(rc) == .SUCCESS) peerAddress(&storage, storage_len) else null;
    return switch (linux.errno(rc)) {
        .SUCCESS => @intCast(rc),
        .AGAIN => error.WouldBlock,
        .INTR => error.Interrupted,
        .CONNABORTED, .PROTO, .PERM => error.ConnectionAborted,
        // Pending network errors of the new connection (accept(2)).
        .NETDOWN, .NOPROTOOPT, .HOSTDOWN, .NONET, .HOSTUNREACH, .OPNOTSUPP, .NETUNREACH => error.ConnectionAborted,
        .MFILE, .NFILE, .NOBUFS, .NOMEM => error.SystemResources,
        .INVAL, .BADF => error.ListenerClosed,
        else => |err| unexpected("accept4", err),
    };
}

/// The address of the connected peer of `fd` (getpeername), or null when unknown.
pub fn peerName(fd: fd_t) ?std.Io.net.IpAddress {
    var storage: linux.sockaddr.in6 = undefined;
    var storage_len: linux.socklen_t = @sizeOf(linux.sockaddr.in6);
    if (linux.errno(linux.getpeername(fd, @ptrCast(&storage), &storage_len)) != .SUCCESS) return null;
    return peerAddress(&storage, storage_len);
}

fn peerAddress(storage: *const linux.sockaddr.in6, len: linux.socklen_t) ?std.Io.net.IpAddress {
    const family = @as(*const linux.sockaddr, @ptrCast(storage)).family;
    if (family == linux.AF.INET and len >= @sizeOf(linux.sockaddr.in)) {
        const in: *const linux.sockaddr.in = @ptrCast(storage);
        return .{ .ip4 = .{ .bytes = @bitCast(in.addr), .port = std.mem.bigToNative(u16, in.port) } };
    }
    if (family == linux.AF.INET6 and len >= @sizeOf(linux.sockaddr.in6)) {
        return .{ .ip6 = .{ .bytes = storage.addr, .port = std.mem.bigToNative(u16, storage.port) } };
    }
    return null;
}

/// Why the sockets passed by a service manager (`inheritedListeners`) cannot be used.
pub const InheritError = error{
    /// LISTEN_FDS is not a number, or passes more sockets than there is room for.
    InvalidListenFds,
    /// A passed descriptor is not a listening TCP socket.
    NotAListener,
};

/// The first descriptor a service manager passes (`sd_listen_fds(3)`).
pub const inherited_fd_start = 3;

/// The listening sockets a service manager passed (systemd socket activation, and
/// `systemd-socket-activate`, and a saker process upgrading to this one): when `LISTEN_PID`
/// is this process and `LISTEN_FDS` is N, descriptors 3 to 3+N-1, made close-on-exec and
/// non-blocking, in a slice of `gpa`'s (empty, and not allocated, when none were passed).
/// Only the first call of the process looks: the sockets are one server's.
/// The variables stay (the process's environment block is shared with the standard library,
/// which must not see it change): a process started later has another pid, so LISTEN_PID
/// does not name it.
pub fn inheritedListeners(gpa: std.mem.Allocator) (InheritError || error{OutOfMemory})![]fd_t {
    // The first server of the process takes them; a second one (`--metrics`, `--redirect-http`)
    // binds its own port.
    if (inherited_claimed.swap(true, .acq_rel)) return &.{};
    const pid_text = std.c.getenv("LISTEN_PID") orelse return &.{};
    const pid = std.fmt.parseInt(i32, std.mem.span(pid_text), 10) catch return &.{};
    if (pid != linux.getpid()) return &.{};
    const count_text = std.c.getenv("LISTEN_FDS") orelse return &.{};
    const count = std.fmt.parseInt(usize, std.mem.span(count_text), 10) catch return error.InvalidListenFds;
    if (count == 0) return &.{};
    if (count > inherited_max) return error.InvalidListenFds;
    const buffer = try gpa.alloc(fd_t, count);
    errdefer gpa.free(buffer);
    for (buffer, 0..) |*fd, i| {
        fd.* = @intCast(inherited_fd_start + i);
        var listening: c_int = 0;
        var len: linux.socklen_t = @sizeOf(c_int);
        if (linux.errno(linux.getsockopt(fd.*, linux.SOL.SOCKET, linux.SO.ACCEPTCONN, std.mem.asBytes(&listening), &len)) != .SUCCESS or listening == 0)
            return error.NotAListener;
        _ = linux.fcntl(fd.*, linux.F.SETFD, linux.FD_CLOEXEC);
        const flags = linux.fcntl(fd.*, linux.F.GETFL, 0);
        if (linux.errno(flags) != .SUCCESS) return error.NotAListener;
        _ = linux.fcntl(fd.*, linux.F.SETFL, flags | @as(usize, @as(u32, @bitCast(linux.O{ .NONBLOCK = true }))));
    }
    return buffer;
}

/// Most sockets taken from a service manager or an upgrading process.
pub const inherited_max = 4096;

/// Whether a server of this process already looked for inherited sockets.
var inherited_claimed: std.atomic.Value(bool) = .init(false);

/// The address a socket is bound to (getsockname), or null when unknown.
pub fn localAddress(fd: fd_t) ?std.Io.net.IpAddress {
    var storage: linux.sockaddr.in6 = undefined;
    var storage_len: linux.socklen_t = @sizeOf(linux.sockaddr.in6);
    if (linux.errno(linux.getsockname(fd, @ptrCast(&storage), &storage_len)) != .SUCCESS) return null;
    return peerAddress(&storage, storage_len);
}

/// Sets TCP_NODELAY: responses are whole when written, so Nagle's delay only adds latency.
pub fn setNoDelay(fd: fd_t) void {
    const one: c_int = 1;
    // Only fails for a non-TCP fd, which would be our bug; nothing to do about it here.
    _ = linux.setsockopt(fd, linux.IPPROTO.TCP, linux.TCP.NODELAY, std.mem.asBytes(&one), @sizeOf(c_int));
}

/// Sets or clears TCP_CORK. Engines cork while a head and its sendfile body go out (up to
/// `Config.cork_file_bytes_max`), so they leave in full segments; clearing it pushes what is
/// left at once.
pub fn setCork(fd: fd_t, on: bool) void {
    const value: c_int = @intFromBool(on);
    // Only fails for a non-TCP fd (our bug) or a dead connection (the next write says so).
    _ = linux.setsockopt(fd, linux.IPPROTO.TCP, linux.TCP.CORK, std.mem.asBytes(&value), @sizeOf(c_int));
}

/// Sets TCP_NOTSENT_LOWAT on a connection: the socket reports room to write only while fewer
/// than `bytes` sent bytes wait unsent in the kernel; 0 falls back to the system's setting
/// (`net.ipv4.tcp_notsent_lowat`, by default no limit).
pub fn setUnsentMax(fd: fd_t, bytes: u32) void {
    const value: c_int = @intCast(@min(bytes, std.math.maxInt(c_int)));
    // Only fails for a non-TCP fd (our bug) or a dead connection (the next write says so).
    _ = linux.setsockopt(fd, linux.IPPROTO.TCP, linux.TCP.NOTSENT_LOWAT, std.mem.asBytes(&value), @sizeOf(c_int));
}

/// The socket options an engine sets on a connection around a file body (sendfile):
///
/// - TCP_CORK from the head to the body's last byte, so head and body leave in full segments:
///   for bodies of at most `Config.cork_file_bytes_max` (larger bodies fill segments anyway,
///   and corking them was measured to cost more CPU), uncorked once the file has been sent;
///   and for any body of the response that ends the connection, left corked (closing or
///   shutting down the socket pushes what is left).
/// - For the response that ends the connection, TCP_NOTSENT_LOWAT back to the system's
///   setting (no limit by default) when the body is larger than `Config.unsent_bytes_max`: the
///   kernel takes the whole body in one sendfile and finishes it after the close, instead of
///   the engine waking to refill the socket every `unsent_bytes_max` bytes (see
///   `Config.unsent_bytes_max`). The connection closes after it, so it is never set back.
pub const FileSend = struct {
    corked: bool = false,
    /// The connection's last response is under way: its socket options stay as they are.
    last: bool = false,

    /// The limits that decide, from `Config`.
    pub const Limits = struct {
        cork_file_bytes_max: u64,
        unsent_bytes_max: u32,
    };

    /// Before a head is written: sets the socket up for the file of `file_len` bytes that
    /// follows it (null: none); `last` says whether the connection closes once it is sent.
    pub fn beforeHead(send: *FileSend, fd: fd_t, file_len: ?u64, last: bool, limits: Limits) void {
        const len = file_len orelse return;
        if (send.last) return;
        if (last) {
            send.last = true;
            if (limits.unsent_bytes_max > 0 and len > limits.unsent_bytes_max) setUnsentMax(fd, 0);
        } else if (len > limits.cork_file_bytes_max) return;
        if (send.corked) return;
        setCork(fd, true);
        send.corked = true;
    }

    /// After a file write: uncorks once no file is left to send, unless the connection closes
    /// now (the close pushes the last segment).
    pub fn afterFile(send: *FileSend, fd: fd_t, file_follows: bool) void {
        if (!send.corked or file_follows or send.last) return;
        setCork(fd, false);
        send.corked = false;
    }
};

/// Why a read or write on a connection failed.
pub const IoError = error{
    /// Nothing to read, or no room to write (non-blocking socket).
    WouldBlock,
    /// The peer reset the connection or it broke (ECONNRESET, EPIPE, ETIMEDOUT, ...).
    ConnectionLost,
    /// Interrupted by a signal.
    Interrupted,
    Unexpected,
};

/// Success is tested first and inline: every read and write pays for this test, only failures
/// for the mapping.
inline fn mapIo(operation: []const u8, rc: usize) IoError!usize {
    // Failures are -4095..-1; a count is never that large.
    if (rc < @as(usize, @bitCast(@as(isize, -4095)))) return rc;
    return mapFailure(operation, rc);
}

fn mapFailure(operation: []const u8, rc: usize) IoError!usize {
    @branchHint(.cold);
    return switch (linux.errno(rc)) {
        .SUCCESS => rc,
        .AGAIN => error.WouldBlock,
        .INTR => error.Interrupted,
        .CONNRESET, .PIPE, .TIMEDOUT, .HOSTUNREACH, .NETUNREACH, .NETDOWN, .CONNREFUSED, .NOTCONN => error.ConnectionLost,
        .NOMEM, .NOBUFS => error.ConnectionLost,
        else => |err| unexpected(operation, err),
    };
}

/// One read; 0 means the peer closed its side.
pub fn recv(fd: fd_t, buffer: []u8) IoError!usize {
    return mapIo("read", linux.read(fd, buffer.ptr, buffer.len));
}

/// One gathered write. SIGPIPE must be ignored (`Server` does so): a closed peer is then an
/// error, not a signal. writev is used rather than sendmsg(MSG_NOSIGNAL), which costs more
/// per call in the kernel.
pub fn writev(fd: fd_t, iovecs: []const posix.iovec_const) IoError!usize {
    const count = @min(iovecs.len, 1024); // IOV_MAX
    return mapIo("writev", linux.writev(fd, iovecs.ptr, count));
}

/// One sendfile of up to `len` bytes of `file_fd` from `offset`.
/// Reads file bytes at `offset` (a regular file: it never waits on the network); 0 at the
/// end of the file. Errors read as the end: the body cannot be completed either way.
pub fn pread(file_fd: fd_t, buffer: []u8, offset: u64) usize {
    while (true) {
        const rc = linux.pread(file_fd, buffer.ptr, buffer.len, @intCast(offset));
        switch (linux.errno(rc)) {
            .SUCCESS => return rc,
            .INTR => continue,
            else => return 0,
        }
    }
}

pub fn sendfile(fd: fd_t, file_fd: fd_t, offset: u64, len: u64) IoError!usize {
    var off: linux.off_t = @intCast(offset);
    const count: usize = @intCast(@min(len, 1 << 30));
    const rc = linux.sendfile(fd, file_fd, &off, count);
    return switch (linux.errno(rc)) {
        // EINVAL/EIO come from the file side (e.g. it shrank or is not mmap-able): the body
        // cannot be completed, so the connection is as good as lost.
        .INVAL, .IO, .OVERFLOW => error.ConnectionLost,
        else => mapIo("sendfile", rc),
    };
}

/// One read that never waits, even on a blocking socket (MSG_DONTWAIT); 0 means the peer
/// closed its side.
pub fn recvNow(fd: fd_t, buffer: []u8) IoError!usize {
    return mapIo("recv", linux.recvfrom(fd, buffer.ptr, buffer.len, linux.MSG.DONTWAIT, null, null));
}

/// One write that never waits, even on a blocking socket (MSG_DONTWAIT), and raises no
/// SIGPIPE (MSG_NOSIGNAL). For writes off the hot path, such as refusals.
pub fn sendNow(fd: fd_t, bytes: []const u8) IoError!usize {
    return mapIo("send", linux.sendto(fd, bytes.ptr, bytes.len, linux.MSG.DONTWAIT | linux.MSG.NOSIGNAL, null, 0));
}

/// Shuts down the write side (FIN) before a lingering close.
pub fn shutdownWrite(fd: fd_t) void {
    // ENOTCONN means the peer is already gone, which is what we wanted anyway.
    _ = linux.shutdown(fd, linux.SHUT.WR);
}

/// Shuts down both sides, waking a thread blocked on the socket.
pub fn shutdownBoth(fd: fd_t) void {
    _ = linux.shutdown(fd, linux.SHUT.RDWR);
}

/// Stops a listener listening: connections in its accept queue are reset, new ones are
/// refused, and a thread waiting in poll or accept on it wakes (accept then fails with
/// `ListenerClosed`). Unlike close, it works while another thread or an io_uring still holds
/// the socket.
pub fn shutdownListener(fd: fd_t) void {
    // Fails only for a socket that is not listening, which is then already what we want.
    _ = linux.shutdown(fd, linux.SHUT.RDWR);
}

/// Closes a socket.
pub fn close(fd: fd_t) void {
    _ = linux.close(fd);
}

test "listen: ephemeral port, and SO_REUSEPORT shares it" {
    const a = try listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 16, .nonblocking = true });
    defer a.close();
    try std.testing.expect(a.port != 0);
    const b = try listen(.{ .host = "127.0.0.1", .port = a.port, .backlog = 16, .nonblocking = true });
    defer b.close();
    try std.testing.expectError(error.AddressInUse, listen(.{
        .host = "127.0.0.1",
        .port = a.port,
        .backlog = 16,
        .nonblocking = true,
        .reuse_port = false,
    }));
    try std.testing.expectError(error.WouldBlock, accept(a.fd, true));
    var peer: ?std.Io.net.IpAddress = null;
    try std.testing.expectError(error.WouldBlock, acceptPeer(a.fd, true, &peer));
}

test "checkPortFree: a listener with SO_REUSEPORT, or on the wildcard address, holds the port" {
    const a = try listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 16, .nonblocking = true });
    try std.testing.expectError(error.AddressInUse, checkPortFree("127.0.0.1", a.port));
    a.close();
    try checkPortFree("127.0.0.1", a.port);
    const any = try listen(.{ .host = "0.0.0.0", .port = 0, .backlog = 16, .nonblocking = true });
    defer any.close();
    try std.testing.expectError(error.AddressInUse, checkPortFree("127.0.0.1", any.port));
    try std.testing.expectError(error.InvalidAddress, checkPortFree("localhost", 80));
}

test "checkPortFree: a connection in TIME_WAIT does not hold the port" {
    const l = try listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 16, .nonblocking = false });
    const client: fd_t = @intCast(linux.socket(linux.AF.INET, linux.SOCK.STREAM | linux.SOCK.CLOEXEC, 0));
    defer _ = linux.close(client);
    var address = try SocketAddress.parse("127.0.0.1", l.port);
    try std.testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.connect(client, address.ptr(), address.len())));
    const server_side = try accept(l.fd, false);
    l.close();
    // The server closes first, so its side of the connection ends in TIME_WAIT on the port.
    _ = linux.close(server_side);
    var byte: [1]u8 = undefined;
    try std.testing.expectEqual(@as(usize, 0), linux.read(client, &byte, 1));
    _ = linux.shutdown(client, linux.SHUT.WR);
    var fds = [_]linux.pollfd{.{ .fd = client, .events = linux.POLL.IN, .revents = 0 }};
    _ = linux.poll(&fds, 1, 100);
    try checkPortFree("127.0.0.1", l.port);
}

/// A loopback connection to a listener with a 64 KiB unsent limit: the client's end and the
/// accepted one (close both, then the listener).
fn testConnection() !struct { l: Listener, client: fd_t, accepted: fd_t } {
    const l = try listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 16, .nonblocking = false, .unsent_bytes_max = 64 * 1024 });
    errdefer l.close();
    const client: fd_t = @intCast(linux.socket(linux.AF.INET, linux.SOCK.STREAM | linux.SOCK.CLOEXEC, 0));
    errdefer _ = linux.close(client);
    var address = try SocketAddress.parse("127.0.0.1", l.port);
    try std.testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.connect(client, address.ptr(), address.len())));
    return .{ .l = l, .client = client, .accepted = try accept(l.fd, false) };
}

fn tcpOption(fd: fd_t, option: u32) !c_int {
    var value: c_int = 0;
    var len: linux.socklen_t = @sizeOf(c_int);
    try std.testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.getsockopt(fd, linux.IPPROTO.TCP, option, std.mem.asBytes(&value), &len)));
    return value;
}

test "listen: connections inherit the listener's TCP_NOTSENT_LOWAT" {
    const t = try testConnection();
    defer t.l.close();
    defer _ = linux.close(t.client);
    defer _ = linux.close(t.accepted);
    try std.testing.expectEqual(@as(c_int, 64 * 1024), try tcpOption(t.accepted, linux.TCP.NOTSENT_LOWAT));
}

test "FileSend: corks small bodies only, and lifts the unsent limit for the last response" {
    const t = try testConnection();
    defer t.l.close();
    defer _ = linux.close(t.client);
    const fd = t.accepted;
    defer _ = linux.close(fd);
    const limits: FileSend.Limits = .{ .cork_file_bytes_max = 256 * 1024, .unsent_bytes_max = 64 * 1024 };
    var send: FileSend = .{};

    // Keep-alive responses: a head alone and a large body stay uncorked; a small body is
    // corked until its file is out. The unsent limit holds throughout.
    send.beforeHead(fd, null, false, limits);
    send.beforeHead(fd, 1024 * 1024, false, limits);
    try std.testing.expectEqual(@as(c_int, 0), try tcpOption(fd, linux.TCP.CORK));
    send.beforeHead(fd, 64 * 1024, false, limits);
    try std.testing.expect(send.corked);
    try std.testing.expectEqual(@as(c_int, 1), try tcpOption(fd, linux.TCP.CORK));
    send.afterFile(fd, true); // more of the file to send
    try std.testing.expectEqual(@as(c_int, 1), try tcpOption(fd, linux.TCP.CORK));
    send.afterFile(fd, false);
    try std.testing.expectEqual(@as(c_int, 0), try tcpOption(fd, linux.TCP.CORK));
    try std.testing.expectEqual(@as(c_int, 64 * 1024), try tcpOption(fd, linux.TCP.NOTSENT_LOWAT));

    // The last response: corked whatever its size, the unsent limit back to the system's,
    // and left so (the close pushes the rest).
    send.beforeHead(fd, 1024 * 1024, true, limits);
    try std.testing.expect(send.corked and send.last);
    try std.testing.expectEqual(@as(c_int, 1), try tcpOption(fd, linux.TCP.CORK));
    try std.testing.expectEqual(@as(c_int, 0), try tcpOption(fd, linux.TCP.NOTSENT_LOWAT));
    send.afterFile(fd, false);
    try std.testing.expectEqual(@as(c_int, 1), try tcpOption(fd, linux.TCP.CORK));
}

test "FileSend: a last body within the unsent limit keeps it" {
    const l = try listen(.{ .host = "127.0.0.1", .port = 0, .backlog = 16, .nonblocking = false, .unsent_bytes_max = 64 * 1024 });
    defer l.close();
    const client: fd_t = @intCast(linux.socket(linux.AF.INET, linux.SOCK.STREAM | linux.SOCK.CLOEXEC, 0));
    defer _ = linux.close(client);
    var address = try SocketAddress.parse("127.0.0.1", l.port);
    try std.testing.expectEqual(linux.E.SUCCESS, linux.errno(linux.connect(client, address.ptr(), address.len())));
    const fd = try accept(l.fd, false);
    defer _ = linux.close(fd);
    var send: FileSend = .{};
    send.beforeHead(fd, 64 * 1024, true, .{ .cork_file_bytes_max = 0, .unsent_bytes_max = 64 * 1024 });
    try std.testing.expectEqual(@as(c_int, 1), try tcpOption(fd, linux.TCP.CORK));
    try std.testing.expectEqual(@as(c_int, 64 * 1024), try tcpOption(fd, linux.TCP.NOTSENT_LOWAT));
}

test "listen: IPv6 loopback and bad addresses" {
    if (listen(.{ .host = "::1", .port = 0, .backlog = 16, .nonblocking = true })) |l| {
        l.close();
    } else |err| switch (err) {
        error.AddressNotAvailable, error.InvalidAddress => {}, // no IPv6 on this machine
        else => return err,
    }
    try std.testing.expectError(error.InvalidAddress, listen(.{ .host = "localhost", .port = 0, .backlog = 1, .nonblocking = true }));
    try std.testing.expectError(error.InvalidAddress, listen(.{ .host = "300.1.1.1", .port = 0, .backlog = 1, .nonblocking = true }));
}
