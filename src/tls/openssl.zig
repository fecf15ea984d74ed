//! The part of OpenSSL 3's C API that saker uses, declared by hand so that building needs only
//! the runtime libraries (`libssl.so.3`, `libcrypto.so.3`, which every Debian with python3
//! has) and no `-dev` headers. Each declaration follows the OpenSSL 3.0 manual page of the
//! same name; the constants are those of the 3.0 headers. Macros of the C API are spelled out
//! as the `*_ctrl` calls they expand to.
const std = @import("std");

pub const SSL_CTX = opaque {};
pub const SSL = opaque {};
pub const SSL_METHOD = opaque {};
pub const SSL_CIPHER = opaque {};
pub const BIO = opaque {};
pub const BIO_METHOD = opaque {};
pub const X509 = opaque {};
pub const X509_NAME = opaque {};
pub const X509_EXTENSION = opaque {};
pub const X509_STORE_CTX = opaque {};
pub const ASN1_INTEGER = opaque {};
pub const ASN1_TIME = opaque {};
pub const EVP_PKEY = opaque {};
pub const EVP_PKEY_CTX = opaque {};
pub const EVP_MD = opaque {};
pub const EVP_CIPHER = opaque {};
pub const EVP_CIPHER_CTX = opaque {};
pub const EVP_MAC_CTX = opaque {};
pub const OSSL_PARAM = extern struct {
    key: ?[*:0]const u8,
    data_type: c_uint,
    data: ?*anyopaque,
    data_size: usize,
    return_size: usize,
};
pub const STACK = opaque {};

// Library.
pub extern fn OPENSSL_init_ssl(opts: u64, settings: ?*const anyopaque) c_int;
pub extern fn OpenSSL_version(t: c_int) [*:0]const u8;
pub extern fn OpenSSL_version_num() c_ulong;

// Errors.
pub extern fn ERR_get_error() c_ulong;
pub extern fn ERR_peek_error() c_ulong;
pub extern fn ERR_clear_error() void;
pub extern fn ERR_error_string_n(e: c_ulong, buf: [*]u8, len: usize) void;

// Contexts.
pub extern fn TLS_server_method() ?*const SSL_METHOD;
pub extern fn TLS_client_method() ?*const SSL_METHOD;
pub extern fn SSL_CTX_new(method: ?*const SSL_METHOD) ?*SSL_CTX;
pub extern fn SSL_CTX_free(ctx: ?*SSL_CTX) void;
pub extern fn SSL_CTX_up_ref(ctx: *SSL_CTX) c_int;
pub extern fn SSL_CTX_ctrl(ctx: *SSL_CTX, cmd: c_int, larg: c_long, parg: ?*anyopaque) c_long;
pub extern fn SSL_CTX_callback_ctrl(ctx: *SSL_CTX, cmd: c_int, fp: ?*const fn () callconv(.c) void) c_long;
pub extern fn SSL_CTX_set_options(ctx: *SSL_CTX, options: u64) u64;
pub extern fn SSL_CTX_set_cipher_list(ctx: *SSL_CTX, list: [*:0]const u8) c_int;
pub extern fn SSL_CTX_set_ciphersuites(ctx: *SSL_CTX, list: [*:0]const u8) c_int;
pub extern fn SSL_CTX_use_certificate_chain_file(ctx: *SSL_CTX, file: [*:0]const u8) c_int;
pub extern fn SSL_CTX_use_PrivateKey_file(ctx: *SSL_CTX, file: [*:0]const u8, kind: c_int) c_int;
pub extern fn SSL_CTX_use_certificate(ctx: *SSL_CTX, x: *X509) c_int;
pub extern fn SSL_CTX_use_PrivateKey(ctx: *SSL_CTX, pkey: *EVP_PKEY) c_int;
pub extern fn SSL_CTX_check_private_key(ctx: *const SSL_CTX) c_int;
pub extern fn SSL_CTX_get0_certificate(ctx: *const SSL_CTX) ?*X509;
pub extern fn SSL_CTX_set_alpn_select_cb(ctx: *SSL_CTX, cb: *const AlpnSelect, arg: ?*anyopaque) void;
pub extern fn SSL_CTX_load_verify_locations(ctx: *SSL_CTX, ca_file: ?[*:0]const u8, ca_path: ?[*:0]const u8) c_int;
pub extern fn SSL_CTX_set_verify(ctx: *SSL_CTX, mode: c_int, cb: ?*const anyopaque) void;
pub extern fn SSL_CTX_set_client_CA_list(ctx: *SSL_CTX, list: *STACK) void;
pub extern fn SSL_load_client_CA_file(file: [*:0]const u8) ?*STACK;
pub extern fn SSL_CTX_set_session_id_context(ctx: *SSL_CTX, sid: [*]const u8, len: c_uint) c_int;
pub extern fn SSL_CTX_set_num_tickets(ctx: *SSL_CTX, n: usize) c_int;
pub extern fn SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx: *SSL_CTX, cb: *const TicketKey) c_int;
pub extern fn SSL_CTX_set_ex_data(ctx: *SSL_CTX, idx: c_int, data: ?*anyopaque) c_int;
pub extern fn SSL_CTX_get_ex_data(ctx: *const SSL_CTX, idx: c_int) ?*anyopaque;

pub const AlpnSelect = fn (ssl: *SSL, out: *[*]const u8, outlen: *u8, in: [*]const u8, inlen: c_uint, arg: ?*anyopaque) callconv(.c) c_int;
pub const ServerName = fn (ssl: *SSL, alert: *c_int, arg: ?*anyopaque) callconv(.c) c_int;
pub const TicketKey = fn (ssl: *SSL, key_name: [*]u8, iv: [*]u8, cipher: *EVP_CIPHER_CTX, mac: *EVP_MAC_CTX, enc: c_int) callconv(.c) c_int;

// Connections.
pub extern fn SSL_new(ctx: *SSL_CTX) ?*SSL;
pub extern fn SSL_free(ssl: ?*SSL) void;
pub extern fn SSL_set_bio(ssl: *SSL, rbio: *BIO, wbio: *BIO) void;
pub extern fn SSL_set_accept_state(ssl: *SSL) void;
pub extern fn SSL_set_connect_state(ssl: *SSL) void;
pub extern fn SSL_set_fd(ssl: *SSL, fd: c_int) c_int;
pub extern fn SSL_ctrl(ssl: *SSL, cmd: c_int, larg: c_long, parg: ?*anyopaque) c_long;
pub extern fn SSL_do_handshake(ssl: *SSL) c_int;
pub extern fn SSL_connect(ssl: *SSL) c_int;
pub extern fn SSL_read_ex(ssl: *SSL, buf: [*]u8, num: usize, readbytes: *usize) c_int;
pub extern fn SSL_write_ex(ssl: *SSL, buf: [*]const u8, num: usize, written: *usize) c_int;
pub extern fn SSL_get_error(ssl: *const SSL, ret: c_int) c_int;
pub extern fn SSL_shutdown(ssl: *SSL) c_int;
pub extern fn SSL_is_init_finished(ssl: *const SSL) c_int;
pub extern fn SSL_get_servername(ssl: *const SSL, kind: c_int) ?[*:0]const u8;
pub extern fn SSL_set_SSL_CTX(ssl: *SSL, ctx: *SSL_CTX) ?*SSL_CTX;
pub extern fn SSL_get_SSL_CTX(ssl: *const SSL) ?*SSL_CTX;
pub extern fn SSL_get_version(ssl: *const SSL) [*:0]const u8;
pub extern fn SSL_get_current_cipher(ssl: *const SSL) ?*const SSL_CIPHER;
pub extern fn SSL_CIPHER_get_name(cipher: ?*const SSL_CIPHER) [*:0]const u8;
pub extern fn SSL_get0_alpn_selected(ssl: *const SSL, data: *?[*]const u8, len: *c_uint) void;
pub extern fn SSL_set_alpn_protos(ssl: *SSL, protos: [*]const u8, len: c_uint) c_int;
pub extern fn SSL_get1_peer_certificate(ssl: *const SSL) ?*X509;
pub extern fn SSL_session_reused(ssl: *const SSL) c_int;
pub extern fn SSL_select_next_proto(out: *[*]u8, outlen: *u8, server: [*]const u8, server_len: c_uint, client: [*]const u8, client_len: c_uint) c_int;
pub extern fn SSL_set_ex_data(ssl: *SSL, idx: c_int, data: ?*anyopaque) c_int;
pub extern fn SSL_get_ex_data(ssl: *const SSL, idx: c_int) ?*anyopaque;
pub extern fn SSL_get_ex_new_index(argl: c_long, argp: ?*anyopaque, new: ?*const anyopaque, dup: ?*const anyopaque, free: ?*const anyopaque) c_int;
pub extern fn SSL_get1_session(ssl: *SSL) ?*anyopaque;
pub extern fn SSL_set_session(ssl: *SSL, session: ?*anyopaque) c_int;
pub extern fn SSL_SESSION_free(session: ?*anyopaque) void;

// BIOs: a connection's records move through a BIO of saker's own (see `transport/Tls.zig`).
pub extern fn BIO_get_new_index() c_int;
pub extern fn BIO_meth_new(kind: c_int, name: [*:0]const u8) ?*BIO_METHOD;
pub extern fn BIO_meth_set_write_ex(m: *BIO_METHOD, f: *const fn (*BIO, [*]const u8, usize, *usize) callconv(.c) c_int) c_int;
pub extern fn BIO_meth_set_read_ex(m: *BIO_METHOD, f: *const fn (*BIO, [*]u8, usize, *usize) callconv(.c) c_int) c_int;
pub extern fn BIO_meth_set_ctrl(m: *BIO_METHOD, f: *const fn (*BIO, c_int, c_long, ?*anyopaque) callconv(.c) c_long) c_int;
pub extern fn BIO_meth_free(m: ?*BIO_METHOD) void;
pub extern fn BIO_new(m: *const BIO_METHOD) ?*BIO;
pub extern fn BIO_free(b: ?*BIO) c_int;
pub extern fn BIO_up_ref(b: *BIO) c_int;
pub extern fn BIO_set_data(b: *BIO, data: ?*anyopaque) void;
pub extern fn BIO_get_data(b: *BIO) ?*anyopaque;
pub extern fn BIO_set_init(b: *BIO, init: c_int) void;
pub extern fn BIO_set_flags(b: *BIO, flags: c_int) void;
pub extern fn BIO_clear_flags(b: *BIO, flags: c_int) void;
pub extern fn BIO_new_mem_buf(buf: [*]const u8, len: c_int) ?*BIO;

// Certificates and keys.
pub extern fn PEM_read_bio_X509(bp: *BIO, x: ?*anyopaque, cb: ?*anyopaque, u: ?*anyopaque) ?*X509;
pub extern fn X509_new() ?*X509;
pub extern fn X509_free(x: ?*X509) void;
pub extern fn X509_set_version(x: *X509, version: c_long) c_int;
pub extern fn X509_get_serialNumber(x: *X509) *ASN1_INTEGER;
pub extern fn ASN1_INTEGER_set(a: *ASN1_INTEGER, v: c_long) c_int;
pub const BIGNUM = opaque {};
pub extern fn BN_new() ?*BIGNUM;
pub extern fn BN_free(a: ?*BIGNUM) void;
pub extern fn BN_rand(rnd: *BIGNUM, bits: c_int, top: c_int, bottom: c_int) c_int;
pub extern fn BN_to_ASN1_INTEGER(bn: *const BIGNUM, ai: ?*ASN1_INTEGER) ?*ASN1_INTEGER;
pub extern fn X509_getm_notBefore(x: *const X509) *ASN1_TIME;
pub extern fn X509_getm_notAfter(x: *const X509) *ASN1_TIME;
pub extern fn X509_get0_notAfter(x: *const X509) *const ASN1_TIME;
pub extern fn X509_get0_notBefore(x: *const X509) *const ASN1_TIME;
pub extern fn X509_cmp_current_time(t: *const ASN1_TIME) c_int;
pub extern fn X509_gmtime_adj(t: *ASN1_TIME, adj: c_long) ?*ASN1_TIME;
pub extern fn X509_set_pubkey(x: *X509, pkey: *EVP_PKEY) c_int;
pub extern fn X509_get_subject_name(x: *const X509) *X509_NAME;
pub extern fn X509_set_issuer_name(x: *X509, name: *const X509_NAME) c_int;
pub extern fn X509_NAME_add_entry_by_txt(name: *X509_NAME, field: [*:0]const u8, kind: c_int, bytes: [*]const u8, len: c_int, loc: c_int, set: c_int) c_int;
pub extern fn X509_NAME_oneline(name: *const X509_NAME, buf: ?[*]u8, size: c_int) ?[*:0]u8;
pub extern fn X509V3_EXT_conf_nid(conf: ?*anyopaque, ctx: ?*anyopaque, nid: c_int, value: [*:0]const u8) ?*X509_EXTENSION;
pub extern fn X509_add_ext(x: *X509, ex: *X509_EXTENSION, loc: c_int) c_int;
pub extern fn X509_EXTENSION_free(ex: ?*X509_EXTENSION) void;
pub extern fn X509_sign(x: *X509, pkey: *EVP_PKEY, md: *const EVP_MD) c_int;
pub extern fn X509_digest(x: *const X509, md: *const EVP_MD, out: [*]u8, len: *c_uint) c_int;
pub extern fn X509_check_host(x: *X509, name: [*]const u8, len: usize, flags: c_uint, peername: ?*?[*:0]u8) c_int;
pub extern fn EVP_sha256() *const EVP_MD;
pub extern fn EVP_PKEY_CTX_new_from_name(libctx: ?*anyopaque, name: [*:0]const u8, propq: ?[*:0]const u8) ?*EVP_PKEY_CTX;
pub extern fn EVP_PKEY_CTX_free(ctx: ?*EVP_PKEY_CTX) void;
pub extern fn EVP_PKEY_keygen_init(ctx: *EVP_PKEY_CTX) c_int;
pub extern fn EVP_PKEY_CTX_set_group_name(ctx: *EVP_PKEY_CTX, name: [*:0]const u8) c_int;
pub extern fn EVP_PKEY_generate(ctx: *EVP_PKEY_CTX, pkey: *?*EVP_PKEY) c_int;
pub extern fn EVP_PKEY_free(pkey: ?*EVP_PKEY) void;
pub extern fn CRYPTO_free(ptr: ?*anyopaque, file: ?[*:0]const u8, line: c_int) void;
pub extern fn OPENSSL_sk_pop_free(st: ?*STACK, func: ?*const anyopaque) void;
pub extern fn X509_NAME_free(name: ?*X509_NAME) void;

// Session-ticket keys.
pub extern fn RAND_bytes(buf: [*]u8, num: c_int) c_int;
pub extern fn EVP_aes_256_cbc() *const EVP_CIPHER;
pub extern fn EVP_EncryptInit_ex(ctx: *EVP_CIPHER_CTX, cipher: *const EVP_CIPHER, impl: ?*anyopaque, key: [*]const u8, iv: [*]const u8) c_int;
pub extern fn EVP_DecryptInit_ex(ctx: *EVP_CIPHER_CTX, cipher: *const EVP_CIPHER, impl: ?*anyopaque, key: [*]const u8, iv: [*]const u8) c_int;
pub extern fn EVP_MAC_CTX_set_params(ctx: *EVP_MAC_CTX, params: [*]const OSSL_PARAM) c_int;
pub extern fn OSSL_PARAM_construct_octet_string(key: [*:0]const u8, buf: ?*anyopaque, bsize: usize) OSSL_PARAM;
pub extern fn OSSL_PARAM_construct_utf8_string(key: [*:0]const u8, buf: [*:0]u8, bsize: usize) OSSL_PARAM;
pub extern fn OSSL_PARAM_construct_end() OSSL_PARAM;

pub const SSL_FILETYPE_PEM = 1;
pub const TLS1_2_VERSION = 0x0303;
pub const TLS1_3_VERSION = 0x0304;
pub const TLSEXT_NAMETYPE_host_name = 0;

pub const SSL_CTRL_MODE = 33;
pub const SSL_CTRL_SET_SESS_CACHE_MODE = 44;
pub const SSL_CTRL_SET_TLSEXT_SERVERNAME_CB = 53;
pub const SSL_CTRL_SET_TLSEXT_SERVERNAME_ARG = 54;
pub const SSL_CTRL_SET_TLSEXT_HOSTNAME = 55;
pub const SSL_CTRL_SET_MIN_PROTO_VERSION = 123;
pub const SSL_CTRL_SET_MAX_PROTO_VERSION = 124;

pub const SSL_MODE_ENABLE_PARTIAL_WRITE = 0x1;
pub const SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER = 0x2;
pub const SSL_MODE_RELEASE_BUFFERS = 0x10;
pub const SSL_SESS_CACHE_OFF = 0x0;
pub const SSL_SESS_CACHE_SERVER = 0x2;

pub const SSL_OP_IGNORE_UNEXPECTED_EOF: u64 = 1 << 7;
pub const SSL_OP_NO_TICKET: u64 = 1 << 14;
pub const SSL_OP_NO_COMPRESSION: u64 = 1 << 17;
pub const SSL_OP_PRIORITIZE_CHACHA: u64 = 1 << 21;
pub const SSL_OP_CIPHER_SERVER_PREFERENCE: u64 = 1 << 22;
pub const SSL_OP_NO_RENEGOTIATION: u64 = 1 << 30;

pub const SSL_VERIFY_PEER = 0x1;
pub const SSL_VERIFY_FAIL_IF_NO_PEER_CERT = 0x2;

pub const SSL_TLSEXT_ERR_OK = 0;
pub const SSL_TLSEXT_ERR_ALERT_FATAL = 2;
pub const SSL_TLSEXT_ERR_NOACK = 3;
pub const OPENSSL_NPN_NEGOTIATED = 1;
pub const SSL_AD_UNRECOGNIZED_NAME = 112;
pub const SSL_AD_NO_APPLICATION_PROTOCOL = 120;

pub const SSL_ERROR_NONE = 0;
pub const SSL_ERROR_SSL = 1;
pub const SSL_ERROR_WANT_READ = 2;
pub const SSL_ERROR_WANT_WRITE = 3;
pub const SSL_ERROR_SYSCALL = 5;
pub const SSL_ERROR_ZERO_RETURN = 6;

pub const BIO_TYPE_SOURCE_SINK = 0x0400;
pub const BIO_CTRL_FLUSH = 11;
pub const BIO_FLAGS_READ = 0x01;
pub const BIO_FLAGS_WRITE = 0x02;
pub const BIO_FLAGS_RWS = 0x07;
pub const BIO_FLAGS_SHOULD_RETRY = 0x08;

pub const MBSTRING_ASC = 0x1001;
pub const NID_subject_alt_name = 85;

/// The oldest error OpenSSL queued on this thread, as text (or `fallback`), and clears the
/// queue: for log lines and errors that must say why.
pub fn lastError(buffer: []u8, fallback: []const u8) []const u8 {
    const code = ERR_get_error();
    ERR_clear_error();
    if (code == 0) return fallback;
    ERR_error_string_n(code, buffer.ptr, buffer.len);
    return std.mem.sliceTo(buffer, 0);
}

// PEM files (tests write certificates with them).
pub extern fn BIO_new_file(filename: [*:0]const u8, mode: [*:0]const u8) ?*BIO;
pub extern fn PEM_write_bio_X509(bp: *BIO, x: *X509) c_int;
pub extern fn PEM_write_bio_PrivateKey(bp: *BIO, x: *EVP_PKEY, enc: ?*const EVP_CIPHER, kstr: ?[*]const u8, klen: c_int, cb: ?*anyopaque, u: ?*anyopaque) c_int;

// Memory BIOs (the unit tests' client side).
pub extern fn BIO_s_mem() *const BIO_METHOD;
pub extern fn BIO_read(b: *BIO, data: [*]u8, dlen: c_int) c_int;
pub extern fn BIO_write(b: *BIO, data: [*]const u8, dlen: c_int) c_int;
pub extern fn BIO_ctrl_pending(b: *BIO) usize;
