#!/usr/bin/env bash
# The CPU figure at the CPU target point, repeated: runs `decodebench sweep --config
# configs/sweeps/cpu-target.json` (llama-3.1-8b, fp16 KV, batch 8, context 8192, h = 0, cold
# caches) RUNS times, one process each, keeps every report as OUTDIR/cpu-target-runNN.json and
# prints one Markdown table row per run: the read ceiling measured at the sweep's start, the step
# median, the achieved bandwidth, % of that ceiling, the read bandwidth measured alongside the
# step (`roofline.paired_read_Bps`) and % of it (`roofline.fraction_paired`, the figure to read on
# a machine whose memory changes speed between moments). Then the range and median of % paired,
# split at --fast-above GB/s of the paired read when given (the Zen 5 VM's two memory regimes:
# --fast-above 62). Nothing is left out: a failed run stops the script with its exit code.
# Result on that VM: results/cpu-amd-epyc-zen5-2vcpu/cpu-target-runs.md.
#
#   scripts/cpu-target-runs.sh RUNS OUTDIR [--build-dir DIR] [--fast-above GBPS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() { echo "usage: $0 RUNS OUTDIR [--build-dir DIR] [--fast-above GBPS]" >&2; exit 2; }
[ $# -ge 2 ] || usage
runs="$1"
out_dir="$2"
shift 2
build_dir="${DECODEBENCH_BUILD_DIR:-build}"
fast_above=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="${2:?--build-dir needs a value}"; shift 2 ;;
    --fast-above) fast_above="${2:?--fast-above needs a value}"; shift 2 ;;
    *) echo "cpu-target-runs: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]?$ ]] ||
  { echo "cpu-target-runs: RUNS must be a whole number from 1 to 99, got '$runs'" >&2; exit 2; }
[[ "$fast_above" =~ ^[0-9]+([.][0-9]+)?$ ]] ||
  { echo "cpu-target-runs: --fast-above must be GB/s (a number), got '$fast_above'" >&2; exit 2; }

scripts/bootstrap.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" --target decodebench -j"$(nproc)"
mkdir -p "$out_dir"

echo "# decodebench sweep --config configs/sweeps/cpu-target.json, one process per run," \
  "$(date -u +'%F %H:%M') UTC, commit $(git rev-parse --short HEAD)"
echo
echo "| run | read ceiling at sweep start | step median | achieved | % roof (vs sweep start) | read measured alongside | **% paired** | started (UTC) |"
echo "|---|---|---|---|---|---|---|---|"
for ((i = 1; i <= runs; ++i)); do
  report="$out_dir/$(printf 'cpu-target-run%02d.json' "$i")"
  "$build_dir/src/cli/decodebench" sweep --config configs/sweeps/cpu-target.json --out "$report" \
    --format json >/dev/null
  python3 - "$report" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"][0]
if r["status"] != "ok":
    sys.exit("cpu-target-runs: run %s: status %s: %s" % (sys.argv[2], r["status"], r.get("reason", "")))
ceiling = d["devices"][0]["bandwidth"]["measured"]["read"]
roof = r["roofline"]
print("| %02d | %.1f GB/s | %.2f ms | %.1f GB/s | %.1f %% | %.1f GB/s | **%.1f %%** | %s |" % (
    int(sys.argv[2]), ceiling / 1e9, r["time_s"]["median"] * 1e3, r["bandwidth"]["achieved"] / 1e9,
    100 * roof["fraction_measured"], roof["paired_read_Bps"] / 1e9, 100 * roof["fraction_paired"],
    d["created"][11:19]))
PY
done

python3 - "$out_dir" "$runs" "$fast_above" <<'PY'
import json, statistics, sys
out_dir, runs, threshold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rows = []
for i in range(1, runs + 1):
    r = json.load(open("%s/cpu-target-run%02d.json" % (out_dir, i)))["results"][0]
    rows.append((r["roofline"]["paired_read_Bps"] / 1e9, 100 * r["roofline"]["fraction_paired"],
                 r["time_s"]["median"] * 1e3))
groups = ([("fast, paired read > %g GB/s" % threshold, lambda g: g > threshold),
           ("slow, paired read <= %g GB/s" % threshold, lambda g: g <= threshold)]
          if threshold > 0 else [("all", lambda g: True)])
print()
for label, keep in groups:
    sel = [r for r in rows if keep(r[0])]
    if not sel:
        print("%s: no runs" % label)
        continue
    pct = [r[1] for r in sel]
    print("%s: %d runs (%.1f-%.1f GB/s), %% paired %.1f-%.1f, median %.1f; step %.2f-%.2f ms" % (
        label, len(sel), min(r[0] for r in sel), max(r[0] for r in sel), min(pct), max(pct),
        statistics.median(pct), min(r[2] for r in sel), max(r[2] for r in sel)))
PY
