#!/bin/bash
# Interleaved A/B of two shesha-switch binaries on one switch config: ROUNDS rounds, each running
# A then B for SECONDS, reading received (or, with a last argument `tx`, sent) packets and uptime
# from the switch's stats JSON. Prints each round's Mpps and the median [min-max] of the per-round
# ratios B/A. `tx` is for configs where arrivals can be dropped before the ports (an old
# binary's 2-lcore handoff ring). The configs
# `shesha-bench forward --work-dir DIR` writes (DIR/switch-<workload>-<arm>.yaml) are the usual
# input. Interleaving keeps this machine's drift out of the ratio; compare ratios, not rates.
#
#   tools/bench/ab-switch.sh 8 1.5 DIR/switch-grad1k-shesha.yaml OLD/shesha-switch build/switch/dpdk/shesha-switch
#   tools/bench/ab-switch.sh 6 1.5 DIR/switch-null64-shesha-2c.yaml OLD/shesha-switch build/switch/dpdk/shesha-switch tx
#   CONFIG_A=OLD.yaml tools/bench/ab-switch.sh 6 1.5 NEW.yaml OLD/shesha-switch build/switch/dpdk/shesha-switch
set -euo pipefail
if [ $# -ne 5 ] && [ $# -ne 6 ]; then
    echo "usage: $0 ROUNDS SECONDS CONFIG.yaml BINARY_A BINARY_B [rx|tx]" >&2
    exit 2
fi
rounds=$1 seconds=$2 config=$3 a=$4 b=$5 metric=${6:-rx}
# CONFIG_A=FILE: A runs on its own config (an older binary that lacks a newer key).
config_a=${CONFIG_A:-$config}
case "$metric" in
    rx|tx) ;;
    *) echo "$0: the last argument is rx or tx, not '$metric'" >&2; exit 2 ;;
esac
for f in "$config" "$config_a" "$a" "$b"; do
    [ -e "$f" ] || { echo "$0: no such file: $f" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rate() {  # BINARY CONFIG: one run, prints rx Mpps
    if ! "$1" -c "$2" --duration "$seconds" --stats-json "$work/stats.json" > "$work/log" 2>&1; then
        echo "$0: $1 failed:" >&2
        tail -5 "$work/log" >&2
        exit 1
    fi
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(sum(p[sys.argv[2] + "_packets"] for p in d["ports"]) / d["uptime_s"] / 1e6, 3))' "$work/stats.json" "$metric"
}
for i in $(seq 1 "$rounds"); do
    ra=$(rate "$a" "$config_a")
    rb=$(rate "$b" "$config")
    echo "round $i: A $ra Mpps, B $rb Mpps ($metric)"
    echo "$ra $rb" >> "$work/rates"
done
python3 - "$work/rates" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
r = [b / a for a, b in pairs]
print(f"A median {statistics.median(p[0] for p in pairs):.2f} Mpps, B median {statistics.median(p[1] for p in pairs):.2f} Mpps; "
      f"B/A median {statistics.median(r):.3f} [{min(r):.3f}-{max(r):.3f}] over {len(r)} rounds")
PY
