#!/usr/bin/env bash
# Attacks on a live learner while two honest workers train CartPole-v1 over loopback:
#   - poison: an insider (an admitted address) sends 19 GRADIENT chunks whose every value is 3e38,
#     each on the learner's current version (read from a MODEL it asked for). Finite, so past the
#     NaN check; before the magnitude bound they overflowed RMSProp's state and froze training.
#   - amplification: a non-member address (127.0.0.2) sends 250 forged GRADIENTs under 250 worker
#     ids and 50 model requests. Before admission lists each one bought 10 s of MODEL broadcasts.
# The job must still reach its target; each poison chunk is counted as a magnitude rejection; the
# forger gets back not one byte; every forged datagram is counted as not admitted.
# Also: a checkpoint whose optimizer state holds +Inf is refused at --resume with exit 2.
#
# usage: test_drl_hardening.sh LEARNER WORKER SOURCE_DIR
set -uo pipefail
LEARNER=$1 WORKER=$2 SRC=$3
source "$SRC/tests/drl/drl_lib.sh"
drl_begin drl-hardening

# The shipped CartPole cluster, admitting only 127.0.0.1.
sed 's/^learner:$/learner:\n  admit_sources: [127.0.0.1]/' "$SRC/configs/cluster-cartpole.yaml" > "$WORK/cluster.yaml"
grep -q "admit_sources: \[127.0.0.1\]" "$WORK/cluster.yaml" || { fail "cannot derive the test config"; exit 1; }

# 1. A damaged checkpoint: the shipped model's shape, one +Inf in chunk 3's RMSProp average.
python3 - "$WORK/inf.ckpt" <<'PY'
import struct, sys
params, chunk = 4675, 256
out = bytearray(b"SHESHACK")
out += struct.pack("<IHHIQQ", 1, 1, 0, 40, 1000, 500)
env = b"CartPole-v1"
out += struct.pack("<I", len(env)) + env
out += struct.pack("<Q", params) + struct.pack("<%df" % params, *([0.01] * params))
slices = [min(chunk, params - k) for k in range(0, params, chunk)]
out += struct.pack("<I", len(slices))
for i, n in enumerate(slices):
    avg = [1e-4] * n
    if i == 3: avg[5] = float("inf")
    out += struct.pack("<QIQ", 7, 1, n) + struct.pack("<%df" % n, *avg)
h = 0xcbf29ce484222325
for b in out: h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
out += struct.pack("<Q", h)
open(sys.argv[1], "wb").write(out)
PY
"$LEARNER" --config "$WORK/cluster.yaml" --cluster 1 --bind 127.0.0.1 --port "$PORT" --resume "$WORK/inf.ckpt" \
    > "$WORK/resume.log" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -qF "checkpoint optimizer state of chunk 3 is unusable: buffer 0 (squared-gradient average) element 5 is inf" "$WORK/resume.log"; then
    pass "--resume of a checkpoint with +Inf optimizer state: exit 2 naming chunk, buffer and element"
else
    fail "--resume of an Inf checkpoint: exit $rc, $(head -c 300 "$WORK/resume.log")"
fi

# 2. Training under attack.
"$LEARNER" --config "$WORK/cluster.yaml" --cluster 1 --bind 127.0.0.1 --port "$PORT" --duration 200 \
    --target-return 475 --metrics-dir "$WORK/m" --workers 2 > "$WORK/learner.log" 2>&1 &
LP=$!
for _ in $(seq 1 300); do grep -q "cluster 1 on" "$WORK/learner.log" && break; sleep 0.1; done  # bound and ready
grep -q "cluster 1 on" "$WORK/learner.log" || { fail "learner did not start"; exit 1; }
for w in 1 2; do
    "$WORKER" --config "$WORK/cluster.yaml" --cluster 1 --worker-id $w --learner 127.0.0.1 --port "$PORT" \
        --duration 230 --metrics "$WORK/w$w.json" > "$WORK/w$w.log" 2>&1 &
    pids+=($!)
done

python3 - "$PORT" "$WORK/attack.json" > "$WORK/attack.log" 2>&1 <<'PY' &
import json, select, socket, struct, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
learner = ("127.0.0.1", port)
PARAMS, CHUNK = 4675, 256
COUNT = (PARAMS + CHUNK - 1) // CHUNK

def header(type_, flags, elem, worker, version, idx, count, elems, ts):
    return struct.pack(">HBBBBHIIIHHHHQQI", 0x5348, 2, type_, flags, elem, 1, worker, version, 1,
                       idx, count, elems, 1, ts, ts, 0)

def gradient(worker, version, idx, value):
    n = min(CHUNK, PARAMS - idx * CHUNK)
    return header(1, 0, 1, worker, version, idx, COUNT, n, time.time_ns()) + struct.pack("<%df" % n, *([value] * n))

def request(worker):  # MODEL with elem_count 0 (drl_wire.h): "send me the model"
    return header(2, 0, 1, worker, 0, 0, 1, 0, time.time_ns())

# The forger: a non-member address.
forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
forger.bind(("127.0.0.2", 0))
forger.setblocking(False)
# The insider: an admitted address, worker id 77, learns the current version from a MODEL.
insider = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
insider.bind(("127.0.0.1", 0))

def current_version():
    deadline = time.monotonic() + 5
    insider.sendto(request(77), learner)
    while time.monotonic() < deadline:
        r, _, _ = select.select([insider], [], [], 0.2)
        if not r:
            insider.sendto(request(77), learner)
            continue
        data = insider.recv(65536)
        if len(data) >= 48 and data[3] == 2:  # a MODEL chunk
            return struct.unpack_from(">I", data, 12)[0]
    raise SystemExit("no MODEL for the insider")

forged = 0
poison = 0
for i in range(250):
    forger.sendto(gradient(1000 + i, 1, i % COUNT, 0.01), learner)
    forged += 1
    if i % 5 == 0:
        forger.sendto(request(2000 + i), learner)
        forged += 1
    if i % 13 == 0 and poison < 19:
        version = current_version()
        insider.sendto(gradient(77, version, poison % COUNT, 3e38), learner)
        poison += 1
    time.sleep(0.01)  # pacing of the attack itself (2.5 s), not a wait for readiness
while poison < 19:
    insider.sendto(gradient(77, current_version(), poison % COUNT, 3e38), learner)
    poison += 1
# Anything the learner sends the forger arrives while it keeps publishing (every 5 ms).
back = 0
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    r, _, _ = select.select([forger], [], [], 0.1)
    if r:
        back += len(forger.recv(65536))
json.dump({"forged": forged, "poison": poison, "forger_bytes_back": back}, open(out, "w"))
PY
AP=$!
wait $AP || fail "attack script failed: $(tail -3 "$WORK/attack.log")"
wait $LP; rc=$?
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" || fail "worker $p exited with $?"; done
pids=()
tail -3 "$WORK/learner.log"
[ $rc -eq 0 ] && pass "under attack, the learner still reached mean eval return 475" || fail "learner exit $rc (1 = target missed)"
L=$WORK/m/learner.json
A=$WORK/attack.json
check "19 poison chunks sent, each rejected by the magnitude bound" "j('$A', 'poison') == 19 and j('$L', 'chunks.rejected.magnitude') == 19"
check "no step was rolled back (the bound caught everything first)" "j('$L', 'chunks.rejected.rolled_back') == 0"
check "the forger got no byte back" "j('$A', 'forger_bytes_back') == 0"
check "every forged datagram counted as not admitted (300)" "j('$A', 'forged') == 300 and j('$L', 'not_admitted') == 300"
check "forged and rejected senders never registered (workers 1, 2 and the insider's requests)" \
    "sorted(w['id'] for w in j('$L', 'workers.list')) == [1, 2, 77]"
check "only the honest workers' chunks applied" \
    "all(w['chunks_applied'] == 0 for w in j('$L', 'workers.list') if w['id'] == 77)"
[ "$failures" -eq 0 ] && { echo "drl hardening: all checks passed"; exit 0; }
echo "drl hardening: $failures check(s) failed"; exit 1
