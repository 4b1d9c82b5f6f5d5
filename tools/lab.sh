#!/usr/bin/env bash
# The Shesha lab, one command: installs the Debian packages it needs, builds the switch, the
# traffic tools and the DRL learner/worker in build/, and runs a virtual-rack experiment (the
# default scenario: FIFO against full Shesha, seeds 1-3; configs/lab-four-arms.yaml has four arms),
# writing report-lab-<time>/report.md with tables and plots. The default scenario takes about 8.5
# minutes (a run ends early once every job reached its target). --seeds 4-13 runs other seeds.
#
# usage: sudo tools/lab.sh [--no-install] [--build-dir DIR] [SCENARIO.yaml] [shesha-lab options...]
#   e.g. sudo tools/lab.sh --quick                       (all arms, about 2 minutes)
#        sudo tools/lab.sh configs/lab-two-racks.yaml    (two racks joined by a spine)
#        tools/lab/shesha-lab replot report-lab-<time>   (redo figures and report from raw data)
# Options after the script's own go to tools/lab/shesha-lab (--quick, --out DIR, --arms A,B,
# --duration S, --processes auto|drl|synthetic); see docs/lab.md.
set -euo pipefail
cd "$(dirname "$0")/.."

INSTALL=1
BUILD=build
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --no-install) INSTALL=0; shift ;;
        --build-dir) BUILD=$2; shift 2 ;;
        -h|--help) sed -n 2,13p "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "lab: needs root (network namespaces, raw sockets): run it with sudo" >&2; exit 2; }

if [ $INSTALL -eq 1 ]; then
    ./tools/install-deps.sh
    [ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" --buildtype=release
    # Only what the lab runs (the tests and benchmarks are not needed for it).
    ninja -C "$BUILD" switch/dpdk/shesha-switch tools/gen/shesha-gen tools/sink/shesha-sink tools/sim/shesha-sim \
        learner/shesha-learner worker/shesha-worker
fi
# Debian's interpreter: it has python3-yaml and python3-matplotlib (a python3 earlier on PATH may not).
exec /usr/bin/python3 tools/lab/shesha-lab run --build-dir "$BUILD" "${args[@]}"
