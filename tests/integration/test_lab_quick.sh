#!/usr/bin/env bash
# The lab end to end in --quick mode: every arm of configs/lab-default.yaml on the namespace rack,
# then checks on the report (files, every arm present, sane numbers), replot, Ctrl-C teardown and a
# second run right after it. Needs root, network namespaces and Debian's /usr/bin/python3 with
# python3-yaml and python3-matplotlib; exits 77 (skip) where they are unavailable.
#
# usage: test_lab_quick.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

SRC=$1 BUILD=$2
PY=/usr/bin/python3
LAB=$SRC/tools/lab/shesha-lab
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
ip netns add shesha-labprobe$$ 2>/dev/null || { echo "skip: cannot create network namespaces"; exit 77; }
ip netns del shesha-labprobe$$
$PY -c 'import yaml, matplotlib' 2>/dev/null || { echo "skip: $PY lacks python3-yaml or python3-matplotlib"; exit 77; }

WORK=$(mktemp -d /tmp/shesha-lab-test.XXXXXX)
# shellcheck source=../lib/checks.sh
source "$SRC/tests/lib/checks.sh"
cleanup() { if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi; }
trap cleanup EXIT

leftovers() {  # namespaces, veths or DPDK runtime dirs the lab left behind
    { ip netns list | awk '{print $1}' | grep '^shesha-lab-'
      ip -o link show | awk -F': ' '{print $2}' | grep '^shl-'
      ls -d /var/run/dpdk/shesha-lab-* 2>/dev/null; } | tr '\n' ' '
}

echo "== 1. Ctrl-C in the middle of an arm tears everything down"
$PY "$LAB" --quick --build-dir "$BUILD" --out "$WORK/interrupted" > "$WORK/interrupted.log" 2>&1 &
lab_pid=$!
wait_for_line "$WORK/interrupted.log" "s |" "$lab_pid" 180 || fail "no progress line within 180 s: $(tail -5 "$WORK/interrupted.log")"
kill -INT $lab_pid
wait $lab_pid; rc=$?
[ $rc -eq 130 ] && pass "interrupted run exits 130" || fail "interrupted run exit code $rc, expected 130"
left=$(leftovers)
[ -z "$left" ] && pass "nothing left after Ctrl-C" || fail "left after Ctrl-C: $left"

echo "== 2. --quick, all arms (right after the interrupted run)"
start=$(date +%s)
$PY "$LAB" --quick --build-dir "$BUILD" --out "$WORK/report" > "$WORK/run.log" 2>&1; rc=$?
took=$(($(date +%s) - start))
[ $rc -eq 0 ] && pass "quick run exits 0 in ${took}s" || { fail "quick run exit code $rc"; tail -30 "$WORK/run.log"; }
[ $took -le 300 ] && pass "quick run within 5 minutes" || fail "quick run took ${took}s"
left=$(leftovers)
[ -z "$left" ] && pass "nothing left after the run" || fail "left after the run: $left"

R=$WORK/report
for f in report.md summary.json results.json configs/scenario.effective.json queue_vs_time.png share.png; do
    [ -s "$R/$f" ] && pass "report has $f" || fail "report lacks $f"
done

# Numbers: every arm present in the report and sane.
out=$($PY - "$R" <<'EOF'
import json, math, os, sys
R = sys.argv[1]
sc = json.load(open(os.path.join(R, "configs", "scenario.effective.json")))
res = json.load(open(os.path.join(R, "results.json")))
summary = json.load(open(os.path.join(R, "summary.json")))
report = open(os.path.join(R, "report.md")).read()
kind = sc["_processes"]
checks = []
def check(desc, ok):
    checks.append((desc, bool(ok)))
def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)
arms = [a["name"] for a in sc["arms"]]
check("scenario has the FIFO and full Shesha arms", arms == ["fifo", "shesha"])
check("full Shesha runs the switch's default scheduling (auto), FIFO fifo",
      [a["scheduling"] for a in sc["arms"]] == ["fifo", "auto"])
def switch_log(arm):
    with open(os.path.join(R, "raw", arm, f"seed-{sc['seeds'][0]}", "switch-tor.log")) as f:
        return f.read()
check("with two clusters, auto made the Shesha arm's switch schedule per cluster (drr); the FIFO arm's is fifo",
      "scheduling drr (auto)" in switch_log("shesha") and "scheduling fifo" in switch_log("fifo"))
check("the learners share one host and port", sc["learners"] == "shared")
for section in ("## Goals: full Shesha against FIFO", "## Seed by seed", "## Time to target over seeds", "## At scale: training in shesha-sim"):
    check(f"report has '{section}'", section in report)
# at_scale.quick: 64 workers, seed 1, FIFO and full Shesha, training in shesha-sim (one row per cluster each).
for label in ("fifo-64-s1", "shesha-64-s1"):
    training = os.path.join(R, "at-scale", "runs", label, "training.csv")
    rows = open(training).read().splitlines()[1:] if os.path.exists(training) else []
    check(f"at scale {label}: a training row per cluster", len(rows) == len(sc["clusters"]))
check("at scale: the return plot", os.path.getsize(os.path.join(R, "at_scale_return.png")) > 0 if os.path.exists(os.path.join(R, "at_scale_return.png")) else False)
for a in sc["arms"]:
    name = a["name"]
    check(f"{name}: in the headline table", f"| {name} |" in report)
    check(f"{name}: summarised", name in summary["arms"])
    runs = res.get(name, {})
    check(f"{name}: one run per seed", sorted(runs) == sorted(str(s) for s in sc["seeds"]))
    for seed, r in runs.items():
        tag = f"{name} seed {seed}"
        check(f"{tag}: the switch forwarded packets", r["forwarded_packets"] > 0)
        check(f"{tag}: Jain's index in (0, 1]", finite(r["jain"]) and 0 < r["jain"] <= 1 + 1e-9)
        if not a["aggregation"]:
            check(f"{tag}: aggregation off merged nothing", r["merges"] == 0 and r["bytes_saved"] == 0)
        if not a["feedback"]:
            check(f"{tag}: feedback off sent no FEEDBACK", r["feedback_sent"] == 0)
        for cid, c in r["clusters"].items():
            check(f"{tag} c{cid}: AoM mean and peak finite, 0 < mean <= peak",
                  finite(c["aom_mean_ms"]) and finite(c["aom_peak_ms"]) and 0 < c["aom_mean_ms"] <= c["aom_peak_ms"])
            check(f"{tag} c{cid}: share in [0, 1]", finite(c["share"]) and 0 <= c["share"] <= 1)
            if kind == "drl":
                check(f"{tag} c{cid}: env steps > 0", (c["env_steps"] or 0) > 0)
                rets = [x["return"] for x in c["series"] if x.get("return") is not None]
                check(f"{tag} c{cid}: returns recorded and finite", rets and all(finite(x) for x in rets))
            else:
                check(f"{tag} c{cid}: the learner stand-in received gradients", c["contributions"] > 0)
                check(f"{tag} c{cid}: no more delivered than sent", c["contributions"] <= c["sent"])
                check(f"{tag} c{cid}: every sum exact", c["bad_sums"] == 0)
        for sw, s in r["switches"].items():
            for port, p in s["ports"].items():
                check(f"{tag} {sw}/{port}: queue numbers finite",
                      all(finite(p[k]) for k in ("mean_depth", "mean_sojourn_ms", "dropped", "merged")))
                cl = p.get("clusters", [])
                check(f"{tag} {sw}/{port}: a share per scenario cluster",
                      sorted(c["cluster"] for c in cl) == sorted(c["id"] for c in sc["clusters"]))
                check(f"{tag} {sw}/{port}: 0 <= contended <= served per cluster",
                      all(0 <= c["contended_contributions"] <= c["served_contributions"] for c in cl))
                check(f"{tag} {sw}/{port}: 0 <= contended <= served packets, packets <= contributions",
                      all(0 <= c["contended_packets"] <= c["served_packets"] <= c["served_contributions"] for c in cl))
        if r.get("jain_contended") is not None:
            check(f"{tag}: contended Jain in (0, 1]", 0 < r["jain_contended"] <= 1 + 1e-9)
            check(f"{tag}: contended shares sum to 1",
                  abs(sum(c["contended_share"] or 0 for c in r["clusters"].values()) - 1) < 1e-9)
            check(f"{tag} {sw}: live queue telemetry sampled", any(len(v) > 5 for v in s["queue_series"].values()))
if kind == "drl":
    for f in ("return_vs_time.png", "return_vs_steps.png", "aom_vs_time.png"):
        check(f"figure {f}", os.path.getsize(os.path.join(R, f)) > 0 if os.path.exists(os.path.join(R, f)) else False)
else:
    check("figure delivered_vs_time.png", os.path.exists(os.path.join(R, "delivered_vs_time.png")))
for desc, ok in checks:
    print(("ok:   " if ok else "FAIL: ") + desc)
EOF
)
echo "$out" | grep -v '^ok:' | head -40
echo "$out" | grep -c '^ok:' | xargs -I{} echo "ok:   {} number checks passed"
n_fail=$(echo "$out" | grep -c '^FAIL:')
[ -n "$out" ] || fail "the number checker printed nothing"
failures=$((failures + n_fail))

echo "== 3. replot regenerates the figures and report.md from the raw data"
rm -f "$R"/*.png "$R/report.md"
$PY "$LAB" replot "$R" > "$WORK/replot.log" 2>&1 && pass "replot exits 0" || fail "replot failed: $(tail -5 "$WORK/replot.log")"
[ -s "$R/report.md" ] && [ -s "$R/queue_vs_time.png" ] && [ -s "$R/share.png" ] && pass "replot wrote report.md and figures" \
    || fail "replot did not write report.md and figures"

echo "== 4. bad scenarios are refused naming the key"
printf 'arms: [{name: x, aggregation: on, feedback: off, congestion_control: off, colour: red}]\n' > "$WORK/bad.yaml"
msg=$($PY "$LAB" check "$WORK/bad.yaml" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q "arms\[0\].colour: unknown key" && pass "unknown key named" || fail "bad key: rc $rc, '$msg'"

echo
if [ "$failures" -eq 0 ]; then echo "lab quick test: all checks passed"; exit 0; fi
echo "lab quick test: $failures check(s) failed"; exit 1
