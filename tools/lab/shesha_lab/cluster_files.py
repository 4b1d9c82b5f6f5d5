"""The cluster YAMLs a scenario names (clusters[].config): their chunk size, which sets the rack's
MTU, their evaluation interval, and the copy a run uses with the scenario's overrides."""
import os
import re

from . import SOURCE_ROOT, LabError

# A chunk travels in one IP datagram (fragments are never merged): 28 + 48 + 4 per element bytes.
# Up to 356 elements fit a 1500-byte MTU; larger chunks put the whole rack at MTU 9000 (veths,
# switch ports with af_packet ring frames of 9216 bytes).
MAX_STD_CHUNK = (1500 - 28 - 48) // 4
JUMBO_MTU = 9000
JUMBO_AF_PACKET = "framesz=9216,blocksz=36864"


def cluster_config_path(cluster):
    """The cluster's config file, absolute (relative paths are from the source tree); '' if none."""
    if not cluster["config"]:
        return ""
    return cluster["config"] if os.path.isabs(cluster["config"]) else os.path.join(SOURCE_ROOT, cluster["config"])


def effective_chunk_elems(cluster):
    """The chunk size the cluster runs with: the scenario's chunk_elems, else its cluster file's
    transport.chunk_elems (1024, the file format's default, if the file does not say; 0 if there is
    no readable file)."""
    if cluster["chunk_elems"]:
        return cluster["chunk_elems"]
    try:
        with open(cluster_config_path(cluster)) as f:
            match = re.search(r"(?m)^\s+chunk_elems:\s*(\d+)", f.read())
    except OSError:
        return 0
    return int(match.group(1)) if match else 1024  # the cluster YAML's default


def rack_mtu(scenario):
    """9000 if any cluster's chunks do not fit a 1500-byte frame, else 1500."""
    if any(effective_chunk_elems(cluster) > MAX_STD_CHUNK for cluster in scenario["clusters"]):
        return JUMBO_MTU
    return 1500


def eval_interval_s(cluster):
    """How often the cluster's learner evaluates (learner.eval_interval_ms of the cluster file the
    run used; 2 s, the learner's default, if the file does not say): a time to target is only
    known to within this."""
    import yaml
    try:
        path = cluster.get("_config_used") or cluster_config_path(cluster)
        with open(path) as f:
            interval_ms = ((yaml.safe_load(f) or {}).get("learner") or {}).get("eval_interval_ms", 2000)
        return float(interval_ms) / 1000.0
    except (OSError, KeyError, yaml.YAMLError, AttributeError, TypeError, ValueError):
        return 2.0


def publish_interval_ms(path):
    """learner.publish_interval_ms of the cluster YAML at path (5, the learner's default, if the file
    does not say); the error names the file."""
    import yaml
    try:
        with open(path) as f:
            value = ((yaml.safe_load(f) or {}).get("learner") or {}).get("publish_interval_ms", 5)
        return float(value)
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError) as e:
        raise LabError(f"{path}: cannot read learner.publish_interval_ms ({e})")


def model_group(cluster_id):
    """The IPv4 multicast group of a cluster's replicated MODEL delivery in the lab."""
    return f"239.77.0.{cluster_id}"


def write_cluster_config(cluster, dest_dir, model_delivery="unicast"):
    """The cluster YAML the processes use: the scenario's file, with transport.chunk_elems and
    learner.merged_steps set to the scenario's values, and with model_delivery "replicated",
    learner.model_delivery and learner.model_group set (text edits, so the file's comments stay)
    -> path of the copy in dest_dir."""
    src = cluster_config_path(cluster)
    if not os.path.isfile(src):
        raise LabError(f"clusters[id={cluster['id']}].config: {src or '(empty)'} does not exist")
    with open(src) as f:
        text = f.read()
    if cluster["chunk_elems"]:
        text, count = re.subn(r"(?m)^(\s+chunk_elems:\s*)\d+",
                              lambda m: m.group(1) + str(cluster["chunk_elems"]), text)
        if count != 1:
            raise LabError(f"{src}: cannot set transport.chunk_elems (expected one 'chunk_elems:' line, found {count})")
        text = (f"# {os.path.relpath(src, SOURCE_ROOT)} with transport.chunk_elems = {cluster['chunk_elems']} "
                f"(set by shesha-lab)\n" + text)
    if cluster["merged_steps"]:
        text, count = re.subn(r"(?m)^(\s+merged_steps:\s*)[a-z_]+",
                              lambda m: m.group(1) + cluster["merged_steps"], text)
        if count != 1:
            raise LabError(f"{src}: cannot set learner.merged_steps (expected one 'merged_steps:' line, found {count})")
        text = f"# learner.merged_steps = {cluster['merged_steps']} (set by shesha-lab)\n" + text
    if model_delivery == "replicated":
        text, count = re.subn(r"(?m)^(\s+model_delivery:\s*)[a-z]+", lambda m: m.group(1) + "replicated", text)
        if count != 1:
            raise LabError(f"{src}: cannot set learner.model_delivery (expected one 'model_delivery:' line, found {count})")
        group = model_group(cluster["id"])
        text, count = re.subn(r"(?m)^(\s+)#?\s*model_group:\s*\S+", lambda m: f"{m.group(1)}model_group: {group}", text)
        if count != 1:
            raise LabError(f"{src}: cannot set learner.model_group (expected one 'model_group:' line, found {count})")
        text = f"# learner.model_delivery = replicated, model_group = {group} (set by shesha-lab)\n" + text
    suffix = "-replicated" if model_delivery == "replicated" else ""
    dest = os.path.join(dest_dir, f"cluster-{cluster['id']}{suffix}-{os.path.basename(src)}")
    with open(dest, "w") as f:
        f.write(text)
    return dest
