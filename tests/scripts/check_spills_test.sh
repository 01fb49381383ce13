#!/usr/bin/env bash
# The spill gate (scripts/check-spills.sh) must be able to fail: compiles planted kernels into
# static libraries with nvcc (one invocation) and checks that the gate
#   passes a clean library (a decode kernel of a new rung, a ceiling, a fill and a quantize
#   kernel, each in its class);
#   fails a library with a spilling decode kernel of a new rung, naming it;
#   fails a library with a kernel in no known namespace, naming it;
#   fails a library with no decode kernel.
#   check_spills_test.sh NVCC ARCH GATE WORKDIR      e.g. nvcc sm_90a scripts/check-spills.sh /tmp/x
set -euo pipefail
nvcc="$1" arch="$2" gate="$3" work="$4"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rm -rf "$work"
mkdir -p "$work"
cd "$work"

plants=(DECODE_CLEAN DECODE_SPILL OTHERS STRAY)
sources=()
for plant in "${plants[@]}"; do
  printf '#define PLANT_%s\n#include "%s/check_spills_planted.cu"\n' "$plant" "$here" >"${plant,,}.cu"
  sources+=("${plant,,}.cu")
done
"$nvcc" -arch="$arch" -c "${sources[@]}"
ar rcs libclean.a decode_clean.o others.o
ar rcs libspill.a decode_clean.o decode_spill.o others.o
ar rcs libstray.a decode_clean.o others.o stray.o
ar rcs libnodecode.a others.o

failures=0
# expect LIB STATUS PATTERN: the gate's exit status on LIB is STATUS and its output matches
# PATTERN (an extended regex).
expect() {
  local lib="$1" want="$2" pattern="$3" rc=0
  "$gate" "$lib" --markdown "${lib%.a}.md" >"${lib%.a}.out" 2>&1 || rc=$?
  if [[ "$rc" != "$want" ]] || ! grep -Eq -- "$pattern" "${lib%.a}.out"; then
    echo "FAIL $lib: exit $rc (want $want), output should match /$pattern/:" >&2
    sed 's/^/    /' "${lib%.a}.out" >&2
    failures=$((failures + 1))
  else
    echo "ok   $lib: exit $rc, /$pattern/"
  fi
}
# shellcheck disable=SC2016  # the backquotes are markdown, not a command
expect libclean.a 0 '\| `planted_rung::clean_kernel` \| sm_[0-9]+a? \| [0-9]+ \| 0 \| 0 \| [0-9]+ \| decode \|'
expect libclean.a 0 '\| `quantize_kernel` \| sm_[0-9]+a? \| [0-9]+ \| 0 \| 0 \| [0-9]+ \| quantize \|'
expect libspill.a 1 'FAIL planted_rung::spill_kernel .*[1-9][0-9]* B stack frame'
expect libstray.a 1 'FAIL unclassified kernel decodebench::kernels::cuda::planted_rung::stray_kernel'
expect libnodecode.a 1 'FAIL no decode kernel'
if ((failures > 0)); then
  echo "check_spills_test: $failures of 5 planted cases went wrong" >&2
  exit 1
fi
echo "check_spills_test: all 5 planted cases caught as expected"
