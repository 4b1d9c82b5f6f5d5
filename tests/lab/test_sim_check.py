"""Checked against the rack (tools/lab/shesha_lab/sim_check.py, issue 27 item 3): the shesha-sim
training scenario generated from a lab scenario, the compute times derived from recorded worker
metrics, and the side-by-side table from recorded rack results and simulator CSVs. Nothing runs."""
import csv
import json
import os

import pytest

from shesha_lab import LabError, sim_check
from shesha_lab.cluster_files import publish_interval_ms
from shesha_lab.scenario import load_scenario


@pytest.fixture
def scenario(source_root):
    s = load_scenario(os.path.join(source_root, "configs", "lab-default.yaml"))
    for cluster in s["clusters"]:
        cluster["_config_used"] = os.path.join(source_root, cluster["config"])
    s["_processes"] = "drl"
    return s


def settings_of(scenario, arm_name, compute=None):
    arm = next(a for a in scenario["arms"] if a["name"] == arm_name)
    settings = sim_check.sim_settings(scenario, arm, 2, compute or {"step_us": 10, "update_us": 250}, ["a.yaml", "b.yaml"])
    return dict(s.split("=", 1) for s in settings)


def test_the_sim_scenario_is_the_lab_scenario(scenario):
    fifo, shesha = settings_of(scenario, "fifo"), settings_of(scenario, "shesha")
    for s in (fifo, shesha):
        assert s["seed"] == "2"
        assert s["duration_ms"] == "60000"
        assert s["workload.kind"] == "training"
        assert s["topology.shared_bottleneck"] == "true"           # learners: shared
        assert s["workload.cluster_workers"] == "3,3"
        assert s["training.clusters"] == "a.yaml,b.yaml"
        assert s["training.targets"] == "475,-100"
        assert s["links.learner_gbps"] == "0.03"                    # rate: 30M
        assert s["queue.capacity_packets"] == "128"
        assert s["queue.capacity_bytes"] == str(8 * 1024 * 1024)   # queue_bytes: 8MiB
        assert s["queue.mark_depth_packets"] == "32"
        assert s["queue.version_tolerance"] == "2"
        assert s["transport.feedback_interval_us"] == "1000"
        assert s["transport.window_control"] == "true"             # the window is the YAML's (pinned for FIFO)
        assert s["training.step_us"] == "10" and s["training.update_us"] == "250"
        assert s["model.delivery"] == "unicast"
        assert s["training.stop_at_target"] == "cluster"           # each learner stops at its own target
    per_cluster = settings_of(scenario, "fifo", {"step_us": [68.0, 55.645], "update_us": [1575.33, 1289.35]})
    assert per_cluster["training.step_us"] == "68,55.645" and per_cluster["training.update_us"] == "1575.33,1289.35"
    assert (fifo["queue.aggregation"], fifo["queue.fair"], fifo["transport.switch_feedback"]) == ("false", "false", "false")
    assert (shesha["queue.aggregation"], shesha["queue.fair"], shesha["transport.switch_feedback"]) == ("true", "true", "true")


def test_per_cluster_learners_and_the_command(scenario):
    scenario["learners"] = "per_cluster"
    assert settings_of(scenario, "shesha")["topology.shared_bottleneck"] == "false"
    arm = scenario["arms"][0]
    cmd = sim_check.sim_check_command("shesha-sim", scenario, arm, 3, {"step_us": 1, "update_us": 2}, ["a", "b"], "/o")
    assert cmd[:3] == ["shesha-sim", "-q", "-o"] and cmd[cmd.index("-l") + 1] == "fifo-3"
    assert cmd.count("--set") == len(sim_check.sim_settings(scenario, arm, 3, {"step_us": 1, "update_us": 2}, ["a", "b"]))


def test_bad_values_name_the_key(scenario):
    scenario["switches"][0]["bottleneck"]["rate"] = "fast"
    with pytest.raises(LabError, match=r"switches\[0\]\.bottleneck\.rate"):
        settings_of(scenario, "fifo")
    scenario["switches"][0]["bottleneck"]["rate"] = "0"
    with pytest.raises(LabError, match=r"switches\[0\]\.bottleneck\.rate: the simulator needs a shaped"):
        settings_of(scenario, "fifo")
    scenario["switches"].append(dict(scenario["switches"][0], name="tor2"))
    with pytest.raises(LabError, match="more than one switch"):
        settings_of(scenario, "fifo")


def test_quantities():
    assert sim_check.parse_quantity("40M", "k") == 40e6
    assert sim_check.parse_quantity("16KiB", "k") == 16384
    assert sim_check.parse_quantity(128, "k") == 128
    with pytest.raises(LabError, match="^x.y: "):
        sim_check.parse_quantity("-3", "x.y")


def test_congestion_control_off_pins_the_window_at_w_max(scenario, tmp_path):
    fifo = next(a for a in scenario["arms"] if a["name"] == "fifo")
    shesha = next(a for a in scenario["arms"] if a["name"] == "shesha")
    cluster = scenario["clusters"][0]
    assert sim_check.sim_cluster_yaml(cluster, shesha, str(tmp_path)) == cluster["_config_used"]
    import yaml
    with open(sim_check.sim_cluster_yaml(cluster, fifo, str(tmp_path))) as f:
        pinned = yaml.safe_load(f)
    with open(cluster["_config_used"]) as f:
        original = yaml.safe_load(f)
    w_max = original["transport"]["w_max"]
    assert (pinned["transport"]["w_init"], pinned["transport"]["w_min"], pinned["transport"]["w_max"]) == (w_max,) * 3
    # As shesha-worker --congestion-control off: none of the credit loop's leak repairs.
    assert (pinned["transport"]["bank_excess"], pinned["transport"]["flight_expiry_rtts"],
            pinned["transport"]["flight_expiry_ms"]) == (False, 0, 0)
    repairs = ("bank_excess", "flight_expiry_rtts", "flight_expiry_ms")
    for k in repairs:
        if k in original["transport"]:
            pinned["transport"][k] = original["transport"][k]
        else:
            del pinned["transport"][k]
    pinned["transport"].update({k: original["transport"][k] for k in ("w_init", "w_min", "w_max")})
    assert pinned == original  # nothing else changed


def test_workers_wake_as_late_as_the_rack_gave_them_a_core(scenario, write_file, tmp_path):
    # Cluster 1's workers waited 23.4 s for a core over 6,000 timeslices: 3.9 ms before each.
    # Cluster 2 has no statistics (an older run): 0, at once.
    write_file("run/meta.json", {"host_cpu": {"workers-c1": {"cpu_s": 4.2, "wait_s": 23.4, "slices": 6000,
                                                             "processes": 3},
                                              "learner-c1": {"cpu_s": 0.7, "wait_s": 2.5, "slices": 7000,
                                                             "processes": 1}}})
    assert sim_check.rack_wake_us(str(tmp_path / "run"), scenario) == [3900.0, None]
    assert sim_check.rack_wake_us(str(tmp_path / "nothing"), scenario) == [None, None]
    woken = settings_of(scenario, "shesha", {"step_us": [68.0, 55.6], "update_us": [1575.0, 1289.0],
                                             "wake_us": [3900.0, 0]})
    assert woken["training.wake_us"] == "3900,0"
    assert "training.wake_us" not in settings_of(scenario, "shesha")  # a compute.json without it


def test_learners_read_as_late_as_the_rack_gave_them_a_core(scenario, write_file, tmp_path):
    # Cluster 1's learner waited 2.5 s for a core over 7,000 timeslices: 357.1 us before each.
    # Cluster 2 has no statistics: 0, at once.
    write_file("run/meta.json", {"host_cpu": {"workers-c1": {"cpu_s": 4.2, "wait_s": 23.4, "slices": 6000,
                                                             "processes": 3},
                                              "learner-c1": {"cpu_s": 0.7, "wait_s": 2.5, "slices": 7000,
                                                             "processes": 1}}})
    assert sim_check.rack_learner_wake_us(str(tmp_path / "run"), scenario) == [357.1, None]
    assert sim_check.rack_learner_wake_us(str(tmp_path / "nothing"), scenario) == [None, None]
    woken = settings_of(scenario, "shesha", {"step_us": [68.0, 55.6], "update_us": [1575.0, 1289.0],
                                             "learner_wake_us": [357.1, 0]})
    assert woken["training.learner_wake_us"] == "357.1,0"
    assert "training.learner_wake_us" not in settings_of(scenario, "shesha")


def test_compute_from_the_rack_workers(scenario, write_file, tmp_path):
    # Cluster 1: 3 workers, 1000 updates each over 10 s, 5 steps per update, 1000 waits (1 s) each.
    for w in range(3):
        write_file(f"run/worker-c1-w{w}.json", {"wall_seconds": 10.0, "env_steps": 5000,
                                                 "updates": {"computed": 1000, "waits_for_model": 600,
                                                             "waits_for_version": 400}})
    # Cluster 2: one worker wrote nothing, one never computed; one: 500 updates in 10 s, no waits.
    write_file("run/worker-c2-w1.json", {"wall_seconds": 1.0, "env_steps": 0, "updates": {"computed": 0}})
    write_file("run/worker-c2-w2.json", {"wall_seconds": 10.0, "env_steps": 2500, "updates": {"computed": 500}})
    per_cluster = sim_check.rack_compute(str(tmp_path / "run"), scenario)
    assert per_cluster["1"]["updates_per_s"] == pytest.approx(100.0)
    assert per_cluster["1"]["update_s"] == pytest.approx(1e-2)     # 10 s / 1000 updates
    assert per_cluster["1"]["waits"] == 3000
    assert per_cluster["1"]["steps_per_update"] == pytest.approx(5.0)
    assert per_cluster["2"]["workers"] == 1 and per_cluster["2"]["update_s"] == pytest.approx(0.02)
    compute = sim_check.derive_compute(per_cluster, [1, 2, 3], machine_step_us=10, machine_update_us=150)
    # Per cluster: cluster 1 30 s over 3000 updates of 5 steps -> 30 s / (3000 * 200 us) = 50x;
    # cluster 2 10 s / (500 * 200 us) = 100x; cluster 3 has no metrics: the pooled
    # (30 s + 10 s) / (3500 * 200 us) = 57.14x.
    assert compute["scale"] == pytest.approx([50.0, 100.0, 40 / 0.7])
    assert compute["pooled_scale"] == pytest.approx(40 / 0.7)
    assert compute["step_us"] == pytest.approx([500.0, 1000.0, 10 * 40 / 0.7], abs=1e-3)
    assert compute["update_us"] == pytest.approx([7500.0, 15000.0, 150 * 40 / 0.7], abs=1e-3)
    assert sim_check.derive_compute({}) is None
    assert sim_check.us_list([500.0, 1000.5]) == "500,1000.5" and sim_check.us_list(12.5) == "12.5"


def test_learners_publish_at_the_racks_measured_cadence(scenario, write_file, tmp_path):
    # Cluster 1's learner: evaluations at 1, 2, 3 and 4 s with versions 100, 230, 360, 490, target
    # reached at 3 s: 260 versions in 2 s (the row after the target does not count) -> 7.692 ms.
    write_file("run/learner-c1/learner.csv", "wall_seconds,env_steps,version,eval_mean_return\n"
               "1.0,10,100,20\n2.0,20,230,200\n3.0,30,360,480\n4.0,40,490,500\n")
    write_file("run/learner-c1/learner.json", {"target": {"reached": True, "seconds": 3.0}})
    # Cluster 2's learner evaluated once: no cadence to take.
    write_file("run/learner-c2/learner.csv", "wall_seconds,env_steps,version,eval_mean_return\n1.0,5,50,-500\n")
    c1, c2 = scenario["clusters"]
    assert sim_check.rack_publish_interval_ms(str(tmp_path / "run"), c1) == pytest.approx(1000 / 130)
    assert sim_check.rack_publish_interval_ms(str(tmp_path / "run"), c2) is None
    # The simulator's copy of a cluster YAML with that interval; nothing else changes.
    import yaml
    shipped = c1["_config_used"]
    assert publish_interval_ms(shipped) == 5.0
    copy = sim_check.with_publish_interval(shipped, 1000 / 130, str(tmp_path / "cfg" / "c1.yaml"))
    assert publish_interval_ms(copy) == pytest.approx(7.692)
    with open(copy) as f:
        changed = yaml.safe_load(f)
    with open(shipped) as f:
        original = yaml.safe_load(f)
    assert changed["learner"].pop("publish_interval_ms") == pytest.approx(7.692)
    original["learner"].pop("publish_interval_ms")
    assert changed == original
    # A file without the key gets it under learner:; one without learner: is refused, naming the key.
    bare = write_file("bare.yaml", "env: CartPole-v1\nlearner:\n  eval_episodes: 3\n")
    assert publish_interval_ms(bare) == 5.0
    with pytest.raises(LabError, match="damaged.yaml: cannot read learner.publish_interval_ms"):
        publish_interval_ms(write_file("damaged.yaml", "env: CartPole-v1\nlearner: {publish_interval_ms: fast}\n"))
    with open(sim_check.with_publish_interval(bare, 6.5, str(tmp_path / "cfg" / "bare.yaml"))) as f:
        assert yaml.safe_load(f)["learner"] == {"publish_interval_ms": 6.5, "eval_episodes": 3}
    with pytest.raises(LabError, match="learner.publish_interval_ms"):
        sim_check.with_publish_interval(write_file("none.yaml", "env: CartPole-v1\n"), 6.5, str(tmp_path / "x.yaml"))
    # The learners tick finely enough to keep such an interval.
    assert settings_of(scenario, "shesha")["training.learner_tick_us"] == "100"


def test_compute_leaves_out_the_time_the_workers_waited(scenario, write_file, tmp_path):
    # Cluster 1: 2 workers, 10 s each, of which 4 s and 6 s blocked waiting for a model or a newer
    # version: 10 s busy over 2000 updates. Cluster 2: one worker's wait time is damaged (longer
    # than its run), so the cluster falls back to the whole wall time, waits included.
    for w, waited in enumerate((4.0, 6.0)):
        write_file(f"run/worker-c1-w{w}.json", {"wall_seconds": 10.0, "env_steps": 5000,
                                                 "updates": {"computed": 1000, "waits_for_version": 900,
                                                             "wait_seconds": waited}})
    write_file("run/worker-c2-w0.json", {"wall_seconds": 10.0, "env_steps": 2500,
                                         "updates": {"computed": 500, "wait_seconds": 2.0}})
    write_file("run/worker-c2-w1.json", {"wall_seconds": 10.0, "env_steps": 2500,
                                         "updates": {"computed": 500, "wait_seconds": 11.0}})
    per_cluster = sim_check.rack_compute(str(tmp_path / "run"), scenario)
    assert per_cluster["1"]["waited_s"] == pytest.approx(10.0)
    assert per_cluster["1"]["busy_s"] == pytest.approx(10.0)
    assert per_cluster["1"]["update_s"] == pytest.approx(5e-3)     # 10 s busy / 2000 updates
    assert per_cluster["1"]["updates_per_s"] == pytest.approx(100.0)  # still over the wall time
    assert per_cluster["2"]["waited_s"] is None
    assert per_cluster["2"]["update_s"] == pytest.approx(0.02)     # 20 s / 1000 updates


def write_sim_run(directory, seed, ttt, aom_us, drops, reached=(1, 1)):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "drops", "contributions_sent", "contributions_applied", "contributions_dropped",
                    "sim_end_ms", "wall_s"])
        w.writerow([f"x-{seed}", drops, 1000, 900, 100, 20000, 5.0])
    with open(os.path.join(directory, "training.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "cluster", "reached", "seconds_to_target", "gradients_computed", "env_steps",
                    "best_eval_mean"])
        for c in (0, 1):
            w.writerow([f"x-{seed}", c, reached[c], ttt[c], 6000, 30000, 500])
    with open(os.path.join(directory, "clusters.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "cluster", "aom_mean_us"])
        for c in (0, 1):
            w.writerow([f"x-{seed}", c, aom_us[c]])
    # Evaluations at 1, 2 and 20 s, 200 versions a second; cluster 1 publishes every second
    # version after 2 s (100 a second from 2 s to 20 s).
    with open(os.path.join(directory, "curve.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "cluster", "t_s", "version"])
        for c in (0, 1):
            for t_s, version in ((1.0, 201), (2.0, 401), (20.0, 4001 if c == 0 else 2201)):
                w.writerow([f"x-{seed}", c, t_s, version])


def test_side_by_side_table_from_recorded_runs(scenario, tmp_path):
    scenario["arms"] = [a for a in scenario["arms"] if a["name"] == "fifo"]
    # The rack: cluster 1 reached its target in 8, 10, 12 s; cluster 2 in 30 s, never, 40 s.
    results = {"fifo": {}}
    for seed, (t1, t2) in zip((1, 2, 3), ((8.0, 30.0), (10.0, None), (12.0, 40.0))):
        results["fifo"][str(seed)] = {"drops": 1000 * seed, "clusters": {
            "1": {"time_to_target_s": t1, "aom_mean_ms": 20.0, "sent": 500, "contributions": 400,
                  # 150 versions a second from the first evaluation on; the row past the target
                  # (9 s, after 8 s on seed 1) is left out there
                  "series": [{"t_s": 1.0, "version": 1}, {"t_s": 5.0, "version": 601}, {"t_s": 9.0, "version": 1201}]},
            "2": {"time_to_target_s": t2, "aom_mean_ms": 10.0, "sent": 500, "contributions": 400}}}
    # The simulator: cluster 1 at 9, 11, 13 s (median 11: inside 8..12), AoM 30 ms (1.5x: inside 2x);
    # cluster 2 at 50, 60 s and never (median 60: the rack's slowest seed never reached it, so inside),
    # AoM 25 ms (2.5x: outside).
    for seed, ttt in zip((1, 2, 3), ((9.0, 50.0), (11.0, 60.0), (13.0, 0.0))):
        write_sim_run(str(tmp_path / "sim-check" / "fifo" / f"seed-{seed}"), seed, ttt, (30000, 25000), 2000 * seed,
                      reached=(1, 0 if seed == 3 else 1))
    computes = {"fifo": {str(s): {"step_us": 50, "update_us": 1200, "scale": 6.1, "rack": {
        "1": {"updates_per_s": 100.0, "steps_per_update": 5.0}, "2": {"updates_per_s": 90.0, "steps_per_update": 4.9}}}
        for s in (1, 2, 3)}}
    computes["fifo"]["2"]["publish_interval_ms"] = [6.667, 5.0]  # seed 1's compute.json predates the key
    computes["fifo"]["2"]["learner_wake_us"] = [610.5, 1190.0]   # and the learners' wake
    with open(tmp_path / "sim-check" / "compute.json", "w") as f:
        json.dump(computes, f)
    lines = sim_check.sim_check_section(str(tmp_path), scenario, results)
    rows = [l for l in lines if l.startswith("| fifo |")]
    # The simulator's updates/s/worker over each cluster's own run (it stops at its target): 6,000
    # gradients by 3 workers in 9, 11, 13 s (median 181.8), and in 50, 60 s and the 20 s run (40.0).
    # Versions/s from the first evaluation to the target: the rack's cluster 1 150 (seed 1 stops at
    # 8 s, before the 9 s row; the others include it: 150 too), its cluster 2 has no series (n/a);
    # the simulator's cluster 1 200 (to 2 s), cluster 2 (2201 - 201) / 19 s = 105.3 (its targets
    # at 50 and 60 s and never all include the 20 s row).
    assert rows[0] == ("| fifo | 1 (CartPole-v1) | 10.0 (8.0..12.0) | 11.0 (9.0..13.0) | yes | 20.0 | 30.0 | 1.50 | "
                       "yes | 2,000 | 4,000 | 20.0 % | 10.0 % | 100.0 | 181.8 | 150.0 | 200.0 |")
    assert rows[1] == ("| fifo | 2 (Acrobot-v1) | 40.0 (30.0..never) | 60.0 (50.0..never) | yes | 10.0 | 25.0 | 2.50 | "
                       "**no** | 2,000 | 4,000 | 20.0 % | 10.0 % | 90.0 | 40.0 | n/a | 105.3 |")
    assert sim_check.publish_rate([{"t_s": 1.0, "version": 5}]) is None  # one evaluation: no rate
    assert rows[2] == "| fifo | 1 | 50 | 1200 | as configured | 0 | 0 | 100.0, 5.00 | 90.0, 4.90 |"
    assert rows[3] == "| fifo | 2 | 50 | 1200 | 6.667,5 | 0 | 610.5,1190 | 100.0, 5.00 | 90.0, 4.90 |"
    text = "\n".join(lines)
    assert "within the rack's fastest..slowest seed: **met** (2 of 2" in text
    assert "within 2x of the rack's: **not met** (1 of 2)" in text


def test_a_sim_median_outside_the_rack_range_is_not_met(scenario):
    scenario["arms"] = scenario["arms"][:1]
    results = {"fifo": {"1": {"drops": 0, "clusters": {"1": {"time_to_target_s": 10.0}, "2": {"time_to_target_s": 5.0}}}}}
    sim = {"fifo": {"1": {"sim_end_s": 1, "clusters": {"1": {"time_to_target_s": 10.5}, "2": {"time_to_target_s": None}}}}}
    rows = sim_check.comparison_rows(scenario, results, sim)
    assert [r["ttt_ok"] for r in rows] == [False, False]  # 10.5 > 10 (all rack seeds reached it); never vs 5
    assert sim_check.sim_check_section("/nonexistent", scenario, results) == []


def test_rack_times_are_compared_on_the_evaluation_grid(scenario):
    # The rack's learner stamps its evaluations a few ms late: 8.003 s is the same evaluation as the
    # simulator's 8.000 s (the scenario's cluster files evaluate every 2 s, the learner's default,
    # or as their learner.eval_interval_ms says).
    scenario["arms"] = scenario["arms"][:1]
    grid = [sim_check.eval_interval_s(c) for c in scenario["clusters"]]
    results = {"fifo": {"1": {"drops": 0, "clusters": {"1": {"time_to_target_s": 4 * grid[0] + 0.003},
                                                         "2": {"time_to_target_s": 4 * grid[1] + 0.049}}}}}
    sim = {"fifo": {"1": {"sim_end_s": 1, "clusters": {"1": {"time_to_target_s": 4 * grid[0]},
                                                       "2": {"time_to_target_s": 3 * grid[1]}}}}}
    rows = sim_check.comparison_rows(scenario, results, sim)
    assert [r["ttt_ok"] for r in rows] == [True, False]  # the same evaluation; one evaluation sooner
    assert rows[0]["rack_ttt"] == [4 * grid[0] + 0.003]  # shown as measured


def test_the_learners_own_link_when_the_simulator_has_a_key_for_it(scenario):
    arm = scenario["arms"][0]
    compute = {"step_us": 1, "update_us": 2}
    without = sim_check.sim_settings(scenario, arm, 1, compute, ["a", "b"])
    with_key = sim_check.sim_settings(scenario, arm, 1, compute, ["a", "b"], learner_down=True)
    assert not any(s.startswith(sim_check.LEARNER_DOWN_KEY) for s in without)
    assert f"{sim_check.LEARNER_DOWN_KEY}=10" in with_key and len(with_key) == len(without) + 1
    text = "\n".join(sim_check.sim_check_lines(scenario, [], {}, learner_down=False))
    assert f"has no `{sim_check.LEARNER_DOWN_KEY}`" in text


def test_sim_aom_is_the_series_up_to_the_clusters_target(tmp_path):
    # Cluster 0 reached its target at 2 s: its AoM samples after that (the learner would have
    # stopped on the rack) do not count; cluster 1 never did: all of its samples count. Without a
    # series, the simulator's LearnerCore figure.
    run = tmp_path / "run"
    write_sim_run(str(run), 1, (2.0, 0.0), (50000, 7000), 0, reached=(1, 0))
    with open(run / "series.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "t_ms", "metric", "key", "value"])
        for t_ms, a0, a1 in ((1000, 1000, 3000), (2000, 3000, 5000), (3000, 90000, 7000)):
            w.writerow(["x", t_ms, "aom_us", 0, a0])
            w.writerow(["x", t_ms, "aom_us", 1, a1])
            w.writerow(["x", t_ms, "window_mean", 0, 99])
    got = sim_check.read_sim_run(str(run))
    assert got["clusters"]["0"]["aom_mean_ms"] == pytest.approx(2.0)
    assert got["clusters"]["0"]["aom_core_ms"] == pytest.approx(50.0)
    assert got["clusters"]["1"]["aom_mean_ms"] == pytest.approx(5.0)
    os.remove(run / "series.csv")
    assert sim_check.read_sim_run(str(run))["clusters"]["0"]["aom_mean_ms"] == pytest.approx(50.0)
