// The actor-critic model, behind an interface without libtorch types.
//
// Only rl/model_torch.cpp includes libtorch (a TU with <torch/torch.h> costs 25-45 s and 1.3 GB to
// compile); everything else, the trainer, the CLI, the tests and the DRL workers that put
// parameters and gradients on the wire, sees flat fp32 vectors only. The torch-free types it
// takes and returns (ModelConfig, Rollout, ...) are in drl/model/model_types.h; the optimizers
// in drl/model/optimizer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "model/model_types.h"
#include "model/optimizer.h"

namespace shesha::rl {

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

}  // namespace shesha::rl
