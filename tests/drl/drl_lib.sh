# shellcheck shell=bash
# Helpers for the DRL script tests: checks on JSON metrics, a free-ish UDP port, process cleanup.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
# jv FILE PATH: one value from a JSON file ("chunks.applied", "workers.list.0.id")
jv() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]))
for p in sys.argv[2].split('.'): d=d[int(p)] if p.isdigit() else d[p]
print(str(d).lower() if isinstance(d,bool) else d)" "$1" "$2"; }
# check DESCRIPTION PYTHON_EXPR: j(file, path) reads JSON values
check() {
    local desc=$1 expr=$2 out
    out=$(python3 - "$expr" <<'PY'
import json, sys
cache = {}
def j(path, key):
    if path not in cache:
        cache[path] = json.load(open(path))
    node = cache[path]
    for part in key.split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return node
try:
    print("true" if eval(sys.argv[1]) else "false")
except Exception as e:
    print(f"error evaluating: {e}")
PY
)
    if [ "$out" = "true" ]; then pass "$desc"; else fail "$desc ($expr -> $out)"; fi
}
# A UDP port unlikely to collide with parallel tests: 20000 + (pid mod 20000).
drl_port() { echo $((20000 + $$ % 20000)); }
# checkpoint_version FILE: the model version stored in a checkpoint (learner/checkpoint.h layout).
checkpoint_version() { python3 -c "import struct,sys;d=open(sys.argv[1],'rb').read();print(struct.unpack_from('<I',d,16)[0])" "$1"; }
# drl_begin NAME: a work directory (kept on failure), a UDP port, and a cleanup on exit that
# kills the learner $LP (if set) and every pid in pids. Sets WORK, PORT, pids, LP.
drl_begin() {
    WORK=$(mktemp -d "/tmp/shesha-$1.XXXXXX")
    PORT=$(drl_port)
    pids=()
    LP=
    trap drl_cleanup EXIT
}
drl_cleanup() {
    [ -n "$LP" ] && kill -KILL "$LP" 2>/dev/null
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi
}
