"""Faults during a run (issue 29): the scenario's `faults:` section, its validation, the schedule of
actions it implies (plan_actions, pure), and the runner that carries them out on the rack while an
arm runs (FaultRunner): switch kills and restarts, link impairments through shesha-impair, worker
kills and restarts, learner kills and resumes from the checkpoint. Every action and a sample of the
counters that explain losses (counters.jsonl) go into the run's raw directory for analysis."""
import copy
import json
import os
import signal
import time

from . import LabError
from .raw_files import load_json

REQUIRED = object()
FAULTS_TEMPLATE = {"arms": [], "compare_without_faults": True, "events": []}
EVENT_TEMPLATES = {
    # kill -9 the switch at at_s; start it again with the same config down_s later.
    "switch_restart": {"kind": REQUIRED, "at_s": REQUIRED, "down_s": 1.0, "switch": ""},
    # shesha-impair on the hosts' links (in the host's namespace, eth0) from from_s to until_s
    # (0: to the end of the run).
    "link": {"kind": REQUIRED, "hosts": REQUIRED, "from_s": 0.0, "until_s": 0.0, "loss_pct": 0.0,
             "delay_ms": 0.0, "jitter_ms": 0.0, "reorder_pct": 0.0, "duplicate_pct": 0.0, "direction": "both"},
    # kill -9 one worker at at_s; start it again at restart_at_s (0: never).
    "worker_kill": {"kind": REQUIRED, "at_s": REQUIRED, "cluster": REQUIRED, "worker": 0, "restart_at_s": 0.0},
    # kill -9 the cluster's learner at at_s; down_s later start it with --resume from its last checkpoint.
    "learner_restart": {"kind": REQUIRED, "at_s": REQUIRED, "cluster": REQUIRED, "down_s": 1.0},
}
NOFAULTS_SUFFIX = "-nofaults"
# After a fault ends, this long still belongs to its window: chunks in flight or queued arrive.
SETTLE_S = 2.0


def _number(value, path, low=0.0, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LabError(f"{path}: must be a number, got {value!r}")
    if value < low or (high is not None and value > high):
        raise LabError(f"{path}: must be in {low:g}..{high:g}, got {value!r}" if high is not None
                       else f"{path}: must be at least {low:g}, got {value!r}")
    return float(value)


def _merge_event(given, path):
    """One event with its kind's defaults; unknown keys and missing required keys name the key."""
    if not isinstance(given, dict):
        raise LabError(f"{path}: must be a mapping with a kind, got {given!r}")
    kind = given.get("kind")
    if kind not in EVENT_TEMPLATES:
        raise LabError(f"{path}.kind: one of {', '.join(EVENT_TEMPLATES)}, got {kind!r}")
    template = EVENT_TEMPLATES[kind]
    for key in given:
        if key not in template:
            raise LabError(f"{path}.{key}: unknown key for kind {kind} (allowed: {', '.join(template)})")
    event = {}
    for key, default in template.items():
        if key not in given:
            if default is REQUIRED:
                raise LabError(f"{path}.{key}: required key missing (kind {kind})")
            event[key] = copy.deepcopy(default)
        else:
            event[key] = given[key]
    return event


def host_groups(hosts):
    """Names a link fault's hosts may use: workers, learners (the learners' links: the bottleneck),
    and every host with a link of its own."""
    own = [h for h, attrs in hosts.items() if "ns_host" not in attrs]
    return {"workers": [h for h in own if hosts[h]["role"] == "worker"],
            "learners": [h for h in own if hosts[h]["role"] == "learner"],
            **{h: [h] for h in own}}


def validate_faults(scenario, hosts):
    """Checks scenario['faults'] (already merged with FAULTS_TEMPLATE): every event's keys and
    values, names the key on error; fills in defaults and each link event's resolved host list."""
    faults = scenario["faults"]
    duration = scenario["duration_s"]
    arm_names = [a["name"] for a in scenario["arms"]]
    if not isinstance(faults["arms"], list) or not all(isinstance(a, str) for a in faults["arms"]):
        raise LabError("faults.arms: a list of arm names ([] = every arm)")
    for name in faults["arms"]:
        if name not in arm_names:
            raise LabError(f"faults.arms: no arm named {name!r} (have {', '.join(arm_names)})")
    if not isinstance(faults["events"], list):
        raise LabError("faults.events: must be a list")
    clusters = {c["id"]: c for c in scenario["clusters"]}
    switch_names = [s["name"] for s in scenario["switches"]]
    groups = host_groups(hosts)
    events = []
    for i, given in enumerate(faults["events"]):
        path = f"faults.events[{i}]"
        event = _merge_event(given, path)
        kind = event["kind"]
        if "at_s" in event:
            event["at_s"] = _number(event["at_s"], f"{path}.at_s")
            if event["at_s"] >= duration:
                raise LabError(f"{path}.at_s: {event['at_s']:g} s is not within the run's {duration:g} s (duration_s)")
        if kind in ("switch_restart", "learner_restart"):
            event["down_s"] = _number(event["down_s"], f"{path}.down_s", 0.0, 600.0)
        if kind == "switch_restart":
            event["switch"] = str(event["switch"] or switch_names[0])
            if event["switch"] not in switch_names:
                raise LabError(f"{path}.switch: no switch named {event['switch']!r}")
        if kind in ("worker_kill", "learner_restart"):
            if event["cluster"] not in clusters:
                raise LabError(f"{path}.cluster: no cluster {event['cluster']!r}")
        if kind == "worker_kill":
            workers = clusters[event["cluster"]]["workers"]
            if isinstance(event["worker"], bool) or not isinstance(event["worker"], int) \
                    or not 0 <= event["worker"] < workers:
                raise LabError(f"{path}.worker: cluster {event['cluster']} has workers 0..{workers - 1}, "
                               f"got {event['worker']!r}")
            event["restart_at_s"] = _number(event["restart_at_s"], f"{path}.restart_at_s")
            if event["restart_at_s"] and event["restart_at_s"] <= event["at_s"]:
                raise LabError(f"{path}.restart_at_s: must be after at_s ({event['at_s']:g}), or 0 for never")
        if kind == "link":
            _validate_link(event, path, groups, duration)
        events.append(event)
    faults["events"] = events


def _validate_link(event, path, groups, duration):
    names = event["hosts"]
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names:
        raise LabError(f"{path}.hosts: a list of hosts or groups (workers, learners, or a host such as c1-w0)")
    resolved = []
    for name in names:
        if name not in groups:
            raise LabError(f"{path}.hosts: no host or group {name!r} (have workers, learners, "
                           f"{', '.join(h for h in groups if h not in ('workers', 'learners'))}; links between "
                           "switches cannot be impaired: af_packet ports bypass the IP stack shesha-impair hooks)")
        resolved += [h for h in groups[name] if h not in resolved]
    event["hosts"] = names
    event["_hosts"] = resolved
    event["from_s"] = _number(event["from_s"], f"{path}.from_s")
    event["until_s"] = _number(event["until_s"], f"{path}.until_s")
    if event["from_s"] >= duration:
        raise LabError(f"{path}.from_s: {event['from_s']:g} s is not within the run's {duration:g} s")
    if event["until_s"] and event["until_s"] <= event["from_s"]:
        raise LabError(f"{path}.until_s: must be after from_s ({event['from_s']:g}), or 0 for the end of the run")
    for key in ("loss_pct", "reorder_pct", "duplicate_pct"):
        event[key] = _number(event[key], f"{path}.{key}", 0.0, 100.0)
    for key in ("delay_ms", "jitter_ms"):
        event[key] = _number(event[key], f"{path}.{key}", 0.0, 1000.0)
    if event["direction"] not in ("both", "egress", "ingress"):
        raise LabError(f"{path}.direction: both, egress (leaving the host) or ingress (arriving), "
                       f"got {event['direction']!r}")
    if not any(event[k] for k in ("loss_pct", "reorder_pct", "duplicate_pct", "delay_ms", "jitter_ms")):
        raise LabError(f"{path}: a link fault needs at least one of loss_pct, delay_ms, jitter_ms, reorder_pct, "
                       "duplicate_pct above 0")


def expand_fault_arms(scenario):
    """With events and compare_without_faults, each faulted arm gets a twin NAME-nofaults that runs
    on the same seeds without faults (after the faulted arms, in the same order). Marks every arm
    with _faults (whether the runner applies the events) and twins with _twin_of."""
    faults = scenario["faults"]
    if not faults["events"]:
        return  # arms stay exactly as given
    faulted = set(faults["arms"] or [a["name"] for a in scenario["arms"]])
    twins = []
    for arm in scenario["arms"]:
        arm["_faults"] = arm["name"] in faulted
        if arm["_faults"] and faults["compare_without_faults"]:
            twin = dict(arm, name=arm["name"] + NOFAULTS_SUFFIX, label=f"{arm['label']}, no faults", _faults=False,
                        _twin_of=arm["name"])
            twins.append(twin)
    names = {a["name"] for a in scenario["arms"]}
    for twin in twins:
        if twin["name"] in names:
            raise LabError(f"arms: {twin['name']} is taken by the twin that runs {twin['_twin_of']} without faults")
    scenario["arms"] += twins


def needs_checkpoint(scenario, cluster_id):
    """Whether the cluster's learner writes a checkpoint (a learner_restart targets it), in every
    arm alike so that the arms with and without faults do the same work."""
    return any(e["kind"] == "learner_restart" and e["cluster"] == cluster_id for e in scenario["faults"]["events"])


def plan_actions(events, duration):
    """The actions the events imply, in the order they run: [(t, action, event index, event)].
    Actions: impair_start/impair_stop, switch_kill/switch_start, worker_kill/worker_start,
    learner_kill/learner_start. A link impairment without until_s lasts to the end of the run
    (stopped with the arm); an action after the run's duration is dropped."""
    actions = []
    for i, event in enumerate(events):
        kind = event["kind"]
        if kind == "link":
            actions.append((event["from_s"], "impair_start", i))
            if event["until_s"]:
                actions.append((event["until_s"], "impair_stop", i))
        elif kind == "switch_restart":
            actions += [(event["at_s"], "switch_kill", i), (event["at_s"] + event["down_s"], "switch_start", i)]
        elif kind == "worker_kill":
            actions.append((event["at_s"], "worker_kill", i))
            if event["restart_at_s"]:
                actions.append((event["restart_at_s"], "worker_start", i))
        elif kind == "learner_restart":
            actions += [(event["at_s"], "learner_kill", i), (event["at_s"] + event["down_s"], "learner_start", i)]
    # Starts before stops at the same time, then by event order: stable and predictable.
    order = {"impair_start": 0, "switch_kill": 1, "worker_kill": 1, "learner_kill": 1, "switch_start": 2,
             "worker_start": 2, "learner_start": 2, "impair_stop": 3}
    actions = [a for a in actions if a[0] < duration]
    actions.sort(key=lambda a: (a[0], order[a[1]], a[2]))
    return [(t, action, i, events[i]) for t, action, i in actions]


def event_label(event):
    """A short name for an event, used in tables and on plots."""
    kind = event["kind"]
    if kind == "switch_restart":
        return f"switch {event['switch']} restart ({event['down_s']:g} s down)"
    if kind == "worker_kill":
        again = f", back at {event['restart_at_s']:g} s" if event["restart_at_s"] else ""
        return f"worker c{event['cluster']}-w{event['worker']} killed{again}"
    if kind == "learner_restart":
        return f"learner c{event['cluster']} restart ({event['down_s']:g} s down)"
    parts = [f"{event[k]:g}% {name}" for k, name in (("loss_pct", "loss"), ("reorder_pct", "reorder"),
                                                     ("duplicate_pct", "dup")) if event[k]]
    parts += [f"{event[k]:g} ms {name}" for k, name in (("delay_ms", "delay"), ("jitter_ms", "jitter")) if event[k]]
    return f"link {','.join(event['hosts'])}: {', '.join(parts)}"


def impair_cpus(scenario, host_cpus):
    """Where the impairers run: on the switches' cores, not the hosts'. A real link's faults cost
    the hosts no CPU, and here the hosts' one core bounds training (the impairers take a few
    per cent of a core each), while a busy-polling switch at the lab's few thousand packets a
    second mostly polls empty queues. On one core: that core."""
    cores = sorted({s["lcore"] for s in scenario["switches"]})
    return ",".join(map(str, cores)) if cores else host_cpus


def impair_argv(binary, namespace, event, seed, json_path, ready_path):
    """shesha-impair's command line for one host's link."""
    return [binary, "--netns", namespace, "--dev", "eth0", "--direction", event["direction"],
            "--loss", f"{event['loss_pct']:g}%", "--reorder", f"{event['reorder_pct']:g}%",
            "--duplicate", f"{event['duplicate_pct']:g}%", "--delay", f"{event['delay_ms']:g}ms",
            "--jitter", f"{event['jitter_ms']:g}ms", "--seed", str(seed), "--json", json_path,
            "--ready-file", ready_path, "--log-level", "warn"]


class FaultRunner:
    """Carries out one arm's fault actions while it runs. The arm's loop calls tick() often; the
    runner keeps the arm's view of its processes current (run.learners, run.cluster_workers,
    lab.switches) and knows which clusters' learners are down on purpose (learners_down), so that
    the arm does not mistake a planned kill for the end of a job."""

    def __init__(self, run, hooks):
        self.run, self.hooks = run, hooks
        self.lab = run.lab
        self.events = self.lab.scenario["faults"]["events"] if run.arm.get("_faults") else []
        self.actions = plan_actions(self.events, run.duration)
        self.next_action = 0
        self.log = []                 # what happened: one dict per action
        self.impairers = {}           # (event index, host) -> (Popen, json path)
        self.learners_down = set()    # cluster ids
        self.switches_down = set()    # switch names
        self.incarnations = {}        # ("learner", cid) / ("worker", host) -> restarts so far
        self.skipped = set()          # events whose target had already stopped by itself
        self.counters_path = os.path.join(run.run_dir, "counters.jsonl")
        self.next_sample = 0.0

    def elapsed(self):
        return time.monotonic() - self.run.t_run

    def cluster_alive(self, cid):
        """The cluster's learner runs, or is down on purpose (a job that reached its target is over)."""
        learner = self.run.learners.get(cid)
        return cid in self.learners_down or (learner is not None and learner.poll() is None)

    def workers_due_back(self):
        """A killed worker is still to be started again (and its job is not over)."""
        return any(action == "worker_start" and index not in self.skipped and self.cluster_alive(event["cluster"])
                   for _t, action, index, event in self.actions[self.next_action:])

    def start_whole_run(self):
        """Actions due at t = 0 (impairments from the start) before any traffic."""
        self.tick(only_due_at_zero=True)

    def tick(self, only_due_at_zero=False):
        while self.next_action < len(self.actions):
            t, action, index, event = self.actions[self.next_action]
            if (only_due_at_zero and t > 0) or (not only_due_at_zero and t > self.elapsed()):
                break
            self.next_action += 1
            self.sample(f"before {action}")
            started = self.elapsed()
            if index in self.skipped:
                detail = {"skipped": "its target had already stopped"}
            else:
                detail = getattr(self, f"_{action}")(index, event)
            self.log.append({"t_planned": t, "t": round(started, 3), "t_done": round(self.elapsed(), 3),
                             "action": action, "event": index, "kind": event["kind"],
                             "label": event_label(event), **(detail or {})})
        if not only_due_at_zero and self.elapsed() >= self.next_sample:
            self.sample("periodic")
            self.next_sample = self.elapsed() + 1.0

    # -- actions ---------------------------------------------------------------------------------

    def _impair_start(self, index, event):
        started = []
        for k, host in enumerate(event["_hosts"]):
            json_path = os.path.join(self.run.run_dir, f"impair-{index}-{host}.json")
            ready = os.path.join(self.run.run_dir, f"impair-{index}-{host}.ready")
            argv = ["taskset", "-c", impair_cpus(self.lab.scenario, self.lab.host_cpus)] + impair_argv(
                self.hooks.impair_binary(), self.lab.rack.namespace(host), event,
                self.run.seed * 1000 + index * 50 + k, json_path, ready)
            process = self.lab.processes.start(f"impair-{index}-{host}", argv,
                                               log=os.path.join(self.run.run_dir, f"impair-{index}-{host}.log"))
            self.impairers[(index, host)] = (process, json_path)
            started.append((host, process, ready))
        for host, process, ready in started:  # wait on readiness: the rules are in place
            deadline = time.monotonic() + 10
            while not os.path.exists(ready):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise LabError(f"shesha-impair on {host} did not start (see {self.run.run_dir}/impair-{index}-{host}.log)")
                time.sleep(0.02)
        return {"hosts": [h for h, _, _ in started]}

    def _impair_stop(self, index, event):
        for host in event["_hosts"]:
            process, _ = self.impairers.get((index, host), (None, None))
            if process is not None:
                self.lab.processes.stop(process)
        return {"hosts": event["_hosts"]}

    def _switch_kill(self, index, event):
        name = event["switch"]
        process = self.lab.switches.pop(name)
        self.switches_down.add(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        return {"switch": name, "pid": process.pid}

    def _switch_start(self, index, event):
        name = event["switch"]
        switch = next(s for s in self.lab.scenario["switches"] if s["name"] == name)
        n = self.incarnations[("switch", name)] = self.incarnations.get(("switch", name), 0) + 1
        # The killed switch's log is kept; the new one logs to the usual file.
        log = os.path.join(self.run.run_dir, f"switch-{name}.log")
        if os.path.exists(log):
            os.replace(log, f"{log}.killed{n}")
        process = self.hooks.start_switch(switch)
        self.switches_down.discard(name)
        return {"switch": name, "pid": process.pid, "incarnation": n}

    def _worker_kill(self, index, event):
        cid, worker = event["cluster"], event["worker"]
        process = self.run.cluster_workers[cid][worker]
        if process.poll() is not None or not self.cluster_alive(cid):
            self.skipped.add(index)
            return {"skipped": "the worker or its job had already stopped"}
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        return {"host": f"c{cid}-w{worker}", "exit_code": process.returncode}

    def _worker_start(self, index, event):
        cid, worker = event["cluster"], event["worker"]
        host = f"c{cid}-w{worker}"
        if not self.cluster_alive(cid):
            return {"skipped": "the job had already stopped"}
        n = self.incarnations[("worker", host)] = self.incarnations.get(("worker", host), 0) + 1
        remaining = max(1.0, self.run.duration - self.elapsed())
        old = self.run.cluster_workers[cid][worker]
        process = self.hooks.start_worker(cid, worker, remaining, f".r{n}")
        self.run.cluster_workers[cid][worker] = process
        self.run.workers = [process if w is old else w for w in self.run.workers]
        return {"host": host, "incarnation": n, "duration_s": round(remaining, 3)}

    def _learner_kill(self, index, event):
        cid = event["cluster"]
        process = self.run.learners[cid]
        if process.poll() is not None:
            self.skipped.add(index)
            return {"skipped": "the learner had already stopped (target reached)"}
        self.learners_down.add(cid)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        return {"cluster": cid, "exit_code": process.returncode}

    def _learner_start(self, index, event):
        cid = event["cluster"]
        n = self.incarnations[("learner", cid)] = self.incarnations.get(("learner", cid), 0) + 1
        checkpoint = self.hooks.checkpoint_path(cid)
        resume = checkpoint if os.path.isfile(checkpoint) else None
        offset = self.elapsed()
        remaining = max(1.0, self.run.duration - offset)
        process = self.hooks.start_learner(cid, remaining, f".r{n}", resume)
        self.run.learners[cid] = process
        self.learners_down.discard(cid)
        return {"cluster": cid, "incarnation": n, "metrics_dir": f"learner-c{cid}.r{n}", "offset_s": round(offset, 3),
                "resumed_from_checkpoint": resume is not None, "duration_s": round(remaining, 3)}

    # -- counters --------------------------------------------------------------------------------

    def sample(self, why):
        """Appends the counters that explain losses, as the processes last wrote them (their files
        are rewritten about every second), to counters.jsonl."""
        if not self.events:
            return
        run_dir = self.run.run_dir
        now = self.elapsed()
        record = {"t": round(now, 3), "why": why, "workers": {}, "learners": {}, "impair": {}, "queues": {}}

        def written(path):
            """When the file was last written, on the run's clock (its counters are from then)."""
            try:
                return round(now - (time.time() - os.stat(path).st_mtime), 3)
            except OSError:
                return None
        for cid, workers in self.run.cluster_workers.items():
            for worker in range(len(workers)):
                host = f"c{cid}-w{worker}"
                n = self.incarnations.get(("worker", host), 0)
                name = f"worker-c{cid}-w{worker}" + (f".r{n}" if n else "") + ".json"
                metrics = load_json(os.path.join(run_dir, name)) or {}
                chunks, credit = metrics.get("chunks") or {}, metrics.get("credit") or {}
                record["workers"][host] = {"t_written": written(os.path.join(run_dir, name)),
                                           "wall_seconds": metrics.get("wall_seconds"),
                                           "contributions_sent": chunks.get("contributions_sent"),
                                           "presumed_lost": credit.get("presumed_lost"),
                                           "credit_timeouts": credit.get("timeouts"),
                                           "send_errors": chunks.get("send_errors"), "incarnation": n}
        for cid in self.run.learners:
            n = self.incarnations.get(("learner", cid), 0)
            path = os.path.join(run_dir, f"learner-c{cid}" + (f".r{n}" if n else ""), "learner.json")
            summary = load_json(path) or {}
            chunks, workers = summary.get("chunks") or {}, summary.get("workers") or {}
            record["learners"][str(cid)] = {"t_written": written(path), "wall_seconds": summary.get("wall_seconds"),
                                            "contributions": chunks.get("contributions"),
                                            "rejected": chunks.get("rejected_total"),
                                            "duplicates": chunks.get("duplicates"),
                                            "workers_expired": workers.get("expired"), "incarnation": n}
        for (index, host), (_process, json_path) in self.impairers.items():
            counters = load_json(json_path) or {}
            record["impair"][f"{index}/{host}"] = {"t_written": written(json_path), **{
                k: counters.get(k) for k in ("received", "passed", "dropped", "duplicated", "reordered", "delayed",
                                             "kernel_queue_dropped")}}
        for poller in self.run.pollers:
            for port, queue in poller.latest.items():
                record["queues"][port] = {k: queue.get(k) for k in ("dropped", "merged", "enqueued", "dequeued")}
        with open(self.counters_path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def stop(self):
        """At the arm's end: a last counter sample, the impairers stopped (their rules removed and
        final counters written), faults.json written."""
        self.sample("end")
        for (index, host), (process, _) in self.impairers.items():
            self.lab.processes.stop(process)
        if self.events:
            with open(os.path.join(self.run.run_dir, "faults.json"), "w") as f:
                # The queue telemetry's clock started with its poller, before the run's clock.
                telemetry_offsets = {os.path.basename(p.csv.name): round(self.run.t_run - p.t0, 3)
                                     for p in self.run.pollers}
                json.dump({"events": self.events, "actions": self.log, "settle_s": SETTLE_S,
                           "telemetry_offset_s": telemetry_offsets}, f, indent=1)
