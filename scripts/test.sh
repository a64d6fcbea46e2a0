#!/usr/bin/env bash
# Install what the tests need, then run every test: formatting and lints, Rust unit and
# integration tests, the Python SDK's tests against the built binary, and each fuzz target for
# a bounded time. Safe to run again: installed pieces are skipped.
#
#   FUZZ_SECONDS=20   time per fuzz target, twice that for the eBPF verifier (0 skips fuzzing)
#   HOTPLANE_BUILD_CACHE=DIR   where build products are kept between runs (default
#                     ~/.cache/hotplane/build; empty: build inside the checkout, as cargo does)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# 14 targets: 20 s each keeps the whole command inside its 40 minutes (with the Mininet and
# PTF runs, about 37 minutes on this machine).
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
start=$(date +%s)
# Each step says when it started, so a slow one shows in the log.
step() { printf '\n== %s (at %ds)\n' "$*" "$(( $(date +%s) - start ))"; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/hotplane"
# Dependencies compile once, not in every fresh clone: cargo's build products live outside the
# checkout (a clone still recompiles all of its own crates: their sources are newer than any
# earlier build). Each clone path adds a few GB of its own crates, so the cache starts over when
# it passes 40 GB.
build_cache=${HOTPLANE_BUILD_CACHE-"$cache/build"}
if [ -n "$build_cache" ]; then
  mkdir -p "$build_cache"
  if [ "$(du -sk "$build_cache" | cut -f1)" -gt $((40 * 1024 * 1024)) ]; then
    echo "build cache $build_cache passed 40 GB: starting over" >&2
    rm -rf "$build_cache"/target "$build_cache"/fuzz
  fi
  export CARGO_TARGET_DIR="$build_cache/target"
fi
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
BIN="$TARGET/debug/hotplane"
# Fuzz builds (sanitizer flags) kept apart from the others, which they would otherwise rebuild.
FUZZ_TARGET=${build_cache:+$build_cache/fuzz}
FUZZ_TARGET=${FUZZ_TARGET:-$REPO/fuzz/target}
# Tests that could not run here (no shared data, no root): named at the end, never passed.
not_run=()

step "toolchain"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo --version
python3 --version
# Debug, ASan and fuzz builds take about 13 GB; a full disk shows up much later as a linker
# "Bus error", so say it first.
free_kb=$(df -Pk "${build_cache:-$REPO}" | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt $((14 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kb / 1024)) MiB free under ${build_cache:-$REPO}; the builds need about 13 GB" >&2
fi

# System packages the tests need: a C toolchain for the fuzzers' libFuzzer, iproute2 for the
# network-namespace tests, util-linux for `setpriv` (privilege tests), clang and libbpf-dev
# for the eBPF C examples and C-source updates.
# python3-venv for the P4Runtime clients' virtual environments; Mininet (without Open vSwitch,
# which it only recommends) and ping for the Mininet topologies.
APT_PACKAGES=(build-essential iproute2 util-linux clang llvm libbpf-dev python3-venv iputils-ping mininet)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  step "apt: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "need root to install: ${missing[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

step "python packages"
python3 -m pip install -q --disable-pip-version-check -e "$REPO/python[test]"

if [ "$FUZZ_SECONDS" != 0 ] && ! command -v cargo-fuzz >/dev/null 2>&1; then
  step "cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "note: not root: the network-namespace tests will fail (they need CAP_SYS_ADMIN and CAP_NET_ADMIN)" >&2
fi
# Namespaces left by a killed earlier run.
for ns in $(ip netns list 2>/dev/null | awk '/^hp(lab|-ptf|-mn|-topo|-finsy)-/{print $1}'); do
  pid=${ns#hplab-}; pid=${pid#hp-ptf-*-}; pid=${pid#hp-mn-}; pid=${pid#hp-topo-}; pid=${pid#hp-finsy-}; pid=${pid%%-*}
  [ -d "/proc/$pid" ] || ip netns del "$ns" 2>/dev/null || true
done

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The crate graph in docs/architecture.md is drawn from the manifests: it must be current.
python3 scripts/crate-graph.py --check

step "rust tests"
# The public eBPF conformance suite is shared data next to the checkout: its tests are
# ignored by a plain `cargo test` and run here where the suite is; without it they are named
# below, never counted as passed.
shared="${HOTPLANE_SHARED:-$REPO/../shared}"
cargo test --workspace --quiet
if [ -n "${HOTPLANE_EBPF_CONFORMANCE:-}" ] || [ -d "$shared/conformance/ebpf/tests" ]; then
  HOTPLANE_SHARED="$shared" cargo test -p hotplane-ebpf --test conformance --quiet -- --ignored
else
  not_run+=("the eBPF conformance suite (crates/ebpf/tests/conformance.rs; set HOTPLANE_SHARED)")
fi

step "P4Runtime .proto files, wire-equal to upstream v1.5.0 (the finsy 0.30.0 wheel from PyPI)"
wheel="$cache/finsy-0.30.0-py3-none-any.whl"
if [ ! -f "$wheel" ]; then
  python3 -m pip download -q --disable-pip-version-check --no-deps finsy==0.30.0 -d "$cache"
fi
echo "29f5194b40ac1c19caacbc4a138b3208b1efa1a6d930c51bccd834d273d22097  $wheel" | sha256sum -c --quiet
rm -rf target/finsy-wheel
python3 -m zipfile -e "$wheel" target/finsy-wheel
# --workspace keeps the features of the "rust tests" step: with -p, cargo would rebuild the P4
# compiler without its native back-end (about 150 s).
HOTPLANE_FINSY_PROTO="$REPO/target/finsy-wheel/finsy/proto" \
  cargo test --workspace --test wire --quiet -- --ignored

step "smallest build: engine, native stages, eBPF and tables (no LuaJIT, no P4, no Cranelift)"
cargo clippy -p hotplane --no-default-features --all-targets --quiet -- -D warnings
cargo test -p hotplane --no-default-features --quiet
cargo test -p hotplane-p4 --no-default-features --lib --quiet

step "table concurrency tests under the address sanitizer"
# Deletes racing in-place writes, grace periods, dynamic entries freed by the control plane:
# the sanitizer catches a use after free the assertions alone could miss. RUSTC_BOOTSTRAP lets
# the installed stable rustc accept -Zsanitizer (as for cargo-fuzz).
HOTPLANE_TEST_SCALE=0.2 RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" \
  cargo test -p hotplane-tables --tests --target x86_64-unknown-linux-gnu --target-dir "$TARGET/asan" --quiet

step "python tests"
cargo build -p hotplane --quiet
# docs/cli.md is the binary's own --help, every command: it must be current.
python3 scripts/cli-doc.py --bin "$BIN" --check
# Every command block the docs mark runnable, against the data plane it names; and the runner
# itself fails on a broken command.
python3 scripts/run-docs.py --bin "$BIN"
if python3 scripts/run-docs.py --bin "$BIN" tests/docs/broken.md >/dev/null 2>&1; then
  echo "scripts/run-docs.py passed a broken command"; exit 1
fi
HOTPLANE_BIN="$BIN" python3 -m pytest -q "$REPO/python/tests"

step "P4Runtime: a p4runtime-shell session against hotplane run"
# p4runtime-shell pins protobuf 3.20 (other clients need newer): its own environment, cached
# between runs.
venv="$cache/venv-p4runtime-shell-0.0.6"
if ! "$venv/bin/python" -c "import p4runtime_sh" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check p4runtime-shell==0.0.6
fi
# A client that hangs (a stream the server never ends) fails the step instead of the run.
HOTPLANE_BIN="$BIN" timeout 300 "$venv/bin/python" tests/p4runtime/shell_session.py

step "P4Runtime: a finsy controller (a learning switch: digests, idle timeouts, cookie, delete_all)"
# finsy needs a newer protobuf than p4runtime-shell: its own environment, from the wheel the
# .proto check fetched.
venv="$cache/venv-finsy-0.30.0"
if ! "$venv/bin/python" -c "import finsy" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$wheel"
fi
rc=0
HOTPLANE_BIN="$BIN" timeout 300 "$venv/bin/python" tests/p4runtime/finsy_session.py || rc=$?
case $rc in
  0) ;;
  2) not_run+=("the finsy session") ;;
  *) exit 1 ;;
esac

step "P4Runtime: the p4lang tutorials' PTF tests (basic, basic_tunnel), unchanged, in a network namespace"
# The tutorials' p4runtime_lib and PTF: protobuf 3.20 as the tutorials' VM has it, and the
# p4.tmp.P4DeviceConfig module PI would provide (tests/p4runtime/p4tmp).
venv="$cache/venv-tutorials-1"
if ! "$venv/bin/python" -c "import ptf, scapy, p4.v1.p4runtime_pb2" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check p4runtime==1.4.1 protobuf==3.20.3 \
    grpcio==1.85.3 ptf==0.12.0 scapy==2.8.0
fi
site=$("$venv/bin/python" -c "import os, p4; print(os.path.dirname(p4.__file__))")
rm -rf "$site/tmp" && cp -r tests/p4runtime/p4tmp "$site/tmp"
rc=0
HOTPLANE_BIN="$BIN" "$venv/bin/python" tests/p4runtime/tutorials_ptf.py || rc=$?
case $rc in
  0) ;;
  2) not_run+=("the tutorials' PTF tests") ;;
  *) exit 1 ;;
esac

step "P4Runtime in Mininet: three hotplane switches and one controller; the tutorials' exercises"
# Debian's python3 (Mininet is its package) with the P4Runtime client packages and what the
# SDK (python/, put on sys.path by the tests) needs.
venv="$cache/venv-mininet-1"
if ! "$venv/bin/python" -c "import mininet, grpc, psutil, blake3, p4.v1.p4runtime_pb2" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check p4runtime==1.4.1 protobuf==3.20.3 \
    grpcio==1.85.3 scapy==2.8.0 psutil==7.1.3 blake3==1.0.11
fi
site=$("$venv/bin/python" -c "import os, p4; print(os.path.dirname(p4.__file__))")
rm -rf "$site/tmp" && cp -r tests/p4runtime/p4tmp "$site/tmp"
for t in mininet_topology tutorials_mininet; do
  rc=0
  HOTPLANE_BIN="$BIN" "$venv/bin/python" "tests/p4runtime/$t.py" || rc=$?
  case $rc in
    0) ;;
    2) not_run+=("tests/p4runtime/$t.py") ;;
    *) exit 1 ;;
  esac
done

step "benchmark smoke runs (correct JSON; speed is measured by 'hotplane bench', not here)"
smoke=("pipeline --packets 1000000 --no-testpmd" "swap --swaps 50")
if [ "$(id -u)" -eq 0 ]; then
  smoke+=("veth --port afxdp --trial-ms 200 --steps 2" "veth --port afpacket --trial-ms 200 --steps 2 --no-kernel")
  smoke+=("ebpf --packets 100000 --repeat 1 --updates 20")
  # Every WASP application across four hotplane routers and a Linux router (about 10 s).
  smoke+=("wasp-net")
else
  smoke+=("ebpf --packets 100000 --repeat 1 --updates 20 --no-kernel")
fi
smoke+=("lua --packets 200000 --repeat 1" "lua-dyn --before 5000 --after 20000 --out target/bench-smoke")
smoke+=("tables --min-log2 8 --max-log2 12 --step 4 --packets 50000 --lpm-prefixes 20000 --out target/bench-smoke")
smoke+=("p4 --program tests/p4/basic.p4 --entries tests/p4/basic.json --packets 200000")
smoke+=("wasp --packets 20000 --repeat 1 --scale-entries 100000")
# Exits non-zero if the differential checker finds a mismatch.
smoke+=("chain --packets 20000 --repeat 1 --optimise-runs 3 --check 20000")
# Exits non-zero if a packet of the traffic flowing during the writes is lost.
smoke+=("p4runtime --singles 200 --batched 2000 --probes 50")
for cmd in "${smoke[@]}"; do
  out=$("$BIN" bench $cmd --json | tail -n 1)
  echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert d["bench"]; print(d["bench"], "ok")'
done

if [ "$FUZZ_SECONDS" != 0 ]; then
  for target in envelope classify capture ebpf_bytecode ebpf_elf lua_source table_text p4_source p4_control wasp_packet chain_shape chain_specialise p4rt_request api_request; do
    # The walls that bound untrusted code get more time than the other parsers: the verifier
    # (checked by the memory-safety oracle on every accepted program) twice the share.
    seconds=$FUZZ_SECONDS
    # The shape JSON is a small surface fuzzed for millions of runs already: half the share.
    case "$target" in
      ebpf_bytecode) seconds=$((FUZZ_SECONDS * 2)) ;;
      chain_shape) seconds=$((FUZZ_SECONDS / 2)) ;;
    esac
    step "fuzz $target (${seconds}s)"
    mkdir -p "fuzz/corpus/$target" target
    log="target/fuzz-$target.log"
    # cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the installed stable rustc accept them.
    # LuaJIT keeps some of its allocations reachable only from its machine-code area, which the
    # leak checker does not scan: leak reports from lua_source are false positives.
    extra=()
    asan="${ASAN_OPTIONS:-}"
    # Programs the repository already has seed their fuzzers; libFuzzer only writes to the first
    # corpus directory, so these are read, never changed.
    seeds=("fuzz/seeds/$target")
    case "$target" in
      lua_source) seeds+=(examples/lua) ;;
      p4_source | p4_control) seeds+=(tests/p4) ;;
    esac
    # A Lua input that loops past its step checks shows up as a 10 s timeout, not after
    # libFuzzer's default 20 minutes.
    if [ "$target" = lua_source ]; then extra=(-detect_leaks=0 -timeout=10); asan="detect_leaks=0"; fi
    if ! ASAN_OPTIONS="$asan" RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" --fuzz-dir fuzz \
      --target-dir "$FUZZ_TARGET" "fuzz/corpus/$target" "${seeds[@]}" \
      -- -max_total_time="$seconds" "${extra[@]}" >"$log" 2>&1; then
      tail -n 60 "$log" >&2
      echo "fuzz target $target failed; the crashing input is under fuzz/artifacts/$target/" >&2
      exit 1
    fi
    # Runs, then coverage and features at the end (the "after" figures of docs/security.md).
    grep -E '^Done' "$log"
    { grep -E '^#[0-9]+[[:space:]]+DONE' "$log" || true; } | tail -n 1
  done
fi

if [ ${#not_run[@]} -gt 0 ]; then
  printf 'NOT RUN (not counted as passed): %s\n' "${not_run[@]}"
  step "the tests that ran passed in $(( $(date +%s) - start ))s; ${#not_run[@]} did not run (above)"
else
  step "all tests passed in $(( $(date +%s) - start ))s"
fi
