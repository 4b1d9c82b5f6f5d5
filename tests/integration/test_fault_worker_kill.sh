#!/usr/bin/env bash
# Fault: one of three workers is killed (SIGKILL) in the middle of training (tests/lib/fault_rack.sh:
# CartPole-v1 to 195 through shesha-switch, the learner's port shaped so chunks merge). The other
# two must carry on to the target; the learner must stop spreading credit units of merged chunks
# to the dead worker once it has been silent for twice the credit timeout (those units go to the
# live workers instead: not stranded), and expire it after worker_timeout_ms (1 s here, and the kill
# comes early in training, so that it happens well before the target: a fast run reached 195 three
# seconds in), after which it gets no CREDIT and no MODEL at all.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_fault_worker_kill.sh SWITCH LEARNER WORKER SOURCE_DIR
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 SRC=$4
# shellcheck source=../lib/fault_rack.sh
source "$SRC/tests/lib/fault_rack.sh"
fault_rack_begin fwk
fault_cluster_yaml worker_timeout_ms=1000

fault_start_switch run
for w in 1 2 3; do rack_exec "h$w" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm
fault_start_learner m --duration 85
for w in 1 2 3; do fault_start_worker $w; done
L=$WORK/m/learner.json

# Kill only once chunks merge at the shaped port (the learner has spread units of merged chunks):
# the check on units spread past the quiet worker needs merges after the kill, and a CI run that
# killed at the first 200 chunks, before any merging, saw none in the quiet window.
wait_json 40 $LP "j('$L', 'chunks.applied') >= 200 and j('$L', 'workers.active') == 3 and j('$L', 'credits.units_spread') >= 200" ||
    { fail "training did not start with three workers merging: $(tail -3 "$WORK/m.log")"; exit 1; }
kill -KILL "${WORKER_PIDS[3]}"; wait "${WORKER_PIDS[3]}" 2>/dev/null; unset 'WORKER_PIDS[3]'
cp "$L" "$WORK/at-kill.json"
# The learner expires it (learner.json is rewritten at every evaluation, every second).
wait_json 20 $LP "j('$L', 'workers.expired') == 1 and j('$L', 'workers.active') == 2" &&
    pass "the learner expired the killed worker" || fail "the killed worker was not expired: $(tail -2 "$WORK/m.log")"
cp "$L" "$WORK/at-expiry.json"

wait $LP; rc=$?; LP=
finish_workers
rack_stop_switch
tail -2 "$WORK/m.log"
[ $rc -eq 0 ] && pass "the two remaining workers took the learner to mean eval return $TARGET" ||
    fail "learner exit $rc: $(tail -2 "$WORK/m.log")"

K=$WORK/at-kill.json E=$WORK/at-expiry.json
w_of() { echo "next(x for x in j('$1', 'workers.list') if x['id'] == $2)"; }
check "exactly the killed worker expired; the others stayed active" \
    "j('$L', 'workers.expired') == 1 and not $(w_of "$L" 3)['active'] and $(w_of "$L" 1)['active'] and $(w_of "$L" 2)['active']"
check "the others carried on: both had chunks applied after the kill" \
    "all($(w_of "$L" w)['chunks_applied'] > $(w_of "$K" w)['chunks_applied'] for w in (1, 2))"
check "no chunk of the killed worker applied after its expiry" \
    "$(w_of "$L" 3)['chunks_applied'] == $(w_of "$E" 3)['chunks_applied']"
check "no credit to the killed worker after its expiry" "$(w_of "$L" 3)['credit_units'] == $(w_of "$E" 3)['credit_units']"
check "merged chunks' units went past the silent worker to the live ones (not stranded)" \
    "j('$L', 'credits.units_spread_past_quiet') > 0"
for w in 1 2; do worker_accounting $w; done
check "the live workers' windows never stayed shut: they kept sending after the kill" \
    "all(j('$WORK/w%d.json' % w, 'chunks.sent') > 0 for w in (1, 2))"
check "nothing rejected, no duplicate" "j('$L', 'chunks.rejected_total') == 0 and j('$L', 'chunks.duplicates') == 0"
python3 - "$L" "$K" "$E" <<'PY'
import json, sys
final, kill, expiry = (json.load(open(p)) for p in sys.argv[1:])
def w(d, i): return next(x for x in d["workers"]["list"] if x["id"] == i)
print(f"killed worker 3: credit units {w(kill, 3)['credit_units']} at the kill, {w(expiry, 3)['credit_units']} at expiry, "
      f"{w(final, 3)['credit_units']} at the end; units spread: {kill['credits']['units_spread']} at the kill, "
      f"{final['credits']['units_spread']} at the end, {final['credits']['units_spread_past_quiet']} of them past a quiet worker")
PY

echo
[ "$failures" -eq 0 ] && { echo "fault worker kill test: all checks passed"; exit 0; }
echo "fault worker kill test: $failures check(s) failed"; exit 1
