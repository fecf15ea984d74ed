//! Errors that mean the client sent something the handler cannot use, and the answer each one
//! gets (a 4xx status and a short message) when a handler lets it propagate. The request
//! conveniences (`Request.queryParam`, `cookies`, `formData`, `multipart`, `json`, ...) return
//! these, so `try req.json(T)` in a handler turns bad input into a 400, not a 500.
const std = @import("std");
const http = @import("http.zig");

/// Bad input from the client, each answered by `answer`.
pub const ClientError = error{
    /// A '%' not followed by two hex digits (400).
    InvalidPercentEncoding,
    /// A `Cookie` field that is not a list of `name=value` pairs (400).
    InvalidCookie,
    /// The body's Content-Type is not what the handler reads (415).
    UnsupportedMediaType,
    /// A body that is not valid JSON for the expected type (400).
    InvalidJson,
    /// A `multipart/form-data` body that breaks RFC 7578 / RFC 2046 §5.1.1 (400).
    InvalidMultipart,
    /// A multipart part's header section over `Limits.part_header_bytes_max` (413).
    MultipartHeadersTooLarge,
    /// A multipart part's body over `Limits.part_bytes_max` (413).
    MultipartPartTooLarge,
    /// More multipart parts than `Limits.part_count_max` (413).
    MultipartTooManyParts,
    /// A required query, form or path parameter is absent (400).
    MissingParameter,
    /// A query, form or path parameter with the wrong form, e.g. not a number (400).
    InvalidParameter,
};

/// The response an error gets.
pub const Answer = struct {
    status: http.Status,
    /// A few words on what was wrong ("invalid percent-encoding").
    reason: []const u8,
    /// The response body: "400 Bad Request: invalid percent-encoding\n".
    body: []const u8,
};

const table = [_]struct { err: anyerror, status: http.Status, reason: []const u8 }{
    .{ .err = error.InvalidPercentEncoding, .status = .bad_request, .reason = "invalid percent-encoding" },
    .{ .err = error.InvalidCookie, .status = .bad_request, .reason = "invalid Cookie header" },
    .{ .err = error.UnsupportedMediaType, .status = .unsupported_media_type, .reason = "unsupported Content-Type for this resource" },
    .{ .err = error.InvalidJson, .status = .bad_request, .reason = "invalid JSON body" },
    .{ .err = error.InvalidMultipart, .status = .bad_request, .reason = "invalid multipart body" },
    .{ .err = error.MultipartHeadersTooLarge, .status = .content_too_large, .reason = "multipart part headers too large" },
    .{ .err = error.MultipartPartTooLarge, .status = .content_too_large, .reason = "multipart part too large" },
    .{ .err = error.MultipartTooManyParts, .status = .content_too_large, .reason = "too many multipart parts" },
    .{ .err = error.MissingParameter, .status = .bad_request, .reason = "missing parameter" },
    .{ .err = error.InvalidParameter, .status = .bad_request, .reason = "invalid parameter" },
};

/// Room for the longest reason with a parameter name (`Request.fault_name_bytes_max`).
pub const reason_bytes_max = 96;

/// `a.reason` naming the parameter at fault: `invalid parameter "page"`, in `buffer`.
pub fn reasonNaming(buffer: *[reason_bytes_max]u8, a: Answer, parameter: []const u8) []const u8 {
    return std.mem.print(buffer, "{s} \"{s}\"", .{ a.reason, parameter }) catch a.reason;
}

/// The answer for `err` when it is a `ClientError`, else null (the server answers 500).
pub fn answer(err: anyerror) ?Answer {
    inline for (table) |row| {
        if (err == row.err) return comptime .{
            .status = row.status,
            .reason = row.reason,
            .body = std.fmt.comptimePrint("{d} {s}: {s}\n", .{ row.status.code(), row.status.phrase(), row.reason }),
        };
    }
    return null;
}

test "client_error.answer: every ClientError has an answer, others none" {
    inline for (@typeInfo(ClientError).error_set.error_names.?) |name| {
        const a = answer(@field(anyerror, name)).?;
        try std.testing.expect(a.status.code() >= 400 and a.status.code() < 500);
        try std.testing.expect(std.mem.endsWith(u8, a.body, "\n"));
        try std.testing.expect(std.mem.find(u8, a.body, a.reason) != null);
    }
    try std.testing.expectEqual(@as(?Answer, null), answer(error.OutOfMemory));
    try std.testing.expectEqualStrings("400 Bad Request: invalid JSON body\n", answer(error.InvalidJson).?.body);
    var buffer: [reason_bytes_max]u8 = undefined;
    const long_name: [32]u8 = @splat('n');
    try std.testing.expectEqualStrings("invalid parameter \"page\"", reasonNaming(&buffer, answer(error.InvalidParameter).?, "page"));
    // The longest kept name fits with the longest reason.
    inline for (table) |row| _ = std.mem.print(&buffer, "{s} \"{s}\"", .{ row.reason, &long_name }) catch unreachable;
}
