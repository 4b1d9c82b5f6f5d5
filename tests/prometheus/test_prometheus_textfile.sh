#!/usr/bin/env bash
# --prometheus-textfile end to end, through Debian's prometheus-node-exporter (textfile collector)
# on loopback:
#   1. bad flags exit 2 with one clear line (switch and learner, no privileges needed);
#   2. shesha-switch on two net_null ports (root: DPDK) rewrites its file while running, and after
#      it stops, every value of its stats JSON equals the metric node_exporter serves;
#   3. shesha-learner + one worker on loopback UDP: learner.json and the metrics agree.
# Waits on readiness (HTTP answers, files appear, values change), never on fixed sleeps.
# usage: test_prometheus_textfile.sh SHESHA_SWITCH SHESHA_LEARNER SHESHA_WORKER SOURCE_DIR
# Exit 77 (skipped) without prometheus-node-exporter; the switch part needs root (77 without it).
set -uo pipefail
SWITCH=${1:?usage} LEARNER=${2:?usage} WORKER=${3:?usage} SRC=${4:?usage}
CHECK="python3 $SRC/tests/prometheus/prom_check.py"
WORK=$(mktemp -d /tmp/shesha-prom.XXXXXX)
PREFIX=shesha-prom-$$
pids=()
failures=0 passed=0
check() {  # check DESCRIPTION STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok: $1"; else failures=$((failures + 1)); echo "FAIL: $1"; fi
}
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "/var/run/dpdk/$PREFIX"
    if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT
# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds.
wait_for() {
    local deadline=$(( $(date +%s) + $1 )); shift
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- 1. bad flags --------------------------------------------------------------------------------
CFG_SW=$SRC/configs/switch-null.yaml
CFG_C=$SRC/configs/cluster-cartpole.yaml
for bin in "$SWITCH" "$LEARNER"; do
    name=$(basename "$bin")
    if [ "$name" = shesha-switch ]; then base=(-c "$CFG_SW"); else base=(--config "$CFG_C" --cluster 1 --bind 127.0.0.1); fi
    timeout 20 "$bin" "${base[@]}" --prometheus-textfile "$WORK/no-such-dir/x.prom" >"$WORK/out" 2>"$WORK/err"; rc=$?
    check "$name: unwritable textfile exits 2 (got $rc): $(head -1 "$WORK/err")" \
        "$([ "$rc" -eq 2 ] && grep -q 'no-such-dir/x.prom' "$WORK/err" && [ "$(wc -l <"$WORK/err")" -eq 1 ]; echo $?)"
    timeout 20 "$bin" "${base[@]}" --prometheus-textfile "$WORK/x.txt" >"$WORK/out" 2>"$WORK/err"; rc=$?
    check "$name: textfile not named *.prom exits 2 (got $rc): $(head -1 "$WORK/err")" \
        "$([ "$rc" -eq 2 ] && grep -q '\.prom' "$WORK/err"; echo $?)"
    timeout 20 "$bin" "${base[@]}" --prometheus-interval 1 >"$WORK/out" 2>"$WORK/err"; rc=$?
    check "$name: --prometheus-interval alone exits 2 (got $rc)" \
        "$([ "$rc" -eq 2 ] && grep -q 'prometheus-textfile' "$WORK/err"; echo $?)"
    timeout 20 "$bin" "${base[@]}" --prometheus-textfile "$WORK/y.prom" --prometheus-interval 0 >"$WORK/out" 2>"$WORK/err"; rc=$?
    check "$name: --prometheus-interval 0 exits 2 (got $rc)" "$([ "$rc" -eq 2 ]; echo $?)"
    check "$name: the start-up check leaves no file behind" "$([ -z "$(ls "$WORK"/*.prom* 2>/dev/null)" ]; echo $?)"
done

NODE_EXPORTER=$(command -v prometheus-node-exporter)
if [ -z "$NODE_EXPORTER" ]; then
    echo "$passed passed, $failures failed (node_exporter parts skipped: prometheus-node-exporter not installed)"
    [ "$failures" -eq 0 ] && exit 77 || exit 1
fi

# --- node_exporter: textfile collector only, loopback, a free port ---------------------------------
TEXTDIR=$WORK/textfile
mkdir -p "$TEXTDIR"
for attempt in 1 2 3; do
    PORT=$(free_port)
    "$NODE_EXPORTER" --web.listen-address="127.0.0.1:$PORT" --collector.disable-defaults --collector.textfile \
        --collector.textfile.directory="$TEXTDIR" --web.disable-exporter-metrics >"$WORK/node_exporter.log" 2>&1 &
    NE=$!
    URL=http://127.0.0.1:$PORT/metrics
    if $CHECK wait "$URL" 20 >/dev/null && kill -0 "$NE" 2>/dev/null; then pids+=("$NE"); break; fi
    kill "$NE" 2>/dev/null; wait "$NE" 2>/dev/null; NE=
done
check "node_exporter answers on $URL" "$([ -n "$NE" ]; echo $?)"
[ -n "$NE" ] || { tail -5 "$WORK/node_exporter.log"; exit 1; }

# --- 2. the switch (root) --------------------------------------------------------------------------
if [ "$(id -u)" -eq 0 ]; then
    SPROM=$TEXTDIR/shesha-switch.prom
    "$SWITCH" -c "$CFG_SW" --duration 4 --stats-json "$WORK/stats.json" --prometheus-textfile "$SPROM" \
        --prometheus-interval 0.5 --log-level warn -- --file-prefix "$PREFIX" >"$WORK/switch.out" 2>"$WORK/switch.err" &
    SP=$!
    pids+=("$SP")
    wait_for 30 test -s "$SPROM"
    check "the switch writes its textfile at start" $?
    sel='{"switch": "switch-null", "port": "null0"}'
    v1=$($CHECK value "$URL" shesha_port_rx_packets_total "$sel")
    changed() { v2=$($CHECK value "$URL" shesha_port_rx_packets_total "$sel"); [ -n "$v2" ] && [ "$v2" != "$v1" ]; }
    wait_for 10 changed
    check "rx_packets served while running and rewritten every 0.5 s ($v1 -> $v2)" \
        "$([ -n "$v1" ] && [ -n "$v2" ] && python3 -c "import sys; sys.exit(0 if float('$v2') > float('$v1') else 1)"; echo $?)"
    wait "$SP"; rc=$?
    pids=("$NE")
    check "switch run exits 0 (got $rc)" "$([ "$rc" -eq 0 ]; echo $?)"
    [ "$rc" -eq 0 ] || tail -5 "$WORK/switch.err"
    check "no temporary file left in the textfile directory" "$([ -z "$(ls "$TEXTDIR" | grep -v '\.prom$')" ]; echo $?)"
    $CHECK switch "$URL" "$WORK/stats.json" switch-null
    check "node_exporter serves every stats JSON value of the stopped switch, exactly" $?
    rm -f "$SPROM"
else
    echo "switch part skipped: not root (DPDK)"
fi

# --- 3. the learner --------------------------------------------------------------------------------
LPROM=$TEXTDIR/shesha-learner-1.prom
UPORT=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$LEARNER" --config "$CFG_C" --cluster 1 --bind 127.0.0.1 --port "$UPORT" --duration 6 --workers 1 --quiet \
    --metrics-dir "$WORK/m" --prometheus-textfile "$LPROM" --prometheus-interval 0.5 >"$WORK/learner.log" 2>&1 &
LP=$!
pids+=("$LP")
wait_for 30 test -s "$LPROM"
check "the learner writes its textfile at start" $?
"$WORKER" --config "$CFG_C" --cluster 1 --worker-id 1 --learner 127.0.0.1 --port "$UPORT" --duration 60 \
    >"$WORK/worker.log" 2>&1 &
WP=$!
pids+=("$WP")
applied() { a=$($CHECK value "$URL" shesha_learner_chunks_applied_total '{"cluster": "1"}'); [ -n "$a" ] && [ "$a" != 0 ]; }
wait_for 30 applied
check "learner metrics move while training (chunks applied: $a)" $?
wait "$LP"; rc=$?
kill -TERM "$WP" 2>/dev/null; wait "$WP" 2>/dev/null
pids=("$NE")
check "learner exits 0 after --duration (got $rc)" "$([ "$rc" -eq 0 ]; echo $?)"
$CHECK learner "$URL" "$WORK/m/learner.json" 1
check "node_exporter serves the learner's final learner.json values" $?

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ] || exit 1
[ "$(id -u)" -eq 0 ] || exit 77
