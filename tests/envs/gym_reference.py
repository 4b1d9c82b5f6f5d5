#!/usr/bin/env python3
"""Test oracle for drl/envs: Gymnasium's classic-control step functions, redone in NumPy.

Gymnasium itself cannot be installed here, so this script re-derives the dynamics of
gymnasium/envs/classic_control/{cartpole,acrobot,mountain_car,continuous_mountain_car,pendulum}.py
(v0.29 / 1.0) operation by operation: the same Python/NumPy types (float64 states, float32 actions
and observations, math.cos where upstream calls math.cos, np.cos where it calls np.cos, `**` for
squares), the same constants and the same left-to-right evaluation order. It is independent of the
C++ code: tests/test_envs.cpp pins the numbers it prints.

Requirements: NumPy 1.x (NumPy 2's NEP 50 promotion keeps some float32 action arithmetic in float32).
NumPy's AVX512_SKX kernels for float64 sin/cos/power (SVML) differ from libm in the last bit, so they
are disabled below before NumPy is imported; the script checks that np.sin/np.cos/np.power then agree
with libm and stops otherwise.

Usage (with a python3 that has numpy, e.g. /usr/bin/python3 on Debian):
  gym_reference.py csv ENV --state a,b,... --actions x,y,...   # same CSV as `shesha-env`
  gym_reference.py cpp                                          # the constants of tests/test_envs.cpp
  gym_reference.py compare --cli build-envs/worker/shesha-env [--episodes N]  # random diffs vs the CLI
"""

import argparse
import math
import os
import random
import subprocess
import sys

os.environ.setdefault(
    "NPY_DISABLE_CPU_FEATURES",
    "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL",
)
import numpy as np  # noqa: E402  (must come after the environment variable)


def check_numpy_uses_libm():
    if int(np.__version__.split(".")[0]) >= 2:
        sys.exit("gym_reference.py: needs NumPy 1.x (found %s)" % np.__version__)
    rng = np.random.default_rng(12345)
    xs = rng.uniform(-10.0, 10.0, 20000)
    for x, c, s in zip(xs, np.cos(xs), np.sin(xs)):
        if c != math.cos(x) or s != math.sin(x):
            sys.exit("gym_reference.py: NumPy's float64 sin/cos are not libm's on this machine")
    for x in rng.uniform(-2.0, 2.0, 20000).astype(np.float32):
        if float(x ** 2) != math.pow(float(x), 2):
            sys.exit("gym_reference.py: NumPy's float64 power is not libm's on this machine")


# ---------------------------------------------------------------------------------------------
# The environments. Each has set_state(values) (what assigning env.unwrapped.state does), step()
# returning (observation float32 array, reward, terminated) and the registered TimeLimit.


class CartPole:
    """cartpole.py, CartPoleEnv with kinematics_integrator == "euler"."""

    name = "CartPole-v1"
    max_steps = 500
    discrete = 2

    def __init__(self):
        self.gravity = 9.8
        self.masscart = 1.0
        self.masspole = 0.1
        self.total_mass = self.masspole + self.masscart
        self.length = 0.5
        self.polemass_length = self.masspole * self.length
        self.force_mag = 10.0
        self.tau = 0.02
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4

    def set_state(self, values):
        self.state = np.array(values, dtype=np.float64)  # reset() draws a float64 array
        self.steps_beyond_terminated = None

    def observe(self):
        return np.array(self.state, dtype=np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state  # numpy.float64 scalars
        force = self.force_mag if action == 1 else -self.force_mag
        cos_t = math.cos(theta)
        sin_t = math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sin_t) / self.total_mass
        theta_acc = (self.gravity * sin_t - cos_t * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos_t ** 2 / self.total_mass)
        )
        x_acc = temp - self.polemass_length * theta_acc * cos_t / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * x_acc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * theta_acc
        self.state = (x, x_dot, theta, theta_dot)
        done = bool(
            x < -self.x_threshold
            or x > self.x_threshold
            or theta < -self.theta_threshold_radians
            or theta > self.theta_threshold_radians
        )
        if not done:
            reward = 1.0
        elif self.steps_beyond_terminated is None:
            self.steps_beyond_terminated = 0
            reward = 1.0
        else:
            self.steps_beyond_terminated += 1
            reward = 0.0
        return self.observe(), reward, done


def _acrobot_wrap(x, low, high):
    period = high - low
    while x > high:
        x = x - period
    while x < low:
        x = x + period
    return x


class Acrobot:
    """acrobot.py, AcrobotEnv with book dynamics, torque_noise_max == 0, rk4 over [0, dt]."""

    name = "Acrobot-v1"
    max_steps = 500
    discrete = 3
    dt = 0.2
    torques = [-1.0, 0.0, +1]

    def set_state(self, values):
        # reset() would store float32 values; an explicit state is kept as given (float64).
        self.state = np.array(values, dtype=np.float64)

    def observe(self):
        s = self.state
        return np.array([np.cos(s[0]), np.sin(s[0]), np.cos(s[1]), np.sin(s[1]), s[2], s[3]], dtype=np.float32)

    def derivs(self, sa):
        m1, m2, l1, lc1, lc2, i1, i2, g = 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 9.8
        a = sa[-1]
        th1, th2, dth1, dth2 = sa[0], sa[1], sa[2], sa[3]
        d1 = m1 * lc1 ** 2 + m2 * (l1 ** 2 + lc2 ** 2 + 2 * l1 * lc2 * np.cos(th2)) + i1 + i2
        d2 = m2 * (lc2 ** 2 + l1 * lc2 * np.cos(th2)) + i2
        phi2 = m2 * lc2 * g * np.cos(th1 + th2 - np.pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dth2 ** 2 * np.sin(th2)
            - 2 * m2 * l1 * lc2 * dth2 * dth1 * np.sin(th2)
            + (m1 * lc1 + m2 * l1) * g * np.cos(th1 - np.pi / 2)
            + phi2
        )
        ddth2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dth1 ** 2 * np.sin(th2) - phi2) / (
            m2 * lc2 ** 2 + i2 - d2 ** 2 / d1
        )
        ddth1 = -(d2 * ddth2 + phi1) / d1
        return dth1, dth2, ddth1, ddth2, 0.0

    def step(self, action):
        y0 = np.append(self.state, self.torques[action])  # float64
        times = [0, self.dt]
        h = times[1] - times[0]
        k1 = np.asarray(self.derivs(y0))
        k2 = np.asarray(self.derivs(y0 + h / 2.0 * k1))
        k3 = np.asarray(self.derivs(y0 + h / 2.0 * k2))
        k4 = np.asarray(self.derivs(y0 + h * k3))
        ns = (y0 + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4))[:4]
        ns[0] = _acrobot_wrap(ns[0], -np.pi, np.pi)
        ns[1] = _acrobot_wrap(ns[1], -np.pi, np.pi)
        ns[2] = min(max(ns[2], -4 * np.pi), 4 * np.pi)
        ns[3] = min(max(ns[3], -9 * np.pi), 9 * np.pi)
        self.state = ns
        done = bool(-np.cos(ns[0]) - np.cos(ns[1] + ns[0]) > 1.0)
        return self.observe(), (0.0 if done else -1.0), done


class MountainCar:
    """mountain_car.py, MountainCarEnv with goal_velocity == 0."""

    name = "MountainCar-v0"
    max_steps = 200
    discrete = 3

    def set_state(self, values):
        self.state = np.array(values, dtype=np.float64)

    def observe(self):
        return np.array(self.state, dtype=np.float32)

    def step(self, action):
        pos, vel = self.state
        vel += (action - 1) * 0.001 + math.cos(3 * pos) * (-0.0025)
        vel = np.clip(vel, -0.07, 0.07)
        pos += vel
        pos = np.clip(pos, -1.2, 0.6)
        if pos == -1.2 and vel < 0:
            vel = 0
        done = bool(pos >= 0.5 and vel >= 0)
        self.state = (pos, vel)
        return self.observe(), -1.0, done


class MountainCarContinuous:
    """continuous_mountain_car.py, Continuous_MountainCarEnv with goal_velocity == 0."""

    name = "MountainCarContinuous-v0"
    max_steps = 999
    discrete = 0
    low, high = -1.0, 1.0

    def set_state(self, values):
        self.state = np.array(values, dtype=np.float64)  # float64 until the first step

    def observe(self):
        return np.array(self.state, dtype=np.float32)

    def step(self, action):
        pos = self.state[0]
        vel = self.state[1]
        force = min(max(action[0], -1.0), 1.0)
        vel += force * 0.0015 - 0.0025 * math.cos(3 * pos)
        if vel > 0.07:
            vel = 0.07
        if vel < -0.07:
            vel = -0.07
        pos += vel
        if pos > 0.6:
            pos = 0.6
        if pos < -1.2:
            pos = -1.2
        if pos == -1.2 and vel < 0:
            vel = 0
        done = bool(pos >= 0.45 and vel >= 0)
        reward = 0
        if done:
            reward = 100.0
        reward -= math.pow(action[0], 2) * 0.1
        self.state = np.array([pos, vel], dtype=np.float32)
        return self.state, reward, done


class Pendulum:
    """pendulum.py, PendulumEnv with g == 10.0."""

    name = "Pendulum-v1"
    max_steps = 200
    discrete = 0
    low, high = -2.0, 2.0

    def set_state(self, values):
        self.state = np.array(values, dtype=np.float64)

    def observe(self):
        th, thdot = self.state
        return np.array([np.cos(th), np.sin(th), thdot], dtype=np.float32)

    def step(self, action):
        th, thdot = self.state
        g, m, l, dt = 10.0, 1.0, 1.0, 0.05
        u = np.clip(action, -2.0, 2.0)[0]  # numpy.float32
        normalized = ((th + np.pi) % (2 * np.pi)) - np.pi
        costs = normalized ** 2 + 0.1 * thdot ** 2 + 0.001 * (u ** 2)
        new_thdot = thdot + (3 * g / (2 * l) * np.sin(th) + 3.0 / (m * l ** 2) * u) * dt
        new_thdot = np.clip(new_thdot, -8, 8)
        new_th = th + new_thdot * dt
        self.state = np.array([new_th, new_thdot])
        return self.observe(), -costs, False


ENVS = {cls.name: cls for cls in (CartPole, Acrobot, MountainCar, MountainCarContinuous, Pendulum)}


def make_action(env, value):
    if env.discrete:
        return int(value)
    return np.array([float(value)], dtype=np.float32)  # a Box(float32) action


def run(env_name, state, actions):
    """Yields (step, observation, reward, terminated, truncated, internal state) rows, row 0 first."""
    env = ENVS[env_name]()
    env.set_state(state)
    yield 0, env.observe(), 0.0, False, False, [float(v) for v in env.state]
    for k, a in enumerate(actions, start=1):
        obs, reward, done = env.step(make_action(env, a))
        truncated = k >= env.max_steps  # gymnasium.wrappers.TimeLimit
        yield k, obs, reward, done, truncated, [float(v) for v in env.state]


def csv_lines(env_name, state, actions):
    yield "step," + ",".join(CSV_NAMES[env_name]) + ",reward,terminated,truncated"
    for k, obs, reward, done, truncated, _ in run(env_name, state, actions):
        fields = [str(k)] + ["%.9g" % float(v) for v in obs]
        fields += ["%.17g" % float(reward), str(int(done)), str(int(truncated))]
        yield ",".join(fields)


CSV_NAMES = {
    "CartPole-v1": ["x", "x_dot", "theta", "theta_dot"],
    "Acrobot-v1": ["cos_theta1", "sin_theta1", "cos_theta2", "sin_theta2", "theta1_dot", "theta2_dot"],
    "MountainCar-v0": ["position", "velocity"],
    "MountainCarContinuous-v0": ["position", "velocity"],
    "Pendulum-v1": ["cos_theta", "sin_theta", "theta_dot"],
}


# ---------------------------------------------------------------------------------------------
# The pinned scenarios of tests/test_envs.cpp. Actions come from fixed lists or small policies on
# the float32 observation (so a scenario reaches termination or the time limit).


def lcg_actions(seed, count, choices):
    state = seed
    out = []
    for _ in range(count):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        out.append(choices[(state >> 33) % len(choices)])
    return out


def policy_run(env_name, state, policy, steps, after_termination=2):
    """Runs `policy(observation) -> action text` for at most `steps` steps, stopping
    `after_termination` steps after the first termination; returns the action list."""
    env = ENVS[env_name]()
    env.set_state(state)
    obs = env.observe()
    actions = []
    remaining = None
    for _ in range(steps):
        a = policy(obs)
        actions.append(a)
        obs, _, done = env.step(make_action(env, a))
        if remaining is not None:
            remaining -= 1
            if remaining == 0:
                break
        elif done:
            remaining = after_termination
    return actions


def scenarios():
    out = []
    out.append(("cartpole_mixed", "CartPole-v1", [0.01, 0.02, -0.03, 0.04],
                lcg_actions(1, 60, ["0", "1"]), "all"))
    # Pushing one way until the pole falls, then two more steps (reward 0 after termination).
    out.append(("cartpole_fall", "CartPole-v1", [0.0, 0.0, 0.15, 0.5], ["0"] * 6, "all"))
    # A balancing policy that survives to the time limit: truncated exactly at step 500.
    out.append(("cartpole_truncation", "CartPole-v1", [0.02, -0.01, 0.03, -0.02],
                policy_run("CartPole-v1", [0.02, -0.01, 0.03, -0.02],
                           lambda o: "1" if float(o[2]) + 0.5 * float(o[3]) > 0 else "0", 501), "tail"))
    out.append(("acrobot_mixed", "Acrobot-v1", [0.05, -0.03, 0.02, 0.01],
                lcg_actions(2, 40, ["0", "1", "2"]), "all"))
    # Fast spinning state: exercises wrap() and the velocity bounds.
    out.append(("acrobot_wrap_bound", "Acrobot-v1", [3.1, -3.1, 12.4, -28.0],
                lcg_actions(3, 20, ["0", "2"]), "all"))
    # Starts above the target height: terminates with reward 0.
    out.append(("acrobot_goal", "Acrobot-v1", [3.0, 0.1, 0.0, 0.0], ["1", "1"], "all"))
    # Energy pumping along the velocity sign reaches the goal.
    out.append(("mountaincar_goal", "MountainCar-v0", [-0.5, 0.0],
                policy_run("MountainCar-v0", [-0.5, 0.0], lambda o: "2" if float(o[1]) >= 0 else "0", 200), "all"))
    # Hitting the left wall: position clipped to -1.2, velocity set to 0.
    out.append(("mountaincar_wall", "MountainCar-v0", [-1.15, -0.06], ["0"] * 6, "all"))
    out.append(("mountaincar_truncation", "MountainCar-v0", [-0.5, 0.0], ["1"] * 200, "tail"))
    out.append(("mountaincarcontinuous_goal", "MountainCarContinuous-v0", [-0.5, 0.0],
                policy_run("MountainCarContinuous-v0", [-0.5, 0.0],
                           lambda o: "1.7" if float(o[1]) >= 0 else "-0.75", 999), "all"))
    out.append(("mountaincarcontinuous_wall", "MountainCarContinuous-v0", [-1.15, -0.06],
                ["-0.3", "-1", "0.25", "0"], "all"))
    out.append(("pendulum_mixed", "Pendulum-v1", [3.0, -0.5],
                lcg_actions(4, 40, ["-2.5", "-1.25", "-0.3", "0", "0.1", "0.77", "1.9", "2.4"]), "all"))
    # Near-max speed: clipping of theta_dot at 8 and angle_normalize across several turns.
    out.append(("pendulum_fast", "Pendulum-v1", [7.5, 7.9], ["2"] * 15, "all"))
    out.append(("pendulum_truncation", "Pendulum-v1", [-1.0, 0.25], lcg_actions(5, 200, ["-2", "0.5", "2"]), "tail"))
    # Found with `compare` against a build whose python_pow() squared with x*x: evaluating `x**2`
    # as x*x instead of libm's pow changes the last step of these two (glibc's pow(x, 2.0) is not
    # always the correctly rounded x*x).
    out.append(("pendulum_libm_pow", "Pendulum-v1", [6.506596557918936, -3.4316249526553015],
                ["0.33329", "-1.7405", "1.46387", "0.261739", "-1.63206"], "all"))
    out.append(("acrobot_libm_pow", "Acrobot-v1",
                [3.0997640517719676, -2.6206979498066305, -7.403784594624317, 19.3929550232453],
                "0,1,0,0,2,0,2,1,0,2,2,1,1,1,2,2,1,2,1,2,1,2,1,2,0,0,1,1,2,2,0,1,2,2,1,2,2,0,0,1,2,0,1,0,1,0,2,1,2,0,0"
                .split(","), "tail"))
    return out


def cpp_double(x):
    text = "%.17g" % x
    if all(c not in text for c in ".eEn"):
        text += ".0"
    return text


def cpp_float(x):
    text = "%.9g" % float(x)
    if all(c not in text for c in ".eEn"):
        text += ".0"
    return text + "F"


def emit_cpp():
    print("// BEGIN GENERATED by tests/envs/gym_reference.py cpp -- do not edit by hand")
    for name, env_name, state, actions, keep in scenarios():
        rows = list(run(env_name, state, actions))
        if keep == "tail":
            rows = rows[:3] + rows[-3:]
        print("const Scenario %s{" % name)
        print('    "%s",' % env_name)
        print("    {%s}," % ", ".join(cpp_double(v) for v in state))
        print('    "%s",' % ",".join(actions))
        print("    {")
        for k, obs, reward, done, truncated, st in rows:
            print("        {%d, {%s}, %s, %s, %s, {%s}}," % (
                k, ", ".join(cpp_float(v) for v in obs), cpp_double(float(reward)),
                "true" if done else "false", "true" if truncated else "false",
                ", ".join(cpp_double(v) for v in st)))
        print("    }};")
    print("// END GENERATED")


def compare_with_cli(cli, episodes, seed):
    rng = random.Random(seed)
    mismatches = 0
    steps = 0
    for i in range(episodes):
        env_name = list(ENVS)[i % len(ENVS)]
        cls = ENVS[env_name]
        if env_name == "CartPole-v1":
            state = [rng.uniform(-0.2, 0.2) for _ in range(4)]
        elif env_name == "Acrobot-v1":
            state = [rng.uniform(-math.pi, math.pi), rng.uniform(-math.pi, math.pi),
                     rng.uniform(-12, 12), rng.uniform(-28, 28)]
        elif env_name == "Pendulum-v1":
            state = [rng.uniform(-8, 8), rng.uniform(-8, 8)]
        else:
            state = [rng.uniform(-1.2, 0.6), rng.uniform(-0.07, 0.07)]
        count = rng.randint(1, cls.max_steps + 5)
        if cls.discrete:
            actions = [str(rng.randrange(cls.discrete)) for _ in range(count)]
        else:
            actions = ["%.6g" % rng.uniform(cls.low, cls.high) for _ in range(count)]
        state_text = ",".join(repr(v) for v in state)
        expected = "\n".join(csv_lines(env_name, state, actions)) + "\n"
        got = subprocess.run([cli, "--env", env_name, "--state", state_text, "--actions", ",".join(actions)],
                             check=True, capture_output=True, text=True).stdout
        steps += count
        if got != expected:
            mismatches += 1
            for line_e, line_g in zip(expected.splitlines(), got.splitlines()):
                if line_e != line_g:
                    step = int(line_e.split(",")[0])
                    print("MISMATCH %s --state=%s --actions=%s\n  expected %s\n  got      %s" % (
                        env_name, state_text, ",".join(actions[:step]), line_e, line_g))
                    break
    print("%d episodes, %d steps compared, %d mismatching episodes" % (episodes, steps, mismatches))
    return 1 if mismatches else 0


def main():
    check_numpy_uses_libm()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    csv_parser = sub.add_parser("csv")
    csv_parser.add_argument("env", choices=list(ENVS))
    csv_parser.add_argument("--state", required=True)
    csv_parser.add_argument("--actions", default="")
    sub.add_parser("cpp")
    cmp_parser = sub.add_parser("compare")
    cmp_parser.add_argument("--cli", required=True)
    cmp_parser.add_argument("--episodes", type=int, default=100)
    cmp_parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.mode == "csv":
        state = [float(v) for v in args.state.split(",")]
        actions = [a for a in args.actions.split(",") if a]
        for line in csv_lines(args.env, state, actions):
            print(line)
        return 0
    if args.mode == "cpp":
        emit_cpp()
        return 0
    return compare_with_cli(args.cli, args.episodes, args.seed)


if __name__ == "__main__":
    sys.exit(main())
