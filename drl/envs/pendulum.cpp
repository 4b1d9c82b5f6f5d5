// Pendulum-v1, following PendulumEnv.step() / reset() / _get_obs() and angle_normalize() in
// gymnasium/envs/classic_control/pendulum.py.
#include <cmath>

#include "envs/classic_control.h"
#include "envs/python_math.h"

namespace shesha::worker::envs {

namespace {
constexpr std::array<std::string_view, 3> kNames{"cos_theta", "sin_theta", "theta_dot"};
}

Pendulum::Pendulum(double gravity) : gravity_(gravity) {
    // spaces.Box(low=-max_torque, high=max_torque, shape=(1,), dtype=np.float32)
    action_space_.kind = ActionSpace::Kind::Box;
    action_space_.box_size = 1;
    action_space_.box_low = static_cast<float>(-kMaxTorque);
    action_space_.box_high = static_cast<float>(kMaxTorque);
}

std::span<const std::string_view> Pendulum::observation_names() const { return kNames; }

double Pendulum::angle_normalize(double x) { return pymath::python_mod(x + kPi, 2 * kPi) - kPi; }

void Pendulum::sample_initial_state(Rng& rng) {
    // uniform(low=-[pi, 1], high=[pi, 1]): theta first, then theta_dot.
    state_[0] = rng.uniform(-kResetTheta, kResetTheta);
    state_[1] = rng.uniform(-kResetThetaDot, kResetThetaDot);
}

double Pendulum::advance(const Action& action, bool& /*terminated*/) {
    using pymath::python_pow;
    const double th = state_[0];
    const double thdot = state_[1];
    const double g = gravity_;
    const double m = kMass;
    const double l = kLength;
    const double dt = kDt;

    // u = np.clip(u, -max_torque, max_torque)[0]: clipped in float32, a numpy.float32 scalar that
    // NumPy 1.x widens to float64 in every expression below.
    const float clipped = std::min(std::max(action.values[0], static_cast<float>(-kMaxTorque)),
                                   static_cast<float>(kMaxTorque));
    const double u = static_cast<double>(clipped);
    const double costs = python_pow(angle_normalize(th), 2) + 0.1 * python_pow(thdot, 2) +
                         0.001 * python_pow(u, 2);

    double newthdot = thdot + (3 * g / (2 * l) * std::sin(th) + 3.0 / (m * python_pow(l, 2)) * u) * dt;
    newthdot = pymath::clip(newthdot, -kMaxSpeed, kMaxSpeed);
    const double newth = th + newthdot * dt;
    state_[0] = newth;
    state_[1] = newthdot;
    return -costs;
}

Observation Pendulum::observe() const {
    Observation obs;
    obs.size = 3;
    obs.values[0] = static_cast<float>(std::cos(state_[0]));
    obs.values[1] = static_cast<float>(std::sin(state_[0]));
    obs.values[2] = static_cast<float>(state_[1]);
    return obs;
}

}  // namespace shesha::worker::envs
