// shesha-sim --measure-compute: this machine's cost of the training workload's compute, the
// numbers training.step_us and training.update_us model (training_backend.h). Torch-free: the
// model comes from the backend.
#include <chrono>

#include <fmt/format.h>

#include "cluster_config.h"
#include "envs/registry.h"
#include "envs/seeding.h"
#include "sim_config.h"
#include "training_backend.h"

namespace shesha::sim {

ComputeCost measure_compute(const drl::ClusterConfig& config, const TrainingBackend& backend, std::uint32_t rollouts) {
    using Clock = std::chrono::steady_clock;
    std::string error;
    auto model = backend.create_model(
        config.model, worker::envs::derive_worker_seed(config.seed, drl::kInitialWeightsStream), &error);
    if (!model) throw ConfigError(fmt::format("{}: model: {}", config.source, error));
    auto env = worker::envs::make_environment(config.model.env_name);
    worker::envs::Rng rng(worker::envs::derive_worker_seed(config.seed, 0));
    worker::envs::Observation observation = env->reset(rng);
    std::vector<float> gradient(model->parameter_count());
    rl::Rollout rollout;
    ComputeCost cost;
    double step_ns = 0, update_ns = 0;
    const std::uint32_t warmup = std::min<std::uint32_t>(rollouts / 10 + 1, 50);
    // worker_main.cpp's rollout, timed in two parts: the steps (act + env.step) and the gradient.
    for (std::uint32_t r = 0; r < warmup + rollouts; ++r) {
        const bool timed = r >= warmup;
        rollout.clear();
        bool over = false;
        const auto t0 = Clock::now();
        while (rollout.steps() < config.a3c.n_steps && !over) {
            const auto obs = observation.view();
            const rl::PolicyDecision d = model->act(obs, rng, false);
            const auto result = env->step(d.env_action);
            rollout.observations.insert(rollout.observations.end(), obs.begin(), obs.end());
            rollout.actions.push_back(d.sampled);
            rollout.rewards.push_back(static_cast<float>(result.reward));
            observation = result.observation;
            if (result.terminated || result.truncated) {
                over = true;
                rollout.terminated = result.terminated;
            }
        }
        const auto last = observation.view();
        rollout.bootstrap_observation.assign(last.begin(), last.end());
        if (over) observation = env->reset(rng);
        const auto t1 = Clock::now();
        model->compute_gradient(rollout, config.a3c.loss, gradient);
        const auto t2 = Clock::now();
        if (!timed) continue;
        step_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
        update_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
        cost.steps += rollout.steps();
        ++cost.updates;
    }
    cost.step_us = cost.steps ? step_ns / static_cast<double>(cost.steps) / 1e3 : 0;
    cost.update_us = cost.updates ? update_ns / static_cast<double>(cost.updates) / 1e3 : 0;
    return cost;
}

}  // namespace shesha::sim
