#!/usr/bin/env bash
# shesha-replay's bad input (no root needed): a port spec that is not PORT=FILE or names no port,
# a missing capture, a file that is not a capture, a bad config: each exits 2 with a clear message.
# A capture cut short inside a record: exit 1 naming the port. A valid run: exit 0 and its
# counters. Runts in a capture: dropped and counted.
# Usage: test_replay_cli.sh SHESHA_REPLAY
set -uo pipefail
replay=$1
work=$(mktemp -d /tmp/shesha-replay-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {  # expect RC PATTERN ARGS...
    local want=$1 pattern=$2 rc=0; shift 2
    "$replay" "$@" > "$work/out.log" 2>&1 || rc=$?
    if [ "$rc" -ne "$want" ] || { [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$work/out.log"; }; then
        fail "$* -> exit $rc, wanted $want and /$pattern/: $(head -3 "$work/out.log")"
    else
        echo "ok:   $* -> exit $rc"
    fi
}
cat > "$work/sw.yaml" <<'YAML'
ports:
  - {name: a, device: net_null0}
  - {name: b, device: net_null1}
YAML
# A valid capture of one 60-byte frame (classic pcap, little-endian, Ethernet).
python3 - "$work/one.pcap" "$work/cut.pcap" <<'PY'
import struct, sys
hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
rec = struct.pack("<IIII", 0, 0, 60, 60) + bytes([0xff] * 6 + [2, 0, 0, 0, 0, 1, 8, 6]) + bytes(46)
open(sys.argv[1], "wb").write(hdr + rec)
open(sys.argv[2], "wb").write(hdr + rec + rec[:30])  # the second record cut short
# Runts (0, 5 and 13 bytes: shorter than an Ethernet header) around the valid frame.
runt = lambda n: struct.pack("<IIII", 0, 0, n, n) + bytes([0xee] * n)
open(sys.argv[1].replace("one", "runts"), "wb").write(hdr + runt(0) + runt(5) + rec + runt(13))
PY
printf 'not a capture' > "$work/junk.pcap"

expect 2 "'a' is not PORT=FILE with a port of" -c "$work/sw.yaml" --in a
expect 2 "'c=.*' is not PORT=FILE with a port of" -c "$work/sw.yaml" --in "c=$work/one.pcap"
expect 2 "no-such.pcap" -c "$work/sw.yaml" --in "a=$work/no-such.pcap"
expect 2 "junk.pcap" -c "$work/sw.yaml" --in "a=$work/junk.pcap"
printf 'ports: [{name: a}]\n' > "$work/bad.yaml"
expect 2 "ports\[0\]" -c "$work/bad.yaml"
expect 2 "log-level" -c "$work/sw.yaml" --log-level bogus
expect 1 "reading port a" -c "$work/sw.yaml" --in "a=$work/cut.pcap"
expect 0 "" -c "$work/sw.yaml" --in "a=$work/one.pcap" --out "b=$work/b.pcap" --stats-json "$work/s.json"
python3 - "$work/s.json" <<'PY' || fail "counters of the valid run"
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["ports"]
assert a["rx_packets"] == 1 and b["tx_packets"] == 1, d   # the broadcast floods to b
assert d["frames"]["non_ip"] == 1 and d["malformed"]["total"] == 0, d
print("ok:   the valid run's counters: 1 received on a, flooded to b")
PY
# Runts are dropped and counted, never forwarded (their addresses would be read past their end).
expect 0 "" -c "$work/sw.yaml" --in "a=$work/runts.pcap" --out "b=$work/b2.pcap" --stats-json "$work/s2.json"
python3 - "$work/s2.json" <<'PY' || fail "counters of the run with runts"
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["ports"]
assert a["rx_packets"] == 4 and b["tx_packets"] == 1, d
assert d["frames"]["runts_dropped"] == 3 and d["frames"]["non_ip"] == 1, d
print("ok:   3 runts dropped and counted, the valid frame flooded to b")
PY
[ "$failures" -eq 0 ] && { echo "shesha-replay CLI: ok"; exit 0; }
exit 1
