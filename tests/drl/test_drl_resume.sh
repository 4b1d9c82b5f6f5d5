#!/usr/bin/env bash
# Checkpoint, kill, resume: a learner checkpoints every 500 ms while two workers train; it is
# killed with SIGKILL; a new learner resumes from the checkpoint on the same port. The resumed
# learner must start at the checkpoint's version and keep training; the workers, never restarted,
# must follow the new incarnation (adopt its models) and keep sending.
#
# usage: test_drl_resume.sh LEARNER WORKER SOURCE_DIR
set -uo pipefail
LEARNER=$1 WORKER=$2 SRC=$3
source "$SRC/tests/drl/drl_lib.sh"
drl_begin drl-resume
CFG=$WORK/cluster.yaml
sed -e 's/^\(  checkpoint_interval_ms:\).*/\1 500/' -e 's/^\(  eval_interval_ms:\).*/\1 500/' \
    "$SRC/configs/cluster-cartpole.yaml" > "$CFG"
grep -q "checkpoint_interval_ms: 500" "$CFG" || { echo "cannot derive the test config"; exit 1; }
CK=$WORK/learner.ckpt

"$LEARNER" --config "$CFG" --cluster 3 --bind 127.0.0.1 --port "$PORT" --checkpoint "$CK" \
    --metrics-dir "$WORK/a" > "$WORK/a.log" 2>&1 &
LP=$!
for w in 1 2; do
    "$WORKER" --config "$CFG" --cluster 3 --worker-id $w --learner 127.0.0.1 --port "$PORT" --duration 120 \
        --metrics "$WORK/w$w.json" > "$WORK/w$w.log" 2>&1 &
    pids+=($!)
done
# Train until a checkpoint past version 100 exists (bounded: 60 s).
for _ in $(seq 1 600); do
    [ -f "$CK" ] && [ "$(checkpoint_version "$CK")" -ge 100 ] && break
    sleep 0.1
done
kill -KILL "$LP"; wait "$LP" 2>/dev/null; LP=
[ -f "$CK" ] || { fail "no checkpoint written"; exit 1; }
V=$(checkpoint_version "$CK")
E=$(python3 -c "import struct,sys;print(struct.unpack_from('<Q',open(sys.argv[1],'rb').read(),20)[0])" "$CK")
[ "$V" -ge 100 ] && pass "checkpoint at version $V before the kill" || fail "checkpoint version $V < 100"
# The workers notice the silence: their metrics (rewritten every second) show credit timeouts.
for _ in $(seq 1 100); do
    python3 -c "import json,sys; sys.exit(0 if all(json.load(open(f))['credit']['timeouts'] > 0 for f in sys.argv[1:]) else 1)" \
        "$WORK/w1.json" "$WORK/w2.json" 2>/dev/null && break
    sleep 0.1
done

"$LEARNER" --config "$CFG" --cluster 3 --bind 127.0.0.1 --port "$PORT" --checkpoint "$CK" --resume "$CK" \
    --duration 6 --metrics-dir "$WORK/b" > "$WORK/b.log" 2>&1 &
LP=$!
wait "$LP"; rc=$?; LP=
[ $rc -eq 0 ] && pass "resumed learner ran and exited 0" || fail "resumed learner exit $rc"
grep -q "resumed from $CK at version $V " "$WORK/b.log" && pass "resumed at version $V" || { fail "no resume line"; cat "$WORK/b.log"; }
B=$WORK/b/learner.json
check "learner.json records the resumed version" "j('$B', 'resumed_version') == $V"
check "training continued after the resume" "j('$B', 'chunks.applied') > 0 and j('$B', 'version') > $V"
check "both workers reconnected to the new learner" "j('$B', 'workers.known') == 2 and all(w['chunks_applied'] > 0 for w in j('$B', 'workers.list'))"
check "nothing rejected after the resume" "j('$B', 'chunks.rejected_total') == 0"
check "env steps carried over from the checkpoint ($E) and counted on" "j('$B', 'env_steps') > $E > 0"
CV=$(checkpoint_version "$CK")
E=$(python3 -c "import struct,sys;print(struct.unpack_from('<Q',open(sys.argv[1],'rb').read(),20)[0])" "$CK")
check "checkpoint on exit holds the final version" "$CV == j('$B', 'version')"
INC=$(jv "$B" incarnation)

for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done  # each writes its final metrics on the way out
for p in "${pids[@]}"; do wait "$p" || fail "worker exited with $?"; done
pids=()
for w in 1 2; do
    F=$WORK/w$w.json
    check "worker $w: saw the learner restart (new incarnation in MODEL and CREDIT)" \
        "j('$F', 'model.learner_restarts') == 1 and j('$F', 'rx.learner_restarts_seen') == 1"
    check "worker $w: holds a model of the resumed learner" \
        "j('$F', 'model.incarnation') == $INC and j('$F', 'model.version') >= $V"
    check "worker $w: asked for the model while the learner was gone" "j('$F', 'model.requests_sent') >= 2"
done
[ "$failures" -eq 0 ] && { echo "drl resume: all checks passed"; exit 0; }
echo "drl resume: $failures check(s) failed"; exit 1
