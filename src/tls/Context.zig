//! What every TLS connection of a listener shares: OpenSSL contexts (one per certificate,
//! picked by SNI), the policy (TLS 1.3 and 1.2 only, AEAD suites in the server's order, no
//! renegotiation, no compression, ALPN), rotating session-ticket keys, and the pool of
//! record buffers the connections borrow while they have records in flight. Made once at
//! start (`init`, which fails naming the file at fault); `reload` swaps the certificates in
//! without touching open connections. Thread-safe: every worker opens sessions from it.
const std = @import("std");
const assert = std.debug.assert;
const ssl = @import("openssl.zig");
const Config = @import("../Config.zig");
const sync = @import("../sync.zig");
const Tls = @import("../transport/Tls.zig");

const log = std.log.scoped(.saker);

const Context = @This();

gpa: std.mem.Allocator,
settings: Config.Tls,
bio_method: *ssl.BIO_METHOD,
/// The certificate set in use: new handshakes read it; `reload` replaces it.
certificates: std.atomic.Value(*Certificates),
/// The set `reload` replaced last, kept until the next reload so that a handshake that read
/// it just before the swap finishes with it.
retired: ?*Certificates = null,
reload_mutex: sync.Mutex = .{},
/// SHA-256 of the default certificate (DER), shown by `saker serve`.
fingerprint: [32]u8,
tickets: Tickets = .{},
buffers: Buffers,
/// Sessions open now (for the log and tests).
sessions_open: std.atomic.Value(u32) = .init(0),
/// Handshakes that completed, and that failed or timed out (for metrics).
handshakes_completed: std.atomic.Value(u64) = .init(0),
handshakes_failed: std.atomic.Value(u64) = .init(0),

/// Whether ALPN offers `h2` (`Config.http2`; set before the first handshake).
offer_http2: bool = true,

/// ALPN protocols the server speaks, in its order of preference (RFC 7301 wire format).
pub const alpn_protocols = "\x02h2\x08http/1.1";
/// The same without HTTP/2.
pub const alpn_protocols_http1 = "\x08http/1.1";

/// Why `init` or `reload` failed (the log names the file and OpenSSL's reason).
pub const Error = error{ TlsSetupFailed, OutOfMemory };

/// The certificates of one generation: an OpenSSL context for each, the first the default.
const Certificates = struct {
    contexts: []*ssl.SSL_CTX,

    fn deinit(set: *Certificates, gpa: std.mem.Allocator) void {
        for (set.contexts) |ctx| ssl.SSL_CTX_free(ctx);
        gpa.free(set.contexts);
        gpa.destroy(set);
    }
};

pub fn init(gpa: std.mem.Allocator, settings: Config.Tls) Error!*Context {
    if (ssl.OPENSSL_init_ssl(0, null) != 1) return fail("OpenSSL", "could not initialise");
    const bio_method = Tls.newBioMethod() orelse return fail("OpenSSL", "BIO_meth_new failed");
    errdefer ssl.BIO_meth_free(bio_method);
    const context = try gpa.create(Context);
    errdefer gpa.destroy(context);
    context.* = .{
        .gpa = gpa,
        .settings = settings,
        .bio_method = bio_method,
        .certificates = undefined,
        .fingerprint = undefined,
        .buffers = .{},
    };
    if (settings.ticket_key_rotation_s > 0) context.tickets.rotate(0);
    const set = try context.load();
    context.certificates = .init(set);
    return context;
}

pub fn deinit(context: *Context) void {
    const open_sessions = context.sessions_open.load(.acquire);
    if (open_sessions != 0) {
        // Connections a shutdown timeout abandoned still point here: their memory is left to
        // the process exit, as the engines leave theirs.
        log.warn("TLS: {d} sessions still open at shutdown; their context is not freed", .{open_sessions});
        return;
    }
    context.certificates.load(.acquire).deinit(context.gpa);
    if (context.retired) |set| set.deinit(context.gpa);
    context.buffers.deinit();
    ssl.BIO_meth_free(context.bio_method);
    context.gpa.destroy(context);
}

/// Loads the certificates again from their files (for SIGHUP): new handshakes use them, open
/// connections keep theirs. A failure keeps the certificates in use and says why in the log.
pub fn reload(context: *Context) Error!void {
    if (context.settings.self_signed) return; // nothing on disk to reload
    context.reload_mutex.lock();
    defer context.reload_mutex.unlock();
    const set = context.load() catch |err| {
        log.err("TLS reload failed; the certificates in use stay", .{});
        return err;
    };
    const old = context.certificates.swap(set, .acq_rel);
    if (context.retired) |older| older.deinit(context.gpa);
    context.retired = old;
    log.info("TLS certificates reloaded", .{});
}

/// A new TLS session for an accepted connection, or null (logged) when OpenSSL cannot make
/// one; `now_ms` on the caller's clock starts the handshake deadline.
pub fn open(context: *Context, now_ms: u64, timeout_ms: u32) ?*Tls {
    const set = context.certificates.load(.acquire);
    return Tls.create(context, set.contexts[0], now_ms + timeout_ms);
}

fn load(context: *Context) Error!*Certificates {
    const gpa = context.gpa;
    const settings = context.settings;
    const count = if (settings.self_signed) 1 else settings.certificates.len;
    assert(count > 0);
    const contexts = try gpa.alloc(*ssl.SSL_CTX, count);
    errdefer gpa.free(contexts);
    var made: usize = 0;
    errdefer for (contexts[0..made]) |ctx| ssl.SSL_CTX_free(ctx);
    for (contexts, 0..) |*slot, i| {
        const ctx = try context.newContext();
        errdefer ssl.SSL_CTX_free(ctx);
        if (settings.self_signed) {
            try selfSigned(ctx);
        } else {
            try useCertificate(ctx, settings.certificates[i]);
        }
        slot.* = ctx;
        made += 1;
    }
    const leaf = ssl.SSL_CTX_get0_certificate(contexts[0]) orelse return fail("certificate", "missing");
    var length: c_uint = 32;
    if (ssl.X509_digest(leaf, ssl.EVP_sha256(), &context.fingerprint, &length) != 1) return fail("certificate", "no digest");
    const set = try gpa.create(Certificates);
    set.* = .{ .contexts = contexts };
    return set;
}

/// One OpenSSL context with saker's policy and callbacks, and no certificate yet.
fn newContext(context: *Context) Error!*ssl.SSL_CTX {
    const ctx = ssl.SSL_CTX_new(ssl.TLS_server_method()) orelse return fail("OpenSSL", "SSL_CTX_new failed");
    errdefer ssl.SSL_CTX_free(ctx);
    _ = ssl.SSL_CTX_ctrl(ctx, ssl.SSL_CTRL_SET_MIN_PROTO_VERSION, ssl.TLS1_2_VERSION, null);
    _ = ssl.SSL_CTX_ctrl(ctx, ssl.SSL_CTRL_SET_MAX_PROTO_VERSION, ssl.TLS1_3_VERSION, null);
    _ = ssl.SSL_CTX_set_options(ctx, ssl.SSL_OP_CIPHER_SERVER_PREFERENCE | ssl.SSL_OP_NO_RENEGOTIATION |
        ssl.SSL_OP_NO_COMPRESSION | ssl.SSL_OP_PRIORITIZE_CHACHA);
    // TLS 1.2: forward-secret AEAD suites only, ECDSA before RSA, AES-GCM and ChaCha20.
    if (ssl.SSL_CTX_set_cipher_list(ctx, tls12_ciphers) != 1) return fail("OpenSSL", "cipher list refused");
    if (ssl.SSL_CTX_set_ciphersuites(ctx, tls13_suites) != 1) return fail("OpenSSL", "TLS 1.3 suites refused");
    // Records are encrypted into saker's own buffers, whole: OpenSSL's buffers are given back
    // while a connection is idle.
    _ = ssl.SSL_CTX_ctrl(ctx, ssl.SSL_CTRL_MODE, ssl.SSL_MODE_RELEASE_BUFFERS, null);
    // Resumption is by tickets alone (stateless): a server-side session cache would take a
    // lock, an allocation and a hash insertion per handshake, and grow with clients.
    _ = ssl.SSL_CTX_ctrl(ctx, ssl.SSL_CTRL_SET_SESS_CACHE_MODE, ssl.SSL_SESS_CACHE_OFF, null);
    _ = ssl.SSL_CTX_set_session_id_context(ctx, "saker", 5);
    ssl.SSL_CTX_set_alpn_select_cb(ctx, selectAlpn, context);
    _ = ssl.SSL_CTX_callback_ctrl(ctx, ssl.SSL_CTRL_SET_TLSEXT_SERVERNAME_CB, @ptrCast(&serverName));
    _ = ssl.SSL_CTX_ctrl(ctx, ssl.SSL_CTRL_SET_TLSEXT_SERVERNAME_ARG, 0, context);
    if (context.settings.ticket_key_rotation_s > 0) {
        _ = ssl.SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticketKey);
        _ = ssl.SSL_CTX_set_ex_data(ctx, 0, context);
    } else {
        _ = ssl.SSL_CTX_set_options(ctx, ssl.SSL_OP_NO_TICKET);
        _ = ssl.SSL_CTX_set_num_tickets(ctx, 0);
    }
    if (context.settings.client_ca_file) |file| {
        var path: [std.fs.max_path_bytes:0]u8 = undefined;
        const z = try pathZ(&path, file);
        if (ssl.SSL_CTX_load_verify_locations(ctx, z, null) != 1) return failFile("client CA file", file);
        const names = ssl.SSL_load_client_CA_file(z) orelse return failFile("client CA file", file);
        ssl.SSL_CTX_set_client_CA_list(ctx, names);
        ssl.SSL_CTX_set_verify(ctx, ssl.SSL_VERIFY_PEER | ssl.SSL_VERIFY_FAIL_IF_NO_PEER_CERT, null);
    }
    return ctx;
}

const tls12_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:" ++
    "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305";
const tls13_suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

fn useCertificate(ctx: *ssl.SSL_CTX, certificate: Config.Certificate) Error!void {
    var chain_path: [std.fs.max_path_bytes:0]u8 = undefined;
    var key_path: [std.fs.max_path_bytes:0]u8 = undefined;
    const chain = try pathZ(&chain_path, certificate.chain_file);
    const key = try pathZ(&key_path, certificate.key_file);
    if (ssl.SSL_CTX_use_certificate_chain_file(ctx, chain) != 1) return failFile("certificate chain", certificate.chain_file);
    if (ssl.SSL_CTX_use_PrivateKey_file(ctx, key, ssl.SSL_FILETYPE_PEM) != 1) return failFile("private key", certificate.key_file);
    if (ssl.SSL_CTX_check_private_key(ctx) != 1) return failFile("private key (it does not match the certificate)", certificate.key_file);
    const leaf = ssl.SSL_CTX_get0_certificate(ctx) orelse return failFile("certificate chain", certificate.chain_file);
    if (ssl.X509_cmp_current_time(ssl.X509_get0_notAfter(leaf)) <= 0) {
        log.err("TLS: the certificate in {s} has expired", .{certificate.chain_file});
        return error.TlsSetupFailed;
    }
    if (ssl.X509_cmp_current_time(ssl.X509_get0_notBefore(leaf)) >= 0) {
        log.err("TLS: the certificate in {s} is not valid yet", .{certificate.chain_file});
        return error.TlsSetupFailed;
    }
}

/// How long a self-signed certificate is valid. It is made anew at each start, so its length
/// guards nothing; a year keeps clients (and testssl.sh) from warning about expiry.
const self_signed_days = 365;

/// A fresh ECDSA P-256 key and a certificate for localhost, 127.0.0.1 and ::1, signed by
/// that key, valid from an hour ago for `self_signed_days`.
fn selfSigned(ctx: *ssl.SSL_CTX) Error!void {
    const keygen = ssl.EVP_PKEY_CTX_new_from_name(null, "EC", null) orelse return fail("self-signed", "no EC key generator");
    defer ssl.EVP_PKEY_CTX_free(keygen);
    var key: ?*ssl.EVP_PKEY = null;
    if (ssl.EVP_PKEY_keygen_init(keygen) != 1 or ssl.EVP_PKEY_CTX_set_group_name(keygen, "P-256") != 1 or
        ssl.EVP_PKEY_generate(keygen, &key) != 1) return fail("self-signed", "key generation failed");
    defer ssl.EVP_PKEY_free(key);
    const x = ssl.X509_new() orelse return error.OutOfMemory;
    defer ssl.X509_free(x);
    // A random 127-bit serial number (RFC 5280 allows up to 20 octets; CA/B rules ask for 64
    // bits of entropy at least).
    const serial = ssl.BN_new() orelse return error.OutOfMemory;
    defer ssl.BN_free(serial);
    if (ssl.BN_rand(serial, 127, -1, 0) != 1) return fail("self-signed", "no random serial number");
    const name = ssl.X509_get_subject_name(x);
    const ok = ssl.X509_set_version(x, 2) == 1 and
        ssl.BN_to_ASN1_INTEGER(serial, ssl.X509_get_serialNumber(x)) != null and
        ssl.X509_gmtime_adj(ssl.X509_getm_notBefore(x), -3600) != null and
        ssl.X509_gmtime_adj(ssl.X509_getm_notAfter(x), self_signed_days * 24 * 3600) != null and
        ssl.X509_set_pubkey(x, key.?) == 1 and
        ssl.X509_NAME_add_entry_by_txt(name, "O", ssl.MBSTRING_ASC, "saker (self-signed)", -1, -1, 0) == 1 and
        ssl.X509_NAME_add_entry_by_txt(name, "CN", ssl.MBSTRING_ASC, "localhost", -1, -1, 0) == 1 and
        ssl.X509_set_issuer_name(x, name) == 1;
    if (!ok) return fail("self-signed", "certificate fields refused");
    const san = ssl.X509V3_EXT_conf_nid(null, null, ssl.NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") orelse
        return fail("self-signed", "subjectAltName refused");
    defer ssl.X509_EXTENSION_free(san);
    if (ssl.X509_add_ext(x, san, -1) != 1) return fail("self-signed", "subjectAltName refused");
    if (ssl.X509_sign(x, key.?, ssl.EVP_sha256()) == 0) return fail("self-signed", "signing failed");
    if (ssl.SSL_CTX_use_certificate(ctx, x) != 1 or ssl.SSL_CTX_use_PrivateKey(ctx, key.?) != 1) return fail("self-signed", "not usable");
}

fn pathZ(buffer: *[std.fs.max_path_bytes:0]u8, path: []const u8) Error![*:0]const u8 {
    if (path.len >= buffer.len or std.mem.findScalar(u8, path, 0) != null) {
        log.err("TLS: the path {s} is too long or holds a NUL", .{path});
        return error.TlsSetupFailed;
    }
    @memcpy(buffer[0..path.len], path);
    buffer[path.len] = 0;
    return buffer[0..path.len :0];
}

fn failFile(what: []const u8, file: []const u8) error{TlsSetupFailed} {
    var buffer: [256]u8 = undefined;
    log.err("TLS: cannot use the {s} {s}: {s}", .{ what, file, ssl.lastError(&buffer, "unreadable") });
    return error.TlsSetupFailed;
}

fn fail(what: []const u8, why: []const u8) error{TlsSetupFailed} {
    var buffer: [256]u8 = undefined;
    log.err("TLS: {s}: {s} ({s})", .{ what, why, ssl.lastError(&buffer, "no OpenSSL error") });
    return error.TlsSetupFailed;
}

/// ALPN (RFC 7301): the first of the server's protocols the client offers. A client that
/// offers ALPN but none of them gets the `no_application_protocol` alert (§3.2).
fn selectAlpn(_: *ssl.SSL, out: *[*]const u8, outlen: *u8, in: [*]const u8, inlen: c_uint, arg: ?*anyopaque) callconv(.c) c_int {
    const context: *const Context = @ptrCast(@alignCast(arg.?));
    const offered = in[0..inlen];
    var server: []const u8 = if (context.offer_http2) alpn_protocols else alpn_protocols_http1;
    while (server.len > 0) {
        const len = server[0];
        const protocol = server[1..][0..len];
        var rest = offered;
        while (rest.len > 0) {
            const n = rest[0];
            if (1 + @as(usize, n) > rest.len) return ssl.SSL_TLSEXT_ERR_ALERT_FATAL; // malformed list
            if (std.mem.eql(u8, rest[1..][0..n], protocol)) {
                out.* = rest[1..].ptr;
                outlen.* = n;
                return ssl.SSL_TLSEXT_ERR_OK;
            }
            rest = rest[1 + n ..];
        }
        server = server[1 + len ..];
    }
    return ssl.SSL_TLSEXT_ERR_ALERT_FATAL;
}

/// SNI: switches the handshake to the certificate whose names match the one asked for; no
/// match keeps the default (or, with `sni_strict`, ends it with `unrecognized_name`).
fn serverName(connection: *ssl.SSL, alert: *c_int, arg: ?*anyopaque) callconv(.c) c_int {
    const context: *Context = @ptrCast(@alignCast(arg.?));
    const asked = ssl.SSL_get_servername(connection, ssl.TLSEXT_NAMETYPE_host_name) orelse return ssl.SSL_TLSEXT_ERR_OK;
    const name = std.mem.span(asked);
    const set = context.certificates.load(.acquire);
    for (set.contexts) |ctx| {
        const leaf = ssl.SSL_CTX_get0_certificate(ctx) orelse continue;
        if (ssl.X509_check_host(leaf, name.ptr, name.len, 0, null) == 1) {
            if (ctx != set.contexts[0]) _ = ssl.SSL_set_SSL_CTX(connection, ctx);
            return ssl.SSL_TLSEXT_ERR_OK;
        }
    }
    if (context.settings.sni_strict) {
        alert.* = ssl.SSL_AD_UNRECOGNIZED_NAME;
        return ssl.SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return ssl.SSL_TLSEXT_ERR_OK;
}

/// Session-ticket keys (RFC 5077 tickets, TLS 1.3 resumption): a current key that seals new
/// tickets and the previous one, still taken; `rotate` makes a new current key every
/// `ticket_key_rotation_s`, so a stolen key opens at most two periods of sessions.
const Tickets = struct {
    mutex: sync.Mutex = .{},
    keys: [2]Key = undefined,
    count: u8 = 0,
    rotated_s: i64 = 0,

    const Key = struct { name: [16]u8, aes: [32]u8, hmac: [32]u8 };

    fn rotate(t: *Tickets, now_s: i64) void {
        var key: Key = undefined;
        _ = ssl.RAND_bytes(&key.name, key.name.len);
        _ = ssl.RAND_bytes(&key.aes, key.aes.len);
        _ = ssl.RAND_bytes(&key.hmac, key.hmac.len);
        t.keys[1] = t.keys[0];
        t.keys[0] = key;
        t.count = @min(t.count + 1, 2);
        t.rotated_s = now_s;
    }

    /// The key to seal with (rotating first when due), or the key named `name`.
    fn find(t: *Tickets, period_s: u32, name: ?*const [16]u8, out: *Key) bool {
        t.mutex.lock();
        defer t.mutex.unlock();
        const now_s = wallSeconds();
        if (t.rotated_s == 0) t.rotated_s = now_s;
        if (now_s - t.rotated_s >= period_s) t.rotate(now_s);
        const wanted = name orelse {
            out.* = t.keys[0];
            return true;
        };
        for (t.keys[0..t.count]) |key| {
            if (std.mem.eql(u8, &key.name, wanted)) {
                out.* = key;
                return true;
            }
        }
        return false;
    }
};

fn wallSeconds() i64 {
    return @import("../clock.zig").read(.REALTIME).sec;
}

fn ticketKey(connection: *ssl.SSL, key_name: [*]u8, iv: [*]u8, cipher: *ssl.EVP_CIPHER_CTX, mac: *ssl.EVP_MAC_CTX, enc: c_int) callconv(.c) c_int {
    const ctx = ssl.SSL_get_SSL_CTX(connection) orelse return -1;
    const context: *Context = @ptrCast(@alignCast(ssl.SSL_CTX_get_ex_data(ctx, 0) orelse return -1));
    var key: Tickets.Key = undefined;
    const period = context.settings.ticket_key_rotation_s;
    if (enc == 1) {
        _ = context.tickets.find(period, null, &key);
        @memcpy(key_name[0..16], &key.name);
        if (ssl.RAND_bytes(iv, 16) != 1) return -1;
        if (ssl.EVP_EncryptInit_ex(cipher, ssl.EVP_aes_256_cbc(), null, &key.aes, iv) != 1) return -1;
    } else {
        if (!context.tickets.find(period, key_name[0..16], &key)) return 0; // unknown: full handshake
        if (ssl.EVP_DecryptInit_ex(cipher, ssl.EVP_aes_256_cbc(), null, &key.aes, iv) != 1) return -1;
    }
    var digest = "SHA256".*;
    const params = [_]ssl.OSSL_PARAM{
        ssl.OSSL_PARAM_construct_octet_string("key", &key.hmac, key.hmac.len),
        ssl.OSSL_PARAM_construct_utf8_string("digest", &digest, 0),
        ssl.OSSL_PARAM_construct_end(),
    };
    if (ssl.EVP_MAC_CTX_set_params(mac, &params) != 1) return -1;
    // Decrypted: 2 asks for a fresh ticket. A TLS 1.3 client uses a ticket once (RFC 8446
    // §C.4), and OpenSSL issues one on a resumption only when asked: without it every other
    // connection of a client would be a full handshake. (A ticket under the previous key is
    // replaced this way too.)
    return if (enc == 1) 1 else 2;
}

/// Record buffers: a connection borrows one for records received and not yet decrypted,
/// one for records to send, and one for file bytes to encrypt, each only while it holds
/// bytes, so an idle connection holds none. Freed only with the context.
pub const Buffers = struct {
    mutex: sync.Mutex = .{},
    free: ?*Buffer = null,
    made: u32 = 0,

    pub fn take(b: *Buffers) ?*Buffer {
        b.mutex.lock();
        if (b.free) |buffer| {
            b.free = buffer.next;
            b.mutex.unlock();
            return buffer;
        }
        b.made += 1;
        b.mutex.unlock();
        const buffer = std.heap.page_allocator.create(Buffer) catch {
            b.mutex.lock();
            b.made -= 1;
            b.mutex.unlock();
            return null;
        };
        return buffer;
    }

    pub fn give(b: *Buffers, buffer: *Buffer) void {
        b.mutex.lock();
        defer b.mutex.unlock();
        buffer.next = b.free;
        b.free = buffer;
    }

    fn deinit(b: *Buffers) void {
        var freed: u32 = 0;
        while (b.free) |buffer| {
            b.free = buffer.next;
            std.heap.page_allocator.destroy(buffer);
            freed += 1;
        }
        assert(freed == b.made);
    }
};

/// Room for two full TLS records (RFC 8446 §5.2: 2^14 bytes of plaintext, at most 256 of
/// expansion, a 5-byte header), with slack.
pub const Buffer = struct {
    bytes: [bytes_max]u8 align(64),
    next: ?*Buffer,

    pub const bytes_max = 2 * record_bytes_max + 1024;
    pub const record_bytes_max = 16 * 1024 + 256 + 5;
    /// Plaintext bytes encrypted per record.
    pub const record_plain_max = 16 * 1024;
};
