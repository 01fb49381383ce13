// The portable device layer: the few primitives decodebench kernels use. Under nvcc they are
// the real thing; under the host compiler they come from the SIMT emulator (kernels/emu), so
// the same kernel source runs on a CPU for tests (see kernels/emu/README.md).
//
// CONTRACT (kernels may rely on exactly this):
//
// CUDA spellings, provided by the emulator under the host compiler (kernels/emu/emu.h):
//   __global__ __device__ __host__ __forceinline__ __restrict__ __grid_constant__
//   __launch_bounds__(...) __align__(n)   (no-ops or attributes on the host)
//   threadIdx blockIdx blockDim gridDim (.x .y .z, unsigned), warpSize (32), dim3, uint3
//   __syncthreads()                       block barrier; the emulator records the call site
//   __syncwarp(mask = 0xffffffff)
//   __shfl_sync / __shfl_xor_sync / __shfl_up_sync / __shfl_down_sync (mask, var, lane|delta,
//       width = 32) for 4- and 8-byte types (int, unsigned, float, ...), CUDA's exact width rules
//   __ballot_sync __any_sync __all_sync
//   atomicAdd (int, unsigned, unsigned long long, float), atomicMax/atomicMin (int, unsigned),
//   atomicExch (int, unsigned, float), atomicCAS (int, unsigned, unsigned long long)
//   __threadfence() __threadfence_block() __ldg(p)
//   uint4 uint2 float4 float2 int4 int2 and make_* for them
//   exp2f expf logf log2f fmaxf fminf sqrtf rsqrtf __expf __logf __fdividef
//   __float_as_uint __uint_as_float __float_as_int __int_as_float, min/max for int and unsigned
//
// decodebench additions (namespace decodebench::dev), identical on both targets:
//   DECODEBENCH_SHARED(T, name, count)      static shared array `T name[count]` (16-byte aligned)
//   DECODEBENCH_DYNAMIC_SHARED(T, name)     dynamic shared memory as `T* name` (16-byte aligned)
//   DECODEBENCH_LAUNCH(kernel, grid, block, smem_bytes, stream, params) -> LaunchResult
//       launches `kernel(params)` and checks it (cudaGetLastError / the emulator's report);
//       evaluates to a kernels::LaunchResult naming the kernel on failure. Wrap a template-id
//       in parentheses: DECODEBENCH_LAUNCH((my_kernel<kA, kB>), ...). `stream` is a void*
//       (a cudaStream_t on CUDA). Dynamic shared memory above 48 KiB is opted into
//       automatically (cudaFuncAttributeMaxDynamicSharedMemorySize), once per kernel and
//       device (device/smem_opt_in.h).
//   dev::launch_shape_of(kernel, name, group_cap, grid, block, smem_bytes) -> LaunchShape
//       the same launch described for kernels::launch_shape (the address only under nvcc)
//   dev::fast_exp2(float) dev::fast_rsqrt(float)        ex2.approx.ftz / rsqrt.approx.ftz
//   dev::fast_rcp(float)                               rcp.approx.ftz
//   dev::FastExp2{}                                    fast_exp2 as a function object
//   dev::ld_global_nc_v4(const void* p) -> uint4        16-byte read-only load (ld.global.nc)
//   dev::ld_v4(const void* p) -> uint4 / dev::st_v4(void* p, uint4)   16-byte generic load/store
//   dev::cp_async<N[, kThroughL1]>(void* smem, const void* gmem, int src_bytes)  N = 4, 8 or 16;
//       copies min(src_bytes, N) bytes and zero-fills the rest (cp.async.ca/cg ... src-size);
//       src_bytes <= 0 reads nothing (gmem may then be any pointer). Addresses aligned to N.
//   dev::cp_async_commit()                             cp.async.commit_group
//   dev::cp_async_wait<N>()                            cp.async.wait_group N: all but the N
//                                                      newest committed groups have landed
//   dev::cp_async_wait_all()                           cp.async.wait_all (commit + wait 0)
//   Conversions of packed narrow values to float (register-level, 16-byte granules; element i
//   is the i-th element in memory order). Exact, and bit-identical on both targets:
//   dev::unpack8<kDtype>(uint4 raw, float (&out)[8])    kDtype = DType::f16 / DType::bf16
//   dev::unpack16<kDtype>(uint4 raw, float (&out)[16])  kDtype = DType::fp8_e4m3 / fp8_e5m2
//   dev::load_q<float>(const void* p, DType q_dtype, int i) -> float   scalar f16/bf16 load
//   dev::store_out(void* p, DType q_dtype, int i, float v)            scalar f16/bf16 store (RNE)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "device/float_formats.h"
#include "kernels.h"

// =============================================================================================
// CUDA: the real thing.
// =============================================================================================
#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "device/ptx.h"
#include "device/smem_opt_in.h"

#define DECODEBENCH_SHARED(T, name, count) __shared__ __align__(16) T name[count]
#define DECODEBENCH_DYNAMIC_SHARED(T, name)                                  \
  extern __shared__ __align__(16) unsigned char decodebench_dynamic_smem_[]; \
  T* name = reinterpret_cast<T*>(decodebench_dynamic_smem_)

namespace decodebench::dev {

__device__ __forceinline__ float fast_exp2(float x) { return ptx::ex2_approx_ftz(x); }
__device__ __forceinline__ float fast_rsqrt(float x) { return ptx::rsqrt_approx_ftz(x); }
__device__ __forceinline__ float fast_rcp(float x) { return ptx::rcp_approx_ftz(x); }
// fast_exp2 as a function object, for SoftmaxState::merge. __host__ __device__ so that the
// host-device merge may call it; only its device side ever runs.
struct FastExp2 {
  __host__ __device__ __forceinline__ float operator()(float x) const {
#if defined(__CUDA_ARCH__)
    return ptx::ex2_approx_ftz(x);
#else
    return exp2f(x);
#endif
  }
};

__device__ __forceinline__ uint4 ld_global_nc_v4(const void* p) { return ptx::ld_global_nc_v4(p); }
__device__ __forceinline__ uint4 ld_v4(const void* p) { return *static_cast<const uint4*>(p); }
__device__ __forceinline__ void st_v4(void* p, uint4 v) { *static_cast<uint4*>(p) = v; }

template <int N, bool kThroughL1 = false>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, int src_bytes) {
  static_assert(N == 4 || N == 8 || N == 16, "cp.async copies 4, 8 or 16 bytes");
  // PTX requires src-size <= cp-size; clamping makes "copy what is left" callers safe.
  src_bytes = src_bytes < 0 ? 0 : (src_bytes > N ? N : src_bytes);
  ptx::cp_async<N, kThroughL1>(smem, gmem, src_bytes);
}
__device__ __forceinline__ void cp_async_commit() { ptx::cp_async_commit_group(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  ptx::cp_async_wait_group<N>();
}
__device__ __forceinline__ void cp_async_wait_all() { ptx::cp_async_wait_all(); }

namespace detail {
__device__ __forceinline__ float2 half2_bits_to_float2(std::uint32_t w) {
  __half2_raw raw;
  raw.x = static_cast<unsigned short>(w & 0xffffu);
  raw.y = static_cast<unsigned short>(w >> 16);
  return __half22float2(__half2(raw));
}
// bf16 -> f32 is exact: the bf16 bits are the top half of the f32 bits.
__device__ __forceinline__ float bf16_bits_to_float(std::uint32_t bits16) {
  return __uint_as_float(bits16 << 16);
}
template <DType kDtype>
__device__ __forceinline__ float2 fp8x2_bits_to_float2(std::uint32_t w16) {
  // Every e4m3 and e5m2 value is exactly representable in f16, and f16 in f32: exact.
  constexpr __nv_fp8_interpretation_t kInterp = kDtype == DType::fp8_e4m3 ? __NV_E4M3 : __NV_E5M2;
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w16), kInterp);
  return __half22float2(__half2(h));
}
}  // namespace detail

template <DType kDtype>
__device__ __forceinline__ void unpack8(uint4 raw, float (&out)[8]) {
  static_assert(kDtype == DType::f16 || kDtype == DType::bf16, "unpack8 takes f16 or bf16");
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kDtype == DType::f16) {
      const float2 f = detail::half2_bits_to_float2(words[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    } else {
      out[2 * i] = detail::bf16_bits_to_float(words[i] & 0xffffu);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
}

template <DType kDtype>
__device__ __forceinline__ void unpack16(uint4 raw, float (&out)[16]) {
  static_assert(kDtype == DType::fp8_e4m3 || kDtype == DType::fp8_e5m2,
                "unpack16 takes fp8_e4m3 or fp8_e5m2");
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 lo = detail::fp8x2_bits_to_float2<kDtype>(words[i] & 0xffffu);
    const float2 hi = detail::fp8x2_bits_to_float2<kDtype>(words[i] >> 16);
    out[4 * i] = lo.x;
    out[4 * i + 1] = lo.y;
    out[4 * i + 2] = hi.x;
    out[4 * i + 3] = hi.y;
  }
}

template <typename T>
__device__ __forceinline__ T load_q(const void* p, DType q_dtype, int i) {
  static_assert(sizeof(T) == 4, "load_q returns float");
  const unsigned short bits = static_cast<const unsigned short*>(p)[i];
  return q_dtype == DType::f16 ? __half2float(__ushort_as_half(bits))
                               : detail::bf16_bits_to_float(bits);
}

__device__ __forceinline__ void store_out(void* p, DType q_dtype, int i, float v) {
  static_cast<unsigned short*>(p)[i] = q_dtype == DType::f16
                                           ? __half_as_ushort(__float2half_rn(v))
                                           : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

namespace detail {
template <typename T>
struct Identity {
  using type = T;
};

// The process's record of dynamic shared memory opted into (smem_opt_in.h). Assumes the
// device is never reset while the process runs (a reset would drop the attributes).
inline SmemOptInCache& smem_opt_in_cache() {
  static SmemOptInCache cache;
  return cache;
}

// Host side of DECODEBENCH_LAUNCH: launch, then check the launch (configuration errors,
// too many resources, ...). Execution errors surface at the caller's next synchronization.
// In a namespace of this target: the emulator's launch_checked has the same signature, and
// both kernel libraries link into one program, so without it the linker could keep one
// instantiation of the two for both.
inline namespace cuda_target {
template <typename Params>
kernels::LaunchResult launch_checked(const char* name, void (*kernel)(Params), dim3 grid,
                                     dim3 block, std::size_t smem_bytes, void* stream,
                                     const typename Identity<Params>::type& params) {
  constexpr std::size_t kDefaultDynamicSmemLimit = 48 * 1024;
  if (smem_bytes > kDefaultDynamicSmemLimit) {
    // Once per (kernel, device), not per launch: it would sit on every timed step's host path.
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) {
      err = smem_opt_in_cache().ensure(
          reinterpret_cast<const void*>(kernel), device, smem_bytes, [&](std::size_t bytes) {
            return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes));
          });
    }
    if (err != cudaSuccess) {
      return {kernels::LaunchStatus::failed,
              std::string("kernel ") + name + ": cannot opt into " + std::to_string(smem_bytes) +
                  " bytes of dynamic shared memory: " + cudaGetErrorName(err) + " (" +
                  cudaGetErrorString(err) + ")"};
    }
  }
  kernel<<<grid, block, smem_bytes, static_cast<cudaStream_t>(stream)>>>(params);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return {kernels::LaunchStatus::failed, std::string("kernel ") + name +
                                               " launch failed: " + cudaGetErrorName(err) + " (" +
                                               cudaGetErrorString(err) + ")"};
  }
  return {};
}
}  // namespace cuda_target
}  // namespace detail

}  // namespace decodebench::dev

// =============================================================================================
// Host compiler: the SIMT emulator.
// =============================================================================================
#else

#include "emu/emu.h"

#define DECODEBENCH_SHARED(T, name, count)                               \
  T(&name)                                                               \
  [count] = *static_cast<T(*)[count]>(::decodebench::emu::static_shared( \
      [] {                                                               \
        static const char site = 0;                                      \
        return static_cast<const void*>(&site);                          \
      }(),                                                               \
      sizeof(T) * static_cast<std::size_t>(count), #name, __FILE__, __LINE__))
#define DECODEBENCH_DYNAMIC_SHARED(T, name) \
  T* name = static_cast<T*>(::decodebench::emu::dynamic_shared())

namespace decodebench::dev {

inline float fast_exp2(float x) { return std::exp2(x); }
inline float fast_rsqrt(float x) { return 1.f / std::sqrt(x); }
inline float fast_rcp(float x) { return 1.f / x; }
struct FastExp2 {  // fast_exp2 as a function object, for SoftmaxState::merge
  float operator()(float x) const { return fast_exp2(x); }
};

inline uint4 ld_global_nc_v4(const void* p) {
  emu::check_aligned(p, 16, "ld_global_nc_v4");
  return *static_cast<const uint4*>(p);
}
inline uint4 ld_v4(const void* p) {
  emu::check_aligned(p, 16, "ld_v4");
  return *static_cast<const uint4*>(p);
}
inline void st_v4(void* p, uint4 v) {
  emu::check_aligned(p, 16, "st_v4");
  *static_cast<uint4*>(p) = v;
}

template <int N, bool /*kThroughL1*/ = false>
inline void cp_async(void* smem, const void* gmem, int src_bytes) {
  static_assert(N == 4 || N == 8 || N == 16, "cp.async copies 4, 8 or 16 bytes");
  src_bytes = src_bytes < 0 ? 0 : (src_bytes > N ? N : src_bytes);
  emu::cp_async(smem, gmem, N, src_bytes);
}
inline void cp_async_commit() { emu::cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative count");
  emu::cp_async_wait(N);
}
inline void cp_async_wait_all() {
  emu::cp_async_commit();
  emu::cp_async_wait(0);
}

template <DType kDtype>
inline void unpack8(uint4 raw, float (&out)[8]) {
  static_assert(kDtype == DType::f16 || kDtype == DType::bf16, "unpack8 takes f16 or bf16");
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  for (int i = 0; i < 4; ++i) {
    const auto lo = static_cast<std::uint16_t>(words[i] & 0xffffu);
    const auto hi = static_cast<std::uint16_t>(words[i] >> 16);
    if constexpr (kDtype == DType::f16) {
      out[2 * i] = floatfmt::f16_to_float(lo);
      out[2 * i + 1] = floatfmt::f16_to_float(hi);
    } else {
      out[2 * i] = floatfmt::bf16_to_float(lo);
      out[2 * i + 1] = floatfmt::bf16_to_float(hi);
    }
  }
}

template <DType kDtype>
inline void unpack16(uint4 raw, float (&out)[16]) {
  static_assert(kDtype == DType::fp8_e4m3 || kDtype == DType::fp8_e5m2,
                "unpack16 takes fp8_e4m3 or fp8_e5m2");
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  for (int i = 0; i < 16; ++i) {
    const auto byte = static_cast<std::uint8_t>(words[i / 4] >> (8 * (i % 4)));
    out[i] =
        kDtype == DType::fp8_e4m3 ? floatfmt::e4m3_to_float(byte) : floatfmt::e5m2_to_float(byte);
  }
}

template <typename T>
inline T load_q(const void* p, DType q_dtype, int i) {
  static_assert(sizeof(T) == 4, "load_q returns float");
  const std::uint16_t bits = static_cast<const std::uint16_t*>(p)[i];
  return q_dtype == DType::f16 ? floatfmt::f16_to_float(bits) : floatfmt::bf16_to_float(bits);
}

inline void store_out(void* p, DType q_dtype, int i, float v) {
  static_cast<std::uint16_t*>(p)[i] =
      q_dtype == DType::f16 ? floatfmt::float_to_f16(v) : floatfmt::float_to_bf16(v);
}

namespace detail {
template <typename T>
struct Identity {
  using type = T;
};

// Host side of DECODEBENCH_LAUNCH: runs the whole grid to completion and turns the emulator's
// report (barrier mismatch, deadlock, timeout, misaligned access, bad configuration) into a
// LaunchResult. In a namespace of this target, as the CUDA one is.
inline namespace emu_target {
template <typename Params>
kernels::LaunchResult launch_checked(const char* name, void (*kernel)(Params), dim3 grid,
                                     dim3 block, std::size_t smem_bytes, void* /*stream*/,
                                     const typename Identity<Params>::type& params) {
  try {
    emu::launch(name, kernel, grid, block, smem_bytes, params);
  } catch (const std::exception& e) {
    return {kernels::LaunchStatus::failed, e.what()};
  }
  return {};
}
}  // namespace emu_target
}  // namespace detail

}  // namespace decodebench::dev

#endif  // __CUDACC__

namespace decodebench::dev {
// A kernel's launch as kernels::launch_shape reports it, from the same values the launcher
// passes to DECODEBENCH_LAUNCH. The __global__'s address only under nvcc (the runtime's handle
// for cudaFuncGetAttributes / cudaOccupancy*); the emulator has none.
template <typename Params>
kernels::LaunchShape launch_shape_of(void (*kernel)(Params), std::string_view function,
                                     int group_cap, dim3 grid, dim3 block, std::size_t smem_bytes) {
  kernels::LaunchShape s;
  s.function = function;
  s.group_cap = group_cap;
  s.grid[0] = static_cast<int>(grid.x);
  s.grid[1] = static_cast<int>(grid.y);
  s.grid[2] = static_cast<int>(grid.z);
  s.threads = static_cast<int>(block.x * block.y * block.z);
  s.dynamic_smem = smem_bytes;
#if defined(__CUDACC__)
  s.device_function = reinterpret_cast<const void*>(kernel);
#else
  (void)kernel;
#endif
  return s;
}
}  // namespace decodebench::dev

#define DECODEBENCH_LAUNCH(kernel, grid, block, smem_bytes, stream, params)                    \
  ::decodebench::dev::detail::launch_checked(#kernel, kernel, grid, block, smem_bytes, stream, \
                                             params)
