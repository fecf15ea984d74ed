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
    /// Short plain text for the response body, ending in a newline.
    message: []const u8,
};

/// The answer for `err` when it is a `ClientError`, else null (the server answers 500).
pub fn answer(err: anyerror) ?Answer {
    return switch (err) {
        error.InvalidPercentEncoding => .{ .status = .bad_request, .message = "400 Bad Request: invalid percent-encoding\n" },
        error.InvalidCookie => .{ .status = .bad_request, .message = "400 Bad Request: invalid Cookie header\n" },
        error.UnsupportedMediaType => .{ .status = .unsupported_media_type, .message = "415 Unsupported Media Type\n" },
        error.InvalidJson => .{ .status = .bad_request, .message = "400 Bad Request: invalid JSON body\n" },
        error.InvalidMultipart => .{ .status = .bad_request, .message = "400 Bad Request: invalid multipart body\n" },
        error.MultipartHeadersTooLarge => .{ .status = .content_too_large, .message = "413 Content Too Large: multipart part headers too large\n" },
        error.MultipartPartTooLarge => .{ .status = .content_too_large, .message = "413 Content Too Large: multipart part too large\n" },
        error.MultipartTooManyParts => .{ .status = .content_too_large, .message = "413 Content Too Large: too many multipart parts\n" },
        error.MissingParameter => .{ .status = .bad_request, .message = "400 Bad Request: missing parameter\n" },
        error.InvalidParameter => .{ .status = .bad_request, .message = "400 Bad Request: invalid parameter\n" },
        else => null,
    };
}

test "client_error.answer: every ClientError has an answer, others none" {
    inline for (@typeInfo(ClientError).error_set.error_names.?) |name| {
        const a = answer(@field(anyerror, name)).?;
        try std.testing.expect(a.status.code() >= 400 and a.status.code() < 500);
        try std.testing.expect(std.mem.endsWith(u8, a.message, "\n"));
    }
    try std.testing.expectEqual(@as(?Answer, null), answer(error.OutOfMemory));
}
