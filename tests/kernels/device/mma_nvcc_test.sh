#!/usr/bin/env bash
# device/mma.h under nvcc: compiles mma_nvcc_check.cu for ARCH (no GPU needed) and checks that
#   ptxas assembles it (every inline-PTX string of the header is valid for ARCH);
#   the PTX holds each instruction the header promises (none was compiled away or replaced);
#   a planted invalid instruction (DECODEBENCH_PLANT_BAD_PTX) makes the compile fail.
#   mma_nvcc_test.sh NVCC ARCH KERNELS_DIR WORKDIR      e.g. nvcc sm_90a kernels /tmp/x
set -euo pipefail
nvcc="$1" arch="$2" kernels="$3" work="$4"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/mma_nvcc_check.cu"
rm -rf "$work"
mkdir -p "$work"
flags=(-arch="$arch" -std=c++17 --expt-relaxed-constexpr -I"$kernels")

failures=0
fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}

if "$nvcc" "${flags[@]}" -c "$src" -o "$work/check.o" >"$work/compile.out" 2>&1; then
  echo "ok   ptxas assembled mma_nvcc_check.cu for $arch"
else
  fail "nvcc/ptxas rejected mma_nvcc_check.cu for $arch:"
  sed 's/^/    /' "$work/compile.out" >&2
fi

"$nvcc" "${flags[@]}" --ptx "$src" -o "$work/check.ptx"
for insn in \
  'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32' \
  'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32' \
  'ldmatrix.sync.aligned.m8n8.x1.shared.b16' \
  'ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16' \
  'ldmatrix.sync.aligned.m8n8.x2.shared.b16' \
  'ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16' \
  'ldmatrix.sync.aligned.m8n8.x4.shared.b16' \
  'ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16' \
  'cvt.rn.f16x2.e4m3x2' \
  'cvt.rn.f16x2.e5m2x2'; do
  if grep -qF -- "$insn " "$work/check.ptx"; then
    echo "ok   PTX has $insn"
  else
    fail "PTX lacks $insn"
  fi
done

rc=0
"$nvcc" "${flags[@]}" -DDECODEBENCH_PLANT_BAD_PTX -c "$src" -o "$work/planted.o" \
  >"$work/planted.out" 2>&1 || rc=$?
if [[ "$rc" != 0 ]] && grep -q "ptxas.*error.*blayout" "$work/planted.out"; then
  echo "ok   the planted .row.row mma is rejected by ptxas"
else
  fail "the planted .row.row mma was not rejected by ptxas (exit $rc):"
  sed 's/^/    /' "$work/planted.out" >&2
fi

if ((failures > 0)); then
  echo "mma_nvcc_test: $failures checks failed" >&2
  exit 1
fi
echo "mma_nvcc_test: the header assembles for $arch and the planted fault is caught"
