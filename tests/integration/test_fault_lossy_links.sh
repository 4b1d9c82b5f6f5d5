#!/usr/bin/env bash
# Fault: every worker's link loses, reorders and duplicates packets for the whole run. shesha-impair
# (docs/tools.md) on each worker's eth0, both directions: 1 % loss, 1 % reordering (held behind 3
# later packets), 0.5 % duplication; and 0.5 % duplication of what reaches the learner (its eth0,
# ingress), so that copies arrive at both places that must refuse them. Three workers train
# CartPole-v1 to 195 through shesha-switch (tests/lib/fault_rack.sh). The job must reach its target.
# Counters: the impairments happened (drops, reorders, copies); the switch dropped the workers'
# copies (never merged, so never inside a sum where nobody could tell them); the learner refused
# the copies made after the switch as duplicates (neither applied nor credited) and rejected
# nothing (a reordered chunk is not an error); every chunk a worker sent is credited, presumed
# lost or in flight, exactly once.
# Needs root, network namespaces and iptables-legacy (shesha-impair); exits 77 (skip) otherwise.
#
# usage: test_fault_lossy_links.sh SWITCH LEARNER WORKER IMPAIR SOURCE_DIR
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 IMPAIR=$4 SRC=$5
command -v iptables-legacy > /dev/null || { echo "iptables-legacy not installed: skipped"; exit 77; }
# shellcheck source=../lib/fault_rack.sh
source "$SRC/tests/lib/fault_rack.sh"
fault_rack_begin flo
fault_cluster_yaml

fault_start_switch run
for w in 1 2 3; do rack_exec "h$w" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm (before the faults)
for w in 1 2 3; do
    taskset -c "$HOST_CPUS" "$IMPAIR" --netns "${RACK_PREFIX}h$w" --dev eth0 --direction both --loss 1% --reorder 1% \
        --duplicate 0.5% --seed $w --json "$WORK/impair-h$w.json" --ready-file "$WORK/impair-h$w.ready" \
        > "$WORK/impair-h$w.log" 2>&1 &
    IMPAIR_PIDS[$w]=$!
    pids+=($!)
done
taskset -c "$HOST_CPUS" "$IMPAIR" --netns "${RACK_PREFIX}h4" --dev eth0 --direction ingress --duplicate 0.5% --seed 4 \
    --json "$WORK/impair-h4.json" --ready-file "$WORK/impair-h4.ready" > "$WORK/impair-h4.log" 2>&1 &
IMPAIR_PIDS[4]=$!
pids+=($!)
for w in 1 2 3 4; do
    wait_for_line "$WORK/impair-h$w.ready" . "${IMPAIR_PIDS[$w]}" 10 ||
        { fail "shesha-impair on h$w did not start: $(tail -3 "$WORK/impair-h$w.log")"; exit 1; }
done
fault_start_learner m --duration 110
for w in 1 2 3; do fault_start_worker $w; done
L=$WORK/m/learner.json

wait $LP; rc=$?; LP=
finish_workers
for w in 1 2 3 4; do kill -TERM "${IMPAIR_PIDS[$w]}"; done
for w in 1 2 3 4; do wait "${IMPAIR_PIDS[$w]}" || fail "shesha-impair on h$w exited with $?"; done
pids=()
rack_stop_switch
tail -2 "$WORK/m.log"
[ $rc -eq 0 ] && pass "the learner reached mean eval return $TARGET over lossy, reordering, duplicating links" ||
    fail "learner exit $rc: $(tail -2 "$WORK/m.log")"

S=$WORK/switch-run.json
I="[j('$WORK/impair-h%d.json' % w, 'directions.egress') for w in (1, 2, 3)]"
check "every worker's link dropped, reordered and duplicated its gradients" \
    "all(d['dropped'] > 0 and d['reordered'] > 0 and d['duplicated'] > 0 for d in $I)"
check "the kernel's queue lost nothing of its own" \
    "all(j('$WORK/impair-h%d.json' % w, 'kernel_queue_dropped') == 0 for w in (1, 2, 3))"
check "nothing rejected: reordered chunks are taken, no replay-window refusal" \
    "j('$L', 'chunks.rejected_total') == 0 and j('$L', 'decode_errors.total') == 0"
check "the switch dropped copies of the workers' gradients (no more than the links made)" \
    "0 < j('$S', 'gradients.copies_dropped') <= sum(d['duplicated'] for d in $I)"
check "no gradient was too late for the switch to judge" "j('$S', 'gradients.late_unmerged') == 0"
check "copies made on the learner's link reached it and were refused as duplicates" \
    "0 < j('$L', 'chunks.duplicates') <= j('$WORK/impair-h4.json', 'directions.ingress.duplicated')"
check "nothing counted twice: no more contributions applied than the workers sent" \
    "j('$L', 'chunks.contributions') <= sum(j('$WORK/w%d.json' % w, 'chunks.contributions_sent') for w in (1, 2, 3))"
for w in 1 2 3; do worker_accounting $w; done
check "every worker adopted models despite lost MODEL chunks" \
    "all(j('$WORK/w%d.json' % w, 'model.versions_adopted') > 1 for w in (1, 2, 3))"
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
imp = [json.load(open(f"{w}/impair-h{i}.json")) for i in (1, 2, 3)]
learner = json.load(open(f"{w}/m/learner.json"))
switch = json.load(open(f"{w}/switch-run.json"))
tot = lambda k, d: sum(x["directions"][d][k] for x in imp)
print(f"impaired: egress dropped {tot('dropped', 'egress')}, reordered {tot('reordered', 'egress')}, duplicated "
      f"{tot('duplicated', 'egress')}; ingress dropped {tot('dropped', 'ingress')}, reordered {tot('reordered', 'ingress')}, "
      f"duplicated {tot('duplicated', 'ingress')}; switch copies dropped {switch['gradients']['copies_dropped']}; "
      f"learner duplicates {learner['chunks']['duplicates']} (its link made "
      f"{json.load(open(f'{w}/impair-h4.json'))['directions']['ingress']['duplicated']} copies); "
      f"target {learner['target']['seconds']} s")
PY

echo
[ "$failures" -eq 0 ] && { echo "fault lossy links test: all checks passed"; exit 0; }
echo "fault lossy links test: $failures check(s) failed"; exit 1
