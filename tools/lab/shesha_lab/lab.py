"""One run of the lab: its scenario, report directory, build, rack and processes."""
import os
import shutil
import signal

from .processes import ProcessGroup, host_cpu_list
from .rack import Rack


class Lab:
    """Owns every process, namespace, interface and DPDK runtime dir it creates; teardown() is
    idempotent and runs on normal exit, exceptions, Ctrl-C and SIGTERM."""

    def __init__(self, scenario, out, build):
        self.scenario, self.out, self.build = scenario, out, build
        self.rack = Rack(scenario)
        self.hosts, self.links = self.rack.hosts, self.rack.links
        self.host_cpus = host_cpu_list(scenario, os.cpu_count() or 1)
        self.processes = ProcessGroup(out, self.rack, self.host_cpus)
        self.switches = {}       # name -> Popen, the current arm's
        self.prefixes = []       # every EAL file prefix used (runtime dirs to remove)

    def teardown(self):
        # A second Ctrl-C must not interrupt the cleanup itself.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.processes.stop_all()
            self.rack.down()
            for prefix in self.prefixes:
                shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)
