// The REAL code under the model's step discipline, run by shesha-sim's slotted mode
// (tools/sim/slotted.h: core::AggregatingQueue on real frames, one transport::CreditSender and one
// transport::CreditPlanner per cluster), seen as model traces. Used to replay counterexamples and
// to check that the model and the implementation agree step by step.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "counterexample.h"
#include "bounded_model.h"
#include "verify_config.h"

namespace shesha::verify {

struct RealRun {
    Trace<ConcreteDomain> trace;
    // floor(W) of each sender right after each window cut, in order: the model's cut oracle.
    std::vector<std::deque<std::int64_t>> cut_windows;
    std::vector<std::string> notes;  // sends the real window refused, payload check failures
    bool payloads_exact = true;      // every departure's merged payload verified bit for bit
};

// requested[t][c]: chunks the workload asks sender c to send at step t.
// versions[t][c]: version of the updates sender c starts at step t (model.versions > 0).
RealRun run_implementation(const ModelParams& p, const std::vector<std::vector<int>>& requested,
                           const std::vector<std::vector<int>>& versions = {});

// First difference between two traces (sent, depths, drops, departures, marks, cuts, windows,
// in flight), or empty if they agree.
std::string first_difference(const Trace<ConcreteDomain>& model, const Trace<ConcreteDomain>& real);

// Runs the real code and the concrete model (its window cuts taken from the real sender, each
// checked against the model's bounds) on the same workload; empty if they agree step by step.
std::string check_agreement(const ModelParams& p, const std::vector<std::vector<int>>& requested,
                            const std::vector<std::vector<int>>& versions = {});

// The violations of one property ("fairness", "responsiveness", "aom") on a concrete trace.
std::vector<Violation<ConcreteDomain>> violations_of(const VerifyConfig& cfg, const std::string& property,
                                                     const Trace<ConcreteDomain>& trace);

// The verifier's bounds as the simulator's.
sim::SlotBounds bounds_of(const VerifyConfig& cfg);

struct ReplayReport {
    bool reproduced = false;           // the simulator measures a violation of the same property
    bool same_step = false;            // ... at the step where the model shows it
    bool follows_model = false;        // the real run matched the model's trace step by step
    bool payloads_exact = false;       // every merged payload of the real run verified bit for bit
    bool window_refused = false;       // the real window refused a send the workload asked for
    std::vector<std::string> lines;    // what to print
};
ReplayReport replay(const Counterexample& cex);

}  // namespace shesha::verify
