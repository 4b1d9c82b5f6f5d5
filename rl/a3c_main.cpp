// shesha-a3c: trains an actor-critic with A3C on a classic-control environment and reports the
// env steps and wall time to reach a target evaluation return.
//
// Exit status: 0 target reached (or no target given), 1 target not reached within the budget,
// 2 bad command line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "log_level.h"
#include "a3c_trainer.h"

namespace {

constexpr int kTargetMissed = 1;
constexpr int kUsageError = 2;

}  // namespace

int main(int argc, char** argv) {
    using namespace shesha::rl;
    CLI::App app{"A3C (asynchronous advantage actor-critic) on a classic-control environment"};
    TrainerConfig config;
    std::optional<double> target;
    std::string csv_path;
    std::string activation = "tanh";
    std::string optimizer = "rmsprop";
    bool quiet = false;

    app.add_option("--env", config.model.env_name, "Gymnasium id")->capture_default_str();
    app.add_option("--workers", config.workers, "actors")->capture_default_str();
    app.add_option("--seed", config.seed, "base seed (actors, weights, evaluation)")->capture_default_str();
    app.add_option("--max-steps", config.max_steps, "env steps budget over all actors")->capture_default_str();
    app.add_option("--max-seconds", config.max_seconds, "wall-time budget, 0 = none")->capture_default_str();
    app.add_option("--target", target, "stop when the evaluation mean return reaches this");
    app.add_option("--eval-every", config.eval_every, "env steps between evaluations")->capture_default_str();
    app.add_option("--eval-episodes", config.eval_episodes, "deterministic episodes per evaluation")->capture_default_str();
    app.add_option("--csv", csv_path, "write the learning curve to this CSV file");
    app.add_flag("--threaded", config.threaded, "one thread per actor (asynchronous, not reproducible)");
    app.add_option("--n-step", config.n_step, "rollout length")->capture_default_str();
    app.add_option("--hidden", config.model.hidden_sizes, "hidden layer sizes")->capture_default_str()->delimiter(',');
    app.add_option("--activation", activation, "tanh or relu")->capture_default_str()
        ->check(CLI::IsMember({"tanh", "relu"}));
    app.add_option("--optimizer", optimizer, "rmsprop (shared statistics), adam or sgd")->capture_default_str()
        ->check(CLI::IsMember({"rmsprop", "adam", "sgd"}));
    app.add_option("--lr", config.optimizer.learning_rate, "learning rate")->capture_default_str();
    app.add_option("--rmsprop-alpha", config.optimizer.rmsprop_alpha, "RMSProp decay")->capture_default_str();
    app.add_option("--optimizer-eps", config.optimizer.epsilon, "optimizer epsilon")->capture_default_str();
    app.add_option("--gamma", config.loss.gamma, "discount")->capture_default_str();
    app.add_option("--entropy", config.loss.entropy_beta, "entropy bonus coefficient")->capture_default_str();
    app.add_option("--value-coef", config.loss.value_coef, "value loss coefficient")->capture_default_str();
    app.add_option("--max-grad-norm", config.loss.max_grad_norm, "gradient clipping norm, 0 = none")->capture_default_str();
    app.add_flag("--quiet", quiet, "no progress lines");

    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {
            return app.exit(e);  // --help
        }
        std::fprintf(stderr, "shesha-a3c: %s\n", e.what());
        return kUsageError;
    }
    shesha::logging::init("shesha-a3c", log_level);
    config.target = target;
    config.model.activation = activation == "relu" ? Activation::Relu : Activation::Tanh;
    const std::map<std::string, OptimizerKind> optimizers{
        {"rmsprop", OptimizerKind::SharedRmsProp}, {"adam", OptimizerKind::Adam}, {"sgd", OptimizerKind::Sgd}};
    config.optimizer.kind = optimizers.at(optimizer);

    FILE* csv = nullptr;
    if (!csv_path.empty()) {
        csv = std::fopen(csv_path.c_str(), "w");
        if (csv == nullptr) {
            std::fprintf(stderr, "shesha-a3c: cannot write %s\n", csv_path.c_str());
            return kUsageError;
        }
        std::fprintf(csv, "env_steps,wall_seconds,updates,eval_mean_return,eval_min_return,train_mean_return\n");
    }
    const auto on_point = [&](const CurvePoint& p) {
        if (!quiet) {
            std::printf("steps %9llu  time %7.1f s  updates %8llu  eval mean %8.2f  min %8.2f  train(20) %8.2f\n",
                        static_cast<unsigned long long>(p.env_steps), p.wall_seconds,
                        static_cast<unsigned long long>(p.updates), p.eval_mean_return, p.eval_min_return,
                        p.train_mean_return);
            std::fflush(stdout);
        }
        if (csv != nullptr) {
            std::fprintf(csv, "%llu,%.3f,%llu,%.3f,%.3f,%.3f\n", static_cast<unsigned long long>(p.env_steps),
                         p.wall_seconds, static_cast<unsigned long long>(p.updates), p.eval_mean_return,
                         p.eval_min_return, p.train_mean_return);
            std::fflush(csv);
        }
    };

    const TrainResult result = train_a3c(config, on_point);
    if (csv != nullptr) {
        std::fclose(csv);
    }
    if (!result.error.empty()) {
        spdlog::error("{}", result.error);
        return kUsageError;
    }
    std::printf("env %s  workers %zu  %s  parameters %zu  steps %llu  updates %llu  time %.1f s\n",
                config.model.env_name.c_str(), config.workers, config.threaded ? "threaded" : "round-robin",
                result.parameter_count, static_cast<unsigned long long>(result.total_steps),
                static_cast<unsigned long long>(result.updates), result.total_seconds);
    if (!config.target) {
        return 0;
    }
    if (result.reached_target) {
        std::printf("target %.1f reached: steps %llu  time %.1f s\n", *config.target,
                    static_cast<unsigned long long>(result.steps_to_target), result.seconds_to_target);
        return 0;
    }
    std::printf("target %.1f NOT reached (best eval mean %.2f)\n", *config.target,
                result.curve.empty() ? 0.0
                                     : std::max_element(result.curve.begin(), result.curve.end(),
                                                        [](const CurvePoint& a, const CurvePoint& b) {
                                                            return a.eval_mean_return < b.eval_mean_return;
                                                        })->eval_mean_return);
    return kTargetMissed;
}
