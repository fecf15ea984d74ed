//! Numbers from a process's `/proc/PID/status` (VmRSS, VmHWM in KiB; Threads), for tests that
//! measure a server's memory or threads.
const std = @import("std");
const linux = std.os.linux;

/// The number on the line `name:` of the status of `pid` (null: this process).
pub fn number(pid: ?linux.pid_t, name: []const u8) !u64 {
    var path_buffer: [64]u8 = undefined;
    const path = if (pid) |p| try std.mem.print(&path_buffer, "/proc/{d}/status", .{p}) else "/proc/self/status";
    var buffer: [4096]u8 = undefined;
    const text = try std.Io.Dir.cwd().readFile(std.testing.io, path, &buffer);
    var lines = std.mem.splitScalar(u8, text, '\n');
    while (lines.next()) |line| {
        if (line.len <= name.len or line[name.len] != ':' or !std.mem.startsWith(u8, line, name)) continue;
        var fields = std.mem.tokenizeAny(u8, line[name.len + 1 ..], " \t");
        return std.fmt.parseInt(u64, fields.next() orelse return error.NoField, 10);
    }
    return error.NoField;
}
