#!/bin/bash
# Tests tools/wireshark/shesha.lua: writes the sample capture with shesha-pcap-example, decodes it
# with tshark and the dissector, and compares the decoded fields with the values the example
# encoded. Exit 77 (skipped) if tshark is missing.
#
# Usage: test_dissector.sh PATH/TO/shesha-pcap-example PATH/TO/shesha.lua
set -u
example=${1:?usage: $0 shesha-pcap-example shesha.lua}
lua=$(realpath "${2:?usage: $0 shesha-pcap-example shesha.lua}")

if ! command -v tshark >/dev/null 2>&1; then
    echo "tshark not installed: skipping"
    exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
# An empty personal configuration: saved preferences of whoever runs the test cannot interfere.
export WIRESHARK_CONFIG_DIR="$work/config"
mkdir -p "$WIRESHARK_CONFIG_DIR"

"$example" "$work/sample.pcap" || { echo "FAIL: $example did not write the capture"; exit 1; }
chmod 644 "$work/sample.pcap"

runner=()
run_tshark() {
    "${runner[@]}" tshark -X "lua_script:$lua" -r "$work/sample.pcap" "$@" 2>"$work/stderr"
}

# Lua must be enabled and, as root, user scripts allowed (Debian's init.lua sets
# run_user_scripts_when_superuser = true). If root may not run them, retry as 'nobody' instead of
# editing system files.
if [ "$(run_tshark -c 1 -T fields -e shesha.magic)" != "0x5348" ]; then
    if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null 2>&1; then
        cp "$lua" "$work/shesha.lua" && chmod 644 "$work/shesha.lua" && lua="$work/shesha.lua"
        runner=(runuser -u nobody --preserve-environment --)
    fi
    if [ "$(run_tshark -c 1 -T fields -e shesha.magic)" != "0x5348" ]; then
        echo "FAIL: tshark did not load the Lua dissector (Lua disabled, or user scripts refused as root?)"
        cat "$work/stderr"
        exit 1
    fi
    echo "note: running tshark as 'nobody': root may not run user Lua scripts here"
fi

failures=0
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" == "$3" ]; then
        echo "ok - $1"
    else
        echo "not ok - $1"
        diff <(echo "$2") <(echo "$3") | sed 's/^/    /'
        failures=$((failures + 1))
    fi
}

fields() {
    local args=()
    for f in "$@"; do args+=(-e "$f"); done
    run_tshark -T fields -E separator='|' -E aggregator=',' "${args[@]}"
}

# Header fields of every frame. Frame 8 goes to UDP port 9999: not Shesha by default.
check "header fields" "$(cat <<'X'
1|1|0x00|1|7|3|41|100|2|4|8|1|1700000000123456789|1700000000123456789|1|
2|1|0x03|1|7|3|40|100|2|4|8|3|1700000000123456789|1700000000123459289|3|
3|2|0x00|2|7|0|41|100|0|1|4|1|1700000000123456789|1700000000123456789|0|
4|3|0x04|0|7|3|42|0|0|1|0|1|1700000000200000000|1700000000200000000|0|
5|4|0x00|0|7|3|0|0|0|1|0|1|1700000000300000000|1700000000300000000|0|
6|1|0x00|1|7|3|41|100|2|4|8|1|1700000000123456789|1700000000123456789|0|LengthMismatch
7|1|0x40|1|7|3|41|100|2|4|8|1|1700000000123456790|1700000000123456789|0|UnknownFlags
8|||||||||||||||
9|2|0x00|1|7|4294967295|41|100|0|1|2|1|1700000000123456789|1700000000123456789|0|
10|5|0x00|0|7|0|43|100|0|1|2|1|1700000000400000000|1700000000400000000|0|
X
)" "$(fields frame.number shesha.type shesha.flags shesha.elem_type shesha.cluster shesha.worker \
      shesha.model_version shesha.seq shesha.chunk_index shesha.chunk_count shesha.elem_count \
      shesha.contrib_count shesha.ts_earliest shesha.ts_latest shesha.packet_count shesha.error)"

check "magic and version" "$(printf '0x5348|2\n%.0s' 1 2 3 4 5 6 7)" \
    "$(fields shesha.magic shesha.version | head -7)"

# Flag bits one by one.
check "flag bits" "$(cat <<'X'
1|0|0|0|0|0x00
2|1|1|0|0|0x00
3|0|0|0|0|0x00
4|0|0|1|0|0x00
5|0|0|0|0|0x00
6|0|0|0|0|0x00
7|0|0|0|0|0x04
X
)" "$(fields frame.number shesha.flags.merged shesha.flags.ce shesha.flags.echo shesha.flags.sender_merged \
      shesha.flags.unknown | head -7)"

# Elements: worker 3 has weight 4, so frame 1 is 4*g(7,2,i); frame 2 is workers 3+4+5 (weights
# 4+1+2 = 7): e[0] = 3 contributions, e[1] = 7, e[i] = 7*g(7,2,i). Frame 3 is BF16.
check "payload elements" "$(cat <<'X'
1|1,4,16,-24,0,13,20,-32
2|3,7,28,-42,0,22.75,35,-56
3|1,-2.5,0.15625,1.70141e+38
4|
5|
6|1,4,16,-24,0,13,20
7|1,4,16,-24,0,13,20,-32
X
)" "$(fields frame.number shesha.elem | head -7)"

check "CREDIT body" "16|99|42|5" \
    "$(fields shesha.credit.credits shesha.credit.acked_seq shesha.credit.learner_version shesha.credit.ce_count | sed -n 4p)"

check "FEEDBACK body" "2|1024|300|125|325800|870|640|0x0000|12" \
    "$(fields shesha.feedback.port_id shesha.feedback.queue_capacity shesha.feedback.queue_depth \
       shesha.feedback.mark_permille shesha.feedback.queue_bytes shesha.feedback.sojourn_us \
       shesha.feedback.merge_permille shesha.feedback.reserved shesha.feedback.drops | sed -n 5p)"

check "expert info" "$(cat <<'X'
1|
2|3 contributions merged in network
3|
4|
5|
6|30 body bytes, 8 elements need 32
7|unknown flag bits 0x40,earliest timestamp after latest
X
)" "$(fields frame.number _ws.expert.message | head -7)"

check "malformed filter" "6,7" "$(run_tshark -Y '_ws.expert.group == "Malformed" && shesha' -T fields -e frame.number | paste -sd,)"

# Wireshark's own checksum code agrees with frame::build_udp_frame (1 = good, 3 = not present:
# frame 2 had its UDP checksum cleared as the switch does after a merge).
check "IP/UDP checksums" "$(printf '1|1\n1|3\n1|1\n1|1\n1|1\n1|1\n1|1\n1|1\n1|1\n1|1')" \
    "$(run_tshark -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE -T fields -E separator='|' \
       -e ip.checksum.status -e udp.checksum.status)"

# The port preference moves the dissector: frame 8 (port 9999, seq 777) decodes, frame 1 does not.
check "port preference" "$(printf '1|\n8|777')" \
    "$(run_tshark -o shesha.port:9999 -T fields -E separator='|' -e frame.number -e shesha.seq | sed -n '1p;8p')"

# A MODEL to a cluster's group (replicated delivery): worker 0xFFFFFFFF is shown as every member.
check "group MODEL" "MODEL cluster=7 worker=every v=41 seq=100 chunk=0/1 elems=2 contrib=1" \
    "$(run_tshark -T fields -e _ws.col.Info | sed -n 9p)"

# A CREDIT_BATCH to the group: its entries, each with the CREDIT body fields.
check "CREDIT_BATCH" "CREDIT_BATCH cluster=7 worker=0 v=43 seq=100 entries=2" "$(run_tshark -T fields -e _ws.col.Info | sed -n 10p)"
check "CREDIT_BATCH entries" "2,1|501,777|43,43|1,0" \
    "$(fields shesha.credit.credits shesha.credit.acked_seq shesha.credit.learner_version shesha.credit.ce_count | sed -n 10p)"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all dissector checks passed"
