#!/usr/bin/env python3
"""A worker whose updates never reach the learner does not wait forever for a newer version.

The learner here is the `shesha` module's endpoint, configured never to publish again
(publish_interval_ms one hour): whatever the workers send, version 1 stays the newest, and the learner
rebroadcasts it every rebroadcast_ms. That is what a learner looks like to its workers when every
gradient of the last version was lost (a switch restart took them all; tests/integration's
fault_switch_restart once stalled there for good). A worker that has spent its
max_updates_per_version on version 1 must take the resend as "nothing newer is coming" and compute
another budget's worth (drl/update_budget.h), and no more than that.

Checked for the C++ shesha-worker and for python/examples/a3c_worker.py (when torch is importable).
usage: test_worker_budget.py WORKER_EXE SOURCE_DIR   (PYTHONPATH holds the shesha module)
Exit 77 (skipped) without numpy, yaml or the module."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import yaml
    import shesha
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

WORKER, SRC = sys.argv[1], sys.argv[2]
BUDGET = 4
failures = 0


def check(ok, what):
    global failures
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    failures += 0 if ok else 1


def write_config(path):
    with open(os.path.join(SRC, "configs/cluster-cartpole.yaml")) as f:
        cfg = yaml.safe_load(f)
    cfg["learner"]["publish_interval_ms"] = 3_600_000  # never again within the test
    cfg["learner"]["rebroadcast_ms"] = 200
    cfg["worker"]["max_updates_per_version"] = BUDGET
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run(name, command, metrics, computed, refills, adopted):
    """Runs one worker against a never-publishing learner until it has refilled its budget twice."""
    learner = shesha.Learner(config, 1, np.zeros(4675, dtype=np.float32), port=0, bind="127.0.0.1")
    versions = []
    learner.set_update_handler(lambda g, info: versions.append(info["base_version"]))
    proc = subprocess.Popen(command(learner.local_port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stable = None
    try:
        # Readiness: the worker's own metrics (rewritten every second) show two refills.
        deadline = time.monotonic() + 60
        state = None
        while time.monotonic() < deadline and proc.poll() is None:
            learner.poll(5)
            state = read_json(metrics)
            if state is not None and refills(state) >= 2:
                break
        check(state is not None and refills(state) >= 2,
              f"{name}: refilled its budget on the learner's resends ({refills(state) if state else 'no metrics'})")
        # The learner falls silent (no more polls, no resends). Once the worker has spent what it was
        # given, it computes nothing more: the same count in two metrics files a second apart.
        seen = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            state = read_json(metrics)
            if state is not None and (not seen or seen[-1][0] != state["wall_seconds"]):
                seen.append((state["wall_seconds"], computed(state)))
                if len(seen) >= 3 and seen[-1][1] == seen[-2][1]:
                    stable = seen[-1][1]
                    break
            time.sleep(0.05)
        check(stable is not None, f"{name}: stopped computing once the resends stopped ({seen[-3:]})")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    final = read_json(metrics) or {}
    c, r, a = computed(final), refills(final), adopted(final)
    check(r >= 2 and c == stable and BUDGET * r < c <= BUDGET * (a + r),
          f"{name}: {c} gradients computed, at most {BUDGET} per version adopted ({a}) or refill ({r})")
    # The endpoint publishes once, at its first tick with something applied (the interval has
    # passed since boot), then never again.
    published = learner.counters()["versions_published"]
    check(published <= 1 and learner.version == 1 + published and len(versions) > 0 and
          set(versions) <= {1, learner.version},
          f"{name}: the learner received the gradients ({len(versions)} chunks) and published {published} version(s)")
    if failures:
        print(out[-2000:])


with tempfile.TemporaryDirectory(prefix="shesha-budget.") as work:
    config = os.path.join(work, "cluster.yaml")
    write_config(config)
    cpp_metrics = os.path.join(work, "cpp.json")
    run("shesha-worker",
        lambda port: [WORKER, "--config", config, "--cluster", "1", "--worker-id", "1", "--learner", "127.0.0.1",
                      "--port", str(port), "--bind", "127.0.0.1", "--duration", "90", "--metrics", cpp_metrics],
        cpp_metrics, lambda j: j["updates"]["computed"], lambda j: j["updates"]["budget_refills"],
        lambda j: j["model"]["versions_adopted"])
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
        print("info: python3-torch missing: python/examples/a3c_worker.py not checked")
    if have_torch:
        py_metrics = os.path.join(work, "py.json")
        run("a3c_worker.py",
            lambda port: ["/usr/bin/python3", os.path.join(SRC, "python/examples/a3c_worker.py"), "--config", config,
                          "--cluster", "1", "--worker-id", "2", "--learner", "127.0.0.1", "--port", str(port),
                          "--bind", "127.0.0.1", "--duration", "90", "--metrics", py_metrics],
            py_metrics, lambda j: j["updates"], lambda j: j["budget_refills"],
            lambda j: j["transport"]["models_adopted"])

print(f"worker budget test: {'all checks passed' if failures == 0 else f'{failures} check(s) failed'}")
sys.exit(1 if failures else 0)
