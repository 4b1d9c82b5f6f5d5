"""The switch YAML generator (tools/lab/shesha_lab/switch_yaml.py) for the lab and for the rack
helper tools/lab/switch_yaml.sh: the exact structure for given inputs, and that the text written
reads back as that structure."""
import os
import subprocess

import pytest
import yaml

from shesha_lab.scenario import load_scenario
from shesha_lab.switch_yaml import (LAB_HEADER, RACK_HEADER, lab_switch_config, main, plain_scalar,
                                    rack_switch_config, render, switch_yaml_text)
from shesha_lab.topology import bottleneck_ports, topology

ONE_RACK = """\
name: t
switches:
  - {name: tor, lcore: 1, idle_backoff_us: 7, burst: 16, mbufs: 8192, feedback_interval_us: 500,
     version_tolerance: 1,
     bottleneck: {rate: 30M, burst_bytes: 32KiB, queue_packets: 64, queue_bytes: 4MiB, mark_depth_packets: 16,
                  mark_sojourn_us: 300}}
clusters:
  - {id: 1, env: CartPole-v1, config: configs/cluster-cartpole.yaml, workers: 2, target_return: 475, weight: 3}
  - {id: 2, env: Acrobot-v1, config: configs/cluster-acrobot.yaml, workers: 1, target_return: -100}
cross_traffic: {enabled: true, to_cluster: 2}
"""
UNSHAPED = {"queue": {"packets": 1024, "bytes": "4MiB"}, "marking": {"depth_packets": 0, "sojourn_us": 0, "ip_ecn": True}}
SHAPED = {"shaper": {"rate": "30M", "burst_bytes": "32KiB"}, "queue": {"packets": 64, "bytes": "4MiB"},
          "marking": {"depth_packets": 16, "sojourn_us": 300, "ip_ecn": True}}
TAIL = {"protocol": {"udp_port": 17717, "malformed": "forward"}}


def scenario_of(write_file, text):
    return load_scenario(write_file("scenario.yaml", text))


def config_for(scenario, switch_name, prefix="pfx"):
    hosts, links = topology(scenario)
    switch = next(s for s in scenario["switches"] if s["name"] == switch_name)
    return lab_switch_config(scenario, switch, hosts, links, prefix)


def test_one_rack_exact(write_file):
    config = config_for(scenario_of(write_file, ONE_RACK), "tor", "shesha-lab-9-tor")
    assert config == {
        "eal": ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "shesha-lab-9-tor", "-l", "1"],
        "lcores": 1, "idle_backoff_us": 7, "burst": 16, "mbufs": 8192,
        "ports": [
            {"name": "c1-l", "device": "net_af_packet0,iface=shl-c1-l", **SHAPED},
            {"name": "c1-w0", "device": "net_af_packet1,iface=shl-c1-w0", **UNSHAPED},
            {"name": "c1-w1", "device": "net_af_packet2,iface=shl-c1-w1", **UNSHAPED},
            {"name": "c2-l", "device": "net_af_packet3,iface=shl-c2-l", **SHAPED},
            {"name": "c2-w0", "device": "net_af_packet4,iface=shl-c2-w0", **UNSHAPED},
            {"name": "xt", "device": "net_af_packet5,iface=shl-xt", **UNSHAPED},
        ],
        **TAIL,
        "aggregation": {"enabled": True, "non_member": "forward", "clusters": [
            {"id": 1, "aggregation": True, "version_tolerance": 1, "weight": 3, "members": ["10.77.1.11", "10.77.1.12"]},
            {"id": 2, "aggregation": True, "version_tolerance": 1, "weight": 1, "members": ["10.77.1.21"]}]},
        "feedback": {"enabled": True, "interval_us": 500},
        "stats": {"interval_s": 1},
        "telemetry": True,
    }
    assert list(config) == ["eal", "lcores", "idle_backoff_us", "burst", "mbufs", "ports", "protocol", "aggregation",
                            "feedback", "stats", "telemetry"]


def test_shared_learners_have_one_port(write_file):
    scenario = scenario_of(write_file, ONE_RACK + "learners: shared\n")
    config = config_for(scenario, "tor")
    assert [(p["name"], "shaper" in p) for p in config["ports"]] == [
        ("learners", True), ("c1-w0", False), ("c1-w1", False), ("c2-w0", False), ("xt", False)]
    hosts, links = topology(scenario)
    assert hosts["learners"]["extra_ips"] == ["10.77.1.20"]
    assert bottleneck_ports(scenario, scenario["switches"][0], hosts, links) == ["learners"]


def test_two_racks_shape_the_link_towards_the_learners(source_root):
    scenario = load_scenario(os.path.join(source_root, "configs", "lab-two-racks.yaml"))
    rack_a, rack_b = config_for(scenario, "tor-a"), config_for(scenario, "tor-b")
    assert rack_a["eal"][-2:] == ["-l", "0"] and rack_b["eal"][-2:] == ["-l", "1"]
    assert [(p["name"], p["device"], p.get("shaper")) for p in rack_a["ports"]] == [
        ("c1-l", "net_af_packet0,iface=shl-c1-l", {"rate": "20M", "burst_bytes": "16KiB"}),
        ("c2-l", "net_af_packet1,iface=shl-c2-l", {"rate": "20M", "burst_bytes": "16KiB"}),
        ("to-tor-b", "net_af_packet2,iface=shl-sp0a", None)]
    assert [(p["name"], p["device"], p.get("shaper")) for p in rack_b["ports"]] == [
        ("c1-w0", "net_af_packet0,iface=shl-c1-w0", None), ("c1-w1", "net_af_packet1,iface=shl-c1-w1", None),
        ("c1-w2", "net_af_packet2,iface=shl-c1-w2", None), ("c2-w0", "net_af_packet3,iface=shl-c2-w0", None),
        ("c2-w1", "net_af_packet4,iface=shl-c2-w1", None), ("c2-w2", "net_af_packet5,iface=shl-c2-w2", None),
        ("to-tor-a", "net_af_packet6,iface=shl-sp0b", {"rate": "16M", "burst_bytes": "16KiB"})]
    assert rack_b["ports"][6]["queue"] == {"packets": 128, "bytes": "8MiB"}
    assert rack_a["ports"][2]["queue"] == {"packets": 1024, "bytes": "4MiB"}


def test_unrated_link_takes_the_switch_rate(write_file):
    text = ("name: t\nswitches:\n  - {name: a, idle_backoff_us: 5, bottleneck: {rate: 20000000}}\n"
            "  - {name: b, lcore: 0, idle_backoff_us: 5}\nlinks: [{a: a, b: b, shaped: a-to-b}]\n"
            "clusters:\n  - {id: 1, env: E, workers: 1, target_return: 1, switch: a, worker_switch: b}\n")
    scenario = scenario_of(write_file, text)
    port = config_for(scenario, "a")["ports"][1]
    assert (port["name"], port["shaper"]) == ("to-b", {"rate": 20000000, "burst_bytes": "16KiB"})
    assert "shaper" not in config_for(scenario, "b")["ports"][1]


def test_jumbo_chunks_set_mtu_and_ring_frames(write_file):
    scenario = scenario_of(write_file, ONE_RACK.replace("weight: 3}", "weight: 3, chunk_elems: 2048}"))
    port = config_for(scenario, "tor")["ports"][0]
    assert port["device"] == "net_af_packet0,iface=shl-c1-l,framesz=9216,blocksz=36864"
    assert port["mtu"] == 9000
    assert list(port) == ["name", "device", "mtu", "shaper", "queue", "marking"]


def test_lab_text_reads_back(write_file):
    scenario = scenario_of(write_file, ONE_RACK)
    hosts, links = topology(scenario)
    text = switch_yaml_text(scenario, scenario["switches"][0], hosts, links, "p")
    assert text.startswith(LAB_HEADER + "\neal: [")
    assert "&" not in text and "*" not in text  # no YAML anchors or aliases
    assert yaml.safe_load(text) == lab_switch_config(scenario, scenario["switches"][0], hosts, links, "p")
    assert yaml.safe_load(text)["eal"][2] == "512"  # a string, as the EAL wants


@pytest.mark.parametrize("text, value", [("20M", "20M"), ("0", 0), ("128", 128), ("20000000", 20000000),
                                         ("1.5", 1.5), ("16KiB", "16KiB"), ("on", "on"), ("", ""), (7, 7)])
def test_plain_scalar(text, value):
    assert plain_scalar(text) == value and type(plain_scalar(text)) is type(value)


RACK_EXPECTED = {
    "eal": ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "shesha-it-4242"],
    "lcores": 1, "idle_backoff_us": 0, "burst": 32, "mbufs": 16384,
    "ports": [
        {"name": "h1", "device": "net_af_packet0,iface=shit-h1"},
        {"name": "h2", "device": "net_af_packet1,iface=shit-h2"},
        {"name": "h3", "device": "net_af_packet2,iface=shit-h3"},
        {"name": "h4", "device": "net_af_packet3,iface=shit-h4", "shaper": {"rate": "20M", "burst_bytes": "16KiB"},
         "queue": {"packets": 128, "bytes": "8MiB"}, "marking": {"depth_packets": 32, "sojourn_us": 0, "ip_ecn": True}},
        {"name": "h9", "device": "net_af_packet4,iface=shit-h9"}],
    "protocol": {"udp_port": 17717, "malformed": "forward"},
    "aggregation": {"enabled": True, "non_member": "forward", "clusters": [
        {"id": 1, "aggregation": True, "version_tolerance": 0, "members": ["10.77.0.1", "10.77.0.2", "10.77.0.3"]},
        {"id": 2, "aggregation": True, "version_tolerance": 0, "members": ["10.77.0.1", "10.77.0.2", "10.77.0.3"]}]},
    "feedback": {"enabled": True, "interval_us": 1000},
    "stats": {"interval_s": 1},
    "telemetry": True,
}

# What tools/lab/switch_yaml.sh wrote by echo before it called the generator (test_rack.sh's
# congested arm): the generator must keep writing the same configuration.
RACK_OLD_TEXT = """\
# generated by tools/lab/switch_yaml.sh for the namespace rack
eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "shesha-it-4242"]
lcores: 1
idle_backoff_us: 0
burst: 32
mbufs: 16384
ports:
  - name: h1
    device: "net_af_packet0,iface=shit-h1"
  - name: h2
    device: "net_af_packet1,iface=shit-h2"
  - name: h3
    device: "net_af_packet2,iface=shit-h3"
  - name: h4
    device: "net_af_packet3,iface=shit-h4"
    shaper: {rate: 20M, burst_bytes: 16KiB}
    queue: {packets: 128, bytes: 8MiB}
    marking: {depth_packets: 32, sojourn_us: 0, ip_ecn: true}
  - name: h9
    device: "net_af_packet4,iface=shit-h9"
protocol: {udp_port: 17717, malformed: forward}
aggregation:
  enabled: true
  non_member: forward
  clusters:
    - {id: 1, aggregation: true, version_tolerance: 0, members: ["10.77.0.1", "10.77.0.2", "10.77.0.3"]}
    - {id: 2, aggregation: true, version_tolerance: 0, members: ["10.77.0.1", "10.77.0.2", "10.77.0.3"]}
feedback: {enabled: true, interval_us: 1000}
stats: {interval_s: 1}
telemetry: true
"""
RACK_PORTS = [("h1", "shit-h1"), ("h2", "shit-h2"), ("h3", "shit-h3"), ("h4", "shit-h4"), ("h9", "shit-h9")]
RACK_MEMBERS = ["10.77.0.1", "10.77.0.2", "10.77.0.3"]


def test_rack_config_exact():
    config = rack_switch_config(RACK_PORTS, "h4", "20M", "128", "32", RACK_MEMBERS, file_prefix="shesha-it-4242")
    assert config == RACK_EXPECTED
    assert yaml.safe_load(RACK_OLD_TEXT) == RACK_EXPECTED
    assert config["aggregation"]["clusters"][0]["members"] is not config["aggregation"]["clusters"][1]["members"]
    text = render(config, RACK_HEADER)
    assert text.startswith(RACK_HEADER + "\n")
    assert yaml.safe_load(text) == RACK_EXPECTED


def test_rack_config_unshaped_and_xdp():
    config = rack_switch_config([("a", "x-a"), ("b", "x-b")], "b", "0", "256", "0", [], pmd="net_af_xdp",
                                idle_backoff_us="50")
    assert config["eal"][-1] == "shesha-rack"
    assert config["idle_backoff_us"] == 50
    assert config["ports"][1] == {"name": "b", "device": "net_af_xdp1,iface=x-b",
                                  "shaper": {"rate": 0, "burst_bytes": "16KiB"},
                                  "queue": {"packets": 256, "bytes": "8MiB"},
                                  "marking": {"depth_packets": 0, "sojourn_us": 0, "ip_ecn": True}}
    assert [c["members"] for c in config["aggregation"]["clusters"]] == [[], []]


def test_rack_command_line(tmp_path):
    out = tmp_path / "sw.yaml"
    assert main(["rack", "--out", str(out), "--learner", "h4", "--rate", "20M", "--queue-packets", "128",
                 "--mark-depth", "32", "--file-prefix", "shesha-it-4242"]
                + [arg for ip in RACK_MEMBERS for arg in ("--member", ip)]
                + [f"{h}={i}" for h, i in RACK_PORTS]) == 0
    assert yaml.safe_load(out.read_text()) == RACK_EXPECTED
    with pytest.raises(SystemExit):
        main(["rack", "--out", str(out), "--learner", "h4", "--rate", "0", "--queue-packets", "1",
              "--mark-depth", "0", "h1"])  # a port without its interface


def test_bash_helper_calls_the_generator(tmp_path, source_root):
    """rack_switch_yaml (tools/lab/switch_yaml.sh) as test_rack.sh calls it, with the namespaces'
    addresses faked (no root): the same configuration as before."""
    out = tmp_path / "sw.yaml"
    script = f"""
        set -euo pipefail
        source "{source_root}/tools/lab/rack.sh"
        source "{source_root}/tools/lab/switch_yaml.sh"
        rack_host_ip() {{ echo "10.77.0.${{1#h}}"; }}
        RACK_PREFIX=shesha-it- RACK_IF_PREFIX=shit-
        export RACK_FILE_PREFIX=shesha-it-4242
        cd /
        rack_switch_yaml "{out}" h4 20M 128 32 h1,h2,h3 h1 h2 h3 h4 h9
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("RACK_")}
    subprocess.run(["bash", "-c", script], check=True, env=env)
    assert yaml.safe_load(out.read_text()) == RACK_EXPECTED
    assert out.read_text().startswith(RACK_HEADER + "\n")
    script = script.replace("export RACK_FILE_PREFIX=shesha-it-4242",
                            "unset RACK_FILE_PREFIX; export RACK_PMD=net_af_xdp RACK_IDLE_BACKOFF_US=40")
    subprocess.run(["bash", "-c", script], check=True, env=env)
    config = yaml.safe_load(out.read_text())
    assert config["eal"][-1] == "shesha-rack"
    assert config["idle_backoff_us"] == 40
    assert [p["device"] for p in config["ports"]][:2] == ["net_af_xdp0,iface=shit-h1", "net_af_xdp1,iface=shit-h2"]


def test_replicated_arm_adds_model_replication(write_file):
    """An arm with model_delivery: replicated gives every cluster its group, its learner and a copy per worker."""
    scenario = scenario_of(write_file, ONE_RACK)
    hosts, links = topology(scenario)
    config = lab_switch_config(scenario, scenario["switches"][0], hosts, links, "pfx", replicate_models=True)
    clusters = config["aggregation"]["clusters"]
    assert clusters[0]["model_replication"] == {"group": "239.77.0.1", "learner": "10.77.1.10", "max_members": 2}
    assert clusters[1]["model_replication"] == {"group": "239.77.0.2", "learner": "10.77.1.20", "max_members": 1}
    # The unicast arms' file has none, and the switch's parser accepts the replicated one.
    assert "model_replication" not in config_for(scenario, "tor")["aggregation"]["clusters"][0]


def test_replicated_cluster_file(write_file, tmp_path):
    """write_cluster_config with "replicated" sets learner.model_delivery and learner.model_group, and
    keeps the unicast copy apart."""
    from shesha_lab.cluster_files import write_cluster_config
    scenario = scenario_of(write_file, ONE_RACK)
    cluster = scenario["clusters"][0]
    unicast = write_cluster_config(cluster, str(tmp_path))
    replicated = write_cluster_config(cluster, str(tmp_path), "replicated")
    assert unicast != replicated
    learner = yaml.safe_load(open(replicated))["learner"]
    assert learner["model_delivery"] == "replicated"
    assert learner["model_group"] == "239.77.0.1"
    assert yaml.safe_load(open(unicast))["learner"]["model_delivery"] == "unicast"
