#!/bin/bash
# Damaged JSON input files: a clear error naming the file (and the key where one is missing or of
# the wrong type), the documented exit code (2), never an uncaught exception (abort: 134).
# Usage: test_damaged_json.sh SHESHA_SIM [SHESHA_VERIFY]
set -uo pipefail
sim=$1
verify=${2:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

good='{
  "property": "aom", "step": 1, "what": "test",
  "model": {"clusters": 2, "horizon": 2, "chunks": 2, "elems_per_chunk": 8, "service_rate": 1, "max_arrivals": 2,
            "credit_delay": 1, "feedback_delay": 1, "feedback": true, "queue_packets": 4, "mark_depth": 2,
            "aggregation": true, "w_init": 2, "w_min": 1, "w_max": 4, "additive_increase": 1, "gain": 0.0625,
            "alpha_init": 1, "congestion_threshold": 0},
  "properties": {"aom": {"bound": 1}},
  "steps": [{"t": 0, "send": [2, 2]}, {"t": 1, "send": [0, 0]}]
}'

printf '%s\n' "$good" > "$out/good.json"

# check NAME EXPECTED-MESSAGE-PART: runs every reader on $out/NAME.json.
check() {
    local name=$1 want=$2 file="$out/$1.json" rc prog
    local -a runs=("$sim --replay $file")
    [[ -n $verify ]] && runs+=("$verify replay $file")
    for run in "${runs[@]}"; do
        $run > "$out/run.log" 2>&1
        rc=$?
        prog=$(basename "${run%% *}")
        if [[ $rc -ne 2 ]]; then
            cat "$out/run.log" >&2
            fail "$prog on $name.json exited $rc, expected 2"
        elif ! grep -qF -- "$file: " "$out/run.log" || ! grep -qF -- "$want" "$out/run.log"; then
            cat "$out/run.log" >&2
            fail "$prog on $name.json: the message does not name the file and '$want'"
        else
            echo "ok: $prog $name.json: $(tail -1 "$out/run.log")"
        fi
    done
}
# edit NAME SED-SCRIPT: NAME.json is good.json edited by sed.
edit() { /usr/bin/sed "$2" "$out/good.json" > "$out/$1.json"; }

head -c 120 "$out/good.json" > "$out/truncated.json";       check truncated "not a counterexample file"
: > "$out/empty.json";                                       check empty "not valid JSON"
echo 'property: aom' > "$out/yaml.json";                     check yaml "not valid JSON"
printf '\xff\xfegarbage' > "$out/binary.json";               check binary "not valid JSON"
echo '[1, 2]' > "$out/array-top.json";                       check array-top "expected a JSON object at the top"
edit missing-key 's/"gain": 0.0625,//';                      check missing-key "missing key model.gain"
edit wrong-type 's/"horizon": 2/"horizon": "two"/';          check wrong-type "key model.horizon: wrong type"
edit fractional 's/"clusters": 2/"clusters": 2.5/';          check fractional "key model.clusters: wrong type"
edit bad-send 's/\[0, 0\]/[0, "x"]/';                        check bad-send "key steps[1].send: wrong type"
edit trailing '$s/$/ }/';                                    check trailing "not valid JSON"

# The verifier's own part (the model's trace): a damaged trace names the file and the key.
if [[ -n $verify ]]; then
    edit trace 's/{"t": 0, "send": \[2, 2\]}/{"t": 0, "send": [2, 2], "model_sent": [2, 2], "depth_after_arrivals": 4, "depth_end": 3, "drops": 0, "departures": "none", "marked_arrivals": [0, 0], "cut": [0, 0], "window": [2, 2], "in_flight": [2, 2]}/'
    grep -q '"departures": "none"' "$out/trace.json" || fail "test setup: trace.json not edited"
    "$verify" replay "$out/trace.json" > "$out/run.log" 2>&1
    rc=$?
    if [[ $rc -ne 2 ]] || ! grep -qF "$out/trace.json: not a shesha-verify counterexample: key steps[0].departures: wrong type" "$out/run.log"; then
        cat "$out/run.log" >&2
        fail "shesha-verify replay with a damaged model trace: exit $rc, unclear message"
    else
        echo "ok: shesha-verify trace.json: $(tail -1 "$out/run.log")"
    fi
fi
[[ $failures -eq 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "damaged JSON files: ok"
