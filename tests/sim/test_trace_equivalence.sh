#!/usr/bin/env bash
# One packet trace through the real shesha-switch (DPDK pcap ports) and through shesha-replay (the
# same switch pipeline, offline, as shesha-sim runs it): every port must send the same frames in
# the same order, and every counter both report must agree. Twice: the whole trace with one lcore,
# then with two lcores the traffic whose order two lcores leave defined: everything entering at
# w0 (lcore 0 polls w0 and x0, lcore 1 polls l0, which is then silent; each port sends on one TX
# pcap per lcore, and lcore 1's stay empty). Needs root (DPDK).
# Usage: test_trace_equivalence.sh SHESHA_SWITCH SHESHA_REPLAY MAKE_TRACE
set -uo pipefail
switch_bin=$1 replay_bin=$2 make_trace=$3
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root for DPDK"; exit 77; fi
work=$(mktemp -d /tmp/shesha-trace.XXXXXX)
trap '[ "${KEEP:-}" ] || rm -rf "$work"' EXIT
"$make_trace" "$work/w0.pcap" "$work/l0.pcap" "$work/x0.pcap" || { echo "FAIL: make_trace"; exit 1; }
# An empty capture (the 24-byte pcap file header only) for the silent ports of the 2-lcore case.
python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))" \
  "$work/empty.pcap"

members=$(python3 -c "print(', '.join(f'10.0.0.{i}' for i in range(1, 35)))")
# run_case LCORES W0 L0 X0: the switch and the replay on these inputs, then the comparison.
run_case() {
local lcores=$1 in_w0=$2 in_l0=$3 in_x0=$4
rm -f "$work"/switch-*.pcap "$work"/replay-*.pcap "$work"/*.json
tx() {  # one TX pcap per lcore: switch-PORT.pcap, switch-PORT.1.pcap, ...
  local port=$1 out="tx_pcap=$work/switch-$1.pcap" l
  for ((l = 1; l < lcores; l++)); do out+=",tx_pcap=$work/switch-$port.$l.pcap"; done
  echo "$out"
}
cat > "$work/switch.yaml" <<YAML
eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "shesha-trace-$$"]
lcores: $lcores
burst: 32
mbufs: 8192
marking: {depth_packets: 6, sojourn_us: 0, ip_ecn: true}
ports:
  - {name: w0, device: "net_pcap0,rx_pcap=$in_w0,$(tx w0)", queue: {packets: 24, bytes: 4MiB}}
  - {name: l0, device: "net_pcap1,rx_pcap=$in_l0,$(tx l0)", queue: {packets: 10, bytes: 4MiB}}
  - {name: x0, device: "net_pcap2,rx_pcap=$in_x0,$(tx x0)", queue: {packets: 24, bytes: 4MiB}}
forwarding: {fdb_capacity: 256, mac_aging_s: 300, static: []}
protocol: {udp_port: 17717, malformed: forward}
aggregation:
  enabled: true
  non_member: forward
  clusters: [{id: 1, version_tolerance: 0, members: [$members], model_replication: {group: 239.77.0.1, learner: 10.0.1.1}}]
feedback: {enabled: true, interval_us: 1}
stats: {interval_s: 0, json: "$work/switch.json"}
telemetry: false
YAML

"$switch_bin" -c "$work/switch.yaml" --duration 2 --log-level warn > "$work/switch.log" 2>&1 || {
  echo "FAIL: shesha-switch exited $?"; cat "$work/switch.log"; exit 1; }
"$replay_bin" -c "$work/switch.yaml" --in "w0=$in_w0" --in "l0=$in_l0" --in "x0=$in_x0" \
  --out "w0=$work/replay-w0.pcap" --out "l0=$work/replay-l0.pcap" --out "x0=$work/replay-x0.pcap" \
  --stats-json "$work/replay.json" || { echo "FAIL: shesha-replay exited $?"; exit 1; }

python3 - "$work" "$lcores" "$in_l0" <<'PY'
import json, os, struct, sys
work, lcores, whole_trace = sys.argv[1], int(sys.argv[2]), not sys.argv[3].endswith("empty.pcap")

def frames(path):
    if not os.path.exists(path):
        return []
    data = open(path, "rb").read()
    out, off = [], 24
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        out.append(data[off + 16: off + 16 + incl])
        off += 16 + incl
    return out

def feedback(f):  # FEEDBACK leaves with the port's own MAC, which only the real port knows
    return len(f) > 50 and f[12:14] == b"\x08\x00" and f[23] == 17 and f[34:36] == b"\x45\x35" and f[42:44] == b"SH" and f[45] == 4

failures = 0
def check(ok, what):
    global failures
    print(("ok:   " if ok else "FAIL: ") + what)
    failures += not ok

for port in ("w0", "l0", "x0"):
    # One lcore's TX pcaps after another: in the 2-lcore case only one of them is ever written.
    a = frames(f"{work}/switch-{port}.pcap")
    for l in range(1, lcores):
        a += frames(f"{work}/switch-{port}.{l}.pcap")
    b = frames(f"{work}/replay-{port}.pcap")
    check(len(a) == len(b), f"port {port}: switch sent {len(a)} frames, pipeline replay {len(b)}")
    mask = lambda f: f[:6] + b"\0" * 6 + f[12:] if feedback(f) else f
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if mask(x) != mask(y)]
    check(not diff, f"port {port}: identical frames in identical order" + (f" (first difference at frame {diff[0]})" if diff else ""))

sw, rp = json.load(open(f"{work}/switch.json")), json.load(open(f"{work}/replay.json"))
compared = 0
for i, port in enumerate(rp["ports"]):
    sp = sw["ports"][i]
    for k, v in port.items():
        if k == "queue":
            for qk, qv in v.items():
                compared += 1
                if qk == "capacity":  # every lcore has its own queue on each port
                    qv *= lcores
                check(sp["queue"][qk] == qv, f"{port['name']}.queue.{qk}: switch {sp['queue'][qk]}, replay {qv}")
        elif k != "name":
            compared += 1
            check(sp[k] == v, f"{port['name']}.{k}: switch {sp[k]}, replay {v}")
for section in ("frames", "malformed", "gradients", "feedback", "fdb", "replication"):  # not "internal": round counts differ
    for k, v in rp[section].items():
        compared += 1
        check(sw[section][k] == v, f"{section}.{k}: switch {sw[section][k]}, replay {v}")
check(sw["lcores"] == lcores, f"the switch ran {sw['lcores']} lcore(s)")
# The trace must exercise what it claims to, or equality proves little.
q = sw["ports"][1]["queue"]
if not whole_trace:  # w0's traffic alone: gradients flood to l0 and x0 and merge in l0's queue
    check(q["merged"] > 0 and q["dropped"] > 0 and sw["ports"][2]["tx_packets"] > 0,
          f"l0 merged {q['merged']}, dropped {q['dropped']}; x0 sent {sw['ports'][2]['tx_packets']}")
    print(f"{compared} counters compared ({lcores} lcores, w0's traffic)")
    sys.exit(1 if failures else 0)
check(q["merged"] > 0 and q["marked"] > 0 and q["dropped"] > 0, f"l0 merged {q['merged']}, marked {q['marked']}, dropped {q['dropped']}")
check(sw["feedback"]["sent"] > 0 and sw["gradients"]["non_member"] > 0 and sw["malformed"]["total"] > 0,
      "FEEDBACK, non-member and malformed frames all occurred")
check(sw["ports"][2]["tx_packets"] > 0 and sw["ports"][1]["filtered"] > 0, "floods reached x0 and a frame was filtered")
r = sw["replication"]
# 15 group chunks from the learner; each is copied to the members that have joined by then (the
# learner's port is read faster than the workers', so the first ones reach fewer than all 10).
check(r["model_replicated"] == 15 and 0 < r["model_copies"] <= 150 and r["model_joined"] == 10
      and r["model_join_refused"] == 1 and r["model_not_member"] == 1, f"replication: {r}")
print(f"{compared} counters compared ({lcores} lcore, the whole trace)")
sys.exit(1 if failures else 0)
PY
}

run_case 1 "$work/w0.pcap" "$work/l0.pcap" "$work/x0.pcap" || exit 1
run_case 2 "$work/w0.pcap" "$work/empty.pcap" "$work/empty.pcap" || exit 1
