//! The PROXY protocol stage of a connection whose listener requires it (`Listening.proxy`):
//! before any TLS or HTTP byte, the header is read into a buffer of its own and parsed
//! (`proxy_header.zig`); the client's address it names becomes the connection's peer, and the
//! bytes that came behind it in the same read are handed on to the transport above as if just
//! received (`Next.recv_held`). A connection whose header is missing, malformed, late, or from
//! a peer that is not trusted is closed without a word. Makes no syscalls.
const std = @import("std");
const assert = std.debug.assert;
const proxy_header = @import("../proxy_header.zig");
const Listening = @import("../Listening.zig");

const Proxy = @This();

/// The longest header taken (a version 2 header with TLVs up to this many bytes in all).
pub const bytes_max = 256;

policy: *const Listening.Proxy,
buffer: [bytes_max]u8 = undefined,
/// Bytes in `buffer`.
have: usize = 0,
phase: Phase = .reading,
/// Bytes after the header, still to hand on: `buffer[held..have]` while `holding`.
held: usize = 0,
/// The client's address from the header, or null when it names none (the socket's peer
/// stands).
source: ?std.Io.net.IpAddress = null,
deadline_ms: u64,

pub const Phase = enum {
    /// Waiting for the rest of the header.
    reading,
    /// The header is in; bytes that followed it wait to be handed on.
    holding,
    /// The header is in and nothing is left: the transport above takes over.
    done,
    /// No usable header: the connection closes.
    failed,
};

/// A header reader for a new connection, or null when there is no memory for it.
pub fn create(policy: *const Listening.Proxy, now_ms: u64) ?*Proxy {
    const p = policy.gpa.create(Proxy) catch return null;
    p.* = .{ .policy = policy, .deadline_ms = now_ms + policy.timeout_ms };
    return p;
}

/// What a connection gets when no reader could be made: it closes at once.
pub var refused: Proxy = .{ .policy = &refused_policy, .phase = .failed, .deadline_ms = 0 };
// Never used to free: `refused` is never destroyed.
const refused_policy: Listening.Proxy = .{ .gpa = std.heap.page_allocator, .trusted = &.{}, .timeout_ms = 0 };

pub fn destroy(p: *Proxy) void {
    if (p == &refused) return;
    p.policy.gpa.destroy(p);
}

/// Where the socket's bytes go while the header is read. Null (the connection closes) for a
/// peer the policy does not trust.
pub fn recvBuffer(p: *Proxy, peer: ?*const std.Io.net.IpAddress) ?[]u8 {
    assert(p.phase == .reading);
    if (p.have == 0 and !p.policy.trusts(peer)) {
        p.phase = .failed;
        return null;
    }
    assert(p.have < p.buffer.len);
    return p.buffer[p.have..];
}

/// `n` bytes arrived (0: the peer closed before the header ended).
pub fn received(p: *Proxy, n: usize) void {
    assert(p.phase == .reading);
    if (n == 0) {
        p.phase = .failed;
        return;
    }
    p.have += n;
    assert(p.have <= p.buffer.len);
    switch (proxy_header.parse(p.buffer[0..p.have], bytes_max)) {
        .incomplete => if (p.have == p.buffer.len) {
            p.phase = .failed;
        },
        .invalid => p.phase = .failed,
        .header => |header| {
            p.source = header.source;
            p.held = header.len;
            p.phase = if (header.len < p.have) .holding else .done;
        },
    }
}

/// Moves bytes that came behind the header into `out`; returns how many.
pub fn takeHeld(p: *Proxy, out: []u8) usize {
    assert(p.phase == .holding);
    const n = @min(out.len, p.have - p.held);
    @memcpy(out[0..n], p.buffer[p.held..][0..n]);
    p.held += n;
    if (p.held == p.have) p.phase = .done;
    return n;
}

/// The header did not come in time.
pub fn onTimeout(p: *Proxy) void {
    p.phase = .failed;
}

const testing = std.testing;

test "Proxy: a header split over reads, then the bytes behind it handed on in pieces" {
    const policy: Listening.Proxy = .{ .gpa = testing.allocator, .trusted = &.{}, .timeout_ms = 100 };
    const p = create(&policy, 5).?;
    defer p.destroy();
    try testing.expectEqual(@as(u64, 105), p.deadline_ms);
    const stream = "PROXY TCP4 192.0.2.1 192.0.2.2 4000 80\r\nGET / HTTP/1.1\r\n";
    var fed: usize = 0;
    for ([_]usize{ 3, 20, stream.len - 23 }) |n| {
        const buffer = p.recvBuffer(null).?;
        @memcpy(buffer[0..n], stream[fed..][0..n]);
        fed += n;
        p.received(n);
    }
    try testing.expectEqual(Phase.holding, p.phase);
    var buffer: [128]u8 = undefined;
    try testing.expectEqualStrings("192.0.2.1:4000", try std.fmt.bufPrint(&buffer, "{f}", .{p.source.?}));
    var out: [10]u8 = undefined;
    try testing.expectEqualStrings("GET / HTTP", out[0..p.takeHeld(&out)]);
    try testing.expectEqual(Phase.holding, p.phase);
    try testing.expectEqualStrings("/1.1\r\n", out[0..p.takeHeld(&out)]);
    try testing.expectEqual(Phase.done, p.phase);
}

test "Proxy: an untrusted peer, garbage, an early close and a header too long all fail" {
    const trusted = [_]proxy_header.Cidr{proxy_header.Cidr.parse("127.0.0.1").?};
    const policy: Listening.Proxy = .{ .gpa = testing.allocator, .trusted = &trusted, .timeout_ms = 100 };
    const stranger = try std.Io.net.IpAddress.parse("127.0.0.7", 1);
    const friend = try std.Io.net.IpAddress.parse("127.0.0.1", 1);
    {
        const p = create(&policy, 0).?;
        defer p.destroy();
        try testing.expectEqual(@as(?[]u8, null), p.recvBuffer(&stranger));
        try testing.expectEqual(Phase.failed, p.phase);
    }
    for ([_][]const u8{ "GET / HTTP/1.1\r\n\r\n", "", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 " }) |bytes| {
        const p = create(&policy, 0).?;
        defer p.destroy();
        const buffer = p.recvBuffer(&friend).?;
        @memcpy(buffer[0..bytes.len], bytes);
        p.received(bytes.len);
        if (bytes.len > 20) {
            // Incomplete, then the peer closes.
            try testing.expectEqual(Phase.reading, p.phase);
            p.received(0);
        }
        try testing.expectEqual(Phase.failed, p.phase);
    }
    // A v2 header announcing more than the buffer holds.
    const p = create(&policy, 0).?;
    defer p.destroy();
    const big = proxy_header.v2_signature ++ "\x21\x11\x01\x00";
    @memcpy(p.recvBuffer(&friend).?[0..big.len], big);
    p.received(big.len);
    try testing.expectEqual(Phase.failed, p.phase);
}
