// A counterexample: the parameters, the workload step by step, and the model's own trace, as
// JSON (nlohmann-json, common/json_io.h; one line per step).
#pragma once

#include <string>
#include <vector>

#include "bounded_model.h"
#include "verify_config.h"

namespace shesha::verify {

struct Counterexample {
    std::string property;            // "fairness", "responsiveness", "aom"
    int step = 0;                    // where the violation shows
    std::string what;                // human-readable statement of the violation
    VerifyConfig config;             // resolved parameters (only what the replay needs)
    std::vector<std::vector<int>> workload;   // [t][c]: chunks each sender sends
    std::vector<std::vector<int>> versions;   // [t][c]: version of the updates started (model.versions > 0)
    Trace<ConcreteDomain> model_trace;        // what the model predicts for that workload
};

std::string to_json(const Counterexample& cex);
Counterexample counterexample_from_json(const std::string& text, const std::string& source);

void write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);

}  // namespace shesha::verify
