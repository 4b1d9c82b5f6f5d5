// shesha-env: runs one classic-control environment from a given state (or a seeded reset) through
// a given action sequence and prints the trajectory as CSV with full precision, so it can be diffed
// against Gymnasium (or tests/envs/gym_reference.py). `--bench` measures steps/s per environment.
//
//   shesha-env --env CartPole-v1 --state 0.01,0.02,-0.03,0.04 --actions 0,1,1,0
//   shesha-env --env Pendulum-v1 --seed 7 --actions 0.5,-1.2
//   shesha-env --bench [--env NAME] [--bench-steps N] [--bench-seconds S]
//
// Row 0 is the starting observation (reward 0); row k is the result of the k-th action. Floats
// (observations) are printed with %.9g, doubles (rewards) with %.17g: both round-trip exactly.
// Bad input prints a message and exits with status 2.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "log_level.h"
#include "envs/benchmark.h"
#include "envs/registry.h"
#include "envs/seeding.h"

namespace {

using namespace shesha::worker::envs;

constexpr int kUsageError = 2;

struct UsageError {
    std::string message;
};

std::vector<std::string_view> split_commas(std::string_view text) {
    std::vector<std::string_view> parts;
    if (text.empty()) {
        return parts;
    }
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        parts.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                           : comma - start));
        if (comma == std::string_view::npos) {
            return parts;
        }
        start = comma + 1;
    }
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// A finite decimal number, the whole token (a leading '+' is allowed).
std::optional<double> parse_double(std::string_view token) {
    token = trim(token);
    if (!token.empty() && token.front() == '+') {
        token.remove_prefix(1);
    }
    double value = 0.0;
    const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (token.empty() || error != std::errc() || end != token.data() + token.size() || !std::isfinite(value)) {
        return std::nullopt;
    }
    return value;
}

std::optional<std::int64_t> parse_integer(std::string_view token) {
    token = trim(token);
    if (!token.empty() && token.front() == '+') {
        token.remove_prefix(1);
    }
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (token.empty() || error != std::errc() || end != token.data() + token.size()) {
        return std::nullopt;
    }
    return value;
}

std::string known_environments() {
    std::string list;
    for (const std::string_view name : environment_names()) {
        list += list.empty() ? "" : ", ";
        list += name;
    }
    return list;
}

std::vector<double> parse_state(std::string_view text, const Environment& env) {
    std::vector<double> state;
    for (const std::string_view token : split_commas(text)) {
        const auto value = parse_double(token);
        if (!value) {
            throw UsageError{"--state: '" + std::string(token) + "' is not a finite number"};
        }
        state.push_back(*value);
    }
    if (state.size() != env.state_size()) {
        throw UsageError{"--state: " + std::string(env.name()) + " takes " + std::to_string(env.state_size()) +
                         " comma-separated values, got " + std::to_string(state.size())};
    }
    return state;
}

std::vector<Action> parse_actions(std::string_view text, const Environment& env) {
    const ActionSpace& space = env.action_space();
    std::vector<Action> actions;
    std::size_t position = 0;
    for (const std::string_view token : split_commas(text)) {
        ++position;
        const std::string where = "--actions: action " + std::to_string(position) + " ('" + std::string(token) + "')";
        if (space.is_discrete()) {
            const auto index = parse_integer(token);
            if (!index) {
                throw UsageError{where + " is not an integer"};
            }
            const Action action = Action::discrete(*index);
            if (!space.contains(action)) {
                throw UsageError{where + " is out of range: " + std::string(env.name()) + " takes 0.." +
                                 std::to_string(space.discrete_count - 1)};
            }
            actions.push_back(action);
        } else {
            const auto value = parse_double(token);
            if (!value) {
                throw UsageError{where + " is not a finite number"};
            }
            // As np.array([value], dtype=np.float32): the decimal is read as a double, then rounded.
            // A value outside the Box is accepted, as Gymnasium's step() accepts it: the
            // environment clips it itself (and MountainCarContinuous charges the unclipped one).
            const Action action = Action::continuous(static_cast<float>(*value));
            if (!space.accepts(action)) {
                throw UsageError{where + " does not fit a float32 (it rounds to infinity)"};
            }
            actions.push_back(action);
        }
    }
    return actions;
}

void print_row(std::int64_t step, const Observation& obs, double reward, bool terminated, bool truncated) {
    std::printf("%lld", static_cast<long long>(step));
    for (std::size_t i = 0; i < obs.size; ++i) {
        std::printf(",%.9g", static_cast<double>(obs.values[i]));
    }
    std::printf(",%.17g,%d,%d\n", reward, terminated ? 1 : 0, truncated ? 1 : 0);
}

int run_trajectory(const std::string& env_name, const std::optional<std::string>& state_text,
                   const std::optional<std::uint64_t>& seed, std::uint64_t worker_id, const std::string& actions_text) {
    auto env = make_environment(env_name);
    if (!env) {
        throw UsageError{"unknown environment '" + env_name + "'; known: " + known_environments()};
    }
    if (state_text.has_value() == seed.has_value()) {
        throw UsageError{"give exactly one of --state and --seed"};
    }
    const std::vector<Action> actions = parse_actions(actions_text, *env);

    Observation start;
    if (state_text) {
        const std::vector<double> state = parse_state(*state_text, *env);
        env->set_state(state);
        start = env->observation();
    } else {
        Rng rng(derive_worker_seed(*seed, worker_id));
        start = env->reset(rng);
    }

    std::printf("step");
    for (const std::string_view name : env->observation_names()) {
        std::printf(",%.*s", static_cast<int>(name.size()), name.data());
    }
    std::printf(",reward,terminated,truncated\n");
    print_row(0, start, 0.0, false, false);
    std::int64_t step_number = 0;
    for (const Action& action : actions) {
        const StepResult result = env->step(action);
        print_row(++step_number, result.observation, result.reward, result.terminated, result.truncated);
    }
    return 0;
}

int run_benchmark(const std::optional<std::string>& only_env, std::uint64_t max_steps, double max_seconds,
                  std::uint64_t seed) {
    if (only_env && !make_environment(*only_env)) {
        throw UsageError{"unknown environment '" + *only_env + "'; known: " + known_environments()};
    }
    if (max_steps == 0 || !(max_seconds > 0.0)) {
        throw UsageError{"--bench-steps and --bench-seconds must be positive"};
    }
    std::printf("env,steps,episodes,seconds,steps_per_second\n");
    for (const std::string_view name : environment_names()) {
        if (only_env && name != *only_env) {
            continue;
        }
        auto env = make_environment(name);
        const BenchmarkResult result = benchmark_environment(*env, max_steps, max_seconds, seed);
        std::printf("%.*s,%llu,%llu,%.3f,%.0f\n", static_cast<int>(name.size()), name.data(),
                    static_cast<unsigned long long>(result.steps), static_cast<unsigned long long>(result.episodes),
                    result.seconds, result.steps_per_second());
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Runs a Gymnasium classic-control environment reimplemented in C++ and prints the trajectory as CSV"};
    std::optional<std::string> env_name;
    std::optional<std::string> state_text;
    std::optional<std::uint64_t> seed;
    std::uint64_t worker_id = 0;
    std::string actions_text;
    bool bench = false;
    bool list = false;
    std::uint64_t bench_steps = 1'000'000;
    double bench_seconds = 2.0;

    app.add_option("--env", env_name, "Gymnasium id: " + known_environments());
    app.add_option("--state", state_text, "comma-separated internal state to start from");
    app.add_option("--seed", seed, "base seed for a seeded reset instead of --state");
    app.add_option("--worker-id", worker_id, "worker id combined with --seed (derive_worker_seed)");
    app.add_option("--actions", actions_text, "comma-separated actions: integers (discrete) or numbers (continuous; out-of-range values are clipped by the environment, as in Gymnasium)");
    app.add_flag("--list", list, "list the environments and exit");
    app.add_flag("--bench", bench, "print env steps/s per environment on one core (random actions)");
    app.add_option("--bench-steps", bench_steps, "benchmark: most steps per environment")->capture_default_str();
    app.add_option("--bench-seconds", bench_seconds, "benchmark: most seconds per environment")->capture_default_str();

    std::string log_level = "info";
    shesha::logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {
            return app.exit(e);  // --help
        }
        std::fprintf(stderr, "shesha-env: %s\n", e.what());
        return kUsageError;
    }
    shesha::logging::init("shesha-env", log_level);

    try {
        if (list) {
            for (const std::string_view name : environment_names()) {
                std::printf("%.*s\n", static_cast<int>(name.size()), name.data());
            }
            return 0;
        }
        if (bench) {
            return run_benchmark(env_name, bench_steps, bench_seconds, seed.value_or(1));
        }
        if (!env_name) {
            throw UsageError{"--env is required (known: " + known_environments() + ")"};
        }
        return run_trajectory(*env_name, state_text, seed, worker_id, actions_text);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "shesha-env: %s\n", e.message.c_str());
        return kUsageError;
    }
}
