"""At scale (issue 27 item 4): the scenario's shape as real training in shesha-sim (workload.kind:
training: real A3C workers and learners in virtual time, the switch pipeline itself, MODEL and CREDIT
on the way back) at 64, 256 and 1,024 workers, FIFO against full Shesha, with the learner port's rate
chosen so that it is the bottleneck: the offered gradient load is `at_scale.overload` times the
port's rate. Its report section: time to target per cluster (median and spread over the seeds), the
return against virtual time (at_scale_return.png), AoM, drops and staleness, and the goal (full
Shesha reaches every cluster's target at least 3x sooner than FIFO at 1,024 workers).

The scenario's `at_scale:` section says what runs: `main` (the runs of `shesha-lab run`, bounded to
fit the main job's 10 minutes) and `full` (`shesha-lab scale SCENARIO --full`). Each run has its own
directory out/at-scale/runs/ARM-SIZE-sSEED/ with the simulator's CSVs and its command; a run whose
directory already holds the same command's results is not run again (the simulator is
deterministic), so `--full` on a main job's report directory only adds the runs the main job left out.
"""
import json
import math
import os
import re
import subprocess
import time

from . import SOURCE_ROOT, LabError
from .analysis import median_or_none
from .cluster_files import cluster_config_path, write_cluster_config
from .processes import binaries
from .raw_files import load_json, read_csv_rows, to_float

AT_SCALE_DIR = "at-scale"
LEGACY_DIR = "sim"  # the synthetic at-scale runs of reports written before this section trained
FIGURE = "at_scale_return.png"
GOAL_SIZE = 1024
GOAL_FACTOR = 3.0

# at_scale.main and .full are lists of {workers (in all; each cluster keeps its share of the
# scenario's workers), seeds, duration_ms (the virtual-time cap)}: scenario.AT_SCALE_RUN_TEMPLATE.
AT_SCALE_TEMPLATE = {
    "enabled": True,
    # shesha-lab run: a subset that fits the main job's 10 minutes (about 1.5 minutes on a 2-core
    # machine; 256 workers, 45 s per run, are left to --full).
    "main": [{"workers": 64, "seeds": [1, 2, 3], "duration_ms": 3000}],
    # shesha-lab run --quick (CI's 5 minutes): one small pair of runs.
    "quick": [{"workers": 64, "seeds": [1], "duration_ms": 1000}],
    # shesha-lab scale SCENARIO --full: the whole study (about 30-40 minutes on a 2-core machine).
    "full": [{"workers": 64, "seeds": [1, 2, 3], "duration_ms": 3000},
             {"workers": 256, "seeds": [1, 2, 3], "duration_ms": 2000},
             {"workers": 1024, "seeds": [1, 2, 3], "duration_ms": 1500}],
    "overload": 4.0,               # offered gradient load / the learner port's rate
    # 0: each size's port is its own offered load over overload. N: every size gets the port that N
    # workers' offered load over overload gives (a ToR port does not speed up as workers are added).
    "port_sized_at": 0,
    "host_gbps": 10.0,             # every worker's link
    "model_delivery": "replicated",  # both arms: unicast MODEL alone would fill the port's downlink
    "eval_interval_ms": 100,       # evaluations cost no virtual time: a 0.1 s grid
    "compute_threads": 2,          # gradients on helper threads: the same run bit for bit, faster
    "step_us": 8.2,                # virtual compute per environment step and per gradient
    "update_us": 190.0,            #   (shesha-sim --measure-compute on this machine)
    # Sizes from large_from workers up use these cluster YAMLs instead of clusters[].config (one per
    # cluster, in order; "" keeps the cluster's own; [] none). configs/lab-default.yaml names the -1k
    # files: at 512 workers per job the shipped CartPole file's merged_steps per_contribution
    # collapsed the policy (docs/simulation.md).
    "large_from": 1024,
    "large_configs": [],
    # The chunk size in the simulated clusters (1..2048 elements); 0 keeps clusters[].chunk_elems.
    # The rack's chunk size answers its host's cost per packet, which the simulator does not have.
    "chunk_elems": 0,
}
MAX_WORKERS = 4096

# The lab's two ends: a plain ToR against full Shesha. With replicated MODEL full Shesha's learners
# send CREDIT_BATCHes that its switch fans out (learner.credit_batching, on by default then); a plain
# ToR cannot, so the FIFO arm's learners send one CREDIT per worker.
SIM_ARMS = {
    "fifo": ["queue.aggregation=false", "queue.fair=false", "transport.window_control=false",
             "transport.switch_feedback=false", "model.credit_batching=false"],
    "shesha": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=true",
               "transport.switch_feedback=true"],
}
ARM_LABELS = {"fifo": "FIFO (no merging, FIFO port, windows open, no FEEDBACK)",
              "shesha": "full Shesha (merging, DRR fair shares, windows, FEEDBACK; CREDIT fan-out with replicated MODEL)"}

# Observation and action sizes of the environments the simulator trains (drl/envs), to count a
# model's parameters, hence its chunks, before a run (the run's training.csv is checked against it).
ENV_DIMS = {"CartPole-v1": (4, 2), "Acrobot-v1": (6, 3), "MountainCar-v0": (2, 3)}
HEADER_BYTES = 42 + 48       # Ethernet, IP, UDP and the Shesha header
WIRE_OVERHEAD_BYTES = 24     # preamble, FCS, inter-frame gap (frame::kWireOverhead)


# ----------------------------------------------------------------------------------------------
# The scenario's at_scale section.

def validate_at_scale(scenario):
    """Checks scenario['at_scale'] (merged with AT_SCALE_TEMPLATE, its run lists with RUN_TEMPLATE):
    values merge_strict cannot check; every error names the key."""
    at_scale = scenario["at_scale"]
    for plan in ("main", "quick", "full"):
        sizes = []
        for i, run in enumerate(at_scale[plan]):
            key = f"at_scale.{plan}[{i}]"
            workers = run["workers"]
            if isinstance(workers, bool) or not isinstance(workers, int):
                raise LabError(f"{key}.workers: must be an integer, got {workers!r}")
            if not (len(scenario["clusters"]) <= workers <= MAX_WORKERS):
                raise LabError(f"{key}.workers: {len(scenario['clusters'])}..{MAX_WORKERS} (at least one per cluster), "
                               f"got {workers}")
            if workers in sizes:
                raise LabError(f"{key}.workers: {workers} twice in at_scale.{plan}")
            sizes.append(workers)
            if not run["seeds"] or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                           for s in run["seeds"]):
                raise LabError(f"{key}.seeds: a non-empty list of integers, got {run['seeds']!r}")
            if len(set(run["seeds"])) != len(run["seeds"]):
                raise LabError(f"{key}.seeds: each seed once, got {run['seeds']!r}")
            if not (1 <= run["duration_ms"] <= 3600000):
                raise LabError(f"{key}.duration_ms: the virtual-time cap, 1..3600000 ms, got {run['duration_ms']!r}")
    if not at_scale["overload"] > 0:
        raise LabError(f"at_scale.overload: above 0 (offered gradient load / port rate), got {at_scale['overload']!r}")
    sized_at = at_scale["port_sized_at"]
    if not (sized_at == 0 or len(scenario["clusters"]) <= sized_at <= MAX_WORKERS):  # an int: merge_strict
        raise LabError(f"at_scale.port_sized_at: 0 (each size its own port) or {len(scenario['clusters'])}.."
                       f"{MAX_WORKERS} workers, got {sized_at!r}")
    if not at_scale["host_gbps"] > 0:
        raise LabError(f"at_scale.host_gbps: above 0, got {at_scale['host_gbps']!r}")
    if at_scale["model_delivery"] not in ("unicast", "replicated"):
        raise LabError(f"at_scale.model_delivery: unicast or replicated, got {at_scale['model_delivery']!r}")
    if not (1 <= at_scale["eval_interval_ms"] <= 60000):
        raise LabError(f"at_scale.eval_interval_ms: 1..60000, got {at_scale['eval_interval_ms']!r}")
    if at_scale["compute_threads"] > 64:
        raise LabError(f"at_scale.compute_threads: 0..64, got {at_scale['compute_threads']!r}")
    for key in ("step_us", "update_us"):
        if not at_scale[key] > 0:
            raise LabError(f"at_scale.{key}: above 0, got {at_scale[key]!r}")
    chunk = at_scale["chunk_elems"]
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not (0 <= chunk <= 2048):
        raise LabError(f"at_scale.chunk_elems: 0 (keep clusters[].chunk_elems) or 1..2048, got {chunk!r}")
    large = at_scale["large_configs"]
    if not all(isinstance(p, str) for p in large):
        raise LabError(f"at_scale.large_configs: a list of paths (strings), got {large!r}")
    if large and len(large) != len(scenario["clusters"]):
        raise LabError(f"at_scale.large_configs: one per cluster ({len(scenario['clusters'])}; '' keeps the "
                       f"cluster's own) or none, got {len(large)}")
    for i, path in enumerate(large):
        if path and not os.path.isfile(_source_path(path)):
            raise LabError(f"at_scale.large_configs[{i}]: {path} does not exist")


def _source_path(path):
    return path if os.path.isabs(path) else os.path.join(SOURCE_ROOT, path)


# ----------------------------------------------------------------------------------------------
# Sizing: the model's chunks, each worker's gradient rate, the learner port's rate.

def _cluster_yaml(path):
    import yaml
    try:
        with open(path) as f:
            return yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise LabError(f"{path}: cannot read the cluster YAML ({e})")


def model_parameters(env, hidden):
    """Parameters of rl::ActorCritic for env with these hidden layers: a shared trunk, a policy head
    (one logit per action) and a value head."""
    obs, actions = ENV_DIMS[env]
    total, width = 0, obs
    for h in hidden:
        total += width * h + h
        width = h
    return total + width * actions + actions + width + 1


def cluster_load(config_path, env, step_us, update_us):
    """From a cluster YAML: {parameters, chunks, chunk_elems, gradients_per_s (one worker),
    wire_bits (one gradient's frames on the wire)}. A worker computes a gradient in
    n_steps * step_us + update_us of virtual time and at most worker.max_updates_per_version per
    learner.publish_interval_ms (the learner publishes that often while it applies gradients)."""
    conf = _cluster_yaml(config_path)
    hidden = (conf.get("model") or {}).get("hidden", [64, 64])
    elems = int((conf.get("transport") or {}).get("chunk_elems", 1024))
    n_steps = int((conf.get("a3c") or {}).get("n_steps", 5))
    per_version = int((conf.get("worker") or {}).get("max_updates_per_version", 0))
    publish_ms = float((conf.get("learner") or {}).get("publish_interval_ms", 5))
    parameters = model_parameters(env, hidden)
    chunks = math.ceil(parameters / elems)
    rate = 1e6 / (n_steps * step_us + update_us)
    if per_version > 0:
        rate = min(rate, per_version * 1000.0 / publish_ms)
    frame_bits = (HEADER_BYTES + 4 * elems + WIRE_OVERHEAD_BYTES) * 8
    return {"parameters": parameters, "chunks": chunks, "chunk_elems": elems, "gradients_per_s": rate,
            "wire_bits": chunks * frame_bits}


def worker_counts(scenario, size):
    """Each cluster's workers at this size: its share of the scenario's workers (at least one)."""
    sizes = [c["workers"] for c in scenario["clusters"]]
    return [max(1, round(size * w / sum(sizes))) for w in sizes]


def port_gbps(loads, counts, overload, shared):
    """The learner port's rate: the offered gradient load (every worker at its gradient rate, every
    chunk a frame) divided by overload. Shared: one port for every cluster; else one per cluster,
    each at the clusters' mean offered load over overload. -> (port Gbit/s, offered Gbit/s)."""
    offered = [n * load["gradients_per_s"] * load["wire_bits"] / 1e9 for n, load in zip(counts, loads)]
    total = sum(offered)
    port = total / overload if shared else total / len(offered) / overload
    return port, total


# ----------------------------------------------------------------------------------------------
# Planning and running.

def cluster_files_for(scenario, size, dest_dir):
    """The cluster YAML per cluster at this size: clusters[].config (with the scenario's chunk_elems
    and merged_steps, as the rack's processes get it), or from at_scale.large_from workers up the
    at_scale.large_configs file (with the scenario's chunk_elems); at_scale.chunk_elems, if set,
    replaces the chunk size in both -> [(path written, source)]."""
    at_scale = scenario["at_scale"]
    os.makedirs(dest_dir, exist_ok=True)
    out = []
    for i, cluster in enumerate(scenario["clusters"]):
        large = at_scale["large_configs"][i] if at_scale["large_configs"] else ""
        if large and size >= at_scale["large_from"]:
            source = large
            copy = dict(cluster, config=_source_path(large), merged_steps="")
        else:
            source = cluster["config"]
            copy = dict(cluster)
        if at_scale["chunk_elems"]:
            copy["chunk_elems"] = at_scale["chunk_elems"]
        if not cluster_config_path(copy):
            raise LabError(f"clusters[{i}].config: the at-scale step needs the cluster's YAML")
        out.append((write_cluster_config(copy, dest_dir), source))
    return out


def sim_settings(scenario, arm, size, seed, duration_ms, counts, files, gbps):
    """The shesha-sim `--set` list for one run (fixed order)."""
    at_scale = scenario["at_scale"]
    switch = scenario["switches"][0]
    bottleneck = switch["bottleneck"]
    from .sim_check import parse_quantity
    queue_bytes = parse_quantity(bottleneck["queue_bytes"], "switches[0].bottleneck.queue_bytes")

    def on(flag):
        return "true" if flag else "false"
    return [
        f"seed={seed}", f"duration_ms={duration_ms:g}", "topology.kind=tor",
        f"topology.shared_bottleneck={on(scenario['learners'] == 'shared')}",
        "workload.kind=training", f"workload.cluster_workers={','.join(map(str, counts))}",
        "training.clusters=" + ",".join(files),
        "training.targets=" + ",".join(f"{c['target_return']:g}" for c in scenario["clusters"]),
        f"training.step_us={at_scale['step_us']:g}", f"training.update_us={at_scale['update_us']:g}",
        "training.stop_at_target=cluster", f"training.eval_interval_ms={at_scale['eval_interval_ms']:g}",
        f"training.compute_threads={at_scale['compute_threads']}",
        f"links.learner_gbps={gbps:.4f}", f"links.host_gbps={at_scale['host_gbps']:g}",
        f"queue.capacity_packets={bottleneck['queue_packets']}",
        f"queue.capacity_bytes={max(9100, int(queue_bytes))}",
        f"queue.mark_depth_packets={bottleneck['mark_depth_packets']}",
        f"queue.version_tolerance={switch['version_tolerance']}",
        f"transport.feedback_interval_us={switch['feedback_interval_us']}",
        f"model.delivery={at_scale['model_delivery']}", "output.sample_us=10000",
    ] + SIM_ARMS[arm]


def plan_runs(scenario, plan, out):
    """Every run of at_scale[plan] -> [dict(label, size, arm, seed, duration_ms, counts, configs,
    sources, chunks, port_gbps, offered_gbps, settings)], sizes in order, then seeds, then arms."""
    at_scale = scenario["at_scale"]
    runs = []
    shared = scenario["learners"] == "shared"

    def sizing(size):
        files = cluster_files_for(scenario, size, os.path.join(out, AT_SCALE_DIR, "configs", str(size)))
        loads = [cluster_load(path, c["env"], at_scale["step_us"], at_scale["update_us"])
                 for (path, _), c in zip(files, scenario["clusters"])]
        return files, loads
    sized_at = at_scale["port_sized_at"]
    if sized_at:
        _, loads = sizing(sized_at)
        fixed_gbps, _ = port_gbps(loads, worker_counts(scenario, sized_at), at_scale["overload"], shared)
    for item in at_scale[plan]:
        size = item["workers"]
        counts = worker_counts(scenario, size)
        files, loads = sizing(size)
        gbps, offered = port_gbps(loads, counts, at_scale["overload"], shared)
        if sized_at:
            gbps = fixed_gbps
        for seed in item["seeds"]:
            for arm in SIM_ARMS:
                paths = [path for path, _ in files]
                runs.append({"label": f"{arm}-{size}-s{seed}", "size": size, "arm": arm, "seed": seed,
                             "duration_ms": item["duration_ms"], "counts": counts, "configs": paths,
                             "sources": [source for _, source in files], "chunks": [l["chunks"] for l in loads],
                             "gradients_per_s": [l["gradients_per_s"] for l in loads],
                             "port_gbps": gbps, "offered_gbps": offered,
                             "settings": sim_settings(scenario, arm, size, seed, item["duration_ms"], counts,
                                                      paths, gbps)})
    return runs


def run_command(sim, run, run_dir):
    cmd = [sim, "-o", run_dir, "-l", run["label"], "--log-level", "warn"]
    for setting in run["settings"]:
        cmd += ["--set", setting]
    return cmd


_PROGRESS = re.compile(r"^t\s+([0-9.]+) s virtual\s+cluster\s+(\d+).*eval mean\s+(\S+)")


def _run_one(cmd, run_dir, log, prefix, envs, progress_s):
    """Runs one simulation, streaming its output into run_dir/sim.log and a progress line (virtual
    time, each cluster's last evaluation) at most every progress_s seconds -> (exit code, tail)."""
    started = time.monotonic()
    last_said = started
    latest = {}
    tail = []
    with open(os.path.join(run_dir, "sim.log"), "w") as sim_log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=SOURCE_ROOT)
        for line in proc.stdout:
            sim_log.write(line)
            tail = (tail + [line])[-20:]
            match = _PROGRESS.match(line)
            if match:
                latest[int(match.group(2))] = (float(match.group(1)), match.group(3))
                now = time.monotonic()
                if now - last_said >= progress_s:
                    last_said = now
                    t = max(v[0] for v in latest.values())
                    returns = ", ".join(f"{envs[c] if c < len(envs) else c} {r}" for c, (_, r) in sorted(latest.items()))
                    log(f"{prefix}: {t:.1f} s virtual, last evaluations {returns} ({now - started:.0f} s wall)")
        code = proc.wait()
    return code, "".join(tail)


def run_at_scale(scenario, build, out, plan="main", log=print, sim=None, rerun=False, progress_s=15.0, lock=None):
    """Runs at_scale[plan] (every size, seed and arm) into out/at-scale/ and writes its plan.json.
    lock: a file path; each run takes it (flock) so that other heavy jobs can run between runs.
    Returns False (after saying why) if it did not run."""
    at_scale = scenario["at_scale"]
    if not at_scale["enabled"]:
        log("shesha-lab: at_scale.enabled is false: no at-scale section")
        return False
    if not at_scale[plan]:
        log(f"shesha-lab: at_scale.{plan} is empty: no at-scale runs")
        return False
    for i, cluster in enumerate(scenario["clusters"]):
        if cluster["env"] not in ENV_DIMS:
            log(f"shesha-lab: no at-scale section: clusters[{i}].env {cluster['env']!r}: the step sizes the learner "
                f"port from the model's size and knows {', '.join(ENV_DIMS)}")
            return False
    sim = sim or binaries(build)["sim"]
    if not os.access(sim, os.X_OK):
        log(f"shesha-lab: {sim} not built: no at-scale section")
        return False
    base = os.path.join(out, AT_SCALE_DIR)
    os.makedirs(base, exist_ok=True)
    runs = plan_runs(scenario, plan, out)
    envs = [c["env"] for c in scenario["clusters"]]
    started = time.monotonic()
    for n, run in enumerate(runs, 1):
        run_dir = os.path.join(base, "runs", run["label"])
        cmd = run_command(sim, run, run_dir)
        command_path = os.path.join(run_dir, "command.txt")
        done = (not rerun and os.path.isfile(os.path.join(run_dir, "training.csv"))
                and _read_text(command_path).strip() == " ".join(cmd))
        prefix = f"   at scale {n}/{len(runs)}: {run['size']} workers, {run['arm']}, seed {run['seed']}"
        if done:
            run["wall_s"] = (load_json(os.path.join(run_dir, "run.json")) or {}).get("wall_s")
            log(f"{prefix}: already run with this command (kept)")
            continue
        os.makedirs(run_dir, exist_ok=True)
        for name in ("summary.csv", "clusters.csv", "series.csv", "training.csv", "curve.csv", "command.txt"):
            if os.path.exists(os.path.join(run_dir, name)):
                os.remove(os.path.join(run_dir, name))
        lock_file = _take_lock(lock, log, prefix)
        t0 = time.monotonic()
        try:
            code, tail = _run_one(cmd, run_dir, log, prefix, envs, progress_s)
        finally:
            if lock_file:
                lock_file.close()
        run["wall_s"] = time.monotonic() - t0
        if code != 0:
            log(f"shesha-lab: shesha-sim failed (exit {code}; {' '.join(cmd)}):\n{tail[-2000:]}")
            return False
        with open(command_path, "w") as f:
            f.write(" ".join(cmd) + "\n")
        with open(os.path.join(run_dir, "run.json"), "w") as f:
            json.dump({k: v for k, v in run.items() if k != "settings"}, f, indent=1)
        result = read_run(run_dir)
        for i, chunks in enumerate(run["chunks"]):
            got = (result["clusters"].get(str(i)) or {}).get("chunks") if result else None
            if got is not None and int(got) != chunks:
                log(f"shesha-lab: at scale: cluster {i} has {int(got)} chunks per gradient in the run, {chunks} in "
                    f"the port's sizing (sim_scale.model_parameters needs updating)")
        ttts = ", ".join(f"{envs[int(i)]} {_secs(c['time_to_target_s'])}"
                         for i, c in sorted((result or {"clusters": {}})["clusters"].items()))
        log(f"{prefix} done: {ttts} virtual; {run['wall_s']:.0f} s wall (at scale so far {time.monotonic() - started:.0f} s)")
    with open(os.path.join(base, "plan.json"), "w") as f:
        json.dump({"plan": plan, "scenario": scenario.get("name"), "at_scale": at_scale,
                   "clusters": [{"id": c["id"], "env": c["env"], "target_return": c["target_return"],
                                 "config": c["config"]} for c in scenario["clusters"]],
                   "learners": scenario["learners"], "scenario_path": scenario.get("_path", ""),
                   "runs": [{k: v for k, v in r.items() if k != "settings"} for r in runs]}, f, indent=1)
    return True


def _read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _take_lock(path, log, prefix):
    """Holds path (flock) for one run, saying so if it has to wait -> the open file (None without)."""
    if not path:
        return None
    import fcntl
    lock_file = open(path, "a+")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"{prefix}: waiting for {path}")
        fcntl.flock(lock_file, fcntl.LOCK_EX)
    return lock_file


def _secs(t):
    return "never" if t is None else f"{t:.1f} s"


# ----------------------------------------------------------------------------------------------
# Reading the runs.

def read_run(run_dir):
    """One run's numbers from its CSVs -> {"summary": {...}, "clusters": {index: {...}}, "curve":
    {index: [(t_s, return)]}} or None without them."""
    summary = read_csv_rows(os.path.join(run_dir, "summary.csv"))
    training = read_csv_rows(os.path.join(run_dir, "training.csv"))
    if not summary or not training:
        return None
    row = summary[0]
    clusters_rows = {r["cluster"]: r for r in read_csv_rows(os.path.join(run_dir, "clusters.csv"))}
    s = {k: to_float(row.get(k)) for k in (
        "contributions_sent", "contributions_applied", "contributions_dropped", "aom_mean_us", "staleness_mean",
        "learner_port_drops", "learner_send_credit_drops", "learner_send_model_drops", "learner_up_utilisation",
        "learner_down_utilisation", "sim_end_ms", "wall_s", "workers_without_model", "credit_timeouts")}
    clusters = {}
    for t in training:
        index = t["cluster"]
        c = clusters_rows.get(index, {})
        clusters[index] = {
            "env": t.get("env"), "chunks": to_float(t.get("chunks")),
            "time_to_target_s": to_float(t.get("seconds_to_target")) if t.get("reached") == "1" else None,
            "best_return": to_float(t.get("best_eval_mean")), "gradients": to_float(t.get("gradients_computed")),
            "chunks_applied": to_float(t.get("chunks_applied")),
            "contributions_applied": to_float(t.get("contributions_applied")),
            "optimizer_steps": to_float(t.get("optimizer_steps")),
            "versions": to_float(t.get("versions_published")),
            "aom_mean_us": to_float(c.get("aom_mean_us")), "staleness_mean": to_float(c.get("staleness_mean"))}
    curve = {}
    for r in read_csv_rows(os.path.join(run_dir, "curve.csv")):
        t_s, ret = to_float(r.get("t_s")), to_float(r.get("eval_mean_return"))
        if t_s is not None and ret is not None:
            curve.setdefault(r["cluster"], []).append((t_s, ret))
    return {"summary": s, "clusters": clusters, "curve": curve}


def read_at_scale(out):
    """(plan.json, {label: read_run() + the run's plan entry}) for out/at-scale ((None, {}) without)."""
    plan = load_json(os.path.join(out, AT_SCALE_DIR, "plan.json"))
    if not plan:
        return None, {}
    results = {}
    for run in plan["runs"]:
        result = read_run(os.path.join(out, AT_SCALE_DIR, "runs", run["label"]))
        if result is not None:
            result["run"] = run
            wall = (load_json(os.path.join(out, AT_SCALE_DIR, "runs", run["label"], "run.json")) or {}).get("wall_s")
            result["run_wall_s"] = wall
            results[run["label"]] = result
    return plan, results


# ----------------------------------------------------------------------------------------------
# The section.

def _median_cell(values, fmt="{:.1f}"):
    """'median (min..max)' of the numbers in values ('n/a' without any)."""
    xs = [v for v in values if v is not None]
    if not xs:
        return "n/a"
    return f"{fmt.format(median_or_none(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def ttt_cell(values):
    """Times to target over the seeds: 'median (fastest..slowest)' in s, never counting as slowest;
    with the count reached."""
    if not values:
        return "-"
    reached = sorted(v for v in values if v is not None)
    median = median_or_none(values)
    fastest = f"{reached[0]:.1f}" if reached else "never"
    slowest = f"{reached[-1]:.1f}" if len(reached) == len(values) else "never"
    return f"{'never' if median is None else f'{median:.1f}'} ({fastest}..{slowest}), {len(reached)}/{len(values)}"


def speedup(fifo, shesha, cap_s):
    """FIFO's median time to target over Shesha's, as text: 'x.xx', '> x.xx' (FIFO's median never
    within the cap: the cap over Shesha's median), 'n/a' (Shesha's median never); and the number
    (the lower bound for '>')."""
    f, s = median_or_none(fifo), median_or_none(shesha)
    if s is None or not fifo:
        return "n/a", None
    if f is None:
        return f"> {cap_s / s:.2f}", cap_s / s
    return f"{f / s:.2f}", f / s


def summary_rows(plan, results):
    """The section's numbers: per size and cluster the times to target per arm (ttt), and per size
    and arm the network numbers -> (ttt_rows, arm_rows)."""
    sizes = []
    for run in plan["runs"]:
        if run["size"] not in sizes:
            sizes.append(run["size"])
    ttt_rows, arm_rows = [], []
    for size in sizes:
        by_arm = {arm: [r for r in results.values() if r["run"]["size"] == size and r["run"]["arm"] == arm]
                  for arm in SIM_ARMS}
        caps = [r["run"]["duration_ms"] / 1000.0 for rs in by_arm.values() for r in rs]
        cap_s = max(caps) if caps else 0
        for i, cluster in enumerate(plan["clusters"]):
            cells = {arm: [r["clusters"].get(str(i), {}).get("time_to_target_s") for r in sorted(
                rs, key=lambda r: r["run"]["seed"])] for arm, rs in by_arm.items()}
            text, value = speedup(cells["fifo"], cells["shesha"], cap_s)
            ttt_rows.append({"size": size, "cluster": i, "env": cluster["env"], "target": cluster["target_return"],
                             "fifo": cells["fifo"], "shesha": cells["shesha"], "speedup": text,
                             "speedup_value": value, "cap_s": cap_s,
                             "seeds": sorted({r["run"]["seed"] for rs in by_arm.values() for r in rs})})
        for arm, rs in by_arm.items():
            if not rs:
                continue
            first = rs[0]["run"]

            def pct(r, key):
                sent = r["summary"].get("contributions_sent")
                return 100.0 * (r["summary"].get(key) or 0) / sent if sent else None

            def per_cluster(key, scale=1.0, per_second=False):
                out = []
                for i in range(len(plan["clusters"])):
                    xs = []
                    for r in rs:
                        c = r["clusters"].get(str(i), {})
                        x = c.get(key)
                        if x is None:
                            continue
                        if per_second:
                            length = c.get("time_to_target_s") or (r["summary"].get("sim_end_ms") or 0) / 1000.0
                            x = x / length if length else None
                        xs.append(None if x is None else x * scale)
                    out.append(median_or_none([x for x in xs if x is not None]))
                return out

            def ratio_per_cluster(num, den):
                out = []
                for i in range(len(plan["clusters"])):
                    xs = [r["clusters"].get(str(i), {}).get(num) / r["clusters"][str(i)][den]
                          for r in rs if r["clusters"].get(str(i), {}).get(num) is not None
                          and r["clusters"].get(str(i), {}).get(den)]
                    out.append(median_or_none(xs))
                return out
            arm_rows.append({
                "size": size, "arm": arm, "runs": len(rs), "counts": first["counts"],
                "port_gbps": first["port_gbps"], "offered_gbps": first["offered_gbps"],
                "aom_ms": per_cluster("aom_mean_us", 1e-3),
                "staleness": per_cluster("staleness_mean"),
                "dropped_pct": [pct(r, "contributions_dropped") for r in rs],
                "port_drops": median_or_none([r["summary"].get("learner_port_drops") for r in rs]),
                "credit_lost": median_or_none([r["summary"].get("learner_send_credit_drops") for r in rs]),
                "up": median_or_none([r["summary"].get("learner_up_utilisation") for r in rs]),
                "down": median_or_none([r["summary"].get("learner_down_utilisation") for r in rs]),
                "per_chunk": ratio_per_cluster("contributions_applied", "chunks_applied"),
                "steps_per_s": per_cluster("optimizer_steps", 1e-3, per_second=True),
                "versions_per_s": per_cluster("versions", 1.0, per_second=True),
                "wall_s": [r.get("run_wall_s") for r in rs],
            })
    return ttt_rows, arm_rows


def goal_line(ttt_rows):
    """Issue 27 item 4's goal at GOAL_SIZE workers: met, not met (with the numbers) or not measured."""
    rows = [r for r in ttt_rows if r["size"] == GOAL_SIZE]
    if not rows or not all(r["fifo"] and r["shesha"] for r in rows):
        return (f"- Goal (issue 27 item 4): full Shesha reaches every cluster's target at least {GOAL_FACTOR:g}x sooner "
                f"than FIFO at {GOAL_SIZE:,} workers: **not measured here** ({GOAL_SIZE:,} workers not run; "
                "see below for the command)")
    parts = []
    met = True
    for r in rows:
        ok = r["speedup_value"] is not None and r["speedup_value"] >= GOAL_FACTOR and median_or_none(r["shesha"]) is not None
        met = met and ok
        parts.append(f"{r['env']} {r['speedup']}x" if r["speedup_value"] is not None else
                     f"{r['env']}: Shesha's median seed did not reach the target")
    return (f"- Goal (issue 27 item 4): full Shesha reaches every cluster's target at least {GOAL_FACTOR:g}x sooner "
            f"than FIFO at {GOAL_SIZE:,} workers: **{'met' if met else 'not met'}** ({'; '.join(parts)}; "
            "medians over the seeds)")


def _fmt(x, digits=1):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def _list(xs, digits=1):
    return " / ".join(_fmt(x, digits) for x in xs)


def sim_section(out, plot=True):
    """The report's "At scale" section from out/at-scale ([] without it; a report written before the
    section trained gets its synthetic table from out/sim/summary.csv)."""
    plan, results = read_at_scale(out)
    if not plan:
        return synthetic_section(out)
    return at_scale_lines(plan, results, plot_file=FIGURE if plot and at_scale_figure(out, plan, results) else None)


def at_scale_lines(plan, results, plot_file=None):
    """The section's markdown lines from plan.json's contents and read_at_scale()'s runs."""
    at_scale = plan["at_scale"]
    envs = [c["env"] for c in plan["clusters"]]
    ttt_rows, arm_rows = summary_rows(plan, results)
    run_items = {(r["size"], r["seed"]) for r in plan["runs"]}
    lines = ["", "## At scale: training in shesha-sim", "",
             "The scenario's two jobs (" + ", ".join(f"{c['env']}, target {c['target_return']:g}" for c in plan["clusters"])
             + ") as real training in shesha-sim's training workload (real A3C workers and learners in virtual "
             "time, every switch the shesha-switch pipeline, MODEL and CREDIT back through the learner port; "
             "docs/simulation.md, \"Training workload\"), each job keeping its share of the workers, "
             + ("both learners behind one port" if plan["learners"] == "shared" else "a learner port per job")
             + ". The port is the bottleneck: its rate is the offered gradient load "
             + (f"of {at_scale['port_sized_at']:,} workers over {at_scale['overload']:g}, the same at every size (a ToR "
                "port does not speed up as workers are added, so the overload grows with them) "
                if at_scale.get("port_sized_at") else f"over {at_scale['overload']:g} ")
             + "(every worker computing at its rate: a gradient per "
             f"n_steps x {at_scale['step_us']:g} us + {at_scale['update_us']:g} us of virtual compute, at most "
             "`worker.max_updates_per_version` per published version, every chunk a frame on the wire). "
             f"Workers' links {at_scale['host_gbps']:g} Gbit/s; MODEL {at_scale['model_delivery']} in both arms"
             + ("; CREDIT as CREDIT_BATCHes that the switch fans out behind full Shesha, one per worker behind FIFO"
                if at_scale["model_delivery"] == "replicated" else "") + "; the "
             "switch's queue, marking and version tolerance are the scenario's. "
             f"{ARM_LABELS['fifo']} against {ARM_LABELS['shesha']}. Each job stops at its own target "
             f"(`training.stop_at_target: cluster`); evaluations every {at_scale['eval_interval_ms']:g} ms of virtual "
             "time. Times are virtual seconds.", ""]
    sizes = sorted({r["size"] for r in plan["runs"]})
    lines += ["| workers | workers per job | cluster YAMLs | port (Gbit/s) | offered (Gbit/s) | overload | seeds | "
              "virtual-time cap |",
              "|---|---|---|---|---|---|---|---|"]
    for size in sizes:
        run = next(r for r in plan["runs"] if r["size"] == size)
        seeds = sorted({r["seed"] for r in plan["runs"] if r["size"] == size})
        lines.append(f"| {size:,} | {' + '.join(map(str, run['counts']))} | {', '.join(f'`{s}`' for s in run['sources'])} | "
                     f"{run['port_gbps']:.2f} | {run['offered_gbps']:.2f} | {run['offered_gbps'] / run['port_gbps']:.1f} | "
                     f"{', '.join(map(str, seeds))} | "
                     f"{run['duration_ms'] / 1000:g} s |")
    lines += ["", "Time to target (virtual s): median (fastest..slowest) over the seeds, never = not within the cap; "
              "reached / runs. FIFO / Shesha: the ratio of the medians (> when FIFO's median seed never reached the "
              "target: the cap over Shesha's median, a lower bound).", "",
              "| workers | cluster | target | FIFO | full Shesha | FIFO / Shesha |", "|---|---|---|---|---|---|"]
    for r in ttt_rows:
        lines.append(f"| {r['size']:,} | {r['env']} | {r['target']:g} | {ttt_cell(r['fifo'])} | "
                     f"{ttt_cell(r['shesha'])} | {r['speedup']} |")
    lines += ["", goal_line(ttt_rows), ""]
    lines += ["Per arm (medians over the seeds; per-job values in the order " + " / ".join(envs) + "): AoM "
              "(each learner's time-average until its stop), staleness (versions, as the learner counts them), "
              "contributions dropped (% of those sent, every drop anywhere), tail drops at the learner port, CREDIT "
              "lost at the learners' send queue, the learner port's utilisation up (gradients) / down (MODEL, "
              "CREDIT), contributions per applied chunk, optimizer steps and published versions per virtual second "
              "of each job's run, and wall time per run.", "",
              "| workers | arm | AoM (ms) | staleness | contributions dropped | port tail drops | CREDIT lost | "
              "up / down | contributions per chunk | optimizer steps (k/s) | versions/s | wall (s) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in arm_rows:
        lines.append(f"| {r['size']:,} | {r['arm']} | {_list(r['aom_ms'], 2)} | {_list(r['staleness'], 2)} | "
                     f"{_median_cell(r['dropped_pct'])} % | {_fmt(r['port_drops'], 0)} | {_fmt(r['credit_lost'], 0)} | "
                     f"{_fmt(r['up'], 2)} / {_fmt(r['down'], 2)} | {_list(r['per_chunk'], 1)} | "
                     f"{_list(r['steps_per_s'], 1)} | {_list(r['versions_per_s'], 0)} | "
                     f"{_median_cell(r['wall_s'], '{:.0f}')} |")
    if plot_file:
        lines += ["", f"![Return against virtual time at scale]({plot_file})", "",
                  "Return against virtual time: a panel per size and job, a line per arm and seed (the target "
                  "dotted)."]
    missing = [item for item in at_scale.get("full", []) for seed in item["seeds"]
               if (item["workers"], seed) not in run_items]
    lines += ["", f"Ran: `at_scale.{plan['plan']}` ("
              + "; ".join(f"{item['workers']:,} workers, seeds {', '.join(map(str, item['seeds']))}, cap "
                          f"{item['duration_ms'] / 1000:g} s" for item in at_scale[plan["plan"]])
              + "), FIFO and full Shesha each; every command in `at-scale/runs/*/command.txt`."]
    if missing:
        by_size = {}
        for item in at_scale["full"]:
            left = [s for s in item["seeds"] if (item["workers"], s) not in run_items]
            if left:
                by_size[item["workers"]] = left
        lines.append(f"Not run here (`at_scale.{plan['plan']}` is bounded to fit its command's time): " + "; ".join(
            f"{size:,} workers, seed(s) {', '.join(map(str, seeds))}" for size, seeds in by_size.items())
            + ". `tools/lab/shesha-lab scale SCENARIO --full --out DIR` runs the whole `at_scale.full` study (on this "
            "report's directory it keeps the runs already here and rewrites the report; on a 2-core machine about "
            "30-40 minutes, most of it the 1,024-worker runs).")
    return lines


def at_scale_figure(out, plan, results):
    """Writes out/at_scale_return.png (plots.at_scale_returns) -> True if it has data."""
    from .plots import at_scale_returns
    return at_scale_returns(os.path.join(out, FIGURE), plan, results)


# ----------------------------------------------------------------------------------------------
# Reports written before the at-scale step trained: the synthetic table.

def _range(xs, fmt):
    return f"{fmt.format(median_or_none(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def synthetic_section(out):
    """The synthetic at-scale table of an earlier report (out/sim/summary.csv; [] without it)."""
    rows = read_csv_rows(os.path.join(out, LEGACY_DIR, "summary.csv"))
    if not rows:
        return []
    lines = ["", "## At scale: the same shape in shesha-sim (synthetic gradients)", "",
             "Written by an earlier shesha-lab: the scenario's clusters at 256 and 1,024 workers with synthetic "
             "gradients, offered load twice the learners' port, 20 ms of generation, MODEL traffic modelled "
             "(unicast and replicated). Medians over seeds (min..max).", "",
             "| label | AoM mean (us) | Jain | contributions dropped | staleness mean |", "|---|---|---|---|---|"]
    by_label = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    for label, runs in by_label.items():
        aom = [float(r["aom_mean_us"]) for r in runs]
        jain = [float(r.get("jain_contended") or 0) for r in runs]
        dropped = [100 * float(r["contributions_dropped"]) / max(1.0, float(r["contributions_sent"])) for r in runs]
        staleness = [float(r["staleness_mean"]) for r in runs]
        lines.append(f"| {label} | {_range(aom, '{:.1f}')} | {_range(jain, '{:.3f}')} | {_range(dropped, '{:.1f}')} % | "
                     f"{median_or_none(staleness):.2f} |")
    return lines
