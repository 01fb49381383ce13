#!/usr/bin/env bash
# README command two: install what is missing, build, and run the whole test suite.
#   1. the normal build: every test (host, CPU backend, harness, CLI, emulated kernels); with
#      nvcc present the CUDA kernels are compiled for sm_90a and any register spill or local
#      memory in a decode kernel fails the check (scripts/check-spills.sh);
#   2. an AddressSanitizer+UBSan build of the emulated tests (ctest -L asan);
#   3. a ThreadSanitizer build of the emulated tests (ctest -L tsan).
# Options: --quick skips the sanitizer builds. Build dirs: build/, build-asan/, build-tsan/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "test.sh: unknown argument '$arg' (valid: --quick)" >&2; exit 2 ;;
  esac
done

scripts/bootstrap.sh
jobs="$(nproc)"
start=$SECONDS
stamp() { printf '\n=== %s (%ds elapsed) ===\n' "$1" $((SECONDS - start)); }

stamp "normal build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
if [ -d build/kernels/CMakeFiles/decodebench_kernels_cuda.dir ]; then  # nvcc was found
  # The CUDA kernels first, keeping ptxas -v output: build/ptxas.log accumulates the output of
  # every compile of the kernel library (a fresh clone compiles all of it), and the spill gate
  # reads it. Delete build/ptxas.log and the library to re-check from scratch.
  [ -f build/kernels/libdecodebench_kernels_cuda.a ] || rm -f build/ptxas.log
  cmake --build build --target decodebench_kernels_cuda -j"$jobs" 2>&1 | tee -a build/ptxas.log
  stamp "spill check (CUDA kernels)"
  scripts/check-spills.sh build/ptxas.log --markdown build/kernel-resources.md
fi
cmake --build build -j"$jobs"
stamp "tests"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900

if [ "$quick" -eq 0 ]; then
  # The sanitizer builds compile only what the emulated tests need (target decodebench_tests),
  # with the kernels instantiated for one 16-bit and one 8-bit KV format (bf16 and fp8_e5m2
  # take the same code paths through other conversions) and every head dim; the normal build
  # above runs every instantiation through the emulator.
  for san in address thread; do
    dir="build-${san/address/asan}"; dir="${dir/thread/tsan}"
    label="${dir#build-}"
    stamp "$label build"
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDECODEBENCH_SANITIZE="$san" \
      -DDECODEBENCH_CUDA=OFF -DDECODEBENCH_BUILD_BENCH=OFF -DDECODEBENCH_NATIVE=ON \
      -DDECODEBENCH_KV_DTYPES="f16;fp8_e4m3"
    cmake --build "$dir" --target decodebench_tests -j"$jobs"
    stamp "$label tests"
    ctest --test-dir "$dir" -L "$label" --output-on-failure -j"$jobs" --timeout 1800
  done
fi
stamp "all tests passed"
