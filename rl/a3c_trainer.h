// A single-process A3C (Mnih et al. 2016) loop over the classic-control environments.
//
// N actors, each with its own environment, seed (drl/envs seeding) and model copy, pull the
// learner's parameters, run an n-step rollout, compute the gradient and push it to the shared
// learner, which applies it with the shared optimizer. Actors run either round-robin on the
// calling thread (deterministic for a seed) or on their own threads (asynchronous, as in A3C).
// The model is evaluated periodically with deterministic (greedy / mean) actions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model.h"

namespace shesha::rl {

struct TrainerConfig {
    ModelConfig model;
    LossConfig loss;
    OptimizerConfig optimizer;
    std::size_t workers = 2;
    std::uint64_t seed = 1;
    std::size_t n_step = 5;              // rollout length (shorter at episode ends)
    std::uint64_t max_steps = 1'000'000; // env steps over all actors (evaluation not counted)
    double max_seconds = 0.0;            // wall-time budget; 0: none
    std::optional<double> target;        // stop once the evaluation mean return reaches it
    std::uint64_t eval_every = 10'000;   // env steps between evaluations
    std::size_t eval_episodes = 10;
    bool threaded = false;  // true: one thread per actor (not reproducible); false: round-robin
};

struct CurvePoint {
    std::uint64_t env_steps = 0;
    double wall_seconds = 0.0;        // training time so far, evaluations included
    std::uint64_t updates = 0;        // gradients applied by the learner
    double eval_mean_return = 0.0;
    double eval_min_return = 0.0;
    double train_mean_return = 0.0;   // last (up to) 20 finished training episodes, 0 if none
};

struct TrainResult {
    std::vector<CurvePoint> curve;
    bool reached_target = false;
    std::uint64_t steps_to_target = 0;  // env steps at the evaluation that reached the target
    double seconds_to_target = 0.0;
    std::uint64_t total_steps = 0;
    double total_seconds = 0.0;
    std::uint64_t updates = 0;
    std::size_t parameter_count = 0;
    std::string error;  // non-empty: the configuration was rejected and nothing ran
};

using ProgressCallback = std::function<void(const CurvePoint&)>;

// Runs until the target is reached, max_steps or max_seconds. Evaluates at every eval_every steps
// and once more at the end.
TrainResult train_a3c(const TrainerConfig& config, const ProgressCallback& progress = {});

// Mean and minimum return of `episodes` deterministic episodes from reset states drawn with
// `seed`; used by the trainer and handy for tests.
struct EvaluationResult {
    double mean_return = 0.0;
    double min_return = 0.0;
};
EvaluationResult evaluate_policy(ActorCritic& model, std::size_t episodes, std::uint64_t seed);

}  // namespace shesha::rl
