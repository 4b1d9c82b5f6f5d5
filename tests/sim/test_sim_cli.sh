#!/bin/bash
# shesha-sim CLI: the example scenarios run and keep their invariants (exit 0), CSVs are written
# with one header, --append adds rows, strict keys fail with exit 2 naming the key, and a seed
# gives the same summary twice.
# Usage: test_sim_cli.sh SHESHA_SIM CONFIGS_DIR
set -euo pipefail
sim=$1
configs=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

short=(--set duration_ms=3)
for c in tor leaf-spine overload; do
    "$sim" -q -c "$configs/sim-$c.yaml" "${short[@]}" -o "$out/$c" -l "$c" || fail "sim-$c.yaml exited $?"
    for f in summary.csv clusters.csv series.csv; do
        [[ -s "$out/$c/$f" ]] || fail "$c: $f missing"
    done
    [[ $(wc -l < "$out/$c/summary.csv") -eq 2 ]] || fail "$c: summary.csv should have a header and one row"
done

# --append: a second run adds one row, not a second header.
"$sim" -q -c "$configs/sim-tor.yaml" "${short[@]}" --aggregation off -o "$out/tor" -l tor-fifo --append
[[ $(wc -l < "$out/tor/summary.csv") -eq 3 ]] || fail "--append should add exactly one row"
[[ $(grep -c '^label,' "$out/tor/summary.csv") -eq 1 ]] || fail "--append repeated the header"
grep -q '^tor-fifo,fifo+window+fb,' "$out/tor/summary.csv" || fail "FIFO arm row missing"

# Determinism: same seed, same summary apart from the wall-clock columns (the last two).
for i in 1 2; do
    "$sim" -q -c "$configs/sim-leaf-spine.yaml" "${short[@]}" -o "$out/det$i" -l det
    tail -1 "$out/det$i/summary.csv" | cut -d, -f1-$(( $(head -1 "$out/det$i/summary.csv" | tr ',' '\n' | wc -l) - 2 )) > "$out/det$i.row"
done
cmp -s "$out/det1.row" "$out/det2.row" || fail "two runs with the same seed differ"
cmp -s "$out/det1/series.csv" "$out/det2/series.csv" || fail "time series differ between identical runs"

# The MODEL direction: a replicated run reports both directions of the learner port and its
# group chunks; the one-directional run carries nothing down.
"$sim" -q -c "$configs/sim-tor.yaml" "${short[@]}" --set model.delivery=replicated --set model.publish_interval_us=1000 \
    -o "$out/rep" -l rep
python3 - "$out/rep/summary.csv" <<'PY' || fail "replicated run: model columns"
import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
assert r["model_delivery"] == "replicated", r["model_delivery"]
assert int(r["model_group_chunks"]) > 0 and int(r["learner_down_bytes"]) > 0 and int(r["learner_up_bytes"]) > 0
assert 0 < float(r["learner_down_utilisation"]) <= 1 and int(r["model_verify_failures"]) == 0
PY
"$sim" -q -c "$configs/sim-tor.yaml" "${short[@]}" --set model.delivery=none -o "$out/none" -l none
python3 - "$out/none/summary.csv" <<'PY' || fail "one-directional run: nothing down"
import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
assert r["model_delivery"] == "none" and int(r["learner_down_bytes"]) == 0 and int(r["versions_published"]) == 0
PY

# Strict keys: exit 2 and the key named.
set +e
msg=$("$sim" -q -c "$configs/sim-tor.yaml" --set queue.capacity=3 2>&1); rc=$?
set -e
[[ $rc -eq 2 ]] || fail "unknown key should exit 2, got $rc"
[[ $msg == *"unknown key 'queue.capacity'"* ]] || fail "message does not name the key: $msg"
printf 'workload:\n  chunks: many\n' > "$out/bad.yaml"
set +e
msg=$("$sim" -q -c "$out/bad.yaml" 2>&1); rc=$?
set -e
[[ $rc -eq 2 && $msg == *"bad.yaml:2"*"'workload.chunks'"* ]] || fail "bad value not reported with file:line and key: $msg"
# tools/sim/compare_arms.py on real rows: two seeds of two arms at one point, labelled as run_study.py
# labels them; the arm with window control is compared with merging alone. Bad input: a clear
# message and exit 1, no traceback.
cmp=/usr/bin/python3
cmp_py="$configs/../tools/sim/compare_arms.py"
for s in 1 2; do
    for arm in merge:--window=off merge+window:--window=on; do
        "$sim" -q -c "$configs/sim-tor.yaml" "${short[@]}" --set seed=$s "${arm#*:}" -o "$out/cmp" --append \
            -l "tor/16/${arm%%:*}/s$s" || fail "compare_arms input run failed"
    done
done
$cmp "$cmp_py" "$out/cmp/summary.csv" merge merge+window > "$out/cmp.txt" || fail "compare_arms exited $?"
grep -q '^| tor/16 | ' "$out/cmp.txt" || fail "compare_arms: no row for the point"
[[ $(grep -c 'beyond noise at [01] of 1 points' "$out/cmp.txt") -eq 3 ]] || { cat "$out/cmp.txt" >&2; fail "compare_arms: no verdict per metric"; }
printf 'label,aom_mean_us\nbogus,1\n' > "$out/bad.csv"
rc=0; $cmp "$cmp_py" "$out/bad.csv" merge > "$out/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q 'bad.csv:2: label .bogus. is not STUDY/X/ARM/sSEED' "$out/bad.txt" || { cat "$out/bad.txt" >&2; fail "compare_arms: bad label"; }
rc=0; $cmp "$cmp_py" "$out/missing.csv" merge > "$out/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q 'cannot read' "$out/bad.txt" && ! grep -q Traceback "$out/bad.txt" || fail "compare_arms: missing file"
# plot_sim.py compare: the same rows as before and after draw a PNG; a study with no rows, or a
# missing file, is a clear message and exit 1, no traceback.
"$cmp" "$configs/../tools/sim/plot_sim.py" compare "$out/cmp/summary.csv" "$out/cmp/summary.csv" tor merge,merge+window \
    "$out/cmp.png" || fail "plot_sim.py compare exited $?"
[[ -s "$out/cmp.png" ]] || fail "plot_sim.py compare wrote no PNG"
rc=0; "$cmp" "$configs/../tools/sim/plot_sim.py" compare "$out/cmp/summary.csv" "$out/cmp/summary.csv" leafspine merge \
    "$out/none.png" > "$out/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q 'has no rows labelled leafspine' "$out/bad.txt" && [[ ! -e "$out/none.png" ]] || { cat "$out/bad.txt" >&2; fail "plot_sim.py compare: no rows"; }
rc=0; "$cmp" "$configs/../tools/sim/plot_sim.py" compare "$out/missing.csv" "$out/cmp/summary.csv" tor merge \
    "$out/none.png" > "$out/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q 'cannot read' "$out/bad.txt" && ! grep -q Traceback "$out/bad.txt" || fail "plot_sim.py compare: missing file"
echo "sim CLI: ok"
