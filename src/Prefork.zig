//! Prefork: the parent process forks `processes` children that each run the server's engines
//! on the listeners they inherit (one shared port), then supervises them. A child that dies
//! other than by the parent's request is replaced (at most one restart per `restart_delay_ms`
//! per child, so a child that crashes at once cannot spin the machine). SIGINT/SIGTERM (and
//! `Server.stop`, through the stop event) are forwarded as SIGTERM; the parent waits for the
//! children to finish their in-flight requests, kills what is left after the shutdown timeout,
//! and returns. A second signal kills the children at once and exits with status 1. A child
//! whose parent dies (killed, crashed) gets SIGTERM and shuts down too.
const std = @import("std");
const linux = std.os.linux;
const posix = std.posix;

const log = std.log.scoped(.saker);

const Prefork = @This();

/// Runs in each child; its return value is the child's exit status.
pub const ChildMain = *const fn (context: *anyopaque) u8;

const restart_delay_ms = 500;

children: []Child,
child_main: ChildMain,
context: *anyopaque,
/// The supervising process, which the children watch.
parent_pid: linux.pid_t,

/// What the parent watches, and how long the children get to finish.
pub const Options = struct {
    /// Must watch SIGINT, SIGTERM and SIGHUP (passed on to the children), blocked in this
    /// thread.
    signal_fd: linux.fd_t,
    /// The server's stop event (`engine.Control.wake_fd`): readable once `stop` was called.
    wake_fd: linux.fd_t,
    shutdown_timeout_ms: u32,
};

const Child = struct {
    pid: linux.pid_t = 0,
    /// When the child may be (re)started, on the monotonic clock.
    start_after_ms: u64 = 0,
};

/// Forks `count` children running `child_main(context)` and supervises them until a signal
/// arrives or the server is stopped (see `Options`). Assumes no other thread exists (fork
/// copies only the calling thread).
pub fn run(gpa: std.mem.Allocator, count: u16, options: Options, child_main: ChildMain, context: *anyopaque) !void {
    const children = try gpa.alloc(Child, count);
    defer gpa.free(children);
    @memset(children, .{});
    var prefork: Prefork = .{
        .children = children,
        .child_main = child_main,
        .context = context,
        .parent_pid = linux.getpid(),
    };
    try prefork.supervise(options);
}

fn nowMs() u64 {
    return @import("clock.zig").milliseconds(.MONOTONIC);
}

fn spawn(prefork: *Prefork, child: *Child) void {
    const rc = linux.fork();
    switch (linux.errno(rc)) {
        .SUCCESS => {},
        else => |err| {
            log.err("fork: E.{t}; retrying in {d} ms", .{ err, restart_delay_ms });
            child.start_after_ms = nowMs() + restart_delay_ms;
            return;
        },
    }
    if (rc == 0) {
        // Should the parent die without stopping this child (SIGKILL, a crash), SIGTERM
        // shuts the child down gracefully instead of leaving it to serve alone.
        _ = linux.prctl(@backingInt(linux.PR.SET_PDEATHSIG), @backingInt(linux.SIG.TERM), 0, 0, 0);
        if (linux.getppid() != prefork.parent_pid) std.process.exit(0); // it died before the prctl
        std.process.exit(prefork.child_main(prefork.context));
    }
    child.pid = @intCast(rc);
    child.start_after_ms = nowMs() + restart_delay_ms;
}

fn supervise(prefork: *Prefork, options: Options) !void {
    for (prefork.children) |*child| prefork.spawn(child);
    var stopping = false;
    var kill_at_ms: u64 = std.math.maxInt(u64);
    while (true) {
        var fds = [_]posix.pollfd{
            .{ .fd = options.signal_fd, .events = posix.POLL.IN, .revents = 0 },
            // The stop event stays readable: watched only until the stop begins.
            .{ .fd = if (stopping) -1 else options.wake_fd, .events = posix.POLL.IN, .revents = 0 },
        };
        if (try posix.poll(&fds, 100) > 0) {
            if (fds[0].revents != 0) {
                var info: linux.signalfd_siginfo = undefined;
                _ = posix.read(options.signal_fd, std.mem.asBytes(&info)) catch {};
                if (info.signo == @backingInt(linux.SIG.HUP)) {
                    // Reload (certificates, log files): each child does its own.
                    prefork.signalAll(.HUP);
                    continue;
                }
                if (stopping) {
                    log.warn("second signal: killing the children now", .{});
                    prefork.signalAll(.KILL);
                    std.process.exit(1);
                }
                log.info("signal received: stopping {d} processes", .{prefork.children.len});
            } else {
                log.info("stop requested: stopping {d} processes", .{prefork.children.len});
            }
            stopping = true;
            kill_at_ms = nowMs() + options.shutdown_timeout_ms + 1000;
            prefork.signalAll(.TERM);
        }
        prefork.reap(stopping);
        if (stopping) {
            if (prefork.alive() == 0) return;
            if (nowMs() >= kill_at_ms) {
                log.warn("shutdown timeout: killing {d} processes", .{prefork.alive()});
                prefork.signalAll(.KILL);
                kill_at_ms = std.math.maxInt(u64);
            }
            continue;
        }
        const now = nowMs();
        for (prefork.children) |*child| {
            if (child.pid == 0 and now >= child.start_after_ms) prefork.spawn(child);
        }
    }
}

/// Collects exited children; when not stopping, logs why they went.
fn reap(prefork: *Prefork, stopping: bool) void {
    while (true) {
        var status: i32 = 0;
        const rc = linux.waitpid(-1, &status, linux.W.NOHANG);
        if (linux.errno(rc) != .SUCCESS or rc == 0) return;
        const pid: linux.pid_t = @intCast(rc);
        for (prefork.children) |*child| {
            if (child.pid != pid) continue;
            child.pid = 0;
            if (!stopping) {
                const code: u32 = @bitCast(status);
                if (linux.W.IFSIGNALED(code)) {
                    log.warn("process {d} died from signal {d}; restarting it", .{ pid, @backingInt(linux.W.TERMSIG(code)) });
                } else {
                    log.warn("process {d} exited with status {d}; restarting it", .{ pid, linux.W.EXITSTATUS(code) });
                }
            }
        }
    }
}

fn alive(prefork: *const Prefork) usize {
    var n: usize = 0;
    for (prefork.children) |child| {
        if (child.pid != 0) n += 1;
    }
    return n;
}

fn signalAll(prefork: *Prefork, signal: linux.SIG) void {
    for (prefork.children) |child| {
        if (child.pid != 0) _ = linux.kill(child.pid, signal);
    }
}
