// Inline-PTX wrappers: one function per instruction that CUDA C++ does not expose directly (or
// exposes with a cost we do not want). nvcc only; kernels reach these through device/device.h,
// whose host-compiler branch maps the same operations to the SIMT emulator.
#pragma once

#if !defined(__CUDACC__)
#error "device/ptx.h is device code for nvcc; include device/device.h instead"
#endif

#include <cstdint>

namespace decodebench::dev::ptx {

// 2^x, approximate (2 ulp), flushes subnormals. One MUFU.EX2.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/x, approximate (1 ulp), flushes subnormals; 1/inf = 0. One MUFU.RCP.
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/sqrt(x), approximate, flushes subnormals. One MUFU.RSQ.
__device__ __forceinline__ float rsqrt_approx_ftz(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 16-byte load through the read-only (non-coherent) path. Only for data that no thread writes
// during the kernel (the KV cache, Q, the block table). Not volatile: the compiler may
// schedule and combine it like any load.
__device__ __forceinline__ uint4 ld_global_nc_v4(const void* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async global -> shared of kBytes, of which the first src_bytes (<= kBytes) come from
// global memory and the rest are zero-filled. 16-byte copies bypass L1 (.cg) unless kThroughL1
// (data several blocks re-read, as a block's scales); 4/8-byte copies must go through it (.ca is
// the only cache mode the ISA allows for them).
template <int kBytes, bool kThroughL1 = false>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (kBytes == 16 && !kThroughL1) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)),
                 "l"(gmem), "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_address(smem)),
                 "l"(gmem), "n"(kBytes), "r"(src_bytes)
                 : "memory");
  }
}

__device__ __forceinline__ void cp_async_commit_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

}  // namespace decodebench::dev::ptx
