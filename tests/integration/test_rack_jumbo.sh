#!/usr/bin/env bash
# Jumbo frames end to end on a namespace rack: veths at MTU 9000, af_packet switch ports with big
# ring frames (framesz=) and mtu 9000, 2048-element GRADIENT chunks (8.3 KB frames) from three
# generators merged behind a shaped port and verified exactly at the sink. A port left at mtu 1500
# counts the jumbo frames sent its way in tx_too_big and sends none of them; a worker whose chunks
# would not fit the MTU of its route refuses to start (exit 2). Also: af_xdp and a too small
# framesz are refused at start with the port and its limit named.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_rack_jumbo.sh SWITCH GEN SINK WORKER SOURCE_DIR
set -uo pipefail
SWITCH=$1 GEN=$2 SINK=$3 WORKER=$4 SRC=$5
# shellcheck source=../lib/rack_test.sh
source "$SRC/tests/lib/rack_test.sh"
rack_test_begin jb

RACK_MTU=9000 rack_up h1:10.79.0.1 h2:10.79.0.2 h3:10.79.0.3 h4:10.79.0.4 h5:10.79.0.5:1500
BIG="framesz=9216,blocksz=36864"
switch_yaml() {  # switch_yaml FILE DEVICE_OF_H1
    cat > "$1" <<YAML
eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "$RACK_FILE_PREFIX"]
mbufs: 8192
ports:
  - {name: h1, device: "$2", mtu: 9000}
  - {name: h2, device: "net_af_packet1,iface=$(rack_host_if h2),$BIG", mtu: 9000}
  - {name: h3, device: "net_af_packet2,iface=$(rack_host_if h3),$BIG", mtu: 9000}
  - name: h4
    device: "net_af_packet3,iface=$(rack_host_if h4),$BIG"
    mtu: 9000
    shaper: {rate: 40M, burst_bytes: 20000}
    queue: {packets: 256, bytes: 8MiB}
  - {name: h5, device: "net_af_packet4,iface=$(rack_host_if h5)", mtu: 1500}
protocol: {udp_port: 17717, malformed: forward}
aggregation:
  clusters:
    - {id: 1, version_tolerance: 0, members: [10.79.0.1, 10.79.0.2, 10.79.0.3]}
YAML
}

echo "== 1. ports that cannot carry the MTU are refused at start"
switch_yaml "$WORK/small.yaml" "net_af_packet0,iface=$(rack_host_if h1)"
"$SWITCH" -c "$WORK/small.yaml" > "$WORK/small.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "port 'h1' .*mtu 9000 needs 9018-byte frames, but the af_packet ring frames are 2048 bytes (framesz default): set framesz=" "$WORK/small.log" \
    && pass "af_packet with the default framesz: refused, naming the port and framesz" || fail "framesz: exit $rc, $(tail -2 "$WORK/small.log")"
switch_yaml "$WORK/xdp.yaml" "net_af_xdp0,iface=$(rack_host_if h1)"
"$SWITCH" -c "$WORK/xdp.yaml" > "$WORK/xdp.log" 2>&1; rc=$?
if grep -q "cannot probe device" "$WORK/xdp.log"; then
    echo "skip: net_af_xdp cannot run here ($(tail -1 "$WORK/xdp.log"))"
else
    [ $rc -ne 0 ] && grep -q "port 'h1' .*mtu 9000 needs 9018-byte frames, but the net_af_xdp driver takes at most mtu" "$WORK/xdp.log" \
        && pass "af_xdp (no multi-buffer in DPDK 22.11): refused, naming the port and its limit" || fail "af_xdp: exit $rc, $(tail -2 "$WORK/xdp.log")"
fi

echo "== 2. 2048-element chunks merged behind the shaped port, sums exact"
switch_yaml "$WORK/sw.yaml" "net_af_packet0,iface=$(rack_host_if h1),$BIG"
rack_start_switch "$WORK/sw.yaml" "$WORK/sw.log" --stats-json "$WORK/sw.json"
for h in h1 h2 h3 h5; do rack_exec "$h" ping -c 1 -W 1 10.79.0.4 > /dev/null 2>&1; done  # ARP + FDB
rack_exec h1 ping -c 1 -W 1 10.79.0.5 > /dev/null 2>&1
host_run h4 "$SINK" --bind 10.79.0.4 --until-idle 2 --duration 30 --json "$WORK/sink.json" > "$WORK/sink.log" 2>&1 &
SINK_PID=$!
wait_listening h4
gens=()
for h in h1 h2 h3; do
    host_run "$h" "$GEN" --dst 10.79.0.4 --bind "10.79.0.${h#h}" --workers 1 --chunks 2 --elems 2048 --rate 150 \
        --version-period-ms 1000 --duration 3 --json "$WORK/$h.gen.json" > "$WORK/$h.gen.log" 2>&1 &
    gens+=($!)
done
# Jumbo frames towards the mtu-1500 port: never sent, counted.
host_run h1 "$GEN" --dst 10.79.0.5 --bind 10.79.0.1 --workers 1 --chunks 1 --elems 2048 --rate 20 --duration 1 \
    --json "$WORK/toobig.gen.json" > "$WORK/toobig.gen.log" 2>&1
for p in "${gens[@]}"; do wait "$p" || fail "gen exited non-zero"; done
wait $SINK_PID; sink_rc=$?
kill -INT $SWITCH_PID; wait $SWITCH_PID; src=$?; SWITCH_PID=
[ $src -eq 0 ] || fail "switch exit $src"
[ $sink_rc -eq 0 ] || fail "sink exit $sink_rc (3 = wrong sums)"
S=$WORK/sw.json K=$WORK/sink.json
sent=0; for h in h1 h2 h3; do sent=$((sent + $(jv "$WORK/$h.gen.json" totals.contributions_sent))); done
port() { echo "next(p for p in j('$S', 'ports') if p['name'] == '$1')"; }
check "jumbo chunks merged on the shaped port" "$(port h4)['queue']['merged'] > 0"
check "every sum exact at the sink" "j('$K', 'verify.bad') == 0 and j('$K', 'verify.exact') == j('$K', 'totals.chunks') > 0"
check "contributions delivered + tail-dropped = sent ($sent)" \
    "j('$K', 'totals.contributions') + $(port h4)['queue']['dropped'] == $sent"
check "no frame arrived in pieces" "sum(p['rx_multi_segment'] for p in j('$S', 'ports')) == 0 and j('$S', 'malformed')['total'] == 0"
toobig=$(jv "$WORK/toobig.gen.json" totals.chunks_sent)
check "the mtu-1500 port counted the $toobig jumbo frames as tx_too_big" "$(port h5)['tx_too_big'] == $toobig > 0"
check "... and sent none of them (only small frames: ARP, ping)" "$(port h5)['tx_bytes'] < 1500 * $(port h5)['tx_packets'] + 1 and $(port h5)['tx_packets'] < 10"

echo "== 3. a worker refuses chunks that do not fit the MTU of its route"
printf 'env: CartPole-v1\ntransport: {chunk_elems: 1024}\n' > "$WORK/c1024.yaml"
rack_exec h5 "$WORKER" --config "$WORK/c1024.yaml" --cluster 1 --worker-id 1 --learner 10.79.0.4 --bind 10.79.0.5 \
    --duration 2 > "$WORK/w.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "transport: chunk_elems 1024 makes 4172-byte IP datagrams .* more than the 1500-byte MTU of the route to 10.79.0.4: use chunk_elems <= 356" "$WORK/w.log" \
    && pass "worker at mtu 1500 with 1024-element chunks: exit 2, naming the limit" || fail "worker: exit $rc, $(head -c 400 "$WORK/w.log")"
rack_exec h1 "$WORKER" --config "$WORK/c1024.yaml" --cluster 1 --worker-id 1 --learner 10.79.0.4 --bind 10.79.0.1 \
    --duration 1 > "$WORK/w9000.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "the same worker at mtu 9000 starts (exit 0 after --duration)" || fail "worker at 9000: exit $rc, $(head -c 300 "$WORK/w9000.log")"

[ "$failures" -eq 0 ] && { echo "rack jumbo: all checks passed"; exit 0; }
echo "rack jumbo: $failures check(s) failed"; exit 1
