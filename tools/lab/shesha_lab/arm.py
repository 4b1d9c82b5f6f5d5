"""One arm and seed on the rack, step by step: switches (and their telemetry), warm FDBs, the
clusters' processes and the cross traffic, progress until the workers are done, an orderly stop,
meta.json. Everything goes into raw/<arm>/seed-<s>/."""
import json
import os
import signal
import subprocess
import time

from . import LabError
from .faults import FaultRunner
from .host_cpu import CpuSampler
from .processes import (binaries, checkpoint_path, start_cluster, start_cross_traffic, start_drl_learner,
                        start_drl_worker, start_switch, start_synthetic_worker, warm_up_fdb)
from .raw_files import latest_learner_row, sink_progress
from .report import fmt_num
from .telemetry import TelemetryPoller, switch_log_depths
from .topology import bottleneck_ports


class ArmRun:
    """The state of one arm and seed while it runs."""

    def __init__(self, lab, kind, arm, seed, duration):
        self.lab, self.kind, self.arm, self.seed, self.duration = lab, kind, arm, seed, duration
        self.run_dir = os.path.join(lab.out, "raw", arm["name"], f"seed-{seed}")
        self.pollers = []            # a TelemetryPoller per switch
        self.learners = {}           # cluster id -> learner (or sink) Popen
        self.cluster_workers = {}    # cluster id -> [worker (or gen) Popen]
        self.workers = []            # every worker, in start order
        self.t_start = self.t_run = None
        self.drops_before = None
        self.faults = None           # the FaultRunner
        self.cpu = CpuSampler()      # the host processes' scheduler statistics (host_cpu.py)


class FaultHooks:
    """What the FaultRunner needs from the arm: start a switch, a worker or a learner again with
    the arm's settings, and where the binaries and checkpoints are."""

    def __init__(self, run):
        self.run = run

    def impair_binary(self):
        binary = binaries(self.run.lab.build)["impair"]
        if not os.access(binary, os.X_OK):
            raise LabError(f"faults: link impairments need {binary} (ninja -C build tools/impair/shesha-impair)")
        return binary

    def switch_prefix(self, switch):
        return f"shesha-lab-{os.getpid()}-{switch['name']}"

    def start_switch(self, switch):
        run = self.run
        return start_switch(run.lab, switch, run.arm, run.run_dir, self.switch_prefix(switch))

    def cluster(self, cid):
        return next(c for c in self.run.lab.scenario["clusters"] if c["id"] == cid)

    def start_worker(self, cid, worker, duration, suffix):
        run = self.run
        start = start_drl_worker if run.kind == "drl" else start_synthetic_worker
        return start(run.lab, self.cluster(cid), run.arm, run.seed, run.run_dir, worker, duration, suffix)

    def start_learner(self, cid, duration, suffix, resume):
        run = self.run
        if run.kind != "drl":
            raise LabError("faults: learner_restart needs shesha-learner (processes: drl)")
        return start_drl_learner(run.lab, self.cluster(cid), run.arm, run.run_dir, duration, suffix, resume)

    def checkpoint_path(self, cid):
        return checkpoint_path(self.run.run_dir, cid)


def run_arm(lab, kind, arm, seed, duration):
    """Runs one arm and seed; raises LabError if a switch does not start or exits during the run."""
    run = ArmRun(lab, kind, arm, seed, duration)
    os.makedirs(run.run_dir, exist_ok=True)
    run.t_start = time.monotonic()
    run.drops_before = lab.rack.veth_drops()
    start_switches(run)
    warm_up_fdb(lab)
    run.t_run = time.monotonic()
    run.faults = FaultRunner(run, FaultHooks(run))
    run.faults.start_whole_run()
    start_clusters(run)
    if lab.scenario["cross_traffic"]["enabled"]:
        start_cross_traffic(lab, run.run_dir, duration)
    wait_until_done(run)
    stop_arm(run)
    write_meta(run)


def start_switches(run):
    """Switches first; each on its own lcore, with its own EAL file prefix, its telemetry polled."""
    lab = run.lab
    for switch in lab.scenario["switches"]:
        prefix = f"shesha-lab-{os.getpid()}-{switch['name']}"
        lab.prefixes.append(prefix)
        start_switch(lab, switch, run.arm, run.run_dir, prefix)
        poller = TelemetryPoller(prefix, bottleneck_ports(lab.scenario, switch, lab.hosts, lab.links),
                                 os.path.join(run.run_dir, f"queues-{switch['name']}.csv"),
                                 lab.scenario["telemetry_interval_s"])
        poller.start()
        run.pollers.append(poller)


def sample_cpu(run):
    """Every running host process's scheduler statistics, by role (learner-cC, workers-cC)."""
    for cid, learner in run.learners.items():
        run.cpu.sample(f"learner-c{cid}", learner)
    for cid, workers in run.cluster_workers.items():
        for worker in workers:
            run.cpu.sample(f"workers-c{cid}", worker)


def start_clusters(run):
    for cluster in run.lab.scenario["clusters"]:
        learner, workers = start_cluster(run.lab, run.kind, cluster, run.arm, run.seed, run.run_dir, run.duration)
        run.learners[cluster["id"]] = learner
        run.cluster_workers[cluster["id"]] = workers
        run.workers += workers


def wait_until_done(run):
    """Progress until the workers are done (or every learner stopped, e.g. at the target return),
    at most 30 s past the duration."""
    lab, scenario = run.lab, run.lab.scenario
    next_progress = time.monotonic() + scenario["progress_interval_s"]
    deadline = run.t_run + run.duration + 30
    faults = run.faults
    while time.monotonic() < deadline:
        faults.tick()
        sample_cpu(run)
        # A worker killed by a fault and due back later is not done.
        if all(w.poll() is not None for w in run.workers) and not faults.workers_due_back():
            break
        if run.kind == "drl":
            if all(learner.poll() is not None and cid not in faults.learners_down
                   for cid, learner in run.learners.items()):
                break
            # A learner that stopped (target reached) takes its workers with it, so they do not
            # keep loading a link another cluster may share. One killed by a fault comes back.
            for cid, learner in run.learners.items():
                if learner.poll() is not None and cid not in faults.learners_down:
                    for worker in run.cluster_workers[cid]:
                        if worker.poll() is None:
                            lab.processes.stop(worker)
        if any(p.poll() is not None for p in lab.switches.values()):
            raise LabError(f"a switch exited during arm {run.arm['name']} (see {run.run_dir}/switch-*.log)")
        if time.monotonic() >= next_progress:
            next_progress += scenario["progress_interval_s"]
            print_progress(run, time.monotonic() - run.t_run)
        time.sleep(0.2)


def stop_arm(run):
    """Learners/sinks get a few seconds to finish (sinks stop when idle), then the workers, the
    telemetry and the switches (SIGINT: they write their stats JSON)."""
    lab = run.lab
    sample_cpu(run)
    for learner in run.learners.values():
        try:
            learner.wait(15)
        except subprocess.TimeoutExpired:
            lab.processes.stop(learner)
    for worker in run.workers:
        lab.processes.stop(worker)
    if run.faults is not None:
        run.faults.stop()
    for poller in run.pollers:
        poller.stop()
    for name, process in lab.switches.items():
        returncode = lab.processes.stop(process, signal.SIGINT, 10)
        if returncode != 0:
            print(f"   warning: switch {name} exited with {returncode}", flush=True)
    lab.switches = {}
    lab.processes.stop_all()


def write_meta(run):
    lab = run.lab
    drops_after = lab.rack.veth_drops()
    meta = {"veth_drops": {k: drops_after[k] - run.drops_before[k] for k in drops_after}, "arm": run.arm,
            "seed": run.seed, "processes": run.kind, "duration_s": run.duration,
            "wall_s": time.monotonic() - run.t_run, "setup_s": run.t_run - run.t_start,
            "host_cpus": lab.host_cpus, "worker_exit_codes": [w.returncode for w in run.workers],
            "learner_exit_codes": {str(k): v.returncode for k, v in run.learners.items()},
            "host_cpu": run.cpu.totals(),
            "faults": bool(run.arm.get("_faults")) and bool(lab.scenario.get("faults", {}).get("events"))}
    with open(os.path.join(run.run_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def print_progress(run, elapsed):
    """One progress line: each cluster's last return, AoM and env steps (or deliveries with
    stand-ins) and the bottleneck queue depths."""
    lab = run.lab
    parts = [f"[{run.arm['name']} seed {run.seed}] {elapsed:5.0f}s"]
    for cluster in lab.scenario["clusters"]:
        cid = cluster["id"]
        if run.kind == "drl":
            restarts = run.faults.incarnations.get(("learner", cid), 0) if run.faults else 0
            row = latest_learner_row(run.run_dir, cid, f".r{restarts}" if restarts else "")
            parts.append(f"c{cid} return {fmt_num(row.get('return'))} AoM {fmt_num(row.get('aom_ms'), 0)} ms "
                         f"steps {fmt_num(row.get('env_steps'), 0)}")
        else:
            delivered = sink_progress(os.path.join(run.run_dir, f"sink-c{cid}.log"))
            parts.append(f"c{cid} delivered {delivered[-1][1] if delivered else 0}")
    depths = []
    for poller in run.pollers:
        for port, queue in poller.latest.items():
            depths.append(f"{port}={queue.get('depth', '?')}")
    if not depths:
        for switch in lab.scenario["switches"]:
            depths += [f"{k}={v}" for k, v in
                       switch_log_depths(os.path.join(run.run_dir, f"switch-{switch['name']}.log")).items()]
    parts.append("queue " + " ".join(depths))
    print("   " + " | ".join(parts), flush=True)
