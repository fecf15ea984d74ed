//! Which engines a test may run on this machine. The `io_uring` engine falls back to epoll
//! when the kernel refuses io_uring; its cases would then test epoll twice, so they are
//! skipped instead, and the test run says so once.
const std = @import("std");
const saker = @import("saker");
const Kind = saker.engine.Kind;

var probed: ?bool = null;

/// Whether the kernel runs the io_uring engine with the default configuration.
pub fn ioUringAvailable() bool {
    if (probed) |available| return available;
    const config: saker.Config = .{};
    saker.engine.IoUring.probe(&config) catch |err| {
        std.debug.print("skipped: the io_uring cases: this kernel refuses io_uring ({t})\n", .{err});
        probed = false;
        return false;
    };
    probed = true;
    return true;
}

/// For a test whose real client `tool` could not be started (`err`): a missing tool skips
/// the test, saying so on a `skipped:` line (`tests/run` lists them at the end); any other
/// error is the test's failure.
pub fn skipWithout(tool: []const u8, err: anyerror) anyerror {
    if (err != error.FileNotFound) return err;
    std.debug.print("skipped: the tests that run {s}: it is not installed (tests/tools installs it as root or with sudo)\n", .{tool});
    return error.SkipZigTest;
}

/// `kinds` without `io_uring` when the kernel refuses it.
pub fn usable(comptime kinds: []const Kind) []const Kind {
    const Static = struct {
        var buffer: [kinds.len]Kind = undefined;
    };
    var n: usize = 0;
    for (kinds) |kind| {
        if (kind == .io_uring and !ioUringAvailable()) continue;
        Static.buffer[n] = kind;
        n += 1;
    }
    return Static.buffer[0..n];
}

/// `names` (as given to `--engine`) without "io_uring" when the kernel refuses it.
pub fn usableNames(comptime names: []const []const u8) []const []const u8 {
    const Static = struct {
        var buffer: [names.len][]const u8 = undefined;
    };
    var n: usize = 0;
    for (names) |name| {
        if (std.mem.eql(u8, name, "io_uring") and !ioUringAvailable()) continue;
        Static.buffer[n] = name;
        n += 1;
    }
    return Static.buffer[0..n];
}
