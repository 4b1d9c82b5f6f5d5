"""The report's figures (matplotlib, Agg): learning curves, AoM, windows, queue depth and sojourn,
staleness CDF and per-cluster shares with Jain's index. plot_all() -> [(title, file name)]."""
import os

from .analysis import mean
from .fault_analysis import fault_span


def plot_all(out, scenario, kind, results):
    """Every figure the results have data for, written into out -> [(title, file name)] in report order."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    arms = [a["name"] for a in scenario["arms"] if results.get(a["name"])]
    figures = []
    plot = _Plotter(plt, out, scenario, results, arms, figures)
    if kind == "drl":
        plot.per_cluster("Return vs wall time", "return_vs_time.png", "return", "wall time (s)",
                         lambda c: [(r["t_s"], r["return"]) for r in c.get("series", [])
                                    if r.get("t_s") is not None and r.get("return") is not None])
        plot.per_cluster("Return vs environment steps", "return_vs_steps.png", "return", "env steps",
                         lambda c: [(r["env_steps"], r["return"]) for r in c.get("series", [])
                                    if r.get("env_steps") is not None and r.get("return") is not None])
        plot.per_cluster("Age-of-Model vs time", "aom_vs_time.png", "AoM (ms)", "wall time (s)",
                         lambda c: c.get("aom_series"))
    else:
        plot.per_cluster("Updates delivered to the learner vs time (stand-in for return)", "delivered_vs_time.png",
                         "contributions delivered", "time (s)", lambda c: c.get("delivered_series"))
    if kind == "drl":
        plot.per_cluster("Sending window of worker 0 vs time", "window_vs_time.png", "window (chunks)",
                         "wall time (s)", lambda c: ((c.get("windows") or {}).get("series") or {}).get("0"))
    plot.queues()
    if kind == "drl":
        plot.staleness_cdf()
    plot.shares()
    return figures


class _Plotter:
    def __init__(self, plt, out, scenario, results, arms, figures):
        self.plt, self.out, self.scenario, self.results, self.arms = plt, out, scenario, results, arms
        self.figures = figures
        self.cids = [str(c["id"]) for c in scenario["clusters"]]
        self.colors = {arm: f"C{i}" for i, arm in enumerate(arms)}
        faulted = [a for a in scenario["arms"] if a.get("_faults") and a["name"] in arms]
        self.fault_events = (scenario.get("faults") or {}).get("events") or [] if faulted else []
        self.faulted_runs = [r for a in faulted for r in results[a["name"]].values()]

    def mark_faults(self, ax, offset):
        """Shades each fault's time on ax (run clock minus offset: the plot's clock), labelled at the
        top; link faults that last the whole run are named in the title instead."""
        if not self.fault_events or offset is None:
            return
        whole = []
        for event in self.fault_events:
            start, end, short = fault_span(event, self.scenario["duration_s"])
            if start is None:
                whole.append(short)
                continue
            ax.axvspan(start - offset, max(end, start + 0.2) - offset, color="red" if event["kind"] != "link" else
                       "orange", alpha=0.15, lw=0)
            ax.text(start - offset, 1.0, short, transform=ax.get_xaxis_transform(), fontsize=6, rotation=90,
                    va="top", ha="right", color="darkred")
        if whole:
            ax.set_title(ax.get_title() + "\nfaults shaded; all run: " + "; ".join(whole), fontsize=8)

    def median_offset(self, key, name):
        """The median over the faulted runs of where a plot's clock started on the run's clock."""
        values = [r.get(key, {}).get(name) for r in self.faulted_runs]
        values = sorted(v for v in values if v is not None)
        return values[len(values) // 2] if values else None

    def cluster(self, cid):
        return next(c for c in self.scenario["clusters"] if str(c["id"]) == cid)

    def per_cluster(self, title, file_name, ylabel, xlabel, getter):
        """One panel per cluster, a line per arm and seed (the first seed bold) of getter(cluster result)."""
        fig, axes = self.plt.subplots(1, len(self.cids), figsize=(5.5 * len(self.cids), 4), squeeze=False)
        any_data = False
        for ax, cid in zip(axes[0], self.cids):
            cluster = self.cluster(cid)
            for arm in self.arms:
                for j, (_seed, result) in enumerate(self.results[arm].items()):
                    points = getter(result["clusters"].get(cid, {}))
                    if points:
                        any_data = True
                        xs, ys = zip(*points)
                        ax.plot(xs, ys, color=self.colors[arm], alpha=0.9 if j == 0 else 0.5,
                                label=arm if j == 0 else None)
            if "return" in ylabel.lower():
                ax.axhline(cluster["target_return"], color="grey", linestyle=":", label="target")
            ax.set_title(f"cluster {cid}: {cluster['env']}")
            if xlabel == "wall time (s)":
                self.mark_faults(ax, self.median_offset("learner_clock_offset_s", cid))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        if any_data:
            fig.savefig(os.path.join(self.out, file_name), dpi=110)
            self.figures.append((title, file_name))
        self.plt.close(fig)

    def queues(self):
        """Queue depth and sojourn at the bottleneck(s), first seed of every arm."""
        ports = sorted({(switch, port) for arm in self.arms for result in self.results[arm].values()
                        for switch, of_switch in result["switches"].items() for port in of_switch["queue_series"]})
        if not ports:
            return
        fig, axes = self.plt.subplots(2, len(ports), figsize=(5.5 * len(ports), 6.5), squeeze=False)
        for k, (switch, port) in enumerate(ports):
            for arm in self.arms:
                first_seed = next(iter(self.results[arm].values()))
                series = first_seed["switches"].get(switch, {}).get("queue_series", {}).get(port, [])
                if series:
                    axes[0][k].plot([q[0] for q in series], [q[1] for q in series], color=self.colors[arm],
                                    label=arm, lw=0.8)
                    sojourn = [(q[0], q[2]) for q in series if q[2] is not None]
                    if sojourn:
                        axes[1][k].plot(*zip(*sojourn), color=self.colors[arm], label=arm, lw=0.8)
            axes[0][k].set_title(f"{switch}/{port}: queue depth")
            axes[0][k].set_ylabel("packets")
            axes[1][k].set_title(f"{switch}/{port}: mean sojourn per interval")
            axes[1][k].set_ylabel("ms")
            axes[1][k].set_xlabel("time since switch start (s)")
            offset = self.median_offset("telemetry_offset_s", switch)
            for ax in (axes[0][k], axes[1][k]):
                self.mark_faults(ax, -offset if offset is not None else None)
                ax.grid(alpha=0.3)
                ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(self.out, "queue_vs_time.png"), dpi=110)
        self.plt.close(fig)
        self.figures.append(("Queue depth and sojourn at the bottleneck", "queue_vs_time.png"))

    def staleness_cdf(self):
        """Per cluster, the CDF of applied gradients' version staleness over every seed, per arm."""
        fig, axes = self.plt.subplots(1, len(self.cids), figsize=(5.5 * len(self.cids), 4), squeeze=False)
        any_data = False
        for ax, cid in zip(axes[0], self.cids):
            for arm in self.arms:
                histogram = {}
                for result in self.results[arm].values():
                    for staleness, count in (result["clusters"].get(cid, {}).get("staleness") or {}).items():
                        histogram[int(staleness)] = histogram.get(int(staleness), 0) + count
                if histogram:
                    any_data = True
                    xs = sorted(histogram)
                    total = sum(histogram.values())
                    accumulated, ys = 0, []
                    for x in xs:
                        accumulated += histogram[x]
                        ys.append(accumulated / total)
                    ax.step(xs, ys, where="post", color=self.colors[arm], label=arm)
            ax.set_title(f"cluster {cid}: version staleness CDF")
            ax.set_xlabel("staleness (model versions)")
            ax.set_ylabel("fraction of gradients")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        if any_data:
            fig.savefig(os.path.join(self.out, "staleness_cdf.png"), dpi=110)
            self.figures.append(("Version staleness CDF", "staleness_cdf.png"))
        self.plt.close(fig)

    def shares(self):
        """Per-cluster share of the bottleneck (contended service if any, else delivered updates) as
        stacked bars per arm, with Jain's index above each."""
        fig, ax = self.plt.subplots(figsize=(6, 3.5))
        bottom = [0.0] * len(self.arms)
        contended = any(r.get("jain_contended") is not None for arm in self.arms for r in self.results[arm].values())
        key = "contended_share" if contended else "share"
        for i, cid in enumerate(self.cids):
            values = [mean([r["clusters"][cid].get(key) for r in self.results[arm].values()]) or 0
                      for arm in self.arms]
            ax.bar(self.arms, values, bottom=bottom, label=f"cluster {cid}", color=f"C{i + 5}")
            bottom = [b + v for b, v in zip(bottom, values)]
        for i, arm in enumerate(self.arms):
            index = mean([r["jain"] for r in self.results[arm].values()])
            ax.text(i, 1.02, f"Jain {index:.3f}" if index is not None else "", ha="center", fontsize=8)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("share of contended packets" if contended else "share of delivered updates")
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        fig.savefig(os.path.join(self.out, "share.png"), dpi=110)
        self.plt.close(fig)
        self.figures.append(("Per-cluster share of the bottleneck and Jain's index", "share.png"))


def at_scale_returns(path, plan, results):
    """The at-scale section's figure (sim_scale.py): evaluation return against virtual time, a row of
    panels per size and a panel per job, a line per arm (colour) and seed (the first seed bold), the
    target dotted; from each run's curve.csv (shesha-sim's training series). -> True if written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = []
    for run in plan["runs"]:
        if run["size"] not in sizes:
            sizes.append(run["size"])
    clusters = plan["clusters"]
    if not sizes or not results:
        return False
    fig, axes = plt.subplots(len(sizes), len(clusters), figsize=(5.5 * len(clusters), 3.4 * len(sizes)),
                             squeeze=False)
    colors = {"fifo": "C0", "shesha": "C1"}
    any_data = False
    for row, size in enumerate(sizes):
        for col, cluster in enumerate(clusters):
            ax = axes[row][col]
            labelled = set()
            for result in sorted(results.values(), key=lambda r: (r["run"]["arm"], r["run"]["seed"])):
                run = result["run"]
                if run["size"] != size:
                    continue
                points = result["curve"].get(str(col)) or []
                if not points:
                    continue
                any_data = True
                xs, ys = zip(*points)
                first = run["arm"] not in labelled
                ax.plot(xs, ys, color=colors.get(run["arm"], "C2"), alpha=0.9 if first else 0.45,
                        lw=1.4 if first else 0.9, label=run["arm"] if first else None)
                labelled.add(run["arm"])
            ax.axhline(cluster["target_return"], color="grey", linestyle=":", label="target")
            ax.set_title(f"{size:,} workers: {cluster['env']}", fontsize=10)
            ax.set_xlabel("virtual time (s)")
            ax.set_ylabel("evaluation return")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    if any_data:
        fig.savefig(path, dpi=100)
    plt.close(fig)
    return any_data
