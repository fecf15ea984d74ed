//! saker: an HTTP/1.1 server library for Linux. `Server(Handler)` builds a server around a
//! handler type at compile time; the protocol core does no I/O, and engines drive it.
const std = @import("std");

/// saker's version.
pub const version = "0.1.0";

/// `std.Options` for a program built on saker: `pub const std_options = saker.std_options;`
/// in its root file. Every thread carries std's alternate signal stack, a thread-local array
/// that is zeroed when the thread starts (256 KiB by default), so a `thread_per_connection`
/// server would hold that much memory per connection. Only std's segfault handler (Debug and
/// ReleaseSafe builds) runs on that stack: other builds do without it.
pub const std_options: std.Options = .{
    .signal_stack_size = if (std.debug.default_enable_segfault_handler) (std.Options{}).signal_stack_size else null,
};

pub const http = @import("http.zig");
pub const http1 = @import("http1.zig");
/// HTTP/2 framing and HPACK (the session that serves HTTP/2 is not written yet).
pub const http2 = @import("http2.zig");
pub const Arena = @import("Arena.zig");
pub const cli = @import("cli.zig");
pub const json = @import("app/json.zig");
pub const sync = @import("sync.zig");
pub const Config = @import("Config.zig");
pub const Connection = @import("Connection.zig");
pub const Exchange = @import("Exchange.zig");
pub const Worker = @import("Worker.zig");
pub const DateCache = @import("DateCache.zig");
pub const Request = @import("Request.zig");
pub const Response = @import("Response.zig");
pub const engine = @import("engine.zig");
pub const Server = @import("Server.zig").Server;
pub const StaticFiles = @import("app/StaticFiles.zig");
pub const AccessLog = @import("app/AccessLog.zig");
pub const websocket = @import("websocket.zig");
pub const tls = @import("tls.zig");
pub const Router = @import("app/Router.zig").Router;
pub const Route = @import("app/Router.zig").Route;
pub const router = @import("app/Router.zig");
pub const middleware = @import("app/middleware.zig");
pub const EventStream = @import("app/EventStream.zig");
/// A health check for load balancers: 200 while serving, 503 while draining.
pub const health = @import("app/health.zig");
pub const HttpsRedirect = @import("app/HttpsRedirect.zig");
/// HTTP Basic authentication against an htpasswd file of bcrypt hashes; `BasicAuth.Guard(H)`
/// puts any handler behind it.
pub const BasicAuth = @import("app/BasicAuth.zig");
/// Server metrics in the Prometheus text format: `Server.writeMetrics`, and the handler that
/// serves them.
pub const Metrics = @import("Metrics.zig");
pub const MetricsHandler = @import("app/MetricsHandler.zig");
pub const percent = @import("percent.zig");
/// The PROXY protocol header (v1, v2) and the networks it is taken from.
pub const proxy_header = @import("proxy_header.zig");
pub const content_type = @import("content_type.zig");
/// Compression on the fly: `Accept-Encoding` negotiation and a streaming zstd/br/gzip
/// encoder; and the decoders that undo a request body's `Content-Encoding`.
pub const compress = @import("compress.zig");
pub const cookies = @import("app/cookies.zig");
pub const multipart = @import("app/multipart.zig");
pub const client_error = @import("client_error.zig");
/// Test helpers: run a handler or router on a request built in the test, read the response.
pub const testing = @import("testing.zig");
pub const ClientError = client_error.ClientError;
/// What a handler's optional `onHead` hook returns: how to receive the request body.
pub const BodyAction = Worker.BodyAction;
/// What a handler's optional `onDone` hook learns once a response is out (access logs).
pub const Done = @import("Done.zig");

test {
    std.testing.refAllDecls(@This());
    _ = @import("fuzz.zig");
    _ = @import("body_decoding.zig");
    _ = @import("clock.zig");
    // Suites that drive sessions through the simulated engine: pulled in from here, so the
    // test-only path to engine/driver.zig joins no import cycle of the library's files.
    _ = @import("connection_test.zig");
    _ = @import("http2_test.zig");
    _ = @import("websocket/session_test.zig");
}
