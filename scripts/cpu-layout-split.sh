#!/usr/bin/env bash
# Where the CPU decode's step goes at the CPU target point (llama-3.1-8b, fp16 KV, batch 8,
# context 8192, h = 0): the layout, the decode's order, or its arithmetic. Runs decodebench_bench
# RUNS times, one process each (on a shared machine memory can change speed between moments, so
# every line compares benchmarks of one moment), timing in each, cold:
#   decode                     the decode
#   paged_read                 its memory walk without the arithmetic (same order, same prefetches)
#   layout_read/whole_blocks   the same KV read block by block, the fastest order found for
#                              shuffled blocks
#   layout_read/sequential     the same KV read front to back
# and prints one line per process (step times, the sequential read's GB/s, and each of the other
# three as a fraction of it), then the medians of those fractions, split at --fast-above GB/s
# when given (the Zen 5 VM's two memory regimes: --fast-above 62).
# Result on that VM: results/cpu-amd-epyc-zen5-2vcpu/layout-read.txt.
#
#   scripts/cpu-layout-split.sh [RUNS] [--build-dir DIR] [--fast-above GBPS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() { echo "usage: $0 [RUNS] [--build-dir DIR] [--fast-above GBPS]" >&2; exit 2; }
runs=20
build_dir="${DECODEBENCH_BUILD_DIR:-build}"
fast_above=0
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then runs="$1"; shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="${2:?--build-dir needs a value}"; shift 2 ;;
    --fast-above) fast_above="${2:?--fast-above needs a value}"; shift 2 ;;
    *) echo "cpu-layout-split: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "cpu-layout-split: RUNS must be a positive whole number, got '$runs'" >&2; exit 2; }
[[ "$fast_above" =~ ^[0-9]+([.][0-9]+)?$ ]] ||
  { echo "cpu-layout-split: --fast-above must be GB/s (a number), got '$fast_above'" >&2; exit 2; }

scripts/bootstrap.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDECODEBENCH_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" --target decodebench_bench -j"$(nproc)"
bench="$build_dir/bench/decodebench_bench"
filter='^(decode|paged_read)/llama-3.1-8b/kv:f16/batch:8/ctx:8192/avx512|^layout_read/'
if ! "$bench" --benchmark_list_tests --benchmark_filter="$filter" | grep -q '^decode/'; then
  echo "cpu-layout-split: this build has no AVX-512 decode (the target point's avx512 path)" >&2
  exit 3
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "# $bench --benchmark_filter='$filter', one process per line, $(date -u +%F) UTC, commit $(git rev-parse --short HEAD)"
echo "# columns: step ms of decode, paged_read, whole_blocks, sequential; sequential GB/s;"
echo "#          GB/s of decode, paged_read, whole_blocks over sequential GB/s (same process); end time"
for ((i = 1; i <= runs; ++i)); do
  "$bench" --benchmark_filter="$filter" --benchmark_format=json >"$tmp/run.json" 2>/dev/null
  python3 - "$tmp/run.json" <<'PY' | tee -a "$tmp/lines"
import json, sys, time
t = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    name = b["name"]
    key = ("decode" if name.startswith("decode/") else "paged_read" if name.startswith("paged_read/")
           else "whole" if "/whole_blocks/" in name else "seq")
    t[key] = (b["real_time"], b["bytes_per_second"] / 1e9)
seq = t["seq"][1]
print("%.2f %.2f %.2f %.2f  %.1f  %.3f %.3f %.3f  %s" % (
    t["decode"][0], t["paged_read"][0], t["whole"][0], t["seq"][0], seq,
    t["decode"][1] / seq, t["paged_read"][1] / seq, t["whole"][1] / seq, time.strftime("%H:%M:%S", time.gmtime())))
PY
done
python3 - "$tmp/lines" "$fast_above" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
threshold = float(sys.argv[2])
groups = ([("fast, > %g GB/s" % threshold, lambda g: g > threshold), ("slow, <= %g GB/s" % threshold, lambda g: g <= threshold)]
          if threshold > 0 else [("all", lambda g: True)])
print("# medians over processes, as fractions of the sequential read of the same process:")
for label, keep in groups:
    sel = [r for r in rows if keep(float(r[4]))]
    if not sel:
        print("#   %s: no processes" % label)
        continue
    med = [statistics.median(float(r[c]) for r in sel) for c in (7, 6, 5)]
    gbps = [float(r[4]) for r in sel]
    print("#   %s (%d processes, %.1f-%.1f GB/s): whole_blocks %.3f, paged_read %.3f, decode %.3f"
          % (label, len(sel), min(gbps), max(gbps), *med))
PY
