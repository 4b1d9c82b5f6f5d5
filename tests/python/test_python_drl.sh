#!/usr/bin/env bash
# torch.nn A3C workers (python/examples/a3c_worker.py, through the `shesha` module) train
# CartPole-v1 against the C++ shesha-learner over loopback:
#   1. two Python workers: the learner's own evaluation must reach 475;
#   2. a mixed cluster, one C++ shesha-worker and one Python worker: 475 again, and both workers'
#      chunks applied.
# Skips (77) where /usr/bin/python3 lacks torch or numpy.
#
# usage: test_python_drl.sh LEARNER WORKER SOURCE_DIR PYTHON_MODULE_DIR
set -uo pipefail
LEARNER=$1 WORKER=$2 SRC=$3 PYMOD=$4
source "$SRC/tests/drl/drl_lib.sh"
/usr/bin/python3 -c "import torch, numpy, yaml" 2>/dev/null || { echo "SKIP: python3-torch, numpy or yaml missing"; exit 77; }
drl_begin python-drl
CFG=$SRC/configs/cluster-cartpole.yaml
py_worker() {  # py_worker ID RUN
    PYTHONPATH="$PYMOD" /usr/bin/python3 "$SRC/python/examples/a3c_worker.py" --config "$CFG" --cluster 1 \
        --worker-id "$1" --learner 127.0.0.1 --port "$PORT" --duration 230 --metrics "$WORK/$2-py$1.json" \
        > "$WORK/$2-py$1.log" 2>&1 &
    pids+=($!)
}
run() {  # run NAME: starts the learner, waits for it, stops the workers
    "$LEARNER" --config "$CFG" --cluster 1 --bind 127.0.0.1 --port "$PORT" --duration 200 --target-return 475 \
        --metrics-dir "$WORK/$1" --workers 2 > "$WORK/$1-learner.log" 2>&1 &
    LP=$!
    for _ in $(seq 1 300); do grep -q "cluster 1 on" "$WORK/$1-learner.log" && break; sleep 0.1; done  # bound
}
finish() {  # finish NAME
    wait $LP; rc=$?
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" || fail "$1: worker exited with $?"; done
    pids=()
    tail -2 "$WORK/$1-learner.log"
    [ $rc -eq 0 ] && pass "$1: the learner reached mean eval return 475" || fail "$1: learner exit $rc"
}

run python
py_worker 1 python
py_worker 2 python
finish python
L=$WORK/python/learner.json
check "python: both Python workers' chunks applied, nothing rejected" \
    "sorted(w['id'] for w in j('$L', 'workers.list') if w['chunks_applied'] > 0) == [1, 2] and j('$L', 'chunks.rejected_total') == 0"
check "python: the workers' final metrics (adopted models, credits)" \
    "all(j('$WORK/python-py%d.json' % w, 'transport.models_adopted') > 1 and j('$WORK/python-py%d.json' % w, 'transport.credits_received') > 0 for w in (1, 2))"

run mixed
"$WORKER" --config "$CFG" --cluster 1 --worker-id 1 --learner 127.0.0.1 --port "$PORT" --duration 230 \
    --metrics "$WORK/mixed-cpp1.json" > "$WORK/mixed-cpp1.log" 2>&1 &
pids+=($!)
py_worker 2 mixed
finish mixed
L=$WORK/mixed/learner.json
check "mixed: the C++ and the Python worker both applied" \
    "sorted(w['id'] for w in j('$L', 'workers.list') if w['chunks_applied'] > 0) == [1, 2] and j('$L', 'chunks.rejected_total') == 0"

[ "$failures" -eq 0 ] && { echo "python drl: all checks passed"; exit 0; }
echo "python drl: $failures check(s) failed"; exit 1
