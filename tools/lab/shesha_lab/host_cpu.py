"""What the host processes got from the CPU: the kernel's per-thread scheduler statistics
(/proc/PID/task/TID/schedstat: time on a core, time runnable but waiting for one, timeslices),
summed over each process's threads and over the processes of one role (a cluster's learner, its
workers). The rack's host processes share the cores that no switch polls, so this says whether a
job was bound by the network or by the host: a worker that waits for a core as long as it runs
cannot turn a fresher model into more updates."""
import glob


def read_schedstat(pid):
    """(cpu_ns, wait_ns, slices) summed over the process's threads, or None once it is gone."""
    totals = [0, 0, 0]
    found = False
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                fields = f.read().split()
        except OSError:
            continue  # a thread that just exited
        if len(fields) < 3:
            continue
        found = True
        for i in range(3):
            totals[i] += int(fields[i])
    return tuple(totals) if found else None


class CpuSampler:
    """The last schedstat seen for every (role, pid). Sampled while the processes run, since an
    exited process's figures are gone: a process that exits between two samples loses at most one
    sampling interval of its total."""

    def __init__(self, reader=read_schedstat):
        self.reader = reader
        self.last = {}  # (role, pid) -> (cpu_ns, wait_ns, slices)

    def sample(self, role, process):
        if process is None or process.poll() is not None:
            return
        stat = self.reader(process.pid)
        if stat is not None:
            self.last[(role, process.pid)] = stat

    def totals(self):
        """role -> {cpu_s, wait_s, slices, processes}."""
        out = {}
        for (role, _pid), (cpu, wait, slices) in sorted(self.last.items()):
            t = out.setdefault(role, {"cpu_s": 0.0, "wait_s": 0.0, "slices": 0, "processes": 0})
            t["cpu_s"] += cpu / 1e9
            t["wait_s"] += wait / 1e9
            t["slices"] += slices
            t["processes"] += 1
        return out


def wait_share(role_totals):
    """Of the time a role's processes were runnable, the share spent waiting for a core."""
    if not role_totals:
        return None
    runnable = role_totals["cpu_s"] + role_totals["wait_s"]
    return role_totals["wait_s"] / runnable if runnable > 0 else None


def wait_per_slice_ms(role_totals):
    """The mean wait for a core before each timeslice, in ms: how late a process that became
    runnable (a datagram arrived, a gradient is ready) got to run."""
    if not role_totals or not role_totals["slices"]:
        return None
    return role_totals["wait_s"] * 1e3 / role_totals["slices"]
