// shesha-verify configuration: the bounded model's parameters and the property thresholds.
//
// Queue and marking parameters come from a shesha-switch YAML (switch_config:, one port), window
// constants from the same keys as transport::SenderConfig (transport:), and the verifier's own
// bounds from model: and properties:. Parsing is strict: unknown keys, wrong types and values out
// of range raise VerifyConfigError naming the key path.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <algorithm>

namespace shesha::verify {

class VerifyConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Everything the step function needs; small integers so that Z3 unrolls quickly.
struct ModelParams {
    int clusters = 2;            // C: one CreditSender per cluster
    int horizon = 10;            // T: steps
    int chunks = 2;              // K: chunk indexes per update (merge keys per cluster)
    int elems_per_chunk = 8;     // only for the replay's real frames
    int service_rate = 1;        // S: packets dequeued per step
    int max_arrivals = 2;        // A_max: packets a sender may send per step
    int credit_delay = 1;        // steps from a departure to its CREDIT at the sender (>= 1)
    int feedback_delay = 1;      // steps from a marked arrival to the switch's FEEDBACK (>= 1)
    bool feedback = false;       // switch sends FEEDBACK for marked gradients
    int queue_packets = 4;       // Q: the real queue's slot count (rounded up to a power of two)
    int mark_depth = 0;          // M: mark arrivals finding >= M waiting; 0 = off
    bool aggregation = true;     // merge rule on
    // Bit c set: cluster c's gradients are never merged (the switch's per-cluster rule turns
    // aggregation off for it, or its sender is not a listed member).
    unsigned unmerged_clusters = 0;
    // Window constants (transport::SenderConfig). Integers: see docs/verification.md.
    int w_init = 2;
    int w_min = 1;
    int w_max = 4;
    int additive_increase = 1;
    // Per-cluster window caps (each in [w_min, w_max]; empty: w_max for all). A cluster's w_init is
    // min(w_init, its cap). Different clusters' workers may run different transport settings.
    std::vector<int> w_max_by_cluster;
    int w_max_of(int c) const {
        return c < static_cast<int>(w_max_by_cluster.size()) ? w_max_by_cluster[c] : w_max;
    }
    int w_init_of(int c) const { return std::min(w_init, w_max_of(c)); }
    double gain = 1.0 / 16;      // used by the real sender; abstracted away in the model
    double alpha_init = 1.0;
    // Depth at which the queue counts as congested for the responsiveness property (0: none).
    int congestion_threshold = 0;
    // Exact window arithmetic: the model carries the sender's W and alpha as reals and cuts them
    // like CreditSender does (non-linear for Z3). Off: floor(W) with an interval after each cut.
    bool exact_window = false;
};

struct FairnessSpec { int window = 4; int epsilon = 2; };
struct ResponsivenessSpec { int within = 6; int threshold = 0; };
struct AomSpec { int bound = 4; };

struct VerifyConfig {
    ModelParams model;
    std::optional<FairnessSpec> fairness;
    std::optional<ResponsivenessSpec> responsiveness;
    std::optional<AomSpec> aom;
    std::string source;
    std::string notes;  // e.g. which values came from which file, ignored switch settings
};

// Parses verify YAML text; base_dir resolves a relative switch_config path.
VerifyConfig parse_verify_config(const std::string& yaml_text, const std::string& source,
                                 const std::string& base_dir);
VerifyConfig load_verify_config(const std::string& path);

// Rejects parameter sets the model cannot represent; empty if fine.
std::string validate(const ModelParams& p);

}  // namespace shesha::verify
