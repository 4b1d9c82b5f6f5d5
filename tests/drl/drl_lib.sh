# shellcheck shell=bash
# Helpers for the DRL script tests: a free-ish UDP port, process cleanup (and tests/lib/checks.sh).
# shellcheck source=../lib/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/checks.sh"
# A UDP port unlikely to collide with parallel tests: 20000 + (pid mod 20000).
drl_port() { echo $((20000 + $$ % 20000)); }
# checkpoint_version FILE: the model version stored in a checkpoint (learner/checkpoint.h layout).
checkpoint_version() { python3 -c "import struct,sys;d=open(sys.argv[1],'rb').read();print(struct.unpack_from('<I',d,16)[0])" "$1"; }
# drl_begin NAME: a work directory (kept on failure), a UDP port, and a cleanup on exit that
# kills the learner $LP (if set) and every pid in pids. Sets WORK, PORT, pids, LP.
drl_begin() {
    WORK=$(mktemp -d "/tmp/shesha-$1.XXXXXX")
    PORT=$(drl_port)
    pids=()
    LP=
    trap drl_cleanup EXIT
}
drl_cleanup() {
    [ -n "$LP" ] && kill -KILL "$LP" 2>/dev/null
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$failures" -eq 0 ]; then rm -rf "$WORK"; else echo "artifacts kept in $WORK"; fi
}
