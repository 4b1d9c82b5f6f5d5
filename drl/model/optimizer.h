// Optimizers on flat fp32 vectors (the model's flat layout, model/model_types.h). Plain C++, no
// libtorch: the learner core applies merged gradients with them, and tests and tools use them
// without torch headers. The element-wise loops are in optimizer_kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shesha::rl {

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
    // `lr_multiplier` multiplies the configured learning rate for this step only (the learner's
    // square-root rule for merged chunks). False (nothing changes) when a span's size is not
    // parameter_count().
    virtual bool apply(std::span<float> parameters, std::span<const float> gradient, float scale,
                       float lr_multiplier = 1.0F) = 0;
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
