// A small, allocation-free interface for the classic-control environments the DRL workers run.
//
// The environments reproduce Gymnasium's (v0.29 / 1.0) classic-control dynamics with the same
// float64 arithmetic, in the same evaluation order, so that given a state and an action sequence a
// trajectory matches Gymnasium to the last bit (see docs in classic_control.h for what exactly is
// bit-comparable and what is not). Observations are float32 wherever Gymnasium returns float32.
//
// The TimeLimit wrapper of gymnasium.make() is built in: step() reports truncated once the number
// of steps since the last reset()/set_state() reaches max_episode_steps(), exactly like
// gymnasium.wrappers.TimeLimit (which counts on even after truncation or termination).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "envs/seeding.h"

namespace shesha::worker::envs {

// Largest sizes any environment here uses; fixed so observations and actions never allocate.
inline constexpr std::size_t kMaxObservationSize = 8;
inline constexpr std::size_t kMaxStateSize = 4;
inline constexpr std::size_t kMaxActionSize = 1;

struct Observation {
    std::array<float, kMaxObservationSize> values{};
    std::size_t size = 0;

    std::span<const float> view() const { return {values.data(), size}; }
    float operator[](std::size_t i) const { return values[i]; }
};

// One action for either kind of space: `index` for Discrete(n), `values` for Box spaces.
// Continuous actions are float32, as Gymnasium's Box action spaces here are float32 and the
// dynamics see the float32 value (widened to float64 where NumPy 1.x widens it).
struct Action {
    std::int64_t index = 0;
    std::array<float, kMaxActionSize> values{};

    static Action discrete(std::int64_t action_index) {
        Action action;
        action.index = action_index;
        return action;
    }
    static Action continuous(float value) {
        Action action;
        action.values[0] = value;
        return action;
    }
};

struct ActionSpace {
    enum class Kind { Discrete, Box };
    Kind kind = Kind::Discrete;
    std::int64_t discrete_count = 0;  // Discrete(n): valid actions are 0..n-1
    std::size_t box_size = 0;         // Box: number of action components
    float box_low = 0.0F;             // Box bounds, the same for every component here
    float box_high = 0.0F;

    bool is_discrete() const { return kind == Kind::Discrete; }
    // Gymnasium's Space.contains(): in range for Discrete, within [low, high] for Box.
    bool contains(const Action& action) const;
    // What step() accepts: any in-range Discrete index; any finite Box value (Gymnasium's
    // continuous environments clip out-of-range actions themselves, and reward some unclipped).
    bool accepts(const Action& action) const;
};

struct StepResult {
    Observation observation;
    double reward = 0.0;  // a Python float in Gymnasium: float64
    bool terminated = false;
    bool truncated = false;
    // The action was rejected (see ActionSpace::accepts): nothing moved, the step was not counted.
    bool rejected_action = false;
};

class Environment {
public:
    virtual ~Environment() = default;

    // Gymnasium id, e.g. "CartPole-v1".
    virtual std::string_view name() const = 0;
    virtual std::size_t observation_size() const = 0;
    // Short column names of the observation components, observation_size() of them.
    virtual std::span<const std::string_view> observation_names() const = 0;
    // Size of the internal (float64) state that set_state() takes.
    virtual std::size_t state_size() const = 0;
    virtual const ActionSpace& action_space() const = 0;
    // TimeLimit of the registered Gymnasium id.
    virtual std::int64_t max_episode_steps() const = 0;

    // Draws an initial state from `rng` with the same distribution as Gymnasium's reset(). The
    // draws cannot match NumPy's generator bit for bit; only the dynamics given a state can.
    Observation reset(Rng& rng);
    // Starts an episode from an explicit internal state (the equivalent of assigning
    // env.unwrapped.state in Gymnasium); false if `state` has the wrong length.
    bool set_state(std::span<const double> state);
    StepResult step(const Action& action);

    // The current internal state, state_size() values.
    std::span<const double> state() const { return {state_.data(), state_size()}; }
    Observation observation() const { return observe(); }
    std::int64_t elapsed_steps() const { return elapsed_steps_; }
    std::uint64_t rejected_actions() const { return rejected_actions_; }

protected:
    virtual void sample_initial_state(Rng& rng) = 0;
    // Called at every episode start (reset or set_state): clears per-episode bookkeeping.
    virtual void on_episode_start() {}
    // Gymnasium's unwrapped step(): advances state_, returns reward and sets `terminated`.
    virtual double advance(const Action& action, bool& terminated) = 0;
    virtual Observation observe() const = 0;

    std::array<double, kMaxStateSize> state_{};

private:
    std::int64_t elapsed_steps_ = 0;
    std::uint64_t rejected_actions_ = 0;
};

}  // namespace shesha::worker::envs
