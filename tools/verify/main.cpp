// shesha-verify: bounded formal verification (Z3) of system-wide Age-of-Model objectives of the
// aggregating queue and the DCTCP-style senders, and replay of counterexamples on the real code.
//
//   shesha-verify check CONFIG [--property NAME]... [--horizon T] [--out-dir DIR] [--summary FILE]
//   shesha-verify check LAB_SCENARIO [--arm NAME] ...      (configs/lab-*.yaml)
//   shesha-verify check SWITCH_YAML CLUSTER_YAML... [--port NAME] ...
//   shesha-verify replay FILE
//   shesha-verify agree CONFIG [--runs N] [--seed S]
//
// Exit codes: 0 verified / reproduced / agreed, 1 counterexample / not reproduced / disagreement,
// 2 bad input.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "deployment.h"
#include "implementation.h"
#include "json_io.h"
#include "log_level.h"
#include "symbolic.h"
#include "verify_config.h"

using namespace shesha::verify;
namespace json = shesha::json;

namespace {

std::vector<Property> configured(const VerifyConfig& cfg) {
    std::vector<Property> out;
    if (cfg.fairness) out.push_back(Property::Fairness);
    if (cfg.responsiveness) out.push_back(Property::Responsiveness);
    if (cfg.aom) out.push_back(Property::Aom);
    if (cfg.version_spread) out.push_back(Property::VersionSpread);
    return out;
}

// The port's scheduler as the model runs it.
std::string scheduling_summary(const ModelParams& m) {
    if (!m.fair_scheduling) return "fifo";
    std::string weights;
    for (int c = 0; c < m.clusters; ++c) weights += (c ? ":" : "") + std::to_string(m.weight_of(c));
    return fmt::format("drr (one queue per cluster, weights {}, {}{})", weights,
                       m.fair_lag != 0 ? fmt::format("bounded lag {}", m.fair_lag) : std::string("deficit round robin"),
                       m.chunk_follow ? ", chunk following" : "");
}

// A deployment's header: the port, the clusters and the bounds checked, what is abstracted.
void print_deployment(const Deployment& dep) {
    std::string ids;
    for (std::size_t c = 0; c < dep.cluster_ids.size(); ++c)
        ids += fmt::format("{}{} (model cluster {})", c ? ", " : "", dep.cluster_ids[c], c);
    fmt::print("deployment: {}; clusters {}\n", dep.port, ids);
    for (const auto& b : dep.bounds) fmt::print("bounds: {}\n", b);
    for (const auto& a : dep.abstracted) fmt::print("abstracted: {}\n", a);
}

int cmd_check(const std::vector<std::string>& inputs, const std::vector<std::string>& names, int horizon,
              const std::string& out_dir, const std::string& port, const std::string& arm, const std::string& summary) {
    const std::string& path = inputs.front();
    const InputKind kind = input_kind(path);
    if (kind != InputKind::SwitchYaml && inputs.size() > 1)
        throw VerifyConfigError(fmt::format("{}: extra file {}: cluster YAMLs go after a switch YAML only", path, inputs[1]));
    if (kind != InputKind::SwitchYaml && !port.empty())
        throw VerifyConfigError("--port: only with a switch YAML (a verify YAML names switch_port, a lab scenario's port is its learners')");
    if (kind != InputKind::LabScenario && !arm.empty()) throw VerifyConfigError("--arm: only with a lab scenario");
    std::optional<Deployment> dep;
    if (kind == InputKind::LabScenario) {
        const char* lab = std::getenv("SHESHA_LAB_CLI");
        dep = deployment_from_lab(path, arm, lab != nullptr && *lab != 0 ? lab : SHESHA_LAB_CLI);
    } else if (kind == InputKind::SwitchYaml) {
        dep = deployment_from_switch(path, port, std::vector<std::string>(inputs.begin() + 1, inputs.end()));
    }
    VerifyConfig cfg = dep ? dep->config : load_verify_config(path);
    if (horizon > 0) cfg.model.horizon = horizon;
    if (dep) print_deployment(*dep);
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
               m.aggregation, m.feedback, m.w_min, m.w_max, m.w_init, scheduling_summary(m));
    if (m.versions > 0)
        fmt::print("versions: each update carries a version in [0, {}] (any order); merge tolerance {}\n", m.versions,
                   m.version_tolerance);
    if (dep) {
        std::string what;
        if (cfg.fairness) {
            what += fmt::format("fairness {{window {}, epsilon {}", cfg.fairness->window, cfg.fairness->epsilon);
            if (!cfg.fairness->shares.empty()) what += fmt::format(", shares {}", fmt::join(cfg.fairness->shares, ":"));
            what += "}";
        }
        if (cfg.responsiveness)
            what += fmt::format(", responsiveness {{within {}, threshold {}}}", cfg.responsiveness->within,
                                cfg.responsiveness->threshold);
        if (cfg.aom) what += fmt::format(", aom {{bound {}}}", cfg.aom->bound);
        fmt::print("properties: {}\n", what);
    }
    int failures = 0;
    json::Json results = json::Json::object();
    std::vector<std::string> verified, failed;
    for (Property p : props) {
        // Z3 gives no progress of its own and large horizons take minutes: say what is running.
        std::fflush(stdout);
        spdlog::info("{}: solving (horizon {})...", to_string(p), m.horizon);
        const CheckResult r = check_property(cfg, p);
        results[to_string(p)] = {{"verified", r.verified}, {"seconds", r.solve_seconds}};
        if (r.verified) {
            fmt::print("{}: verified within bounds (horizon {}) in {:.3f} s\n", to_string(p), m.horizon, r.solve_seconds);
            verified.push_back(p == Property::Aom ? "AoM" : to_string(p));
            continue;
        }
        ++failures;
        failed.push_back(p == Property::Aom ? "AoM" : to_string(p));
        const std::string stem = std::filesystem::path(path).stem().string();
        const std::string file = (std::filesystem::path(out_dir) / (stem + "-" + to_string(p) + ".json")).string();
        write_file(file, to_json(r.cex));
        results[to_string(p)]["counterexample"] = file;
        results[to_string(p)]["step"] = r.cex.step;
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
    // One line for reports (the lab's): what holds, to which horizon.
    std::string line;
    if (!verified.empty()) line = fmt::format("{}: verified to horizon {}", fmt::join(verified, "/"), m.horizon);
    if (!failed.empty())
        line += fmt::format("{}{}: counterexample within horizon {}", line.empty() ? "" : "; ", fmt::join(failed, "/"),
                            m.horizon);
    fmt::print("{}\n", line);
    if (!summary.empty()) {
        json::Json j;
        j["input"] = path;
        j["line"] = line;
        j["horizon"] = m.horizon;
        j["results"] = std::move(results);
        if (dep) {
            j["port"] = dep->port;
            j["clusters"] = dep->cluster_ids;
            j["bounds"] = dep->bounds;
            j["abstracted"] = dep->abstracted;
        }
        write_file(summary, j.dump(1) + "\n");
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
    const ModelParams& m = cfg.model;
    std::uniform_int_distribution<int> pick(0, m.max_arrivals);
    std::uniform_int_distribution<int> pick_version(0, m.versions);
    std::fputs(cfg.notes.c_str(), stdout);
    fmt::print("scheduling {}\n", scheduling_summary(m));
    // What the workloads exercised: merges, drops, window cuts, and departures out of arrival
    // order within a cluster (DRR turns of several packets, chunk following).
    int merges = 0, drops = 0, cuts = 0;
    for (int r = 0; r < runs; ++r) {
        std::vector<std::vector<int>> w(m.horizon, std::vector<int>(m.clusters));
        for (auto& row : w)
            for (auto& x : row) x = pick(rng);
        std::vector<std::vector<int>> v;
        if (m.versions > 0) {
            v.assign(m.horizon, std::vector<int>(m.clusters));
            for (auto& row : v)
                for (auto& x : row) x = pick_version(rng);
        }
        const std::string diff = check_agreement(m, w, v);
        if (!diff.empty()) {
            fmt::print("run {}: model and implementation disagree: {}\n", r, diff);
            return 1;
        }
        const RealRun real = run_implementation(m, w, v);
        for (const auto& s : real.trace) {
            for (const auto& d : s.departures) merges += d.valid && d.contrib > 1;
            drops += static_cast<int>(s.drops);
            for (bool c : s.cut) cuts += c;
        }
    }
    fmt::print("model and implementation agree on {} random workloads of {} steps ({} merged departures, {} drops, "
               "{} window cuts)\n", runs, m.horizon, merges, drops, cuts);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"shesha-verify: bounded Z3 verification of fairness, responsiveness and AoM"};
    app.require_subcommand(1);
    std::string config, file, out_dir = ".", port, arm, summary;
    std::vector<std::string> inputs;
    std::vector<std::string> props;
    int horizon = 0, runs = 100;
    unsigned seed = 1;
    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    // --log-level may also follow the subcommand.
    app.fallthrough();
    auto* check = app.add_subcommand("check", "verify the configured properties within the bounds");
    check->add_option("files", inputs,
                      "a verify YAML, a lab scenario (configs/lab-*.yaml), or a shesha-switch YAML followed by the "
                      "cluster YAML of each cluster sending through its port")->required();
    check->add_option("--port", port, "with a switch YAML: the port the clusters share (default: the first shaped one)");
    check->add_option("--arm", arm, "with a lab scenario: the arm to check (default: shesha, else the last)");
    check->add_option("--summary", summary, "also write the results as JSON to this file (for reports)");
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
        if (*check) return cmd_check(inputs, props, horizon, out_dir, port, arm, summary);
        if (*rep) return cmd_replay(file);
        if (*agree) return cmd_agree(config, runs, seed);
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 2;
    }
    return 2;
}
