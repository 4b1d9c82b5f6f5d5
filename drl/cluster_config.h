// The DRL cluster configuration shared by shesha-learner and shesha-worker: one YAML file per
// training job (configs/cluster-*.yaml documents every key). The wire cluster id is not in the
// file: both processes take it from --cluster, so one file can serve several clusters.
//
// Parsing is strict, in the style of switch/core/switch_config.cpp: an unknown or duplicate key, a
// wrong type or an out-of-range value raises ConfigError "FILE:LINE:COL: key.path: expected ...,
// got ...". Scalars are read from their text, never through yaml-cpp's lenient conversions.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model_types.h"
#include "model/optimizer.h"
#include "transport/credit_sender.h"

namespace shesha::drl {

class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct A3cConfig {
    std::uint32_t n_steps = 5;  // rollout length (shorter at episode ends)
    rl::LossConfig loss;        // gamma, entropy, value_coef, max_grad_norm
};

// Transport constants; chunk_elems and the window fields become transport::SenderConfig.
struct TransportConfig {
    std::uint32_t chunk_elems = 1024;
    double w_init = 16;
    double w_min = 1.0 / 16;  // SenderConfig's default
    double w_max = 256;
    double additive_increase = 1;
    bool slow_start = true;    // double the window per unmarked round until the first cut (SenderConfig::slow_start)
    double gain = 1.0 / 16;
    double alpha_init = 1.0;
    std::uint32_t credit_timeout_ms = 200;  // at least 1: 0 is refused (a worker would wait forever)
    std::uint32_t merge_version_gap = UINT32_MAX;
    bool merge_aware = false;  // window cuts scaled down by the switch's reported merge fraction
    double merge_floor = 0;    // with merge_aware: no window below this while the queue merges (0: off)
    bool bank_excess = false;  // keep credit units that find nothing in flight (SenderConfig::bank_excess)
    double flight_expiry_rtts = 2;       // SenderConfig::flight_expiry_rtts (0: off)
    std::uint32_t flight_expiry_ms = 0;  // SenderConfig::flight_expiry_ns: a fixed expiry instead (0: none)
};

// How the learner applies a merged chunk of k contributions (the switch delivers their sum).
enum class MergedSteps : std::uint8_t {
    One,              // one optimizer step on the average
    PerContribution,  // k steps on the average (at most kMaxStepsPerChunk): as much progress per
                      // contribution as unmerged updates get; for SGD, the linear scaling rule
    Sqrt,             // one step on the average at sqrt(k) times the learning rate (k at most
                      // kMaxStepsPerChunk): the square-root scaling rule for adaptive optimizers
                      // (RMSProp, Adam), whose noise falls as 1/k with a batch of k
};
inline constexpr std::uint32_t kMaxStepsPerChunk = 32;

// An IPv4 prefix (address/length, host byte order) a learner admits workers from.
struct Ipv4Prefix {
    std::uint32_t address = 0;
    std::uint8_t length = 32;
    bool contains(std::uint32_t ip) const noexcept {
        const std::uint32_t mask = length == 0 ? 0 : ~std::uint32_t{0} << (32 - length);
        return (ip & mask) == (address & mask);
    }
};

// How the learner sends MODEL on publishes and rebroadcasts (docs/transport.md, "Replicated model
// delivery"). Answers to model requests are unicast either way.
enum class ModelDelivery : std::uint8_t {
    Unicast,     // one copy of every chunk to every active worker
    Replicated,  // one copy of every chunk to model_group; a Shesha switch fans it out to the members
};

// Whether the learner's CREDITs leave as CREDIT_BATCHes to model_group (docs/transport.md, "CREDIT
// fan-out"). Auto: with replicated delivery, whose Shesha switch knows the group's members.
enum class CreditBatching : std::uint8_t { Auto, On, Off };

// worker_id of a MODEL chunk sent to the cluster's group: "every member" (the switch rewrites it).
inline constexpr std::uint32_t kEveryWorker = 0xFFFFFFFFu;

struct LearnerConfig {
    double publish_interval_ms = 5;           // a new model version at most this often (if changed); fractional ms allowed
    std::uint32_t rebroadcast_ms = 250;       // the current version again to every known worker
    bool staleness_scaling = false;           // scale a chunk by 1 / (1 + staleness)
    MergedSteps merged_steps = MergedSteps::One;
    std::uint32_t sqrt_max_staleness = 2;     // merged_steps sqrt: only chunks at most this stale
    std::uint32_t eval_interval_ms = 2000;    // deterministic evaluation cadence
    std::uint32_t eval_episodes = 10;
    std::uint32_t checkpoint_interval_ms = 10000;  // with --checkpoint; 0: only on exit
    std::uint32_t worker_timeout_ms = 10000;  // a worker silent this long gets no more broadcasts
    std::uint32_t max_workers = 256;          // known workers (bounds memory and broadcast cost)
    // Hardening against poisoned or forged chunks (docs/aom.md, "What the learner refuses").
    double max_grad_norm = -1;      // L2 clip of each chunk's averaged gradient; 0: off;
                                    // < 0 (not given): a3c.max_grad_norm, the workers' own clip
    double max_abs_element = 1000;  // a chunk whose averaged element exceeds this is rejected; 0: off
    std::uint32_t max_staleness = 1000;  // versions behind (or ahead) beyond which a chunk is rejected
    // Admission: who may register as a worker and receive MODEL. Empty: anyone (no allow-list).
    std::vector<Ipv4Prefix> admit_sources;
    std::vector<std::uint32_t> admit_worker_ids;  // sorted
    std::uint32_t model_budget = 64;  // MODEL copies a worker receives between two datagrams from it
    ModelDelivery model_delivery = ModelDelivery::Unicast;
    std::uint32_t model_group = 0;    // IPv4 multicast group, host byte order; 0: none (required
                                      // with Replicated, accepted and unused with Unicast)
    // CREDIT datagrams leave with IP TOS 0x10 (IPTOS_LOWDELAY, ECN bits 0), so that the learner
    // host's pfifo_fast or prio qdisc serves them ahead of MODEL (TOS 0); docs/transport.md,
    // "CREDIT ahead of MODEL".
    bool credit_priority = true;
    // The CREDITs owed for one received chunk leave as CREDIT_BATCH datagrams to model_group (up to
    // 56 CREDITs each), which a Shesha switch expands into one CREDIT per worker (docs/transport.md,
    // "CREDIT fan-out"). Needs model_delivery replicated: the switch knows the members from the
    // group. Off: one CREDIT datagram per worker. Auto (the default): on with replicated delivery.
    CreditBatching credit_batching = CreditBatching::Auto;
};

inline bool batches_credits(const LearnerConfig& l) noexcept {
    return l.model_delivery == ModelDelivery::Replicated && l.credit_batching != CreditBatching::Off;
}

struct WorkerConfig {
    std::uint32_t max_updates_per_version = 0;  // gradients per adopted model; 0: no limit
    std::uint32_t model_request_ms = 100;       // ask for the model this often while without one
    std::uint32_t learner_silence_ms = 1000;    // no word from the learner this long: ask again
    std::uint32_t metrics_interval_ms = 250;    // window/progress sampling period
};

struct ClusterConfig {
    std::string source;         // file name, for messages
    rl::ModelConfig model;      // env_name, hidden_sizes, activation
    A3cConfig a3c;
    rl::OptimizerConfig optimizer;
    TransportConfig transport;
    LearnerConfig learner;
    WorkerConfig worker;
    std::uint16_t udp_port = 17717;
    std::uint64_t seed = 1;     // base seed: initial weights, worker environments, evaluation
};

// Reads and validates the file; throws ConfigError.
ClusterConfig load_cluster_config(const std::string& path);
// The same from YAML text (source names it in messages); for tests.
ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& source);

// The sender configuration for one worker of the cluster.
transport::SenderConfig sender_config(const ClusterConfig& c, std::uint16_t cluster_id,
                                      std::uint32_t worker_id, std::uint32_t model_elems);

// Seed streams derived from the base seed (envs::derive_worker_seed): workers use their worker id,
// these ids sit far outside any worker id a test or a rack uses.
inline constexpr std::uint64_t kInitialWeightsStream = 1'000'001;
inline constexpr std::uint64_t kEvaluationStream = 1'000'000;

}  // namespace shesha::drl
