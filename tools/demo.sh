#!/usr/bin/env bash
# The switch demo: a virtual rack on this machine (hosts in network namespaces on veth pairs,
# shesha-switch on af_packet ports), three worker hosts sending 1 KB gradient chunks of two
# clusters to a learner host behind a shaped 20 Mbit/s port. Runs the same load twice, aggregation
# off (the FIFO baseline) and on, and prints a side-by-side table.
#
# usage: sudo tools/demo.sh [--seconds N] [--rate R] [--bottleneck RATE] [--out DIR] [--no-install] [--build-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD

SECONDS_PER_ARM=25
RATE=100          # updates/s per virtual worker
BOTTLENECK=20M
OUT=""
INSTALL=1
BUILD=build
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) SECONDS_PER_ARM=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --bottleneck) BOTTLENECK=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --no-install) INSTALL=0; shift ;;
        --build-dir) BUILD=$2; shift 2 ;;
        -h|--help) sed -n 2,9p "$0"; exit 0 ;;
        *) echo "demo: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $SECONDS_PER_ARM =~ ^[0-9]+$ ]] && [ "$SECONDS_PER_ARM" -ge 2 ] && [ "$SECONDS_PER_ARM" -le 600 ] \
    || { echo "demo: --seconds must be an integer in 2..600" >&2; exit 2; }
[[ $RATE =~ ^[0-9]+$ ]] && [ "$RATE" -ge 1 ] && [ "$RATE" -le 5000 ] \
    || { echo "demo: --rate must be an integer in 1..5000" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces, raw sockets): run it with sudo" >&2; exit 2; }

if [ $INSTALL -eq 1 ]; then
    ./tools/install-deps.sh
    [ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" --buildtype=release
    ninja -C "$BUILD"
fi
BUILD=$(cd "$BUILD" && pwd)
SWITCH=$BUILD/switch/dpdk/shesha-switch GEN=$BUILD/tools/gen/shesha-gen SINK=$BUILD/tools/sink/shesha-sink
for b in "$SWITCH" "$GEN" "$SINK"; do [ -x "$b" ] || { echo "demo: $b not built" >&2; exit 1; }; done

OUT=${OUT:-$SRC/report-demo-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
source tools/lab/rack.sh
source tools/lab/switch_yaml.sh
RACK_PREFIX=shesha-demo-
RACK_IF_PREFIX=shd-
export RACK_FILE_PREFIX=shesha-demo-$$
SWITCH_PID=
cleanup() {
    [ -n "$SWITCH_PID" ] && kill -TERM "$SWITCH_PID" 2>/dev/null && wait "$SWITCH_PID" 2>/dev/null
    rack_down
}
trap cleanup EXIT
trap 'echo "demo: interrupted"; exit 130' INT TERM

# The switch polls on lcore 0; the hosts' processes run on the other core(s).
if [ "$(nproc)" -ge 2 ]; then HOST_CPUS=1-$(($(nproc) - 1)); else HOST_CPUS=0; fi
HOSTS=(h1 h2 h3 h4)
rack_up h1:10.77.0.1 h2:10.77.0.2 h3:10.77.0.3 h4:10.77.0.4

run_arm() {  # run_arm NAME AGGREGATION
    local name=$1 agg=$2
    echo "== arm '$name': aggregation $agg, ${SECONDS_PER_ARM}s, bottleneck $BOTTLENECK"
    rack_switch_yaml "$OUT/$name.switch.yaml" h4 "$BOTTLENECK" 128 32 h1,h2,h3 "${HOSTS[@]}"
    "$SWITCH" -c "$OUT/$name.switch.yaml" --aggregation "$agg" --stats-json "$OUT/$name.switch.json" \
        > "$OUT/$name.switch.log" 2>&1 &
    SWITCH_PID=$!
    for _ in $(seq 1 100); do grep -q "shesha-switch running" "$OUT/$name.switch.log" && break; sleep 0.1; done
    grep -q "shesha-switch running" "$OUT/$name.switch.log" || { cat "$OUT/$name.switch.log"; exit 1; }
    rack_exec h4 taskset -c "$HOST_CPUS" "$SINK" --until-idle 2 --duration $((SECONDS_PER_ARM + 20)) --json "$OUT/$name.sink.json" \
        > "$OUT/$name.sink.log" 2>&1 &
    local sink_pid=$! pids=() i=0 h
    sleep 0.3
    for h in h1 h2 h3; do
        rack_exec "$h" taskset -c "$HOST_CPUS" "$GEN" --dst 10.77.0.4 --clusters 2 --workers 2 --worker-base $((i * 10)) --chunks 4 \
            --rate "$RATE" --duration "$SECONDS_PER_ARM" --ecn --json "$OUT/$name-$h.gen.json" \
            > "$OUT/$name-$h.gen.log" 2>&1 &
        pids+=($!); i=$((i + 1))
    done
    local t=0
    while kill -0 "${pids[0]}" 2>/dev/null; do
        sleep 5; t=$((t + 5))
        # Progress: the switch's own periodic line (queue depths, rates).
        printf '   %3ds  %s\n' "$t" "$(grep -a 'rx ' "$OUT/$name.switch.log" | tail -1 | cut -c1-150)"
    done
    local p; for p in "${pids[@]}"; do wait "$p"; done
    wait "$sink_pid" || true
    kill -INT "$SWITCH_PID"; wait "$SWITCH_PID" || true; SWITCH_PID=
}

run_arm fifo off
run_arm shesha on

python3 "$SRC/tools/lab/demo_table.py" "$OUT" fifo shesha | tee "$OUT/summary.txt"
echo "raw results: $OUT"
