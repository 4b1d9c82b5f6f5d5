// The actor-critic model's vocabulary without libtorch: its configuration, the environment's
// shape, the A3C loss settings, one rollout, and what a gradient step reports. The cluster YAML,
// the learner core and the API speak these types; only rl/ (the libtorch ActorCritic) runs them.
//
// Flat layout: every parameter tensor in registration order (hidden layers weight then bias, the
// policy head, the value head, then log_std for continuous actions), each row-major. The same
// layout is used for parameters and gradients, and it is the payload of MODEL chunks on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "envs/environment.h"
#include "envs/seeding.h"

namespace shesha::rl {

enum class Activation { Tanh, Relu };

struct ModelConfig {
    std::string env_name = "CartPole-v1";  // a Gymnasium id known to drl/envs/registry.h
    std::vector<std::size_t> hidden_sizes{64, 64};  // empty: linear heads on the observation
    Activation activation = Activation::Tanh;
    float initial_log_std = 0.0F;  // continuous actions only: starting log standard deviation
};

// What the model needs to know about the environment; filled from the registry by create().
struct EnvironmentShape {
    std::size_t observation_size = 0;
    bool discrete = true;
    std::size_t action_count = 0;  // Discrete(n): n; Box: number of components
    float action_low = 0.0F;       // Box bounds (same for every component)
    float action_high = 0.0F;
};

struct LossConfig {
    double gamma = 0.99;
    float entropy_beta = 0.01F;
    float value_coef = 0.5F;
    float max_grad_norm = 0.5F;  // global L2 norm the gradient is clipped to; <= 0: no clipping
};

// One n-step segment of one actor's experience. It ends either after n steps or at the end of an
// episode; `terminated` (not truncation) means the return is not bootstrapped.
struct Rollout {
    std::vector<float> observations;  // steps() * observation_size, row per step
    std::vector<worker::envs::Action> actions;  // the sampled actions (unclipped for Box spaces)
    std::vector<float> rewards;
    bool terminated = false;
    std::vector<float> bootstrap_observation;  // the observation after the last step

    std::size_t steps() const { return rewards.size(); }
    void clear() {
        observations.clear();
        actions.clear();
        rewards.clear();
        terminated = false;
        bootstrap_observation.clear();
    }
};

struct GradientReport {
    float policy_loss = 0.0F;   // -mean(log pi(a|s) * advantage)
    float value_loss = 0.0F;    // mean(0.5 * (R - V)^2)
    float entropy = 0.0F;       // mean policy entropy
    float total_loss = 0.0F;    // policy_loss - beta * entropy + value_coef * value_loss
    float gradient_norm = 0.0F; // global L2 norm before clipping
};

// What act() returns: the action the environment takes (clipped to the Box bounds) and the action
// the policy sampled, which the rollout records so the log-probability is that of the sample.
struct PolicyDecision {
    worker::envs::Action env_action;
    worker::envs::Action sampled;
};

// Fills `shape` for a registered environment; false for an unknown id.
bool environment_shape(const std::string& env_name, EnvironmentShape& shape);

}  // namespace shesha::rl
