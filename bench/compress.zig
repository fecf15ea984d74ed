//! Compression on the fly, measured: every level of every coding (zstd, br, gzip) on two
//! bodies a server sends, printed as a Markdown table (docs/compression.md):
//! - the HttpArena dataset (tests/data/httparena-dataset.json, 12 KiB of JSON), a dynamic
//!   API response;
//! - a product page of about 200 KiB of HTML with inline CSS and JS, generated here from the
//!   same dataset with a fixed seed (templated markup and varied prose, as a server renders).
//! Each cell: ratio (input / output) of a whole-body `Encoder.compressAll`, compression speed
//! in MB/s of this thread's CPU time (so time descheduled on a shared machine does not count),
//! and the C state an encoder held at most when the page was streamed through it in 16 KiB
//! writes. Speed is the median of `--rounds` rounds (default 3), each running the level for
//! at least 100 ms. `zig build bench-compress [-- --rounds N] [--window-log N]` (a window for
//! every coding, clamped to each one's range); ReleaseFast always.
const std = @import("std");
const compress = @import("compress");
const Encoder = compress.Encoder;
const Coding = compress.Coding;
const linux = std.os.linux;

/// This thread's CPU time.
fn nowNs() u64 {
    var ts: linux.timespec = undefined;
    _ = linux.clock_gettime(.THREAD_CPUTIME_ID, &ts);
    return @as(u64, @intCast(ts.sec)) * std.time.ns_per_s + @as(u64, @intCast(ts.nsec));
}

const round_ns_min = 100 * std.time.ns_per_ms;
const page_bytes_min = 200 * 1024;
const stream_piece_bytes = 16 * 1024;

const Body = struct { name: []const u8, bytes: []const u8 };

const Cell = struct { ratio: f64, mb_per_s: f64, state_kib: usize };

pub fn main(init: std.process.Init) !void {
    const gpa = init.gpa;
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    var rounds: usize = 3;
    var window_log: ?u5 = null;
    var dataset_path: ?[]const u8 = null;
    var i: usize = 1;
    while (i < args.len) : (i += 1) {
        if (std.mem.eql(u8, args[i], "--rounds") and i + 1 < args.len) {
            i += 1;
            rounds = try std.fmt.parseInt(usize, args[i], 10);
        } else if (std.mem.eql(u8, args[i], "--window-log") and i + 1 < args.len) {
            i += 1;
            window_log = try std.fmt.parseInt(u5, args[i], 10);
        } else dataset_path = args[i];
    }
    const dataset = try std.Io.Dir.cwd().readFileAlloc(init.io, dataset_path orelse {
        std.debug.print("usage: bench-compress DATASET.json [--rounds N] [--window-log N]\n", .{});
        std.process.exit(2);
    }, arena, .limited(1 << 20));
    const page = try productPage(arena, dataset);
    const bodies = [_]Body{
        .{ .name = "dataset.json", .bytes = dataset },
        .{ .name = "page.html", .bytes = page },
    };

    var out_buffer: [4096]u8 = undefined;
    var out: std.Io.File.Writer = .initStreaming(.stdout(), init.io, &out_buffer);
    const w = &out.interface;
    try w.print("bodies: dataset.json {d} bytes, page.html {d} bytes; median of {d} rounds, MB/s of thread CPU time; window log {?d} (null: each coding's default)\n\n", .{ dataset.len, page.len, rounds, window_log });
    try w.writeAll("| coding | level | dataset.json ratio | dataset.json MB/s | page.html ratio | page.html MB/s | state KiB (streamed page) |\n");
    try w.writeAll("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    try w.flush();
    for (std.enums.values(Coding)) |coding| {
        const range = Encoder.levels(coding);
        for (range.min..range.max + 1) |level_usize| {
            const level: u8 = @intCast(level_usize);
            // --window-log where the coding takes it; the coding's default elsewhere.
            const logs = Encoder.windowLogs(coding);
            const window: ?u5 = if (window_log) |log| std.math.clamp(log, logs.min, logs.max) else null;
            const options: Encoder.Options = .{ .coding = coding, .level = level, .window_log = window };
            var cells: [bodies.len]Cell = undefined;
            for (bodies, &cells) |body, *cell| cell.* = try measure(gpa, options, body.bytes, rounds);
            const state_kib = try streamedStateKib(gpa, options, page);
            try w.print("| {t} | {d} | {d:.2} | {d:.1} | {d:.2} | {d:.1} | {d} |\n", .{
                coding, level, cells[0].ratio, cells[0].mb_per_s, cells[1].ratio, cells[1].mb_per_s, state_kib,
            });
            try w.flush();
        }
    }
}

/// Ratio and median speed of compressing `input` whole.
fn measure(gpa: std.mem.Allocator, options: Encoder.Options, input: []const u8, rounds: usize) !Cell {
    const output = try gpa.alloc(u8, Encoder.boundBytes(options.coding, input.len));
    defer gpa.free(output);
    const speeds = try gpa.alloc(f64, rounds);
    defer gpa.free(speeds);
    var compressed_len: usize = 0;
    for (speeds) |*speed| {
        var runs: usize = 0;
        const start = nowNs();
        var elapsed: u64 = 0;
        while (elapsed < round_ns_min) {
            const encoded = try Encoder.compressAll(gpa, options, input, output);
            std.mem.doNotOptimizeAway(encoded.ptr);
            compressed_len = encoded.len;
            runs += 1;
            elapsed = nowNs() - start;
        }
        const bytes: f64 = @floatFromInt(input.len * runs);
        speed.* = bytes / (@as(f64, @floatFromInt(elapsed)) / std.time.ns_per_s) / 1e6;
    }
    std.mem.sort(f64, speeds, {}, std.sort.asc(f64));
    return .{
        .ratio = @as(f64, @floatFromInt(input.len)) / @as(f64, @floatFromInt(compressed_len)),
        .mb_per_s = speeds[rounds / 2],
        .state_kib = 0,
    };
}

/// The most C state an encoder holds while `input` streams through it in 16 KiB writes.
fn streamedStateKib(gpa: std.mem.Allocator, options: Encoder.Options, input: []const u8) !usize {
    var encoder: Encoder = undefined;
    try encoder.init(gpa, options);
    defer encoder.deinit();
    var out: [16 * 1024]u8 = undefined;
    var rest = input;
    while (rest.len > 0) {
        var piece = rest[0..@min(rest.len, stream_piece_bytes)];
        rest = rest[piece.len..];
        while (piece.len > 0) {
            const progress = try encoder.write(piece, &out);
            piece = piece[progress.consumed..];
        }
    }
    while (!(try encoder.finish(&out)).done) {}
    return encoder.stateBytes().peak / 1024;
}

const Item = struct {
    id: u32,
    name: []const u8,
    category: []const u8,
    price: u32,
    quantity: u32,
    active: bool,
    tags: []const []const u8,
    rating: struct { score: u32, count: u32 },
};

const prose = [_][]const u8{
    "built",     "for",    "daily",  "use",      "with",     "a",        "durable",  "finish",  "and",
    "quiet",     "motor",  "that",   "runs",     "cool",     "under",    "load",     "the",     "kit",
    "includes",  "spare",  "parts",  "manual",   "two-year", "warranty", "ships",    "in",      "recycled",
    "packaging", "fits",   "most",   "standard", "mounts",   "easy",     "to",       "clean",   "light",
    "enough",    "carry",  "strong", "last",     "years",    "of",       "heavy",    "work",    "customers",
    "say",       "it",     "is",     "worth",    "every",    "penny",    "compared", "older",   "models",
    "new",       "design", "cuts",   "noise",    "by",       "half",     "while",    "keeping", "power",
};

/// A product listing as a server renders it: a head with CSS, one card per item (the
/// dataset's 50 items again and again, with prices, stock and prose varied by a fixed
/// seed), and a script.
fn productPage(arena: std.mem.Allocator, dataset: []const u8) ![]u8 {
    const items = try std.json.parseFromSliceLeaky([]Item, arena, dataset, .{});
    var prng: std.Random.DefaultPrng = .init(0x5a6e72);
    const random = prng.random();
    var page: std.Io.Writer.Allocating = .init(arena);
    const w = &page.writer;
    try w.writeAll("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Shop: all products</title>\n<style>\n");
    for ([_][]const u8{ "card", "price", "stock", "tags", "rating", "title", "body", "footer" }) |class| {
        try w.print(".{s} {{ margin: 0 0 {d}px 0; padding: {d}px {d}px; font: {d}px/1.4 system-ui, sans-serif; color: #{x:0>6}; }}\n", .{
            class, random.uintLessThan(u8, 24), random.uintLessThan(u8, 16), random.uintLessThan(u8, 16), 12 + random.uintLessThan(u8, 8), random.int(u24),
        });
        try w.print(".{s}:hover {{ background: #{x:0>6}; border-radius: {d}px; }}\n", .{ class, random.int(u24), random.uintLessThan(u8, 8) });
    }
    try w.writeAll("</style>\n</head>\n<body>\n<main class=\"grid\">\n");
    var n: usize = 0;
    while (page.written().len < page_bytes_min) : (n += 1) {
        const item = items[n % items.len];
        try w.print("<article class=\"card\" id=\"p{d}\" data-category=\"{s}\">\n  <h2 class=\"title\"><a href=\"/products/{d}\">{s}</a></h2>\n", .{ n + 1, item.category, n + 1, item.name });
        try w.print("  <p class=\"price\">${d}.{d:0>2}</p>\n  <p class=\"stock\">{d} in stock</p>\n", .{ item.price + random.uintLessThan(u32, 100), random.uintLessThan(u32, 100), random.uintLessThan(u32, 500) });
        try w.writeAll("  <ul class=\"tags\">");
        for (item.tags) |tag| try w.print("<li>{s}</li>", .{tag});
        try w.print("</ul>\n  <p class=\"rating\">{d}.{d} of 5 ({d} reviews)</p>\n  <p class=\"body\">", .{ item.rating.score / 10, item.rating.score % 10, item.rating.count + random.uintLessThan(u32, 50) });
        const words = 20 + random.uintLessThan(usize, 40);
        for (0..words) |k| {
            if (k > 0) try w.writeByte(' ');
            try w.writeAll(prose[random.uintLessThan(usize, prose.len)]);
        }
        try w.writeAll(".</p>\n</article>\n");
    }
    try w.writeAll("</main>\n<script>\ndocument.querySelectorAll('.card').forEach((card) => {\n  card.addEventListener('click', () => { location.href = card.querySelector('a').href; });\n});\n</script>\n</body>\n</html>\n");
    return page.written();
}
