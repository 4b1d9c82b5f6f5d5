#!/usr/bin/env bash
# End-to-end test of shesha-gen and shesha-sink on loopback.
# Usage: test_tools.sh <path to shesha-gen> <path to shesha-sink>
#
# 1. The sink starts on 127.0.0.1 and a free port, with --credit.
# 2. Malformed datagrams (garbage, truncated header, bad magic, bad version, length mismatch) and
#    one valid CREDIT are sent with bash's /dev/udp: each must be counted under its exact reason.
# 3. gen runs 2 s closed loop (--window, paced at a modest rate) over 2 clusters x 2 workers, then a
#    short paced run with --updates and skewed versions from other worker ids.
# 4. The same malformed set is sent again (the sink must still be counting), then SIGINT: the sink
#    must exit 0 and write its JSON.
# Asserts: every sum exact, sink contributions == gen contributions (loopback is lossless at this
# rate), credits returned == chunks sent, exact malformed counts; bad CLI flags exit 2 with a message.
set -u

GEN=${1:?usage: test_tools.sh SHESHA_GEN SHESHA_SINK}
SINK=${2:?usage: test_tools.sh SHESHA_GEN SHESHA_SINK}
WORK=$(mktemp -d /tmp/shesha-test-tools.XXXXXX)
SINK_PID=""
FAILURES=0

cleanup() {
    if [[ -n "$SINK_PID" ]] && kill -0 "$SINK_PID" 2>/dev/null; then kill "$SINK_PID" 2>/dev/null; wait "$SINK_PID" 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }
# expect_eq DESCRIPTION ACTUAL EXPECTED
expect_eq() {
    if [[ "$2" == "$3" ]]; then pass "$1 = $3"; else fail "$1: got '$2', expected '$3'"; fi
}
jqr() { jq -r "$1" "$2"; }

command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }

# A free UDP port: bind port 0 and read back what the kernel chose.
PORT=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) \
    || PORT=$((20000 + RANDOM % 20000))

# ---- bad CLI flags: exit 2 with a message ----------------------------------------------------
expect_usage_error() {
    local desc=$1; shift
    local err rc
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [[ $rc -eq 2 && -n "$err" ]]; then pass "usage error: $desc"; else fail "usage error: $desc (exit $rc, message '$err')"; fi
}
expect_usage_error "gen unknown flag" "$GEN" --dst 127.0.0.1 --rate 1 --updates 1 --bogus
expect_usage_error "gen without --dst" "$GEN" --rate 1 --updates 1
expect_usage_error "gen without --rate/--window" "$GEN" --dst 127.0.0.1 --updates 1
expect_usage_error "gen without --duration/--updates" "$GEN" --dst 127.0.0.1 --rate 1
expect_usage_error "gen bad version pattern" "$GEN" --dst 127.0.0.1 --rate 1 --updates 1 --version-pattern skew:x
expect_usage_error "gen bad dst" "$GEN" --dst 127.0.0.300 --rate 1 --updates 1
expect_usage_error "gen too few elems" "$GEN" --dst 127.0.0.1 --rate 1 --updates 1 --elems 1
expect_usage_error "gen too many elems" "$GEN" --dst 127.0.0.1 --rate 1 --updates 1 --elems 4096
expect_usage_error "gen non-numeric rate" "$GEN" --dst 127.0.0.1 --rate fast --updates 1
expect_usage_error "gen cluster id overflow" "$GEN" --dst 127.0.0.1 --rate 1 --updates 1 --cluster-base 65535 --clusters 2
expect_usage_error "sink unbounded" "$SINK" --port "$PORT"
expect_usage_error "sink bad bind" "$SINK" --bind nowhere --duration 1
expect_usage_error "sink port 0" "$SINK" --port 0 --duration 1
expect_usage_error "sink unknown flag" "$SINK" --duration 1 --bogus

# ---- malformed and foreign datagrams ---------------------------------------------------------
# hdr MAGIC VERSION TYPE FLAGS ELEMTYPE ELEMCOUNT CONTRIB: a 48-byte Shesha header as printf escapes
# (cluster 1, worker 7, chunk 0/1, zero timestamps).
hdr() {
    local magic=$1 version=$2 type=$3 flags=$4 elem_type=$5 elem_count=$6 contrib=$7
    printf '%s' "$magic\\x$version\\x$type\\x$flags\\x$elem_type\\x00\\x01\\x00\\x00\\x00\\x07"
    printf '%s' '\x00\x00\x00\x05\x00\x00\x00\x09\x00\x00\x00\x01'
    printf '%s' "$elem_count\\x00\\x$contrib"
    printf '%s' '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
}
send() { printf "$1" > "/dev/udp/127.0.0.1/$PORT"; }
send_malformed_set() {
    local valid_gradient_hdr truncated
    send 'this is not a shesha datagram'                                    # short_packet
    valid_gradient_hdr=$(hdr '\x53\x48' 02 01 00 01 '\x01\x00' 01)           # 256 elements, body missing
    truncated=${valid_gradient_hdr:0:120}                                   # 30 of the 48 bytes
    send "$truncated"                                                       # short_packet
    send "$(hdr '\x58\x58' 01 01 00 01 '\x00\x02' 01)"'\x00\x00\x80\x3f\x00\x00\x80\x3f'  # bad_magic
    send "$(hdr '\x53\x48' 09 01 00 01 '\x00\x02' 01)"'\x00\x00\x80\x3f\x00\x00\x80\x3f'  # bad_version
    send "$valid_gradient_hdr"                                              # length_mismatch
    send "$(hdr '\x53\x48' 02 03 00 00 '\x00\x00' 01)"'\x00\x00\x00\x01\x00\x00\x00\x09\x00\x00\x00\x05\x00\x00\x00\x00'  # valid CREDIT
}

"$SINK" --bind 127.0.0.1 --port "$PORT" --duration 60 --credit --expect-elems 256 \
    --json "$WORK/sink.json" >"$WORK/sink.out" 2>"$WORK/sink.err" &
SINK_PID=$!
for _ in $(seq 50); do
    ss -Huln "sport = :$PORT" 2>/dev/null | grep -q . && break
    sleep 0.1
done

send_malformed_set

# ---- traffic -------------------------------------------------------------------------------
# Closed loop, paced to 500 updates/s per worker: 2 clusters x 2 workers x 4 chunks = 8000 chunks/s.
"$GEN" --dst 127.0.0.1 --port "$PORT" --clusters 2 --workers 2 --chunks 4 --elems 256 \
    --rate 500 --window 8 --duration 2 --json "$WORK/gen_closed.json" 2>"$WORK/gen_closed.err"
expect_eq "closed-loop gen exit code" "$?" 0
# Paced only, exact update count, skewed versions, other worker ids and cluster 2 only.
"$GEN" --dst 127.0.0.1 --port "$PORT" --cluster-base 2 --clusters 1 --workers 3 --worker-base 10 \
    --chunks 2 --elems 256 --rate 200 --updates 25 --version-pattern skew:3 --drain-ms 100 \
    --json "$WORK/gen_paced.json" 2>"$WORK/gen_paced.err"
expect_eq "paced gen exit code" "$?" 0

sleep 0.3
send_malformed_set   # the sink is still counting after all that traffic
sleep 0.3
kill -INT "$SINK_PID"
wait "$SINK_PID"
expect_eq "sink exit code after SIGINT" "$?" 0
SINK_PID=""

if [[ ! -s "$WORK/sink.json" ]]; then
    fail "sink wrote no JSON"; cat "$WORK/sink.err" >&2
    exit 1
fi
S="$WORK/sink.json"; GC="$WORK/gen_closed.json"; GP="$WORK/gen_paced.json"

# ---- gen side ------------------------------------------------------------------------------
closed_sent=$(jqr .totals.contributions_sent "$GC")
paced_sent=$(jqr .totals.contributions_sent "$GP")
if (( closed_sent >= 4000 )); then pass "closed loop sent $closed_sent chunks"; else fail "closed loop sent only $closed_sent chunks"; fi
expect_eq "paced gen chunks (1 cluster x 3 workers x 25 updates x 2 chunks)" "$paced_sent" 150
expect_eq "paced gen updates" "$(jqr .totals.updates_sent "$GP")" 75
expect_eq "closed-loop credits returned == chunks sent" "$(jqr .totals.credits_received "$GC")" "$closed_sent"
expect_eq "closed-loop credit messages" "$(jqr .totals.credit_messages "$GC")" "$closed_sent"
expect_eq "closed-loop in flight at exit" "$(jqr .in_flight_at_exit "$GC")" 0
expect_eq "closed-loop window timeouts" "$(jqr .window_timeouts "$GC")" 0
expect_eq "closed-loop gen malformed rx" "$(jqr .rx.malformed "$GC")" 0
expect_eq "closed-loop gen send errors" "$(jqr .send_errors "$GC")" 0
expect_eq "closed-loop mode" "$(jqr .mode "$GC")" "rate+window"
expect_eq "closed-loop per-cluster chunks add up" "$(jq '[.clusters[].chunks_sent] | add' "$GC")" "$closed_sent"
expect_eq "paced gen credits (sink credits every chunk)" "$(jqr .totals.credits_received "$GP")" 150

# ---- sink side -----------------------------------------------------------------------------
total_sent=$((closed_sent + paced_sent))
expect_eq "sink contributions == gen contributions" "$(jqr .totals.contributions "$S")" "$total_sent"
expect_eq "sink chunks" "$(jqr .totals.chunks "$S")" "$total_sent"
expect_eq "sink exact sums" "$(jqr .totals.exact "$S")" "$total_sent"
expect_eq "sink bad sums" "$(jqr .totals.bad "$S")" 0
expect_eq "sink verify.bad" "$(jqr .verify.bad "$S")" 0
expect_eq "sink merged chunks (no switch)" "$(jqr .totals.merged_chunks "$S")" 0
expect_eq "sink elem count mismatches" "$(jqr .verify.elem_count_mismatch "$S")" 0
expect_eq "sink kernel drops" "$(jqr .kernel_drops "$S")" 0
expect_eq "sink credits sent" "$(jqr .credits_sent "$S")" "$total_sent"
expect_eq "sink clusters" "$(jq -c '[.clusters[].cluster_id]' "$S")" "[1,2]"
expect_eq "cluster 2 = closed-loop share + paced run" \
    "$(jq '.clusters[] | select(.cluster_id == 2) | .contributions' "$S")" \
    "$(( $(jq '.clusters[] | select(.cluster_id == 2) | .chunks_sent' "$GC") + paced_sent ))"
expect_eq "cluster 1 merge ratio" "$(jq '.clusters[] | select(.cluster_id == 1) | .merge_ratio' "$S")" 1
# Ages exist and are sane (loopback: well under a second), AoM was sampled.
age_ok=$(jq '[.clusters[] | .age_latest_ms.count > 0 and .age_latest_ms.p50 >= 0 and .age_latest_ms.max < 1000
              and .age_latest_ms.p50 <= .age_latest_ms.p99 and .age_latest_ms.p99 <= .age_latest_ms.max
              and .aom_ms.samples > 1000 and .aom_ms.peak >= .aom_ms.mean] | all' "$S")
expect_eq "ages and AoM sane" "$age_ok" true
# Each malformed set (sent twice): 2 short packets, 1 bad magic, 1 bad version, 1 length mismatch.
expect_eq "malformed short_packet" "$(jqr .malformed.short_packet "$S")" 4
expect_eq "malformed bad_magic" "$(jqr .malformed.bad_magic "$S")" 2
expect_eq "malformed bad_version" "$(jqr .malformed.bad_version "$S")" 2
expect_eq "malformed length_mismatch" "$(jqr .malformed.length_mismatch "$S")" 2
expect_eq "malformed total" "$(jqr .malformed.total "$S")" 10
expect_eq "non-gradient CREDIT counted" "$(jqr .by_type.credit "$S")" 2
expect_eq "sink datagrams" "$(jqr .datagrams "$S")" "$((total_sent + 12))"
grep -q "^  total" "$WORK/sink.out" && pass "sink printed its table" || fail "sink printed no table"

# ---- a wrong sum is detected, logged, and makes the sink exit 3 --------------------------------
"$SINK" --bind 127.0.0.1 --port "$PORT" --until-idle 1 --duration 20 --json "$WORK/bad.json" \
    >"$WORK/bad.out" 2>"$WORK/bad.err" &
SINK_PID=$!
for _ in $(seq 50); do
    ss -Huln "sport = :$PORT" 2>/dev/null | grep -q . && break
    sleep 0.1
done
two_elem_hdr=$(hdr '\x53\x48' 02 01 00 01 '\x00\x02' 01)  # cluster 1, worker 7, 2 elements, 1 contribution
send "$two_elem_hdr"'\x00\x00\x80\x3f\x00\x00\x80\x3f'   # [1.0, 1.0]: exact (worker weight 1)
send "$two_elem_hdr"'\x00\x00\x00\x40\x00\x00\x80\x3f'   # [2.0, 1.0]: count mismatch
send "$two_elem_hdr"'\x00\x00\x80\x3f\x00\x00\x00\x3f'   # [1.0, 0.5]: weight invalid
wait "$SINK_PID"
expect_eq "sink exit code with bad sums" "$?" 3
SINK_PID=""
expect_eq "bad-sum run: exact" "$(jqr .verify.exact "$WORK/bad.json")" 1
expect_eq "bad-sum run: bad" "$(jqr .verify.bad "$WORK/bad.json")" 2
expect_eq "bad-sum run: count_mismatch" "$(jqr .verify.count_mismatch "$WORK/bad.json")" 1
expect_eq "bad-sum run: weight_invalid" "$(jqr .verify.weight_invalid "$WORK/bad.json")" 1
expect_eq "bad-sum run: logged" "$(grep -c 'BAD SUM' "$WORK/bad.err")" 2

if (( FAILURES > 0 )); then
    echo "---- sink stderr" >&2; head -20 "$WORK/sink.err" >&2
    echo "---- gen stderr" >&2; cat "$WORK/gen_closed.err" "$WORK/gen_paced.err" >&2
    echo "$FAILURES check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
