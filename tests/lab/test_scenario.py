"""The scenario schema (tools/lab/shesha_lab/scenario.py): the shipped scenarios load, every default
is filled in, and a bad key, type or value is refused with a message naming the key."""
import glob
import os

import pytest

from shesha_lab import LabError
from shesha_lab.cluster_files import effective_chunk_elems, rack_mtu
from shesha_lab.scenario import DEFAULT_ARMS, arm_uses_drr, load_scenario

MINIMAL = """\
name: t
seeds: [1, 2]
clusters:
  - {id: 1, env: CartPole-v1, config: configs/cluster-cartpole.yaml, workers: 2, target_return: 475}
  - {id: 2, env: Acrobot-v1, config: configs/cluster-acrobot.yaml, workers: 3, target_return: -100}
"""


@pytest.fixture
def scenario_file(write_file):
    """scenario_file(extra YAML appended to MINIMAL, or a whole text with whole=True) -> path."""
    def make(extra="", whole=None):
        return write_file("scenario.yaml", whole if whole is not None else MINIMAL + extra)
    return make


def error_of(path, **kwargs):
    with pytest.raises(LabError) as caught:
        load_scenario(path, **kwargs)
    return str(caught.value)


def test_every_shipped_scenario_loads(source_root):
    paths = sorted(glob.glob(os.path.join(source_root, "configs", "lab-*.yaml")))
    assert len(paths) >= 3
    for path in paths:
        for quick in (False, True):
            scenario = load_scenario(path, quick)
            assert scenario["clusters"] and scenario["arms"] and scenario["switches"], path
            for cluster in scenario["clusters"]:
                assert cluster["switch"] and cluster["worker_switch"], path
            for arm in scenario["arms"]:
                assert arm["label"], path


def test_default_scenario_as_shipped(source_root):
    scenario = load_scenario(os.path.join(source_root, "configs", "lab-default.yaml"))
    assert scenario["name"] == "default"
    assert scenario["learners"] == "shared"
    assert scenario["seeds"] == [1, 2, 3]
    assert scenario["duration_s"] == 60
    assert [a["name"] for a in scenario["arms"]] == ["fifo", "shesha"]
    assert [(c["id"], c["env"], c["workers"], c["switch"], c["worker_switch"]) for c in scenario["clusters"]] == [
        (1, "CartPole-v1", 3, "tor", "tor"), (2, "Acrobot-v1", 3, "tor", "tor")]
    assert scenario["switches"][0]["bottleneck"] == {
        "rate": "30M", "burst_bytes": "16KiB", "queue_packets": 128, "queue_bytes": "8MiB",
        "mark_depth_packets": 32, "mark_sojourn_us": 0}
    quick = load_scenario(os.path.join(source_root, "configs", "lab-default.yaml"), quick=True)
    assert (quick["duration_s"], quick["seeds"]) == (25, [1])
    assert [c["workers"] for c in quick["clusters"]] == [2, 2]


def test_two_racks_places_clusters_on_their_switches(source_root):
    scenario = load_scenario(os.path.join(source_root, "configs", "lab-two-racks.yaml"))
    assert [s["name"] for s in scenario["switches"]] == ["tor-a", "tor-b"]
    assert scenario["links"] == [{"a": "tor-a", "b": "tor-b", "rate": "16M", "bottleneck": True,
                                  "shaped": "b-to-a"}]
    assert {(c["switch"], c["worker_switch"]) for c in scenario["clusters"]} == {("tor-a", "tor-b")}


def test_no_file_is_the_embedded_default():
    scenario = load_scenario(None)
    assert scenario["name"] == "default"
    assert scenario["duration_s"] == 90.0
    assert [s["name"] for s in scenario["switches"]] == ["tor"]
    assert [(c["id"], c["env"], c["target_return"], c["config"]) for c in scenario["clusters"]] == [
        (1, "CartPole-v1", 475, "configs/cluster-cartpole.yaml"), (2, "Acrobot-v1", -100, "configs/cluster-acrobot.yaml")]
    assert scenario["arms"] == DEFAULT_ARMS
    assert scenario["arms"] is not DEFAULT_ARMS  # a copy: validate() fills in labels


def test_defaults_filled_in(scenario_file):
    scenario = load_scenario(scenario_file("cross_traffic: {enabled: true, to_cluster: 2}\n"
                                           "arms:\n  - {name: a, aggregation: on, feedback: off, congestion_control: off}\n"))
    assert scenario["cross_traffic"] == {"enabled": True, "rate": "5M", "switch": "tor", "to_cluster": 2,
                                         "datagram_bytes": 1000}
    assert scenario["arms"] == [{"name": "a", "aggregation": True, "feedback": False, "congestion_control": False,
                                 "label": "a", "scheduling": "auto", "model_delivery": "unicast"}]
    assert scenario["clusters"][0]["chunk_elems"] == 256
    assert scenario["clusters"][0]["weight"] == 1
    assert scenario["rack"] == {"prefix": "shesha-lab-", "if_prefix": "shl-", "subnet": "10.77.1",
                                "pmd": "net_af_packet"}


def test_numbers_given_for_strings_become_strings(scenario_file):
    scenario = load_scenario(scenario_file("switches:\n  - {name: tor, bottleneck: {rate: 20000000}}\n"))
    assert scenario["switches"][0]["bottleneck"]["rate"] == "20000000"


def test_quick_and_overrides(scenario_file):
    path = scenario_file("quick: {duration_s: 10, seeds: [7], workers_per_cluster: 1}\n")
    scenario = load_scenario(path, quick=True, overrides={"seeds": [4, 5], "duration_s": None})
    assert scenario["duration_s"] == 10
    assert scenario["seeds"] == [4, 5]
    assert [c["workers"] for c in scenario["clusters"]] == [1, 1]


@pytest.mark.parametrize("extra, message", [
    ("seedz: [1]\n", "seedz: unknown key (allowed: name, description, duration_s, seeds, processes, host_cpus, "
                     "rack, switches, links, clusters, learners, cross_traffic, synthetic, arms, quick, "
                     "progress_interval_s, telemetry_interval_s, faults, at_scale)"),
    ("rack: {bogus: 1}\n", "rack.bogus: unknown key (allowed: prefix, if_prefix, subnet, pmd)"),
    ("switches:\n  - {name: tor, bottleneck: {foo: 1}}\n",
     "switches[0].bottleneck.foo: unknown key (allowed: rate, burst_bytes, queue_packets, queue_bytes, "
     "mark_depth_packets, mark_sojourn_us)"),
    ("arms:\n  - {name: a, aggregation: on, feedback: off, congestion_control: off, colour: red}\n",
     "arms[0].colour: unknown key (allowed: name, aggregation, feedback, congestion_control, label, scheduling, "
     "model_delivery)"),
])
def test_unknown_keys_are_named(scenario_file, extra, message):
    assert error_of(scenario_file(extra)) == message


def test_unknown_cluster_key(scenario_file):
    text = MINIMAL.replace("workers: 2,", "workers: 2, bogus: 1,")
    assert error_of(scenario_file(whole=text)) == (
        "clusters[0].bogus: unknown key (allowed: id, env, config, workers, target_return, chunk_elems, "
        "merged_steps, switch, worker_switch, weight)")


@pytest.mark.parametrize("extra, message", [
    ("duration_s: abc\n", "duration_s: must be a number, got 'abc'"),
    ("duration_s: true\n", "duration_s: must be a number, got True"),
    ("progress_interval_s: -1\n", "progress_interval_s: must not be negative, got -1"),
    ("switches:\n  - {name: tor, burst: 1.5}\n", "switches[0].burst: must be an integer, got 1.5"),
    ("cross_traffic: {enabled: yes please}\n", "cross_traffic.enabled: must be true/false (on/off), got 'yes please'"),
    ("rack: [1]\n", "rack: must be a mapping, got a list"),
    ("links: {a: x}\n", "links: must be a list, got a mapping"),
    ("description: [1]\n", "description: must be a string, got [1]"),
    ("arms:\n  - {name: a, feedback: off, congestion_control: off}\n", "arms[0].aggregation: required key missing"),
])
def test_wrong_types_are_named(scenario_file, extra, message):
    assert error_of(scenario_file(extra)) == message


def test_top_level_must_be_a_mapping(scenario_file):
    assert error_of(scenario_file(whole="- 1\n- 2\n")) == "scenario: must be a mapping, got a list"


def test_missing_required_cluster_key(scenario_file):
    text = MINIMAL.replace("env: Acrobot-v1, ", "")
    assert error_of(scenario_file(whole=text)) == "clusters[1].env: required key missing"


@pytest.mark.parametrize("extra, message", [
    ("learners: pooled\n", "learners: per_cluster or shared, got 'pooled'"),
    ("processes: some\n", "processes: must be auto, drl or synthetic, got 'some'"),
    ("duration_s: 0.5\n", "duration_s: must be in 1..3600, got 0.5"),
    ("rack: {subnet: 10.77}\n", "rack.subnet: must be three octets like 10.77.1, got '10.77'"),
    ("rack: {subnet: 10.77.300}\n", "rack.subnet: must be three octets like 10.77.1, got '10.77.300'"),
    ("rack: {pmd: net_tap}\n", "rack.pmd: must be net_af_packet or net_af_xdp"),
    ("switches:\n  - {name: a}\n  - {name: a}\n", "switches: names must be unique"),
    ("switches:\n  - {name: waytoolongname}\n", "switches[0].name: letters, digits and '-', at most 8 characters"),
    ("arms:\n  - {name: a, aggregation: on, feedback: off, congestion_control: off, scheduling: wfq}\n",
     "arms[0].scheduling: auto (the switch's default: drr where two or more clusters aggregate), fifo or drr "
     "(per-cluster fair shares on the switch ports), got 'wfq'"),
    ("arms:\n  - {name: 'a b', aggregation: on, feedback: off, congestion_control: off}\n",
     "arms[0].name: letters, digits, '-' and '_' only"),
    ("arms:\n  - {name: a, aggregation: 1, feedback: off, congestion_control: off}\n",
     "arms[0].aggregation: must be on/off (true/false), got 1"),
    ("arms:\n  - {name: a, aggregation: on, feedback: off, congestion_control: off}\n"
     "  - {name: a, aggregation: on, feedback: off, congestion_control: off}\n", "arms: at least one, names unique"),
    ("cross_traffic: {enabled: true, to_cluster: 3}\n", "cross_traffic.to_cluster: no cluster 3"),
    ("cross_traffic: {enabled: true, switch: nope}\n", "cross_traffic.switch: no switch named 'nope'"),
])
def test_bad_values_are_named(scenario_file, extra, message):
    assert error_of(scenario_file(extra)) == message


@pytest.mark.parametrize("old, new, message", [
    ("id: 1,", "id: 21,", "clusters[0].id: an integer in 1..20 (it also numbers the hosts' addresses)"),
    ("id: 2,", "id: 1,", "clusters: at least one, ids unique"),
    ("workers: 2,", "workers: 10,", "clusters[0].workers: an integer in 1..9"),
    ("workers: 2,", "workers: 2, chunk_elems: 4096,",
     "clusters[0].chunk_elems: 0 (keep the config file's) or 1..2048 (above 356 the rack runs at MTU 9000), got 4096"),
    ("workers: 2,", "workers: 2, merged_steps: twice,",
     "clusters[0].merged_steps: '' (keep the config file's), one, per_contribution or sqrt, got 'twice'"),
    ("target_return: 475", "target_return: high", "clusters[0].target_return: must be a number"),
    ("workers: 3,", "workers: 3, weight: 0,",
     "clusters[1].weight: an integer in 1..1000 (its share of a port under drr scheduling), got 0"),
    ("workers: 3,", "workers: 3, switch: nope,", "clusters[1].switch: no switch named 'nope'"),
])
def test_bad_cluster_values_are_named(scenario_file, old, new, message):
    assert error_of(scenario_file(whole=MINIMAL.replace(old, new))) == message


def test_links(scenario_file):
    two = "switches:\n  - {name: a, idle_backoff_us: 5}\n  - {name: b, lcore: 0, idle_backoff_us: 5}\n"
    assert error_of(scenario_file(two + "links: [{a: a, b: c}]\n")) == "links[0].b: no switch named 'c'"
    assert error_of(scenario_file(two + "links: [{a: a, b: a}]\n")) == "links[0]: a and b must be different switches"
    assert error_of(scenario_file(two + "links: [{a: a, b: b, shaped: up}]\n")) == (
        "links[0].shaped: both, a-to-b or b-to-a, got 'up'")
    assert error_of(scenario_file(two)) == (
        "links: switches must form a tree (exactly one link fewer than switches), else frames loop")
    assert load_scenario(scenario_file(two + "links: [{a: a, b: b}]\n"))["links"][0]["shaped"] == "both"


def test_switches_sharing_cores_must_back_off(scenario_file, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    two = "switches:\n  - {name: a}\n  - {name: b, idle_backoff_us: 5}\nlinks: [{a: a, b: b}]\n"
    assert error_of(scenario_file(two)) == (
        "switches: 2 switches on 2 cores must all set idle_backoff_us > 0 to share cores (busy-polling: a)")
    assert error_of(scenario_file("switches:\n  - {name: a, lcore: 2}\n")) == (
        "switches[0].lcore: 2 but this machine has 2 cores")


def test_shared_learners_need_one_switch(scenario_file):
    text = MINIMAL.replace("workers: 3,", "workers: 3, switch: b,") + (
        "learners: shared\nswitches:\n  - {name: a, idle_backoff_us: 5}\n  - {name: b, lcore: 0, idle_backoff_us: 5}\n"
        "links: [{a: a, b: b}]\n")
    assert error_of(scenario_file(whole=text)) == (
        "learners: shared needs every cluster's learner on one switch (clusters[].switch)")


def test_unreadable_files(scenario_file, tmp_path):
    assert error_of(str(tmp_path / "none.yaml")) == f"cannot read scenario {tmp_path / 'none.yaml'}: No such file or directory"
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"name: t\n# ok\n# caf\xe9\n")
    assert error_of(str(latin1)) == f"{latin1}:3: not UTF-8 text (byte 0xe9 at offset 18)"
    assert error_of(scenario_file(whole="name: [unclosed\n")).startswith(f"{tmp_path / 'scenario.yaml'}: not valid YAML: ")


def test_chunk_size_sets_the_rack_mtu(scenario_file, write_file):
    scenario = load_scenario(scenario_file())
    assert rack_mtu(scenario) == 1500
    big = load_scenario(scenario_file(whole=MINIMAL.replace("workers: 3,", "workers: 3, chunk_elems: 357,")))
    assert [effective_chunk_elems(c) for c in big["clusters"]] == [256, 357]
    assert rack_mtu(big) == 9000
    cluster_file = write_file("cluster.yaml", "transport:\n  chunk_elems: 300\n")
    from_file = {"chunk_elems": 0, "config": cluster_file}
    assert effective_chunk_elems(from_file) == 300
    assert effective_chunk_elems({"chunk_elems": 0, "config": write_file("c2.yaml", "env: x\n")}) == 1024
    assert effective_chunk_elems({"chunk_elems": 0, "config": "/nonexistent.yaml"}) == 0
    xdp = MINIMAL.replace("workers: 3,", "workers: 3, chunk_elems: 400,") + "rack: {pmd: net_af_xdp}\n"
    assert error_of(scenario_file(whole=xdp)) == (
        "rack.pmd: net_af_xdp (DPDK 22.11, no multi-buffer) cannot carry chunks of more than 356 elements "
        "at MTU 9000: use net_af_packet")


def test_model_delivery_is_checked(scenario_file):
    arms = "arms:\n  - {name: a, aggregation: on, feedback: off, congestion_control: off, model_delivery: %s}\n"
    assert load_scenario(scenario_file(arms % "replicated"))["arms"][0]["model_delivery"] == "replicated"
    assert error_of(scenario_file(arms % "multicast")) == (
        "arms[0].model_delivery: unicast (the learner sends each worker its copy) or replicated (one copy to the "
        "cluster's group, which the switches replicate), got 'multicast'")


def test_arm_uses_drr_follows_the_switch_auto_rule():
    two = {"clusters": [{"id": 1}, {"id": 2}]}
    one = {"clusters": [{"id": 1}]}
    arm = {"aggregation": True, "scheduling": "auto"}
    assert arm_uses_drr(arm, two)
    assert not arm_uses_drr(arm, one)
    assert not arm_uses_drr({"aggregation": False, "scheduling": "auto"}, two)
    assert arm_uses_drr({"aggregation": False, "scheduling": "drr"}, one)
    assert not arm_uses_drr({"aggregation": True, "scheduling": "fifo"}, two)
