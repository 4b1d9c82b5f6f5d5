"""The host processes' scheduler statistics: read from /proc, kept per role, summed, and the
two figures the report shows."""
import os
import subprocess
import sys

import pytest

from shesha_lab.analysis import add_host_cpu
from shesha_lab.host_cpu import CpuSampler, read_schedstat, wait_per_slice_ms, wait_share


class FakeProcess:
    def __init__(self, pid, running=True):
        self.pid, self.running = pid, running

    def poll(self):
        return None if self.running else 0


def test_read_schedstat_of_this_process_counts_its_cpu_time():
    stat = read_schedstat(os.getpid())
    assert stat is not None, "this kernel has no /proc/PID/task/TID/schedstat"
    cpu_ns, wait_ns, slices = stat
    # This process has run Python and pytest: well over a millisecond on a core, in >= 1 slice.
    assert cpu_ns > 1_000_000
    assert wait_ns >= 0
    assert slices >= 1


def test_read_schedstat_sums_threads_and_is_none_once_gone():
    # A child with two threads, each burning CPU until it is killed.
    code = ("import threading\n"
            "def spin():\n"
            "    while True: pass\n"
            "threading.Thread(target=spin, daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "spin()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        tasks = os.listdir(f"/proc/{child.pid}/task")
        assert len(tasks) == 2
        per_thread = []
        for tid in tasks:
            with open(f"/proc/{child.pid}/task/{tid}/schedstat") as f:
                per_thread.append([int(x) for x in f.read().split()[:3]])
        total = read_schedstat(child.pid)
        # Read a moment later, so each field is at least the sum of the earlier per-thread reads.
        for i in range(3):
            assert total[i] >= sum(t[i] for t in per_thread)
    finally:
        child.kill()
        child.wait()
    assert read_schedstat(child.pid) is None


def test_sampler_keeps_the_last_sample_per_process_and_sums_a_role():
    stats = {10: (1_000_000_000, 500_000_000, 100), 11: (3_000_000_000, 1_500_000_000, 300),
             20: (2_000_000_000, 0, 50)}
    sampler = CpuSampler(reader=lambda pid: stats.get(pid))
    workers = [FakeProcess(10), FakeProcess(11)]
    learner = FakeProcess(20)
    for w in workers:
        sampler.sample("workers-c1", w)
    sampler.sample("learner-c1", learner)
    # A later sample replaces the earlier one; a process that exited keeps its last figures.
    stats[10] = (2_000_000_000, 1_000_000_000, 200)
    sampler.sample("workers-c1", workers[0])
    workers[1].running = False
    stats[11] = (9_000_000_000, 9_000_000_000, 900)
    sampler.sample("workers-c1", workers[1])
    totals = sampler.totals()
    assert totals["workers-c1"] == {"cpu_s": 5.0, "wait_s": 2.5, "slices": 500, "processes": 2}
    assert totals["learner-c1"] == {"cpu_s": 2.0, "wait_s": 0.0, "slices": 50, "processes": 1}
    assert wait_share(totals["workers-c1"]) == pytest.approx(2.5 / 7.5)
    assert wait_per_slice_ms(totals["workers-c1"]) == pytest.approx(5.0)
    assert wait_per_slice_ms(totals["learner-c1"]) == 0.0


def test_no_samples_give_no_figures():
    assert wait_share(None) is None
    assert wait_per_slice_ms({"cpu_s": 0.0, "wait_s": 0.0, "slices": 0, "processes": 1}) is None
    result = {}
    add_host_cpu(result, None, 1)
    assert result == {}
    add_host_cpu(result, {"workers-c1": {"cpu_s": 3.0, "wait_s": 1.0, "slices": 10, "processes": 3},
                          "learner-c1": {"cpu_s": 1.0, "wait_s": 0.5, "slices": 250, "processes": 1}}, 1)
    assert result["workers_cpu_wait_share"] == pytest.approx(0.25)
    assert result["learner_wait_per_slice_ms"] == pytest.approx(2.0)
