"""Faults in lab scenarios (issue 29): the `faults:` schema and its errors naming the key, the
no-fault twin arms, the schedule of actions, the counter arithmetic (resets, interpolation), the
recovery time, the learner's incarnations on one clock, and the report's fault section and goals."""
import json
import os

import pytest

from shesha_lab import LabError
from shesha_lab.cli import select_arms
from shesha_lab.fault_analysis import (analyse_faults, counter_points, event_times, fault_span, increase,
                                       merged_learner_series, recovery, window_counters)
from shesha_lab.faults import event_label, impair_argv, plan_actions
from shesha_lab.report import fault_goals, faults_section
from shesha_lab.scenario import load_scenario

BASE = """\
name: t
duration_s: 30
seeds: [1, 2]
clusters:
  - {id: 1, env: CartPole-v1, config: configs/cluster-cartpole.yaml, workers: 2, target_return: 475}
  - {id: 2, env: Acrobot-v1, config: configs/cluster-acrobot.yaml, workers: 3, target_return: -100}
arms:
  - {name: fifo, aggregation: off, feedback: off, congestion_control: off}
  - {name: shesha, aggregation: on, feedback: on, congestion_control: on, scheduling: drr}
"""


def load(write_file, faults_yaml):
    return load_scenario(write_file("s.yaml", BASE + faults_yaml))


def error(write_file, faults_yaml):
    with pytest.raises(LabError) as caught:
        load(write_file, faults_yaml)
    return str(caught.value)


EVENTS = """\
faults:
  events:
    - {kind: link, hosts: [workers], loss_pct: 1, reorder_pct: 1}
    - {kind: switch_restart, at_s: 4, down_s: 1}
    - {kind: worker_kill, at_s: 8, cluster: 2, worker: 1, restart_at_s: 12}
    - {kind: learner_restart, at_s: 16, cluster: 2}
    - {kind: link, hosts: [learners, c1-w1], from_s: 20, until_s: 23, loss_pct: 5, delay_ms: 5}
"""


def test_events_get_their_defaults_and_resolved_hosts(write_file):
    scenario = load(write_file, EVENTS)
    events = scenario["faults"]["events"]
    assert events[0]["_hosts"] == ["c1-w0", "c1-w1", "c2-w0", "c2-w1", "c2-w2"]
    assert events[0]["until_s"] == 0 and events[0]["direction"] == "both" and events[0]["duplicate_pct"] == 0
    assert events[1]["switch"] == "tor"
    assert events[3]["down_s"] == 1.0
    assert events[4]["_hosts"] == ["c1-l", "c2-l", "c1-w1"]


def test_every_arm_gets_a_twin_without_faults(write_file):
    scenario = load(write_file, EVENTS)
    assert [(a["name"], a["_faults"]) for a in scenario["arms"]] == [
        ("fifo", True), ("shesha", True), ("fifo-nofaults", False), ("shesha-nofaults", False)]
    twin = scenario["arms"][3]
    assert twin["_twin_of"] == "shesha" and twin["aggregation"] and twin["scheduling"] == "drr"
    select_arms(scenario, "shesha")
    assert [a["name"] for a in scenario["arms"]] == ["shesha", "shesha-nofaults"]


def test_chosen_arms_only_and_no_twins(write_file):
    scenario = load(write_file, EVENTS.replace("faults:\n", "faults:\n  arms: [shesha]\n  compare_without_faults: false\n"))
    assert [(a["name"], a["_faults"]) for a in scenario["arms"]] == [("fifo", False), ("shesha", True)]


def test_without_events_the_arms_stay_as_given(write_file):
    scenario = load(write_file, "")
    assert [a["name"] for a in scenario["arms"]] == ["fifo", "shesha"]
    assert all("_faults" not in a for a in scenario["arms"])


@pytest.mark.parametrize("faults_yaml, message", [
    ("faults: {bogus: 1}\n", "faults.bogus: unknown key (allowed: arms, compare_without_faults, events)"),
    ("faults: {arms: [nope], events: []}\n", "faults.arms: no arm named 'nope' (have fifo, shesha)"),
    ("faults:\n  events:\n    - {kind: meteor, at_s: 1}\n",
     "faults.events[0].kind: one of switch_restart, link, worker_kill, learner_restart, got 'meteor'"),
    ("faults:\n  events:\n    - {kind: switch_restart, down_s: 1}\n",
     "faults.events[0].at_s: required key missing (kind switch_restart)"),
    ("faults:\n  events:\n    - {kind: switch_restart, at_s: 1, hosts: [workers]}\n",
     "faults.events[0].hosts: unknown key for kind switch_restart (allowed: kind, at_s, down_s, switch)"),
    ("faults:\n  events:\n    - {kind: switch_restart, at_s: 30}\n",
     "faults.events[0].at_s: 30 s is not within the run's 30 s (duration_s)"),
    ("faults:\n  events:\n    - {kind: switch_restart, at_s: 3, switch: spine}\n",
     "faults.events[0].switch: no switch named 'spine'"),
    ("faults:\n  events:\n    - {kind: switch_restart, at_s: -1}\n",
     "faults.events[0].at_s: must be at least 0, got -1"),
    ("faults:\n  events:\n    - {kind: worker_kill, at_s: 3, cluster: 1, worker: 2}\n",
     "faults.events[0].worker: cluster 1 has workers 0..1, got 2"),
    ("faults:\n  events:\n    - {kind: worker_kill, at_s: 3, cluster: 7}\n",
     "faults.events[0].cluster: no cluster 7"),
    ("faults:\n  events:\n    - {kind: worker_kill, at_s: 3, cluster: 1, restart_at_s: 2}\n",
     "faults.events[0].restart_at_s: must be after at_s (3), or 0 for never"),
    ("faults:\n  events:\n    - {kind: learner_restart, at_s: 3, cluster: 1, down_s: yes}\n",
     "faults.events[0].down_s: must be a number, got True"),
    ("faults:\n  events:\n    - {kind: link, hosts: [workers]}\n",
     "faults.events[0]: a link fault needs at least one of loss_pct, delay_ms, jitter_ms, reorder_pct, "
     "duplicate_pct above 0"),
    ("faults:\n  events:\n    - {kind: link, hosts: [workers], loss_pct: 101}\n",
     "faults.events[0].loss_pct: must be in 0..100, got 101"),
    ("faults:\n  events:\n    - {kind: link, hosts: [workers], loss_pct: 1, direction: up}\n",
     "faults.events[0].direction: both, egress (leaving the host) or ingress (arriving), got 'up'"),
    ("faults:\n  events:\n    - {kind: link, hosts: [workers], loss_pct: 1, from_s: 5, until_s: 5}\n",
     "faults.events[0].until_s: must be after from_s (5), or 0 for the end of the run"),
])
def test_bad_faults_are_refused_naming_the_key(write_file, faults_yaml, message):
    assert error(write_file, faults_yaml) == message


def test_an_unknown_host_names_the_choices_and_why_switch_links_are_not_offered(write_file):
    message = error(write_file, "faults:\n  events:\n    - {kind: link, hosts: [spine-link], loss_pct: 1}\n")
    assert message.startswith("faults.events[0].hosts: no host or group 'spine-link' (have workers, learners, c1-l,")
    assert "af_packet ports bypass" in message


def test_the_twin_name_must_be_free(write_file):
    text = BASE.replace("arms:\n", "arms:\n  - {name: fifo-nofaults, aggregation: off, feedback: off, "
                                   "congestion_control: off}\n") + EVENTS.replace("faults:\n", "faults:\n  arms: [fifo]\n")
    with pytest.raises(LabError) as caught:
        load_scenario(write_file("s.yaml", text))
    assert str(caught.value) == "arms: fifo-nofaults is taken by the twin that runs fifo without faults"


def test_plan_orders_actions_and_drops_those_after_the_run(write_file):
    events = load(write_file, EVENTS)["faults"]["events"]
    plan = [(t, action, index) for t, action, index, _ in plan_actions(events, 30)]
    assert plan == [(0.0, "impair_start", 0), (4.0, "switch_kill", 1), (5.0, "switch_start", 1),
                    (8.0, "worker_kill", 2), (12.0, "worker_start", 2), (16.0, "learner_kill", 3),
                    (17.0, "learner_start", 3), (20.0, "impair_start", 4), (23.0, "impair_stop", 4)]
    short = [(t, action) for t, action, _, _ in plan_actions(events, 16.5)]
    assert short[-1] == (16.0, "learner_kill")  # its restart would come after the run


def test_labels_spans_and_impair_command_line(write_file):
    events = load(write_file, EVENTS)["faults"]["events"]
    assert event_label(events[0]) == "link workers: 1% loss, 1% reorder"
    assert event_label(events[2]) == "worker c2-w1 killed, back at 12 s"
    assert fault_span(events[0], 30) == (None, None, "link workers")
    assert fault_span(events[1], 30) == (4.0, 5.0, "switch tor down")
    assert fault_span(events[4], 30) == (20.0, 23.0, "link learners,c1-w1")
    argv = impair_argv("/b/shesha-impair", "shesha-lab-c1-w0", events[4], 7, "/r/x.json", "/r/x.ready")
    assert argv == ["/b/shesha-impair", "--netns", "shesha-lab-c1-w0", "--dev", "eth0", "--direction", "both",
                    "--loss", "5%", "--reorder", "0%", "--duplicate", "0%", "--delay", "5ms", "--jitter", "0ms",
                    "--seed", "7", "--json", "/r/x.json", "--ready-file", "/r/x.ready", "--log-level", "warn"]


def sample(t, sent, applied, incarnation=0, written=None, dropped=0):
    return {"t": t, "workers": {"c1-w0": {"t_written": written, "contributions_sent": sent, "presumed_lost": 0,
                                          "credit_timeouts": 0, "send_errors": 0, "incarnation": 0}},
            "learners": {"1": {"t_written": written, "contributions": applied, "rejected": 0, "duplicates": 0,
                               "workers_expired": 0, "incarnation": incarnation}},
            "impair": {}, "queues": {"learners": {"dropped": dropped}}}


def test_counter_increase_interpolates_and_counts_a_restart_from_zero():
    records = [sample(0, 0, 0), sample(2, 200, 100), sample(4, 400, 300), sample(5, 500, 20, incarnation=1),
               sample(6, 600, 120, incarnation=1)]
    points = counter_points(records, "learners", "1", "contributions")
    assert [p[2] for p in points] == [0, 0, 0, 1, 1]
    assert increase(points, 1, 3) == pytest.approx(50 + 100)     # half of 0..100, half of 100..300
    # From 3 s to the end: 100 more from the first process, then the second's 0..120.
    assert increase(points, 3, 6) == pytest.approx(100 + 120)
    counters = window_counters(records, 3, 6, ["c1-w0"], [1])
    assert counters["sent"] == 300 and counters["applied"] == 220 and counters["lost"] == 80


def test_a_switch_queue_counter_that_goes_down_is_a_restart():
    records = [sample(0, 0, 0, dropped=10), sample(1, 0, 0, dropped=50), sample(2, 0, 0, dropped=5),
               sample(3, 0, 0, dropped=25)]
    assert window_counters(records, 0, 3, [], [])["queue_dropped"] == 40 + 25


def test_counters_nobody_reported_are_unknown_not_zero():
    counters = window_counters([{"t": 1.0, "workers": {}, "learners": {}}], 0, 2, ["c1-w0"], [1])
    assert counters["sent"] is None and counters["applied"] is None and counters["lost"] is None
    assert recovery([], 1.0, 2.0) == (None, None, "no learner counters (stand-ins)")


def test_write_times_are_used_instead_of_sample_times():
    records = [sample(1.0, 100, 0, written=0.5), sample(2.0, 100, 0, written=0.5), sample(3.0, 300, 0, written=2.5)]
    points = counter_points(records, "workers", "c1-w0", "contributions_sent")
    assert points == [(0.5, 100, 0), (2.5, 300, 0)]  # the repeat of one write is dropped


def test_recovery_is_measured_from_the_fault_to_the_earlier_rate_again():
    # 100 contributions/s up to 10 s, nothing while down (10..12), then 50/s, then 90/s from 14 s.
    points = [(t, 100 * t, 0) for t in range(0, 11)] + [(12, 1000, 0), (13, 1050, 0), (14, 1100, 0), (15, 1190, 0)]
    seconds, earlier, why = recovery(points, 10.0, 12.0)
    assert earlier == pytest.approx(100) and why is None
    assert seconds == pytest.approx(5.0)   # 14..15 is the first interval at >= 80 per second
    assert recovery(points, 1.0, 2.0)[2] == "too early: no rate before the fault"
    assert recovery(points[:13], 10.0, 12.0)[2] == "not back at its earlier rate before the learner stopped"


def recorded_run(write_file, tmp_path):
    """A run with a learner restart: the first learner's clock starts at 1 s on the run's clock and
    is killed at 6 s; the second's clock starts at 7.5 s and it reaches the target 2 s later."""
    run = "raw/shesha/seed-1"
    header = "wall_seconds,env_steps,eval_mean_return,contributions\n"
    write_file(f"{run}/learner-c1/learner.csv", header + "1.0,100,10,100\n2.0,200,20,200\n3.0,300,30,300\n")
    write_file(f"{run}/learner-c1/learner.json", {"target": {"reached": False}})
    write_file(f"{run}/learner-c1.r1/learner.csv", header + "1.0,400,200,50\n2.0,500,480,150\n")
    write_file(f"{run}/learner-c1.r1/learner.json", {"target": {"reached": True, "seconds": 2.0, "env_steps": 500}})
    events = [{"kind": "learner_restart", "at_s": 6, "cluster": 1, "down_s": 1}]
    write_file(f"{run}/faults.json", {"events": events, "settle_s": 2.0, "actions": [
        {"t": 6.0, "t_done": 6.01, "action": "learner_kill", "event": 0, "kind": "learner_restart", "cluster": 1},
        {"t": 7.0, "t_done": 7.0, "action": "learner_start", "event": 0, "kind": "learner_restart", "cluster": 1,
         "incarnation": 1, "metrics_dir": "learner-c1.r1", "offset_s": 7.0}]})
    lines = []
    for t, applied, incarnation, wall in [(2, 100, 0, 1.0), (3, 200, 0, 2.0), (4, 300, 0, 3.0), (5, 400, 0, 4.0),
                                          (6, 500, 0, 5.0), (8.5, 50, 1, 1.0), (9.5, 150, 1, 2.0)]:
        record = sample(t, applied + 5, applied, incarnation, written=t)
        record["learners"]["1"]["wall_seconds"] = wall
        lines.append(json.dumps(record))
    write_file(f"{run}/counters.jsonl", "\n".join(lines) + "\n")
    return str(tmp_path / run)


def test_learner_incarnations_on_the_first_ones_clock(write_file, tmp_path):
    run_dir = recorded_run(write_file, tmp_path)
    rows, target_s, steps = merged_learner_series(run_dir, 1)
    # The second learner's clock starts 7.5 - 1.0 = 6.5 s after the first's.
    assert [(r["t_s"], r["incarnation"]) for r in rows] == [(1.0, 0), (2.0, 0), (3.0, 0), (7.5, 1), (8.5, 1)]
    assert target_s == pytest.approx(8.5) and steps == 500


def test_analyse_faults_on_a_recorded_run(write_file, tmp_path):
    run_dir = recorded_run(write_file, tmp_path)
    scenario = {"clusters": [{"id": 1, "workers": 1}]}
    (entry,) = analyse_faults(run_dir, scenario, 10.0)
    assert (entry["start_s"], entry["end_s"]) == (6.0, 7.0)
    # The window ends 2 s after the restart (9 s): half of the second learner's 50..150.
    assert entry["counters"]["applied"] == 100 and entry["counters"]["sent"] == 105
    assert entry["clusters"]["1"]["recovery_s"] == pytest.approx(3.5)  # 8.5..9.5 at 100/s, earlier 100/s
    assert event_times({"events": [{"kind": "worker_kill"}], "actions": [
        {"event": 0, "action": "worker_kill", "t": 3.0, "t_done": 3.1}]}, 0, 20) == (3.0, 3.0)


def run_result(ttt, faults=None):
    return {"clusters": {"1": {"time_to_target_s": ttt}}, "faults": faults}


def fault_scenario():
    events = [{"kind": "switch_restart", "at_s": 4.0, "down_s": 1.0, "switch": "tor"}]
    return {"seeds": [1, 2, 3], "duration_s": 60,
            "clusters": [{"id": 1, "env": "CartPole-v1", "config": "configs/cluster-cartpole.yaml"}],
            "faults": {"events": events},
            "arms": [{"name": "fifo", "_faults": True}, {"name": "shesha", "_faults": True},
                     {"name": "fifo-nofaults", "_faults": False}, {"name": "shesha-nofaults", "_faults": False}]}


def entry(recovery_s, lost):
    return [{"index": 0, "kind": "switch_restart", "start_s": 4.0, "end_s": 5.0, "whole_run": False,
             "clusters": {"1": {"recovery_s": recovery_s, "why": None}},
             "counters": {"sent": 100, "applied": 100 - lost, "lost": lost, "queue_dropped": 3}}]


def test_goals_met_and_not_met():
    scenario = fault_scenario()
    results = {"shesha": {"1": run_result(12.0), "2": run_result(14.0), "3": run_result(13.0)},
               "shesha-nofaults": {"1": run_result(10.0), "2": run_result(10.0), "3": run_result(9.0)},
               "fifo": {"1": run_result(20.0), "2": run_result(13.5), "3": run_result(30.0)}}
    lines = fault_goals(scenario, results, {"1": 1.0})
    assert lines[3] == ("- Cluster 1 (CartPole-v1): Shesha's time to target under faults at most 1.5x its time "
                        "without: **met** (median 13.0 s vs 10.0 s: 1.30x; seed 1: 1.20x, seed 2: 1.40x, "
                        "seed 3: 1.44x).")
    assert lines[4].startswith("- Cluster 1: Shesha under faults never later than FIFO under the same faults (more "
                               "than one evaluation interval, 1 s): **met** (later on 0 of 3 seeds; medians 13.0 s "
                               "vs 20.0 s).")
    results["fifo"]["2"] = run_result(12.0)
    results["shesha-nofaults"] = {s: run_result(8.0) for s in ("1", "2", "3")}
    lines = fault_goals(scenario, results, {"1": 1.0})
    assert "**not met** (median 13.0 s vs 8.0 s: 1.62x" in lines[3]
    assert "**not met** (later on 1 of 3 seeds: 2;" in lines[4]


def test_faults_section_tables(write_file, tmp_path):
    scenario = fault_scenario()
    results = {"fifo": {"1": run_result(20.0, entry(3.0, 10)), "2": run_result(None, entry(None, 30)),
                        "3": run_result(22.0, entry(5.0, 20))},
               "shesha": {s: run_result(10.0, entry(2.0, 5)) for s in ("1", "2", "3")},
               "fifo-nofaults": {s: run_result(15.0) for s in ("1", "2", "3")},
               "shesha-nofaults": {s: run_result(8.0) for s in ("1", "2", "3")}}
    text = "\n".join(faults_section(scenario, scenario["arms"], results))
    assert "- switch tor restart (1 s down), at 4 s" in text
    assert "| fifo | 1 | 22.0 (20.0..never) | 15.0 (15.0..15.0) | 1.47x | 1: 20.0 / 15.0; 2: never / 15.0; 3: 22.0 / 15.0 |" in text
    assert "| shesha | 1 | 10.0 (10.0..10.0) | 8.0 (8.0..8.0) | 1.25x |" in text
    assert "| fifo | switch tor restart (1 s down) | 1 | 4.0 | 2 of 3 | 100 | 80 | 20 |" in text
    # Counters the runs did not record read n/a; the switch's queue drops are there.
    assert "| shesha | switch tor restart (1 s down) | n/a | n/a | n/a | 3 | n/a |" in text
    assert faults_section(dict(scenario, faults={"events": []}), scenario["arms"], results) == []


def test_the_shipped_fault_scenario(source_root):
    scenario = load_scenario(os.path.join(source_root, "configs", "lab-faults.yaml"))
    kinds = [e["kind"] for e in scenario["faults"]["events"]]
    assert sorted(set(kinds)) == ["learner_restart", "link", "switch_restart", "worker_kill"]
    assert [a["name"] for a in scenario["arms"]] == ["fifo", "shesha", "fifo-nofaults", "shesha-nofaults"]
    assert len(scenario["seeds"]) >= 3
