#include "a3c_trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include "envs/registry.h"
#include "envs/seeding.h"

namespace shesha::rl {

namespace {

using Clock = std::chrono::steady_clock;
using worker::envs::derive_worker_seed;
using worker::envs::Environment;
using worker::envs::Observation;
using worker::envs::Rng;

// Seeds outside the actors' id range, so evaluation and initial weights never share a stream
// with an actor.
constexpr std::uint64_t kEvaluationStreamId = 1'000'000;
constexpr std::uint64_t kInitialWeightsStreamId = 1'000'001;
constexpr std::size_t kTrainReturnWindow = 20;

// The shared learner: the one copy of the parameters and of the optimizer state.
class Learner {
public:
    Learner(std::vector<float> initial, std::unique_ptr<Optimizer> optimizer)
        : parameters_(std::move(initial)), optimizer_(std::move(optimizer)) {}

    void pull(std::vector<float>& out) {
        std::lock_guard lock(mutex_);
        out = parameters_;
    }
    void push(std::span<const float> gradient) {
        std::lock_guard lock(mutex_);
        optimizer_->apply(parameters_, gradient, 1.0F);
    }
    std::uint64_t updates() {
        std::lock_guard lock(mutex_);
        return optimizer_->steps();
    }

private:
    std::mutex mutex_;
    std::vector<float> parameters_;
    std::unique_ptr<Optimizer> optimizer_;
};

// Finished training episodes, for the progress lines.
class EpisodeLog {
public:
    void add(double episode_return) {
        std::lock_guard lock(mutex_);
        recent_.push_back(episode_return);
        if (recent_.size() > kTrainReturnWindow) {
            recent_.pop_front();
        }
    }
    double mean() {
        std::lock_guard lock(mutex_);
        if (recent_.empty()) {
            return 0.0;
        }
        return std::accumulate(recent_.begin(), recent_.end(), 0.0) /
               static_cast<double>(recent_.size());
    }

private:
    std::mutex mutex_;
    std::deque<double> recent_;
};

class Actor {
public:
    Actor(const TrainerConfig& config, std::size_t id, std::unique_ptr<ActorCritic> model)
        : config_(config),
          env_(worker::envs::make_environment(config.model.env_name)),
          rng_(derive_worker_seed(config.seed, id)),
          model_(std::move(model)),
          gradient_(model_->parameter_count()) {
        observation_ = env_->reset(rng_);
    }

    // One rollout of up to n_step steps, its gradient pushed to the learner. Returns the steps.
    std::size_t run_once(Learner& learner, EpisodeLog& episodes) {
        learner.pull(parameters_);
        model_->set_parameters(parameters_);
        rollout_.clear();
        bool episode_over = false;
        while (rollout_.steps() < config_.n_step && !episode_over) {
            const auto obs = observation_.view();
            const PolicyDecision decision = model_->act(obs, rng_, false);
            const auto result = env_->step(decision.env_action);
            rollout_.observations.insert(rollout_.observations.end(), obs.begin(), obs.end());
            rollout_.actions.push_back(decision.sampled);
            rollout_.rewards.push_back(static_cast<float>(result.reward));
            episode_return_ += result.reward;
            observation_ = result.observation;
            if (result.terminated || result.truncated) {
                episode_over = true;
                rollout_.terminated = result.terminated;
            }
        }
        // Bootstrap from the observation after the last step (for truncation too: the time
        // limit is not part of the state, so the value there is still meaningful).
        const auto last = observation_.view();
        rollout_.bootstrap_observation.assign(last.begin(), last.end());
        if (episode_over) {
            episodes.add(episode_return_);
            episode_return_ = 0.0;
            observation_ = env_->reset(rng_);
        }
        if (model_->compute_gradient(rollout_, config_.loss, gradient_)) {
            learner.push(gradient_);
        }
        return rollout_.steps();
    }

private:
    const TrainerConfig& config_;
    std::unique_ptr<Environment> env_;
    Rng rng_;
    std::unique_ptr<ActorCritic> model_;
    std::vector<float> parameters_;
    std::vector<float> gradient_;
    Rollout rollout_;
    Observation observation_;
    double episode_return_ = 0.0;
};

std::string validate(const TrainerConfig& config) {
    if (config.workers == 0 || config.workers > 64) {
        return "workers must be in 1..64";
    }
    if (config.n_step == 0 || config.n_step > 10'000) {
        return "n-step must be in 1..10000";
    }
    if (config.eval_every == 0) {
        return "eval-every must be positive";
    }
    if (config.eval_episodes == 0) {
        return "eval-episodes must be positive";
    }
    if (!(config.optimizer.learning_rate > 0.0F)) {
        return "learning rate must be positive";
    }
    if (!(config.loss.gamma >= 0.0 && config.loss.gamma <= 1.0)) {
        return "gamma must be in [0, 1]";
    }
    return {};
}

}  // namespace

EvaluationResult evaluate_policy(ActorCritic& model, std::size_t episodes, std::uint64_t seed) {
    auto env = worker::envs::make_environment(model.config().env_name);
    Rng rng(seed);
    EvaluationResult result;
    result.min_return = std::numeric_limits<double>::infinity();
    double total = 0.0;
    for (std::size_t e = 0; e < episodes; ++e) {
        Observation obs = env->reset(rng);
        double episode_return = 0.0;
        for (;;) {
            const auto step = env->step(model.act(obs.view(), rng, true).env_action);
            episode_return += step.reward;
            obs = step.observation;
            if (step.terminated || step.truncated) {
                break;
            }
        }
        total += episode_return;
        result.min_return = std::min(result.min_return, episode_return);
    }
    result.mean_return = episodes == 0 ? 0.0 : total / static_cast<double>(episodes);
    return result;
}

TrainResult train_a3c(const TrainerConfig& config, const ProgressCallback& progress) {
    TrainResult result;
    result.error = validate(config);
    if (!result.error.empty()) {
        return result;
    }
    const auto start = Clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

    auto evaluator = ActorCritic::create(config.model,
                                         derive_worker_seed(config.seed, kInitialWeightsStreamId),
                                         &result.error);
    if (!evaluator) {
        return result;
    }
    result.parameter_count = evaluator->parameter_count();
    std::vector<float> initial(result.parameter_count);
    evaluator->get_parameters(initial);
    auto optimizer = Optimizer::create(config.optimizer, result.parameter_count);
    Learner learner(initial, std::move(optimizer));

    std::vector<std::unique_ptr<Actor>> actors;
    for (std::size_t id = 0; id < config.workers; ++id) {
        // Each actor's copy is overwritten by the learner's parameters before every rollout.
        actors.push_back(std::make_unique<Actor>(
            config, id, ActorCritic::create(config.model, derive_worker_seed(config.seed, id))));
    }

    EpisodeLog episodes;
    std::atomic<std::uint64_t> env_steps{0};
    std::atomic<bool> stop{false};
    std::uint64_t next_evaluation = config.eval_every;
    std::vector<float> snapshot;

    // Evaluates the learner's current parameters; true when training should stop.
    const auto evaluate = [&]() {
        learner.pull(snapshot);
        evaluator->set_parameters(snapshot);
        const EvaluationResult eval = evaluate_policy(
            *evaluator, config.eval_episodes, derive_worker_seed(config.seed, kEvaluationStreamId));
        CurvePoint point;
        point.env_steps = env_steps.load();
        point.wall_seconds = elapsed();
        point.updates = learner.updates();
        point.eval_mean_return = eval.mean_return;
        point.eval_min_return = eval.min_return;
        point.train_mean_return = episodes.mean();
        result.curve.push_back(point);
        if (progress) {
            progress(point);
        }
        if (config.target && !result.reached_target && eval.mean_return >= *config.target) {
            result.reached_target = true;
            result.steps_to_target = point.env_steps;
            result.seconds_to_target = point.wall_seconds;
            return true;
        }
        return false;
    };
    const auto budget_left = [&] {
        return env_steps.load() < config.max_steps &&
               (config.max_seconds <= 0.0 || elapsed() < config.max_seconds);
    };

    bool stopped_by_target = false;
    if (!config.threaded) {
        // Round-robin: one rollout per actor in turn, all on this thread; reproducible.
        while (!stopped_by_target && budget_left()) {
            for (auto& actor : actors) {
                if (!budget_left()) {
                    break;
                }
                env_steps += actor->run_once(learner, episodes);
                if (env_steps.load() >= next_evaluation) {
                    next_evaluation += config.eval_every;
                    if (evaluate()) {
                        stopped_by_target = true;
                        break;
                    }
                }
            }
        }
    } else {
        std::vector<std::thread> threads;
        for (auto& actor : actors) {
            threads.emplace_back([&, a = actor.get()] {
                while (!stop.load(std::memory_order_relaxed) && budget_left()) {
                    env_steps += a->run_once(learner, episodes);
                }
            });
        }
        // This thread evaluates when the shared step count crosses the next threshold.
        while (!stopped_by_target && budget_left()) {
            if (env_steps.load() >= next_evaluation) {
                next_evaluation += config.eval_every;
                stopped_by_target = evaluate();
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        stop = true;
        for (auto& t : threads) {
            t.join();
        }
    }
    if (!stopped_by_target) {
        evaluate();  // the final point of the curve
    }
    result.total_steps = env_steps.load();
    result.total_seconds = elapsed();
    result.updates = learner.updates();
    return result;
}

}  // namespace shesha::rl
