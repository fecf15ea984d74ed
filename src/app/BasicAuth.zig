//! HTTP Basic authentication (RFC 7617) against an htpasswd file of bcrypt hashes (as
//! `htpasswd -B` writes them): `saker serve --basic-auth FILE`, or `Guard(Handler)` around any
//! handler. Bad or missing credentials get 401 with `WWW-Authenticate`.
//!
//! Checking a password costs a bcrypt (tens of milliseconds at the usual cost 10). So a
//! request whose credentials are not yet known goes to the server's handler pool
//! (`Guard.mayBlock`), never stalling an event loop, and credentials that passed are
//! remembered (an HMAC of them, under a key made at start) so the next requests cost a hash
//! and no bcrypt. Every check takes the same path whether the user exists or not (a user not
//! in the file is checked against a stand-in hash), and compares in constant time. Passwords
//! are never logged nor kept.
const std = @import("std");
const assert = std.debug.assert;
const bcrypt = std.crypto.pwhash.bcrypt;
const HmacSha256 = std.crypto.auth.hmac.sha2.HmacSha256;
const timing_safe = std.crypto.timing_safe;
const Request = @import("../Request.zig");
const Response = @import("../Response.zig");
const Done = @import("../Done.zig");
const sync = @import("../sync.zig");
const fs = @import("static/fs.zig");

const BasicAuth = @This();

gpa: std.mem.Allocator,
/// The file's users, in its order; names and hashes point into `text`.
users: []User,
text: []u8,
/// What `WWW-Authenticate` asks for: `Basic realm="...", charset="UTF-8"`.
challenge: []const u8,
/// Credentials that passed, remembered as HMACs under `key`.
key: [32]u8,
/// What a user not in the file is checked against, so that a missing user costs the same
/// bcrypt as a wrong password: the file's most common cost, a random salt, a hash no
/// password gives.
stand_in: User,
mutex: sync.Mutex = .{},
remembered: [][HmacSha256.mac_length]u8,
remembered_count: usize = 0,
/// The slot the next remembered credentials replace once all are taken.
remembered_next: usize = 0,

pub const Options = struct {
    /// Shown by browsers in their password prompt.
    realm: []const u8 = "saker",
    /// Credentials remembered at once (32 bytes each); beyond it the oldest are forgotten,
    /// and cost a bcrypt again when they come back.
    remembered_max: u32 = 256,
    /// Largest htpasswd file read.
    file_bytes_max: u32 = 1024 * 1024,
};

const User = struct {
    name: []const u8,
    salt: [bcrypt.salt_length]u8,
    /// The bcrypt output the password must give.
    hash: [23]u8,
    rounds_log: u6,
};

pub const LoadError = error{
    /// The file could not be read (`diagnostic` says why).
    Unreadable,
    /// A line is not `user:bcrypt-hash` (`diagnostic` names the line).
    InvalidLine,
    /// No user in the file.
    NoUsers,
    OutOfMemory,
};

/// Why `load` failed, for a message: the file and the line.
pub const Diagnostic = struct {
    line: usize = 0,
    reason: []const u8 = "",
};

/// Reads an htpasswd file: one `user:hash` per line, each hash bcrypt (`$2a$`, `$2b$`,
/// `$2y$`); blank lines and lines starting with `#` are skipped.
pub fn load(gpa: std.mem.Allocator, path: []const u8, options: Options, diagnostic: *Diagnostic) LoadError!BasicAuth {
    assert(options.remembered_max >= 1);
    const text = try readFile(gpa, path, options.file_bytes_max, diagnostic);
    errdefer gpa.free(text);
    var count: usize = 0;
    var lines = std.mem.splitScalar(u8, text, '\n');
    while (lines.next()) |line| {
        if (entryOf(line) != null) count += 1;
    }
    if (count == 0) {
        diagnostic.reason = "no user in the file";
        return error.NoUsers;
    }
    const users = try gpa.alloc(User, count);
    errdefer gpa.free(users);
    var n: usize = 0;
    lines = std.mem.splitScalar(u8, text, '\n');
    var line_number: usize = 0;
    while (lines.next()) |line| {
        line_number += 1;
        const entry = entryOf(line) orelse continue;
        users[n] = parseUser(entry) catch |reason| {
            diagnostic.* = .{ .line = line_number, .reason = switch (reason) {
                error.NoColon => "not user:hash",
                error.NotBcrypt => "the hash is not bcrypt (make it with htpasswd -B)",
                error.BadHash => "the bcrypt hash is malformed",
            } };
            return error.InvalidLine;
        };
        n += 1;
    }
    assert(n == count);
    var key: [32]u8 = undefined;
    fs.randomBytes(&key) catch {
        diagnostic.reason = "no random bytes for the credential cache key";
        return error.Unreadable;
    };
    var stand_in: User = .{ .name = "", .salt = undefined, .hash = @splat(0), .rounds_log = commonCost(users) };
    fs.randomBytes(&stand_in.salt) catch {
        diagnostic.reason = "no random bytes for the stand-in hash";
        return error.Unreadable;
    };
    const challenge = try std.fmt.allocPrint(gpa, "Basic realm=\"{s}\", charset=\"UTF-8\"", .{options.realm});
    errdefer gpa.free(challenge);
    const remembered = try gpa.alloc([HmacSha256.mac_length]u8, options.remembered_max);
    return .{ .gpa = gpa, .users = users, .text = text, .challenge = challenge, .key = key, .remembered = remembered, .stand_in = stand_in };
}

pub fn deinit(auth: *BasicAuth) void {
    std.crypto.secureZero(u8, &auth.key);
    auth.gpa.free(auth.remembered);
    auth.gpa.free(auth.challenge);
    auth.gpa.free(auth.users);
    auth.gpa.free(auth.text);
    auth.* = undefined;
}

/// The cost most users of the file have (the first of the most common, for a tie).
fn commonCost(users: []const User) u6 {
    var counts: [32]u32 = @splat(0);
    for (users) |user| counts[user.rounds_log] += 1;
    var best: u6 = users[0].rounds_log;
    for (counts, 0..) |count, cost| {
        if (count > counts[best]) best = @intCast(cost);
    }
    return best;
}

fn readFile(gpa: std.mem.Allocator, path: []const u8, bytes_max: u32, diagnostic: *Diagnostic) LoadError![]u8 {
    const linux = std.os.linux;
    const path_z = try gpa.dupeSentinel(u8, path, 0);
    defer gpa.free(path_z);
    const rc = linux.openat(linux.AT.FDCWD, path_z, .{ .ACCMODE = .RDONLY, .CLOEXEC = true }, 0);
    switch (linux.errno(rc)) {
        .SUCCESS => {},
        .NOENT => return unreadable(diagnostic, "no such file"),
        .ACCES, .PERM => return unreadable(diagnostic, "permission denied"),
        else => return unreadable(diagnostic, "cannot open it"),
    }
    const fd: linux.fd_t = @intCast(rc);
    defer _ = linux.close(fd);
    var buffer = try gpa.alloc(u8, @as(usize, bytes_max) + 1);
    defer gpa.free(buffer);
    var len: usize = 0;
    while (len < buffer.len) {
        const read = linux.read(fd, buffer[len..].ptr, buffer.len - len);
        switch (linux.errno(read)) {
            .SUCCESS => {},
            .INTR => continue,
            .ISDIR => return unreadable(diagnostic, "a directory, not a file"),
            else => return unreadable(diagnostic, "cannot read it"),
        }
        if (read == 0) break;
        len += read;
    }
    if (len > bytes_max) return unreadable(diagnostic, "larger than its limit (BasicAuth.Options.file_bytes_max)");
    return gpa.dupe(u8, buffer[0..len]);
}

fn unreadable(diagnostic: *Diagnostic, reason: []const u8) LoadError {
    diagnostic.reason = reason;
    return error.Unreadable;
}

/// The line without its line end, or null for a blank or comment line.
fn entryOf(line: []const u8) ?[]const u8 {
    const trimmed = std.mem.trim(u8, line, " \t\r");
    if (trimmed.len == 0 or trimmed[0] == '#') return null;
    return trimmed;
}

fn parseUser(entry: []const u8) error{ NoColon, NotBcrypt, BadHash }!User {
    const colon = std.mem.findScalar(u8, entry, ':') orelse return error.NoColon;
    if (colon == 0) return error.NoColon;
    const hash = entry[colon + 1 ..];
    var user = try parseHash(hash);
    user.name = entry[0..colon];
    return user;
}

/// `$2?$NN$` and 53 characters of bcrypt's base64: 22 of salt, 31 of hash.
fn parseHash(text: []const u8) error{ NotBcrypt, BadHash }!User {
    if (text.len < 4 or !std.mem.startsWith(u8, text, "$2") or text[3] != '$') return error.NotBcrypt;
    switch (text[2]) {
        'a', 'b', 'y' => {},
        else => return error.NotBcrypt,
    }
    if (text.len != bcrypt.hash_length or text[6] != '$') return error.BadHash;
    const rounds_log = std.fmt.parseInt(u6, text[4..6], 10) catch return error.BadHash;
    if (rounds_log < 4 or rounds_log > 31) return error.BadHash;
    const codec = std.base64.Base64Decoder.init("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".*, null);
    var user: User = .{ .name = "", .salt = undefined, .hash = undefined, .rounds_log = rounds_log };
    codec.decode(&user.salt, text[7..29]) catch return error.BadHash;
    codec.decode(&user.hash, text[29..60]) catch return error.BadHash;
    return user;
}

/// What `check` decided.
pub const Verdict = enum { allowed, denied };

/// Whether the request's credentials are those of a user of the file: constant time for the
/// password, and the same bcrypt whether the user exists or not (unless the credentials were
/// remembered from an earlier pass).
pub fn check(auth: *BasicAuth, req: *const Request) Verdict {
    var decoded: [512]u8 = undefined;
    const credentials = credentialsOf(req, &decoded) orelse return .denied;
    defer std.crypto.secureZero(u8, &decoded);
    const mac = auth.macOf(credentials);
    if (auth.remembers(&mac)) return .allowed;
    const colon = std.mem.findScalar(u8, credentials, ':') orelse return .denied;
    const name = credentials[0..colon];
    const password = credentials[colon + 1 ..];
    // Every user is looked at, so where the name is in the file does not show in the time.
    var found: ?*const User = null;
    for (auth.users) |*user| {
        if (sameBytes(user.name, name) and found == null) found = user;
    }
    const user = found orelse &auth.stand_in;
    const hash = bcrypt.bcrypt(password, &user.salt, .{ .rounds_log = user.rounds_log, .silently_truncate_password = true });
    const matches = timing_safe.eql([23]u8, hash, user.hash);
    if (!matches or found == null) return .denied;
    auth.remember(&mac);
    return .allowed;
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
fn sameBytes(a: []const u8, b: []const u8) bool {
    if (a.len != b.len) return false;
    var difference: u8 = 0;
    for (a, b) |x, y| difference |= x ^ y;
    return difference == 0;
}

/// Whether `check` would run a bcrypt for the request: it has credentials, not remembered.
/// (A request without credentials is refused at once.)
pub fn needsBcrypt(auth: *BasicAuth, req: *const Request) bool {
    var decoded: [512]u8 = undefined;
    const credentials = credentialsOf(req, &decoded) orelse return false;
    defer std.crypto.secureZero(u8, &decoded);
    const mac = auth.macOf(credentials);
    return !auth.remembers(&mac);
}

/// Answers 401 with the challenge (RFC 7617 §2).
pub fn refuse(auth: *const BasicAuth, res: *Response) !void {
    res.status = .unauthorized;
    try res.header("WWW-Authenticate", auth.challenge);
    try res.header("Content-Type", "text/plain; charset=utf-8");
    res.setBody("401 Unauthorized: this server needs a user name and password\n");
}

/// `user:password` from `Authorization: Basic ...`, decoded into `buffer`; null when the
/// header is missing, not Basic, or not base64.
fn credentialsOf(req: *const Request, buffer: *[512]u8) ?[]const u8 {
    const value = req.header("Authorization") orelse return null;
    const trimmed = std.mem.trim(u8, value, " \t");
    if (trimmed.len < 6 or !std.ascii.eqlIgnoreCase(trimmed[0..6], "basic ")) return null;
    const encoded = std.mem.trim(u8, trimmed[6..], " \t");
    const decoder = std.base64.standard.Decoder;
    const len = decoder.calcSizeForSlice(encoded) catch return null;
    if (len > buffer.len) return null;
    decoder.decode(buffer[0..len], encoded) catch return null;
    return buffer[0..len];
}

fn macOf(auth: *const BasicAuth, credentials: []const u8) [HmacSha256.mac_length]u8 {
    var mac: [HmacSha256.mac_length]u8 = undefined;
    HmacSha256.create(&mac, credentials, &auth.key);
    return mac;
}

fn remembers(auth: *BasicAuth, mac: *const [HmacSha256.mac_length]u8) bool {
    auth.mutex.lock();
    defer auth.mutex.unlock();
    var found = false;
    for (auth.remembered[0..auth.remembered_count]) |*entry| {
        if (timing_safe.eql([HmacSha256.mac_length]u8, entry.*, mac.*)) found = true;
    }
    return found;
}

fn remember(auth: *BasicAuth, mac: *const [HmacSha256.mac_length]u8) void {
    auth.mutex.lock();
    defer auth.mutex.unlock();
    if (auth.remembered_count < auth.remembered.len) {
        auth.remembered[auth.remembered_count] = mac.*;
        auth.remembered_count += 1;
        return;
    }
    auth.remembered[auth.remembered_next] = mac.*;
    auth.remembered_next = (auth.remembered_next + 1) % auth.remembered.len;
}

/// `Handler` behind Basic authentication: a request without the credentials of a user of
/// `auth` gets 401 and never reaches `inner.handle` (the inner handler's `onDone` still hears
/// of it, so its access log has the line). Declares `mayBlock`, so that a request that needs a
/// bcrypt runs on the server's handler pool; forwards `onTick`, `onDone` and `wantsDone`.
pub fn Guard(comptime Handler: type) type {
    return struct {
        inner: *Handler,
        auth: *BasicAuth,

        const Self = @This();

        pub fn handle(self: *Self, req: *Request, res: *Response) !void {
            switch (self.auth.check(req)) {
                .allowed => return self.inner.handle(req, res),
                .denied => try self.auth.refuse(res),
            }
        }

        pub fn mayBlock(self: *const Self, req: *const Request) bool {
            if (self.auth.needsBcrypt(req)) return true;
            if (@hasDecl(Handler, "mayBlock")) return self.inner.mayBlock(req);
            return false;
        }

        pub fn onTick(self: *Self, worker_index: u32) void {
            if (@hasDecl(Handler, "onTick")) self.inner.onTick(worker_index);
        }

        pub fn wantsDone(self: *const Self) bool {
            if (!@hasDecl(Handler, "onDone")) return false;
            if (@hasDecl(Handler, "wantsDone")) return self.inner.wantsDone();
            return true;
        }

        pub fn onDone(self: *Self, done: *const Done) void {
            if (@hasDecl(Handler, "onDone")) self.inner.onDone(done);
        }
    };
}

const testing = std.testing;

/// `secret`, hashed by Debian's libxcrypt (`crypt(3)`, cost 5): an implementation other than
/// the one that checks it here.
const secret_hash = "$2b$05$Th3YYfxe2JIDTsilk0yLSedf4hkcF5m/zcijsTuo5OSkfyhbo13tK";

test "BasicAuth: a libxcrypt hash parses, and bcrypt agrees with it for the right password only" {
    const user = try parseHash(secret_hash);
    try testing.expectEqual(@as(u6, 5), user.rounds_log);
    const right = bcrypt.bcrypt("secret", &user.salt, .{ .rounds_log = 5, .silently_truncate_password = true });
    try testing.expectEqual(user.hash, right);
    const wrong = bcrypt.bcrypt("Secret", &user.salt, .{ .rounds_log = 5, .silently_truncate_password = true });
    try testing.expect(!std.mem.eql(u8, &user.hash, &wrong));
    // $2y$ (htpasswd) and $2a$ name the same function.
    try testing.expectEqual(user.hash, (try parseHash("$2y" ++ secret_hash[3..])).hash);
    try testing.expectError(error.NotBcrypt, parseHash("$apr1$abc$def"));
    try testing.expectError(error.NotBcrypt, parseHash("{SHA}abc"));
    try testing.expectError(error.BadHash, parseHash(secret_hash[0..59]));
    try testing.expectError(error.BadHash, parseHash("$2b$99" ++ secret_hash[6..]));
    try testing.expectError(error.NoColon, parseUser(secret_hash));
}

/// A BasicAuth loaded from an htpasswd file with `text`, written in a temporary directory.
fn loadText(dir: std.testing.TmpDir, text: []const u8, diagnostic: *Diagnostic) LoadError!BasicAuth {
    dir.dir.writeFile(testing.io, .{ .sub_path = "htpasswd", .data = text }) catch return error.Unreadable;
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const dir_path = path_buffer[0 .. dir.dir.realPath(testing.io, &path_buffer) catch return error.Unreadable];
    var full: [std.fs.max_path_bytes]u8 = undefined;
    const path = std.mem.print(&full, "{s}/htpasswd", .{dir_path}) catch return error.Unreadable;
    return load(testing.allocator, path, .{ .realm = "files", .remembered_max = 2 }, diagnostic);
}

const Files = struct {
    served: u32 = 0,
    ticks: u32 = 0,
    done_seen: u32 = 0,

    pub fn handle(files: *Files, _: *Request, res: *Response) !void {
        files.served += 1;
        res.setBody("the file");
    }

    pub fn onTick(files: *Files, _: u32) void {
        files.ticks += 1;
    }

    pub fn onDone(files: *Files, done: *const Done) void {
        assert(done.status == .unauthorized);
        files.done_seen += 1;
    }
};

/// Runs `guard` on a request with `authorization` (if any); the status and whether the
/// handler pool would have been asked to run it.
fn call(guard: anytype, authorization: ?[]const u8) !struct { status: u16, may_block: bool, challenge: ?[]const u8 } {
    var arena: std.heap.ArenaAllocator = .init(testing.allocator);
    defer arena.deinit();
    var one: [1]@import("../http.zig").Header = undefined;
    var headers: []const @import("../http.zig").Header = &.{};
    if (authorization) |value| {
        one[0] = .{ .name = "Authorization", .value = value };
        headers = &one;
    }
    var handler_call: @import("../testing/HandlerCall.zig") = undefined;
    handler_call.init(.{ .headers = headers, .arena = arena.allocator() });
    const may_block = guard.mayBlock(&handler_call.request);
    try guard.handle(&handler_call.request, &handler_call.response);
    const challenge = handler_call.header("WWW-Authenticate");
    return .{ .status = handler_call.response.status.code(), .may_block = may_block, .challenge = if (challenge != null) "yes" else null };
}

test "BasicAuth: the right password passes and is remembered; wrong, unknown, missing and malformed credentials get 401" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var diagnostic: Diagnostic = .{};
    var auth = try loadText(dir, "# users\n\nalice:" ++ secret_hash ++ "\r\nbob:$2y" ++ secret_hash[3..] ++ "\n  carol:" ++ secret_hash, &diagnostic);
    defer auth.deinit();
    try testing.expectEqual(@as(usize, 3), auth.users.len);
    // A user not in the file costs the same bcrypt as one who is: the file's cost.
    try testing.expectEqual(@as(u6, 5), auth.stand_in.rounds_log);
    var files: Files = .{};
    var guard: Guard(Files) = .{ .inner = &files, .auth = &auth };
    // alice:secret, bob:secret, alice:wrong, dave:secret (no such user).
    const alice = "Basic YWxpY2U6c2VjcmV0";
    const first = try call(&guard, alice);
    try testing.expectEqual(@as(u16, 200), first.status);
    try testing.expect(first.may_block); // a bcrypt, on the handler pool
    const again = try call(&guard, alice);
    try testing.expectEqual(@as(u16, 200), again.status);
    try testing.expect(!again.may_block); // remembered: no bcrypt
    try testing.expectEqual(@as(u16, 200), (try call(&guard, "basic Ym9iOnNlY3JldA==")).status);
    // Room for two, both taken; the refusals below are never remembered.
    try testing.expectEqual(@as(usize, 2), auth.remembered_count);
    for ([_]?[]const u8{ "Basic YWxpY2U6d3Jvbmc=", "Basic ZGF2ZTpzZWNyZXQ=", null, "Basic !!!", "Bearer YWxpY2U6c2VjcmV0", "Basic YWxpY2U=" }) |authorization| {
        const result = try call(&guard, authorization);
        try testing.expectEqual(@as(u16, 401), result.status);
        try testing.expect(result.challenge != null);
    }
    // Carol's pass takes the place of the oldest, alice's: alice costs a bcrypt again, bob not.
    const carol = try call(&guard, "Basic Y2Fyb2w6c2VjcmV0");
    try testing.expect(carol.may_block and carol.status == 200);
    try testing.expect(!(try call(&guard, "Basic Ym9iOnNlY3JldA==")).may_block);
    try testing.expect((try call(&guard, alice)).may_block);
    try testing.expectEqual(@as(u32, 6), files.served);
    guard.onTick(0);
    try testing.expectEqual(@as(u32, 1), files.ticks);
    // The hooks the server calls reach the inner handler.
    try testing.expect(guard.wantsDone());
    guard.onDone(&.{ .request = null, .peer = null, .worker_index = 0, .version = .http11, .status = .unauthorized, .body_bytes_sent = 0, .complete = true, .core_response = false });
    try testing.expectEqual(@as(u32, 1), files.done_seen);
    try testing.expectEqualStrings("Basic realm=\"files\", charset=\"UTF-8\"", auth.challenge);
}

test "BasicAuth: a file that cannot be used is refused, naming the line" {
    var dir = testing.tmpDir(.{});
    defer dir.cleanup();
    var diagnostic: Diagnostic = .{};
    try testing.expectError(error.InvalidLine, loadText(dir, "alice:" ++ secret_hash ++ "\nbob:$apr1$xyz$abc\n", &diagnostic));
    try testing.expectEqual(@as(usize, 2), diagnostic.line);
    try testing.expect(std.mem.find(u8, diagnostic.reason, "htpasswd -B") != null);
    try testing.expectError(error.InvalidLine, loadText(dir, "just a line\n", &diagnostic));
    try testing.expectError(error.NoUsers, loadText(dir, "# nobody\n", &diagnostic));
    try testing.expectError(error.Unreadable, load(testing.allocator, "/nonexistent/htpasswd", .{}, &diagnostic));
    try testing.expectEqualStrings("no such file", diagnostic.reason);
}
