#!/usr/bin/python3
"""The shesha-sim scaling study (docs/simulation.md): runs a grid of scenarios, collects one
summary CSV, draws the plots into docs/img/ and prints the markdown tables.

  tools/sim/run_study.py BUILD_DIR [OUT_DIR] [IMG_DIR] [--arms a,b,...] [--seeds 1,2,...]
                         [--delivery none|unicast|replicated]
  tools/sim/run_study.py BUILD_DIR OUT_DIR IMG_DIR --model [--seeds 1,2,3]
  tools/sim/run_study.py BUILD_DIR OUT_DIR IMG_DIR --tree [--seeds 1,2,...,10]

--arms runs only those arms (no plots then); --seeds runs every point on each seed (labels get
a /sS suffix when more than one seed is given). --delivery: how the model reaches the workers
(model.delivery; default unicast, the simulator's default: MODEL and CREDIT on the links). The
studies in docs/simulation.md from before issue 25 were measured in one direction: pass
--delivery none to reproduce them.

--tree: the multicast-tree study (docs/benchmarks.md, "A multicast tree"): the leaf-spine points
(64..4,096 workers), arms merge and shipped, MODEL replicated with the tree (model.tree, the
default), replicated without it (only the learners' leaf copies) and unicast; a table of medians
(min..max) over the seeds and docs/img/sim-leafspine-model-tree.png (IMG_DIR).

--model: the issue-25 study (docs/simulation.md, "MODEL traffic at scale"): 256 and 1,024 workers
in two clusters sharing one 10 GbE learner port, merging alone and full Shesha, with MODEL left
out (none), unicast and replicated, 20 ms and 100 ms of generation; plots into IMG_DIR.

Every run is a few seconds at most; the whole grid takes about a minute or two on one core.
"""
import csv
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plot_sim  # noqa: E402

# fifo and merge are a plain ToR and a switch that only merges: neither fans out CREDIT_BATCHes
# (model.credit_batching=false; it matters only with --delivery replicated, where it is on by default).
ARMS = {
    "fifo": ["queue.aggregation=false", "queue.fair=false", "transport.window_control=false", "transport.switch_feedback=false",
             "model.credit_batching=false"],
    "merge": ["queue.aggregation=true", "queue.fair=false", "transport.window_control=false", "transport.switch_feedback=false",
              "model.credit_batching=false"],
    "fifo+window+fb": ["queue.aggregation=false", "queue.fair=false", "transport.window_control=true", "transport.switch_feedback=true"],
    "merge+window+fb": ["queue.aggregation=true", "queue.fair=false", "transport.window_control=true", "transport.switch_feedback=true"],
    # Per-cluster fair queues on every switch port (DRR in packets, docs/queue.md).
    "merge+drr": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=false",
                  "transport.switch_feedback=false"],
    "merge+drr+window+fb": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=true",
                            "transport.switch_feedback=true"],
    # Full Shesha with the window allowed below one chunk (pacing, w_min 1/16) and merge-aware cuts.
    "shesha-paced": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=true",
                     "transport.switch_feedback=true", "transport.w_min=0.0625", "transport.merge_aware=true"],
    # Full Shesha, merge-aware (issue 11 item 3): pacing allowed below one chunk where the queue does
    # not merge, but no window below four updates (32 chunks) while it merges; echo cuts scaled too.
    "shesha-ma": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=true",
                  "transport.switch_feedback=true", "transport.w_min=0.0625", "transport.merge_aware=true",
                  "transport.merge_floor=32"],
    # Full Shesha with bounded-lag fair queues (issue 11 item 3, docs/queue.md): one packet per
    # cluster per turn, shares within 32 contributions, so a merged head is not held for k quanta;
    # senders start at the merge floor (w_init 32) instead of below it.
    "shesha-lag": ["queue.aggregation=true", "queue.fair=true", "queue.fair_lag=32", "transport.window_control=true",
                   "transport.switch_feedback=true", "transport.w_min=0.0625", "transport.merge_aware=true",
                   "transport.merge_floor=32", "transport.w_init=32"],
    # Its two parts alone (ablation): the start at the floor, and the bounded-lag queues.
    "shesha-ma-wi32": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=true",
                       "transport.switch_feedback=true", "transport.w_min=0.0625", "transport.merge_aware=true",
                       "transport.merge_floor=32", "transport.w_init=32"],
    "shesha-ma-lag": ["queue.aggregation=true", "queue.fair=true", "queue.fair_lag=32", "transport.window_control=true",
                      "transport.switch_feedback=true", "transport.w_min=0.0625", "transport.merge_aware=true",
                      "transport.merge_floor=32"],
    "merge+lag": ["queue.aggregation=true", "queue.fair=true", "queue.fair_lag=32", "transport.window_control=false",
                  "transport.switch_feedback=false"],
    # The same sending control on FIFO (not per-cluster fair) switch ports.
    "shesha-ma-fifo": ["queue.aggregation=true", "queue.fair=false", "transport.window_control=true",
                       "transport.switch_feedback=true", "transport.w_min=0.0625", "transport.merge_aware=true",
                       "transport.merge_floor=32"],
}
# The shipped defaults: every setting as shesha-sim has it when absent (merging, queue.fair: auto =
# fair queues wherever two or more clusters aggregate, windows, FEEDBACK), as the switch and the
# workers have theirs. Issue 23 compares it with merging alone.
ARMS["shipped"] = []
# The shipped defaults with the senders' cumulative acknowledgement (docs/transport.md; off by default
# since it raised the rack's AoM).
ARMS["shipped+cumack"] = ["transport.cumulative_ack=true"]
# The shipped defaults with the senders keeping credit units that find nothing in flight
# (SenderConfig::bank_excess; docs/transport.md, "Banked credit").
ARMS["shipped+bank"] = ["transport.bank_excess=true"]
# A diagnostic of the credit leak: the oldest chunk in flight leaves flight after 250 us (or 1 ms)
# even while other credits arrive (SenderConfig::flight_expiry_ns; docs/queue.md).
ARMS["shipped+expiry"] = ["transport.flight_expiry_us=250"]
ARMS["shipped+expiry1ms"] = ["transport.flight_expiry_us=1000"]
# The leak repaid in units of the sender's acknowledged round trip (transport.flight_expiry_rtts,
# 2 by default since 2026-12-06, so the first arm equals "shipped"; docs/transport.md, "The other
# half: flight expiry").
ARMS["shipped+expiry2rtt"] = ["transport.flight_expiry_rtts=2"]
ARMS["shipped+expiry4rtt"] = ["transport.flight_expiry_rtts=4"]
# The shipped arm without its two start-up and leak repairs (docs/transport.md, "Slow start, and
# the expiry on by default"): without slow start, without flight expiry, and without both (the
# shipped arm before 2026-12-06, tenth stop).
ARMS["shipped-ss"] = ["transport.slow_start=false"]
ARMS["shipped-expiry"] = ["transport.flight_expiry_rtts=0"]
ARMS["shipped-ss-expiry"] = ["transport.slow_start=false", "transport.flight_expiry_rtts=0"]
# The shipped arm with the window's floor at one chunk, as shipped before 2026-12-06's thirteenth
# stop (transport.w_min 1 instead of 1/16: no pacing; docs/transport.md, "A standing queue at the
# floor"). In this study the two give the same figures at every point.
ARMS["shipped-nopace"] = ["transport.w_min=1"]
# The shipped defaults with bounded-lag fair queues instead of DRR (queue.fair_lag, docs/queue.md).
ARMS["shipped+lag"] = ["queue.fair=true", "queue.fair_lag=32"]
ARMS["shipped+lag+expiry"] = ["queue.fair=true", "queue.fair_lag=32", "transport.flight_expiry_us=250"]
# The learner's credit priority (learner.credit_priority, on by default: CREDIT with IP TOS 0x10,
# which the learner host's pfifo_fast send queue serves before MODEL; docs/transport.md) turned off,
# for the shipped arm and for merging alone: the learner host's send queue is then one FIFO, as
# in every study before 2026-12-05's credit priority.
ARMS["shipped-nocreditprio"] = ["model.credit_priority=false"]
ARMS["merge-nocreditprio"] = ARMS["merge"] + ["model.credit_priority=false"]
# CREDIT fan-out (learner.credit_batching, on by default with --delivery replicated): a learner's
# CREDITs for one chunk leave as one CREDIT_BATCH to its group, which the switch turns into one CREDIT
# per worker (docs/transport.md, "CREDIT fan-out"). The shipped arm without it (as before 2026-12-06's
# sixteenth stop) and, as an ablation, merging alone with it.
ARMS["shipped-cb"] = ["model.credit_batching=false"]
ARMS["merge+cb"] = ARMS["merge"][:-1] + ["model.credit_batching=true"]
# shesha-lag plus chunk following in the fair queues (docs/queue.md, "Chunk following"): after a
# merged head, the waiting packets of its chunk (newer versions) leave next within the cluster's
# queue. merge+lag+follow: the same queues without window control (ablation).
ARMS["shesha-follow"] = ARMS["shesha-lag"] + ["queue.chunk_follow=true"]
ARMS["merge+lag+follow"] = ARMS["merge+lag"] + ["queue.chunk_follow=true"]
# Version tolerance 4 at every switch (merges chunks up to 4 model versions apart), for merging
# alone and for full Shesha alike: fewer distinct packets per chunk while versions are in flight.
ARMS["merge-tol4"] = ARMS["merge"] + ["queue.version_tolerance=4"]
ARMS["shesha-lag-tol4"] = ARMS["shesha-lag"] + ["queue.version_tolerance=4"]

# Common workload: T_compute 1 ms (10% jitter), K = 8 chunks of 256 fp32 (1114 B frames), so one
# worker offers about 73 Mbit/s; 20 ms of generation then the drain.
BASE = ["duration_ms=20", "workload.compute_us=1000", "workload.chunks=8", "workload.chunk_elems=256",
        "links.host_gbps=100", "links.prop_ns=500", "queue.capacity_packets=512", "queue.mark_depth_packets=32"]


def studies():
    # 1. Workers: 4 clusters, each with its own learner port at 10 or 100 GbE; 16..4096 workers.
    for gbps in (10, 100):
        for workers in (16, 64, 256, 1024, 4096):
            yield (f"workers-tor-{gbps}g/{workers}",
                   ["topology.kind=tor", "workload.clusters=4", f"workload.workers_per_cluster={workers // 4}",
                    f"links.learner_gbps={gbps}"])
    # 2. Clusters: 32 workers each, all clusters share one 10 GbE learner-facing port.
    for clusters in (1, 2, 4, 8, 16, 32, 64):
        yield (f"clusters-shared-10g/{clusters}",
               ["topology.kind=tor", "topology.shared_bottleneck=true", f"workload.clusters={clusters}",
                "workload.workers_per_cluster=32", "links.learner_gbps=10"])
    # 3. Leaf-spine: 16 clusters over 8 leaves and 4 spines (100 GbE fabric), 10 GbE learner ports.
    for workers in (64, 256, 1024, 4096):
        yield (f"workers-leafspine-10g/{workers}",
               ["topology.kind=leaf_spine", "topology.leaves=8", "topology.spines=4", "workload.clusters=16",
                f"workload.workers_per_cluster={workers // 16}", "links.fabric_gbps=100", "links.learner_gbps=10"])


# The issue-25 study: deliveries x arms x sizes x durations, two clusters on one 10 GbE port.
MODEL_DELIVERIES = ("none", "unicast", "replicated")
MODEL_ARMS = ("merge", "shesha-follow")
MODEL_SIZES = (256, 1024)
MODEL_DURATIONS = (20, 100)


def model_points():
    for duration in MODEL_DURATIONS:
        for workers in MODEL_SIZES:
            yield (f"model-{duration}ms/{workers}",
                   [f"duration_ms={duration}", "topology.kind=tor", "topology.shared_bottleneck=true",
                    "workload.clusters=2", f"workload.workers_per_cluster={workers // 2}", "links.learner_gbps=10"])


def run_model_study(sim, out, img, seeds):
    summary = os.path.join(out, "summary.csv")
    t0 = time.time()
    n = 0
    for label, args in model_points():
        for seed in seeds:
            for arm in MODEL_ARMS:
                for delivery in MODEL_DELIVERIES:
                    tag = f"{label}/{arm}:{delivery}/s{seed}"
                    cmd = [sim, "-q", "--append", "-o", out, "-l", tag, "--set", f"seed={seed}",
                           "--set", f"model.delivery={delivery}"]
                    for a in BASE + args + ARMS[arm]:
                        cmd += ["--set", a]
                    subprocess.run(cmd, check=True)
                    n += 1
        print(f"  {label}: done ({n} runs, {time.time() - t0:.0f} s)", flush=True)
    plot_sim.plot_model_study(summary, img)
    print_model_tables(summary)
    return 0


# The --tree study: how MODEL reaches the workers on leaf-spine.
TREE_DELIVERIES = {"tree": ["model.delivery=replicated"],
                   "no-tree": ["model.delivery=replicated", "model.tree=false"],
                   "unicast": ["model.delivery=unicast"]}
TREE_ARMS = ("merge", "shipped")


def run_tree_study(sim, out, img, seeds):
    summary = os.path.join(out, "summary.csv")
    t0 = time.time()
    n = 0
    for label, args in studies():
        if not label.startswith("workers-leafspine"):
            continue
        for seed in seeds:
            for arm in TREE_ARMS:
                for delivery, delivery_args in TREE_DELIVERIES.items():
                    tag = f"{label}/{arm}:{delivery}/s{seed}"
                    cmd = [sim, "-q", "--append", "-o", out, "-l", tag, "--set", f"seed={seed}"]
                    for a in BASE + args + ARMS[arm] + delivery_args:
                        cmd += ["--set", a]
                    subprocess.run(cmd, check=True)
                    n += 1
        print(f"  {label}: done ({n} runs, {time.time() - t0:.0f} s)", flush=True)
    plot_sim.plot_tree_study(summary, os.path.join(img, "sim-leafspine-model-tree.png"))
    print_tree_table(summary)
    return 0


def print_tree_table(summary):
    """Per point, arm and delivery: medians (min..max) over the seeds."""
    groups = {}
    for r in csv.DictReader(open(summary)):
        point, workers, arm_delivery, _seed = r["label"].split("/")
        groups.setdefault((int(workers), arm_delivery), []).append(r)
    cols = [("AoM us", "aom_mean_us", 1), ("staleness", "staleness_mean", 3),
            ("fabric_return drops", "fabric_return_drops", 0), ("versions adopted", "versions_adopted", 0),
            ("MODEL delivery us", "model_delivery_mean_us", 0), ("contributions applied", "contributions_applied", 0)]
    print("| workers | arm:MODEL | " + " | ".join(c[0] for c in cols) + " |")
    print("|---:|---|" + "---:|" * len(cols))
    for (workers, arm_delivery), rs in sorted(groups.items()):
        cells = []
        for _name, key, dec in cols:
            v = sorted(float(r[key]) for r in rs)
            m = _median(v)
            cells.append(f"{m:,.{dec}f}" + (f" ({v[0]:,.{dec}f}..{v[-1]:,.{dec}f})" if v[0] != v[-1] else ""))
        print(f"| {workers:,} | {arm_delivery} | " + " | ".join(cells) + " |")


def _median(xs):
    xs = sorted(xs)
    k = len(xs)
    return (xs[(k - 1) // 2] + xs[k // 2]) / 2


def print_model_tables(summary):
    """Per point, arm and delivery: medians (min..max) over the seeds."""
    rows = list(csv.DictReader(open(summary)))
    groups = {}
    for r in rows:
        point, arm_delivery, _seed = r["label"].rsplit("/", 2)
        groups.setdefault((point, arm_delivery), []).append(r)

    def cell(rs, f, fmt):
        xs = [f(r) for r in rs]
        return f"{fmt.format(_median(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"

    def pct(r):
        return 100 * float(r["contributions_dropped"]) / max(1.0, float(r["contributions_sent"]))
    cols = [
        ("AoM mean (us)", lambda r: float(r["aom_mean_us"]), "{:.1f}"),
        ("dropped %", pct, "{:.1f}"),
        ("staleness mean", lambda r: float(r["staleness_mean"]), "{:.2f}"),
        ("up util", lambda r: float(r["learner_up_utilisation"]), "{:.3f}"),
        ("down util", lambda r: float(r["learner_down_utilisation"]), "{:.3f}"),
        ("down MODEL MB", lambda r: float(r["learner_down_model_bytes"]) / 1e6, "{:.1f}"),
        ("down CREDIT MB", lambda r: float(r["learner_down_credit_bytes"]) / 1e6, "{:.1f}"),
        ("lost at learner: MODEL / CREDIT", None, None),
        ("publish to adoption mean (us)", lambda r: float(r["model_delivery_mean_us"]), "{:.0f}"),
        ("model age at workers (us)", lambda r: float(r["model_age_mean_us"]), "{:.0f}"),
        ("workers without a model", lambda r: float(r["workers_without_model"]), "{:.0f}"),
    ]
    print("| point | arm : delivery | " + " | ".join(c[0] for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for (point, arm_delivery), rs in groups.items():
        cells = []
        for name, f, fmt in cols:
            if f is None:
                cells.append(f"{_median([float(r['learner_send_model_drops']) for r in rs]):.0f} / "
                             f"{_median([float(r['learner_send_credit_drops']) for r in rs]):.0f}")
            else:
                cells.append(cell(rs, f, fmt))
        print(f"| {point} | {arm_delivery} | " + " | ".join(cells) + " |")
    # MODEL chunks per published version out of the learner port, publishes and rebroadcasts only.
    print("\n| point | arm | unicast: publish chunks per version | replicated: per version | ratio | "
          "replicated: all MODEL bytes / unicast's |")
    print("|---|---|---|---|---|---|")
    by = {}
    for (point, arm_delivery), rs in groups.items():
        arm, delivery = arm_delivery.split(":")
        by[(point, arm, delivery)] = rs
    for (point, arm, delivery), rs in by.items():
        if delivery != "unicast" or (point, arm, "replicated") not in by:
            continue
        rep = by[(point, arm, "replicated")]

        def per_version(r):
            sent = float(r["model_unicast_chunks"]) - float(r["model_answer_chunks"]) + float(r["model_group_chunks"])
            return sent / max(1.0, float(r["versions_published"]))
        u = _median([per_version(r) for r in rs])
        g = _median([per_version(r) for r in rep])
        ratio = _median([float(a["learner_down_model_bytes"]) / max(1.0, float(b["learner_down_model_bytes"]))
                         for a, b in zip(rep, rs)])
        print(f"| {point} | {arm} | {u:.0f} | {g:.0f} | 1/{u / g:.0f} | {ratio:.3f} |")


def main(argv):
    arms, seeds = ARMS, [1]
    delivery = "unicast"
    model_study = tree_study = False
    args = []
    it = iter(argv)
    for a in it:
        if a == "--arms":
            names = next(it).split(",")
            unknown = [n for n in names if n not in ARMS]
            if unknown:
                print(f"unknown arm(s) {unknown}; known: {list(ARMS)}", file=sys.stderr)
                return 2
            arms = {n: ARMS[n] for n in names}
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a == "--seeds":
            seeds = [int(x) for x in next(it).split(",")]
        elif a == "--delivery":
            delivery = next(it)
            if delivery not in MODEL_DELIVERIES:
                print(f"--delivery: expected one of {MODEL_DELIVERIES}", file=sys.stderr)
                return 2
        elif a == "--model":
            model_study = True
        elif a == "--tree":
            tree_study = True
        else:
            args.append(a)
    argv = args
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = argv[1]
    out = argv[2] if len(argv) > 2 else os.path.join(build, "sim-study")
    img = argv[3] if len(argv) > 3 else os.path.join(HERE, "..", "..", "docs", "img")
    sim = os.path.join(build, "tools", "sim", "shesha-sim")
    os.makedirs(out, exist_ok=True)
    os.makedirs(img, exist_ok=True)
    summary = os.path.join(out, "summary.csv")
    for name in ("summary.csv", "clusters.csv", "series.csv"):
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
    if model_study:
        return run_model_study(sim, out, img, seeds if len(seeds) > 1 else [1, 2, 3])
    if tree_study:
        return run_tree_study(sim, out, img, seeds if len(seeds) > 1 else [1, 2, 3])
    t0 = time.time()
    for label, args in studies():
        for seed in seeds:
            for arm, arm_args in arms.items():
                tag = f"{label}/{arm}" + (f"/s{seed}" if len(seeds) > 1 else "")
                cmd = [sim, "-q", "--append", "-o", out, "-l", tag, "--set", f"seed={seed}",
                       "--set", f"model.delivery={delivery}"]
                for a in BASE + args + arm_args:
                    cmd += ["--set", a]
                subprocess.run(cmd, check=True)
    wall = time.time() - t0
    if arms is not ARMS or len(seeds) > 1:
        print(f"{len(seeds) * len(arms)} runs per point in {wall:.1f} s wall; summary in {summary}")
        return 0
    plot_sim.plot_study(summary, img)
    # One time series for the docs: 1024 workers, 4 clusters, 10 GbE, FIFO vs merge with window.
    for arm in ("fifo+window+fb", "merge+window+fb"):
        plot_sim.plot_series(os.path.join(out, "series.csv"), os.path.join(img, f"sim-series-{arm.replace('+', '-')}.png"),
                             label=f"workers-tor-10g/1024/{arm}")
    print_tables(summary, wall)
    print_condensed(summary)
    return 0


def print_condensed(summary):
    """Per study: one row per x, for each arm 'AoM mean us / AoM peak us / dropped % / MB saved'."""
    rows = list(csv.DictReader(open(summary)))
    studies = {}
    for r in rows:
        study, x, arm = r["label"].split("/")
        studies.setdefault(study, {}).setdefault(int(x), {})[arm] = r
    for study, by_x in studies.items():
        print(f"\n#### {study}\n")
        print("| x | " + " | ".join(ARMS) + " |")
        print("|---:|" + "---|" * len(ARMS))
        for x in sorted(by_x):
            cells = []
            for arm in ARMS:
                r = by_x[x][arm]
                sent = float(r["contributions_sent"]) or 1.0
                cells.append(f"{float(r['aom_mean_us']):.0f} / {float(r['aom_peak_us']):.0f} / "
                             f"{100 * float(r['contributions_dropped']) / sent:.1f} / {float(r['bytes_saved']) / 1e6:.1f}")
            print(f"| {x} | " + " | ".join(cells) + " |")


def print_tables(summary, wall):
    rows = list(csv.DictReader(open(summary)))
    print(f"{len(rows)} runs in {wall:.1f} s wall\n")
    cols = [("study/x/arm", None), ("AoM mean us", "aom_mean_us"), ("AoM peak us", "aom_peak_us"),
            ("stale", "staleness_mean"), ("port depth", "learner_port_depth_mean"),
            ("sojourn us", "learner_port_sojourn_mean_us"), ("merges", "merges"), ("MB saved", None),
            ("dropped %", None), ("Jain", "jain_fairness"), ("Mhops/s", None)]
    print("| " + " | ".join(c[0] for c in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        sent = float(r["contributions_sent"]) or 1.0
        cells = [r["label"]]
        for name, key in cols[1:]:
            if name == "MB saved":
                cells.append(f"{float(r['bytes_saved']) / 1e6:.1f}")
            elif name == "dropped %":
                cells.append(f"{100 * float(r['contributions_dropped']) / sent:.1f}")
            elif name == "Mhops/s":
                cells.append(f"{float(r['packets_per_wall_s']) / 1e6:.2f}")
            elif key in ("merges",):
                cells.append(r[key])
            else:
                cells.append(f"{float(r[key]):.2f}" if float(r[key]) < 100 else f"{float(r[key]):.0f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
