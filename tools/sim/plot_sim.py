#!/usr/bin/python3
"""Plots for shesha-sim CSVs (matplotlib; run with Debian's /usr/bin/python3).

  plot_sim.py series OUT_DIR/series.csv IMG.png [--label L]   AoM, queue depth, window over time
  plot_sim.py study  summary.csv IMG_DIR                       scaling plots from a sweep (run_study.py)
  plot_sim.py slots  OUT_DIR/slots.csv IMG.png                 a slotted replay (shesha-sim --replay)
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HOPS = ["host_nic", "leaf_uplink", "spine_down", "learner_port"]
ARM_STYLE = {
    "fifo": ("tab:red", "--", "FIFO, no window"),
    "merge": ("tab:green", "--", "merge, no window"),
    "fifo+window+fb": ("tab:red", "-", "FIFO + window + feedback"),
    "merge+window+fb": ("tab:green", "-", "merge + window + feedback"),
    "fifo+window": ("tab:orange", "-", "FIFO + window"),
    "merge+window": ("tab:blue", "-", "merge + window"),
}


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot_series(series_csv, out_png, label=None, max_clusters=8):
    rows = read_rows(series_csv)
    if label is not None:
        rows = [r for r in rows if r["label"] == label]
    data = defaultdict(lambda: ([], []))
    for r in rows:
        key = (r["metric"], int(r["key"]))
        data[key][0].append(float(r["t_ms"]))
        data[key][1].append(float(r["value"]))
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for (metric, key), (t, v) in sorted(data.items()):
        if metric == "aom_us" and key < max_clusters:
            axes[0].plot(t, v, lw=0.8, label=f"cluster {key}")
        elif metric == "depth_max" and any(v):
            axes[1].plot(t, v, lw=0.8, label=HOPS[key])
        elif metric == "window_mean":
            axes[2].plot(t, v, lw=0.8, color="k")
    axes[0].set_ylabel("AoM (us)")
    axes[0].legend(fontsize=7, ncol=4)
    axes[1].set_ylabel("max queue depth (packets)")
    axes[1].legend(fontsize=7)
    axes[2].set_ylabel("mean sender window (chunks)")
    axes[2].set_xlabel("simulated time (ms)")
    fig.suptitle(label or series_csv)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def _sweep(ax, rows, x, y, ylabel, logy=False):
    by_arm = defaultdict(list)
    for r in rows:
        by_arm[r["arm"]].append((float(r[x]), float(r[y])))
    for arm, pts in sorted(by_arm.items()):
        pts.sort()
        color, ls, name = ARM_STYLE.get(arm, ("k", ":", arm))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, color=color, marker="o", ms=3, label=name)
    ax.set_ylabel(ylabel)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("symlog", linthresh=1)
        ax.set_ylim(bottom=0)  # every plotted quantity is >= 0
    ax.grid(alpha=0.3)


def plot_study(summary_csv, img_dir):
    rows = read_rows(summary_csv)
    groups = defaultdict(list)
    for r in rows:
        groups[r["label"].split("/")[0]].append(r)
    for study, rs in groups.items():
        x = "clusters" if study.startswith("clusters") else "workers"
        fig, axes = plt.subplots(2, 3, figsize=(13, 7))
        _sweep(axes[0][0], rs, x, "aom_mean_us", "AoM time-average (us)", logy=True)
        _sweep(axes[0][1], rs, x, "aom_peak_us", "AoM peak (us)", logy=True)
        _sweep(axes[0][2], rs, x, "learner_port_sojourn_mean_us", "learner-port sojourn mean (us)", logy=True)
        for r in rs:
            sent = float(r["contributions_sent"]) or 1.0
            r["drop_pct"] = str(100.0 * float(r["contributions_dropped"]) / sent)
            r["saved_mb"] = str(float(r["bytes_saved"]) / 1e6)
        _sweep(axes[1][0], rs, x, "drop_pct", "contributions dropped (%)")
        _sweep(axes[1][1], rs, x, "saved_mb", "bytes saved by merging (MB)", logy=True)
        _sweep(axes[1][2], rs, x, "jain_fairness" if x == "clusters" else "staleness_mean",
               "Jain's fairness (clusters)" if x == "clusters" else "version staleness (mean)")
        for ax in axes[1]:
            ax.set_xlabel(x)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(study)
        fig.tight_layout()
        fig.savefig(f"{img_dir}/sim-{study}.png", dpi=100)
        plt.close(fig)
    # The simulator's own speed over every run.
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [float(r["packets_forwarded"]) for r in rows]
    ys = [float(r["packets_per_wall_s"]) / 1e6 for r in rows]
    ax.scatter(xs, ys, s=10)
    ax.set_xscale("log")
    ax.set_xlabel("packet-hops simulated per run")
    ax.set_ylabel("M packet-hops per wall second")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{img_dir}/sim-speed.png", dpi=100)
    plt.close(fig)


def plot_slots(slots_csv, out_png):
    """Queue depth, windows, service and AoM age per slot of a slotted replay."""
    rows = read_rows(slots_csv)
    if not rows:
        raise SystemExit(f"{slots_csv}: no rows")
    slots = sorted({int(r["slot"]) for r in rows})
    clusters = sorted({int(r["cluster"]) for r in rows})
    by = {(int(r["slot"]), int(r["cluster"])): r for r in rows}
    depth = [int(by[(t, clusters[0])]["depth_end"]) for t in slots]
    drops = [int(by[(t, clusters[0])]["drops"]) for t in slots]
    fig, axes = plt.subplots(4, 1, figsize=(8, 9), sharex=True)
    axes[0].step(slots, depth, where="mid", label="depth after service")
    axes[0].bar(slots, drops, color="tab:red", alpha=0.5, label="tail drops")
    axes[0].set_ylabel("packets")
    axes[0].legend(loc="upper left", fontsize=8)
    for c in clusters:
        win = [int(by[(t, c)]["window"]) for t in slots]
        served = [int(by[(t, c)]["served"]) for t in slots]
        age = [int(by[(t, c)]["age"]) for t in slots]
        line = axes[1].step(slots, win, where="mid", label=f"cluster {c}")[0]
        cuts = [t for t in slots if by[(t, c)]["cut"] == "1"]
        axes[1].plot(cuts, [int(by[(t, c)]["window"]) for t in cuts], "v", color=line.get_color())
        axes[2].step(slots, served, where="mid", color=line.get_color(), label=f"cluster {c}")
        axes[3].step(slots, age, where="mid", color=line.get_color(), label=f"cluster {c}")
    axes[1].set_ylabel("usable window\n(v: cut)")
    axes[2].set_ylabel("contributions\nserved")
    axes[3].set_ylabel("AoM age (slots)")
    axes[3].set_xlabel("slot")
    for ax in axes[1:]:
        ax.legend(loc="upper left", fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(f"slotted replay: {slots_csv}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) >= 4 and argv[1] == "series":
        label = argv[argv.index("--label") + 1] if "--label" in argv else None
        plot_series(argv[2], argv[3], label)
    elif len(argv) == 4 and argv[1] == "slots":
        plot_slots(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "study":
        plot_study(argv[2], argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
