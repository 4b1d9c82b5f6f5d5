#!/usr/bin/env bash
# Bad input for the DRL processes: bad command lines and configs exit 2 with a message naming the
# problem; a live learner hit with malformed, foreign and poisoned datagrams counts each exactly,
# applies none of them, keeps running and exits 0.
#
# usage: test_drl_errors.sh LEARNER WORKER SOURCE_DIR
set -uo pipefail
LEARNER=$1 WORKER=$2 SRC=$3
source "$SRC/tests/drl/drl_lib.sh"
WORK=$(mktemp -d /tmp/shesha-drl-errors.XXXXXX)
PORT=$(drl_port)
LP=
cleanup() {
    [ -n "$LP" ] && kill -KILL "$LP" 2>/dev/null
    wait 2>/dev/null
    if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi
}
trap cleanup EXIT
CFG=$SRC/configs/cluster-cartpole.yaml

expect_usage() {  # expect_usage DESCRIPTION MESSAGE_SUBSTRING CMD...
    local desc=$1 msg=$2; shift 2
    "$@" > "$WORK/out.log" 2>&1; local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$msg" "$WORK/out.log"; then pass "$desc"
    else fail "$desc: exit $rc, output: $(head -c 300 "$WORK/out.log")"; fi
}
printf 'env: CartPole-v1\na3c:\n  n_step: 5\n' > "$WORK/typo.yaml"
printf 'env: CartPole-v1\noptimizer: {lr: fast}\n' > "$WORK/type.yaml"
printf 'env: CartPole-v1\nlearner: {eval_episodes: 0}\n' > "$WORK/range.yaml"
printf 'env: CartPole-v1\nlearner: {model_delivery: replicated}\n' > "$WORK/nogroup.yaml"
printf 'env: CartPole-v1\nlearner: {model_delivery: replicated, model_group: 10.77.0.1}\n' > "$WORK/unigroup.yaml"
printf 'not a checkpoint\n' > "$WORK/bad.ckpt"

expect_usage "learner: missing --config" "--config is required" "$LEARNER" --cluster 1 --bind 127.0.0.1
expect_usage "learner: --cluster out of range" "--cluster" "$LEARNER" --config "$CFG" --cluster 70000 --bind 127.0.0.1
expect_usage "learner: --bind not an address" "--bind: not an IPv4 address" "$LEARNER" --config "$CFG" --cluster 1 --bind nowhere
expect_usage "learner: unknown key names its path" "a3c.n_step: unknown key 'n_step'" "$LEARNER" --config "$WORK/typo.yaml" --cluster 1 --bind 127.0.0.1
expect_usage "learner: wrong type names its key" "typo.yaml" "$LEARNER" --config "$WORK/typo.yaml" --cluster 1 --bind 127.0.0.1
expect_usage "learner: non-number lr" "optimizer.lr: expected a number" "$LEARNER" --config "$WORK/type.yaml" --cluster 1 --bind 127.0.0.1
expect_usage "learner: out-of-range value" "learner.eval_episodes: expected an integer in 1..10000, got 0" "$LEARNER" --config "$WORK/range.yaml" --cluster 1 --bind 127.0.0.1
expect_usage "learner: replicated delivery without a group" "nogroup.yaml:2:27: learner.model_group: missing" "$LEARNER" --config "$WORK/nogroup.yaml" --cluster 1 --bind 127.0.0.1
expect_usage "learner: a model_group that is not multicast" "learner.model_group: expected an IPv4 multicast group (224.0.0.0/4)" "$LEARNER" --config "$WORK/unigroup.yaml" --cluster 1 --bind 127.0.0.1
expect_usage "learner: --resume of a file that is no checkpoint" "bad magic" "$LEARNER" --config "$CFG" --cluster 1 --bind 127.0.0.1 --resume "$WORK/bad.ckpt"
expect_usage "worker: missing --worker-id" "--worker-id is required" "$WORKER" --config "$CFG" --cluster 1 --learner 127.0.0.1
expect_usage "worker: bad --learner" "--learner: not an IPv4 address" "$WORKER" --config "$CFG" --cluster 1 --worker-id 1 --learner 300.1.1.1
expect_usage "worker: bad YAML" "a3c.n_step: unknown key" "$WORKER" --config "$WORK/typo.yaml" --cluster 1 --worker-id 1 --learner 127.0.0.1
expect_usage "worker: --metrics in a missing directory is refused at start" "--metrics: cannot write $WORK/no-such-dir/w.json: No such file or directory" \
    "$WORKER" --config "$CFG" --cluster 1 --worker-id 1 --learner 127.0.0.1 --duration 5 --metrics "$WORK/no-such-dir/w.json"
expect_usage "worker: --metrics naming a directory is refused at start" "--metrics: cannot write $WORK: Is a directory" \
    "$WORKER" --config "$CFG" --cluster 1 --worker-id 1 --learner 127.0.0.1 --duration 5 --metrics "$WORK"

# A live learner (cluster 5, 4675 parameters in 5 chunks of 1024) under fire.
sed 's/^  chunk_elems: .*/  chunk_elems: 1024/' "$CFG" > "$WORK/c1024.yaml"
grep -q "^  chunk_elems: 1024" "$WORK/c1024.yaml" || { fail "cannot derive the test config"; exit 1; }
"$LEARNER" --config "$WORK/c1024.yaml" --cluster 5 --bind 127.0.0.1 --port "$PORT" --metrics-dir "$WORK/m" > "$WORK/learner.log" 2>&1 &
LP=$!
for _ in $(seq 1 300); do grep -q "cluster 5 on" "$WORK/learner.log" && break; sleep 0.1; done  # bound and ready
grep -q "cluster 5 on" "$WORK/learner.log" || { fail "learner did not start"; exit 1; }
python3 - "$PORT" <<'PY'
import socket, struct, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def hdr(type_=1, flags=0, elem=1, cluster=5, worker=1, version=1, seq=1, idx=0, count=5, elems=1024, contrib=1, ts=1000):
    return struct.pack(">HBBBBHIIIHHHHQQI", 0x5348, 2, type_, flags, elem, cluster, worker, version, seq, idx, count, elems, contrib, ts, ts, 0)
def grad(values, **kw):
    return hdr(elems=len(values), **kw) + struct.pack("<%df" % len(values), *values)
send = lambda b: s.sendto(b, ("127.0.0.1", port))
for _ in range(10): send(b"\xde\xad" * 40)                                # bad magic
for _ in range(7): send(b"SH\x01")                                      # short
for _ in range(5): send(grad([0.5] * 1024, cluster=6))                  # foreign cluster
for _ in range(4): send(grad([0.5] * 1024, count=7))                    # wrong chunk count
for _ in range(3): send(hdr(idx=5, count=5, elems=0))                   # index out of range (codec)
for _ in range(6): send(grad([0.5] * 1023 + [float("nan")], idx=1))     # NaN
for _ in range(2): send(grad([0.5] * 578 + [float("inf")], idx=4))  # +inf in the last chunk (579 elements)
for _ in range(3): send(grad([0.5] * 100, idx=2))                       # wrong element count
for _ in range(2): send(hdr(idx=0, elems=1024)[:48] + b"\x00" * 100)    # length mismatch (codec)
for _ in range(4): send(hdr(type_=3, elem=0, elems=0) + b"\x00" * 16)   # a CREDIT sent to the learner
for _ in range(2): send(hdr(type_=9))                                   # unknown type
PY
# The learner rewrites learner.json at every evaluation: wait until it has counted all 48 datagrams.
for _ in $(seq 1 100); do
    python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['datagrams'] >= 48 else 1)" \
        "$WORK/m/learner.json" 2>/dev/null && break
    sleep 0.1
done
kill -0 "$LP" 2>/dev/null && pass "learner still running after the barrage" || fail "learner died"
kill -TERM "$LP"; wait "$LP"; rc=$?; LP=
[ $rc -eq 0 ] && pass "learner exit 0 on SIGTERM" || fail "learner exit $rc"
L=$WORK/m/learner.json
check "nothing applied, no new version" "j('$L', 'chunks.applied') == 0 and j('$L', 'version') == 1 and j('$L', 'staleness.count') == 0"
check "bad magic counted (10)" "j('$L', 'decode_errors.bad_magic') == 10"
check "short datagrams counted (7)" "j('$L', 'decode_errors.short_packet') == 7"
check "out-of-range chunk index counted (3)" "j('$L', 'decode_errors.bad_chunk_index_count') == 3"
check "length mismatches counted (2)" "j('$L', 'decode_errors.length_mismatch') == 2"
check "unknown type counted (2)" "j('$L', 'decode_errors.unknown_type') == 2"
check "foreign cluster counted (5)" "j('$L', 'chunks.rejected.WrongCluster') == 5"
check "wrong chunk count counted (4)" "j('$L', 'chunks.rejected.WrongChunkCount') == 4"
check "non-finite gradients counted (6 NaN + 2 inf)" "j('$L', 'chunks.rejected.NonFinite') == 8"
check "wrong element count counted (3)" "j('$L', 'chunks.rejected.WrongElemCount') == 3"
check "a CREDIT at the learner counted as unexpected (4)" "j('$L', 'unexpected_type') == 4"
check "every datagram accounted for (48)" "j('$L', 'datagrams') == 48 and j('$L', 'decode_errors.total') == 24 and j('$L', 'chunks.rejected_total') == 20"
[ "$failures" -eq 0 ] && { echo "drl errors: all checks passed"; exit 0; }
echo "drl errors: $failures check(s) failed"; exit 1
