// shesha-sim's slotted mode: time advances in slots and the bottleneck port serves service_rate
// packets per slot. It runs the same real code as the event mode (core::AggregatingQueue on real
// frames, one transport::CreditSender and one transport::CreditPlanner per cluster) under the step
// discipline of shesha-verify's model (docs/verification.md), so that a verifier counterexample,
// which is a per-slot workload, replays here and the simulator measures the properties itself.
//
// Slot t, in this order:
//   A. FEEDBACK for cluster c's arrivals marked at slot t - feedback_delay,
//   B. CREDITs for the departures of slot t - credit_delay (learner-side CreditPlanner),
//   C. each sender sends what the workload asks, as far as its real window allows,
//   D. the arrivals enter the queue round robin over clusters (1st of each, then 2nd, ...),
//   E. up to service_rate packets leave from the head.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace shesha::sim {

// The system under the slot discipline: one egress queue, one one-worker cluster per sender.
struct SlottedSystem {
    int clusters = 2;            // C: one CreditSender per cluster
    int horizon = 10;            // T: slots
    int chunks = 2;              // K: chunk indexes per update (merge keys per cluster)
    int elems_per_chunk = 8;     // fp32 elements in each real frame
    int service_rate = 1;        // S: packets dequeued per slot
    int max_arrivals = 2;        // A_max: packets a sender may send per slot
    int credit_delay = 1;        // slots from a departure to its CREDIT at the sender (>= 1)
    int feedback_delay = 1;      // slots from a marked arrival to the switch's FEEDBACK (>= 1)
    bool feedback = false;       // switch sends FEEDBACK for marked gradients
    int queue_packets = 4;       // Q: the real queue's slot count
    int mark_depth = 0;          // M: mark arrivals finding >= M waiting; 0 = off
    bool aggregation = true;     // merge rule on
    bool fair_scheduling = false;  // the switch port schedules per cluster (DRR in packets)
    // The fair queues' options (core::PortQueue; only with fair_scheduling): each cluster's weight
    // (aggregation.clusters[].weight; empty or missing entries: 1), bounded-lag round robin
    // (aggregation.fair_lag, 0 = deficit round robin) and chunk following (aggregation.chunk_follow).
    std::vector<int> weights;
    int fair_lag = 0;
    bool chunk_follow = false;
    int weight_of(int c) const { return c < static_cast<int>(weights.size()) ? weights[c] : 1; }
    // Bit c set: cluster c's gradients are never merged (per-cluster switch rule or non-member).
    unsigned unmerged_clusters = 0;
    // Window constants (transport::SenderConfig).
    int w_init = 2;
    int w_min = 1;
    int w_max = 4;
    int additive_increase = 1;
    bool slow_start = true;  // SenderConfig::slow_start (counterexample files from before it: false)
    // Per-cluster window caps (each in [w_min, w_max]; empty: w_max for all).
    std::vector<int> w_max_by_cluster;
    int w_max_of(int c) const {
        return c < static_cast<int>(w_max_by_cluster.size()) ? w_max_by_cluster[c] : w_max;
    }
    int w_init_of(int c) const { return std::min(w_init, w_max_of(c)); }
    double gain = 1.0 / 16;
    double alpha_init = 1.0;
    // Depth at which an arrival counts as sent into a congested queue (0: never).
    int congestion_threshold = 0;
    // Model versions. 0: every update carries version 0 (one model version in the horizon).
    // V > 0: the updates a sender starts in slot t carry the workload's version for (t, sender),
    // in [0, V], in any order (several workers of a cluster at different versions, stale ones).
    int versions = 0;
    int version_tolerance = 0;   // the switch's per-cluster rule: merge if max - min stays <= this
};

// Empty if the system can run; else what is wrong, naming the parameter.
std::string validate(const SlottedSystem& s);

struct SlotDeparture {
    int cluster = 0;
    int contributions = 0;
    bool marked = false;
    int min_version = 0;  // oldest and newest version of the contributions it carries
    int max_version = 0;
};

// What one slot did; per-cluster vectors have one entry per cluster.
struct SlotRecord {
    std::vector<std::int64_t> sent;          // chunks put on the wire
    std::vector<bool> greedy;                // sent all that max_arrivals and the window allowed
    std::vector<bool> arrival_marked;        // an arrival was marked
    std::vector<std::int64_t> marked_depth;  // deepest class depth a marked arrival found (0: none)
    std::vector<bool> congested;             // an arrival found its class at depth >= congestion_threshold
    std::int64_t depth_after_arrivals = 0;
    std::int64_t depth_end = 0;              // after service
    std::vector<std::int64_t> class_depth_end;  // per cluster: its scheduling class's depth after service
                                                // (FIFO: one class, so depth_end for every cluster)
    std::int64_t drops = 0;                  // tail drops
    std::int64_t merges = 0;                 // arrivals merged into a waiting packet
    std::vector<bool> backlogged;            // a packet of the cluster waited before service
    std::vector<SlotDeparture> departures;   // in departure order
    std::vector<std::int64_t> served;        // packets departed
    std::vector<bool> cut;                   // the sender cut its window (FEEDBACK or round end)
    std::vector<std::int64_t> window;        // usable window after sending
    std::vector<std::int64_t> in_flight;
};

struct SlottedRun {
    std::vector<SlotRecord> slots;
    // floor(W) of each sender right after each of its window cuts, in order.
    std::vector<std::deque<std::int64_t>> cut_windows;
    std::vector<std::string> notes;  // sends the real window refused, payload check failures
    bool payloads_exact = true;      // every departure's merged payload verified bit for bit
};

// requested[t][c]: chunks the workload asks sender c to send at slot t (missing entries: 0).
// versions[t][c]: the version of the updates sender c starts in slot t (missing: 0).
// Throws std::invalid_argument if validate(s) is not empty.
SlottedRun run_slotted(const SlottedSystem& s, const std::vector<std::vector<int>>& requested,
                       const std::vector<std::vector<int>>& versions = {});

// ---- the system-wide objectives, measured on a run ----
// Service difference over W slots, in packets per unit of share: |s_a / w_a - s_b / w_b| <= epsilon,
// with w the clusters' shares (empty or missing entries: 1, the unweighted bound).
struct FairnessBound {
    int window = 4;
    int epsilon = 2;
    std::vector<int> shares;
    int share_of(int c) const { return c < static_cast<int>(shares.size()) ? shares[c] : 1; }
};
struct ResponsivenessBound { int within = 6; int threshold = 0; };  // slots to react to congestion
struct AomBound { int bound = 4; };                              // slots a backlogged cluster waits
struct VersionSpreadBound { int bound = 0; };                    // max - min version in a departure
struct SlotBounds {
    std::optional<FairnessBound> fairness;
    std::optional<ResponsivenessBound> responsiveness;
    std::optional<AomBound> aom;
    std::optional<VersionSpreadBound> version_spread;
};

struct BoundViolation {
    std::string property;  // "fairness", "responsiveness", "aom", "version_spread"
    int slot = 0;          // window start, congested slot, or slot where the age exceeds the bound
    std::string what;
};

// Measurements of one run against the bounds. Definitions (docs/verification.md):
//   AoM age of cluster c: 0 in a slot where c was served, else previous age + 1 while a packet of
//   c waits, else 0.
//   Fairness: over W consecutive slots in which two clusters are both backlogged and greedy in
//   every slot, the difference of their served packets per unit of share (s_a / w_a - s_b / w_b,
//   compared as s_a w_b - s_b w_a against epsilon w_a w_b: exact integers).
//   Reaction time: from a slot where an arrival of c found depth >= threshold, the slots until
//   the queue ends a slot under the threshold (0 if that same slot) or c cuts its window.
struct SlotMeasurements {
    std::vector<std::vector<std::int64_t>> ages;  // [t][c]
    std::vector<std::int64_t> aom_peak;           // per cluster, slots
    std::int64_t fairness_worst = -1;             // largest |difference|; -1: no eligible window
    int fairness_worst_slot = -1;
    std::vector<std::int64_t> reaction_worst;     // per cluster; -1: never congested; horizon-capped
    std::int64_t version_spread_worst = 0;        // largest max - min version of a departure
    std::vector<BoundViolation> violations;       // in slot order within each property
};
SlotMeasurements measure(const std::vector<SlotRecord>& slots, const SlotBounds& bounds);

// A slotted replay file: the JSON counterexample shesha-verify writes (docs/verification.md).
struct SlottedReplay {
    std::string property;    // the property the verifier found violated
    int step = 0;            // where the verifier's model shows the violation
    std::string what;
    SlottedSystem system;
    SlotBounds bounds;
    std::vector<std::vector<int>> workload;  // [t][c]
    std::vector<std::vector<int>> versions;  // [t][c], empty unless system.versions > 0
};
struct ReplayFileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
SlottedReplay parse_replay(const std::string& json_text, const std::string& source);

// One row per (slot, cluster): sent, window, in flight, served, age, cut, marked, plus the queue's
// depth and drops; for plot_slots.py.
std::string slots_csv(const std::vector<SlotRecord>& slots, const SlotMeasurements& m);

}  // namespace shesha::sim
