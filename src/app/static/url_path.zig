//! Request paths to file paths and back. `resolve` percent-decodes a request path (RFC 3986
//! §2.1), removes `.` and `..` segments (§5.2.4) and empty segments, and refuses NUL bytes,
//! backslashes and any path that climbs above the root, so the result is a plain relative
//! path of the served tree. `writeEncoded` percent-encodes a path for a URL (links, Location).
//! This is the first of two fences: files are then opened beneath the root directory with
//! `openat2(RESOLVE_BENEATH)`, which the kernel enforces whatever the path says.
const std = @import("std");

/// Why a request path was refused (all answered with 400).
pub const Error = error{
    /// The path does not start with '/' (asterisk or authority form).
    NotAbsolute,
    /// A '%' not followed by two hex digits.
    InvalidEncoding,
    /// A NUL byte, literal or encoded: no file name can hold one.
    NulByte,
    /// A backslash, literal or encoded: refused rather than guessed at.
    Backslash,
    /// `..` segments would climb above the root.
    EscapesRoot,
};

/// A request path mapped onto the served tree.
pub const Resolved = struct {
    /// Segments joined by '/', without leading or trailing slash, no empty, `.` or `..`
    /// segments; "" is the root itself. Borrows the buffer given to `resolve`.
    relative: []const u8,
    /// Whether the path names a directory form (ends in '/', or in a dot segment).
    trailing_slash: bool,
    /// Whether some segment starts with '.' (a dotfile or dot-directory).
    dot_segment: bool,
};

/// Resolves `path` (as sent, still percent-encoded) into `buffer`, which must hold at least
/// `path.len` bytes (decoding only shrinks).
pub fn resolve(path: []const u8, buffer: []u8) Error!Resolved {
    std.debug.assert(buffer.len >= path.len);
    if (path.len == 0 or path[0] != '/') return error.NotAbsolute;
    // Decode in place first: an encoded '/' or '.' then means what it does to the file system.
    var decoded_len: usize = 0;
    var i: usize = 0;
    while (i < path.len) : (decoded_len += 1) {
        var c = path[i];
        if (c == '%') {
            if (i + 2 >= path.len) return error.InvalidEncoding;
            const high = hexValue(path[i + 1]) orelse return error.InvalidEncoding;
            const low = hexValue(path[i + 2]) orelse return error.InvalidEncoding;
            c = high << 4 | low;
            i += 3;
        } else {
            i += 1;
        }
        if (c == 0) return error.NulByte;
        if (c == '\\') return error.Backslash;
        buffer[decoded_len] = c;
    }
    const decoded = buffer[0..decoded_len];
    // Remove dot and empty segments; the output never outruns the input, so in place works.
    var out: usize = 0;
    var trailing_slash = false;
    var segments = std.mem.splitScalar(u8, decoded, '/');
    while (segments.next()) |segment| {
        trailing_slash = false;
        if (segment.len == 0 or std.mem.eql(u8, segment, ".")) {
            trailing_slash = true;
            continue;
        }
        if (std.mem.eql(u8, segment, "..")) {
            if (out == 0) return error.EscapesRoot;
            out = std.mem.findScalarLast(u8, buffer[0..out], '/') orelse 0;
            trailing_slash = true;
            continue;
        }
        if (out > 0) {
            buffer[out] = '/';
            out += 1;
        }
        std.mem.copyForwards(u8, buffer[out..][0..segment.len], segment);
        out += segment.len;
    }
    const relative = buffer[0..out];
    return .{
        .relative = relative,
        .trailing_slash = trailing_slash or relative.len == 0,
        .dot_segment = hasDotSegment(relative),
    };
}

fn hasDotSegment(relative: []const u8) bool {
    if (relative.len > 0 and relative[0] == '.') return true;
    return std.mem.find(u8, relative, "/.") != null;
}

fn hexValue(c: u8) ?u8 {
    return switch (c) {
        '0'...'9' => c - '0',
        'a'...'f' => c - 'a' + 10,
        'A'...'F' => c - 'A' + 10,
        else => null,
    };
}

/// Whether `c` may appear unencoded in a path segment: RFC 3986 unreserved characters and
/// the few sub-delimiters that are harmless in HTML attributes and Location values.
fn isPathSafe(c: u8) bool {
    return switch (c) {
        'A'...'Z', 'a'...'z', '0'...'9', '-', '.', '_', '~', '!', '$', '(', ')', '*', '+', ',', ';', '=', ':', '@' => true,
        else => false,
    };
}

/// Writes `text` percent-encoded; '/' is kept as the separator when `keep_slash` is set.
pub fn writeEncoded(w: *std.Io.Writer, text: []const u8, keep_slash: bool) std.Io.Writer.Error!void {
    const hex = "0123456789ABCDEF";
    var start: usize = 0;
    for (text, 0..) |c, i| {
        if (isPathSafe(c) or (keep_slash and c == '/')) continue;
        try w.writeAll(text[start..i]);
        try w.writeAll(&.{ '%', hex[c >> 4], hex[c & 15] });
        start = i + 1;
    }
    try w.writeAll(text[start..]);
}

/// Bytes `writeEncoded` would produce.
pub fn encodedLength(text: []const u8, keep_slash: bool) usize {
    var n: usize = 0;
    for (text) |c| n += if (isPathSafe(c) or (keep_slash and c == '/')) 1 else 3;
    return n;
}

fn expectResolved(path: []const u8, relative: []const u8, trailing_slash: bool) !void {
    var buffer: [256]u8 = undefined;
    const resolved = try resolve(path, &buffer);
    try std.testing.expectEqualStrings(relative, resolved.relative);
    try std.testing.expectEqual(trailing_slash, resolved.trailing_slash);
}

test "url_path.resolve: plain, encoded, dot and empty segments" {
    try expectResolved("/", "", true);
    try expectResolved("/index.html", "index.html", false);
    try expectResolved("/a/b/", "a/b", true);
    try expectResolved("//a///b", "a/b", false);
    try expectResolved("/a/./b/.", "a/b", true);
    try expectResolved("/a/b/../c", "a/c", false);
    try expectResolved("/a/b/..", "a", true);
    try expectResolved("/a/..", "", true);
    try expectResolved("/with%20space.txt", "with space.txt", false);
    try expectResolved("/caf%C3%A9/%E6%97%A5.txt", "café/日.txt", false);
    try expectResolved("/a%2Fb", "a/b", false);
    try expectResolved("/a/%2e%2E/b", "b", false);
    try expectResolved("/%2e/x", "x", false);
    try expectResolved("/a..b/..c", "a..b/..c", false);
    try expectResolved("/...", "...", false);
}

test "url_path.resolve: climbing out, NUL, backslash and bad escapes are refused" {
    var buffer: [64]u8 = undefined;
    const cases = [_]struct { []const u8, Error }{
        .{ "/..", error.EscapesRoot },
        .{ "/../etc/passwd", error.EscapesRoot },
        .{ "/a/../../etc/passwd", error.EscapesRoot },
        .{ "/%2e%2e/etc/passwd", error.EscapesRoot },
        .{ "/%2E%2E%2Fetc%2Fpasswd", error.EscapesRoot },
        .{ "/a%2F..%2F..%2Fetc", error.EscapesRoot },
        .{ "/a%00.txt", error.NulByte },
        .{ "/a\\..\\b", error.Backslash },
        .{ "/a%5C..%5Cb", error.Backslash },
        .{ "/a%2", error.InvalidEncoding },
        .{ "/a%", error.InvalidEncoding },
        .{ "/a%zz", error.InvalidEncoding },
        .{ "*", error.NotAbsolute },
        .{ "", error.NotAbsolute },
    };
    for (cases) |case| {
        errdefer std.debug.print("path {s}\n", .{case[0]});
        try std.testing.expectError(case[1], resolve(case[0], &buffer));
    }
}

test "url_path.resolve: dot segments are flagged" {
    var buffer: [64]u8 = undefined;
    try std.testing.expect((try resolve("/.env", &buffer)).dot_segment);
    try std.testing.expect((try resolve("/a/.git/config", &buffer)).dot_segment);
    try std.testing.expect((try resolve("/a/%2Essh/k", &buffer)).dot_segment);
    try std.testing.expect(!(try resolve("/a.b/c", &buffer)).dot_segment);
    try std.testing.expect(!(try resolve("/a/./b", &buffer)).dot_segment);
}

test "url_path.writeEncoded: reserved, space, unicode and quotes are escaped" {
    var buffer: [128]u8 = undefined;
    var w: std.Io.Writer = .fixed(&buffer);
    const text = "a b/\"<c>&'#?%/café";
    try writeEncoded(&w, text, true);
    try std.testing.expectEqualStrings("a%20b/%22%3Cc%3E%26%27%23%3F%25/caf%C3%A9", w.buffered());
    try std.testing.expectEqual(w.buffered().len, encodedLength(text, true));
    w = .fixed(&buffer);
    try writeEncoded(&w, "x/y", false);
    try std.testing.expectEqualStrings("x%2Fy", w.buffered());
}
