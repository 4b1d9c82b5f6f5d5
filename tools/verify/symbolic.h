// Z3 side: unrolls the model (bounded_model.h) over the horizon with free workloads and checks one
// property; on a counterexample, extracts the workload and the model's trace.
#pragma once

#include <string>
#include <vector>

#include "counterexample.h"
#include "verify_config.h"

namespace shesha::verify {

enum class Property { Fairness, Responsiveness, Aom, VersionSpread };
const char* to_string(Property p);

struct CheckResult {
    Property property = Property::Fairness;
    bool verified = false;       // no counterexample within the bounds
    double solve_seconds = 0;    // encoding + solving
    Counterexample cex;          // when !verified
};

// Throws std::invalid_argument if the property is not configured.
CheckResult check_property(const VerifyConfig& cfg, Property p);

}  // namespace shesha::verify
