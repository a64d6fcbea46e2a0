#!/usr/bin/env bash
# Build every example with the system clang, as a user would: `clang -O2 -g -target bpf`.
# Needs clang and libbpf-dev (`apt-get install clang libbpf-dev`). The objects are checked in
# so that `hotplane demo` runs without clang; rebuild after editing a .c file.
set -euo pipefail
cd "$(dirname "$0")"
for c in *.c chain/*.c; do
    o="${c%.c}.o"
    clang -O2 -g -target bpf -I/usr/include/$(uname -m)-linux-gnu -c "$c" -o "$o"
    llvm-strip --strip-debug --keep-section=.BTF --keep-section=.BTF.ext "$o" 2>/dev/null || true
    echo "built $o ($(stat -c %s "$o") bytes)"
done
# The load balancer's parse alone (the seed's "parse part", docs/chain.md).
clang -O2 -g -target bpf -DPARSE_ONLY -I/usr/include/$(uname -m)-linux-gnu -c chain/lb6.c -o chain/lb6_parse.o
llvm-strip --strip-debug --keep-section=.BTF --keep-section=.BTF.ext chain/lb6_parse.o 2>/dev/null || true
echo "built chain/lb6_parse.o"
