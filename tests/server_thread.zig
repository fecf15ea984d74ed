//! A server for a test's handler, serving on a thread of its own on an ephemeral loopback
//! port, with the suite's transport applied (`Client.transport`: TLS in the second run).
const std = @import("std");
const testing = std.testing;
const server_allocator = @import("server_allocator.zig").allocator;
const saker = @import("saker");
const Client = @import("Client.zig");

pub fn ServerThread(comptime Handler: type) type {
    return struct {
        const This = @This();
        handler: Handler,
        server: saker.Server(Handler),
        thread: std.Thread,

        /// Serves a default `Handler` on `kind`, with `overrides` (2 workers unless said).
        pub fn start(kind: saker.engine.Kind, overrides: saker.Config) !*This {
            return startWith(kind, .{}, overrides);
        }

        /// Serves `handler` on `kind`, with `overrides` (2 workers unless said).
        pub fn startWith(kind: saker.engine.Kind, handler: Handler, overrides: saker.Config) !*This {
            var config = overrides;
            config.host = "127.0.0.1";
            config.port = 0;
            config.engine = kind;
            config = Client.transport(config);
            if (config.workers == 0) config.workers = 2;
            const running = try testing.allocator.create(This);
            errdefer testing.allocator.destroy(running);
            running.* = .{ .handler = handler, .server = undefined, .thread = undefined };
            running.server = try .init(server_allocator, &running.handler, config);
            errdefer running.server.deinit();
            running.thread = try std.Thread.spawn(.{}, serve, .{&running.server});
            return running;
        }

        fn serve(server: *saker.Server(Handler)) void {
            server.serve() catch |err| std.debug.panic("serve failed: {t}", .{err});
        }

        pub fn stop(running: *This) void {
            running.server.stop();
            running.thread.join();
            running.server.deinit();
            testing.allocator.destroy(running);
        }

        pub fn port(running: *This) u16 {
            return running.server.port();
        }
    };
}
