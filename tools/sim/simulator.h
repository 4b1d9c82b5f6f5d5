// shesha-sim: a discrete-event simulator of Shesha clusters that runs the project's real DPDK-free
// logic on simulated links and clocks:
//   - every switch egress port is a core::AggregatingQueue (merging at every hop) fed real frames
//     (frame::build_udp_frame + proto::encode + pattern::fill) from a pooled packet store, and
//     drained by an explicit serialization model (frame + wire overhead at the link rate);
//   - every worker is a transport::CreditSender (window, DCTCP-style reaction, sender-side merge);
//   - every learner is a transport::Reassembler plus a transport::CreditPlanner, and checks each
//     payload bit for bit with pattern::verify;
//   - FEEDBACK goes through core::FeedbackLimiter; AoM is metrics::AomTracker, as in the lab.
//   - with model.delivery unicast (the default) or replicated, both directions: the learners publish
//     MODEL versions and answer model requests, and send CREDIT, through the learner host's send
//     queue, the learner port and the switch pipeline (which replicates a group's MODEL) down to
//     the workers' ports; every worker assembles versions with drl::ModelReceiver and computes on
//     the version it adopted. FEEDBACK (sent by the switch around its queues) keeps a fixed delay.
//   - model.delivery none: the one-directional simulator of before (CREDIT back over a fixed delay,
//     no MODEL; a worker computes on the version its last CREDIT named).
// Time is simulated nanoseconds. Deterministic for a seed: one RNG, events ordered by (time,
// insertion order).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "counters.h"
#include "sim_config.h"
#include "training_backend.h"

namespace shesha::sim {

// Ports are grouped by the hop they sit at, for the per-hop metrics. The first four carry
// gradients toward the learners; the last three (two-directional runs only) carry CREDIT and MODEL
// back: the learner host's send queue onto the learner port, the fabric's ports toward the worker
// leaves (leaf-spine), and the switch ports facing the workers.
enum class HopLevel : std::uint8_t {
    HostNic = 0, LeafUplink = 1, SpineDown = 2, LearnerPort = 3, LearnerNic = 4, FabricReturn = 5, WorkerPort = 6
};
inline constexpr int kHopLevels = 7;
const char* to_string(HopLevel h) noexcept;

struct HopSummary {
    std::uint32_t ports = 0;
    std::uint64_t arrivals = 0;        // enqueue attempts
    std::uint64_t departures = 0;
    std::uint64_t merges = 0;
    std::uint64_t bytes_saved = 0;
    std::uint64_t drops = 0;
    std::uint64_t marks = 0;
    double depth_mean = 0;             // depth found by arrivals
    std::uint64_t depth_max = 0;
    double sojourn_mean_us = 0;
    double sojourn_max_us = 0;
};

struct ClusterSummary {
    std::uint32_t workers = 0;
    double aom_mean_us = 0;            // time average of AoM(t) over the sampled grid
    double aom_peak_us = 0;
    double staleness_mean = 0;         // learner version - chunk base version, per applied chunk
    std::uint32_t staleness_max = 0;
    std::uint64_t chunks_applied = 0;
    std::uint64_t contributions_applied = 0;
    std::uint64_t bottleneck_bytes = 0;  // bytes of this cluster leaving the learner-facing ports
    double bottleneck_share = 0;
    std::uint32_t learner_version = 0;   // versions completed (every chunk covered once)
    std::uint32_t versions_published = 0;  // MODEL versions the learner published (0 without MODEL)
    std::uint32_t workers_without_model = 0;  // at the end of the run (0 without MODEL)
};

// The learner-facing ports in both directions (all of them added up) and what the model
// distribution did. Utilisation: wire time (frame + 24 B) inside [0, duration) over the ports'
// capacity in that time.
struct ModelTraffic {
    std::uint64_t up_bytes = 0;            // frames out of the switch to the learners (gradients, requests)
    std::uint64_t down_bytes = 0;          // frames from the learners into the switch
    std::uint64_t down_model_bytes = 0;    // of which MODEL
    std::uint64_t down_credit_bytes = 0;   // of which CREDIT
    std::uint64_t down_model_chunks = 0;   // MODEL frames the learners put on the port
    double up_utilisation = 0;
    double down_utilisation = 0;
    std::uint64_t learner_nic_drops = 0;   // datagrams lost to a full learner send queue
    std::uint64_t learner_nic_model_drops = 0;
    std::uint64_t learner_nic_credit_drops = 0;
    std::uint64_t versions_published = 0;
    std::uint64_t unicast_chunks = 0;      // MODEL chunks the learners sent to one worker
    std::uint64_t group_chunks = 0;        // MODEL chunks sent once to a cluster's group
    std::uint64_t answer_chunks = 0;       // of unicast_chunks: answers to model requests (unicast either way)
    std::uint64_t sends_deferred = 0;      // a unicast MODEL chunk found the learner's send queue full and waited
    std::uint64_t requests_sent = 0;       // model requests the workers sent
    std::uint64_t requests_answered = 0;
    std::uint64_t requests_rate_limited = 0;
    std::uint64_t models_withheld = 0;     // a worker's budget was used up (model_budget)
    std::uint64_t chunks_received = 0;     // MODEL chunks that reached a worker
    std::uint64_t versions_adopted = 0;    // over workers: versions whose every chunk arrived
    std::uint64_t assemblies_abandoned = 0;  // a newer version arrived before the older completed
    std::uint64_t verify_failures = 0;     // adopted parameters not the published ones (must be 0)
    std::uint32_t workers_without_model = 0;  // at the end of the run
    double delivery_mean_us = 0;           // publish -> adoption, over adoptions
    double delivery_max_us = 0;
    double model_age_mean_us = 0;          // time-average over workers of now - publish time of the adopted version
    double first_model_mean_us = 0;        // when a worker adopted its first model (start of its compute)
    // CREDITs out of the learner hosts' send queues, and how long they waited there (behind MODEL,
    // unless credit priority served them ahead of it).
    std::uint64_t credits_sent = 0;
    double credit_wait_mean_us = 0;
    double credit_wait_max_us = 0;
};

// Training workload: one deterministic evaluation of a cluster's published model, on the virtual
// clock (shesha-learner's learner.csv row).
struct TrainingPoint {
    std::uint16_t cluster = 0;
    double t_s = 0;                    // virtual seconds
    std::uint64_t env_steps = 0;       // reported by the workers (LearnerCore::env_steps)
    std::uint32_t version = 0;
    double eval_mean_return = 0;
    double eval_min_return = 0;
    std::uint64_t chunks_applied = 0;
    std::uint64_t contributions_applied = 0;
};

// Training workload, per cluster: the job, its target, and what the learner core and the workers did.
struct TrainingClusterSummary {
    std::string env;
    std::string source;                // the cluster YAML
    std::size_t parameters = 0;
    std::uint32_t chunks = 0;
    double target = 0;
    bool has_target = false;
    bool reached = false;
    double seconds_to_target = 0;      // virtual
    std::uint64_t env_steps_to_target = 0;
    std::uint32_t version_at_target = 0;
    double best_eval_mean = 0;
    double last_eval_mean = 0;
    std::uint32_t evaluations = 0;
    std::uint64_t env_steps = 0;           // stepped by the workers
    std::uint64_t episodes = 0;
    std::uint64_t gradients_computed = 0;
    std::uint64_t gradients_failed = 0;    // compute_gradient refused the rollout
    std::uint64_t waits_for_version = 0;   // a worker reached worker.max_updates_per_version
    std::uint64_t budget_refills = 0;      // ... and its learner resent that version (drl/update_budget.h)
    // LearnerCore's counters
    std::uint64_t chunks_applied = 0;
    std::uint64_t contributions_applied = 0;
    std::uint64_t contributions_refused = 0;  // in GRADIENTs that reached the learner and were not applied
    std::uint64_t optimizer_steps = 0;
    std::uint64_t rejected = 0;            // LearnerCounters::rejected_total + the Reassembler's refusals
    std::uint64_t duplicates = 0;
    std::uint64_t versions_published = 0;
    std::uint32_t version = 0;
};

struct Summary {
    std::string arm;
    std::string model_delivery;               // none, unicast or replicated
    std::uint32_t workers = 0;
    std::uint32_t clusters = 0;
    // transport
    std::uint64_t updates = 0;                // offered to senders
    std::uint64_t chunks_sent = 0;
    std::uint64_t contributions_sent = 0;     // sum of contrib_count over sent chunks
    std::uint64_t contributions_applied = 0;  // at the learners
    std::uint64_t contributions_dropped = 0;  // in dropped packets (queue tail drops + pool exhaustion)
    std::uint64_t sender_merges = 0;
    std::uint64_t credit_timeouts = 0;
    std::uint64_t chunks_expired = 0;         // senders' flight expiry (SenderCounters::chunks_expired)
    std::uint64_t credits_excess = 0;         // credit units that found nothing in flight
    std::uint64_t feedback_sent = 0;
    std::uint64_t feedback_suppressed = 0;
    double window_mean = 0;                   // over workers, at the end
    // network
    std::uint64_t packets_forwarded = 0;      // packet arrivals at ports (every hop)
    std::uint64_t merges = 0;                 // in-network, all switch ports
    std::uint64_t bytes_saved = 0;
    std::uint64_t drops = 0;                  // packets, all ports
    std::uint64_t pool_exhausted = 0;
    std::uint64_t pool_packets = 0;           // high-water mark of the packet pool
    std::uint64_t verify_failures = 0;        // payloads whose sums were not exact (must be 0)
    std::uint64_t learner_rejects = 0;        // Reassembler refusals (must be 0)
    std::uint64_t contributions_refused = 0;  // training: in GRADIENTs the learner core did not apply (hardening, duplicates)
    ModelTraffic model;
    HopSummary hops[kHopLevels];
    std::vector<ClusterSummary> per_cluster;
    double aom_mean_us = 0;                   // mean over clusters of the time-average
    double aom_peak_us = 0;                   // max over clusters
    double staleness_mean = 0;
    // Of staleness_mean: how far the worker's model was behind the published version when it
    // generated (MODEL delivery); the rest was published during the gradient's trip. Measured when
    // staleness_split (the pattern workload with MODEL on the links), else 0.
    double staleness_at_generation_mean = 0;
    bool staleness_split = false;
    std::uint32_t staleness_max = 0;
    double jain_fairness = 0;                 // over per-cluster applied contributions per worker
    double jain_contended = 0;                // over per-cluster contended packets at the ports, per weight (0: none)
    // Every switch's pipeline counters (switch/core/counters.h), added up over the switches.
    core::SwitchCounters switch_counters;
    core::PortCounters switch_port_counters;
    // the simulator itself
    double sim_end_ms = 0;                    // simulated time when the last event ran
    std::uint64_t events = 0;
    double wall_s = 0;
    double packets_per_wall_s = 0;
    // training workload (empty otherwise)
    std::vector<TrainingClusterSummary> training;
    std::vector<TrainingPoint> curve;
    double compute_wall_s = 0;                // of wall_s: rollouts, gradients and evaluations (libtorch, envs)
};

// Time series sink: one row per (time, metric, key).
struct SeriesRow {
    double t_ms;
    const char* metric;
    std::uint32_t key;
    double value;
};

class Simulator {
public:
    // A training scenario needs `backend` (torch_training_backend()); without it, or with a cluster
    // YAML that does not load, the constructor throws ConfigError naming the key.
    explicit Simulator(const Scenario& s, const TrainingBackend* backend = nullptr);
    ~Simulator();
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    // Runs to completion (generation until duration, then the network drains) and summarizes.
    Summary run();
    const std::vector<SeriesRow>& series() const noexcept;
    // Training workload: called after every evaluation (progress lines; wall_s is the wall time so far).
    void on_evaluation(std::function<void(const TrainingPoint&, double wall_s)> f);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// CSV helpers (header + rows) shared by the CLI and the tests.
std::string summary_csv_header();
std::string summary_csv_row(const std::string& label, const Scenario& s, const Summary& r);
std::string cluster_csv(const std::string& label, const Summary& r);
std::string series_csv(const std::string& label, const std::vector<SeriesRow>& rows);
// Training workload: the return curve (one row per evaluation) and one row per cluster.
std::string training_curve_csv(const std::string& label, const Summary& r);
std::string training_csv(const std::string& label, const Summary& r);

}  // namespace shesha::sim
