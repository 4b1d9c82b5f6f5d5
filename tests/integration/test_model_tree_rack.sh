#!/usr/bin/env bash
# A multicast tree of two shesha-switches on the namespace rack. Switch A has the learner (h5),
# workers h3 and h4, and a veth link to switch B, which has workers h1 and h2. Both replicate the
# cluster's group; A lists the link in model_replication.fabric_ports. CartPole-v1 trains to its
# target with replicated MODEL (and the CREDIT fan-out, its default). A must send each group
# frame once over the link, unchanged, and copy only for h3 and h4; B must replicate every frame
# that came over the link for h1 and h2; every worker must adopt replicated versions; nothing
# forged, refused, unknown or lost at either switch.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_model_tree_rack.sh SWITCH LEARNER WORKER SOURCE_DIR
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 SRC=$4
# shellcheck source=../lib/rack_test.sh
source "$SRC/tests/lib/rack_test.sh"
# shellcheck source=../../tools/lab/switch_yaml.sh
source "$SRC/tools/lab/switch_yaml.sh"
rack_test_begin mtree
BASE_PREFIX=$RACK_FILE_PREFIX
SWITCH_A=
trap 'rack_test_cleanup; rm -rf "/var/run/dpdk/$BASE_PREFIX-a" "/var/run/dpdk/$BASE_PREFIX-b"' EXIT

rack_up h1:10.77.0.1 h2:10.77.0.2 h3:10.77.0.3 h4:10.77.0.4 h5:10.77.0.5
LEARNER_IP=10.77.0.5 GROUP=239.77.0.9 TARGET=195
# The link between the switches: a veth pair in the root namespace (named with the rack's prefix,
# so rack_down removes it), one end a port of each switch.
AB=$(rack_host_if ab) BA=$(rack_host_if ba)
ip link add "$AB" type veth peer name "$BA" || { fail "cannot create the link between the switches"; exit 1; }
for i in "$AB" "$BA"; do
    ip link set "$i" up
    ethtool -K "$i" tx off rx off > /dev/null 2>&1 || true  # the veth checksum trap (rack.sh)
    sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1" 2>/dev/null || true
done

# Both switches share CPU 0, so each sleeps 10 us when a round finds nothing (idle_backoff_us).
export RACK_IDLE_BACKOFF_US=10
RACK_FILE_PREFIX=$BASE_PREFIX-a rack_switch_yaml "$WORK/a.yaml" h5 0 256 0 h1,h2,h3,h4 h5 h3 h4 ab
RACK_FILE_PREFIX=$BASE_PREFIX-b rack_switch_yaml "$WORK/b.yaml" ba 0 256 0 h1,h2,h3,h4 ba h1 h2
/usr/bin/python3 - "$WORK/a.yaml" "$WORK/b.yaml" "$GROUP" "$LEARNER_IP" <<'PY' || { fail "could not add model_replication"; exit 1; }
import sys, yaml
a, b, group, learner = sys.argv[1:]
for path, fabric in ((a, ["ab"]), (b, [])):
    cfg = yaml.safe_load(open(path))
    cluster = next(c for c in cfg["aggregation"]["clusters"] if c["id"] == 1)
    cluster["model_replication"] = {"group": group, "learner": learner, "max_members": 8}
    if fabric:
        cluster["model_replication"]["fabric_ports"] = fabric
    yaml.safe_dump(cfg, open(path, "w"), sort_keys=False)
PY
REPLICATED=$WORK/cluster-replicated.yaml
sed -e "s/^  model_delivery: unicast /  model_delivery: replicated /" \
    -e "s/^  # model_group: 239.77.0.1 /  model_group: $GROUP /" "$SRC/configs/cluster-cartpole.yaml" > "$REPLICATED"
grep -q "^  model_delivery: replicated" "$REPLICATED" && grep -q "^  model_group: $GROUP" "$REPLICATED" ||
    { fail "could not write the replicated cluster file"; exit 1; }

rack_start_switch "$WORK/a.yaml" "$WORK/a.log" --stats-json "$WORK/a.json"
SWITCH_A=$SWITCH_PID
pids+=("$SWITCH_A")
rack_start_switch "$WORK/b.yaml" "$WORK/b.log" --stats-json "$WORK/b.json"
for w in 1 2 3 4; do rack_exec "h$w" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm
host_run h5 "$LEARNER" --config "$REPLICATED" --cluster 1 --bind "$LEARNER_IP" --duration 120 --target-return $TARGET \
    --metrics-dir "$WORK/m" --workers 4 > "$WORK/learner.log" 2>&1 &
LP=$!
wait_listening h5
workers=()
for w in 1 2 3 4; do
    host_run "h$w" "$WORKER" --config "$REPLICATED" --cluster 1 --worker-id $w --learner "$LEARNER_IP" \
        --bind "10.77.0.$w" --duration 130 --metrics "$WORK/w$w.json" > "$WORK/w$w.log" 2>&1 &
    workers+=($!)
done
pids+=("${workers[@]}")
wait $LP; rc=$?; LP=
for p in "${workers[@]}"; do kill -TERM "$p" 2>/dev/null; done  # each writes its final metrics on the way out
for p in "${workers[@]}"; do wait "$p" || fail "a worker exited with $?"; done
rack_stop_switch                                    # B
kill -INT "$SWITCH_A"; wait "$SWITCH_A"; a_rc=$?    # A
[ $a_rc -eq 0 ] || fail "switch A exited with $a_rc"
[ $rc -eq 0 ] && pass "the learner reached mean eval return $TARGET through two switches" ||
    fail "learner exit $rc: $(tail -2 "$WORK/learner.log")"

A=$WORK/a.json B=$WORK/b.json L=$WORK/m/learner.json
echo "switch A: $(/usr/bin/python3 -c "import json; r=json.load(open('$A'))['replication']; print(r['model_replicated'], 'replicated,', r['model_copies'], 'copies,', r['model_fabric_copies'], 'over the link')")"
echo "switch B: $(/usr/bin/python3 -c "import json; r=json.load(open('$B'))['replication']; print(r['model_replicated'], 'replicated,', r['model_copies'], 'copies,', r['model_fabric_copies'], 'over a link')")"
check "the learner sent to the group" "j('$L', 'model.delivery') == 'replicated' and j('$L', 'model.group_chunks_sent') > 0"
check "A joined all four workers, B the two behind it" \
    "j('$A', 'replication.model_joined') >= 4 and j('$B', 'replication.model_joined') >= 2"
# Chunks published before the last worker's request reach fewer members, so allow 3 %.
check "A sent each group frame once over the link (but the first few, before h1 and h2 joined)" \
    "0 < 0.97 * j('$A', 'replication.model_replicated') <= j('$A', 'replication.model_fabric_copies') <= j('$A', 'replication.model_replicated')"
check "A copied only for its own two workers" \
    "0.97 * 2 * j('$A', 'replication.model_replicated') <= j('$A', 'replication.model_copies') <= 2 * j('$A', 'replication.model_replicated')"
check "B replicated every group frame that came over the link, for its two workers" \
    "0 < j('$B', 'replication.model_replicated') == j('$A', 'replication.model_fabric_copies') and 0.97 * 2 * j('$B', 'replication.model_replicated') <= j('$B', 'replication.model_copies') <= 2 * j('$B', 'replication.model_replicated') and j('$B', 'replication.model_fabric_copies') == 0"
for s in A B; do
    f=$WORK/${s,,}.json
    check "switch $s: nothing forged, refused, unknown or failed" \
        "j('$f', 'replication.model_not_member') == 0 and j('$f', 'replication.model_join_refused') == 0 and j('$f', 'replication.model_member_port_unknown') == 0 and j('$f', 'replication.model_copy_failed') == 0"
done
check "the CREDIT fan-out at A: every entry a CREDIT, none unknown" \
    "j('$A', 'replication.credit_batches') == j('$L', 'credits.batches') > 0 and j('$A', 'replication.credit_copies') == j('$L', 'credits.messages') and j('$A', 'replication.credit_worker_unknown') == 0 and j('$A', 'replication.credit_member_port_unknown') == 0"
check "every worker adopted replicated versions" \
    "min(j('$WORK/w%d.json' % w, 'model.versions_adopted') for w in (1, 2, 3, 4)) > 1"
check "nothing rejected by the learner" "j('$L', 'chunks.rejected_total') == 0 and j('$L', 'decode_errors.total') == 0"

echo
[ "$failures" -eq 0 ] && { echo "model tree rack test: all checks passed"; exit 0; }
echo "model tree rack test: $failures check(s) failed"; exit 1
