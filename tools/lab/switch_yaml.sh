# shellcheck shell=bash
# Writes a shesha-switch config for a rack made by rack.sh.
#
#   rack_switch_yaml FILE LEARNER RATE QUEUE_PACKETS MARK_DEPTH MEMBERS HOSTS...
#
# FILE: output; LEARNER: the host whose port is the bottleneck; RATE: its shaper rate ("0" =
# unshaped, "20M", ...); QUEUE_PACKETS: its egress queue capacity; MARK_DEPTH: marking threshold
# in packets on it (0 = off); MEMBERS: comma-separated hosts allowed to merge in clusters 1 and 2;
# HOSTS: every host, one switch port each, in order. Environment: RACK_PMD (net_af_packet or
# net_af_xdp, default net_af_packet), RACK_FILE_PREFIX (EAL file prefix), RACK_IDLE_BACKOFF_US
# (the switch's idle_backoff_us, default 0).
#
# The YAML itself comes from the lab's generator (tools/lab/shesha_lab/switch_yaml.py, run by
# Debian's /usr/bin/python3 with python3-yaml); this helper only looks up the hosts' addresses and
# interfaces.

RACK_LAB_DIR=$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)

rack_host_ip() {  # rack_host_ip NAME -> the IP given to rack_up (from the namespace itself)
    ip -n "${RACK_PREFIX}$1" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1
}

rack_switch_yaml() {
    local file=$1 learner=$2 rate=$3 qpkts=$4 mark=$5 members=$6
    shift 6
    local h member_args=() ports=()
    for h in ${members//,/ }; do
        member_args+=(--member "$(rack_host_ip "$h")")
    done
    for h in "$@"; do
        ports+=("$h=$(rack_host_if "$h")")
    done
    PYTHONPATH="$RACK_LAB_DIR${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
        /usr/bin/python3 -m shesha_lab.switch_yaml rack --out "$file" --learner "$learner" --rate "$rate" \
        --queue-packets "$qpkts" --mark-depth "$mark" "${member_args[@]}" \
        --pmd "${RACK_PMD:-net_af_packet}" --file-prefix "${RACK_FILE_PREFIX:-shesha-rack}" \
        --idle-backoff-us "${RACK_IDLE_BACKOFF_US:-0}" "${ports[@]}"
}
