#include "envs/environment.h"

#include <cmath>

namespace shesha::worker::envs {

bool ActionSpace::contains(const Action& action) const {
    if (is_discrete()) {
        return action.index >= 0 && action.index < discrete_count;
    }
    for (std::size_t i = 0; i < box_size; ++i) {
        const float value = action.values[i];
        if (!(value >= box_low && value <= box_high)) {  // also false for NaN
            return false;
        }
    }
    return true;
}

bool ActionSpace::accepts(const Action& action) const {
    if (is_discrete()) {
        return contains(action);
    }
    for (std::size_t i = 0; i < box_size; ++i) {
        if (!std::isfinite(action.values[i])) {
            return false;
        }
    }
    return true;
}

Observation Environment::reset(Rng& rng) {
    sample_initial_state(rng);
    elapsed_steps_ = 0;
    on_episode_start();
    return observe();
}

bool Environment::set_state(std::span<const double> state) {
    if (state.size() != state_size()) {
        return false;
    }
    state_ = {};
    for (std::size_t i = 0; i < state.size(); ++i) {
        state_[i] = state[i];
    }
    elapsed_steps_ = 0;
    on_episode_start();
    return true;
}

StepResult Environment::step(const Action& action) {
    StepResult result;
    if (!action_space().accepts(action)) {
        ++rejected_actions_;
        result.rejected_action = true;
        result.observation = observe();
        return result;
    }
    result.reward = advance(action, result.terminated);
    result.observation = observe();
    // gymnasium.wrappers.TimeLimit: truncated once elapsed steps reach the limit.
    ++elapsed_steps_;
    result.truncated = elapsed_steps_ >= max_episode_steps();
    return result;
}

}  // namespace shesha::worker::envs
