#!/usr/bin/python3
"""Side by side, for one seed of the Shesha arm in two lab reports: every worker's sending window and
each cluster's Age-of-Model over time. docs/benchmarks.md ("Why one job starved") uses it to show
the fair queue counting contributions (one report) against counting packets (the other).

  tools/lab/plot_starvation.py OUT.png SEED LABEL_A REPORT_A LABEL_B REPORT_B [ARM]

REPORT_* are shesha-lab report directories that ran SEED in ARM (default: shesha).
"""
import csv
import glob
import json
import os
import sys


def worker_windows(run_dir):
    """{cluster: [[(t, window), ...] per worker]} from the workers' metrics JSON."""
    out = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "worker-c*-w*.json"))):
        with open(path) as f:
            j = json.load(f)
        samples = [(s[0], s[1]) for s in j["window"]["samples"]]
        out.setdefault(j["cluster_id"], []).append(samples)
    return out


def learner_aom(run_dir):
    """{cluster: [(t, aom_ms), ...]} from each learner's metrics CSV."""
    out = {}
    for d in sorted(glob.glob(os.path.join(run_dir, "learner-c*"))):
        if not os.path.isdir(d):
            continue
        cid = int(os.path.basename(d)[len("learner-c"):])
        rows = []
        with open(os.path.join(d, "learner.csv")) as f:
            for r in csv.DictReader(f):
                try:
                    rows.append((float(r["wall_seconds"]), float(r["aom_now_ms"])))
                except (KeyError, TypeError, ValueError):
                    continue
        out[cid] = rows[:-1]  # the last row is written at exit, after the workers stopped
    return out


def main(argv):
    if len(argv) not in (6, 7):
        sys.exit(__doc__)
    out, seed, label_a, report_a, label_b, report_b = argv[:6]
    arm = argv[6] if len(argv) == 7 else "shesha"
    runs = [(label_a, os.path.join(report_a, "raw", arm, f"seed-{seed}")),
            (label_b, os.path.join(report_b, "raw", arm, f"seed-{seed}"))]
    for _, d in runs:
        if not os.path.isdir(d):
            sys.exit(f"plot_starvation: no run directory {d}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True, squeeze=False)
    for col, (label, d) in enumerate(runs):
        ax = axes[0][col]
        for cid, workers in sorted(worker_windows(d).items()):
            for i, samples in enumerate(workers):
                if samples:
                    xs, ys = zip(*samples)
                    ax.plot(xs, ys, color=f"C{cid - 1}", lw=0.8, alpha=0.8,
                            label=f"cluster {cid}" if i == 0 else None)
        ax.set_yscale("log")
        ax.set_ylabel("window (chunks), every worker")
        ax.set_title(f"{label}, seed {seed}")
        ax.legend(loc="upper right", fontsize=8)
        ax = axes[1][col]
        for cid, rows in sorted(learner_aom(d).items()):
            if rows:
                xs, ys = zip(*rows)
                ax.plot(xs, ys, color=f"C{cid - 1}", lw=0.9, label=f"cluster {cid}")
        ax.set_ylabel("AoM (ms)")
        ax.set_xlabel("wall time (s)")
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot_starvation: wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
