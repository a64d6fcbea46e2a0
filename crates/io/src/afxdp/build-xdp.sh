#!/usr/bin/env bash
# Regenerate xdp_redirect.bpf.o from xdp_redirect.bpf.c (needs clang and libbpf-dev:
# `apt-get install clang libbpf-dev`). -g emits the BTF that describes the map to the loader.
set -euo pipefail
cd "$(dirname "$0")"
clang -O2 -g -target bpf -I/usr/include/$(uname -m)-linux-gnu -c xdp_redirect.bpf.c -o xdp_redirect.bpf.o
llvm-strip --strip-debug --keep-section=.BTF --keep-section=.BTF.ext xdp_redirect.bpf.o 2>/dev/null || true
echo "wrote $(pwd)/xdp_redirect.bpf.o ($(stat -c %s xdp_redirect.bpf.o) bytes)"
