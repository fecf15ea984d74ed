//! Test helpers for applications built on saker: build a request as a connection would hand
//! it to a handler, run a handler (or a `Router`, or middleware through one) on it, and read
//! the response back (status, headers, body), with no server and no socket. The response is
//! never sent, so what a test reads is what the handler produced.
//!
//! ```zig
//! var arena: std.heap.ArenaAllocator = .init(std.testing.allocator);
//! defer arena.deinit();
//! var call: saker.testing.Call = undefined;
//! try call.run(&app, .{ .target = "/users/7", .arena = arena.allocator() });
//! try std.testing.expectEqual(saker.http.Status.ok, call.response.status);
//! try std.testing.expectEqualStrings("user 7", call.body());
//! ```
//!
//! The README's "Testing a handler" runs this against its example handler (tests/readme.zig).

/// One request and its response (see `Call.Options` for what the request holds).
pub const Call = @import("testing/HandlerCall.zig");
