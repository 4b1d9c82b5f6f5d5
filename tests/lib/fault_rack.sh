# shellcheck shell=bash
# The frame of the fault rack tests (tests/integration/test_fault_*.sh, issue 29): one CartPole job,
# a learner (h4) and three workers (h1..h3) in network namespaces behind one shesha-switch whose
# port toward the learner is shaped (so chunks queue and merge there, as in test_drl_rack.sh), and
# the helpers that wait on the processes' own metrics instead of sleeping.
#
#   fault_rack_begin NAME       rack_test_begin, the four hosts, the switch YAML in $WORK/switch.yaml
#   fault_cluster_yaml KEY=VALUE...   $WORK/cluster.yaml: the shipped CartPole file with those
#                               learner/transport keys changed (each must exist in the file)
#   fault_start_switch TAG      shesha-switch on $WORK/switch.yaml, stats in $WORK/switch-TAG.json
#   fault_start_learner TAG ARGS...   the learner in h4 (LP), metrics in $WORK/TAG, log $WORK/TAG.log
#   fault_start_worker ID       a worker in hID (WORKER_PIDS[ID]), metrics $WORK/wID.json
#   wait_json SECONDS PID EXPR  until the Python EXPR (j(file, key) as in check) holds: true; false
#                               when PID exits first or SECONDS pass. Polls every 0.2 s.
#   finish_workers              SIGTERM every worker (each writes its final metrics), FAIL on a bad exit
#   worker_accounting ID        the check that every chunk worker ID sent left flight exactly once
# Needs SWITCH, LEARNER, WORKER and SRC.
# shellcheck source=rack_test.sh
source "$SRC/tests/lib/rack_test.sh"
# shellcheck source=../../tools/lab/switch_yaml.sh
source "$SRC/tools/lab/switch_yaml.sh"

FAULT_HOSTS=(h1 h2 h3 h4)
LEARNER_IP=10.77.0.4
TARGET=195
declare -A WORKER_PIDS=()

fault_rack_begin() {
    rack_test_begin "$1"
    rack_up h1:10.77.0.1 h2:10.77.0.2 h3:10.77.0.3 h4:10.77.0.4
    # 30 Mbit/s toward the learner, 128 packets, marking from 16: three workers offer more than
    # that, so chunks wait there and merge (the credit plan's spread units are exercised).
    rack_switch_yaml "$WORK/switch.yaml" h4 30M 128 16 h1,h2,h3 "${FAULT_HOSTS[@]}"
}

fault_cluster_yaml() {
    local kv key value args=(-e '')
    for kv in "$@"; do
        key=${kv%%=*} value=${kv#*=}
        grep -q "^  $key:" "$SRC/configs/cluster-cartpole.yaml" || { fail "no key $key in the cluster file"; exit 1; }
        args+=(-e "s/^\(  $key:\) *[^ ]*/\1 $value/")
    done
    sed "${args[@]}" "$SRC/configs/cluster-cartpole.yaml" > "$WORK/cluster.yaml"
    CFG=$WORK/cluster.yaml
}

fault_start_switch() {
    rack_start_switch "$WORK/switch.yaml" "$WORK/switch-$1.log" --stats-json "$WORK/switch-$1.json"
}

fault_start_learner() {
    local tag=$1; shift
    host_run h4 "$LEARNER" --config "$CFG" --cluster 1 --bind "$LEARNER_IP" --target-return $TARGET \
        --metrics-dir "$WORK/$tag" --workers 3 "$@" > "$WORK/$tag.log" 2>&1 &
    LP=$!
    wait_listening h4
}

fault_start_worker() {
    local w=$1
    host_run "h$w" "$WORKER" --config "$CFG" --cluster 1 --worker-id "$w" --learner "$LEARNER_IP" \
        --bind "10.77.0.$w" --duration 170 --metrics "$WORK/w$w.json" > "$WORK/w$w.log" 2>&1 &
    WORKER_PIDS[$w]=$!
    pids+=($!)
}

wait_json() {
    local limit=$(( $1 * 5 )) pid=$2 expr=$3 i
    for ((i = 0; i < limit; i++)); do
        python3 - "$expr" <<'PY' 2>/dev/null && return 0
import json, sys
def j(path, key):
    node = json.load(open(path))
    for part in key.split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return node
sys.exit(0 if eval(sys.argv[1]) else 1)
PY
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}

finish_workers() {
    local w
    for w in "${!WORKER_PIDS[@]}"; do kill -TERM "${WORKER_PIDS[$w]}" 2>/dev/null; done
    for w in "${!WORKER_PIDS[@]}"; do wait "${WORKER_PIDS[$w]}" || fail "worker $w exited with $?"; done
    WORKER_PIDS=()
    pids=()
}

# A chunk leaves a worker's flight by a credit unit it applied, or is forgotten by a credit
# timeout, or is still in flight at the end: nothing else, and never twice.
worker_accounting() {
    local f=$WORK/w$1.json
    check "worker $1: chunks sent = credited + presumed lost by timeouts + still in flight" \
        "j('$f', 'chunks.sent') == j('$f', 'credit.units') - j('$f', 'credit.excess') - j('$f', 'credit.banked') + j('$f', 'credit.presumed_lost') + j('$f', 'window.in_flight')"
}
