#!/usr/bin/env bash
# Distributed A3C through shesha-switch on a namespace rack: a learner (h4) and three workers
# (h1..h3) in their own network namespaces, joined by af_packet veth ports of one switch whose
# port toward the learner is shaped, so the gradient chunks queue there and merge in the network.
# The learner must reach a mean evaluation return of 195 on CartPole-v1; the merges, CE echoes and
# FEEDBACK must be visible in the learner's, the workers' and the switch's counters.
# With PYTHON_MODULE_DIR (the built `shesha` module), worker 3 is the torch.nn A3C worker of
# python/examples/a3c_worker.py, on the same switch and learner as the two C++ workers.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_drl_rack.sh SWITCH LEARNER WORKER SOURCE_DIR [PYTHON_MODULE_DIR]
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 SRC=$4 PYMOD=${5:-}
# shellcheck source=../lib/rack_test.sh
source "$SRC/tests/lib/rack_test.sh"
# shellcheck source=../../tools/lab/switch_yaml.sh
source "$SRC/tools/lab/switch_yaml.sh"
rack_test_begin drl

HOSTS=(h1 h2 h3 h4)
rack_up h1:10.77.0.1 h2:10.77.0.2 h3:10.77.0.3 h4:10.77.0.4
LEARNER_IP=10.77.0.4
CFG=$SRC/configs/cluster-cartpole.yaml

# Bottleneck toward the learner: 30 Mbit/s, 128-packet queue, marking from 16 packets. Three
# workers offer far more than that, so chunks of the same index wait together and merge.
rack_switch_yaml "$WORK/switch.yaml" h4 30M 128 16 h1,h2,h3 "${HOSTS[@]}"
rack_start_switch "$WORK/switch.yaml" "$WORK/switch.log" --stats-json "$WORK/switch.json"
for h in h1 h2 h3; do rack_exec "$h" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm

host_run h4 "$LEARNER" --config "$CFG" --cluster 1 --bind "$LEARNER_IP" --duration 180 --target-return 195 \
    --metrics-dir "$WORK/m" --workers 3 > "$WORK/learner.log" 2>&1 &
LP=$!
CPP_WORKERS=(1 2 3)
[ -n "$PYMOD" ] && CPP_WORKERS=(1 2)
# The Python worker first, and the C++ workers only once it is up: importing torch takes seconds,
# and the C++ workers alone can reach the target before it ever registers.
if [ -n "$PYMOD" ]; then
    host_run h3 env PYTHONPATH="$PYMOD" /usr/bin/python3 "$SRC/python/examples/a3c_worker.py" --config "$CFG" \
        --cluster 1 --worker-id 3 --learner "$LEARNER_IP" --bind 10.77.0.3 --duration 200 \
        --metrics "$WORK/py3.json" > "$WORK/w3.log" 2>&1 &
    pids+=($!)
    wait_for_line "$WORK/w3.log" "^a3c_worker 3: " "$!" 120 || fail "the Python worker did not start: $(tail -3 "$WORK/w3.log")"
fi
for w in "${CPP_WORKERS[@]}"; do
    host_run "h$w" "$WORKER" --config "$CFG" --cluster 1 --worker-id $w --learner "$LEARNER_IP" --bind "10.77.0.$w" \
        --duration 200 --metrics "$WORK/w$w.json" > "$WORK/w$w.log" 2>&1 &
    pids+=($!)
done
wait $LP; rc=$?
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done  # each writes its final metrics on the way out
for p in "${pids[@]}"; do wait "$p" || fail "worker exited with $?"; done
pids=()
kill -INT "$SWITCH_PID"; wait "$SWITCH_PID"; src=$?; SWITCH_PID=
[ $src -eq 0 ] || fail "switch exited with $src"
tail -3 "$WORK/learner.log"

[ $rc -eq 0 ] && pass "learner reached mean eval return 195 through the switch" || fail "learner exit $rc"
L=$WORK/m/learner.json S=$WORK/switch.json
check "all three workers registered through the switch" "j('$L', 'workers.known') == 3"
check "chunks merged in the network reached the learner" "j('$L', 'chunks.merged') > 0"
check "merged chunks averaged: contributions > chunks applied" "j('$L', 'chunks.contributions') > j('$L', 'chunks.applied')"
check "nothing rejected" "j('$L', 'chunks.rejected_total') == 0 and j('$L', 'decode_errors.total') == 0"
check "the switch merged on the learner's port" "next(p for p in j('$S', 'ports') if p['name'] == 'h4')['queue']['merged'] > 0"
check "CE marks seen and echoed by the learner" "j('$L', 'chunks.ce_marked') > 0 and j('$L', 'credits.echoes') > 0"
CPP_LIST=$(IFS=,; echo "${CPP_WORKERS[*]}",)
check "workers cut their window (echoes or FEEDBACK)" \
    "sum(j('$WORK/w%d.json' % w, 'credit.round_reductions') + j('$WORK/w%d.json' % w, 'credit.feedback_reductions') for w in ($CPP_LIST)) > 0"
check "workers received FEEDBACK from the switch" "sum(j('$WORK/w%d.json' % w, 'credit.feedback') for w in ($CPP_LIST)) > 0"
check "AoM and staleness measured" "j('$L', 'aom.samples') > 0 and j('$L', 'staleness.count') == j('$L', 'chunks.applied')"
if [ -n "$PYMOD" ]; then
    P=$WORK/py3.json
    check "the Python worker's chunks were applied through the switch" \
        "next(w for w in j('$L', 'workers.list') if w['id'] == 3)['chunks_applied'] > 0"
    check "the Python worker adopted models and was credited" \
        "j('$P', 'transport.models_adopted') > 1 and j('$P', 'transport.credits_received') > 0 and j('$P', 'updates') > 0"
fi

echo
[ "$failures" -eq 0 ] && { echo "drl rack test: all checks passed"; exit 0; }
echo "drl rack test: $failures check(s) failed"; exit 1
