//! TLS (docs/tls.md): OpenSSL 3 does the cryptography; saker owns the buffers and the
//! sockets. `Context` is what a listener's connections share; the per-connection state
//! machine is the TLS transport (`transport/Tls.zig`).
pub const Context = @import("tls/Context.zig");
/// The OpenSSL 3 functions saker declares (for tests and programs that need a TLS client).
pub const openssl = @import("tls/openssl.zig");

test {
    _ = Context;
    _ = @import("transport/Tls.zig");
}
