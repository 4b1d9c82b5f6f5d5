#!/usr/bin/env bash
# One shesha-learner and two shesha-workers, separate processes over loopback UDP, learn
# CartPole-v1: the learner must see a mean deterministic evaluation return of 475 (10 episodes)
# within 200 s (about 10 s on an idle 2-core machine). Then the metrics are checked.
#
# usage: test_drl_learning.sh LEARNER WORKER SOURCE_DIR
set -uo pipefail
LEARNER=$1 WORKER=$2 SRC=$3
source "$SRC/tests/drl/drl_lib.sh"
drl_begin drl-learning
CFG=$SRC/configs/cluster-cartpole.yaml

"$LEARNER" --config "$CFG" --cluster 1 --bind 127.0.0.1 --port "$PORT" --duration 200 --target-return 475 \
    --metrics-dir "$WORK/m" --workers 2 > "$WORK/learner.log" 2>&1 &
LP=$!
for w in 1 2; do
    "$WORKER" --config "$CFG" --cluster 1 --worker-id $w --learner 127.0.0.1 --port "$PORT" --duration 230 \
        --metrics "$WORK/w$w.json" > "$WORK/w$w.log" 2>&1 &
    pids+=($!)
done
wait $LP; rc=$?
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" || fail "worker $p exited with $?"; done
pids=()
tail -5 "$WORK/learner.log"
[ $rc -eq 0 ] && pass "learner reached mean eval return 475 (exit 0)" || fail "learner exit $rc (1 = target missed)"
L=$WORK/m/learner.json
check "learner.json is the final summary" "j('$L', 'final') is True and j('$L', 'target.reached') is True"
check "last evaluation >= 475" "j('$L', 'eval.last_mean_return') >= 475"
check "learner.csv has one row per evaluation" "len(open('$WORK/m/learner.csv').read().splitlines()) == 1 + j('$L', 'eval.count')"
check "nothing rejected, nothing undecodable" "j('$L', 'chunks.rejected_total') == 0 and j('$L', 'decode_errors.total') == 0"
check "every received chunk applied" "j('$L', 'chunks.applied') == j('$L', 'chunks.received') > 0"
check "staleness counted once per applied chunk" "j('$L', 'staleness.count') == j('$L', 'chunks.applied') == sum(j('$L', 'staleness.histogram'))"
check "AoM measured (mean <= peak, positive)" "j('$L', 'aom.samples') > 0 and 0 < j('$L', 'aom.mean_ms') <= j('$L', 'aom.peak_ms')"
check "one CREDIT unit per chunk (no merges on loopback)" "j('$L', 'credits.units') == j('$L', 'chunks.received')"
check "both workers known and active" "j('$L', 'workers.known') == 2 and j('$L', 'workers.active') == 2"
check "env steps reported by the workers" "j('$L', 'env_steps') > 1000"
for w in 1 2; do
    F=$WORK/w$w.json
    check "worker $w: final metrics written" "j('$F', 'final') is True and j('$F', 'worker_id') == $w"
    check "worker $w: sent updates and adopted models" "j('$F', 'chunks.sent') > 0 and j('$F', 'model.versions_adopted') > 1"
    check "worker $w: ran episodes" "j('$F', 'episodes.count') > 0 and j('$F', 'env_steps_per_s') > 0"
    check "worker $w: window sampled" "len(j('$F', 'window.samples')) > 0"
    # max_updates_per_version (4) makes every worker wait for newer versions; the time it waited
    # is what the lab's check against the simulator leaves out of its compute time.
    check "worker $w: waited for models, and timed the waits within its run" \
        "j('$F', 'updates.waits_for_version') + j('$F', 'updates.waits_for_model') > 0 and 0 < j('$F', 'updates.wait_seconds') < j('$F', 'wall_seconds')"
done
# The learner's count is the workers' counters as last reported in GRADIENT chunks; the workers
# ran on after the learner stopped, so their own totals can only be larger.
check "learner's env steps <= the workers' own totals" \
    "0 < j('$L', 'env_steps') <= j('$WORK/w1.json', 'env_steps') + j('$WORK/w2.json', 'env_steps')"
[ "$failures" -eq 0 ] && { echo "drl learning: all checks passed"; exit 0; }
echo "drl learning: $failures check(s) failed"; exit 1
