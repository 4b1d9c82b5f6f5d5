#!/usr/bin/env bash
# shesha-bench's command line refuses a forward workload that does not exist: exit 2, naming the
# allowed ones, before anything runs.
# Usage: test_bench_cli.sh SHESHA_BENCH
set -uo pipefail
bench=$1
out=$("$bench" --workloads grad1k,bogus forward 2>&1); rc=$?
[ $rc -eq 2 ] || { echo "FAIL: exit $rc, expected 2: $out"; exit 1; }
grep -qF "bogus not in {null64,pcap64,grad1k,grad8k,grad1k-split,grad1k-fresh,model16,model64}" <<< "$out" ||
    { echo "FAIL: no message naming the workloads: $out"; exit 1; }
echo "ok: --workloads bogus is refused with exit 2"
