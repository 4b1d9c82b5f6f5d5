#!/bin/bash
# The verifier's deep horizons: the proofs docs/verification.md reports, too slow for the test
# suite (which checks the same examples at horizons 5-6). Prints one row per check with its verdict
# and solve time; exits 1 if a verdict differs from the expected one. Takes about 1.5 minutes on
# the 2-core machine; a single row can be run by its name (the second column).
#
#   tools/verify/benchmark.sh [BUILD_DIR] [NAME...]        # default build dir: build
#   meson test -C build --benchmark verify_deep             # the same, through meson
set -uo pipefail
here=$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
build=${1:-build}
shift || true
verify=$build/tools/verify/shesha-verify
[[ -x $verify ]] || { echo "benchmark.sh: $verify is not built (ninja -C $build tools/verify/shesha-verify)" >&2; exit 2; }
examples=$here/examples
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# good.yaml's system with exact window arithmetic and epsilon 0 (DRR alternates packet by packet).
/usr/bin/sed -e 's/fairness: {window: 4, epsilon: 1}/fairness: {window: 4, epsilon: 0}/' \
    -e 's/^  feedback_delay: 1$/  feedback_delay: 1\n  exact_window: true/' \
    -e "s|switch-small.yaml|$examples/switch-small.yaml|; s|\[cluster-small.yaml\]|[$examples/cluster-small.yaml]|" \
    "$examples/good.yaml" > "$out/good-exact-eps0.yaml"

# name | example (@: generated above) | property | horizon | expected verdict (verified / counterexample)
checks=(
    "good-exact-eps0-t8|@good-exact-eps0.yaml|fairness|8|verified"
    "good-fairness-t8|good.yaml|fairness|8|verified"
    "good-aom-t8|good.yaml|aom|8|verified"
    "good-aom-t10|good.yaml|aom|10|verified"
    "good-responsiveness-t10|good.yaml|responsiveness|10|verified"
    "fair-t7|fair.yaml|fairness|7|verified"
    "fair-t8|fair.yaml|fairness|8|verified"
    "three-aom-t8|three-clusters.yaml|aom|8|verified"
    "versions-t7|versions.yaml|version_spread|7|verified"
    "weighted-2-1-t8|weighted-2-1.yaml|fairness|8|verified"
    "weighted-2-1-aom-t8|weighted-2-1.yaml|aom|8|verified"
    "weights-removed-t8|weights-removed.yaml|fairness|8|counterexample"
    "weighted-3-2-1-t7|weighted-3-2-1.yaml|fairness|7|verified"
    "weighted-3-2-1-t8|weighted-3-2-1.yaml|fairness|8|verified"
    "weighted-3-2-1-aom-t7|weighted-3-2-1.yaml|aom|7|verified"
    "fair-lag-fairness-t8|fair-lag.yaml|fairness|8|verified"
    "fair-lag-aom-t8|fair-lag.yaml|aom|8|verified"
    "fair-lag-responsiveness-t8|fair-lag.yaml|responsiveness|8|verified"
    "chunk-follow-fairness-t6|chunk-follow.yaml|fairness|6|verified"
    "chunk-follow-fairness-t7|chunk-follow.yaml|fairness|7|verified"
    "chunk-follow-aom-t7|chunk-follow.yaml|aom|7|verified"
    "lab-fairness-t8|../../../configs/lab-fairness.yaml|all|8|verified"
)
status=0
printf '%-28s %-16s %-8s %-15s %10s\n' check property horizon verdict seconds
for row in "${checks[@]}"; do
    IFS='|' read -r name file property horizon expected <<< "$row"
    if [[ $# -gt 0 ]] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
    path=$examples/$file
    [[ $file == @* ]] && path=$out/${file#@}
    args=(check "$path" --horizon "$horizon" --out-dir "$out" --log-level warn)
    [[ $property == all ]] || args+=(--property "$property")
    start=$(date +%s.%N)
    "$verify" "${args[@]}" > "$out/$name.log" 2>&1
    rc=$?
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    verdict=$([[ $rc -eq 0 ]] && echo verified || ([[ $rc -eq 1 ]] && echo counterexample || echo "error($rc)"))
    printf '%-28s %-16s %-8s %-15s %10.1f\n' "$name" "$property" "$horizon" "$verdict" "$seconds"
    if [[ $verdict != "$expected" ]]; then
        echo "  expected $expected:" >&2
        sed 's/^/    /' "$out/$name.log" >&2
        status=1
    fi
done
exit $status
