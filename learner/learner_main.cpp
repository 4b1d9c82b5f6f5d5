// shesha-learner: the parameter server of one DRL cluster. Receives GRADIENT chunks over UDP
// (straight from workers or merged by shesha-switch), applies each to its parameter slice on
// arrival, publishes MODEL versions, credits the workers, evaluates the policy, measures
// Age-of-Model and staleness, and checkpoints. See README ("Distributed DRL") and docs/aom.md.
//
// Exit status: 0 target reached (or no target given), 1 target missed or a runtime error, 2 bad
// command line, configuration or checkpoint.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "a3c_trainer.h"
#include "learner/checkpoint.h"
#include "cluster_config.h"
#include "json_io.h"
#include "log_level.h"
#include "learner/learner_core.h"
#include "learner_prometheus.h"
#include "prometheus.h"
#include "shesha/transport.h"
#include "clock.h"
#include "stop_signal.h"
#include "udp.h"

namespace shesha::learner {
namespace {

constexpr int kExitMissed = 1;
constexpr int kExitUsage = 2;
constexpr int kReceiveBurst = 256;

struct Options {
    std::string config_path;
    std::uint32_t cluster = 0;
    std::string bind;
    std::optional<std::uint16_t> port;
    double duration_s = 0;
    std::optional<double> target;
    std::string metrics_dir;
    std::string checkpoint;
    std::string resume;
    std::uint32_t workers_expected = 0;
    bool quiet = false;
    std::string prometheus_textfile;  // empty: none
    double prometheus_interval_s = 5.0;
};

struct EvalJob {
    std::vector<float> parameters;
    std::uint32_t version = 0;
    std::uint64_t env_steps = 0;
    double wall_s = 0;
};

struct EvalResult {
    EvalJob job;
    rl::EvaluationResult eval;
};

// Deterministic evaluation on its own thread and model copy, so the receive loop never stalls
// for the episodes (a stalled loop would overflow the socket and stretch every credit round).
class Evaluator {
public:
    Evaluator(const drl::ClusterConfig& c, std::unique_ptr<rl::ActorCritic> model)
        : episodes_(c.learner.eval_episodes),
          seed_(worker::envs::derive_worker_seed(c.seed, drl::kEvaluationStream)),
          model_(std::move(model)),
          thread_([this] { run(); }) {}
    ~Evaluator() {
        {
            std::lock_guard lock(mutex_);
            quit_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    bool idle() {
        std::lock_guard lock(mutex_);
        return !job_ && !busy_;
    }
    void submit(EvalJob job) {
        {
            std::lock_guard lock(mutex_);
            job_ = std::move(job);
        }
        cv_.notify_all();
    }
    std::optional<EvalResult> take_result() {
        std::lock_guard lock(mutex_);
        auto r = std::move(result_);
        result_.reset();
        return r;
    }

private:
    void run() {
        for (;;) {
            EvalJob job;
            {
                std::unique_lock lock(mutex_);
                cv_.wait(lock, [&] { return quit_ || job_; });
                if (quit_) return;
                job = std::move(*job_);
                job_.reset();
                busy_ = true;
            }
            model_->set_parameters(job.parameters);
            const rl::EvaluationResult eval = rl::evaluate_policy(*model_, episodes_, seed_);
            std::lock_guard lock(mutex_);
            result_ = EvalResult{std::move(job), eval};
            busy_ = false;
        }
    }

    std::size_t episodes_;
    std::uint64_t seed_;
    std::unique_ptr<rl::ActorCritic> model_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::optional<EvalJob> job_;
    std::optional<EvalResult> result_;
    bool busy_ = false;
    bool quit_ = false;
    std::thread thread_;
};

struct RunSummary {
    std::uint32_t resumed_version = 0;  // 0: fresh start
    std::uint64_t evaluations = 0;
    double last_eval_mean = 0, last_eval_min = 0, best_eval_mean = 0;
    std::uint32_t last_eval_version = 0;
    bool target_reached = false;
    double seconds_to_target = 0;
    std::uint64_t env_steps_to_target = 0;
    std::uint64_t checkpoints_written = 0;
    std::uint32_t last_checkpoint_version = 0;
    std::uint64_t checkpoint_errors = 0;
    std::uint64_t send_errors = 0;
    std::uint64_t receive_errors = 0;
    std::size_t workers_seen_max = 0;
};

std::string summary_json(const Options& o, const LearnerCore& core, metrics::AomTracker& aom, const RunSummary& s,
                         double wall_s, bool final) {
    json::Json j = json::Json::object();
    j["cluster_id"] = std::uint64_t{o.cluster};
    j["incarnation"] = core.incarnation();
    j["final"] = final;
    j["wall_seconds"] = wall_s;
    j["version"] = core.version();
    j["resumed_version"] = s.resumed_version;
    j["env_steps"] = core.env_steps();
    j["eval"] = json::Json::object();
    j["eval"]["count"] = s.evaluations;
    j["eval"]["last_mean_return"] = s.last_eval_mean;
    j["eval"]["last_min_return"] = s.last_eval_min;
    j["eval"]["last_version"] = s.last_eval_version;
    j["eval"]["best_mean_return"] = s.best_eval_mean;
    j["target"] = json::Json::object();
    if (o.target) j["target"]["return"] = *o.target;
    j["target"]["reached"] = s.target_reached;
    j["target"]["seconds"] = s.seconds_to_target;
    j["target"]["env_steps"] = s.env_steps_to_target;
    const LearnerCounters& c = core.counters();
    const transport::ReassemblerStats& r = core.reassembler_stats();
    j["chunks"] = json::Json::object();
    j["chunks"]["received"] = c.gradient_chunks;
    j["chunks"]["applied"] = c.chunks_applied;
    j["chunks"]["contributions"] = c.contributions_applied;
    j["chunks"]["optimizer_steps"] = c.optimizer_steps;
    j["chunks"]["steps_capped"] = c.steps_capped;
    j["chunks"]["merged"] = c.merged_chunks;
    j["chunks"]["sender_merged"] = c.sender_merged_chunks;
    j["chunks"]["ce_marked"] = c.ce_chunks;
    j["chunks"]["version_ahead"] = c.version_ahead;
    j["chunks"]["clipped"] = c.chunks_clipped;
    j["chunks"]["rejected_total"] = r.rejected_total() + c.rejected_total();
    j["chunks"]["rejected"] = json::Json::object();
    for (std::size_t i = 1; i < transport::kApplyResultCount; ++i)
        j["chunks"]["rejected"][json::snake_key(transport::to_string(static_cast<transport::ApplyResult>(i)))] = r.rejected[i];
    j["chunks"]["rejected"]["too_stale"] = c.rejected_too_stale;
    j["chunks"]["rejected"]["too_new"] = c.rejected_too_new;
    j["chunks"]["rejected"]["magnitude"] = c.rejected_magnitude;
    j["chunks"]["rejected"]["rolled_back"] = c.steps_rolled_back;
    j["chunks"]["rejected"]["replay_window"] = c.rejected_replay_window;
    j["chunks"]["duplicates"] = c.duplicates;
    j["datagrams"] = c.datagrams;
    j["decode_errors"] = json::Json::object();
    j["decode_errors"]["total"] = c.decode_errors_total;
    for (int i = 1; i < proto::kDecodeErrorCount; ++i)
        j["decode_errors"][json::snake_key(proto::to_string(static_cast<proto::DecodeError>(i)))] = c.decode_errors[static_cast<std::size_t>(i)];
    j["unexpected_type"] = c.unexpected_type;
    j["not_admitted"] = c.not_admitted;
    aom.advance(clock::realtime_ns());
    j["aom"] = json::Json::object();
    j["aom"]["samples"] = aom.samples();
    j["aom"]["mean_ms"] = aom.mean_ns() / 1e6;
    j["aom"]["peak_ms"] = static_cast<double>(aom.peak_ns()) / 1e6;
    const StalenessStats& st = core.staleness();
    j["staleness"] = json::Json::object();
    j["staleness"]["count"] = st.count;
    j["staleness"]["mean"] = st.mean();
    j["staleness"]["max"] = st.max;
    j["staleness"]["histogram"] = json::Json::array();
    for (std::uint64_t n : st.histogram) j["staleness"]["histogram"].push_back(n);
    j["credits"] = json::Json::object();
    j["credits"]["messages"] = c.credit_messages;
    j["credits"]["units"] = c.credit_units;
    j["credits"]["batches"] = c.credit_batches;
    j["credits"]["echoes"] = core.planner_stats().echoes;
    j["credits"]["units_spread"] = core.planner_stats().units_spread;
    j["credits"]["units_spread_past_quiet"] = core.planner_stats().units_spread_past_quiet;
    j["credits"]["merged_without_packet_count"] = core.planner_stats().merged_without_packet_count;
    j["credits"]["unknown_worker"] = core.planner_stats().unknown_worker;
    j["model"] = json::Json::object();
    j["model"]["versions_published"] = c.versions_published;
    j["model"]["chunks_sent"] = c.model_chunks_sent;
    j["model"]["copies_owed"] = c.model_copies_owed;
    j["model"]["copies_sent"] = c.model_copies_sent;
    j["model"]["copies_renewed"] = c.model_copies_renewed;
    j["model"]["sends_deferred"] = c.model_sends_deferred;
    j["model"]["delivery"] = core.replicated() ? "replicated" : "unicast";
    if (core.replicated()) j["model"]["group"] = net::format_endpoint(core.model_group());
    j["model"]["group_sends"] = c.model_group_sends;
    j["model"]["group_chunks_sent"] = c.model_group_chunks_sent;
    j["model"]["group_withheld"] = c.model_group_withheld;
    j["model"]["rebroadcasts"] = c.rebroadcasts;
    j["model"]["requests"] = c.model_requests;
    j["model"]["requests_rate_limited"] = c.model_requests_rate_limited;
    j["model"]["foreign_requests"] = c.foreign_requests;
    j["model"]["withheld"] = c.models_withheld;
    j["workers"] = json::Json::object();
    j["workers"]["expected"] = std::uint64_t{o.workers_expected};
    j["workers"]["known"] = std::uint64_t{core.workers().size()};
    j["workers"]["active"] = std::uint64_t{core.active_workers()};
    j["workers"]["expired"] = c.workers_expired;
    j["workers"]["overflow"] = c.workers_overflow;
    j["workers"]["list"] = json::Json::array();
    for (const WorkerInfo& w : core.workers()) {
        json::Json& item = j["workers"]["list"].emplace_back(json::Json::object());
        item["id"] = w.id;
        item["endpoint"] = net::format_endpoint(w.addr);
        item["active"] = w.active;
        item["chunks_applied"] = w.chunks_applied;
        item["credit_units"] = w.credit_units;
        item["quiet"] = w.quiet;
        item["env_steps_reported"] = w.env_steps_first + w.env_steps_since_first;
    }
    j["checkpoints"] = json::Json::object();
    j["checkpoints"]["written"] = s.checkpoints_written;
    j["checkpoints"]["last_version"] = s.last_checkpoint_version;
    j["checkpoints"]["errors"] = s.checkpoint_errors;
    j["send_errors"] = s.send_errors;
    j["receive_errors"] = s.receive_errors;
    return json::pretty(j);
}

int run(const Options& o) {
    drl::ClusterConfig config;
    try {
        config = drl::load_cluster_config(o.config_path);
    } catch (const drl::ConfigError& e) {
        spdlog::error("{}", e.what());
        return kExitUsage;
    }
    const auto bind_ip = net::parse_ipv4(o.bind);
    if (!bind_ip) {
        fmt::print(stderr, "shesha-learner: --bind: not an IPv4 address: '{}'\n", o.bind);
        return kExitUsage;
    }
    const std::uint16_t cluster_id = static_cast<std::uint16_t>(o.cluster);
    std::string error;
    auto model = rl::ActorCritic::create(
        config.model, worker::envs::derive_worker_seed(config.seed, drl::kInitialWeightsStream), &error);
    if (!model) {
        spdlog::error("{}: model: {}", o.config_path, error);
        return kExitUsage;
    }
    std::vector<float> initial(model->parameter_count());
    model->get_parameters(initial);

    LearnerState resumed;
    if (!o.resume.empty()) {
        std::string env_name;
        if (!load_checkpoint(o.resume, resumed, env_name, error)) {
            spdlog::error("--resume: {}", error);
            return kExitUsage;
        }
        if (env_name != config.model.env_name || resumed.cluster_id != cluster_id) {
            spdlog::error("--resume: {} holds cluster {} on {}, not cluster {} on {}", o.resume,
                       resumed.cluster_id, env_name, cluster_id, config.model.env_name);
            return kExitUsage;
        }
    }
    if (!o.prometheus_textfile.empty() && !prom::check_textfile_path(o.prometheus_textfile, error)) {
        spdlog::error("--prometheus-textfile: {}", error);
        return kExitUsage;
    }
    if (!o.metrics_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o.metrics_dir, ec);
        if (ec) {
            spdlog::error("--metrics-dir {}: {}", o.metrics_dir, ec.message());
            return kExitUsage;
        }
    }

    // The socket, the receive loop and the protocol engine are the public API's LearnerEndpoint
    // (api/include/shesha/transport.h); this program adds evaluation, checkpoints and metrics.
    LearnerOptions lo;
    lo.config_path = o.config_path;
    lo.cluster_id = cluster_id;
    lo.bind_address = o.bind;
    lo.port = o.port.value_or(config.udp_port);
    lo.initial_parameters = initial;
    std::unique_ptr<LearnerEndpoint> endpoint;
    try {
        endpoint = std::make_unique<LearnerEndpoint>(lo);
    } catch (const Error& e) {
        spdlog::error("{}", e.what());
        return kExitMissed;
    }
    LearnerCore& core = *static_cast<LearnerCore*>(endpoint->native_core());
    stop_signal::install();

    RunSummary summary;
    const std::uint32_t incarnation = core.incarnation();
    if (!o.resume.empty()) {
        if (!core.restore(resumed, error)) {
            spdlog::error("--resume {}: {}", o.resume, error);
            return kExitUsage;
        }
        summary.resumed_version = resumed.version;
        fmt::print("shesha-learner: resumed from {} at version {} ({} env steps)\n", o.resume, resumed.version,
                   resumed.env_steps);
    }
    fmt::print("shesha-learner: cluster {} on {}:{}, {} parameters in {} chunks, incarnation {}, version {}\n",
               cluster_id, o.bind, endpoint->local_port(), initial.size(), core.layout().chunk_count, incarnation, core.version());
    if (core.replicated())
        fmt::print("shesha-learner: model_delivery replicated: publishes and rebroadcasts go once to the group {} "
                   "(worker_id 0xFFFFFFFF), for a Shesha switch to fan out; model requests are answered by unicast\n",
                   net::format_endpoint(core.model_group()));
    if (core.replicated() && bind_ip->s_addr == htonl(INADDR_ANY))
        fmt::print("shesha-learner: bound to 0.0.0.0: the routing table picks the interface for the group (--bind the "
                   "address facing the switch to send there without a multicast route)\n");
    if (config.learner.admit_sources.empty() && config.learner.admit_worker_ids.empty())
        fmt::print("shesha-learner: learner.admit_sources and admit_worker_ids are empty: any source may register as a "
                   "worker (each gets at most {} MODEL copies per datagram it sends)\n", config.learner.model_budget);
    std::fflush(stdout);

    FILE* csv = nullptr;
    if (!o.metrics_dir.empty()) {
        const std::string path = o.metrics_dir + "/learner.csv";
        csv = std::fopen(path.c_str(), "w");
        if (csv == nullptr) {
            spdlog::error("cannot write {}", path);
            return kExitUsage;
        }
        std::fprintf(csv, "wall_seconds,env_steps,version,eval_mean_return,eval_min_return,chunks_applied,"
                          "chunks_rejected,contributions,aom_now_ms,aom_mean_ms,aom_peak_ms,staleness_mean,workers_active\n");
        std::fflush(csv);
    }

    Evaluator evaluator(config, rl::ActorCritic::create(config.model, 0));
    const std::uint64_t start_mono = clock::monotonic_ns();
    const auto wall = [&] { return static_cast<double>(clock::monotonic_ns() - start_mono) / 1e9; };
    const std::uint64_t eval_period = std::uint64_t{config.learner.eval_interval_ms} * 1'000'000;
    const std::uint64_t ckpt_period = std::uint64_t{config.learner.checkpoint_interval_ms} * 1'000'000;
    std::uint64_t next_eval = start_mono + eval_period;
    std::uint64_t next_ckpt = start_mono + ckpt_period;
    bool stop = false;

    const auto write_json = [&](bool final) {
        if (o.metrics_dir.empty()) return;
        const shesha::LearnerCounters io = endpoint->counters();
        summary.send_errors = io.send_errors;
        summary.receive_errors = io.receive_errors;
        std::string err;
        if (!json::write_text_file(o.metrics_dir + "/learner.json",
                                    summary_json(o, core, core.aom(), summary, wall(), final), err))
            spdlog::warn("{}", err);
    };
    const std::uint64_t prom_period = static_cast<std::uint64_t>(o.prometheus_interval_s * 1e9);
    std::uint64_t next_prom = start_mono;  // the first file right away: the learner is up
    bool prom_error_logged = false;
    const auto write_prometheus = [&] {
        if (o.prometheus_textfile.empty()) return true;
        LearnerRunMetrics m;
        m.cluster = cluster_id;
        m.env = config.model.env_name;
        m.wall_s = wall();
        m.target = o.target;
        m.target_reached = summary.target_reached;
        m.evaluations = summary.evaluations;
        m.last_eval_mean = summary.last_eval_mean;
        m.last_eval_min = summary.last_eval_min;
        m.best_eval_mean = summary.best_eval_mean;
        m.workers_expected = o.workers_expected;
        m.checkpoints_written = summary.checkpoints_written;
        m.checkpoint_errors = summary.checkpoint_errors;
        const shesha::LearnerCounters io = endpoint->counters();
        m.send_errors = io.send_errors;
        m.receive_errors = io.receive_errors;
        std::string err;
        if (prom::write_textfile(o.prometheus_textfile, learner_prometheus_text(core, m, clock::realtime_ns()), err)) {
            prom_error_logged = false;
            return true;
        }
        if (!prom_error_logged) spdlog::warn("prometheus textfile: {}", err);
        prom_error_logged = true;  // once per failure streak
        return false;
    };
    const auto checkpoint = [&] {
        if (o.checkpoint.empty()) return;
        std::string err;
        const LearnerState state = core.snapshot_state();
        if (save_checkpoint(o.checkpoint, state, config.model.env_name, err)) {
            ++summary.checkpoints_written;
            summary.last_checkpoint_version = state.version;
        } else {
            ++summary.checkpoint_errors;
            spdlog::warn("checkpoint: {}", err);
        }
    };

    while (!stop && !stop_signal::requested()) {
        // Receives, validates, applies and credits every waiting chunk; answers model requests;
        // publishes on the YAML's cadence.
        endpoint->poll(1);
        const std::uint64_t now_mono = clock::monotonic_ns();
        const std::uint64_t now_real = clock::realtime_ns();
        summary.workers_seen_max = std::max(summary.workers_seen_max, core.workers().size());

        if (now_mono >= next_eval && evaluator.idle()) {
            next_eval = now_mono + eval_period;
            core.publish_now(now_real, now_mono);
            EvalJob job;
            job.parameters.assign(core.published().begin(), core.published().end());
            job.version = core.version();
            job.env_steps = core.env_steps();
            job.wall_s = wall();
            evaluator.submit(std::move(job));
        }
        if (auto r = evaluator.take_result()) {
            ++summary.evaluations;
            summary.last_eval_mean = r->eval.mean_return;
            summary.last_eval_min = r->eval.min_return;
            summary.last_eval_version = r->job.version;
            summary.best_eval_mean = std::max(summary.best_eval_mean, r->eval.mean_return);
            core.aom().advance(now_real);
            const LearnerCounters& c = core.counters();
            const double aom_now_ms = core.aom().started()
                ? static_cast<double>(static_cast<std::int64_t>(now_real - core.aom().latest_generation_ns())) / 1e6 : 0.0;
            if (!o.quiet)
                fmt::print("t {:7.1f} s  steps {:9}  version {:7}  eval mean {:7.1f} min {:7.1f}  applied {:9}  "
                           "rejected {:5}  AoM mean {:7.2f} ms  staleness {:5.2f}  workers {}\n",
                           r->job.wall_s, r->job.env_steps, r->job.version, r->eval.mean_return, r->eval.min_return,
                           c.chunks_applied, (core.reassembler_stats().rejected_total() + core.counters().rejected_total()), core.aom().mean_ns() / 1e6,
                           core.staleness().mean(), core.active_workers());
            std::fflush(stdout);
            if (csv != nullptr) {
                std::fprintf(csv, "%.3f,%llu,%u,%.3f,%.3f,%llu,%llu,%llu,%.3f,%.3f,%.3f,%.4f,%zu\n", r->job.wall_s,
                             static_cast<unsigned long long>(r->job.env_steps), r->job.version, r->eval.mean_return,
                             r->eval.min_return, static_cast<unsigned long long>(c.chunks_applied),
                             static_cast<unsigned long long>((core.reassembler_stats().rejected_total() + core.counters().rejected_total())),
                             static_cast<unsigned long long>(c.contributions_applied), aom_now_ms,
                             core.aom().mean_ns() / 1e6, static_cast<double>(core.aom().peak_ns()) / 1e6,
                             core.staleness().mean(), core.active_workers());
                std::fflush(csv);
            }
            if (o.target && !summary.target_reached && r->eval.mean_return >= *o.target) {
                summary.target_reached = true;
                summary.seconds_to_target = r->job.wall_s;
                summary.env_steps_to_target = r->job.env_steps;
                fmt::print("shesha-learner: target {} reached at version {} after {:.1f} s, {} env steps\n", *o.target,
                           r->job.version, r->job.wall_s, r->job.env_steps);
                stop = true;
            }
            write_json(false);
        }
        if (ckpt_period != 0 && now_mono >= next_ckpt) {
            next_ckpt = now_mono + ckpt_period;
            checkpoint();
        }
        if (!o.prometheus_textfile.empty() && now_mono >= next_prom) {
            next_prom = now_mono + prom_period;
            write_prometheus();
        }
        if (o.duration_s > 0 && wall() >= o.duration_s) stop = true;
    }
    core.publish_now(clock::realtime_ns(), clock::monotonic_ns());
    checkpoint();
    write_json(true);
    const bool prom_ok = write_prometheus();
    if (csv != nullptr) std::fclose(csv);
    fmt::print("shesha-learner: exit at version {}: {} chunks applied, {} rejected, {} undecodable, {} env steps\n",
               core.version(), core.counters().chunks_applied, (core.reassembler_stats().rejected_total() + core.counters().rejected_total()),
               core.counters().decode_errors_total, core.env_steps());
    if (o.target && !summary.target_reached) return kExitMissed;
    return prom_ok ? 0 : kExitMissed;
}

}  // namespace
}  // namespace shesha::learner

int main(int argc, char** argv) {
    using shesha::learner::Options;
    CLI::App app{"shesha-learner: the parameter server of one A3C cluster over the Shesha protocol"};
    Options o;
    app.add_option("--config", o.config_path, "cluster YAML (configs/cluster-*.yaml)")->required()->check(CLI::ExistingFile);
    app.add_option("--cluster", o.cluster, "cluster id on the wire")->required()->check(CLI::Range(0, 65535));
    app.add_option("--bind", o.bind, "IPv4 address to receive on")->required();
    app.add_option("--port", o.port, "UDP port (default: the config's udp_port)")->check(CLI::Range(1, 65535));
    app.add_option("--duration", o.duration_s, "stop after this many seconds (0: until the target or a signal)")
        ->check(CLI::Range(0.0, 1e7));
    app.add_option("--target-return", o.target, "stop (exit 0) once the evaluation mean return reaches this");
    app.add_option("--metrics-dir", o.metrics_dir, "write learner.csv and learner.json here");
    app.add_option("--checkpoint", o.checkpoint, "checkpoint file, written at the configured cadence and on exit");
    app.add_option("--resume", o.resume, "resume from this checkpoint")->check(CLI::ExistingFile);
    app.add_option("--workers", o.workers_expected, "workers expected (reported in the metrics)")->check(CLI::Range(0, 65535));
    app.add_flag("--quiet", o.quiet, "no progress lines");
    auto* prom_file = app.add_option("--prometheus-textfile", o.prometheus_textfile,
                                     "keep a node_exporter textfile-collector file (*.prom) up to date, rewritten "
                                     "atomically every --prometheus-interval seconds and at exit");
    app.add_option("--prometheus-interval", o.prometheus_interval_s, "seconds between textfile updates (default 5)")
        ->check(CLI::Range(0.1, 86400.0))
        ->needs(prom_file);
    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        fmt::print(stderr, "shesha-learner: {}\n", e.what());
        return shesha::learner::kExitUsage;
    }
    shesha::logging::init("shesha-learner", log_level);
    try {
        return shesha::learner::run(o);
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return shesha::learner::kExitMissed;
    }
}
