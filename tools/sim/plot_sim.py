#!/usr/bin/python3
"""Plots for shesha-sim CSVs (matplotlib; run with Debian's /usr/bin/python3).

  plot_sim.py series OUT_DIR/series.csv IMG.png [--label L]   AoM, queue depth, window (and the
                                                               learner ports both ways) over time
  plot_sim.py study  summary.csv IMG_DIR                       scaling plots from a sweep (run_study.py)
  plot_sim.py slots  OUT_DIR/slots.csv IMG.png                 a slotted replay (shesha-sim --replay)
  plot_sim.py model  summary.csv IMG_DIR                       the MODEL study (run_study.py --model)
  plot_sim.py compare BEFORE.csv AFTER.csv STUDY ARMS IMG.png  one sweep of two study runs (run_study.py
                                                               --seeds), arms comma-separated: AoM,
                                                               staleness, workers without a model and
                                                               contributions applied, medians over seeds
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HOPS = ["host_nic", "leaf_uplink", "spine_down", "learner_port", "learner_nic", "fabric_return", "worker_port"]
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
    # Two-directional runs add the learner ports' traffic each way.
    two_way = any(metric == "learner_down_gbps" for metric, _ in data)
    fig, axes = plt.subplots(4 if two_way else 3, 1, figsize=(8, 12 if two_way else 9), sharex=True)
    for (metric, key), (t, v) in sorted(data.items()):
        if metric == "aom_us" and key < max_clusters:
            axes[0].plot(t, v, lw=0.8, label=f"cluster {key}")
        elif metric == "depth_max" and any(v):
            axes[1].plot(t, v, lw=0.8, label=HOPS[key])
        elif metric == "window_mean":
            axes[2].plot(t, v, lw=0.8, color="k")
        elif metric in ("learner_up_gbps", "learner_down_gbps") and key < max_clusters:
            way = "up (to the learners)" if metric == "learner_up_gbps" else "down (MODEL, CREDIT)"
            axes[3].plot(t, v, lw=0.8, ls="-" if metric == "learner_up_gbps" else "--", label=f"port {key} {way}")
    axes[0].set_ylabel("AoM (us)")
    axes[0].legend(fontsize=7, ncol=4)
    axes[1].set_ylabel("max queue depth (packets)")
    axes[1].legend(fontsize=7)
    axes[2].set_ylabel("mean sender window (chunks)")
    if two_way:
        axes[3].set_ylabel("learner port (Gbit/s)")
        axes[3].legend(fontsize=7, ncol=2)
    axes[-1].set_xlabel("simulated time (ms)")
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


DELIVERY_STYLE = {"none": ("tab:gray", "MODEL left out (none)"), "unicast": ("tab:red", "unicast"),
                  "replicated": ("tab:green", "replicated")}


def _median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2 if xs else 0.0


def plot_model_study(summary_csv, img_dir):
    """run_study.py --model: the learner port in both directions, and AoM / model age, per delivery
    (medians over seeds); labels are POINT/SIZE/ARM:DELIVERY/sSEED."""
    rows = read_rows(summary_csv)
    groups = defaultdict(list)
    for r in rows:
        point, size, arm_delivery, _seed = r["label"].split("/")
        arm, delivery = arm_delivery.split(":")
        groups[(point, int(size), arm, delivery)].append(r)
    points = sorted({(p, n) for p, n, _a, _d in groups}, key=lambda x: (int(x[0].split("-")[1][:-2]), x[1]))
    arms = sorted({a for _p, _n, a, _d in groups})
    deliveries = [d for d in DELIVERY_STYLE if any(k[3] == d for k in groups)]

    def med(key, f):
        return _median([f(r) for r in groups.get(key, [])])

    # 1. The learner port's two directions (full Shesha): utilisation up; down split into MODEL and CREDIT.
    arm = "shesha-follow" if "shesha-follow" in arms else arms[-1]
    fig, axes = plt.subplots(1, len(points), figsize=(3.6 * len(points), 4.2), sharey=True)
    for ax, (point, size) in zip(axes, points):
        for i, d in enumerate(deliveries):
            key = (point, size, arm, d)
            up = med(key, lambda r: float(r["learner_up_utilisation"]))
            down = med(key, lambda r: float(r["learner_down_utilisation"]))
            model = med(key, lambda r: float(r["learner_down_model_bytes"]) / max(1.0, float(r["learner_down_bytes"])))
            color = DELIVERY_STYLE[d][0]
            ax.bar(i - 0.2, up, 0.38, color=color, alpha=0.45, edgecolor="k", lw=0.5)
            ax.bar(i + 0.2, down * model, 0.38, color=color, edgecolor="k", lw=0.5)
            ax.bar(i + 0.2, down * (1 - model), 0.38, bottom=down * model, color=color, hatch="//", alpha=0.6,
                   edgecolor="k", lw=0.5)
        ax.set_xticks(range(len(deliveries)))
        ax.set_xticklabels(deliveries, fontsize=8)
        ax.set_title(f"{size} workers, {point.split('-')[1]}", fontsize=9)
        ax.axhline(1.0, color="k", lw=0.6, ls=":")
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("learner port utilisation\n(left bar: up, gradients; right: down,\nsolid MODEL, hatched CREDIT)")
    fig.suptitle(f"Two clusters on one 10 GbE learner port ({arm}), median over seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(f"{img_dir}/sim-model-learner-port.png", dpi=100)
    plt.close(fig)

    # 2. AoM at the learners and the age of the workers' models, per arm and delivery.
    fig, axes = plt.subplots(1, 2 + len(arms) - 1, figsize=(4.5 * (len(arms) + 1), 4))
    x = range(len(points))
    for j, a in enumerate(arms):
        ax = axes[j]
        for i, d in enumerate(deliveries):
            vals = [med((p, n, a, d), lambda r: float(r["aom_mean_us"])) for p, n in points]
            ax.bar([k + (i - 1) * 0.27 for k in x], vals, 0.27, color=DELIVERY_STYLE[d][0], label=DELIVERY_STYLE[d][1])
        ax.set_title(f"AoM mean at the learners ({a})", fontsize=9)
        ax.set_ylabel("us")
    ax = axes[-1]
    for i, d in enumerate(d for d in deliveries if d != "none"):
        vals = [med((p, n, arm, d), lambda r: float(r["model_age_mean_us"]) / 1e3) for p, n in points]
        ax.bar([k + (i - 0.5) * 0.35 for k in x], vals, 0.35, color=DELIVERY_STYLE[d][0], label=DELIVERY_STYLE[d][1])
    ax.set_title(f"model age at the workers ({arm})", fontsize=9)
    ax.set_ylabel("ms")
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{n}\n{p.split('-')[1]}" for p, n in points], fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{img_dir}/sim-model-aom.png", dpi=100)
    plt.close(fig)

    # 3. Over time, the longest run at 1,024 workers, seed 1: both directions of the learner port.
    series_csv = summary_csv.replace("summary.csv", "series.csv")
    longest = points[-1]
    labels = {d: f"{longest[0]}/{longest[1]}/{arm}:{d}/s1" for d in ("unicast", "replicated")}
    data = defaultdict(lambda: ([], []))
    with open(series_csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["label"] in labels.values() and r["metric"] in ("learner_up_gbps", "learner_down_gbps", "model_age_us"):
                data[(r["label"], r["metric"])][0].append(float(r["t_ms"]))
                data[(r["label"], r["metric"])][1].append(float(r["value"]))
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for d, label in labels.items():
        color = DELIVERY_STYLE[d][0]
        for ax, metric in zip(axes, ("learner_up_gbps", "learner_down_gbps", "model_age_us")):
            t, v = data[(label, metric)]
            if metric == "model_age_us":
                v = [y / 1e3 for y in v]
            ax.plot(t, v, lw=0.7, color=color, label=d)
    axes[0].set_ylabel("up (gradients)\nGbit/s")
    axes[1].set_ylabel("down (MODEL + CREDIT)\nGbit/s")
    axes[2].set_ylabel("model age at\nworkers (ms)")
    axes[2].set_xlabel("simulated time (ms)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{longest[1]} workers, two clusters, one 10 GbE learner port ({arm}, seed 1)", fontsize=10)
    fig.tight_layout()
    fig.savefig(f"{img_dir}/sim-model-series-{longest[1]}.png", dpi=100)
    plt.close(fig)


def plot_tree_study(summary_csv, out_png):
    """run_study.py --tree: staleness and the fabric's MODEL drops against workers on leaf-spine, per
    MODEL delivery (shipped arm; medians over seeds, bars min..max); labels POINT/N/ARM:DELIVERY/sSEED."""
    groups = defaultdict(list)
    for r in read_rows(summary_csv):
        _point, workers, arm_delivery, _seed = r["label"].split("/")
        arm, delivery = arm_delivery.split(":")
        groups[(arm, delivery, int(workers))].append(r)
    arm = "shipped" if any(k[0] == "shipped" for k in groups) else sorted({k[0] for k in groups})[0]
    deliveries = [d for d in ("tree", "no-tree", "unicast") if any(k[1] == d for k in groups)]
    style = {"tree": ("tab:green", "o", "-"), "no-tree": ("tab:red", "s", "--"), "unicast": ("tab:blue", "^", ":")}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, key, ylabel in ((axes[0], "staleness_mean", "mean staleness (versions)"),
                            (axes[1], "fabric_return_drops", "MODEL/CREDIT dropped on the fabric's way down")):
        for d in deliveries:
            xs = sorted({k[2] for k in groups if k[0] == arm and k[1] == d})
            vals = [[float(r[key]) for r in groups[(arm, d, x)]] for x in xs]
            med = [_median(v) for v in vals]
            err = [[m - min(v) for m, v in zip(med, vals)], [max(v) - m for m, v in zip(med, vals)]]
            color, marker, line = style[d]
            ax.errorbar(xs, med, yerr=err, color=color, marker=marker, linestyle=line, capsize=3,
                        label={"tree": "replicated, multicast tree", "no-tree": "replicated at the learners' leaf only",
                               "unicast": "unicast"}[d])
        ax.set_xscale("log", base=2)
        ticks = sorted({k[2] for k in groups})
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.set_xlabel("workers (16 clusters, 8 leaves, 4 spines)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"shesha-sim leaf-spine, 100 GbE fabric, 10 GbE learner ports ({arm} arm, medians over seeds)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
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


def plot_compare(before_csv, after_csv, study, arms, out_png):
    """Medians over seeds along one sweep (STUDY/X/ARM/sSEED labels), before (dashed) and after."""
    metrics = (("aom_mean_us", "AoM mean (us)"), ("staleness_mean", "staleness (versions)"),
               ("workers_without_model", "workers without a model"), ("contributions_applied", "contributions applied"))

    def medians(path):
        cells = defaultdict(list)
        try:
            rows = read_rows(path)
        except OSError as e:
            sys.exit(f"plot_sim.py compare: cannot read {path}: {e.strerror}")
        for r in rows:
            parts = r["label"].split("/")
            if len(parts) != 4 or parts[0] != study or parts[2] not in arms:
                continue
            cells[(parts[2], float(parts[1]))].append(r)
        if not cells:
            sys.exit(f"plot_sim.py compare: {path} has no rows labelled {study}/X/ARM/sSEED for arms {','.join(arms)}")
        out = {}
        for (arm, x), rows in cells.items():
            out[(arm, x)] = {k: sorted(float(r[k]) for r in rows)[(len(rows) - 1) // 2] for k, _ in metrics}
        return out

    before, after = medians(before_csv), medians(after_csv)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    colours = ["tab:green", "tab:blue", "tab:red", "tab:purple"]
    for ax, (key, title) in zip(axes.flat, metrics):
        for i, arm in enumerate(arms):
            for data, style, when in ((before, "--", "before"), (after, "-", "after")):
                xs = sorted(x for a, x in data if a == arm)
                if xs:
                    ax.plot(xs, [data[(arm, x)][key] for x in xs], style, marker="o", color=colours[i % len(colours)],
                            label=f"{arm}, {when}")
        ax.set_xscale("log", base=2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(study.split("-")[0])
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{study}: {before_csv} (dashed) against {after_csv} (solid), medians over seeds", fontsize=9)
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
    elif len(argv) == 4 and argv[1] == "model":
        plot_model_study(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "tree":
        plot_tree_study(argv[2], argv[3])
    elif len(argv) == 7 and argv[1] == "compare":
        plot_compare(argv[2], argv[3], argv[4], argv[5].split(","), argv[6])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
