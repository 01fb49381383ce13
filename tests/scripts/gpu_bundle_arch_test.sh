#!/usr/bin/env bash
# scripts/gpu-bundle.sh --arch, without building a bundle (gpu_bundle_test.sh builds one, in
# minutes): --print-config stops before anything is written. The default is 90a; a list is passed
# to CMake as given; every value scripts/cuda-arch.sh maps a GPU to is accepted; a value it never
# builds (75, 90 without the a, a typo) and an empty list exit 1 naming the valid values, before
# any folder is made.
#   gpu_bundle_arch_test.sh GPU_BUNDLE WORKDIR
set -euo pipefail
bundle_sh="$1" work="$2"
rm -rf "$work"
mkdir -p "$work"
cd "$work"

failures=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*" >&2; failures=$((failures + 1)); }

# run NAME ARGS...: gpu-bundle.sh --print-config with an OUTDIR and build dir in WORKDIR.
run() {
  local name="$1"
  shift
  local rc=0
  bash "$bundle_sh" "$work/out-$name" --build-dir "$work/build-$name" --print-config "$@" \
    >"$name.out" 2>&1 || rc=$?
  echo "$rc" >"$name.rc"
}
expect() {  # expect NAME RC PATTERN WHAT
  local got
  got="$(cat "$1.rc")"
  if [ "$got" = "$2" ] && grep -Eq -- "$3" "$1.out"; then ok "$1: $4"; else
    bad "$1: $4: exit $got (want $2), output should match /$3/:"; sed 's/^/    /' "$1.out" >&2
  fi
  if [ -e "$work/out-$1" ] || [ -e "$work/build-$1" ]; then
    bad "$1: --print-config wrote a folder"
  fi
}

run default
expect default 0 '^cuda_architectures=90a$' "the default is 90a"
expect default 0 '^cmake_flag=-DCMAKE_CUDA_ARCHITECTURES=90a$' "CMake gets 90a"

run several --arch '100a,90a'
expect several 0 '^cmake_flag=-DCMAKE_CUDA_ARCHITECTURES=100a;90a$' "a list goes to CMake as given"

for a in 80 86 89 90a 100a 120; do
  run "ok-$a" --arch "$a"
  expect "ok-$a" 0 "^cuda_architectures=$a\$" "cuda-arch.sh's $a is accepted"
done

for a in 75 90 sm_90a 9.0; do
  run "bad-$a" --arch "$a"
  expect "bad-$a" 1 "--arch '$a' is not an architecture scripts/cuda-arch.sh builds.*valid: 80 .*90a" \
    "'$a' refused, naming the valid values"
done

run bad-in-list --arch '90a;91a'
expect bad-in-list 1 "--arch '91a' is not" "a bad value inside a list is named"

run empty --arch ''
expect empty 1 "--arch needs a list" "an empty --arch is refused"

if [ "$failures" -gt 0 ]; then
  echo "gpu_bundle_arch_test: $failures failure(s)" >&2
  exit 1
fi
echo "gpu_bundle_arch_test: all ok"
