#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build decodebench for that GPU and run, in
# order, with every command's output logged under OUTDIR:
#   devices   decodebench devices                                  devices.log
#   check     decodebench check --backend cuda (every kernel, small odd shapes, the ceiling
#             kernels' self-checks)                                  check.log, check.json
#   ceilings  decodebench ceilings --backend cuda --format json      ceilings.log, ceilings.json
#   gpu-tests ctest -L gpu (CUDA backend tests: device fill bit-exact vs host, every kernel vs
#             the reference, layout-only workloads, timing, a planted device fault)  gpu-tests.log
#   sweep     decodebench sweep --backend cuda --config configs/sweeps/gpu-check.json
#                                                                    sweep.log, gpu-check.json
# plus the build (configure.log, build.log), a read-only nvidia-smi snapshot (nvidia-smi.log) and
# summary.txt (each step, its status and seconds).
#
#   scripts/gpu-check.sh OUTDIR [--budget SECONDS] [--build-dir DIR] [--device N] [--quick]
#
#   --budget     total wall-clock limit for everything, build included (default 480 = 8 min).
#                Each step runs under what is left of it; the sweep is interrupted (SIGINT)
#                when time runs out and keeps every point it finished.
#   --build-dir  build directory (default build-gpu); a second run rebuilds only what changed
#   --device     CUDA device index (default 0); the build targets its compute capability
#   --quick      build only head_dim 128 and KV f16, fp8_e4m3 (what the sweep needs): a faster
#                build, a narrower `check`
#
# It never changes clocks, power limits, persistence or any other GPU setting: nvidia-smi is
# only queried. Exit status 0 when every step passed, 1 otherwise (every step still runs, so
# partial results are kept), 2 for bad arguments or no GPU.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2

usage() {
  echo "usage: $0 OUTDIR [--budget SECONDS] [--build-dir DIR] [--device N] [--quick]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
case "$1" in -*) usage ;; esac
outdir="$1"
shift
budget=480
build_dir=build-gpu
device=0
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="${2:?--budget needs a value}"; shift 2 ;;
    --build-dir) build_dir="${2:?--build-dir needs a value}"; shift 2 ;;
    --device) device="${2:?--device needs a value}"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
  esac
done
bad_arg() { echo "gpu-check: $*" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ ]] || bad_arg "--budget must be whole seconds, got '$budget'"
[[ "$device" =~ ^[0-9]+$ ]] || bad_arg "--device must be an index, got '$device'"

mkdir -p "$outdir" || exit 2
outdir="$(cd "$outdir" && pwd)"
summary="$outdir/summary.txt"
start=$SECONDS
failed=()

say() { printf '[gpu-check %3ds] %s\n' $((SECONDS - start)) "$*" | tee -a "$summary" >&2; }
left() { echo $((budget - (SECONDS - start))); }

# step NAME LOG CMD...: runs CMD under what is left of the budget, output to LOG, records the
# outcome. SIGINT first (the sweep stops cleanly and keeps its finished points), SIGKILL 20 s
# later.
step() {
  local name="$1" log="$2"
  shift 2
  local remaining
  remaining="$(left)"
  if [ "$remaining" -le 5 ]; then
    say "FAIL $name: not started, the ${budget}s budget is spent"
    failed+=("$name")
    return 1
  fi
  say "run  $name (up to ${remaining}s): $*"
  local t0=$SECONDS rc=0
  timeout --signal=INT --kill-after=20 "$remaining" "$@" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    say "ok   $name (${took}s)"
    return 0
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    say "FAIL $name: out of time after ${took}s (budget ${budget}s); see $log"
  else
    say "FAIL $name: exit $rc after ${took}s; last lines of $log:"
    tail -n 15 "$log" | sed 's/^/      /' | tee -a "$summary" >&2
  fi
  failed+=("$name")
  return 1
}

: >"$summary"
say "decodebench GPU check: outdir $outdir, budget ${budget}s, device $device"

# --- the GPU -------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "FAIL: nvidia-smi not found; this script needs a machine with an NVIDIA GPU and driver"
  exit 2
fi
# Read-only snapshot of the device as it was run (clocks, power, ECC, what else is running).
nvidia-smi -q -i "$device" >"$outdir/nvidia-smi.log" 2>&1
query() { nvidia-smi -i "$device" --query-gpu="$1" --format=csv,noheader 2>/dev/null | head -n 1; }
cap="$(query compute_cap | tr -d ' ')"
gpu_name="$(query name)"
if [[ ! "$cap" =~ ^[0-9]+\.[0-9]+$ ]]; then
  say "FAIL: cannot read the compute capability of device $device (got '$cap')"
  exit 2
fi
# 9.0 -> 90a: the arch-specific target (wgmma, setmaxnreg, ...) of Hopper and later; the
# kernels are built for exactly this GPU, not a portable PTX fallback.
major="${cap%%.*}"
minor="${cap##*.}"
arch="${major}${minor}"
if [ "$major" -ge 9 ]; then arch="${arch}a"; fi
say "device $device: $gpu_name, compute capability $cap -> CMAKE_CUDA_ARCHITECTURES=$arch"

# --- build ---------------------------------------------------------------------------------
step bootstrap "$outdir/bootstrap.log" scripts/bootstrap.sh || {
  say "cannot continue without the dependencies"; exit 1; }

configure=(cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
  -DDECODEBENCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch"
  -DDECODEBENCH_BUILD_TESTS=ON -DDECODEBENCH_BUILD_BENCH=OFF)  # every rung: the default
if [ "$quick" -eq 1 ]; then
  configure+=("-DDECODEBENCH_HEAD_DIMS=128" "-DDECODEBENCH_KV_DTYPES=f16;fp8_e4m3")
else
  configure+=("-DDECODEBENCH_HEAD_DIMS=64;128;256"
    "-DDECODEBENCH_KV_DTYPES=f16;bf16;fp8_e4m3;fp8_e5m2")
fi
if ! step configure "$outdir/configure.log" "${configure[@]}" ||
   ! step build "$outdir/build.log" cmake --build "$build_dir" -j "$(nproc)" \
       --target decodebench cuda_plan_tests cuda_backend_tests; then
  say "cannot continue without a build"
  exit 1
fi
bin="$build_dir/src/cli/decodebench"
if [ ! -x "$bin" ] || [ ! -f "$build_dir/kernels/libdecodebench_kernels_cuda.a" ]; then
  say "FAIL: no CUDA build in $build_dir (is nvcc installed? see $outdir/build.log)"
  exit 1
fi

# --- the checks ------------------------------------------------------------------------------
step devices "$outdir/devices.log" "$bin" devices --device "$device"
step check "$outdir/check.log" "$bin" check --backend cuda --device "$device" \
  --out "$outdir/check.json"
step ceilings "$outdir/ceilings.log" "$bin" ceilings --backend cuda --device "$device" \
  --format json --out "$outdir/ceilings.json"
step gpu-tests "$outdir/gpu-tests.log" env CUDA_VISIBLE_DEVICES="$device" \
  ctest --test-dir "$build_dir" -L gpu --output-on-failure
if [ -f configs/sweeps/gpu-check.json ]; then
  step sweep "$outdir/sweep.log" "$bin" sweep --backend cuda --device "$device" \
    --config configs/sweeps/gpu-check.json --out "$outdir/gpu-check.json"
else
  say "FAIL sweep: configs/sweeps/gpu-check.json does not exist"
  failed+=(sweep)
fi

# --- summary -------------------------------------------------------------------------------
reports=()
for f in "$outdir"/*.json; do [ -e "$f" ] && reports+=("$(basename "$f")"); done
say "reports: ${reports[*]:-none}"
if [ "${#failed[@]}" -gt 0 ]; then
  say "FAILED: ${failed[*]} (total $((SECONDS - start))s); logs in $outdir"
  exit 1
fi
say "all steps passed in $((SECONDS - start))s; commit the reports under results/<gpu>/"
exit 0
