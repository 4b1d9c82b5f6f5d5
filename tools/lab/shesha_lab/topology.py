"""Topology: the scenario's hosts and addresses, switch-to-switch links and each switch's ports."""


def topology(scenario):
    """-> (hosts, links). hosts: name -> {ip, switch, role, cluster, ...}, in port order; links: one
    per scenario link with its two root-namespace interfaces."""
    net = scenario["rack"]["subnet"]
    hosts = {}
    shared = scenario["learners"] == "shared"
    if shared:
        # One namespace for every learner: its first cluster's address on eth0, the others added.
        first = scenario["clusters"][0]
        hosts["learners"] = {"ip": f"{net}.{first['id'] * 10}", "switch": first["switch"], "role": "learner",
                             "cluster": 0,
                             "extra_ips": [f"{net}.{c['id'] * 10}" for c in scenario["clusters"][1:]]}
    for cluster in scenario["clusters"]:
        cid = cluster["id"]
        learner = {"ip": f"{net}.{cid * 10}", "switch": cluster["switch"], "role": "learner", "cluster": cid}
        hosts[f"c{cid}-l"] = learner
        if shared:
            learner["ns_host"] = "learners"  # a process in the shared host, no port of its own
        for worker in range(cluster["workers"]):
            hosts[f"c{cid}-w{worker}"] = {"ip": f"{net}.{cid * 10 + 1 + worker}", "switch": cluster["worker_switch"],
                                          "role": "worker", "cluster": cid, "worker": worker}
    if scenario["cross_traffic"]["enabled"]:
        hosts["xt"] = {"ip": f"{net}.250", "switch": scenario["cross_traffic"]["switch"], "role": "cross",
                       "cluster": 0}
    if_prefix = scenario["rack"]["if_prefix"]
    links = []
    for i, link in enumerate(scenario["links"]):
        links.append({"a": link["a"], "b": link["b"], "if_a": f"{if_prefix}sp{i}a", "if_b": f"{if_prefix}sp{i}b",
                      "rate": str(link["rate"]), "bottleneck": link["bottleneck"], "shaped": link["shaped"]})
    return hosts, links


def host_if(scenario, host):
    """The root-side interface of a host's veth (kernel limit: 15 characters), as rack.sh names it."""
    return (scenario["rack"]["if_prefix"] + host)[:15]


def link_port_name(link, switch_name):
    """The name of the link's port on switch_name: to-<the other end>."""
    return f"to-{link['b']}" if link["a"] == switch_name else f"to-{link['a']}"


def switch_ports(scenario, switch, hosts, links):
    """[(port name, interface, kind)] for one switch; kind: learner, worker, cross, link."""
    ports = [(host, host_if(scenario, host), attrs["role"]) for host, attrs in hosts.items()
             if attrs["switch"] == switch["name"] and "ns_host" not in attrs]
    for link in links:
        if link["a"] == switch["name"]:
            ports.append((f"to-{link['b']}", link["if_a"], "link"))
        elif link["b"] == switch["name"]:
            ports.append((f"to-{link['a']}", link["if_b"], "link"))
    return ports


def link_shaped_here(link, switch_name):
    """Whether the link's port on switch_name (its egress towards the other end) is a bottleneck."""
    if not link["bottleneck"] or switch_name not in (link["a"], link["b"]):
        return False
    return link["shaped"] == "both" or (link["shaped"] == "a-to-b") == (switch_name == link["a"])


def bottleneck_ports(scenario, switch, hosts, links):
    """The switch's shaped ports: its learner ports, then its shaped link ports."""
    shaped = [port for port, _, kind in switch_ports(scenario, switch, hosts, links) if kind == "learner"]
    for link in links:
        if link_shaped_here(link, switch["name"]):
            shaped.append(f"to-{link['b'] if link['a'] == switch['name'] else link['a']}")
    return shaped
