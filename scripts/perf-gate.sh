#!/usr/bin/env bash
# The performance gate, for a CI job on a machine of a known class (a self-hosted GPU runner, a
# dedicated CPU box). The project's own CI never runs it: its machines are shared and noisy,
# and no test passes or fails on a timing.
#
# Runs configs/sweeps/ci.json on the backend present and compares the report with the baseline
# of this backend and device, results/baselines/<backend>-<device>.json, using `decodebench
# compare` (per point from the samples: SLOWER only when significant and beyond --threshold).
#
#   scripts/perf-gate.sh                          run, compare, exit 1 on a SLOWER/wrong/missing point
#   scripts/perf-gate.sh --refresh                run, and make this run the baseline (commit it)
#   scripts/perf-gate.sh --current REPORT.json    gate a saved report of the same sweep (no run)
#
# Options: --backend auto|cpu|cuda (auto), --baseline FILE (default: by backend and device),
# --threshold F (0.05), --fail-on-ambiguous, --out-dir DIR (build/perf-gate: the report,
# compare.md for a pull-request comment, compare.json), --bin DECODEBENCH (no build),
# --build-dir DIR (build). Exit: 0 pass, 1 slower/wrong/missing, 2 bad input or no baseline.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() {
  sed -n '/^# Runs/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
backend=auto baseline="" current="" threshold=0.05 out_dir="" bin="" build_dir=build
refresh=0 compare_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend="${2:?--backend needs a value}"; shift 2 ;;
    --baseline) baseline="${2:?--baseline needs a file}"; shift 2 ;;
    --current) current="${2:?--current needs a report}"; shift 2 ;;
    --threshold) threshold="${2:?--threshold needs a fraction}"; shift 2 ;;
    --fail-on-ambiguous) compare_flags+=(--fail-on-ambiguous); shift ;;
    --out-dir) out_dir="${2:?--out-dir needs a directory}"; shift 2 ;;
    --bin) bin="${2:?--bin needs the decodebench binary}"; shift 2 ;;
    --build-dir) build_dir="${2:?--build-dir needs a directory}"; shift 2 ;;
    --refresh) refresh=1; shift ;;
    -h | --help) usage ;;
    *) echo "perf-gate: unknown argument '$1'" >&2; usage ;;
  esac
done
case "$backend" in auto | cpu | cuda) ;; *)
  echo "perf-gate: --backend '$backend' is not one of auto, cpu, cuda" >&2; exit 2 ;;
esac
if [ -n "$current" ] && [ ! -f "$current" ]; then
  echo "perf-gate: --current '$current' does not exist" >&2; exit 2
fi
if [ -n "$current" ] && [ "$refresh" -eq 1 ]; then
  echo "perf-gate: --refresh makes a new run the baseline; it cannot take --current" >&2; exit 2
fi

if [ -z "$bin" ]; then
  scripts/bootstrap.sh
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target decodebench -j"$(nproc)"
  bin="$build_dir/src/cli/decodebench"
fi
[ -x "$bin" ] || { echo "perf-gate: '$bin' is not an executable" >&2; exit 2; }
out_dir="${out_dir:-$build_dir/perf-gate}"
mkdir -p "$out_dir"

if [ -z "$current" ]; then
  current="$out_dir/current.json"
  "$bin" sweep --config configs/sweeps/ci.json --backend "$backend" --out "$current"
fi

# The baseline of this machine class: backend and device name (plus the thread count on a CPU,
# whose class compare also checks) from the report itself.
class="$(python3 - "$current" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
if not r.get("devices"):
    sys.exit(f"perf-gate: {sys.argv[1]} has no devices[]: not a sweep report")
d = r["devices"][0]
name = re.sub(r"[^a-z0-9]+", "-", d["name"].lower()).strip("-")
cls = f'{d["backend"]}-{name}'
if d["backend"] == "cpu":
    cls += f'-{r["host"]["cpu_threads"]}t'
print(cls)
EOF
)"
baseline="${baseline:-results/baselines/$class.json}"

if [ "$refresh" -eq 1 ]; then
  mkdir -p "$(dirname "$baseline")"
  cp "$current" "$baseline"
  echo "perf-gate: $baseline is now the baseline of $class (commit it)"
  exit 0
fi
if [ ! -f "$baseline" ]; then
  echo "perf-gate: no baseline for this machine class ($class): $baseline does not exist." >&2
  echo "  Make one on a quiet machine of this class: scripts/perf-gate.sh --refresh" >&2
  exit 2
fi

echo "perf-gate: $current against $baseline (threshold $threshold)"
"$bin" compare "$baseline" "$current" --threshold "$threshold" --format md \
  --out "$out_dir/compare.json" "${compare_flags[@]}" >"$out_dir/compare.md" || true
exec "$bin" compare "$baseline" "$current" --threshold "$threshold" "${compare_flags[@]}"
