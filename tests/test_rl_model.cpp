// shesha_rl: the flat parameter/gradient interface, the A3C loss on hand-computed cases, the flat
// optimizers and the reproducibility of round-robin training. No libtorch headers here.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "a3c_trainer.h"
#include "model.h"

using namespace shesha::rl;
using shesha::worker::envs::Action;
using shesha::worker::envs::Rng;

namespace {

std::unique_ptr<ActorCritic> make_model(const std::string& env, std::vector<std::size_t> hidden,
                                        std::uint64_t seed = 7) {
    ModelConfig config;
    config.env_name = env;
    config.hidden_sizes = std::move(hidden);
    auto model = ActorCritic::create(config, seed);
    REQUIRE(model != nullptr);
    return model;
}

// A CartPole-shaped one-step rollout.
Rollout one_step_rollout(std::int64_t action, float reward, bool terminated) {
    Rollout rollout;
    rollout.observations = {0.5F, -1.0F, 0.25F, 2.0F};
    rollout.actions = {Action::discrete(action)};
    rollout.rewards = {reward};
    rollout.terminated = terminated;
    rollout.bootstrap_observation = {0.0F, 0.0F, 0.0F, 0.0F};
    return rollout;
}

}  // namespace

TEST_CASE("parameter counts follow the layer sizes") {
    // CartPole 4 -> 64 -> 64, policy 2, value 1.
    CHECK(make_model("CartPole-v1", {64, 64})->parameter_count() ==
          (4 * 64 + 64) + (64 * 64 + 64) + (64 * 2 + 2) + (64 + 1));
    // Pendulum 3 -> 32, Gaussian mean 1, value 1, log_std 1.
    CHECK(make_model("Pendulum-v1", {32})->parameter_count() == (3 * 32 + 32) + (32 + 1) + (32 + 1) + 1);
    // No hidden layer: linear heads on the observation.
    CHECK(make_model("Acrobot-v1", {})->parameter_count() == (6 * 3 + 3) + (6 + 1));
}

TEST_CASE("unknown environments and bad sizes are rejected with a message") {
    ModelConfig config;
    config.env_name = "NoSuchEnv-v0";
    std::string error;
    CHECK(ActorCritic::create(config, 1, &error) == nullptr);
    CHECK(error == "unknown environment 'NoSuchEnv-v0'");
    config.env_name = "CartPole-v1";
    config.hidden_sizes = {64, 0};
    CHECK(ActorCritic::create(config, 1, &error) == nullptr);
    CHECK(error == "hidden layer sizes must be in 1..4096");
}

TEST_CASE("flat parameters round-trip exactly and define the model") {
    auto model = make_model("CartPole-v1", {16, 8});
    const std::size_t n = model->parameter_count();
    std::vector<float> written(n);
    for (std::size_t i = 0; i < n; ++i) {
        written[i] = static_cast<float>(static_cast<int>(i % 201) - 100) / 128.0F;
    }
    REQUIRE(model->set_parameters(written));
    std::vector<float> read(n, -1.0F);
    REQUIRE(model->get_parameters(read));
    CHECK(read == written);

    // A second model given the same flat vector computes the same function.
    auto other = make_model("CartPole-v1", {16, 8}, /*seed=*/99);
    std::vector<float> other_initial(n);
    other->get_parameters(other_initial);
    CHECK(other_initial != written);
    REQUIRE(other->set_parameters(written));
    const std::vector<float> obs{0.1F, -0.2F, 0.03F, 0.4F};
    CHECK(other->value(obs) == model->value(obs));

    // Wrong sizes are refused and change nothing.
    std::vector<float> short_vector(n - 1, 3.0F);
    CHECK_FALSE(model->set_parameters(short_vector));
    CHECK_FALSE(model->get_parameters(short_vector));
    CHECK(short_vector == std::vector<float>(n - 1, 3.0F));
    model->get_parameters(read);
    CHECK(read == written);
}

TEST_CASE("different seeds give different initial weights, equal seeds equal ones") {
    auto a = make_model("CartPole-v1", {64, 64}, 1);
    auto b = make_model("CartPole-v1", {64, 64}, 1);
    auto c = make_model("CartPole-v1", {64, 64}, 2);
    std::vector<float> pa(a->parameter_count()), pb(pa.size()), pc(pa.size());
    a->get_parameters(pa);
    b->get_parameters(pb);
    c->get_parameters(pc);
    CHECK(pa == pb);
    CHECK(pa != pc);
}

TEST_CASE("gradient of a hand-computed case: linear model at zero, terminal one-step rollout") {
    // All parameters zero: uniform policy (p = 1/2), V = 0, entropy gradient 0 at the uniform
    // policy. Return R = r (terminal), advantage A = r.
    //   d/d logits [-log p(a) A] = (p - onehot(a)) A;  d/dV [c/2 (R - V)^2] = -c (R - V).
    auto model = make_model("CartPole-v1", {});
    const std::size_t n = model->parameter_count();
    REQUIRE(n == 2 * 4 + 2 + 4 + 1);
    std::vector<float> zeros(n, 0.0F);
    model->set_parameters(zeros);

    LossConfig loss;
    loss.entropy_beta = 0.01F;
    loss.value_coef = 0.5F;
    loss.max_grad_norm = 0.0F;  // no clipping
    const float reward = 2.0F;
    const Rollout rollout = one_step_rollout(/*action=*/1, reward, /*terminated=*/true);
    std::vector<float> gradient(n, 123.0F);
    GradientReport report;
    REQUIRE(model->compute_gradient(rollout, loss, gradient, &report));

    const std::vector<float>& obs = rollout.observations;
    const float logit_grad[2] = {0.5F * reward, -0.5F * reward};  // (p - onehot(1)) * A
    std::vector<float> expected;
    for (int row = 0; row < 2; ++row) {  // policy weight [2 x 4]
        for (float x : obs) {
            expected.push_back(logit_grad[row] * x);
        }
    }
    expected.push_back(logit_grad[0]);  // policy bias
    expected.push_back(logit_grad[1]);
    const float value_grad = -loss.value_coef * reward;
    for (float x : obs) {  // value weight [1 x 4]
        expected.push_back(value_grad * x);
    }
    expected.push_back(value_grad);  // value bias
    for (std::size_t i = 0; i < n; ++i) {
        CHECK(std::isfinite(gradient[i]));
        CHECK(gradient[i] == Approx(expected[i]).margin(1e-6));
    }
    // Losses: -log(1/2) * 2, 0.5 * 2^2, entropy log 2.
    CHECK(report.policy_loss == Approx(2.0 * std::log(2.0)).epsilon(1e-6));
    CHECK(report.value_loss == Approx(2.0).epsilon(1e-6));
    CHECK(report.entropy == Approx(std::log(2.0)).epsilon(1e-6));
    CHECK(report.total_loss ==
          Approx(2.0 * std::log(2.0) - 0.01 * std::log(2.0) + 0.5 * 2.0).epsilon(1e-6));
}

TEST_CASE("a non-terminal rollout bootstraps from V(next observation)") {
    // Linear model with only the value bias set: V = b everywhere, so R = r + gamma * b and the
    // value-bias gradient is -c (R - V) = -c (r + gamma b - b).
    auto model = make_model("CartPole-v1", {});
    const std::size_t n = model->parameter_count();
    std::vector<float> params(n, 0.0F);
    params[n - 1] = 4.0F;
    model->set_parameters(params);
    LossConfig loss;
    loss.max_grad_norm = 0.0F;
    loss.gamma = 0.5;
    std::vector<float> gradient(n);
    REQUIRE(model->compute_gradient(one_step_rollout(0, 1.0F, false), loss, gradient));
    CHECK(gradient[n - 1] == Approx(-0.5 * (1.0 + 0.5 * 4.0 - 4.0)).margin(1e-6));
    // Terminated: no bootstrap, R = 1.
    REQUIRE(model->compute_gradient(one_step_rollout(0, 1.0F, true), loss, gradient));
    CHECK(gradient[n - 1] == Approx(-0.5 * (1.0 - 4.0)).margin(1e-6));
}

TEST_CASE("an SGD step moves the parameters by exactly -lr * gradient") {
    auto model = make_model("CartPole-v1", {64, 64});
    const std::size_t n = model->parameter_count();
    Rollout rollout;
    for (int t = 0; t < 5; ++t) {
        rollout.observations.insert(rollout.observations.end(),
                                    {0.01F * t, -0.1F, 0.02F * t, 0.3F - 0.05F * t});
        rollout.actions.push_back(Action::discrete(t % 2));
        rollout.rewards.push_back(1.0F);
    }
    rollout.bootstrap_observation = {0.05F, -0.1F, 0.1F, 0.05F};
    LossConfig loss;
    loss.max_grad_norm = 0.0F;

    std::vector<float> before(n);
    model->get_parameters(before);
    std::vector<float> gradient(n);
    REQUIRE(model->compute_gradient(rollout, loss, gradient));
    double norm2 = 0.0;
    for (float g : gradient) {
        REQUIRE(std::isfinite(g));
        norm2 += static_cast<double>(g) * g;
    }
    REQUIRE(norm2 > 0.0);

    OptimizerConfig sgd;
    sgd.kind = OptimizerKind::Sgd;
    sgd.learning_rate = 0.5F;
    auto optimizer = Optimizer::create(sgd, n);
    std::vector<float> after = before;
    REQUIRE(optimizer->apply(after, gradient, 1.0F));
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(after[i] == before[i] - 0.5F * gradient[i]);  // exactly one multiply-subtract
    }
}

TEST_CASE("the policy-parameter gradient matches central differences of the loss") {
    // Linear heads: the policy parameters enter only log pi and the entropy (the advantage is a
    // constant to them), so d loss / d theta_policy is exactly what compute_gradient returns.
    auto model = make_model("CartPole-v1", {}, /*seed=*/3);
    const std::size_t n = model->parameter_count();
    Rollout rollout;
    for (int t = 0; t < 5; ++t) {
        rollout.observations.insert(rollout.observations.end(),
                                    {0.1F * t, -0.5F, 0.2F * t, 1.0F - 0.3F * t});
        rollout.actions.push_back(Action::discrete((t * 3) % 2));
        rollout.rewards.push_back(1.0F);
    }
    rollout.terminated = true;
    LossConfig loss;
    loss.max_grad_norm = 0.0F;
    loss.entropy_beta = 0.1F;
    std::vector<float> theta(n);
    model->get_parameters(theta);
    std::vector<float> gradient(n);
    REQUIRE(model->compute_gradient(rollout, loss, gradient));
    const float h = 1e-2F;
    for (std::size_t i = 0; i < 2 * 4 + 2; ++i) {  // policy weight and bias
        std::vector<float> shifted = theta;
        GradientReport plus;
        GradientReport minus;
        shifted[i] = theta[i] + h;
        model->set_parameters(shifted);
        model->evaluate_loss(rollout, loss, plus);
        shifted[i] = theta[i] - h;
        model->set_parameters(shifted);
        model->evaluate_loss(rollout, loss, minus);
        const double numeric = (static_cast<double>(plus.total_loss) - minus.total_loss) / (2.0 * h);
        CHECK(gradient[i] == Approx(numeric).margin(2e-3));
    }
    // And a small step against it lowers the loss.
    model->set_parameters(theta);
    GradientReport at_start;
    model->evaluate_loss(rollout, loss, at_start);
    std::vector<float> stepped = theta;
    for (std::size_t i = 0; i < 10; ++i) {
        stepped[i] -= 0.05F * gradient[i];
    }
    model->set_parameters(stepped);
    GradientReport after_step;
    model->evaluate_loss(rollout, loss, after_step);
    CHECK(after_step.total_loss < at_start.total_loss);
}

TEST_CASE("gradient clipping scales to the max norm and reports the raw norm") {
    auto model = make_model("CartPole-v1", {});
    const std::size_t n = model->parameter_count();
    std::vector<float> zeros(n, 0.0F);
    model->set_parameters(zeros);
    LossConfig loss;
    loss.max_grad_norm = 0.0F;
    std::vector<float> raw(n);
    GradientReport raw_report;
    REQUIRE(model->compute_gradient(one_step_rollout(1, 2.0F, true), loss, raw, &raw_report));
    double raw_norm2 = 0.0;
    for (float g : raw) {
        raw_norm2 += static_cast<double>(g) * g;
    }
    CHECK(raw_report.gradient_norm == Approx(std::sqrt(raw_norm2)).epsilon(1e-5));

    loss.max_grad_norm = 0.25F;
    std::vector<float> clipped(n);
    GradientReport clipped_report;
    REQUIRE(model->compute_gradient(one_step_rollout(1, 2.0F, true), loss, clipped, &clipped_report));
    CHECK(clipped_report.gradient_norm == raw_report.gradient_norm);
    double clipped_norm2 = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        clipped_norm2 += static_cast<double>(clipped[i]) * clipped[i];
        CHECK(clipped[i] == Approx(raw[i] * 0.25 / std::sqrt(raw_norm2)).margin(1e-6));
    }
    CHECK(std::sqrt(clipped_norm2) == Approx(0.25).epsilon(1e-5));
}

TEST_CASE("malformed rollouts are refused and leave the gradient untouched") {
    auto model = make_model("CartPole-v1", {8});
    const std::size_t n = model->parameter_count();
    std::vector<float> gradient(n, 7.0F);
    LossConfig loss;
    Rollout empty;
    CHECK_FALSE(model->compute_gradient(empty, loss, gradient));
    Rollout bad_obs = one_step_rollout(0, 1.0F, true);
    bad_obs.observations.pop_back();
    CHECK_FALSE(model->compute_gradient(bad_obs, loss, gradient));
    Rollout bad_action = one_step_rollout(2, 1.0F, true);  // CartPole has actions 0 and 1
    CHECK_FALSE(model->compute_gradient(bad_action, loss, gradient));
    Rollout no_bootstrap = one_step_rollout(0, 1.0F, false);
    no_bootstrap.bootstrap_observation.clear();
    CHECK_FALSE(model->compute_gradient(no_bootstrap, loss, gradient));
    std::vector<float> wrong_size(n + 1);
    CHECK_FALSE(model->compute_gradient(one_step_rollout(0, 1.0F, true), loss, wrong_size));
    CHECK(gradient == std::vector<float>(n, 7.0F));
}

TEST_CASE("act: greedy picks the argmax, sampling follows the softmax") {
    auto model = make_model("CartPole-v1", {});
    const std::size_t n = model->parameter_count();
    std::vector<float> params(n, 0.0F);
    params[8] = 0.0F;             // policy bias, action 0
    params[9] = std::log(3.0F);   // action 1: p = 3/4
    model->set_parameters(params);
    const std::vector<float> obs{0.1F, 0.2F, 0.3F, 0.4F};
    Rng rng(5);
    CHECK(model->act(obs, rng, true).env_action.index == 1);
    int ones = 0;
    const int draws = 20000;
    for (int i = 0; i < draws; ++i) {
        const PolicyDecision d = model->act(obs, rng, false);
        CHECK(d.env_action.index == d.sampled.index);
        ones += static_cast<int>(d.sampled.index);
    }
    // Binomial(20000, 0.75): standard deviation about 61.
    CHECK(ones > 15000 - 400);
    CHECK(ones < 15000 + 400);
}

TEST_CASE("act: continuous actions are clipped to the bounds, the sample is kept") {
    auto model = make_model("Pendulum-v1", {});
    const std::size_t n = model->parameter_count();
    REQUIRE(n == (3 + 1) + (3 + 1) + 1);
    std::vector<float> params(n, 0.0F);
    params[3] = 5.0F;       // mean bias: beyond Pendulum's max torque of 2
    params[n - 1] = -30.0F; // log_std: practically no noise
    model->set_parameters(params);
    const std::vector<float> obs{1.0F, 0.0F, 0.0F};
    Rng rng(3);
    const PolicyDecision greedy = model->act(obs, rng, true);
    CHECK(greedy.sampled.values[0] == 5.0F);
    CHECK(greedy.env_action.values[0] == 2.0F);
    params[3] = -0.5F;
    params[n - 1] = 0.0F;  // std 1
    model->set_parameters(params);
    double sum = 0.0;
    double sum2 = 0.0;
    const int draws = 20000;
    for (int i = 0; i < draws; ++i) {
        const PolicyDecision d = model->act(obs, rng, false);
        CHECK(d.env_action.values[0] == std::clamp(d.sampled.values[0], -2.0F, 2.0F));
        sum += d.sampled.values[0];
        sum2 += static_cast<double>(d.sampled.values[0]) * d.sampled.values[0];
    }
    const double mean = sum / draws;
    CHECK(mean == Approx(-0.5).margin(0.05));
    CHECK(sum2 / draws - mean * mean == Approx(1.0).margin(0.05));
}

TEST_CASE("applying a k-contribution sum with scale 1/k equals applying the average") {
    // Gradients are multiples of 1/64 with small numerators: sums and the /4 are exact, so the
    // two paths must agree bit for bit for every optimizer.
    const std::size_t n = 37;
    const int k = 4;
    std::vector<std::vector<float>> contributions(k, std::vector<float>(n));
    std::vector<float> sum(n, 0.0F);
    for (int c = 0; c < k; ++c) {
        for (std::size_t i = 0; i < n; ++i) {
            contributions[c][i] = static_cast<float>((static_cast<int>(i) * 7 + c * 13) % 29 - 14) / 64.0F;
            sum[i] += contributions[c][i];
        }
    }
    std::vector<float> average(n);
    for (std::size_t i = 0; i < n; ++i) {
        average[i] = sum[i] / static_cast<float>(k);
    }
    for (OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::SharedRmsProp, OptimizerKind::Adam}) {
        OptimizerConfig config;
        config.kind = kind;
        auto merged = Optimizer::create(config, n);
        auto averaged = Optimizer::create(config, n);
        std::vector<float> p_merged(n, 0.25F);
        std::vector<float> p_averaged(n, 0.25F);
        for (int step = 0; step < 3; ++step) {  // several steps: the optimizer state must agree too
            REQUIRE(merged->apply(p_merged, sum, 1.0F / k));
            REQUIRE(averaged->apply(p_averaged, average, 1.0F));
        }
        CHECK(p_merged == p_averaged);
        CHECK(p_merged != std::vector<float>(n, 0.25F));
        CHECK(merged->steps() == 3);
    }
}

TEST_CASE("optimizers: first steps by formula, wrong sizes refused") {
    const std::vector<float> grad{0.5F, -2.0F, 0.0F};
    OptimizerConfig rms;
    rms.kind = OptimizerKind::SharedRmsProp;
    rms.learning_rate = 0.01F;
    rms.rmsprop_alpha = 0.99F;
    rms.epsilon = 1e-5F;
    auto rmsprop = Optimizer::create(rms, 3);
    std::vector<float> p{1.0F, 1.0F, 1.0F};
    REQUIRE(rmsprop->apply(p, grad, 1.0F));
    for (std::size_t i = 0; i < 3; ++i) {
        const float square = (1.0F - 0.99F) * grad[i] * grad[i];
        CHECK(p[i] == 1.0F - 0.01F * grad[i] / std::sqrt(square + 1e-5F));
    }
    // Adam's first bias-corrected step is lr * sign(g) (up to epsilon).
    OptimizerConfig adam_config;
    adam_config.kind = OptimizerKind::Adam;
    adam_config.learning_rate = 0.01F;
    adam_config.epsilon = 1e-8F;
    auto adam = Optimizer::create(adam_config, 3);
    std::vector<float> q{1.0F, 1.0F, 1.0F};
    REQUIRE(adam->apply(q, grad, 1.0F));
    CHECK(q[0] == Approx(0.99).epsilon(1e-6));
    CHECK(q[1] == Approx(1.01).epsilon(1e-6));
    CHECK(q[2] == 1.0F);

    std::vector<float> wrong(4, 1.0F);
    CHECK_FALSE(adam->apply(wrong, std::vector<float>(4, 1.0F), 1.0F));
    CHECK_FALSE(adam->apply(q, std::vector<float>(2, 1.0F), 1.0F));
    CHECK(wrong == std::vector<float>(4, 1.0F));
    CHECK(adam->steps() == 1);
}

TEST_CASE("round-robin A3C is reproducible for a seed and differs across seeds") {
    TrainerConfig config;
    config.workers = 2;
    config.seed = 11;
    config.max_steps = 6000;
    config.eval_every = 2000;
    config.eval_episodes = 2;
    const TrainResult a = train_a3c(config);
    const TrainResult b = train_a3c(config);
    REQUIRE(a.error.empty());
    REQUIRE(a.curve.size() == b.curve.size());
    REQUIRE(a.curve.size() >= 3);
    for (std::size_t i = 0; i < a.curve.size(); ++i) {
        CHECK(a.curve[i].env_steps == b.curve[i].env_steps);
        CHECK(a.curve[i].updates == b.curve[i].updates);
        CHECK(a.curve[i].eval_mean_return == b.curve[i].eval_mean_return);
        CHECK(a.curve[i].train_mean_return == b.curve[i].train_mean_return);
    }
    CHECK(a.total_steps >= 6000);
    CHECK(a.total_steps < 6000 + 5);  // stops within one rollout (n_step 5) of the budget
    config.seed = 12;
    const TrainResult c = train_a3c(config);
    bool differs = false;
    for (std::size_t i = 0; i < std::min(a.curve.size(), c.curve.size()); ++i) {
        differs = differs || a.curve[i].train_mean_return != c.curve[i].train_mean_return ||
                  a.curve[i].updates != c.curve[i].updates;
    }
    CHECK(differs);
}

TEST_CASE("trainer rejects bad configurations before running") {
    TrainerConfig config;
    config.workers = 0;
    CHECK(train_a3c(config).error == "workers must be in 1..64");
    config.workers = 1;
    config.model.env_name = "Nope-v0";
    const TrainResult r = train_a3c(config);
    CHECK(r.error == "unknown environment 'Nope-v0'");
    CHECK(r.curve.empty());
}
