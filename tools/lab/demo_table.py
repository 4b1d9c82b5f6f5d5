#!/usr/bin/env python3
"""Side-by-side table of demo arms from the JSON files shesha-switch, shesha-gen and shesha-sink
wrote. usage: demo_table.py DIR ARM [ARM...]  (files DIR/ARM.switch.json, DIR/ARM.sink.json,
DIR/ARM-*.gen.json)"""
import glob
import json
import math
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def arm_metrics(d, arm):
    sw = load(os.path.join(d, f"{arm}.switch.json"))
    sink = load(os.path.join(d, f"{arm}.sink.json"))
    gens = [load(p) for p in sorted(glob.glob(os.path.join(d, f"{arm}-*.gen.json")))]
    sent = sum(g["totals"]["contributions_sent"] for g in gens)
    bottleneck = max(sw["ports"], key=lambda p: p["shaper_rate_bps"])
    q = bottleneck["queue"]
    tot = sink["totals"]
    clusters = sink["clusters"]

    def cmean(key, sub):
        vals = [c[key][sub] for c in clusters if c[key].get("count", 1)]
        return sum(vals) / len(vals) if vals else float("nan")

    def cmax(key, sub):
        vals = [c[key][sub] for c in clusters]
        return max(vals) if vals else float("nan")

    return {
        "gradient updates sent": sent,
        "updates delivered to the learner": tot["contributions"],
        "delivered fraction": tot["contributions"] / sent if sent else float("nan"),
        "packets through the bottleneck": bottleneck["tx_packets"],
        "tail drops at the bottleneck": q["dropped"],
        "mean queue depth (packets)": q["mean_depth"],
        "max queue depth (packets)": q["depth_max"],
        "mean sojourn (ms)": q["mean_sojourn_us"] / 1000.0,
        "merges in the switch": q["merged"],
        "bytes saved by merging (MB)": q["bytes_saved"] / 1e6,
        "updates per delivered packet": tot["merge_ratio"],
        "age of oldest update in packet, p50 (ms)": cmean("age_earliest_ms", "p50"),
        "age of oldest update in packet, p99 (ms)": cmax("age_earliest_ms", "p99"),
        "Age-of-Model, time-average (ms)": cmean("aom_active_ms", "mean"),
        "Age-of-Model, peak (ms)": cmax("aom_active_ms", "peak"),
        "congestion-marked packets": tot["ce_marked"],
        "wrong sums at the sink": tot["bad"],
    }


def fmt(v):
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float) and math.isnan(v):
        return "n/a"
    return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    d, arms = sys.argv[1], sys.argv[2:]
    try:
        rows = {arm: arm_metrics(d, arm) for arm in arms}
    except (OSError, KeyError, ValueError) as e:
        print(f"demo_table: cannot read results in {d}: {e}", file=sys.stderr)
        return 1
    names = list(rows[arms[0]].keys())
    width = max(len(n) for n in names) + 2
    header = f"{'':<{width}}" + "".join(f"{a:>16}" for a in arms)
    if len(arms) == 2:
        header += f"{arms[1] + '/' + arms[0]:>16}"
    print(header)
    print("-" * len(header))
    for n in names:
        line = f"{n:<{width}}" + "".join(f"{fmt(rows[a][n]):>16}" for a in arms)
        if len(arms) == 2:
            a, b = rows[arms[0]][n], rows[arms[1]][n]
            ratio = (b / a) if isinstance(a, (int, float)) and a not in (0, 0.0) and not math.isnan(a) else float("nan")
            line += f"{fmt(ratio) if not math.isnan(ratio) else '':>16}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
