#!/usr/bin/env bash
# Install DPDK's testpmd (Debian's dpdk-dev package), the anchor of `hotplane bench pipeline`.
# testpmd then runs without hugepages or NIC binding on two net_null ports.
set -euo pipefail
if command -v dpdk-testpmd >/dev/null 2>&1; then
  echo "dpdk-testpmd already installed: $(command -v dpdk-testpmd)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "run as root (apt-get install dpdk-dev)" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev
command -v dpdk-testpmd
