#!/usr/bin/env bash
# Fault: the switch is killed (SIGKILL) in the middle of training and started again with the same
# config. Three workers train CartPole-v1 to 195 through it (tests/lib/fault_rack.sh). The chunks
# in flight (in the switch's queues, or sent while it was down) are lost; the workers must forget
# them by their credit timeouts and carry on once the new switch forwards, without a restart of
# their own or of the learner, and the job must reach its target. Counters: every chunk a worker
# sent is credited, presumed lost or still in flight (exactly once); the learner never received
# more chunks or contributions than the workers sent; nothing rejected, no duplicate.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_fault_switch_restart.sh SWITCH LEARNER WORKER SOURCE_DIR
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 SRC=$4
# shellcheck source=../lib/fault_rack.sh
source "$SRC/tests/lib/fault_rack.sh"
fault_rack_begin fsw
fault_cluster_yaml

fault_start_switch before
for w in 1 2 3; do rack_exec "h$w" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm
fault_start_learner m --duration 85
for w in 1 2 3; do fault_start_worker $w; done
L=$WORK/m/learner.json

# Kill the switch once training is under way (but well before the target: some 1,000 chunks), and
# once every worker has written its metrics (a second after its start): the counters below are read
# from them.
wait_json 40 $LP "j('$L', 'chunks.applied') >= 1000 and all(j('$WORK/w%d.json' % w, 'model.requests_sent') >= 1 for w in (1, 2, 3))" ||
    { fail "training did not start, or a worker wrote no metrics: $(tail -3 "$WORK/m.log")"; exit 1; }
kill -KILL "$SWITCH_PID"; wait "$SWITCH_PID" 2>/dev/null; SWITCH_PID=
APPLIED_AT_KILL=$(jv "$L" chunks.applied)
# Every worker notices the silence (metrics rewritten every second): what it had in flight is presumed
# lost by its credit timeout, and it asks for the model again. A worker may have had nothing in flight
# at the kill (all credited, max_updates_per_version reached), so a timeout is not required of each.
REQ=$(python3 -c "import json; print([json.load(open('$WORK/w%d.json' % w))['model']['requests_sent'] for w in (1, 2, 3)])") ||
    { fail "cannot read the workers' model requests at the kill"; exit 1; }
echo "info: model requests sent by workers 1-3 at the kill: $REQ"
wait_json 15 $LP "all(j('$WORK/w%d.json' % w, 'window.in_flight') == 0 and j('$WORK/w%d.json' % w, 'model.requests_sent') > $REQ[w - 1] for w in (1, 2, 3))" &&
    pass "every worker noticed the silence: nothing left in flight, model requests resent" ||
    fail "not every worker noticed the silence while the switch was down"
# The same config again: an empty FDB and empty queues (the EAL runtime dir of the dead one is reused).
fault_start_switch after

wait $LP; rc=$?; LP=
finish_workers
rack_stop_switch
tail -2 "$WORK/m.log"
[ $rc -eq 0 ] && pass "the learner reached mean eval return $TARGET after the switch restart" ||
    fail "learner exit $rc: $(tail -2 "$WORK/m.log")"

S=$WORK/switch-after.json
check "training went on through the new switch (chunks applied after the kill)" "j('$L', 'chunks.applied') > $APPLIED_AT_KILL"
check "the new switch forwarded the workers' gradients to the learner's port" \
    "port('$S', 'h4')['tx_packets'] > 0 and sum(port('$S', h)['rx_packets'] for h in ('h1', 'h2', 'h3')) > 0"
check "the new switch flooded while its FDB was empty (counted), then learned all four hosts" \
    "j('$S', 'fdb.learned') >= 4 and 0 < sum(p['flooded'] for p in j('$S', 'ports')) < port('$S', 'h4')['tx_packets']"
for w in 1 2 3; do worker_accounting $w; done
check "the workers presumed chunks lost (their timeouts, not a restart, reopened the windows)" \
    "sum(j('$WORK/w%d.json' % w, 'credit.presumed_lost') for w in (1, 2, 3)) > 0"
check "nothing counted twice: the learner received no more chunks than the workers sent" \
    "j('$L', 'chunks.received') <= sum(j('$WORK/w%d.json' % w, 'chunks.sent') for w in (1, 2, 3))"
check "nothing counted twice: no more contributions applied than the workers sent" \
    "j('$L', 'chunks.contributions') <= sum(j('$WORK/w%d.json' % w, 'chunks.contributions_sent') for w in (1, 2, 3))"
check "no duplicate chunk reached the learner" "j('$L', 'chunks.duplicates') == 0"
check "nothing rejected, nothing undecodable" "j('$L', 'chunks.rejected_total') == 0 and j('$L', 'decode_errors.total') == 0"
check "all three workers stayed registered, none expired" "j('$L', 'workers.known') == 3 and j('$L', 'workers.expired') == 0"
check "no worker restarted (each still on its first learner incarnation, models adopted after the restart)" \
    "all(j('$WORK/w%d.json' % w, 'model.learner_restarts') == 0 for w in (1, 2, 3))"
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
after = json.load(open(f"{w}/switch-after.json"))
workers = [json.load(open(f"{w}/w{i}.json"))["credit"] for i in (1, 2, 3)]
print(f"switch after restart: {sum(p['flooded'] for p in after['ports'])} frames flooded while its FDB was empty; "
      + ", ".join(f"w{i}: {c['timeouts']} credit timeouts, {c['presumed_lost']} chunks presumed lost"
                  for i, c in zip((1, 2, 3), workers)))
PY
echo
[ "$failures" -eq 0 ] && { echo "fault switch restart test: all checks passed"; exit 0; }
echo "fault switch restart test: $failures check(s) failed"; exit 1
