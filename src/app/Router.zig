//! `Router(Context, options)`: a handler that dispatches on method and path with a route table
//! fixed at compile time. Patterns are compiled into straight-line code that compares the
//! path with each route's literal text and slices out its parameters: no allocation, no
//! hashing, no copy of the path.
//!
//! Patterns: static segments (`/users`), `:name` parameters (one whole, non-empty segment),
//! and a trailing `*name` wildcard (the rest of the path, slashes included, possibly empty).
//! Matching uses the path as sent (percent-encoded), so an encoded '/' (`%2F`) stays inside
//! its segment; `Request.paramDecoded` decodes a parameter.
//!
//! When several patterns match a path, the most specific wins, segment by segment from the
//! left: static before parameter before wildcard. Then the method (RFC 9110 §9):
//! - the first matching route that has the method handles the request; `HEAD` is served by
//!   the `GET` route when there is no `HEAD` route (the server drops the body);
//! - `OPTIONS` without an `OPTIONS` route is answered 204 with `Allow`;
//! - a path that matches only other methods gets 405 with `Allow` (§15.5.6); no match, 404.
//! These two answers pass through the middleware of the path's first route (a CORS
//! middleware on a group answers its preflights); 404 only through the global middleware.
//!
//! Conflicts are compile errors: two routes with the same method and the same pattern shape
//! (`/a/:x` and `/a/:y` are the same shape). `validate` returns the message as a value, so a
//! table can be checked in a test.
//!
//! Middleware is a type with `pub fn handle(req: *Request, res: *Response, next: anytype) !void`
//! that calls `next.run(req, res)` to go on (or not, to answer itself); `next.context` is the
//! router's context. Middleware in `options.middleware` wraps every request (also 404, 405 and
//! automatic OPTIONS); middleware given with `Route.use` wraps only the routes inside it. The
//! chain is built at compile time: every call is direct.
//!
//! A `ClientError` (bad query, cookie, form, JSON, multipart...) that a route handler returns is
//! answered with its 4xx status and a short message, dropping what the handler had built;
//! middleware sees it as an ordinary response.
//!
//! Streamed bodies: a route's handler may be a type instead of a function, declaring
//! `handle`, `onBody(ctx, req, res, chunk) !void` and optionally `onHead(ctx, req, res)
//! !saker.BodyAction` (`ctx` is left out when the context is `void`). The router then receives
//! bodies for that route piece by piece as they arrive (`.stream`, the default when there is no
//! `onHead`) instead of buffering them, and calls `handle` at the end. `req.params` is set in
//! each hook; `req.user_data` carries state between them. Body hooks run before any middleware
//! (they cannot wait for it); check what must be checked in `onHead`. Other routes buffer as
//! usual.
//!
//! Route flags (`Route.with`): `blocking` runs a route's handler and middleware on the
//! server's handler pool on event-loop engines (the router then declares `mayBlock`, and the
//! server starts the pool), leaving the other routes on the loop; `body_reader` calls the
//! handler as soon as the head is in, to read the body as it arrives with `req.bodyReader()`
//! (it implies `blocking`).
const std = @import("std");
const http = @import("../http.zig");
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const client_error = @import("../client_error.zig");

const log = std.log.scoped(.saker);

/// One entry of a route table: a handler for some methods on a pattern, or a group of routes
/// under a prefix or behind middleware. Built with the constructors below, which work as decl
/// literals: `.get("/", index)`.
pub const Route = struct {
    /// Methods served; empty for a group.
    methods: []const http.Method = &.{},
    /// The pattern, or the prefix of a group ("" for none).
    pattern: []const u8,
    /// A struct whose `function` is the handler; `void` for a group.
    handler: type = void,
    /// Routes of a group.
    children: []const Route = &.{},
    /// Middleware types wrapping this group's routes (outermost first).
    middleware: []const type = &.{},
    /// How the server runs this route (or every route of this group); see `with`.
    flags: Flags = .{},

    /// How the server runs a route's handler.
    pub const Flags = struct {
        /// The handler may block (sleep, wait on I/O, stream for long): on `epoll` and
        /// `io_uring` it runs, with its middleware, on the handler pool, which the server then
        /// starts by itself; other routes stay on the event loop. `Response.flush` and
        /// `EventStream` then stream as they go, and a client that went away is noticed.
        blocking: bool = false,
        /// The handler reads the body itself, as it arrives, with `req.bodyReader()` (up to
        /// `Config.streamed_body_bytes_max`; nothing is buffered before `handle` runs).
        /// Implies `blocking`. The handler must be a function, not a type with body hooks.
        body_reader: bool = false,
    };

    /// `r` (a route or a group) with `flags` added:
    /// `.with(.{ .blocking = true }, .get("/events", events))`.
    pub fn with(comptime flags: Flags, comptime r: Route) Route {
        var flagged = r;
        flagged.flags = .{
            .blocking = r.flags.blocking or flags.blocking or flags.body_reader,
            .body_reader = r.flags.body_reader or flags.body_reader,
        };
        return flagged;
    }

    /// A route for `methods` on `pattern`. `handler` is
    /// `fn (ctx: *Context, req: *saker.Request, res: *saker.Response) !void` or, without the
    /// context, `fn (req: *saker.Request, res: *saker.Response) !void`; or a type whose
    /// `handle` is such a function and that receives the request body as it arrives (see
    /// "Streamed bodies" above).
    pub fn route(comptime methods: []const http.Method, comptime pattern: []const u8, comptime handler: anytype) Route {
        return .{ .methods = methods, .pattern = pattern, .handler = HandlerOf(handler) };
    }

    /// A GET route (it also serves HEAD, unless a HEAD route exists for the pattern).
    pub fn get(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.GET}, pattern, handler);
    }

    /// A HEAD route.
    pub fn head(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.HEAD}, pattern, handler);
    }

    /// A POST route.
    pub fn post(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.POST}, pattern, handler);
    }

    /// A PUT route.
    pub fn put(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.PUT}, pattern, handler);
    }

    /// A DELETE route.
    pub fn delete(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.DELETE}, pattern, handler);
    }

    /// A PATCH route.
    pub fn patch(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.PATCH}, pattern, handler);
    }

    /// An OPTIONS route (replaces the automatic answer for its pattern).
    pub fn options(comptime pattern: []const u8, comptime handler: anytype) Route {
        return route(&.{.OPTIONS}, pattern, handler);
    }

    /// `routes` with `prefix` ("/api") in front of their patterns. A route "/" in the group is
    /// the prefix itself.
    pub fn group(comptime prefix: []const u8, comptime routes: []const Route) Route {
        return .{ .pattern = prefix, .children = routes };
    }

    /// `routes` wrapped in `middleware` (outermost first).
    pub fn use(comptime middleware: []const type, comptime routes: []const Route) Route {
        return .{ .pattern = "", .children = routes, .middleware = middleware };
    }
};

fn HandlerOf(comptime handler: anytype) type {
    if (@TypeOf(handler) == type) {
        if (!@hasDecl(handler, "handle") or !@hasDecl(handler, "onBody"))
            @compileError("saker.Router: a route type (" ++ @typeName(handler) ++ ") declares `handle` and `onBody` (and optionally `onHead`)");
        return struct {
            pub const function = handler.handle;
            pub const Hooks = handler;
        };
    }
    return struct {
        pub const function = handler;
        pub const Hooks = void;
    };
}

/// A router's table and global middleware.
pub const Options = struct {
    routes: []const Route,
    /// Middleware wrapping every request, outermost first.
    middleware: []const type = &.{},
    /// Whether every handler may block (sleep, wait on I/O, stream for long): on event-loop
    /// engines they then all run on the handler pool (`Config.handler_threads`), where
    /// `Response.flush` and `EventStream` stream as they go. To move only some routes there,
    /// flag them with `Route.with(.{ .blocking = true }, ...)` instead.
    blocking: bool = false,
};

const method_count = @typeInfo(http.Method).@"enum".field_names.len;
const MethodMask = u16;

fn methodBit(method: http.Method) MethodMask {
    return @as(MethodMask, 1) << @intCast(@backingInt(method));
}

/// A route after its groups are resolved.
const Leaf = struct {
    methods: []const http.Method,
    pattern: []const u8,
    handler: type,
    middleware: []const type,
    flags: Route.Flags,
};

/// What a handler's `onHead` returns (see `Server`): how to receive the body.
pub const BodyAction = @import("../Worker.zig").BodyAction;

/// A piece of a compiled pattern.
const Token = union(enum) {
    /// Text the path must continue with, slashes included.
    literal: []const u8,
    /// A non-empty segment, captured under this name.
    param: []const u8,
    /// The rest of the path, captured under this name.
    wildcard: []const u8,
};

/// How specific a segment is; lower wins.
const Kind = enum(u2) { static, param, wildcard };

const Pattern = struct {
    tokens: []const Token,
    kinds: []const Kind,
    param_count: usize,
    /// The pattern with parameter names erased: equal shapes match the same paths.
    shape: []const u8,
};

const Compiled = union(enum) { ok: Pattern, err: []const u8 };

fn compilePattern(comptime pattern: []const u8) Compiled {
    comptime {
        const fail = struct {
            fn f(comptime why: []const u8) Compiled {
                return .{ .err = std.fmt.comptimePrint("saker.Router: pattern \"{s}\": {s}", .{ pattern, why }) };
            }
        }.f;
        if (pattern.len == 0 or pattern[0] != '/') return fail("must start with '/'");
        var tokens: []const Token = &.{};
        var kinds: []const Kind = &.{};
        var names: []const []const u8 = &.{};
        var shape: []const u8 = "";
        var literal: []const u8 = "/";
        var segments = std.mem.splitScalar(u8, pattern[1..], '/');
        var index: usize = 0;
        const count = std.mem.countScalar(u8, pattern[1..], '/') + 1;
        while (segments.next()) |segment| : (index += 1) {
            const last = index == count - 1;
            shape = shape ++ "/";
            if (segment.len > 0 and (segment[0] == ':' or segment[0] == '*')) {
                const name = segment[1..];
                if (!validName(name)) return fail("parameter names are letters, digits and '_'");
                for (names) |other| if (std.mem.eql(u8, other, name)) return fail("parameter name used twice");
                names = names ++ .{name};
                if (literal.len > 0) tokens = tokens ++ .{Token{ .literal = literal }};
                if (segment[0] == ':') {
                    tokens = tokens ++ .{Token{ .param = name }};
                    kinds = kinds ++ .{Kind.param};
                    shape = shape ++ ":";
                    literal = if (last) "" else "/";
                } else {
                    if (!last) return fail("a '*' wildcard must be the last segment");
                    tokens = tokens ++ .{Token{ .wildcard = name }};
                    kinds = kinds ++ .{Kind.wildcard};
                    shape = shape ++ "*";
                    literal = "";
                }
                continue;
            }
            if (segment.len == 0 and !last) return fail("empty segment ('//')");
            for (segment) |c| if (!staticChar(c))
                return fail("static segments hold only unreserved characters and sub-delims (no ':' or '*' inside, no '%', '?', '#')");
            kinds = kinds ++ .{Kind.static};
            shape = shape ++ segment;
            literal = literal ++ segment ++ (if (last) "" else "/");
        }
        if (literal.len > 0) tokens = tokens ++ .{Token{ .literal = literal }};
        return .{ .ok = .{ .tokens = tokens, .kinds = kinds, .param_count = names.len, .shape = shape } };
    }
}

fn validName(name: []const u8) bool {
    if (name.len == 0) return false;
    for (name) |c| if (!std.ascii.isAlphanumeric(c) and c != '_') return false;
    return true;
}

fn staticChar(c: u8) bool {
    return switch (c) {
        'a'...'z', 'A'...'Z', '0'...'9', '-', '.', '_', '~' => true,
        '!', '$', '&', '\'', '(', ')', '+', ',', ';', '=', '@' => true,
        else => false,
    };
}

/// Whether `a` should be tried before `b`: the first segment where they differ in kind decides.
fn moreSpecific(a: []const Kind, b: []const Kind) bool {
    for (0..@min(a.len, b.len)) |i| {
        if (a[i] != b[i]) return @backingInt(a[i]) < @backingInt(b[i]);
    }
    return a.len > b.len;
}

fn joinPattern(comptime prefix: []const u8, comptime pattern: []const u8) []const u8 {
    if (prefix.len == 0) return pattern;
    if (std.mem.eql(u8, pattern, "/")) return prefix;
    return prefix ++ pattern;
}

const Flattened = union(enum) { ok: []const Leaf, err: []const u8 };

fn flatten(comptime routes: []const Route, comptime prefix: []const u8, comptime middleware: []const type, comptime flags: Route.Flags) Flattened {
    comptime {
        var leaves: []const Leaf = &.{};
        for (routes) |r| {
            const inherited = Route.with(flags, r).flags;
            if (r.handler == void) {
                if (r.pattern.len > 0 and (r.pattern[0] != '/' or r.pattern[r.pattern.len - 1] == '/'))
                    return .{ .err = "saker.Router: group prefix \"" ++ r.pattern ++ "\" must start with '/' and not end with one" };
                switch (flatten(r.children, prefix ++ r.pattern, middleware ++ r.middleware, inherited)) {
                    .ok => |children| leaves = leaves ++ children,
                    .err => |why| return .{ .err = why },
                }
            } else {
                if (r.methods.len == 0) return .{ .err = "saker.Router: route \"" ++ r.pattern ++ "\" has no method" };
                if (inherited.body_reader and r.handler.Hooks != void)
                    return .{ .err = "saker.Router: route \"" ++ r.pattern ++ "\" reads its body with req.bodyReader(), so its handler must be a function, not a type with body hooks" };
                leaves = leaves ++ .{Leaf{
                    .methods = r.methods,
                    .pattern = joinPattern(prefix, r.pattern),
                    .handler = r.handler,
                    .middleware = middleware,
                    .flags = inherited,
                }};
            }
        }
        return .{ .ok = leaves };
    }
}

/// Checks a route table: patterns, group prefixes, and conflicts. Returns the compile error
/// `Router` would raise, or null when the table is fine.
pub fn validate(comptime routes: []const Route) ?[]const u8 {
    comptime {
        @setEvalBranchQuota(100_000);
        const leaves = switch (flatten(routes, "", &.{}, .{})) {
            .ok => |l| l,
            .err => |why| return why,
        };
        var patterns: [leaves.len]Pattern = undefined;
        for (leaves, &patterns) |leaf, *p| {
            p.* = switch (compilePattern(leaf.pattern)) {
                .ok => |ok| ok,
                .err => |why| return why,
            };
            for (leaf.methods, 0..) |method, i| {
                if (method == .CONNECT) return "saker.Router: CONNECT routes are not supported (the server answers 501)";
                for (leaf.methods[0..i]) |earlier| if (earlier == method)
                    return std.fmt.comptimePrint("saker.Router: route \"{s}\" lists {t} twice", .{ leaf.pattern, method });
            }
        }
        for (leaves, 0..) |a, i| for (leaves[0..i], patterns[0..i]) |b, pb| {
            if (!std.mem.eql(u8, patterns[i].shape, pb.shape)) continue;
            for (a.methods) |method| for (b.methods) |other| if (method == other) {
                return std.fmt.comptimePrint("saker.Router: routes conflict: {t} \"{s}\" and {t} \"{s}\" match the same paths", .{ other, b.pattern, method, a.pattern });
            };
        };
        return null;
    }
}

/// A handler type that routes requests to the functions in `options.routes`. Its one field,
/// `context`, is passed to every handler that takes it (`*Context`; `{}` when `Context` is
/// `void`). It declares the body hooks `onHead`/`onBody` only when a route streams its body
/// or reads it with `req.bodyReader()`, and `mayBlock` only when some routes (not all) are
/// flagged `blocking`, so other routers cost nothing before `handle`.
pub fn Router(comptime Context: type, comptime options: Options) type {
    if (comptime validate(options.routes)) |why| @compileError(why);
    const Core = RouterCore(Context, options);
    const hooks = Core.streams or Core.reads;
    const per_route = Core.any_blocking and !options.blocking;
    if (hooks and per_route) return struct {
        const RouterOf = @This();
        /// What handlers receive as their first parameter.
        pub const ContextPtr = Core.ContextPtr;
        /// Whether the server runs every `handle` on its handler pool (`Options.blocking`).
        pub const blocking = options.blocking;
        context: ContextPtr,

        /// Server entry point: global middleware, then routing.
        pub fn handle(router: *RouterOf, req: *Request, res: *Response) anyerror!void {
            return Core.handle(router.context, req, res);
        }
        /// Server hook, before the body is read: streams it for routes with body hooks.
        pub fn onHead(router: *RouterOf, req: *Request, res: *Response) anyerror!BodyAction {
            return Core.onHead(router.context, req, res);
        }
        /// Server hook: a piece of a streamed body, for the route's `onBody`.
        pub fn onBody(router: *RouterOf, req: *Request, res: *Response, chunk: []const u8) anyerror!void {
            return Core.onBody(router.context, req, res, chunk);
        }
        /// Server hook: whether `req` goes to a route flagged `blocking` (handler pool).
        pub fn mayBlock(router: *const RouterOf, req: *const Request) bool {
            _ = router;
            return Core.mayBlock(req);
        }
    };
    if (hooks) return struct {
        const RouterOf = @This();
        /// What handlers receive as their first parameter.
        pub const ContextPtr = Core.ContextPtr;
        /// Whether the server runs every `handle` on its handler pool (`Options.blocking`).
        pub const blocking = options.blocking;
        context: ContextPtr,

        /// Server entry point: global middleware, then routing.
        pub fn handle(router: *RouterOf, req: *Request, res: *Response) anyerror!void {
            return Core.handle(router.context, req, res);
        }
        /// Server hook, before the body is read: streams it for routes with body hooks.
        pub fn onHead(router: *RouterOf, req: *Request, res: *Response) anyerror!BodyAction {
            return Core.onHead(router.context, req, res);
        }
        /// Server hook: a piece of a streamed body, for the route's `onBody`.
        pub fn onBody(router: *RouterOf, req: *Request, res: *Response, chunk: []const u8) anyerror!void {
            return Core.onBody(router.context, req, res, chunk);
        }
    };
    if (per_route) return struct {
        const RouterOf = @This();
        /// What handlers receive as their first parameter.
        pub const ContextPtr = Core.ContextPtr;
        /// Whether the server runs every `handle` on its handler pool (`Options.blocking`).
        pub const blocking = options.blocking;
        context: ContextPtr,

        /// Server entry point: global middleware, then routing.
        pub fn handle(router: *RouterOf, req: *Request, res: *Response) anyerror!void {
            return Core.handle(router.context, req, res);
        }
        /// Server hook: whether `req` goes to a route flagged `blocking` (handler pool).
        pub fn mayBlock(router: *const RouterOf, req: *const Request) bool {
            _ = router;
            return Core.mayBlock(req);
        }
    };
    return struct {
        const RouterOf = @This();
        /// What handlers receive as their first parameter.
        pub const ContextPtr = Core.ContextPtr;
        /// Whether the server runs every `handle` on its handler pool (`Options.blocking`).
        pub const blocking = options.blocking;
        context: ContextPtr,

        /// Server entry point: global middleware, then routing.
        pub fn handle(router: *RouterOf, req: *Request, res: *Response) anyerror!void {
            return Core.handle(router.context, req, res);
        }
    };
}

/// The routing logic of `Router`, with the context passed in.
fn RouterCore(comptime Context: type, comptime options: Options) type {
    return struct {
        /// What handlers receive as their first parameter.
        pub const ContextPtr = if (Context == void) void else *Context;
        /// A route handler after its middleware and error answer are applied.
        const Call = *const fn (context: ContextPtr, req: *Request, res: *Response) anyerror!void;
        /// A route's body hooks.
        const Hooks = struct {
            on_head: ?*const fn (context: ContextPtr, req: *Request, res: *Response) anyerror!BodyAction,
            on_body: *const fn (context: ContextPtr, req: *Request, res: *Response, chunk: []const u8) anyerror!void,
        };

        const leaves = flatten(options.routes, "", &.{}, .{}).ok;

        /// One distinct pattern and its handler for each method.
        const Entry = struct {
            pattern: Pattern,
            calls: [method_count]?Call,
            hooks: [method_count]?Hooks,
            /// Per method: the route's `Route.Flags`.
            flags: [method_count]Route.Flags,
            /// The 405 or automatic OPTIONS answer, inside the middleware of the pattern's
            /// first route (so a CORS middleware on a group sees its preflights).
            fallback: Call,
            methods: MethodMask,
            /// `Allow` value for this entry alone.
            allow: []const u8,
        };

        const entries: []const Entry = blk: {
            @setEvalBranchQuota(100_000);
            var list: []const Entry = &.{};
            for (leaves) |leaf| {
                const pattern = compilePattern(leaf.pattern).ok;
                const call = wrapLeaf(leaf);
                const hooks = wrapHooks(leaf);
                const index: ?usize = for (list, 0..) |e, i| {
                    if (std.mem.eql(u8, e.pattern.shape, pattern.shape) and namesEqual(e.pattern, pattern)) break i;
                } else null;
                var entry: Entry = if (index) |i| list[i] else .{
                    .pattern = pattern,
                    .calls = @splat(null),
                    .hooks = @splat(null),
                    .flags = @splat(.{}),
                    .fallback = &Chain(leaf.middleware, &answerMethod).run,
                    .methods = 0,
                    .allow = "",
                };
                for (leaf.methods) |method| {
                    entry.calls[@backingInt(method)] = call;
                    entry.hooks[@backingInt(method)] = hooks;
                    entry.flags[@backingInt(method)] = leaf.flags;
                    entry.methods |= methodBit(method);
                }
                if (index) |i| {
                    var copy = list[0..list.len].*;
                    copy[i] = entry;
                    list = &copy;
                } else list = list ++ .{entry};
            }
            // Insertion sort by specificity (stable, so equal shapes keep table order).
            var sorted: [list.len]Entry = list[0..list.len].*;
            for (1..sorted.len) |i| {
                var j = i;
                while (j > 0 and moreSpecific(sorted[j].pattern.kinds, sorted[j - 1].pattern.kinds)) : (j -= 1) {
                    const t = sorted[j];
                    sorted[j] = sorted[j - 1];
                    sorted[j - 1] = t;
                }
            }
            for (&sorted) |*e| {
                var mask = e.methods;
                // HEAD is served by GET, and every path answers OPTIONS.
                if (mask & methodBit(.GET) != 0) mask |= methodBit(.HEAD);
                mask |= methodBit(.OPTIONS);
                e.allow = allowText(mask);
            }
            const final = sorted;
            break :blk &final;
        };

        /// Whether some route receives its body in pieces.
        pub const streams = blk: {
            for (leaves) |leaf| if (leaf.handler.Hooks != void) break :blk true;
            break :blk false;
        };

        /// Whether some route reads its body with `req.bodyReader()`.
        pub const reads = blk: {
            for (leaves) |leaf| if (leaf.flags.body_reader) break :blk true;
            break :blk false;
        };

        /// Whether some route is flagged `blocking` (or `body_reader`).
        pub const any_blocking = blk: {
            for (leaves) |leaf| if (leaf.flags.blocking) break :blk true;
            break :blk false;
        };

        pub const params_max = blk: {
            var max: usize = 0;
            for (entries) |e| max = @max(max, e.pattern.param_count);
            break :blk max;
        };

        /// Methods used anywhere in the table, for `OPTIONS *`.
        const table_allow = blk: {
            var mask: MethodMask = methodBit(.OPTIONS);
            for (entries) |e| mask |= e.methods;
            if (mask & methodBit(.GET) != 0) mask |= methodBit(.HEAD);
            break :blk allowText(mask);
        };

        fn namesEqual(a: Pattern, b: Pattern) bool {
            if (a.tokens.len != b.tokens.len) return false;
            for (a.tokens, b.tokens) |x, y| switch (x) {
                .literal => {},
                .param => |name| if (!std.mem.eql(u8, name, y.param)) return false,
                .wildcard => |name| if (!std.mem.eql(u8, name, y.wildcard)) return false,
            };
            return true;
        }

        /// The handler of `leaf` with its error answer and middleware around it.
        fn wrapLeaf(comptime leaf: Leaf) Call {
            const function = leaf.handler.function;
            checkHandler(Context, @TypeOf(function), leaf.pattern);
            const Answered = struct {
                fn call(context: ContextPtr, req: *Request, res: *Response) anyerror!void {
                    const point = res.mark();
                    invoke(function, context, req, res) catch |err| {
                        const reply = client_error.answer(err) orelse return err;
                        if (!res.rollback(point)) return err;
                        log.debug("{s} {s}: {t}", .{ req.method.name(), req.path, err });
                        const parameter = req.fault.nameFor(err) orelse return answer(res, reply.status, reply.body);
                        answerNaming(res, reply, parameter);
                    };
                }
            };
            return &Chain(leaf.middleware, &Answered.call).run;
        }

        fn invoke(comptime function: anytype, context: ContextPtr, req: *Request, res: *Response) anyerror!void {
            if (@typeInfo(@TypeOf(function)).@"fn".param_types.len == 3) return function(context, req, res);
            return function(req, res);
        }

        /// The body hooks of `leaf`, if its handler is a type with them.
        fn wrapHooks(comptime leaf: Leaf) ?Hooks {
            const H = leaf.handler.Hooks;
            if (H == void) return null;
            const with_context = Context != void;
            const ctx = if (with_context) "ctx: *" ++ @typeName(Context) ++ ", " else "";
            const base: usize = if (with_context) 1 else 0;
            if (@typeInfo(@TypeOf(H.onBody)).@"fn".param_types.len != base + 3)
                @compileError("saker.Router: " ++ @typeName(H) ++ ".onBody must be `fn (" ++ ctx ++
                    "req: *saker.Request, res: *saker.Response, chunk: []const u8) !void`");
            if (@hasDecl(H, "onHead") and @typeInfo(@TypeOf(H.onHead)).@"fn".param_types.len != base + 2)
                @compileError("saker.Router: " ++ @typeName(H) ++ ".onHead must be `fn (" ++ ctx ++
                    "req: *saker.Request, res: *saker.Response) !saker.BodyAction`");
            const Adapters = struct {
                fn onHead(context: ContextPtr, req: *Request, res: *Response) anyerror!BodyAction {
                    return if (with_context) H.onHead(context, req, res) else H.onHead(req, res);
                }
                fn onBody(context: ContextPtr, req: *Request, res: *Response, chunk: []const u8) anyerror!void {
                    return if (with_context) H.onBody(context, req, res, chunk) else H.onBody(req, res, chunk);
                }
            };
            return .{
                .on_head = if (@hasDecl(H, "onHead")) &Adapters.onHead else null,
                .on_body = &Adapters.onBody,
            };
        }

        /// The route that will handle `req`: its body hooks (if any), its flags, and how many
        /// parameters it captured into `params`; null when no route has the method.
        const Found = struct { hooks: ?Hooks, flags: Route.Flags, param_count: usize };

        fn findRoute(req: *const Request, params: *[params_max]Request.PathParam) ?Found {
            const method_index = @backingInt(req.method);
            inline for (entries) |entry| {
                if (match(entry.pattern.tokens, req.path, params)) {
                    var index = method_index;
                    if (entry.calls[index] == null and req.method == .HEAD) index = @backingInt(http.Method.GET);
                    // The first pattern with the method handles the request.
                    if (entry.calls[index] != null) return .{
                        .hooks = entry.hooks[index],
                        .flags = entry.flags[index],
                        .param_count = entry.pattern.param_count,
                    };
                }
            }
            return null;
        }

        /// Before the body is read: `.reader` for routes flagged `body_reader`, the route's
        /// own `onHead` (or `.stream`) for routes with body hooks, else `.buffer`.
        pub fn onHead(context: ContextPtr, req: *Request, res: *Response) anyerror!BodyAction {
            var params: [params_max]Request.PathParam = undefined;
            const found = findRoute(req, &params) orelse return .buffer;
            if (found.flags.body_reader) return .reader;
            const hooks = found.hooks orelse return .buffer;
            req.params = params[0..found.param_count];
            defer req.params = &.{};
            if (hooks.on_head) |on_head| return on_head(context, req, res);
            return .stream;
        }

        /// A piece of a streamed body, for the route's `onBody`.
        pub fn onBody(context: ContextPtr, req: *Request, res: *Response, chunk: []const u8) anyerror!void {
            var params: [params_max]Request.PathParam = undefined;
            // Only routes with hooks stream, and the same request finds the same route.
            const found = findRoute(req, &params).?;
            req.params = params[0..found.param_count];
            defer req.params = &.{};
            return found.hooks.?.on_body(context, req, res, chunk);
        }

        /// Whether `req` goes to a route flagged `blocking`.
        pub fn mayBlock(req: *const Request) bool {
            var params: [params_max]Request.PathParam = undefined;
            const found = findRoute(req, &params) orelse return false;
            return found.flags.blocking;
        }

        /// Runs `middleware` in order, then `final`.
        fn Chain(comptime middleware: []const type, comptime final: Call) type {
            return struct {
                fn run(context: ContextPtr, req: *Request, res: *Response) anyerror!void {
                    const next: Next(middleware, final) = .{ .context = context };
                    return next.run(req, res);
                }
            };
        }

        /// What a middleware calls to go on: the rest of the chain.
        pub fn Next(comptime middleware: []const type, comptime final: Call) type {
            return struct {
                const NextOf = @This();
                /// The router's context.
                context: ContextPtr,

                /// Runs the rest of the chain (the next middleware, or the handler).
                pub fn run(next: NextOf, req: *Request, res: *Response) anyerror!void {
                    if (middleware.len == 0) return final(next.context, req, res);
                    checkMiddleware(middleware[0]);
                    const rest: Next(middleware[1..], final) = .{ .context = next.context };
                    return middleware[0].handle(req, res, rest);
                }
            };
        }

        /// Global middleware, then routing.
        pub fn handle(context: ContextPtr, req: *Request, res: *Response) anyerror!void {
            return Chain(options.middleware, &dispatch).run(context, req, res);
        }

        fn dispatch(context: ContextPtr, req: *Request, res: *Response) anyerror!void {
            var params: [params_max]Request.PathParam = undefined;
            const method_index = @backingInt(req.method);
            var allowed: MethodMask = 0;
            var allow: []const u8 = "";
            var matches: usize = 0;
            var fallback: Call = &answerMethod;
            inline for (entries) |entry| {
                if (match(entry.pattern.tokens, req.path, &params)) {
                    var call = entry.calls[method_index];
                    if (call == null and req.method == .HEAD) call = entry.calls[@backingInt(http.Method.GET)];
                    if (call) |f| {
                        req.params = params[0..entry.pattern.param_count];
                        defer req.params = &.{};
                        return f(context, req, res);
                    }
                    allowed |= entry.methods;
                    allow = entry.allow;
                    if (matches == 0) fallback = entry.fallback;
                    matches += 1;
                }
            }
            if (matches == 0) {
                if (req.method == .OPTIONS and std.mem.eql(u8, req.path, "*")) {
                    return answerOptions(res, table_allow);
                }
                return answer(res, .not_found, "404 Not Found\n");
            }
            if (matches > 1) {
                if (allowed & methodBit(.GET) != 0) allowed |= methodBit(.HEAD);
                var buffer: [allow_bytes_max]u8 = undefined;
                allow = try res.arena.dupe(u8, writeAllow(&buffer, allowed | methodBit(.OPTIONS)));
            }
            try res.header("Allow", allow);
            return fallback(context, req, res);
        }

        /// 204 for OPTIONS, else 405; `Allow` is set already.
        fn answerMethod(context: ContextPtr, req: *Request, res: *Response) anyerror!void {
            _ = context;
            if (req.method == .OPTIONS) {
                res.status = .no_content;
                return res.setBody("");
            }
            answer(res, .method_not_allowed, "405 Method Not Allowed\n");
        }

        fn answerOptions(res: *Response, allow: []const u8) Response.Error!void {
            try res.header("Allow", allow);
            res.status = .no_content;
            res.setBody("");
        }

        /// A client error's answer that names the parameter at fault.
        fn answerNaming(res: *Response, reply: client_error.Answer, parameter: []const u8) void {
            var buffer: [client_error.reason_bytes_max]u8 = undefined;
            const reason = client_error.reasonNaming(&buffer, reply, parameter);
            res.status = reply.status;
            res.content_type = "text/plain; charset=utf-8";
            res.print("{d} {s}: {s}\n", .{ reply.status.code(), reply.status.phrase(), reason }) catch
                answer(res, reply.status, reply.body);
        }

        fn answer(res: *Response, status: http.Status, body: []const u8) void {
            res.status = status;
            res.content_type = "text/plain; charset=utf-8";
            res.setBody(body);
        }

        /// Whether `path` matches `tokens`; fills `params` with what the tokens capture.
        inline fn match(comptime tokens: []const Token, path: []const u8, params: []Request.PathParam) bool {
            var rest = path;
            comptime var k: usize = 0;
            inline for (tokens) |token| switch (token) {
                .literal => |literal| {
                    if (!std.mem.startsWith(u8, rest, literal)) return false;
                    rest = rest[literal.len..];
                },
                .param => |name| {
                    const end = std.mem.findScalar(u8, rest, '/') orelse rest.len;
                    if (end == 0) return false;
                    params[k] = .{ .name = name, .value = rest[0..end] };
                    k += 1;
                    rest = rest[end..];
                },
                .wildcard => |name| {
                    params[k] = .{ .name = name, .value = rest };
                    k += 1;
                    rest = rest[rest.len..];
                },
            };
            return rest.len == 0;
        }
    };
}

/// "GET, HEAD, POST" for a set of methods, in the enum's order (compile time).
fn allowText(comptime mask: MethodMask) []const u8 {
    comptime {
        var text: []const u8 = "";
        for (@typeInfo(http.Method).@"enum".field_names) |name| {
            if (mask & methodBit(@field(http.Method, name)) == 0) continue;
            text = text ++ (if (text.len > 0) ", " else "") ++ name;
        }
        return text;
    }
}

/// Room for the longest `Allow` value: every method but CONNECT, or all of them.
const allow_bytes_max = 64;

/// `allowText` at run time, into `buffer`.
fn writeAllow(buffer: *[allow_bytes_max]u8, mask: MethodMask) []const u8 {
    var w: std.Io.Writer = .fixed(buffer);
    inline for (@typeInfo(http.Method).@"enum".field_names) |name| {
        if (mask & methodBit(@field(http.Method, name)) != 0) {
            if (w.end > 0) w.writeAll(", ") catch unreachable; // the buffer holds every method
            w.writeAll(name) catch unreachable;
        }
    }
    return w.buffered();
}

fn checkHandler(comptime Context: type, comptime F: type, comptime pattern: []const u8) void {
    const expected = if (Context == void)
        "fn (req: *saker.Request, res: *saker.Response) !void"
    else
        "fn (ctx: *" ++ @typeName(Context) ++ ", req: *saker.Request, res: *saker.Response) !void";
    const wrong = "saker.Router: the handler of \"" ++ pattern ++ "\" must be `" ++ expected ++ "`";
    const info = switch (@typeInfo(F)) {
        .@"fn" => |f| f,
        else => @compileError(wrong ++ "; got " ++ @typeName(F)),
    };
    const params = info.param_types;
    const offset = switch (params.len) {
        2 => 0,
        3 => blk: {
            if (Context == void) @compileError(wrong ++ " (the router has no context)");
            const First = params[0] orelse @compileError(wrong);
            if (First != *Context and First != *const Context) @compileError(wrong ++ " (first parameter)");
            break :blk 1;
        },
        else => @compileError(wrong ++ " (2 or 3 parameters)"),
    };
    if (params[offset] != *Request) @compileError(wrong ++ " (the request is *saker.Request)");
    if (params[offset + 1] != *Response) @compileError(wrong ++ " (the response is *saker.Response)");
    const Return = info.return_type orelse @compileError(wrong);
    const ok = switch (@typeInfo(Return)) {
        .void => true,
        .error_union => |eu| eu.payload == void,
        else => false,
    };
    if (!ok) @compileError(wrong ++ " (it returns void or !void)");
}

fn checkMiddleware(comptime M: type) void {
    if (!@hasDecl(M, "handle"))
        @compileError("saker.Router: middleware " ++ @typeName(M) ++
            " must declare `pub fn handle(req: *saker.Request, res: *saker.Response, next: anytype) !void`");
}

// Tests.

const HandlerCall = @import("../testing/HandlerCall.zig");

/// What the test handlers saw.
const Log = struct {
    buffer: [256]u8 = undefined,
    len: usize = 0,

    fn add(log_: *Log, comptime format: []const u8, args: anytype) void {
        const added = std.mem.print(log_.buffer[log_.len..], format, args) catch unreachable;
        log_.len += added.len;
    }

    fn text(log_: *const Log) []const u8 {
        return log_.buffer[0..log_.len];
    }
};

const handlers = struct {
    fn index(l: *Log, req: *Request, res: *Response) !void {
        _ = req;
        l.add("index;", .{});
        try res.writeAll("home");
    }
    fn userNew(l: *Log, req: *Request, res: *Response) !void {
        _ = req;
        _ = res;
        l.add("new;", .{});
    }
    fn user(l: *Log, req: *Request, res: *Response) !void {
        _ = res;
        l.add("user {s};", .{req.param("id").?});
    }
    fn userDelete(l: *Log, req: *Request, res: *Response) !void {
        _ = res;
        l.add("delete {s};", .{req.param("id").?});
    }
    fn userPost(l: *Log, req: *Request, res: *Response) !void {
        _ = res;
        l.add("post {s} {s};", .{ req.param("id").?, req.param("post").? });
    }
    fn files(l: *Log, req: *Request, res: *Response) !void {
        _ = res;
        l.add("files '{s}';", .{req.param("rest").?});
    }
    fn headOnly(l: *Log, req: *Request, res: *Response) !void {
        _ = req;
        _ = res;
        l.add("head;", .{});
    }
    fn bad(l: *Log, req: *Request, res: *Response) !void {
        l.add("bad;", .{});
        try res.header("X-Dropped", "1");
        try res.writeAll("partial");
        _ = try req.paramDecoded("v");
    }
    fn broken(req: *Request, res: *Response) !void {
        _ = req;
        _ = res;
        return error.Broken;
    }
    fn apiItems(l: *Log, req: *Request, res: *Response) !void {
        _ = req;
        _ = res;
        l.add("items;", .{});
    }
    fn apiRoot(l: *Log, req: *Request, res: *Response) !void {
        _ = req;
        _ = res;
        l.add("api;", .{});
    }
};

fn Tag(comptime name: []const u8) type {
    return struct {
        pub fn handle(req: *Request, res: *Response, next: anytype) !void {
            const l: *Log = next.context;
            l.add(name ++ "<", .{});
            try next.run(req, res);
            l.add(">" ++ name ++ ";", .{});
        }
    };
}

const Refuse = struct {
    pub fn handle(req: *Request, res: *Response, next: anytype) !void {
        _ = next;
        _ = req;
        res.status = .forbidden;
        res.setBody("no");
    }
};

const TestRouter = Router(Log, .{
    .routes = &.{
        .get("/", handlers.index),
        .get("/users/:id", handlers.user),
        .delete("/users/:id", handlers.userDelete),
        .get("/users/new", handlers.userNew),
        .get("/users/:id/posts/:post", handlers.userPost),
        .get("/files/*rest", handlers.files),
        .head("/head-only", handlers.headOnly),
        .get("/bad/:v", handlers.bad),
        .post("/bad/:v", handlers.broken),
        .group("/api", &.{
            .get("/", handlers.apiRoot),
            .use(&.{ Tag("auth"), Tag("inner") }, &.{
                .get("/items", handlers.apiItems),
            }),
        }),
        .use(&.{Refuse}, &.{.get("/admin", handlers.index)}),
    },
    .middleware = &.{Tag("global")},
});

fn run(method: http.Method, path: []const u8, l: *Log, x: *HandlerCall) !void {
    l.len = 0;
    // The router itself allocates nothing on the way to a handler.
    x.init(.{ .method = method, .target = path, .arena = std.testing.failing_allocator });
    var router: TestRouter = .{ .context = l };
    try router.handle(&x.request, &x.response);
}

test "Router: static, parameters, wildcard, and the most specific match" {
    var l: Log = .{};
    var x: HandlerCall = undefined;
    const cases = [_]struct { path: []const u8, log: []const u8 }{
        .{ .path = "/", .log = "index;" },
        .{ .path = "/users/42", .log = "user 42;" },
        .{ .path = "/users/new", .log = "new;" },
        .{ .path = "/users/a%2Fb", .log = "user a%2Fb;" },
        .{ .path = "/users/7/posts/9", .log = "post 7 9;" },
        .{ .path = "/files/", .log = "files '';" },
        .{ .path = "/files/a/b/c.txt", .log = "files 'a/b/c.txt';" },
        .{ .path = "/api", .log = "items;" },
    };
    for (cases[0 .. cases.len - 1]) |case| {
        try run(.GET, case.path, &l, &x);
        errdefer std.debug.print("path {s}: {s}\n", .{ case.path, l.text() });
        try std.testing.expectEqualStrings("global<" ++ "", l.text()[0..7]);
        try std.testing.expectEqualStrings(case.log, l.text()[7 .. l.text().len - ">global;".len]);
        try std.testing.expectEqual(http.Status.ok, x.response.status);
        try std.testing.expectEqual(@as(usize, 0), x.request.params.len); // reset after the call
    }
    for ([_][]const u8{ "/users", "/users/", "/users//posts/1", "/users/1/posts", "/files", "/nope", "/apix", "" }) |path| {
        try run(.GET, path, &l, &x);
        errdefer std.debug.print("path {s}\n", .{path});
        try std.testing.expectEqual(http.Status.not_found, x.response.status);
        try std.testing.expectEqualStrings("global<>global;", l.text());
        try std.testing.expectEqualStrings("404 Not Found\n", x.body());
    }
}

test "Router: HEAD, OPTIONS and 405 with Allow" {
    var l: Log = .{};
    var x: HandlerCall = undefined;
    try run(.HEAD, "/users/5", &l, &x);
    try std.testing.expectEqualStrings("global<user 5;>global;", l.text());

    try run(.HEAD, "/head-only", &l, &x);
    try std.testing.expectEqualStrings("global<head;>global;", l.text());
    try run(.GET, "/head-only", &l, &x);
    try std.testing.expectEqual(http.Status.method_not_allowed, x.response.status);
    try std.testing.expectEqualStrings("HEAD, OPTIONS", x.header("Allow").?);

    try run(.POST, "/users/5", &l, &x);
    try std.testing.expectEqual(http.Status.method_not_allowed, x.response.status);
    try std.testing.expectEqualStrings("GET, HEAD, DELETE, OPTIONS", x.header("Allow").?);
    try std.testing.expectEqualStrings("405 Method Not Allowed\n", x.body());

    try run(.OPTIONS, "/users/5", &l, &x);
    try std.testing.expectEqual(http.Status.no_content, x.response.status);
    try std.testing.expectEqualStrings("GET, HEAD, DELETE, OPTIONS", x.header("Allow").?);

    // DELETE /users/new: the static route has only GET, the parameter route has DELETE.
    try run(.DELETE, "/users/new", &l, &x);
    try std.testing.expectEqualStrings("global<delete new;>global;", l.text());

    x.init(.{ .method = .OPTIONS, .target = "*", .arena = std.testing.allocator });
    var router: TestRouter = .{ .context = &l };
    try router.handle(&x.request, &x.response);
    try std.testing.expectEqual(http.Status.no_content, x.response.status);
    try std.testing.expectEqualStrings("GET, HEAD, POST, DELETE, OPTIONS", x.header("Allow").?);
}

test "Router: a union of methods over several matching patterns is allocated in the arena" {
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var l: Log = .{};
    var x: HandlerCall = undefined;
    x.init(.{ .method = .PUT, .target = "/users/new", .arena = arena_state.allocator() });
    var router: TestRouter = .{ .context = &l };
    try router.handle(&x.request, &x.response);
    try std.testing.expectEqual(http.Status.method_not_allowed, x.response.status);
    try std.testing.expectEqualStrings("GET, HEAD, DELETE, OPTIONS", x.header("Allow").?);
}

test "Router: groups and middleware order" {
    var l: Log = .{};
    var x: HandlerCall = undefined;
    try run(.GET, "/api", &l, &x);
    try std.testing.expectEqualStrings("global<api;>global;", l.text());
    try run(.GET, "/api/items", &l, &x);
    try std.testing.expectEqualStrings("global<auth<inner<items;>inner;>auth;>global;", l.text());
    try run(.GET, "/admin", &l, &x);
    try std.testing.expectEqualStrings("global<>global;", l.text());
    try std.testing.expectEqual(http.Status.forbidden, x.response.status);
    // 405 and automatic OPTIONS pass through the middleware of the path's route; 404 only
    // through the global middleware.
    try run(.POST, "/api/items", &l, &x);
    try std.testing.expectEqualStrings("global<auth<inner<>inner;>auth;>global;", l.text());
    try std.testing.expectEqual(http.Status.method_not_allowed, x.response.status);
    try run(.OPTIONS, "/api/items", &l, &x);
    try std.testing.expectEqualStrings("global<auth<inner<>inner;>auth;>global;", l.text());
    try std.testing.expectEqual(http.Status.no_content, x.response.status);
    try run(.GET, "/api/nothing", &l, &x);
    try std.testing.expectEqualStrings("global<>global;", l.text());
}

test "Router: a ClientError becomes its 4xx answer; other errors propagate" {
    var l: Log = .{};
    var x: HandlerCall = undefined;
    try run(.GET, "/bad/%zz", &l, &x);
    try std.testing.expectEqual(http.Status.bad_request, x.response.status);
    try std.testing.expectEqualStrings("400 Bad Request: invalid percent-encoding \"v\"\n", x.body());
    try std.testing.expectEqual(@as(?[]const u8, null), x.header("X-Dropped"));
    try std.testing.expectEqualStrings("global<bad;>global;", l.text());
    try std.testing.expectError(error.Broken, run(.POST, "/bad/x", &l, &x));
}

test "Router.validate: conflicts and bad patterns are named" {
    const f = handlers.index;
    const cases = .{
        .{ &[_]Route{ .get("/a/:x", f), .get("/a/:y", f) }, "routes conflict: GET \"/a/:x\" and GET \"/a/:y\"" },
        .{ &[_]Route{ .get("/a", f), .route(&.{ .POST, .GET }, "/a", f) }, "routes conflict" },
        .{ &[_]Route{ .get("/x/y", f), .group("/x", &.{.get("/y", f)}) }, "routes conflict" },
        .{ &[_]Route{.route(&.{ .GET, .GET }, "/a", f)}, "lists GET twice" },
        .{ &[_]Route{.get("a", f)}, "must start with '/'" },
        .{ &[_]Route{.get("/a//b", f)}, "empty segment" },
        .{ &[_]Route{.get("/*rest/x", f)}, "must be the last segment" },
        .{ &[_]Route{.get("/:a/:a", f)}, "used twice" },
        .{ &[_]Route{.get("/:", f)}, "parameter names" },
        .{ &[_]Route{.get("/a:b", f)}, "static segments" },
        .{ &[_]Route{.get("/a%20", f)}, "static segments" },
        .{ &[_]Route{.group("/api/", &.{.get("/", f)})}, "group prefix" },
        .{ &[_]Route{.route(&.{}, "/a", f)}, "has no method" },
        .{ &[_]Route{.route(&.{.CONNECT}, "/a", f)}, "CONNECT" },
    };
    inline for (cases) |case| {
        const why = comptime validate(case[0]);
        try std.testing.expect(why != null);
        try std.testing.expect(std.mem.find(u8, why.?, case[1]) != null);
    }
    // Same shape with different methods, or different shapes, are fine.
    try std.testing.expectEqual(@as(?[]const u8, null), comptime validate(&.{
        .get("/a/:x", f),
        .post("/a/:y", f),
        .get("/a/b", f),
        .get("/a/*rest", f),
        .get("/a/", f),
        .head("/a/:x", f),
    }));
}

const Upload = struct {
    const State = struct { bytes: usize = 0, chunks: usize = 0 };

    pub fn onHead(l: *Log, req: *Request, res: *Response) !BodyAction {
        _ = res;
        l.add("head {s};", .{req.param("name").?});
        if (std.mem.eql(u8, req.param("name").?, "refuse")) return error.InvalidParameter;
        const state = try req.arena.create(State);
        state.* = .{};
        req.user_data = state;
        return .stream;
    }

    pub fn onBody(l: *Log, req: *Request, res: *Response, chunk: []const u8) !void {
        _ = l;
        _ = res;
        const state: *State = @ptrCast(@alignCast(req.user_data.?));
        state.bytes += chunk.len;
        state.chunks += 1;
    }

    pub fn handle(l: *Log, req: *Request, res: *Response) !void {
        const state: *State = @ptrCast(@alignCast(req.user_data.?));
        l.add("done {s};", .{req.param("name").?});
        try res.print("{d} bytes in {d} pieces", .{ state.bytes, state.chunks });
    }
};

const StreamingRouter = Router(Log, .{ .routes = &.{
    .post("/upload/:name", Upload),
    .post("/form", handlers.index),
} });

test "Router: a route type receives its body piece by piece" {
    comptime std.debug.assert(!@hasDecl(TestRouter, "onHead"));
    var arena_state: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena_state.deinit();
    var l: Log = .{};
    var router: StreamingRouter = .{ .context = &l };
    var call: HandlerCall = undefined;
    call.init(.{ .method = .POST, .target = "/upload/a.bin", .arena = arena_state.allocator() });
    try std.testing.expectEqual(BodyAction.stream, try router.onHead(&call.request, &call.response));
    for ([_][]const u8{ "abc", "de", "f" }) |chunk| try router.onBody(&call.request, &call.response, chunk);
    try router.handle(&call.request, &call.response);
    try std.testing.expectEqualStrings("6 bytes in 3 pieces", call.body());
    try std.testing.expectEqualStrings("head a.bin;done a.bin;", l.text());

    // Other routes, and paths without a route, are buffered as usual.
    for ([_][]const u8{ "/form", "/nope", "/upload/x/y" }) |target| {
        call.init(.{ .method = .POST, .target = target, .arena = arena_state.allocator() });
        try std.testing.expectEqual(BodyAction.buffer, try router.onHead(&call.request, &call.response));
    }
    call.init(.{ .method = .PUT, .target = "/upload/a", .arena = arena_state.allocator() });
    try std.testing.expectEqual(BodyAction.buffer, try router.onHead(&call.request, &call.response));

    call.init(.{ .method = .POST, .target = "/upload/refuse", .arena = arena_state.allocator() });
    try std.testing.expectError(error.InvalidParameter, router.onHead(&call.request, &call.response));
}
