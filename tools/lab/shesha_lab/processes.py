"""The processes of a run: the switches, each cluster's learner and workers (shesha-learner and
shesha-worker, or shesha-sink and shesha-gen stand-ins) and the iperf3 cross traffic. Every
process is started in its own session and stopped by its process group."""
import os
import signal
import subprocess
import time

from . import LabError
from .faults import needs_checkpoint
from .switch_yaml import switch_yaml_text


def binaries(build):
    """The build dir's programs the lab runs: name -> path."""
    return {
        "switch": os.path.join(build, "switch/dpdk/shesha-switch"),
        "gen": os.path.join(build, "tools/gen/shesha-gen"),
        "sink": os.path.join(build, "tools/sink/shesha-sink"),
        "learner": os.path.join(build, "learner/shesha-learner"),
        "worker": os.path.join(build, "worker/shesha-worker"),
        "sim": os.path.join(build, "tools/sim/shesha-sim"),
        "impair": os.path.join(build, "tools/impair/shesha-impair"),
    }


def choose_processes(scenario, bins):
    """'drl' (shesha-learner/-worker) or 'synthetic' (shesha-sink/-gen), from the scenario's
    processes key and what is built."""
    have_drl = all(os.access(bins[name], os.X_OK) for name in ("learner", "worker"))
    if scenario["processes"] == "drl" and not have_drl:
        raise LabError(f"processes: drl, but {bins['learner']} / {bins['worker']} are not built")
    if scenario["processes"] == "synthetic" or not have_drl:
        return "synthetic"
    return "drl"


def host_cpu_list(scenario, cpus):
    """The taskset CPU list for host processes: the scenario's, else every core no switch polls on
    (every core but 0 if the switches use them all; 0 on a one-core machine)."""
    if scenario["host_cpus"] != "auto":
        return scenario["host_cpus"]
    if cpus == 1:
        return "0"
    used = {s["lcore"] for s in scenario["switches"]}
    free = [cpu for cpu in range(cpus) if cpu not in used] or list(range(1, cpus))
    return ",".join(map(str, free))


class ProcessGroup:
    """Every process the lab started: (name, Popen, log file)."""

    def __init__(self, out_dir, rack, host_cpus):
        self.out_dir, self.rack, self.host_cpus = out_dir, rack, host_cpus
        self.running = []

    def start(self, name, cmd, host=None, log=None):
        """Starts cmd (in host's namespace, pinned to the host CPUs, if host), its output to log
        (default OUT/NAME.log) -> Popen."""
        argv = list(map(str, cmd))
        if host is not None:
            argv = ["ip", "netns", "exec", self.rack.namespace(host), "taskset", "-c", self.host_cpus] + argv
        log = log or os.path.join(self.out_dir, f"{name}.log")
        log_file = open(log, "w")
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        self.running.append((name, process, log_file))
        return process

    @staticmethod
    def stop(process, sig=signal.SIGTERM, wait_s=5.0):
        """Signals the process's group, SIGKILL after wait_s -> its exit code."""
        if process.poll() is None:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                process.wait(wait_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(5)
        return process.returncode

    def stop_all(self):
        """Stops every process, the last started first (switches with SIGINT, so they write their stats)."""
        for name, process, log_file in reversed(self.running):
            self.stop(process, signal.SIGINT if name.startswith("switch-") else signal.SIGTERM)
            log_file.close()
        self.running = []


def start_switch(lab, switch, arm, run_dir, file_prefix):
    """Writes the switch's YAML into run_dir and starts it with the arm's settings; waits until it
    runs (up to 15 s) -> Popen. Retries a start that lost the af_packet fanout group race."""
    bins = binaries(lab.build)
    config = os.path.join(run_dir, f"switch-{switch['name']}.yaml")
    with open(config, "w") as f:
        f.write(switch_yaml_text(lab.scenario, switch, lab.hosts, lab.links, file_prefix,
                                 replicate_models=arm["model_delivery"] == "replicated"))
    log = os.path.join(run_dir, f"switch-{switch['name']}.log")
    # DPDK 22.11's af_packet PMD names its PACKET_FANOUT group after (pid ^ ifindex): two
    # processes on different interfaces can collide, and the kernel then refuses the port
    # (EINVAL). A new process has a new pid, so such a start is simply retried.
    for attempt in range(4):
        process = lab.processes.start(
            f"switch-{switch['name']}",
            [bins["switch"], "-c", config, "--aggregation", "on" if arm["aggregation"] else "off",
             "--feedback", "on" if arm["feedback"] else "off", "--scheduling", arm["scheduling"],
             "--stats-json", os.path.join(run_dir, f"switch-{switch['name']}.json")], log=log)
        lab.switches[switch["name"]] = process
        for _ in range(150):
            if process.poll() is not None:
                break
            with open(log, errors="replace") as f:
                if "shesha-switch running" in f.read():
                    break
            time.sleep(0.1)
        else:
            raise LabError(f"switch {switch['name']} did not start within 15 s (see {log})")
        if process.poll() is None:
            return process
        with open(log, errors="replace") as f:
            text = f.read()
        if "PACKET_FANOUT" in text and attempt < 3:
            os.replace(log, f"{log}.fanout-retry{attempt}")
            print(f"   switch {switch['name']}: af_packet fanout group collision, retrying", flush=True)
            continue
        raise LabError(f"switch {switch['name']} exited with {process.returncode} at start:\n{text[-2000:]}")


def warm_up_fdb(lab):
    """A ping from every worker to its learner: ARP and the switches' FDBs are warm, so the first
    gradients are not flooded."""
    for host, attrs in lab.hosts.items():
        if attrs["role"] == "worker":
            learner_ip = lab.hosts[f"c{attrs['cluster']}-l"]["ip"]
            subprocess.run(["ip", "netns", "exec", lab.rack.namespace(host), "ping", "-c", "1", "-W", "1",
                            learner_ip], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_cluster(lab, kind, cluster, arm, seed, run_dir, duration):
    """Starts one cluster's learner and workers for an arm -> (learner Popen, [worker Popen])."""
    if kind == "drl":
        return _start_drl_cluster(lab, cluster, arm, seed, run_dir, duration)
    return _start_synthetic_cluster(lab, cluster, arm, seed, run_dir, duration)


def _start_drl_cluster(lab, cluster, arm, seed, run_dir, duration):
    learner = start_drl_learner(lab, cluster, arm, run_dir, duration)
    time.sleep(0.5)
    workers = [start_drl_worker(lab, cluster, arm, seed, run_dir, worker, duration)
               for worker in range(cluster["workers"])]
    return learner, workers


def checkpoint_path(run_dir, cid):
    """The learner's checkpoint file (written only when a learner_restart fault targets the cluster)."""
    return os.path.join(run_dir, f"learner-c{cid}.ckpt")


def start_drl_learner(lab, cluster, arm, run_dir, duration, suffix="", resume=None):
    """Starts one cluster's shesha-learner -> Popen. suffix names a restarted incarnation's metrics
    dir and log (learner-cC.r1/); resume: the checkpoint to resume from."""
    bins = binaries(lab.build)
    cid = cluster["id"]
    learner_host = f"c{cid}-l"
    metrics_dir = os.path.join(run_dir, f"learner-c{cid}{suffix}")
    os.makedirs(metrics_dir, exist_ok=True)
    config = cluster["_config_replicated"] if arm["model_delivery"] == "replicated" else cluster["_config_used"]
    cmd = [bins["learner"], "--config", config, "--cluster", cid, "--bind", lab.hosts[learner_host]["ip"],
           "--duration", duration + 2, "--target-return", cluster["target_return"],
           "--metrics-dir", metrics_dir, "--workers", cluster["workers"]]
    if needs_checkpoint(lab.scenario, cid):
        cmd += ["--checkpoint", checkpoint_path(run_dir, cid)]
    if resume:
        cmd += ["--resume", resume]
    return lab.processes.start(f"learner-c{cid}{suffix}", cmd, host=learner_host,
                               log=os.path.join(run_dir, f"learner-c{cid}{suffix}.log"))


def start_drl_worker(lab, cluster, arm, seed, run_dir, worker, duration, suffix=""):
    """Starts one shesha-worker -> Popen; suffix names a restarted incarnation's files (.r1)."""
    bins = binaries(lab.build)
    cid = cluster["id"]
    host = f"c{cid}-w{worker}"
    config = cluster["_config_replicated"] if arm["model_delivery"] == "replicated" else cluster["_config_used"]
    cmd = [bins["worker"], "--config", config, "--cluster", cid, "--worker-id", worker,
           "--learner", lab.hosts[f"c{cid}-l"]["ip"], "--bind", lab.hosts[host]["ip"], "--duration", duration,
           "--metrics", os.path.join(run_dir, f"worker-c{cid}-w{worker}{suffix}.json"), "--seed", seed * 1000 + worker,
           "--congestion-control", "on" if arm["congestion_control"] else "off"]
    return lab.processes.start(f"worker-c{cid}-w{worker}{suffix}", cmd, host=host,
                               log=os.path.join(run_dir, f"worker-c{cid}-w{worker}{suffix}.log"))


def _start_synthetic_cluster(lab, cluster, arm, seed, run_dir, duration):
    bins = binaries(lab.build)
    cid = cluster["id"]
    learner_host = f"c{cid}-l"
    learner_ip = lab.hosts[learner_host]["ip"]
    sink = lab.processes.start(
        f"sink-c{cid}", [bins["sink"], "--bind", learner_ip, "--credit", "--until-idle", 3,
                         "--duration", duration + 10, "--progress",
                         "--json", os.path.join(run_dir, f"sink-c{cid}.json")],
        host=learner_host, log=os.path.join(run_dir, f"sink-c{cid}.log"))
    time.sleep(0.3)
    workers = [start_synthetic_worker(lab, cluster, arm, seed, run_dir, worker, duration)
               for worker in range(cluster["workers"])]
    return sink, workers


def start_synthetic_worker(lab, cluster, arm, seed, run_dir, worker, duration, suffix=""):
    """Starts one shesha-gen standing in for a worker -> Popen; suffix names a restart's files."""
    bins = binaries(lab.build)
    cid = cluster["id"]
    host = f"c{cid}-w{worker}"
    synthetic = lab.scenario["synthetic"]
    cmd = [bins["gen"], "--dst", lab.hosts[f"c{cid}-l"]["ip"], "--bind", lab.hosts[host]["ip"], "--cluster-base", cid,
           "--clusters", 1, "--workers", 1, "--worker-base", worker, "--chunks", synthetic["chunks"],
           "--rate", synthetic["rate"], "--version-period-ms", synthetic["version_period_ms"],
           "--duration", duration, "--ecn", "--seed", seed * 1000 + worker, "--progress",
           "--json", os.path.join(run_dir, f"gen-c{cid}-w{worker}{suffix}.json")]
    if arm["congestion_control"]:
        cmd += ["--window", synthetic["window"]]
    return lab.processes.start(f"gen-c{cid}-w{worker}{suffix}", cmd, host=host,
                               log=os.path.join(run_dir, f"gen-c{cid}-w{worker}{suffix}.log"))


def start_cross_traffic(lab, run_dir, duration):
    """iperf3 UDP from the cross-traffic host into the target cluster's learner, bounded to the run."""
    cross = lab.scenario["cross_traffic"]
    learner_host = f"c{cross['to_cluster']}-l"
    destination = lab.hosts[learner_host]
    lab.processes.start("iperf3-server", ["iperf3", "-s", "-1", "-p", "5201", "-B", destination["ip"]],
                        host=learner_host, log=os.path.join(run_dir, "iperf3-server.log"))
    time.sleep(0.3)
    lab.processes.start("iperf3-client", ["iperf3", "-c", destination["ip"], "-p", "5201", "-u", "-b", cross["rate"],
                                          "-l", cross["datagram_bytes"], "-t", max(1, int(duration)), "-J",
                                          "--logfile", os.path.join(run_dir, "iperf3.json")],
                        host="xt", log=os.path.join(run_dir, "iperf3-client.log"))
