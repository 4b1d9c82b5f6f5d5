// shesha-switch: the Shesha top-of-rack switch. Parses the command line and the YAML config
// before touching DPDK (so --help and config errors need no privileges), then initialises EAL,
// the ports and the Switch, runs the lcore loops until --duration, SIGINT or SIGTERM, and reports.
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mempool.h>
#include <spdlog/spdlog.h>

#include "init.h"
#include "lcore_loops.h"
#include "log_level.h"
#include "prometheus.h"
#include "stats.h"
#include "switch.h"
#include "switch_config.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;  // bad flags or bad configuration

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig) { g_signal = sig; }

struct Options {
    std::string config_path;
    std::optional<double> duration_s;
    std::optional<std::string> stats_json;
    std::string prometheus_textfile;         // empty: none
    double prometheus_interval_s = 5.0;
    std::optional<std::string> aggregation;  // on|off
    std::optional<std::string> feedback;     // on|off
    std::optional<std::string> scheduling;
    std::string log_level = "info";
    std::vector<std::string> eal_extra;      // everything after "--"
};

int usage_error(const std::string& message) {
    std::fprintf(stderr, "shesha-switch: error: %s (see shesha-switch --help)\n", message.c_str());
    return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace shesha;

    // Everything after "--" goes to EAL untouched; CLI11 sees only what comes before.
    Options opt;
    int cli_argc = argc;
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--") {
            cli_argc = i;
            for (int j = i + 1; j < argc; ++j) opt.eal_extra.emplace_back(argv[j]);
            break;
        }
    }

    CLI::App app{"DPDK top-of-rack switch that merges compatible RL gradient packets in its egress queues.\n"
                 "Usage: shesha-switch -c FILE [OPTIONS] [-- EXTRA_EAL_ARGS...]",
                 "shesha-switch"};
    // Required by hand after parsing, so an unknown flag is reported as such rather than as a missing -c.
    app.add_option("-c,--config", opt.config_path, "YAML configuration file (required; see configs/ and docs/switch.md)");
    app.add_option("--duration", opt.duration_s, "stop after this many seconds (default: run until SIGINT/SIGTERM)")
        ->check(CLI::PositiveNumber);
    app.add_option("--stats-json", opt.stats_json, "write final statistics as JSON to FILE (overrides stats.json)");
    auto* prom_file = app.add_option("--prometheus-textfile", opt.prometheus_textfile,
                                     "keep a node_exporter textfile-collector file (*.prom) with every counter up to "
                                     "date, rewritten atomically every --prometheus-interval seconds and at exit");
    app.add_option("--prometheus-interval", opt.prometheus_interval_s, "seconds between textfile updates (default 5)")
        ->check(CLI::Range(0.1, 86400.0))
        ->needs(prom_file);
    app.add_option("--aggregation", opt.aggregation, "in-network gradient merging (overrides aggregation.enabled)")
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--feedback", opt.feedback, "FEEDBACK to senders of marked gradients (overrides feedback.enabled)")
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--scheduling", opt.scheduling,
                   "auto, fifo, or drr: per-cluster fair shares of updates on every port; auto: drr when aggregation "
                   "is on and two or more clusters aggregate (overrides aggregation.scheduling)")
        ->check(CLI::IsMember({"auto", "fifo", "drr"}));
    shesha::logging::add_log_level_option(app, opt.log_level);
    try {
        app.parse(cli_argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return kExitOk;
    } catch (const CLI::ParseError& e) {
        return usage_error(e.what());
    }
    if (opt.config_path.empty()) return usage_error("a configuration file is required: -c FILE");

    spdlog::set_level(shesha::logging::to_level(opt.log_level));

    core::SwitchConfig cfg;
    try {
        cfg = core::load_switch_config(opt.config_path);
    } catch (const core::ConfigError& e) {
        std::fprintf(stderr, "shesha-switch: config error: %s\n", e.what());
        return kExitUsage;
    }
    if (opt.stats_json) cfg.stats_json = *opt.stats_json;
    if (!opt.prometheus_textfile.empty()) {
        std::string error;
        if (!prom::check_textfile_path(opt.prometheus_textfile, error))
            return usage_error("--prometheus-textfile: " + error);
    }
    // The textfile's switch label: the config's file name without .yaml (systemd: the instance).
    const std::string switch_name = std::filesystem::path(opt.config_path).stem().string();
    if (opt.aggregation) cfg.aggregation = *opt.aggregation == "on";
    if (opt.feedback) cfg.feedback = *opt.feedback == "on";
    if (opt.scheduling) {
        cfg.scheduling_auto = *opt.scheduling == "auto";
        if (!cfg.scheduling_auto) cfg.scheduling = *opt.scheduling == "drr" ? core::Scheduling::Drr : core::Scheduling::Fifo;
    }
    core::resolve_scheduling(cfg);  // auto follows --aggregation too

    const std::vector<std::string> eal_args = sw::build_eal_args(cfg, opt.eal_extra);
    spdlog::info("EAL arguments: {}", fmt::join(eal_args, " "));
    try {
        std::string error;
        if (!sw::init_eal(eal_args, error)) {
            std::fprintf(stderr, "shesha-switch: %s (needs root or CAP_SYS_ADMIN/CAP_NET_RAW)\n", error.c_str());
            return kExitRuntime;
        }
    } catch (const sw::InitError& e) {
        std::fprintf(stderr, "shesha-switch: %s\n", e.what());
        return kExitRuntime;
    }

    int rc = kExitOk;
    std::vector<std::uint16_t> port_ids;
    rte_mempool* pool = nullptr;
    try {
        pool = sw::create_mbuf_pool(cfg);
        port_ids = sw::attach_and_setup_ports(cfg, pool);
        // Frames that arrived while the ports were set up are stale, except on a pcap port: there
        // the capture is the input (shesha-bench, the trace-equivalence test).
        std::vector<std::uint16_t> live_ports;
        for (std::size_t i = 0; i < port_ids.size(); ++i)
            if (!cfg.ports[i].device.starts_with("net_pcap")) live_ports.push_back(port_ids[i]);
        if (const std::uint64_t n = sw::discard_startup_frames(live_ports); n != 0)
            spdlog::info("discarded {} frame(s) received while the ports were being set up", n);

        sw::Switch the_switch(cfg, port_ids, pool, rte_get_tsc_hz());
        if (cfg.telemetry && !sw::register_telemetry(&the_switch))
            spdlog::warn("some /shesha/* telemetry commands could not be registered");

        struct sigaction sa{};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);

        const std::uint64_t hz = rte_get_tsc_hz();
        const std::uint64_t start = rte_rdtsc();
        const std::uint64_t deadline =
            opt.duration_s ? start + static_cast<std::uint64_t>(*opt.duration_s * static_cast<double>(hz)) : 0;
        const std::uint64_t stats_every = std::uint64_t{cfg.stats_interval_s} * hz;
        std::uint64_t next_stats = start + stats_every;
        sw::SwitchSnapshot prev = the_switch.snapshot(start);
        const bool prometheus = !opt.prometheus_textfile.empty();
        const auto prom_every = static_cast<std::uint64_t>(opt.prometheus_interval_s * static_cast<double>(hz));
        std::uint64_t next_prom = start + prom_every;
        bool prom_error_logged = false;
        auto write_prometheus = [&](const sw::SwitchSnapshot& snap) {
            std::string error;
            if (prom::write_textfile(opt.prometheus_textfile, sw::stats_to_prometheus(snap, cfg, switch_name), error)) {
                prom_error_logged = false;
                return true;
            }
            if (!prom_error_logged) spdlog::error("prometheus textfile: {}", error);
            prom_error_logged = true;  // once per failure streak, not every interval
            return false;
        };
        if (prometheus) write_prometheus(prev);

        spdlog::info("shesha-switch running: {} port(s), {} lcore(s), aggregation {}, feedback {}, scheduling {}{}{}",
                     port_ids.size(), cfg.lcores, cfg.aggregation ? "on" : "off", cfg.feedback ? "on" : "off",
                     cfg.scheduling == core::Scheduling::Drr ? "drr" : "fifo", cfg.scheduling_auto ? " (auto)" : "",
                     opt.duration_s ? fmt::format(", for {} s", *opt.duration_s) : std::string());
        auto control = [&](std::uint64_t now) {
            if (g_signal != 0) {
                spdlog::info("signal {} received, stopping", static_cast<int>(g_signal));
                return false;
            }
            if (deadline != 0 && now >= deadline) return false;
            if (stats_every != 0 && now >= next_stats) {
                next_stats += stats_every;
                sw::SwitchSnapshot cur = the_switch.snapshot(now);
                spdlog::info("{}", sw::format_rate_line(cur, prev));
                prev = std::move(cur);
            }
            if (prometheus && now >= next_prom) {
                next_prom = now + prom_every;
                write_prometheus(the_switch.snapshot(now));
            }
            return true;
        };
        sw::run_switch(the_switch, control, std::max<std::uint64_t>(hz / 1000, 1));

        sw::unregister_telemetry();
        the_switch.drain();
        const sw::SwitchSnapshot final_stats = the_switch.snapshot(rte_rdtsc());
        std::fputs(sw::format_summary(final_stats).c_str(), stdout);
        std::fflush(stdout);
        if (prometheus) {
            if (write_prometheus(final_stats)) spdlog::info("prometheus textfile written to {}", opt.prometheus_textfile);
            else rc = kExitRuntime;
        }
        if (!cfg.stats_json.empty()) {
            std::string error;
            if (sw::write_stats_json(cfg.stats_json, final_stats, cfg, error)) {
                spdlog::info("statistics written to {}", cfg.stats_json);
            } else {
                spdlog::error("{}", error);
                rc = kExitRuntime;
            }
        }
    } catch (const core::ConfigError& e) {
        std::fprintf(stderr, "shesha-switch: config error: %s\n", e.what());
        rc = kExitUsage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "shesha-switch: %s\n", e.what());
        rc = kExitRuntime;
    }
    sw::unregister_telemetry();
    sw::stop_ports(port_ids);
    if (pool != nullptr) rte_mempool_free(pool);
    // EAL leaves its runtime directory (/var/run/dpdk/<file-prefix>: config, telemetry socket)
    // behind; a stopped switch owns nothing there, so remove it rather than accumulate one per run.
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    if (!runtime_dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(runtime_dir, ec);
    }
    return rc;
}
