//! The HTML page listing a directory: breadcrumbs, then a table of name, size and
//! modification time (UTC), directories first, then by name, size or time as the column
//! links ask (`?sort=size&order=desc`: plain links, no script). Every name is HTML-escaped in
//! text and percent-encoded in links, so any byte sequence a file name may hold is shown
//! safely and links to itself. Self-contained: inline CSS, no scripts, no external requests.
const std = @import("std");
const url_path = @import("url_path.zig");

/// One entry of the listing.
pub const Item = struct {
    name: []const u8,
    directory: bool,
    size: u64,
    mtime_sec: i64,
};

/// How entries are ordered after directories-first.
pub const Order = struct {
    key: Key = .name,
    descending: bool = false,

    pub const Key = enum { name, size, date };

    /// From a listing URL's query: `sort=name|size|date` and `order=asc|desc`, separated by
    /// `&` or `;`. Anything else is ignored (the default: by name, ascending).
    pub fn fromQuery(query: []const u8) Order {
        var order: Order = .{};
        var pairs = std.mem.tokenizeAny(u8, query, "&;");
        while (pairs.next()) |pair| {
            const eq = std.mem.findScalar(u8, pair, '=') orelse continue;
            const name = pair[0..eq];
            const value = pair[eq + 1 ..];
            if (std.mem.eql(u8, name, "sort")) {
                order.key = std.meta.stringToEnum(Key, value) orelse order.key;
            } else if (std.mem.eql(u8, name, "order")) {
                if (std.mem.eql(u8, value, "desc")) order.descending = true;
                if (std.mem.eql(u8, value, "asc")) order.descending = false;
            }
        }
        return order;
    }

    /// The order a column's link asks for: the current column flips its direction; another
    /// starts with names A-Z, and sizes and times largest and newest first.
    fn next(order: Order, key: Key) Order {
        if (key == order.key) return .{ .key = key, .descending = !order.descending };
        return .{ .key = key, .descending = key != .name };
    }
};

/// Sorts directories first, then by `order`; names compare ASCII case-insensitively, then
/// bytewise, and break ties of size and time.
pub fn sort(items: []Item, order: Order) void {
    std.mem.sort(Item, items, order, lessThan);
}

fn lessThan(order: Order, a: Item, b: Item) bool {
    if (a.directory != b.directory) return a.directory;
    const by_key: std.math.Order = switch (order.key) {
        .name => .eq,
        .size => std.math.order(a.size, b.size),
        .date => std.math.order(a.mtime_sec, b.mtime_sec),
    };
    const by_name: std.math.Order = switch (std.ascii.orderIgnoreCase(a.name, b.name)) {
        .eq => std.mem.order(u8, a.name, b.name),
        else => |o| o,
    };
    const total = if (by_key != .eq) by_key else by_name;
    return if (order.descending) total == .gt else total == .lt;
}

/// What the page shows.
pub const Page = struct {
    /// The directory, relative to the root ("" for the root), decoded.
    relative: []const u8,
    items: []const Item,
    /// Entries left out because the directory holds more than the listing limit.
    omitted: usize = 0,
    /// How `items` are sorted (the column links say it).
    order: Order = .{},
    /// Offer a form that uploads files into this directory (`StaticFiles.upload`).
    upload_form: bool = false,
};

const style =
    \\:root{color-scheme:light dark;--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--bg:#fff;--row:#f6f8fa;--link:#0969da}
    \\@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#8d96a0;--line:#30363d;--bg:#0d1117;--row:#161b22;--link:#4493f8}}
    \\*{box-sizing:border-box}
    \\body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
    \\main{max-width:960px;margin:0 auto;padding:32px 20px 48px}
    \\h1{font-size:20px;font-weight:600;margin:0 0 20px;overflow-wrap:anywhere}
    \\h1 a{color:var(--link);text-decoration:none}h1 a:hover{text-decoration:underline}
    \\h1 .sep{color:var(--muted);margin:0 6px;font-weight:400}
    \\h1 .label{color:var(--muted);font-weight:400;margin-right:8px}
    \\table{width:100%;border-collapse:collapse;border:1px solid var(--line);border-radius:8px;overflow:hidden}
    \\th{text-align:left;font-size:13px;font-weight:600;color:var(--muted);background:var(--row);padding:8px 14px;border-bottom:1px solid var(--line)}
    \\th a{color:inherit;text-decoration:none}th a:hover{text-decoration:underline}
    \\td{padding:7px 14px;border-bottom:1px solid var(--line);white-space:nowrap}
    \\tr:last-child td{border-bottom:0}
    \\tbody tr:hover{background:var(--row)}
    \\td.name{width:100%;white-space:normal;overflow-wrap:anywhere}
    \\td.name a{display:flex;align-items:flex-start;color:var(--link);text-decoration:none}td.name a:hover{text-decoration:underline}
    \\td.size,th.size{text-align:right;font-variant-numeric:tabular-nums}
    \\td.size,td.date{color:var(--muted);font-size:14px;font-variant-numeric:tabular-nums}
    \\.icon{flex:none;width:16px;height:16px;margin:3px 10px 0 0;color:var(--muted)}
    \\.dir .icon{color:#54aeff}
    \\footer{margin-top:14px;color:var(--muted);font-size:13px}
    \\form{margin:0 0 16px;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
    \\@media (max-width:600px){main{padding:20px 10px 32px}th,td{padding:7px 8px}td.date{white-space:normal}td.date span{white-space:nowrap}}
;

const folder_icon = "<svg class=\"icon\" viewBox=\"0 0 16 16\" aria-hidden=\"true\"><path fill=\"currentColor\" d=\"M1.75 1A1.75 1.75 0 0 0 0 2.75v10.5C0 14.22.78 15 1.75 15h12.5A1.75 1.75 0 0 0 16 13.25v-8.5A1.75 1.75 0 0 0 14.25 3H7.5a.25.25 0 0 1-.2-.1l-.9-1.2C6.07 1.26 5.55 1 5 1H1.75Z\"/></svg>";
const file_icon = "<svg class=\"icon\" viewBox=\"0 0 16 16\" aria-hidden=\"true\"><path fill=\"currentColor\" d=\"M2 1.75C2 .78 2.78 0 3.75 0h6.59c.46 0 .9.18 1.23.51l2.92 2.92c.33.33.51.77.51 1.23v9.59A1.75 1.75 0 0 1 13.25 16h-9.5A1.75 1.75 0 0 1 2 14.25Zm1.75-.25a.25.25 0 0 0-.25.25v12.5c0 .14.11.25.25.25h9.5a.25.25 0 0 0 .25-.25V6h-2.75A1.75 1.75 0 0 1 9 4.25V1.5Zm6.75.06V4.25c0 .14.11.25.25.25h2.69Z\"/></svg>";
const up_icon = "<svg class=\"icon\" viewBox=\"0 0 16 16\" aria-hidden=\"true\"><path fill=\"currentColor\" d=\"M3.47 7.78a.75.75 0 0 1 0-1.06l4-4a.75.75 0 0 1 1.06 0l4 4a.75.75 0 0 1-1.06 1.06L8.75 5.06v8.19a.75.75 0 0 1-1.5 0V5.06L4.53 7.78a.75.75 0 0 1-1.06 0Z\"/></svg>";

/// Writes the whole HTML page.
pub fn write(w: *std.Io.Writer, page: Page) std.Io.Writer.Error!void {
    try w.writeAll("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" ++
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>Index of /");
    try writeHtml(w, page.relative);
    if (page.relative.len > 0) try w.writeByte('/');
    try w.writeAll("</title><style>" ++ style ++ "</style></head>\n<body><main>\n<h1><span class=\"label\">Index of</span>");
    try writeBreadcrumbs(w, page.relative);
    try w.writeAll("</h1>\n");
    if (page.upload_form) {
        // Posts to this directory's own URL; new names only (existing files are kept).
        try w.writeAll("<form method=\"post\" enctype=\"multipart/form-data\"><input type=\"file\" name=\"file\" multiple required>" ++
            "<button type=\"submit\">Upload</button></form>\n");
    }
    try w.writeAll("<table>\n<thead><tr><th>");
    try writeColumn(w, page.order, .name, "Name");
    try w.writeAll("</th><th class=\"size\">");
    try writeColumn(w, page.order, .size, "Size");
    try w.writeAll("</th><th class=\"date\">");
    try writeColumn(w, page.order, .date, "Modified (UTC)");
    try w.writeAll("</th></tr></thead>\n<tbody>\n");
    if (page.relative.len > 0) {
        try w.writeAll("<tr class=\"dir\"><td class=\"name\"><a href=\"../\">" ++ up_icon ++
            "Parent directory</a></td><td class=\"size\"></td><td class=\"date\"></td></tr>\n");
    }
    for (page.items) |item| try writeRow(w, item);
    try w.writeAll("</tbody>\n</table>\n<footer>");
    var dirs: usize = 0;
    for (page.items) |item| dirs += @intFromBool(item.directory);
    try w.print("{d} director{s}, {d} file{s}", .{
        dirs,                  if (dirs == 1) "y" else "ies",
        page.items.len - dirs, if (page.items.len - dirs == 1) "" else "s",
    });
    if (page.omitted > 0) try w.print(" · {d} more not shown", .{page.omitted});
    try w.writeAll("</footer>\n</main></body></html>\n");
}

/// A column heading: a link to this directory sorted by the column, with an arrow on the one
/// in use.
fn writeColumn(w: *std.Io.Writer, order: Order, key: Order.Key, label: []const u8) std.Io.Writer.Error!void {
    const target = order.next(key);
    try w.print("<a href=\"?sort={t}&amp;order={s}\">{s}", .{ key, if (target.descending) "desc" else "asc", label });
    if (order.key == key) try w.writeAll(if (order.descending) " ↓" else " ↑");
    try w.writeAll("</a>");
}

fn writeBreadcrumbs(w: *std.Io.Writer, relative: []const u8) std.Io.Writer.Error!void {
    // Each crumb links with a relative path of "../" steps, so the page works under any prefix;
    // the last one is the page itself and is not a link (also when it is the root).
    if (relative.len == 0) return w.writeAll("<span class=\"here\">/</span>");
    var depth: usize = std.mem.countScalar(u8, relative, '/') + 1;
    try w.writeAll("<a href=\"");
    try writeUps(w, depth);
    try w.writeAll("\">/</a>");
    var segments = std.mem.splitScalar(u8, relative, '/');
    while (segments.next()) |segment| {
        depth -= 1;
        try w.writeAll("<span class=\"sep\">›</span>");
        if (depth == 0) {
            try w.writeAll("<span class=\"here\">");
            try writeHtml(w, segment);
            try w.writeAll("</span>");
        } else {
            try w.writeAll("<a href=\"");
            try writeUps(w, depth);
            try w.writeAll("\">");
            try writeHtml(w, segment);
            try w.writeAll("</a>");
        }
    }
}

fn writeUps(w: *std.Io.Writer, depth: usize) std.Io.Writer.Error!void {
    std.debug.assert(depth > 0);
    for (0..depth) |_| try w.writeAll("../");
}

fn writeRow(w: *std.Io.Writer, item: Item) std.Io.Writer.Error!void {
    try w.writeAll(if (item.directory) "<tr class=\"dir\"><td class=\"name\"><a href=\"./" else "<tr><td class=\"name\"><a href=\"./");
    // "./" first: a name like "a:b" must not read as a URL scheme.
    try url_path.writeEncoded(w, item.name, false);
    if (item.directory) try w.writeByte('/');
    try w.writeAll("\">");
    try w.writeAll(if (item.directory) folder_icon else file_icon);
    try writeHtml(w, item.name);
    if (item.directory) try w.writeByte('/');
    try w.writeAll("</a></td><td class=\"size\">");
    if (item.directory) try w.writeAll("—") else try writeSize(w, item.size);
    try w.writeAll("</td><td class=\"date\">");
    try writeDate(w, item.mtime_sec);
    try w.writeAll("</td></tr>\n");
}

/// Escapes the five HTML-significant characters; other bytes (UTF-8 names) pass through.
pub fn writeHtml(w: *std.Io.Writer, text: []const u8) std.Io.Writer.Error!void {
    var start: usize = 0;
    for (text, 0..) |c, i| {
        const escaped: []const u8 = switch (c) {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&#39;",
            else => continue,
        };
        try w.writeAll(text[start..i]);
        try w.writeAll(escaped);
        start = i + 1;
    }
    try w.writeAll(text[start..]);
}

/// "0 B", "999 B", "1.0 KiB", "12.3 MiB", ...
pub fn writeSize(w: *std.Io.Writer, size: u64) std.Io.Writer.Error!void {
    if (size < 1024) return w.print("{d} B", .{size});
    const units = [_][]const u8{ "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    var value: f64 = @as(f64, @floatFromInt(size)) / 1024;
    var unit: usize = 0;
    while (value >= 1024 and unit + 1 < units.len) : (unit += 1) value /= 1024;
    if (value < 10) {
        try w.print("{d:.1} {s}", .{ value, units[unit] });
    } else {
        try w.print("{d:.0} {s}", .{ value, units[unit] });
    }
}

/// "2026-11-22 03:21" (UTC); day and time each in a span that does not break, so a narrow
/// window wraps the cell between them only.
fn writeDate(w: *std.Io.Writer, unix_seconds: i64) std.Io.Writer.Error!void {
    const epoch_seconds: std.time.epoch.EpochSeconds = .{ .secs = @intCast(std.math.clamp(unix_seconds, 0, 253402300799)) };
    const year_day = epoch_seconds.getEpochDay().calculateYearDay();
    const month_day = year_day.calculateMonthDay();
    const day_seconds = epoch_seconds.getDaySeconds();
    try w.print("<span>{d:0>4}-{d:0>2}-{d:0>2}</span> <span>{d:0>2}:{d:0>2}</span>", .{
        year_day.year,                 @backingInt(month_day.month),     month_day.day_index + 1,
        day_seconds.getHoursIntoDay(), day_seconds.getMinutesIntoHour(),
    });
}

test "listing: sizes are human" {
    var buffer: [32]u8 = undefined;
    const cases = [_]struct { u64, []const u8 }{
        .{ 0, "0 B" },           .{ 1023, "1023 B" },      .{ 1024, "1.0 KiB" },
        .{ 1536, "1.5 KiB" },    .{ 10 * 1024, "10 KiB" }, .{ 100 * 1024 * 1024, "100 MiB" },
        .{ 5 << 30, "5.0 GiB" },
    };
    for (cases) |case| {
        var w: std.Io.Writer = .fixed(&buffer);
        try writeSize(&w, case[0]);
        try std.testing.expectEqualStrings(case[1], w.buffered());
    }
}

test "listing: directories first, names escaped in text and encoded in links" {
    var items = [_]Item{
        .{ .name = "b.txt", .directory = false, .size = 5, .mtime_sec = 0 },
        .{ .name = "<script>&\"'.html", .directory = false, .size = 1, .mtime_sec = 0 },
        .{ .name = "Zed", .directory = true, .size = 0, .mtime_sec = 0 },
        .{ .name = "a dir", .directory = true, .size = 0, .mtime_sec = 784111777 },
    };
    sort(&items, .{});
    try std.testing.expectEqualStrings("a dir", items[0].name);
    try std.testing.expectEqualStrings("Zed", items[1].name);
    var aw: std.Io.Writer.Allocating = .init(std.testing.allocator);
    defer aw.deinit();
    try write(&aw.writer, .{ .relative = "x/<y>", .items = &items });
    const html = aw.written();
    try std.testing.expect(std.mem.find(u8, html, "<script>") == null);
    try std.testing.expect(std.mem.find(u8, html, "&lt;script&gt;&amp;&quot;&#39;.html") != null);
    try std.testing.expect(std.mem.find(u8, html, "href=\"./%3Cscript%3E%26%22%27.html\"") != null);
    try std.testing.expect(std.mem.find(u8, html, "href=\"./a%20dir/\"") != null);
    try std.testing.expect(std.mem.find(u8, html, "<span>1994-11-06</span> <span>08:49</span>") != null);
    try std.testing.expect(std.mem.find(u8, html, "<a href=\"../../\">/</a>") != null);
    try std.testing.expect(std.mem.find(u8, html, "<a href=\"../\">x</a><span class=\"sep\">›</span><span class=\"here\">&lt;y&gt;</span>") != null);
    try std.testing.expect(std.mem.find(u8, html, "2 directories, 2 files") != null);
    // By name ascending: its column flips to descending, the others start largest, newest.
    try std.testing.expect(std.mem.find(u8, html, "<a href=\"?sort=name&amp;order=desc\">Name ↑</a>") != null);
    try std.testing.expect(std.mem.find(u8, html, "<a href=\"?sort=size&amp;order=desc\">Size</a>") != null);
    try std.testing.expect(std.mem.find(u8, html, "<a href=\"?sort=date&amp;order=desc\">Modified (UTC)</a>") != null);

    var root: std.Io.Writer.Allocating = .init(std.testing.allocator);
    defer root.deinit();
    try write(&root.writer, .{ .relative = "", .items = &items });
    // The root page names itself without a link to itself, and has no parent row.
    try std.testing.expect(std.mem.find(u8, root.written(), "<span class=\"label\">Index of</span><span class=\"here\">/</span></h1>") != null);
    try std.testing.expect(std.mem.find(u8, root.written(), "Parent directory") == null);
}

test "listing: sorted by size, time or name, either way, directories first" {
    var items = [_]Item{
        .{ .name = "small", .directory = false, .size = 1, .mtime_sec = 300 },
        .{ .name = "big", .directory = false, .size = 900, .mtime_sec = 100 },
        .{ .name = "Mid", .directory = false, .size = 50, .mtime_sec = 200 },
        .{ .name = "same", .directory = false, .size = 50, .mtime_sec = 200 },
        .{ .name = "dir", .directory = true, .size = 0, .mtime_sec = 0 },
    };
    const Case = struct { query: []const u8, names: [5][]const u8 };
    const cases = [_]Case{
        .{ .query = "", .names = .{ "dir", "big", "Mid", "same", "small" } },
        .{ .query = "sort=name&order=desc", .names = .{ "dir", "small", "same", "Mid", "big" } },
        .{ .query = "sort=size", .names = .{ "dir", "small", "Mid", "same", "big" } },
        .{ .query = "sort=size&order=desc", .names = .{ "dir", "big", "same", "Mid", "small" } },
        .{ .query = "order=desc;sort=date", .names = .{ "dir", "small", "same", "Mid", "big" } },
        .{ .query = "sort=date&order=asc", .names = .{ "dir", "big", "Mid", "same", "small" } },
        .{ .query = "sort=colour&order=sideways&x", .names = .{ "dir", "big", "Mid", "same", "small" } },
    };
    for (cases) |case| {
        errdefer std.debug.print("query: {s}\n", .{case.query});
        sort(&items, .fromQuery(case.query));
        for (case.names, items) |name, item| try std.testing.expectEqualStrings(name, item.name);
    }
    var aw: std.Io.Writer.Allocating = .init(std.testing.allocator);
    defer aw.deinit();
    try write(&aw.writer, .{ .relative = "", .items = &items, .order = .fromQuery("sort=size&order=desc") });
    try std.testing.expect(std.mem.find(u8, aw.written(), "<a href=\"?sort=size&amp;order=asc\">Size ↓</a>") != null);
    try std.testing.expect(std.mem.find(u8, aw.written(), "<a href=\"?sort=name&amp;order=asc\">Name</a>") != null);
}
