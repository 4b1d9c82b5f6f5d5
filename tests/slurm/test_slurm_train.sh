#!/usr/bin/env bash
# tools/slurm/shesha-slurm-train on a real, single-node Slurm built from Debian's packages (munge,
# slurmctld, slurmd): the test generates a munge key and a slurm.conf in a temporary directory
# (proctrack/linuxproc, task/none, no cgroups, no accounting, state and spool inside it, free
# loopback ports), starts the three daemons, and then
#   1. trains CartPole-v1 through `sbatch`: learner + two workers (--workers-per-node 2) on
#      loopback (--iface lo) to a mean evaluation return of 150; checks the job's exit status, the
#      learner's metrics (target reached, both workers, ids from SLURM_PROCID, bound to the lo
#      address), the workers' metrics files, and that extra learner arguments are passed on;
#   2. a job whose target cannot be reached stops when the job's time runs out: the launcher reads
#      the time left from Slurm (sbatch --time=1, --margin 45: about 15 s), exits 1, stops the workers;
#   3. usage errors exit 2 (outside an allocation, bad options).
# Then it cancels whatever is left, stops the daemons by pid and removes the directory.
# usage: test_slurm_train.sh SHESHA_LEARNER SHESHA_WORKER SOURCE_DIR
# Exit 77 (skipped) when not root or the Slurm/munge packages are missing.
set -uo pipefail
LEARNER=$(readlink -f "${1:?usage}") WORKER=$(readlink -f "${2:?usage}") SRC=$(readlink -f "${3:?usage}")
LAUNCHER=$SRC/tools/slurm/shesha-slurm-train
CFG=$SRC/configs/cluster-cartpole.yaml
failures=0 passed=0
check() {  # check DESCRIPTION STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok: $1"; else failures=$((failures + 1)); echo "FAIL: $1"; fi
}
jcheck() {  # jcheck DESCRIPTION PYTHON_EXPR (j(path, 'a.b') reads a JSON file)
    python3 - "$2" <<'PY'
import json, sys
def j(path, key):
    node = json.load(open(path))
    for part in key.split('.'):
        node = node[int(part)] if part.isdigit() else node[part]
    return node
try:
    sys.exit(0 if eval(sys.argv[1]) else 1)
except Exception as e:
    print(f'  error evaluating: {e}')
    sys.exit(1)
PY
    check "$1" $?
}

# --- 3. usage errors: no Slurm needed ------------------------------------------------------------
env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$LAUNCHER" --config "$CFG" --cluster 1 --learner-bin "$LEARNER" \
    --worker-bin "$WORKER" >/dev/null 2>/tmp/shesha-slurm-err.$$; rc=$?
check "outside an allocation: exit 2 (got $rc): $(head -1 /tmp/shesha-slurm-err.$$)" \
    "$([ "$rc" -eq 2 ] && grep -q 'not inside a Slurm allocation' /tmp/shesha-slurm-err.$$; echo $?)"
"$LAUNCHER" --config "$CFG" --cluster 1 --workers-per-node 0 >/dev/null 2>/tmp/shesha-slurm-err.$$; rc=$?
check "--workers-per-node 0: exit 2 (got $rc)" "$([ "$rc" -eq 2 ] && grep -q 'workers-per-node' /tmp/shesha-slurm-err.$$; echo $?)"
"$LAUNCHER" --config "$CFG" --bogus >/dev/null 2>/tmp/shesha-slurm-err.$$; rc=$?
check "unknown option: exit 2 (got $rc)" "$([ "$rc" -eq 2 ] && grep -q -- '--bogus' /tmp/shesha-slurm-err.$$; echo $?)"
rm -f /tmp/shesha-slurm-err.$$

skip() { echo "$passed passed, $failures failed (Slurm part skipped: $*)"; [ "$failures" -eq 0 ] && exit 77; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "not root (slurmd launches jobs as their users)"
for c in munged munge slurmctld slurmd sbatch srun scontrol squeue scancel sinfo; do
    command -v "$c" >/dev/null || skip "$c not installed (slurmctld slurmd slurm-client munge)"
done

# --- a private single-node Slurm -----------------------------------------------------------------
T=$(mktemp -d /tmp/shesha-slurm.XXXXXX)
chmod 755 "$T"                      # munged wants the socket's path searchable by everyone
mkdir -p "$T/key" "$T/run" "$T/state" "$T/spool" "$T/log" "$T/jobs"
chmod 700 "$T/key"
chmod 755 "$T/run"
export SLURM_CONF=$T/slurm.conf
stop_pidfile() {  # SIGTERM to the daemon in PIDFILE, SIGKILL if still there after 10 s
    local p i
    [ -f "$1" ] || return 0
    p=$(cat "$1")
    kill -TERM "$p" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
}
cleanup() {
    if [ -S "$T/run/munge.sock" ] && [ -f "$T/run/slurmctld.pid" ]; then
        jobs=$(squeue -h -o %i 2>/dev/null)
        # shellcheck disable=SC2086
        [ -n "$jobs" ] && scancel --quiet $jobs
        for ((i = 0; i < 100; i++)); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
    fi
    for f in slurmd slurmctld; do stop_pidfile "$T/run/$f.pid"; done
    # Job processes of this test (they inherit SLURM_CONF=$T/...), should any outlive their job.
    for e in /proc/[0-9]*/environ; do
        if grep -qzx "SLURM_CONF=$T/slurm.conf" "$e" 2>/dev/null; then
            p=${e#/proc/}; p=${p%/environ}
            [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] && [ "$p" != "$(cat "$T/run/munged.pid" 2>/dev/null)" ] \
                && kill -KILL "$p" 2>/dev/null
        fi
    done
    stop_pidfile "$T/run/munged.pid"
    if [ "$failures" -eq 0 ]; then rm -rf "$T"; else echo "artifacts kept in $T (daemons stopped)"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT
wait_for() {  # wait_for SECONDS COMMAND...: polls every 100 ms
    local deadline=$(( $(date +%s) + $1 )); shift
    until "$@"; do [ "$(date +%s)" -lt "$deadline" ] || return 1; sleep 0.1; done
}
# run_job TIMEOUT_S SBATCH_ARGS...: submits, polls the job's state every 200 ms (sbatch --wait polls
# with back-off up to 32 s), prints the job id; returns the job's exit code (124: not done in time).
run_job() {
    local limit=$1 id deadline st; shift
    id=$(sbatch --parsable "$@") || return 125
    echo "$id" >"$T/jobs/last.id"
    deadline=$(( $(date +%s) + limit ))
    while :; do
        st=$(scontrol show job "$id" 2>/dev/null)
        case $(grep -o 'JobState=[A-Z_]*' <<<"$st") in
        JobState=PENDING|JobState=RUNNING|JobState=CONFIGURING|JobState=COMPLETING|"") ;;
        *) break ;;
        esac
        [ "$(date +%s)" -lt "$deadline" ] || { scancel "$id"; return 124; }
        sleep 0.2
    done
    return "$(grep -o ' ExitCode=[0-9]*' <<<"$st" | cut -d= -f2)"
}
free_port() { python3 -c 'import socket, sys; s=socket.socket(socket.AF_INET, getattr(socket, sys.argv[1])); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "$1"; }

dd if=/dev/urandom of="$T/key/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/key/munge.key"
munged --key-file="$T/key/munge.key" --socket="$T/run/munge.sock" --pid-file="$T/run/munged.pid" \
    --log-file="$T/log/munged.log" --seed-file="$T/key/munged.seed"
check "munged started with a generated key" $?
munge -S "$T/run/munge.sock" -n | unmunge -S "$T/run/munge.sock" >/dev/null
check "munge credentials round-trip through the private socket" $?

node=$(hostname -s)
CTLD_PORT=$(free_port SOCK_STREAM)
SLURMD_PORT=$(free_port SOCK_STREAM)
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port SOCK_STREAM); done
cat >"$SLURM_CONF" <<EOF
# generated by tests/slurm/test_slurm_train.sh: one node, no cgroups, everything in $T
ClusterName=sheshatest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/run/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=shesha Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF"
check "slurmctld started" $?
slurmd -f "$SLURM_CONF"
check "slurmd started" $?
node_idle() { [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ]; }
wait_for 30 node_idle
check "node $node is idle in partition shesha" $?
if ! node_idle; then tail -5 "$T/log/slurmctld.log" "$T/log/slurmd.log"; exit 1; fi

# --- 1. train to a modest target through sbatch --------------------------------------------------
UDP=$(free_port SOCK_DGRAM)
M=$T/jobs/train
start=$(date +%s)
run_job 150 --job-name=shesha-train --nodes=1 --ntasks=2 --time=5 \
    --output="$T/jobs/train.out" --chdir="$T/jobs" \
    --wrap="$LAUNCHER --config $CFG --cluster 7 --iface lo --workers-per-node 2 --target-return 150 \
            --port $UDP --metrics-dir $M --learner-bin $LEARNER --worker-bin $WORKER \
            -- --prometheus-textfile $M/learner.prom --quiet"; rc=$?
cp "$T/jobs/last.id" "$T/jobs/train.id"
echo "training job $(cat "$T/jobs/train.id"): exit $rc after $(( $(date +%s) - start )) s"
check "sbatch: the training job exits 0 (target reached; got $rc)" "$([ "$rc" -eq 0 ]; echo $?)"
[ "$rc" -eq 0 ] || tail -20 "$T/jobs/train.out"
state=$(scontrol show job "$(cat "$T/jobs/train.id")" 2>/dev/null | grep -o 'JobState=[A-Z]*')
check "Slurm recorded the job as $state" "$([ "$state" = JobState=COMPLETED ]; echo $?)"
check "the launcher placed the learner and 2 workers on $node" \
    "$(grep -q "learner on $node, 2 worker(s) on $node (2 per node), cluster 7" "$T/jobs/train.out"; echo $?)"
check "the learner reported the target" "$(grep -q 'target 150 reached' "$T/jobs/train.out"; echo $?)"
L=$M/learner.json
jcheck "learner.json: final, target 150 reached" "j('$L', 'final') and j('$L', 'target.reached') and j('$L', 'eval.last_mean_return') >= 150"
jcheck "learner.json: cluster 7, 2 workers expected and known" \
    "j('$L', 'cluster_id') == 7 and j('$L', 'workers.expected') == 2 and j('$L', 'workers.known') == 2"
jcheck "worker ids 0 and 1 (SLURM_PROCID), both from the lo address 127.0.0.1" \
    "sorted(w['id'] for w in j('$L', 'workers.list')) == [0, 1] and all(w['endpoint'].startswith('127.0.0.1:') for w in j('$L', 'workers.list'))"
jcheck "chunks applied from the workers" "j('$L', 'chunks.applied') > 0 and j('$L', 'env_steps') > 0"
for w in 0 1; do
    jcheck "worker-$w.json: final, worker id $w, sent chunks" \
        "j('$M/worker-$w.json', 'final') and j('$M/worker-$w.json', 'worker_id') == $w and j('$M/worker-$w.json', 'chunks.sent') > 0"
done
check "extra learner arguments passed on (--prometheus-textfile written)" \
    "$(grep -q '^shesha_learner_target_reached{cluster="7"} 1$' "$M/learner.prom"; echo $?)"
check "no shesha process left running after the job" \
    "$(! pgrep -f "$M" >/dev/null; echo $?)"

# --- 2. the time runs out --------------------------------------------------------------------------
M2=$T/jobs/timeout
start=$(date +%s)
run_job 120 --job-name=shesha-timeout --nodes=1 --ntasks=2 --time=1 \
    --output="$T/jobs/timeout.out" --chdir="$T/jobs" \
    --wrap="$LAUNCHER --config $CFG --cluster 8 --iface lo --workers-per-node 1 --target-return 100000 --margin 45 \
            --port $UDP --metrics-dir $M2 --learner-bin $LEARNER --worker-bin $WORKER -- --quiet"; rc=$?
took=$(( $(date +%s) - start ))
echo "time-out job: exit $rc after $took s"
check "unreachable target: the job exits 1 (got $rc)" "$([ "$rc" -eq 1 ]; echo $?)"
check "time limit from the job's time left minus the margin (~15 s)" \
    "$(grep -Eq 'time limit 1[0-5]s' "$T/jobs/timeout.out"; echo $?)"
jcheck "learner.json: not reached, stopped after the derived limit" \
    "j('$M2/learner.json', 'final') and not j('$M2/learner.json', 'target.reached') and 9 <= j('$M2/learner.json', 'wall_seconds') <= 20"
check "the launcher stopped the workers after the learner" "$(grep -q 'stopping the workers' "$T/jobs/timeout.out"; echo $?)"
jcheck "worker-0.json: final (stopped by the launcher, not by its own --duration)" "j('$M2/worker-0.json', 'final')"
check "the job ended soon after its derived limit ($took s)" "$([ "$took" -lt 40 ]; echo $?)"

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
