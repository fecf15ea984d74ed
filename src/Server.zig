//! `Server(Handler)`: a server with the user's handler built in at compile time. It checks the
//! handler's shape (a `@compileError` names the expected signature), binds one listener per
//! worker, starts the chosen engine on worker threads and shuts down gracefully.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const posix = std.posix;
const Config = @import("Config.zig");
const Request = @import("Request.zig");
const Response = @import("Response.zig");
const Worker = @import("Worker.zig");
const engine = @import("engine.zig");
const websocket = @import("websocket.zig");
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

/// A server for `Handler`: see DESIGN.md §1.
pub fn Server(comptime Handler: type) type {
    comptime checkHandler(Handler);
    comptime checkWebSocket(Handler);
    return struct {
        const ServerOfHandler = @This();

        gpa: std.mem.Allocator,
        handler: *Handler,
        config: Config,
        control: engine.Control,
        /// One listener per engine thread (SO_REUSEPORT), all on `port`.
        listeners: []socket.Listener,
        workers: []Worker,
        connections_per_worker: u32,
        bound_port: u16,
        /// Whether the engines took ownership of the listeners.
        served: bool = false,
        /// Engine threads still running.
        running: std.atomic.Value(u32) = .init(0),

        /// Why `init` failed.
        pub const InitError = error{ InvalidConfig, OutOfMemory } || socket.ListenError;

        /// Validates `config` and binds the listeners, so `port()` is known on return.
        /// `handler` must outlive the server; it is shared by every worker thread.
        pub fn init(gpa: std.mem.Allocator, handler: *Handler, config: Config) InitError!ServerOfHandler {
            var reason: []const u8 = "";
            config.validate(&reason) catch |err| {
                log.err("invalid configuration: {s}", .{reason});
                return err;
            };
            const thread_count: u32 = switch (config.engine) {
                .blocking => 1,
                else => config.workerCount(),
            };
            var control = engine.Control.init(config.shutdown_timeout_ms) catch return error.SystemResources;
            errdefer control.deinit();
            const listeners = try gpa.alloc(socket.Listener, thread_count);
            errdefer gpa.free(listeners);
            var bound: usize = 0;
            errdefer for (listeners[0..bound]) |l| l.close();
            var port_number = config.port;
            for (listeners) |*listener| {
                listener.* = try socket.listen(.{
                    .host = config.host,
                    .port = port_number,
                    .backlog = config.backlog,
                    .nonblocking = true,
                });
                port_number = listener.port;
                bound += 1;
            }
            const per_worker: u32 = switch (config.engine) {
                .blocking => 1,
                else => std.math.divCeil(u32, config.connections_max, thread_count) catch unreachable,
            };
            return .{
                .gpa = gpa,
                .handler = handler,
                .config = config,
                .control = control,
                .listeners = listeners,
                .workers = &.{},
                .connections_per_worker = per_worker,
                .bound_port = port_number,
            };
        }

        /// Closes what `init` opened. Asserts `serve`/`run` returned (if it was called).
        pub fn deinit(server: *ServerOfHandler) void {
            if (!server.served) for (server.listeners) |l| l.close();
            server.gpa.free(server.listeners);
            server.control.deinit();
            server.* = undefined;
        }

        /// The port the listeners are bound to (the real one when `config.port` was 0).
        pub fn port(server: *const ServerOfHandler) u16 {
            return server.bound_port;
        }

        /// Asks the server to stop: no new connections; in-flight requests finish (up to
        /// `shutdown_timeout_ms`), then `serve` returns. Safe from any thread.
        pub fn stop(server: *ServerOfHandler) void {
            server.control.stop();
        }

        fn dispatchHandle(context: *anyopaque, req: *Request, res: *Response) anyerror!void {
            const handler: *Handler = @ptrCast(@alignCast(context));
            return handler.handle(req, res);
        }

        /// Serves until `stop` is called; returns after in-flight requests are done.
        pub fn serve(server: *ServerOfHandler) !void {
            const threads = try server.start();
            defer server.gpa.free(threads);
            for (threads) |thread| thread.join();
            server.finish();
        }

        /// Serves until SIGINT or SIGTERM (or `stop`), then shuts down gracefully and returns.
        /// A second signal during the shutdown exits the process at once (status 1).
        pub fn run(server: *ServerOfHandler) !void {
            var mask = posix.sigemptyset();
            posix.sigaddset(&mask, .INT);
            posix.sigaddset(&mask, .TERM);
            var old_mask: posix.sigset_t = undefined;
            // Blocked before the engine threads exist, so they inherit the mask and the
            // signals reach only the signalfd.
            posix.sigprocmask(linux.SIG.BLOCK, &mask, &old_mask);
            defer posix.sigprocmask(linux.SIG.SETMASK, &old_mask, null);
            const signal_fd = try posix.signalfd(-1, &mask, linux.SFD.CLOEXEC);
            defer _ = linux.close(signal_fd);

            const threads = try server.start();
            defer server.gpa.free(threads);
            var fds = [_]posix.pollfd{
                .{ .fd = signal_fd, .events = posix.POLL.IN, .revents = 0 },
                .{ .fd = server.control.wake_fd, .events = posix.POLL.IN, .revents = 0 },
            };
            _ = try posix.poll(&fds, -1);
            if (fds[0].revents != 0) {
                readSignal(signal_fd);
                log.info("signal received: finishing in-flight requests (up to {d} ms)", .{server.config.shutdown_timeout_ms});
            }
            server.control.stop();
            // Wait for the engines while watching for a second signal.
            while (server.running.load(.acquire) > 0) {
                var signal_only = [_]posix.pollfd{.{ .fd = signal_fd, .events = posix.POLL.IN, .revents = 0 }};
                if (try posix.poll(&signal_only, 20) > 0) {
                    log.warn("second signal: exiting now", .{});
                    std.process.exit(1);
                }
            }
            for (threads) |thread| thread.join();
            server.finish();
        }

        fn readSignal(signal_fd: linux.fd_t) void {
            var info: linux.signalfd_siginfo = undefined;
            _ = posix.read(signal_fd, std.mem.asBytes(&info)) catch {};
        }

        /// Creates the workers and starts one engine thread per listener.
        fn start(server: *ServerOfHandler) ![]std.Thread {
            assert(!server.served);
            std.process.raiseFileDescriptorLimit();
            ignoreSigpipe();
            const count = server.listeners.len;
            server.workers = try server.gpa.alloc(Worker, count);
            var initialized: usize = 0;
            errdefer {
                for (server.workers[0..initialized]) |*w| w.deinit();
                server.gpa.free(server.workers);
            }
            for (server.workers) |*worker| {
                try worker.init(server.gpa, &server.config, .{
                    .context = server.handler,
                    .handle = dispatchHandle,
                    .websocket = if (@hasDecl(Handler, "WebSocket")) &WebSocketDispatch(Handler).callbacks else null,
                }, server.connections_per_worker);
                initialized += 1;
            }
            const threads = try server.gpa.alloc(std.Thread, count);
            errdefer server.gpa.free(threads);
            server.served = true;
            for (threads, 0..) |*thread, i| {
                _ = server.running.fetchAdd(1, .acq_rel);
                thread.* = std.Thread.spawn(.{}, engineMain, .{ server, i }) catch |err| {
                    // Threads already started stop with the rest.
                    _ = server.running.fetchSub(1, .acq_rel);
                    server.control.stop();
                    for (threads[0..i]) |t| t.join();
                    for (server.listeners[i..]) |l| l.close();
                    return err;
                };
            }
            return threads;
        }

        fn engineMain(server: *ServerOfHandler, index: usize) void {
            defer _ = server.running.fetchSub(1, .acq_rel);
            const worker = &server.workers[index];
            const listener = server.listeners[index];
            Worker.current = worker;
            defer Worker.current = null;
            switch (server.config.engine) {
                .epoll => engine.Epoll.run(worker, listener, &server.control, server.connections_per_worker),
                .blocking => engine.Blocking.run(worker, listener, &server.control),
                .thread_per_connection, .worker_pool, .io_uring => {
                    log.err("engine {t} is not available in this build", .{server.config.engine});
                    listener.close();
                    server.control.stop();
                },
            }
        }

        fn finish(server: *ServerOfHandler) void {
            for (server.workers) |*worker| worker.deinit();
            server.gpa.free(server.workers);
            server.workers = &.{};
        }
    };
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
