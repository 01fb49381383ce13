#!/usr/bin/env bash
# README command two: install what is missing, build, and run the whole test suite.
#   0. scripts/check-style.sh: clang-format, commit subjects, wording (seconds);
#   1. the normal build: every test (host, CPU backend, harness, CLI, emulated kernels); with
#      nvcc present the CUDA kernels are compiled for the build dir's CMAKE_CUDA_ARCHITECTURES
#      (sm_90a, or what scripts/run.sh chose for its GPU) and, compile only, for sm_80 and
#      sm_100a (docs/design.md "GPU architectures"), and scripts/check-spills.sh reads
#      the built kernel library: any stack frame (register spills) or local memory in a decode
#      kernel, or a kernel outside the known namespaces, fails (table: build/kernel-resources.md,
#      followed by the static model's table of the same library: decodebench kernels --static);
#   2. an AddressSanitizer+UBSan build of the emulated tests (ctest -L asan);
#   3. a ThreadSanitizer build of the emulated tests and the harness suite, whose runner starts a
#      thread of its own (ctest -L tsan);
#   4. the fuzz stage: the libFuzzer targets of the file readers (tests/fuzz: sweep configs,
#      reports, .npy, model presets, datasheets, request traces; clang, ASan+UBSan, only the
#      reader libraries compiled), each run 30 s over its committed corpus (tests/fuzz/run.sh);
#      any crash fails.
# Options: --quick skips the sanitizer builds and the fuzz stage. Build dirs: build/
# ($DECODEBENCH_BUILD_DIR, as for scripts/run.sh), build-asan/, build-tsan/, build-fuzz/.
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

if [ "$quick" -eq 0 ]; then scripts/bootstrap.sh --fuzz; else scripts/bootstrap.sh --tests; fi
build_dir="${DECODEBENCH_BUILD_DIR:-build}"
jobs="$(nproc)"
start=$SECONDS
stamp() { printf '\n=== %s (%ds elapsed) ===\n' "$1" $((SECONDS - start)); }

stamp "style"
scripts/check-style.sh

stamp "normal build"
# Everything on, explicitly: scripts/run.sh's first build of the same dir leaves some of it out.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDECODEBENCH_BUILD_TESTS=ON \
  -DDECODEBENCH_BUILD_BENCH=ON -DDECODEBENCH_EMU=ON -DDECODEBENCH_CUDA=ON
cmake --build "$build_dir" -j"$jobs"
if [ -d "$build_dir/kernels/CMakeFiles/decodebench_kernels_cuda.dir" ]; then  # nvcc was found
  # The gate reads the built library itself (cuobjdump), so it does not matter which command
  # built it or whether this build compiled anything.
  stamp "spill check (CUDA kernels)"
  scripts/check-spills.sh "$build_dir/kernels/libdecodebench_kernels_cuda.a" \
    --markdown "$build_dir/kernel-resources.md"
  # The static model of the same library (main loops read from the SASS: instructions per KV
  # byte, issue-bound bandwidth, occupancy, bytes in flight), appended to the same file.
  stamp "static model (CUDA kernels)"
  {
    printf '\n## Static model (decodebench kernels --static)\n\n'
    "$build_dir/src/cli/decodebench" kernels --static --format md \
      --binary "$build_dir/kernels/libdecodebench_kernels_cuda.a"
  } >>"$build_dir/kernel-resources.md"
fi
stamp "tests"
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" --timeout 900
# How much of the GPU-bundle test's build came from the normal build's objects.
if command -v ccache >/dev/null 2>&1; then ccache --show-stats 2>/dev/null | grep -iE 'hits|misses' || true; fi

if [ "$quick" -eq 0 ]; then
  # The sanitizer builds compile only what their suites need (target decodebench_tests: the
  # emulated ones, and under TSan the harness suite; never the whole binary),
  # with the kernels instantiated for one 16-bit and one 8-bit KV format (bf16 and fp8_e5m2
  # take the same code paths through other conversions); the normal build above runs every
  # instantiation through the emulator. ASan reads all three integer formats (each indexes its
  # scales and zeros its own way) at every head dim (its faults depend on sizes); TSan int4,
  # whose staging and barriers the other two share, at head dim 128 only: a race is a missing
  # barrier, and no rung's barriers depend on the head dim (only its loop counts and array
  # sizes do).
  for san in address thread; do
    dir="build-${san/address/asan}"; dir="${dir/thread/tsan}"
    label="${dir#build-}"
    int_dtypes="$(python3 scripts/kv_formats.py --source names --ladder int_kv --sep ';')"
    head_dims="64;128;256"
    if [ "$san" = thread ]; then
      int_dtypes="int4"
      head_dims="128"
    fi
    stamp "$label build"
    # -O1 -g1: line tables are all a sanitizer report needs, and the emulated tests are quick at
    # -O1, while these builds are a third of the whole suite's time on two cores.
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDECODEBENCH_SANITIZE="$san" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
      -DDECODEBENCH_CUDA=OFF -DDECODEBENCH_BUILD_BENCH=OFF -DDECODEBENCH_CPU_ARCH=native \
      -DDECODEBENCH_KV_DTYPES="f16;fp8_e4m3" -DDECODEBENCH_INT_KV_DTYPES="$int_dtypes" \
      -DDECODEBENCH_HEAD_DIMS="$head_dims"
    cmake --build "$dir" --target decodebench_tests -j"$jobs"
    stamp "$label tests"
    ctest --test-dir "$dir" -L "$label" --output-on-failure -j"$jobs" --timeout 1800
  done

  stamp "fuzz build"
  # Asserts stay on (no -DNDEBUG): a failed assertion is a finding.
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDECODEBENCH_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DDECODEBENCH_CUDA=OFF -DDECODEBENCH_BUILD_TESTS=OFF -DDECODEBENCH_BUILD_BENCH=OFF
  cmake --build build-fuzz --target decodebench_fuzz -j"$jobs"
  stamp "fuzz (30 s per target)"
  tests/fuzz/run.sh build-fuzz 30
fi
stamp "all tests passed"
