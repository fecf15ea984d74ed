//! `multipart/form-data` bodies (RFC 7578; body syntax of RFC 2046 §5.1.1), parsed as a stream.
//!
//! `Parser` takes the body in pieces of any size and reports events: a part begins (its
//! headers parsed), body bytes of the part, the part ends, the body ends. It copies only part
//! headers (into a caller-given buffer, bounded by `Limits.part_header_bytes_max`); part data
//! is reported as slices of the input, so a large file can be passed on without buffering.
//! No I/O, no allocation. `Reader` drives it over a body already in memory.
//!
//! A delimiter ("\r\n--" boundary) split between two inputs is remembered, not re-read: the
//! parser consumes every byte it is given.
const std = @import("std");
const assert = std.debug.assert;

/// Why a body was rejected (all are `ClientError`s: 400 or 413).
pub const Error = error{
    /// Not a multipart body by RFC 2046 §5.1.1 / RFC 7578 §4.2, or truncated.
    InvalidMultipart,
    /// A part's header section is longer than `part_header_bytes_max`.
    MultipartHeadersTooLarge,
    /// A part's body is longer than `part_bytes_max`.
    MultipartPartTooLarge,
    /// More parts than `part_count_max`.
    MultipartTooManyParts,
};

/// Limits per body and per part.
pub const Limits = struct {
    /// Most parts in one body (413 beyond).
    part_count_max: u32 = 256,
    /// Longest header section of one part, blank line included (413 beyond).
    part_header_bytes_max: u32 = 8 * 1024,
    /// Largest body of one part (413 beyond).
    part_bytes_max: u64 = 64 * 1024 * 1024,
};

/// Longest boundary (RFC 2046 §5.1.1).
pub const boundary_bytes_max = 70;

/// A part's headers, as far as a form needs them. Slices point into the parser's header
/// buffer: valid until the next `.part` event.
pub const Part = struct {
    /// The form field name (`Content-Disposition: form-data; name="..."`).
    name: []const u8,
    /// The file name, for a file upload.
    filename: ?[]const u8,
    /// The part's Content-Type, if sent (RFC 7578 §4.4: text/plain when absent).
    content_type: ?[]const u8,
    /// The raw header section (fields separated by CRLF), for other fields.
    header_block: []const u8,

    /// The value of header `name` (case-insensitive), or null.
    pub fn header(part: Part, name: []const u8) ?[]const u8 {
        var lines = std.mem.splitSequence(u8, part.header_block, "\r\n");
        while (lines.next()) |line| {
            const colon = std.mem.findScalar(u8, line, ':') orelse continue;
            if (std.ascii.eqlIgnoreCase(line[0..colon], name)) return std.mem.trim(u8, line[colon + 1 ..], " \t");
        }
        return null;
    }
};

/// What `Parser.feed` found.
pub const Event = union(enum) {
    /// All input was consumed; call again with more.
    need_more,
    /// A part begins.
    part: Part,
    /// Body bytes of the current part: a slice of the input, or of the parser (the start of a
    /// delimiter that turned out to be data). Valid until the next call.
    data: []const u8,
    /// The current part's body is complete.
    part_end,
    /// The closing delimiter was seen. Anything after it (the epilogue) is ignored.
    end,
};

/// One step of parsing: the bytes of the input consumed, and the event.
pub const Step = struct { consumed: usize, event: Event };

/// The streaming parser.
pub const Parser = struct {
    /// "\r\n--" followed by the boundary.
    delimiter_storage: [4 + boundary_bytes_max]u8,
    delimiter_len: u8,
    state: State = .preamble,
    /// Bytes of the delimiter matched at the end of earlier input.
    match_len: u8 = 2, // the body is read as if it followed a CRLF
    /// Part headers are gathered here; its length is the header limit.
    header_buffer: []u8,
    header_len: usize = 0,
    part_count: u32 = 0,
    /// Bytes of the current part's body so far.
    part_len: u64 = 0,
    limits: Limits,

    const State = enum {
        /// Before the first delimiter: skipped.
        preamble,
        /// Just after a delimiter: "--" (the end) or padding and CRLF.
        after_delimiter,
        /// After a delimiter and one '-'.
        after_dash,
        /// Transport padding (spaces, tabs) until CR.
        padding,
        /// CR seen after a delimiter; LF expected.
        delimiter_lf,
        /// Part headers.
        headers,
        /// Part body.
        body,
        /// After the closing delimiter: skipped.
        epilogue,
    };

    /// A parser for a body with `boundary` (the Content-Type parameter). `header_buffer` holds
    /// one part's headers at a time; it must be `limits.part_header_bytes_max` long. Fails
    /// when the boundary breaks RFC 2046 §5.1.1 (1 to 70 characters from a fixed set, not
    /// ending in a space).
    pub fn init(boundary: []const u8, header_buffer: []u8, limits: Limits) Error!Parser {
        assert(header_buffer.len == limits.part_header_bytes_max);
        if (!validBoundary(boundary)) return error.InvalidMultipart;
        var parser: Parser = .{
            .delimiter_storage = undefined,
            .delimiter_len = @intCast(4 + boundary.len),
            .header_buffer = header_buffer,
            .limits = limits,
        };
        @memcpy(parser.delimiter_storage[0..4], "\r\n--");
        @memcpy(parser.delimiter_storage[4..][0..boundary.len], boundary);
        return parser;
    }

    fn delimiter(parser: *const Parser) []const u8 {
        return parser.delimiter_storage[0..parser.delimiter_len];
    }

    /// Whether the closing delimiter has been seen (the body is complete).
    pub fn done(parser: *const Parser) bool {
        return parser.state == .epilogue;
    }

    /// Parses from the start of `input` up to the next event. Call again with
    /// `input[step.consumed..]` until the event is `.need_more` (then all input was consumed)
    /// or `.end`.
    pub fn feed(parser: *Parser, input: []const u8) Error!Step {
        var i: usize = 0;
        while (true) {
            switch (parser.state) {
                .preamble => {
                    const found = parser.scan(input[i..]);
                    i += found.consumed;
                    if (!found.matched) return .{ .consumed = i, .event = .need_more };
                    parser.state = .after_delimiter;
                },
                .after_delimiter, .after_dash, .padding, .delimiter_lf => {
                    if (i == input.len) return .{ .consumed = i, .event = .need_more };
                    const c = input[i];
                    i += 1;
                    if (try parser.afterDelimiter(c)) |event| return .{ .consumed = i, .event = event };
                },
                .headers => {
                    if (i == input.len) return .{ .consumed = i, .event = .need_more };
                    const taken = try parser.takeHeaders(input[i..]);
                    i += taken.consumed;
                    if (taken.part) |part| return .{ .consumed = i, .event = .{ .part = part } };
                },
                .body => return parser.feedBody(input, i),
                .epilogue => return .{ .consumed = input.len, .event = .end },
            }
        }
    }

    /// Skips to just past the next delimiter in `input`, or consumes it all (remembering a
    /// partial delimiter at its end). Preamble bytes are discarded.
    fn scan(parser: *Parser, input: []const u8) struct { consumed: usize, matched: bool } {
        const delim = parser.delimiter();
        var i: usize = 0;
        if (parser.match_len > 0) {
            const want = delim[parser.match_len..];
            const n = @min(want.len, input.len);
            if (std.mem.eql(u8, input[0..n], want[0..n])) {
                parser.match_len += @intCast(n);
                if (parser.match_len == delim.len) {
                    parser.match_len = 0;
                    return .{ .consumed = n, .matched = true };
                }
                return .{ .consumed = n, .matched = false };
            }
            parser.match_len = 0;
        }
        while (std.mem.findScalarPos(u8, input, i, '\r')) |cr| {
            const n = @min(delim.len, input.len - cr);
            if (std.mem.eql(u8, input[cr..][0..n], delim[0..n])) {
                if (n == delim.len) return .{ .consumed = cr + n, .matched = true };
                parser.match_len = @intCast(n);
                return .{ .consumed = input.len, .matched = false };
            }
            i = cr + 1;
        }
        return .{ .consumed = input.len, .matched = false };
    }

    /// One byte after a delimiter.
    fn afterDelimiter(parser: *Parser, c: u8) Error!?Event {
        switch (parser.state) {
            .after_delimiter => switch (c) {
                '-' => parser.state = .after_dash,
                ' ', '\t' => parser.state = .padding,
                '\r' => parser.state = .delimiter_lf,
                else => return error.InvalidMultipart,
            },
            .after_dash => {
                if (c != '-') return error.InvalidMultipart;
                parser.state = .epilogue;
                return .end;
            },
            .padding => switch (c) {
                ' ', '\t' => {},
                '\r' => parser.state = .delimiter_lf,
                else => return error.InvalidMultipart,
            },
            .delimiter_lf => {
                if (c != '\n') return error.InvalidMultipart;
                if (parser.part_count == parser.limits.part_count_max) return error.MultipartTooManyParts;
                parser.part_count += 1;
                parser.state = .headers;
                parser.header_len = 0;
            },
            else => unreachable,
        }
        return null;
    }

    /// Copies header bytes up to the blank line that ends them.
    fn takeHeaders(parser: *Parser, input: []const u8) Error!struct { consumed: usize, part: ?Part } {
        var i: usize = 0;
        while (i < input.len) {
            const line_end = if (std.mem.findScalarPos(u8, input, i, '\n')) |lf| lf + 1 else input.len;
            const piece = input[i..line_end];
            if (parser.header_len + piece.len > parser.header_buffer.len) return error.MultipartHeadersTooLarge;
            @memcpy(parser.header_buffer[parser.header_len..][0..piece.len], piece);
            parser.header_len += piece.len;
            i = line_end;
            const block = parser.header_buffer[0..parser.header_len];
            if (std.mem.eql(u8, block, "\r\n") or std.mem.endsWith(u8, block, "\r\n\r\n")) {
                const part = try parsePartHeaders(block[0 .. block.len - 2]);
                parser.state = .body;
                parser.part_len = 0;
                parser.match_len = 0;
                return .{ .consumed = i, .part = part };
            }
        }
        return .{ .consumed = i, .part = null };
    }

    /// Part body: data up to the next delimiter.
    fn feedBody(parser: *Parser, input: []const u8, start: usize) Error!Step {
        const delim = parser.delimiter();
        const rest = input[start..];
        if (parser.match_len > 0) {
            const want = delim[parser.match_len..];
            const n = @min(want.len, rest.len);
            if (std.mem.eql(u8, rest[0..n], want[0..n])) {
                parser.match_len += @intCast(n);
                if (parser.match_len < delim.len) return .{ .consumed = start + n, .event = .need_more };
                parser.match_len = 0;
                parser.state = .after_delimiter;
                return .{ .consumed = start + n, .event = .part_end };
            }
            // What looked like a delimiter was data; the input is looked at afresh next time.
            const held = delim[0..parser.match_len];
            parser.match_len = 0;
            try parser.count(held.len);
            return .{ .consumed = start, .event = .{ .data = held } };
        }
        var i: usize = 0;
        while (std.mem.findScalarPos(u8, rest, i, '\r')) |cr| {
            const n = @min(delim.len, rest.len - cr);
            if (!std.mem.eql(u8, rest[cr..][0..n], delim[0..n])) {
                i = cr + 1;
                continue;
            }
            if (cr > 0) {
                // The data before the (possible) delimiter first; the delimiter next call.
                try parser.count(cr);
                return .{ .consumed = start + cr, .event = .{ .data = rest[0..cr] } };
            }
            if (n < delim.len) {
                parser.match_len = @intCast(n);
                return .{ .consumed = start + n, .event = .need_more };
            }
            parser.state = .after_delimiter;
            return .{ .consumed = start + n, .event = .part_end };
        }
        if (rest.len == 0) return .{ .consumed = start, .event = .need_more };
        try parser.count(rest.len);
        return .{ .consumed = input.len, .event = .{ .data = rest } };
    }

    fn count(parser: *Parser, len: usize) Error!void {
        parser.part_len += len;
        if (parser.part_len > parser.limits.part_bytes_max) return error.MultipartPartTooLarge;
    }
};

/// Whether `boundary` is 1-70 bchars not ending in a space (RFC 2046 §5.1.1).
pub fn validBoundary(boundary: []const u8) bool {
    if (boundary.len == 0 or boundary.len > boundary_bytes_max) return false;
    if (boundary[boundary.len - 1] == ' ') return false;
    for (boundary) |c| switch (c) {
        'a'...'z', 'A'...'Z', '0'...'9' => {},
        '\'', '(', ')', '+', '_', ',', '-', '.', '/', ':', '=', '?', ' ' => {},
        else => return false,
    };
    return true;
}

/// Parses a part's header section (without the blank line). The header buffer is ours, so
/// quoted parameter values are unescaped in place.
fn parsePartHeaders(block: []u8) Error!Part {
    var part: Part = .{ .name = "", .filename = null, .content_type = null, .header_block = block };
    var has_name = false;
    var start: usize = 0;
    while (start < block.len) {
        const end = std.mem.findPos(u8, block, start, "\r\n") orelse return error.InvalidMultipart;
        const line = block[start..end];
        start = end + 2;
        for (line) |c| if ((c < 0x20 and c != '\t') or c == 0x7F) return error.InvalidMultipart;
        const colon = std.mem.findScalar(u8, line, ':') orelse return error.InvalidMultipart;
        const name = line[0..colon];
        if (name.len == 0 or std.mem.findAny(u8, name, " \t") != null) return error.InvalidMultipart;
        const value = std.mem.trim(u8, line[colon + 1 ..], " \t");
        if (std.ascii.eqlIgnoreCase(name, "content-disposition")) {
            try parseDisposition(@constCast(value), &part);
            has_name = true;
        } else if (std.ascii.eqlIgnoreCase(name, "content-type")) {
            part.content_type = value;
        }
    }
    // RFC 7578 §4.2: every part has a Content-Disposition of type form-data with a name.
    if (!has_name) return error.InvalidMultipart;
    return part;
}

fn parseDisposition(value: []u8, part: *Part) Error!void {
    const type_end = std.mem.findScalar(u8, value, ';') orelse value.len;
    if (!std.ascii.eqlIgnoreCase(std.mem.trim(u8, value[0..type_end], " \t"), "form-data"))
        return error.InvalidMultipart;
    var name: ?[]const u8 = null;
    var i = type_end;
    while (i < value.len) {
        assert(value[i] == ';');
        i += 1;
        while (i < value.len and (value[i] == ' ' or value[i] == '\t')) i += 1;
        const eq = std.mem.findScalarPos(u8, value, i, '=') orelse return error.InvalidMultipart;
        const key = std.mem.trim(u8, value[i..eq], " \t");
        i = eq + 1;
        while (i < value.len and (value[i] == ' ' or value[i] == '\t')) i += 1;
        var param: []const u8 = undefined;
        if (i < value.len and value[i] == '"') {
            // quoted-string: unescape quoted-pairs in place.
            i += 1;
            const out_start = i;
            var out = i;
            while (true) : (i += 1) {
                if (i == value.len) return error.InvalidMultipart;
                var c = value[i];
                if (c == '"') break;
                if (c == '\\') {
                    i += 1;
                    if (i == value.len) return error.InvalidMultipart;
                    c = value[i];
                }
                value[out] = c;
                out += 1;
            }
            param = value[out_start..out];
            i += 1;
            while (i < value.len and (value[i] == ' ' or value[i] == '\t')) i += 1;
            if (i < value.len and value[i] != ';') return error.InvalidMultipart;
        } else {
            const end = std.mem.findScalarPos(u8, value, i, ';') orelse value.len;
            param = std.mem.trimEnd(u8, value[i..end], " \t");
            i = end;
        }
        if (std.ascii.eqlIgnoreCase(key, "name")) {
            name = param;
        } else if (std.ascii.eqlIgnoreCase(key, "filename")) {
            part.filename = param;
        }
    }
    part.name = name orelse return error.InvalidMultipart;
}

/// Reads the parts of a multipart body that is already in memory: each part's data is one
/// slice of the body (no copy).
pub const Reader = struct {
    parser: Parser,
    body: []const u8,
    /// Offset of the first byte not yet given to the parser.
    offset: usize = 0,

    /// One part and its whole body.
    pub const Entry = struct { part: Part, data: []const u8 };

    /// A reader over `body`. `header_buffer` as for `Parser.init`.
    pub fn init(body: []const u8, boundary: []const u8, header_buffer: []u8, limits: Limits) Error!Reader {
        return .{ .parser = try .init(boundary, header_buffer, limits), .body = body };
    }

    /// The next part, or null after the last. Fails on a malformed or truncated body.
    pub fn next(reader: *Reader) Error!?Entry {
        var part: ?Part = null;
        var data_start: usize = 0;
        var data_end: usize = 0;
        while (true) {
            const step = try reader.parser.feed(reader.body[reader.offset..]);
            const event_start = reader.offset;
            reader.offset += step.consumed;
            switch (step.event) {
                .need_more => return error.InvalidMultipart, // the body ended inside a part
                .end => {
                    if (part != null) return error.InvalidMultipart;
                    return null;
                },
                .part => |p| {
                    part = p;
                    data_start = reader.offset;
                    data_end = reader.offset;
                },
                .data => |bytes| {
                    // Fed the whole body at once, data always lies in the body, contiguous.
                    assert(bytes.ptr == reader.body.ptr + event_start);
                    assert(event_start == data_end);
                    data_end += bytes.len;
                },
                .part_end => return .{ .part = part.?, .data = reader.body[data_start..data_end] },
            }
        }
    }
};

// Tests.

const test_boundary = "----saker7MA4YWxkTrZu0gW";

const form_body = "preamble to ignore\r\n" ++
    "------saker7MA4YWxkTrZu0gW\r\n" ++
    "Content-Disposition: form-data; name=\"title\"\r\n" ++
    "\r\n" ++
    "Hello\r\nworld\r\n" ++
    "------saker7MA4YWxkTrZu0gW  \r\n" ++
    "content-disposition: form-data; name=\"file\"; filename=\"a \\\"q\\\".txt\"\r\n" ++
    "Content-Type: text/plain\r\n" ++
    "X-Extra: 1\r\n" ++
    "\r\n" ++
    "\r\n--almost a delimiter\r\r\n------saker7MA4YWxkTrZu0g!\r\n" ++
    "------saker7MA4YWxkTrZu0gW\r\n" ++
    "Content-Disposition: form-data; name=empty\r\n" ++
    "\r\n" ++
    "\r\n" ++
    "------saker7MA4YWxkTrZu0gW--\r\n" ++
    "epilogue ------saker7MA4YWxkTrZu0gW\r\n";

const expected_parts = [_]struct { name: []const u8, filename: ?[]const u8, data: []const u8 }{
    .{ .name = "title", .filename = null, .data = "Hello\r\nworld" },
    .{ .name = "file", .filename = "a \"q\".txt", .data = "\r\n--almost a delimiter\r\r\n------saker7MA4YWxkTrZu0g!" },
    .{ .name = "empty", .filename = null, .data = "" },
};

test "multipart.Reader: a whole body" {
    var header_buffer: [256]u8 = undefined;
    var reader: Reader = try .init(form_body, test_boundary, &header_buffer, .{ .part_header_bytes_max = 256 });
    for (expected_parts) |want| {
        const entry = (try reader.next()).?;
        try std.testing.expectEqualStrings(want.name, entry.part.name);
        if (want.filename) |f| try std.testing.expectEqualStrings(f, entry.part.filename.?) else try std.testing.expectEqual(@as(?[]const u8, null), entry.part.filename);
        try std.testing.expectEqualStrings(want.data, entry.data);
        if (std.mem.eql(u8, want.name, "file")) {
            try std.testing.expectEqualStrings("text/plain", entry.part.content_type.?);
            try std.testing.expectEqualStrings("1", entry.part.header("x-extra").?);
        }
    }
    try std.testing.expectEqual(null, try reader.next());
}

/// Feeds `body` in pieces cut at `cuts` and collects "name=data;" for every part.
fn collect(out: *std.ArrayList(u8), body: []const u8, cuts: []const usize, limits: Limits) !void {
    var header_buffer: [256]u8 = undefined;
    var parser: Parser = try .init(test_boundary, header_buffer[0..limits.part_header_bytes_max], limits);
    var piece_start: usize = 0;
    var ended = false;
    for (0..cuts.len + 1) |k| {
        const piece_end = if (k < cuts.len) cuts[k] else body.len;
        var input = body[piece_start..piece_end];
        piece_start = piece_end;
        while (!ended) {
            const step = try parser.feed(input);
            input = input[step.consumed..];
            switch (step.event) {
                .need_more => {
                    try std.testing.expectEqual(@as(usize, 0), input.len);
                    break;
                },
                .part => |part| try out.print(std.testing.allocator, "{s}|{s}=", .{ part.name, part.filename orelse "" }),
                .data => |bytes| try out.appendSlice(std.testing.allocator, bytes),
                .part_end => try out.append(std.testing.allocator, ';'),
                .end => ended = true,
            }
        }
    }
    if (!parser.done()) return error.InvalidMultipart;
}

test "multipart.Parser: fed whole, byte by byte, and split at every offset" {
    const limits: Limits = .{ .part_header_bytes_max = 256 };
    const expected = "title|=Hello\r\nworld;file|a \"q\".txt=\r\n--almost a delimiter\r\r\n------saker7MA4YWxkTrZu0g!;empty|=;";
    var out: std.ArrayList(u8) = .empty;
    defer out.deinit(std.testing.allocator);

    try collect(&out, form_body, &.{}, limits);
    try std.testing.expectEqualStrings(expected, out.items);

    var every: [form_body.len - 1]usize = undefined;
    for (&every, 1..) |*cut, i| cut.* = i;
    out.clearRetainingCapacity();
    try collect(&out, form_body, &every, limits);
    try std.testing.expectEqualStrings(expected, out.items);

    for (1..form_body.len) |cut| {
        out.clearRetainingCapacity();
        collect(&out, form_body, &.{cut}, limits) catch |err| {
            std.debug.print("split at {d}\n", .{cut});
            return err;
        };
        try std.testing.expectEqualStrings(expected, out.items);
    }
}

test "multipart.Parser: the delimiter right at the start, no preamble" {
    const body = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--";
    var header_buffer: [64]u8 = undefined;
    var reader: Reader = try .init(body, "b", &header_buffer, .{ .part_header_bytes_max = 64 });
    const entry = (try reader.next()).?;
    try std.testing.expectEqualStrings("a", entry.part.name);
    try std.testing.expectEqualStrings("x", entry.data);
    try std.testing.expectEqual(null, try reader.next());
}

test "multipart: invalid bodies and boundaries" {
    const bad_bodies = [_][]const u8{
        "", // no delimiter at all
        "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx", // truncated in a part
        "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b", // no closing
        "--bX\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--", // junk after delimiter
        "--b\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--", // bare LF
        "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", // no Content-Disposition
        "--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--", // not form-data
        "--b\r\nContent-Disposition: form-data; filename=a\r\n\r\nx\r\n--b--", // no name
        "--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--", // open quote
        "--b\r\nContent-Disposition form-data\r\n\r\nx\r\n--b--", // no colon
        "--b\r\nBad Name: 1\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--",
        "--b\r\nContent-Disposition: form-data; name=\"a\" junk\r\n\r\nx\r\n--b--",
        "--b\r\nX: 1\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--", // bare LF in headers
    };
    for (bad_bodies) |body| {
        var header_buffer: [64]u8 = undefined;
        var reader: Reader = try .init(body, "b", &header_buffer, .{ .part_header_bytes_max = 64 });
        const result = while (true) {
            const entry = reader.next() catch |err| break err;
            if (entry == null) break error.Accepted;
        };
        std.testing.expectEqual(error.InvalidMultipart, result) catch |err| {
            std.debug.print("body {f}\n", .{std.zig.fmtString(body)});
            return err;
        };
    }
    var header_buffer: [8]u8 = undefined;
    const longest: [boundary_bytes_max]u8 = @splat('z');
    const too_long: [boundary_bytes_max + 1]u8 = @splat('z');
    for ([_][]const u8{ "", "a b ", "a\"b", "a\r", &too_long }) |boundary| {
        try std.testing.expectError(error.InvalidMultipart, Parser.init(boundary, &header_buffer, .{ .part_header_bytes_max = 8 }));
    }
    try std.testing.expect(validBoundary(&longest));
    try std.testing.expect(validBoundary("a b"));
}

test "multipart: limits" {
    const one_part = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n0123456789\r\n--b--";
    var header_buffer: [64]u8 = undefined;
    {
        var reader: Reader = try .init(one_part, "b", &header_buffer, .{ .part_header_bytes_max = 64, .part_bytes_max = 9 });
        try std.testing.expectError(error.MultipartPartTooLarge, reader.next());
    }
    {
        var reader: Reader = try .init(one_part, "b", &header_buffer, .{ .part_header_bytes_max = 64, .part_bytes_max = 10 });
        try std.testing.expectEqualStrings("0123456789", (try reader.next()).?.data);
    }
    {
        var reader: Reader = try .init(one_part, "b", header_buffer[0..20], .{ .part_header_bytes_max = 20 });
        try std.testing.expectError(error.MultipartHeadersTooLarge, reader.next());
    }
    {
        const two_parts = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n" ++
            "--b\r\nContent-Disposition: form-data; name=b\r\n\r\n2\r\n--b--";
        var reader: Reader = try .init(two_parts, "b", &header_buffer, .{ .part_header_bytes_max = 64, .part_count_max = 1 });
        _ = (try reader.next()).?;
        try std.testing.expectError(error.MultipartTooManyParts, reader.next());
    }
    {
        // A part too large is caught while streaming, long before its end.
        var parser: Parser = try .init("b", &header_buffer, .{ .part_header_bytes_max = 64, .part_bytes_max = 4 });
        var input: []const u8 = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n";
        while (input.len > 0) input = input[(try parser.feed(input)).consumed..];
        try std.testing.expectError(error.MultipartPartTooLarge, parser.feed("12345"));
    }
}
