#!/usr/bin/env python3
"""The Python module's send path against the C++ API's, in the same run (docs/benchmarks.md).

Both arms run the same loop against one running shesha-learner on loopback (CartPole-v1's
4675-parameter model, 19 chunks of 256 per update): send(version, gradient) then poll(0), for
--seconds, with a fixed float32 gradient (a torch tensor's .numpy() view in Python, not copied).
Arms are interleaved (C++, Python, C++, ...) over --rounds; medians and spreads are printed.

    bench_python_send.py BUILD_DIR [--rounds 5] [--seconds 2] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--port", type=int, default=23987)
    ap.add_argument("--json")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    import numpy as np
    import shesha
    try:
        import torch
        gradient = torch.full((4675,), 1e-3, dtype=torch.float32).numpy()
        source = "torch tensor .numpy()"
    except ImportError:
        gradient = np.full(4675, 1e-3, dtype=np.float32)
        source = "numpy array"
    cfg = os.path.join(SRC, "configs", "cluster-cartpole.yaml")
    learner = subprocess.Popen([os.path.join(a.build, "learner", "shesha-learner"), "--config", cfg, "--cluster", "1",
                                "--bind", "127.0.0.1", "--port", str(a.port), "--duration", "600", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = learner.stdout.readline()
        while line and "cluster 1 on" not in line:
            line = learner.stdout.readline()
        results = {"cpp": [], "python": []}
        for r in range(a.rounds):
            out = subprocess.run([os.path.join(a.build, "tools", "bench", "shesha-api-send"), "--config", cfg,
                                  "--cluster", "1", "--worker-id", str(100 + r), "--port", str(a.port),
                                  "--elems", "4675", "--seconds", str(a.seconds)],
                                 check=True, capture_output=True, text=True).stdout
            c = json.loads(out)
            results["cpp"].append((c["updates"] / c["seconds"], c["chunks"] / c["seconds"]))
            w = shesha.Worker(cfg, 1, 200 + r, "127.0.0.1", 4675, port=a.port, bind="127.0.0.1")
            m = w.wait_model(5000)
            version = m[0] if m else 1
            n = 0
            start = time.monotonic()
            elapsed = 0.0
            while elapsed < a.seconds:
                w.send(version, gradient)
                w.poll(0)
                n += 1
                if n & 63 == 0:
                    elapsed = time.monotonic() - start
            elapsed = time.monotonic() - start
            results["python"].append((n / elapsed, w.counters()["chunks_sent"] / elapsed))
            print(f"round {r + 1}: C++ {results['cpp'][-1][0]:,.0f} updates/s, {results['cpp'][-1][1]:,.0f} chunks/s; "
                  f"Python {results['python'][-1][0]:,.0f} updates/s, {results['python'][-1][1]:,.0f} chunks/s",
                  flush=True)
    finally:
        learner.terminate()
        learner.wait()

    def summary(arm, k):
        xs = [x[k] for x in results[arm]]
        return statistics.median(xs), min(xs), max(xs)
    rows = []
    for arm, name in (("cpp", "C++ WorkerTransport (reference)"), ("python", f"Python shesha.Worker, {source}")):
        u, c = summary(arm, 0), summary(arm, 1)
        rows.append({"arm": name, "updates_per_s": u, "chunks_per_s": c})
    ratio_u = [p[0] / c[0] for p, c in zip(results["python"], results["cpp"])]
    ratio_c = [p[1] / c[1] for p, c in zip(results["python"], results["cpp"])]
    print(f"\n{a.rounds} interleaved rounds of {a.seconds} s, median [min, max]:")
    print("| arm | updates/s | chunks/s sent |")
    print("|---|---:|---:|")
    for row in rows:
        u, c = row["updates_per_s"], row["chunks_per_s"]
        print(f"| {row['arm']} | {u[0]:,.0f} [{u[1]:,.0f}, {u[2]:,.0f}] | {c[0]:,.0f} [{c[1]:,.0f}, {c[2]:,.0f}] |")
    print(f"| Python / C++ (per round) | {statistics.median(ratio_u):.2f} [{min(ratio_u):.2f}, {max(ratio_u):.2f}] | "
          f"{statistics.median(ratio_c):.2f} [{min(ratio_c):.2f}, {max(ratio_c):.2f}] |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": results, "ratio_updates": ratio_u, "ratio_chunks": ratio_c}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
