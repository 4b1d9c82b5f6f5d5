#!/usr/bin/env bash
# Faults on the lab's rack (issue 29), configs/lab-faults.yaml in --quick mode with the Shesha arm
# and its no-fault twin: Ctrl-C while faults are active leaves nothing behind (namespaces, veths,
# DPDK runtime dirs, shesha-impair or any other process of the run) and exits 130; then a whole
# run: every fault action ran (the switch, a worker and the Acrobot learner killed and started
# again, the learner from its checkpoint), the impairers dropped, copied and reordered packets and
# wrote final counters, the report has its Faults section, and again nothing is left behind.
# Needs root, namespaces, iptables-legacy and Debian's /usr/bin/python3 with python3-yaml and
# python3-matplotlib; exits 77 (skip) where they are unavailable. A few minutes.
#
# usage: test_lab_faults.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

SRC=$1 BUILD=$2
PY=/usr/bin/python3
LAB=$SRC/tools/lab/shesha-lab
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
ip netns add shesha-labprobe$$ 2>/dev/null || { echo "skip: cannot create network namespaces"; exit 77; }
ip netns del shesha-labprobe$$
command -v iptables-legacy >/dev/null || { echo "skip: iptables-legacy missing (tools/install-deps.sh)"; exit 77; }
$PY -c 'import yaml, matplotlib' 2>/dev/null || { echo "skip: $PY lacks python3-yaml or python3-matplotlib"; exit 77; }
for b in learner/shesha-learner worker/shesha-worker tools/impair/shesha-impair switch/dpdk/shesha-switch; do
    [ -x "$BUILD/$b" ] || { echo "skip: $BUILD/$b not built"; exit 77; }
done

WORK=$(mktemp -d /tmp/shesha-lab-faults-test.XXXXXX)
# shellcheck source=../lib/checks.sh
source "$SRC/tests/lib/checks.sh"
cleanup() { if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi; }
trap cleanup EXIT

leftovers() {  # namespaces, veths, DPDK runtime dirs or processes the run left behind
    { ip netns list | awk '{print $1}' | grep '^shesha-lab-'
      ip -o link show | awk -F': ' '{print $2}' | grep '^shl-'
      ls -d /var/run/dpdk/shesha-lab-* 2>/dev/null
      pgrep -f -- "$WORK" | grep -v "^$$\$" | sed 's/^/pid /'; } | tr '\n' ' '
}
# The faults scenario, quick, Shesha and its twin (started directly, not through a function, so
# that the signal reaches the lab and not a subshell). The worker and learner faults hit the
# Acrobot job, which stops at its target: on some runs its return jumps past -100 within the first
# seconds and every later fault is skipped. So the copy run here gives it a target no run reaches
# (-1: the swing-up takes far more than one step) and it runs through the faults; the cluster files
# are given by absolute path.
sed -e "s#config: configs/#config: $SRC/configs/#" \
    -e '/id: 2, env: Acrobot-v1/s/target_return: -100/target_return: -1/' \
    "$SRC/configs/lab-faults.yaml" > "$WORK/lab-faults.yaml"
grep -q "Acrobot-v1.*target_return: -1," "$WORK/lab-faults.yaml" || { echo "FAIL: could not rewrite the scenario"; exit 1; }
LAB_ARGS=(run "$WORK/lab-faults.yaml" --quick --arms shesha --build-dir "$BUILD")

echo "== 1. Ctrl-C after the switch was restarted, with link impairments running"
$PY "$LAB" "${LAB_ARGS[@]}" --out "$WORK/interrupted" > "$WORK/interrupted.log" 2>&1 &
lab_pid=$!
wait_for_line "$WORK/interrupted.log" "s |" "$lab_pid" 180 || fail "no progress line within 180 s: $(tail -5 "$WORK/interrupted.log")"
wait_for_line "$WORK/interrupted.log" "  1[0-9]s |" "$lab_pid" 60 || fail "no progress past 10 s"
ls "$WORK"/interrupted/raw/shesha/seed-1/impair-0-*.ready >/dev/null 2>&1 && pass "impairers were running" \
    || fail "no impairer was running"
kill -INT $lab_pid
wait $lab_pid; rc=$?
[ $rc -eq 130 ] && pass "interrupted run exits 130" || fail "interrupted run exit code $rc, expected 130"
left=$(leftovers)
[ -z "$left" ] && pass "nothing left after Ctrl-C" || fail "left after Ctrl-C: $left"

echo "== 2. A whole quick run with faults, right after"
$PY "$LAB" "${LAB_ARGS[@]}" --out "$WORK/report" > "$WORK/run.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "run exits 0" || { fail "run exit code $rc"; tail -30 "$WORK/run.log"; }
left=$(leftovers)
[ -z "$left" ] && pass "nothing left after the run" || fail "left after the run: $left"
out=$($PY - "$WORK/report" <<'PYEOF'
import glob, json, os, sys
R = sys.argv[1]
run = os.path.join(R, "raw", "shesha", "seed-1")
clean = os.path.join(R, "raw", "shesha-nofaults", "seed-1")
report = open(os.path.join(R, "report.md")).read()
log = json.load(open(os.path.join(run, "faults.json")))
actions = [(a["action"], a.get("skipped")) for a in log["actions"]]
def check(desc, ok):
    print(("ok:   " if ok else "FAIL: ") + desc)
for action in ("impair_start", "switch_kill", "switch_start", "worker_kill", "worker_start", "learner_kill",
               "learner_start", "impair_stop"):
    check(f"{action} ran", (action, None) in actions)
start = next(a for a in log["actions"] if a["action"] == "learner_start")
check("the learner resumed from its checkpoint", start.get("resumed_from_checkpoint") is True)
check("the resumed learner wrote its metrics", os.path.getsize(os.path.join(run, start["metrics_dir"], "learner.csv")) > 100)
check("the restarted worker wrote its metrics", os.path.exists(os.path.join(run, "worker-c2-w1.r1.json")))
check("the killed switch's log was kept", os.path.exists(os.path.join(run, "switch-tor.log.killed1")))
impairs = [json.load(open(p)) for p in glob.glob(os.path.join(run, "impair-0-*.json"))]
check("an impairer per worker link (quick: 2 per cluster)", len(impairs) == 4)
check("impairers wrote final counters", all(i["final"] for i in impairs))
check("links dropped, copied and reordered packets",
      all(i["dropped"] > 0 and i["duplicated"] > 0 and i["reordered"] > 0 for i in impairs))
check("no kernel queue overflow in the impairers", all(i["kernel_queue_dropped"] == 0 for i in impairs))
check("the no-fault twin ran without faults", not os.path.exists(os.path.join(clean, "faults.json"))
      and not glob.glob(os.path.join(clean, "impair-*")))
for section in ("## Faults", "### Time to target with and without faults", "### What each fault cost"):
    check(f"report has '{section}'", section in report)
check("the report names the switch restart", "switch tor restart (1 s down)" in report)
PYEOF
)
echo "$out"
n=$(echo "$out" | grep -c '^FAIL') ; failures=$((failures + n))
[ "$failures" -eq 0 ] && { echo "PASS"; exit 0; } || { echo "$failures failure(s)"; exit 1; }
