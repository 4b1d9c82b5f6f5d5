# shellcheck shell=bash
# Checks shared by every script test: pass/fail counting, values from JSON files, and waiting on
# readiness (a log line, a listening socket) instead of sleeping. Sourced by tests/drl/drl_lib.sh,
# tests/lib/rack_test.sh and the scripts themselves.
failures=${failures:-0}
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
# jv FILE PATH: one value from a JSON file ("chunks.applied", "workers.list.0.id")
jv() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]))
for p in sys.argv[2].split('.'): d=d[int(p)] if p.isdigit() else d[p]
print(str(d).lower() if isinstance(d,bool) else d)" "$1" "$2"; }
# check DESCRIPTION PYTHON_EXPR: j(file, path) reads JSON values; port(file, name) and
# queue(file, name) find a switch port in a stats JSON.
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
def port(path, name):
    return next(p for p in j(path, "ports") if p["name"] == name)
def queue(path, name):
    return port(path, name)["queue"]
try:
    print("true" if eval(sys.argv[1]) else "false")
except Exception as e:
    print(f"error evaluating: {e}")
PY
)
    if [ "$out" = "true" ]; then pass "$desc"; else fail "$desc ($expr -> $out)"; fi
}
# wait_for_line FILE PATTERN PID [SECONDS]: until FILE has a line matching PATTERN (true), PID
# exits or SECONDS (default 10) pass (false). Polls every 0.1 s.
wait_for_line() {
    local file=$1 pattern=$2 pid=$3 limit=$(( ${4:-10} * 10 )) i
    for ((i = 0; i < limit; i++)); do
        grep -q "$pattern" "$file" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || { grep -q "$pattern" "$file" 2>/dev/null; return; }
        sleep 0.1
    done
    return 1
}
