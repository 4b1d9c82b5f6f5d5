// Acrobot-v1, following AcrobotEnv.step() / _dsdt() / _terminal() / _get_ob() and the module
// functions wrap(), bound() and rk4() in gymnasium/envs/classic_control/acrobot.py.
#include <cmath>

#include "envs/classic_control.h"
#include "envs/python_math.h"

namespace shesha::worker::envs {

namespace {
constexpr std::array<std::string_view, 6> kNames{"cos_theta1",  "sin_theta1",  "cos_theta2",
                                                 "sin_theta2",  "theta1_dot", "theta2_dot"};

// acrobot.py wrap(): shifts x by whole periods (M - m) until m <= x <= M.
// The `**` of constants in _dsdt (lc1**2, l1**2, lc2**2), evaluated once with the same libm pow
// that Python calls on every evaluation upstream.
const double kLc1Squared = pymath::python_pow(Acrobot::kLinkComPos1, 2);
const double kL1Squared = pymath::python_pow(Acrobot::kLinkLength1, 2);
const double kLc2Squared = pymath::python_pow(Acrobot::kLinkComPos2, 2);

double wrap(double x, double m, double big_m) {
    const double diff = big_m - m;
    while (x > big_m) {
        x = x - diff;
    }
    while (x < m) {
        x = x + diff;
    }
    return x;
}
}  // namespace

Acrobot::Acrobot() {
    action_space_.kind = ActionSpace::Kind::Discrete;  // spaces.Discrete(3): torque -1, 0, +1
    action_space_.discrete_count = 3;
}

std::span<const std::string_view> Acrobot::observation_names() const { return kNames; }

void Acrobot::sample_initial_state(Rng& rng) {
    // uniform(low=-0.1, high=0.1, size=(4,)).astype(np.float32): the episode starts from float32 values.
    for (std::size_t i = 0; i < 4; ++i) {
        state_[i] = pymath::round_to_float32(rng.uniform(-kResetBound, kResetBound));
    }
}

Acrobot::Augmented Acrobot::derivatives(const Augmented& s) const {
    using pymath::python_pow;
    // Locals of _dsdt.
    const double m1 = kLinkMass1;
    const double m2 = kLinkMass2;
    const double l1 = kLinkLength1;
    const double lc1 = kLinkComPos1;
    const double lc2 = kLinkComPos2;
    const double i1 = kLinkMoi;
    const double i2 = kLinkMoi;
    const double g = kGravity;
    const double a = s[4];
    const double theta1 = s[0];
    const double theta2 = s[1];
    const double dtheta1 = s[2];
    const double dtheta2 = s[3];

    const double cos_theta2 = std::cos(theta2);
    const double sin_theta2 = std::sin(theta2);
    const double d1 = m1 * kLc1Squared + m2 * (kL1Squared + kLc2Squared + 2 * l1 * lc2 * cos_theta2) + i1 + i2;
    const double d2 = m2 * (kLc2Squared + l1 * lc2 * cos_theta2) + i2;
    const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - kPi / 2.0);
    const double phi1 = -m2 * l1 * lc2 * python_pow(dtheta2, 2) * sin_theta2 -
                        2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_theta2 +
                        (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - kPi / 2) + phi2;
    // book_or_nips == "book" (the default)
    const double ddtheta2 =
        (a + d2 / d1 * phi1 - m2 * l1 * lc2 * python_pow(dtheta1, 2) * sin_theta2 - phi2) /
        (m2 * kLc2Squared + i2 - python_pow(d2, 2) / d1);
    const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    return {dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0};
}

double Acrobot::advance(const Action& action, bool& terminated) {
    // s_augmented = np.append(s, torque): float64 from here on, even after a float32 reset.
    const Augmented y0{state_[0], state_[1], state_[2], state_[3],
                       kAvailableTorque[static_cast<std::size_t>(action.index)]};

    // rk4(self._dsdt, s_augmented, [0, self.dt]): one step with dt = t[1] - t[0].
    const double dt = kDt - 0;
    const double dt2 = dt / 2.0;
    auto offset = [](const Augmented& base, double h, const Augmented& k) {
        Augmented out;
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] = base[i] + h * k[i];
        }
        return out;
    };
    const Augmented k1 = derivatives(y0);
    const Augmented k2 = derivatives(offset(y0, dt2, k1));
    const Augmented k3 = derivatives(offset(y0, dt2, k2));
    const Augmented k4 = derivatives(offset(y0, dt, k3));
    const double dt6 = dt / 6.0;
    std::array<double, 4> ns{};
    for (std::size_t i = 0; i < ns.size(); ++i) {  // y0 + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        ns[i] = y0[i] + dt6 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    }

    ns[0] = wrap(ns[0], -kPi, kPi);
    ns[1] = wrap(ns[1], -kPi, kPi);
    ns[2] = pymath::clip(ns[2], -kMaxVel1, kMaxVel1);  // bound(): min(max(x, m), M)
    ns[3] = pymath::clip(ns[3], -kMaxVel2, kMaxVel2);
    state_ = {ns[0], ns[1], ns[2], ns[3]};

    // _terminal(): the free end above the target height.
    terminated = -std::cos(state_[0]) - std::cos(state_[1] + state_[0]) > 1.0;
    return terminated ? 0.0 : -1.0;
}

Observation Acrobot::observe() const {
    Observation obs;
    obs.size = 6;
    obs.values[0] = static_cast<float>(std::cos(state_[0]));
    obs.values[1] = static_cast<float>(std::sin(state_[0]));
    obs.values[2] = static_cast<float>(std::cos(state_[1]));
    obs.values[3] = static_cast<float>(std::sin(state_[1]));
    obs.values[4] = static_cast<float>(state_[2]);
    obs.values[5] = static_cast<float>(state_[3]);
    return obs;
}

}  // namespace shesha::worker::envs
