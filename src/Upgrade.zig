//! A zero-downtime binary upgrade (SIGUSR2, `Server.run`): the running process starts the
//! program at its own path with the same arguments, handing it every listening socket the
//! way a service manager would (`LISTEN_FDS`, `LISTEN_PID`: see `socket.inheritedListeners`)
//! and the write end of a pipe (`SAKER_UPGRADE_FD`). The new process serves on those sockets
//! and writes one byte to the pipe once its engines run; only then does the old one stop
//! accepting and finish what it has in flight. Connections waiting in the sockets' queues are
//! the new process's to take: no socket is ever closed under them. A new process that fails
//! first closes the pipe without a byte, and the old one goes on serving.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;

const log = std.log.scoped(.saker);

/// The new process, until it says whether it serves.
pub const Child = struct {
    pid: linux.pid_t,
    /// The read end of the readiness pipe (non-blocking): one byte, or EOF on failure.
    ready_fd: linux.fd_t,
};

/// The environment variable naming the readiness pipe's descriptor in the new process.
pub const ready_variable = "SAKER_UPGRADE_FD";

/// This program's path (the target of /proc/self/exe), for a later `start`: read at start-up,
/// since a binary replaced on disk keeps its path but /proc/self/exe then names the old file.
pub fn exePath(gpa: std.mem.Allocator) ?[:0]u8 {
    var buffer: [std.fs.max_path_bytes]u8 = undefined;
    const rc = linux.readlink("/proc/self/exe", &buffer, buffer.len);
    if (linux.errno(rc) != .SUCCESS or rc == 0 or rc >= buffer.len) return null;
    return gpa.dupeSentinel(u8, buffer[0..rc], 0) catch null;
}

pub const StartError = error{ NoArguments, OutOfMemory, SystemResources };

/// Starts the program at `exe_path` with this process's arguments (/proc/self/cmdline) and
/// environment, handing it `listeners` as descriptors 3 onwards.
pub fn start(gpa: std.mem.Allocator, exe_path: [:0]const u8, listeners: []const linux.fd_t) StartError!Child {
    assert(listeners.len > 0);
    var arena_state: std.heap.ArenaAllocator = .init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const argv = try commandLine(arena);
    // The environment without the variables set below, then them, with room for the
    // new process's pid, which is known only after the fork.
    var envp: std.ArrayList(?[*:0]const u8) = .empty;
    var environ = std.c.environ;
    while (environ[0]) |entry| : (environ += 1) {
        const text = std.mem.span(entry);
        const skip = for ([_][]const u8{ "LISTEN_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES=", ready_variable ++ "=" }) |prefix| {
            if (std.mem.startsWith(u8, text, prefix)) break true;
        } else false;
        if (!skip) try envp.append(arena, entry);
    }
    const fds_entry = try std.fmt.allocPrintSentinel(arena, "LISTEN_FDS={d}", .{listeners.len}, 0);
    const ready_entry = try std.fmt.allocPrintSentinel(arena, ready_variable ++ "={d}", .{3 + listeners.len}, 0);
    // "LISTEN_PID=" and room for any pid, filled in by the child.
    const pid_entry = try arena.allocSentinel(u8, "LISTEN_PID=".len + 10, 0);
    @memcpy(pid_entry[0.."LISTEN_PID=".len], "LISTEN_PID=");
    try envp.appendSlice(arena, &.{ fds_entry.ptr, ready_entry.ptr, pid_entry.ptr, null });
    // Descriptors above every one the child will take, to move the listeners through.
    const staging = try arena.alloc(linux.fd_t, listeners.len + 1);

    var pipe: [2]linux.fd_t = undefined;
    if (linux.errno(linux.pipe2(&pipe, .{ .CLOEXEC = true })) != .SUCCESS) return error.SystemResources;
    errdefer _ = linux.close(pipe[0]);
    defer _ = linux.close(pipe[1]);
    const rc = linux.fork();
    switch (linux.errno(rc)) {
        .SUCCESS => {},
        else => return error.SystemResources,
    }
    if (rc == 0) {
        // The child: only async-signal-safe steps until execve (the parent has threads).
        childExec(exe_path, argv, envp.items, pid_entry, listeners, pipe[1], staging);
    }
    _ = linux.fcntl(pipe[0], linux.F.SETFL, @as(usize, @as(u32, @bitCast(linux.O{ .NONBLOCK = true }))));
    return .{ .pid = @intCast(rc), .ready_fd = pipe[0] };
}

fn childExec(
    exe_path: [:0]const u8,
    argv: [:null]const ?[*:0]const u8,
    envp: []const ?[*:0]const u8,
    pid_entry: [:0]u8,
    listeners: []const linux.fd_t,
    ready_write: linux.fd_t,
    staging: []linux.fd_t,
) noreturn {
    // The pid, in decimal, after "LISTEN_PID=".
    var digits: [10]u8 = undefined;
    var pid: u32 = @intCast(linux.getpid());
    var n: usize = 0;
    while (true) {
        digits[digits.len - 1 - n] = '0' + @as(u8, @intCast(pid % 10));
        n += 1;
        pid /= 10;
        if (pid == 0) break;
    }
    const at = "LISTEN_PID=".len;
    @memcpy(pid_entry[at..][0..n], digits[digits.len - n ..]);
    pid_entry[at + n] = 0;
    // Move every descriptor above the range it must end in, then into 3, 4, ...: dup2 onto
    // a descriptor that is itself still to move would lose it.
    const above: usize = 3 + listeners.len + 1;
    for (listeners, 0..) |fd, i| staging[i] = dupAbove(fd, above);
    staging[listeners.len] = dupAbove(ready_write, above);
    for (staging, 0..) |fd, i| {
        if (fd < 0) linux.exit(127);
        _ = linux.dup2(fd, @intCast(3 + i)); // the copy is not close-on-exec
    }
    // The parent blocks the signals it reads from a signalfd; the new program starts with
    // none blocked, as a freshly started one would.
    const none = std.mem.zeroes(linux.sigset_t);
    _ = linux.sigprocmask(linux.SIG.SETMASK, &none, null);
    _ = linux.execve(exe_path, @ptrCast(argv.ptr), @ptrCast(envp.ptr));
    linux.exit(127);
}

fn dupAbove(fd: linux.fd_t, minimum: usize) linux.fd_t {
    const rc = linux.fcntl(fd, linux.F.DUPFD_CLOEXEC, minimum);
    if (linux.errno(rc) != .SUCCESS) return -1;
    return @intCast(rc);
}

/// This process's arguments, as /proc/self/cmdline holds them.
fn commandLine(arena: std.mem.Allocator) StartError![:null]const ?[*:0]const u8 {
    const fd_rc = linux.open("/proc/self/cmdline", .{ .ACCMODE = .RDONLY, .CLOEXEC = true }, 0);
    if (linux.errno(fd_rc) != .SUCCESS) return error.NoArguments;
    const fd: linux.fd_t = @intCast(fd_rc);
    defer _ = linux.close(fd);
    var bytes: std.ArrayList(u8) = .empty;
    var chunk: [4096]u8 = undefined;
    while (true) {
        const got = linux.read(fd, &chunk, chunk.len);
        if (linux.errno(got) != .SUCCESS) return error.NoArguments;
        if (got == 0) break;
        try bytes.appendSlice(arena, chunk[0..got]);
    }
    if (bytes.items.len == 0) return error.NoArguments;
    if (bytes.items[bytes.items.len - 1] != 0) try bytes.append(arena, 0);
    var args: std.ArrayList(?[*:0]const u8) = .empty;
    var rest = bytes.items;
    while (rest.len > 0) {
        const end = std.mem.findScalar(u8, rest, 0).?;
        try args.append(arena, @ptrCast(rest.ptr));
        rest = rest[end + 1 ..];
    }
    return args.toOwnedSliceSentinel(arena, null);
}

/// What the new process's pipe said: it serves, it failed, or nothing yet.
pub const Outcome = enum { serving, failed, pending };

/// Reads the readiness pipe (after poll said it is readable).
pub fn outcome(child: Child) Outcome {
    var byte: [1]u8 = undefined;
    const rc = linux.read(child.ready_fd, &byte, 1);
    return switch (linux.errno(rc)) {
        .SUCCESS => if (rc == 1) .serving else .failed,
        .AGAIN, .INTR => .pending,
        else => .failed,
    };
}

/// In the new process: says to the old one that this one serves (when it was started by an
/// upgrade, for this very process).
pub fn signalReady() void {
    const text = std.c.getenv(ready_variable) orelse return;
    const pid_text = std.c.getenv("LISTEN_PID") orelse return;
    const pid = std.fmt.parseInt(i32, std.mem.span(pid_text), 10) catch return;
    if (pid != linux.getpid()) return;
    const fd = std.fmt.parseInt(linux.fd_t, std.mem.span(text), 10) catch return;
    // Only a pipe: a descriptor that is something else is not the old process's.
    var stat: linux.Statx = undefined;
    if (linux.errno(linux.statx(fd, "", linux.AT.EMPTY_PATH, .{ .TYPE = true }, &stat)) != .SUCCESS) return;
    if (stat.mode & linux.S.IFMT != linux.S.IFIFO) return;
    _ = linux.write(fd, "1", 1);
    _ = linux.close(fd);
}
