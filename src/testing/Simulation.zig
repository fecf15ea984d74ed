//! A simulated engine: drives one `Connection` with no sockets, delivering the client's bytes
//! in pieces whose sizes come from a seeded PRNG (or all at once, or one byte at a time) and
//! accepting the connection's writes in equally arbitrary pieces. Time is the worker's
//! `now_ms`, which tests set. Used by unit tests and fuzz targets.
const std = @import("std");
const assert = std.debug.assert;
const Connection = @import("../Connection.zig");
const Worker = @import("../Worker.zig");

const Simulation = @This();

/// How the simulated network cuts the byte streams.
pub const Cuts = union(enum) {
    /// Everything available at once.
    whole,
    /// One byte per read and per write.
    bytes,
    /// Sizes from a PRNG with this seed, 1..max bytes.
    random: struct { seed: u64, max: usize = 64 },
};

/// What the client saw.
pub const Result = struct {
    /// Every byte the connection wrote.
    output: []u8,
    /// Number of engine write calls (writev or sendfile) that sent something.
    sends: usize,
    /// Whether the connection asked to shut down its write side (lingering close).
    shutdown: bool,
    /// Whether the connection closed before the client's input was all delivered.
    closed_early: bool,
};

/// Runs a connection over `input`. After the input, the client half-closes (EOF) unless
/// `keep_open`, in which case the run stops when the connection waits for more.
/// `output` is allocated with `gpa`.
pub fn run(gpa: std.mem.Allocator, worker: *Worker, input: []const u8, options: struct {
    cuts: Cuts = .whole,
    keep_open: bool = false,
}) !Result {
    var prng: std.Random.DefaultPrng = .init(switch (options.cuts) {
        .random => |r| r.seed,
        else => 0,
    });
    const random = prng.random();
    var output: std.ArrayList(u8) = .empty;
    errdefer output.deinit(gpa);
    var c: Connection = .init(worker);
    defer c.deinit();
    var pos: usize = 0;
    var result: Result = .{ .output = &.{}, .sends = 0, .shutdown = false, .closed_early = false };
    var steps: usize = 0;
    while (true) : (steps += 1) {
        assert(steps < 10_000_000); // a connection that loops forever is a bug
        switch (c.next()) {
            .recv => {
                if (pos == input.len and options.keep_open) break;
                const buffer = c.recvBuffer() orelse return error.OutOfExchanges;
                if (pos == input.len) {
                    c.onRecv(0);
                    continue;
                }
                const n = @min(buffer.len, input.len - pos, cut(options.cuts, random));
                @memcpy(buffer[0..n], input[pos..][0..n]);
                pos += n;
                c.onRecv(n);
            },
            .send => |iovecs| {
                var budget = cut(options.cuts, random);
                var sent: usize = 0;
                for (iovecs) |iov| {
                    const take = @min(iov.len, budget);
                    try output.appendSlice(gpa, iov.base[0..take]);
                    sent += take;
                    budget -= take;
                    if (budget == 0) break;
                }
                result.sends += 1;
                c.onSend(sent);
            },
            .send_file => |file| {
                const take: usize = @intCast(@min(file.len, cut(options.cuts, random)));
                const start = output.items.len;
                try output.resize(gpa, start + take);
                const rc = std.os.linux.pread(file.fd, output.items[start..].ptr, take, @intCast(file.offset));
                if (std.os.linux.errno(rc) != .SUCCESS) return error.FileReadFailed;
                const n: usize = rc;
                output.shrinkRetainingCapacity(start + n);
                result.sends += 1;
                c.onSend(n);
            },
            .shutdown => {
                result.shutdown = true;
                c.onShutdown();
            },
            .close => {
                result.closed_early = pos < input.len;
                break;
            },
            .wait => unreachable, // the simulated worker has no handler pool

        }
    }
    result.output = try output.toOwnedSlice(gpa);
    return result;
}

fn cut(cuts: Cuts, random: std.Random) usize {
    return switch (cuts) {
        .whole => std.math.maxInt(usize),
        .bytes => 1,
        .random => |r| random.intRangeAtMost(usize, 1, r.max),
    };
}
