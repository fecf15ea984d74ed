//! What a handler may know of its request's TLS session (`Request.tls()`), kept apart from
//! the transport so that `Request` imports no TLS code.

/// The TLS facts of a request's connection.
pub const Facts = struct {
    /// "TLSv1.3" or "TLSv1.2".
    version: []const u8,
    /// The cipher suite's OpenSSL name, e.g. "TLS_AES_128_GCM_SHA256".
    cipher: []const u8,
    /// The name the client asked for (SNI), if it sent one.
    server_name: ?[]const u8,
    /// The protocol chosen by ALPN, if the client offered ALPN.
    alpn: ?[]const u8,
    /// Whether the session was resumed (a ticket) rather than fully negotiated.
    resumed: bool,
};

/// A connection's TLS session, type-erased: `describe` reads its facts, `client_subject`
/// writes the client certificate's subject (mutual TLS) into a buffer.
pub const Session = struct {
    context: *const anyopaque,
    describe: *const fn (context: *const anyopaque) Facts,
    client_subject: *const fn (context: *const anyopaque, buffer: []u8) ?[]const u8,
};
