//! Server metrics in the Prometheus text exposition format (0.0.4). Each worker counts what
//! its engine thread sees in a `Counters` of its own, with plain stores (one writer: no atomic
//! read-modify-write on the hot path); a scrape sums every live worker's counters, read with
//! atomic loads, and those of workers that ended (`Registry.retired`). What the server shares
//! (open connections, refusals at `connections_max`, accept errors, the handler queue, TLS
//! handshakes) is read where it is kept. `render` writes it all; `saker.MetricsHandler`
//! serves it (mount it in a `Router`, or on a listener of its own: `saker serve --metrics`).
const std = @import("std");
const assert = std.debug.assert;
const http = @import("http.zig");
const sync = @import("sync.zig");

const Metrics = @This();

/// The request methods counted by name; the rest are `other`.
pub const methods = [_]http.Method{ .GET, .HEAD, .POST, .PUT, .DELETE, .PATCH, .OPTIONS };
const method_slots = methods.len + 1;
/// The slot of each method in `Counters.responses`: one load per response, no search.
const slot_of = blk: {
    var table: [256]u8 = @splat(methods.len);
    for (methods, 0..) |m, i| table[@backingInt(m)] = i;
    break :blk table;
};

/// Upper bounds of the request duration histogram, in milliseconds (Prometheus's default
/// buckets); durations are measured on the worker's clock (milliseconds).
pub const duration_buckets_ms = [_]u64{ 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000 };

/// Why the server refused a request or a connection (README.md, Limits), as the label says.
pub const Reason = enum {
    bad_request,
    request_timeout,
    body_too_large,
    target_too_long,
    header_too_large,
    not_implemented,
    version_not_supported,
    overloaded,
    other,

    /// The reason of a refusal answered with `status`.
    pub fn of(status: http.Status) Reason {
        return switch (status) {
            .bad_request => .bad_request,
            .request_timeout => .request_timeout,
            .content_too_large => .body_too_large,
            .uri_too_long => .target_too_long,
            .request_header_fields_too_large => .header_too_large,
            .not_implemented => .not_implemented,
            .http_version_not_supported => .version_not_supported,
            .service_unavailable => .overloaded,
            else => .other,
        };
    }
};

/// What one worker counts. Written by the worker's engine thread only; read by scrapes.
pub const Counters = struct {
    /// Responses by method slot (`methods`, then other) and status class (1xx..5xx).
    responses: [method_slots][5]u64 = @splat(@splat(0)),
    /// Requests answered by the server itself because they broke a limit or the protocol.
    refused: [std.enums.values(Reason).len]u64 = @splat(0),
    /// Handlers that failed (answered 500 or cut short).
    handler_errors: u64 = 0,
    /// Handlers running or queued for the handler pool (a gauge).
    handlers_in_flight: u64 = 0,
    /// Request durations, head received to response ready: per bucket (not cumulative), the
    /// count above the last bound, and their sum.
    duration_counts: [duration_buckets_ms.len + 1]u64 = @splat(0),
    duration_sum_ms: u64 = 0,
    /// Bytes read from and written to sockets (TLS records included).
    received_bytes: u64 = 0,
    sent_bytes: u64 = 0,
    /// Open WebSocket sessions (a gauge).
    websockets_open: u64 = 0,
    /// HTTP/1.1 connections holding an exchange (a request on its way; the others are idle
    /// keep-alive connections or have sent nothing yet) and connections speaking HTTP/2:
    /// gauges kept with wrapping arithmetic, since a `worker_pool` connection may take its
    /// exchange on one worker and give it back on another (only the sum means anything).
    http1_active: u64 = 0,
    http2_open: u64 = 0,
    /// Link in the registry's list of live workers' counters.
    next: ?*Counters = null,
    registry: ?*Registry = null,

    fn bump(field: *u64, n: u64) void {
        @atomicStore(u64, field, field.* +% n, .monotonic);
    }

    /// A response went out (or is about to) for a request of `method`, with `status`;
    /// `duration_ms` is how long since its head arrived, when known.
    pub fn answered(c: *Counters, method: ?http.Method, status: http.Status, duration_ms: ?u64) void {
        const slot = if (method) |m| slot_of[@backingInt(m)] else methods.len;
        // Compares, not a division: this runs for every response.
        const code = status.code();
        const class: usize = if (code < 200) 0 else if (code < 300) 1 else if (code < 400) 2 else if (code < 500) 3 else 4;
        bump(&c.responses[slot][class], 1);
        const ms = duration_ms orelse return;
        const bucket = for (duration_buckets_ms, 0..) |bound, i| {
            if (ms <= bound) break i;
        } else duration_buckets_ms.len;
        bump(&c.duration_counts[bucket], 1);
        bump(&c.duration_sum_ms, ms);
    }

    pub fn refusedFor(c: *Counters, status: http.Status) void {
        bump(&c.refused[@backingInt(Reason.of(status))], 1);
    }

    pub fn handlerFailed(c: *Counters) void {
        bump(&c.handler_errors, 1);
    }

    pub fn handlerStarted(c: *Counters) void {
        bump(&c.handlers_in_flight, 1);
    }

    pub fn handlerEnded(c: *Counters) void {
        assert(c.handlers_in_flight > 0);
        @atomicStore(u64, &c.handlers_in_flight, c.handlers_in_flight - 1, .monotonic);
    }

    pub fn received(c: *Counters, n: usize) void {
        bump(&c.received_bytes, n);
    }

    pub fn sent(c: *Counters, n: usize) void {
        bump(&c.sent_bytes, n);
    }

    pub fn websocketOpened(c: *Counters) void {
        bump(&c.websockets_open, 1);
    }

    pub fn websocketClosed(c: *Counters) void {
        assert(c.websockets_open > 0);
        @atomicStore(u64, &c.websockets_open, c.websockets_open - 1, .monotonic);
    }

    /// An HTTP/1.1 connection took (`true`) or gave back (`false`) its exchange.
    pub fn http1Active(c: *Counters, active: bool) void {
        bump(&c.http1_active, if (active) 1 else std.math.maxInt(u64)); // wrapping -1
    }

    /// A connection switched to HTTP/2 (`true`) or an HTTP/2 connection ended (`false`).
    pub fn http2Open(c: *Counters, open: bool) void {
        bump(&c.http2_open, if (open) 1 else std.math.maxInt(u64)); // wrapping -1
    }

    /// Adds `other`'s counts (read atomically) to `c` (a scrape's private sum).
    fn addFrom(c: *Counters, other: *const Counters) void {
        for (&c.responses, &other.responses) |*row, *other_row| {
            for (row, other_row) |*a, *b| a.* += @atomicLoad(u64, b, .monotonic);
        }
        for (&c.refused, &other.refused) |*a, *b| a.* += @atomicLoad(u64, b, .monotonic);
        for (&c.duration_counts, &other.duration_counts) |*a, *b| a.* += @atomicLoad(u64, b, .monotonic);
        inline for (.{ "handler_errors", "handlers_in_flight", "duration_sum_ms", "received_bytes", "sent_bytes", "websockets_open" }) |name| {
            @field(c, name) += @atomicLoad(u64, &@field(other, name), .monotonic);
        }
        inline for (.{ "http1_active", "http2_open" }) |name| {
            @field(c, name) +%= @atomicLoad(u64, &@field(other, name), .monotonic);
        }
    }
};

/// The live workers' counters and what ended workers counted. Workers join when they start
/// and leave (adding their counts to `retired`) when they end; scrapes take the mutex.
pub const Registry = struct {
    mutex: sync.Mutex = .{},
    live: ?*Counters = null,
    retired: Counters = .{},

    pub fn join(r: *Registry, counters: *Counters) void {
        r.mutex.lock();
        defer r.mutex.unlock();
        counters.next = r.live;
        counters.registry = r;
        r.live = counters;
    }

    pub fn leave(r: *Registry, counters: *Counters) void {
        r.mutex.lock();
        defer r.mutex.unlock();
        var link = &r.live;
        while (link.*) |c| : (link = &c.next) {
            if (c == counters) {
                link.* = c.next;
                break;
            }
        } else unreachable; // joined before
        // Gauges end with the worker: only counts carry over.
        var ended = counters.*;
        ended.handlers_in_flight = 0;
        ended.websockets_open = 0;
        ended.http1_active = 0;
        ended.http2_open = 0;
        r.retired.addFrom(&ended);
        counters.next = null;
        counters.registry = null;
    }

    /// The sum of every worker's counters, live and ended.
    pub fn total(r: *Registry) Counters {
        r.mutex.lock();
        defer r.mutex.unlock();
        var sum: Counters = .{};
        sum.addFrom(&r.retired);
        var it = r.live;
        while (it) |c| : (it = c.next) sum.addFrom(c);
        return sum;
    }
};

/// What a scrape reports besides the workers' counters: what the server keeps itself.
pub const Shared = struct {
    connections_open: u64,
    connections_refused: u64,
    accept_errors: u64,
    handler_queue_depth: ?u64,
    tls_handshakes: ?struct { completed: u64, failed: u64 },
};

/// Writes the exposition text of `counters` and `shared`.
pub fn render(w: *std.Io.Writer, counters: *const Counters, shared: Shared) std.Io.Writer.Error!void {
    try w.writeAll("# HELP saker_http_responses_total Responses sent, by request method and status class.\n" ++
        "# TYPE saker_http_responses_total counter\n");
    for (counters.responses, 0..) |row, slot| {
        const method = if (slot < methods.len) methods[slot].name() else "other";
        for (row, 1..) |count, class| {
            try w.print("saker_http_responses_total{{method=\"{s}\",code=\"{d}xx\"}} {d}\n", .{ method, class, count });
        }
    }
    try w.writeAll("# HELP saker_http_refused_total Requests the server answered itself for breaking a limit or the protocol, by reason.\n" ++
        "# TYPE saker_http_refused_total counter\n");
    for (counters.refused, 0..) |count, i| {
        try w.print("saker_http_refused_total{{reason=\"{t}\"}} {d}\n", .{ @as(Reason, @fromBackingInt(@intCast(i))), count });
    }
    try w.writeAll("# HELP saker_handler_errors_total Handlers that failed.\n# TYPE saker_handler_errors_total counter\n");
    try w.print("saker_handler_errors_total {d}\n", .{counters.handler_errors});
    try w.writeAll("# HELP saker_handlers_in_flight Handlers running or queued for the handler pool.\n# TYPE saker_handlers_in_flight gauge\n");
    try w.print("saker_handlers_in_flight {d}\n", .{counters.handlers_in_flight});
    try w.writeAll("# HELP saker_http_request_duration_seconds Time from a request's head to its response, on the worker's millisecond clock.\n" ++
        "# TYPE saker_http_request_duration_seconds histogram\n");
    var cumulative: u64 = 0;
    for (duration_buckets_ms, 0..) |bound, i| {
        cumulative += counters.duration_counts[i];
        try w.print("saker_http_request_duration_seconds_bucket{{le=\"{d}.{d:0>3}\"}} {d}\n", .{ bound / 1000, bound % 1000, cumulative });
    }
    cumulative += counters.duration_counts[duration_buckets_ms.len];
    try w.print("saker_http_request_duration_seconds_bucket{{le=\"+Inf\"}} {d}\n", .{cumulative});
    try w.print("saker_http_request_duration_seconds_sum {d}.{d:0>3}\n", .{ counters.duration_sum_ms / 1000, counters.duration_sum_ms % 1000 });
    try w.print("saker_http_request_duration_seconds_count {d}\n", .{cumulative});
    try w.writeAll("# HELP saker_received_bytes_total Bytes read from client sockets.\n# TYPE saker_received_bytes_total counter\n");
    try w.print("saker_received_bytes_total {d}\n", .{counters.received_bytes});
    try w.writeAll("# HELP saker_sent_bytes_total Bytes written to client sockets.\n# TYPE saker_sent_bytes_total counter\n");
    try w.print("saker_sent_bytes_total {d}\n", .{counters.sent_bytes});
    try w.writeAll("# HELP saker_connections_open Client connections open.\n# TYPE saker_connections_open gauge\n");
    try w.print("saker_connections_open {d}\n", .{shared.connections_open});
    try w.writeAll("# HELP saker_websockets_open WebSocket sessions open.\n# TYPE saker_websockets_open gauge\n");
    try w.print("saker_websockets_open {d}\n", .{counters.websockets_open});
    // By protocol and state. The parts are read a moment apart, so HTTP/1.1's idle share (what
    // is left) is clamped at 0.
    const http1_active = @min(counters.http1_active, shared.connections_open);
    const http1_idle = shared.connections_open -| counters.http2_open -| counters.websockets_open -| http1_active;
    try w.writeAll("# HELP saker_connections Client connections open, by protocol and state (idle: an HTTP/1.1 connection waiting for a request, holding no buffers).\n# TYPE saker_connections gauge\n");
    try w.print("saker_connections{{protocol=\"http1\",state=\"active\"}} {d}\n", .{http1_active});
    try w.print("saker_connections{{protocol=\"http1\",state=\"idle\"}} {d}\n", .{http1_idle});
    try w.print("saker_connections{{protocol=\"http2\",state=\"open\"}} {d}\n", .{counters.http2_open});
    try w.print("saker_connections{{protocol=\"websocket\",state=\"open\"}} {d}\n", .{counters.websockets_open});
    try w.writeAll("# HELP saker_connections_refused_total Connections refused at connections_max.\n# TYPE saker_connections_refused_total counter\n");
    try w.print("saker_connections_refused_total {d}\n", .{shared.connections_refused});
    try w.writeAll("# HELP saker_accept_errors_total Failed accepts (out of descriptors or memory, and others).\n# TYPE saker_accept_errors_total counter\n");
    try w.print("saker_accept_errors_total {d}\n", .{shared.accept_errors});
    if (shared.handler_queue_depth) |depth| {
        try w.writeAll("# HELP saker_handler_queue_depth Requests waiting for a handler pool thread.\n# TYPE saker_handler_queue_depth gauge\n");
        try w.print("saker_handler_queue_depth {d}\n", .{depth});
    }
    if (shared.tls_handshakes) |tls| {
        try w.writeAll("# HELP saker_tls_handshakes_total TLS handshakes, by result.\n# TYPE saker_tls_handshakes_total counter\n");
        try w.print("saker_tls_handshakes_total{{result=\"completed\"}} {d}\n", .{tls.completed});
        try w.print("saker_tls_handshakes_total{{result=\"failed\"}} {d}\n", .{tls.failed});
    }
}

/// Where a `MetricsHandler` gets the text it serves (`Server.metricsSource`).
pub const Source = struct {
    context: *anyopaque,
    write: *const fn (context: *anyopaque, w: *std.Io.Writer) std.Io.Writer.Error!void,
};

/// The media type of the exposition format `render` writes.
pub const content_type = "text/plain; version=0.0.4; charset=utf-8";

const testing = std.testing;

test "Metrics: counts sum over live and ended workers; gauges end with their worker" {
    var registry: Registry = .{};
    var a: Counters = .{};
    var b: Counters = .{};
    registry.join(&a);
    registry.join(&b);
    a.answered(.GET, .ok, 3);
    a.answered(.GET, .not_found, 7);
    b.answered(.TRACE, .internal_server_error, 20_000);
    b.answered(null, .bad_request, null);
    b.refusedFor(.bad_request);
    a.handlerStarted();
    b.handlerStarted();
    b.websocketOpened();
    a.received(100);
    b.sent(50);
    registry.leave(&b);
    const sum = registry.total();
    try testing.expectEqual(@as(u64, 1), sum.responses[0][1]); // GET 2xx
    try testing.expectEqual(@as(u64, 1), sum.responses[0][3]); // GET 4xx
    try testing.expectEqual(@as(u64, 1), sum.responses[methods.len][4]); // other 5xx
    try testing.expectEqual(@as(u64, 1), sum.responses[methods.len][3]); // other 4xx
    try testing.expectEqual(@as(u64, 1), sum.refused[@backingInt(Reason.bad_request)]);
    try testing.expectEqual(@as(u64, 1), sum.handlers_in_flight); // b's ended with it
    try testing.expectEqual(@as(u64, 0), sum.websockets_open);
    try testing.expectEqual(@as(u64, 1), sum.duration_counts[0]); // 3 ms <= 5 ms
    try testing.expectEqual(@as(u64, 1), sum.duration_counts[1]); // 7 ms <= 10 ms
    try testing.expectEqual(@as(u64, 1), sum.duration_counts[duration_buckets_ms.len]); // 20 s > 10 s
    try testing.expectEqual(@as(u64, 20_010), sum.duration_sum_ms);
    try testing.expectEqual(@as(u64, 100), sum.received_bytes);
    try testing.expectEqual(@as(u64, 50), sum.sent_bytes);
    registry.leave(&a);
    var buffer: [8192]u8 = undefined;
    var w: std.Io.Writer = .fixed(&buffer);
    const final = registry.total();
    try render(&w, &final, .{ .connections_open = 2, .connections_refused = 1, .accept_errors = 0, .handler_queue_depth = 3, .tls_handshakes = null });
    const text = w.buffered();
    try testing.expect(std.mem.find(u8, text, "saker_http_responses_total{method=\"GET\",code=\"2xx\"} 1\n") != null);
    try testing.expect(std.mem.find(u8, text, "saker_http_request_duration_seconds_bucket{le=\"0.005\"} 1\n") != null);
    try testing.expect(std.mem.find(u8, text, "saker_http_request_duration_seconds_bucket{le=\"0.010\"} 2\n") != null);
    try testing.expect(std.mem.find(u8, text, "saker_http_request_duration_seconds_bucket{le=\"+Inf\"} 3\n") != null);
    try testing.expect(std.mem.find(u8, text, "saker_http_request_duration_seconds_sum 20.010\n") != null);
    try testing.expect(std.mem.find(u8, text, "saker_handler_queue_depth 3\n") != null);
    try testing.expect(std.mem.find(u8, text, "saker_tls_handshakes_total") == null);
}
