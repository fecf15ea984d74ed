//! Media types by file extension (RFC 6838 names, as registered with IANA), from a table
//! built at compile time. Text types carry `charset=utf-8`; anything unknown is
//! `application/octet-stream` (RFC 9110 §8.3: a recipient may then treat it as plain bytes).
const std = @import("std");

/// The type sent for files whose extension is not in the table.
pub const default_type = "application/octet-stream";

/// Longest extension in the table; longer ones are unknown without a lookup.
const extension_bytes_max = 12;

const table = std.StaticStringMap([]const u8).initComptime(.{
    // Text and web documents.
    .{ "html", "text/html; charset=utf-8" },
    .{ "htm", "text/html; charset=utf-8" },
    .{ "xhtml", "application/xhtml+xml; charset=utf-8" },
    .{ "css", "text/css; charset=utf-8" },
    .{ "js", "text/javascript; charset=utf-8" },
    .{ "mjs", "text/javascript; charset=utf-8" },
    .{ "cjs", "text/javascript; charset=utf-8" },
    .{ "json", "application/json; charset=utf-8" },
    .{ "jsonld", "application/ld+json; charset=utf-8" },
    .{ "map", "application/json; charset=utf-8" },
    .{ "webmanifest", "application/manifest+json; charset=utf-8" },
    .{ "xml", "application/xml; charset=utf-8" },
    .{ "rss", "application/rss+xml; charset=utf-8" },
    .{ "atom", "application/atom+xml; charset=utf-8" },
    .{ "txt", "text/plain; charset=utf-8" },
    .{ "text", "text/plain; charset=utf-8" },
    .{ "log", "text/plain; charset=utf-8" },
    .{ "md", "text/markdown; charset=utf-8" },
    .{ "markdown", "text/markdown; charset=utf-8" },
    .{ "csv", "text/csv; charset=utf-8" },
    .{ "tsv", "text/tab-separated-values; charset=utf-8" },
    .{ "ics", "text/calendar; charset=utf-8" },
    .{ "vtt", "text/vtt; charset=utf-8" },
    .{ "srt", "text/plain; charset=utf-8" },
    .{ "yaml", "application/yaml; charset=utf-8" },
    .{ "yml", "application/yaml; charset=utf-8" },
    .{ "toml", "application/toml; charset=utf-8" },
    .{ "wasm", "application/wasm" },
    // Images.
    .{ "png", "image/png" },
    .{ "apng", "image/apng" },
    .{ "jpg", "image/jpeg" },
    .{ "jpeg", "image/jpeg" },
    .{ "jfif", "image/jpeg" },
    .{ "gif", "image/gif" },
    .{ "webp", "image/webp" },
    .{ "avif", "image/avif" },
    .{ "heic", "image/heic" },
    .{ "heif", "image/heif" },
    .{ "jxl", "image/jxl" },
    .{ "svg", "image/svg+xml; charset=utf-8" },
    .{ "svgz", "image/svg+xml" },
    .{ "ico", "image/vnd.microsoft.icon" },
    .{ "bmp", "image/bmp" },
    .{ "tif", "image/tiff" },
    .{ "tiff", "image/tiff" },
    // Fonts.
    .{ "woff", "font/woff" },
    .{ "woff2", "font/woff2" },
    .{ "ttf", "font/ttf" },
    .{ "otf", "font/otf" },
    .{ "eot", "application/vnd.ms-fontobject" },
    // Audio.
    .{ "mp3", "audio/mpeg" },
    .{ "m4a", "audio/mp4" },
    .{ "aac", "audio/aac" },
    .{ "oga", "audio/ogg" },
    .{ "ogg", "audio/ogg" },
    .{ "opus", "audio/ogg" },
    .{ "wav", "audio/wav" },
    .{ "flac", "audio/flac" },
    .{ "weba", "audio/webm" },
    .{ "mid", "audio/midi" },
    .{ "midi", "audio/midi" },
    // Video.
    .{ "mp4", "video/mp4" },
    .{ "m4v", "video/mp4" },
    .{ "webm", "video/webm" },
    .{ "ogv", "video/ogg" },
    .{ "mov", "video/quicktime" },
    .{ "avi", "video/x-msvideo" },
    .{ "mkv", "video/x-matroska" },
    .{ "mpeg", "video/mpeg" },
    .{ "mpg", "video/mpeg" },
    .{ "ts", "video/mp2t" },
    .{ "m3u8", "application/vnd.apple.mpegurl" },
    .{ "mpd", "application/dash+xml" },
    // Archives and compressed data.
    .{ "zip", "application/zip" },
    .{ "gz", "application/gzip" },
    .{ "tgz", "application/gzip" },
    .{ "bz2", "application/x-bzip2" },
    .{ "xz", "application/x-xz" },
    .{ "zst", "application/zstd" },
    .{ "br", "application/x-brotli" },
    .{ "tar", "application/x-tar" },
    .{ "7z", "application/x-7z-compressed" },
    .{ "rar", "application/vnd.rar" },
    .{ "jar", "application/java-archive" },
    .{ "deb", "application/vnd.debian.binary-package" },
    .{ "rpm", "application/x-rpm" },
    .{ "iso", "application/x-iso9660-image" },
    .{ "dmg", "application/x-apple-diskimage" },
    // Documents.
    .{ "pdf", "application/pdf" },
    .{ "epub", "application/epub+zip" },
    .{ "rtf", "application/rtf" },
    .{ "doc", "application/msword" },
    .{ "docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document" },
    .{ "xls", "application/vnd.ms-excel" },
    .{ "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
    .{ "ppt", "application/vnd.ms-powerpoint" },
    .{ "pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation" },
    .{ "odt", "application/vnd.oasis.opendocument.text" },
    .{ "ods", "application/vnd.oasis.opendocument.spreadsheet" },
    .{ "odp", "application/vnd.oasis.opendocument.presentation" },
    // Other binaries.
    .{ "bin", "application/octet-stream" },
    .{ "exe", "application/octet-stream" },
    .{ "dll", "application/octet-stream" },
    .{ "apk", "application/vnd.android.package-archive" },
});

comptime {
    @setEvalBranchQuota(10_000);
    for (table.keys()) |key| {
        std.debug.assert(key.len <= extension_bytes_max);
        for (key) |c| std.debug.assert(!std.ascii.isUpper(c));
    }
}

/// The media type for `name` (a file name or path), by its extension, case-insensitively.
pub fn forName(name: []const u8) []const u8 {
    const base = name[(std.mem.findScalarLast(u8, name, '/') orelse std.math.maxInt(usize)) +% 1 ..];
    const dot = std.mem.findScalarLast(u8, base, '.') orelse return default_type;
    const extension = base[dot + 1 ..];
    if (extension.len == 0 or extension.len > extension_bytes_max) return default_type;
    var lower: [extension_bytes_max]u8 = undefined;
    for (extension, 0..) |c, i| lower[i] = std.ascii.toLower(c);
    return table.get(lower[0..extension.len]) orelse default_type;
}

test "mime: common types, case-insensitive, charset on text" {
    try std.testing.expectEqualStrings("text/html; charset=utf-8", forName("index.html"));
    try std.testing.expectEqualStrings("text/html; charset=utf-8", forName("/a/b/INDEX.HTM"));
    try std.testing.expectEqualStrings("text/css; charset=utf-8", forName("site.min.css"));
    try std.testing.expectEqualStrings("text/javascript; charset=utf-8", forName("app.mjs"));
    try std.testing.expectEqualStrings("image/png", forName("x.PNG"));
    try std.testing.expectEqualStrings("font/woff2", forName("f.woff2"));
    try std.testing.expectEqualStrings("video/mp4", forName("clip.mp4"));
    try std.testing.expectEqualStrings("audio/mpeg", forName("song.mp3"));
    try std.testing.expectEqualStrings("application/zip", forName("a.zip"));
    try std.testing.expectEqualStrings("application/pdf", forName("doc.pdf"));
    try std.testing.expectEqualStrings("application/wasm", forName("m.wasm"));
    try std.testing.expectEqualStrings("application/json; charset=utf-8", forName("a.json"));
}

test "mime: unknown, missing and odd extensions" {
    try std.testing.expectEqualStrings(default_type, forName("README"));
    try std.testing.expectEqualStrings(default_type, forName("archive.unknownext"));
    try std.testing.expectEqualStrings(default_type, forName("trailing."));
    try std.testing.expectEqualStrings(default_type, forName("dir.html/file"));
    try std.testing.expectEqualStrings(default_type, forName("x.averyveryverylongextension"));
    try std.testing.expectEqualStrings("text/plain; charset=utf-8", forName(".hidden.txt"));
    try std.testing.expectEqualStrings(default_type, forName(""));
}
