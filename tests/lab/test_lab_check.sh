#!/bin/bash
# shesha-lab check (no root, nothing started): every shipped scenario in configs/lab-*.yaml is
# valid, and broken scenarios exit 2 with the key named. Skips (77) without Debian's python3-yaml.
# Usage: test_lab_check.sh SOURCE_ROOT
set -euo pipefail
src=$1
py=/usr/bin/python3
$py -c 'import yaml' 2>/dev/null || { echo "python3-yaml missing: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"

n=0
for f in configs/lab-*.yaml; do
    $py tools/lab/shesha-lab check "$f" > "$out/ok.log" 2>&1 || { cat "$out/ok.log" >&2; fail "$f does not check"; }
    grep -q '^# [0-9]* hosts: ' "$out/ok.log" || fail "$f: no host plan printed"
    n=$((n + 1))
done
[[ $n -ge 3 ]] || fail "expected at least 3 lab scenarios, found $n"

expect_error() {  # expect_error NAME SED_EXPRESSION MESSAGE_PART
    /usr/bin/sed "$2" configs/lab-staleness.yaml > "$out/$1.yaml"
    local rc=0
    $py tools/lab/shesha-lab check "$out/$1.yaml" > "$out/$1.log" 2>&1 || rc=$?
    [[ $rc -eq 2 ]] || { cat "$out/$1.log" >&2; fail "$1: exit $rc, expected 2"; }
    grep -qF -- "$3" "$out/$1.log" || { cat "$out/$1.log" >&2; fail "$1: message does not say '$3'"; }
}
expect_error merged_steps 's/merged_steps: per_contribution   # overrides/merged_steps: twice   # overrides/' \
    "clusters[1].merged_steps: '' (keep the config file's), one, per_contribution or sqrt, got 'twice'"
expect_error unknown_key 's/^seeds:/seedz:/' "seedz: unknown key"
expect_error chunk_elems 's/    chunk_elems: 256/    chunk_elems: 9000/' "clusters[0].chunk_elems: 0 (keep the config file's) or 1..2048 (above 356 the rack runs at MTU 9000), got 9000"
expect_error learners 's/^seeds:/learners: pooled\nseeds:/' "learners: per_cluster or shared, got 'pooled'"
expect_error weight 's/    chunk_elems: 256/    chunk_elems: 256\n    weight: 0/' "clusters[0].weight: an integer in 1..1000 (its share of a port under drr scheduling), got 0"
/usr/bin/sed 's/^seeds:/learners: shared\nseeds:/' configs/lab-staleness.yaml > "$out/shared.yaml"
$py tools/lab/shesha-lab check "$out/shared.yaml" > "$out/shared.log" 2>&1 || { cat "$out/shared.log" >&2; fail "learners: shared does not check"; }
grep -q '^# .* hosts: learners=' "$out/shared.log" || { cat "$out/shared.log" >&2; fail "learners: shared: no shared learner host in the plan"; }
expect_error scheduling 's/congestion_control: on, scheduling: fifo}/congestion_control: on, scheduling: wfq}/' \
    "arms[1].scheduling: auto (the switch's default: drr where two or more clusters aggregate), fifo or drr (per-cluster fair shares on the switch ports), got 'wfq'"
# Chunks larger than a 1500-byte frame put the rack at MTU 9000; the plan says so.
/usr/bin/sed 's/    chunk_elems: 256/    chunk_elems: 2048/' configs/lab-staleness.yaml > "$out/jumbo.yaml"
$py tools/lab/shesha-lab check "$out/jumbo.yaml" > "$out/jumbo.log" 2>&1 || { cat "$out/jumbo.log" >&2; fail "jumbo scenario does not check"; }
grep -q '^# rack MTU 9000 (largest chunk 2048 elements: a 8268-byte datagram)$' "$out/jumbo.log" || { cat "$out/jumbo.log" >&2; fail "jumbo: no MTU 9000 in the plan"; }
grep -q '^# rack MTU 1500 ' "$out/ok.log" || fail "standard scenario: no MTU 1500 in the plan"
# A file that is not UTF-8 (Latin-1 bytes in a comment on line 3): a clear error, exit 2.
{ /usr/bin/head -n 2 configs/lab-staleness.yaml; printf '# caf\xe9\n'; /usr/bin/tail -n +3 configs/lab-staleness.yaml; } > "$out/latin1.yaml"
rc=0
$py tools/lab/shesha-lab check "$out/latin1.yaml" > "$out/latin1.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || { cat "$out/latin1.log" >&2; fail "non-UTF-8 file: exit $rc, expected 2"; }
grep -qF "latin1.yaml:3: not UTF-8 text (byte 0xe9 at offset" "$out/latin1.log" || { cat "$out/latin1.log" >&2; fail "non-UTF-8 file: unclear message"; }
grep -q Traceback "$out/latin1.log" && fail "non-UTF-8 file: a traceback"
# --seeds: ranges and lists parse exactly; a bad list is refused at once (argparse, exit 2, no root needed).
for bad in 5-3 x 1-2000 ''; do
    rc=0
    $py tools/lab/shesha-lab run --seeds "$bad" > "$out/seeds.log" 2>&1 || rc=$?
    [[ $rc -eq 2 ]] || { cat "$out/seeds.log" >&2; fail "--seeds '$bad': exit $rc, expected 2"; }
    grep -qF -- "--seeds" "$out/seeds.log" || { cat "$out/seeds.log" >&2; fail "--seeds '$bad': the message does not name --seeds"; }
    grep -q Traceback "$out/seeds.log" && fail "--seeds '$bad': a traceback"
done
# The seed-by-seed verdicts (the robustness command's report section), on made-up results.
$py - <<'PY' || fail "seed-by-seed verdicts"
import importlib.machinery, importlib.util
loader = importlib.machinery.SourceFileLoader("shesha_lab", "tools/lab/shesha-lab")
spec = importlib.util.spec_from_loader("shesha_lab", loader)
lab = importlib.util.module_from_spec(spec)
loader.exec_module(lab)
assert lab.parse_seeds("4-13") == list(range(4, 14)), lab.parse_seeds("4-13")
assert lab.parse_seeds("1-3,7,2") == [1, 2, 3, 7]
import os, tempfile
cfg = os.path.join(tempfile.mkdtemp(), "cluster.yaml")
with open(cfg, "w") as f:
    f.write("env: CartPole-v1\nlearner:\n  eval_interval_ms: 1000\n")
sc = {"seeds": [1, 2, 3, 4], "clusters": [{"id": 1, "env": "A", "config": cfg}, {"id": 2, "env": "B", "config": cfg}]}
assert lab.eval_interval_s(sc["clusters"][0]) == 1.0
assert lab.eval_interval_s({"id": 3, "config": "/nonexistent.yaml"}) == 2.0  # the learner's default
one_s = {"1": 1.0, "2": 1.0}
def run(t1, a1, t2, a2):
    return {"clusters": {"1": {"time_to_target_s": t1, "aom_mean_ms": a1}, "2": {"time_to_target_s": t2, "aom_mean_ms": a2}}}
results = {
    "fifo":   {"1": run(10, 100, None, 50), "2": run(10, 100, 20, 50), "3": run(None, 100, None, 50), "4": run(5, 10, 5, 10)},
    "shesha": {"1": run(12, 20, 30, 60), "2": run(8, 200, None, 40), "3": run(None, 90, 9, 50)},  # seed 4 missing
    "tie":    {"1": run(11, 100, 20, 50)},  # 1 s later than FIFO: within the learner's evaluation interval
}
tie = lab.seed_verdicts(sc, results, "fifo", "tie", one_s)
assert [(r["slower"], r["aom_worse"]) for r in tie] == [(False, False), (False, False)], tie
rows = lab.seed_verdicts(sc, results, "fifo", "shesha", one_s)
got = [(r["seed"], r["cluster"], r["slower"], r["aom_worse"]) for r in rows]
want = [(1, "1", True, False), (1, "2", False, True),    # later; reached where FIFO never did, but AoM higher
        (2, "1", False, True), (2, "2", True, False),    # never where FIFO reached it: slower
        (3, "1", False, False), (3, "2", False, False)]  # both never: a tie; equal AoM is not worse
assert got == want, got
text = "\n".join(lab.robustness_section(sc, [{"name": "fifo"}, {"name": "shesha"}], results))
assert "every 1 s" in text, text
assert "Cluster 1 (A): `shesha` slower than `fifo` on **1 of 3** seeds, AoM higher on **1 of 3**" in text, text
assert "Cluster 2 (B): `shesha` slower than `fifo` on **1 of 3** seeds, AoM higher on **1 of 3**; reached the target on 2 of 3 (`fifo`: 1)" in text, text
PY
# tools/lab/plot_starvation.py: wrong arguments or a report without the run: a message and exit 1.
rc=0; $py tools/lab/plot_starvation.py > "$out/ps.log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q 'plot_starvation.py OUT.png SEED' "$out/ps.log" || { cat "$out/ps.log" >&2; fail "plot_starvation: no usage"; }
rc=0; $py tools/lab/plot_starvation.py "$out/x.png" 5 A "$out/none" B "$out/none" > "$out/ps.log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q 'no run directory' "$out/ps.log" && ! grep -q Traceback "$out/ps.log" || { cat "$out/ps.log" >&2; fail "plot_starvation: missing run"; }
echo "lab check: $n scenarios valid, bad ones rejected"
