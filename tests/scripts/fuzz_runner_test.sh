#!/usr/bin/env bash
# tests/fuzz/run.sh must be able to fail: over fake targets (scripts that print libFuzzer's
# summary) it passes when all pass, and fails naming the target when one of them fails, whichever
# slot of a parallel batch it runs in; a missing target is a usage error (exit 2).
#   fuzz_runner_test.sh RUN_SH WORKDIR
set -euo pipefail
run_sh="$1" work="$2"
targets=(fuzz_npy fuzz_sweep_config fuzz_report fuzz_model fuzz_datasheet fuzz_trace fuzz_dump)
failures=0

fake_build() {  # fake_build DIR [FAILING_TARGET]
  rm -rf "$1"
  mkdir -p "$1/tests/fuzz"
  for t in "${targets[@]}"; do
    if [ "$t" = "${2:-}" ]; then
      printf '#!/bin/sh\necho "==1== ERROR: libFuzzer: planted crash"\nexit 1\n' >"$1/tests/fuzz/$t"
    else
      printf '#!/bin/sh\necho "Done 7 runs in 1 second(s)"\nexit 0\n' >"$1/tests/fuzz/$t"
    fi
    chmod +x "$1/tests/fuzz/$t"
  done
}

expect() {  # expect NAME STATUS PATTERN BUILD
  local rc=0
  "$run_sh" "$4" 1 >"$work/$1.out" 2>&1 || rc=$?
  if [[ "$rc" != "$2" ]] || ! grep -Eq -- "$3" "$work/$1.out"; then
    echo "FAIL $1: exit $rc (want $2), output should match /$3/:" >&2
    sed 's/^/    /' "$work/$1.out" >&2
    failures=$((failures + 1))
  else
    echo "ok   $1: exit $rc, /$3/"
  fi
}

mkdir -p "$work"
fake_build "$work/clean"
expect clean 0 'fuzz_dump: Done 7 runs' "$work/clean"
for bad in fuzz_npy fuzz_model fuzz_dump; do  # first and second slot, the last target
  fake_build "$work/bad-$bad" "$bad"
  expect "bad-$bad" 1 "run.sh: $bad failed" "$work/bad-$bad"
done
fake_build "$work/missing"
rm "$work/missing/tests/fuzz/fuzz_report"
expect missing 2 'fuzz_report not built' "$work/missing"
exit $((failures > 0))
