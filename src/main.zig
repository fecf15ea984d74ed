//! The `saker` command line.
const std = @import("std");
const saker = @import("saker");

const usage =
    \\usage: saker --help | --version
    \\
;

pub fn main(init: std.process.Init) !void {
    const args = try init.minimal.args.toSlice(init.arena.allocator());
    if (args.len >= 2 and std.mem.eql(u8, args[1], "--version")) {
        var buffer: [64]u8 = undefined;
        var writer: std.Io.File.Writer = .initStreaming(.stdout(), init.io, &buffer);
        try writer.interface.print("saker {s}\n", .{saker.version});
        try writer.interface.flush();
        return;
    }
    if (args.len >= 2 and (std.mem.eql(u8, args[1], "--help") or std.mem.eql(u8, args[1], "-h"))) {
        var buffer: [256]u8 = undefined;
        var writer: std.Io.File.Writer = .initStreaming(.stdout(), init.io, &buffer);
        try writer.interface.writeAll(usage);
        try writer.interface.flush();
        return;
    }
    saker.cli.fatalUsage(init.io, if (args.len < 2) "missing command" else "unknown command", usage);
}
