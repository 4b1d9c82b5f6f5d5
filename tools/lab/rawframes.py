#!/usr/bin/env python3
"""Sends bounded bursts of hostile or foreign frames from one interface (run inside a host's
namespace), to prove the switch counts them and keeps forwarding.

Kinds (all addressed to --dst-mac / --dst-ip, the Shesha port by default):
  nonip       Ethernet frames with a local experimental EtherType (0x88B5): not IP at all
  garbage     UDP datagrams to the Shesha port with random bytes (bad magic)
  truncated   UDP datagrams to the Shesha port holding only the first 20 bytes of a valid header
  badip       frames that claim IPv4 but whose total length exceeds the frame (malformed L3)
"""
import argparse
import random
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mac_bytes(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


def ipv4_udp(src_ip, dst_ip, sport, dport, payload, total_len_lie=0):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # UDP checksum 0: none
    total = 20 + len(udp) + total_len_lie
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 17, 0,
                      socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + udp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--kind", required=True, choices=["nonip", "garbage", "truncated", "badip"])
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--dst-mac", required=True)
    ap.add_argument("--dst-ip", required=True)
    ap.add_argument("--src-ip", required=True)
    ap.add_argument("--port", type=int, default=17717)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    if not 0 < a.count <= 100000:
        print("rawframes: --count must be 1..100000", file=sys.stderr)
        return 2

    rnd = random.Random(a.seed)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    src_mac = s.getsockname()[4][:6]
    dst_mac = mac_bytes(a.dst_mac)
    for _ in range(a.count):
        if a.kind == "nonip":
            frame = dst_mac + src_mac + struct.pack("!H", 0x88B5) + bytes(rnd.getrandbits(8) for _ in range(46))
        elif a.kind == "garbage":
            payload = bytes(rnd.getrandbits(8) for _ in range(64))
            payload = b"\x00\x00" + payload[2:]  # never the Shesha magic by chance
            frame = dst_mac + src_mac + b"\x08\x00" + ipv4_udp(a.src_ip, a.dst_ip, 40000, a.port, payload)
        elif a.kind == "truncated":
            hdr = struct.pack("!HBBBBHIII", 0x5348, 2, 1, 0, 1, 1, 7, 0, 0)  # 20 bytes of a GRADIENT header
            frame = dst_mac + src_mac + b"\x08\x00" + ipv4_udp(a.src_ip, a.dst_ip, 40000, a.port, hdr)
        else:  # badip: IPv4 total length claims 200 bytes more than the frame holds
            frame = dst_mac + src_mac + b"\x08\x00" + ipv4_udp(a.src_ip, a.dst_ip, 40000, a.port, b"x" * 30, 200)
        if len(frame) < 60:
            frame += b"\0" * (60 - len(frame))
        s.send(frame)
    print(f"rawframes: sent {a.count} {a.kind} frames on {a.iface}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
