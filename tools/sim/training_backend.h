// What the simulator's training workload needs from libtorch, behind plain function objects so
// the simulator library itself never links it: shesha-sim builds without libtorch, and only a
// training scenario asks for this backend (docs/simulation.md, "Training workload").
//
// torch_backend.cpp (compiled into the programs that link libtorch, never into shesha_sim) fills
// it with rl::ActorCritic::create and rl::evaluate_policy. No torch header is included here or
// there: rl/model.h and rl/a3c_trainer.h are torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "a3c_trainer.h"  // rl::EvaluationResult (torch-free header)
#include "model.h"        // rl::ActorCritic (torch-free interface)

namespace shesha::drl {
struct ClusterConfig;
}

namespace shesha::sim {

struct TrainingBackend {
    // rl::ActorCritic::create
    std::function<std::unique_ptr<rl::ActorCritic>(const rl::ModelConfig&, std::uint64_t seed, std::string* error)>
        create_model;
    // rl::evaluate_policy
    std::function<rl::EvaluationResult(rl::ActorCritic&, std::size_t episodes, std::uint64_t seed)> evaluate;
};

// The libtorch backend: defined in torch_backend.cpp, which only builds where libtorch is found
// (SHESHA_SIM_TORCH is then defined for the programs that link it).
const TrainingBackend& torch_training_backend();

// This machine's compute costs for a cluster (`shesha-sim --measure-compute`): wall time per
// environment step (the policy's act() plus env.step()) and per gradient (compute_gradient on an
// n-step rollout), over `rollouts` rollouts of a fresh model. What training.step_us and
// training.update_us model.
struct ComputeCost {
    double step_us = 0;
    double update_us = 0;
    std::uint64_t steps = 0;
    std::uint64_t updates = 0;
};
ComputeCost measure_compute(const drl::ClusterConfig& config, const TrainingBackend& backend, std::uint32_t rollouts);

}  // namespace shesha::sim
