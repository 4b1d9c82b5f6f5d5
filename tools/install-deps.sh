#!/usr/bin/env bash
# Installs every build, test and lab dependency from Debian bookworm packages.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

packages=(
  # build
  meson ninja-build pkg-config g++ cmake python3
  # data path
  dpdk dpdk-dev libdpdk-dev libnuma-dev libpcap-dev libbpf-dev libxdp-dev
  # linking DPDK statically (meson -Ddpdk_link=static, the default): pkg-config --static asks for -lsystemd
  libsystemd-dev
  # control plane
  libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  # tests
  catch2
  # RL stack
  libtorch-dev libopenblas0-pthread
  # verifier
  libz3-dev
  # lab and integration tests
  iproute2 ethtool iputils-ping tcpdump iperf3 socat tshark python3-matplotlib python3-yaml python3-pytest
  # shesha-impair (link faults: NFQUEUE rules through iptables-legacy)
  iptables
  # the Python module (pybind11) and its PyTorch proof (Debian's python3-torch: the libtorch we build against)
  python3-dev python3-numpy pybind11-dev python3-pybind11 python3-torch
  # deployment tests: systemd-analyze, node_exporter's textfile collector, a private Slurm
  systemd prometheus-node-exporter munge slurmctld slurmd slurm-client
  # shesha-bench forward's OVS-DPDK reference (run privately: the system's OVS is never started or touched)
  openvswitch-switch-dpdk
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once, non-interactively.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
# Daemon packages (node_exporter, munge, slurm) must not start their system services here: the
# tests start private instances. Where no policy-rc.d exists, one that denies starts is put in
# place for the install and removed afterwards.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# temporary, tools/install-deps.sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
