// Gymnasium's classic-control environments (gymnasium/envs/classic_control/*.py, v0.29 / 1.0),
// reimplemented step for step in float64.
//
// What is bit-comparable with Gymnasium: given an internal state (set_state) and an action
// sequence, every state, observation and reward, provided that
//   - Gymnasium runs on NumPy 1.x (NumPy 2's NEP 50 promotion keeps some float32 action arithmetic in
//     float32 for Pendulum and MountainCarContinuous, which changes the last bits), and
//   - NumPy's float64 sin/cos/power resolve to the same libm as ours (true for NumPy's baseline
//     loops; not for its AVX512_SKX SVML kernels: see python_math.h).
// What is not: reset() draws (our generator is not NumPy's PCG64), and Acrobot's reset observation,
// which Gymnasium computes with NumPy's own float32 cos/sin of a float32 state (we round the float64
// libm value, which can differ by one float32 ulp). Dynamics are unaffected by the latter: Gymnasium
// widens Acrobot's state to float64 before integrating.
//
// Continuous actions are float32 (the dtype of Gymnasium's Box action spaces).
#pragma once

#include <array>
#include <string_view>

#include "envs/environment.h"

namespace shesha::worker::envs {

// CartPole-v1: gymnasium/envs/classic_control/cartpole.py (CartPoleEnv), euler integrator.
class CartPole final : public Environment {
public:
    // Constants of CartPoleEnv.__init__ (cartpole.py).
    static constexpr double kGravity = 9.8;
    static constexpr double kMassCart = 1.0;
    static constexpr double kMassPole = 0.1;
    static constexpr double kTotalMass = kMassPole + kMassCart;  // masspole + masscart
    static constexpr double kLength = 0.5;                       // half the pole's length
    static constexpr double kPoleMassLength = kMassPole * kLength;
    static constexpr double kForceMag = 10.0;
    static constexpr double kTau = 0.02;  // seconds between state updates
    // 12 * 2 * math.pi / 360, evaluated left to right as Python does.
    static constexpr double kThetaThresholdRadians = 12 * 2 * 3.141592653589793 / 360;
    static constexpr double kXThreshold = 2.4;
    static constexpr double kResetBound = 0.05;  // reset(): uniform(-0.05, 0.05) for all 4 components
    static constexpr std::int64_t kMaxEpisodeSteps = 500;  // gymnasium/envs/__init__.py registration

    CartPole();
    std::string_view name() const override { return "CartPole-v1"; }
    std::size_t observation_size() const override { return 4; }
    std::span<const std::string_view> observation_names() const override;
    std::size_t state_size() const override { return 4; }
    const ActionSpace& action_space() const override { return action_space_; }
    std::int64_t max_episode_steps() const override { return kMaxEpisodeSteps; }

protected:
    void sample_initial_state(Rng& rng) override;
    void on_episode_start() override { steps_beyond_terminated_ = -1; }
    double advance(const Action& action, bool& terminated) override;
    Observation observe() const override;

private:
    ActionSpace action_space_;
    // Gymnasium's steps_beyond_terminated; -1 stands for None.
    std::int64_t steps_beyond_terminated_ = -1;
};

// Acrobot-v1: gymnasium/envs/classic_control/acrobot.py (AcrobotEnv), book dynamics, rk4 over dt.
class Acrobot final : public Environment {
public:
    // Class attributes of AcrobotEnv (acrobot.py).
    static constexpr double kDt = 0.2;
    static constexpr double kLinkLength1 = 1.0;  // [m]
    static constexpr double kLinkLength2 = 1.0;  // [m]; used only for rendering upstream
    static constexpr double kLinkMass1 = 1.0;    // [kg]
    static constexpr double kLinkMass2 = 1.0;    // [kg]
    static constexpr double kLinkComPos1 = 0.5;  // [m] centre of mass of link 1
    static constexpr double kLinkComPos2 = 0.5;  // [m] centre of mass of link 2
    static constexpr double kLinkMoi = 1.0;      // moment of inertia of both links
    static constexpr double kGravity = 9.8;      // local `g` in _dsdt
    static constexpr double kPi = 3.141592653589793;  // numpy.pi
    static constexpr double kMaxVel1 = 4 * kPi;
    static constexpr double kMaxVel2 = 9 * kPi;
    static constexpr std::array<double, 3> kAvailableTorque{-1.0, 0.0, 1.0};  // AVAIL_TORQUE
    // torque_noise_max = 0.0 upstream: no noise is drawn, so none is modelled.
    static constexpr double kResetBound = 0.1;  // reset(): uniform(-0.1, 0.1), then cast to float32
    static constexpr std::int64_t kMaxEpisodeSteps = 500;

    Acrobot();
    std::string_view name() const override { return "Acrobot-v1"; }
    std::size_t observation_size() const override { return 6; }
    std::span<const std::string_view> observation_names() const override;
    std::size_t state_size() const override { return 4; }
    const ActionSpace& action_space() const override { return action_space_; }
    std::int64_t max_episode_steps() const override { return kMaxEpisodeSteps; }

protected:
    void sample_initial_state(Rng& rng) override;
    double advance(const Action& action, bool& terminated) override;
    Observation observe() const override;

private:
    using Augmented = std::array<double, 5>;  // theta1, theta2, dtheta1, dtheta2, torque
    Augmented derivatives(const Augmented& s) const;  // AcrobotEnv._dsdt, "book" branch

    ActionSpace action_space_;
};

// MountainCar-v0: gymnasium/envs/classic_control/mountain_car.py (MountainCarEnv).
class MountainCar final : public Environment {
public:
    // Constants of MountainCarEnv.__init__ (mountain_car.py), goal_velocity at its default 0.
    static constexpr double kMinPosition = -1.2;
    static constexpr double kMaxPosition = 0.6;
    static constexpr double kMaxSpeed = 0.07;
    static constexpr double kGoalPosition = 0.5;
    static constexpr double kGoalVelocity = 0.0;
    static constexpr double kForce = 0.001;
    static constexpr double kGravity = 0.0025;
    static constexpr double kResetLow = -0.6;  // reset(): position uniform(-0.6, -0.4), velocity 0
    static constexpr double kResetHigh = -0.4;
    static constexpr std::int64_t kMaxEpisodeSteps = 200;

    MountainCar();
    std::string_view name() const override { return "MountainCar-v0"; }
    std::size_t observation_size() const override { return 2; }
    std::span<const std::string_view> observation_names() const override;
    std::size_t state_size() const override { return 2; }
    const ActionSpace& action_space() const override { return action_space_; }
    std::int64_t max_episode_steps() const override { return kMaxEpisodeSteps; }

protected:
    void sample_initial_state(Rng& rng) override;
    double advance(const Action& action, bool& terminated) override;
    Observation observe() const override;

private:
    ActionSpace action_space_;
};

// MountainCarContinuous-v0: gymnasium/envs/classic_control/continuous_mountain_car.py
// (Continuous_MountainCarEnv). Upstream stores the state as float32 after every step (but not after
// reset); so does this class, keeping the float32 values in its float64 state.
class MountainCarContinuous final : public Environment {
public:
    // Constants of Continuous_MountainCarEnv.__init__, goal_velocity at its default 0.
    static constexpr double kMinAction = -1.0;
    static constexpr double kMaxAction = 1.0;
    static constexpr double kMinPosition = -1.2;
    static constexpr double kMaxPosition = 0.6;
    static constexpr double kMaxSpeed = 0.07;
    static constexpr double kGoalPosition = 0.45;  // 0.5 in the discrete version
    static constexpr double kGoalVelocity = 0.0;
    static constexpr double kPower = 0.0015;
    static constexpr double kGravity = 0.0025;  // literal 0.0025 in step()
    static constexpr double kGoalReward = 100.0;
    static constexpr double kActionCost = 0.1;  // reward -= action**2 * 0.1 (unclipped action)
    static constexpr double kResetLow = -0.6;
    static constexpr double kResetHigh = -0.4;
    static constexpr std::int64_t kMaxEpisodeSteps = 999;

    MountainCarContinuous();
    std::string_view name() const override { return "MountainCarContinuous-v0"; }
    std::size_t observation_size() const override { return 2; }
    std::span<const std::string_view> observation_names() const override;
    std::size_t state_size() const override { return 2; }
    const ActionSpace& action_space() const override { return action_space_; }
    std::int64_t max_episode_steps() const override { return kMaxEpisodeSteps; }

protected:
    void sample_initial_state(Rng& rng) override;
    double advance(const Action& action, bool& terminated) override;
    Observation observe() const override;

private:
    ActionSpace action_space_;
};

// Pendulum-v1: gymnasium/envs/classic_control/pendulum.py (PendulumEnv). Never terminates.
class Pendulum final : public Environment {
public:
    // Constants of PendulumEnv.__init__ (pendulum.py).
    static constexpr double kDefaultGravity = 10.0;  // constructor argument g
    static constexpr double kMaxSpeed = 8;
    static constexpr double kMaxTorque = 2.0;
    static constexpr double kDt = 0.05;
    static constexpr double kMass = 1.0;
    static constexpr double kLength = 1.0;
    static constexpr double kPi = 3.141592653589793;  // numpy.pi
    static constexpr double kResetTheta = kPi;        // reset(): th uniform(-pi, pi) (DEFAULT_X)
    static constexpr double kResetThetaDot = 1.0;     // thdot uniform(-1, 1) (DEFAULT_Y)
    static constexpr std::int64_t kMaxEpisodeSteps = 200;

    explicit Pendulum(double gravity = kDefaultGravity);
    std::string_view name() const override { return "Pendulum-v1"; }
    std::size_t observation_size() const override { return 3; }
    std::span<const std::string_view> observation_names() const override;
    std::size_t state_size() const override { return 2; }
    const ActionSpace& action_space() const override { return action_space_; }
    std::int64_t max_episode_steps() const override { return kMaxEpisodeSteps; }
    double gravity() const { return gravity_; }

    // pendulum.py angle_normalize(): ((x + pi) % (2 * pi)) - pi with Python's modulo.
    static double angle_normalize(double x);

protected:
    void sample_initial_state(Rng& rng) override;
    double advance(const Action& action, bool& terminated) override;
    Observation observe() const override;

private:
    ActionSpace action_space_;
    double gravity_;
};

}  // namespace shesha::worker::envs
