#!/usr/bin/env bash
# End-to-end test on a virtual rack: hosts in network namespaces on veth pairs, shesha-switch on
# af_packet ports between them, shesha-gen -> shesha-sink through a shaped bottleneck.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_rack.sh SWITCH GEN SINK SOURCE_DIR
set -uo pipefail

SWITCH=$1 GEN=$2 SINK=$3 SRC=$4
# shellcheck source=../lib/rack_test.sh
source "$SRC/tests/lib/rack_test.sh"
# shellcheck source=../../tools/lab/switch_yaml.sh
source "$SRC/tools/lab/switch_yaml.sh"
rack_test_begin it

HOSTS=(h1 h2 h3 h4 h9)          # h1..h3 workers, h4 learner, h9 a rogue outside the allow-list
rack_up h1:10.77.0.1 h2:10.77.0.2 h3:10.77.0.3 h4:10.77.0.4 h9:10.77.0.9
LEARNER_IP=10.77.0.4

start_switch() {  # start_switch NAME RATE QUEUE MARK AGGREGATION
    local name=$1
    rack_switch_yaml "$WORK/$name.yaml" h4 "$2" "$3" "$4" h1,h2,h3 "${HOSTS[@]}"
    rack_start_switch "$WORK/$name.yaml" "$WORK/$name.switch.log" --aggregation "$5" --stats-json "$WORK/$name.switch.json"
}
stop_switch() { rack_stop_switch; }

# gen_on HOST NAME ARGS...: a shesha-gen in HOST's namespace, JSON to $WORK/NAME.gen.json
gen_on() {
    local host=$1 name=$2; shift 2
    host_run "$host" "$GEN" --dst "$LEARNER_IP" --json "$WORK/$name.gen.json" "$@" > "$WORK/$name.gen.log" 2>&1
}
sum_sent() {  # total contributions sent by the named gen runs
    local total=0 f
    for f in "$@"; do total=$((total + $(jv "$WORK/$f.gen.json" totals.contributions_sent))); done
    echo $total
}

# ---------------------------------------------------------------------------------------------
echo "== 1. ping across the switch"
start_switch ping 0 256 0 on
rack_exec h1 ping -c 3 -i 0.2 -W 1 "$LEARNER_IP" > "$WORK/ping.log" 2>&1 && pass "h1 -> h4 ping" || fail "h1 -> h4 ping"
rack_exec h2 ping -c 3 -i 0.2 -W 1 10.77.0.3 >> "$WORK/ping.log" 2>&1 && pass "h2 -> h3 ping" || fail "h2 -> h3 ping"
stop_switch
check "switch learned the hosts' MACs" "j('$WORK/ping.switch.json', 'fdb.learned') >= 3"

# ---------------------------------------------------------------------------------------------
echo "== 2. uncongested: no merges, nothing lost, every sum exact"
start_switch calm 0 256 0 on
host_run h4 "$SINK" --until-idle 2 --duration 20 --json "$WORK/calm.sink.json" > "$WORK/calm.sink.log" 2>&1 &
SINK_PID=$!
wait_listening h4
# Uncongested: one worker per cluster, an update every 200 ms, model version every 1 s. Updates
# of the same (cluster, chunk, version) exist (five per version) but never wait together in an
# idle queue, so any merge would mean the switch held or re-opened a packet it should have sent.
for h in h1 h2 h3; do rack_exec "$h" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm
calm_pids=()
gen_on h1 calm-h1 --clusters 2 --workers 1 --chunks 4 --rate 5 --version-period-ms 1000 --duration 4 &
calm_pids+=($!)
h4mac=$(rack_mac h4)
for kind in garbage truncated nonip badip; do
    host_run h2 python3 "$SRC/tools/lab/rawframes.py" --kind $kind --count 50 --dst-mac "$h4mac" \
        --dst-ip "$LEARNER_IP" --src-ip 10.77.0.2 >> "$WORK/calm.raw.log" 2>&1 || fail "rawframes $kind"
done
for p in "${calm_pids[@]}"; do wait "$p" || fail "gen exited non-zero"; done
wait $SINK_PID; sink_rc=$?
stop_switch
[ $sink_rc -eq 0 ] || fail "sink exit code $sink_rc (3 = wrong sums)"
sent=$(sum_sent calm-h1)
C=$WORK/calm.switch.json
check "uncongested: sink got every contribution ($sent)" "j('$WORK/calm.sink.json', 'totals.contributions') == $sent"
check "uncongested: the sink saw the 50 garbage and 50 truncated datagrams" "j('$WORK/calm.sink.json', 'malformed.total') == 100"
check "uncongested: every sum exact" "j('$WORK/calm.sink.json', 'verify.bad') == 0 and j('$WORK/calm.sink.json', 'verify.exact') == j('$WORK/calm.sink.json', 'totals.chunks')"
check "uncongested: the switch merged nothing" "queue('$WORK/calm.switch.json', 'h4')['merged'] == 0"
check "malformed: 50 garbage datagrams counted as bad magic" "j('$C', 'malformed.bad_magic') == 50"
check "malformed: 50 truncated headers counted as short" "j('$C', 'malformed.short_packet') == 50"
check "malformed: 50 bad IPv4 frames counted" "j('$C', 'malformed.bad_frames') == 50"
check "non-IP frames forwarded (flooded or switched, not dropped)" "j('$C', 'frames.non_ip') >= 50"
check "uncongested: no tail drops" "queue('$WORK/calm.switch.json', 'h4')['dropped'] == 0"

# ---------------------------------------------------------------------------------------------
# Congested: three worker hosts offer about 40 Mbit/s of 1 KB gradients to a 20 Mbit/s port.
# Run once with aggregation on (plus the rogue host), once off.
congested_run() {  # congested_run NAME AGGREGATION WITH_ROGUE
    local name=$1 agg=$2 rogue=$3
    start_switch "$name" 20M 128 32 "$agg"
    host_run h4 "$SINK" --until-idle 2 --duration 30 --json "$WORK/$name.sink.json" > "$WORK/$name.sink.log" 2>&1 &
    local sink_pid=$!
    wait_listening h4
    local pids=() h i=0
    for h in h1 h2 h3; do
        gen_on "$h" "$name-$h" --clusters 2 --workers 2 --worker-base $((i * 10)) --chunks 4 --rate 100 \
            --duration 6 --ecn &
        pids+=($!); i=$((i + 1))
    done
    if [ "$rogue" = yes ]; then
        # h9 is not on the allow-list: its poisoned cluster-1 gradients must never be merged.
        gen_on h9 "$name-h9" --clusters 1 --workers 1 --worker-base 900 --chunks 4 --rate 50 --duration 6 --poison &
        pids+=($!)
    fi
    # Live counters through DPDK telemetry while traffic flows: queried until the learner's queue
    # has merged something (with aggregation on) or the generators are done.
    local _
    for _ in $(seq 1 40); do
        printf '/shesha/queues,h4\n/shesha/malformed\n' | timeout 10 dpdk-telemetry.py -f "$RACK_FILE_PREFIX" \
            > "$WORK/$name.telemetry.txt" 2>&1 || true
        [ "$agg" = on ] || break
        python3 -c "import json,sys; q=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][0]['/shesha/queues']; sys.exit(0 if q['merged'] > 0 else 1)" \
            "$WORK/$name.telemetry.txt" 2>/dev/null && break
    done
    local p; for p in "${pids[@]}"; do wait "$p" || fail "gen $p exited non-zero"; done
    wait $sink_pid
    stop_switch
}

echo "== 3. congested, aggregation on, with a rogue sender"
congested_run agg on yes
S=$WORK/agg.switch.json K=$WORK/agg.sink.json
sent=$(sum_sent agg-h1 agg-h2 agg-h3)
rogue_sent=$(jv "$WORK/agg-h9.gen.json" totals.contributions_sent)
check "congested: the bottleneck merged gradients" "queue('$S', 'h4')['merged'] > 0"
check "congested: merged chunks reached the sink" "j('$K', 'totals.merged_chunks') > 0 and j('$K', 'totals.merge_ratio') > 1.0"
check "congested: every merged sum is exact" "j('$K', 'verify.bad_merged') == 0"
check "congested: only the rogue's own chunks fail verification" "0 < j('$K', 'verify.bad') <= $rogue_sent"
check "congested: every gradient sent reached the switch" "j('$S', 'gradients.valid_shesha') == $sent + $rogue_sent"
# Conservation: contributions delivered + tail drops = contributions sent. The bottleneck queue
# also carries a few ARP frames, which may be tail-dropped too, hence the small slack.
check "congested: delivered + tail-dropped = sent (within ARP slack)" \
    "abs(j('$K', 'totals.contributions') + queue('$S', 'h4')['dropped'] - ($sent + $rogue_sent)) <= 10"
check "telemetry: /shesha/queues,h4 answered live with merges under way" \
    "[json.loads(l) for l in open('$WORK/agg.telemetry.txt') if l.startswith('{')][0]['/shesha/queues']['merged'] > 0"
check "telemetry: /shesha/malformed answered" \
    "'gradients/non_member' in [json.loads(l) for l in open('$WORK/agg.telemetry.txt') if l.startswith('{')][1]['/shesha/malformed']"
check "rogue: every rogue gradient counted as non-member ($rogue_sent)" "j('$S', 'gradients.non_member') == $rogue_sent"

echo "== 4. the same load with aggregation off: more queueing and more drops"
congested_run fifo off no
F=$WORK/fifo.switch.json
check "fifo: nothing merged" "queue('$F', 'h4')['merged'] == 0"
check "fifo: more tail drops than with aggregation" "queue('$F', 'h4')['dropped'] > queue('$S', 'h4')['dropped']"
check "fifo: deeper mean queue than with aggregation" \
    "queue('$F', 'h4')['depth_sum'] / queue('$F', 'h4')['depth_samples'] > queue('$S', 'h4')['depth_sum'] / queue('$S', 'h4')['depth_samples']"
check "fifo: every sum exact" "j('$WORK/fifo.sink.json', 'verify.bad') == 0"
fifo_sent=$(sum_sent fifo-h1 fifo-h2 fifo-h3)
check "fifo: delivered + tail-dropped = sent (within ARP slack)" \
    "abs(j('$WORK/fifo.sink.json', 'totals.contributions') + queue('$F', 'h4')['dropped'] - $fifo_sent) <= 10"
check "fifo: the full queue marked congestion (depth >= 32)" "queue('$F', 'h4')['marked'] > 0 and j('$WORK/fifo.sink.json', 'totals.ce_marked') > 0"
check "fifo: FEEDBACK sent to the marked senders" "j('$F', 'feedback.sent') > 0"

echo "== 5. the switch keeps forwarding after all that"
start_switch after 0 256 0 on
rack_exec h1 ping -c 2 -i 0.2 -W 1 "$LEARNER_IP" > /dev/null 2>&1 && pass "ping after stress" || fail "ping after stress"
stop_switch
[ ! -e "/var/run/dpdk/$RACK_FILE_PREFIX" ] && pass "the stopped switch left no DPDK runtime directory" \
    || fail "/var/run/dpdk/$RACK_FILE_PREFIX left behind"

echo
if [ "$failures" -eq 0 ]; then echo "rack test: all checks passed"; exit 0; fi
echo "rack test: $failures check(s) failed"; exit 1
