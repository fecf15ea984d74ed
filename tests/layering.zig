//! The layering rules of `docs/architecture.md`, checked by reading the sources under `src/`:
//!
//! 1. No protocol file imports an engine file, and no engine file imports a protocol file.
//! 2. No import cycle contains both an engine file and a protocol file.
//! 3. The next-action loop (a `switch` with a `.send_file =>` arm over a connection's next
//!    action) exists once outside tests: in `engine/driver.zig`.
//! 4. `Config.zig` imports nothing from the engines or the protocols.
//! 5. Protocol files make no syscalls, no futex calls and read no clock: no call through
//!    `linux.` or `posix.`, no `Futex`, no `Io.Clock`, `std.time` or `clock_gettime` (the
//!    time is the worker's, passed in). Outside `test` blocks.
//!
//! Engine files: `engine.zig` and `engine/`. Protocol files: `http1.zig`, `http2.zig`,
//! `websocket.zig` and their folders. Imports made only by tests (inside `test` blocks, or by
//! files named `*_test.zig` or under `testing/`) are not part of the layering.
const std = @import("std");
const testing = std.testing;
const build_options = @import("build_options");
const saker = @import("saker");

const Layer = enum { engine, protocol, other };

fn layerOf(path: []const u8) Layer {
    if (std.mem.eql(u8, path, "engine.zig") or std.mem.startsWith(u8, path, "engine/")) return .engine;
    for ([_][]const u8{ "http1", "http2", "websocket" }) |name| {
        if (std.mem.startsWith(u8, path, name) and
            (std.mem.eql(u8, path[name.len..], ".zig") or path[name.len] == '/')) return .protocol;
    }
    return .other;
}

fn testOnly(path: []const u8) bool {
    return std.mem.endsWith(u8, path, "_test.zig") or std.mem.startsWith(u8, path, "testing/");
}

const Source = struct { path: []const u8, text: []const u8 };

/// The import graph of `sources`: `edges[i]` lists the indexes `sources[i]` imports.
const Graph = struct {
    edges: [][]u32,

    fn deinit(graph: Graph, gpa: std.mem.Allocator) void {
        for (graph.edges) |e| gpa.free(e);
        gpa.free(graph.edges);
    }
};

fn buildGraph(gpa: std.mem.Allocator, sources: []const Source) !Graph {
    const edges = try gpa.alloc([]u32, sources.len);
    for (edges) |*e| e.* = &.{};
    errdefer {
        for (edges) |e| gpa.free(e);
        gpa.free(edges);
    }
    for (sources, edges) |source, *out| {
        var list: std.ArrayList(u32) = .empty;
        defer list.deinit(gpa);
        if (!testOnly(source.path)) {
            var imports: ImportIterator = .init(source.text);
            while (imports.next()) |target| {
                var resolved_buffer: [256]u8 = undefined;
                const resolved = resolve(&resolved_buffer, source.path, target) orelse continue;
                for (sources, 0..) |candidate, j| {
                    if (std.mem.eql(u8, candidate.path, resolved)) try list.append(gpa, @intCast(j));
                }
            }
        }
        out.* = try list.toOwnedSlice(gpa);
    }
    return .{ .edges = edges };
}

/// The `.zig` files a source imports, outside `test` blocks.
const ImportIterator = struct {
    lines: CodeLines,

    fn init(text: []const u8) ImportIterator {
        return .{ .lines = .{ .text = text } };
    }

    fn next(it: *ImportIterator) ?[]const u8 {
        while (it.lines.next()) |line| {
            const marker = "@import(\"";
            const at = std.mem.find(u8, line.text, marker) orelse continue;
            const name_start = at + marker.len;
            const name_end = std.mem.findScalarPos(u8, line.text, name_start, '"') orelse continue;
            const name = line.text[name_start..name_end];
            if (std.mem.endsWith(u8, name, ".zig")) return name;
        }
        return null;
    }
};

/// `target` as imported from `from`, relative to `src/`; null when it leaves `src/`.
fn resolve(buffer: []u8, from: []const u8, target: []const u8) ?[]const u8 {
    var parts: [32][]const u8 = undefined;
    var count: usize = 0;
    var from_parts = std.mem.splitScalar(u8, from, '/');
    while (from_parts.next()) |part| {
        parts[count] = part;
        count += 1;
    }
    count -= 1; // the importing file's own name
    var target_parts = std.mem.splitScalar(u8, target, '/');
    while (target_parts.next()) |part| {
        if (std.mem.eql(u8, part, "..")) {
            if (count == 0) return null;
            count -= 1;
        } else if (!std.mem.eql(u8, part, ".")) {
            parts[count] = part;
            count += 1;
        }
    }
    var writer: std.Io.Writer = .fixed(buffer);
    for (parts[0..count], 0..) |part, i| {
        if (i > 0) writer.writeByte('/') catch return null;
        writer.writeAll(part) catch return null;
    }
    return writer.buffered();
}

/// Appends one line per broken rule to `problems`.
fn check(gpa: std.mem.Allocator, sources: []const Source, problems: *std.ArrayList(u8)) !void {
    const graph = try buildGraph(gpa, sources);
    defer graph.deinit(gpa);
    // Rule 1: direct imports between the engine and protocol layers.
    for (sources, graph.edges) |source, edges| {
        for (edges) |j| {
            const from = layerOf(source.path);
            const to = layerOf(sources[j].path);
            if ((from == .engine and to == .protocol) or (from == .protocol and to == .engine)) {
                try problems.print(gpa, "{s} imports {s} (engine and protocol files must not import each other)\n", .{ source.path, sources[j].path });
            }
        }
    }
    // Rule 2: strongly connected components holding both layers (Tarjan).
    var tarjan: Tarjan = try .init(gpa, graph);
    defer tarjan.deinit(gpa);
    for (0..sources.len) |v| {
        if (tarjan.index[v] == Tarjan.unvisited) try tarjan.visit(gpa, @intCast(v));
    }
    for (tarjan.components.items) |component| {
        var engine_file: ?[]const u8 = null;
        var protocol_file: ?[]const u8 = null;
        for (component) |v| switch (layerOf(sources[v].path)) {
            .engine => engine_file = sources[v].path,
            .protocol => protocol_file = sources[v].path,
            .other => {},
        };
        if (engine_file != null and protocol_file != null) {
            try problems.print(gpa, "an import cycle of {d} files joins {s} and {s}\n", .{ component.len, engine_file.?, protocol_file.? });
        }
    }
    // Rule 3: the next-action loop, once. (A transport maps the protocol's action to its own,
    // e.g. a file body to file bytes to encrypt; it carries nothing out.)
    for (sources) |source| {
        if (testOnly(source.path) or std.mem.startsWith(u8, source.path, "transport/")) continue;
        if (std.mem.find(u8, source.text, ".send_file =>") != null and !std.mem.eql(u8, source.path, "engine/driver.zig")) {
            try problems.print(gpa, "{s} interprets a connection's next action (only engine/driver.zig may)\n", .{source.path});
        }
    }
    // Rule 5: protocol files make no syscalls and read no clock.
    for (sources) |source| {
        if (testOnly(source.path) or layerOf(source.path) != .protocol) continue;
        var lines: CodeLines = .{ .text = source.text };
        while (lines.next()) |line| {
            if (systemCall(line.text)) |call| {
                try problems.print(gpa, "{s}:{d}: `{s}` (protocol files make no syscalls and read no clock)\n", .{ source.path, line.number, call });
            }
        }
    }
    // Rule 4: Config imports no engine or protocol file.
    for (sources, graph.edges) |source, edges| {
        if (!std.mem.eql(u8, source.path, "Config.zig")) continue;
        for (edges) |j| if (layerOf(sources[j].path) != .other) {
            try problems.print(gpa, "Config.zig imports {s}\n", .{sources[j].path});
        };
    }
}

/// The lines of a source outside top-level `test` blocks, without `//` comments.
const CodeLines = struct {
    text: []const u8,
    pos: usize = 0,
    number: u32 = 0,
    in_test: bool = false,

    const Line = struct { text: []const u8, number: u32 };

    fn next(it: *CodeLines) ?Line {
        while (it.pos < it.text.len) {
            const line_end = std.mem.findScalarPos(u8, it.text, it.pos, '\n') orelse it.text.len;
            const line = it.text[it.pos..line_end];
            it.pos = line_end + 1;
            it.number += 1;
            if (it.in_test) {
                if (std.mem.startsWith(u8, line, "}")) it.in_test = false;
                continue;
            }
            if (std.mem.startsWith(u8, line, "test ") or std.mem.startsWith(u8, line, "test{")) {
                it.in_test = !std.mem.endsWith(u8, line, "}");
                continue;
            }
            const code = if (std.mem.find(u8, line, "//")) |at| line[0..at] else line;
            return .{ .text = code, .number = it.number };
        }
        return null;
    }
};

/// The first syscall, futex call or clock read in a line of code, if any: a call through
/// `linux.` or `posix.` (`posix.fd_t` and other types are not calls), or a name that reads
/// the time or waits on a futex.
fn systemCall(line: []const u8) ?[]const u8 {
    for ([_][]const u8{ "Futex", "Io.Clock", "std.time.Instant", "std.time.Timer", "clock_gettime", "nanoTimestamp", "milliTimestamp" }) |name| {
        if (std.mem.find(u8, line, name)) |at| return line[at..][0..name.len];
    }
    for ([_][]const u8{ "linux.", "posix." }) |prefix| {
        var from: usize = 0;
        while (std.mem.findPos(u8, line, from, prefix)) |at| {
            from = at + prefix.len;
            var end = from;
            while (end < line.len and (std.ascii.isAlphanumeric(line[end]) or line[end] == '_')) end += 1;
            if (end < line.len and line[end] == '(') return line[at .. end + 1];
        }
    }
    return null;
}

const Tarjan = struct {
    graph: Graph,
    index: []u32,
    low: []u32,
    on_stack: []bool,
    stack: std.ArrayList(u32) = .empty,
    next_index: u32 = 0,
    components: std.ArrayList([]u32) = .empty,

    const unvisited = std.math.maxInt(u32);

    fn init(gpa: std.mem.Allocator, graph: Graph) !Tarjan {
        const n = graph.edges.len;
        const index = try gpa.alloc(u32, n);
        @memset(index, unvisited);
        const low = try gpa.alloc(u32, n);
        const on_stack = try gpa.alloc(bool, n);
        @memset(on_stack, false);
        return .{ .graph = graph, .index = index, .low = low, .on_stack = on_stack };
    }

    fn deinit(t: *Tarjan, gpa: std.mem.Allocator) void {
        for (t.components.items) |c| gpa.free(c);
        t.components.deinit(gpa);
        t.stack.deinit(gpa);
        gpa.free(t.index);
        gpa.free(t.low);
        gpa.free(t.on_stack);
    }

    // Recursion depth is bounded by the number of source files (a few hundred).
    fn visit(t: *Tarjan, gpa: std.mem.Allocator, v: u32) !void {
        t.index[v] = t.next_index;
        t.low[v] = t.next_index;
        t.next_index += 1;
        try t.stack.append(gpa, v);
        t.on_stack[v] = true;
        for (t.graph.edges[v]) |w| {
            if (t.index[w] == unvisited) {
                try t.visit(gpa, w);
                t.low[v] = @min(t.low[v], t.low[w]);
            } else if (t.on_stack[w]) {
                t.low[v] = @min(t.low[v], t.index[w]);
            }
        }
        if (t.low[v] != t.index[v]) return;
        var component: std.ArrayList(u32) = .empty;
        errdefer component.deinit(gpa);
        while (true) {
            const w = t.stack.pop().?;
            t.on_stack[w] = false;
            try component.append(gpa, w);
            if (w == v) break;
        }
        try t.components.append(gpa, try component.toOwnedSlice(gpa));
    }
};

test "layering: the sources keep the engine and protocol layers apart" {
    const gpa = testing.allocator;
    var arena_state: std.heap.ArenaAllocator = .init(gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();
    const src_dir = std.fs.path.dirname(build_options.src_root).?;
    var dir = try std.Io.Dir.cwd().openDir(testing.io, src_dir, .{ .iterate = true });
    defer dir.close(testing.io);
    var walker = try dir.walk(gpa);
    defer walker.deinit();
    var sources: std.ArrayList(Source) = .empty;
    while (try walker.next(testing.io)) |entry| {
        if (entry.kind != .file or !std.mem.endsWith(u8, entry.path, ".zig")) continue;
        const text = try dir.readFileAlloc(testing.io, entry.path, arena, .limited(1 << 22));
        try sources.append(arena, .{ .path = try arena.dupe(u8, entry.path), .text = text });
    }
    // The rules must have something to look at.
    try testing.expect(sources.items.len > 50);
    var problems: std.ArrayList(u8) = .empty;
    defer problems.deinit(gpa);
    try check(gpa, sources.items, &problems);
    if (problems.items.len > 0) {
        std.debug.print("layering rules broken:\n{s}", .{problems.items});
        return error.LayeringBroken;
    }
}

test "layering: each rule catches its breach" {
    const gpa = testing.allocator;
    const cases = [_]struct { sources: []const Source, expect: []const u8 }{
        .{
            .sources = &.{
                .{ .path = "engine/Epoll.zig", .text = "const h = @import(\"../http1/RequestParser.zig\");\n" },
                .{ .path = "http1/RequestParser.zig", .text = "" },
            },
            .expect = "engine/Epoll.zig imports http1/RequestParser.zig",
        },
        .{
            .sources = &.{
                .{ .path = "engine.zig", .text = "const a = @import(\"A.zig\");\n" },
                .{ .path = "A.zig", .text = "const w = @import(\"websocket.zig\");\n" },
                .{ .path = "websocket.zig", .text = "const e = @import(\"B.zig\");\n" },
                .{ .path = "B.zig", .text = "const e = @import(\"engine.zig\");\n" },
            },
            .expect = "an import cycle of 4 files joins",
        },
        .{
            .sources = &.{.{ .path = "engine/IoUring.zig", .text = "switch (c.next()) {\n    .send_file => |f| {},\n}\n" }},
            .expect = "engine/IoUring.zig interprets a connection's next action",
        },
        .{
            .sources = &.{
                .{ .path = "Config.zig", .text = "const K = @import(\"engine.zig\").Kind;\n" },
                .{ .path = "engine.zig", .text = "" },
            },
            .expect = "Config.zig imports engine.zig",
        },
        .{
            .sources = &.{.{ .path = "http1/Session.zig", .text = "const fd: posix.fd_t = 3;\nfn f() void {\n    _ = std.os.linux.close(fd);\n}\n" }},
            .expect = "http1/Session.zig:3: `linux.close(`",
        },
        .{
            .sources = &.{.{ .path = "websocket/Session.zig", .text = "const now = std.Io.Clock.awake.now(io);\n" }},
            .expect = "websocket/Session.zig:1: `Io.Clock`",
        },
    };
    for (cases) |case| {
        var problems: std.ArrayList(u8) = .empty;
        defer problems.deinit(gpa);
        try check(gpa, case.sources, &problems);
        if (std.mem.find(u8, problems.items, case.expect) == null) {
            std.debug.print("expected \"{s}\", got:\n{s}\n", .{ case.expect, problems.items });
            return error.RuleMissed;
        }
    }
    // Imports inside test blocks and from test files do not count.
    var problems: std.ArrayList(u8) = .empty;
    defer problems.deinit(gpa);
    try check(gpa, &.{
        .{ .path = "engine/driver.zig", .text = "const c = @import(\"../Connection.zig\");\ntest {\n    _ = @import(\"../http1/x.zig\");\n}\n" },
        .{ .path = "Connection.zig", .text = "const d = @import(\"engine/driver.zig\");\n" },
        .{ .path = "testing/Sim.zig", .text = "const d = @import(\"../websocket.zig\");\nswitch (x) { .send_file => {} }\n" },
        .{ .path = "http1/x.zig", .text = "const v: posix.iovec_const = undefined; // posix.write(\ntest {\n    _ = linux.close(3);\n}\n" },
        .{ .path = "websocket.zig", .text = "const t = @import(\"testing/Sim.zig\");\n" },
    }, &problems);
    try testing.expectEqualStrings("", problems.items);
}

test "version: saker.version is build.zig.zon's .version (the CHANGELOG's release number)" {
    var buffer: [4096]u8 = undefined;
    const zon = try std.Io.Dir.cwd().readFile(testing.io, build_options.build_zon, &buffer);
    const marker = ".version = \"";
    const start = (std.mem.find(u8, zon, marker) orelse return error.NoVersion) + marker.len;
    const end = std.mem.findScalarPos(u8, zon, start, '"') orelse return error.NoVersion;
    try testing.expectEqualStrings(zon[start..end], saker.version);
}
