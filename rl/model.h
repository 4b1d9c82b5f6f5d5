// The actor-critic model and its optimizers, behind an interface without libtorch types.
//
// Only rl/model_torch.cpp includes libtorch (a TU with <torch/torch.h> costs 25-45 s and 1.3 GB to
// compile); everything else, the trainer, the CLI, the tests and later the DRL workers that put
// parameters and gradients on the wire, sees flat fp32 vectors only.
//
// Flat layout: every parameter tensor in registration order (hidden layers weight then bias, the
// policy head, the value head, then log_std for continuous actions), each row-major. The same
// layout is used for parameters and gradients, and it is the payload of MODEL chunks on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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

class ActorCritic {
public:
    virtual ~ActorCritic() = default;

    // nullptr (and `error` set) for an unknown environment or an invalid configuration. `seed`
    // fixes the initial weights (libtorch's global generator is seeded under a lock).
    static std::unique_ptr<ActorCritic> create(const ModelConfig& config, std::uint64_t seed,
                                               std::string* error = nullptr);

    virtual const ModelConfig& config() const = 0;
    virtual const EnvironmentShape& shape() const = 0;
    virtual std::size_t parameter_count() const = 0;

    // Both false when the span's size is not parameter_count().
    virtual bool get_parameters(std::span<float> out) const = 0;
    virtual bool set_parameters(std::span<const float> in) = 0;

    // The gradient of the A3C loss on `rollout` at the current parameters, clipped to
    // loss.max_grad_norm, written into `gradient` (parameter_count() values). Returns false (and
    // leaves `gradient` untouched) for a malformed rollout or a wrong-sized span.
    virtual bool compute_gradient(const Rollout& rollout, const LossConfig& loss,
                                  std::span<float> gradient, GradientReport* report = nullptr) = 0;
    // The loss alone (no gradient), for finite-difference checks and diagnostics.
    virtual bool evaluate_loss(const Rollout& rollout, const LossConfig& loss,
                               GradientReport& report) = 0;

    // Samples from the policy with `rng` (deterministic: argmax / the Gaussian mean). The
    // observation must have shape().observation_size values.
    virtual PolicyDecision act(std::span<const float> observation, worker::envs::Rng& rng,
                               bool deterministic) = 0;
    // V(observation).
    virtual float value(std::span<const float> observation) = 0;
};

// Fills `shape` for a registered environment; false for an unknown id.
bool environment_shape(const std::string& env_name, EnvironmentShape& shape);

enum class OptimizerKind { SharedRmsProp, Adam, Sgd };

struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::SharedRmsProp;
    float learning_rate = 7e-4F;
    float rmsprop_alpha = 0.99F;  // decay of the shared squared-gradient statistics
    float epsilon = 1e-5F;
    float adam_beta1 = 0.9F;
    float adam_beta2 = 0.999F;
};

// An optimizer's internal state, for checkpoints: its step count and per-parameter buffers
// (SGD: none; shared RMSProp: the squared-gradient average; Adam: first, then second moment).
struct OptimizerState {
    std::uint64_t steps = 0;
    std::vector<std::vector<float>> buffers;
};

// Applies flat gradients to flat parameters. One instance holds the optimizer state shared by all
// actors (A3C's "shared statistics" RMSProp): whoever applies a gradient updates the same state.
class Optimizer {
public:
    virtual ~Optimizer() = default;
    static std::unique_ptr<Optimizer> create(const OptimizerConfig& config,
                                             std::size_t parameter_count);

    // parameters -= step(scale * gradient). `scale` lets a merged gradient (the sum of k
    // contributions, as the switch delivers it) be applied as their average with scale = 1/k.
    // False (nothing changes) when a span's size is not parameter_count().
    virtual bool apply(std::span<float> parameters, std::span<const float> gradient,
                       float scale) = 0;
    virtual std::size_t parameter_count() const = 0;
    virtual std::uint64_t steps() const = 0;

    // Checkpointing. restore() returns false (nothing changes) when the number or sizes of the
    // buffers do not match this optimizer's kind and parameter count.
    virtual OptimizerState state() const = 0;
    virtual bool restore(const OptimizerState& state) = 0;
    // The state copied into `out`, reusing its buffers (no allocation once they have the size):
    // the learner keeps one such copy per step to roll back a step that went non-finite.
    virtual void save_state(OptimizerState& out) const = 0;
    // Whether a state is usable: finite everywhere, and second-moment buffers (RMSProp's average,
    // Adam's second moment) non-negative. Empty when it is; otherwise what is wrong, naming the
    // buffer and the first bad element. The shape is restore()'s business.
    virtual std::string check_state(const OptimizerState& state) const = 0;
    // check_state() of the live state is empty.
    virtual bool state_finite() const = 0;
};

}  // namespace shesha::rl
