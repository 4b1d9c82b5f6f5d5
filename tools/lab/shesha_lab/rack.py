"""The rack: a network namespace and veth pair per host (tools/lab/rack.sh), veth pairs in the root
namespace for switch-to-switch links, and the kernel's drop counters on them. Needs root."""
import os
import subprocess

from . import RACK_SH, LabError
from .cluster_files import rack_mtu
from .topology import host_if, topology


def run_command(cmd, check=True, quiet=True):
    """Runs cmd (a list); quiet: its output captured (returned in .stdout) rather than shown. A
    failure with check raises LabError with the command and its output."""
    result = subprocess.run(cmd, stdout=subprocess.PIPE if quiet else None,
                            stderr=subprocess.STDOUT if quiet else None, text=True)
    if check and result.returncode != 0:
        raise LabError(f"command failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout or ''}")
    return result


def rack_bash(scenario, script):
    """Runs a bash script with rack.sh sourced and the scenario's names and MTU in its environment."""
    env = dict(os.environ, RACK_PREFIX=scenario["rack"]["prefix"], RACK_IF_PREFIX=scenario["rack"]["if_prefix"])
    if rack_mtu(scenario) != 1500:
        env["RACK_MTU"] = str(rack_mtu(scenario))
    return subprocess.run(["bash", "-c", f'source "{RACK_SH}"; {script}'], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


class Rack:
    """The scenario's hosts and links as namespaces and veths. down() is idempotent and also removes
    a crashed earlier run's leftovers (everything named with the scenario's prefixes)."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.hosts, self.links = topology(scenario)
        self.is_up = False

    def up(self):
        result = rack_bash(self.scenario, "rack_can_run")
        if result.returncode != 0:
            raise LabError(f"cannot build the namespace rack: {result.stdout.strip()}")
        self.is_up = True
        specs = " ".join(f"{host}:{attrs['ip']}" for host, attrs in self.hosts.items() if "ns_host" not in attrs)
        result = rack_bash(self.scenario, f"rack_down; rack_up {specs}")
        if result.returncode != 0:
            raise LabError(f"rack_up failed: {result.stdout.strip()}")
        for host, attrs in self.hosts.items():
            for ip in attrs.get("extra_ips", []):
                run_command(["ip", "-n", self.namespace(host), "addr", "add", f"{ip}/24", "dev", "eth0"])
        mtu = rack_mtu(self.scenario)
        for link in self.links:
            run_command(["ip", "link", "add", link["if_a"], "type", "veth", "peer", "name", link["if_b"]])
            for ifname in (link["if_a"], link["if_b"]):
                if mtu != 1500:
                    run_command(["ip", "link", "set", ifname, "mtu", str(mtu)])
                run_command(["ip", "link", "set", ifname, "up"])
                run_command(["ethtool", "-K", ifname, "tx", "off", "rx", "off"], check=False)
                run_command(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=False)

    def namespace(self, host):
        """The network namespace a host's processes run in (a shared learner's: the shared host's)."""
        return self.scenario["rack"]["prefix"] + self.hosts.get(host, {}).get("ns_host", host)

    def down(self):
        if self.is_up:
            rack_bash(self.scenario, "rack_down")  # kills anything left in our namespaces, removes veths
            self.is_up = False

    def veth_drops(self):
        """Kernel drop counters of the rack's root-side interfaces: af_packet ports do not report the
        frames the kernel dropped before the switch saw them (or after it sent them)."""
        total = {"rx_dropped": 0, "tx_dropped": 0}
        names = [host_if(self.scenario, host) for host, attrs in self.hosts.items() if "ns_host" not in attrs] + \
            [link[end] for link in self.links for end in ("if_a", "if_b")]
        for ifname in names:
            for counter in total:
                try:
                    with open(f"/sys/class/net/{ifname}/statistics/{counter}") as f:
                        total[counter] += int(f.read())
                except (OSError, ValueError):
                    pass
        return total
