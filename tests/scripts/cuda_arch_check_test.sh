#!/usr/bin/env bash
# The compile-only architecture check (kernels/CMakeLists.txt, decodebench_cuda_arch_check)
# catches code an architecture lacks: its tc fp8_e4m3 instance compiles for sm_80 as the check
# compiles it, and fails, naming sm_89, when kernels/device/mma.h is replaced by a copy whose
# fp8 conversion has lost its guard for sm_80 (the raw cvt.rn.f16x2.e4m3x2 for every target).
# Needs nvcc, no GPU.
#   cuda_arch_check_test.sh NVCC KERNELS_DIR GENERATED_DIR WORKDIR
set -euo pipefail
nvcc="$1" kernels="$2" generated="$3" work="$4"
rm -rf "$work"
mkdir -p "$work/planted/device"
tu="$generated/arch_check/tc_fp8_e4m3_128.cu"
if [ ! -f "$tu" ]; then
  # A build narrowed without tc: an instance of the same shape, written here.
  tu="$work/tc_fp8_e4m3_128.cu"
  printf '%s\n' '#include "paged_decode/tc.cuh"' \
    'namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {' \
    'template LaunchResult launch_tc<DType::fp8_e4m3, 128>(const PagedDecodeParams&, void*);' \
    '}' >"$tu"
fi

# The planted copy: the sm_89 branch of fp8x2_to_f16x2 for every architecture.
guard='#if defined(__CUDA_ARCH__) \&\& __CUDA_ARCH__ < 890'
sed "s/^$guard\$/#if 0/" "$kernels/device/mma.h" >"$work/planted/device/mma.h"
if cmp -s "$kernels/device/mma.h" "$work/planted/device/mma.h"; then
  echo "FAIL: no guard '#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890' in device/mma.h to plant against" >&2
  exit 1
fi

compile() {  # compile LOG [-I DIR]: the check's command for sm_80, cubin only
  local log="$1"
  shift
  "$nvcc" -DDECODEBENCH_TARGET_NS=cuda "$@" -I"$kernels" -I"$generated" -O3 -DNDEBUG \
    --expt-relaxed-constexpr -std=c++17 -arch=sm_80 -cubin -x cu "$tu" -o "$work/out.cubin" \
    >"$log" 2>&1
}

failures=0
if compile "$work/clean.log"; then
  echo "ok   tc fp8_e4m3 compiles for sm_80"
else
  echo "FAIL tc fp8_e4m3 does not compile for sm_80:" >&2
  sed 's/^/    /' "$work/clean.log" | tail -n 20 >&2
  failures=$((failures + 1))
fi
if compile "$work/planted.log" -I"$work/planted"; then
  echo "FAIL the planted unguarded fp8 conversion compiled for sm_80" >&2
  failures=$((failures + 1))
elif grep -q 'requires .target sm_89' "$work/planted.log"; then
  echo "ok   planted unguarded fp8 conversion caught: $(grep -m 1 -o "Feature .*sm_89 or higher" "$work/planted.log")"
else
  echo "FAIL the planted build failed, but not for sm_89:" >&2
  sed 's/^/    /' "$work/planted.log" | tail -n 20 >&2
  failures=$((failures + 1))
fi
exit $((failures > 0))
