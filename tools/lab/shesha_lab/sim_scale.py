"""At scale: the same scenario shape in shesha-sim (the switch pipeline itself, simulated links, with
MODEL and CREDIT on the way back), run after the lab's arms (out/sim/summary.csv), and its report
section."""
import os
import subprocess

from .analysis import median_or_none
from .processes import binaries
from .raw_files import read_csv_rows

SIM_SIZES = (256, 1024)
SIM_SEEDS = (1, 2, 3)
SIM_ARMS = {  # the lab's two ends: plain FIFO against full Shesha
    "fifo": ["queue.aggregation=false", "queue.fair=false", "transport.window_control=false",
             "transport.switch_feedback=false"],
    "shesha": ["queue.aggregation=true", "queue.fair=true", "transport.window_control=true",
               "transport.switch_feedback=true"],
}
# How the learners' models reach the workers (shesha-sim model.delivery): one copy per worker, or one
# per cluster that the switch replicates (issue 25). Both directions of every link are simulated.
SIM_DELIVERIES = ("unicast", "replicated")


def sim_command(sim, scenario, sim_dir, arm, settings, size, counts, seed, delivery="unicast"):
    """The shesha-sim command for one arm, delivery, size and seed: the scenario's clusters with
    counts[i] workers each (size in all) on 100 Gb/s links, offered load twice the learners' port.
    Labelled ARM-DELIVERY-SIZE."""
    chunks, elems = 8, 256
    frame_bits = (42 + 48 + 4 * elems + 24) * 8
    compute_us = sum(counts) * chunks * frame_bits / (2 * 100e9) * 1e6  # offered = 2 x 100 Gb/s
    cmd = [sim, "-q", "-o", sim_dir, "--append", "-l", f"{arm}-{delivery}-{size}", "--set", f"seed={seed}",
           "--set", f"model.delivery={delivery}",
           "--set", f"workload.clusters={len(scenario['clusters'])}",
           "--set", f"workload.cluster_workers={','.join(map(str, counts))}",
           "--set", f"workload.chunks={chunks}", "--set", f"workload.chunk_elems={elems}",
           "--set", f"workload.compute_us={compute_us:.3f}", "--set", "duration_ms=20",
           "--set", "links.learner_gbps=100", "--set", "links.host_gbps=100",
           "--set", f"topology.shared_bottleneck={'true' if scenario['learners'] == 'shared' else 'false'}"]
    for setting in settings:
        cmd += ["--set", setting]
    return cmd


def run_sim_scale(scenario, build, out):
    """The scenario's clusters scaled to 256 and 1,024 workers on 100 Gb/s links, sharing the learners'
    port if the lab's learners do; offered load twice that port's rate. Writes out/sim/summary.csv."""
    sim = binaries(build)["sim"]
    if not os.path.isfile(sim):
        print(f"shesha-lab: {sim} not built: no simulator section", flush=True)
        return
    sim_dir = os.path.join(out, "sim")
    os.makedirs(sim_dir, exist_ok=True)
    summary_csv = os.path.join(sim_dir, "summary.csv")
    if os.path.exists(summary_csv):
        os.remove(summary_csv)
    sizes = [c["workers"] for c in scenario["clusters"]]
    for size in SIM_SIZES:
        # Each cluster keeps its share of the scenario's workers (at least one each).
        counts = [max(1, round(size * w / sum(sizes))) for w in sizes]
        for arm, settings in SIM_ARMS.items():
            for delivery in SIM_DELIVERIES:
                for seed in SIM_SEEDS:
                    cmd = sim_command(sim, scenario, sim_dir, arm, settings, size, counts, seed, delivery)
                    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    if result.returncode != 0:
                        print(f"shesha-lab: shesha-sim failed ({' '.join(cmd)}):\n{result.stdout[-1000:]}", flush=True)
                        return
        print(f"   simulator: {size} workers done", flush=True)


def _range(xs, fmt):
    return f"{fmt.format(median_or_none(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def sim_section(out):
    """The report's "At scale" section from out/sim/summary.csv ([] without it): medians over the
    seeds (min..max) per size, arm and model delivery."""
    rows = read_csv_rows(os.path.join(out, "sim", "summary.csv"))
    if not rows:
        return []
    lines = ["", "## At scale: the same shape in shesha-sim", "",
             "The scenario's clusters scaled to 256 and 1,024 workers (each cluster keeping its share of the workers) "
             "on 100 Gb/s links (the learners' port shared "
             "as in the lab when `learners: shared`), offered load twice the learners' port, 20 ms of generation; "
             "every switch is the shesha-switch pipeline itself (docs/simulation.md). Medians over seeds "
             f"{', '.join(map(str, SIM_SEEDS))} (min..max). FIFO: no merging, no window, no FEEDBACK; Shesha: "
             "merging, DRR fair shares, window and FEEDBACK. MODEL traffic is modelled: the learners publish "
             "every 5 ms and answer the workers' model requests, and every MODEL and CREDIT crosses the learner "
             "port's downlink and the switch; unicast sends one copy per worker, replicated one per cluster that "
             "the switch fans out (docs/simulation.md, \"MODEL traffic\"). Staleness counts published versions, "
             "as the learner does.", "",
             "Jain: over the clusters' contended service at the switch ports (packets sent while another "
             "cluster also waited, per unit of weight), as in the lab's headline; Jain delivered: over the "
             "contributions applied per worker. Up / down: the learner port's utilisation toward the learners "
             "(gradients) and from them (MODEL and CREDIT).", "",
             "| workers | arm | model delivery | AoM mean (us) | Jain | Jain delivered | contributions dropped | "
             "staleness mean | up / down utilisation | MODEL MB down | workers without a model |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_label = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    for size in SIM_SIZES:
        for arm in SIM_ARMS:
            for delivery in SIM_DELIVERIES:
                runs = by_label.get(f"{arm}-{delivery}-{size}", [])
                if not runs:
                    continue
                aom = [float(r["aom_mean_us"]) for r in runs]
                jain_delivered = [float(r["jain_fairness"]) for r in runs]
                jain_contended = [float(r.get("jain_contended") or 0) for r in runs]
                dropped = [100 * float(r["contributions_dropped"]) / max(1.0, float(r["contributions_sent"])) for r in runs]
                staleness = [float(r["staleness_mean"]) for r in runs]
                up = [float(r.get("learner_up_utilisation") or 0) for r in runs]
                down = [float(r.get("learner_down_utilisation") or 0) for r in runs]
                model_mb = [float(r.get("learner_down_model_bytes") or 0) / 1e6 for r in runs]
                without = [float(r.get("workers_without_model") or 0) for r in runs]
                lines.append(
                    f"| {size} | {arm} | {delivery} | {_range(aom, '{:.1f}')} | {_range(jain_contended, '{:.3f}')} | "
                    f"{_range(jain_delivered, '{:.3f}')} | {_range(dropped, '{:.1f}')} % | "
                    f"{median_or_none(staleness):.2f} | {median_or_none(up):.2f} / {median_or_none(down):.2f} | "
                    f"{median_or_none(model_mb):.1f} | {median_or_none(without):.0f} |")
    return lines
