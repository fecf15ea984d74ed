//! saker's build.
//!   ./zigw build                      the `saker` CLI and every example into zig-out/bin
//!   ./zigw build run -- serve DIR     run the `saker` CLI (serve DIR on 127.0.0.1:8080)
//!   ./zigw build run-NAME [-- ARGS]   run examples/NAME.zig
//!   ./zigw build test                 unit and integration tests
//!   ./zigw build bench                micro-benchmarks (always ReleaseFast)
//!   ./zigw build bench-compress       every compression level's ratio and speed (ReleaseFast)
//!   ./zigw build docs                 API docs into zig-out/docs
//! -Doptimize=debug|safe|fast|small is honoured by everything but `bench`.
const std = @import("std");

const examples = [_][]const u8{ "hello", "counter", "echo", "router", "arena", "ws-echo", "ws-chat", "grpc-echo" };

/// Files under tests/compile_errors/ that must not compile, and what the error must say.
const compile_errors = [_]struct { file: []const u8, message: []const u8 }{
    .{ .file = "route_conflict.zig", .message = "saker.Router: routes conflict: GET \"/a/:x\" and GET \"/a/:y\" match the same paths" },
    .{ .file = "route_conflict_group.zig", .message = "saker.Router: routes conflict: POST \"/api/items\" and POST \"/api/items\"" },
    .{ .file = "pattern_no_slash.zig", .message = "saker.Router: pattern \"users\": must start with '/'" },
    .{ .file = "pattern_wildcard_not_last.zig", .message = "a '*' wildcard must be the last segment" },
    .{ .file = "pattern_bad_static.zig", .message = "static segments hold only unreserved characters and sub-delims" },
    .{ .file = "group_prefix_slash.zig", .message = "group prefix \"/api/\" must start with '/' and not end with one" },
    .{ .file = "route_handler_signature.zig", .message = "the handler of \"/\" must be `fn (req: *saker.Request, res: *saker.Response) !void` (2 or 3 parameters)" },
    .{ .file = "route_handler_context.zig", .message = "(the router has no context)" },
    .{ .file = "middleware_without_handle.zig", .message = "must declare `pub fn handle(req: *saker.Request, res: *saker.Response, next: anytype) !void`" },
    .{ .file = "body_reader_route_type.zig", .message = "reads its body with req.bodyReader(), so its handler must be a function" },
    .{ .file = "server_missing_handle.zig", .message = "server_missing_handle.App must declare `pub fn handle(self: *server_missing_handle.App, req: *saker.Request, res: *saker.Response) !void`" },
    .{ .file = "server_handle_arity.zig", .message = "wrong signature for server_handle_arity.App.handle: expected `pub fn handle(self: *server_handle_arity.App, req: *saker.Request, res: *saker.Response) !void` (it must take 3 parameters)" },
    .{ .file = "server_handle_response_type.zig", .message = "(the third parameter must be *saker.Response)" },
    .{ .file = "server_handle_return.zig", .message = "(it must return void or !void)" },
    .{ .file = "server_on_body_without_on_head.zig", .message = "declares onBody but no `pub fn onHead(...) !saker.BodyAction`" },
    .{ .file = "server_on_done_signature.zig", .message = "wrong signature for server_on_done_signature.App.onDone: expected `pub fn onDone(self: *server_on_done_signature.App, done: *const saker.Done) void`" },
    .{ .file = "server_may_block_signature.zig", .message = "wrong signature for server_may_block_signature.App.mayBlock: expected `pub fn mayBlock(self: *const server_may_block_signature.App, req: *const saker.Request) bool`" },
    .{ .file = "server_wants_may_block_without_may_block.zig", .message = "server_wants_may_block_without_may_block.App declares wantsMayBlock but no `pub fn mayBlock(...)` for it to turn off" },
    .{ .file = "server_accepts_and_decodes.zig", .message = "server_accepts_and_decodes.App declares both accepts_content_encoding (it decodes request bodies itself) and decodes_content_encoding (the server decodes them for it): keep one" },
};

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const test_filters = b.option([]const []const u8, "test-filter", "Run only tests whose name contains this") orelse &.{};

    const saker = b.addModule("saker", .{
        .root_source_file = b.path("src/root.zig"),
        .target = target,
        .optimize = optimize,
        .link_libc = true, // OpenSSL needs it
    });
    const openssl_lib_dir = b.option([]const u8, "openssl-lib-dir", "Folder holding libssl.so.3 and libcrypto.so.3 (default: searched)");
    linkOpenSsl(b, saker, openssl_lib_dir);
    const compress_lib_dir = b.option([]const u8, "compress-lib-dir", "Folder holding libzstd.so.1, libbrotlienc.so.1, libbrotlidec.so.1 and libz.so.1 (default: searched)");
    const compress_libraries = findCompressionLibraries(b, compress_lib_dir);
    linkCompression(saker, compress_libraries);

    const cli = b.addExecutable(.{
        .name = "saker",
        .root_module = b.createModule(.{
            .root_source_file = b.path("src/main.zig"),
            .target = target,
            .optimize = optimize,
            .imports = &.{.{ .name = "saker", .module = saker }},
        }),
    });
    b.installArtifact(cli);
    const run_cli = b.addRunArtifact(cli);
    run_cli.addPassthruArgs();
    // `build run` leaves `zig-out/bin/saker` behind (the README's next commands use it), and
    // only that: not the examples.
    run_cli.step.dependOn(&b.addInstallArtifact(cli, .{}).step);
    b.step("run", "Run the saker CLI: ./zigw build run -- serve DIR").dependOn(&run_cli.step);
    b.step("run-saker", "Run the saker CLI (same as run)").dependOn(&run_cli.step);

    var example_exes: [examples.len]*std.Build.Step.Compile = undefined;
    for (examples, &example_exes) |name, *exe| {
        exe.* = b.addExecutable(.{
            .name = name,
            .root_module = b.createModule(.{
                .root_source_file = b.path(b.fmt("examples/{s}.zig", .{name})),
                .target = target,
                .optimize = optimize,
                .imports = &.{.{ .name = "saker", .module = saker }},
            }),
        });
        b.installArtifact(exe.*);
        const run = b.addRunArtifact(exe.*);
        run.addPassthruArgs();
        b.step(b.fmt("run-{s}", .{name}), b.fmt("Run examples/{s}.zig", .{name})).dependOn(&run.step);
    }

    // Tests: unit tests beside the code, and the integration suite over real sockets.
    const test_step = b.step("test", "Run unit and integration tests");
    // The server bench/h2-settings/run builds for itself: compiled with the tests too, so that
    // it keeps up with the library between the runs of that benchmark.
    const h2_settings_server = b.addExecutable(.{
        .name = "h2-settings-server",
        .root_module = b.createModule(.{
            .root_source_file = b.path("bench/h2-settings/server.zig"),
            .target = target,
            .optimize = optimize,
            .imports = &.{.{ .name = "saker", .module = saker }},
        }),
    });
    test_step.dependOn(&h2_settings_server.step);
    const saker_import: std.Build.Module.Import = .{ .name = "saker", .module = saker };
    // A test binary of its own for each suite, with the same target, mode and filters.
    const Suite = struct {
        b: *std.Build,
        target: std.Build.ResolvedTarget,
        optimize: std.builtin.OptimizeMode,
        filters: []const []const u8,

        fn add(suite: @This(), name: []const u8, path: []const u8, imports: []const std.Build.Module.Import) *std.Build.Step.Compile {
            return suite.b.addTest(.{
                .name = name,
                .root_module = suite.b.createModule(.{
                    .root_source_file = suite.b.path(path),
                    .target = suite.target,
                    .optimize = suite.optimize,
                    .imports = imports,
                }),
                .filters = suite.filters,
            });
        }
    };
    const suite: Suite = .{ .b = b, .target = target, .optimize = optimize, .filters = test_filters };
    const unit_tests = b.addTest(.{ .name = "unit", .root_module = saker, .filters = test_filters });
    const options = b.addOptions();
    for (examples, example_exes) |name, exe| {
        // "ws-echo" becomes the option `ws_echo_exe`.
        const option = b.fmt("{s}_exe", .{name});
        std.mem.replaceScalar(u8, option, '-', '_');
        options.addOptionPath(option, exe.getEmittedBin());
    }
    options.addOptionPath("saker_exe", cli.getEmittedBin());
    const integration_tests = suite.add("integration", "tests/integration.zig", &.{ saker_import, .{ .name = "build_options", .module = options.createModule() } });
    // The router and its examples over real sockets; the examples are imported as modules.
    const fixtures = b.addOptions();
    fixtures.addOptionPath("dataset", b.path("tests/data/httparena-dataset.json"));
    options.addOptionPath("autobahn_script", b.path("tests/autobahn/run"));
    const router_tests = b.addTest(.{
        .name = "integration-router",
        .root_module = b.createModule(.{
            .root_source_file = b.path("tests/router.zig"),
            .target = target,
            .optimize = optimize,
            .imports = &.{
                .{ .name = "saker", .module = saker },
                .{ .name = "fixtures", .module = fixtures.createModule() },
                .{ .name = "arena_example", .module = b.createModule(.{
                    .root_source_file = b.path("examples/arena.zig"),
                    .imports = &.{.{ .name = "saker", .module = saker }},
                }) },
                .{ .name = "router_example", .module = b.createModule(.{
                    .root_source_file = b.path("examples/router.zig"),
                    .imports = &.{.{ .name = "saker", .module = saker }},
                }) },
            },
        }),
        .filters = test_filters,
    });
    // The micro-benchmarks' input and output checked once (correctness, never timing).
    const bench_tests = suite.add("bench-micro", "bench/micro.zig", &.{saker_import});
    const bench_router_tests = suite.add("bench-router", "bench/router.zig", &.{saker_import});
    const bench_queue_tests = suite.add("bench-queue", "bench/queue.zig", &.{saker_import});
    const hardening_tests = suite.add("hardening", "tests/hardening.zig", &.{ saker_import, .{ .name = "build_options", .module = options.createModule() } });
    const tls_tests = suite.add("tls", "tests/tls.zig", &.{ saker_import, .{ .name = "build_options", .module = options.createModule() } });
    const http2_tests = suite.add("http2", "tests/http2.zig", &.{ saker_import, .{ .name = "build_options", .module = options.createModule() } });
    // The layering rules (docs/architecture.md), checked by reading the sources.
    const layering_options = b.addOptions();
    layering_options.addOptionPath("src_root", b.path("src/root.zig"));
    layering_options.addOptionPath("build_zon", b.path("build.zig.zon"));
    const layering_tests = b.addTest(.{
        .name = "layering",
        .root_module = b.createModule(.{
            .root_source_file = b.path("tests/layering.zig"),
            .target = target,
            .optimize = optimize,
            .imports = &.{
                .{ .name = "build_options", .module = layering_options.createModule() },
                .{ .name = "saker", .module = saker },
            },
        }),
        .filters = test_filters,
    });
    // The real clients the tests use, installed from Debian's packages when missing, so
    // `zig build test` is the only set-up a fresh machine needs.
    const test_tools = b.addSystemCommand(&.{"tests/tools"});
    test_tools.setName("install test tools");
    test_tools.has_side_effects = true;
    // `-Dtest-transport=tls` (or plaintext, h2c) runs the suites over that transport alone,
    // for working on one of them; by default every run below happens.
    const TestTransport = enum { all, plaintext, tls, h2c };
    const test_transport = b.option(TestTransport, "test-transport", "Run the suites over one transport only") orelse .all;
    for ([_]*std.Build.Step.Compile{ unit_tests, integration_tests, router_tests, hardening_tests, tls_tests, http2_tests, bench_tests, bench_router_tests, bench_queue_tests, layering_tests }) |t| {
        if (test_transport != .all and test_transport != .plaintext) break;
        const run = b.addRunArtifact(t);
        run.has_side_effects = true; // always run, so the summary counts every test
        run.step.dependOn(&test_tools.step);
        test_step.dependOn(&run.step);
    }
    // The integration suites again over other transports (tests/Client.zig): over TLS every
    // server they start serves HTTPS and their clients speak TLS (`overTls`); over h2c the
    // suites of what handlers see carry each request as an HTTP/2 stream (tests/H2c.zig;
    // tests of HTTP/1.1's own framing skip, `http1Only`).
    const Leg = struct { transport: TestTransport, name: []const u8, suites: []const *std.Build.Step.Compile };
    const legs = [_]Leg{
        .{ .transport = .tls, .name = "TLS", .suites = &.{ integration_tests, router_tests, hardening_tests } },
        .{ .transport = .h2c, .name = "h2c", .suites = &.{ integration_tests, router_tests } },
    };
    for (legs) |leg| {
        if (test_transport != .all and test_transport != leg.transport) continue;
        for (leg.suites) |t| {
            const run = b.addRunArtifact(t);
            run.setName(b.fmt("run test {s} over {s}", .{ t.name, leg.name }));
            run.setEnvironmentVariable("SAKER_TEST_TRANSPORT", @tagName(leg.transport));
            run.has_side_effects = true;
            run.step.dependOn(&test_tools.step);
            test_step.dependOn(&run.step);
        }
    }
    // Compile errors: each file must fail to build, with its message. These are build steps,
    // not test-runner tests: they show as steps in the summary, and a failure fails the build.
    const compile_error_step = b.step("test-compile-errors", "Check that tests/compile_errors/ fail with their messages");
    for (compile_errors) |case| {
        const check = b.addSystemCommand(&.{ b.graph.zig_exe, "build-obj", "-fno-emit-bin", "--dep", "saker" });
        check.setName(b.fmt("compile error {s}", .{case.file}));
        check.addPrefixedFileArg("-Mroot=", b.path(b.fmt("tests/compile_errors/{s}", .{case.file})));
        check.addPrefixedFileArg("-Msaker=", b.path("src/root.zig"));
        check.expectExitCode(1);
        check.expectStdErrMatch(case.message);
        check.has_side_effects = true; // the message depends on every source file of saker
        compile_error_step.dependOn(&check.step);
    }
    if (test_transport == .all or test_transport == .plaintext) test_step.dependOn(compile_error_step);

    // Fuzzing: the fuzz targets alone, built for speed. `./zigw build fuzz --fuzz=1M`
    // fuzzes; without --fuzz it replays the corpus. `-Dtest-filter` picks targets.
    const fuzz_module = b.createModule(.{
        .root_source_file = b.path("src/root.zig"),
        .target = target,
        .optimize = .ReleaseFast,
        .link_libc = true, // the connection targets reach the TLS transport, so OpenSSL
    });
    linkOpenSsl(b, fuzz_module, openssl_lib_dir);
    linkCompression(fuzz_module, compress_libraries);
    const fuzz_tests = b.addTest(.{
        .name = "fuzz",
        .root_module = fuzz_module,
        .filters = if (test_filters.len > 0) test_filters else &.{"fuzz:"},
    });
    const fuzz_run = b.addRunArtifact(fuzz_tests);
    fuzz_run.has_side_effects = true;
    b.step("fuzz", "Run the fuzz targets (add --fuzz=N to fuzz)").dependOn(&fuzz_run.step);

    // Micro-benchmarks: their own module graph, pinned to ReleaseFast.
    const saker_fast = b.createModule(.{
        .root_source_file = b.path("src/root.zig"),
        .target = target,
        .optimize = .ReleaseFast,
        .link_libc = true, // OpenSSL needs it
    });
    // The benchmarks reference saker's TLS and compression, which link these libraries.
    linkOpenSsl(b, saker_fast, openssl_lib_dir);
    linkCompression(saker_fast, compress_libraries);
    const bench_exe = b.addExecutable(.{
        .name = "bench-micro",
        .root_module = b.createModule(.{
            .root_source_file = b.path("bench/micro.zig"),
            .target = target,
            .optimize = .ReleaseFast,
            .imports = &.{.{ .name = "saker", .module = saker_fast }},
        }),
    });
    const bench_run = b.addRunArtifact(bench_exe);
    bench_run.addPassthruArgs();
    const bench_step = b.step("bench", "Run the micro-benchmarks (ReleaseFast)");
    bench_step.dependOn(&bench_run.step);
    const bench_router_exe = b.addExecutable(.{
        .name = "bench-router",
        .root_module = b.createModule(.{
            .root_source_file = b.path("bench/router.zig"),
            .target = target,
            .optimize = .ReleaseFast,
            .imports = &.{.{ .name = "saker", .module = saker_fast }},
        }),
    });
    const bench_router_run = b.addRunArtifact(bench_router_exe);
    bench_router_run.addPassthruArgs();
    bench_router_run.step.dependOn(&bench_run.step); // one benchmark at a time
    bench_step.dependOn(&bench_router_run.step);
    // The worker_pool hand-off queue against a lock-free ring (threads; about 20 s).
    const bench_queue_exe = b.addExecutable(.{
        .name = "bench-queue",
        .root_module = b.createModule(.{
            .root_source_file = b.path("bench/queue.zig"),
            .target = target,
            .optimize = .ReleaseFast,
            .imports = &.{.{ .name = "saker", .module = saker_fast }},
        }),
    });
    const bench_queue_run = b.addRunArtifact(bench_queue_exe);
    bench_queue_run.addPassthruArgs();
    bench_queue_run.step.dependOn(&bench_router_run.step); // one benchmark at a time
    bench_step.dependOn(&bench_queue_run.step);
    const bench_queue_alone = b.addRunArtifact(bench_queue_exe);
    bench_queue_alone.addPassthruArgs();
    b.step("bench-queue", "Run the hand-off queue micro-benchmark alone (ReleaseFast)").dependOn(&bench_queue_alone.step);
    // Compression on the fly: every level of every coding (docs/compression.md). Not part of
    // `bench`: it takes minutes.
    const compress_fast = b.createModule(.{
        .root_source_file = b.path("src/compress.zig"),
        .target = target,
        .optimize = .ReleaseFast,
        .link_libc = true,
    });
    linkCompression(compress_fast, compress_libraries);
    const bench_compress_exe = b.addExecutable(.{
        .name = "bench-compress",
        .root_module = b.createModule(.{
            .root_source_file = b.path("bench/compress.zig"),
            .target = target,
            .optimize = .ReleaseFast,
            .imports = &.{.{ .name = "compress", .module = compress_fast }},
        }),
    });
    const bench_compress_run = b.addRunArtifact(bench_compress_exe);
    bench_compress_run.addFileArg(b.path("tests/data/httparena-dataset.json"));
    bench_compress_run.addPassthruArgs();
    bench_compress_run.has_side_effects = true;
    b.step("bench-compress", "Measure every compression level on JSON and HTML (ReleaseFast)").dependOn(&bench_compress_run.step);
    const bench_install = b.addInstallArtifact(bench_exe, .{});
    b.step("bench-install", "Build the micro-benchmark binary").dependOn(&bench_install.step);

    const docs_lib = b.addLibrary(.{ .name = "saker", .root_module = saker });
    const docs = b.addInstallDirectory(.{
        .source_dir = docs_lib.getEmittedDocs(),
        .install_dir = .prefix,
        .install_subdir = "docs",
    });
    b.step("docs", "Generate API docs into zig-out/docs").dependOn(&docs.step);
}

/// Where Debian (and most distributions) keep shared libraries; `serve` and
/// `install-libraries` search the same folders.
const library_folders = [_][]const u8{ "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64", "/lib" };

/// TLS uses OpenSSL 3, linked from its runtime libraries (`libssl.so.3`, `libcrypto.so.3`),
/// which every Debian with python3 has, so no `-dev` package is needed: saker declares the
/// functions it calls itself (src/tls/openssl.zig). `dir` overrides the search; without the
/// runtime libraries in the usual folders, the linker's own search (`-lssl -lcrypto`, which
/// needs the `-dev` symlinks) is the fallback. `serve` searches the same folders.
fn linkOpenSsl(b: *std.Build, module: *std.Build.Module, dir: ?[]const u8) void {
    const found: ?[]const u8 = dir orelse for (library_folders) |folder| {
        const path = b.pathJoin(&.{ folder, "libssl.so.3" });
        std.Io.Dir.cwd().access(b.graph.io, path, .{}) catch continue;
        break folder;
    } else null;
    if (found) |folder| {
        module.addObjectFile(.{ .cwd_relative = b.pathJoin(&.{ folder, "libssl.so.3" }) });
        module.addObjectFile(.{ .cwd_relative = b.pathJoin(&.{ folder, "libcrypto.so.3" }) });
    } else {
        module.linkSystemLibrary("ssl", .{});
        module.linkSystemLibrary("crypto", .{});
    }
}

/// A runtime library that compression on the fly links: its file, and its name for the
/// linker's own search.
const CompressionLibrary = struct { file: []const u8, name: []const u8 };
const compression_libraries = [_]CompressionLibrary{
    .{ .file = "libzstd.so.1", .name = "zstd" },
    .{ .file = "libbrotlienc.so.1", .name = "brotlienc" },
    .{ .file = "libbrotlidec.so.1", .name = "brotlidec" }, // the tests' brotli decoder
    .{ .file = "libz.so.1", .name = "z" },
};

/// Compression on the fly (src/compress/) links zstd's, brotli's and zlib's runtime libraries,
/// as TLS links OpenSSL's: saker declares the functions it calls (src/compress/c.zig), so no
/// `-dev` package is needed. Every Debian has libzstd1 and zlib1g (dpkg depends on them);
/// libbrotli1 is missing from one with only python3, so when a library is missing this runs
/// `install-libraries` (apt-get, saying what it installs) once, for saker's own build only,
/// not when saker is a dependency of another package. `dir` overrides the search. Returns
/// each library's path, or null to leave it to the linker's search (`-lbrotlienc`, which
/// needs the `-dev` symlinks).
fn findCompressionLibraries(b: *std.Build, dir: ?[]const u8) [compression_libraries.len]?[]const u8 {
    if (dir) |folder| {
        var paths: [compression_libraries.len]?[]const u8 = undefined;
        for (compression_libraries, &paths) |library, *path| path.* = b.pathJoin(&.{ folder, library.file });
        return paths;
    }
    var paths = searchLibraries(b);
    const missing = for (paths) |path| {
        if (path == null) break true;
    } else false;
    if (missing and b.pkg_hash.len == 0) {
        var code: u8 = 0;
        const script = b.root.joinString(b.allocator, "install-libraries") catch @panic("OOM");
        // It says what it installs, or what to install by hand; the linker then names what is missing.
        _ = b.runAllowFail(&.{script}, &code, .inherit) catch {};
        paths = searchLibraries(b);
    }
    return paths;
}

fn searchLibraries(b: *std.Build) [compression_libraries.len]?[]const u8 {
    var paths: [compression_libraries.len]?[]const u8 = @splat(null);
    for (compression_libraries, &paths) |library, *path| {
        for (library_folders) |folder| {
            const candidate = b.pathJoin(&.{ folder, library.file });
            std.Io.Dir.cwd().access(b.graph.io, candidate, .{}) catch continue;
            path.* = candidate;
            break;
        }
    }
    return paths;
}

fn linkCompression(module: *std.Build.Module, paths: [compression_libraries.len]?[]const u8) void {
    for (compression_libraries, paths) |library, found| {
        if (found) |path| {
            module.addObjectFile(.{ .cwd_relative = path });
        } else {
            module.linkSystemLibrary(library.name, .{});
        }
    }
}
