# shellcheck shell=bash
# A virtual rack on one machine: each host in its own network namespace, joined to the root
# namespace by a veth pair whose root end becomes a shesha-switch port (af_packet or af_xdp).
# Sourced by the demo, the lab and the integration tests. Requires root.
#
#   rack_up NAME:IP ...        creates hosts (namespace "${RACK_PREFIX}NAME", interface eth0 with
#                              IP/24, root-side interface "${RACK_IF_PREFIX}NAME")
#   rack_down                  removes every namespace and veth this rack created (idempotent)
#   rack_exec NAME CMD...      runs a command inside a host's namespace
#   rack_mac NAME              the host's MAC address
#
# Everything created is named with RACK_PREFIX / RACK_IF_PREFIX so teardown can find leftovers
# of a crashed earlier run too.

RACK_PREFIX=${RACK_PREFIX:-shesha-}
RACK_IF_PREFIX=${RACK_IF_PREFIX:-shv-}
RACK_SUBNET=${RACK_SUBNET:-10.77.0}
RACK_HOSTS=()

rack_can_run() {
    [ "$(id -u)" -eq 0 ] || { echo "rack: needs root" >&2; return 1; }
    command -v ip >/dev/null || { echo "rack: iproute2 missing" >&2; return 1; }
    ip netns add "${RACK_PREFIX}probe$$" 2>/dev/null || { echo "rack: cannot create network namespaces" >&2; return 1; }
    ip netns del "${RACK_PREFIX}probe$$"
}

# rack_host_if NAME -> root-side interface name (kernel limit: 15 characters)
rack_host_if() { echo "${RACK_IF_PREFIX}$1" | cut -c1-15; }

# rack_up NAME:IP[:MTU]...: one namespace per host; MTU (default $RACK_MTU, else the kernel's 1500)
# is set on both ends of its veth, for jumbo frames.
rack_up() {
    local spec name ip ifname ns mtu
    for spec in "$@"; do
        name=${spec%%:*}; ip=${spec#*:}; mtu=${RACK_MTU:-}
        if [[ $ip == *:* ]]; then mtu=${ip#*:}; ip=${ip%%:*}; fi
        ns="${RACK_PREFIX}${name}"; ifname=$(rack_host_if "$name")
        ip netns del "$ns" 2>/dev/null || true
        ip link del "$ifname" 2>/dev/null || true
        ip netns add "$ns"
        ip link add "$ifname" type veth peer name eth0 netns "$ns"
        # Deterministic MACs make static FDB entries and allow-lists possible: 02:5e:IP bytes.
        local mac
        mac=$(printf '02:5e:%02x:%02x:%02x:%02x' ${ip//./ })
        ip -n "$ns" link set eth0 address "$mac"
        if [ -n "$mtu" ]; then
            ip link set "$ifname" mtu "$mtu"
            ip -n "$ns" link set eth0 mtu "$mtu"
        fi
        ip -n "$ns" addr add "$ip/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        ip link set "$ifname" up
        # The veth checksum trap: without this, UDP forwarded through af_packet arrives with bad
        # checksums and is dropped silently by the receiver.
        ethtool -K "$ifname" tx off rx off >/dev/null 2>&1 || true
        ip netns exec "$ns" ethtool -K eth0 tx off rx off >/dev/null 2>&1 || true
        # No IPv6 chatter (router solicitations, DAD) muddying counters.
        sysctl -qw "net.ipv6.conf.${ifname}.disable_ipv6=1" 2>/dev/null || true
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
        RACK_HOSTS+=("$name")
    done
}

rack_down() {
    local ns ifname
    # Every process still running inside one of our namespaces goes first.
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${RACK_PREFIX}" || true); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
    done
    sleep 0.2
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${RACK_PREFIX}" || true); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    for ifname in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^${RACK_IF_PREFIX}" || true); do
        ip link del "$ifname" 2>/dev/null || true
    done
    # The switch removes its EAL runtime directory when it stops; this covers one that was killed.
    [ -n "${RACK_FILE_PREFIX:-}" ] && rm -rf "/var/run/dpdk/${RACK_FILE_PREFIX}"
    RACK_HOSTS=()
}

rack_exec() { local name=$1; shift; ip netns exec "${RACK_PREFIX}${name}" "$@"; }
rack_mac() { ip -n "${RACK_PREFIX}$1" link show eth0 | awk '/link\/ether/ {print $2}'; }
