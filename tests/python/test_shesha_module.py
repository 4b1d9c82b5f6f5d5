#!/usr/bin/env python3
"""The `shesha` Python module: strict about what it is given, exact over loopback, Gymnasium-exact
environments, and the GIL released while it waits. Needs NumPy; torch parts skip without torch.
Exit 77 (skipped) if the module cannot be imported."""
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

try:
    import numpy as np
    import shesha
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

SRC = os.environ.get("SHESHA_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIG = """env: CartPole-v1
optimizer: {kind: sgd, lr: 0.5}
transport: {chunk_elems: 4, w_init: 64, w_max: 64}
learner: {publish_interval_ms: 1, max_grad_norm: 0}
worker: {model_request_ms: 5}
"""


def run_until(learner, workers, done, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        learner.poll(1)
        for w in workers:
            w.poll(0)
        if done():
            return True
    return False


class Pair(unittest.TestCase):
    def setUp(self):
        fd, self.config = tempfile.mkstemp(suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            f.write(CONFIG)
        self.learner = shesha.Learner(self.config, 9, np.ones(10, dtype=np.float32), port=0, bind="127.0.0.1")
        self.worker = shesha.Worker(self.config, 9, 3, "127.0.0.1", 10, port=self.learner.local_port, bind="127.0.0.1")

    def tearDown(self):
        os.unlink(self.config)

    def test_exact_chunks_reach_the_handler(self):
        seen = []
        self.learner.set_update_handler(lambda g, info: seen.append((info, g.copy())))
        self.assertTrue(run_until(self.learner, [self.worker], lambda: self.worker.has_model))
        self.assertEqual(self.worker.model_version, 1)
        g = np.arange(10, dtype=np.float32)
        self.worker.send(1, g, env_steps=5)
        self.assertTrue(run_until(self.learner, [self.worker], lambda: len(seen) == 3))
        joined = np.full(10, -1, dtype=np.float32)
        for info, values in seen:
            self.assertEqual(info["worker_id"], 3)
            self.assertEqual(info["contributions"], 1)
            self.assertEqual(info["offset"], 4 * info["chunk_index"])
            joined[info["offset"]:info["offset"] + len(values)] = values
        self.assertTrue(np.array_equal(joined, g))
        c = self.learner.counters()
        self.assertEqual((c["chunks_applied"], c["chunks_rejected"]), (3, 0))
        self.assertEqual(c["model_group_chunks_sent"], 0)  # learner.model_delivery: unicast (the default)
        self.assertEqual(c["credit_batches"], 0)  # unicast delivery: one CREDIT per worker, no fan-out
        self.assertEqual(c["credit_messages"], 3)
        # The handler applied nothing; overwrite the parameters and publish them: they come back exactly.
        self.learner.set_parameters(np.full(10, 0.25, dtype=np.float32))
        self.assertTrue(self.learner.publish())
        got = []
        self.assertTrue(run_until(self.learner, [self.worker], lambda: got.append(self.worker.take_model()) or got[-1] is not None))
        version, params = got[-1]
        self.assertGreaterEqual(version, 2)
        self.assertTrue(np.array_equal(params, np.full(10, 0.25, dtype=np.float32)))

    def test_builtin_optimizer_and_parts(self):
        self.assertTrue(run_until(self.learner, [self.worker], lambda: self.worker.has_model))
        parts = [np.full(4, 2.0, dtype=np.float32), np.full(4, 2.0, dtype=np.float32), np.full(2, 2.0, dtype=np.float32)]
        self.worker.send_parts(1, parts)
        self.assertTrue(run_until(self.learner, [self.worker], lambda: self.learner.counters()["chunks_applied"] == 3))
        self.assertTrue(np.array_equal(self.learner.parameters(), np.zeros(10, dtype=np.float32)))

    def test_strict_buffers(self):
        w = self.worker
        with self.assertRaisesRegex(TypeError, "gradient: expected a float32 buffer"):
            w.send(1, np.zeros(10, dtype=np.float64))
        with self.assertRaisesRegex(ValueError, "gradient: expected a contiguous buffer"):
            w.send(1, np.zeros(20, dtype=np.float32)[::2])
        with self.assertRaisesRegex(shesha.Error, r"^send: the gradient has 9 elements, the model has 10$"):
            w.send(1, np.zeros(9, dtype=np.float32))
        bad = np.zeros(10, dtype=np.float32)
        bad[3] = np.nan
        with self.assertRaisesRegex(shesha.Error, "holds a NaN or an infinity"):
            w.send(1, bad)
        with self.assertRaisesRegex(TypeError, r"parts\[1\]: expected a float32 buffer"):
            w.send_parts(1, [np.zeros(4, dtype=np.float32), np.zeros(6, dtype=np.int32)])
        with self.assertRaisesRegex(shesha.Error, "the parts hold 8 elements in all, the model has 10"):
            w.send_parts(1, [np.zeros(4, dtype=np.float32), np.zeros(4, dtype=np.float32)])
        self.assertTrue(issubclass(shesha.Error, RuntimeError))

    def test_torch_tensors_without_copy(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        net = torch.nn.Linear(3, 2)  # 6 weights + 2 biases = 8 parameters; pad to 10 with a 2-vector
        extra = torch.nn.Parameter(torch.zeros(2))
        params = list(net.parameters()) + [extra]
        for p in params:
            p.grad = torch.ones_like(p)
        flat = torch.nn.utils.parameters_to_vector([p.grad for p in params])
        self.assertTrue(run_until(self.learner, [self.worker], lambda: self.worker.has_model))
        self.worker.send(1, flat.numpy())
        self.worker.send_parts(1, [p.grad.numpy().reshape(-1) for p in params])
        self.assertEqual(self.worker.counters()["updates_offered"], 2)
        with self.assertRaisesRegex(ValueError, "contiguous"):
            self.worker.send(1, torch.ones(10, 2)[:, 0].numpy())


class Errors(unittest.TestCase):
    def test_bad_arguments(self):
        with self.assertRaisesRegex(shesha.Error, "nope.yaml: cannot read the file"):
            shesha.Worker("nope.yaml", 1, 1, "127.0.0.1", 10)
        cfg = os.path.join(SRC, "configs", "cluster-cartpole.yaml")
        with self.assertRaisesRegex(shesha.Error, "learner address: not an IPv4 address: '300.1.1.1'"):
            shesha.Worker(cfg, 1, 1, "300.1.1.1", 10)
        with self.assertRaisesRegex(ValueError, "cluster: expected 0..65535, got 70000"):
            shesha.Worker(cfg, 70000, 1, "127.0.0.1", 10)
        with self.assertRaisesRegex(shesha.Error, "unknown environment 'Pong-v0'"):
            shesha.Env("Pong-v0")
        env = shesha.Env("CartPole-v1")
        env.reset(1)
        with self.assertRaisesRegex(shesha.Error, r"action 2 is out of range: CartPole-v1 takes 0..1"):
            env.step(2)
        with self.assertRaisesRegex(shesha.Error, "has a state of 4 values, got 3"):
            env.set_state([0.0, 0.0, 0.0])


class GilReleased(unittest.TestCase):
    def test_wait_model_lets_other_threads_run(self):
        cfg = os.path.join(SRC, "configs", "cluster-cartpole.yaml")
        # Nobody listens on this port: wait_model times out after 300 ms.
        w = shesha.Worker(cfg, 1, 1, "127.0.0.1", 4675, port=9, bind="127.0.0.1")
        ticks = [0]
        stop = [False]

        def spin():
            while not stop[0]:
                ticks[0] += 1
        t = threading.Thread(target=spin)
        t.start()
        start = time.monotonic()
        self.assertIsNone(w.wait_model(300))
        elapsed = time.monotonic() - start
        stop[0] = True
        t.join()
        self.assertGreaterEqual(elapsed, 0.29)
        # With the GIL held for 300 ms the thread could only have run in the switch intervals
        # before and after; released, it spins the whole time.
        self.assertGreater(ticks[0], 100000)


class Environments(unittest.TestCase):
    """Trajectories against tests/envs/gym_reference.py, which redoes Gymnasium's step functions."""

    def trajectory(self, name, state, actions):
        env = shesha.Env(name)
        obs = env.set_state(state)
        rows = [",".join(["0"] + ["%.9g" % float(v) for v in obs] + ["0", "0", "0"])]
        for k, a in enumerate(actions, 1):
            obs, reward, terminated, truncated = env.step(a)
            rows.append(",".join([str(k)] + ["%.9g" % float(v) for v in obs] +
                                 ["%.17g" % reward, str(int(terminated)), str(int(truncated))]))
        return rows

    def reference(self, name, state, actions):
        out = subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tests/envs/gym_reference.py"), "csv", name,
                              "--state=" + ",".join(repr(v) for v in state),
                              "--actions=" + ",".join(str(a) for a in actions)],
                             check=True, capture_output=True, text=True).stdout
        return out.splitlines()[1:]  # without the header

    def test_against_gymnasium_oracle(self):
        cases = [("CartPole-v1", [0.01, 0.02, -0.03, 0.04], [0, 1, 1, 0, 1, 1, 1]),
                 ("Acrobot-v1", [0.1, -0.2, 0.3, -0.4], [0, 2, 1, 2]),
                 ("Pendulum-v1", [0.3, -1.2], [2.5, -7.0, 0.5]),
                 ("MountainCarContinuous-v0", [-0.5, 0.01], [3.0, -1.5, 0.25])]
        for name, state, actions in cases:
            with self.subTest(env=name):
                self.assertEqual(self.trajectory(name, state, actions), self.reference(name, state, actions))


if __name__ == "__main__":
    unittest.main(verbosity=2)
