#!/usr/bin/env bash
# In-network MODEL replication on the namespace rack: one learner (h5) and four workers (h1..h4)
# train CartPole-v1 through shesha-switch twice, first with unicast model delivery, then with
# `learner.model_delivery: replicated` and the switch's `model_replication` for the cluster. Both
# runs must reach the target; with replication the switch must make the copies (joins by model
# request, copies per group chunk), the workers must adopt the replicated versions, and the learner
# must send about a quarter of unicast's MODEL chunks per published version (4 workers). The
# replicated run sets `learner.credit_batching: false`; a third run keeps its default (on with
# replicated delivery): the learner's CREDITs leave as CREDIT_BATCHes to the group, and the switch
# must hand each worker exactly the CREDITs the learner's entries name.
# Needs root and network namespaces; exits 77 (skip) where they are unavailable.
#
# usage: test_model_replication_rack.sh SWITCH LEARNER WORKER SOURCE_DIR
set -uo pipefail

SWITCH=$1 LEARNER=$2 WORKER=$3 SRC=$4
# shellcheck source=../lib/rack_test.sh
source "$SRC/tests/lib/rack_test.sh"
# shellcheck source=../../tools/lab/switch_yaml.sh
source "$SRC/tools/lab/switch_yaml.sh"
rack_test_begin mrep

HOSTS=(h1 h2 h3 h4 h5)
rack_up h1:10.77.0.1 h2:10.77.0.2 h3:10.77.0.3 h4:10.77.0.4 h5:10.77.0.5
LEARNER_IP=10.77.0.5 GROUP=239.77.0.9 TARGET=195

# The switch: unshaped, members h1..h4; cluster 1 replicates MODEL sent by the learner to GROUP.
rack_switch_yaml "$WORK/switch.yaml" h5 0 256 0 h1,h2,h3,h4 "${HOSTS[@]}"
/usr/bin/python3 - "$WORK/switch.yaml" "$GROUP" "$LEARNER_IP" <<'PY' || { fail "could not add model_replication"; exit 1; }
import sys, yaml
path, group, learner = sys.argv[1:]
cfg = yaml.safe_load(open(path))
cluster = next(c for c in cfg["aggregation"]["clusters"] if c["id"] == 1)
cluster["model_replication"] = {"group": group, "learner": learner, "max_members": 8}
yaml.safe_dump(cfg, open(path, "w"), sort_keys=False)
PY
# The same job twice: the shipped CartPole cluster file, and a copy that asks for replication.
UNICAST=$SRC/configs/cluster-cartpole.yaml
REPLICATED=$WORK/cluster-replicated.yaml
sed -e "s/^  model_delivery: unicast /  model_delivery: replicated /" \
    -e "s/^  # model_group: 239.77.0.1 /  model_group: $GROUP /" "$UNICAST" > "$REPLICATED"
grep -q "^  model_delivery: replicated" "$REPLICATED" && grep -q "^  model_group: $GROUP" "$REPLICATED" ||
    { fail "could not write the replicated cluster file"; exit 1; }
BATCHED=$REPLICATED  # learner.credit_batching: auto, the default: on with replicated delivery
UNBATCHED=$WORK/cluster-unbatched.yaml
sed -e "s/^  model_group: $GROUP /  model_group: $GROUP\n  credit_batching: false /" "$REPLICATED" > "$UNBATCHED"
grep -q "^  credit_batching: false" "$UNBATCHED" || { fail "could not write the unbatched cluster file"; exit 1; }

run_arm() {  # run_arm NAME CLUSTER_YAML: one training run to the target, metrics in $WORK/NAME
    local name=$1 cfg=$2 w
    mkdir -p "$WORK/$name"
    rack_start_switch "$WORK/switch.yaml" "$WORK/$name/switch.log" --stats-json "$WORK/$name/switch.json"
    for w in 1 2 3 4; do rack_exec "h$w" ping -c 1 -W 1 "$LEARNER_IP" > /dev/null 2>&1; done  # ARP + FDB warm
    host_run h5 "$LEARNER" --config "$cfg" --cluster 1 --bind "$LEARNER_IP" --duration 120 --target-return $TARGET \
        --metrics-dir "$WORK/$name/m" --workers 4 > "$WORK/$name/learner.log" 2>&1 &
    LP=$!
    wait_listening h5
    for w in 1 2 3 4; do
        host_run "h$w" "$WORKER" --config "$cfg" --cluster 1 --worker-id $w --learner "$LEARNER_IP" \
            --bind "10.77.0.$w" --duration 130 --metrics "$WORK/$name/w$w.json" > "$WORK/$name/w$w.log" 2>&1 &
        pids+=($!)
    done
    wait $LP; local rc=$?; LP=
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done  # each writes its final metrics on the way out
    for p in "${pids[@]}"; do wait "$p" || fail "$name: a worker exited with $?"; done
    pids=()
    rack_stop_switch
    [ $rc -eq 0 ] && pass "$name: the learner reached mean eval return $TARGET" ||
        fail "$name: learner exit $rc: $(tail -2 "$WORK/$name/learner.log")"
}

run_arm unicast "$UNICAST"
run_arm replicated "$UNBATCHED"
run_arm batched "$BATCHED"

U=$WORK/unicast/m/learner.json R=$WORK/replicated/m/learner.json S=$WORK/replicated/switch.json
check "unicast: no group sends, the switch replicated nothing" \
    "j('$U', 'model.group_chunks_sent') == 0 and j('$WORK/unicast/switch.json', 'replication.model_copies') == 0"
check "replicated: the learner sent to the group" \
    "j('$R', 'model.delivery') == 'replicated' and j('$R', 'model.group_chunks_sent') > 0"
check "all four workers joined the group by their model requests" "j('$S', 'replication.model_joined') >= 4"
# Chunks published before the last worker's request reach fewer members (in the runs so far, the
# first 4 versions: 76 of some 60,000 copies), so allow 3 %.
check "the switch copied each group chunk to the four members (but the first few, before all joined)" \
    "0 < 0.97 * 4 * j('$S', 'replication.model_replicated') <= j('$S', 'replication.model_copies') <= 4 * j('$S', 'replication.model_replicated')"
check "nothing forged, refused or lost on the way" \
    "j('$S', 'replication.model_not_member') == 0 and j('$S', 'replication.model_join_refused') == 0 and j('$S', 'replication.model_member_port_unknown') == 0 and j('$S', 'replication.model_copy_failed') == 0"
check "every worker adopted replicated versions" \
    "min(j('$WORK/replicated/w%d.json' % w, 'model.versions_adopted') for w in (1, 2, 3, 4)) > 1"
check "nothing rejected by the learner" "j('$R', 'chunks.rejected_total') == 0 and j('$R', 'decode_errors.total') == 0"
# MODEL chunks out of the learner per published version: unicast sends one copy per worker (4), the
# group one (plus the unicast answers to model requests, mostly at the start).
/usr/bin/python3 - "$U" "$R" <<'PY'
import json, sys
def per_version(path):
    m = json.load(open(path))["model"]
    return (m["chunks_sent"] + m["group_chunks_sent"]) / max(m["versions_published"], 1), m
u, um = per_version(sys.argv[1])
r, rm = per_version(sys.argv[2])
print(f"MODEL chunks per published version: unicast {u:.2f} ({um['chunks_sent']} chunks, {um['versions_published']} versions), "
      f"replicated {r:.2f} ({rm['group_chunks_sent']} to the group + {rm['chunks_sent']} unicast, {rm['versions_published']} versions): "
      f"ratio {r / u:.3f}")
PY
check "the learner's MODEL chunks per version fell to about a quarter (at most 0.4 of unicast's)" \
    "(lambda u, r: (r['chunks_sent'] + r['group_chunks_sent']) / r['versions_published'] <= 0.4 * (u['chunks_sent'] + u['group_chunks_sent']) / u['versions_published'])(j('$U', 'model'), j('$R', 'model'))"

B=$WORK/batched/m/learner.json SB=$WORK/batched/switch.json
echo "CREDIT fan-out: learner $(/usr/bin/python3 -c "import json; c=json.load(open('$B'))['credits']; print(c['batches'], 'batches,', c['messages'], 'CREDITs')"), switch $(/usr/bin/python3 -c "import json; r=json.load(open('$SB'))['replication']; print(r['credit_batches'], 'batches,', r['credit_copies'], 'copies')")"
check "unicast CREDITs: no batches" "j('$R', 'credits.batches') == 0 and j('$S', 'replication.credit_batches') == 0"
check "batched: the switch expanded every CREDIT_BATCH the learner sent" \
    "j('$B', 'credits.batches') > 0 and j('$SB', 'replication.credit_batches') == j('$B', 'credits.batches')"
check "batched: one CREDIT per entry, none lost, refused or misaddressed" \
    "j('$SB', 'replication.credit_copies') == j('$B', 'credits.messages') and j('$SB', 'replication.credit_worker_unknown') == 0 and j('$SB', 'replication.credit_member_port_unknown') == 0 and j('$SB', 'replication.credit_bad_entry') == 0 and j('$SB', 'replication.credit_batch_not_member') == 0 and j('$SB', 'replication.credit_copy_failed') == 0"
check "batched: the workers received exactly the CREDITs and units the learner sent" \
    "sum(j('$WORK/batched/w%d.json' % w, 'credit.messages') for w in (1, 2, 3, 4)) == j('$B', 'credits.messages') and sum(j('$WORK/batched/w%d.json' % w, 'credit.units') for w in (1, 2, 3, 4)) == j('$B', 'credits.units')"
check "batched: no credit timeouts at the workers" \
    "sum(j('$WORK/batched/w%d.json' % w, 'credit.timeouts') for w in (1, 2, 3, 4)) == 0"

echo
[ "$failures" -eq 0 ] && { echo "model replication rack test: all checks passed"; exit 0; }
echo "model replication rack test: $failures check(s) failed"; exit 1
