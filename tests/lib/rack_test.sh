# shellcheck shell=bash
# The shared frame of the rack integration tests (hosts in network namespaces, shesha-switch on
# af_packet veth ports): the rack's names, a work directory kept on failure, host processes pinned
# away from the switch's polling core, the switch started and stopped on its readiness line, and
# one cleanup that leaves no namespace, veth, process or DPDK runtime directory behind.
#
#   rack_test_begin NAME        RACK_PREFIX=shesha-NAME-, interface and file prefixes, WORK; exits
#                               77 (skip) without root or namespaces. Then rack_up as usual.
#   host_run HOST CMD...        CMD in HOST's namespace, pinned to HOST_CPUS (exec: $! is CMD)
#   rack_start_switch CFG LOG [ARGS...]   shesha-switch in the background (SWITCH_PID), ready when
#                               LOG says "shesha-switch running" (10 s at most, else FAIL and exit)
#   rack_stop_switch            SIGINT, wait, FAIL unless it exits 0
#   wait_listening HOST [PORT]  until a UDP socket listens on PORT (17717) in HOST (5 s at most)
#   pids+=(PID), LP=PID         processes killed by the cleanup
# Needs SWITCH (the shesha-switch binary) and SRC (the source tree).
# shellcheck source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"
# shellcheck source=../../tools/lab/rack.sh
source "$SRC/tools/lab/rack.sh"

rack_test_begin() {
    local name=$1
    RACK_PREFIX=shesha-$name-
    RACK_IF_PREFIX=sh$name-
    export RACK_FILE_PREFIX=shesha-$name-$$
    rack_can_run || exit 77
    WORK=$(mktemp -d "/tmp/shesha-$name.XXXXXX")
    SWITCH_PID=
    pids=()
    # The switch polls on lcore 0; host processes run on the other core(s), so that the switch is
    # not preempted by them (a preempted switch lets packets pile up and merge even on an idle link).
    if [ "$(nproc)" -ge 2 ]; then HOST_CPUS=1-$(($(nproc) - 1)); else HOST_CPUS=0; fi
    trap rack_test_cleanup EXIT
    trap 'exit 130' INT TERM
}

rack_test_cleanup() {
    local p
    for p in "${pids[@]}" ${LP:-}; do kill -TERM "$p" 2>/dev/null; done
    [ -n "$SWITCH_PID" ] && kill -TERM "$SWITCH_PID" 2>/dev/null && wait "$SWITCH_PID" 2>/dev/null
    wait 2>/dev/null
    rack_down
    rm -rf "/var/run/dpdk/$RACK_FILE_PREFIX"
    if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi
}

# Started in the background, a shell function runs in a subshell: there exec makes $! the process
# itself, so a SIGTERM reaches it (a learner or worker then writes its final metrics).
host_run() {
    local h=$1; shift
    if [ "$BASHPID" != "$$" ]; then exec ip netns exec "${RACK_PREFIX}$h" taskset -c "$HOST_CPUS" "$@"; fi
    ip netns exec "${RACK_PREFIX}$h" taskset -c "$HOST_CPUS" "$@"
}

rack_start_switch() {
    local cfg=$1 log=$2; shift 2
    : > "$log"
    "$SWITCH" -c "$cfg" "$@" > "$log" 2>&1 &
    SWITCH_PID=$!
    wait_for_line "$log" "shesha-switch running" "$SWITCH_PID" 10 && return 0
    fail "switch ($cfg) did not start"; cat "$log"; exit 1
}

rack_stop_switch() {
    kill -INT "$SWITCH_PID"; wait "$SWITCH_PID"; local rc=$?; SWITCH_PID=
    [ $rc -eq 0 ] || fail "switch exited with $rc"
}

wait_listening() {
    local port=${2:-17717} _
    for _ in $(seq 1 50); do rack_exec "$1" ss -Huln "sport = :$port" 2>/dev/null | grep -q . && return 0; sleep 0.1; done
    fail "nothing listens on $1:$port"
}
