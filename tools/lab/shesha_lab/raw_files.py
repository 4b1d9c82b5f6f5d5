"""Reading a run's raw files (raw/<arm>/seed-<s>/): learner metrics, worker and stand-in JSON,
shesha-sink progress lines, queue telemetry. Missing or unreadable files read as empty."""
import csv
import glob
import json
import math
import os


def to_float(value):
    """value as a finite float, else None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def read_csv_rows(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


LEARNER_COLUMNS = {  # our name -> accepted column names in the learner's progress CSV
    "t_s": ["wall_seconds", "t_s", "wall_s"],
    "env_steps": ["env_steps", "steps"],
    "return": ["eval_mean_return", "return", "mean_return"],
    "aom_ms": ["aom_now_ms", "aom_ms"],
    "aom_mean_ms": ["aom_mean_ms"],
    "aom_peak_ms": ["aom_peak_ms"],
    "staleness_mean": ["staleness_mean"],
    "contributions": ["contributions"],
    "version": ["version", "model_version"],
    "updates": ["updates", "updates_applied"],
}


def read_learner_series(metrics_dir):
    """The learner's progress rows with normalised column names; see docs/lab.md."""
    files = sorted(glob.glob(os.path.join(metrics_dir, "progress*.csv"))
                   + glob.glob(os.path.join(metrics_dir, "learner*.csv")))
    rows = []
    for path in files[:1]:
        for raw in read_csv_rows(path):
            row = {}
            for ours, names in LEARNER_COLUMNS.items():
                for name in names:
                    if name in raw and raw[name] not in ("", None):
                        row[ours] = to_float(raw[name])
                        break
            rows.append(row)
    return rows


def latest_learner_row(run_dir, cid, suffix=""):
    """The last row of the learner's progress metrics (see read_learner_series), or {}; suffix: a
    restarted learner's (.r1, its own clock)."""
    rows = read_learner_series(os.path.join(run_dir, f"learner-c{cid}{suffix}"))
    return rows[-1] if rows else {}


def read_staleness(metrics_dir):
    """Staleness histogram {versions behind: gradients}: learner.json's staleness.histogram (the
    last bucket counts everything at or beyond its index), else a staleness*.csv."""
    summary = load_json(os.path.join(metrics_dir, "learner.json")) or {}
    histogram = (summary.get("staleness") or {}).get("histogram")
    if histogram:
        return {"hist": {i: n for i, n in enumerate(histogram) if n}}
    for path in sorted(glob.glob(os.path.join(metrics_dir, "staleness*.csv"))):
        rows = read_csv_rows(path)
        if not rows:
            continue
        columns = rows[0].keys()
        key = "staleness" if "staleness" in columns else next(iter(columns))
        if "count" in columns:  # histogram form: staleness,count
            return {"hist": {int(float(r[key])): int(float(r["count"])) for r in rows if to_float(r[key]) is not None}}
        counts = {}
        for value in (int(float(r[key])) for r in rows if to_float(r[key]) is not None):
            counts[value] = counts.get(value, 0) + 1
        return {"hist": counts}
    return {"hist": {}}


def read_aom_series(metrics_dir):
    """[(t_s, AoM ms)]: an aom*.csv if there is one, else the learner's progress rows."""
    for path in sorted(glob.glob(os.path.join(metrics_dir, "aom*.csv"))):
        rows = read_csv_rows(path)
        if rows:
            series = []
            for row in rows:
                t = to_float(row.get("t_s", row.get("wall_s")))
                aom = to_float(row.get("aom_ms", row.get("aom")))
                if t is not None and aom is not None:
                    series.append((t, aom))
            return series
    return [(r["t_s"], r["aom_ms"]) for r in read_learner_series(metrics_dir) if r.get("t_s") is not None
            and r.get("aom_ms") is not None]


def sink_progress(path):
    """shesha-sink --progress lines -> [(t_s, contributions)]."""
    series = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("shesha-sink: t="):
                    fields = dict(pair.split("=", 1) for pair in line.split()[1:] if "=" in pair)
                    series.append((float(fields["t"].rstrip("s")), int(fields["contributions"])))
    except (OSError, ValueError, KeyError):
        pass
    return series


def queue_series(path):
    """queues-*.csv -> {port: [(t, depth, sojourn_ms over the interval, drops cumulative, merged)]}"""
    per_port = {}
    for row in read_csv_rows(path):
        per_port.setdefault(row["port"], []).append(row)
    out = {}
    for port, rows in per_port.items():
        series = []
        prev = None
        for row in rows:
            t, depth = to_float(row["t_s"]), to_float(row["depth"])
            sojourn_ms = None
            if prev is not None:
                dequeued_now = (to_float(row["dequeued"]) or 0) - (to_float(prev["dequeued"]) or 0)
                mean_ns, mean_prev = to_float(row["mean_sojourn_ns"]), to_float(prev["mean_sojourn_ns"])
                dequeued, dequeued_prev = to_float(row["dequeued"]), to_float(prev["dequeued"])
                if dequeued_now > 0 and None not in (mean_ns, mean_prev, dequeued, dequeued_prev):
                    # cumulative mean -> mean over this interval
                    sojourn_ms = (mean_ns * dequeued - mean_prev * dequeued_prev) / dequeued_now / 1e6
            series.append((t, depth, sojourn_ms, to_float(row["dropped"]), to_float(row["merged"])))
            prev = row
        out[port] = series
    return out


def worker_windows(run_dir, cid, workers):
    """Sending windows from shesha-worker's metrics JSON (window.samples: [s, window, in flight,
    pending]): {worker: [(t, window)]}, plus per-worker counters."""
    series_by_worker, counters = {}, {}
    for worker in range(workers):
        metrics = load_json(os.path.join(run_dir, f"worker-c{cid}-w{worker}.json")) or {}
        samples = (metrics.get("window") or {}).get("samples") or []
        series = [(x[0], x[1]) for x in samples if len(x) >= 2 and to_float(x[0]) is not None
                  and to_float(x[1]) is not None]
        if series:
            series_by_worker[str(worker)] = series
        counters[str(worker)] = {"credit": metrics.get("credit"), "chunks": metrics.get("chunks"),
                                 "updates": metrics.get("updates")}
        # Samples at which the sender had a full window (in flight >= window): waiting for credit.
        busy = [x for x in samples if len(x) >= 3 and to_float(x[2]) is not None and to_float(x[1])]
        if busy:
            counters[str(worker)]["credit_bound"] = sum(1 for x in busy if x[2] >= x[1]) / len(busy)
    return {"series": series_by_worker, "workers": counters}
