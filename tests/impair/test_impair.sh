#!/usr/bin/env bash
# shesha-impair on a veth pair between two namespaces: counters against what a UDP receiver saw
# (exact), decisions repeated for a seed, duplicates on ingress, rules removed on SIGTERM, SIGINT,
# --seconds and by --cleanup after a SIGKILL, bad options refused by name. No timing assertions.
# Usage: test_impair.sh SHESHA_IMPAIR. Needs root and iptables-legacy (exit 77 otherwise).
set -uo pipefail

IMPAIR=${1:?usage: test_impair.sh SHESHA_IMPAIR}
HERE=$(cd "$(dirname "$0")" && pwd)
UDP_SEQ="$HERE/udp_seq.py"
PY=/usr/bin/python3

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root"; exit 77; fi
if ! command -v iptables-legacy >/dev/null; then echo "SKIP: iptables-legacy missing (tools/install-deps.sh)"; exit 77; fi
if ! ip netns add shesha-imp-probe 2>/dev/null; then echo "SKIP: no network namespaces"; exit 77; fi
ip netns del shesha-imp-probe

NS_A=shesha-imp-a NS_B=shesha-imp-b DEV_A=shimp-a DEV_B=shimp-b IP_A=10.250.7.1 IP_B=10.250.7.2
WORK=$(mktemp -d /tmp/shesha-impair-test.XXXXXX)
IMPAIR_PID=
cleanup() {
  [ -n "$IMPAIR_PID" ] && kill -KILL "$IMPAIR_PID" 2>/dev/null
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
# field FILE KEY: a number from a JSON file (KEY may be a dotted path).
field() { "$PY" -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"; }

ip netns add "$NS_A" && ip netns add "$NS_B" || fail "namespaces"
ip link add "$DEV_A" type veth peer name "$DEV_B" || fail "veth"
ip link set "$DEV_A" netns "$NS_A"; ip link set "$DEV_B" netns "$NS_B"
ip -n "$NS_A" addr add "$IP_A/24" dev "$DEV_A"; ip -n "$NS_B" addr add "$IP_B/24" dev "$DEV_B"
ip -n "$NS_A" link set "$DEV_A" up; ip -n "$NS_B" link set "$DEV_B" up
ip -n "$NS_A" link set lo up; ip -n "$NS_B" link set lo up
ip netns exec "$NS_A" ethtool -K "$DEV_A" tx off >/dev/null 2>&1
ip netns exec "$NS_B" ethtool -K "$DEV_B" tx off >/dev/null 2>&1
# Static neighbours: ARP is not IPv4 and passes unimpaired anyway, but this keeps it out of the way.
ip -n "$NS_A" neigh replace "$IP_B" lladdr "$(ip -n "$NS_B" -br link show "$DEV_B" | awk '{print $3}')" dev "$DEV_A"
ip -n "$NS_B" neigh replace "$IP_A" lladdr "$(ip -n "$NS_A" -br link show "$DEV_A" | awk '{print $3}')" dev "$DEV_B"

wait_for_file() {  # wait_for_file PATH PID: until PATH exists, or fail if PID died
  local i
  for i in $(seq 200); do
    [ -s "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
rules_in() { ip netns exec "$1" iptables-legacy -w -t mangle -S | grep -c 'shesha-imp' ; }

# start_impair NS NAME ARGS...: starts shesha-impair pinned to one core (so the packets it releases
# keep their order through the veth) and waits until its rules are in place.
start_impair() {
  local ns=$1 name=$2; shift 2
  rm -f "$WORK/$name.ready"
  taskset -c 0 "$IMPAIR" --netns "$ns" --ready-file "$WORK/$name.ready" --json "$WORK/$name.json" "$@" \
    2>"$WORK/$name.log" &
  IMPAIR_PID=$!
  wait_for_file "$WORK/$name.ready" "$IMPAIR_PID" || { cat "$WORK/$name.log"; fail "$name: not ready"; }
}
stop_impair() {  # stop_impair SIGNAL: the exit status must be 0
  kill -"$1" "$IMPAIR_PID"; wait "$IMPAIR_PID"; local rc=$?; IMPAIR_PID=
  [ "$rc" -eq 0 ] || fail "shesha-impair exited $rc after SIG$1"
}

# udp_run NAME COUNT: COUNT numbered datagrams from A to B; the receiver's JSON in NAME.rx.json.
udp_run() {
  rm -f "$WORK/$1.rx.ready"
  ip netns exec "$NS_B" "$PY" "$UDP_SEQ" receive "$IP_B" 9999 "$WORK/$1.rx.ready" >"$WORK/$1.rx.json" &
  local rx=$!
  wait_for_file "$WORK/$1.rx.ready" "$rx" || fail "$1: receiver not ready"
  ip netns exec "$NS_A" taskset -c 0 "$PY" "$UDP_SEQ" send "$IP_B" 9999 "$2" || fail "$1: sender"
  wait "$rx" || fail "$1: receiver"
}

N=2000
# 1. Egress on A with every impairment: the receiver's counts equal the tool's, exactly.
for run in first second; do
  start_impair "$NS_A" "egress-$run" --dev "$DEV_A" --direction egress --loss 10% --duplicate 5% \
    --reorder 5% --delay 2ms --jitter 1ms --seed 7
  udp_run "egress-$run" "$N"
  stop_impair TERM
  j="$WORK/egress-$run.json" rx="$WORK/egress-$run.rx.json"
  received=$(field "$j" received) passed=$(field "$j" passed) dropped=$(field "$j" dropped)
  duplicated=$(field "$j" duplicated) reordered=$(field "$j" reordered) delayed=$(field "$j" delayed)
  [ "$received" -eq "$N" ] || fail "$run: tool received $received of $N"
  [ $((passed + dropped)) -eq "$N" ] || fail "$run: passed $passed + dropped $dropped != $N"
  [ "$(field "$rx" unique)" -eq "$passed" ] || fail "$run: receiver got $(field "$rx" unique) distinct, tool passed $passed"
  [ "$(field "$rx" copies)" -eq "$duplicated" ] || fail "$run: receiver saw $(field "$rx" copies) copies, tool duplicated $duplicated"
  [ "$(field "$rx" late)" -eq "$reordered" ] || fail "$run: receiver saw $(field "$rx" late) late, tool reordered $reordered"
  [ "$delayed" -eq "$passed" ] || fail "$run: delayed $delayed != passed $passed (every packet has a delay)"
  # Binomial bounds (more than 4.5 standard deviations away from the mean fails).
  [ "$dropped" -ge 140 ] && [ "$dropped" -le 260 ] || fail "$run: dropped $dropped of 2000 at 10 %"
  [ "$duplicated" -ge 50 ] && [ "$duplicated" -le 150 ] || fail "$run: duplicated $duplicated of ~1800 at 5 %"
  [ "$reordered" -ge 1 ] || fail "$run: nothing reordered"
  [ "$(field "$j" kernel_queue_dropped)" -eq 0 ] || fail "$run: the kernel's queue overflowed"
  [ "$(field "$j" copies_held)" -eq 0 ] || fail "$run: $(field "$j" copies_held) packet copies still held at exit"
  [ "$(rules_in "$NS_A")" -eq 0 ] || fail "$run: rules left after SIGTERM"
  ok "egress $run: received $received, dropped $dropped, passed $passed, duplicated $duplicated, reordered $reordered; receiver agrees exactly"
done
for key in dropped duplicated reorder_held; do
  [ "$(field "$WORK/egress-first.json" $key)" -eq "$(field "$WORK/egress-second.json" $key)" ] ||
    fail "seed 7 twice: $key differs"
done
ok "seed 7 twice: the same drops, copies and reorder picks"

# 2. Ingress on B: copies are delivered locally as second arrivals; drops are never delivered.
start_impair "$NS_B" ingress --dev "$DEV_B" --direction ingress --loss 5% --duplicate 20% --seed 11
udp_run ingress "$N"
stop_impair INT
j="$WORK/ingress.json" rx="$WORK/ingress.rx.json"
[ "$(field "$j" directions.ingress.received)" -eq "$N" ] || fail "ingress: tool received $(field "$j" directions.ingress.received)"
[ "$(field "$j" directions.egress.received)" -eq 0 ] || fail "ingress only, yet egress packets were queued"
[ "$(field "$rx" unique)" -eq "$(field "$j" passed)" ] || fail "ingress: distinct $(field "$rx" unique) != passed $(field "$j" passed)"
[ "$(field "$rx" copies)" -eq "$(field "$j" duplicated)" ] || fail "ingress: copies $(field "$rx" copies) != duplicated $(field "$j" duplicated)"
[ "$(field "$j" duplicated)" -ge 250 ] || fail "ingress: only $(field "$j" duplicated) copies at 20 %"
[ "$(field "$j" delayed)" -eq 0 ] || fail "ingress: delayed without delay"
[ "$(rules_in "$NS_B")" -eq 0 ] || fail "ingress: rules left after SIGINT"
ok "ingress: passed $(field "$j" passed), copies $(field "$j" duplicated), all delivered as counted"

# 3. --seconds ends the run by itself and removes the rules.
start_impair "$NS_A" seconds --dev "$DEV_A" --loss 1% --seconds 0.5
wait "$IMPAIR_PID" || fail "--seconds: exit status"; IMPAIR_PID=
[ "$(rules_in "$NS_A")" -eq 0 ] || fail "--seconds: rules left"
[ "$(field "$WORK/seconds.json" final)" = True ] || fail "--seconds: no final counters"
ok "--seconds: stopped by itself, rules removed"

# 4. SIGKILL leaves rules, but without a listener they pass traffic; --cleanup removes them, twice.
start_impair "$NS_A" killed --dev "$DEV_A" --loss 100%
kill -KILL "$IMPAIR_PID"; wait "$IMPAIR_PID" 2>/dev/null; IMPAIR_PID=
[ "$(rules_in "$NS_A")" -gt 0 ] || fail "SIGKILL: expected leftover rules"
ip netns exec "$NS_A" ping -c 3 -i 0.2 -W 2 -q "$IP_B" >/dev/null || fail "leftover rules without a listener dropped traffic"
"$IMPAIR" --netns "$NS_A" --dev "$DEV_A" --cleanup || fail "--cleanup exit status"
[ "$(rules_in "$NS_A")" -eq 0 ] || fail "--cleanup: rules left"
"$IMPAIR" --netns "$NS_A" --dev "$DEV_A" --cleanup || fail "--cleanup again: exit status"
ok "after SIGKILL traffic passes, --cleanup removes the rules and is safe to repeat"

# 5. Bad options: exit 2 with the option named.
expect_usage() {  # expect_usage OPTION ARGS...
  local opt=$1; shift
  "$IMPAIR" "$@" >"$WORK/usage.out" 2>&1; local rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, expected 2"
  grep -q -- "$opt" "$WORK/usage.out" || fail "$*: message does not name $opt: $(cat "$WORK/usage.out")"
}
expect_usage --loss --dev lo --loss 150%
expect_usage --duplicate --dev lo --duplicate abc
expect_usage --delay --dev lo --delay 5parsecs
expect_usage --jitter --dev lo --jitter -1ms
expect_usage --direction --dev lo --direction sideways
expect_usage --dev --loss 1%
ok "bad options refused by name"
echo "PASS"
