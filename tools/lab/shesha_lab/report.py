"""The report: report.md (section by section), summary.json, results.json and the headline printed
at the end of a run, all from the analysed results (analysis.py) and the figures (plots.py)."""
import json
import os
import statistics
import subprocess

from . import SOURCE_ROOT
from .analysis import arm_summary, mean, median_or_none, model_chunks_per_version, ratio, seed_verdicts
from .cluster_files import eval_interval_s
from .fault_analysis import EARLIER_RATE_S, RECOVERED_FRACTION
from .faults import event_label
from .plots import plot_all
from .raw_files import to_float
from .sim_check import sim_check_section
from .sim_scale import sim_section


def fmt_num(value, digits=1):
    """A progress-line number: 1.2M for millions, thousands separated, n/a if not a number."""
    x = to_float(value)
    if x is None:
        return "n/a"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.{digits}f}M"
    return f"{x:,.{digits}f}" if x != int(x) or digits > 0 else f"{int(x):,}"


def cell(value, digits=1, suffix=""):
    """A table cell: digits after the point (none from 100,000 up), n/a if not a number."""
    x = to_float(value)
    if x is None:
        return "n/a"
    if abs(x) >= 1e5:
        return f"{x:,.0f}{suffix}"
    return f"{x:,.{digits}f}{suffix}"


def table_header(header):
    """A markdown table's header line and its separator."""
    return [header, "|" + "---|" * (header.count("|") - 1)]


def on_off(flag):
    return "on" if flag else "off"


def goals_section(scenario, arms, summaries, results):
    """Issue 11's goals for full Shesha against FIFO, each stated as met or not, with the numbers."""
    names = [a["name"] for a in arms]
    if "fifo" not in names or "shesha" not in names:
        return []
    fifo, shesha = summaries["fifo"], summaries["shesha"]
    lines = ["", "## Goals: full Shesha against FIFO", ""]
    for cluster in scenario["clusters"]:
        cid = str(cluster["id"])
        fifo_ttt, shesha_ttt = fifo["clusters"][cid]["ttt_median_s"], shesha["clusters"][cid]["ttt_median_s"]
        if shesha_ttt is None:
            verdict, why = "not met", "Shesha's median seed did not reach the target"
        elif fifo_ttt is None:
            verdict, why = "met", "FIFO's median seed never reached the target; Shesha's did"
        else:
            speedup = fifo_ttt / shesha_ttt
            verdict = "met" if speedup >= 2 else "not met"
            why = f"median {fifo_ttt:.1f} s vs {shesha_ttt:.1f} s: {speedup:.2f}x"
        lines.append(f"- Cluster {cid} ({cluster['env']}) time to target at least 2x shorter: **{verdict}** ({why}).")
    aom_ratio = ratio(shesha.get("aom_mean_ms"), fifo.get("aom_mean_ms"))
    lines.append(f"- Mean AoM at most 1/3 of FIFO's: **{'met' if aom_ratio is not None and aom_ratio <= 1 / 3 else 'not met'}** "
                 f"({cell(shesha.get('aom_mean_ms'))} ms vs {cell(fifo.get('aom_mean_ms'))} ms: ratio {cell(aom_ratio, 2)}).")
    if shesha.get("jain_contended") is not None:
        fifo_unfair = (fifo.get("jain_contended") or 1) < 0.95
        lines.append(f"- Jain's index over the shared bottleneck at least 0.95: "
                     f"**{'met' if shesha['jain_contended'] >= 0.95 else 'not met'}** (Shesha "
                     f"{cell(shesha['jain_contended'], 3)}, FIFO {cell(fifo.get('jain_contended'), 3)}; over each "
                     f"cluster's packets sent while another cluster also waited there, per unit of weight). FIFO "
                     f"showing the unfairness Shesha removes (FIFO below 0.95): **{'met' if fifo_unfair else 'not met'}**.")
    else:
        lines.append(f"- Jain's index at least 0.95: **{'met' if (shesha.get('jain') or 0) >= 0.95 else 'not met'}** "
                     f"(Shesha {cell(shesha.get('jain'), 3)}, FIFO {cell(fifo.get('jain'), 3)}; the switch reported no "
                     f"contributions sent while two clusters waited at one port, so this is over delivered update "
                     f"rates per worker).")
    lines.append(f"- Seeds: {len(scenario['seeds'])} ({', '.join(map(str, scenario['seeds']))}); a goal stated as met "
                 "holds for the median, and the per-seed table below shows the spread.")
    return lines


def robustness_section(scenario, arms, results):
    """Every seed side by side, and on how many seeds each arm did worse than the baseline, per cluster."""
    names = [a["name"] for a in arms]
    if len(names) < 2:
        return []
    base = names[0]
    resolution = {str(c["id"]): eval_interval_s(c) for c in scenario["clusters"]}
    intervals = ", ".join(sorted({f"{r:g}" for r in resolution.values()}))
    lines = ["", "## Seed by seed", "",
             f"Each arm against `{base}` on the same seed. **Slower**: a time to target more than one evaluation "
             f"interval later (the learner evaluates every {intervals} s, "
             f"so times are known to within that), or none where `{base}` reached it. **AoM worse**: a higher "
             "time-average Age-of-Model. A single seed is one sample: the counts "
             "say how often an arm lost, not by how much.", ""]

    def ttt(t):
        return "never" if t is None else f"{t:.1f}"
    for arm in names[1:]:
        rows = seed_verdicts(scenario, results, base, arm, resolution)
        if not rows:
            continue
        lines += [f"### `{arm}` against `{base}`", ""]
        lines += table_header(f"| seed | cluster | time to target {base} (s) | {arm} (s) | AoM {base} (ms) | {arm} (ms) | "
                              f"AoM ratio | {arm} worse on |")
        for row in rows:
            worse = ", ".join(what for what, flag in (("time", row["slower"]), ("AoM", row["aom_worse"])) if flag) or "-"
            lines.append(f"| {row['seed']} | {row['cluster']} | {ttt(row['ttt_base'])} | {ttt(row['ttt_arm'])} | "
                         f"{cell(row['aom_base'])} | {cell(row['aom_arm'])} | "
                         f"{cell(ratio(row['aom_arm'], row['aom_base']), 2)} | {worse} |")
        lines.append("")
        for cluster in scenario["clusters"]:
            cid = str(cluster["id"])
            mine = [r for r in rows if r["cluster"] == cid]
            lines.append(f"- Cluster {cid} ({cluster['env']}): `{arm}` slower than `{base}` on "
                         f"**{sum(r['slower'] for r in mine)} of {len(mine)}** seeds, AoM higher on "
                         f"**{sum(r['aom_worse'] for r in mine)} of {len(mine)}**; reached the target on "
                         f"{sum(r['ttt_arm'] is not None for r in mine)} of {len(mine)} (`{base}`: "
                         f"{sum(r['ttt_base'] is not None for r in mine)}).")
        lines.append("")
    return lines


def title_section(scenario, kind, arms):
    lines = [f"# Shesha lab report: {scenario['name']}", ""]
    if scenario.get("description"):
        lines += [scenario["description"], ""]
    stand_ins = (" (shesha-sink/shesha-gen stand-ins for the DRL learner/workers: no returns, AoM from chunk "
                 "arrivals)" if kind == "synthetic" else "")
    lines += [f"Command: `{scenario.get('_command', 'shesha-lab')}`  ",
              f"Started {scenario.get('_started', '?')} on {scenario.get('_host', '?')} ({os.cpu_count()} cores); "
              f"{len(arms)} arms x {len(scenario['seeds'])} seed(s) {scenario['seeds']}, "
              f"{scenario['duration_s']:g} s per run; host processes: **{kind}**" + stand_ins, ""]
    return lines


def headline_section(scenario, arms, summaries, base):
    cids = [str(c["id"]) for c in scenario["clusters"]]
    lines = ["## Headline", "",
             f"Ratios are against the first arm (`{base}`). Speed-up = its time to target / this arm's "
             "(mean over clusters that reached the target in every seed); AoM ratio = this arm's "
             "time-average Age-of-Model / the baseline's (lower is better); drops are tail drops at the "
             "bottleneck port(s); Jain's index is over the bottleneck's service: each cluster's packets "
             "sent while at least one other cluster also had packets waiting there, per unit of weight "
             "(the switch's `ports[].clusters` counters), so it measures how the port shared itself, not what "
             "each job asked for. \"Jain delivered\" is the older index over gradient updates delivered per "
             "second of activity per worker, which mixes in the jobs' different demands.", ""]
    lines += table_header("| arm | settings | " + " | ".join(f"c{c} time to target (s)" for c in cids) +
                          " | speed-up | AoM mean (ms) | AoM ratio | drops | merges | Jain | Jain delivered |")
    base_summary = summaries.get(base, {})
    for arm in arms:
        summary = summaries[arm["name"]]
        speed = mean([ratio(base_summary["clusters"][cid]["time_to_target_s"],
                            summary["clusters"][cid]["time_to_target_s"]) for cid in cids])
        settings = (f"agg {on_off(arm['aggregation'])}, fb {on_off(arm['feedback'])}, cc "
                    f"{on_off(arm['congestion_control'])}")
        ttts = []
        for cid in cids:
            of_cluster = summary["clusters"][cid]
            ttts.append(cell(of_cluster["time_to_target_s"]) if of_cluster["time_to_target_s"] is not None
                        else f"not reached ({of_cluster['reached']}/{of_cluster['runs']})")
        lines.append(f"| {arm['name']} | {settings} | " + " | ".join(ttts) +
                     f" | {cell(speed, 2, 'x')} | {cell(summary['aom_mean_ms'])} | "
                     f"{cell(ratio(summary['aom_mean_ms'], base_summary.get('aom_mean_ms')), 2)}"
                     f" | {cell(summary['drops'], 0)} | {cell(summary['merges'], 0)} | {cell(summary['jain'], 3)} | "
                     f"{cell(summary['jain_delivered'], 3)} |")
    return lines


def seeds_section(scenario, arms, summaries):
    cids = [str(c["id"]) for c in scenario["clusters"]]
    lines = ["", "## Time to target over seeds", "",
             "Median over the seeds, with the fastest and slowest seed (\"never\": a seed that did not reach the "
             "target within the run counts as slower than any that did). Credit-bound: the share of the workers' "
             "window samples at which every chunk the window allows was in flight (the sender waited for credit "
             "rather than computing). Waiting for a core: of the time the cluster's workers were runnable, the share "
             "they waited for a core (the kernel's schedstat, summed over their threads), and the learner's mean wait "
             "before each timeslice: where these are high and credit-bound is low, the host's CPU, not the network, "
             "bounds the job.", ""]
    lines += table_header("| arm | cluster | median (s) | fastest..slowest (s) | per seed (s) | AoM median (ms) | "
                          "credit-bound | workers waiting for a core | learner wait per slice (ms) |")
    for arm in arms:
        for cid in cids:
            of_cluster = summaries[arm["name"]]["clusters"][cid]
            seeds = ", ".join("never" if t is None else f"{t:.1f}" for t in of_cluster["ttt_seeds"])
            slowest = cell(of_cluster["ttt_max_s"]) if of_cluster["ttt_max_s"] is not None else "never"
            median = cell(of_cluster["ttt_median_s"]) if of_cluster["ttt_median_s"] is not None else "never"
            lines.append(f"| {arm['name']} | {cid} | {median} | {cell(of_cluster['ttt_min_s'])}..{slowest} | {seeds} | "
                         f"{cell(of_cluster['aom_median_ms'])} | {cell(of_cluster['credit_bound'], 2)} | "
                         f"{cell(of_cluster.get('workers_cpu_wait_share'), 2)} | "
                         f"{cell(of_cluster.get('learner_wait_per_slice_ms'), 2)} |")
    return lines


def clusters_section(scenario, arms, summaries):
    lines = ["", "## Per cluster", ""]
    lines += table_header("| arm | cluster | env | env steps | final return | AoM mean (ms) | AoM peak (ms) | "
                          "delivered | sent | share |")
    for arm in arms:
        for cluster in scenario["clusters"]:
            of_cluster = summaries[arm["name"]]["clusters"][str(cluster["id"])]
            lines.append(f"| {arm['name']} | {cluster['id']} | {cluster['env']} | {cell(of_cluster['env_steps'], 0)} | "
                         f"{cell(of_cluster['final_return'])} | {cell(of_cluster['aom_mean_ms'])} | "
                         f"{cell(of_cluster['aom_peak_ms'])} | {cell(of_cluster['contributions'], 0)} | "
                         f"{cell(of_cluster['sent'], 0)} | {cell(of_cluster['share'], 3)} |")
    return lines


def bottleneck_section(scenario, arms, summaries):
    lines = ["", "## Bottleneck", ""]
    lines += table_header("| arm | forwarded pkts | drops | kernel drops (veth) | merges | bytes saved (MB) | CE marks | "
                          "FEEDBACK sent | mean depth (pkts) | mean sojourn (ms) |")
    for arm in arms:
        summary = summaries[arm["name"]]
        lines.append(f"| {arm['name']} | {cell(summary['forwarded_packets'], 0)} | {cell(summary['drops'], 0)} | "
                     f"{cell(summary['veth_drops'], 0)} | {cell(summary['merges'], 0)} | "
                     f"{cell((summary['bytes_saved'] or 0) / 1e6, 2)} | {cell(summary['marked'], 0)} | "
                     f"{cell(summary['feedback_sent'], 0)} | {cell(summary['mean_depth'], 1)} | "
                     f"{cell(summary['mean_sojourn_ms'], 2)} |")
    cross = scenario["cross_traffic"]
    if cross["enabled"]:
        lines += ["", f"Cross traffic: iperf3 UDP at {cross['rate']}bit/s into cluster {cross['to_cluster']}'s "
                      "learner port; loss per arm: "
                  + ", ".join(f"{a['name']} {cell(summaries[a['name']]['cross_lost_percent'], 1, '%')}" for a in arms)
                  + "."]
    return lines


def model_delivery_section(scenario, arms, results):
    """Only when an arm replicates MODEL: the learners' MODEL chunks per published version, per arm
    and cluster, median over the seeds (min..max)."""
    if not any(arm["model_delivery"] == "replicated" for arm in arms):
        return []
    lines = ["", "## Model delivery", "",
             "MODEL chunks each learner sent per published version (unicast copies plus copies to the "
             "cluster's group; learner.json `model`), median over the seeds (min..max). With replicated "
             "delivery the switches copy each group chunk to the cluster's workers (docs/switch.md).", ""]
    lines += table_header("| arm | delivery | cluster | chunks per version | seeds |")
    for arm in arms:
        for cluster in scenario["clusters"]:
            values = [v for v in (model_chunks_per_version(run["clusters"].get(str(cluster["id"]), {}))
                                  for run in results.get(arm["name"], {}).values()) if v is not None]
            span = f"{fmt_num(min(values), 2)}..{fmt_num(max(values), 2)}" if values else "-"
            lines.append(f"| {arm['name']} | {arm['model_delivery']} | c{cluster['id']} | "
                         f"{cell(statistics.median(values), 2) if values else '-'} ({span}) | {len(values)} |")
    return lines


VERIFY_TIMEOUT_S = 600


def verifier_path():
    """shesha-verify: $SHESHA_VERIFY, else the source tree's build (the lab's default --build-dir)."""
    return os.environ.get("SHESHA_VERIFY") or os.path.join(SOURCE_ROOT, "build", "tools", "verify", "shesha-verify")


def run_verifier(out, verifier):
    """Runs `shesha-verify check` on the report's scenario (configs/scenario.yaml) and writes its
    summary to verification.json ({"error": ...} if it refuses the scenario). Returns the summary,
    or None when there is nothing to check or no verifier."""
    scenario_file = os.path.join(out, "configs", "scenario.yaml")
    if not os.path.isfile(scenario_file) or not os.access(verifier, os.X_OK):
        return None
    summary_file = os.path.join(out, "verification.json")
    cex_dir = os.path.join(out, "verification")
    os.makedirs(cex_dir, exist_ok=True)
    try:
        done = subprocess.run([verifier, "check", scenario_file, "--summary", summary_file, "--out-dir", cex_dir,
                               "--log-level", "warn"], capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        summary = {"error": f"shesha-verify check did not finish within {VERIFY_TIMEOUT_S} s"}
    else:
        if done.returncode in (0, 1) and os.path.isfile(summary_file):
            with open(summary_file) as f:
                return json.load(f)
        message = (done.stderr or done.stdout).strip().splitlines()
        summary = {"error": message[-1] if message else f"shesha-verify exited {done.returncode}"}
    with open(summary_file, "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def verification_section(out, verifier=None):
    """The bounded model check of the scenario's shared port (shesha-verify check, docs/verification.md):
    verification.json if the report has it, else shesha-verify is run once and its summary kept. The
    result is one line, e.g. "fairness/responsiveness/AoM: verified to horizon 6", then the port,
    clusters and bounds checked and what the model abstracts."""
    lines = ["", "## Verification", ""]
    summary_file = os.path.join(out, "verification.json")
    if os.path.isfile(summary_file):
        with open(summary_file) as f:
            summary = json.load(f)
    else:
        summary = run_verifier(out, verifier or verifier_path())
    if summary is None:
        return lines + ["fairness/responsiveness/AoM: not checked (no configs/scenario.yaml, or shesha-verify not "
                        "built)"]
    if "error" in summary:
        return lines + [f"fairness/responsiveness/AoM: not checked: {summary['error']}"]
    lines += [f"**{summary['line']}**", "",
              f"`shesha-verify check` (bounded model, Z3; docs/verification.md) on {summary['port']}, clusters "
              + ", ".join(str(c) for c in summary["clusters"]) + ". Bounds:", ""]
    lines += [f"- {b}" for b in summary.get("bounds", [])]
    failed = {name: r for name, r in summary["results"].items() if not r["verified"]}
    for name, r in failed.items():
        lines.append(f"- {name}: counterexample at step {r.get('step', '?')}, written to "
                     f"`{os.path.relpath(r.get('counterexample', '?'), out)}` (`shesha-verify replay` runs it on the "
                     "real pipeline)")
    if summary.get("abstracted"):
        lines += ["", "Abstracted by the model:", ""] + [f"- {a}" for a in summary["abstracted"]]
    return lines


def figures_section(figures):
    lines = ["", "## Figures", ""]
    for title, file_name in figures:
        lines += [f"### {title}", "", f"![{title}]({file_name})", ""]
    return lines


def files_section(out, kind):
    return ["## Files", "",
            "- `configs/`: the scenario as given, with every default filled in (`scenario.effective.json`), and "
            "each arm's generated switch YAMLs under `raw/`",
            "- `raw/<arm>/seed-<s>/`: switch stats JSON and logs, live queue telemetry (`queues-*.csv`), "
            + ("learner metrics dirs and worker metrics" if kind == "drl" else "shesha-sink/shesha-gen JSON and logs"),
            "- `summary.json`: the numbers in these tables; `results.json`: every analysed number per arm and seed",
            "- `at-scale/`: the at-scale section's shesha-sim runs (`plan.json`; per run `runs/ARM-SIZE-sSEED/` with its "
            "CSVs and `command.txt`); `shesha-lab scale --full --out DIR` adds the rest of the study",
            f"- regenerate figures and this file: `tools/lab/shesha-lab replot {out}`", ""]


def write_report(out, scenario, kind, results):
    """Writes summary.json, the figures, report.md and results.json into out -> {arm: summary}."""
    arms = [a for a in scenario["arms"] if results.get(a["name"])]
    summaries = {a["name"]: arm_summary(scenario, results[a["name"]]) for a in arms}
    base = arms[0]["name"] if arms else None
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"processes": kind, "baseline": base, "arms": summaries}, f, indent=1)
    figures = plot_all(out, scenario, kind, results)
    lines = title_section(scenario, kind, arms)
    lines += headline_section(scenario, arms, summaries, base)
    lines += verification_section(out)
    lines += goals_section(scenario, arms, summaries, results)
    lines += faults_section(scenario, arms, results)
    lines += robustness_section(scenario, arms, results)
    lines += seeds_section(scenario, arms, summaries)
    lines += clusters_section(scenario, arms, summaries)
    lines += bottleneck_section(scenario, arms, summaries)
    lines += model_delivery_section(scenario, arms, results)
    lines += sim_check_section(out, scenario, results)
    lines += sim_section(out)
    lines += figures_section(figures)
    lines += files_section(out, kind)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=None)
    return summaries


def print_headline(scenario, summaries):
    """The headline table on stdout: per arm AoM, its ratio to the first arm, drops, merges, Jain
    and each cluster's time to target."""
    base = next(iter(summaries), None)
    print(f"{'arm':<10} {'AoM mean ms':>12} {'AoM ratio':>10} {'drops':>9} {'merges':>9} {'Jain':>7} "
          + " ".join(f"{'c' + str(c['id']) + ' ttt s':>10}" for c in scenario["clusters"]))
    for name, summary in summaries.items():
        aom_ratio = ratio(summary["aom_mean_ms"], summaries[base]["aom_mean_ms"])
        print(f"{name:<10} {cell(summary['aom_mean_ms']):>12} {cell(aom_ratio, 2):>10} {cell(summary['drops'], 0):>9} "
              f"{cell(summary['merges'], 0):>9} {cell(summary['jain'], 3):>7} "
              + " ".join(f"{cell(summary['clusters'][str(c['id'])]['time_to_target_s']):>10}"
                         for c in scenario["clusters"]))


# ----------------------------------------------------------------------------------------------
# Faults (issue 29): times to target with and without them, and what each fault cost.

def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ttt_cell(values):
    """'median (fastest..slowest)' over seeds; a seed that never reached the target counts as slowest."""
    reached = sorted(v for v in values if v is not None)
    if not values:
        return "n/a"
    median = median_or_none(values)
    slowest = f"{reached[-1]:.1f}" if reached and len(reached) == len(values) else "never"
    fastest = f"{reached[0]:.1f}" if reached else "never"
    return f"{'never' if median is None else f'{median:.1f}'} ({fastest}..{slowest})"


def fault_pairs(scenario, results, arm, twin, cid):
    """[(seed, time to target with faults, without)] over the seeds both arms ran."""
    pairs = []
    for seed in scenario["seeds"]:
        with_faults = results.get(arm, {}).get(str(seed))
        without = results.get(twin, {}).get(str(seed))
        if with_faults is None or without is None:
            continue
        pairs.append((seed, with_faults["clusters"].get(cid, {}).get("time_to_target_s"),
                      without["clusters"].get(cid, {}).get("time_to_target_s")))
    return pairs


def fault_goals(scenario, results, resolution):
    """Issue 29's goal per cluster: Shesha's median time to target under faults at most 1.5x its
    median without, and on no seed later than FIFO's under the same faults (beyond one evaluation
    interval) -> lines."""
    names = {a["name"] for a in scenario["arms"]}
    if not {"fifo", "shesha", "shesha-nofaults"} <= names:
        return []
    lines = ["", "### Goals (issue 29)", ""]
    for cluster in scenario["clusters"]:
        cid = str(cluster["id"])
        pairs = fault_pairs(scenario, results, "shesha", "shesha-nofaults", cid)
        faulted = median_or_none([p[1] for p in pairs])
        clean = median_or_none([p[2] for p in pairs])
        if faulted is None or clean is None:
            verdict = "not met" if faulted is None else "n/a"
            why = ("Shesha's median seed under faults did not reach the target" if faulted is None
                   else "Shesha's median seed without faults did not reach the target")
        else:
            verdict = "met" if faulted <= 1.5 * clean else "not met"
            why = f"median {faulted:.1f} s vs {clean:.1f} s: {faulted / clean:.2f}x"
        ratios = ", ".join(f"seed {s}: " + (f"{f / c:.2f}x" if f is not None and c else "never" if f is None else "n/a")
                           for s, f, c in pairs)
        lines.append(f"- Cluster {cid} ({cluster['env']}): Shesha's time to target under faults at most 1.5x its "
                     f"time without: **{verdict}** ({why}; {ratios}).")
        worse, seeds = [], 0
        for seed in scenario["seeds"]:
            shesha = results.get("shesha", {}).get(str(seed))
            fifo = results.get("fifo", {}).get(str(seed))
            if shesha is None or fifo is None:
                continue
            seeds += 1
            t_shesha = shesha["clusters"].get(cid, {}).get("time_to_target_s")
            t_fifo = fifo["clusters"].get(cid, {}).get("time_to_target_s")
            if (t_shesha is None and t_fifo is not None) or (
                    t_shesha is not None and t_fifo is not None and t_shesha > t_fifo + resolution[cid]):
                worse.append(str(seed))
        fifo_median = median_or_none([results.get("fifo", {}).get(str(s), {}).get("clusters", {}).get(cid, {})
                                      .get("time_to_target_s") for s in scenario["seeds"]
                                      if str(s) in results.get("fifo", {})])
        lines.append(f"- Cluster {cid}: Shesha under faults never later than FIFO under the same faults (more than "
                     f"one evaluation interval, {resolution[cid]:g} s): **{'met' if not worse else 'not met'}** "
                     f"(later on {len(worse)} of {seeds} seeds{': ' + ', '.join(worse) if worse else ''}; medians "
                     f"{'never' if faulted is None else f'{faulted:.1f}'} s vs "
                     f"{'never' if fifo_median is None else f'{fifo_median:.1f}'} s).")
    return lines


FAULT_COUNTERS = [  # key in the window counters -> column
    ("link_dropped", "link dropped"), ("link_duplicated", "link copies"), ("link_reordered", "link reordered"),
    ("queue_dropped", "switch queue drops"), ("presumed_lost", "worker: chunks presumed lost"),
    ("credit_timeouts", "worker: credit timeouts"), ("rejected", "learner: rejected"),
    ("duplicates", "learner: duplicates"), ("workers_expired", "learner: workers expired"),
]


def faults_section(scenario, arms, results):
    """The schedule, times to target with and without faults, goals, and per fault and arm the
    recovery, the contributions lost in its window and the counters that explain them (medians over
    seeds)."""
    events = (scenario.get("faults") or {}).get("events") or []
    faulted = [a for a in arms if a.get("_faults")]
    if not events or not faulted:
        return []
    lines = ["", "## Faults", "",
             "Applied in every run of " + ", ".join(f"`{a['name']}`" for a in faulted) + " (times on the run's clock, "
             "from the start of the learners and workers; the arms ending in `-nofaults` run the same seeds without "
             "them):", ""]
    for event in events:
        when = (f"from {event['from_s']:g} s to " + (f"{event['until_s']:g} s" if event["until_s"] else "the end")
                if event["kind"] == "link" else f"at {event['at_s']:g} s")
        lines.append(f"- {event_label(event)}, {when}")
    resolution = {str(c["id"]): eval_interval_s(c) for c in scenario["clusters"]}
    lines += ["", "### Time to target with and without faults", "",
              "Median over the seeds (fastest..slowest; never: not reached within the run) and every seed as "
              "with / without faults.", ""]
    lines += table_header("| arm | cluster | with faults (s) | without (s) | ratio of medians | per seed: with / without (s) |")
    names = {a["name"] for a in scenario["arms"]}
    for arm in faulted:
        twin = arm["name"] + "-nofaults"
        for cluster in scenario["clusters"]:
            cid = str(cluster["id"])
            pairs = fault_pairs(scenario, results, arm["name"], twin, cid) if twin in names else [
                (s, results.get(arm["name"], {}).get(str(s), {}).get("clusters", {}).get(cid, {}).get("time_to_target_s"),
                 None) for s in scenario["seeds"] if str(s) in results.get(arm["name"], {})]
            with_f, without = [p[1] for p in pairs], [p[2] for p in pairs]
            ratio_of = ratio(median_or_none(with_f), median_or_none(without)) if twin in names else None
            per_seed = "; ".join(f"{s}: {'never' if f is None else f'{f:.1f}'}" + (
                f" / {'never' if c is None else f'{c:.1f}'}" if twin in names else "") for s, f, c in pairs)
            lines.append(f"| {arm['name']} | {cid} | {_ttt_cell(with_f)} | "
                         f"{_ttt_cell(without) if twin in names else 'not run'} | {cell(ratio_of, 2, 'x')} | {per_seed} |")
    lines += fault_goals(scenario, results, resolution)
    lines += ["", "### What each fault cost", "",
              f"Per fault, medians over the seeds. **Recovery**: from the fault until the learner applied "
              f"contributions at {int(RECOVERED_FRACTION * 100)} % of its rate over the {EARLIER_RATE_S:g} s before "
              "it again, between two evaluations (so known to within one evaluation interval), counted only from "
              "the end of the fault (a restart) on; the count of seeds that recovered before the job stopped. "
              "**Sent / applied / lost**: contributions the affected clusters' workers sent and their learners "
              "applied from the fault's start to 2 s after its end (for a learner restart, applied counts both "
              "incarnations; contributions applied after the last checkpoint and lost with the killed process "
              "count as applied); lost = sent - applied, from counter samples taken about every second, so "
              "within about a second of traffic. Contributions merged at the switch count once per worker "
              "update on both sides.", ""]
    lines += table_header("| arm | fault | cluster | recovery (s) | recovered | sent | applied | lost |")
    for arm in faulted:
        runs = results.get(arm["name"], {})
        for index, event in enumerate(events):
            entries = [e for run in runs.values() for e in (run.get("faults") or []) if e["index"] == index]
            skipped = [e for e in entries if e.get("skipped")]
            done = [e for e in entries if not e.get("skipped")]
            if not done:
                lines.append(f"| {arm['name']} | {event_label(event)} | - | skipped on {len(skipped)} of "
                             f"{len(entries)} seeds ({skipped[0]['skipped'] if skipped else 'no data'}) | | | | |")
                continue
            cids = sorted({cid for e in done for cid in e["clusters"]})
            for cid in cids:
                of_cluster = [e["clusters"].get(cid, {}) for e in done]
                recovered = [c["recovery_s"] for c in of_cluster if c.get("recovery_s") is not None]
                whys = sorted({c["why"] for c in of_cluster if c.get("why")})
                recovered_cell = f"{len(recovered)} of {len(of_cluster)}" + (f" ({'; '.join(whys)})" if whys else "")
                lines.append(f"| {arm['name']} | {event_label(event)} | {cid} | {cell(_median(recovered), 1)} | "
                             f"{recovered_cell} | {cell(_median([e['counters'].get('sent') for e in done]), 0)} | "
                             f"{cell(_median([e['counters'].get('applied') for e in done]), 0)} | "
                             f"{cell(_median([e['counters'].get('lost') for e in done]), 0)} |")
    lines += ["", "Counters over each fault's window (medians over the seeds): the link's drops, copies and "
              "reorderings (shesha-impair), tail drops at the switch's bottleneck queues, the workers' chunks "
              "presumed lost after their credit timeout and their credit timeouts, the learners' rejected and "
              "duplicate chunks and workers they expired.", ""]
    lines += table_header("| arm | fault | " + " | ".join(name for _, name in FAULT_COUNTERS) + " |")
    for arm in faulted:
        runs = results.get(arm["name"], {})
        for index, event in enumerate(events):
            done = [e for run in runs.values() for e in (run.get("faults") or [])
                    if e["index"] == index and not e.get("skipped")]
            if done:
                lines.append(f"| {arm['name']} | {event_label(event)} | " + " | ".join(
                    cell(_median([e["counters"].get(key) for e in done]), 0) for key, _ in FAULT_COUNTERS) + " |")
    return lines
