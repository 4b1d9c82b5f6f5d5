"""Checked against the rack (issue 27 item 3): the lab's own scenario in shesha-sim's training
workload (real A3C workers and learners in virtual time, the switch pipeline itself), with the same
workers, clusters, cluster YAMLs, shaped learner port, queue, marking, version tolerance, arms and
seeds, and with the compute time per update measured in the rack run itself; and the report section
that puts rack and simulator side by side per arm and cluster (time to target, AoM, drops).

The simulator scenario is generated here from the lab scenario (one source of truth): sim_settings()
maps every lab key the simulator models to a `--set` and lists what it does not model.

  shesha-lab sim-check REPORT_DIR     runs it for a finished report directory and rewrites report.md
"""
import json
import os
import re
import shutil
import subprocess

from . import LabError
from .analysis import median_or_none
from .cluster_files import eval_interval_s, cluster_config_path, publish_interval_ms
from .host_cpu import wait_per_slice_ms
from .processes import binaries
from .raw_files import load_json, read_csv_rows, read_learner_series, to_float
from .scenario import arm_uses_drr

SIM_CHECK_DIR = "sim-check"
# The simulator's own measurement of this machine (shesha-sim --measure-compute, docs/simulation.md):
# its split between per-step and per-update time is kept; the rack's measured time per update scales
# both (the rack reports updates and env steps, not where the time went inside an update).
MACHINE_STEP_US = 8.2
MACHINE_UPDATE_US = 190.0
# The rack shapes only the switch's egress toward the learners; the learners' own sends (MODEL,
# CREDIT) leave on an unshaped veth. shesha-sim's rate for the learner host's send queue is this key
# (default: links.learner_gbps), passed at veth speed when the binary accepts it (sim_accepts: an
# older shesha-sim has no such key). Without it MODEL and CREDIT leave at the shaped 40 Mbit/s and
# the learners' send queues overflow (docs/simulation.md, "Checked against the rack").
LEARNER_DOWN_KEY = "links.learner_down_gbps"
# The simulator's AoM sampling grid for the series the check reads AoM from (series_aom).
SERIES_SAMPLE_US = 10000
# The simulated learners' tick (training.learner_tick_us): fine enough that a publish interval taken
# from the rack (rack_publish_interval_ms) is kept to within 0.1 ms, not rounded up to the next
# millisecond as at the simulator's default of 1,000 us.
LEARNER_TICK_US = 100
# Goals (issue 27 item 3).
AOM_FACTOR = 2.0


# ----------------------------------------------------------------------------------------------
# Lab values -> numbers.

_SUFFIX = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}


def parse_quantity(value, key):
    """'40M' -> 40e6, '16KiB' -> 16384, 128 -> 128 (a trailing B or bit/s is ignored); the error names key."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(|k|K|M|G|Ki|Mi|Gi)(B|b|bit/s|bps)?\s*", str(value))
    if not match:
        raise LabError(f"{key}: cannot read {value!r} as a number (want e.g. 40M, 16KiB, 128)")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


# ----------------------------------------------------------------------------------------------
# Compute time from the rack run.

def rack_compute(run_dir, scenario):
    """Per cluster, from its shesha-worker metrics JSONs in run_dir: updates computed, env steps,
    wall seconds, the passes it waited (no model, or max_updates_per_version used up) and the time
    it waited -> {cid: {...}} with updates_per_s (per worker, over its wall time), steps_per_update,
    busy_s (wall time not spent waiting) and update_s (busy seconds per update). Clusters without
    metrics are left out."""
    out = {}
    for cluster in scenario["clusters"]:
        cid = cluster["id"]
        computed = steps = wall = waits = waited = 0.0
        workers = 0
        waits_timed = True
        for worker in range(cluster["workers"]):
            metrics = load_json(os.path.join(run_dir, f"worker-c{cid}-w{worker}.json"))
            if not metrics:
                continue
            updates = metrics.get("updates") or {}
            if not to_float(updates.get("computed")) or not to_float(metrics.get("wall_seconds")):
                continue
            workers += 1
            computed += float(updates["computed"])
            steps += float(metrics.get("env_steps") or 0)
            wall += float(metrics["wall_seconds"])
            waits += float(updates.get("waits_for_model") or 0) + float(updates.get("waits_for_version") or 0)
            worker_waited = to_float(updates.get("wait_seconds"))
            if worker_waited is None or not 0 <= worker_waited < float(metrics["wall_seconds"]):
                waits_timed = False  # not timed (older metrics) or damaged: fall back to the wall time
            else:
                waited += worker_waited
        if not workers:
            continue
        # Time per update: the workers' wall time less the time they waited for a model or a newer
        # version (updates.wait_seconds), over their updates. The rack's workers share one core
        # with each other and the learners, so this is the compute time as the rack saw it. The
        # simulator models the waits itself, so they must not be in its compute time too
        # (docs/simulation.md, "Checked against the rack"). Metrics written before the worker
        # timed its waits: the whole wall time, waits included.
        busy = wall - waited if waits_timed else wall
        out[str(cid)] = {"workers": workers, "updates": computed, "env_steps": steps, "wall_s": wall,
                         "waits": waits, "waited_s": waited if waits_timed else None, "busy_s": busy,
                         "updates_per_s": computed / wall,
                         "steps_per_update": steps / computed, "update_s": busy / computed}
    return out


def derive_compute(per_cluster, cluster_ids=None, machine_step_us=MACHINE_STEP_US,
                   machine_update_us=MACHINE_UPDATE_US):
    """training.step_us and training.update_us per cluster, in the order of cluster_ids (default:
    per_cluster's), from the rack's compute per update: the machine's split between steps and the
    gradient, scaled so that the cluster's time per update over its workers' updates of the run is
    the rack's. A cluster without measurements gets the scale pooled over the others ->
    {"step_us": [...], "update_us": [...], "scale": [...], "pooled_scale"}; None without any."""
    def model_s(c):
        return c["updates"] * (c["steps_per_update"] * machine_step_us + machine_update_us) * 1e-6
    measured = {cid: c for cid, c in per_cluster.items() if c["updates"] > 0}
    if not measured:
        return None
    pooled = sum(c["busy_s"] for c in measured.values()) / sum(model_s(c) for c in measured.values())
    ids = [str(cid) for cid in (cluster_ids if cluster_ids is not None else per_cluster)]
    scales = [measured[cid]["busy_s"] / model_s(measured[cid]) if cid in measured else pooled for cid in ids]
    return {"step_us": [round(machine_step_us * x, 3) for x in scales],
            "update_us": [round(machine_update_us * x, 3) for x in scales],
            "scale": scales, "pooled_scale": pooled}


def us_list(value):
    """A per-cluster list of microseconds as the simulator's comma-separated value ('68,55.6'); one
    number (a compute.json written before the per-cluster keys) as itself."""
    if isinstance(value, (list, tuple)):
        return ",".join(f"{v:g}" for v in value)
    return f"{value:g}"


# ----------------------------------------------------------------------------------------------
# The simulator scenario from the lab scenario.

def unsupported(scenario):
    """Why the scenario cannot be checked in the simulator at all ('' if it can)."""
    if len(scenario["switches"]) != 1 or scenario["links"]:
        return "more than one switch (the training check models one ToR)"
    if scenario.get("_processes", "drl") != "drl":
        return "no DRL processes ran (synthetic stand-ins): nothing to compare a time to target with"
    return ""


def not_modelled(scenario, arm):
    """The lab settings that the simulator does not model for this arm (each one line)."""
    switch = scenario["switches"][0]
    bottleneck = switch["bottleneck"]
    notes = []
    if bottleneck["mark_sojourn_us"]:
        notes.append(f"switches[0].bottleneck.mark_sojourn_us ({bottleneck['mark_sojourn_us']}): the simulator marks on depth only")
    if arm_uses_drr(arm, scenario) and len({c["weight"] for c in scenario["clusters"]}) > 1:
        notes.append("clusters[].weight: the simulator's fair queues give every cluster weight 1")
    if scenario["cross_traffic"]["enabled"]:
        notes.append("cross_traffic: not simulated")
    if (scenario.get("faults") or {}).get("events") and arm.get("_faults"):
        notes.append("faults: not simulated (arms with faults are left out; their -nofaults twins are checked)")
    return notes


def set_yaml_key(text, section, key, value, path):
    """A cluster YAML's text with section.key set to value, as text so that its comments stay: the
    key's line replaced, or added under the section's line; the error names path and the key."""
    text, count = re.subn(rf"(?m)^(\s+){key}:[ \t]*[^\s#]+", lambda m: f"{m.group(1)}{key}: {value}", text)
    if count == 0:
        text, count = re.subn(rf"(?m)^{section}:[^\n]*\n", lambda m: f"{m.group(0)}  {key}: {value}\n", text)
    if count != 1:
        raise LabError(f"{path}: cannot set {section}.{key} for the simulator (expected one '{key}:' line, "
                       f"or a '{section}:' line)")
    return text


def rack_core_wait_us(rack_dir, scenario, role):
    """Per cluster (the scenario's order), how long its rack processes of role ("workers" or
    "learner") waited for a core before each timeslice, in us (the kernel's schedstat over the run,
    meta.json's host_cpu; host_cpu.py). None for a cluster without the statistics (0 then: at once)."""
    host_cpu = (load_json(os.path.join(rack_dir, "meta.json")) or {}).get("host_cpu") or {}
    out = []
    for cluster in scenario["clusters"]:
        ms = wait_per_slice_ms(host_cpu.get(f"{role}-c{cluster['id']}"))
        out.append(None if ms is None else round(ms * 1e3, 1))
    return out


def rack_wake_us(rack_dir, scenario):
    """The simulator's training.wake_us: a shesha-worker blocked in poll() for a model runs as long
    after the model arrives as its rack twins waited for a core."""
    return rack_core_wait_us(rack_dir, scenario, "workers")


def rack_learner_wake_us(rack_dir, scenario):
    """The simulator's training.learner_wake_us: a shesha-learner blocked in poll() reads what
    arrived, and sends its CREDITs, as long after a datagram woke it as its rack twin waited for a
    core."""
    return rack_core_wait_us(rack_dir, scenario, "learner")


def rack_publish_interval_ms(rack_dir, cluster):
    """The rack learner's mean time between published versions, in ms, from its first evaluation to
    its target or its last (publish_rate()); None without two evaluations. Its learner publishes
    every learner.publish_interval_ms at most, when its loop gets a core in time: on this machine's
    shared cores 6-9 ms instead of 5, and the workers, who compute at most max_updates_per_version
    gradients per version, wait for the late versions (docs/simulation.md, "Checked against the rack")."""
    metrics_dir = os.path.join(rack_dir, f"learner-c{cluster['id']}")
    target = (load_json(os.path.join(metrics_dir, "learner.json")) or {}).get("target") or {}
    rate = publish_rate(read_learner_series(metrics_dir), target.get("seconds") if target.get("reached") else None)
    return 1000.0 / rate if rate else None


def with_publish_interval(path, interval_ms, dest):
    """A copy of the cluster YAML path at dest with learner.publish_interval_ms set to interval_ms
    (the line replaced, or added under learner:) -> dest."""
    with open(path) as f:
        text = f.read()
    value = f"{interval_ms:.3f}"
    text = set_yaml_key(text, "learner", "publish_interval_ms", value, path)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "w") as f:
        f.write(f"# {os.path.basename(path)} with learner.publish_interval_ms {value}: the rack learner's measured "
                "cadence in this run (set by shesha-lab sim-check)\n" + text)
    return dest


def sim_cluster_yaml(cluster, arm, dest_dir):
    """The cluster YAML the simulator reads for this arm: the one the rack's processes used
    (clusters[]._config_used, with the scenario's chunk_elems and merged_steps), and for an arm with
    congestion_control off its window pinned at transport.w_max (w_init = w_min = w_max) and the
    credit loop's leak repairs off (no bank_excess, no flight expiry), which is what shesha-worker
    --congestion-control off does: the window starts at w_max and, marks and FEEDBACK ignored,
    never moves; credits still clock it and the credit timeout still applies. -> path."""
    src = cluster.get("_config_replicated") if arm["model_delivery"] == "replicated" else None
    src = src or cluster.get("_config_used") or cluster_config_path(cluster)
    if not src or not os.path.isfile(src):
        raise LabError(f"clusters[id={cluster['id']}].config: {src or '(empty)'} does not exist")
    if arm["congestion_control"]:
        return src
    with open(src) as f:
        text = f.read()
    match = re.search(r"(?m)^\s+w_max:\s*([0-9.]+)", text)
    w_max = match.group(1) if match else "256"  # the cluster YAML's default
    # The expiry (on by default) would unpace the pinned window: every chunk out longer than two
    # round trips would leave flight, where the rack's baseline workers wait for its credit.
    pinned = {"w_init": w_max, "w_min": w_max, "w_max": w_max,
              "bank_excess": "false", "flight_expiry_rtts": "0", "flight_expiry_ms": "0"}
    for key, value in pinned.items():
        text = set_yaml_key(text, "transport", key, value, src)
    text = (f"# {os.path.basename(src)} with the window pinned at w_max = {w_max} and no leak repairs "
            f"(arm '{arm['name']}': congestion_control off; set by shesha-lab sim-check)\n" + text)
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, f"{arm['name']}-c{cluster['id']}-{os.path.basename(src)}")
    with open(dest, "w") as f:
        f.write(text)
    return dest


def sim_accepts(sim, key, value):
    """Whether the shesha-sim binary accepts `--set key=value` (a tiny synthetic run; exit 2 names
    an unknown key)."""
    cmd = [sim, "-q", "--log-level", "off", "--set", "duration_ms=0.01", "--set", "workload.clusters=1",
           "--set", "workload.workers_per_cluster=1", "--set", f"{key}={value}"]
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def sim_settings(scenario, arm, seed, compute, cluster_files, learner_down=False):
    """The shesha-sim `--set` list (key=value strings, in a fixed order) for one arm and seed of the
    lab scenario: compute is derive_compute()'s, cluster_files one cluster YAML per cluster;
    learner_down: the simulator has LEARNER_DOWN_KEY (the learners' sends at host speed, as on the rack)."""
    unsupported_why = unsupported(scenario)
    if unsupported_why:
        raise LabError(f"sim-check: {unsupported_why}")
    switch = scenario["switches"][0]
    bottleneck = switch["bottleneck"]
    rate = parse_quantity(bottleneck["rate"], "switches[0].bottleneck.rate")
    if rate <= 0:
        raise LabError("switches[0].bottleneck.rate: the simulator needs a shaped learner port (a rate above 0)")
    queue_bytes = parse_quantity(bottleneck["queue_bytes"], "switches[0].bottleneck.queue_bytes")

    def on(flag):
        return "true" if flag else "false"
    return [
        f"seed={seed}",
        f"duration_ms={scenario['duration_s'] * 1000:g}",
        "topology.kind=tor",
        f"topology.shared_bottleneck={on(scenario['learners'] == 'shared')}",
        "workload.kind=training",
        f"workload.cluster_workers={','.join(str(c['workers']) for c in scenario['clusters'])}",
        "training.clusters=" + ",".join(cluster_files),
        "training.targets=" + ",".join(f"{c['target_return']:g}" for c in scenario["clusters"]),
        # Per cluster (derive_compute), and each cluster stops at its own target, as its learner
        # (--target-return) and workers do on the rack.
        f"training.step_us={us_list(compute['step_us'])}",
        f"training.update_us={us_list(compute['update_us'])}",
    ] + ([f"training.wake_us={us_list(compute['wake_us'])}"] if compute.get("wake_us") else []) + (
        [f"training.learner_wake_us={us_list(compute['learner_wake_us'])}"] if compute.get("learner_wake_us") else []) + [
        # shesha-worker reads CREDIT and FEEDBACK between rollouts (its one loop), not on arrival.
        "training.workers_read_between_rollouts=true",
        f"training.learner_tick_us={LEARNER_TICK_US}",
        "training.stop_at_target=cluster",
        # The learner port's shaper; worker links are veths (fast, unshaped).
        f"links.learner_gbps={rate / 1e9:g}",
        "links.host_gbps=10",
    ] + ([f"{LEARNER_DOWN_KEY}=10"] if learner_down else []) + [
        f"queue.capacity_packets={bottleneck['queue_packets']}",
        f"queue.capacity_bytes={max(9100, int(queue_bytes))}",
        f"queue.mark_depth_packets={bottleneck['mark_depth_packets']}",
        f"queue.version_tolerance={switch['version_tolerance']}",
        f"queue.aggregation={on(arm['aggregation'])}",
        f"queue.fair={on(arm_uses_drr(arm, scenario))}",
        # Windows always on: an arm without congestion control runs the YAML with its window pinned
        # at w_max (sim_cluster_yaml), as shesha-worker --congestion-control off does.
        "transport.window_control=true",
        f"transport.switch_feedback={on(arm['feedback'])}",
        f"transport.feedback_interval_us={switch['feedback_interval_us']}",
        f"model.delivery={arm['model_delivery']}",
        # AoM from the series (series_aom): sampled every 10 ms of virtual time.
        f"output.sample_us={SERIES_SAMPLE_US}",
    ]


def sim_check_command(sim, scenario, arm, seed, compute, cluster_files, run_dir, learner_down=False):
    """The whole shesha-sim command line for one arm and seed, writing its CSVs into run_dir."""
    cmd = [sim, "-q", "-o", run_dir, "-l", f"{arm['name']}-{seed}", "--log-level", "warn"]
    for setting in sim_settings(scenario, arm, seed, compute, cluster_files, learner_down):
        cmd += ["--set", setting]
    return cmd


def run_sim_check(out, build, log=print, sim=None):
    """Runs the simulator for every arm and seed of the report directory out that has rack data, with
    that run's measured compute; writes out/sim-check/ (compute.json, commands.txt, one directory of
    CSVs per arm and seed). Returns False (after saying why) if it could not run."""
    with open(os.path.join(out, "configs", "scenario.effective.json")) as f:
        scenario = json.load(f)
    why = unsupported(scenario)
    if why:
        log(f"shesha-lab: no simulator check: {why}")
        return False
    sim = sim or binaries(build)["sim"]
    if not os.access(sim, os.X_OK):
        log(f"shesha-lab: {sim} not built: no simulator check")
        return False
    check_dir = os.path.join(out, SIM_CHECK_DIR)
    shutil.rmtree(check_dir, ignore_errors=True)
    os.makedirs(check_dir)
    computes, commands = {}, []
    learner_down = sim_accepts(sim, LEARNER_DOWN_KEY, 10)
    if not learner_down:
        log(f"shesha-lab: sim-check: {sim} has no {LEARNER_DOWN_KEY}: the learners' MODEL and CREDIT leave at "
            "the shaped rate in the simulator, not at veth speed as on the rack")
    for arm in scenario["arms"]:
        if arm.get("_faults"):
            log(f"shesha-lab: sim-check: arm '{arm['name']}' skipped (faults are not simulated; its -nofaults twin is)")
            continue
        cluster_files = [sim_cluster_yaml(c, arm, os.path.join(check_dir, "configs")) for c in scenario["clusters"]]
        configured_intervals = [publish_interval_ms(path) for path in cluster_files]
        for seed in scenario["seeds"]:
            rack_dir = os.path.join(out, "raw", arm["name"], f"seed-{seed}")
            per_cluster = rack_compute(rack_dir, scenario)
            compute = derive_compute(per_cluster, [c["id"] for c in scenario["clusters"]])
            if compute is None:
                log(f"shesha-lab: sim-check: no worker metrics in {rack_dir}: skipped")
                continue
            # Each learner publishes at the cadence its rack twin kept in this run, never faster than
            # its YAML asks: as with the compute times, what the shared cores gave the rack.
            intervals, seed_files = [], []
            for cluster, path, configured in zip(scenario["clusters"], cluster_files, configured_intervals):
                measured = rack_publish_interval_ms(rack_dir, cluster)
                interval = max(configured, measured) if measured is not None else configured
                intervals.append(round(interval, 3))
                if interval > configured:
                    path = with_publish_interval(path, interval, os.path.join(
                        check_dir, "configs", f"{arm['name']}-seed{seed}-c{cluster['id']}-{os.path.basename(path)}"))
                seed_files.append(path)
            compute["publish_interval_ms"] = intervals
            # Each worker starts computing on a model as late as its rack twin got a core.
            wakes = rack_wake_us(rack_dir, scenario)
            if any(w is not None for w in wakes):
                compute["wake_us"] = [w or 0 for w in wakes]
            # And each learner reads what reached it as late as its rack twin got a core.
            learner_wakes = rack_learner_wake_us(rack_dir, scenario)
            if any(w is not None for w in learner_wakes):
                compute["learner_wake_us"] = [w or 0 for w in learner_wakes]
            computes.setdefault(arm["name"], {})[str(seed)] = {"rack": per_cluster, **compute}
            run_dir = os.path.join(check_dir, arm["name"], f"seed-{seed}")
            cmd = sim_check_command(sim, scenario, arm, seed, compute, seed_files, run_dir, learner_down)
            commands.append(" ".join(cmd))
            result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if result.returncode != 0:
                log(f"shesha-lab: shesha-sim failed ({' '.join(cmd)}):\n{result.stdout[-2000:]}")
                return False
            log(f"   simulator check: arm '{arm['name']}', seed {seed} done (step {us_list(compute['step_us'])} us, "
                f"update {us_list(compute['update_us'])} us, publish every {us_list(intervals)} ms, wake "
                f"{us_list(compute.get('wake_us') or 0)} us, learner wake {us_list(compute.get('learner_wake_us') or 0)} us)")
    with open(os.path.join(check_dir, "compute.json"), "w") as f:
        json.dump(computes, f, indent=1)
    with open(os.path.join(check_dir, "sim.json"), "w") as f:
        json.dump({"sim": sim, "learner_down": learner_down}, f, indent=1)
    with open(os.path.join(check_dir, "commands.txt"), "w") as f:
        f.write("\n".join(commands) + "\n")
    return True


# ----------------------------------------------------------------------------------------------
# Reading the simulator's runs, and the side-by-side section.

def publish_rate(rows, until_s=None):
    """Model versions a learner published per second between its first evaluation and its last one
    up to until_s (its target), from evaluation rows with t_s and version; None without two of them.
    From the first evaluation, not from 0, so that the rack's start-up (workers starting after
    their learner) does not count."""
    rows = [r for r in rows if r.get("t_s") is not None and r.get("version") is not None
            and (until_s is None or r["t_s"] <= until_s + 1e-6)]
    if len(rows) < 2 or rows[-1]["t_s"] <= rows[0]["t_s"]:
        return None
    return (rows[-1]["version"] - rows[0]["version"]) / (rows[-1]["t_s"] - rows[0]["t_s"])


def read_sim_run(run_dir):
    """One simulator run's numbers from its CSVs -> {"clusters": {cid: {...}}, "drops", ...} or None.
    The simulator numbers clusters from 0 in the scenario's order; cids maps them back."""
    summary = read_csv_rows(os.path.join(run_dir, "summary.csv"))
    training = read_csv_rows(os.path.join(run_dir, "training.csv"))
    if not summary or not training:
        return None
    row = summary[0]
    clusters = {row_c["cluster"]: row_c for row_c in read_csv_rows(os.path.join(run_dir, "clusters.csv"))}
    # The rack's drops are the switch's tail drops at the learner port(s): the simulator's hop of the
    # same name (its total also counts the learners' own send queues and every other port).
    drops = to_float(row.get("learner_port_drops"))
    out = {"drops": drops if drops is not None else to_float(row.get("drops")), "contributions_sent": to_float(row.get("contributions_sent")),
           "contributions_applied": to_float(row.get("contributions_applied")),
           "contributions_dropped": to_float(row.get("contributions_dropped")),
           "sim_end_s": (to_float(row.get("sim_end_ms")) or 0) / 1000.0, "wall_s": to_float(row.get("wall_s")),
           "clusters": {}}
    series = series_aom(os.path.join(run_dir, "series.csv"))
    curve = {}
    for r in read_csv_rows(os.path.join(run_dir, "curve.csv")):
        curve.setdefault(r.get("cluster"), []).append({"t_s": to_float(r.get("t_s")), "version": to_float(r.get("version"))})
    for t in training:
        index = t["cluster"]
        ttt = to_float(t["seconds_to_target"]) if t.get("reached") == "1" else None
        core_us = to_float((clusters.get(index) or {}).get("aom_mean_us"))
        samples = [a for t_s, a in series.get(index, []) if ttt is None or t_s <= ttt]
        out["clusters"][index] = {
            "time_to_target_s": ttt,
            # The rack's AoM is its learner's time-average until it stopped at its target (or the
            # end); the simulator's LearnerCore figure (aom_core_ms) runs to the end of the run, up to
            # an evaluation interval after the stop without arrivals, and on past a cluster's own
            # target. So: the series' AoM samples up to the cluster's target.
            "aom_mean_ms": sum(samples) / len(samples) / 1000.0 if samples else (
                core_us / 1000.0 if core_us is not None else None),
            "aom_core_ms": core_us / 1000.0 if core_us is not None else None,
            "gradients": to_float(t.get("gradients_computed")), "env_steps": to_float(t.get("env_steps")),
            "best_return": to_float(t.get("best_eval_mean")),
            "versions_per_s": publish_rate(curve.get(index, []), ttt)}
    return out


def series_aom(path):
    """The simulator's series.csv -> {cluster index (str): [(t_s, AoM us)]} (metric aom_us: now minus
    the freshest generation time the cluster's learner has received, on the sampling grid)."""
    out = {}
    for row in read_csv_rows(path):
        if row.get("metric") == "aom_us":
            t_ms, value = to_float(row.get("t_ms")), to_float(row.get("value"))
            if t_ms is not None and value is not None:
                out.setdefault(row["key"], []).append((t_ms / 1000.0, value))
    return out


def read_sim_check(out, scenario):
    """{arm: {seed: read_sim_run() with clusters keyed by the lab's cluster ids}} for out/sim-check."""
    runs = {}
    for arm in scenario["arms"]:
        for seed in scenario["seeds"]:
            run = read_sim_run(os.path.join(out, SIM_CHECK_DIR, arm["name"], f"seed-{seed}"))
            if run is None:
                continue
            run["clusters"] = {str(c["id"]): run["clusters"].get(str(i), {}) for i, c in enumerate(scenario["clusters"])}
            runs.setdefault(arm["name"], {})[str(seed)] = run
    return runs


def _ttt_span(values):
    """'median (fastest..slowest)' in s; a run that never reached the target counts as slowest."""
    if not values:
        return "-"
    reached = sorted(v for v in values if v is not None)
    median = median_or_none(values)
    slowest = f"{reached[-1]:.1f}" if reached and len(reached) == len(values) else "never"
    fastest = f"{reached[0]:.1f}" if reached else "never"
    return f"{'never' if median is None else f'{median:.1f}'} ({fastest}..{slowest})"


def _fmt(x, digits=1):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def comparison_rows(scenario, results, sim_runs, computes=None):
    """Per arm and cluster, rack against simulator over the seeds both have: times to target, AoM,
    drops (per arm: the bottleneck's tail drops, and contributions lost as a share of those sent),
    updates per second per worker, and the two verdicts -> [dict]."""
    rows = []
    computes = computes or {}
    for arm in scenario["arms"]:
        name = arm["name"]
        seeds = [str(s) for s in scenario["seeds"] if str(s) in results.get(name, {}) and str(s) in sim_runs.get(name, {})]
        if not seeds:
            continue
        for cluster in scenario["clusters"]:
            cid = str(cluster["id"])
            rack = [results[name][s]["clusters"].get(cid, {}) for s in seeds]
            sim = [sim_runs[name][s]["clusters"].get(cid, {}) for s in seeds]
            rack_ttt = [c.get("time_to_target_s") for c in rack]
            sim_ttt = [c.get("time_to_target_s") for c in sim]
            rack_aom = median_or_none([c["aom_mean_ms"] for c in rack if c.get("aom_mean_ms") is not None])
            sim_aom = median_or_none([c["aom_mean_ms"] for c in sim if c.get("aom_mean_ms") is not None])
            sim_median = median_or_none(sim_ttt)
            # The rack's times snapped to the learners' evaluation grid: both evaluate every
            # eval_interval, the simulator at its exact multiples, the rack's learner when its loop,
            # on a shared core, gets to it (stamped 3-50 ms past the multiple), so 8.003 s on the
            # rack and 8.000 s in the simulator are the same, eighth, evaluation.
            grid = eval_interval_s(cluster)
            reached = [round(t / grid) * grid for t in rack_ttt if t is not None]
            if sim_median is None:
                # "never" lies within the rack's range only if the rack's slowest seed never reached it.
                ttt_ok = len(reached) < len(rack_ttt)
            else:
                ttt_ok = bool(reached) and min(reached) <= sim_median and (
                    len(reached) < len(rack_ttt) or sim_median <= max(reached))
            aom_ratio = sim_aom / rack_aom if sim_aom is not None and rack_aom else None
            rack_rate = median_or_none([((computes.get(name, {}).get(s) or {}).get("rack") or {}).get(cid, {})
                                        .get("updates_per_s") for s in seeds
                                        if ((computes.get(name, {}).get(s) or {}).get("rack") or {}).get(cid)])
            # Over the cluster's own run: it stops at its target (training.stop_at_target: cluster), as
            # the rack's workers do, whose rate is over their own wall time.
            def sim_length(s, c):
                return c["time_to_target_s"] if c.get("time_to_target_s") else sim_runs[name][s]["sim_end_s"]
            sim_rate = median_or_none([
                c["gradients"] / (cluster["workers"] * sim_length(s, c))
                for s, c in zip(seeds, sim) if c.get("gradients") is not None and sim_length(s, c) > 0])

            def lost(sent, applied):
                return 100.0 * (sent - applied) / sent if sent and applied is not None else None
            rows.append({
                "arm": name, "cluster": cid, "env": cluster["env"], "seeds": seeds,
                "rack_ttt": rack_ttt, "sim_ttt": sim_ttt, "rack_ttt_cell": _ttt_span(rack_ttt),
                "sim_ttt_cell": _ttt_span(sim_ttt), "ttt_ok": ttt_ok,
                "rack_aom_ms": rack_aom, "sim_aom_ms": sim_aom, "aom_ratio": aom_ratio,
                "aom_ok": aom_ratio is not None and 1 / AOM_FACTOR <= aom_ratio <= AOM_FACTOR,
                "rack_drops": median_or_none([results[name][s].get("drops") for s in seeds]),
                "sim_drops": median_or_none([sim_runs[name][s].get("drops") for s in seeds]),
                "rack_lost_pct": median_or_none([lost(sum((c.get("sent") or 0) for c in results[name][s]["clusters"].values()),
                                                      sum((c.get("contributions") or 0) for c in results[name][s]["clusters"].values()))
                                                 for s in seeds]),
                "sim_lost_pct": median_or_none([lost(sim_runs[name][s].get("contributions_sent"),
                                                     sim_runs[name][s].get("contributions_applied")) for s in seeds]),
                "rack_updates_per_s": rack_rate, "sim_updates_per_s": sim_rate,
                # Each learner's publishes per second (to its target): workers compute at most
                # max_updates_per_version gradients per version, so this bounds their rate.
                "rack_versions_per_s": median_or_none([publish_rate(c.get("series") or [], c.get("time_to_target_s"))
                                                       for c in rack]),
                "sim_versions_per_s": median_or_none([c.get("versions_per_s") for c in sim]),
            })
    return rows


def sim_check_section(out, scenario, results):
    """The report's "Checked against the simulator" section ([] without out/sim-check)."""
    sim_runs = read_sim_check(out, scenario)
    if not sim_runs:
        return []
    computes = load_json(os.path.join(out, SIM_CHECK_DIR, "compute.json")) or {}
    rows = comparison_rows(scenario, results, sim_runs, computes)
    sim_info = load_json(os.path.join(out, SIM_CHECK_DIR, "sim.json")) or {}
    return sim_check_lines(scenario, rows, computes, sim_info.get("learner_down", True))


def sim_check_lines(scenario, rows, computes, learner_down=True):
    """The section's markdown lines from comparison_rows() and compute.json's contents."""
    lines = ["", "## Checked against the simulator", "",
             "The same scenario in shesha-sim's training workload (real A3C workers and learners in virtual "
             "time, the switch pipeline itself; docs/simulation.md, \"Checked against the rack\"): the same "
             "clusters, cluster YAMLs, workers, shaped learner port, queue, marking, version tolerance, arms and "
             "seeds, with each run's compute time per update measured in that rack run (its workers' wall time "
             "less the time they waited for a model or a newer version, per update) and each learner publishing "
             "at the cadence its rack twin kept in that run (never faster than its YAML's "
             "`publish_interval_ms`), each worker woken by a model starting as late as its rack twins waited for "
             "a core (`training.wake_us`: their mean wait before a timeslice), and each learner reading what "
             "reached it as late as its rack twin waited for a core (`training.learner_wake_us`; "
             "`sim-check/compute.json`, "
             "commands in `sim-check/commands.txt`). Times to target: "
             "median (fastest..slowest) over the seeds, rack on the learner's wall clock, simulator in virtual "
             "seconds. AoM: median over the seeds of each learner's time-average until it reached its target "
             "(the simulator's: its AoM series, sampled every 10 ms of virtual time, up to the cluster's "
             "target; its LearnerCore figure also counts the time after the stop). Drops (per arm): tail drops "
             "at the learner port (packets), and contributions lost (sent but never applied, % of those sent). "
             "Updates/s: gradients per second per worker over the cluster's run, to its target or the end "
             "(rack: wall time; simulator: virtual). Versions/s: the models its learner published per second, "
             "from its first evaluation to its target or its last (with `max_updates_per_version` a worker "
             "computes at most that many gradients per version).", ""]
    lines += ["| arm | cluster | time to target rack (s) | simulator (s) | within rack's range | AoM rack (ms) | "
              "simulator (ms) | ratio | within 2x | drops rack | simulator | lost rack | simulator | "
              "updates/s/worker rack | simulator | versions/s rack | simulator |",
              "|" + "---|" * 17]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {r['cluster']} ({r['env']}) | {r['rack_ttt_cell']} | {r['sim_ttt_cell']} | "
            f"{'yes' if r['ttt_ok'] else '**no**'} | {_fmt(r['rack_aom_ms'])} | {_fmt(r['sim_aom_ms'])} | "
            f"{_fmt(r['aom_ratio'], 2)} | {'yes' if r['aom_ok'] else '**no**'} | {_fmt(r['rack_drops'], 0)} | "
            f"{_fmt(r['sim_drops'], 0)} | {_fmt(r['rack_lost_pct'])} % | {_fmt(r['sim_lost_pct'])} % | "
            f"{_fmt(r['rack_updates_per_s'])} | {_fmt(r['sim_updates_per_s'])} | "
            f"{_fmt(r['rack_versions_per_s'])} | {_fmt(r['sim_versions_per_s'])} |")
    if rows:
        ttt_met = sum(r["ttt_ok"] for r in rows)
        aom_met = sum(r["aom_ok"] for r in rows)
        lines += ["",
                  f"- Simulator's median time to target within the rack's fastest..slowest seed: **"
                  f"{'met' if ttt_met == len(rows) else 'not met'}** ({ttt_met} of {len(rows)} arm-cluster pairs).",
                  f"- Simulator's AoM within {AOM_FACTOR:g}x of the rack's: **"
                  f"{'met' if aom_met == len(rows) else 'not met'}** ({aom_met} of {len(rows)})."]
    if computes:
        lines += ["", "Compute time per run (`training.step_us` / `training.update_us`: the simulator's measured "
                  f"split of {MACHINE_STEP_US:g} us per step and {MACHINE_UPDATE_US:g} us per gradient, scaled so "
                  "that each cluster's time per update is the rack's busy time per update; one "
                  "value per cluster, in the scenario's order):", ""]
        lines += ["| arm | seed | step (us) | update (us) | publish interval (ms) | wake (us) | learner wake (us) | "
                  + " | ".join(f"c{c['id']} rack updates/s/worker, steps/update" for c in scenario["clusters"]) + " |",
                  "|" + "---|" * (7 + len(scenario["clusters"]))]
        for arm in scenario["arms"]:
            for seed, c in sorted((computes.get(arm["name"]) or {}).items(), key=lambda kv: int(kv[0])):
                cells = []
                for cluster in scenario["clusters"]:
                    m = (c.get("rack") or {}).get(str(cluster["id"]))
                    cells.append(f"{m['updates_per_s']:.1f}, {m['steps_per_update']:.2f}" if m else "-")
                publish = us_list(c["publish_interval_ms"]) if c.get("publish_interval_ms") else "as configured"
                wake = us_list(c["wake_us"]) if c.get("wake_us") else "0"
                learner_wake = us_list(c["learner_wake_us"]) if c.get("learner_wake_us") else "0"
                lines.append(f"| {arm['name']} | {seed} | {us_list(c['step_us'])} | {us_list(c['update_us'])} | {publish} | "
                             f"{wake} | {learner_wake} | " + " | ".join(cells) + " |")
    notes = sorted({n for arm in scenario["arms"] for n in not_modelled(scenario, arm)})
    if not learner_down:
        notes.insert(0, f"the learners' own link: this shesha-sim has no `{LEARNER_DOWN_KEY}`, so MODEL and CREDIT "
                        "leave the learners at the shaped rate (the rack shapes only the switch's egress toward the "
                        "learners): the learners' send queues overflow and MODEL is lost")
    if notes:
        lines += ["", "Not modelled for this scenario:", ""] + [f"- {n}" for n in notes]
    return lines
