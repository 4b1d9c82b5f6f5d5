#!/usr/bin/python3
"""Compares arms of a shesha-sim study with a reference arm, point by point, on seed medians.

  tools/sim/compare_arms.py SUMMARY_CSV REFERENCE_ARM [ARM ...]

SUMMARY_CSV is run_study.py's summary.csv from a run with --seeds (labels STUDY/X/ARM/sSEED).
For every point (STUDY/X) and metric (AoM mean, contributions dropped %, staleness mean; lower is
better) it takes the median over seeds of each arm and says whether the arm is at least as good as
the reference: its median is at most the reference's, or inside the reference's own spread over
the seeds (min..max), which this page calls "within noise". Prints a markdown table per arm and a
count of the points where the arm is worse than the reference beyond noise.
"""
import csv
import statistics
import sys

METRICS = (("AoM mean (us)", "aom_mean_us"), ("dropped %", None), ("staleness", "staleness_mean"))


def metric(row, key):
    if key is None:
        sent = float(row["contributions_sent"]) or 1.0
        return 100.0 * float(row["contributions_dropped"]) / sent
    return float(row[key])


def load(path):
    """{point: {arm: {metric_name: [values over seeds]}}}, points in file order."""
    points = {}
    try:
        with open(path) as f:
            for line, row in enumerate(csv.DictReader(f), start=2):
                parts = (row.get("label") or "").split("/")
                if len(parts) != 4 or not parts[3].startswith("s"):
                    sys.exit(f"compare_arms: {path}:{line}: label {row.get('label')!r} is not STUDY/X/ARM/sSEED "
                             "(run run_study.py with --seeds)")
                point, arm = f"{parts[0]}/{parts[1]}", parts[2]
                cell = points.setdefault(point, {}).setdefault(arm, {name: [] for name, _ in METRICS})
                for name, key in METRICS:
                    try:
                        cell[name].append(metric(row, key))
                    except (KeyError, TypeError, ValueError):
                        sys.exit(f"compare_arms: {path}:{line}: no number for {key or 'contributions_dropped/sent'}")
    except OSError as e:
        sys.exit(f"compare_arms: cannot read {path}: {e.strerror}")
    return points


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    points = load(argv[1])
    ref = argv[2]
    arms = argv[3:] or sorted({a for p in points.values() for a in p if a != ref})
    for arm in arms:
        worse = {name: [] for name, _ in METRICS}
        print(f"\n### `{arm}` against `{ref}` (median over seeds; ref min..max)\n")
        print("| point | " + " | ".join(f"{name}: {arm} / {ref}" for name, _ in METRICS) + " |")
        print("|---|" + "---|" * len(METRICS))
        for point, by_arm in points.items():
            if arm not in by_arm or ref not in by_arm:
                continue
            cells = []
            for name, _ in METRICS:
                a, r = by_arm[arm][name], by_arm[ref][name]
                ma, mr = statistics.median(a), statistics.median(r)
                verdict = "" if ma <= mr else (" (noise)" if ma <= max(r) else " **worse**")
                if verdict == " **worse**":
                    worse[name].append(point)
                cells.append(f"{ma:.3g} / {mr:.3g} [{min(r):.3g}..{max(r):.3g}]{verdict}")
            print(f"| {point} | " + " | ".join(cells) + " |")
        n = sum(1 for p in points.values() if arm in p and ref in p)
        print()
        for name, _ in METRICS:
            print(f"- {name}: `{arm}` worse than `{ref}` beyond noise at {len(worse[name])} of {n} points"
                  + (f" ({', '.join(worse[name])})" if worse[name] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
