#!/usr/bin/env bash
# Fault: the learner is killed (SIGKILL) in the middle of training and started again with --resume
# from its last checkpoint, on the same address (tests/lib/fault_rack.sh: CartPole-v1 to 195,
# three workers through shesha-switch). The workers are not restarted: they must notice the
# silence (credit timeouts), find the new learner (their gradients, which the switch keeps
# forwarding to the same address, and their model requests register them with it), adopt its
# models (a new incarnation) and train it to the target. Counters: the resumed learner starts at the
# checkpoint's version and knows all three workers again; every worker's sent chunks are credited,
# presumed lost or in flight; nothing rejected (gradients computed on versions newer than the
# checkpoint's are taken as version_ahead), no duplicate.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_fault_learner_restart.sh SWITCH LEARNER WORKER SOURCE_DIR
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 SRC=$4
# shellcheck source=../lib/fault_rack.sh
source "$SRC/tests/lib/fault_rack.sh"
fault_rack_begin flr
fault_cluster_yaml checkpoint_interval_ms=500
CK=$WORK/learner.ckpt

fault_start_switch run
for w in 1 2 3; do rack_exec "h$w" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm
fault_start_learner a --duration 85 --checkpoint "$CK"
for w in 1 2 3; do fault_start_worker $w; done
A=$WORK/a/learner.json

# Kill it once it has trained a while and written a checkpoint (every 500 ms), and once every worker
# has written its metrics (a second after its start): the counters below are read from them.
wait_json 40 $LP "j('$A', 'chunks.applied') >= 1000 and j('$A', 'checkpoints.written') >= 1 and all(j('$WORK/w%d.json' % w, 'model.requests_sent') >= 1 for w in (1, 2, 3))" ||
    { fail "no training, checkpoint and worker metrics before the kill: $(tail -3 "$WORK/a.log")"; exit 1; }
kill -KILL "$LP"; wait "$LP" 2>/dev/null; LP=
[ -f "$CK" ] || { fail "no checkpoint file"; exit 1; }
# The workers notice the silence (metrics rewritten every second): whatever they had in flight is
# presumed lost by their credit timeout, and they ask the silent learner for the model again. A worker
# may have had nothing in flight at the kill (all credited, and max_updates_per_version reached on the
# last model), so a timeout is not required of each; nothing left in flight is.
REQ=$(python3 -c "import json; print([json.load(open('$WORK/w%d.json' % w))['model']['requests_sent'] for w in (1, 2, 3)])") ||
    { fail "cannot read the workers' model requests at the kill"; exit 1; }
echo "info: model requests sent by workers 1-3 at the kill: $REQ"
wait_json 15 "${WORKER_PIDS[1]}" "all(j('$WORK/w%d.json' % w, 'window.in_flight') == 0 and j('$WORK/w%d.json' % w, 'model.requests_sent') > $REQ[w - 1] for w in (1, 2, 3))" &&
    pass "every worker noticed the silence: nothing left in flight, model requests resent" ||
    fail "not every worker noticed the silence (in flight, requests: $(for w in 1 2 3; do python3 -c "import json; d = json.load(open('$WORK/w$w.json')); print(d['window']['in_flight'], d['model']['requests_sent'], end=' ')"; done))"
echo "info: credit timeouts while the learner was down: $(for w in 1 2 3; do python3 -c "import json; print(json.load(open('$WORK/w$w.json'))['credit']['timeouts'], end=' ')"; done)"

fault_start_learner b --duration 85 --checkpoint "$CK" --resume "$CK"
B=$WORK/b/learner.json
wait $LP; rc=$?; LP=
for w in 1 2 3; do kill -0 "${WORKER_PIDS[$w]}" 2>/dev/null || fail "worker $w is no longer running"; done
finish_workers
rack_stop_switch
tail -2 "$WORK/b.log"
[ $rc -eq 0 ] && pass "the resumed learner reached mean eval return $TARGET with the same workers" ||
    fail "resumed learner exit $rc: $(tail -2 "$WORK/b.log")"

V=$(sed -n "s/.*resumed from .* at version \([0-9]*\) .*/\1/p" "$WORK/b.log" | head -1)
[ -n "$V" ] && pass "the learner resumed from its checkpoint at version $V" || { fail "no resume line"; V=0; }
check "learner.json records the resumed version, and training went on from it" \
    "j('$B', 'resumed_version') == $V > 1 and j('$B', 'version') > $V"
check "all three workers found the new learner (registered, chunks applied)" \
    "j('$B', 'workers.known') == 3 and all(w['chunks_applied'] > 0 for w in j('$B', 'workers.list'))"
check "the workers followed the new incarnation without restarting" \
    "all(j('$WORK/w%d.json' % w, 'model.learner_restarts') >= 1 and j('$WORK/w%d.json' % w, 'model.incarnation') == j('$B', 'incarnation') for w in (1, 2, 3))"
for w in 1 2 3; do worker_accounting $w; done
check "nothing rejected by the resumed learner, no duplicate" \
    "j('$B', 'chunks.rejected_total') == 0 and j('$B', 'chunks.duplicates') == 0 and j('$B', 'decode_errors.total') == 0"

echo
[ "$failures" -eq 0 ] && { echo "fault learner restart test: all checks passed"; exit 0; }
echo "fault learner restart test: $failures check(s) failed"; exit 1
