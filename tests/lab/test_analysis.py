"""The analysis (tools/lab/shesha_lab/analysis.py and raw_files.py) on small hand-made recorded
runs: time to target, AoM from recorded series, Jain's index, shares, queue telemetry, the summary
over seeds and the seed-by-seed verdicts, each with its exact expected number."""
import pytest

from shesha_lab.analysis import (analyse_run, arm_summary, jain, median_or_none, seed_verdicts, time_average,
                                 time_to_target)
from shesha_lab.raw_files import queue_series, read_aom_series, read_learner_series, read_staleness, sink_progress
from shesha_lab.scenario import load_scenario
from shesha_lab.topology import topology

SCENARIO = """\
name: recorded
duration_s: 7
seeds: [1]
clusters:
  - {id: 1, env: CartPole-v1, workers: 2, target_return: 475}
  - {id: 2, env: Acrobot-v1, workers: 1, target_return: -100}
arms:
  - {name: fifo, aggregation: off, feedback: off, congestion_control: off}
"""
QUEUE_HEADER = ("t_s,port,depth,depth_bytes,enqueued,merged,bytes_saved,dropped,dequeued,dequeued_bytes,marked,"
                "sojourn_sum_ticks,mean_sojourn_ns\n")


def port(name, dropped=0, merged=0, clusters=None, tx_packets=100):
    entry = {"name": name, "tx_packets": tx_packets, "tx_bytes": 1000, "tx_contributions": 150,
             "shaper_rate_bps": 20000000,
             "queue": {"dropped": dropped, "merged": merged, "bytes_saved": 2000 * merged, "marked": 3,
                       "mean_depth": 4.0, "depth_max": 9, "mean_sojourn_us": 1500.0, "max_sojourn_us": 4000.0}}
    if clusters is not None:
        entry["clusters"] = clusters
    return entry


@pytest.fixture
def recorded_run(write_file, tmp_path):
    """A DRL run of SCENARIO: cluster 1 reaches its target (learner.json says at 5.5 s), cluster 2's
    learner records AoM only as its instantaneous series; cluster 1's port had 30 contended
    packets, cluster 2's 10."""
    run = "raw/fifo/seed-1"
    write_file(f"{run}/meta.json", {"duration_s": 7, "wall_s": 9.5, "veth_drops": {"rx_dropped": 2, "tx_dropped": 3}})
    write_file(f"{run}/learner-c1/learner.csv",
               "wall_seconds,env_steps,version,eval_mean_return,aom_now_ms,aom_mean_ms,aom_peak_ms\n"
               "1.0,0,1,10,0,0,0\n2.0,100,5,50,20,15,25\n4.0,300,9,200,10,14,30\n6.0,500,12,480,40,20,45\n"
               "8.0,700,15,490,5,18,45\n")
    write_file(f"{run}/learner-c1/learner.json",
               {"target": {"reached": True, "seconds": 5.5, "env_steps": 450},
                "chunks": {"contributions": 700, "merged": 30}, "staleness": {"mean": 1.5, "histogram": [10, 0, 5]},
                "env_steps": 800, "wall_seconds": 9, "eval": {"last_mean_return": 490}})
    write_file(f"{run}/worker-c1-w0.json", {"window": {"samples": [[0.5, 4, 4, 0], [1.0, 8, 2, 0], [1.5, 8, 8, 1],
                                                                   [2.0, 8, 9, 0]]},
                                            "chunks": {"contributions_sent": 400}})
    write_file(f"{run}/worker-c1-w1.json", {"window": {"samples": [[0.5, 4, 1, 0]]},
                                            "chunks": {"contributions_sent": 350}})
    write_file(f"{run}/learner-c2/learner.csv",
               "wall_seconds,env_steps,eval_mean_return,aom_now_ms\n0,0,-500,10\n2,50,-300,30\n5,90,-200,0\n")
    write_file(f"{run}/learner-c2/learner.json", {"chunks": {"contributions": 150}, "wall_seconds": 5})
    write_file(f"{run}/worker-c2-w0.json", {"chunks": {"contributions_sent": 160}})
    write_file(f"{run}/switch-tor.json", {
        "uptime_s": 9.0, "feedback": {"sent": 12},
        "ports": [port("c1-l", dropped=4, merged=2, clusters=[{"cluster": 1, "weight": 1, "contended_packets": 30,
                                                               "contended_contributions": 99}]),
                  port("c1-w0", dropped=1000, tx_packets=7), port("c1-w1", tx_packets=8),
                  port("c2-l", dropped=1, clusters=[{"cluster": 2, "weight": 1, "contended_packets": 10,
                                                     "contended_contributions": 5}]),
                  port("c2-w0", tx_packets=9)]})
    write_file(f"{run}/queues-tor.csv", QUEUE_HEADER +
               "0.25,c1-l,3,0,0,0,0,0,100,0,0,0,1000000\n0.50,c1-l,5,0,0,1,0,2,300,0,0,0,2000000\n")
    scenario = load_scenario(write_file("scenario.yaml", SCENARIO))
    return str(tmp_path / run), scenario


def analysed(recorded_run):
    run_dir, scenario = recorded_run
    hosts, links = topology(scenario)
    return analyse_run(run_dir, scenario, "drl", hosts, links)


def test_jain():
    assert jain([1, 1, 1]) == 1.0
    assert jain([1, 3]) == 0.8
    assert jain([30, 10]) == 0.8
    assert jain([5, None, 5]) == 1.0
    assert jain([]) is None
    assert jain([0, 0]) is None
    assert jain([4, 0, 0, 0]) == 0.25  # one of four served: 1/n


def test_time_to_target():
    series = [{"t_s": 1.0, "return": 100}, {"t_s": 2.0, "return": None}, {"t_s": 3.0, "return": 475},
              {"t_s": 4.0, "return": 500}]
    assert time_to_target(series, 475) == 3.0
    assert time_to_target(series, 501) is None
    assert time_to_target([{"t_s": 1.0, "return": -120}, {"t_s": 2.5, "return": -99.5}], -100) == 2.5
    assert time_to_target([{"return": 600}], 475) is None  # no wall time: not a time to target


def test_time_average_is_a_step_function():
    assert time_average([(0, 10), (1, 20), (3, 0)]) == pytest.approx(50 / 3)
    assert time_average([(0, 10), (2, 30), (5, 0)]) == 22.0
    assert time_average([(4, 7.5)]) == 7.5
    assert time_average([(1, 2), (1, 4)]) == 3.0  # no time span: the plain mean
    assert time_average([]) is None


def test_median_with_never():
    assert median_or_none([3, 1, 2]) == 2
    assert median_or_none([4, 1, 2, 3]) == 2.5
    assert median_or_none([1, None, 2]) == 2
    assert median_or_none([1, None]) is None
    assert median_or_none([1, 2, 3, None]) == 2.5
    assert median_or_none([None, None, 5]) is None
    assert median_or_none([]) is None


def test_learner_series_and_aom_files(write_file, tmp_path):
    write_file("m/progress.csv", "t_s,steps,return,aom_ms,model_version\n1,10,5.5,3,2\n2,20,,4,3\n3,30,nan,x,4\n")
    rows = read_learner_series(str(tmp_path / "m"))
    assert rows == [{"t_s": 1.0, "env_steps": 10.0, "return": 5.5, "aom_ms": 3.0, "version": 2.0},
                    {"t_s": 2.0, "env_steps": 20.0, "aom_ms": 4.0, "version": 3.0},
                    {"t_s": 3.0, "env_steps": 30.0, "return": None, "aom_ms": None, "version": 4.0}]
    assert read_aom_series(str(tmp_path / "m")) == [(1.0, 3.0), (2.0, 4.0)]
    write_file("m/aom.csv", "t_s,aom_ms\n0.5,9\n1.5,bad\n2.5,11\n")
    assert read_aom_series(str(tmp_path / "m")) == [(0.5, 9.0), (2.5, 11.0)]


def test_staleness_sources(write_file, tmp_path):
    write_file("a/learner.json", {"staleness": {"histogram": [3, 0, 2, 1]}})
    assert read_staleness(str(tmp_path / "a")) == {"hist": {0: 3, 2: 2, 3: 1}}
    write_file("b/staleness.csv", "staleness,count\n0,5\n1,2\n")
    assert read_staleness(str(tmp_path / "b")) == {"hist": {0: 5, 1: 2}}
    write_file("c/staleness.csv", "staleness\n1\n0\n1\n3\n")
    assert read_staleness(str(tmp_path / "c")) == {"hist": {1: 2, 0: 1, 3: 1}}
    assert read_staleness(str(tmp_path / "none")) == {"hist": {}}


def test_sink_progress(write_file):
    path = write_file("sink.log", "shesha-sink: listening\nshesha-sink: t=1.0s contributions=40 chunks=9\n"
                                  "shesha-sink: t=2.5s contributions=95 chunks=20\n")
    assert sink_progress(path) == [(1.0, 40), (2.5, 95)]


def test_queue_series_interval_sojourn(write_file):
    path = write_file("q.csv", QUEUE_HEADER + "0.25,p,3,0,0,0,0,0,100,0,0,0,1000000\n"
                                              "0.50,p,5,0,0,1,0,2,300,0,0,0,2000000\n"
                                              "0.75,p,0,0,0,1,0,2,300,0,0,0,2000000\n")
    # (2 ms x 300 - 1 ms x 100) / 200 packets = 2.5 ms over the second interval; nothing dequeued in the third.
    assert queue_series(path) == {"p": [(0.25, 3.0, None, 0.0, 0.0), (0.5, 5.0, 2.5, 2.0, 1.0),
                                        (0.75, 0.0, None, 2.0, 1.0)]}


def test_run_time_to_target_and_learning(recorded_run):
    result = analysed(recorded_run)
    first, second = result["clusters"]["1"], result["clusters"]["2"]
    assert first["time_to_target_s"] == 5.5          # learner.json's target.seconds wins over the CSV's 6.0
    assert first["env_steps_to_target"] == 450
    assert first["env_steps"] == 800                 # learner.json's total beats the CSV's last 700
    assert (first["final_return"], first["best_return"]) == (490.0, 490.0)
    assert second["time_to_target_s"] is None
    assert (second["final_return"], second["best_return"]) == (-200.0, -200.0)
    assert "env_steps_to_target" not in second


def test_run_aom_from_recorded_series(recorded_run):
    result = analysed(recorded_run)
    first, second = result["clusters"]["1"], result["clusters"]["2"]
    # Cluster 1: the learner's running mean at its last evaluation within the 7 s the workers ran.
    assert (first["aom_mean_ms"], first["aom_peak_ms"]) == (20.0, 45.0)
    assert first["aom_series"] == [(1.0, 0.0), (2.0, 20.0), (4.0, 10.0), (6.0, 40.0)]
    # Cluster 2: no running mean recorded: the time-average of the instantaneous series,
    # (2 s x 10 + 3 s x 30) / 5 s, and its peak.
    assert (second["aom_mean_ms"], second["aom_peak_ms"]) == (22.0, 30.0)
    assert second["aom_series"] == [(0.0, 10.0), (2.0, 30.0), (5.0, 0.0)]


def test_run_staleness_windows_and_sent(recorded_run):
    first = analysed(recorded_run)["clusters"]["1"]
    assert first["staleness"] == {0: 10, 2: 5}
    assert first["staleness_mean"] == 1.5
    assert first["windows"]["series"] == {"0": [(0.5, 4), (1.0, 8), (1.5, 8), (2.0, 8)], "1": [(0.5, 4)]}
    assert first["credit_bound"] == 0.375            # worker 0: 3 of 4 samples with a full window; worker 1: 0 of 1
    assert first["sent"] == 750
    assert (first["contributions"], first["merged_chunks"], first["active_s"]) == (700, 30, 7)


def test_run_shares_and_jain(recorded_run):
    result = analysed(recorded_run)
    first, second = result["clusters"]["1"], result["clusters"]["2"]
    # Delivered: 700 updates over 7 s (100/s, 50 per worker) and 150 over 5 s (30/s, one worker).
    assert (first["updates_per_s"], second["updates_per_s"]) == (100.0, 30.0)
    assert (first["share"], second["share"]) == (100 / 130, 30 / 130)
    assert result["jain_delivered"] == 80 ** 2 / (2 * (50 ** 2 + 30 ** 2))
    # Contended: 30 and 10 packets at weight 1: (30 + 10)^2 / (2 (30^2 + 10^2)) = 0.8.
    assert (first["contended"], second["contended"]) == (30, 10)
    assert (first["contended_share"], second["contended_share"]) == (0.75, 0.25)
    assert result["contended_contributions"] == 40
    assert result["jain_contended"] == 0.8
    assert result["jain"] == 0.8


def test_run_jain_counts_per_unit_of_weight(recorded_run, write_file):
    run_dir, scenario = recorded_run
    stats = {"uptime_s": 9.0, "feedback": {"sent": 0},
             "ports": [port("c1-l", clusters=[{"cluster": 1, "weight": 3, "contended_contributions": 30}]),
                       port("c2-l", clusters=[{"cluster": 2, "weight": 1, "contended_contributions": 10}])]}
    write_file("raw/fifo/seed-1/switch-tor.json", stats)  # older stats: contributions, not packets
    hosts, links = topology(scenario)
    result = analyse_run(run_dir, scenario, "drl", hosts, links)
    assert result["jain_contended"] == 1.0            # 30 / 3 = 10 / 1


def test_run_without_contention_falls_back_to_delivered(recorded_run, write_file):
    run_dir, scenario = recorded_run
    write_file("raw/fifo/seed-1/switch-tor.json", {"uptime_s": 1.0, "feedback": {"sent": 0},
                                                   "ports": [port("c1-l"), port("c2-l")]})
    hosts, links = topology(scenario)
    result = analyse_run(run_dir, scenario, "drl", hosts, links)
    assert result["jain_contended"] is None
    assert result["jain"] == result["jain_delivered"] == 6400 / 6800


def test_run_bottleneck_totals(recorded_run):
    result = analysed(recorded_run)
    assert result["switches"]["tor"]["bottleneck_ports"] == ["c1-l", "c2-l"]
    assert sorted(result["switches"]["tor"]["ports"]) == ["c1-l", "c2-l"]
    assert result["drops"] == 5                       # the worker port's 1000 drops are not the bottleneck's
    assert result["merges"] == 2
    assert result["bytes_saved"] == 4000
    assert result["marked"] == 6
    assert result["mean_sojourn_ms"] == 1.5
    assert result["forwarded_packets"] == 100 + 7 + 8 + 100 + 9
    assert result["feedback_sent"] == 12
    assert result["veth_drops"] == 5
    assert result["wall_s"] == 9.5
    assert result["cross_traffic"] is None
    assert result["switches"]["tor"]["queue_series"]["c1-l"][1] == (0.5, 5.0, 2.5, 2.0, 1.0)


def test_synthetic_run(write_file, tmp_path):
    scenario = load_scenario(write_file("scenario.yaml", SCENARIO))
    run = "raw/fifo/seed-1"
    write_file(f"{run}/sink-c1.json", {"clusters": [{"cluster_id": 1, "contributions": 500, "bytes": 9000,
                                                     "aom_active_ms": {"mean": 12.5, "peak": 40.0},
                                                     "merge_ratio": 0.2, "active_s": 5.0, "bad": 0}]})
    write_file(f"{run}/gen-c1-w0.json", {"totals": {"contributions_sent": 300, "feedback_received": 4},
                                         "window_stalls": 2})
    write_file(f"{run}/gen-c1-w1.json", {"totals": {"contributions_sent": 260, "feedback_received": 1}})
    write_file(f"{run}/sink-c1.log", "shesha-sink: t=1.0s contributions=100\n")
    hosts, links = topology(scenario)
    result = analyse_run(str(tmp_path / run), scenario, "synthetic", hosts, links)
    first, second = result["clusters"]["1"], result["clusters"]["2"]
    assert (first["sent"], first["contributions"], first["aom_mean_ms"], first["aom_peak_ms"]) == (560, 500, 12.5, 40.0)
    assert first["windows"] == {"configured": 16, "window_stalls": 2, "feedback_received": 5}
    assert first["delivered_series"] == [(1.0, 100)]
    assert first["time_to_target_s"] is None
    assert (second["contributions"], second["aom_mean_ms"]) == (0, None)
    assert first["share"] == 1.0 and second["share"] == 0.0
    assert result["drops"] == 0 and result["jain_contended"] is None


def run_with(ttt1, aom1, ttt2, aom2, **extra):
    result = {"clusters": {"1": {"time_to_target_s": ttt1, "aom_mean_ms": aom1},
                           "2": {"time_to_target_s": ttt2, "aom_mean_ms": aom2}}}
    result.update(extra)
    return result


SEEDS = {"seeds": [1, 2, 3, 4], "clusters": [{"id": 1, "env": "A"}, {"id": 2, "env": "B"}]}


def test_seed_verdicts():
    results = {
        "fifo": {"1": run_with(10, 100, None, 50), "2": run_with(10, 100, 20, 50), "3": run_with(None, 100, None, 50),
                 "4": run_with(5, 10, 5, 10)},
        "shesha": {"1": run_with(12, 20, 30, 60), "2": run_with(8, 200, None, 40), "3": run_with(None, 90, 9, 50)},
        "edge": {"1": run_with(12, 100, None, 50.5)},  # exactly one evaluation interval later
    }
    resolution = {"1": 2.0, "2": 2.0}
    rows = seed_verdicts(SEEDS, results, "fifo", "shesha", resolution)
    assert [(r["seed"], r["cluster"], r["slower"], r["aom_worse"]) for r in rows] == [
        (1, "1", False, False), (1, "2", False, True),   # 2 s later is within one interval; reached where FIFO never did
        (2, "1", False, True), (2, "2", True, False),    # never where FIFO reached it: slower
        (3, "1", False, False), (3, "2", False, False)]  # both never: a tie; equal AoM is not worse
    assert rows[0] == {"seed": 1, "cluster": "1", "ttt_base": 10, "ttt_arm": 12, "aom_base": 100, "aom_arm": 20,
                       "slower": False, "aom_worse": False}
    tighter = seed_verdicts(SEEDS, results, "fifo", "shesha", {"1": 1.0, "2": 1.0})
    assert tighter[0]["slower"] is True                  # 2 s later with a 1 s interval
    edge = seed_verdicts(SEEDS, results, "fifo", "edge", resolution)
    assert [(r["slower"], r["aom_worse"]) for r in edge] == [(False, False), (False, True)]
    assert seed_verdicts(SEEDS, results, "fifo", "missing", resolution) == []


def test_arm_summary_over_seeds():
    scenario = {"clusters": [{"id": 1}, {"id": 2}]}
    common = {"drops": 10, "merges": 0, "bytes_saved": 0, "jain": 0.9, "marked": 1, "mean_sojourn_ms": 2.0,
              "mean_depth": 3.0, "forwarded_packets": 100, "feedback_sent": 0}
    runs = {"1": run_with(10, 100, None, 50, **common), "2": run_with(20, 60, 30, 70, **dict(common, drops=20)),
            "3": run_with(12, 80, 40, 60, **dict(common, jain=0.6))}
    summary = arm_summary(scenario, runs)
    assert summary["drops"] == pytest.approx(40 / 3)
    assert summary["jain"] == pytest.approx(0.8)
    first, second = summary["clusters"]["1"], summary["clusters"]["2"]
    assert (first["time_to_target_s"], first["ttt_median_s"], first["ttt_min_s"], first["ttt_max_s"]) == (14, 12, 10, 20)
    assert (first["reached"], first["runs"], first["ttt_seeds"]) == (3, 3, [10, 20, 12])
    # Cluster 2 never reached the target on seed 1: no mean, the median counts "never" as slowest.
    assert (second["time_to_target_s"], second["ttt_median_s"], second["ttt_min_s"], second["ttt_max_s"]) == (
        None, 40, 30, None)
    assert (second["reached"], second["aom_median_ms"], second["aom_mean_ms"]) == (2, 60, 60)
    assert summary["aom_mean_ms"] == 70                 # the clusters' means (80 and 60), averaged
