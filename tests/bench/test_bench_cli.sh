#!/usr/bin/env bash
# shesha-bench's command line refuses a forward workload that does not exist (exit 2, naming the
# allowed ones) and --hugepages where too few are free (exit 1, naming the fix), before anything
# runs.
# Usage: test_bench_cli.sh SHESHA_BENCH
set -uo pipefail
bench=$1
out=$("$bench" --workloads grad1k,bogus forward 2>&1); rc=$?
[ $rc -eq 2 ] || { echo "FAIL: exit $rc, expected 2: $out"; exit 1; }
grep -qF "bogus not in {null64,pcap64,grad1k,grad8k,grad1k-split,grad1k-fresh,model16,model64}" <<< "$out" ||
    { echo "FAIL: no message naming the workloads: $out"; exit 1; }
echo "ok: --workloads bogus is refused with exit 2"

# --hugepages with too few free 2 MB hugepages: refused with the numbers and the fix, exit 1,
# before anything runs. (Where 512 MB or more are free it would run the bench: not checked here.)
free_pages=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
page_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
if [ "${page_kb:-0}" != 2048 ] || [ $(( ${free_pages:-0} * 2 )) -lt 512 ]; then
    out=$("$bench" --hugepages --ovs off --workloads pcap64 forward 2>&1); rc=$?
    [ $rc -eq 1 ] || { echo "FAIL: --hugepages without hugepages: exit $rc, expected 1: $out"; exit 1; }
    grep -qF -- "--hugepages needs 512 MB of free 2 MB hugepages" <<< "$out" && grep -qF "nr_hugepages" <<< "$out" ||
        { echo "FAIL: no message naming the need and the fix: $out"; exit 1; }
    echo "ok: --hugepages without enough free hugepages is refused with exit 1 and the fix"
else
    echo "skip: $(( free_pages * 2 )) MB of hugepages free here; the refusal is not checked"
fi
