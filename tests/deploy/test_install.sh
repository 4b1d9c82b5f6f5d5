#!/usr/bin/env bash
# `meson install` into a DESTDIR: binaries, the Slurm launcher, docs, the example configurations
# under SYSCONFDIR/shesha (an operator's edits survive a second install, missing files come back),
# and the systemd template unit shesha-switch@.service, checked with `systemd-analyze verify` (a copy
# whose paths point into the DESTDIR, since verify resolves ExecStart on this machine; any warning
# fails) and by running its ExecStart line for instance "switch-null" (root: DPDK on net_null ports).
# The paths come from the build's own prefix/bindir/sysconfdir (tools/test.sh: --prefix=/usr).
# usage: test_install.sh BUILD_ROOT SOURCE_ROOT
set -uo pipefail
BUILD=$(readlink -f "${1:?usage}") SRC=$(readlink -f "${2:?usage}")
D=$(mktemp -d /tmp/shesha-install.XXXXXX)
PREFIX_RUN=shesha-install-$$
failures=0 passed=0
check() {  # check DESCRIPTION STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok: $1"; else failures=$((failures + 1)); echo "FAIL: $1"; fi
}
cleanup() {
    rm -rf "/var/run/dpdk/$PREFIX_RUN"
    if [ "$failures" -eq 0 ]; then rm -rf "$D"; else echo "artifacts kept in $D"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

eval "$(meson introspect "$BUILD" --buildoptions | python3 -c '
import json, os, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
p = o["prefix"]
j = lambda d: os.path.join(p, d)
unit = o.get("systemdunitdir") or j("lib/systemd/system")
for k, v in (("PREFIX", p), ("BINDIR", j(o["bindir"])), ("SYSCONFDIR", j(o["sysconfdir"])),
             ("DATADIR", j(o["datadir"])), ("UNITDIR", unit)):
    print(f"{k}={v}")')"
echo "build $BUILD: prefix $PREFIX, bindir $BINDIR, sysconfdir $SYSCONFDIR, unit dir $UNITDIR"

meson install -C "$BUILD" --no-rebuild --destdir "$D" >"$D.log" 2>&1; rc=$?
check "meson install --destdir exits 0 (got $rc)" "$rc"
[ "$rc" -eq 0 ] || { tail -20 "$D.log"; rm -f "$D.log"; exit 1; }

for b in shesha-switch shesha-learner shesha-worker shesha-slurm-train; do
    check "$BINDIR/$b installed and executable" "$([ -x "$D$BINDIR/$b" ]; echo $?)"
done
"$D$BINDIR/shesha-switch" --help >/dev/null 2>&1
check "the installed shesha-switch runs (--help)" $?

ETC=$D$SYSCONFDIR/shesha
EX=$D$DATADIR/shesha/examples
for c in switch-null.yaml switch-veth.yaml switch-pci.yaml cluster-cartpole.yaml cluster-acrobot.yaml; do
    check "$SYSCONFDIR/shesha/$c installed, same as configs/$c" "$(cmp -s "$ETC/$c" "$SRC/configs/$c"; echo $?)"
done
check "lab/sim scenarios only under share/shesha/examples" \
    "$([ -f "$EX/lab-default.yaml" ] && [ -f "$EX/sim-tor.yaml" ] && [ ! -e "$ETC/lab-default.yaml" ]; echo $?)"
for f in README.md deployment.md switch.md img/sim-speed.png; do
    check "doc $DATADIR/doc/shesha/$f installed" "$([ -s "$D$DATADIR/doc/shesha/$f" ]; echo $?)"
done

# A second install keeps what the operator changed and restores what is missing.
echo "# operator's edit" >>"$ETC/switch-null.yaml"
rm "$ETC/cluster-acrobot.yaml"
meson install -C "$BUILD" --no-rebuild --destdir "$D" >"$D.log" 2>&1; rc=$?
check "second install exits 0 (got $rc)" "$rc"
check "second install keeps the edited $SYSCONFDIR/shesha/switch-null.yaml" \
    "$(tail -1 "$ETC/switch-null.yaml" | grep -q "operator's edit"; echo $?)"
check "the pristine switch-null.yaml stays in share/shesha/examples" "$(cmp -s "$EX/switch-null.yaml" "$SRC/configs/switch-null.yaml"; echo $?)"
check "second install restores the removed cluster-acrobot.yaml" "$(cmp -s "$ETC/cluster-acrobot.yaml" "$SRC/configs/cluster-acrobot.yaml"; echo $?)"
rm -f "$D.log"

# --- the unit -------------------------------------------------------------------------------------
U=$D$UNITDIR/shesha-switch@.service
check "$UNITDIR/shesha-switch@.service installed" "$([ -f "$U" ]; echo $?)"
for want in "Restart=on-failure" "LimitMEMLOCK=infinity" "KillSignal=SIGTERM" "StateDirectory=shesha/%i" \
            "ExecStart=$BINDIR/shesha-switch -c $SYSCONFDIR/shesha/%i.yaml --stats-json /var/lib/shesha/%i/stats.json" \
            "AssertPathExists=$SYSCONFDIR/shesha/%i.yaml" "WantedBy=multi-user.target"; do
    check "unit has $want" "$(grep -qF -- "$want" "$U"; echo $?)"
done

if ! command -v systemd-analyze >/dev/null; then
    echo "$passed passed, $failures failed (systemd-analyze missing: install systemd)"
    [ "$failures" -eq 0 ] && exit 77 || exit 1
fi
V=$D/verify
mkdir -p "$V"
# The same unit with its paths pointing into the DESTDIR; verify checks that ExecStart is executable.
sed -e "s#$BINDIR/#$D$BINDIR/#g" -e "s#$SYSCONFDIR/shesha#$ETC#g" "$U" >"$V/shesha-switch@.service"
cp "$V/shesha-switch@.service" "$V/shesha-switch@switch-null.service"
for unit in "shesha-switch@.service" "shesha-switch@switch-null.service"; do
    systemd-analyze verify --man=no "$V/$unit" >"$V/out" 2>&1; rc=$?
    check "systemd-analyze verify $unit: exit 0 and no warning (got $rc: $(head -c 300 "$V/out"))" \
        "$([ "$rc" -eq 0 ] && [ ! -s "$V/out" ]; echo $?)"
done
# The check above must be able to fail: a misspelt key is reported.
sed 's/^LimitMEMLOCK=/LimitMEMLOK=/' "$V/shesha-switch@.service" >"$V/broken@.service"
systemd-analyze verify --man=no "$V/broken@.service" >"$V/out" 2>&1
check "verify reports a misspelt key in a broken copy" "$(grep -q "LimitMEMLOK" "$V/out"; echo $?)"

# ExecStart for instance switch-null, as systemd would run it (%i, $SHESHA_SWITCH_ARGS empty), with
# the DESTDIR paths and the state directory in the DESTDIR; bounded by --duration.
if [ "$(id -u)" -eq 0 ]; then
    line=$(sed -n 's/^ExecStart=//p' "$V/shesha-switch@.service")
    line=${line//%i/switch-null}
    line=${line//\/var\/lib\/shesha/$D/var/lib/shesha}
    line=${line//\$SHESHA_SWITCH_ARGS/}
    mkdir -p "$D/var/lib/shesha/switch-null"
    # shellcheck disable=SC2086  # word splitting as systemd does
    timeout 60 $line --duration 1 --log-level warn -- --file-prefix "$PREFIX_RUN" >"$V/run.out" 2>&1; rc=$?
    check "the unit's ExecStart runs instance switch-null and stops cleanly (got $rc)" "$rc"
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s['ports'][0]['tx_packets'] > 0 else 1)" \
        "$D/var/lib/shesha/switch-null/stats.json"
    check "... and writes its stats JSON into the state directory" $?
    # SIGTERM (KillSignal) stops it cleanly too, with the stats written.
    rm -f "$D/var/lib/shesha/switch-null/stats.json"
    timeout 60 $line -- --file-prefix "$PREFIX_RUN" >"$V/run2.out" 2>&1 &
    pid=$!
    for ((i = 0; i < 300; i++)); do grep -q "shesha-switch running" "$V/run2.out" 2>/dev/null && break; sleep 0.1; done
    kill -TERM "$pid"; wait "$pid"; rc=$?
    check "SIGTERM stops it with exit 0 (got $rc) and the stats JSON written" \
        "$([ "$rc" -eq 0 ] && [ -s "$D/var/lib/shesha/switch-null/stats.json" ]; echo $?)"
else
    echo "ExecStart run skipped: not root (DPDK)"
fi

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
