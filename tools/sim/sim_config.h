// shesha-sim scenario: what to simulate (topology, workload, links, queues, transport, output).
// Read from YAML with strict keys (an unknown key, a wrong type or an out-of-range value is an
// error naming the key path), then CLI overrides `--set path=value` are applied to the same tree
// before validation, so an override is checked exactly like a key in the file.
// The schema is documented in configs/sim-tor.yaml and docs/simulation.md.
#pragma once

#include "cluster_config.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shesha::sim {

struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class TopologyKind : std::uint8_t { Tor, LeafSpine };

// What the workers compute (docs/simulation.md, "Training workload").
enum class WorkloadKind : std::uint8_t {
    Synthetic,  // pattern-filled updates every compute_us (exact sums checked at the learners)
    Training,   // real A3C: envs, rollouts, libtorch gradients; the real learner core (needs libtorch)
};

// How the learners' models reach the workers (docs/simulation.md, "MODEL traffic").
// When a training run stops (training.stop_at_target; docs/simulation.md, "Training workload").
enum class StopAtTarget : std::uint8_t {
    Never,    // false: to duration_ms whatever the returns
    All,      // all (or true): once every cluster with a target reached it, every cluster stops
    Cluster,  // cluster: a cluster that reached its target stops on its own (its workers and learner,
              // as shesha-learner --target-return and its workers do on the rack); the others go on
};
const char* to_string(StopAtTarget s) noexcept;

enum class ModelDelivery : std::uint8_t {
    None,        // one direction only: no MODEL; CREDIT and FEEDBACK return over a fixed delay, and a
                 // worker computes on the version of its last CREDIT (the simulator before issue 25)
    Unicast,     // both directions: every publish and rebroadcast is one copy per worker out of the
                 // learner's port; CREDIT and model requests travel the links and queues too
    Replicated,  // as Unicast, but publishes and rebroadcasts go once per cluster to its group and
                 // the switch pipeline fans them out (model_replication); requests are answered unicast
};
const char* to_string(ModelDelivery d) noexcept;

struct Scenario {
    std::uint64_t seed = 1;
    double duration_ms = 50;         // workers generate updates in [0, duration); then the network drains

    // topology
    TopologyKind topology = TopologyKind::Tor;
    bool shared_bottleneck = false;  // one learner-facing port for all clusters instead of one per cluster
    std::uint32_t leaves = 4;        // leaf_spine: leaves holding workers (learners sit under one more leaf)
    std::uint32_t spines = 2;

    // workload
    std::uint32_t clusters = 4;
    std::uint32_t workers_per_cluster = 16;
    std::vector<std::uint32_t> cluster_workers;  // per-cluster worker counts; empty: workers_per_cluster each
    std::uint32_t workers_in(std::uint32_t c) const noexcept {
        return cluster_workers.empty() ? workers_per_cluster : cluster_workers[c];
    }
    std::uint32_t first_worker(std::uint32_t c) const noexcept {  // workers are numbered cluster by cluster
        std::uint32_t first = 0;
        for (std::uint32_t i = 0; i < c; ++i) first += workers_in(i);
        return first;
    }
    std::uint32_t total_workers() const noexcept { return first_worker(clusters); }
    double compute_us = 1000;        // T_compute: mean time between a worker's updates
    double jitter = 0.1;             // each interval is uniform in compute * [1 - jitter, 1 + jitter]
    std::uint32_t chunks = 8;        // K chunks per update
    std::uint32_t chunk_elems = 256; // fp32 elements per chunk
    std::uint32_t max_updates = 0;   // per worker; 0 = until duration
    bool start_together = false;     // first update at t = 0 for everyone (else uniform in [0, compute))

    // links (Gbit/s, propagation delay per link)
    double host_gbps = 100;          // worker NIC -> first switch
    double fabric_gbps = 100;        // leaf <-> spine links (leaf_spine)
    double learner_gbps = 10;        // last switch -> learner (the bottleneck)
    double learner_down_gbps = 0;    // learner host -> last switch (its send queue: MODEL, CREDIT); 0: learner_gbps
    double learner_down_rate_gbps() const noexcept { return learner_down_gbps > 0 ? learner_down_gbps : learner_gbps; }
    double prop_ns = 500;

    // queues
    bool aggregation = true;         // merging at every switch egress port (false: FIFO arm)
    std::uint32_t capacity_packets = 512;
    std::uint64_t capacity_bytes = 4u << 20;
    std::uint32_t mark_depth_packets = 32;  // 0 disables marking
    std::uint32_t version_tolerance = 0;
    bool fair_scheduling = false;    // switch ports: DRR over clusters in packets (scheduling: drr)
    bool fair_auto = true;           // queue.fair: auto (the default), as the switch's scheduling: auto:
                                     // fair_scheduling = aggregation and two or more clusters
    std::uint32_t fair_lag = 0;      // with fair_scheduling: bounded-lag round robin within this many contributions (0: DRR)
    bool chunk_follow = false;       // with fair_scheduling: a merged head's chunk mates leave next (aggregation.chunk_follow)
    std::uint32_t host_capacity_packets = 256;  // worker NIC queue (plain FIFO)

    // transport
    bool window_control = true;      // false: CreditSender window pinned wide open
    bool switch_feedback = true;     // switch -> sender FEEDBACK on marks (rate limited)
    // w_init is transport::SenderConfig's default (the cluster YAMLs' too); w_max stays below its 256.
    double w_init = 16;
    double w_min = 1.0 / 16;         // below 1: the senders pace (one chunk per 1/W round trips); SenderConfig's default
    bool merge_aware = false;        // FEEDBACK and echo cuts scaled by 1 - the switch's merge fraction
    bool cumulative_ack = false;     // SenderConfig::cumulative_ack (off, as the workers' default)
    bool bank_excess = false;        // SenderConfig::bank_excess
    // SenderConfig::slow_start (on, as the workers' default); false turns it off for training too.
    bool slow_start = true;
    // SenderConfig::flight_expiry_rtts (0: off). Unset (-1): the sender's default (2) for the
    // pattern workload, the cluster YAML's transport.flight_expiry_rtts for training.
    double flight_expiry_rtts = -1;
    double flight_expiry_us = 0;     // SenderConfig::flight_expiry_ns (0: none, flight_expiry_rtts decides)
    double merge_floor = 0;          // merge_aware: no cut below this while the queue merges >= half (0: off)
    double w_max = 64;
    double credit_timeout_us = 5000;
    double feedback_interval_us = 50;  // FeedbackLimiter: per sender

    // model distribution (shesha-learner's and the worker API's defaults, in microseconds)
    ModelDelivery model_delivery = ModelDelivery::Unicast;
    double publish_interval_us = 5000;   // learner.publish_interval_ms: a new version at most this often
    double rebroadcast_us = 250'000;     // learner.rebroadcast_ms: the current version again
    double model_request_us = 100'000;   // worker.model_request_ms: ask again while without a model
    std::uint32_t model_budget = 64;     // learner.model_budget: copies to a worker not heard from since
    // Replicated MODEL on leaf-spine: every switch replicates, as a multicast tree (the learners'
    // leaf sends the group frame once to the cluster's spine, the spine once to each leaf, and the
    // leaves copy for their workers). false: only the learners' leaf replicates, one copy per worker.
    bool model_tree = true;
    // The learner host's send queue toward its switch port (socket buffer + qdisc). The learner sends
    // with MSG_DONTWAIT, so a datagram that finds it full is lost (counted).
    std::uint32_t learner_nic_packets = 4096;
    // The synthetic learners' learner.credit_priority (training runs take each cluster YAML's): CREDIT
    // with IP TOS 0x10, which the learner host's send queue (pfifo_fast) serves before MODEL.
    bool credit_priority = true;
    // learner.credit_batching for every learner: a learner's CREDITs leave as CREDIT_BATCH datagrams
    // to its group, which the switch fans out. Auto (the default): on with model.delivery replicated,
    // and training runs take each cluster YAML's key (whose auto is the same rule); true (needs
    // replicated) or false decide for every learner.
    drl::CreditBatching credit_batching = drl::CreditBatching::Auto;

    // training workload (workload.kind: training). Everything about the job (model, A3C, optimizer,
    // transport constants, learner and worker keys) comes from the cluster YAMLs, one per cluster.
    WorkloadKind workload_kind = WorkloadKind::Synthetic;
    std::vector<std::string> training_clusters;  // training.clusters: cluster YAML paths
    std::vector<double> training_targets;        // training.targets: per cluster; NaN = none
    // training.step_us / training.update_us: virtual time per environment step (act + env) and per
    // gradient (forward + backward); one value for every cluster, or one per cluster ("a, b").
    std::vector<double> step_us = {8.2};
    std::vector<double> update_us = {190};
    double step_us_of(std::uint32_t c) const noexcept { return step_us.size() == 1 ? step_us[0] : step_us[c]; }
    double update_us_of(std::uint32_t c) const noexcept { return update_us.size() == 1 ? update_us[0] : update_us[c]; }
    // training.wake_us: a waiting worker (no model, or max_updates_per_version used up) starts its
    // next rollout this long after the model that lets it compute arrives, as a shesha-worker
    // blocked in poll() waits for a core once woken; per cluster like step_us. 0: at once.
    std::vector<double> wake_us = {0};
    double wake_us_of(std::uint32_t c) const noexcept { return wake_us.size() == 1 ? wake_us[0] : wake_us[c]; }
    // training.learner_wake_us: a cluster's learner reads a datagram that reached it while it was
    // idle this long after the datagram arrived, with whatever else arrived meanwhile, as a
    // shesha-learner blocked in poll() waits for a core once woken (its CREDITs leave that much
    // later); per cluster like step_us. 0: at once.
    std::vector<double> learner_wake_us = {0};
    // training.workers_read_between_rollouts: a worker reads CREDIT and FEEDBACK only between
    // rollouts, or training.wake_us after one woke it while it had nothing to compute, as
    // shesha-worker's single loop does; false: the moment they arrive (a worker with a receive
    // thread of its own).
    bool workers_read_between_rollouts = false;
    double learner_wake_us_of(std::uint32_t c) const noexcept {
        return learner_wake_us.size() == 1 ? learner_wake_us[0] : learner_wake_us[c];
    }
    StopAtTarget stop_at_target = StopAtTarget::All;  // training.stop_at_target
    double learner_tick_us = 1000;   // training.learner_tick_us: LearnerCore::on_tick cadence (publish, rebroadcast)
    std::uint32_t compute_threads = 0;  // training.compute_threads: helper threads for the gradients (0: on the event loop)
    double eval_interval_ms = 0;     // training.eval_interval_ms: replaces learner.eval_interval_ms (0: the YAML's)
    std::uint32_t learner_max_workers = 0;  // training.learner_max_workers: replaces learner.max_workers (0: the YAML's)
    bool training() const noexcept { return workload_kind == WorkloadKind::Training; }

    // output
    double sample_us = 100;          // time-series and AoM sampling period
    std::uint32_t pool_max_packets = 1u << 20;  // packet pool ceiling; beyond it arrivals are dropped (counted)
};

// Parses YAML text (source names it in messages) and applies overrides ("a.b=value"), then
// validates. Throws ConfigError naming the key.
Scenario load_scenario(const std::string& yaml_text, const std::string& source,
                       const std::vector<std::string>& overrides = {});
Scenario load_scenario_file(const std::string& path, const std::vector<std::string>& overrides = {});

// Human-readable one-line description of the arm ("merge+window", "fifo", ...).
std::string arm_name(const Scenario& s);

}  // namespace shesha::sim
