//! crescent's build.
//!
//!   zig build                 crescentd, crescentctl, crescent-bench, libcrescent (.a and .so), tools
//!   zig build test            build and run every C unit test (tests/unit/test_*.c)
//!   zig build bench           build the benchmarks (ReleaseFast) into zig-out/bench
//!   zig build asan            unit tests under ASan+UBSan, built by the system gcc
//!   zig build tsan            threaded tests (runtime, actors, host, client_verify, indexer_read, durable_diverged, durable_prefill) under TSan, system gcc
//!   zig build fuzz            libFuzzer targets (tests/fuzz/fuzz_*.c) with the system clang
//!
//! Sources are found by directory (see docs/conventions.md): adding a .c file to
//! src/<module>/ or a test to tests/unit/ needs no edit here.  Zig compiles the
//! normal builds; the sanitizer builds use gcc because this Zig links no TSan and
//! ships no ASan runtime, and they compile exactly the same source list.

const std = @import("std");

/// Warnings are errors everywhere.  gnu17 because glibc hides
/// pthread_setaffinity_np, eventfd and friends from strict C17.
const c_flags = [_][]const u8{
    "-std=gnu17",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_GNU_SOURCE",
    "-fno-omit-frame-pointer",
};

/// Debian packages the daemon links (installed by scripts/setup.sh).
const system_libs = [_][]const u8{
    "ck",       "zmq",     "msgpackc", "protobuf-c", "civetweb",
    "jansson",  "xxhash",  "pcre2-8",  "ibverbs",    "m",
    "pthread",  "http_parser", "nats",     "curl",
    "sodium", // keyed BLAKE2b for the data plane's capabilities (src/core/xfer_cap.c), base64 for etcd
};

/// Everything linked into crescentd and the tests, in link order of the
/// modules: the daemon's actors and front, then messages, then pure cores.
const server_dirs = [_][]const u8{ "src/daemon", "src/ha", "src/durable", "src/actors", "src/rpc", "src/mooncake", "src/runtime", "src/http", "src/rdma", "src/msgs", "src/tier", "src/core" };

/// The public client library: RPC client plus what it shares with the server:
/// the transfer layer (src/rdma, which Put/Get move bytes with), the log, the
/// data-plane capability codec the transfer layer's frames carry, the etcd
/// client that resolves an etcd:// endpoint's leader (src/ha/etcd*.c), and the
/// SSD tier (src/tier) an engine's hosted segment may offload to.
const client_dirs = [_][]const u8{"src/client"};
const client_shared_dirs = [_][]const u8{ "src/rdma", "src/tier" };
const client_shared_files = [_][]const u8{ "src/core/error.c", "src/core/log.c", "src/core/xfer_cap.c", "src/core/file_tier.c", "src/core/histogram.c", "src/ha/etcd.c", "src/ha/etcd_json.c" };

const Sources = struct {
    server: []const []const u8,
    client: []const []const u8,
    tests: []const []const u8,
    benches: []const []const u8,
    tools: []const []const u8,
    fuzzers: []const []const u8,
    protos: []const []const u8,
};

pub fn build(b: *std.Build) void {
    // x86-64-v3 (AVX2) by default rather than the build machine's exact CPU:
    // binaries run on any modern x86 host of a fleet, and valgrind (which
    // cannot decode AVX-512) can check them.  -Dcpu=native to opt in.
    const target = b.standardTargetOptions(.{ .default_target = defaultTarget() });
    // ReleaseSafe unless told otherwise: optimized, and undefined behaviour in
    // C still traps (Zig compiles C with UBSan in trap mode in safe modes).
    const optimize = b.option(std.builtin.OptimizeMode, "optimize", "Debug, ReleaseSafe (default), ReleaseFast or ReleaseSmall") orelse .ReleaseSafe;
    const sources = collectSources(b);

    const proto = generateProtos(b, sources.protos);

    const server = b.addStaticLibrary(.{ .name = "crescent_server", .target = target, .optimize = optimize });
    configureC(b, server, proto);
    server.addCSourceFiles(.{ .files = sources.server, .flags = &c_flags });
    addProtoSources(server, proto);
    if (proto) |p| server.addCSourceFile(.{ .file = .{ .cwd_relative = p.assets_c }, .flags = &c_flags });

    var shared = std.ArrayList([]const u8).init(b.allocator);
    shared.appendSlice(&client_shared_files) catch @panic("OOM");
    for (client_shared_dirs) |dir| listFiles(b, &shared, dir, "", ".c");
    const client_files = concat(b, sources.client, shared.items);
    const libcrescent = b.addStaticLibrary(.{ .name = "crescent", .target = target, .optimize = optimize });
    configureC(b, libcrescent, proto);
    libcrescent.addCSourceFiles(.{ .files = client_files, .flags = &c_flags });
    addProtoSources(libcrescent, proto);
    b.installArtifact(libcrescent);

    const libcrescent_so = b.addSharedLibrary(.{ .name = "crescent", .target = target, .optimize = optimize, .version = .{ .major = 0, .minor = 1, .patch = 0 } });
    configureC(b, libcrescent_so, proto);
    libcrescent_so.addCSourceFiles(.{ .files = client_files, .flags = &c_flags });
    addProtoSources(libcrescent_so, proto);
    b.installArtifact(libcrescent_so);
    b.installDirectory(.{ .source_dir = .{ .path = "include/crescent" }, .install_dir = .header, .install_subdir = "crescent" });
    installPkgConfig(b);

    // Programs: crescentd, crescentctl, crescent-bench and crescent-store
    // (src/cmd/crescent_store.c), plus the test tools the Python tests drive.
    const programs = [_][]const u8{ "src/cmd/crescentd.c", "src/cmd/crescentctl.c", "src/cmd/crescent-bench.c", "src/cmd/crescent_store.c" };
    for (programs ++ [_][]const u8{}) |main_file| {
        if (!fileExists(main_file)) continue;
        const exe = program(b, main_file, target, optimize, proto, server, libcrescent);
        b.installArtifact(exe);
    }
    for (sources.tools) |main_file| {
        const exe = program(b, main_file, target, optimize, proto, server, libcrescent);
        b.installArtifact(exe);
    }

    // Unit tests: one executable per file, run in sequence by `zig build test`.
    // Every test is installed before the first runs: the build runner copies
    // an install in process, and a test spawned meanwhile by another of its
    // threads could inherit the copy's open fd across its fork, so exec of
    // the file being installed failed with ETXTBSY ("FileBusy", seen in CI).
    const test_step = b.step("test", "Build and run the C unit tests");
    const tests_installed = b.step("tests-installed", "Build the C unit tests into zig-out/tests");
    var previous: ?*std.Build.Step = null;
    for (sources.tests) |test_file| {
        const exe = if (isLoopbackTest(test_file))
            loopbackTest(b, test_file, target, optimize, sources.server)
        else
            program(b, test_file, target, optimize, proto, server, libcrescent);
        exe.linkSystemLibrary("cmocka");
        const install = b.addInstallArtifact(exe, .{ .dest_dir = .{ .override = .{ .custom = "tests" } } });
        tests_installed.dependOn(&install.step);
        const run = b.addRunArtifact(exe);
        run.has_side_effects = true; // always run and show cmocka's summary
        run.step.dependOn(tests_installed);
        if (previous) |p| run.step.dependOn(p); // sequential: readable output, fair timings
        previous = &run.step;
        test_step.dependOn(&run.step);
    }

    // Benchmarks are always optimized: a Debug benchmark measures nothing useful.
    // One ReleaseFast library serves every benchmark (compiled once, not per bench).
    const bench_step = b.step("bench", "Build the benchmarks into zig-out/bench");
    const fast = b.addStaticLibrary(.{ .name = "crescent_fast", .target = target, .optimize = .ReleaseFast });
    configureC(b, fast, proto);
    fast.addCSourceFiles(.{ .files = concat(b, sources.server, sources.client), .flags = &c_flags });
    addProtoSources(fast, proto);
    for (sources.benches) |bench_file| {
        const exe = program(b, bench_file, target, .ReleaseFast, proto, fast, null);
        const install = b.addInstallArtifact(exe, .{ .dest_dir = .{ .override = .{ .custom = "bench" } } });
        bench_step.dependOn(&install.step);
    }

    addSanitizerSteps(b, sources, proto);
    addFuzzStep(b, sources, proto);
}

/// The libraries libcrescent.a itself needs (its undefined symbols: ZMQ,
/// protobuf-c, verbs, xxhash, curl, jansson, sodium, pthread), for `pkg-config --static --libs
/// crescent`; tests/integration/test_install.py links a program with them.
const client_libs_private = "-lzmq -lprotobuf-c -libverbs -lxxhash -lcurl -ljansson -lsodium -lpthread";

/// lib/pkgconfig/crescent.pc, naming the install prefix (`zig build install
/// --prefix P`), so a C program builds with `pkg-config --cflags --libs crescent`.
fn installPkgConfig(b: *std.Build) void {
    const pc = b.fmt(
        \\prefix={s}
        \\libdir=${{prefix}}/lib
        \\includedir=${{prefix}}/include
        \\
        \\Name: crescent
        \\Description: libcrescent, the client of crescentd's store master and transfers
        \\Version: 0.1.0
        \\Cflags: -I${{includedir}}
        \\Libs: -L${{libdir}} -lcrescent
        \\Libs.private: {s}
        \\
    , .{ b.install_prefix, client_libs_private });
    const files = b.addWriteFiles();
    const path = files.add("crescent.pc", pc);
    const install = b.addInstallFileWithDir(path, .lib, "pkgconfig/crescent.pc");
    b.getInstallStep().dependOn(&install.step);
}

/// libFuzzer needs clang (Debian's libclang-rt-14-dev); each target is built
/// with ASan+UBSan into zig-out/fuzz.  Running them is documented in
/// tests/fuzz/README.md.
fn addFuzzStep(b: *std.Build, sources: Sources, proto: ?Proto) void {
    const fuzz_step = b.step("fuzz", "Build the libFuzzer targets (system clang) into zig-out/fuzz");
    // Each target compiles every server and client source with ASan: building
    // all twenty takes many minutes, so -Dfuzzer=NAME builds just one.
    const only = b.option([]const u8, "fuzzer", "With the fuzz step: build only this target (e.g. fuzz_durable)");
    for (sources.fuzzers) |fuzzer| {
        if (only) |name| if (!std.mem.eql(u8, name, std.fs.path.stem(fuzzer))) continue;
        const cc = b.addSystemCommand(&.{"clang"});
        cc.addArgs(&c_flags);
        cc.addArgs(&.{ "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=undefined", "-Isrc", "-Iinclude" });
        if (proto) |p| {
            cc.addArg(b.fmt("-I{s}", .{p.dir}));
            cc.step.dependOn(p.step);
            for (p.c_files) |file| cc.addArg(file);
            cc.addArg(p.assets_c); // src/http/dashboard.c is linked in and needs it
        }
        for (concat(b, sources.server, sources.client)) |file| cc.addFileArg(.{ .path = file });
        cc.addFileArg(.{ .path = fuzzer });
        cc.addArg("-o");
        const exe = cc.addOutputFileArg(std.fs.path.stem(fuzzer));
        for (system_libs) |lib| cc.addArg(b.fmt("-l{s}", .{lib}));
        const install = b.addInstallFileWithDir(exe, .{ .custom = "fuzz" }, std.fs.path.stem(fuzzer));
        fuzz_step.dependOn(&install.step);
    }
}

fn defaultTarget() std.zig.CrossTarget {
    const builtin = @import("builtin");
    if (builtin.cpu.arch != .x86_64) return .{};
    return .{ .cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v3 } };
}

/// Include paths, libc and the Debian libraries every C artifact needs.
fn configureC(b: *std.Build, step: *std.Build.Step.Compile, proto: ?Proto) void {
    _ = b;
    step.linkLibC();
    step.addIncludePath(.{ .path = "src" });
    step.addIncludePath(.{ .path = "include" });
    if (proto) |p| {
        step.addIncludePath(.{ .cwd_relative = p.dir });
        step.step.dependOn(p.step);
    }
    for (system_libs) |lib| step.linkSystemLibrary(lib);
}

fn addProtoSources(step: *std.Build.Step.Compile, proto: ?Proto) void {
    const p = proto orelse return;
    for (p.c_files) |file| {
        step.addCSourceFile(.{ .file = .{ .cwd_relative = file }, .flags = &c_flags });
    }
}

/// A program is its main file plus, for src/cmd programs, any sibling
/// `<stem>_*.c` (crescentctl's command groups live in crescentctl_<group>.c).
fn program(
    b: *std.Build,
    main_file: []const u8,
    target: std.zig.CrossTarget,
    optimize: std.builtin.OptimizeMode,
    proto: ?Proto,
    server: ?*std.Build.Step.Compile,
    client: ?*std.Build.Step.Compile,
) *std.Build.Step.Compile {
    // src/cmd/crescent_store.c is the program crescent-store.
    const stem = std.fs.path.stem(main_file);
    const is_cmd = std.mem.eql(u8, std.fs.path.dirname(main_file) orelse ".", "src/cmd");
    const name = if (is_cmd) std.mem.replaceOwned(u8, b.allocator, stem, "_", "-") catch @panic("OOM") else stem;
    const exe = b.addExecutable(.{ .name = name, .target = target, .optimize = optimize });
    configureC(b, exe, proto);
    var files = std.ArrayList([]const u8).init(b.allocator);
    files.append(main_file) catch @panic("OOM");
    // Only src/cmd programs have sibling files (tests/unit/test_store.c and
    // test_store_event.c are two programs, not one).
    const dir = std.fs.path.dirname(main_file) orelse ".";
    if (std.mem.eql(u8, dir, "src/cmd"))
        listFiles(b, &files, dir, b.fmt("{s}_", .{std.fs.path.stem(main_file)}), ".c");
    exe.addCSourceFiles(.{ .files = files.items, .flags = &c_flags });
    if (server) |s| exe.linkLibrary(s);
    if (client) |c| exe.linkLibrary(c);
    return exe;
}

// ---------------------------------------------------------------------------
// The verbs loopback test: a test double of libibverbs instead of -libverbs

/// tests/unit/test_*_loopback.c runs the transfer layer's verbs code against
/// tests/unit/loopback_ibverbs.c, a TEST DOUBLE of libibverbs (see that
/// file), linked INSTEAD of -libverbs: the test binary is built from the
/// transfer layer's own sources (src/rdma, the log, the status texts and the
/// capability codec, with libsodium) and
/// never links libibverbs.  Nothing else ever links the double.
const loopback_double = "tests/unit/loopback_ibverbs.c";
const loopback_libs = [_][]const u8{ "m", "pthread", "sodium" };

fn isLoopbackTest(test_file: []const u8) bool {
    return std.mem.endsWith(u8, test_file, "_loopback.c");
}

fn isLoopbackSource(file: []const u8) bool {
    return std.mem.startsWith(u8, file, "src/rdma/") or std.mem.eql(u8, file, "src/core/error.c") or std.mem.eql(u8, file, "src/core/log.c") or std.mem.eql(u8, file, "src/core/xfer_cap.c");
}

fn loopbackTest(b: *std.Build, test_file: []const u8, target: std.zig.CrossTarget, optimize: std.builtin.OptimizeMode, server_files: []const []const u8) *std.Build.Step.Compile {
    const exe = b.addExecutable(.{ .name = std.fs.path.stem(test_file), .target = target, .optimize = optimize });
    exe.linkLibC();
    exe.addIncludePath(.{ .path = "src" });
    exe.addIncludePath(.{ .path = "include" });
    var files = std.ArrayList([]const u8).init(b.allocator);
    files.appendSlice(&.{ test_file, loopback_double }) catch @panic("OOM");
    for (server_files) |file| {
        if (isLoopbackSource(file)) files.append(file) catch @panic("OOM");
    }
    exe.addCSourceFiles(.{ .files = files.items, .flags = &c_flags });
    for (loopback_libs) |lib| exe.linkSystemLibrary(lib);
    return exe;
}

// ---------------------------------------------------------------------------
// protobuf-c code generation

const Proto = struct {
    dir: []const u8,
    c_files: []const []const u8,
    step: *std.Build.Step,
    assets_c: []const u8, // the dashboard's embedded files: crescentd only, not libcrescent
};

/// Runs protoc-c over proto/*.proto into the build cache.  The output goes to
/// a fixed cache folder (this Zig has no output-directory argument for Run
/// steps); the step always runs, and unchanged output keeps the C cache valid.
fn generateProtos(b: *std.Build, protos: []const []const u8) ?Proto {
    if (protos.len == 0) return null;
    const dir = b.cache_root.join(b.allocator, &.{"crescent-proto"}) catch @panic("OOM");
    const gen = b.addSystemCommand(&.{ "sh", "-c", "mkdir -p \"$0\" && exec protoc-c --proto_path=proto --c_out=\"$0\" \"$@\"", dir });
    gen.has_side_effects = true;
    var c_files = std.ArrayList([]const u8).init(b.allocator);
    for (protos) |proto_file| {
        gen.addArg(proto_file);
        const base = std.fs.path.stem(proto_file);
        const c_name = b.fmt("{s}.pb-c.c", .{base});
        c_files.append(b.pathJoin(&.{ dir, c_name })) catch @panic("OOM");
    }
    // The dashboard's files, embedded as C arrays next to the generated
    // protobuf code (compiled with it, sanitizer builds included).
    const assets_c = b.pathJoin(&.{ dir, "dashboard_assets.c" });
    const assets = b.addSystemCommand(&.{ "sh", "-c", "mkdir -p \"$(dirname \"$0\")\" && exec python3 scripts/embed-assets.py \"$0\" \"$@\"", assets_c });
    assets.has_side_effects = true;
    for (dashboard_assets) |pair| assets.addArg(pair);
    gen.step.dependOn(&assets.step);
    return .{ .dir = dir, .c_files = c_files.items, .step = &gen.step, .assets_c = assets_c };
}

/// The dashboard (src/http/dashboard.c) as URL=FILE: its own files, and uPlot,
/// which `npm ci` installs (package.json pins it; "?=": a build without it
/// warns and serves a dashboard without charts, see scripts/embed-assets.py).
const dashboard_assets = [_][]const u8{
    "/=web/dashboard/index.html",
    "/dashboard/app.js=web/dashboard/app.js",
    "/dashboard/style.css=web/dashboard/style.css",
    "/dashboard/uPlot.iife.min.js?=node_modules/uplot/dist/uPlot.iife.min.js",
    "/dashboard/uPlot.min.css?=node_modules/uplot/dist/uPlot.min.css",
};

// ---------------------------------------------------------------------------
// Sanitizer builds with the system gcc, from the same source list.

fn addSanitizerSteps(b: *std.Build, sources: Sources, proto: ?Proto) void {
    const asan_step = b.step("asan", "Run the unit tests under ASan+UBSan (system gcc)");
    const tsan_step = b.step("tsan", "Run the threaded tests (runtime, actors, host, client_verify, indexer_read, durable_diverged, durable_prefill) under TSan (system gcc)");
    const asan_flags = [_][]const u8{ "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all" };
    // ck uses inline assembly for its atomics unless told to use the compiler's
    // builtins, and TSan only sees the builtins.
    const tsan_flags = [_][]const u8{ "-O1", "-g", "-fsanitize=thread", "-DCK_USE_CC_BUILTINS=1" };

    const all = concat(b, sources.server, sources.client);
    const asan_objects = compileObjects(b, "asan", all, &asan_flags, proto);
    const tsan_objects = compileObjects(b, "tsan", all, &tsan_flags, proto);
    // The loopback test's objects: the transfer layer's and the double's.
    var loopback_objects = std.ArrayList(std.Build.LazyPath).init(b.allocator);
    for (all, 0..) |file, i| {
        if (isLoopbackSource(file)) loopback_objects.append(asan_objects[i]) catch @panic("OOM");
    }
    loopback_objects.appendSlice(compileObjects(b, "asan", &.{loopback_double}, &asan_flags, null)) catch @panic("OOM");

    var asan_prev: ?*std.Build.Step = null;
    var tsan_prev: ?*std.Build.Step = null;
    for (sources.tests) |test_file| {
        if (isLoopbackTest(test_file)) {
            asan_prev = sanitizedTest(b, asan_step, asan_prev, "asan", test_file, &asan_flags, loopback_objects.items, null, &.{}, &loopback_libs);
            continue;
        }
        asan_prev = sanitizedTest(b, asan_step, asan_prev, "asan", test_file, &asan_flags, asan_objects, proto, &.{}, &system_libs);
        // TSan covers what has threads: the runtime, the actors,
        // libcrescent's embedded host (test_host.c: cr_host's serve and
        // keep-alive threads beside the caller's) and its batch reads'
        // checksum helper (test_client_verify.c), the index HTTP workers read
        // beside the indexer's writes (test_indexer_read.c) and the journal's
        // fdatasync thread (test_durable_diverged.c) and the restore's
        // slab-populating thread (test_durable_prefill.c) and the restore's
        // claims on two threads (test_durable_finish.c).
        if (std.mem.indexOf(u8, test_file, "runtime") != null or std.mem.indexOf(u8, test_file, "actor") != null or
            std.mem.endsWith(u8, test_file, "test_host.c") or std.mem.endsWith(u8, test_file, "test_client_verify.c") or
            std.mem.endsWith(u8, test_file, "test_indexer_read.c") or std.mem.endsWith(u8, test_file, "test_durable_diverged.c") or
            std.mem.endsWith(u8, test_file, "test_durable_prefill.c") or std.mem.endsWith(u8, test_file, "test_durable_finish.c"))
        {
            // tests/tsan.supp: races TSan reports inside Debian's uninstrumented libzmq.
            const options = b.fmt("halt_on_error=1 second_deadlock_stack=1 suppressions={s}", .{b.pathFromRoot("tests/tsan.supp")});
            const env = [_][2][]const u8{.{ "TSAN_OPTIONS", options }};
            tsan_prev = sanitizedTest(b, tsan_step, tsan_prev, "tsan", test_file, &tsan_flags, tsan_objects, proto, &env, &system_libs);
        }
    }
}

/// One cached gcc -c per source file.  Header changes invalidate every object
/// through a hash of all headers passed as a define (this Zig's Run-step cache
/// loses outputs of steps that also emit a depfile, so -MMD cannot be used).
fn compileObjects(b: *std.Build, tag: []const u8, files: []const []const u8, flags: []const []const u8, proto: ?Proto) []std.Build.LazyPath {
    const headers_define = b.fmt("-DCR_HEADERS_HASH={x}", .{hashHeaders(b)});
    var objects = std.ArrayList(std.Build.LazyPath).init(b.allocator);
    var all_files = std.ArrayList([]const u8).init(b.allocator);
    all_files.appendSlice(files) catch @panic("OOM");
    if (proto) |p| {
        all_files.appendSlice(p.c_files) catch @panic("OOM");
        all_files.append(p.assets_c) catch @panic("OOM");
    }
    for (all_files.items) |file| {
        const cc = b.addSystemCommand(&.{"gcc"});
        cc.addArgs(&c_flags);
        cc.addArgs(flags);
        cc.addArgs(&.{ "-Isrc", "-Iinclude", "-c", headers_define });
        if (proto) |p| {
            cc.addArg(b.fmt("-I{s}", .{p.dir}));
            cc.step.dependOn(p.step);
        }
        if (std.fs.path.isAbsolute(file)) cc.addArg(file) else cc.addFileArg(.{ .path = file });
        cc.addArg("-o");
        const name = b.fmt("{s}-{s}.o", .{ tag, std.fs.path.stem(file) });
        objects.append(cc.addOutputFileArg(name)) catch @panic("OOM");
    }
    return objects.items;
}

fn sanitizedTest(
    b: *std.Build,
    step: *std.Build.Step,
    previous: ?*std.Build.Step,
    tag: []const u8,
    test_file: []const u8,
    flags: []const []const u8,
    objects: []std.Build.LazyPath,
    proto: ?Proto,
    env: []const [2][]const u8,
    libs: []const []const u8,
) *std.Build.Step {
    const link = b.addSystemCommand(&.{"gcc"});
    link.addArgs(&c_flags);
    link.addArgs(flags);
    link.addArgs(&.{ "-Isrc", "-Iinclude" });
    if (proto) |p| link.addArg(b.fmt("-I{s}", .{p.dir}));
    link.addFileArg(.{ .path = test_file });
    for (objects) |obj| link.addFileArg(obj);
    link.addArg("-o");
    const exe = link.addOutputFileArg(b.fmt("{s}-{s}", .{ tag, std.fs.path.stem(test_file) }));
    link.addArg("-lcmocka");
    for (libs) |lib| link.addArg(b.fmt("-l{s}", .{lib}));

    const run = std.Build.Step.Run.create(b, b.fmt("{s} {s}", .{ tag, std.fs.path.stem(test_file) }));
    run.addFileArg(exe);
    run.has_side_effects = true;
    for (env) |kv| run.setEnvironmentVariable(kv[0], kv[1]);
    if (previous) |p| run.step.dependOn(p);
    step.dependOn(&run.step);
    return &run.step;
}

/// Hash of every header under src/ and include/ (contents and names).
fn hashHeaders(b: *std.Build) u64 {
    var hasher = std.hash.Wyhash.init(0);
    for ([_][]const u8{ "src", "include" }) |root| {
        var dir = std.fs.cwd().openIterableDir(b.pathFromRoot(root), .{}) catch continue;
        defer dir.close();
        var walker = dir.walk(b.allocator) catch @panic("OOM");
        defer walker.deinit();
        var names = std.ArrayList([]const u8).init(b.allocator);
        while (walker.next() catch null) |entry| {
            if (entry.kind == .file and std.mem.endsWith(u8, entry.path, ".h"))
                names.append(b.pathJoin(&.{ root, entry.path })) catch @panic("OOM");
        }
        std.mem.sort([]const u8, names.items, {}, lessThan);
        for (names.items) |name| {
            hasher.update(name);
            const text = std.fs.cwd().readFileAlloc(b.allocator, b.pathFromRoot(name), 1 << 24) catch continue;
            hasher.update(text);
        }
    }
    return hasher.final();
}

// ---------------------------------------------------------------------------
// Source discovery

fn collectSources(b: *std.Build) Sources {
    var server = std.ArrayList([]const u8).init(b.allocator);
    for (server_dirs) |dir| listFiles(b, &server, dir, "", ".c");
    var client = std.ArrayList([]const u8).init(b.allocator);
    for (client_dirs) |dir| listFiles(b, &client, dir, "", ".c");
    var tests = std.ArrayList([]const u8).init(b.allocator);
    listFiles(b, &tests, "tests/unit", "test_", ".c");
    var benches = std.ArrayList([]const u8).init(b.allocator);
    listFiles(b, &benches, "bench", "", ".c");
    var tools = std.ArrayList([]const u8).init(b.allocator);
    listFiles(b, &tools, "tests/tools", "", ".c");
    var fuzzers = std.ArrayList([]const u8).init(b.allocator);
    listFiles(b, &fuzzers, "tests/fuzz", "fuzz_", ".c");
    var protos = std.ArrayList([]const u8).init(b.allocator);
    listFiles(b, &protos, "proto", "", ".proto");
    return .{
        .server = server.items,
        .client = client.items,
        .tests = tests.items,
        .benches = benches.items,
        .tools = tools.items,
        .fuzzers = fuzzers.items,
        .protos = protos.items,
    };
}

/// Appends dir/<prefix>*<suffix>, sorted, so builds do not depend on readdir order.
fn listFiles(b: *std.Build, out: *std.ArrayList([]const u8), dir: []const u8, prefix: []const u8, suffix: []const u8) void {
    var iterable = std.fs.cwd().openIterableDir(b.pathFromRoot(dir), .{}) catch return;
    defer iterable.close();
    var found = std.ArrayList([]const u8).init(b.allocator);
    var it = iterable.iterate();
    while (it.next() catch null) |entry| {
        if (entry.kind != .file) continue;
        if (!std.mem.startsWith(u8, entry.name, prefix)) continue;
        if (!std.mem.endsWith(u8, entry.name, suffix)) continue;
        found.append(b.pathJoin(&.{ dir, entry.name })) catch @panic("OOM");
    }
    std.mem.sort([]const u8, found.items, {}, lessThan);
    out.appendSlice(found.items) catch @panic("OOM");
}

fn lessThan(_: void, a: []const u8, b: []const u8) bool {
    return std.mem.lessThan(u8, a, b);
}

fn fileExists(path: []const u8) bool {
    std.fs.cwd().access(path, .{}) catch return false;
    return true;
}

fn concat(b: *std.Build, first: []const []const u8, second: []const []const u8) []const []const u8 {
    const out = b.allocator.alloc([]const u8, first.len + second.len) catch @panic("OOM");
    @memcpy(out[0..first.len], first);
    @memcpy(out[first.len..], second);
    return out;
}
