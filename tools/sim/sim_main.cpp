// shesha-sim: runs one scenario and writes its summary, per-cluster and time-series CSVs.
//   shesha-sim --config configs/sim-tor.yaml --set workload.clusters=8 --out-dir out/ --label run1
// or replays a per-slot workload (a shesha-verify counterexample) in the slotted mode and measures
// fairness, responsiveness and AoM against the file's bounds:
//   shesha-sim --replay good-fairness.json [--out-dir out/]
// or trains real A3C clusters in virtual time (workload.kind: training, configs/sim-training.yaml;
// needs a build with libtorch), and measures this machine's compute costs for them:
//   shesha-sim --measure-compute configs/cluster-cartpole.yaml
// Exit codes: 0 ok / no bound violated, 1 a bound violated (replay) or CSVs not written,
// 2 bad input, 3 a simulator invariant broken.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cluster_config.h"
#include "log_level.h"
#include "sim_config.h"
#include "simulator.h"
#include "slotted.h"
#include "training_backend.h"

namespace {

bool write_file(const std::filesystem::path& path, const std::string& text, bool append) {
    const bool exists = std::filesystem::exists(path);
    std::ofstream out(path, append ? std::ios::app : std::ios::trunc);
    if (!out) return false;
    // When appending to an existing CSV, skip our header line (the file already has one).
    if (append && exists) {
        out << text.substr(text.find('\n') + 1);
    } else {
        out << text;
    }
    return static_cast<bool>(out);
}

std::string flags(const std::vector<bool>& v) {
    std::string out;
    for (bool b : v) out += b ? 'x' : '.';
    return out;
}

std::string joined(const std::vector<std::int64_t>& v) {
    return fmt::format("{}", fmt::join(v, " "));
}

int replay(const std::string& path, const std::string& out_dir, bool quiet, const std::string& scheduling) {
    std::ifstream in(path);
    if (!in) {
        spdlog::error("{}: cannot read the file", path);
        return 2;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    shesha::sim::SlottedReplay r;
    try {
        r = shesha::sim::parse_replay(text, path);
    } catch (const shesha::sim::ReplayFileError& e) {
        spdlog::error("{}", e.what());
        return 2;
    }
    // The recorded workload on the scheduling the file names (FIFO for files from before fair
    // queues), or on the one --scheduling asks for: the same counterexample on the other scheduler.
    if (!scheduling.empty()) r.system.fair_scheduling = scheduling == "drr";
    // The fair queues' options mean nothing on a FIFO port (the switch refuses them there).
    if (!r.system.fair_scheduling) {
        r.system.fair_lag = 0;
        r.system.chunk_follow = false;
    }
    const shesha::sim::SlottedRun run = shesha::sim::run_slotted(r.system, r.workload, r.versions);
    const shesha::sim::SlotMeasurements m = shesha::sim::measure(run.slots, r.bounds);
    const auto& s = r.system;
    if (!quiet) {
        fmt::print("slotted replay of {}: {} slots, {} clusters, queue {} slots serving {}/slot, mark depth {}, "
                   "aggregation {}, feedback {}, scheduling {}\n", path, s.horizon, s.clusters, s.queue_packets,
                   s.service_rate, s.mark_depth, s.aggregation ? "on" : "off", s.feedback ? "on" : "off",
                   s.fair_scheduling ? "drr" : "fifo");
        if (s.fair_scheduling && (!s.weights.empty() || s.fair_lag != 0 || s.chunk_follow))
            fmt::print("fair queues: weights {}, {}, chunk following {}\n",
                       joined(std::vector<std::int64_t>(s.weights.begin(), s.weights.end())),
                       s.fair_lag != 0 ? fmt::format("bounded lag {}", s.fair_lag) : std::string("deficit round robin"),
                       s.chunk_follow ? "on" : "off");
        fmt::print("the verifier's model: {} violated at step {}: {}\n", r.property, r.step, r.what);
        fmt::print("{:>4}  {:<10} {:>5} {:>5} {:>6}  {:<36} {:<5} {:<10} {:<10}\n", "slot", "sent", "depth", "drops",
                   "merges", "departures (cluster x contributions)", "cuts", "windows", "ages");
        for (std::size_t t = 0; t < run.slots.size(); ++t) {
            const auto& x = run.slots[t];
            std::string deps;
            for (const auto& d : x.departures) {
                deps += fmt::format("{}c{}x{}{}", deps.empty() ? "" : " ", d.cluster, d.contributions, d.marked ? "*" : "");
                if (s.versions > 0) deps += fmt::format("v{}..{}", d.min_version, d.max_version);
            }
            fmt::print("{:>4}  {:<10} {:>5} {:>5} {:>6}  {:<36} {:<5} {:<10} {:<10}\n", t, joined(x.sent), x.depth_end,
                       x.drops, x.merges, deps.empty() ? "-" : deps, flags(x.cut), joined(x.window), joined(m.ages[t]));
        }
        fmt::print("(* marked; cuts: x = the sender cut its window in that slot)\n");
        for (const auto& n : run.notes) fmt::print("note: {}\n", n);
        fmt::print("measured: AoM peak per cluster {} slots", joined(m.aom_peak));
        if (r.bounds.aom) fmt::print(" (bound {})", r.bounds.aom->bound);
        if (r.bounds.fairness) {
            if (m.fairness_worst < 0) fmt::print("; fairness: no window with both clusters backlogged and greedy");
            else fmt::print("; fairness: worst difference {} over the {}-slot window at slot {} (epsilon {})",
                            m.fairness_worst, r.bounds.fairness->window, m.fairness_worst_slot, r.bounds.fairness->epsilon);
        }
        if (r.bounds.responsiveness)
            fmt::print("; reaction to congestion per cluster {} slots (-1: never congested; bound {})",
                       joined(m.reaction_worst), r.bounds.responsiveness->within);
        if (r.bounds.version_spread)
            fmt::print("; widest version spread of a departure {} (bound {})", m.version_spread_worst,
                       r.bounds.version_spread->bound);
        fmt::print("\n");
    }
    if (!run.payloads_exact) {
        spdlog::error("invariant violated: a merged payload was not exact");
        return 3;
    }
    bool same_step = false;
    std::size_t same_property = 0;
    for (const auto& v : m.violations) {
        fmt::print("VIOLATED {} at slot {}: {}\n", v.property, v.slot, v.what);
        if (v.property == r.property) {
            ++same_property;
            same_step = same_step || v.slot == r.step;
        }
    }
    if (m.violations.empty()) fmt::print("no bound violated\n");
    else fmt::print("{} violation(s) of {}, the verifier's property{}\n", same_property, r.property,
                    same_step ? ", one at the model's step" : "");
    if (!out_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(out_dir, ec);
        if (!write_file(std::filesystem::path(out_dir) / "slots.csv", shesha::sim::slots_csv(run.slots, m), false)) {
            spdlog::error("cannot write {}/slots.csv", out_dir);
            return 1;
        }
    }
    return m.violations.empty() ? 0 : 1;
}

// The training backend where this build has libtorch, else nullptr (a training scenario is refused).
const shesha::sim::TrainingBackend* training_backend() {
#ifdef SHESHA_SIM_TORCH
    return &shesha::sim::torch_training_backend();
#else
    return nullptr;
#endif
}

int measure(const std::vector<std::string>& paths, std::uint32_t rollouts) {
    const shesha::sim::TrainingBackend* backend = training_backend();
    if (backend == nullptr) {
        spdlog::error("--measure-compute needs libtorch, and this shesha-sim was built without it (meson setup -Dtorch=enabled)");
        return 2;
    }
    for (const std::string& path : paths) {
        shesha::drl::ClusterConfig config;
        try {
            config = shesha::drl::load_cluster_config(path);
        } catch (const std::exception& e) {
            spdlog::error("{}", e.what());
            return 2;
        }
        const shesha::sim::ComputeCost c = shesha::sim::measure_compute(config, *backend, rollouts);
        std::printf("%s: %s, n_steps %u: %.2f us per environment step (act + step, %llu steps), %.2f us per gradient "
                    "(%llu rollouts)\n  --set training.step_us=%.1f --set training.update_us=%.1f\n",
                    path.c_str(), config.model.env_name.c_str(), config.a3c.n_steps, c.step_us,
                    static_cast<unsigned long long>(c.steps), c.update_us, static_cast<unsigned long long>(c.updates),
                    c.step_us, c.update_us);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"shesha-sim: discrete-event simulator of Shesha clusters (real queue and transport code)"};
    std::string config_path;
    std::vector<std::string> overrides;
    std::string out_dir;
    std::string label = "run";
    bool append = false;
    bool quiet = false;
    std::string aggregation, window, feedback;
    std::string replay_path;
    std::string log_level = "info";
    app.add_option("-c,--config", config_path, "scenario YAML (configs/sim-*.yaml); defaults apply without it");
    app.add_option("-s,--set", overrides, "override a scenario key: section.key=value (repeatable)");
    app.add_option("--aggregation", aggregation, "shortcut for queue.aggregation")->check(CLI::IsMember({"on", "off"}));
    app.add_option("--window", window, "shortcut for transport.window_control")->check(CLI::IsMember({"on", "off"}));
    app.add_option("--feedback", feedback, "shortcut for transport.switch_feedback")->check(CLI::IsMember({"on", "off"}));
    app.add_option("-o,--out-dir", out_dir, "write summary.csv, clusters.csv and series.csv here (with --replay: slots.csv)");
    app.add_option("-l,--label", label, "label written in every CSV row");
    app.add_flag("--append", append, "append rows to existing CSVs in --out-dir (for sweeps)");
    app.add_flag("-q,--quiet", quiet, "no summary on stdout");
    auto* replay_opt = app.add_option("--replay", replay_path,
                                      "replay a per-slot workload (a shesha-verify counterexample JSON) in the "
                                      "slotted mode and measure its bounds");
    std::string scheduling;
    app.add_option("--scheduling", scheduling,
                   "with --replay: the switch port's scheduling, fifo or drr (per-cluster fair shares); default: "
                   "the file's (fifo if it names none)")
        ->check(CLI::IsMember({"fifo", "drr"}))
        ->needs(replay_opt);
    replay_opt->excludes("--config")->excludes("--set")->excludes("--aggregation")->excludes("--window")
        ->excludes("--feedback")->excludes("--append");
    std::vector<std::string> measure_paths;
    std::uint32_t measure_rollouts = 2000;
    auto* measure_opt = app.add_option("--measure-compute", measure_paths,
                                       "measure this machine's training.step_us and training.update_us for these cluster "
                                       "YAMLs (needs libtorch) and exit");
    app.add_option("--rollouts", measure_rollouts, "with --measure-compute: rollouts timed per cluster")
        ->check(CLI::Range(1u, 10'000'000u))->needs(measure_opt);
    measure_opt->excludes(replay_opt)->excludes("--config")->excludes("--set");
    shesha::logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help exits 0; a wrong flag is bad input and exits 2, like a bad file.
        return app.exit(e) == 0 ? 0 : 2;
    }
    shesha::logging::init("shesha-sim", log_level);
    if (!replay_path.empty()) return replay(replay_path, out_dir, quiet, scheduling);
    if (!measure_paths.empty()) return measure(measure_paths, measure_rollouts);

    if (!aggregation.empty()) overrides.push_back("queue.aggregation=" + aggregation);
    if (!window.empty()) overrides.push_back("transport.window_control=" + window);
    if (!feedback.empty()) overrides.push_back("transport.switch_feedback=" + feedback);

    shesha::sim::Scenario scenario;
    try {
        scenario = config_path.empty() ? shesha::sim::load_scenario("", "defaults", overrides)
                                       : shesha::sim::load_scenario_file(config_path, overrides);
    } catch (const shesha::sim::ConfigError& e) {
        spdlog::error("{}", e.what());
        return 2;
    }

    std::unique_ptr<shesha::sim::Simulator> sim_ptr;
    try {
        sim_ptr = std::make_unique<shesha::sim::Simulator>(scenario, training_backend());
    } catch (const shesha::sim::ConfigError& e) {
        spdlog::error("{}", e.what());
        return 2;
    }
    shesha::sim::Simulator& sim = *sim_ptr;
    if (!quiet && scenario.training())
        sim.on_evaluation([](const shesha::sim::TrainingPoint& p, double wall_s) {
            std::printf("t %8.3f s virtual  cluster %u  version %7u  env steps %10llu  eval mean %8.1f min %8.1f  "
                        "(wall %.1f s)\n", p.t_s, p.cluster, p.version, static_cast<unsigned long long>(p.env_steps),
                        p.eval_mean_return, p.eval_min_return, wall_s);
            std::fflush(stdout);
        });
    const shesha::sim::Summary r = sim.run();

    if (!quiet) {
        std::printf("%s: %u workers in %u clusters, %.1f ms simulated in %.3f s wall (%.2f M packet-hops/s)\n",
                    r.arm.c_str(), r.workers, r.clusters, r.sim_end_ms, r.wall_s, r.packets_per_wall_s / 1e6);
        std::printf("  contributions sent %llu = applied %llu + dropped %llu; merges %llu, bytes saved %llu, drops %llu\n",
                    static_cast<unsigned long long>(r.contributions_sent), static_cast<unsigned long long>(r.contributions_applied),
                    static_cast<unsigned long long>(r.contributions_dropped), static_cast<unsigned long long>(r.merges),
                    static_cast<unsigned long long>(r.bytes_saved), static_cast<unsigned long long>(r.drops));
        std::printf("  AoM mean %.1f us, peak %.1f us; staleness mean %.3f max %u; Jain %.4f; verify failures %llu\n",
                    r.aom_mean_us, r.aom_peak_us, r.staleness_mean, r.staleness_max, r.jain_fairness,
                    static_cast<unsigned long long>(r.verify_failures));
        if (r.staleness_split)
            std::printf("  staleness: %.3f versions behind the published model at generation, %.3f published during the trip\n",
                        r.staleness_at_generation_mean, r.staleness_mean - r.staleness_at_generation_mean);
        const auto& m = r.model;
        std::printf("  learner port: up %.1f MB (utilisation %.3f), down %.1f MB (utilisation %.3f: MODEL %.1f MB, CREDIT %.1f MB)\n",
                    static_cast<double>(m.up_bytes) / 1e6, m.up_utilisation, static_cast<double>(m.down_bytes) / 1e6,
                    m.down_utilisation, static_cast<double>(m.down_model_bytes) / 1e6,
                    static_cast<double>(m.down_credit_bytes) / 1e6);
        if (r.model_delivery != "none")
            std::printf("  model (%s): %llu versions published; chunks sent %llu unicast (%llu answering requests) + %llu to groups; "
                        "lost at the learner's send queue %llu MODEL, %llu CREDIT; MODEL waited for room in it %llu times; "
                        "CREDIT waited there %.1f us mean, %.1f us max; "
                        "adopted %llu, publish to adoption mean %.1f us "
                        "max %.1f us; model age at workers %.1f us; %u workers without a model; verify failures %llu\n",
                        r.model_delivery.c_str(), static_cast<unsigned long long>(m.versions_published),
                        static_cast<unsigned long long>(m.unicast_chunks), static_cast<unsigned long long>(m.answer_chunks),
                        static_cast<unsigned long long>(m.group_chunks),
                        static_cast<unsigned long long>(m.learner_nic_model_drops),
                        static_cast<unsigned long long>(m.learner_nic_credit_drops),
                        static_cast<unsigned long long>(m.sends_deferred), m.credit_wait_mean_us, m.credit_wait_max_us,
                        static_cast<unsigned long long>(m.versions_adopted), m.delivery_mean_us, m.delivery_max_us,
                        m.model_age_mean_us, m.workers_without_model, static_cast<unsigned long long>(m.verify_failures));
        // The switches' own counters (the pipeline's tables, named as in shesha-switch's stats).
        std::string counters;
        for (std::size_t i = 0; i < shesha::core::SwitchCounters::kSize; ++i) {
            const auto& n = shesha::core::kSwitchCounterNames[i];
            if (r.switch_counters.values[i] != 0 && n.section != "internal")
                counters += fmt::format("{}{}.{} {}", counters.empty() ? "" : ", ", n.section, n.key, r.switch_counters.values[i]);
        }
        for (std::size_t i = 0; i < shesha::core::PortCounters::kSize; ++i)
            if (r.switch_port_counters.values[i] != 0)
                counters += fmt::format(", {} {}", shesha::core::kPortCounterNames[i].key, r.switch_port_counters.values[i]);
        std::printf("  switch counters: %s\n", counters.c_str());
        for (std::size_t c = 0; c < r.training.size(); ++c) {
            const auto& t = r.training[c];
            std::printf("  training cluster %zu (%s, %zu parameters in %u chunks): %llu env steps, %llu gradients, learner "
                        "applied %llu chunks (%llu contributions, %llu refused), version %u; eval best %.1f last %.1f (%u evaluations)",
                        c, t.env.c_str(), t.parameters, t.chunks, static_cast<unsigned long long>(t.env_steps),
                        static_cast<unsigned long long>(t.gradients_computed), static_cast<unsigned long long>(t.chunks_applied),
                        static_cast<unsigned long long>(t.contributions_applied),
                        static_cast<unsigned long long>(t.contributions_refused), t.version, t.best_eval_mean,
                        t.last_eval_mean, t.evaluations);
            if (t.has_target) {
                if (t.reached)
                    std::printf("; target %g reached at %.3f s virtual (%llu env steps, version %u)", t.target,
                                t.seconds_to_target, static_cast<unsigned long long>(t.env_steps_to_target), t.version_at_target);
                else
                    std::printf("; target %g not reached", t.target);
            }
            std::printf("\n");
        }
        if (!r.training.empty())
            std::printf("  wall: %.2f s, of which %.2f s rollouts, gradients and evaluations (libtorch, envs); %.1f us wall per "
                        "simulated gradient\n", r.wall_s, r.compute_wall_s,
                        r.updates ? r.wall_s * 1e6 / static_cast<double>(r.updates) : 0.0);
        for (int h = 0; h < shesha::sim::kHopLevels; ++h) {
            const auto& x = r.hops[h];
            if (x.ports == 0) continue;
            std::printf("  %-12s ports %5u depth mean %8.2f max %6llu sojourn mean %9.2f us max %9.2f us merges %llu drops %llu\n",
                        shesha::sim::to_string(static_cast<shesha::sim::HopLevel>(h)), x.ports, x.depth_mean,
                        static_cast<unsigned long long>(x.depth_max), x.sojourn_mean_us, x.sojourn_max_us,
                        static_cast<unsigned long long>(x.merges), static_cast<unsigned long long>(x.drops));
        }
    }
    if (!out_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(out_dir, ec);
        const std::filesystem::path dir(out_dir);
        const bool ok = write_file(dir / "summary.csv",
                                   shesha::sim::summary_csv_header() + shesha::sim::summary_csv_row(label, scenario, r), append) &&
                        write_file(dir / "clusters.csv", shesha::sim::cluster_csv(label, r), append) &&
                        write_file(dir / "series.csv", shesha::sim::series_csv(label, sim.series()), append) &&
                        (r.training.empty() ||
                         (write_file(dir / "training.csv", shesha::sim::training_csv(label, r), append) &&
                          write_file(dir / "curve.csv", shesha::sim::training_curve_csv(label, r), append)));
        if (!ok) {
            spdlog::error("cannot write CSVs under {}", out_dir);
            return 1;
        }
    }
    // Broken conservation or inexact sums would be simulator (or queue) bugs: fail loudly.
    if (r.contributions_sent != r.contributions_applied + r.contributions_dropped + r.contributions_refused || r.verify_failures != 0 ||
        r.learner_rejects != 0 || r.model.verify_failures != 0) {
        spdlog::error("invariant violated (conservation, exact sums, or a model adopted that was not the one published)");
        return 3;
    }
    return 0;
}
