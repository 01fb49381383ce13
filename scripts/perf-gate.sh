#!/usr/bin/env bash
# CI performance gate (for a performance job on a GPU runner, not for .ci/run: these CI
# machines are shared and noisy, so unit tests never pass or fail on a timing).
# Re-runs the sweep a baseline report was made with, on the same backend, and compares the two
# with `decodebench compare`: exit 1 when any point is slower than the baseline by more than
# --max-slowdown (ratio of median times) or has become wrong; 0 otherwise.
#
#   scripts/perf-gate.sh results/<gpu>/gpu-check.json [--max-slowdown 0.05] [--build-dir build]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() { echo "usage: $0 BASELINE.json [--max-slowdown FRACTION] [--build-dir DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
baseline="$1"; shift
max_slowdown=0.05
build_dir=build
while [ $# -gt 0 ]; do
  case "$1" in
    --max-slowdown) max_slowdown="${2:?}"; shift 2 ;;
    --build-dir) build_dir="${2:?}"; shift 2 ;;
    *) usage ;;
  esac
done
[ -f "$baseline" ] || { echo "perf-gate: baseline '$baseline' does not exist" >&2; exit 2; }

scripts/bootstrap.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" --target decodebench -j"$(nproc)"
bin="$build_dir/src/cli/decodebench"

# The baseline's own resolved sweep is the config of the rerun.
config="$(mktemp --suffix=.json)"
current="$(mktemp --suffix=.json)"
trap 'rm -f "$config" "$current"' EXIT
python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["config"], open(sys.argv[2], "w"), indent=1)' \
  "$baseline" "$config"
"$bin" sweep --config "$config" --out "$current"
"$bin" compare "$baseline" "$current" --max-slowdown "$max_slowdown"
