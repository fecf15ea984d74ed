//! Every option, limit and timeout of a server, with its unit last in the name and a default
//! fit for the open internet. `validate` ties the limits together; `Server.init` refuses a
//! configuration it rejects, naming the offending field.
const std = @import("std");
const assert = std.debug.assert;
const compress = @import("compress.zig");

const Config = @This();

// Listening.

/// Address to listen on: an IPv4 or IPv6 literal ("127.0.0.1", "0.0.0.0", "::1", "::").
host: []const u8 = "127.0.0.1",
/// TCP port; 0 asks the kernel for a free one (read it back with `Server.port`).
port: u16 = 8080,
/// Engine threads (each with its own listener); 0 means one per CPU.
workers: u16 = 0,
/// How connections are driven.
engine: Engine = .epoll,
/// Processes serving the port (`Server.run` forks them and restarts any that crash);
/// 1 serves in the calling process.
processes: u16 = 1,
/// Length of each listener's accept queue.
backlog: u31 = 1024,
/// HTTPS: the listener speaks TLS 1.3 and 1.2 with these certificates (docs/tls.md); null
/// serves plaintext HTTP.
tls: ?Tls = null,
/// Time a client has to complete its TLS handshake (then closed without a word).
tls_handshake_timeout_ms: u32 = 10_000,
/// The PROXY protocol on the listener (docs/deploy.md): every connection starts with the
/// header a load balancer such as HAProxy sends, and the client's address in it is
/// `Request.peer`. Null: connections start with TLS or HTTP.
proxy_protocol: ?ProxyProtocol = null,
/// Further listeners of the same server, each on its own address and port, plaintext or TLS
/// with certificates of its own: `.port = 8080` with
/// `.listeners = &.{.{ .port = 8443, .tls = .{ ... } }}` serves HTTP and HTTPS. The handler,
/// engine and limits are shared; each listener gets `workers` engine threads of its own (so
/// `Request.worker_index` counts them all, see `Server.workerCountFor`). At most
/// `listeners_max`.
listeners: []const Listener = &.{},

// Connections.

/// Open connections across all workers of the process (counted at accept, so however the
/// kernel spreads them over the listeners); a connection beyond it gets 503 and is closed.
/// `worker_pool` counts queued connections too; `blocking` holds one at a time anyway. Each
/// epoll or io_uring worker reserves address space for all of them (about 25 KiB each with
/// the default buffers), touched only as connections arrive.
connections_max: u32 = 10_000,
/// Threads of the `worker_pool` engine's pool (each serves one connection at a time).
pool_threads: u16 = 128,
/// Accepted connections waiting for a `worker_pool` thread; when full, acceptors wait.
pool_queue_max: u32 = 4096,
/// Submission queue entries of each `io_uring` worker's ring.
io_uring_entries: u16 = 4096,
/// Receive buffers in each `io_uring` worker's provided-buffer ring (a power of two).
io_uring_recv_buffers: u16 = 512,
/// Size of each of those receive buffers.
io_uring_recv_buffer_bytes: u32 = 4096,
/// Threads that run handlers which may block, for the `epoll` and `io_uring` engines (the
/// others run handlers on connection threads anyway). 0: none, unless the handler declares
/// `pub const blocking = true` or `mayBlock` (a router with routes flagged `blocking`), which
/// gets 4 per CPU.
handler_threads: u16 = 0,
/// Requests waiting for a handler thread; beyond it they get 503.
handler_queue_max: u32 = 1024,
/// Stack size of threads that run handlers (thread_per_connection, worker_pool).
thread_stack_bytes: u32 = 1024 * 1024,
/// Requests served on one connection before it is closed (keep-alive bound).
requests_per_connection_max: u32 = 100_000,
/// Give every request an id (`Request.request_id`): the client's `X-Request-Id` when it sends
/// a usable one (1 to 128 visible ASCII bytes), else a new one (16 hex digits); the responses
/// handlers make carry it back in `X-Request-Id`. Off: `request_id` is null and nothing is
/// added (a handler can still read the field with `req.header`).
request_id: bool = false,
/// Read a fine monotonic clock when each request head is whole and when its response is done,
/// for `Done.duration_us` (the JSON access log's `duration_us`). Off: `duration_us` is null and
/// no clock is read per request.
fine_durations: bool = false,

// Request limits (the answer to each is in README.md, Limits).

/// Longest request line, CRLF included (414 beyond). The default takes a target of 8 KiB
/// with its method and version (RFC 9112 §3 asks for at least 8000 octets).
request_line_bytes_max: u32 = 9 * 1024,
/// Longest request head: request line and header section (431 beyond).
header_bytes_max: u32 = 64 * 1024,
/// Most header fields in one request (431 beyond). Each busy connection holds room for this
/// many (32 bytes per field: 100 is 3.2 KiB); idle ones hold none.
header_count_max: u16 = 100,
/// Largest request body after chunked decoding (413 beyond).
body_bytes_max: u64 = 8 * 1024 * 1024,
/// Largest request body after undoing its `Content-Encoding`, for a handler that declares
/// `decodes_content_encoding` (docs/compression.md). Decoding stops with 413 as soon as the
/// body decodes past it, so a small body that would inflate to gigabytes (a decompression
/// bomb) costs no more memory than this: each stage of stacked codings is held to it, and
/// the decoded body takes exactly its length from the request arena. null: `body_bytes_max`,
/// so a handler gets no larger a body decoded than it would get sent as it is.
decoded_body_bytes_max: ?u64 = null,
/// Largest request body a handler receives in pieces through `onBody` (413 beyond).
streamed_body_bytes_max: u64 = 1024 * 1024 * 1024,
/// Longest chunk extension list on one chunk line (400 beyond).
chunk_extension_bytes_max: u32 = 4 * 1024,
/// Longest trailer section of a chunked body (400 beyond).
trailer_bytes_max: u32 = 8 * 1024,

// Memory.

/// Receive buffer a busy connection starts with; a longer head borrows a large buffer.
recv_buffer_bytes: u32 = 4 * 1024,
/// Large (`header_bytes_max`) receive buffers per worker; beyond it a long head gets 503.
large_buffers_max: u32 = 64,
/// Buffer for response heads and small bodies of one pipelined batch, per busy connection.
send_buffer_bytes: u32 = 8 * 1024,
/// Largest file body (sendfile) sent with TCP_CORK set from its head to its last byte, so
/// head and body leave in full segments. Measured on loopback: corking lowers CPU per 64 KiB
/// response; for 1 MiB bodies it raised the server's CPU per response about 2x (the client's
/// share of the TCP work moves to the sender) while raising req/s about 1.5x (the client reads
/// fuller segments). The default corks every file body, as nginx's `tcp_nopush` does. With
/// `unsent_bytes_max` set, 1 MiB bodies did best uncorked (server ~150 µs and client ~260 µs
/// per response at 50 connections, against ~345 and ~270 corked): `saker serve` corks bodies
/// up to 256 KiB. The body of a connection's last response (`Connection: close`, HTTP/1.0) is
/// corked whatever its size, and the close pushes its last segment: with a new connection per
/// 1 MiB request (`ab -c 10`), that cut the client's CPU per response from ~1160 to ~990 µs.
cork_file_bytes_max: u64 = std.math.maxInt(u64),
/// Unsent bytes the kernel queues per connection before the socket reports room to write
/// again (TCP_NOTSENT_LOWAT, set on the listeners and inherited by every connection); 0
/// keeps the system's default (no limit). Bytes in flight are not limited, only those not
/// yet sent, so throughput holds while kernel memory per connection stays small: measured
/// on loopback with 1000 connections fetching 1 MiB files, 64 KiB cut the kernel's TCP memory
/// from 450-780 MB to 190-230 MB and the client's CPU per response from ~700 to ~350 µs
/// (the sender's rose from ~100 to ~220 µs: it wakes more often and sends the data itself).
/// The limit is lifted (back to the system's) for a file body larger than it in a
/// connection's last response: nothing else will be sent there, so the kernel takes the whole
/// body in one sendfile and finishes it after the close, as for nginx (on the engines that
/// set socket options around files: all but io_uring). Kept, it cost a new
/// connection per 1 MiB request (`ab -c 10`) ~460 µs of server CPU (15 sendfiles, 6 of them
/// EAGAIN, each refill a wake-up: a new connection's window opens ~47 KiB at a time) against
/// ~185 µs lifted and nginx's ~200.
unsent_bytes_max: u32 = 0,
/// Per-request arena memory held by each busy connection before it falls back to the heap.
arena_bytes: u32 = 8 * 1024,
/// Most memory one request's arena may use, `arena_bytes` included: handler allocations,
/// a buffered request body and a response body that outgrows the send buffer all come from
/// it. Beyond it allocations fail (`error.OutOfMemory`: a handler that returns it gets 500,
/// logged; a body that cannot be buffered gets 503), so one request cannot take the whole
/// `overflow_bytes_max`.
arena_request_bytes_max: u64 = 128 * 1024 * 1024,
/// Largest response body a handler may build in memory (500 beyond).
response_body_bytes_max: u64 = 64 * 1024 * 1024,
/// Heap memory the whole server (every worker and process thread together) may use beyond
/// its preallocated buffers, for large bodies and arena overflow (503 or 500 beyond).
overflow_bytes_max: u64 = 512 * 1024 * 1024,
/// Most response header fields a handler may add (500 beyond).
response_header_count_max: u16 = 32,

// Timeouts.

/// Time from a request's first byte to the end of its head, however steadily the bytes come
/// (408 beyond; slowloris).
header_timeout_ms: u32 = 10_000,
/// Time a request body may make no progress: the deadline moves whenever body bytes arrive,
/// so a large upload over a slow link goes on as long as bytes keep coming (408 beyond; slow
/// POST). Like nginx's `client_body_timeout`.
body_timeout_ms: u32 = 60_000,
/// Time an idle keep-alive connection is kept open.
idle_timeout_ms: u32 = 60_000,
/// Time a response may make no progress because the client does not read (then closed).
write_timeout_ms: u32 = 30_000,
/// After an error response, time spent reading and discarding what the client still sends
/// before closing, so the response is not lost to a TCP reset.
linger_timeout_ms: u32 = 2_000,
/// On SIGINT/SIGTERM, time allowed for in-flight requests before the process exits anyway.
shutdown_timeout_ms: u32 = 10_000,

// HTTP/2 (docs/http2.md). Each connection that speaks it holds about
// `http2_streams_max` × 200 bytes of stream table and 2 × `http2_header_table_bytes` of HPACK
// tables beside the exchange HTTP/1 would hold; each open stream borrows one exchange
// (`recv_buffer_bytes` + `send_buffer_bytes` + `arena_bytes`), the same as an HTTP/1 request,
// from a share of its own (`http2_stream_exchanges_max`).

/// Speak HTTP/2: h2c with prior knowledge on cleartext listeners (the client's first bytes are
/// the connection preface) and `h2` offered by ALPN on TLS listeners.
http2: bool = true,
/// Cleartext listeners speak HTTP/2 alone (h2c with prior knowledge, as nginx's `listen …
/// http2` without TLS): every connection is HTTP/2 from its first byte, so one that does not
/// open with the connection preface gets GOAWAY PROTOCOL_ERROR and is closed (RFC 9113 §3.4)
/// rather than answered as HTTP/1.1. TLS listeners still let ALPN choose. Needs `http2`.
h2c_only: bool = false,
/// SETTINGS_MAX_CONCURRENT_STREAMS: streams one client may have open at once; one more is
/// refused (REFUSED_STREAM).
http2_streams_max: u32 = 100,
/// Exchanges an event-loop worker (`epoll`, `io_uring`) lends to HTTP/2 streams, besides the
/// `connections_max` its connections hold: a stream beyond them is refused (REFUSED_STREAM,
/// which clients retry). A share of their own, so streams held open on a few connections
/// (each may open `http2_streams_max`) can never take the exchange another connection needs
/// for its request. 2048 holds 20 connections' full 100 streams at once, or h2load's 50 × 10
/// four times over; at 28 KiB each by default it is at most 56 MiB per worker, touched only as
/// used. Its last quarter goes only to connections holding fewer than 4 streams, so a few
/// connections holding all theirs cannot refuse everyone else's. Thread-based engines give
/// each connection `http2_streams_max` instead.
http2_stream_exchanges_max: u32 = 2048,
/// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a client may send on one stream before
/// the server takes them (at least the protocol's 65535, at most 2^31-1).
http2_stream_window_bytes: u32 = 1024 * 1024,
/// Request body bytes a client may send over the whole connection before the server takes
/// them (at least 65535, at most 2^31-1).
http2_connection_window_bytes: u32 = 16 * 1024 * 1024,
/// SETTINGS_MAX_FRAME_SIZE: the largest frame a client may send (16384 to 2^24-1).
http2_frame_bytes_max: u32 = 16_384,
/// Request body bytes the streams of one connection may hold buffered at once; a stream whose
/// body would go beyond it is answered 503 (one client cannot take the server's
/// `overflow_bytes_max` for itself).
http2_connection_body_bytes_max: u64 = 32 * 1024 * 1024,
/// Bytes of each HPACK dynamic table (the decoder's, announced as SETTINGS_HEADER_TABLE_SIZE
/// only at its default 4096, and the encoder's).
http2_header_table_bytes: u32 = 4096,
/// Frames that do no useful work (resets, refused streams, empty frames, PRIORITY, stream
/// errors the client provoked) a connection may send in a burst before GOAWAY
/// ENHANCE_YOUR_CALM...
http2_glitch_burst: u32 = 1000,
/// ...and how many more it earns per second.
http2_glitch_rate_per_s: u32 = 33,

// WebSockets (docs/websocket.md).

/// Longest WebSocket message, after joining fragments and decompressing (close 1009 beyond).
websocket_message_bytes_max: u64 = 16 * 1024 * 1024,
/// Bytes that may wait to be sent to one WebSocket client; a send beyond it fails and the
/// connection closes with 1008 (a client that reads too slowly). One message larger than this
/// is still taken when nothing else waits.
websocket_send_queue_bytes_max: u64 = 16 * 1024 * 1024,
/// After this long without a byte from a WebSocket client, the server pings it; 0: never.
websocket_ping_interval_ms: u32 = 30_000,
/// Time a pinged WebSocket client has to answer before the server closes with 1011.
websocket_pong_timeout_ms: u32 = 10_000,
/// Agree to permessage-deflate (RFC 7692) when WebSocket clients offer it.
websocket_deflate: bool = true,
/// WebSocket connections per worker that may use permessage-deflate at once (each holds about
/// 360 KiB of compressor state); beyond it, offers are declined and messages go uncompressed.
websocket_deflate_connections_max: u32 = 64,

// Compression on the fly.

/// What the ready-made handlers compress on the fly and how (docs/compression.md): the codings
/// offered, the smallest body compressed (`bytes_min`, 1 KiB), the compressible media types
/// and each coding's level. `saker serve` hands it to `StaticFiles` (`--compress`); a
/// `saker.middleware.Compress` takes its policy at compile time instead (the same defaults),
/// since middleware options are types. Checked by `validate`.
compression: compress.Policy = .{},

/// TLS settings of a listener. The file names are read at `Server.init` and at each reload:
/// the slices must outlive the server.
pub const Tls = struct {
    /// Certificate chains and their keys, as PEM files. The first is the default; the others
    /// are chosen by the name the client asks for (SNI), matched against each certificate's
    /// names (wildcards included).
    certificates: []const Certificate = &.{},
    /// Instead of `certificates`: a certificate made at start, in memory, for localhost,
    /// 127.0.0.1 and ::1 (ECDSA P-256, valid a year), for local HTTPS. Its SHA-256
    /// fingerprint is in `tls.Context.fingerprint`.
    self_signed: bool = false,
    /// PEM file of the CAs client certificates must chain to. With it, every client must
    /// present a valid certificate (mutual TLS); the handshake fails otherwise.
    client_ca_file: ?[]const u8 = null,
    /// A name (SNI) that matches no certificate gets an `unrecognized_name` alert instead of
    /// the default certificate.
    sni_strict: bool = false,
    /// How often session-ticket keys change (tickets sealed with the previous key are still
    /// taken, and replaced); 0 turns session tickets off.
    ticket_key_rotation_s: u32 = 12 * 3600,
};

/// One more address a server listens on (`Config.listeners`).
pub const Listener = struct {
    /// An IPv4 or IPv6 literal, as `Config.host`.
    host: []const u8 = "127.0.0.1",
    /// 0 asks the kernel for a free one (read it back with `Server.listenerPort`).
    port: u16,
    /// HTTPS on this listener; null serves plaintext HTTP.
    tls: ?Tls = null,
    /// The PROXY protocol on this listener, as `Config.proxy_protocol`.
    proxy_protocol: ?ProxyProtocol = null,
};

/// The PROXY protocol (versions 1 and 2, both taken) on a listener. A connection whose
/// header is missing, malformed, longer than 256 bytes or not whole within
/// `header_timeout_ms` is closed without a word (nothing else can be said: the peer is a
/// proxy, not a client).
pub const ProxyProtocol = struct {
    /// The peers whose header is taken, as addresses or networks ("10.0.0.0/8", "::1",
    /// "127.0.0.1"); a connection from another peer is closed. Empty: any peer, which is
    /// safe only when nothing but the balancer can reach the port.
    from: []const []const u8 = &.{},
};

/// Listeners a server may have, the first (`host`, `port`, `tls`) included.
pub const listeners_max = 16;

/// How many listeners the server has: the first (`host`, `port`, `tls`) and `listeners`.
pub fn listenerCount(config: *const Config) usize {
    return 1 + config.listeners.len;
}

/// Listener `index`: 0 is the first (`host`, `port`, `tls`), then `listeners` in order.
pub fn listenerAt(config: *const Config, index: usize) Listener {
    assert(index < config.listenerCount());
    if (index == 0) return .{ .host = config.host, .port = config.port, .tls = config.tls, .proxy_protocol = config.proxy_protocol };
    return config.listeners[index - 1];
}

/// Whether some listener speaks TLS.
pub fn anyTls(config: *const Config) bool {
    for (0..config.listenerCount()) |i| {
        if (config.listenerAt(i).tls != null) return true;
    }
    return false;
}

/// Checks the TLS settings of every listener; on failure `reason` names the rule.
fn validateListeners(config: *const Config, reason: *[]const u8) Error!void {
    if (config.listenerCount() > listeners_max) {
        reason.* = "listeners: at most 15 besides the first (listeners_max is 16)";
        return error.InvalidConfig;
    }
    for (0..config.listenerCount()) |i| {
        const listener = config.listenerAt(i);
        for (0..i) |j| {
            const other = config.listenerAt(j);
            if (listener.port != 0 and listener.port == other.port and std.mem.eql(u8, listener.host, other.host)) {
                reason.* = "listeners: two listeners on the same address and port";
                return error.InvalidConfig;
            }
        }
        const tls = listener.tls orelse continue;
        if (tls.self_signed == (tls.certificates.len > 0)) {
            reason.* = "tls needs certificates, or self_signed (not both)";
            return error.InvalidConfig;
        }
        for (tls.certificates) |c| {
            if (c.chain_file.len == 0 or c.key_file.len == 0) {
                reason.* = "tls: each certificate needs its chain file and its key file (--tls-cert with --tls-key)";
                return error.InvalidConfig;
            }
        }
    }
}

/// A certificate chain (leaf first) and its private key, as PEM files.
pub const Certificate = struct {
    chain_file: []const u8,
    key_file: []const u8,
};

/// Why `validate` rejected a configuration.
pub const Error = error{InvalidConfig};

/// Checks that the limits fit together; on failure `reason` names the field and the rule.
/// Exchanges a worker lends to HTTP/2 streams besides its connections' own: for a worker
/// that serves one connection at a time, that connection's `http2_streams_max`; for an event
/// loop, `http2_stream_exchanges_max` shared by its connections. Address space, touched only
/// as used.
pub fn streamExchanges(config: *const Config, one_connection: bool) u32 {
    if (!config.http2) return 0;
    return if (one_connection) config.http2_streams_max else config.http2_stream_exchanges_max;
}

pub fn validate(config: *const Config, reason: *[]const u8) Error!void {
    const rules = [_]struct { ok: bool, why: []const u8 }{
        .{
            .ok = config.request_line_bytes_max <= config.header_bytes_max,
            .why = "request_line_bytes_max must not exceed header_bytes_max",
        },
        .{
            .ok = config.recv_buffer_bytes >= 1024,
            .why = "recv_buffer_bytes must be at least 1024",
        },
        .{
            .ok = config.recv_buffer_bytes <= config.header_bytes_max,
            .why = "recv_buffer_bytes must not exceed header_bytes_max",
        },
        .{
            .ok = config.header_bytes_max <= 16 * 1024 * 1024,
            .why = "header_bytes_max must not exceed 16 MiB",
        },
        .{ .ok = config.header_count_max >= 1, .why = "header_count_max must be at least 1" },
        .{
            .ok = config.send_buffer_bytes >= 2048,
            .why = "send_buffer_bytes must be at least 2048",
        },
        .{ .ok = config.connections_max >= 1, .why = "connections_max must be at least 1" },
        .{
            .ok = config.requests_per_connection_max >= 1,
            .why = "requests_per_connection_max must be at least 1",
        },
        .{ .ok = config.backlog >= 1, .why = "backlog must be at least 1" },
        .{
            .ok = if (config.compression.validate()) true else |_| false,
            .why = "compression: a level, stream window or media type the encoders do not take",
        },
        .{
            .ok = config.workers <= 1024,
            .why = "workers must not exceed 1024",
        },
        .{
            .ok = config.websocket_message_bytes_max >= 125 and config.websocket_message_bytes_max <= 1 << 40,
            .why = "websocket_message_bytes_max must be between 125 bytes and 1 TiB",
        },
        .{
            .ok = config.websocket_ping_interval_ms == 0 or config.websocket_pong_timeout_ms > 0,
            .why = "websocket_pong_timeout_ms must be positive when pings are on",
        },
        .{
            .ok = !config.h2c_only or config.http2,
            .why = "h2c_only needs http2",
        },
        .{
            .ok = !config.http2 or (config.http2_stream_exchanges_max >= 1 and config.http2_stream_exchanges_max <= 1_000_000),
            .why = "http2_stream_exchanges_max must be 1 to 1000000",
        },
        .{
            .ok = config.http2_streams_max >= 1 and config.http2_streams_max <= 10_000,
            .why = "http2_streams_max must be 1 to 10000",
        },
        .{
            .ok = config.http2_stream_window_bytes >= 65_535 and config.http2_stream_window_bytes <= (1 << 31) - 1,
            .why = "http2_stream_window_bytes must be 65535 to 2^31-1",
        },
        .{
            .ok = config.http2_connection_window_bytes >= 65_535 and config.http2_connection_window_bytes <= (1 << 31) - 1,
            .why = "http2_connection_window_bytes must be 65535 to 2^31-1",
        },
        .{
            .ok = config.http2_frame_bytes_max >= 16_384 and config.http2_frame_bytes_max <= (1 << 24) - 1,
            .why = "http2_frame_bytes_max must be 16384 to 2^24-1",
        },
        .{
            .ok = config.http2_header_table_bytes == 4096,
            .why = "http2_header_table_bytes must be 4096 (the table size SETTINGS does not announce)",
        },
        .{ .ok = config.pool_threads >= 1, .why = "pool_threads must be at least 1" },
        .{ .ok = config.processes >= 1 and config.processes <= 256, .why = "processes must be 1 to 256" },
        .{
            .ok = std.math.isPowerOfTwo(config.io_uring_recv_buffers) and config.io_uring_recv_buffers <= 32768,
            .why = "io_uring_recv_buffers must be a power of two, at most 32768",
        },
        .{
            .ok = config.io_uring_entries >= 64 and std.math.isPowerOfTwo(config.io_uring_entries),
            .why = "io_uring_entries must be a power of two, at least 64",
        },
        .{ .ok = config.io_uring_recv_buffer_bytes >= 512, .why = "io_uring_recv_buffer_bytes must be at least 512" },
        .{ .ok = config.pool_queue_max >= 1, .why = "pool_queue_max must be at least 1" },
        .{ .ok = config.handler_queue_max >= 1, .why = "handler_queue_max must be at least 1" },
        .{
            .ok = config.arena_request_bytes_max >= @as(u64, config.arena_bytes) + config.body_bytes_max,
            .why = "arena_request_bytes_max must be at least arena_bytes + body_bytes_max (buffered bodies live in the arena)",
        },
        .{
            .ok = config.decodedBodyBytesMax() <= config.arena_request_bytes_max -| config.arena_bytes,
            .why = "decoded_body_bytes_max must not exceed arena_request_bytes_max - arena_bytes (decoded bodies live in the arena)",
        },
        .{
            .ok = !config.anyTls() or config.tls_handshake_timeout_ms > 0,
            .why = "tls_handshake_timeout_ms must be positive",
        },
        .{
            .ok = config.thread_stack_bytes >= 64 * 1024,
            .why = "thread_stack_bytes must be at least 64 KiB",
        },
    };
    for (rules) |rule| {
        if (!rule.ok) {
            reason.* = rule.why;
            return error.InvalidConfig;
        }
    }
    try config.validateListeners(reason);
}

/// The most bytes a request body in a `Content-Encoding` may decode to:
/// `decoded_body_bytes_max`, or `body_bytes_max` when it is null.
pub fn decodedBodyBytesMax(config: *const Config) u64 {
    return config.decoded_body_bytes_max orelse config.body_bytes_max;
}

/// The number of worker threads `workers` asks for on this machine.
pub fn workerCount(config: *const Config) u16 {
    if (config.workers != 0) return config.workers;
    const cpus = std.Thread.getCpuCount() catch 1;
    return @intCast(@min(cpus, 1024));
}

test "Config: defaults are valid" {
    var reason: []const u8 = "";
    const config: Config = .{};
    try config.validate(&reason);
}

test "Config: listeners are numbered from the first, and their TLS settings checked" {
    var reason: []const u8 = "";
    const extra = [_]Listener{ .{ .port = 8443, .tls = .{ .self_signed = true } }, .{ .host = "::1", .port = 0 } };
    var config: Config = .{ .port = 8080, .listeners = &extra };
    try config.validate(&reason);
    try std.testing.expectEqual(3, config.listenerCount());
    try std.testing.expectEqual(8080, config.listenerAt(0).port);
    try std.testing.expect(config.listenerAt(0).tls == null);
    try std.testing.expect(config.listenerAt(1).tls.?.self_signed);
    try std.testing.expectEqualStrings("::1", config.listenerAt(2).host);
    try std.testing.expect(config.anyTls());

    const no_certificate = [_]Listener{.{ .port = 8443, .tls = .{} }};
    config.listeners = &no_certificate;
    try std.testing.expectError(error.InvalidConfig, config.validate(&reason));
    try std.testing.expect(std.mem.find(u8, reason, "certificates") != null);

    const same_port = [_]Listener{.{ .port = 8080 }};
    config.listeners = &same_port;
    try std.testing.expectError(error.InvalidConfig, config.validate(&reason));
    try std.testing.expect(std.mem.find(u8, reason, "same address and port") != null);

    const too_many: [listeners_max]Listener = @splat(.{ .port = 0 });
    config.listeners = &too_many;
    try std.testing.expectError(error.InvalidConfig, config.validate(&reason));
    try std.testing.expect(std.mem.find(u8, reason, "listeners_max") != null);
}

test "Config: inconsistent limits are named" {
    var reason: []const u8 = "";
    const config: Config = .{ .request_line_bytes_max = 100_000 };
    try std.testing.expectError(error.InvalidConfig, config.validate(&reason));
    try std.testing.expect(std.mem.find(u8, reason, "request_line_bytes_max") != null);
}

test "Config: the decoded body limit follows body_bytes_max unless set, and fits the arena" {
    var reason: []const u8 = "";
    var config: Config = .{ .body_bytes_max = 1000, .arena_request_bytes_max = 64 * 1024 };
    try config.validate(&reason);
    try std.testing.expectEqual(1000, config.decodedBodyBytesMax());
    config.decoded_body_bytes_max = 20_000;
    try config.validate(&reason);
    try std.testing.expectEqual(20_000, config.decodedBodyBytesMax());
    config.decoded_body_bytes_max = 64 * 1024;
    try std.testing.expectError(error.InvalidConfig, config.validate(&reason));
    try std.testing.expect(std.mem.find(u8, reason, "decoded_body_bytes_max") != null);
}

/// The engines saker offers (`engine.Kind` names the same type).
pub const Engine = enum {
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
    pub fn parse(name: []const u8) ?Engine {
        return std.meta.stringToEnum(Engine, name);
    }
};
