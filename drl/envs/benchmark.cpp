#include "envs/benchmark.h"

#include <chrono>

namespace shesha::worker::envs {

BenchmarkResult benchmark_environment(Environment& env, std::uint64_t max_steps, double max_seconds,
                                      std::uint64_t seed) {
    using Clock = std::chrono::steady_clock;
    constexpr std::uint64_t kClockCheckInterval = 4096;  // read the clock rarely

    Rng rng(seed);
    const ActionSpace& space = env.action_space();
    BenchmarkResult result;
    float observation_checksum = 0.0F;  // keeps the work observable to the optimiser

    const auto start = Clock::now();
    env.reset(rng);
    result.episodes = 1;
    while (result.steps < max_steps) {
        Action action;
        if (space.is_discrete()) {
            action.index = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(space.discrete_count)));
        } else {
            for (std::size_t i = 0; i < space.box_size; ++i) {
                action.values[i] = static_cast<float>(rng.uniform(space.box_low, space.box_high));
            }
        }
        const StepResult step = env.step(action);
        observation_checksum += step.observation.values[0];
        ++result.steps;
        if (step.terminated || step.truncated) {
            env.reset(rng);
            ++result.episodes;
        }
        if (result.steps % kClockCheckInterval == 0 &&
            std::chrono::duration<double>(Clock::now() - start).count() >= max_seconds) {
            break;
        }
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    static volatile float sink;
    sink = observation_checksum;
    static_cast<void>(sink);
    return result;
}

}  // namespace shesha::worker::envs
