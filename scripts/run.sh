#!/usr/bin/env bash
# README command one: install what is missing, build, and run the default sweep on the best
# backend present (CUDA when a GPU is there, else the CPU). Prints the table and writes
# results/latest.json (the run before it becomes results/previous.json). Extra arguments go to
# `decodebench sweep` (a --config, --backend or --out given here replaces the default one), e.g.
#   scripts/run.sh --batch 1,8 --context 4096 --kv-dtype f16,fp8_e4m3
#   scripts/run.sh --config configs/sweeps/smoke.json      # what .ci/run does first
# With a GPU the CUDA kernels are built for the GPUs nvidia-smi lists: every distinct compute
# capability, mapped by scripts/cuda-arch.sh (8.0 -> sm_80, 8.9 -> sm_89, 9.0 -> sm_90a, 10.0 ->
# sm_100a, 12.0 -> sm_120; newer than nvcc knows: its newest plus PTX; below 8.0: refused). A
# build dir configured earlier for other architectures by run.sh is reconfigured; one whose
# CMAKE_CUDA_ARCHITECTURES was set by hand (cmake -D) is kept. An explicit choice wins:
#   DECODEBENCH_CUDA_ARCH="80;90a" scripts/run.sh  # CMAKE_CUDA_ARCHITECTURES as given (CMake's
#                                                  # syntax; CUDAARCHS, CMake's own, does too)
#   DECODEBENCH_CUDA_ARCH=none scripts/run.sh      # no CUDA kernels: the cpu backend only
# DECODEBENCH_BUILD_DIR: the build dir (default build/, shared with scripts/test.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/bootstrap.sh
build_dir="${DECODEBENCH_BUILD_DIR:-build}"
# A first build compiles what the sweep runs: the binary alone, without the test suites and the
# emulated kernels (most of a CPU build's time), and without the CUDA kernels when no GPU is
# present (16 of the 18 minutes of a 2-core first build). scripts/test.sh turns them all on in
# the same build dir; an existing build dir is used as it is configured.
cache="$build_dir/CMakeCache.txt"
cached() { if [ -f "$cache" ]; then sed -n "/^$1:[A-Z]*=/{s///p;q}" "$cache"; fi; }
gpu=0
if nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
first=()
if [ ! -f "$cache" ]; then
  first=(-DDECODEBENCH_BUILD_TESTS=OFF -DDECODEBENCH_BUILD_BENCH=OFF -DDECODEBENCH_EMU=OFF)
  if ((!gpu)) && [ -z "${DECODEBENCH_CUDA_ARCH:-}${CUDAARCHS:-}" ]; then
    echo "run.sh: no GPU (nvidia-smi -L): building the cpu backend only" >&2
    first+=(-DDECODEBENCH_CUDA=OFF)
  fi
fi

# The CUDA architectures: the caller's, else the GPUs' (scripts/cuda-arch.sh), else as the
# build dir has them. DECODEBENCH_CUDA_ARCH_AUTO records what run.sh chose, so a value that
# differs from it was set by hand.
# The nvcc CMake takes (CMakeLists.txt): the build dir's, $CUDACXX, /usr/local/cuda's, PATH's.
nvcc="$(cached CMAKE_CUDA_COMPILER)"
if [ -z "$nvcc" ]; then
  nvcc="${CUDACXX:-}"
  if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
  if [ -z "$nvcc" ]; then nvcc="$(command -v nvcc || true)"; fi
fi
arch=() want="" auto=""
have_arch="$(cached CMAKE_CUDA_ARCHITECTURES)"
explicit="${DECODEBENCH_CUDA_ARCH:-}" source=DECODEBENCH_CUDA_ARCH
if [ -z "$explicit" ] && [ -n "${CUDAARCHS:-}" ]; then explicit="$CUDAARCHS" source=CUDAARCHS; fi
if [ "$explicit" = none ]; then
  echo "run.sh: $source=none: building the cpu backend only" >&2
  arch=(-DDECODEBENCH_CUDA=OFF)
elif [ -n "$explicit" ]; then
  want="$explicit"
  arch=(-DDECODEBENCH_CUDA=ON)
  echo "run.sh: $source=$explicit: building CUDA kernels for CMAKE_CUDA_ARCHITECTURES=$want" >&2
elif ((gpu)) && [ "$(cached DECODEBENCH_CUDA)" != OFF ]; then
  if [ -z "$nvcc" ] || [[ "$nvcc" == *NOTFOUND ]]; then
    echo "run.sh: no nvcc (\$CUDACXX, /usr/local/cuda/bin, PATH): building the cpu backend only" >&2
  elif [ -n "$have_arch" ] && [ "$have_arch" != "$(cached DECODEBENCH_CUDA_ARCH_AUTO)" ]; then
    echo "run.sh: $build_dir has CMAKE_CUDA_ARCHITECTURES=$have_arch, set by hand: kept" \
      "(DECODEBENCH_CUDA_ARCH overrides it)" >&2
  elif chosen="$(scripts/cuda-arch.sh --nvcc "$nvcc" --detect 2>&1)"; then
    want="${chosen%%$'\n'*}" auto="$want"
    sed -n '2,$s/^/run.sh: /p' <<<"$chosen" >&2
  else
    sed 's/^/run.sh: /' <<<"$chosen" >&2
    echo "run.sh: no CUDA architecture to build for (DECODEBENCH_CUDA_ARCH=none builds the" \
      "cpu backend only)" >&2
    exit 1
  fi
fi
if [ -n "$want" ]; then
  # What the build dir compiled for: its cache, else its build_facts.json (CMakeLists.txt's
  # default, 90a, is not cached).
  built="$have_arch"
  if [ -z "$built" ] && [ -f "$build_dir/build_facts.json" ]; then
    built="$(sed -n 's/^ *"cuda_architectures": \[\(.*\)\],*$/\1/p' "$build_dir/build_facts.json" |
      tr -d '" ' | tr ',' ';')"
  fi
  if [ -n "$built" ] && [ "$built" != "$want" ]; then
    echo "run.sh: $build_dir was configured for CUDA architectures $built: reconfiguring" >&2
  fi
  arch+=(-DCMAKE_CUDA_ARCHITECTURES="$want" -DDECODEBENCH_CUDA_ARCH_AUTO="$auto")
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${first[@]}" "${arch[@]}" >/dev/null
cmake --build "$build_dir" --target decodebench -j"$(nproc)"

# Defaults for what the caller did not give (each option may appear only once).
defaults=(--backend auto --config configs/sweeps/default.json --out results/latest.json)
args=()
for ((i = 0; i < ${#defaults[@]}; i += 2)); do
  given=0
  for arg in "$@"; do
    case "$arg" in "${defaults[i]}" | "${defaults[i]}"=*) given=1 ;; esac
  done
  ((given)) || args+=("${defaults[i]}" "${defaults[i + 1]}")
done
mkdir -p results
# The last run stays beside the new one: scripts/plot.py draws its compare figure against it.
if [ -f results/latest.json ] && [[ " ${args[*]} " == *" results/latest.json "* ]]; then
  cp results/latest.json results/previous.json
fi
exec "$build_dir/src/cli/decodebench" sweep "${args[@]}" "$@"
