"""Live telemetry from the switches: the DPDK telemetry socket's /shesha/queues,PORT polled into
queues-SWITCH.csv, and the queue depths of a switch log's last periodic line."""
import csv
import json
import socket
import threading
import time

QUEUE_FIELDS = ("depth", "depth_bytes", "enqueued", "merged", "bytes_saved", "dropped", "dequeued",
                "dequeued_bytes", "marked", "sojourn_sum_ticks", "mean_sojourn_ns")


class TelemetryPoller(threading.Thread):
    """Polls one switch's bottleneck ports every interval seconds into a CSV (t_s, port, the queue
    counters); latest: port -> the last answer. Reconnects while the switch is not (yet) up."""

    def __init__(self, prefix, ports, path_csv, interval):
        super().__init__(daemon=True)
        self.prefix, self.ports, self.interval = prefix, ports, interval
        self.csv = open(path_csv, "w", newline="")
        self.writer = csv.writer(self.csv)
        self.writer.writerow(["t_s", "port", *QUEUE_FIELDS])
        self.stop_event = threading.Event()
        self.latest = {}
        self.t0 = time.monotonic()
        self.sock = None

    def connect(self):
        path = f"/var/run/dpdk/{self.prefix}/dpdk_telemetry.v2"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(2)
        sock.connect(path)
        sock.recv(16384)  # greeting
        return sock

    def query(self, cmd):
        self.sock.send(cmd.encode())
        return json.loads(self.sock.recv(65536).decode())

    def run(self):
        while not self.stop_event.is_set():
            try:
                if self.sock is None:
                    self.sock = self.connect()
                t = time.monotonic() - self.t0
                for port in self.ports:
                    queue = self.query(f"/shesha/queues,{port}").get("/shesha/queues") or {}
                    if not queue:
                        continue
                    self.latest[port] = queue
                    self.writer.writerow([f"{t:.3f}", port] + [queue.get(k, "") for k in QUEUE_FIELDS])
            except (OSError, ValueError):
                if self.sock is not None:
                    self.sock.close()
                self.sock = None
            self.stop_event.wait(self.interval)
        if self.sock is not None:
            self.sock.close()
        self.csv.close()

    def stop(self):
        self.stop_event.set()
        self.join(5)


def switch_log_depths(path):
    """Last periodic line of a switch log -> {port: depth}."""
    try:
        with open(path, errors="replace") as f:
            lines = [line for line in f if "| depth " in line]
    except OSError:
        return {}
    if not lines:
        return {}
    depths = {}
    for pair in lines[-1].split("| depth ", 1)[1].split():
        if "=" in pair:
            port, depth = pair.split("=", 1)
            depths[port] = depth
    return depths
