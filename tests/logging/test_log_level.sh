#!/bin/bash
# --log-level on every program: each accepts --log-level warn (with --help: exit 0) and refuses
# --log-level bogus with a non-zero exit and a message naming the option. Where shesha-sim is
# among them, the level takes effect: a damaged replay file is reported at the default level and
# silenced by --log-level off (the exit code stays 2).
# Usage: test_log_level.sh BINARY...
set -uo pipefail
[[ $# -gt 0 ]] || { echo "usage: test_log_level.sh BINARY..." >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

for bin in "$@"; do
    name=$(basename "$bin")
    for level in trace debug info warn error off; do
        "$bin" --log-level "$level" --help > "$out/ok.log" 2>&1
        rc=$?
        [[ $rc -eq 0 ]] || { cat "$out/ok.log" >&2; fail "$name --log-level $level --help exited $rc"; }
    done
    "$bin" --log-level bogus > "$out/bad.log" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]]; then
        fail "$name accepted --log-level bogus"
    elif ! grep -q -- '--log-level' "$out/bad.log"; then
        cat "$out/bad.log" >&2
        fail "$name --log-level bogus: the message does not name --log-level"
    else
        echo "ok: $name: --log-level warn accepted, bogus refused (exit $rc): $(grep -m1 -- '--log-level' "$out/bad.log")"
    fi
    grep -q -- '--log-level' < <("$bin" --help 2>&1) || fail "$name --help does not list --log-level"

    if [[ $name == shesha-sim ]]; then
        echo '{"property": "aom", "step": 0' > "$out/damaged.json"
        "$bin" --replay "$out/damaged.json" > "$out/sim.out" 2> "$out/sim.err"
        rc=$?
        [[ $rc -eq 2 ]] || fail "shesha-sim --replay damaged.json exited $rc, expected 2"
        grep -q "damaged.json: not a counterexample file" "$out/sim.err" || fail "shesha-sim: no error at the default level"
        "$bin" --log-level off --replay "$out/damaged.json" > "$out/sim.out" 2> "$out/sim.err"
        rc=$?
        [[ $rc -eq 2 ]] || fail "shesha-sim --log-level off --replay damaged.json exited $rc, expected 2"
        [[ ! -s $out/sim.err ]] || { cat "$out/sim.err" >&2; fail "shesha-sim --log-level off still logged"; }
        echo "ok: shesha-sim: --log-level off silences the error log, exit code unchanged"
    fi
done
[[ $failures -eq 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "log levels: ok ($# programs)"
