"""shesha-lab: one command runs a virtual-rack experiment and writes a report with plots.

  shesha-lab [run] [SCENARIO.yaml] [--quick] [--out DIR] [--build-dir DIR] [--arms A,B]
             [--duration S] [--processes auto|drl|synthetic]
  shesha-lab replot DIR          regenerate figures, tables and report.md from DIR's raw data
  shesha-lab check [SCENARIO]    validate a scenario and print it with every default filled in
  shesha-lab sim-check DIR       run DIR's scenario in shesha-sim (training workload, the rack's own
                                 compute times) and add rack against simulator to DIR's report.md
  shesha-lab scale [SCENARIO] [--full] [--out DIR]
                                 only the at-scale step (the scenario's shape as training in shesha-sim
                                 at 64-1,024 workers, FIFO against full Shesha): at_scale.main, or with
                                 --full at_scale.full; no root needed

Every learner and worker runs in its own network namespace on a veth pair (tools/lab/rack.sh);
shesha-switch (one per rack) bridges them on af_packet ports, shaping the learners' port(s). Each
arm (FIFO, merging only, feedback-driven sending only, full Shesha) runs the same hosts, seeds and
duration with different switch and worker settings. Run as root. Needs Debian's /usr/bin/python3
(python3-yaml, python3-matplotlib). See docs/lab.md for the scenario keys and the report.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import sys
import time

from . import DEFAULT_SCENARIO, SOURCE_ROOT, LabError
from .analysis import analyse
from .arm import run_arm
from .cluster_files import effective_chunk_elems, rack_mtu, write_cluster_config
from .lab import Lab
from .processes import binaries, choose_processes
from .report import print_headline, write_report
from .scenario import load_scenario
from .sim_check import run_sim_check
from .sim_scale import run_at_scale, sim_section
from .topology import topology

LOCK_PATH = "/run/lock/shesha-lab.lock"


def acquire_rack_lock(timeout_s=1800):
    """One lab at a time: every run uses the same namespace and interface names (so that teardown
    also finds a crashed run's leftovers), so a second run waits here for the first."""
    import fcntl
    os.makedirs(os.path.dirname(LOCK_PATH), exist_ok=True)
    lock_file = open(LOCK_PATH, "a+")
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if not told:
                lock_file.seek(0)
                holder = lock_file.read().strip() or "?"
                print(f"shesha-lab: another run (pid {holder}) is using the rack; waiting for it "
                      f"(up to {timeout_s // 60} min)", flush=True)
                told = True
            if time.monotonic() > deadline:
                raise LabError(f"another shesha-lab run still holds {LOCK_PATH} after {timeout_s} s")
            time.sleep(1)
    lock_file.seek(0)
    lock_file.truncate()
    lock_file.write(str(os.getpid()))
    lock_file.flush()
    return lock_file  # keep it open: the lock lasts as long as this process


def parse_seeds(text):
    """'4-13', '1,5,9', '1-3,7' -> a list of distinct integers in the given order (argparse type)."""
    seeds = []
    for part in text.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if sep else first
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a seed list: {text!r} (want e.g. 4-13 or 1,5,9)")
        if first < 0 or last < first or last - first >= 1000:
            raise argparse.ArgumentTypeError(f"bad seed range {part!r} in {text!r}")
        for seed in range(first, last + 1):
            if seed not in seeds:
                seeds.append(seed)
    return seeds


def select_arms(scenario, arms_option):
    """Keeps only the arms named in --arms (comma-separated), in the scenario's order, with their
    no-fault twins (faults.compare_without_faults)."""
    wanted = arms_option.split(",")
    have = [a["name"] for a in scenario["arms"]]
    unknown = [w for w in wanted if w not in have]
    if unknown:
        raise LabError(f"--arms: no arm named {', '.join(unknown)} (have {', '.join(have)})")
    scenario["arms"] = [a for a in scenario["arms"] if a["name"] in wanted or a.get("_twin_of") in wanted]


def prepare_report_dir(args, scenario, kind):
    """Creates the report directory with configs/: the scenario as given, the cluster files the
    processes use (drl), scenario.effective.json -> its absolute path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = os.path.abspath(args.out or os.path.join(os.getcwd(), f"report-lab-{stamp}"))
    os.makedirs(os.path.join(out, "configs"), exist_ok=True)
    if args.scenario:
        shutil.copy(args.scenario, os.path.join(out, "configs", "scenario.yaml"))
    for cluster in scenario["clusters"]:
        if kind == "drl":
            cluster["_config_used"] = write_cluster_config(cluster, os.path.join(out, "configs"))
            if any(arm["model_delivery"] == "replicated" for arm in scenario["arms"]):
                cluster["_config_replicated"] = write_cluster_config(cluster, os.path.join(out, "configs"), "replicated")
    scenario["_processes"] = kind
    scenario["_command"] = " ".join(["shesha-lab"] + sys.argv[1:])
    scenario["_started"] = time.strftime("%Y-%m-%d %H:%M:%S")
    scenario["_host"] = socket.gethostname()
    with open(os.path.join(out, "configs", "scenario.effective.json"), "w") as f:
        json.dump(scenario, f, indent=1)
    return out


def on_off(flag):
    return "on" if flag else "off"


def cmd_run(args):
    scenario = load_scenario(args.scenario, args.quick, {"duration_s": args.duration, "processes": args.processes,
                                                         "seeds": args.seeds})
    if args.arms:
        select_arms(scenario, args.arms)
    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces, raw sockets): run it with sudo")
    build = os.path.abspath(args.build_dir)
    bins = binaries(build)
    for name in ("switch", "gen", "sink"):
        if not os.access(bins[name], os.X_OK):
            raise LabError(f"{bins[name]} is not built (ninja -C {args.build_dir})")
    kind = choose_processes(scenario, bins)
    for i, event in enumerate(scenario["faults"]["events"]):
        if event["kind"] == "learner_restart" and kind != "drl":
            raise LabError(f"faults.events[{i}]: learner_restart needs shesha-learner (processes: drl), "
                           f"but this run uses {kind} stand-ins")
        if event["kind"] == "link" and not os.access(bins["impair"], os.X_OK):
            raise LabError(f"faults.events[{i}]: link impairments need {bins['impair']} "
                           f"(ninja -C {args.build_dir} tools/impair/shesha-impair)")
    out = prepare_report_dir(args, scenario, kind)
    lab = Lab(scenario, out, build)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    # SIGINT explicitly too: a shell starting the lab in the background (&) leaves SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    n_runs = len(scenario["arms"]) * len(scenario["seeds"])
    print(f"shesha-lab: scenario '{scenario['name']}', {len(scenario['arms'])} arms x {len(scenario['seeds'])} "
          f"seed(s), {scenario['duration_s']:g} s each (about {n_runs * (scenario['duration_s'] + 8) / 60:.1f} min), "
          f"host processes: {kind}, {len(lab.hosts)} hosts on {len(scenario['switches'])} switch(es), report in {out}",
          flush=True)
    if kind == "synthetic":
        print("shesha-lab: shesha-learner/shesha-worker not built: shesha-sink/shesha-gen stand in "
              "(no training; AoM from chunk arrivals)", flush=True)
    try:
        lock = acquire_rack_lock()  # noqa: F841 (held until exit)
        lab.rack.up()
        for seed in scenario["seeds"]:
            for arm in scenario["arms"]:
                print(f"== arm '{arm['name']}' ({arm['label']}: aggregation {on_off(arm['aggregation'])}, "
                      f"feedback {on_off(arm['feedback'])}, congestion control "
                      f"{on_off(arm['congestion_control'])}), seed {seed}", flush=True)
                run_arm(lab, kind, arm, seed, scenario["duration_s"])
    except KeyboardInterrupt:
        print("\nshesha-lab: interrupted, tearing down", flush=True)
        lab.teardown()
        return 130
    finally:
        lab.teardown()
    if kind == "drl":
        run_sim_check(out, lab.build, log=lambda m: print(m, flush=True))
    plan = "quick" if args.quick else "main"
    print(f"shesha-lab: at scale in shesha-sim (at_scale.{plan}; `shesha-lab scale --full` runs the whole study)",
          flush=True)
    at_scale_started = time.monotonic()
    if run_at_scale(scenario, lab.build, out, plan, log=lambda m: print(m, flush=True)):
        print(f"shesha-lab: at scale done in {time.monotonic() - at_scale_started:.0f} s", flush=True)
    scenario, kind, results = analyse(out)
    summaries = write_report(out, scenario, kind, results)
    print_headline(scenario, summaries)
    print(f"shesha-lab: report {out}/report.md")
    return 0


def cmd_replot(args):
    if not os.path.isfile(os.path.join(args.dir, "configs", "scenario.effective.json")):
        raise LabError(f"{args.dir}: not a shesha-lab report directory (no configs/scenario.effective.json)")
    scenario, kind, results = analyse(args.dir)
    summaries = write_report(args.dir, scenario, kind, results)
    print_headline(scenario, summaries)
    print(f"shesha-lab: regenerated {args.dir}/report.md and its figures")
    return 0


def cmd_sim_check(args):
    if not os.path.isfile(os.path.join(args.dir, "configs", "scenario.effective.json")):
        raise LabError(f"{args.dir}: not a shesha-lab report directory (no configs/scenario.effective.json)")
    if not run_sim_check(args.dir, os.path.abspath(args.build_dir), log=lambda m: print(m, flush=True), sim=args.sim):
        return 1
    return cmd_replot(args)


def cmd_scale(args):
    """Only the at-scale step: into a report directory of `shesha-lab run` (its report.md rewritten, the
    runs already there with the same command kept) or into a directory of its own (report.md with the
    at-scale section alone)."""
    out = os.path.abspath(args.out or os.path.join(os.getcwd(), f"report-scale-{time.strftime('%Y%m%d-%H%M%S')}"))
    lab_report = os.path.isfile(os.path.join(out, "configs", "scenario.effective.json"))
    path = args.scenario
    if path is None:
        given = os.path.join(out, "configs", "scenario.yaml")
        path = given if lab_report and os.path.isfile(given) else DEFAULT_SCENARIO
    scenario = load_scenario(path)
    scenario["_path"] = os.path.relpath(os.path.abspath(path), SOURCE_ROOT) if os.path.abspath(path).startswith(
        SOURCE_ROOT + os.sep) else os.path.abspath(path)
    plan = "full" if args.full else "main"
    os.makedirs(out, exist_ok=True)
    items = scenario["at_scale"][plan]
    print(f"shesha-lab: at scale, scenario '{scenario['name']}' ({scenario['_path']}), at_scale.{plan}: "
          + "; ".join(f"{i['workers']} workers x seeds {','.join(map(str, i['seeds']))} x 2 arms, cap "
                      f"{i['duration_ms'] / 1000:g} s virtual" for i in items) + f"; into {out}", flush=True)
    started = time.monotonic()
    if not run_at_scale(scenario, os.path.abspath(args.build_dir), out, plan, log=lambda m: print(m, flush=True),
                        sim=args.sim, rerun=args.rerun, lock=args.lock):
        return 1
    print(f"shesha-lab: at scale done in {time.monotonic() - started:.0f} s", flush=True)
    if lab_report and os.path.isdir(os.path.join(out, "raw")):
        return cmd_replot(argparse.Namespace(dir=out))
    lines = [f"# shesha-lab at scale: {scenario['name']}", "",
             f"`{' '.join(['shesha-lab'] + sys.argv[1:])}` ({time.strftime('%Y-%m-%d %H:%M:%S')}, "
             f"{socket.gethostname()})"] + sim_section(out)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"shesha-lab: report {out}/report.md")
    return 0


def cmd_check(args):
    scenario = load_scenario(args.scenario, args.quick)
    import yaml
    hosts, _links = topology(scenario)
    print(yaml.safe_dump(scenario, sort_keys=False), end="")
    print(f"# {len(hosts)} hosts: " + ", ".join(f"{host}={attrs['ip']}@{attrs['switch']}"
                                                for host, attrs in hosts.items()))
    largest = max(effective_chunk_elems(c) for c in scenario["clusters"])
    print(f"# rack MTU {rack_mtu(scenario)} (largest chunk {largest} elements: a {28 + 48 + 4 * largest}-byte datagram)")
    return 0


def parser():
    ap = argparse.ArgumentParser(prog="shesha-lab", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    run = sub.add_parser("run", help="run a scenario and write the report")
    run.add_argument("scenario", nargs="?", default=None, help="scenario YAML (default: configs/lab-default.yaml)")
    run.add_argument("--quick", action="store_true", help="the scenario's quick settings (CI: a few minutes)")
    run.add_argument("--out", help="report directory (default ./report-lab-<time>)")
    run.add_argument("--build-dir", default=os.path.join(SOURCE_ROOT, "build"), help="meson build dir with the binaries")
    run.add_argument("--arms", help="comma-separated subset of the scenario's arms")
    run.add_argument("--duration", type=float, help="seconds per arm and seed (overrides duration_s)")
    run.add_argument("--seeds", type=parse_seeds,
                     help="seeds to run, overriding the scenario's: '4-13', '1,5,9' or '1-3,7'")
    run.add_argument("--processes", choices=["auto", "drl", "synthetic"], help="overrides processes")
    replot = sub.add_parser("replot", help="regenerate figures and report.md from a report directory's raw data")
    replot.add_argument("dir")
    sim_check = sub.add_parser("sim-check", help="run a report directory's scenario in shesha-sim (training) and "
                               "add rack against simulator to its report")
    sim_check.add_argument("dir")
    sim_check.add_argument("--build-dir", default=os.path.join(SOURCE_ROOT, "build"), help="meson build dir with shesha-sim")
    sim_check.add_argument("--sim", help="the shesha-sim binary (default: the build dir's)")
    scale = sub.add_parser("scale", help="only the at-scale step: the scenario's shape as training in shesha-sim "
                           "(at_scale.main, or at_scale.full with --full)")
    scale.add_argument("scenario", nargs="?", default=None,
                       help="scenario YAML (default: DIR's configs/scenario.yaml for a lab report, else "
                       "configs/lab-default.yaml)")
    scale.add_argument("--full", action="store_true", help="the whole study (at_scale.full) instead of at_scale.main")
    scale.add_argument("--out", help="directory (a lab report's: its report.md is rewritten; default ./report-scale-<time>)")
    scale.add_argument("--build-dir", default=os.path.join(SOURCE_ROOT, "build"), help="meson build dir with shesha-sim")
    scale.add_argument("--sim", help="the shesha-sim binary (default: the build dir's)")
    scale.add_argument("--rerun", action="store_true", help="run again the runs whose results are already there")
    scale.add_argument("--lock", help="a file each simulation run holds (flock) while it runs")
    check = sub.add_parser("check", help="validate a scenario, print it with defaults filled in")
    check.add_argument("scenario", nargs="?", default=None)
    check.add_argument("--quick", action="store_true")
    return ap


def main(argv=None):
    """The command line (argv: the arguments, default sys.argv[1:]) -> the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in ("run", "replot", "check", "sim-check", "scale", "-h", "--help"):
        argv = ["run"] + argv
    args = parser().parse_args(argv)
    if getattr(args, "scenario", "x") is None and os.path.isfile(DEFAULT_SCENARIO):
        args.scenario = DEFAULT_SCENARIO
    try:
        return {"run": cmd_run, "replot": cmd_replot, "check": cmd_check, "sim-check": cmd_sim_check,
                "scale": cmd_scale}[args.cmd](args)
    except LabError as e:
        print(f"shesha-lab: {e}", file=sys.stderr)
        return 2
