#!/usr/bin/env bash
# Runs each fuzz target of a DECODEBENCH_FUZZ=ON build for a bounded time over its committed
# corpus (tests/fuzz/corpus/<target>/, read only: what a run finds goes to a scratch corpus in
# the build directory). Fails on the first crash, sanitizer report, escaping exception, hang
# (-timeout) or memory blow-up (-rss_limit_mb), leaving the input in BUILD/fuzz-artifacts/.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET (default 30)] [TARGET...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 1 ]; then
  echo "usage: tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
build="$1"
seconds="${2:-30}"
shift $(($# < 2 ? $# : 2))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_npy fuzz_sweep_config fuzz_report fuzz_model fuzz_datasheet fuzz_trace fuzz_dump)
fi
case "$seconds" in
  '' | *[!0-9]*) echo "run.sh: seconds must be a positive integer, got '$seconds'" >&2; exit 2 ;;
esac

# A UBSan report with its stack; ASan's leak check stays on (a leak is a finding too).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
for t in "${targets[@]}"; do
  exe="$build/tests/fuzz/$t"
  [ -x "$exe" ] || { echo "run.sh: $exe not built (cmake --build $build --target decodebench_fuzz)" >&2; exit 2; }
done

# run_target T: one target's bounded run; its output goes to its log, the exit status says.
run_target() {
  local t="$1" dict="$here/json.dict"
  [ "$t" = fuzz_npy ] && dict="$here/npy.dict"
  [ "$t" = fuzz_dump ] && dict="$here/dump.dict"
  [ "$t" = fuzz_trace ] && dict="$here/trace.dict"
  local scratch="$build/fuzz-corpus/$t"
  mkdir -p "$scratch"
  # Inputs grow up to the largest seed (libFuzzer's default -max_len): compare's bootstrap costs
  # 2000 resamples per point, so a report of 10^4 samples is slow by design, not a hang.
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -dict="$dict" \
    -artifact_prefix="$artifacts/$t-" -print_final_stats=1 \
    "$scratch" "$here/corpus/$t" >"$artifacts/$t.log" 2>&1
}

# Each target is one process on one core: as many run at once as there are cores, each for its
# full time (the same fuzzing, a fraction of the wall time). Only the summary and any failure
# are printed: libFuzzer's progress lines go to the log.
jobs="$(nproc)"
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    echo "=== $t: ${seconds}s over tests/fuzz/corpus/$t ==="
    run_target "$t" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    t="${batch[k]}"
    if wait "${pids[k]}"; then
      grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$artifacts/$t.log" |
        sed "s/^/$t: /" || true
    else
      tail -n 60 "$artifacts/$t.log" >&2
      echo "run.sh: $t failed; the input is in $artifacts/ (log: $artifacts/$t.log)" >&2
      failed+=("$t")
    fi
  done
  ((${#failed[@]} == 0)) || exit 1
done
