//! The outgoing side of one WebSocket connection: frames written into the connection's send
//! batch (RFC 6455 §5.2; server frames are never masked). Headers and small payloads go into
//! the exchange's send buffer, back to back, so a batch of frames is one iovec and one writev;
//! frames that do not fit go into arena regions (reset once the batch is sent); large payloads
//! that stay valid until then go as their own iovec, without a copy.
const std = @import("std");
const Exchange = @import("../Exchange.zig");
const frame = @import("frame.zig");
const Deflate = @import("Deflate.zig");

const Outbox = @This();

/// Arena memory for frames that do not fit the exchange's send buffer.
region: []u8 = &.{},
region_used: usize = 0,
last_reserve: enum { out, region } = .out,

/// Payloads up to this size are copied next to their frame header; larger ones that stay
/// valid until sent go as their own iovec.
pub const copy_bytes_max = 1024;
/// The smallest arena region for frames that do not fit the send buffer.
const region_bytes_min = 64 * 1024;

/// Why a frame could not be added.
pub const Error = error{
    /// The batch cannot take more (its iovecs are used up).
    SendQueueFull,
    /// The arena (and the worker's heap budget behind it) is exhausted.
    OutOfMemory,
};

/// How to add a frame.
pub const FrameOptions = struct {
    /// The payload stays valid, unchanged, until the batch is sent.
    stable: bool,
    /// `websocket_send_queue_bytes_max`, which sizes the last region.
    queue_bytes_max: u64,
};

/// The batch was sent and the arena reset: start over.
pub fn reset(o: *Outbox) void {
    o.* = .{};
}

/// Bytes of the batch still to be sent.
pub fn queuedBytes(x: *const Exchange) u64 {
    var total: u64 = 0;
    for (x.iovecs[x.iovec_index..x.iovec_count]) |iov| total += iov.len;
    return total;
}

/// Adds one frame with `payload`.
pub fn add(o: *Outbox, x: *Exchange, header: frame.Options, payload: []const u8, options: FrameOptions) Error!void {
    const header_len = frame.headerLen(payload.len);
    // Leave room for one more region after a frame that takes two iovecs.
    if (options.stable and payload.len > copy_bytes_max and x.iovec_count + 3 <= Exchange.iovec_max) {
        const head = try o.reserve(x, header_len, options.queue_bytes_max);
        _ = frame.writeHeader(head, header);
        try append(x, head);
        try append(x, payload);
        return;
    }
    const bytes = try o.reserve(x, header_len + payload.len, options.queue_bytes_max);
    _ = frame.writeHeader(bytes, header);
    @memcpy(bytes[header_len..], payload);
    try append(x, bytes);
}

/// Adds one message compressed with `d` (RSV1 set). On `CompressFailed` nothing was added
/// and the caller sends the message uncompressed.
pub fn addCompressed(o: *Outbox, x: *Exchange, d: *Deflate, opcode: frame.Opcode, payload: []const u8, queue_bytes_max: u64) (Error || error{CompressFailed})!void {
    const room = frame.server_header_bytes_max + Deflate.compressBound(payload.len);
    const space = try o.reserve(x, room, queue_bytes_max);
    const deflated = d.compress(payload, space[frame.server_header_bytes_max..]) catch {
        o.unreserve(x, space.len);
        return error.CompressFailed;
    };
    const head = frame.writeHeader(space, .{ .opcode = opcode, .rsv1 = true, .payload_len = deflated.len });
    std.mem.copyForwards(u8, space[head.len..][0..deflated.len], deflated);
    const used = head.len + deflated.len;
    o.unreserve(x, space.len - used);
    try append(x, space[0..used]);
}

/// Memory for `n` bytes of outgoing frames: the exchange's send buffer, then arena regions.
fn reserve(o: *Outbox, x: *Exchange, n: usize, queue_bytes_max: u64) Error![]u8 {
    if (o.region.len - o.region_used >= n) {
        const slice = o.region[o.region_used..][0..n];
        o.region_used += n;
        o.last_reserve = .region;
        return slice;
    }
    if (o.region.len == 0) {
        if (x.reserveOut(n)) |slice| {
            o.last_reserve = .out;
            return slice;
        }
    }
    if (x.iovec_count >= Exchange.iovec_max) return error.SendQueueFull;
    var size = @max(n, region_bytes_min, o.region.len * 2);
    if (x.iovec_count + 1 == Exchange.iovec_max) {
        // The last region: make it hold everything the queue may still take.
        size = @max(size, @as(usize, @intCast(queue_bytes_max -| queuedBytes(x))));
    }
    o.region = x.arena.allocator().alloc(u8, size) catch return error.OutOfMemory;
    o.region_used = n;
    o.last_reserve = .region;
    return o.region[0..n];
}

/// Gives back the last `n` bytes of the last reservation.
fn unreserve(o: *Outbox, x: *Exchange, n: usize) void {
    switch (o.last_reserve) {
        .out => x.out_len -= n,
        .region => o.region_used -= n,
    }
}

/// Adds bytes to the batch, merged with the previous iovec when contiguous.
fn append(x: *Exchange, bytes: []const u8) error{SendQueueFull}!void {
    if (bytes.len == 0) return;
    if (x.iovec_count > x.iovec_index) {
        const last = x.iovecs[x.iovec_count - 1];
        if (last.base + last.len == bytes.ptr) return x.appendIovec(bytes);
    }
    if (x.iovec_count == Exchange.iovec_max) return error.SendQueueFull;
    x.appendIovec(bytes);
}

const testing = std.testing;
const Arena = @import("../Arena.zig");

test "Outbox: frames share one iovec; large stable payloads are not copied; regions follow" {
    const layout: Exchange.Layout = .{ .recv_bytes = 1024, .out_bytes = 2048, .arena_bytes = 1024, .header_count = 4, .response_header_count = 4 };
    const memory = try testing.allocator.alignedAlloc(u8, .fromByteUnits(64), layout.stride());
    defer testing.allocator.free(memory);
    var budget: Arena.Budget = .init(1 << 20);
    var x: Exchange = undefined;
    x.init(memory, layout, .{ .request_line_bytes_max = 1024, .header_bytes_max = 1024 }, testing.allocator, &budget);
    defer x.arena.reset();
    const limit = 1 << 20;
    var o: Outbox = .{};
    try o.add(&x, .{ .opcode = .text, .payload_len = 5 }, "Hello", .{ .stable = false, .queue_bytes_max = limit });
    try o.add(&x, .{ .opcode = .text, .payload_len = 5 }, "World", .{ .stable = false, .queue_bytes_max = limit });
    try testing.expectEqual(@as(u8, 1), x.iovec_count);
    try testing.expectEqualStrings("\x81\x05Hello\x81\x05World", x.iovecs[0].base[0..x.iovecs[0].len]);

    const big: [3000]u8 = @splat('b');
    try o.add(&x, .{ .opcode = .binary, .payload_len = big.len }, &big, .{ .stable = true, .queue_bytes_max = limit });
    try testing.expectEqual(@as(u8, 2), x.iovec_count); // the header joined the first iovec
    try testing.expect(x.iovecs[1].base == &big);

    // Does not fit the 2 KiB send buffer any more: copied into an arena region.
    try o.add(&x, .{ .opcode = .binary, .payload_len = big.len }, &big, .{ .stable = false, .queue_bytes_max = limit });
    try o.add(&x, .{ .opcode = .text, .payload_len = 1 }, "!", .{ .stable = false, .queue_bytes_max = limit });
    try testing.expectEqual(@as(u8, 3), x.iovec_count); // the region's frames are contiguous
    try testing.expectEqual(@as(u64, 14 + 4 + 3000 + 4 + 3000 + 3), queuedBytes(&x));
    const region = x.iovecs[2].base[0..x.iovecs[2].len];
    try testing.expectEqualSlices(u8, &.{ 0x82, 126, 0x0b, 0xb8 }, region[0..4]);
    try testing.expectEqualStrings("\x81\x01!", region[region.len - 3 ..]);
}
