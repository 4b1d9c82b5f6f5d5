// Optimizers on flat fp32 vectors. Plain C++ (no libtorch): they are a few element-wise loops, and
// keeping them here lets gradient merging code and tests use them without torch headers.
#include <array>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "model/optimizer.h"
#include "model/optimizer_kernels.h"

namespace shesha::rl {

namespace {

// Whether every element is finite (and >= 0 when it must be): branch-free, so it vectorises; it
// runs after every step (the learner's rollback check).
bool usable(std::span<const float> buffer, bool nonnegative) noexcept {
    std::uint32_t bad = 0;
    for (const float x : buffer) {
        std::uint32_t u;
        std::memcpy(&u, &x, sizeof u);
        bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
        if (nonnegative) bad |= static_cast<std::uint32_t>(x < 0.0F);
    }
    return bad == 0;
}

// The first element of `buffer` that is not finite (or negative, when it must not be), described.
std::string check_buffer(std::span<const float> buffer, std::size_t index, const char* name, bool nonnegative) {
    for (std::size_t i = 0; i < buffer.size(); ++i) {
        const float x = buffer[i];
        if (!std::isfinite(x) || (nonnegative && x < 0.0F))
            return fmt::format("buffer {} ({}) element {} is {}", index, name, i, x);
    }
    return {};
}


class SgdOptimizer final : public Optimizer {
public:
    SgdOptimizer(const OptimizerConfig& config, std::size_t count)
        : config_(config), count_(count) {}

    bool apply(std::span<float> parameters, std::span<const float> gradient, float scale,
               float lr_multiplier) override {
        if (parameters.size() != count_ || gradient.size() != count_) {
            return false;
        }
        kernels::sgd(parameters.data(), gradient.data(), count_, config_.learning_rate * lr_multiplier * scale);
        ++steps_;
        return true;
    }
    std::size_t parameter_count() const override { return count_; }
    std::uint64_t steps() const override { return steps_; }
    OptimizerState state() const override { return {steps_, {}}; }
    bool restore(const OptimizerState& state) override {
        if (!state.buffers.empty()) {
            return false;
        }
        steps_ = state.steps;
        return true;
    }
    void save_state(OptimizerState& out) const override {
        out.steps = steps_;
        out.buffers.clear();
    }
    std::string check_state(const OptimizerState&) const override { return {}; }
    bool state_finite() const override { return true; }

private:
    OptimizerConfig config_;
    std::size_t count_;
    std::uint64_t steps_ = 0;
};

// RMSProp as in A3C (Mnih et al. 2016, "shared statistics"): one squared-gradient average for all
// actors, g = alpha * g + (1 - alpha) * grad^2, theta -= lr * grad / sqrt(g + eps).
class SharedRmsPropOptimizer final : public Optimizer {
public:
    SharedRmsPropOptimizer(const OptimizerConfig& config, std::size_t count)
        : config_(config), square_average_(count, 0.0F) {}

    bool apply(std::span<float> parameters, std::span<const float> gradient, float scale,
               float lr_multiplier) override {
        const std::size_t count = square_average_.size();
        if (parameters.size() != count || gradient.size() != count) {
            return false;
        }
        kernels::rmsprop(parameters.data(), square_average_.data(), gradient.data(), count, scale, config_.learning_rate * lr_multiplier,
                         config_.rmsprop_alpha, config_.epsilon);
        ++steps_;
        return true;
    }
    std::size_t parameter_count() const override { return square_average_.size(); }
    std::uint64_t steps() const override { return steps_; }
    OptimizerState state() const override { return {steps_, {square_average_}}; }
    bool restore(const OptimizerState& state) override {
        if (state.buffers.size() != 1 || state.buffers[0].size() != square_average_.size()) {
            return false;
        }
        square_average_ = state.buffers[0];
        steps_ = state.steps;
        return true;
    }
    void save_state(OptimizerState& out) const override {
        out.steps = steps_;
        out.buffers.resize(1);
        out.buffers[0].assign(square_average_.begin(), square_average_.end());
    }
    std::string check_state(const OptimizerState& state) const override {
        return state.buffers.empty() ? std::string{} : check_buffer(state.buffers[0], 0, "squared-gradient average", true);
    }
    bool state_finite() const override { return usable(square_average_, true); }

private:
    OptimizerConfig config_;
    std::vector<float> square_average_;
    std::uint64_t steps_ = 0;
};

// Adam (Kingma and Ba) with bias correction, the form torch.optim.Adam computes.
class AdamOptimizer final : public Optimizer {
public:
    AdamOptimizer(const OptimizerConfig& config, std::size_t count)
        : config_(config), first_moment_(count, 0.0F), second_moment_(count, 0.0F) {}

    bool apply(std::span<float> parameters, std::span<const float> gradient, float scale,
               float lr_multiplier) override {
        const std::size_t count = first_moment_.size();
        if (parameters.size() != count || gradient.size() != count) {
            return false;
        }
        ++steps_;
        const Corrections& k = corrections(steps_);
        const float step_size = config_.learning_rate * lr_multiplier / k.correction1;
        const float sqrt_correction2 = std::sqrt(k.correction2);
        kernels::adam(parameters.data(), first_moment_.data(), second_moment_.data(), gradient.data(), count, scale,
                      step_size, config_.adam_beta1, config_.adam_beta2, sqrt_correction2, config_.epsilon);
        return true;
    }
    std::size_t parameter_count() const override { return first_moment_.size(); }
    std::uint64_t steps() const override { return steps_; }
    OptimizerState state() const override { return {steps_, {first_moment_, second_moment_}}; }
    bool restore(const OptimizerState& state) override {
        if (state.buffers.size() != 2 || state.buffers[0].size() != first_moment_.size() ||
            state.buffers[1].size() != second_moment_.size()) {
            return false;
        }
        first_moment_ = state.buffers[0];
        second_moment_ = state.buffers[1];
        steps_ = state.steps;
        return true;
    }
    void save_state(OptimizerState& out) const override {
        out.steps = steps_;
        out.buffers.resize(2);
        out.buffers[0].assign(first_moment_.begin(), first_moment_.end());
        out.buffers[1].assign(second_moment_.begin(), second_moment_.end());
    }
    std::string check_state(const OptimizerState& state) const override {
        std::string why;
        if (!state.buffers.empty()) why = check_buffer(state.buffers[0], 0, "first moment", false);
        if (why.empty() && state.buffers.size() > 1) why = check_buffer(state.buffers[1], 1, "second moment", true);
        return why;
    }
    bool state_finite() const override { return usable(first_moment_, false) && usable(second_moment_, true); }

private:
    // Bias corrections 1 - beta^t. Two std::pow per step cost as much as the arithmetic on a
    // 256-element chunk; every chunk's optimizer walks the same t = 1, 2, 3, ..., so a small
    // per-thread memo of exact pow results serves them all (same values, bit for bit).
    struct Corrections {
        std::uint64_t t = 0;
        float beta1 = 0, beta2 = 0;
        float correction1 = 0, correction2 = 0;
    };
    const Corrections& corrections(std::uint64_t t) const {
        static thread_local std::array<Corrections, 64> memo{};
        Corrections& e = memo[t & 63];
        if (e.t != t || e.beta1 != config_.adam_beta1 || e.beta2 != config_.adam_beta2) {
            const double td = static_cast<double>(t);
            e = {t, config_.adam_beta1, config_.adam_beta2,
                 static_cast<float>(1.0 - std::pow(config_.adam_beta1, td)),
                 static_cast<float>(1.0 - std::pow(config_.adam_beta2, td))};
        }
        return e;
    }

    OptimizerConfig config_;
    std::vector<float> first_moment_;
    std::vector<float> second_moment_;
    std::uint64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerConfig& config,
                                             std::size_t parameter_count) {
    switch (config.kind) {
        case OptimizerKind::Sgd:
            return std::make_unique<SgdOptimizer>(config, parameter_count);
        case OptimizerKind::SharedRmsProp:
            return std::make_unique<SharedRmsPropOptimizer>(config, parameter_count);
        case OptimizerKind::Adam:
            return std::make_unique<AdamOptimizer>(config, parameter_count);
    }
    return nullptr;
}

}  // namespace shesha::rl
