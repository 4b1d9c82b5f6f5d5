// Single-core step-rate benchmark of one environment (used for docs/benchmarks.md).
#pragma once

#include <cstdint>

#include "envs/environment.h"

namespace shesha::worker::envs {

struct BenchmarkResult {
    std::uint64_t steps = 0;
    std::uint64_t episodes = 0;  // resets done, including the first one
    double seconds = 0.0;
    double steps_per_second() const { return seconds > 0.0 ? static_cast<double>(steps) / seconds : 0.0; }
};

// Steps `env` with uniformly random actions (reset on termination or truncation) until max_steps
// steps or max_seconds of wall time, whichever comes first. Action sampling and resets are timed too,
// as a worker pays for them as well.
BenchmarkResult benchmark_environment(Environment& env, std::uint64_t max_steps, double max_seconds,
                                      std::uint64_t seed);

}  // namespace shesha::worker::envs
