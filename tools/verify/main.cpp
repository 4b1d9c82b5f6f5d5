// shesha-verify: bounded formal verification (Z3) of system-wide Age-of-Model objectives of the
// aggregating queue and the DCTCP-style senders, and replay of counterexamples on the real code.
//
//   shesha-verify check CONFIG [--property NAME]... [--horizon T] [--out-dir DIR]
//   shesha-verify replay FILE
//   shesha-verify agree CONFIG [--runs N] [--seed S]
//
// Exit codes: 0 verified / reproduced / agreed, 1 counterexample / not reproduced / disagreement,
// 2 bad input.
#include <cstdio>
#include <filesystem>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "implementation.h"
#include "log_level.h"
#include "symbolic.h"
#include "verify_config.h"

using namespace shesha::verify;

namespace {

std::vector<Property> configured(const VerifyConfig& cfg) {
    std::vector<Property> out;
    if (cfg.fairness) out.push_back(Property::Fairness);
    if (cfg.responsiveness) out.push_back(Property::Responsiveness);
    if (cfg.aom) out.push_back(Property::Aom);
    if (cfg.version_spread) out.push_back(Property::VersionSpread);
    return out;
}

int cmd_check(const std::string& path, const std::vector<std::string>& names, int horizon, const std::string& out_dir) {
    VerifyConfig cfg = load_verify_config(path);
    if (horizon > 0) cfg.model.horizon = horizon;
    std::fputs(cfg.notes.c_str(), stdout);
    std::vector<Property> props;
    for (const auto& n : names) {
        if (n == "fairness" && cfg.fairness) props.push_back(Property::Fairness);
        else if (n == "responsiveness" && cfg.responsiveness) props.push_back(Property::Responsiveness);
        else if (n == "aom" && cfg.aom) props.push_back(Property::Aom);
        else if (n == "version_spread" && cfg.version_spread) props.push_back(Property::VersionSpread);
        else throw VerifyConfigError(fmt::format("{}: property '{}' is not configured under properties:", path, n));
    }
    if (names.empty()) props = configured(cfg);
    if (props.empty()) throw VerifyConfigError(path + ": no properties configured");
    const auto& m = cfg.model;
    fmt::print("model: {} clusters, horizon {}, queue {} slots, service {}/step, arrivals <= {}/step/cluster, "
               "{} chunks, mark depth {}, aggregation {}, feedback {}, window [{}, {}] init {}, scheduling {}\n",
               m.clusters, m.horizon, m.queue_packets, m.service_rate, m.max_arrivals, m.chunks, m.mark_depth,
               m.aggregation, m.feedback, m.w_min, m.w_max, m.w_init,
               m.fair_scheduling ? "drr (one queue per cluster)" : "fifo");
    if (m.versions > 0)
        fmt::print("versions: each update carries a version in [0, {}] (any order); merge tolerance {}\n", m.versions,
                   m.version_tolerance);
    int failures = 0;
    for (Property p : props) {
        // Z3 gives no progress of its own and large horizons take minutes: say what is running.
        std::fflush(stdout);
        spdlog::info("{}: solving (horizon {})...", to_string(p), m.horizon);
        const CheckResult r = check_property(cfg, p);
        if (r.verified) {
            fmt::print("{}: verified within bounds (horizon {}) in {:.3f} s\n", to_string(p), m.horizon, r.solve_seconds);
            continue;
        }
        ++failures;
        const std::string stem = std::filesystem::path(path).stem().string();
        const std::string file = (std::filesystem::path(out_dir) / (stem + "-" + to_string(p) + ".json")).string();
        write_file(file, to_json(r.cex));
        fmt::print("{}: COUNTEREXAMPLE found in {:.3f} s: step {}: {}\n", to_string(p), r.solve_seconds, r.cex.step,
                   r.cex.what);
        fmt::print("  workload (chunks sent per step, per cluster):");
        for (size_t t = 0; t < r.cex.workload.size(); ++t) fmt::print(" t{}={}", t, fmt::join(r.cex.workload[t], "/"));
        if (!r.cex.versions.empty()) {
            fmt::print("\n  versions of the updates started (per step, per cluster):");
            for (size_t t = 0; t < r.cex.versions.size(); ++t) fmt::print(" t{}={}", t, fmt::join(r.cex.versions[t], "/"));
        }
        fmt::print("\n  written to {} (replay: shesha-verify replay {})\n", file, file);
    }
    return failures == 0 ? 0 : 1;
}

int cmd_replay(const std::string& file) {
    const Counterexample cex = counterexample_from_json(read_file(file), file);
    fmt::print("replaying {} counterexample ({} steps, {} clusters) on the real AggregatingQueue and CreditSenders\n",
               cex.property, cex.workload.size(), cex.config.model.clusters);
    fmt::print("model said: step {}: {}\n", cex.step, cex.what);
    const ReplayReport rep = replay(cex);
    for (const auto& l : rep.lines) fmt::print("{}\n", l);
    return rep.reproduced ? 0 : 1;
}

int cmd_agree(const std::string& path, int runs, unsigned seed) {
    const VerifyConfig cfg = load_verify_config(path);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(0, cfg.model.max_arrivals);
    for (int r = 0; r < runs; ++r) {
        std::vector<std::vector<int>> w(cfg.model.horizon, std::vector<int>(cfg.model.clusters));
        for (auto& row : w)
            for (auto& x : row) x = pick(rng);
        const std::string diff = check_agreement(cfg.model, w);
        if (!diff.empty()) {
            fmt::print("run {}: model and implementation disagree: {}\n", r, diff);
            return 1;
        }
    }
    fmt::print("model and implementation agree on {} random workloads of {} steps\n", runs, cfg.model.horizon);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"shesha-verify: bounded Z3 verification of fairness, responsiveness and AoM"};
    app.require_subcommand(1);
    std::string config, file, out_dir = ".";
    std::vector<std::string> props;
    int horizon = 0, runs = 100;
    unsigned seed = 1;
    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    // --log-level may also follow the subcommand.
    app.fallthrough();
    auto* check = app.add_subcommand("check", "verify the configured properties within the bounds");
    check->add_option("config", config, "verify YAML")->required();
    check->add_option("--property", props, "fairness, responsiveness, aom or version_spread (default: all configured)");
    // The YAML's own range for model.horizon; 0 (the default) keeps the file's value.
    check->add_option("--horizon", horizon, "override model.horizon (1..200)")->check(CLI::Range(1, 200));
    check->add_option("--out-dir", out_dir, "where counterexample files go");
    auto* rep = app.add_subcommand("replay", "replay a counterexample on the real queue and senders");
    rep->add_option("file", file, "counterexample JSON")->required();
    auto* agree = app.add_subcommand("agree", "compare model and implementation on random workloads");
    agree->add_option("config", config, "verify YAML")->required();
    agree->add_option("--runs", runs, "workloads (1..1000000)")->check(CLI::Range(1, 1'000'000));
    agree->add_option("--seed", seed, "random seed");
    // CLI11 reports a stray word without saying it was meant as a subcommand: name it here.
    if (argc > 1 && argv[1][0] != '-') {
        const std::string word = argv[1];
        if (word != "check" && word != "replay" && word != "agree") {
            std::fprintf(stderr, "shesha-verify: unknown subcommand '%s' (expected check, replay or agree; see --help)\n",
                         word.c_str());
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help exits 0; a wrong flag is bad input and exits 2, like a bad file.
        return app.exit(e) == 0 ? 0 : 2;
    }
    shesha::logging::init("shesha-verify", log_level);
    try {
        if (*check) return cmd_check(config, props, horizon, out_dir);
        if (*rep) return cmd_replay(file);
        if (*agree) return cmd_agree(config, runs, seed);
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 2;
    }
    return 2;
}
