"""The Shesha lab (tools/lab/shesha-lab) as a package, one module per job:

  scenario       the scenario schema (strict keys, defaults) and its validation
  cluster_files  the cluster YAMLs a scenario names: chunk sizes, the rack's MTU, the copies a run uses
  topology       hosts, addresses and switch ports of a scenario
  switch_yaml    the shesha-switch config, built as data and written with PyYAML (also for
                 tools/lab/switch_yaml.sh: python3 -m shesha_lab.switch_yaml rack --help)
  rack           network namespaces, veths and the rack.sh helpers
  processes      starting and stopping the switches, learners, workers and stand-ins
  lab            one run's rack, processes and DPDK runtime dirs, and their teardown
  telemetry      live queue telemetry from the switches
  arm            one arm and seed, step by step
  raw_files      reading a run's raw files
  analysis       numbers from the raw files: time to target, AoM, Jain's index, seed verdicts
  sim_scale      the scenario's shape as training at scale in shesha-sim (at_scale: 64-1,024 workers)
  sim_check      the scenario itself in shesha-sim (training workload) against the rack run
  report         report.md, summary.json, results.json and the headline
  plots          the report's figures
  cli            the command line: run, replot, check, sim-check, scale

Docs: docs/lab.md. Unit tests: tests/lab/ (/usr/bin/python3 -m pytest tests/lab).
"""
import os

LAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tools/lab
SOURCE_ROOT = os.path.dirname(os.path.dirname(LAB_DIR))                 # the source tree
RACK_SH = os.path.join(LAB_DIR, "rack.sh")
DEFAULT_SCENARIO = os.path.join(SOURCE_ROOT, "configs", "lab-default.yaml")
UDP_PORT = 17717


class LabError(Exception):
    """A user-facing error: bad scenario, missing binary, failed start. One line, no traceback."""
