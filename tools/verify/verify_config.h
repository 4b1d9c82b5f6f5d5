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

#include "slotted.h"

namespace shesha::verify {

class VerifyConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Everything the step function needs: the slotted system shesha-sim runs (small integers so that
// Z3 unrolls quickly), plus how the model treats the sender's window.
struct ModelParams : sim::SlottedSystem {
    // Exact window arithmetic: the model carries the sender's W and alpha as reals and cuts them
    // like CreditSender does (non-linear for Z3). Off: floor(W) with an interval after each cut.
    bool exact_window = false;
    // Tests only: the queue's version rule before issue 11 (an arrival compared with the key's
    // version only, not with the packet's newest), to show the verifier finds the spread it allowed.
    bool legacy_version_match = false;
};

// Weighted fairness: shares[c] is cluster c's intended share (empty or missing entries: 1).
struct FairnessSpec {
    int window = 4;
    int epsilon = 2;
    std::vector<int> shares;
    int share_of(int c) const { return c < static_cast<int>(shares.size()) ? shares[c] : 1; }
};
struct ResponsivenessSpec { int within = 6; int threshold = 0; };
struct AomSpec { int bound = 4; };
struct VersionSpreadSpec { int bound = 0; };  // max - min version in a departing packet

struct VerifyConfig {
    ModelParams model;
    std::optional<FairnessSpec> fairness;
    std::optional<ResponsivenessSpec> responsiveness;
    std::optional<AomSpec> aom;
    std::optional<VersionSpreadSpec> version_spread;
    std::string source;
    std::string notes;  // e.g. which values came from which file, ignored switch settings
};

// The model's window floor for a sender's w_min. A pacing sender (w_min below one chunk) holds at
// most one chunk in flight, as at W = 1, and only sends it later; the model's senders send as soon
// as the window allows, so its floor is one chunk.
inline double modelled_w_min(double w_min) noexcept { return w_min < 1 ? 1.0 : w_min; }

// Parses verify YAML text; base_dir resolves a relative switch_config path.
VerifyConfig parse_verify_config(const std::string& yaml_text, const std::string& source,
                                 const std::string& base_dir);
VerifyConfig load_verify_config(const std::string& path);

// Rejects parameter sets the model cannot represent; empty if fine.
std::string validate(const ModelParams& p);

}  // namespace shesha::verify
