"""The report's at-scale section (tools/lab/shesha_lab/sim_scale.py): shesha-sim runs with both model
deliveries, and the section's table from a hand-made summary.csv, saying that MODEL was modelled."""
import csv
import os

from shesha_lab import sim_scale


def test_sim_command_sets_the_delivery_and_labels_it():
    scenario = {"clusters": [{"workers": 2}, {"workers": 2}], "learners": "shared"}
    cmd = sim_scale.sim_command("shesha-sim", scenario, "/tmp/x", "shesha", ["queue.fair=true"], 256, [128, 128], 2,
                                "replicated")
    assert cmd[cmd.index("-l") + 1] == "shesha-replicated-256"
    assert "model.delivery=replicated" in cmd
    assert "topology.shared_bottleneck=true" in cmd
    assert sim_scale.SIM_DELIVERIES == ("unicast", "replicated")


def test_sim_section_reports_both_directions(tmp_path):
    os.makedirs(tmp_path / "sim")
    fields = ["label", "aom_mean_us", "jain_fairness", "jain_contended", "contributions_dropped", "contributions_sent",
              "staleness_mean", "learner_up_utilisation", "learner_down_utilisation", "learner_down_model_bytes",
              "workers_without_model"]
    with open(tmp_path / "sim" / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for seed, aom in ((1, 10.0), (2, 12.0), (3, 11.0)):
            w.writerow({"label": "shesha-replicated-1024", "aom_mean_us": aom, "jain_fairness": 1, "jain_contended": 1,
                        "contributions_dropped": 0, "contributions_sent": 100, "staleness_mean": 0.02,
                        "learner_up_utilisation": 0.94, "learner_down_utilisation": 0.89,
                        "learner_down_model_bytes": 5.8e6, "workers_without_model": 0})
    lines = sim_scale.sim_section(str(tmp_path))
    text = "\n".join(lines)
    assert "MODEL traffic is modelled" in text
    row = [l for l in lines if l.startswith("| 1024 |")]
    assert row == ["| 1024 | shesha | replicated | 11.0 (10.0..12.0) | 1.000 (1.000..1.000) | 1.000 (1.000..1.000) | "
                   "0.0 (0.0..0.0) % | 0.02 | 0.94 / 0.89 | 5.8 | 0 |"]
