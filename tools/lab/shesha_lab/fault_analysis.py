"""Numbers about a run's faults, from its raw files only (faults.json, counters.jsonl, the learners'
metrics): when each fault happened, the contributions lost in its window, the time until the
learner applied updates at its earlier rate again, and the counters that explain the losses.

Clocks. Faults and counter samples are on the run's clock (seconds since the learners and workers
were started). A learner's own clock (its progress rows, its time to target) starts once it has
initialised, a second or more later; its offset on the run's clock is measured from its
learner.json: the file's modification time on the run's clock minus the wall_seconds it holds."""
import json
import os
import statistics

from .raw_files import load_json, read_learner_series

# The learner is back when it applies updates at this fraction of its rate before the fault.
RECOVERED_FRACTION = 0.8
# Its rate before the fault: over this long before it (at least MIN_RATE_SPAN_S of samples).
EARLIER_RATE_S = 5.0
MIN_RATE_SPAN_S = 1.5


def fault_log(run_dir):
    """faults.json of a run, or None when the run had no faults."""
    return load_json(os.path.join(run_dir, "faults.json"))


def read_counters(run_dir):
    """counters.jsonl: the runner's samples of the processes' counters, in time order."""
    records = []
    try:
        with open(os.path.join(run_dir, "counters.jsonl")) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return records


def counter_points(records, section, name, key):
    """One counter of one process over the samples: [(t, value, segment)] in time order, t when the
    process wrote it (else when it was sampled), repeats of one write removed. A new segment starts
    where the process's incarnation changes or the value goes down (a restarted process counts from
    0). Where a sample tells how long its process had been counting (wall_seconds), its segment
    starts with a 0 at that time."""
    points, segment, last = [], 0, None
    for record in records:
        entry = (record.get(section) or {}).get(name)
        if not entry or entry.get(key) is None:
            continue
        t = entry.get("t_written")
        t = record["t"] if t is None else t
        value, incarnation = entry[key], entry.get("incarnation", 0)
        if last is not None:
            if (t, value) == (last[0], last[1]):
                continue
            if incarnation != last[2] or value < last[1]:
                segment += 1
        if (last is None or segment != last[3]) and entry.get("wall_seconds") is not None \
                and entry.get("t_written") is not None and entry["wall_seconds"] > 0:
            points.append((t - entry["wall_seconds"], 0, segment))
        points.append((t, value, segment))
        last = (t, value, incarnation, segment)
    points.sort(key=lambda p: (p[2], p[0]))
    return points


def _value_at(segment_points, t):
    """A segment's counter at time t: 0 before its first sample (the process had not counted yet),
    linear between samples, its last value after the last one."""
    if t < segment_points[0][0]:
        return 0
    for (t0, v0, _), (t1, v1, _) in zip(segment_points, segment_points[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return segment_points[-1][1]


def increase(points, t0, t1):
    """What the counter added between t0 and t1, over every segment (interpolated at the edges)."""
    total = 0.0
    for segment in sorted({p[2] for p in points}):
        mine = [p for p in points if p[2] == segment]
        total += max(0.0, _value_at(mine, t1) - _value_at(mine, t0))
    return total


def window_counters(records, t0, t1, worker_hosts, learner_ids):
    """Counter increases over [t0, t1] for the given workers and learners, all impairers and all
    switch queues; lost = sent - applied."""
    def total(section, names, key):
        """None when no process of the section ever reported the counter (e.g. stand-ins)."""
        series = [counter_points(records, section, name, key) for name in names]
        if not any(series):
            return None
        return round(sum(increase(points, t0, t1) for points in series if points))
    learners = [str(c) for c in learner_ids]
    out = {"sent": total("workers", worker_hosts, "contributions_sent"),
           "applied": total("learners", learners, "contributions"),
           "presumed_lost": total("workers", worker_hosts, "presumed_lost"),
           "credit_timeouts": total("workers", worker_hosts, "credit_timeouts"),
           "send_errors": total("workers", worker_hosts, "send_errors"),
           "rejected": total("learners", learners, "rejected"),
           "duplicates": total("learners", learners, "duplicates"),
           "workers_expired": total("learners", learners, "workers_expired")}
    impairers = sorted({name for r in records for name in (r.get("impair") or {})})
    for key in ("dropped", "duplicated", "reordered"):
        out[f"link_{key}"] = total("impair", impairers, key)
    ports = sorted({name for r in records for name in (r.get("queues") or {})})
    out["queue_dropped"] = total("queues", ports, "dropped")
    out["lost"] = out["sent"] - out["applied"] if None not in (out["sent"], out["applied"]) else None
    return out


def learner_clock_offsets(records, cid):
    """{incarnation: where the learner's own clock started on the run's clock} from its samples."""
    offsets = {}
    for record in records:
        entry = (record.get("learners") or {}).get(str(cid))
        if entry and entry.get("t_written") is not None and entry.get("wall_seconds") is not None:
            offsets.setdefault(entry.get("incarnation", 0), []).append(entry["t_written"] - entry["wall_seconds"])
    return {k: statistics.median(v) for k, v in offsets.items()}


def learner_incarnations(run_dir, cid, records=None):
    """The learner's metrics dirs in order with each one's clock offset from the first incarnation's
    clock: [(dir, offset_s, incarnation)]; the first is the original (offset 0)."""
    records = read_counters(run_dir) if records is None else records
    offsets = learner_clock_offsets(records, cid)
    out = [(os.path.join(run_dir, f"learner-c{cid}"), 0.0, 0)]
    for action in (fault_log(run_dir) or {}).get("actions", []):
        if action.get("action") == "learner_start" and str(action.get("cluster")) == str(cid) \
                and "metrics_dir" in action:
            n = int(action["incarnation"])
            # Without samples: its process start (its clock starts a little later).
            start = offsets.get(n, float(action["offset_s"]))
            out.append((os.path.join(run_dir, action["metrics_dir"]), start - offsets.get(0, 0.0), n))
    return out


def merged_learner_series(run_dir, cid):
    """The learner's progress rows over every incarnation on the first incarnation's clock, each row
    with its incarnation; the time to target from the first learner.json that reached it (same
    clock) and its env steps."""
    rows, target_s, target_steps = [], None, None
    for metrics_dir, offset, incarnation in learner_incarnations(run_dir, cid):
        for row in read_learner_series(metrics_dir):
            row = dict(row, incarnation=incarnation)
            if row.get("t_s") is not None:
                row["t_s"] += offset
            rows.append(row)
        target = (load_json(os.path.join(metrics_dir, "learner.json")) or {}).get("target") or {}
        if target_s is None and target.get("reached") and target.get("seconds") is not None:
            target_s, target_steps = target["seconds"] + offset, target.get("env_steps")
    return rows, target_s, target_steps


def recovery(points, t_fault, t_end):
    """(seconds from t_fault until the learner applied contributions at RECOVERED_FRACTION of its
    rate before the fault again, or None; that earlier rate per second, or None; why not, or None).
    points: the learner's contributions counter (counter_points); rates between consecutive samples
    of one segment, counted from t_end (the fault's end) on."""
    if not points:
        return None, None, "no learner counters (stand-ins)"
    before = [p for p in points if t_fault - EARLIER_RATE_S <= p[0] <= t_fault]
    if before:
        before = [p for p in before if p[2] == before[-1][2]]
    if len(before) < 2 or before[-1][0] - before[0][0] < MIN_RATE_SPAN_S:
        return None, None, "too early: no rate before the fault"
    earlier = (before[-1][1] - before[0][1]) / (before[-1][0] - before[0][0])
    if earlier <= 0:
        return None, earlier, "no updates applied before the fault"
    for a, b in zip(points, points[1:]):
        if a[0] < t_end or a[2] != b[2] or b[0] <= a[0]:
            continue
        if (b[1] - a[1]) / (b[0] - a[0]) >= RECOVERED_FRACTION * earlier:
            return b[0] - t_fault, earlier, None
    return None, earlier, "not back at its earlier rate before the learner stopped"


def affected(event, scenario):
    """(worker hosts, cluster ids) an event touches."""
    clusters = scenario["clusters"]
    workers = {c["id"]: [f"c{c['id']}-w{w}" for w in range(c["workers"])] for c in clusters}
    if event["kind"] in ("worker_kill", "learner_restart"):
        return workers[event["cluster"]], [event["cluster"]]
    if event["kind"] == "link":
        hosts = event.get("_hosts", [])
        ids = sorted({c["id"] for c in clusters for h in hosts
                      if h.startswith(f"c{c['id']}-") or h == "learners"})
        return [h for c in ids for h in workers[c]], ids
    return [h for c in clusters for h in workers[c["id"]]], [c["id"] for c in clusters]


def event_times(log, index, run_end):
    """(start, end) of event index on the run's clock from the actions that ran: the first action's
    start and the last one's end; a link fault without until_s lasts to run_end, a worker killed
    for good ends at once. (None, None) if it never ran."""
    actions = [a for a in log.get("actions", []) if a.get("event") == index and "skipped" not in a]
    if not actions:
        return None, None
    start = actions[0]["t"]
    event = log["events"][index]
    if event["kind"] == "link" and not any(a["action"] == "impair_stop" for a in actions):
        return start, run_end
    if event["kind"] == "worker_kill" and not any(a["action"] == "worker_start" for a in actions):
        return start, start
    return start, actions[-1]["t_done"]


def analyse_faults(run_dir, scenario, run_end):
    """Per event of the run: its times, per affected cluster the recovery, and the counters over its
    window [start, end + settle]; None for a run without faults."""
    log = fault_log(run_dir)
    if not log:
        return None
    records = read_counters(run_dir)
    settle = log.get("settle_s", 2.0)
    out = []
    for index, event in enumerate(log["events"]):
        start, end = event_times(log, index, run_end)
        entry = {"index": index, "kind": event["kind"], "start_s": start, "end_s": end}
        if start is None:
            entry["skipped"] = next((a.get("skipped") for a in log.get("actions", []) if a.get("event") == index),
                                    "not reached within the run")
            out.append(entry)
            continue
        hosts, ids = affected(event, scenario)
        entry["counters"] = window_counters(records, start, min(end + settle, run_end), hosts, ids)
        entry["whole_run"] = event["kind"] == "link" and start <= 0.5 and end >= run_end
        entry["clusters"] = {}
        for cid in ids:
            if entry["whole_run"]:
                entry["clusters"][str(cid)] = {"recovery_s": None, "why": "the whole run"}
                continue
            seconds, earlier, why = recovery(counter_points(records, "learners", str(cid), "contributions"),
                                             start, end)
            entry["clusters"][str(cid)] = {"recovery_s": seconds, "earlier_rate": earlier, "why": why}
        out.append(entry)
    return out


def fault_span(event, duration):
    """(start, end, short label) of an event as scheduled, on the run's clock; start None for a link
    fault that lasts the whole run."""
    kind = event["kind"]
    if kind == "switch_restart":
        return event["at_s"], event["at_s"] + event["down_s"], f"switch {event['switch']} down"
    if kind == "learner_restart":
        return event["at_s"], event["at_s"] + event["down_s"], f"learner c{event['cluster']} down"
    if kind == "worker_kill":
        end = event["restart_at_s"] or duration
        return event["at_s"], end, f"worker c{event['cluster']}-w{event['worker']} killed"
    hosts = ",".join(event["hosts"])
    if event["from_s"] <= 0 and not event["until_s"]:
        return None, None, f"link {hosts}"
    return event["from_s"], event["until_s"] or duration, f"link {hosts}"
