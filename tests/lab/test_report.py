"""The report (tools/lab/shesha_lab/report.py, plots.py, cli.py): the goal lines for hand-made
summaries, the seed-by-seed section, number formatting, and a whole report written from a small
recorded report directory by `shesha-lab replot`."""
import json
import os

import pytest

from shesha_lab import cli
from shesha_lab.report import cell, fmt_num, goals_section, robustness_section
from shesha_lab.scenario import load_scenario

ARMS = [{"name": "fifo"}, {"name": "shesha"}]
CLUSTERS = {"seeds": [1, 2, 3], "clusters": [{"id": 1, "env": "CartPole-v1", "config": ""},
                                             {"id": 2, "env": "Acrobot-v1", "config": ""}]}


def summaries(fifo_ttt, shesha_ttt, fifo_aom, shesha_aom, fifo_jain=None, shesha_jain=None, jain=(None, None)):
    def one(ttts, aom, jain_contended, jain_any):
        return {"clusters": {"1": {"ttt_median_s": ttts[0]}, "2": {"ttt_median_s": ttts[1]}}, "aom_mean_ms": aom,
                "jain_contended": jain_contended, "jain": jain_any}
    return {"fifo": one(fifo_ttt, fifo_aom, fifo_jain, jain[0]), "shesha": one(shesha_ttt, shesha_aom, shesha_jain, jain[1])}


def test_goals_met():
    lines = goals_section(CLUSTERS, ARMS, summaries((20.0, None), (10.0, 15.0), 30.0, 10.0, 0.8, 0.97), {})
    assert lines == [
        "", "## Goals: full Shesha against FIFO", "",
        "- Cluster 1 (CartPole-v1) time to target at least 2x shorter: **met** (median 20.0 s vs 10.0 s: 2.00x).",
        "- Cluster 2 (Acrobot-v1) time to target at least 2x shorter: **met** (FIFO's median seed never reached the "
        "target; Shesha's did).",
        "- Mean AoM at most 1/3 of FIFO's: **met** (10.0 ms vs 30.0 ms: ratio 0.33).",
        "- Jain's index over the shared bottleneck at least 0.95: **met** (Shesha 0.970, FIFO 0.800; over each "
        "cluster's packets sent while another cluster also waited there, per unit of weight). FIFO showing the "
        "unfairness Shesha removes (FIFO below 0.95): **met**.",
        "- Seeds: 3 (1, 2, 3); a goal stated as met holds for the median, and the per-seed table below shows the spread.",
    ]


def test_goals_not_met():
    lines = goals_section(CLUSTERS, ARMS, summaries((15.0, 40.0), (10.0, None), 30.0, 10.5, 0.96, 0.94), {})
    assert lines[3:7] == [
        "- Cluster 1 (CartPole-v1) time to target at least 2x shorter: **not met** (median 15.0 s vs 10.0 s: 1.50x).",
        "- Cluster 2 (Acrobot-v1) time to target at least 2x shorter: **not met** (Shesha's median seed did not "
        "reach the target).",
        "- Mean AoM at most 1/3 of FIFO's: **not met** (10.5 ms vs 30.0 ms: ratio 0.35).",
        "- Jain's index over the shared bottleneck at least 0.95: **not met** (Shesha 0.940, FIFO 0.960; over each "
        "cluster's packets sent while another cluster also waited there, per unit of weight). FIFO showing the "
        "unfairness Shesha removes (FIFO below 0.95): **not met**.",
    ]


def test_goals_without_contention_use_delivered_jain():
    lines = goals_section(CLUSTERS, ARMS, summaries((None, None), (None, None), None, 5.0, jain=(0.95, 0.9)), {})
    assert lines[4:7] == [
        "- Cluster 2 (Acrobot-v1) time to target at least 2x shorter: **not met** (Shesha's median seed did not "
        "reach the target).",
        "- Mean AoM at most 1/3 of FIFO's: **not met** (5.0 ms vs n/a ms: ratio n/a).",
        "- Jain's index at least 0.95: **not met** (Shesha 0.900, FIFO 0.950; the switch reported no contributions "
        "sent while two clusters waited at one port, so this is over delivered update rates per worker).",
    ]


def test_goals_need_fifo_and_shesha():
    assert goals_section(CLUSTERS, [{"name": "fifo"}, {"name": "merge"}], {}, {}) == []


def test_robustness_section(write_file):
    config = write_file("cluster.yaml", "learner:\n  eval_interval_ms: 500\n")
    scenario = {"seeds": [1, 2], "clusters": [{"id": 1, "env": "A", "config": config},
                                              {"id": 2, "env": "B", "config": "/nonexistent.yaml"}]}

    def run(ttt1, aom1, ttt2, aom2):
        return {"clusters": {"1": {"time_to_target_s": ttt1, "aom_mean_ms": aom1},
                             "2": {"time_to_target_s": ttt2, "aom_mean_ms": aom2}}}
    results = {"fifo": {"1": run(10.0, 100.0, None, 40.0), "2": run(10.0, 100.0, 20.0, 40.0)},
               "shesha": {"1": run(10.4, 50.0, 30.0, 41.0), "2": run(11.0, 100.0, None, 20.0)}}
    lines = robustness_section(scenario, ARMS, results)
    assert "the learner evaluates every 0.5, 2 s" in lines[3]
    table = lines.index("### `shesha` against `fifo`")
    assert lines[table + 2:table + 8] == [
        "| seed | cluster | time to target fifo (s) | shesha (s) | AoM fifo (ms) | shesha (ms) | AoM ratio | shesha worse on |",
        "|---|---|---|---|---|---|---|---|",
        "| 1 | 1 | 10.0 | 10.4 | 100.0 | 50.0 | 0.50 | - |",
        "| 1 | 2 | never | 30.0 | 40.0 | 41.0 | 1.02 | AoM |",
        "| 2 | 1 | 10.0 | 11.0 | 100.0 | 100.0 | 1.00 | time |",
        "| 2 | 2 | 20.0 | never | 40.0 | 20.0 | 0.50 | time |",
    ]
    assert lines[table + 9:table + 11] == [
        "- Cluster 1 (A): `shesha` slower than `fifo` on **1 of 2** seeds, AoM higher on **0 of 2**; reached the "
        "target on 2 of 2 (`fifo`: 2).",
        "- Cluster 2 (B): `shesha` slower than `fifo` on **1 of 2** seeds, AoM higher on **1 of 2**; reached the "
        "target on 1 of 2 (`fifo`: 1).",
    ]
    assert robustness_section(scenario, ARMS[:1], results) == []


@pytest.mark.parametrize("value, args, text", [
    (1234.5, (), "1,234.5"), (0.5, (2,), "0.50"), (123456, (), "123,456"), (None, (), "n/a"), ("x", (), "n/a"),
    (float("nan"), (), "n/a"), (2.0, (2, "x"), "2.00x"), (99999.9, (0,), "100,000"),
])
def test_cell(value, args, text):
    assert cell(value, *args) == text


@pytest.mark.parametrize("value, args, text", [
    (2500000, (), "2.5M"), (1234.5, (), "1,234.5"), (1234.0, (0,), "1,234"), (12.3, (0,), "12"), (None, (), "n/a"),
])
def test_fmt_num(value, args, text):
    assert fmt_num(value, *args) == text


SCENARIO = """\
name: recorded
description: A small recorded report.
duration_s: 40
seeds: [1, 2]
clusters:
  - {id: 1, env: CartPole-v1, workers: 1, target_return: 475}
  - {id: 2, env: Acrobot-v1, workers: 1, target_return: -100}
arms:
  - {name: fifo, label: FIFO, aggregation: off, feedback: off, congestion_control: off}
  - {name: shesha, label: Shesha, aggregation: on, feedback: on, congestion_control: on, scheduling: drr}
"""
# arm -> cluster -> (time to target per seed, AoM mean) ; arm -> contended packets of clusters 1 and 2
TARGETS = {"fifo": {1: ((20.0, 22.0), 30.0), 2: ((None, None), 50.0)},
           "shesha": {1: ((10.0, 11.0), 10.0), 2: ((30.0, 34.0), 14.0)}}
CONTENDED = {"fifo": (30, 10), "shesha": (20, 20)}


@pytest.fixture
def report_dir(write_file, tmp_path):
    """A DRL report directory as `shesha-lab run` leaves it (without the simulator), made up."""
    scenario = load_scenario(write_file("scenario.yaml", SCENARIO))
    scenario.update({"_processes": "drl", "_command": "shesha-lab run recorded.yaml", "_started": "2026-01-02 03:04:05",
                     "_host": "testhost"})
    write_file("report/configs/scenario.effective.json", json.dumps(scenario, indent=1))
    for arm, clusters in TARGETS.items():
        for seed in (1, 2):
            run = f"report/raw/{arm}/seed-{seed}"
            meta = {"duration_s": 40, "wall_s": 41.0, "veth_drops": {"rx_dropped": 0, "tx_dropped": 1}}
            if arm == "shesha":  # the scheduler's figures (host_cpu.py); the FIFO arm has none (an older report)
                meta["host_cpu"] = {"workers-c2": {"cpu_s": 3.0, "wait_s": 1.0, "slices": 10, "processes": 1},
                                    "learner-c2": {"cpu_s": 1.0, "wait_s": 0.5, "slices": 250, "processes": 1}}
            write_file(f"{run}/meta.json", meta)
            for cid, (ttts, aom) in clusters.items():
                ttt = ttts[seed - 1]
                write_file(f"{run}/learner-c{cid}/learner.csv",
                           "wall_seconds,env_steps,eval_mean_return,aom_now_ms,aom_mean_ms,aom_peak_ms\n"
                           f"1,10,-400,{aom},{aom},{aom + 5}\n5,500,{-50 if ttt else -300},{aom},{aom},{aom + 5}\n")
                write_file(f"{run}/learner-c{cid}/learner.json",
                           {"target": {"reached": ttt is not None, "seconds": ttt}, "env_steps": 1000 * cid,
                            "chunks": {"contributions": 400 * cid}, "staleness": {"mean": 1.0, "histogram": [5, 5]},
                            "wall_seconds": 40})
                write_file(f"{run}/worker-c{cid}-w0.json", {"window": {"samples": [[1, 8, 8, 0], [2, 8, 4, 0]]},
                                                            "chunks": {"contributions_sent": 500 * cid}})
            write_file(f"{run}/switch-tor.json", {"uptime_s": 41, "feedback": {"sent": 0 if arm == "fifo" else 25},
                                                  "ports": [
                {"name": f"c{cid}-l", "tx_packets": 1000, "tx_bytes": 10 ** 6, "tx_contributions": 1200,
                 "shaper_rate_bps": 40000000,
                 "queue": {"dropped": 7 if arm == "fifo" else 0, "merged": 0 if arm == "fifo" else 50,
                           "bytes_saved": 0 if arm == "fifo" else 50000, "marked": 9, "mean_depth": 20.0,
                           "depth_max": 64, "mean_sojourn_us": 2500.0, "max_sojourn_us": 9000.0},
                 "clusters": [{"cluster": cid, "weight": 1, "contended_packets": CONTENDED[arm][cid - 1],
                               "contended_contributions": 0}]} for cid in (1, 2)]})
            write_file(f"{run}/queues-tor.csv",
                       "t_s,port,depth,depth_bytes,enqueued,merged,bytes_saved,dropped,dequeued,dequeued_bytes,"
                       "marked,sojourn_sum_ticks,mean_sojourn_ns\n0.25,c1-l,3,0,0,0,0,0,10,0,0,0,100000\n"
                       "0.5,c1-l,6,0,0,0,0,0,30,0,0,0,200000\n")
    return str(tmp_path / "report")


def test_replot_writes_the_whole_report(report_dir, capsys):
    assert cli.main(["replot", report_dir]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["arm", "AoM", "mean", "ms", "AoM", "ratio", "drops", "merges", "Jain", "c1", "ttt",
                                  "s", "c2", "ttt", "s"]
    assert printed[1].split() == ["fifo", "40.0", "1.00", "14", "0", "0.800", "21.0", "n/a"]
    assert printed[2].split() == ["shesha", "12.0", "0.30", "0", "100", "1.000", "10.5", "32.0"]
    assert printed[3] == f"shesha-lab: regenerated {report_dir}/report.md and its figures"
    with open(os.path.join(report_dir, "report.md")) as f:
        report = f.read().split("\n")
    assert [line for line in report if line.startswith("#")] == [
        "# Shesha lab report: recorded", "## Headline", "## Verification", "## Goals: full Shesha against FIFO", "## Seed by seed",
        "### `shesha` against `fifo`", "## Time to target over seeds", "## Per cluster", "## Bottleneck",
        "## Figures", "### Return vs wall time", "### Return vs environment steps", "### Age-of-Model vs time",
        "### Sending window of worker 0 vs time", "### Queue depth and sojourn at the bottleneck",
        "### Version staleness CDF", "### Per-cluster share of the bottleneck and Jain's index", "## Files"]
    goals = [line for line in report if line.startswith("- ") and "**" in line and "Cluster" in line and "2x" in line]
    assert goals == [
        "- Cluster 1 (CartPole-v1) time to target at least 2x shorter: **met** (median 21.0 s vs 10.5 s: 2.00x).",
        "- Cluster 2 (Acrobot-v1) time to target at least 2x shorter: **met** (FIFO's median seed never reached "
        "the target; Shesha's did)."]
    assert "- Mean AoM at most 1/3 of FIFO's: **met** (12.0 ms vs 40.0 ms: ratio 0.30)." in report
    # No configs/scenario.yaml in this made-up directory: nothing for shesha-verify to check.
    assert ("fairness/responsiveness/AoM: not checked (no configs/scenario.yaml, or shesha-verify not built)"
            in report)
    assert ("| fifo | agg off, fb off, cc off | 21.0 | not reached (0/2) | 1.00x | 40.0 | 1.00 | 14 | 0 | 0.800 | "
            "0.900 |") in report  # delivered: 10 and 20 updates/s, (10 + 20)^2 / (2 (10^2 + 20^2))
    assert ("| shesha | agg on, fb on, cc on | 10.5 | 32.0 | 2.00x | 12.0 | 0.30 | 0 | 100 | 1.000 | 0.900 |") in report
    # Workers waiting 1 of 4 runnable seconds; the learner 0.5 s over 250 slices.
    assert "| shesha | 2 | 32.0 | 30.0..34.0 | 30.0, 34.0 | 14.0 | 0.50 | 0.25 | 2.00 |" in report
    assert "| shesha | 1 | 10.5 | 10.0..11.0 | 10.0, 11.0 | 10.0 | 0.50 | n/a | n/a |" in report
    assert "| fifo | 2 | never | n/a..never | never, never | 50.0 | 0.50 | n/a | n/a |" in report
    assert report[-2] == f"- regenerate figures and this file: `tools/lab/shesha-lab replot {report_dir}`"
    for name in ("return_vs_time.png", "return_vs_steps.png", "aom_vs_time.png", "window_vs_time.png",
                 "queue_vs_time.png", "staleness_cdf.png", "share.png", "summary.json", "results.json"):
        assert os.path.getsize(os.path.join(report_dir, name)) > 0, name
    with open(os.path.join(report_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["baseline"] == "fifo" and summary["processes"] == "drl"
    assert summary["arms"]["shesha"]["clusters"]["2"]["ttt_median_s"] == 32.0
    assert summary["arms"]["fifo"]["jain_contended"] == 0.8


def test_replot_refuses_other_dirs(tmp_path, capsys):
    assert cli.main(["replot", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"shesha-lab: {tmp_path}: not a shesha-lab report directory "
                                       "(no configs/scenario.effective.json)\n")


def test_check_prints_the_plan(write_file, capsys):
    assert cli.main(["check", write_file("scenario.yaml", SCENARIO)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "name: recorded"
    assert lines[-2] == ("# 4 hosts: c1-l=10.77.1.10@tor, c1-w0=10.77.1.11@tor, c2-l=10.77.1.20@tor, "
                         "c2-w0=10.77.1.21@tor")
    assert lines[-1] == "# rack MTU 1500 (largest chunk 256 elements: a 1100-byte datagram)"


def test_parse_seeds():
    assert cli.parse_seeds("4-13") == list(range(4, 14))
    assert cli.parse_seeds("1-3,7,2") == [1, 2, 3, 7]
    for bad in ("5-3", "x", "1-2000", ""):
        with pytest.raises(Exception):
            cli.parse_seeds(bad)


def test_model_delivery_section():
    """Chunks per published version per arm and cluster, median (min..max) over the seeds; absent when
    no arm replicates."""
    from shesha_lab.report import model_delivery_section
    scenario = {"clusters": [{"id": 1}]}
    unicast = {"name": "u", "model_delivery": "unicast"}
    replicated = {"name": "r", "model_delivery": "replicated"}

    def run(chunks, group, versions):
        return {"clusters": {"1": {"learner_summary": {"model": {
            "chunks_sent": chunks, "group_chunks_sent": group, "versions_published": versions}}}}}
    results = {"u": {"1": run(300, 0, 10), "2": run(400, 0, 10), "3": run(380, 0, 10)},
               "r": {"1": run(4, 100, 10), "2": run(0, 90, 9), "3": run(2, 120, 10)}}
    lines = model_delivery_section(scenario, [unicast, replicated], results)
    assert "| u | unicast | c1 | 38.00 (30.00..40.00) | 3 |" in lines
    assert "| r | replicated | c1 | 10.40 (10.00..12.20) | 3 |" in lines
    assert model_delivery_section(scenario, [unicast], {"u": results["u"]}) == []


VERIFIED = {"input": "configs/scenario.yaml", "line": "fairness/responsiveness/AoM: verified to horizon 6",
            "horizon": 6,
            "results": {"fairness": {"verified": True, "seconds": 0.6}, "responsiveness": {"verified": True,
                                                                                          "seconds": 0.01},
                        "aom": {"verified": True, "seconds": 0.4}},
            "port": "the shared learner port (learners) of switch tor, arm shesha", "clusters": [1, 2],
            "bounds": ["queue: 128 packets per class, marking at 32 -> 4 slots, marking at 1 (the same fraction, "
                       "rounded)"],
            "abstracted": ["switches[0].bottleneck.rate: 10M: the model counts time in steps of one departure"]}


def test_verification_section_from_a_recorded_summary(tmp_path):
    from shesha_lab.report import verification_section
    (tmp_path / "verification.json").write_text(json.dumps(VERIFIED))
    assert verification_section(str(tmp_path), verifier="/nonexistent") == [
        "", "## Verification", "", "**fairness/responsiveness/AoM: verified to horizon 6**", "",
        "`shesha-verify check` (bounded model, Z3; docs/verification.md) on the shared learner port (learners) of "
        "switch tor, arm shesha, clusters 1, 2. Bounds:", "",
        "- queue: 128 packets per class, marking at 32 -> 4 slots, marking at 1 (the same fraction, rounded)",
        "", "Abstracted by the model:", "",
        "- switches[0].bottleneck.rate: 10M: the model counts time in steps of one departure"]


def test_verification_section_names_a_counterexample_and_a_refusal(tmp_path):
    from shesha_lab.report import verification_section
    failed = json.loads(json.dumps(VERIFIED))
    failed["line"] = "responsiveness/AoM: verified to horizon 6; fairness: counterexample within horizon 6"
    failed["results"]["fairness"] = {"verified": False, "seconds": 1.0, "step": 2,
                                     "counterexample": str(tmp_path / "verification" / "scenario-fairness.json")}
    (tmp_path / "verification.json").write_text(json.dumps(failed))
    lines = verification_section(str(tmp_path), verifier="/nonexistent")
    assert lines[3] == "**responsiveness/AoM: verified to horizon 6; fairness: counterexample within horizon 6**"
    assert ("- fairness: counterexample at step 2, written to `verification/scenario-fairness.json` "
            "(`shesha-verify replay` runs it on the real pipeline)") in lines
    (tmp_path / "verification.json").write_text(json.dumps({"error": "configs/scenario.yaml: links: not modelled"}))
    assert verification_section(str(tmp_path), verifier="/nonexistent")[3:] == [
        "fairness/responsiveness/AoM: not checked: configs/scenario.yaml: links: not modelled"]


def built_verifier():
    from shesha_lab.report import verifier_path
    path = verifier_path()
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built")
    return path


def test_verification_section_runs_shesha_verify_on_the_scenario(tmp_path, source_root):
    """The lab's fairness scenario, as a report directory keeps it: verified, and kept in verification.json."""
    from shesha_lab.report import verification_section
    verifier = built_verifier()
    (tmp_path / "configs").mkdir()
    with open(os.path.join(source_root, "configs", "lab-fairness.yaml")) as f:
        (tmp_path / "configs" / "scenario.yaml").write_text(f.read())
    lines = verification_section(str(tmp_path), verifier=verifier)
    assert lines[3] == "**fairness/responsiveness/AoM: verified to horizon 6**"
    assert ("`shesha-verify check` (bounded model, Z3; docs/verification.md) on the shared learner port (learners) "
            "of switch tor, arm shesha, clusters 1, 2. Bounds:") in lines
    assert "- switches[0].bottleneck.rate: 10M: the model counts time in steps of one departure" in lines
    with open(tmp_path / "verification.json") as f:
        kept = json.load(f)
    assert kept["line"] == "fairness/responsiveness/AoM: verified to horizon 6"
    assert all(r["verified"] for r in kept["results"].values())
    # A second report reads the kept summary instead of running the verifier again.
    assert verification_section(str(tmp_path), verifier="/nonexistent") == lines


def test_verification_section_reports_what_the_verifier_refuses(tmp_path, source_root):
    from shesha_lab.report import verification_section
    verifier = built_verifier()
    (tmp_path / "configs").mkdir()
    with open(os.path.join(source_root, "configs", "lab-fairness.yaml")) as f:
        text = f.read()
    # Only the FIFO arm, whose senders ignore marks: not something the model represents.
    text = text[:text.index("\narms:")] + "\narms:\n  - {name: fifo, aggregation: off, feedback: off, " \
        "congestion_control: off, scheduling: fifo}\n"
    (tmp_path / "configs" / "scenario.yaml").write_text(text)
    lines = verification_section(str(tmp_path), verifier=verifier)
    assert lines[3].startswith("fairness/responsiveness/AoM: not checked: ")
    assert "arms[0].congestion_control is off (arm fifo)" in lines[3]
