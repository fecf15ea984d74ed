//! `Server(Handler)`: a server with the user's handler built in at compile time. It checks the
//! handler's shape (a `@compileError` names the expected signature), binds one listener per
//! worker, starts the chosen engine on worker threads and shuts down gracefully.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const posix = std.posix;
const TlsContext = @import("tls/Context.zig");
const proxy_header = @import("proxy_header.zig");
const Metrics = @import("Metrics.zig");
const Upgrade = @import("Upgrade.zig");
const sync = @import("sync.zig");
const Config = @import("Config.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const Worker = @import("Worker.zig");
const Done = @import("Done.zig");
const Arena = @import("Arena.zig");
const HandlerPool = @import("HandlerPool.zig");
const Prefork = @import("Prefork.zig");
const BodyAction = Worker.BodyAction;
const engine = @import("engine.zig");
const websocket = @import("websocket.zig");
const body_decoding = @import("body_decoding.zig");
const socket = engine.socket;

const log = std.log.scoped(.saker);

/// The signature every handler must have, for error messages.
fn expectedSignature(comptime Handler: type) []const u8 {
    return "pub fn handle(self: *" ++ @typeName(Handler) ++
        ", req: *saker.Request, res: *saker.Response) !void";
}

/// Checks at compile time that `Handler` is a struct with a usable `handle`.
pub fn checkHandler(comptime Handler: type) void {
    const expected = expectedSignature(Handler);
    if (@typeInfo(Handler) != .@"struct")
        @compileError("a saker handler must be a struct declaring `" ++ expected ++ "`; got " ++ @typeName(Handler));
    if (!@hasDecl(Handler, "handle"))
        @compileError(@typeName(Handler) ++ " must declare `" ++ expected ++ "`");
    const info = @typeInfo(@TypeOf(Handler.handle));
    if (info != .@"fn")
        @compileError(@typeName(Handler) ++ ".handle must be a function: `" ++ expected ++ "`");
    const f = info.@"fn";
    const wrong = "wrong signature for " ++ @typeName(Handler) ++ ".handle: expected `" ++ expected ++ "`";
    if (f.param_types.len != 3) @compileError(wrong ++ " (it must take 3 parameters)");
    const self_type = f.param_types[0] orelse @compileError(wrong);
    if (self_type != *Handler and self_type != *const Handler)
        @compileError(wrong ++ " (the first parameter must be *" ++ @typeName(Handler) ++ ")");
    if (f.param_types[1] != *Request) @compileError(wrong ++ " (the second parameter must be *saker.Request)");
    if (f.param_types[2] != *Response) @compileError(wrong ++ " (the third parameter must be *saker.Response)");
    const Return = f.return_type orelse @compileError(wrong);
    const ok = switch (@typeInfo(Return)) {
        .void => true,
        .error_union => |eu| eu.payload == void,
        else => false,
    };
    if (!ok) @compileError(wrong ++ " (it must return void or !void)");
    if (@hasDecl(Handler, "onHead")) checkHook(Handler, "onHead", &.{ *Request, *Response }, BodyAction, .may_fail, "pub fn onHead(self: *" ++ @typeName(Handler) ++
        ", req: *saker.Request, res: *saker.Response) !saker.BodyAction");
    if (@hasDecl(Handler, "onBody")) checkHook(Handler, "onBody", &.{ *Request, *Response, []const u8 }, void, .may_fail, "pub fn onBody(self: *" ++ @typeName(Handler) ++
        ", req: *saker.Request, res: *saker.Response, chunk: []const u8) !void");
    if (@hasDecl(Handler, "onTick")) checkHook(Handler, "onTick", &.{u32}, void, .infallible, "pub fn onTick(self: *" ++ @typeName(Handler) ++
        ", worker_index: u32) void");
    if (@hasDecl(Handler, "mayBlock")) checkHook(Handler, "mayBlock", &.{*const Request}, bool, .infallible, "pub fn mayBlock(self: *const " ++ @typeName(Handler) ++
        ", req: *const saker.Request) bool");
    if (@hasDecl(Handler, "onDone")) checkHook(Handler, "onDone", &.{*const Done}, void, .infallible, "pub fn onDone(self: *" ++ @typeName(Handler) ++
        ", done: *const saker.Done) void");
    if (@hasDecl(Handler, "wantsDone")) checkHook(Handler, "wantsDone", &.{}, bool, .infallible, "pub fn wantsDone(self: *const " ++ @typeName(Handler) ++
        ") bool");
    if (@hasDecl(Handler, "wantsMayBlock")) checkHook(Handler, "wantsMayBlock", &.{}, bool, .infallible, "pub fn wantsMayBlock(self: *const " ++ @typeName(Handler) ++
        ") bool");
    if (@hasDecl(Handler, "wantsMayBlock") and !@hasDecl(Handler, "mayBlock"))
        @compileError(@typeName(Handler) ++ " declares wantsMayBlock but no `pub fn mayBlock(...)` for it to turn off");
    if (@hasDecl(Handler, "onBody") and !@hasDecl(Handler, "onHead"))
        @compileError(@typeName(Handler) ++ " declares onBody but no `pub fn onHead(...) !saker.BodyAction` to ask for a streamed body");
    if (declares(Handler, "accepts_content_encoding") and declares(Handler, "decodes_content_encoding"))
        @compileError(@typeName(Handler) ++ " declares both accepts_content_encoding (it decodes request bodies itself) " ++
            "and decodes_content_encoding (the server decodes them for it): keep one");
}

/// Whether `Handler` declares `pub const name = true`.
fn declares(comptime Handler: type, comptime name: []const u8) bool {
    return @hasDecl(Handler, name) and @field(Handler, name);
}

/// RFC 9110 §15.5.16: a body in a coding the handler does not decode is 415, and
/// `Accept-Encoding` in the answer says which codings a request body may use (§12.5.3).
fn refuseCodedBody(res: *Response) Response.Error!void {
    try res.header("Accept-Encoding", "identity");
    res.status = .unsupported_media_type;
    res.content_type = "text/plain; charset=utf-8";
    res.setBody("415 Unsupported Media Type: request bodies in a Content-Encoding are not accepted here\n");
}

/// Checks an optional hook: `self` (pointer to the handler), then `params`, returning
/// `Payload`, or an error union of it when it `.may_fail`.
fn checkHook(
    comptime Handler: type,
    comptime name: []const u8,
    comptime params: []const type,
    comptime Payload: type,
    comptime failure: enum { may_fail, infallible },
    comptime expected: []const u8,
) void {
    const wrong = "wrong signature for " ++ @typeName(Handler) ++ "." ++ name ++ ": expected `" ++ expected ++ "`";
    const info = @typeInfo(@TypeOf(@field(Handler, name)));
    if (info != .@"fn") @compileError(wrong);
    const f = info.@"fn";
    if (f.param_types.len != params.len + 1) @compileError(wrong);
    const self_type = f.param_types[0] orelse @compileError(wrong);
    if (self_type != *Handler and self_type != *const Handler) @compileError(wrong);
    for (params, f.param_types[1..]) |want, got| if (got != want) @compileError(wrong);
    const Return = f.return_type orelse @compileError(wrong);
    const ok = Return == Payload or switch (@typeInfo(Return)) {
        .error_union => |eu| eu.payload == Payload and failure == .may_fail,
        else => false,
    };
    if (!ok) @compileError(wrong);
}

/// The WebSocket callbacks a handler may declare in `pub const WebSocket = struct { ... }`, with
/// the parameters after `self: *Handler` and whether the callback may fail.
const websocket_callbacks = [_]struct {
    name: []const u8,
    params: []const type,
    signature: []const u8,
    required: bool,
}{
    .{ .name = "onOpen", .params = &.{websocket.Conn}, .signature = "conn: saker.websocket.Conn) !void", .required = false },
    .{ .name = "onMessage", .params = &.{ websocket.Conn, websocket.Message }, .signature = "conn: saker.websocket.Conn, message: saker.websocket.Message) !void", .required = true },
    .{ .name = "onClose", .params = &.{ websocket.Conn, websocket.CloseCode, []const u8 }, .signature = "conn: saker.websocket.Conn, code: saker.websocket.CloseCode, reason: []const u8) void", .required = false },
    .{ .name = "onPing", .params = &.{ websocket.Conn, []const u8 }, .signature = "conn: saker.websocket.Conn, payload: []const u8) void", .required = false },
    .{ .name = "onPong", .params = &.{ websocket.Conn, []const u8 }, .signature = "conn: saker.websocket.Conn, payload: []const u8) void", .required = false },
};

/// Checks at compile time that `Handler.WebSocket`, if declared, holds callbacks with the
/// right signatures; a wrong one is a compile error naming the expected signature.
pub fn checkWebSocket(comptime Handler: type) void {
    if (!@hasDecl(Handler, "WebSocket")) return;
    const name = @typeName(Handler);
    if (@TypeOf(Handler.WebSocket) != type or @typeInfo(Handler.WebSocket) != .@"struct")
        @compileError(name ++ ".WebSocket must be a struct type declaring the WebSocket callbacks (onMessage, and optionally onOpen, onClose, onPing, onPong)");
    const WebSocket = Handler.WebSocket;
    for (websocket_callbacks) |callback| {
        const expected = "pub fn " ++ callback.name ++ "(self: *" ++ name ++ ", " ++ callback.signature;
        if (!@hasDecl(WebSocket, callback.name)) {
            if (callback.required) @compileError(name ++ ".WebSocket must declare `" ++ expected ++ "`");
            continue;
        }
        const wrong = "wrong signature for " ++ name ++ ".WebSocket." ++ callback.name ++ ": expected `" ++ expected ++ "`";
        const info = @typeInfo(@TypeOf(@field(WebSocket, callback.name)));
        if (info != .@"fn") @compileError(wrong);
        const f = info.@"fn";
        if (f.param_types.len != callback.params.len + 1) @compileError(wrong);
        const self_type = f.param_types[0] orelse @compileError(wrong);
        if (self_type != *Handler and self_type != *const Handler) @compileError(wrong ++ " (the first parameter must be *" ++ name ++ ")");
        for (callback.params, f.param_types[1..]) |want, got| if (got != want) @compileError(wrong);
        const Return = f.return_type orelse @compileError(wrong);
        const ok = switch (@typeInfo(Return)) {
            .void => true,
            .error_union => |eu| eu.payload == void,
            else => false,
        };
        if (!ok) @compileError(wrong ++ " (it must return void or !void)");
    }
}

/// Type-erased calls into `Handler.WebSocket` (for `Worker.Dispatch`).
fn WebSocketDispatch(comptime Handler: type) type {
    return struct {
        const WebSocket = Handler.WebSocket;

        const callbacks: websocket.Callbacks = .{
            .onOpen = if (@hasDecl(WebSocket, "onOpen")) onOpen else null,
            .onMessage = onMessage,
            .onClose = if (@hasDecl(WebSocket, "onClose")) onClose else null,
            .onPing = if (@hasDecl(WebSocket, "onPing")) onPing else null,
            .onPong = if (@hasDecl(WebSocket, "onPong")) onPong else null,
        };

        fn self(context: *anyopaque) *Handler {
            return @ptrCast(@alignCast(context));
        }

        fn onOpen(context: *anyopaque, conn: websocket.Conn) anyerror!void {
            return WebSocket.onOpen(self(context), conn);
        }

        fn onMessage(context: *anyopaque, conn: websocket.Conn, message: websocket.Message) anyerror!void {
            return WebSocket.onMessage(self(context), conn, message);
        }

        fn onClose(context: *anyopaque, conn: websocket.Conn, code: websocket.CloseCode, reason: []const u8) void {
            logFailure("onClose", WebSocket.onClose(self(context), conn, code, reason));
        }

        fn onPing(context: *anyopaque, conn: websocket.Conn, payload: []const u8) void {
            logFailure("onPing", WebSocket.onPing(self(context), conn, payload));
        }

        fn onPong(context: *anyopaque, conn: websocket.Conn, payload: []const u8) void {
            logFailure("onPong", WebSocket.onPong(self(context), conn, payload));
        }

        fn logFailure(comptime name: []const u8, result: anytype) void {
            if (@typeInfo(@TypeOf(result)) == .error_union) {
                result catch |err| log.warn("WebSocket " ++ name ++ " failed: {t}", .{err});
            }
        }
    };
}

/// A server for `Handler` (README.md, "A handler"): the handler is checked at compile time,
/// and one value of it serves every engine thread.
pub fn Server(comptime Handler: type) type {
    comptime checkHandler(Handler);
    comptime checkWebSocket(Handler);
    return struct {
        const ServerOfHandler = @This();

        gpa: std.mem.Allocator,
        handler: *Handler,
        config: Config,
        control: engine.Control,
        /// One per configured listener (`Config.listenerAt`): where it listens and how.
        endpoints: []Endpoint,
        /// `sockets_per_endpoint` listening sockets per endpoint (SO_REUSEPORT), one per
        /// engine thread: endpoint `e` has `listeners[e * sockets_per_endpoint ..]`.
        listeners: []socket.Listener,
        sockets_per_endpoint: u32,
        /// Sockets that came from a service manager or an upgrading process (`LISTEN_FDS`),
        /// in `gpa`'s memory: each endpoint's engine threads share its share of them.
        inherited: []linux.fd_t = &.{},
        /// The path of this program, read at start, for `upgrade` (a replaced binary keeps
        /// its path; /proc/self/exe would name the old one).
        exe_path: ?[:0]u8 = null,
        /// A new process started by `upgrade`, until it says it serves.
        upgrading: ?Upgrade.Child = null,
        /// `RunOptions.on_reload`, for SIGHUP.
        on_reload: ?RunOptions.Hook = null,
        workers: []Worker,
        connections_per_worker: u32,
        /// Whether serving started (a server serves once).
        served: bool = false,
        /// One per listener while serving: what `stop` takes from it (see `engine.Door`).
        doors: []engine.Door = &.{},
        /// The doors' room for taken connections, in one allocation.
        doorsteps: []linux.fd_t = &.{},
        /// Heap bytes the server may still take beyond its pools (all workers share it).
        budget: Arena.Budget,
        /// What thread-based engines share (set up when serving starts).
        shared: engine.Shared = undefined,
        /// WebSocket sessions of thread-based engines, whose workers live shorter than the
        /// server (`shared.session_pool` points here when set up).
        sessions: websocket.SessionPool = .{},
        /// The `worker_pool` engine's threads and queue.
        pool: engine.WorkerPool = undefined,
        /// Threads for handlers that may block (event engines only).
        handler_pool: HandlerPool = undefined,
        handler_pool_started: bool = false,
        /// Every worker's counters, for `writeMetrics`.
        metrics: Metrics.Registry = .{},

        /// A configured listener, bound.
        pub const Endpoint = struct {
            host: []const u8,
            /// The real port (the kernel's choice when the configured one was 0).
            port: u16,
            /// What every connection of this listener shares: TLS, the PROXY protocol.
            listening: engine.Listening,
            /// The peers a PROXY header is taken from (`listening.proxy.trusted`).
            trusted: []proxy_header.Cidr = &.{},
            /// Room for `host` when it is read back from an inherited socket.
            host_storage: [64]u8 = undefined,

            fn hostText(endpoint: *Endpoint, address: std.Io.net.IpAddress) []const u8 {
                var w: std.Io.Writer = .fixed(&endpoint.host_storage);
                switch (address) {
                    .ip4 => |a| w.print("{d}.{d}.{d}.{d}", .{ a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3] }) catch unreachable,
                    .ip6 => |a| w.print("{f}", .{std.Io.net.Ip6Address.Unresolved{ .bytes = a.bytes, .interface_name = null }}) catch unreachable,
                }
                return w.buffered();
            }
        };

        /// Why `init` failed.
        pub const InitError = error{ InvalidConfig, OutOfMemory, TlsSetupFailed } || socket.ListenError;

        /// Validates `config` and binds the listeners, so `port()` is known on return.
        /// `handler` must outlive the server; it is shared by every worker thread.
        pub fn init(gpa: std.mem.Allocator, handler: *Handler, config: Config) InitError!ServerOfHandler {
            var reason: []const u8 = "";
            config.validate(&reason) catch |err| {
                log.err("invalid configuration: {s}", .{reason});
                return err;
            };
            const endpoint_count = config.listenerCount();
            const endpoints = try gpa.alloc(Endpoint, endpoint_count);
            errdefer gpa.free(endpoints);
            // Certificates first: a bad file is named before any port is taken.
            var made: usize = 0;
            errdefer for (endpoints[0..made]) |*e| freeEndpoint(gpa, e);
            for (endpoints, 0..) |*endpoint, i| {
                const listener = config.listenerAt(i);
                endpoint.* = .{ .host = listener.host, .port = listener.port, .listening = .{} };
                errdefer freeEndpoint(gpa, endpoint);
                if (listener.proxy_protocol) |proxy| {
                    endpoint.trusted = try gpa.alloc(proxy_header.Cidr, proxy.from.len);
                    for (endpoint.trusted, proxy.from) |*network, text| network.* = proxy_header.Cidr.parse(text) orelse {
                        log.err("invalid configuration: proxy_protocol.from: '{s}' is not an address or a network (ADDRESS/BITS)", .{text});
                        return error.InvalidConfig;
                    };
                    endpoint.listening.proxy = .{ .gpa = gpa, .trusted = endpoint.trusted, .timeout_ms = config.header_timeout_ms };
                }
                if (listener.tls) |settings| {
                    const context = try TlsContext.init(gpa, settings);
                    context.offer_http2 = config.http2;
                    endpoint.listening.tls = context;
                }
                made += 1;
            }
            const inherited = socket.inheritedListeners(gpa) catch |err| {
                log.err("the sockets passed by the service manager (LISTEN_FDS) cannot be used: {t}", .{err});
                return error.InvalidConfig;
            };
            errdefer {
                for (inherited) |fd| socket.close(fd);
                gpa.free(inherited);
            }
            // One socket per listener (a service manager), or several (an upgrading saker's
            // per-thread sockets): every one of them needs a thread accepting on it.
            if (inherited.len % endpoint_count != 0) {
                log.err("the service manager passed {d} sockets (LISTEN_FDS), but the configuration has {d} listeners", .{ inherited.len, endpoint_count });
                return error.InvalidConfig;
            }
            const share: u32 = @intCast(inherited.len / endpoint_count);
            const per_endpoint: u32 = switch (config.engine) {
                .blocking => 1,
                else => config.workerCount(),
            };
            // A socket no thread accepts on would hold its connections forever; more threads
            // than `workerCountFor` says would break handlers sized by it. So fewer threads
            // than sockets is refused (an upgrade then fails, and the old process serves on).
            if (share > per_endpoint) {
                log.err("{d} sockets passed per listener (LISTEN_FDS), but only {d} engine threads each: start with at least as many workers", .{ share, per_endpoint });
                return error.InvalidConfig;
            }
            var control = engine.Control.init(.{
                .shutdown_timeout_ms = config.shutdown_timeout_ms,
                .connections_max = config.connections_max,
            }) catch return error.SystemResources;
            errdefer control.deinit();
            const listeners = try gpa.alloc(socket.Listener, per_endpoint * endpoint_count);
            errdefer gpa.free(listeners);
            // Sockets a service manager passed (systemd socket activation) replace the
            // configured addresses, one per listener in order; each is shared by the
            // listener's engine threads.
            if (inherited.len > 0) {
                // The listener's threads take its sockets in turn.
                for (endpoints, 0..) |*endpoint, e| {
                    const mine = inherited[e * share ..][0..share];
                    const address = socket.localAddress(mine[0]);
                    endpoint.port = if (address) |a| a.getPort() else 0;
                    if (address) |a| endpoint.host = endpoint.hostText(a);
                    for (listeners[e * per_endpoint ..][0..per_endpoint], 0..) |*listener, i| {
                        listener.* = .{ .fd = mine[i % share], .port = endpoint.port };
                    }
                    log.info("serving on {s}:{d}, on {d} socket(s) passed by the service manager or the process before", .{ endpoint.host, endpoint.port, share });
                }
            }
            var bound: usize = 0;
            errdefer if (inherited.len == 0) for (listeners[0..bound]) |l| l.close();
            // SO_REUSEPORT would share an explicit port with another server already on it.
            if (inherited.len == 0) for (endpoints) |endpoint| {
                if (endpoint.port != 0) try socket.checkPortFree(endpoint.host, endpoint.port);
            };
            for (endpoints, 0..) |*endpoint, e| {
                if (inherited.len > 0) break;
                for (listeners[e * per_endpoint ..][0..per_endpoint]) |*listener| {
                    listener.* = try socket.listen(.{
                        .host = endpoint.host,
                        .port = endpoint.port,
                        .backlog = config.backlog,
                        .nonblocking = true,
                        .unsent_bytes_max = config.unsent_bytes_max,
                    });
                    endpoint.port = listener.port;
                    bound += 1;
                }
                if (endpoint.listening.tls != null) {
                    // Said once per listener: how file bodies leave it.
                    log.info("TLS on {s}:{d}: file bodies are read, encrypted and written by saker (no kTLS)", .{ endpoint.host, endpoint.port });
                }
            }
            for (endpoints) |endpoint| if (endpoint.listening.tls != null and inherited.len > 0) {
                log.info("TLS on {s}:{d}: file bodies are read, encrypted and written by saker (no kTLS)", .{ endpoint.host, endpoint.port });
            };
            // `connections_max` is counted server-wide (`engine.Control.admit`), and
            // SO_REUSEPORT may send any share of the connections to one listener: each
            // worker reserves room for all of them. The room is address space, touched only
            // as connections arrive.
            const per_worker: u32 = switch (config.engine) {
                .blocking => 1,
                else => config.connections_max,
            };
            return .{
                .gpa = gpa,
                .handler = handler,
                .config = config,
                .control = control,
                .endpoints = endpoints,
                .listeners = listeners,
                .sockets_per_endpoint = per_endpoint,
                .inherited = inherited,
                .workers = &.{},
                .connections_per_worker = per_worker,
                .budget = .init(config.overflow_bytes_max),
            };
        }

        /// Closes what `init` opened. Asserts `serve`/`run` returned (if it was called).
        pub fn deinit(server: *ServerOfHandler) void {
            // Inherited sockets are shared by an endpoint's threads: each is closed once.
            if (server.inherited.len > 0) {
                for (server.inherited) |fd| socket.close(fd);
                server.gpa.free(server.inherited);
            } else for (server.listeners) |l| l.close();
            server.gpa.free(server.listeners);
            if (server.exe_path) |path| server.gpa.free(path);
            server.control.deinit();
            for (server.endpoints) |*endpoint| freeEndpoint(server.gpa, endpoint);
            server.gpa.free(server.endpoints);
            server.* = undefined;
        }

        fn freeEndpoint(gpa: std.mem.Allocator, endpoint: *Endpoint) void {
            if (endpoint.listening.tls) |context| context.deinit();
            endpoint.listening.tls = null;
            gpa.free(endpoint.trusted);
            endpoint.trusted = &.{};
        }

        /// The port of the first listener (`config.port`; the real one when that was 0).
        pub fn port(server: *const ServerOfHandler) u16 {
            return server.endpoints[0].port;
        }

        /// The port of listener `index` (`Config.listenerAt`): the real one when the
        /// configured one was 0.
        pub fn listenerPort(server: *const ServerOfHandler, index: usize) u16 {
            return server.endpoints[index].port;
        }

        /// Writes the server's metrics in the Prometheus text format (`Metrics.render`). Safe
        /// from any thread while the server lives; a scrape sums every worker's counters.
        pub fn writeMetrics(server: *ServerOfHandler, w: *std.Io.Writer) std.Io.Writer.Error!void {
            const total = server.metrics.total();
            var completed: u64 = 0;
            var failed: u64 = 0;
            var tls = false;
            for (server.endpoints) |endpoint| {
                const context = endpoint.listening.tls orelse continue;
                tls = true;
                completed += context.handshakes_completed.load(.monotonic);
                failed += context.handshakes_failed.load(.monotonic);
            }
            try Metrics.render(w, &total, .{
                .connections_open = server.control.connections.load(.monotonic),
                .connections_refused = server.control.connections_refused.load(.monotonic),
                .accept_errors = server.control.accept_errors.load(.monotonic),
                .handler_queue_depth = if (@atomicLoad(bool, &server.handler_pool_started, .acquire)) server.handler_pool.queue.count() else null,
                .tls_handshakes = if (tls) .{ .completed = completed, .failed = failed } else null,
            });
        }

        /// What a `saker.MetricsHandler` reads: this server's metrics.
        pub fn metricsSource(server: *ServerOfHandler) Metrics.Source {
            return .{ .context = server, .write = writeMetricsErased };
        }

        fn writeMetricsErased(context: *anyopaque, w: *std.Io.Writer) std.Io.Writer.Error!void {
            const server: *ServerOfHandler = @ptrCast(@alignCast(context));
            return server.writeMetrics(w);
        }

        /// The endpoint listening socket `index` belongs to.
        fn endpointOf(server: *const ServerOfHandler, index: usize) *const Endpoint {
            return &server.endpoints[index / server.sockets_per_endpoint];
        }

        /// Asks the server to stop: connections made from now on are refused (those the
        /// kernel had already completed are answered, with `Connection: close`); in-flight
        /// requests finish (up to `shutdown_timeout_ms`), then `serve` returns. Safe from any
        /// thread; with `processes > 1`, stops the children too.
        pub fn stop(server: *ServerOfHandler) void {
            server.control.stop();
        }

        /// Whether the handler decodes request bodies sent in a content coding itself
        /// (`pub const accepts_content_encoding = true`).
        const accepts_content_encoding = declares(Handler, "accepts_content_encoding");
        /// Whether the server decodes them for the handler before `handle`
        /// (`pub const decodes_content_encoding = true`, `body_decoding.zig`). With neither,
        /// the server refuses them (415).
        const decodes_content_encoding = declares(Handler, "decodes_content_encoding");

        fn dispatchHandle(context: *anyopaque, req: *Request, res: *Response) anyerror!void {
            const handler: *Handler = @ptrCast(@alignCast(context));
            if (!accepts_content_encoding and req.hasCodedBody()) {
                if (!decodes_content_encoding) return refuseCodedBody(res);
                // A skipped body was never read: the handler sees the request as it came.
                if (!req.body_decoding.skipped) switch (try body_decoding.decode(req, res)) {
                    .decoded => {},
                    .answered => return,
                };
            }
            return handler.handle(req, res);
        }

        fn dispatchOnHead(context: *anyopaque, req: *Request, res: *Response) anyerror!BodyAction {
            const handler: *Handler = @ptrCast(@alignCast(context));
            if (accepts_content_encoding or !req.hasCodedBody()) return handler.onHead(req, res);
            // Not worth reading: `handle` answers 415 (`dispatchHandle`), without asking the
            // handler, whose body it could not decode.
            if (!decodes_content_encoding or !body_decoding.decodable(req)) return .skip;
            const action = try handler.onHead(req, res);
            switch (action) {
                .buffer => {},
                .skip => req.body_decoding.skipped = true,
                // Only a buffered body is decoded: the handler is not asked for one in a
                // coding, and the answer prepared here goes out (as from a failed onHead).
                .stream, .reader => {
                    try body_decoding.refuseUnbuffered(res);
                    return error.CodedBodyNotBuffered;
                },
            }
            return action;
        }

        fn dispatchOnBody(context: *anyopaque, req: *Request, res: *Response, chunk: []const u8) anyerror!void {
            const handler: *Handler = @ptrCast(@alignCast(context));
            if (!@hasDecl(Handler, "onBody")) {
                log.warn("{s}.onHead chose .stream, but it declares no onBody to receive the body", .{@typeName(Handler)});
                return error.NoBodyHook;
            }
            return handler.onBody(req, res, chunk);
        }

        fn dispatchMayBlock(context: *anyopaque, req: *const Request) bool {
            const handler: *Handler = @ptrCast(@alignCast(context));
            return handler.mayBlock(req);
        }

        /// The type-erased hooks the workers call.
        pub const dispatch_table = struct {
            fn make(handler: *Handler) Worker.Dispatch {
                return .{
                    .context = handler,
                    .handle = dispatchHandle,
                    .on_head = if (@hasDecl(Handler, "onHead")) dispatchOnHead else null,
                    // `.stream` from an onHead without onBody fails the request (500, logged).
                    .on_body = if (@hasDecl(Handler, "onHead")) dispatchOnBody else null,
                    .may_block = if (@hasDecl(Handler, "mayBlock")) dispatchMayBlock else null,
                    .tick = if (@hasDecl(Handler, "onTick")) dispatchTick else null,
                    .websocket = if (@hasDecl(Handler, "WebSocket")) &WebSocketDispatch(Handler).callbacks else null,
                    .on_done = if (@hasDecl(Handler, "onDone") and wantsDone(handler)) dispatchOnDone else null,
                };
            }
        };

        /// The handler's optional `pub fn wantsMayBlock(self: *const Handler) bool`, asked once
        /// at start: a handler whose `mayBlock` says yes only in some configurations (uploads
        /// that are off) spares the event loops a handler pool they would never use.
        fn wantsMayBlock(handler: *const Handler) bool {
            if (!@hasDecl(Handler, "wantsMayBlock")) return true;
            return handler.wantsMayBlock();
        }

        /// The handler's optional `pub fn wantsDone(self: *const Handler) bool`, asked once at
        /// start: a handler that declares `onDone` but needs it only in some configurations
        /// (an access log that is off) spares every exchange the bookkeeping.
        fn wantsDone(handler: *const Handler) bool {
            if (!@hasDecl(Handler, "wantsDone")) return true;
            return handler.wantsDone();
        }

        /// The handler's optional `pub fn onDone(self: *Handler, done: *const saker.Done) void`:
        /// called once per response when it is out, or when its connection ended first
        /// (`Done.zig`), on the worker's engine thread.
        fn dispatchOnDone(context: *anyopaque, done: *const Done) void {
            const handler: *Handler = @ptrCast(@alignCast(context));
            handler.onDone(done);
        }

        /// The handler's optional `pub fn onTick(self: *Handler, worker_index: u32) void`:
        /// called about every `Worker.tick_interval_ms` on each worker's engine thread while
        /// it runs (epoll, io_uring, blocking), and once more for each worker after the
        /// engines stopped (from the thread that called `serve`/`run`), e.g. to flush
        /// per-worker buffers.
        fn dispatchTick(context: *anyopaque, worker_index: u32) void {
            const handler: *Handler = @ptrCast(@alignCast(context));
            handler.onTick(worker_index);
        }

        /// How many workers `config` runs: `Request.worker_index` is below it. Each listener
        /// (`Config.listeners`) has engine threads, and so workers, of its own.
        pub fn workerCountFor(config: *const Config) u32 {
            const per_listener: u32 = switch (config.engine) {
                .blocking => 1,
                .thread_per_connection, .worker_pool => return 1,
                .epoll, .io_uring => config.workerCount(),
            };
            return per_listener * @as(u32, @intCast(config.listenerCount()));
        }

        /// Serves until `stop` is called; returns after in-flight requests are done (or
        /// closed at `shutdown_timeout_ms`). A handler is never interrupted: on the thread
        /// engines (`blocking`, `thread_per_connection`, `worker_pool`) `serve` returns once
        /// the last running handler has. Returns `error.EngineFailed` if an engine could not
        /// go on (the log says why) and stopped the server.
        pub fn serve(server: *ServerOfHandler) !void {
            const threads = try server.start();
            defer server.gpa.free(threads);
            for (threads) |thread| thread.join();
            server.finish();
            if (server.control.hasFailed()) return error.EngineFailed;
        }

        /// Serves until SIGINT or SIGTERM (or `stop`), then shuts down gracefully and returns.
        /// A second signal during the shutdown exits the process at once (status 1), and so
        /// does a shutdown still busy 1 s after `shutdown_timeout_ms` (a handler that does
        /// not return).
        /// With `config.processes > 1` the process forks that many children which serve on the
        /// shared port, restarts any that crash, and passes the signals on (see Prefork.zig);
        /// call it before starting threads of your own.
        pub fn run(server: *ServerOfHandler) !void {
            return server.runWith(.{});
        }

        /// What `runWith` does besides serving.
        pub const RunOptions = struct {
            /// Called once SIGINT/SIGTERM are caught (a signal can no longer kill the process
            /// by default) and the server is about to serve: the moment to announce the port.
            ready: ?Ready = null,
            /// A file that gets this process's pid once it serves (rewritten by each new
            /// process of an upgrade).
            pid_file: ?[]const u8 = null,
            /// Called on SIGHUP, after the certificates are reloaded, on the thread that
            /// waits for signals (in each process, with `processes > 1`): the moment to reopen
            /// log files that logrotate moved.
            on_reload: ?Hook = null,

            pub const Hook = struct {
                context: ?*anyopaque,
                call: *const fn (context: ?*anyopaque) void,
            };

            pub const Ready = struct {
                context: ?*anyopaque,
                call: *const fn (context: ?*anyopaque, port: u16) void,
            };
        };

        /// `run`, with `options.ready` called when the server is ready.
        pub fn runWith(server: *ServerOfHandler, options: RunOptions) !void {
            var mask = posix.sigemptyset();
            posix.sigaddset(&mask, .INT);
            posix.sigaddset(&mask, .TERM);
            posix.sigaddset(&mask, .HUP);
            // SIGUSR2 upgrades the binary (one process only: `Upgrade.zig`).
            if (server.config.processes == 1) {
                posix.sigaddset(&mask, .USR2);
                server.exe_path = Upgrade.exePath(server.gpa);
            }
            var old_mask: posix.sigset_t = undefined;
            // Blocked before the engine threads exist, so they inherit the mask and the
            // signals reach only the signalfd.
            posix.sigprocmask(linux.SIG.BLOCK, &mask, &old_mask);
            defer posix.sigprocmask(linux.SIG.SETMASK, &old_mask, null);
            const signal_fd = try posix.signalfd(-1, &mask, linux.SFD.CLOEXEC);
            defer _ = linux.close(signal_fd);
            server.on_reload = options.on_reload;
            if (options.ready) |ready| ready.call(ready.context, server.port());
            if (server.config.processes > 1) {
                try Prefork.run(server.gpa, server.config.processes, .{
                    .signal_fd = signal_fd,
                    .wake_fd = server.control.wake_fd,
                    .shutdown_timeout_ms = server.config.shutdown_timeout_ms,
                }, childMain, server);
                return;
            }
            try server.runUntilSignal(signal_fd, options.pid_file);
        }

        fn childMain(context: *anyopaque) u8 {
            const server: *ServerOfHandler = @ptrCast(@alignCast(context));
            // A fresh stop event and signalfd: the parent's are shared with it across fork,
            // and this child's stop must reach neither its siblings nor the parent.
            server.control.deinit();
            server.control = engine.Control.init(.{
                .shutdown_timeout_ms = server.config.shutdown_timeout_ms,
                .connections_max = server.config.connections_max,
            }) catch return 1;
            var mask = posix.sigemptyset();
            posix.sigaddset(&mask, .INT);
            posix.sigaddset(&mask, .TERM);
            posix.sigaddset(&mask, .HUP);
            const signal_fd = posix.signalfd(-1, &mask, linux.SFD.CLOEXEC) catch return 1;
            server.runUntilSignal(signal_fd, null) catch |err| {
                log.err("worker process failed: {t}", .{err});
                return 1;
            };
            return 0;
        }

        fn runUntilSignal(server: *ServerOfHandler, signal_fd: linux.fd_t, pid_file: ?[]const u8) !void {
            const threads = try server.start();
            defer server.gpa.free(threads);
            // Serving: a process that upgraded to this one may stop now.
            Upgrade.signalReady();
            if (pid_file) |path| writePidFile(path);
            switch (server.waitForStop(signal_fd)) {
                .signal => {
                    log.info("signal received: finishing in-flight requests (up to {d} ms)", .{server.config.shutdown_timeout_ms});
                    // A new process of an upgrade under way holds the sockets too: they are
                    // not shut down under it (it serves on, or fails by itself).
                    if (server.upgrading != null) {
                        for (server.doors) |*door| door.shut = false;
                    }
                },
                .stop => {},
                .upgraded => {
                    log.info("upgrade: the new process serves; finishing in-flight requests (up to {d} ms)", .{server.config.shutdown_timeout_ms});
                    // The sockets are the new process's now: stop accepting, but never
                    // shut them down under it. Idle keep-alive clients get a moment to send
                    // their next request, answered with `Connection: close`, rather than
                    // meet a close.
                    for (server.doors) |*door| door.shut = false;
                    server.control.idle_grace_ms = upgrade_idle_grace_ms;
                },
            }
            server.control.stop();
            // Another thread watches for a second signal (and the deadline) while this one
            // waits for the engines and the pools, however those waits go.
            var watch: ShutdownWatch = .{
                .signal_fd = signal_fd,
                .deadline_ms = engine.monotonicMs() + server.control.remainingMs() + ShutdownWatch.grace_ms,
            };
            const watcher = watch.start();
            for (threads) |thread| thread.join();
            server.finish();
            if (watcher) |thread| watch.finish(thread);
            if (server.control.hasFailed()) return error.EngineFailed;
        }

        /// How long the drain after an upgrade leaves idle keep-alive connections open.
        const upgrade_idle_grace_ms = 1000;

        /// Why serving ends: SIGINT/SIGTERM, a `stop`, or an upgrade whose new process serves.
        const StopReason = enum { signal, stop, upgraded };

        /// Waits for a reason to stop; SIGHUP reloads and SIGUSR2 upgrades meanwhile.
        fn waitForStop(server: *ServerOfHandler, signal_fd: linux.fd_t) StopReason {
            const wake_fd = server.control.wake_fd;
            while (true) {
                var fds = [_]posix.pollfd{
                    .{ .fd = signal_fd, .events = posix.POLL.IN, .revents = 0 },
                    .{ .fd = wake_fd, .events = posix.POLL.IN, .revents = 0 },
                    .{ .fd = if (server.upgrading) |child| child.ready_fd else -1, .events = posix.POLL.IN, .revents = 0 },
                };
                _ = posix.poll(&fds, -1) catch |err| {
                    log.warn("poll: {t}; retrying", .{err});
                    sleepMs(100);
                    continue;
                };
                if (fds[0].revents != 0) {
                    switch (readSignal(signal_fd)) {
                        .HUP => {
                            server.reload() catch {}; // logged; the certificates in use stay
                            if (server.on_reload) |hook| hook.call(hook.context);
                        },
                        .USR2 => server.upgrade(),
                        else => return .signal,
                    }
                    continue;
                }
                if (fds[1].revents != 0) return .stop;
                if (fds[2].revents != 0) {
                    const child = server.upgrading.?;
                    switch (Upgrade.outcome(child)) {
                        .pending => continue,
                        .serving => {
                            log.info("upgrade: process {d} serves on the sockets", .{child.pid});
                            _ = linux.close(child.ready_fd);
                            server.upgrading = null;
                            return .upgraded;
                        },
                        .failed => {
                            log.err("upgrade: the new process (pid {d}) ended before serving; this one goes on", .{child.pid});
                            _ = linux.close(child.ready_fd);
                            var status: i32 = 0;
                            _ = linux.waitpid(child.pid, &status, 0);
                            server.upgrading = null;
                        },
                    }
                }
            }
        }

        /// What SIGUSR2 does: starts the program at this one's path, with the same arguments,
        /// on this process's listening sockets (`Upgrade.zig`). This process serves on until
        /// the new one says it serves too; a failure is logged and changes nothing.
        fn upgrade(server: *ServerOfHandler) void {
            if (server.upgrading != null) return log.warn("upgrade: one is already under way", .{});
            const path = server.exe_path orelse return log.err("upgrade: this program's path is unknown", .{});
            var fds: std.ArrayList(linux.fd_t) = .empty;
            defer fds.deinit(server.gpa);
            for (server.listeners, 0..) |listener, i| {
                if (sharedEarlier(server.listeners, i)) continue;
                fds.append(server.gpa, listener.fd) catch return log.err("upgrade: out of memory", .{});
            }
            log.info("upgrade: starting {s} on {d} listening sockets", .{ path, fds.items.len });
            server.upgrading = Upgrade.start(server.gpa, path, fds.items) catch |err| {
                log.err("upgrade: cannot start {s}: {t}", .{ path, err });
                return;
            };
        }

        /// What SIGHUP does: the TLS certificates of every listener are loaded again from
        /// their files. Open connections are not touched; a failure keeps that listener's
        /// certificates in use, says why in the log, and is returned (after the other
        /// listeners had their turn). Safe from any thread.
        pub fn reload(server: *ServerOfHandler) TlsContext.Error!void {
            var result: TlsContext.Error!void = {};
            for (server.endpoints) |endpoint| {
                const context = endpoint.listening.tls orelse continue;
                context.reload() catch |err| {
                    result = err;
                };
            }
            return result;
        }

        /// Creates the workers (or the pool) and the doors, and starts one engine thread per
        /// listener.
        fn start(server: *ServerOfHandler) ![]std.Thread {
            assert(!server.served);
            std.process.raiseFileDescriptorLimit();
            ignoreSigpipe();
            try server.openDoors();
            errdefer server.retireDoors();
            server.shared = .{
                .gpa = server.gpa,
                .config = &server.config,
                .dispatch = dispatch_table.make(server.handler),
                .budget = &server.budget,
                .control = &server.control,
                .registry = &server.metrics,
            };
            if (server.shared.dispatch.websocket != null and server.workersPerConnection()) {
                // Outlives the connection threads, so a kept `Conn` stays safe to call.
                try server.sessions.init(server.config.connections_max);
                server.shared.session_pool = &server.sessions;
            }
            errdefer server.sessions.deinit();
            const count = server.listeners.len;
            const per_listener_workers = switch (server.config.engine) {
                .epoll, .blocking, .io_uring => count,
                .thread_per_connection, .worker_pool => 0,
            };
            server.workers = try server.gpa.alloc(Worker, per_listener_workers);
            var initialized: usize = 0;
            errdefer {
                for (server.workers[0..initialized]) |*w| w.deinit();
                server.gpa.free(server.workers);
            }
            for (server.workers, 0..) |*worker, index| {
                try worker.init(server.gpa, &server.config, server.shared.dispatch, .{
                    .connections_max = server.connections_per_worker,
                    .stream_exchanges_max = Config.streamExchanges(&server.config, server.config.engine == .blocking),
                    .large_buffers_max = server.config.large_buffers_max,
                    .budget = &server.budget,
                    .listening = &server.endpointOf(index).listening,
                    .registry = &server.metrics,
                    // The blocking engine runs handlers on the connection's thread.
                    .runs_here = server.config.engine == .blocking,
                });
                worker.index = @intCast(index);
                initialized += 1;
            }
            if (server.config.engine == .worker_pool) try server.pool.start(&server.shared, count);
            errdefer if (server.config.engine == .worker_pool) server.pool.stop();
            if (server.handlerThreads()) |thread_count| {
                try server.handler_pool.start(server.gpa, .{
                    .thread_count = thread_count,
                    .queue_max = server.config.handler_queue_max,
                    .stack_bytes = server.config.thread_stack_bytes,
                });
                @atomicStore(bool, &server.handler_pool_started, true, .release); // read by scrapes
                for (server.workers) |*worker| worker.handler_pool = &server.handler_pool;
            }
            errdefer if (server.handler_pool_started) {
                _ = server.handler_pool.stop(0);
                server.handler_pool_started = false;
            };
            const threads = try server.gpa.alloc(std.Thread, count);
            errdefer server.gpa.free(threads);
            server.served = true;
            for (threads, 0..) |*thread, i| {
                thread.* = std.Thread.spawn(.{}, engineMain, .{ server, i }) catch |err| {
                    // Threads already started stop with the rest.
                    server.control.stop();
                    for (threads[0..i]) |t| t.join();
                    return err;
                };
            }
            return threads;
        }

        /// Sets up a door per listener for `stop` (see `engine.Door`).
        fn openDoors(server: *ServerOfHandler) !void {
            const count = server.listeners.len;
            // The kernel queues at most backlog + 1 connections (capped by somaxconn).
            const per_door = @as(usize, @min(server.config.backlog, std.math.maxInt(u16))) + 1;
            server.doors = try server.gpa.alloc(engine.Door, count);
            errdefer server.gpa.free(server.doors);
            server.doorsteps = try server.gpa.alloc(linux.fd_t, count * per_door);
            for (server.doors, server.listeners, 0..) |*door, listener, i| door.* = .{
                .listener_fd = listener.fd,
                // Other processes share the listeners: shutting one down would stop them too.
                // An inherited socket is the service manager's too, which may start another
                // process on it.
                .shut = server.config.processes == 1 and server.inherited.len == 0,
                .nonblocking = switch (server.config.engine) {
                    .epoll, .io_uring => true,
                    .blocking, .thread_per_connection, .worker_pool => false,
                },
                // Threads that share a socket (inherited ones) share its door: the first door
                // of the socket takes what waits.
                .doorstep = if (sharedEarlier(server.listeners, i))
                    server.doorsteps[0..0]
                else
                    server.doorsteps[i * per_door ..][0..per_door],
            };
            server.control.openDoors(server.doors);
        }

        /// Whether listener `i`'s socket is that of an earlier listener too.
        fn sharedEarlier(listeners: []const socket.Listener, i: usize) bool {
            for (listeners[0..i]) |earlier| if (earlier.fd == listeners[i].fd) return true;
            return false;
        }

        /// Takes the doors back once the engines returned, closing connections no engine took.
        fn retireDoors(server: *ServerOfHandler) void {
            for (server.control.retireDoors()) |door| {
                for (door.doorstep[0..door.taken]) |fd| socket.close(fd);
            }
            server.gpa.free(server.doorsteps);
            server.gpa.free(server.doors);
            server.doorsteps = &.{};
            server.doors = &.{};
        }

        fn engineMain(server: *ServerOfHandler, index: usize) void {
            const listener = server.listeners[index];
            const listening = &server.endpointOf(index).listening;
            switch (server.config.engine) {
                .epoll => engine.Epoll.run(&server.workers[index], listener, &server.control, server.connections_per_worker),
                .blocking => engine.Blocking.run(&server.workers[index], listener, &server.control),
                .thread_per_connection => engine.ThreadPerConnection.run(&server.shared, listener, listening),
                .worker_pool => server.pool.accept(listener, listening),
                .io_uring => engine.IoUring.run(&server.workers[index], listener, &server.control, server.connections_per_worker),
            }
        }

        /// Handler pool threads to start: for event engines, when the handler may block (all
        /// of it: `blocking`, or some requests: `mayBlock`).
        fn handlerThreads(server: *const ServerOfHandler) ?u16 {
            switch (server.config.engine) {
                .epoll, .io_uring => {},
                .blocking, .thread_per_connection, .worker_pool => return null,
            }
            if (server.config.handler_threads > 0) return server.config.handler_threads;
            const some_block = @hasDecl(Handler, "mayBlock") and wantsMayBlock(server.handler);
            if ((@hasDecl(Handler, "blocking") and Handler.blocking) or some_block) {
                const cpus = std.Thread.getCpuCount() catch 1;
                return @intCast(@min(cpus * 4, 1024));
            }
            return null;
        }

        fn finish(server: *ServerOfHandler) void {
            server.retireDoors();
            if (server.config.engine == .worker_pool) server.pool.stop();
            if (server.handler_pool_started) {
                // What is left of the shutdown timeout: the engines used the rest.
                if (!server.handler_pool.stop(server.control.remainingMs())) {
                    for (server.workers) |*worker| worker.abandoned = true;
                }
                server.handler_pool_started = false;
            }
            // The last tick, once engines and handler threads are done.
            if (@hasDecl(Handler, "onTick")) {
                if (server.workers.len == 0) server.handler.onTick(0);
                for (server.workers) |*worker| server.handler.onTick(worker.index);
            }
            for (server.workers) |*worker| worker.deinit();
            // A handler thread still running past the timeout uses its worker when it
            // returns: leave the array to the process (`run` exits it soon after) rather than
            // free memory in use. Nothing else is kept.
            const abandoned = server.workers.len > 0 and server.workers[0].abandoned;
            if (!abandoned) server.gpa.free(server.workers);
            server.workers = &.{};
            // Connection threads that outlived the shutdown may still use their sessions.
            if (server.control.connections.load(.acquire) == 0) server.sessions.deinit();
        }

        /// Whether the engine makes its workers per thread (which end before the server).
        fn workersPerConnection(server: *const ServerOfHandler) bool {
            return switch (server.config.engine) {
                .thread_per_connection, .worker_pool => true,
                .blocking, .epoll, .io_uring => false,
            };
        }
    };
}

/// During a shutdown under `run`: a thread that ends the process on a second signal, or when
/// the shutdown outlasts `shutdown_timeout_ms` by `grace_ms` (a handler that does not return
/// keeps its thread, and `serve`, waiting).
const ShutdownWatch = struct {
    signal_fd: linux.fd_t,
    /// When the process exits anyway (monotonic clock).
    deadline_ms: u64,
    /// Readable once the shutdown is over.
    done_fd: linux.fd_t = -1,

    /// Time given beyond `shutdown_timeout_ms` for closing connections and joining threads.
    const grace_ms = 1000;

    /// Starts the watching thread; null (logged) if it cannot.
    fn start(watch: *ShutdownWatch) ?std.Thread {
        watch.done_fd = engine.eventfd() catch |err| {
            log.warn("cannot watch for a second signal during the shutdown: {t}", .{err});
            return null;
        };
        return std.Thread.spawn(.{ .stack_size = sync.threadStackBytes(256 * 1024) }, run, .{watch}) catch |err| {
            log.warn("cannot watch for a second signal during the shutdown: {t}", .{err});
            _ = linux.close(watch.done_fd);
            return null;
        };
    }

    /// The shutdown is over: stops the watching thread.
    fn finish(watch: *ShutdownWatch, thread: std.Thread) void {
        const one: u64 = 1;
        _ = linux.write(watch.done_fd, std.mem.asBytes(&one), @sizeOf(u64));
        thread.join();
        _ = linux.close(watch.done_fd);
    }

    fn run(watch: *ShutdownWatch) void {
        while (true) {
            const now_ms = engine.monotonicMs();
            if (now_ms >= watch.deadline_ms) {
                log.err("shutdown: still busy {d} ms after shutdown_timeout_ms (a handler that does not return?); exiting now", .{grace_ms});
                std.process.exit(1);
            }
            var fds = [_]posix.pollfd{
                .{ .fd = watch.signal_fd, .events = posix.POLL.IN, .revents = 0 },
                .{ .fd = watch.done_fd, .events = posix.POLL.IN, .revents = 0 },
            };
            const wait_ms: i32 = @intCast(@min(watch.deadline_ms - now_ms, 1000));
            _ = posix.poll(&fds, wait_ms) catch {
                sleepMs(20);
                continue;
            };
            if (fds[1].revents != 0) return;
            if (fds[0].revents != 0) {
                switch (readSignal(watch.signal_fd)) {
                    .HUP, .USR2 => continue, // not a stop
                    else => {},
                }
                log.warn("second signal: exiting now", .{});
                std.process.exit(1);
            }
        }
    }
};

/// Writes this process's pid to `path`, through a temporary file renamed over it, so a reader
/// never sees a partial pid. A failure is logged.
fn writePidFile(path: []const u8) void {
    var text_buffer: [16]u8 = undefined;
    const text = std.fmt.bufPrint(&text_buffer, "{d}\n", .{linux.getpid()}) catch unreachable;
    var paths: [2][std.fs.max_path_bytes]u8 = undefined;
    const final = std.fmt.bufPrintSentinel(&paths[0], "{s}", .{path}, 0) catch return log.err("--pid-file: the path is too long", .{});
    const temporary = std.fmt.bufPrintSentinel(&paths[1], "{s}.{d}.tmp", .{ path, linux.getpid() }, 0) catch return log.err("--pid-file: the path is too long", .{});
    const rc = linux.openat(linux.AT.FDCWD, temporary, .{ .ACCMODE = .WRONLY, .CREAT = true, .TRUNC = true, .CLOEXEC = true }, 0o644);
    if (linux.errno(rc) != .SUCCESS) return log.err("pid file {s}: cannot write it ({t})", .{ path, linux.errno(rc) });
    const fd: linux.fd_t = @intCast(rc);
    const written = linux.write(fd, text.ptr, text.len);
    _ = linux.close(fd);
    if (linux.errno(written) != .SUCCESS or written != text.len) return log.err("pid file {s}: cannot write it", .{path});
    if (linux.errno(linux.renameat(linux.AT.FDCWD, temporary, linux.AT.FDCWD, final)) != .SUCCESS)
        return log.err("pid file {s}: cannot rename it into place", .{path});
}

/// Takes one signal from `signal_fd` and says which it was.
fn readSignal(signal_fd: linux.fd_t) linux.SIG {
    var info: linux.signalfd_siginfo = undefined;
    info.signo = 0;
    _ = posix.read(signal_fd, std.mem.asBytes(&info)) catch {};
    return @fromBackingInt(@intCast(info.signo));
}

fn sleepMs(ms: u32) void {
    const pause: linux.timespec = .{ .sec = @intCast(ms / 1000), .nsec = @intCast(@as(u64, ms % 1000) * std.time.ns_per_ms) };
    _ = linux.nanosleep(&pause, null);
}

fn ignoreSigpipe() void {
    // sendfile has no MSG_NOSIGNAL: a client that disconnects mid-file must not kill us.
    const ignore: posix.Sigaction = .{
        .handler = .{ .handler = posix.SIG.IGN },
        .mask = posix.sigemptyset(),
        .flags = 0,
    };
    posix.sigaction(.PIPE, &ignore, null);
}
