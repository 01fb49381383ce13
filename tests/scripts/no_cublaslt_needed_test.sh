#!/usr/bin/env bash
# cuBLASLt is loaded at run time (src/backends/cuda/cublaslt_loader.h), never linked: the GPU
# bundle cannot carry it and must run attention scope where there is none. Checks that none of
# the given binaries has a DT_NEEDED entry for libcublas*, and that the check catches a planted
# binary that does (linked against a stand-in libcublasLt.so.13 built here).
#   no_cublaslt_needed_test.sh WORKDIR BINARY...
set -euo pipefail
work="$1"
shift

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# needs_cublas FILE: prints FILE's libcublas* DT_NEEDED entries; status 0 when there is one.
needs_cublas() {
  local out
  out="$(readelf -d "$1")" || fail "readelf -d $1 failed"
  grep -E '\(NEEDED\).*\[libcublas' <<<"$out"
}

for bin in "$@"; do
  [ -f "$bin" ] || fail "$bin is not a file"
  if needs_cublas "$bin"; then fail "$bin links cuBLAS(Lt); it must dlopen it instead"; fi
  echo "ok   $bin: no libcublas* in DT_NEEDED"
done

# The planted fault: a binary linked against a library whose soname is libcublasLt.so.13.
rm -rf "$work"
mkdir -p "$work"
echo 'int cublasLtGetVersion() { return 0; }' >"$work/stub.cpp"
g++ -shared -fPIC -Wl,-soname,libcublasLt.so.13 "$work/stub.cpp" -o "$work/libcublasLt.so"
echo 'int main() { return 0; }' >"$work/main.cpp"
g++ "$work/main.cpp" -o "$work/planted" -Wl,--no-as-needed -L"$work" -lcublasLt
needs_cublas "$work/planted" >/dev/null || fail "the check passed a binary linked to libcublasLt"
echo "no_cublaslt_needed_test: ok"
