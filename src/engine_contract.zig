//! The contract between an engine and a connection. An engine asks the connection what to do
//! next (`Next`), does it with its syscalls (through `engine/driver.zig`, the one loop that
//! interprets `Next`), and reports back. The functions below are everything an engine, the
//! driver and the handler pool may call on a `Connection`; `check` makes that a compile-time
//! fact: every public function of `Connection` is listed here with its type, and every listed
//! one exists with that type. Engines reach the connection's protocol only through them.
const std = @import("std");
const posix = std.posix;
const http = @import("http.zig");
const Exchange = @import("Exchange.zig");
const Config = @import("Config.zig");
const Handoff = @import("Handoff.zig");
const Listening = @import("Listening.zig");

/// What the engine must do next for a connection.
pub const Next = union(enum) {
    /// Read into `recvBuffer()` when the socket is readable, then call `onRecv`.
    recv,
    /// Write these bytes (one writev), then call `onSend` with the count written.
    send: []const posix.iovec_const,
    /// Send this file range (sendfile), then call `onSend` with the count sent.
    send_file: File,
    /// The transport holds received bytes the protocol has not seen (its buffer was full):
    /// call `onHeld`, without touching the socket.
    recv_held,
    /// Read file bytes into `buffer` (pread), then call `onFileRead` with the count read: a
    /// transport that cannot hand a file to sendfile (TLS) encrypts them.
    pread: Pread,
    /// Nothing to do until the worker's completion event fires (a pool thread runs the
    /// handler); then call `onPoolEvent`.
    wait,
    /// shutdown(SHUT_WR), then call `onShutdown`.
    shutdown,
    /// Close the socket, then call `deinit`.
    close,
};

/// The file range of `Next.send_file`.
pub const File = http.FileRange;

/// What `Next.pread` reads: `buffer.len` bytes (or fewer at the end) of `fd` from `offset`.
pub const Pread = struct {
    fd: posix.fd_t,
    offset: u64,
    buffer: []u8,
};

const Call = struct { name: []const u8, T: type };

/// The calls of the contract and their types, for a connection type `C` whose workers are
/// `W`.
fn calls(comptime C: type, comptime W: type) []const Call {
    return &.{
        // Life.
        .{ .name = "init", .T = fn (*W) C },
        .{ .name = "initParked", .T = fn (u64, *const Config, *const Handoff.Sink, *const Listening) C },
        .{ .name = "deinit", .T = fn (*C) void },
        // The next action and its outcome (the driver).
        .{ .name = "next", .T = fn (*const C) Next },
        .{ .name = "recvBuffer", .T = fn (*C) ?[]u8 },
        .{ .name = "onRecv", .T = fn (*C, usize) void },
        .{ .name = "onWouldBlock", .T = fn (*C) void },
        .{ .name = "onHeld", .T = fn (*C) void },
        .{ .name = "onFileRead", .T = fn (*C, usize) void },
        .{ .name = "onSend", .T = fn (*C, usize) void },
        .{ .name = "fileFollows", .T = fn (*const C) ?File },
        .{ .name = "closesAfterSend", .T = fn (*const C) bool },
        .{ .name = "onShutdown", .T = fn (*C) void },
        .{ .name = "onError", .T = fn (*C) void },
        // Time and shutdown (the engines' sweeps).
        .{ .name = "deadline", .T = fn (*const C) u64 },
        .{ .name = "onTimeout", .T = fn (*C) void },
        .{ .name = "drain", .T = fn (*C) void },
        .{ .name = "idle", .T = fn (*const C) bool },
        .{ .name = "saysGoodbye", .T = fn (*const C) bool },
        // Work from other threads: WebSocket sends, the handler pool.
        .{ .name = "websocketOpen", .T = fn (*const C) bool },
        .{ .name = "onWake", .T = fn (*C) void },
        .{ .name = "handling", .T = fn (*const C) bool },
        .{ .name = "onPoolEvent", .T = fn (*C) void },
        .{ .name = "runHandlerOnPool", .T = fn (*C) void },
        .{ .name = "completionLink", .T = fn (*C) *Exchange.CompletionLink },
        // A `worker_pool` connection keeps its worker while it waits if it holds state.
        .{ .name = "holdsState", .T = fn (*const C) bool },
    };
}

/// Asserts at compile time that `C` (a connection whose workers are `W`) offers exactly the
/// contract's public functions.
pub fn check(comptime C: type, comptime W: type) void {
    @setEvalBranchQuota(20_000);
    const list = calls(C, W);
    for (list) |call| {
        if (!@hasDecl(C, call.name)) @compileError("the engine contract needs " ++ @typeName(C) ++ "." ++ call.name);
        if (@TypeOf(@field(C, call.name)) != call.T) {
            @compileError(@typeName(C) ++ "." ++ call.name ++ " must be `" ++ @typeName(call.T) ++ "`, not `" ++
                @typeName(@TypeOf(@field(C, call.name))) ++ "`");
        }
    }
    for (@typeInfo(C).@"struct".decl_names) |name| {
        if (@typeInfo(@TypeOf(@field(C, name))) != .@"fn") continue;
        const listed = for (list) |call| {
            if (std.mem.eql(u8, call.name, name)) break true;
        } else false;
        if (!listed) @compileError(@typeName(C) ++ "." ++ name ++ " is public but not in the engine contract (src/engine_contract.zig)");
    }
}
