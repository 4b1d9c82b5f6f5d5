// The libtorch implementation of ActorCritic: the only translation unit of shesha_rl that includes
// libtorch headers (see model.h for why).
#include <torch/torch.h>

#include <cmath>
#include <mutex>
#include <numbers>

#include "envs/registry.h"
#include "model.h"

namespace shesha::rl {

namespace {

using worker::envs::Action;
using worker::envs::Rng;

// libtorch's generator is process-global: seeding and drawing the initial weights must not
// interleave between models created on different threads.
std::mutex& torch_init_mutex() {
    static std::mutex mutex;
    return mutex;
}

// A standard normal draw from our own generator (Box-Muller), so sampling is reproducible and
// independent of libtorch's global generator.
double standard_normal(Rng& rng) {
    const double u1 = 1.0 - rng.next_unit();  // (0, 1]: log() stays finite
    const double u2 = rng.next_unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

torch::Tensor tensor_view(std::span<const float> values, std::int64_t rows, std::int64_t cols) {
    // from_blob does not copy and wants a mutable pointer; the tensor is only read.
    return torch::from_blob(const_cast<float*>(values.data()), {rows, cols}, torch::kFloat32);
}

class TorchActorCritic final : public ActorCritic {
public:
    TorchActorCritic(const ModelConfig& config, const EnvironmentShape& shape, std::uint64_t seed)
        : config_(config), shape_(shape) {
        torch::set_num_threads(1);  // small MLPs: one thread is fastest here (platform notes)
        std::lock_guard lock(torch_init_mutex());
        torch::manual_seed(seed);
        auto input = static_cast<std::int64_t>(shape_.observation_size);
        for (std::size_t width : config_.hidden_sizes) {
            hidden_.emplace_back(input, static_cast<std::int64_t>(width));
            input = static_cast<std::int64_t>(width);
        }
        policy_head_ = torch::nn::Linear(input, static_cast<std::int64_t>(shape_.action_count));
        value_head_ = torch::nn::Linear(input, 1);
        {
            // A near-uniform (or near-zero-mean) initial policy: large initial logits make some
            // actions almost never explored.
            torch::NoGradGuard no_grad;
            policy_head_->weight.mul_(0.01);
            policy_head_->bias.zero_();
        }
        for (auto& layer : hidden_) {
            parameters_.push_back(layer->weight);
            parameters_.push_back(layer->bias);
        }
        parameters_.push_back(policy_head_->weight);
        parameters_.push_back(policy_head_->bias);
        parameters_.push_back(value_head_->weight);
        parameters_.push_back(value_head_->bias);
        if (!shape_.discrete) {
            log_std_ = torch::full({static_cast<std::int64_t>(shape_.action_count)},
                                   config_.initial_log_std, torch::requires_grad());
            parameters_.push_back(log_std_);
        }
        for (const auto& p : parameters_) {
            parameter_count_ += static_cast<std::size_t>(p.numel());
        }
    }

    const ModelConfig& config() const override { return config_; }
    const EnvironmentShape& shape() const override { return shape_; }
    std::size_t parameter_count() const override { return parameter_count_; }

    bool get_parameters(std::span<float> out) const override {
        if (out.size() != parameter_count_) {
            return false;
        }
        std::size_t offset = 0;
        for (const auto& p : parameters_) {
            const auto n = static_cast<std::size_t>(p.numel());
            std::copy_n(p.data_ptr<float>(), n, out.data() + offset);
            offset += n;
        }
        return true;
    }

    bool set_parameters(std::span<const float> in) override {
        if (in.size() != parameter_count_) {
            return false;
        }
        std::size_t offset = 0;
        for (auto& p : parameters_) {
            const auto n = static_cast<std::size_t>(p.numel());
            std::copy_n(in.data() + offset, n, p.data_ptr<float>());
            offset += n;
        }
        return true;
    }

    bool compute_gradient(const Rollout& rollout, const LossConfig& loss,
                          std::span<float> gradient, GradientReport* report) override {
        if (gradient.size() != parameter_count_ || !well_formed(rollout)) {
            return false;
        }
        const torch::Tensor total = build_loss(rollout, loss, report);
        std::vector<torch::Tensor> grads =
            torch::autograd::grad({total}, parameters_, /*grad_outputs=*/{},
                                  /*retain_graph=*/false, /*create_graph=*/false,
                                  /*allow_unused=*/true);
        double squared_norm = 0.0;
        for (const auto& g : grads) {
            if (g.defined()) {
                squared_norm += g.pow(2).sum().item<double>();
            }
        }
        const double norm = std::sqrt(squared_norm);
        float clip_scale = 1.0F;
        if (loss.max_grad_norm > 0.0F && norm > loss.max_grad_norm) {
            clip_scale = static_cast<float>(loss.max_grad_norm / (norm + 1e-6));
        }
        std::size_t offset = 0;
        for (std::size_t i = 0; i < grads.size(); ++i) {
            const auto n = static_cast<std::size_t>(parameters_[i].numel());
            if (grads[i].defined()) {
                const torch::Tensor g = grads[i].contiguous();
                const float* values = g.data_ptr<float>();
                for (std::size_t k = 0; k < n; ++k) {
                    gradient[offset + k] = values[k] * clip_scale;
                }
            } else {
                std::fill_n(gradient.data() + offset, n, 0.0F);
            }
            offset += n;
        }
        if (report != nullptr) {
            report->gradient_norm = static_cast<float>(norm);
        }
        return true;
    }

    bool evaluate_loss(const Rollout& rollout, const LossConfig& loss,
                       GradientReport& report) override {
        if (!well_formed(rollout)) {
            return false;
        }
        torch::NoGradGuard no_grad;
        build_loss(rollout, loss, &report);
        return true;
    }

    PolicyDecision act(std::span<const float> observation, Rng& rng,
                       bool deterministic) override {
        torch::NoGradGuard no_grad;
        const torch::Tensor head =
            policy_head_->forward(trunk(tensor_view(observation, 1, observation_columns())));
        const float* out = head.data_ptr<float>();
        PolicyDecision decision;
        if (shape_.discrete) {
            const auto n = shape_.action_count;
            std::size_t chosen = 0;
            if (deterministic) {
                for (std::size_t i = 1; i < n; ++i) {
                    if (out[i] > out[chosen]) {
                        chosen = i;
                    }
                }
            } else {
                // Softmax in double, then inverse-CDF sampling with our generator.
                double max_logit = out[0];
                for (std::size_t i = 1; i < n; ++i) {
                    max_logit = std::max(max_logit, static_cast<double>(out[i]));
                }
                double weights[16];
                double sum = 0.0;
                for (std::size_t i = 0; i < n; ++i) {
                    weights[i] = std::exp(out[i] - max_logit);
                    sum += weights[i];
                }
                double u = rng.next_unit() * sum;
                chosen = n - 1;  // rounding can leave u just above the last partial sum
                for (std::size_t i = 0; i < n; ++i) {
                    if (u < weights[i]) {
                        chosen = i;
                        break;
                    }
                    u -= weights[i];
                }
            }
            decision.sampled = Action::discrete(static_cast<std::int64_t>(chosen));
            decision.env_action = decision.sampled;
        } else {
            const float* log_std = log_std_.data_ptr<float>();
            for (std::size_t i = 0; i < shape_.action_count; ++i) {
                double a = out[i];
                if (!deterministic) {
                    a += std::exp(static_cast<double>(log_std[i])) * standard_normal(rng);
                }
                decision.sampled.values[i] = static_cast<float>(a);
                decision.env_action.values[i] = std::clamp(static_cast<float>(a),
                                                           shape_.action_low, shape_.action_high);
            }
        }
        return decision;
    }

    float value(std::span<const float> observation) override {
        torch::NoGradGuard no_grad;
        return value_head_->forward(trunk(tensor_view(observation, 1, observation_columns())))
            .item<float>();
    }

private:
    std::int64_t observation_columns() const {
        return static_cast<std::int64_t>(shape_.observation_size);
    }

    bool well_formed(const Rollout& rollout) const {
        const std::size_t steps = rollout.steps();
        if (steps == 0 || rollout.actions.size() != steps ||
            rollout.observations.size() != steps * shape_.observation_size) {
            return false;
        }
        if (!rollout.terminated && rollout.bootstrap_observation.size() != shape_.observation_size) {
            return false;
        }
        if (shape_.discrete) {
            for (const Action& a : rollout.actions) {
                if (a.index < 0 || static_cast<std::size_t>(a.index) >= shape_.action_count) {
                    return false;
                }
            }
        }
        return true;
    }

    torch::Tensor trunk(torch::Tensor x) {
        for (auto& layer : hidden_) {
            x = layer->forward(x);
            x = config_.activation == Activation::Tanh ? torch::tanh(x) : torch::relu(x);
        }
        return x;
    }

    // The A3C loss: n-step returns bootstrapped from V(bootstrap observation) unless terminated,
    // advantage R - V (no gradient through it), policy loss - beta * entropy + c * value loss.
    torch::Tensor build_loss(const Rollout& rollout, const LossConfig& loss,
                             GradientReport* report) {
        const auto steps = static_cast<std::int64_t>(rollout.steps());
        const torch::Tensor features =
            trunk(tensor_view(rollout.observations, steps, observation_columns()));
        const torch::Tensor values = value_head_->forward(features).squeeze(1);
        const torch::Tensor head = policy_head_->forward(features);

        double bootstrap = 0.0;
        if (!rollout.terminated) {
            torch::NoGradGuard no_grad;
            bootstrap = value(rollout.bootstrap_observation);
        }
        std::vector<float> returns(rollout.steps());
        double running = bootstrap;
        for (std::size_t t = rollout.steps(); t-- > 0;) {
            running = rollout.rewards[t] + loss.gamma * running;
            returns[t] = static_cast<float>(running);
        }
        const torch::Tensor returns_tensor = torch::tensor(returns);
        const torch::Tensor advantages = returns_tensor - values.detach();

        torch::Tensor log_probs;
        torch::Tensor entropy;
        if (shape_.discrete) {
            std::vector<std::int64_t> indices;
            indices.reserve(rollout.steps());
            for (const Action& a : rollout.actions) {
                indices.push_back(a.index);
            }
            const torch::Tensor all_log_probs = torch::log_softmax(head, 1);
            log_probs = all_log_probs.gather(1, torch::tensor(indices).unsqueeze(1)).squeeze(1);
            entropy = -(all_log_probs.exp() * all_log_probs).sum(1);
        } else {
            const auto dims = static_cast<std::int64_t>(shape_.action_count);
            std::vector<float> sampled;
            sampled.reserve(rollout.steps() * shape_.action_count);
            for (const Action& a : rollout.actions) {
                sampled.insert(sampled.end(), a.values.begin(), a.values.begin() + dims);
            }
            const torch::Tensor actions = torch::tensor(sampled).reshape({steps, dims});
            const torch::Tensor log_std = log_std_.unsqueeze(0);
            const double half_log_two_pi = 0.5 * std::log(2.0 * std::numbers::pi);
            log_probs = (-(actions - head).pow(2) / (2.0 * torch::exp(2.0 * log_std)) - log_std -
                         half_log_two_pi)
                            .sum(1);
            entropy = (0.5 + half_log_two_pi + log_std).sum(1).expand({steps});
        }
        const torch::Tensor policy_loss = -(log_probs * advantages).mean();
        const torch::Tensor value_loss = 0.5 * (returns_tensor - values).pow(2).mean();
        const torch::Tensor mean_entropy = entropy.mean();
        torch::Tensor total =
            policy_loss - loss.entropy_beta * mean_entropy + loss.value_coef * value_loss;
        if (report != nullptr) {
            report->policy_loss = policy_loss.item<float>();
            report->value_loss = value_loss.item<float>();
            report->entropy = mean_entropy.item<float>();
            report->total_loss = total.item<float>();
        }
        return total;
    }

    ModelConfig config_;
    EnvironmentShape shape_;
    std::vector<torch::nn::Linear> hidden_;
    torch::nn::Linear policy_head_{nullptr};
    torch::nn::Linear value_head_{nullptr};
    torch::Tensor log_std_;
    std::vector<torch::Tensor> parameters_;  // the flat layout's order
    std::size_t parameter_count_ = 0;
};

}  // namespace

std::unique_ptr<ActorCritic> ActorCritic::create(const ModelConfig& config, std::uint64_t seed,
                                                 std::string* error) {
    auto fail = [&](std::string message) -> std::unique_ptr<ActorCritic> {
        if (error != nullptr) {
            *error = std::move(message);
        }
        return nullptr;
    };
    EnvironmentShape shape;
    if (!environment_shape(config.env_name, shape)) {
        return fail("unknown environment '" + config.env_name + "'");
    }
    if (shape.discrete && (shape.action_count < 2 || shape.action_count > 16)) {
        return fail("unsupported discrete action count");
    }
    for (std::size_t width : config.hidden_sizes) {
        if (width == 0 || width > 4096) {
            return fail("hidden layer sizes must be in 1..4096");
        }
    }
    return std::make_unique<TorchActorCritic>(config, shape, seed);
}

}  // namespace shesha::rl
