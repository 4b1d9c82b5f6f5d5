// MountainCar-v0 and MountainCarContinuous-v0, following MountainCarEnv.step() / reset() in
// gymnasium/envs/classic_control/mountain_car.py and Continuous_MountainCarEnv.step() / reset() in
// gymnasium/envs/classic_control/continuous_mountain_car.py.
#include <cmath>

#include "envs/classic_control.h"
#include "envs/python_math.h"

namespace shesha::worker::envs {

namespace {
constexpr std::array<std::string_view, 2> kNames{"position", "velocity"};

Observation two_floats(double position, double velocity) {
    Observation obs;
    obs.size = 2;
    obs.values[0] = static_cast<float>(position);  // np.array(state, dtype=np.float32)
    obs.values[1] = static_cast<float>(velocity);
    return obs;
}
}  // namespace

MountainCar::MountainCar() {
    // spaces.Discrete(3): 0 accelerates left, 1 does nothing, 2 accelerates right.
    action_space_.kind = ActionSpace::Kind::Discrete;
    action_space_.discrete_count = 3;
}

std::span<const std::string_view> MountainCar::observation_names() const { return kNames; }

void MountainCar::sample_initial_state(Rng& rng) {
    state_[0] = rng.uniform(kResetLow, kResetHigh);
    state_[1] = 0.0;
}

double MountainCar::advance(const Action& action, bool& terminated) {
    double position = state_[0];
    double velocity = state_[1];
    // velocity += (action - 1) * force + math.cos(3 * position) * (-gravity)
    velocity += static_cast<double>(action.index - 1) * kForce + std::cos(3 * position) * (-kGravity);
    velocity = pymath::clip(velocity, -kMaxSpeed, kMaxSpeed);
    position += velocity;
    position = pymath::clip(position, kMinPosition, kMaxPosition);
    if (position == kMinPosition && velocity < 0) {
        velocity = 0;  // inelastic collision with the left wall
    }
    terminated = position >= kGoalPosition && velocity >= kGoalVelocity;
    state_[0] = position;
    state_[1] = velocity;
    return -1.0;
}

Observation MountainCar::observe() const { return two_floats(state_[0], state_[1]); }

MountainCarContinuous::MountainCarContinuous() {
    // spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32)
    action_space_.kind = ActionSpace::Kind::Box;
    action_space_.box_size = 1;
    action_space_.box_low = static_cast<float>(kMinAction);
    action_space_.box_high = static_cast<float>(kMaxAction);
}

std::span<const std::string_view> MountainCarContinuous::observation_names() const { return kNames; }

void MountainCarContinuous::sample_initial_state(Rng& rng) {
    state_[0] = rng.uniform(kResetLow, kResetHigh);  // float64 until the first step
    state_[1] = 0.0;
}

double MountainCarContinuous::advance(const Action& action, bool& terminated) {
    // Under NumPy 1.x every float32 operand below is widened to float64 before the arithmetic.
    const double action0 = static_cast<double>(action.values[0]);
    double position = state_[0];
    double velocity = state_[1];
    const double force = std::min(std::max(action0, kMinAction), kMaxAction);

    velocity += force * kPower - kGravity * std::cos(3 * position);
    if (velocity > kMaxSpeed) {
        velocity = kMaxSpeed;
    }
    if (velocity < -kMaxSpeed) {
        velocity = -kMaxSpeed;
    }
    position += velocity;
    if (position > kMaxPosition) {
        position = kMaxPosition;
    }
    if (position < kMinPosition) {
        position = kMinPosition;
    }
    if (position == kMinPosition && velocity < 0) {
        velocity = 0;
    }
    // Decided on the float64 values, before the state is stored as float32.
    terminated = position >= kGoalPosition && velocity >= kGoalVelocity;

    double reward = 0;
    if (terminated) {
        reward = kGoalReward;
    }
    reward -= pymath::python_pow(action0, 2) * kActionCost;  // math.pow(action[0], 2) * 0.1

    // self.state = np.array([position, velocity], dtype=np.float32)
    state_[0] = pymath::round_to_float32(position);
    state_[1] = pymath::round_to_float32(velocity);
    return reward;
}

Observation MountainCarContinuous::observe() const { return two_floats(state_[0], state_[1]); }

}  // namespace shesha::worker::envs
