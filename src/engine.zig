//! Engines: the code that waits for sockets and makes the syscalls. Every engine drives the
//! same sans-I/O `Connection`; `Kind` is what `Config.engine` and `--engine` choose from.
const std = @import("std");

/// The engines saker offers.
pub const Kind = enum {
    /// One thread: accept a connection, serve it to the end, accept the next.
    blocking,
    /// An accept loop that starts a thread per connection.
    thread_per_connection,
    /// Acceptor threads hand connections to a fixed pool of blocking workers.
    worker_pool,
    /// One thread per worker, each with its own listener and epoll instance.
    epoll,
    /// One thread per worker, each with its own listener and io_uring.
    io_uring,

    /// Parses an engine name as given to `--engine`.
    pub fn parse(name: []const u8) ?Kind {
        return std.meta.stringToEnum(Kind, name);
    }
};

test "Kind.parse: exactly the five names" {
    try std.testing.expectEqual(Kind.epoll, Kind.parse("epoll").?);
    try std.testing.expectEqual(Kind.thread_per_connection, Kind.parse("thread_per_connection").?);
    try std.testing.expectEqual(@as(?Kind, null), Kind.parse("EPOLL"));
    try std.testing.expectEqual(@as(?Kind, null), Kind.parse("uring"));
}
