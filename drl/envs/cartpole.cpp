// CartPole-v1, following CartPoleEnv.step() / reset() in gymnasium/envs/classic_control/cartpole.py.
#include <cmath>

#include "envs/classic_control.h"
#include "envs/python_math.h"

namespace shesha::worker::envs {

namespace {
constexpr std::array<std::string_view, 4> kNames{"x", "x_dot", "theta", "theta_dot"};
}

CartPole::CartPole() {
    action_space_.kind = ActionSpace::Kind::Discrete;  // spaces.Discrete(2): 0 pushes left, 1 right
    action_space_.discrete_count = 2;
}

std::span<const std::string_view> CartPole::observation_names() const { return kNames; }

void CartPole::sample_initial_state(Rng& rng) {
    for (std::size_t i = 0; i < 4; ++i) {
        state_[i] = rng.uniform(-kResetBound, kResetBound);
    }
}

double CartPole::advance(const Action& action, bool& terminated) {
    using pymath::python_pow;
    double x = state_[0];
    double x_dot = state_[1];
    double theta = state_[2];
    double theta_dot = state_[3];

    const double force = action.index == 1 ? kForceMag : -kForceMag;
    const double costheta = std::cos(theta);  // math.cos / math.sin: libm
    const double sintheta = std::sin(theta);

    // Same operations in the same order as upstream (Python evaluates left to right).
    const double temp = (force + kPoleMassLength * python_pow(theta_dot, 2) * sintheta) / kTotalMass;
    const double thetaacc =
        (kGravity * sintheta - costheta * temp) /
        (kLength * (4.0 / 3.0 - kMassPole * python_pow(costheta, 2) / kTotalMass));
    const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;

    // kinematics_integrator == "euler"
    x = x + kTau * x_dot;
    x_dot = x_dot + kTau * xacc;
    theta = theta + kTau * theta_dot;
    theta_dot = theta_dot + kTau * thetaacc;
    state_ = {x, x_dot, theta, theta_dot};

    terminated = x < -kXThreshold || x > kXThreshold || theta < -kThetaThresholdRadians ||
                 theta > kThetaThresholdRadians;
    if (!terminated) {
        return 1.0;
    }
    if (steps_beyond_terminated_ < 0) {  // the pole just fell
        steps_beyond_terminated_ = 0;
        return 1.0;
    }
    ++steps_beyond_terminated_;  // stepping past termination: undefined upstream, reward 0
    return 0.0;
}

Observation CartPole::observe() const {
    Observation obs;
    obs.size = 4;
    for (std::size_t i = 0; i < 4; ++i) {
        obs.values[i] = static_cast<float>(state_[i]);  // np.array(self.state, dtype=np.float32)
    }
    return obs;
}

}  // namespace shesha::worker::envs
