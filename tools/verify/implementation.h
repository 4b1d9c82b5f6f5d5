// The REAL code under the model's step discipline: core::AggregatingQueue with real frames
// (frame.h + protocol.h + gradient_pattern.h), one transport::CreditSender and one
// transport::CreditPlanner per cluster. Used to replay counterexamples and to check that the model
// and the implementation agree step by step.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "counterexample.h"
#include "model.h"
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
RealRun run_implementation(const ModelParams& p, const std::vector<std::vector<int>>& requested);

// First difference between two traces (sent, depths, drops, departures, marks, cuts, windows,
// in flight), or empty if they agree.
std::string first_difference(const Trace<ConcreteDomain>& model, const Trace<ConcreteDomain>& real);

// Runs the real code and the concrete model (its window cuts taken from the real sender, each
// checked against the model's bounds) on the same workload; empty if they agree step by step.
std::string check_agreement(const ModelParams& p, const std::vector<std::vector<int>>& requested);

// The violations of one property ("fairness", "responsiveness", "aom") on a concrete trace.
std::vector<Violation<ConcreteDomain>> violations_of(const VerifyConfig& cfg, const std::string& property,
                                                     const Trace<ConcreteDomain>& trace);

struct ReplayReport {
    bool reproduced = false;           // the real run violates the same property
    std::vector<std::string> lines;    // what to print
};
ReplayReport replay(const Counterexample& cex);

}  // namespace shesha::verify
