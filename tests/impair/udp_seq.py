#!/usr/bin/python3
"""Numbered UDP datagrams for tests/impair/test_impair.sh.

send DST PORT COUNT: sends COUNT datagrams numbered 0..COUNT-1 (8-byte big-endian), about 2,000 a
second so that no socket buffer overflows.
receive BIND PORT READY_FILE: receives until 1.5 s pass without a datagram (after the first one),
then prints JSON: total, unique, copies (repeats of a number), late (first arrivals of a number
lower than one that arrived before it: what reordering looks like to a receiver), numbers.
"""
import json
import socket
import struct
import sys
import time


def send(dst, port, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"x" * 200
    start = time.monotonic()
    for n in range(count):
        s.sendto(struct.pack(">Q", n) + pad, (dst, port))
        # Paced by the clock only to keep buffers small; nothing is asserted about time.
        while time.monotonic() < start + (n + 1) / 2000.0:
            pass


def receive(bind, port, ready_file):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((bind, port))
    with open(ready_file, "w") as f:
        f.write("ready\n")
    s.settimeout(60.0)  # waiting for the first datagram
    seen = {}
    total = late = 0
    highest = -1
    while True:
        try:
            data, _ = s.recvfrom(2048)
        except socket.timeout:
            break
        s.settimeout(1.5)
        (n,) = struct.unpack(">Q", data[:8])
        total += 1
        if n in seen:
            seen[n] += 1
            continue
        seen[n] = 1
        if n < highest:
            late += 1
        highest = max(highest, n)
    print(json.dumps({"total": total, "unique": len(seen), "copies": total - len(seen), "late": late}))


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "receive":
        receive(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit("usage: udp_seq.py send DST PORT COUNT | receive BIND PORT READY_FILE")
