// shesha-bench: performance numbers for Shesha against references measured in the same run.
//
//   shesha-bench merge    merge kernels vs memcpy and a non-vectorised scalar loop
//   shesha-bench queue    AggregatingQueue vs a plain pointer ring
//   shesha-bench forward  shesha-switch vs dpdk-testpmd io and mac, and OVS-DPDK NORMAL (net_null / net_pcap ports)
//   shesha-bench learner  learner GRADIENT chunk apply (RMSProp, Adam, LearnerCore) vs memcpy and axpy
//   shesha-bench sender   worker gradient send path over loopback UDP vs plain sendto and shesha-gen
//   shesha-bench all      everything
// Common flags: --quick (smoke run), --json FILE (machine-readable results).
// Exit status: 0, 1 if a measurement produced a non-finite number or could not run, 77 if the
// forwarding benchmark was skipped because DPDK cannot run here (the others still ran).
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench_main.h"
#include "bench_util.h"
#include "json_io.h"
#include "log_level.h"
#include "merge_kernel.h"

namespace {

std::filesystem::path self_dir() {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::current_path() : exe.parent_path();
}

}  // namespace

int main(int argc, char** argv) {
    using namespace shesha::bench;
    CLI::App app{"shesha-bench: Shesha performance against same-run references"};
    app.require_subcommand(1);
    app.fallthrough();  // global flags may follow the subcommand

    RunOptions opt;
    std::string json_path;
    ForwardOptions fwd;
    // Built next to us in the same build tree (tools/bench -> switch/dpdk).
    fwd.switch_binary = (self_dir() / "../../switch/dpdk/shesha-switch").lexically_normal().string();
    app.add_flag("--quick", opt.quick, "smoke run: few repetitions, 0.5 s forwarding windows, one round, no OVS-DPDK");
    app.add_option("--json", json_path, "also write the result tables to this JSON file");
    app.add_option("--seconds", opt.seconds, "measurement window per forwarding run")->check(CLI::Range(0.2, 60.0));
    app.add_option("--rounds", opt.forward_rounds, "alternating testpmd/shesha-switch rounds per forwarding workload")
        ->check(CLI::Range(1, 20));
    app.add_option("--switch", fwd.switch_binary, "shesha-switch binary")->capture_default_str();
    app.add_option("--testpmd", fwd.testpmd_binary, "dpdk-testpmd binary")->capture_default_str();
    std::string gen_binary = (self_dir() / "../gen/shesha-gen").lexically_normal().string();
    app.add_option("--gen", gen_binary, "shesha-gen binary (sender reference)")->capture_default_str();
    app.add_option("--ovs", fwd.ovs, "OVS-DPDK reference in forward: auto (on unless --quick), on, off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    app.add_flag("--ovs-flood-local", fwd.ovs_flood_local,
                 "OVS floods also to its bridge's internal port (its default; off: no-flood, like the others)");
    app.add_option("--ovs-vswitchd", fwd.ovs_vswitchd, "ovs-vswitchd built with DPDK")->capture_default_str();
    app.add_flag("--hugepages", fwd.hugepages,
                 "forward: every program's DPDK memory from 2 MB hugepages (EAL --in-memory) instead of --no-huge; "
                 "needs 1024 MB of them free (nr_hugepages >= 512), 512 MB with --ovs off");
    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    app.add_option("--work-dir", fwd.work_dir, "scratch directory for configs, pcaps and logs (default: a fresh /tmp dir)");
    app.add_option("--workloads", fwd.workloads, "forward: run only these workloads (default: all)")
        ->check(CLI::IsMember({"null64", "pcap64", "grad1k", "grad8k", "grad1k-split", "grad1k-fresh", "model16", "model64"}))
        ->delimiter(',');

    auto* merge_cmd = app.add_subcommand("merge", "merge kernel throughput vs memcpy and a scalar loop");
    auto* queue_cmd = app.add_subcommand("queue", "AggregatingQueue vs a plain pointer ring");
    auto* forward_cmd = app.add_subcommand("forward", "shesha-switch vs dpdk-testpmd (io, mac) and OVS-DPDK forwarding");
    auto* learner_cmd = app.add_subcommand("learner", "learner chunk apply vs memcpy and axpy");
    auto* sender_cmd = app.add_subcommand("sender", "worker send path vs plain sendto and shesha-gen (loopback)");
    auto* all_cmd = app.add_subcommand("all", "every benchmark");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help exits 0; a wrong flag is bad input and exits 2, like a bad file.
        return app.exit(e) == 0 ? 0 : 2;
    }
    shesha::logging::init("shesha-bench", log_level);

    const bool all = all_cmd->parsed();
    if (opt.quick && !app.get_option("--seconds")->count()) opt.seconds = 0.5;
    if (opt.quick && !app.get_option("--rounds")->count()) opt.forward_rounds = 1;

    fmt::print("shesha-bench on {} ({} CPUs), best SIMD {}{}\n", cpu_model(), online_cpus(),
               shesha::core::to_string(shesha::core::detect_simd()), opt.quick ? ", QUICK run" : "");
    std::fflush(stdout);

    std::vector<Table> tables;
    bool skipped = false;
    std::string skip_reason;
    shesha::json::Json forward_json;
    int status = 0;
    if (all || merge_cmd->parsed()) {
        tables.push_back(run_merge_bench(opt));
        tables.back().print();
    }
    if (all || queue_cmd->parsed()) {
        tables.push_back(run_queue_bench(opt));
        tables.back().print();
    }
    if (all || learner_cmd->parsed()) {
        tables.push_back(run_learner_bench(opt));
        tables.back().print();
    }
    if (all || sender_cmd->parsed()) {
        tables.push_back(run_sender_bench(opt, gen_binary));
        tables.back().print();
    }
    if (all || forward_cmd->parsed()) {
        try {
            ForwardResult r = run_forward_bench(opt, fwd);
            for (Table& t : r.tables) tables.push_back(std::move(t));
            skipped = r.skipped;
            skip_reason = r.reason;
            forward_json = r.json;
            if (r.skipped) fmt::print("\nforward: SKIPPED: {}\n", r.reason);
            if (r.failed) {
                spdlog::error("forward: FAILED: {}", r.reason);
                status = 1;
            }
        } catch (const std::exception& e) {
            spdlog::error("forward: {}", e.what());
            status = 1;
        }
    }

    for (const Table& t : tables) {
        if (!t.all_finite()) {
            spdlog::error("'{}' has a non-finite measurement", t.name());
            status = 1;
        }
    }
    if (!json_path.empty()) {
        // Top level: schema "shesha-bench" version 2 (docs/benchmarks.md, "JSON output"): the machine,
        // every printed table, and "forward" (schema "shesha-bench-forward") when forward ran.
        shesha::json::Json j = {{"schema", "shesha-bench"},
                                {"schema_version", 2},
                                {"cpu", cpu_model()},
                                {"cpus", online_cpus()},
                                {"simd", shesha::core::to_string(shesha::core::detect_simd())},
                                {"quick", opt.quick},
                                {"skipped", skip_reason}};
        shesha::json::Json list = shesha::json::Json::array();
        for (const Table& t : tables) list.push_back(t.to_json());
        j["tables"] = std::move(list);
        if (!forward_json.is_null()) j["forward"] = std::move(forward_json);
        std::string err;
        if (!shesha::json::write_text_file(json_path, shesha::json::rows(j), err)) {
            spdlog::error("{}", err);
            status = 1;
        }
    }
    if (status == 0 && skipped) return 77;
    return status;
}
