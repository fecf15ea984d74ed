//! What the connections of one listener share: its TLS context (HTTPS) and its PROXY protocol
//! policy. A listener's engine threads hand it to every connection they start; the server owns
//! it for as long as it serves.
const std = @import("std");
const TlsContext = @import("tls/Context.zig");
const proxy_header = @import("proxy_header.zig");

const Listening = @This();

/// Connections speak TLS with this context; null: plaintext.
tls: ?*TlsContext = null,
/// Connections start with a PROXY protocol header (`Config.ProxyProtocol`); null: they do not.
proxy: ?Proxy = null,

/// A plaintext listener without a PROXY header.
pub const plaintext: Listening = .{};

pub const Proxy = struct {
    /// Where each connection's header reader comes from.
    gpa: std.mem.Allocator,
    /// Peers whose header is taken; empty: any peer.
    trusted: []const proxy_header.Cidr,
    /// Time a connection has to send the whole header.
    timeout_ms: u32,

    /// Whether a header from `peer` is taken (an unknown peer is not, when some are listed).
    pub fn trusts(proxy: *const Proxy, peer: ?*const std.Io.net.IpAddress) bool {
        if (proxy.trusted.len == 0) return true;
        const address = peer orelse return false;
        for (proxy.trusted) |network| if (network.contains(address.*)) return true;
        return false;
    }
};
