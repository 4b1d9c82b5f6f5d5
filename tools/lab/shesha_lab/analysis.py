"""Numbers from a report directory's raw files only (so `replot` can redo them): per arm and seed
(analyse_run), over seeds (arm_summary) and seed by seed against a baseline (seed_verdicts).
Time to target, Age-of-Model (AoM) time-averages and Jain's fairness index are defined here."""
import glob
import json
import os

from .fault_analysis import (analyse_faults, fault_log, learner_clock_offsets, merged_learner_series,
                             read_counters)
from .host_cpu import wait_per_slice_ms, wait_share
from .raw_files import (load_json, queue_series, read_aom_series, read_learner_series, read_staleness,
                        sink_progress, worker_windows)
from .topology import bottleneck_ports, topology


# ----------------------------------------------------------------------------------------------
# Small statistics.

def mean(xs):
    """Mean of the values that are not None; None if there are none."""
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def median_or_none(xs):
    """Median of xs where None means "never" (sorts last); None if the median itself is "never"."""
    if not xs:
        return None
    ordered = sorted(xs, key=lambda x: (x is None, x if x is not None else 0))
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    low, high = ordered[n // 2 - 1], ordered[n // 2]
    return None if low is None or high is None else (low + high) / 2


def ratio(numerator, denominator):
    return numerator / denominator if numerator is not None and denominator not in (None, 0) else None


def jain(xs):
    """Jain's fairness index (sum x)^2 / (n sum x^2) over the values that are not None; None if
    there are none or they sum to 0."""
    xs = [x for x in xs if x is not None]
    if not xs or sum(xs) <= 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def time_to_target(series, target):
    """The wall time of the first progress row whose evaluation return reaches target, else None."""
    for row in series:
        if row.get("return") is not None and row["return"] >= target and row.get("t_s") is not None:
            return row["t_s"]
    return None


def time_average(series):
    """Time-weighted mean of a step function given as (t, value) samples."""
    if not series:
        return None
    if len(series) == 1:
        return series[0][1]
    total = sum((t1 - t0) * v0 for (t0, v0), (t1, _) in zip(series, series[1:]))
    span = series[-1][0] - series[0][0]
    return total / span if span > 0 else mean([v for _, v in series])


# ----------------------------------------------------------------------------------------------
# One arm and seed.

def analyse_run(run_dir, scenario, kind, hosts, links):
    """One arm and seed: every number the report uses, from the raw files in run_dir."""
    result = {"clusters": {}, "switches": {}}
    meta = load_json(os.path.join(run_dir, "meta.json")) or {}
    result["wall_s"] = meta.get("wall_s")
    result["veth_drops"] = sum(meta["veth_drops"].values()) if meta.get("veth_drops") else None
    duration_s = meta.get("duration_s", scenario["duration_s"])
    for switch in scenario["switches"]:
        result["switches"][switch["name"]] = switch_result(run_dir, scenario, switch, hosts, links)
    for cluster in scenario["clusters"]:
        if kind == "drl":
            cluster_result = drl_cluster_result(run_dir, cluster, duration_s)
        else:
            cluster_result = synthetic_cluster_result(run_dir, scenario, cluster)
        add_host_cpu(cluster_result, meta.get("host_cpu"), cluster["id"])
        result["clusters"][str(cluster["id"])] = cluster_result
    add_shares_and_fairness(result, scenario, duration_s)
    add_bottleneck_totals(result, run_dir)
    result["faults"] = analyse_faults(run_dir, scenario, meta.get("wall_s") or duration_s)
    if result["faults"] is not None:
        # Where each learner's own clock (its curves, its time to target) started on the run's
        # clock of the faults, for marking them on the time plots.
        records = read_counters(run_dir)
        result["learner_clock_offset_s"] = {str(c["id"]): learner_clock_offsets(records, c["id"]).get(0)
                                            for c in scenario["clusters"]}
        telemetry = (fault_log(run_dir) or {}).get("telemetry_offset_s") or {}
        result["telemetry_offset_s"] = {s["name"]: telemetry.get(f"queues-{s['name']}.csv")
                                        for s in scenario["switches"]}
    return result


def add_host_cpu(cluster_result, host_cpu, cid):
    """The cluster's processes' scheduler statistics (host_cpu.py): the workers' share of runnable
    time spent waiting for a core, and the learner's mean wait before each timeslice."""
    if not host_cpu:
        return
    workers, learner = host_cpu.get(f"workers-c{cid}"), host_cpu.get(f"learner-c{cid}")
    cluster_result["host_cpu"] = {"workers": workers, "learner": learner}
    cluster_result["workers_cpu_wait_share"] = wait_share(workers)
    cluster_result["learner_wait_per_slice_ms"] = wait_per_slice_ms(learner)


def switch_result(run_dir, scenario, switch, hosts, links):
    """The switch's bottleneck ports: their counters from its stats JSON and the queue telemetry."""
    stats = load_json(os.path.join(run_dir, f"switch-{switch['name']}.json"))
    shaped = bottleneck_ports(scenario, switch, hosts, links)
    out = {"bottleneck_ports": shaped, "ports": {},
           "queue_series": queue_series(os.path.join(run_dir, f"queues-{switch['name']}.csv"))}
    if stats:
        out["forwarded_packets"] = sum(p["tx_packets"] for p in stats["ports"])
        out["feedback_sent"] = stats["feedback"]["sent"]
        for port in stats["ports"]:
            if port["name"] in shaped:
                queue = port["queue"]
                out["ports"][port["name"]] = {
                    "tx_packets": port["tx_packets"], "tx_bytes": port["tx_bytes"],
                    "tx_contributions": port["tx_contributions"], "dropped": queue["dropped"],
                    "merged": queue["merged"], "bytes_saved": queue["bytes_saved"], "marked": queue["marked"],
                    "mean_depth": queue["mean_depth"], "depth_max": queue["depth_max"],
                    "mean_sojourn_ms": queue["mean_sojourn_us"] / 1000.0,
                    "max_sojourn_ms": queue["max_sojourn_us"] / 1000.0,
                    "shaper_rate_bps": port["shaper_rate_bps"], "uptime_s": stats["uptime_s"],
                    "clusters": port.get("clusters", [])}
    return out


def drl_cluster_result(run_dir, cluster, duration_s):
    """A DRL cluster (shesha-learner and shesha-worker): its learning curve, time to target, AoM,
    staleness and the workers' windows."""
    cid = cluster["id"]
    out = {"target_return": cluster["target_return"], "env": cluster["env"]}
    metrics_dir = os.path.join(run_dir, f"learner-c{cid}")
    series = read_learner_series(metrics_dir)
    out["series"] = series
    out["time_to_target_s"] = time_to_target(series, cluster["target_return"])
    steps = [r.get("env_steps") for r in series if r.get("env_steps") is not None]
    out["env_steps"] = max(steps) if steps else 0
    returns = [r["return"] for r in series if r.get("return") is not None]
    out["final_return"] = returns[-1] if returns else None
    out["best_return"] = max(returns) if returns else None
    aom = read_aom_series(metrics_dir)
    out["aom_series"] = aom
    out["aom_mean_ms"] = time_average(aom)
    out["aom_peak_ms"] = max((a for _, a in aom), default=None)
    out["staleness"] = read_staleness(metrics_dir)["hist"]
    summary = load_json(os.path.join(metrics_dir, "learner.json")) or {}
    out["learner_summary"] = {k: summary.get(k) for k in ("version", "env_steps", "eval", "target", "chunks",
                                                           "aom", "staleness", "credits", "workers", "model")}
    chunks = summary.get("chunks") or {}
    # Share of the bottleneck: gradient updates the learner applied (merged chunks count k).
    out["bytes_received"] = chunks.get("contributions")
    out["contributions"] = chunks.get("contributions")
    out["merged_chunks"] = chunks.get("merged")
    # AoM time-average and peak while the workers ran: the learner's running figures at its
    # last evaluation within the workers' duration (after they stop, AoM only grows).
    active = [r for r in series if r.get("t_s") is not None and r["t_s"] <= duration_s
              and r.get("aom_mean_ms") is not None]
    learner_aom = summary.get("aom") or {}
    if active and active[-1]["aom_mean_ms"] > 0:
        out["aom_mean_ms"] = active[-1]["aom_mean_ms"]
        out["aom_peak_ms"] = active[-1].get("aom_peak_ms")
    elif learner_aom.get("samples"):  # the learner's own figures over its whole run
        out["aom_mean_ms"] = learner_aom.get("mean_ms")
        out["aom_peak_ms"] = learner_aom.get("peak_ms")
    out["aom_series"] = [(t, a) for t, a in aom if t <= duration_s]
    out["staleness_mean"] = (summary.get("staleness") or {}).get("mean")
    target = summary.get("target") or {}
    if target.get("reached"):
        out["time_to_target_s"] = target.get("seconds")
        out["env_steps_to_target"] = target.get("env_steps")
    if fault_log(run_dir):
        # A learner restarted by a fault: its incarnations' rows on the run's clock, and the target
        # as the incarnation that reached it saw it.
        out["series"], target_s, target_steps = merged_learner_series(run_dir, cid)
        out["time_to_target_s"] = target_s if target_s is not None else time_to_target(out["series"],
                                                                                         cluster["target_return"])
        if target_s is not None:
            out["env_steps_to_target"] = target_steps
    evaluation = summary.get("eval") or {}
    if out["final_return"] is None:
        out["final_return"] = evaluation.get("last_mean_return")
    out["env_steps"] = max(out["env_steps"] or 0, summary.get("env_steps") or 0)
    out["active_s"] = min(summary.get("wall_seconds") or duration_s, duration_s)
    out["windows"] = worker_windows(run_dir, cid, cluster["workers"])
    credit_bound = [w.get("credit_bound") for w in out["windows"]["workers"].values()
                    if w.get("credit_bound") is not None]
    out["credit_bound"] = mean(credit_bound) if credit_bound else None
    sent = [((w.get("chunks") or {}).get("contributions_sent")) for w in out["windows"]["workers"].values()]
    out["sent"] = sum(sent) if sent and all(x is not None for x in sent) else None
    return out


def synthetic_cluster_result(run_dir, scenario, cluster):
    """A stand-in cluster (shesha-sink and shesha-gen): deliveries, AoM from chunk arrivals; no
    returns, so no time to target."""
    cid = cluster["id"]
    out = {"target_return": cluster["target_return"], "env": cluster["env"]}
    sink = load_json(os.path.join(run_dir, f"sink-c{cid}.json")) or {}
    sink_cluster = next((x for x in sink.get("clusters", []) if x.get("cluster_id") == cid), None) or {}
    gens = [load_json(p) or {} for p in sorted(glob.glob(os.path.join(run_dir, f"gen-c{cid}-w*.json")))]
    out["sent"] = sum(g.get("totals", {}).get("contributions_sent", 0) for g in gens)
    out["contributions"] = sink_cluster.get("contributions", 0)
    out["bytes_received"] = sink_cluster.get("bytes", 0)
    out["aom_mean_ms"] = sink_cluster.get("aom_active_ms", {}).get("mean")
    out["aom_peak_ms"] = sink_cluster.get("aom_active_ms", {}).get("peak")
    out["merge_ratio"] = sink_cluster.get("merge_ratio")
    out["active_s"] = sink_cluster.get("active_s")
    out["bad_sums"] = sink_cluster.get("bad", 0)
    out["delivered_series"] = sink_progress(os.path.join(run_dir, f"sink-c{cid}.log"))
    out["env_steps"] = None
    out["time_to_target_s"] = None
    out["staleness"] = {}
    out["windows"] = {"configured": scenario["synthetic"]["window"],
                      "window_stalls": sum(g.get("window_stalls", 0) for g in gens),
                      "feedback_received": sum(g.get("totals", {}).get("feedback_received", 0) for g in gens)}
    return out


def cluster_workers(scenario, cid):
    """The number of workers of cluster cid (an int or its string)."""
    return next(c["workers"] for c in scenario["clusters"] if str(c["id"]) == str(cid))


def add_shares_and_fairness(result, scenario, duration_s):
    """Each cluster's share of the delivered updates and of the contended service at the
    bottleneck(s), and Jain's index over each (result["jain"]: the contended one if any)."""
    # Share of the bottleneck(s) and fairness across clusters: gradient updates delivered per
    # second while the cluster ran (a cluster that stops at its target no longer competes), per worker.
    rate = {}
    for cid, cluster_result in result["clusters"].items():
        active_s = cluster_result.get("active_s") or duration_s
        rate[cid] = (cluster_result.get("contributions") or 0) / active_s if active_s > 0 else 0
        cluster_result["updates_per_s"] = rate[cid]
    total = sum(rate.values())
    for cid, cluster_result in result["clusters"].items():
        cluster_result["share"] = rate[cid] / total if total else None
    result["jain_delivered"] = jain([rate[cid] / max(1, cluster_workers(scenario, cid)) for cid in rate])
    ports = [p for s in result["switches"].values() for p in s["ports"].values()]
    # Jain's index over the bottleneck itself: each cluster's packets sent while another cluster
    # also had packets waiting there (the switch's ports[].clusters), per unit of weight: the turns
    # that scheduling: drr shares out. This is how the port shared itself when shares mattered,
    # whatever each job asked for. (Switch stats from before packets were counted: contributions.)
    contended, weight = {}, {}
    for port in ports:
        for counters in port.get("clusters", []):
            cid = str(counters["cluster"])
            contended[cid] = contended.get(cid, 0) + counters.get("contended_packets",
                                                                  counters["contended_contributions"])
            weight[cid] = counters["weight"]
    total_contended = sum(contended.values())
    for cid, cluster_result in result["clusters"].items():
        cluster_result["contended"] = contended.get(cid)
        cluster_result["contended_share"] = (contended[cid] / total_contended
                                             if total_contended and cid in contended else None)
    result["contended_contributions"] = total_contended
    result["jain_contended"] = (jain([contended[cid] / max(1, weight[cid]) for cid in contended])
                                if total_contended else None)
    result["jain"] = result["jain_contended"] if result["jain_contended"] is not None else result["jain_delivered"]


def add_bottleneck_totals(result, run_dir):
    """Drops, merges, marks, depth and sojourn over every bottleneck port; forwarded packets,
    FEEDBACK sent and the cross traffic's loss."""
    ports = [p for s in result["switches"].values() for p in s["ports"].values()]
    result["drops"] = sum(p["dropped"] for p in ports)
    result["merges"] = sum(p["merged"] for p in ports)
    result["bytes_saved"] = sum(p["bytes_saved"] for p in ports)
    result["marked"] = sum(p["marked"] for p in ports)
    result["mean_sojourn_ms"] = mean([p["mean_sojourn_ms"] for p in ports])
    result["mean_depth"] = mean([p["mean_depth"] for p in ports])
    result["forwarded_packets"] = sum(s.get("forwarded_packets", 0) for s in result["switches"].values())
    cross = (load_json(os.path.join(run_dir, "iperf3.json")) or {}).get("end", {}).get("sum")
    result["cross_traffic"] = {"bytes": cross.get("bytes"), "lost_percent": cross.get("lost_percent")} if cross else None
    result["feedback_sent"] = sum(s.get("feedback_sent", 0) for s in result["switches"].values())


# ----------------------------------------------------------------------------------------------
# A report directory, over seeds, seed by seed.

def analyse(out):
    """Every arm and seed of the report directory out -> (scenario, kind, {arm: {seed: result}})."""
    with open(os.path.join(out, "configs", "scenario.effective.json")) as f:
        scenario = json.load(f)
    kind = scenario["_processes"]
    hosts, links = topology(scenario)
    results = {}
    for arm in scenario["arms"]:
        runs = {}
        for seed in scenario["seeds"]:
            run_dir = os.path.join(out, "raw", arm["name"], f"seed-{seed}")
            if os.path.isdir(run_dir):
                runs[str(seed)] = analyse_run(run_dir, scenario, kind, hosts, links)
        results[arm["name"]] = runs
    return scenario, kind, results


def arm_summary(scenario, runs):
    """Means over seeds of the headline numbers."""
    def over(get):
        return mean([get(r) for r in runs.values()])
    cids = [str(c["id"]) for c in scenario["clusters"]]
    summary = {
        "drops": over(lambda r: r["drops"]), "merges": over(lambda r: r["merges"]),
        "bytes_saved": over(lambda r: r["bytes_saved"]), "jain": over(lambda r: r["jain"]),
        "jain_contended": over(lambda r: r.get("jain_contended")),
        "jain_delivered": over(lambda r: r.get("jain_delivered", r.get("jain"))),
        "contended_contributions": over(lambda r: r.get("contended_contributions")),
        "marked": over(lambda r: r["marked"]), "mean_sojourn_ms": over(lambda r: r["mean_sojourn_ms"]),
        "mean_depth": over(lambda r: r["mean_depth"]), "forwarded_packets": over(lambda r: r["forwarded_packets"]),
        "feedback_sent": over(lambda r: r["feedback_sent"]), "veth_drops": over(lambda r: r.get("veth_drops")),
        "cross_lost_percent": over(lambda r: (r.get("cross_traffic") or {}).get("lost_percent")),
        "clusters": {}}
    for cid in cids:
        per_seed = [r["clusters"][cid] for r in runs.values() if cid in r["clusters"]]
        ttt = [c["time_to_target_s"] for c in per_seed]
        reached = sorted(t for t in ttt if t is not None)
        summary["clusters"][cid] = {
            "time_to_target_s": mean(ttt) if ttt and all(t is not None for t in ttt) else None,
            # Median over every seed (a seed that never reached the target counts as the longest).
            "ttt_median_s": median_or_none(ttt),
            "ttt_min_s": reached[0] if reached else None,
            "ttt_max_s": (reached[-1] if len(reached) == len(ttt) else None) if reached else None,
            "ttt_seeds": ttt,
            "aom_median_ms": median_or_none([c.get("aom_mean_ms") for c in per_seed
                                             if c.get("aom_mean_ms") is not None]),
            "credit_bound": mean([c.get("credit_bound") for c in per_seed]),
            "workers_cpu_wait_share": mean([c.get("workers_cpu_wait_share") for c in per_seed]),
            "learner_wait_per_slice_ms": mean([c.get("learner_wait_per_slice_ms") for c in per_seed]),
            "reached": sum(t is not None for t in ttt), "runs": len(ttt),
            "aom_mean_ms": mean([c.get("aom_mean_ms") for c in per_seed]),
            "aom_peak_ms": max([c["aom_peak_ms"] for c in per_seed if c.get("aom_peak_ms") is not None], default=None),
            "env_steps": mean([c.get("env_steps") for c in per_seed]),
            "final_return": mean([c.get("final_return") for c in per_seed]),
            "share": mean([c.get("share") for c in per_seed]),
            "contended_share": mean([c.get("contended_share") for c in per_seed]),
            "contributions": mean([c.get("contributions") for c in per_seed]),
            "sent": mean([c.get("sent") for c in per_seed]),
        }
    summary["aom_mean_ms"] = mean([v["aom_mean_ms"] for v in summary["clusters"].values()])
    return summary


def seed_verdicts(scenario, results, base, arm, resolution):
    """Per seed and cluster: the baseline's and the arm's time to target and AoM, and whether the arm
    was worse on each. Slower: it never reached the target where the baseline did, or reached it
    more than resolution[cluster] seconds later (one evaluation interval: times to target are only
    known to within one); two runs that never reached it tie. Only seeds both arms ran."""
    rows = []
    for seed in scenario["seeds"]:
        run_base, run_arm = results.get(base, {}).get(str(seed)), results.get(arm, {}).get(str(seed))
        if run_base is None or run_arm is None:
            continue
        for cluster in scenario["clusters"]:
            cid = str(cluster["id"])
            of_base, of_arm = run_base["clusters"].get(cid, {}), run_arm["clusters"].get(cid, {})
            ttt_base, ttt_arm = of_base.get("time_to_target_s"), of_arm.get("time_to_target_s")
            aom_base, aom_arm = of_base.get("aom_mean_ms"), of_arm.get("aom_mean_ms")
            slower = ((ttt_arm is None and ttt_base is not None)
                      or (ttt_arm is not None and ttt_base is not None and ttt_arm > ttt_base + resolution[cid]))
            rows.append({"seed": seed, "cluster": cid, "ttt_base": ttt_base, "ttt_arm": ttt_arm,
                         "aom_base": aom_base, "aom_arm": aom_arm, "slower": slower,
                         "aom_worse": aom_arm is not None and aom_base is not None and aom_arm > aom_base})
    return rows


def model_chunks_per_version(cluster_result):
    """MODEL chunks the learner sent per published version (unicast copies plus copies to the
    group), from its learner.json; None without those counters."""
    model = (cluster_result.get("learner_summary") or {}).get("model") or {}
    versions = model.get("versions_published")
    if not versions:
        return None
    return ((model.get("chunks_sent") or 0) + (model.get("group_chunks_sent") or 0)) / versions

