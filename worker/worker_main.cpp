// shesha-worker: one A3C actor of a DRL cluster. Runs its environment with the latest model it
// adopted, computes n-step actor-critic gradients (rl/), and sends them as GRADIENT chunks under
// the Shesha transport (CreditSender: credit window, DCTCP-style cuts from CE echoes and switch
// FEEDBACK, sender-side merge while out of credit). Receives MODEL chunks and adopts a version once
// complete (ModelReceiver), asks for the model while it has none or the learner fell silent, and
// follows a restarted learner (new incarnation) without restarting itself. README, docs/aom.md.
//
// Exit status: 0 normal end (duration or signal), 1 runtime error, 2 bad command line or config.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <numeric>
#include <optional>

#include "cluster_config.h"
#include "drl_wire.h"
#include "envs/registry.h"
#include "json_io.h"
#include "log_level.h"
#include "model.h"
#include "model_receiver.h"
#include "update_budget.h"
#include "clock.h"
#include "stop_signal.h"
#include "udp.h"
#include "shesha/transport.h"

namespace shesha::drl {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
constexpr int kReceiveBurst = 256;
constexpr std::size_t kMaxWindowSamples = 20'000;
constexpr std::size_t kRecentEpisodes = 20;

struct Options {
    std::string config_path;
    std::uint32_t cluster = 0;
    std::uint32_t worker_id = 0;
    std::string learner;
    std::optional<std::uint16_t> port;
    std::string bind = "0.0.0.0";
    double duration_s = 0;
    std::string metrics;
    std::optional<std::uint64_t> seed;
    bool quiet = false;
    // Off: no reaction to congestion marks (CE echoes in CREDITs) or switch FEEDBACK; the window
    // starts at w_max and only credits clock the sending. The lab's baseline arms use it.
    bool congestion_control = true;
};

struct WindowSample {
    double t = 0;
    double window = 0;
    std::uint32_t in_flight = 0;
    std::uint32_t pending = 0;
};

struct WorkerStats {
    std::uint64_t env_steps = 0;
    std::uint64_t episodes = 0;
    std::deque<double> recent_returns;
    double best_return = 0;
    std::uint64_t gradients_computed = 0;
    std::uint64_t gradients_failed = 0;
    std::uint64_t waits_for_model = 0;     // loop passes without a model to compute on
    std::uint64_t waits_for_version = 0;   // max_updates_per_version reached
    std::uint64_t budget_refills = 0;      // ... and refilled by a resend of the same version
    std::uint64_t wait_ns = 0;             // wall time blocked for traffic with nothing to compute
    std::uint64_t lag_samples = 0;
    double lag_sum = 0;
    std::uint32_t lag_max = 0;
    std::vector<WindowSample> window;
};

std::string metrics_json(const Options& o, const WorkerStats& s, const WorkerCounters& c, double wall_s, bool final) {
    json::Json j = json::Json::object();
    j["worker_id"] = o.worker_id;
    j["cluster_id"] = o.cluster;
    j["final"] = final;
    j["congestion_control"] = o.congestion_control;
    j["feedback_ignored"] = c.feedback_ignored;
    j["marks_ignored"] = c.marks_ignored;
    j["wall_seconds"] = wall_s;
    j["env_steps"] = s.env_steps;
    j["env_steps_per_s"] = wall_s > 0 ? static_cast<double>(s.env_steps) / wall_s : 0.0;
    j["episodes"] = json::Json::object();
    j["episodes"]["count"] = s.episodes;
    j["episodes"]["recent_mean_return"] =
        s.recent_returns.empty() ? 0.0
                                 : std::accumulate(s.recent_returns.begin(), s.recent_returns.end(), 0.0) /
                                       static_cast<double>(s.recent_returns.size());
    j["episodes"]["best_return"] = s.best_return;
    j["episodes"]["recent_returns"] = json::Json::array();
    for (double r : s.recent_returns) j["episodes"]["recent_returns"].push_back(r);
    j["updates"] = json::Json::object();
    j["updates"]["computed"] = s.gradients_computed;
    j["updates"]["failed"] = s.gradients_failed;
    j["updates"]["offered"] = c.updates_offered;
    j["updates"]["rejected"] = c.updates_rejected;
    j["updates"]["waits_for_model"] = s.waits_for_model;
    j["updates"]["waits_for_version"] = s.waits_for_version;
    j["updates"]["budget_refills"] = s.budget_refills;
    j["updates"]["wait_seconds"] = static_cast<double>(s.wait_ns) / 1e9;
    j["chunks"] = json::Json::object();
    j["chunks"]["queued"] = c.chunks_queued;
    j["chunks"]["merged_locally"] = c.sender_merges;
    j["chunks"]["dropped_overflow"] = c.chunks_dropped_overflow;
    j["chunks"]["replaced_stale"] = c.chunks_replaced_stale;
    j["chunks"]["sent"] = c.chunks_sent;
    j["chunks"]["contributions_sent"] = c.contributions_sent;
    j["chunks"]["send_errors"] = c.send_errors;
    j["credit"] = json::Json::object();
    j["credit"]["messages"] = c.credit_messages;
    j["credit"]["units"] = c.credits_received;
    j["credit"]["excess"] = c.credits_excess;
    j["credit"]["banked"] = c.banked;           // kept units not yet spent (transport.bank_excess)
    j["credit"]["banked_total"] = c.credits_banked;
    j["credit"]["prepaid_chunks"] = c.chunks_prepaid;
    j["credit"]["marks_echoed"] = c.ce_echoes;
    j["credit"]["timeouts"] = c.credit_timeouts;
    j["credit"]["presumed_lost"] = c.chunks_presumed_lost;
    j["credit"]["expired"] = c.chunks_expired;  // of those, by flight expiry (transport.flight_expiry_rtts)
    j["credit"]["ack_rtt_us"] = static_cast<double>(c.ack_rtt_ns) / 1e3;
    j["credit"]["flight_expiry_us"] = static_cast<double>(c.flight_expiry_ns) / 1e3;
    j["credit"]["feedback"] = c.feedback_received;
    j["credit"]["feedback_reductions"] = c.feedback_reductions;
    j["credit"]["round_reductions"] = c.round_reductions;
    j["credit"]["round_increases"] = c.round_increases;
    j["credit"]["slow_start_increases"] = c.slow_start_increases;  // of those, doublings (transport.slow_start)
    j["window"] = json::Json::object();
    j["window"]["current"] = c.window;
    j["window"]["alpha"] = c.alpha;
    j["window"]["in_flight"] = c.in_flight;
    j["window"]["samples"] = json::Json::array();  // [seconds, window, in flight, pending chunks]
    for (const WindowSample& w : s.window) j["window"]["samples"].push_back({w.t, w.window, w.in_flight, w.pending});
    j["model"] = json::Json::object();
    j["model"]["has_model"] = c.model_version != 0 || c.models_adopted != 0;
    j["model"]["version"] = c.model_version;
    j["model"]["incarnation"] = c.incarnation;
    j["model"]["learner_version"] = c.learner_version;
    j["model"]["versions_adopted"] = c.models_adopted;
    j["model"]["chunks_staged"] = c.model_chunks_staged;
    j["model"]["chunks_stale"] = c.model_chunks_stale;
    j["model"]["chunks_duplicate"] = c.model_chunks_duplicate;
    j["model"]["chunks_rejected"] = c.model_chunks_rejected;
    j["model"]["assemblies_abandoned"] = c.model_assemblies_abandoned;
    j["model"]["learner_restarts"] = c.learner_restarts;
    j["model"]["requests_sent"] = c.model_requests;
    j["model"]["resends"] = c.model_resends;
    j["model"]["lag_mean"] = s.lag_samples ? s.lag_sum / static_cast<double>(s.lag_samples) : 0.0;
    j["model"]["lag_max"] = s.lag_max;
    j["rx"] = json::Json::object();
    j["rx"]["datagrams"] = c.datagrams;
    j["rx"]["decode_errors"] = c.decode_errors;
    j["rx"]["unexpected"] = c.unexpected;
    j["rx"]["foreign"] = c.foreign;
    j["rx"]["learner_restarts_seen"] = c.learner_restarts_seen;
    return json::pretty(j);
}

int run(const Options& o) {
    ClusterConfig config;
    try {
        config = load_cluster_config(o.config_path);
    } catch (const ConfigError& e) {
        spdlog::error("{}", e.what());
        return kExitUsage;
    }
    const auto learner_ip = net::parse_ipv4(o.learner);
    if (!learner_ip) {
        fmt::print(stderr, "shesha-worker: --learner: not an IPv4 address: '{}'\n", o.learner);
        return kExitUsage;
    }
    const auto bind_ip = net::parse_ipv4(o.bind);
    if (!bind_ip) {
        fmt::print(stderr, "shesha-worker: --bind: not an IPv4 address: '{}'\n", o.bind);
        return kExitUsage;
    }
    if (!o.metrics.empty() && o.metrics != "-") {
        // Refuse an unwritable metrics path now rather than failing every second later. "a"
        // creates the file if needed and leaves an existing one as it is until the first write.
        std::FILE* f = std::fopen(o.metrics.c_str(), "a");
        if (f == nullptr) {
            fmt::print(stderr, "shesha-worker: --metrics: cannot write {}: {}\n", o.metrics, std::strerror(errno));
            return kExitUsage;
        }
        std::fclose(f);
    }
    const std::uint64_t base_seed = o.seed.value_or(config.seed);
    const auto cluster_id = static_cast<std::uint16_t>(o.cluster);
    std::string error;
    auto model = rl::ActorCritic::create(config.model, worker::envs::derive_worker_seed(base_seed, o.worker_id), &error);
    if (!model) {
        spdlog::error("{}: model: {}", o.config_path, error);
        return kExitUsage;
    }
    const std::size_t n_params = model->parameter_count();
    WorkerOptions wo;
    wo.config_path = o.config_path;
    wo.cluster_id = cluster_id;
    wo.worker_id = o.worker_id;
    wo.learner_address = o.learner;
    wo.learner_port = o.port.value_or(0);
    wo.bind_address = o.bind;
    wo.model_elems = static_cast<std::uint32_t>(n_params);
    wo.congestion_control = o.congestion_control;
    std::unique_ptr<WorkerTransport> transport_ptr;
    try {
        transport_ptr = std::make_unique<WorkerTransport>(wo);
    } catch (const Error& e) {
        spdlog::error("{}", e.what());
        return std::string_view(e.what()).find("transport:") != std::string_view::npos ? kExitUsage : kExitRuntime;
    }
    WorkerTransport& transport = *transport_ptr;
    auto env = worker::envs::make_environment(config.model.env_name);
    worker::envs::Rng rng(worker::envs::derive_worker_seed(base_seed, o.worker_id));
    stop_signal::install();

    WorkerStats s;
    std::vector<float> gradient(n_params);
    rl::Rollout rollout;
    worker::envs::Observation observation = env->reset(rng);
    double episode_return = 0;
    drl::UpdateBudget budget(config.worker.max_updates_per_version);
    Model adopted;

    const std::uint64_t start = clock::monotonic_ns();
    const auto wall = [&] { return static_cast<double>(clock::monotonic_ns() - start) / 1e9; };
    const std::uint64_t sample_period = std::uint64_t{config.worker.metrics_interval_ms} * 1'000'000;
    std::uint64_t next_sample = start;
    std::uint64_t next_write = start + 1'000'000'000;  // the metrics file: once a second

    const auto write_metrics = [&](bool final) {
        if (o.metrics.empty()) return;
        std::string err;
        if (!json::write_text_file(o.metrics, metrics_json(o, s, transport.counters(), wall(), final), err))
            spdlog::warn("{}", err);
    };
    fmt::print("shesha-worker {}: cluster {}, {} on {}, learner {}:{}\n", o.worker_id, cluster_id, config.model.env_name,
               o.bind, o.learner, o.port.value_or(config.udp_port));
    std::fflush(stdout);

    while (!stop_signal::requested() && (o.duration_s <= 0 || wall() < o.duration_s)) {
        if (!budget.can_compute() && budget.refill_if_resent(transport.counters().model_resends)) ++s.budget_refills;
        const bool can_compute = transport.has_model() && budget.can_compute();
        // Receive everything waiting (MODEL, CREDIT, FEEDBACK), run the timers, send what the
        // window allows; wait a little for traffic when there is nothing to compute.
        if (can_compute) {
            transport.poll(0);
        } else {
            const std::uint64_t wait_start = clock::monotonic_ns();
            transport.poll(1);
            s.wait_ns += clock::monotonic_ns() - wait_start;
        }
        if (transport.take_model(adopted)) {
            model->set_parameters(adopted.parameters);
            budget.on_adopted();
        }
        const std::uint64_t now = clock::monotonic_ns();
        if (now >= next_sample) {
            next_sample = now + sample_period;
            if (s.window.size() < kMaxWindowSamples) {
                const WorkerCounters c = transport.counters();
                s.window.push_back({wall(), c.window, c.in_flight, c.pending_chunks});
            }
        }
        if (now >= next_write) {
            next_write = now + 1'000'000'000;
            write_metrics(false);
        }

        if (!transport.has_model()) {
            ++s.waits_for_model;
            continue;
        }
        if (!can_compute) {
            ++s.waits_for_version;
            continue;
        }
        // One n-step rollout on the adopted model (as rl/a3c_trainer.cpp's Actor::run_once).
        rollout.clear();
        bool episode_over = false;
        while (rollout.steps() < config.a3c.n_steps && !episode_over) {
            const auto obs = observation.view();
            const rl::PolicyDecision decision = model->act(obs, rng, false);
            const auto result = env->step(decision.env_action);
            rollout.observations.insert(rollout.observations.end(), obs.begin(), obs.end());
            rollout.actions.push_back(decision.sampled);
            rollout.rewards.push_back(static_cast<float>(result.reward));
            episode_return += result.reward;
            observation = result.observation;
            ++s.env_steps;
            if (result.terminated || result.truncated) {
                episode_over = true;
                rollout.terminated = result.terminated;
            }
        }
        const auto last = observation.view();
        rollout.bootstrap_observation.assign(last.begin(), last.end());
        if (episode_over) {
            ++s.episodes;
            s.recent_returns.push_back(episode_return);
            if (s.recent_returns.size() > kRecentEpisodes) s.recent_returns.pop_front();
            s.best_return = std::max(s.best_return, episode_return);
            episode_return = 0;
            observation = env->reset(rng);
        }
        if (!model->compute_gradient(rollout, config.a3c.loss, gradient)) {
            ++s.gradients_failed;
            continue;
        }
        ++s.gradients_computed;
        budget.on_update(transport.counters().model_resends);
        const std::uint32_t learner_version = transport.learner_version();
        const std::uint32_t lag = serial_after(learner_version, adopted.version) ? learner_version - adopted.version : 0;
        ++s.lag_samples;
        s.lag_sum += lag;
        s.lag_max = std::max(s.lag_max, lag);
        try {
            transport.send(adopted.version, gradient, static_cast<std::uint32_t>(s.env_steps));
        } catch (const Error&) {
            ++s.gradients_failed;  // a non-finite gradient: refused by the sender, counted there too
        }
    }
    write_metrics(true);
    if (!o.quiet) {
        const WorkerCounters c = transport.counters();
        fmt::print("shesha-worker {}: {} env steps, {} episodes, {} updates, {} chunks sent ({} merged locally), "
                   "model version {} ({} adopted)\n",
                   o.worker_id, s.env_steps, s.episodes, s.gradients_computed, c.chunks_sent, c.sender_merges,
                   c.model_version, c.models_adopted);
    }
    return 0;
}

}  // namespace
}  // namespace shesha::drl

int main(int argc, char** argv) {
    shesha::drl::Options o;
    CLI::App app{"shesha-worker: an A3C actor sending gradients over the Shesha protocol"};
    app.add_option("--config", o.config_path, "cluster YAML (configs/cluster-*.yaml)")->required()->check(CLI::ExistingFile);
    app.add_option("--cluster", o.cluster, "cluster id on the wire")->required()->check(CLI::Range(0, 65535));
    app.add_option("--worker-id", o.worker_id, "this worker's id (unique in the cluster)")->required();
    app.add_option("--learner", o.learner, "learner IPv4 address")->required();
    app.add_option("--port", o.port, "learner UDP port (default: the config's udp_port)")->check(CLI::Range(1, 65535));
    app.add_option("--bind", o.bind, "local IPv4 address")->capture_default_str();
    app.add_option("--duration", o.duration_s, "stop after this many seconds (0: until a signal)")->check(CLI::Range(0.0, 1e7));
    app.add_option("--metrics", o.metrics, "write the worker's metrics JSON here (periodically and at exit)");
    app.add_option("--seed", o.seed, "base seed (default: the config's seed)");
    app.add_flag("--quiet", o.quiet, "no summary line");
    std::string congestion_control = "on";
    app.add_option("--congestion-control", congestion_control,
                   "on: react to congestion marks and FEEDBACK (default); off: ignore them (baselines)")
        ->check(CLI::IsMember({"on", "off"}));
    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        fmt::print(stderr, "shesha-worker: {}\n", e.what());
        return shesha::drl::kExitUsage;
    }
    shesha::logging::init("shesha-worker", log_level);
    o.congestion_control = congestion_control == "on";
    try {
        return shesha::drl::run(o);
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return shesha::drl::kExitRuntime;
    }
}
