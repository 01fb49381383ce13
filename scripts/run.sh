#!/usr/bin/env bash
# README command one: install what is missing, build, and run the default sweep on the best
# backend present (CUDA when a GPU is there, else the CPU). Prints the table and writes
# results/latest.json (the run before it becomes results/previous.json). Extra arguments go to
# `decodebench sweep` (a --config, --backend or --out given here replaces the default one), e.g.
#   scripts/run.sh --batch 1,8 --context 4096 --kv-dtype f16,fp8_e4m3
#   scripts/run.sh --config configs/sweeps/smoke.json      # what .ci/run does first
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/bootstrap.sh
build_dir="${DECODEBENCH_BUILD_DIR:-build}"
# A first build compiles what the sweep runs: the binary alone, without the test suites and the
# emulated kernels (most of a CPU build's time), and without the CUDA kernels when no GPU is
# present (16 of the 18 minutes of a 2-core first build). scripts/test.sh turns them all on in
# the same build dir; an existing build dir is used as it is configured.
first=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  first=(-DDECODEBENCH_BUILD_TESTS=OFF -DDECODEBENCH_BUILD_BENCH=OFF -DDECODEBENCH_EMU=OFF)
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "run.sh: no GPU (nvidia-smi -L): building the cpu backend only" >&2
    first+=(-DDECODEBENCH_CUDA=OFF)
  fi
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${first[@]}" >/dev/null
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
