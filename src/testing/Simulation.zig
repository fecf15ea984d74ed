//! A simulated engine: drives one `Connection` with no sockets, delivering the client's bytes
//! in pieces whose sizes come from a seeded PRNG (or all at once, or one byte at a time) and
//! accepting the connection's writes in equally arbitrary pieces. Time is the worker's
//! `now_ms`, which tests set. Used by unit tests and fuzz targets.
const std = @import("std");
const assert = std.debug.assert;
const Connection = @import("../Connection.zig");
const Worker = @import("../Worker.zig");
const driver = @import("../engine/driver.zig");

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
    var io: SimIo = .{ .gpa = gpa, .input = input, .keep_open = options.keep_open, .cuts = options.cuts, .random = random, .output = &output };
    // A `later` means the simulated client has nothing more to say (keep_open); a
    // connection that loops forever is caught by the driver's step bound.
    switch (driver.drive(&io, &c)) {
        // The simulated worker has no handler pool, so nothing else waits.
        .later => assert(io.keep_open and io.pos == input.len),
        .close => io.result.closed_early = io.pos < input.len,
    }
    if (io.failure) |err| return err;
    var result = io.result;
    result.output = try output.toOwnedSlice(gpa);
    return result;
}

/// The simulated network, for `driver.drive`.
const SimIo = struct {
    gpa: std.mem.Allocator,
    input: []const u8,
    keep_open: bool,
    cuts: Cuts,
    random: std.Random,
    output: *std.ArrayList(u8),
    pos: usize = 0,
    result: Result = .{ .output = &.{}, .sends = 0, .shutdown = false, .closed_early = false },
    /// An error of the simulation itself (out of memory, a file that cannot be read).
    failure: ?anyerror = null,

    pub fn beforeStep(io: *SimIo, _: *Connection) ?driver.Stop {
        return if (io.failure != null) .close else null;
    }

    pub fn awaitRecv(io: *SimIo, _: *Connection) driver.Await {
        if (io.pos == io.input.len and io.keep_open) return .later;
        return .ready;
    }

    pub fn recv(io: *SimIo, buffer: []u8) driver.Result {
        // After the input, the client half-closes.
        if (io.pos == io.input.len) return .{ .done = 0 };
        const n = @min(buffer.len, io.input.len - io.pos, cut(io.cuts, io.random));
        @memcpy(buffer[0..n], io.input[io.pos..][0..n]);
        io.pos += n;
        return .{ .done = n };
    }

    pub fn awaitSend(_: *SimIo, _: *Connection) driver.Await {
        return .ready;
    }

    pub fn writev(io: *SimIo, iovecs: []const std.posix.iovec_const) driver.Result {
        var budget = cut(io.cuts, io.random);
        var sent: usize = 0;
        for (iovecs) |iov| {
            const take = @min(iov.len, budget);
            io.output.appendSlice(io.gpa, iov.base[0..take]) catch |err| return io.fail(err);
            sent += take;
            budget -= take;
            if (budget == 0) break;
        }
        io.result.sends += 1;
        return .{ .done = sent };
    }

    pub fn sendfile(io: *SimIo, file: Connection.File) driver.Result {
        const take: usize = @intCast(@min(file.len, cut(io.cuts, io.random)));
        const start = io.output.items.len;
        io.output.resize(io.gpa, start + take) catch |err| return io.fail(err);
        const rc = std.os.linux.pread(file.fd, io.output.items[start..].ptr, take, @intCast(file.offset));
        if (std.os.linux.errno(rc) != .SUCCESS) return io.fail(error.FileReadFailed);
        const n: usize = rc;
        io.output.shrinkRetainingCapacity(start + n);
        io.result.sends += 1;
        return .{ .done = n };
    }

    fn fail(io: *SimIo, err: anyerror) driver.Result {
        io.failure = err;
        return .failed;
    }

    pub fn shutdownWrite(io: *SimIo) void {
        io.result.shutdown = true;
    }

    pub fn fileSend(_: *SimIo) ?*@import("../engine/socket.zig").FileSend {
        return null;
    }

    pub fn fd(_: *SimIo) std.os.linux.fd_t {
        return -1;
    }
};

fn cut(cuts: Cuts, random: std.Random) usize {
    return switch (cuts) {
        .whole => std.math.maxInt(usize),
        .bytes => 1,
        .random => |r| random.intRangeAtMost(usize, 1, r.max),
    };
}
