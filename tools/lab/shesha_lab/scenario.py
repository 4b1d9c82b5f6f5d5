"""The scenario: strict keys, every key has a default here (the embedded default scenario).
load_scenario() reads a file, fills in the defaults and validates; every error names the key."""
import copy
import os

from . import LabError
from .cluster_files import JUMBO_MTU, MAX_STD_CHUNK, rack_mtu
from .faults import FAULTS_TEMPLATE, expand_fault_arms, validate_faults
from .sim_scale import AT_SCALE_TEMPLATE, validate_at_scale
from .topology import topology

REQUIRED = object()
RATE = "rate"  # "20M", 20000000, 0

TEMPLATE = {
    "name": "default",
    "description": "",
    "duration_s": 90.0,          # per arm and seed
    "seeds": [1],                # the same seeds in every arm
    "processes": "auto",         # auto: shesha-learner/-worker if built, else gen/sink stand-ins
    "host_cpus": "auto",         # taskset list for host processes; auto = every core but 0
    "rack": {"prefix": "shesha-lab-", "if_prefix": "shl-", "subnet": "10.77.1", "pmd": "net_af_packet"},
    "switches": [],              # default: one switch "tor" (filled in by load_scenario)
    "links": [],                 # switch-to-switch links (veth pairs in the root namespace)
    "clusters": [],
    # per_cluster: each learner in its own namespace on its own (shaped) port; shared: every learner in
    # one "learners" host behind one shaped port, the bottleneck the clusters share (a parameter server).
    "learners": "per_cluster",
    "cross_traffic": {"enabled": False, "rate": "5M", "switch": "", "to_cluster": 1,
                      "datagram_bytes": 1000},
    "synthetic": {"rate": 100, "chunks": 4, "window": 16, "version_period_ms": 100},
    "arms": [],
    "quick": {"duration_s": 25.0, "seeds": [1], "workers_per_cluster": 0},
    "progress_interval_s": 5.0,
    "telemetry_interval_s": 0.25,
    # Faults on a schedule in each run of the chosen arms (faults.py, docs/lab.md "Faults").
    "faults": copy.deepcopy(FAULTS_TEMPLATE),
    # The scenario's shape as training in shesha-sim at 64-1,024 workers (sim_scale.py, docs/lab.md
    # "At scale"): main = the runs of shesha-lab run, quick = of run --quick, full = shesha-lab scale --full.
    "at_scale": copy.deepcopy(AT_SCALE_TEMPLATE),
}
SWITCH_TEMPLATE = {
    "name": REQUIRED, "lcore": 0, "idle_backoff_us": 0, "burst": 32, "mbufs": 16384,
    "bottleneck": {"rate": "20M", "burst_bytes": "16KiB", "queue_packets": 128, "queue_bytes": "8MiB",
                   "mark_depth_packets": 32, "mark_sojourn_us": 0},
    "feedback_interval_us": 1000, "version_tolerance": 2,
}
LINK_TEMPLATE = {"a": REQUIRED, "b": REQUIRED, "rate": "0", "bottleneck": True, "shaped": "both"}
CLUSTER_TEMPLATE = {
    "id": REQUIRED, "env": REQUIRED, "config": "", "workers": 3, "target_return": REQUIRED, "chunk_elems": 256,
    "merged_steps": "", "switch": "", "worker_switch": "", "weight": 1,
}
ARM_TEMPLATE = {"name": REQUIRED, "aggregation": REQUIRED, "feedback": REQUIRED, "congestion_control": REQUIRED,
                "label": "", "scheduling": "auto", "model_delivery": "unicast"}
AT_SCALE_RUN_TEMPLATE = {"workers": REQUIRED, "seeds": [1, 2, 3], "duration_ms": 2000.0}
ITEM_TEMPLATES = {"switches": SWITCH_TEMPLATE, "links": LINK_TEMPLATE, "clusters": CLUSTER_TEMPLATE,
                  "arms": ARM_TEMPLATE, "at_scale.main": AT_SCALE_RUN_TEMPLATE, "at_scale.quick": AT_SCALE_RUN_TEMPLATE,
                  "at_scale.full": AT_SCALE_RUN_TEMPLATE}

DEFAULT_ARMS = [
    {"name": "fifo", "label": "FIFO, no feedback", "aggregation": False, "feedback": False, "congestion_control": False,
     "scheduling": "fifo", "model_delivery": "unicast"},
    {"name": "merge", "label": "merging only", "aggregation": True, "feedback": False, "congestion_control": False,
     "scheduling": "fifo", "model_delivery": "unicast"},
    {"name": "feedback", "label": "feedback-driven sending only", "aggregation": False, "feedback": True,
     "congestion_control": True, "scheduling": "fifo", "model_delivery": "unicast"},
    {"name": "shesha", "label": "full Shesha", "aggregation": True, "feedback": True, "congestion_control": True,
     "scheduling": "drr", "model_delivery": "unicast"},
]
DEFAULT_CLUSTERS = [
    {"id": 1, "env": "CartPole-v1", "target_return": 475, "config": "configs/cluster-cartpole.yaml"},
    {"id": 2, "env": "Acrobot-v1", "target_return": -100, "config": "configs/cluster-acrobot.yaml"},
]


def _type_name(value):
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


def merge_strict(template, given, path):
    """template with given's values; unknown keys, wrong types and missing required keys name the key."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise LabError(f"{path or 'scenario'}: must be a mapping, got {_type_name(given)}")
    for key in given:
        if key not in template:
            raise LabError(f"{path + '.' if path else ''}{key}: unknown key (allowed: {', '.join(template)})")
    merged = {}
    for key, default in template.items():
        key_path = f"{path}.{key}" if path else key
        if key not in given:
            if default is REQUIRED:
                raise LabError(f"{key_path}: required key missing")
            merged[key] = copy.deepcopy(default)
            continue
        value = given[key]
        if key_path in ITEM_TEMPLATES and isinstance(default, list):
            if not isinstance(value, list):
                raise LabError(f"{key_path}: must be a list, got {_type_name(value)}")
            merged[key] = [merge_strict(ITEM_TEMPLATES[key_path], item, f"{key_path}[{i}]") for i, item in enumerate(value)]
        elif isinstance(default, dict):
            merged[key] = merge_strict(default, value, key_path)
        elif default is REQUIRED:
            merged[key] = value
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise LabError(f"{key_path}: must be true/false (on/off), got {value!r}")
            merged[key] = value
        elif isinstance(default, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise LabError(f"{key_path}: must be a number, got {value!r}")
            if isinstance(default, int) and not isinstance(value, int):
                raise LabError(f"{key_path}: must be an integer, got {value!r}")
            if value < 0:
                raise LabError(f"{key_path}: must not be negative, got {value!r}")
            merged[key] = value
        elif isinstance(default, str):
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise LabError(f"{key_path}: must be a string, got {value!r}")
            merged[key] = str(value)
        elif isinstance(default, list):
            if not isinstance(value, list):
                raise LabError(f"{key_path}: must be a list, got {_type_name(value)}")
            merged[key] = value
        else:
            merged[key] = value
    return merged


def read_scenario_file(path):
    """The scenario file's parsed YAML ({} without a path)."""
    import yaml
    text = None
    if path:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise LabError(f"cannot read scenario {path}: {e.strerror}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw[:e.start].count(b"\n") + 1
            raise LabError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})")
    try:
        return yaml.safe_load(text) if text is not None else {}
    except yaml.YAMLError as e:
        raise LabError(f"{path}: not valid YAML: {e}")


def load_scenario(path, quick=False, overrides=None):
    """The scenario in path (None: every default), with its quick settings if quick, then overrides
    (key -> value; None values ignored), validated."""
    scenario = merge_strict(TEMPLATE, read_scenario_file(path), "")
    if not scenario["switches"]:
        scenario["switches"] = [merge_strict(SWITCH_TEMPLATE, {"name": "tor"}, "switches[0]")]
    if not scenario["clusters"]:
        scenario["clusters"] = [merge_strict(CLUSTER_TEMPLATE, cluster, f"clusters[{i}]")
                                for i, cluster in enumerate(DEFAULT_CLUSTERS)]
    if not scenario["arms"]:
        scenario["arms"] = copy.deepcopy(DEFAULT_ARMS)
    if quick:
        scenario["duration_s"] = scenario["quick"]["duration_s"]
        scenario["seeds"] = scenario["quick"]["seeds"]
        if scenario["quick"]["workers_per_cluster"]:
            for cluster in scenario["clusters"]:
                cluster["workers"] = min(cluster["workers"], scenario["quick"]["workers_per_cluster"])
    for key, value in (overrides or {}).items():
        if value is not None:
            scenario[key] = value
    validate(scenario)
    return scenario


def validate(scenario):
    """Checks the values merge_strict cannot (ranges, names, references); fills in the clusters'
    switch/worker_switch and the cross traffic's switch (default: the first switch) and the arms'
    labels (default: the name); checks the faults and adds the arms' no-fault twins."""
    _validate_top_level(scenario)
    names = _validate_switches(scenario)
    _validate_links(scenario, names)
    ids = _validate_clusters(scenario, names)
    _validate_arms(scenario)
    _validate_cross_traffic(scenario, ids, names)
    hosts, _links = topology(scenario)
    validate_faults(scenario, hosts)
    expand_fault_arms(scenario)
    validate_at_scale(scenario)


def _validate_top_level(scenario):
    if scenario["learners"] not in ("per_cluster", "shared"):
        raise LabError(f"learners: per_cluster or shared, got {scenario['learners']!r}")
    if scenario["learners"] == "shared" and len(
            {c["switch"] or scenario["switches"][0]["name"] for c in scenario["clusters"]}) > 1:
        raise LabError("learners: shared needs every cluster's learner on one switch (clusters[].switch)")
    if scenario["processes"] not in ("auto", "drl", "synthetic"):
        raise LabError(f"processes: must be auto, drl or synthetic, got {scenario['processes']!r}")
    if not (1 <= scenario["duration_s"] <= 3600):
        raise LabError(f"duration_s: must be in 1..3600, got {scenario['duration_s']}")
    if not scenario["seeds"] or not all(isinstance(s, int) and not isinstance(s, bool) for s in scenario["seeds"]):
        raise LabError("seeds: must be a non-empty list of integers")
    rack = scenario["rack"]
    octets = rack["subnet"].split(".")
    if len(octets) != 3 or not all(p.isdigit() and int(p) < 256 for p in octets):
        raise LabError(f"rack.subnet: must be three octets like 10.77.1, got {rack['subnet']!r}")
    if rack["pmd"] not in ("net_af_packet", "net_af_xdp"):
        raise LabError("rack.pmd: must be net_af_packet or net_af_xdp")
    if rack["pmd"] == "net_af_xdp" and rack_mtu(scenario) != 1500:
        raise LabError(f"rack.pmd: net_af_xdp (DPDK 22.11, no multi-buffer) cannot carry chunks of more than "
                       f"{MAX_STD_CHUNK} elements at MTU {JUMBO_MTU}: use net_af_packet")


def _validate_switches(scenario):
    """-> the switch names."""
    switches = scenario["switches"]
    names = [s["name"] for s in switches]
    if len(set(names)) != len(names):
        raise LabError("switches: names must be unique")
    cores = os.cpu_count() or 1
    for i, switch in enumerate(switches):
        if not switch["name"].replace("-", "").isalnum() or len(switch["name"]) > 8:
            raise LabError(f"switches[{i}].name: letters, digits and '-', at most 8 characters")
        if switch["lcore"] >= cores and cores > 1:
            raise LabError(f"switches[{i}].lcore: {switch['lcore']} but this machine has {os.cpu_count()} cores")
    if len(switches) > 1 and cores <= len(switches):
        busy = [s["name"] for s in switches if s["idle_backoff_us"] == 0]
        if busy:
            raise LabError(f"switches: {len(switches)} switches on {os.cpu_count()} cores must all set "
                           f"idle_backoff_us > 0 to share cores (busy-polling: {', '.join(busy)})")
    return names


def _validate_links(scenario, names):
    for i, link in enumerate(scenario["links"]):
        for end in ("a", "b"):
            if link[end] not in names:
                raise LabError(f"links[{i}].{end}: no switch named {link[end]!r}")
        if link["a"] == link["b"]:
            raise LabError(f"links[{i}]: a and b must be different switches")
        if link["shaped"] not in ("both", "a-to-b", "b-to-a"):
            raise LabError(f"links[{i}].shaped: both, a-to-b or b-to-a, got {link['shaped']!r}")
    if len(scenario["switches"]) > 1 and len(scenario["links"]) != len(scenario["switches"]) - 1:
        raise LabError("links: switches must form a tree (exactly one link fewer than switches), else frames loop")


def _validate_clusters(scenario, names):
    """-> the cluster ids."""
    clusters = scenario["clusters"]
    ids = [c["id"] for c in clusters]
    if not clusters or len(set(ids)) != len(ids):
        raise LabError("clusters: at least one, ids unique")
    for i, cluster in enumerate(clusters):
        if not isinstance(cluster["id"], int) or not (1 <= cluster["id"] <= 20):
            raise LabError(f"clusters[{i}].id: an integer in 1..20 (it also numbers the hosts' addresses)")
        if not isinstance(cluster["workers"], int) or not (1 <= cluster["workers"] <= 9):
            raise LabError(f"clusters[{i}].workers: an integer in 1..9")
        if not isinstance(cluster["chunk_elems"], int) or not (0 <= cluster["chunk_elems"] <= 2048):
            raise LabError(f"clusters[{i}].chunk_elems: 0 (keep the config file's) or 1..2048 (above {MAX_STD_CHUNK} "
                           f"the rack runs at MTU {JUMBO_MTU}), got {cluster['chunk_elems']!r}")
        if cluster["merged_steps"] not in ("", "one", "per_contribution", "sqrt"):
            raise LabError(f"clusters[{i}].merged_steps: '' (keep the config file's), one, per_contribution or sqrt, "
                           f"got {cluster['merged_steps']!r}")
        if isinstance(cluster["target_return"], bool) or not isinstance(cluster["target_return"], (int, float)):
            raise LabError(f"clusters[{i}].target_return: must be a number")
        weight = cluster["weight"]
        if isinstance(weight, bool) or not isinstance(weight, int) or not (1 <= weight <= 1000):
            raise LabError(f"clusters[{i}].weight: an integer in 1..1000 (its share of a port under drr "
                           f"scheduling), got {weight!r}")
        for key in ("switch", "worker_switch"):
            if cluster[key] and cluster[key] not in names:
                raise LabError(f"clusters[{i}].{key}: no switch named {cluster[key]!r}")
            if not cluster[key]:
                cluster[key] = cluster["switch"] or names[0]
    return ids


def _validate_arms(scenario):
    arm_names = [a["name"] for a in scenario["arms"]]
    if not arm_names or len(set(arm_names)) != len(arm_names):
        raise LabError("arms: at least one, names unique")
    for i, arm in enumerate(scenario["arms"]):
        for key in ("aggregation", "feedback", "congestion_control"):
            if not isinstance(arm[key], bool):
                raise LabError(f"arms[{i}].{key}: must be on/off (true/false), got {arm[key]!r}")
        if not arm["name"].replace("-", "").replace("_", "").isalnum():
            raise LabError(f"arms[{i}].name: letters, digits, '-' and '_' only")
        arm["label"] = arm["label"] or arm["name"]
        if arm["scheduling"] not in ("auto", "fifo", "drr"):
            raise LabError(f"arms[{i}].scheduling: auto (the switch's default: drr where two or more clusters "
                           f"aggregate), fifo or drr (per-cluster fair shares on the switch ports), "
                           f"got {arm['scheduling']!r}")
        if arm["model_delivery"] not in ("unicast", "replicated"):
            raise LabError(f"arms[{i}].model_delivery: unicast (the learner sends each worker its copy) or replicated "
                           f"(one copy to the cluster's group, which the switches replicate), got {arm['model_delivery']!r}")


def _validate_cross_traffic(scenario, ids, names):
    cross = scenario["cross_traffic"]
    if cross["enabled"]:
        if cross["to_cluster"] not in ids:
            raise LabError(f"cross_traffic.to_cluster: no cluster {cross['to_cluster']}")
        if cross["switch"] and cross["switch"] not in names:
            raise LabError(f"cross_traffic.switch: no switch named {cross['switch']!r}")
        cross["switch"] = cross["switch"] or names[0]


def arm_uses_drr(arm, scenario):
    """Whether the arm's switches run per-cluster fair queues on the learners' port: drr, or auto
    (shesha-switch's default, aggregation.scheduling) with aggregation on and two or more clusters."""
    if arm["scheduling"] == "auto":
        return bool(arm["aggregation"]) and len(scenario["clusters"]) >= 2
    return arm["scheduling"] == "drr"
