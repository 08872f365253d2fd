#!/usr/bin/env bash
# The NCCL backend of libprimus-coll on a machine with a GPU, in about a minute: builds what it
# needs with g++ alone (no configure, no make) and runs tests/device/nccl_check.cpp's steps:
#   collectives      a 1-rank communicator: allreduce (sum, float32, 1M elements, checked on the
#                    host), broadcast, allgather and reduce_scatter of every dtype, barrier
#   exchange-tcp     exchange_nccl_unique_id over a 2-process TCP store (rank 1 uses no GPU)
#   exchange-fork    the same over a socketpair (also where OpenSSL's headers are missing)
#   init-timeout     a 2-rank NCCL init whose rank 1 never comes: aborted by the watchdog
#   op-timeout       a collective held back on the GPU: aborted at the timeout, later calls throw
#   two-ranks-tcp    no GPU: the host reference of two-ranks against the TCP backend, and
#                    backends that confuse dtypes or ops are noticed
#   two-ranks        a 2-rank NCCL communicator in two processes: every collective, dtype and op
#                    against the host reference, bit for bit (one GPU per rank where there are
#                    two; on one GPU both ranks as two NCCL hosts: NCCL_HOSTID per rank,
#                    NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1; a FAIL line says when neither works)
# Prints PASS/FAIL lines and exits non-zero on any failure.
#
# Usage (from anywhere; works on the repository it sits in):
#   scripts/device/nccl-check.sh [--build-only]
# Environment: CUDA_HOME (default /usr/local/cuda), NCCL_HOME (where include/nccl.h and
# lib/libnccl.so* are; default: CUDA_HOME, then /usr, then Python's nvidia-nccl wheel),
# NCCL_CHECK_BUILD (build folder, default /tmp/primus-nccl-check), NCCL_DEBUG (default WARN).
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUILD=${NCCL_CHECK_BUILD:-/tmp/primus-nccl-check}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
CXX=${CXX:-g++}
mkdir -p "$BUILD" || exit 2
LOG=$BUILD/nccl-check.log
: >"$LOG"

failed=0
passed=0
say() { echo "$*" | tee -a "$LOG"; }
pass() { say "PASS $*"; passed=$((passed + 1)); }
fail() { say "FAIL $*"; failed=$((failed + 1)); }
finish() {
  say "nccl-check: $passed passed, $failed failed (log: $LOG)"
  [ "$failed" -eq 0 ]
  exit $?
}

# ------------------------------------------------------------------ find CUDA and NCCL
libdir_of() {  # the first of lib64, lib, targets/x86_64-linux/lib under $1 holding $2*
  local d
  for d in "$1/lib64" "$1/lib" "$1/targets/x86_64-linux/lib" "$1/lib/x86_64-linux-gnu"; do
    if ls "$d/$2"* >/dev/null 2>&1; then echo "$d"; return 0; fi
  done
  return 1
}
lib_file() {  # $1/$2.so, else the first $1/$2.so.*
  if [ -e "$1/$2.so" ]; then echo "$1/$2.so"; else ls "$1/$2".so.* 2>/dev/null | head -n 1; fi
}

nccl_roots=()
[ -n "${NCCL_HOME:-}" ] && nccl_roots+=("$NCCL_HOME")
nccl_roots+=("$CUDA_HOME" /usr)
if command -v python3 >/dev/null 2>&1; then
  for sp in $(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null); do
    for h in $(find "$sp/nvidia" -maxdepth 4 -name nccl.h -path '*include*' 2>/dev/null); do
      nccl_roots+=("$(dirname "$(dirname "$h")")")
    done
  done
fi
NCCL_INC=""
NCCL_LIB=""
for r in "${nccl_roots[@]}"; do
  inc=""
  for i in "$r/include" "$r/include/x86_64-linux-gnu"; do
    [ -f "$i/nccl.h" ] && inc=$i && break
  done
  [ -n "$inc" ] || continue
  d=$(libdir_of "$r" libnccl.so) || continue
  NCCL_INC=$inc
  NCCL_LIB=$(lib_file "$d" libnccl)
  break
done
CUDART_DIR=$(libdir_of "$CUDA_HOME" libcudart.so) || CUDART_DIR=""
CUDA_INC=$CUDA_HOME/include
[ -f "$CUDA_INC/cuda_runtime.h" ] || CUDA_INC=""

if [ -z "$NCCL_INC" ] || [ -z "$NCCL_LIB" ] || [ -z "$CUDART_DIR" ] || [ -z "$CUDA_INC" ]; then
  fail "setup: CUDA or NCCL not found (nccl.h '${NCCL_INC}', libnccl '${NCCL_LIB}'," \
    "libcudart in '${CUDART_DIR}', cuda_runtime.h in '${CUDA_INC}'); set CUDA_HOME/NCCL_HOME"
  finish
fi
CUDART=$(lib_file "$CUDART_DIR" libcudart)
say "info: $($CXX --version | head -n 1); nccl.h from $NCCL_INC; $NCCL_LIB; $CUDART"
command -v nvidia-smi >/dev/null 2>&1 && say "info: $(nvidia-smi -L 2>&1 | head -n 2 | tr '\n' ' ')"

# ------------------------------------------------------------------ build
have_openssl=yes
if ! echo '#include <openssl/hmac.h>' | $CXX -x c++ -E - >/dev/null 2>&1; then
  have_openssl=no
fi
CRYPTO=(-lcrypto)
if [ $have_openssl = yes ] && ! echo 'int main(){}' | $CXX -x c++ - -lcrypto -o "$BUILD/crypto-probe" \
  >/dev/null 2>&1; then
  lib=$(ls /usr/lib/x86_64-linux-gnu/libcrypto.so.* /usr/lib64/libcrypto.so.* 2>/dev/null | head -n 1)
  if [ -n "$lib" ]; then CRYPTO=("$lib"); else have_openssl=no; fi
fi

sources=(
  collectives/dtype.cpp collectives/reduce.cpp collectives/socket.cpp collectives/settings.cpp
  collectives/schedule.cpp
  collectives/nccl/watchdog.cpp collectives/nccl/unique_id.cpp
  collectives/nccl/nccl_communicator.cpp collectives/nccl/nccl_api_real.cpp
  collectives/nccl/available_yes.cpp collectives/nccl/factory_yes.cpp
  tests/device/nccl_check.cpp
)
defines=()
libs=()
if [ $have_openssl = yes ]; then
  sources+=(collectives/handshake.cpp collectives/authenticated.cpp collectives/tcp_store.cpp
    collectives/tcp_communicator.cpp)
  libs+=("${CRYPTO[@]}")
else
  defines+=(-DNCCL_CHECK_NO_TCP_STORE)
  say "info: no OpenSSL headers: the TCP store and two-ranks-tcp steps are left out" \
    "(exchange-fork and two-ranks still run)"
fi

CXXFLAGS=(-std=c++17 -O2 -g -Wall -Wextra -I"$ROOT/include" -I"$ROOT/collectives"
  -I"$CUDA_INC" -I"$NCCL_INC" "${defines[@]}")
objects=()
pids=()
for s in "${sources[@]}"; do
  o=$BUILD/$(echo "$s" | tr '/' '_').o
  objects+=("$o")
  timeout 120 $CXX "${CXXFLAGS[@]}" -c "$ROOT/$s" -o "$o" >"$o.log" 2>&1 &
  pids+=($!)
done
build_ok=yes
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    build_ok=no
    fail "build: ${sources[$i]}"
    tail -n 20 "${objects[$i]}.log" | tee -a "$LOG"
  fi
done
[ $build_ok = yes ] || finish
BIN=$BUILD/nccl_check
if ! timeout 120 $CXX "${objects[@]}" -o "$BIN" "$NCCL_LIB" "$CUDART" \
  -Wl,-rpath,"$(dirname "$NCCL_LIB")" -Wl,-rpath,"$CUDART_DIR" "${libs[@]}" -lpthread \
  >"$BUILD/link.log" 2>&1; then
  fail "build: link"
  tail -n 20 "$BUILD/link.log" | tee -a "$LOG"
  finish
fi
pass "build: $BIN"
if [ "${1:-}" = --build-only ]; then finish; fi

# ------------------------------------------------------------------ run
run_step() {  # name seconds args...: the program's PASS/FAIL lines, and its exit status
  local name=$1 limit=$2
  shift 2
  local out rc
  out=$(timeout "$limit" "$BIN" "$@" 2>&1)
  rc=$?
  echo "$out" >>"$LOG"
  echo "$out" | grep -v '^PASS\|^FAIL'
  while IFS= read -r line; do
    case $line in
      PASS\ *) pass "${line#PASS }" ;;
      FAIL\ *) fail "${line#FAIL }" ;;
    esac
  done <<<"$out"
  if [ $rc -eq 124 ]; then
    fail "$name: timed out after $limit s"
  elif [ $rc -ne 0 ] && ! echo "$out" | grep -q '^FAIL'; then
    fail "$name: exit status $rc"
  fi
}

run_step collectives 90 collectives

if [ $have_openssl = yes ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' \
    2>/dev/null || echo 29517)
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  PRIMUS_JOB_SECRET=$secret timeout 60 "$BIN" exchange-tcp 1 "$port" >"$BUILD/rank1.out" 2>&1 &
  rank1=$!
  PRIMUS_JOB_SECRET=$secret run_step exchange-tcp-rank0 60 exchange-tcp 0 "$port"
  wait $rank1
  rc=$?
  unset secret
  cat "$BUILD/rank1.out" >>"$LOG"
  while IFS= read -r line; do
    case $line in
      PASS\ *) pass "${line#PASS }" ;;
      FAIL\ *) fail "${line#FAIL }" ;;
    esac
  done <"$BUILD/rank1.out"
  [ $rc -eq 0 ] || fail "exchange-tcp-rank1: exit status $rc"
else
  say "SKIP exchange-tcp: no OpenSSL headers here"
fi

run_step exchange-fork 60 exchange-fork
if [ $have_openssl = yes ]; then
  run_step two-ranks-tcp 120 two-ranks-tcp
else
  say "SKIP two-ranks-tcp: no OpenSSL headers here"
fi
run_step two-ranks 300 two-ranks
run_step init-timeout 60 init-timeout 3000
run_step op-timeout 60 op-timeout 2000
finish
