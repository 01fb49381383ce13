// The SIMT emulator: runs CUDA kernel source on the CPU (see README.md in this directory).
//
// Included by device/device.h when the host compiler builds device code; kernels never include
// it directly. It provides the CUDA spellings the kernels use (keywords, built-in indices,
// vector types, barriers, shuffles, atomics, a math subset) and the decodebench::emu entry
// points behind the portable layer (shared memory, cp.async, launch).
//
// Model: one OS thread per CUDA thread; the blocks of a grid run one at a time on a reused
// pool of threads. Every primitive is built from std::atomic operations on the data it orders
// (no mutex is held around kernel memory), so ThreadSanitizer sees exactly the happens-before
// edges CUDA guarantees: a barrier orders, a missing barrier is a race.
#pragma once

#include <math.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <stdexcept>
#include <string>
#include <type_traits>

// ---------------------------------------------------------------------------------------------
// CUDA keywords. __shared__ is deliberately NOT defined: shared memory goes through
// DECODEBENCH_SHARED / DECODEBENCH_DYNAMIC_SHARED, and a bare __shared__ must not compile into
// a per-thread variable. __restrict__ is a GCC/Clang keyword already.
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

// ---------------------------------------------------------------------------------------------
// CUDA vector types (same sizes and alignments as vector_types.h).
// ---------------------------------------------------------------------------------------------
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
inline constexpr uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
inline constexpr uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline constexpr int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline constexpr int2 make_int2(int x, int y) { return {x, y}; }
inline constexpr float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline constexpr float2 make_float2(float x, float y) { return {x, y}; }

inline constexpr int warpSize = 32;

namespace decodebench::emu {

// What launch() throws: a kernel fault the emulator detected (barrier mismatch, deadlock, no
// progress, misaligned vector access, cp.async outside shared memory, bad launch configuration,
// an exception escaping the kernel). The message names the kernel and the block.
struct EmuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Built-in indices of the calling emulated thread.
struct ThreadIndices {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

namespace detail {
inline thread_local const ThreadIndices* tls_indices = nullptr;
[[noreturn]] void outside_kernel(const char* what);
inline const ThreadIndices& indices() {
  if (tls_indices == nullptr) outside_kernel("threadIdx/blockIdx/blockDim/gridDim");
  return *tls_indices;
}
[[noreturn]] void misaligned(const void* p, std::size_t alignment, const char* what);
}  // namespace detail

// --- primitives (kernels/emu/emu.cpp) ---------------------------------------------------------
void syncthreads(std::source_location site);
void syncwarp(unsigned mask, std::source_location site);

// Warp exchange in PTX shfl.sync terms (mode, lane operand b, and the segment width that CUDA
// encodes in operand c).
enum class ShflMode { idx, up, down, bfly };
std::uint32_t shfl(ShflMode mode, unsigned mask, std::uint32_t value, int b, int width,
                   std::source_location site);
unsigned ballot(unsigned mask, bool predicate, std::source_location site);

// Warp-collective step of the tensor-core operations (device/mma.h: mma.sync, ldmatrix): every
// lane publishes `count` 32-bit words (at most kWarpGatherMaxWords), one warp-synchronous step,
// and each lane receives all lanes' words, out[lane * count + w]. The .aligned instructions need
// every lane of the warp, so a lane that exited or does not exist (a partial last warp) is an
// error; `op` names the operation in reports, and the lanes of one step must agree on it.
inline constexpr int kWarpGatherMaxWords = 8;
void warp_gather(const char* op, const std::uint32_t* words, int count, std::uint32_t* out,
                 std::source_location site);

// Shared memory of the running block. Static arrays are keyed by their declaration site; each is
// its own exact-size heap allocation, filled with 0xFF bytes (a NaN for floats) per block.
void* static_shared(const void* site_key, std::size_t bytes, const char* name, const char* file,
                    int line);
void* dynamic_shared();

// cp.async: queued per thread, performed by the thread's wait.
void cp_async(void* smem, const void* gmem, int bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int pending_groups);

// Throws EmuError naming `what` unless [p, p + bytes) lies inside the running block's shared
// memory (cp.async destinations, ldmatrix rows).
void check_shared(const void* p, std::size_t bytes, const char* what);

inline void check_aligned(const void* p, std::size_t alignment, const char* what) {
  if ((reinterpret_cast<std::uintptr_t>(p) & (alignment - 1)) != 0) {
    detail::misaligned(p, alignment, what);
  }
}

// --- launch -----------------------------------------------------------------------------------
// Runs `body(closure)` on every thread of every block; returns when the grid has finished.
// Throws EmuError on a fault. `kernel_key` identifies the kernel (its static shared arrays are
// remembered per kernel, so later blocks get them allocated up front).
void launch_erased(const char* kernel_name, const void* kernel_key, dim3 grid, dim3 block,
                   std::size_t dynamic_smem_bytes, void (*body)(const void* closure),
                   const void* closure);

template <typename T>
struct Identity {
  using type = T;
};

// The emulator's `kernel<<<grid, block, dynamic_smem_bytes>>>(params)`.
template <typename Params>
void launch(const char* kernel_name, void (*kernel)(Params), dim3 grid, dim3 block,
            std::size_t dynamic_smem_bytes, const typename Identity<Params>::type& params) {
  struct Closure {
    void (*kernel)(Params);
    const Params* params;
  };
  const Closure closure{kernel, &params};
  launch_erased(
      kernel_name, reinterpret_cast<const void*>(kernel), grid, block, dynamic_smem_bytes,
      [](const void* c) {
        const auto* self = static_cast<const Closure*>(c);
        self->kernel(*self->params);
      },
      &closure);
}

// Performance knobs and diagnostics.
// Seconds a block may go without progress before it is reported (env DECODEBENCH_EMU_TIMEOUT_S,
// default 20).
double no_progress_timeout_s();

}  // namespace decodebench::emu

// ---------------------------------------------------------------------------------------------
// CUDA built-ins and intrinsics in the global namespace, as nvcc has them.
// ---------------------------------------------------------------------------------------------
#define threadIdx (::decodebench::emu::detail::indices().thread_idx)
#define blockIdx (::decodebench::emu::detail::indices().block_idx)
#define blockDim (::decodebench::emu::detail::indices().block_dim)
#define gridDim (::decodebench::emu::detail::indices().grid_dim)

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  decodebench::emu::syncthreads(site);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  decodebench::emu::syncwarp(mask, site);
}

namespace decodebench::emu::detail {
template <typename T>
T shfl_any(ShflMode mode, unsigned mask, T var, int b, int width, std::source_location site) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "warp shuffles move 4- or 8-byte values");
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(shfl(mode, mask, std::bit_cast<std::uint32_t>(var), b, width, site));
  } else {
    // Like CUDA: an 8-byte shuffle is two 4-byte shuffles with the same lane operand.
    const auto bits = std::bit_cast<std::uint64_t>(var);
    const std::uint64_t lo = shfl(mode, mask, static_cast<std::uint32_t>(bits), b, width, site);
    const std::uint64_t hi =
        shfl(mode, mask, static_cast<std::uint32_t>(bits >> 32), b, width, site);
    return std::bit_cast<T>(lo | (hi << 32));
  }
}
}  // namespace decodebench::emu::detail

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
                     std::source_location site = std::source_location::current()) {
  return decodebench::emu::detail::shfl_any(decodebench::emu::ShflMode::idx, mask, var, src_lane,
                                            width, site);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                        std::source_location site = std::source_location::current()) {
  return decodebench::emu::detail::shfl_any(decodebench::emu::ShflMode::up, mask, var,
                                            static_cast<int>(delta), width, site);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                          std::source_location site = std::source_location::current()) {
  return decodebench::emu::detail::shfl_any(decodebench::emu::ShflMode::down, mask, var,
                                            static_cast<int>(delta), width, site);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                         std::source_location site = std::source_location::current()) {
  return decodebench::emu::detail::shfl_any(decodebench::emu::ShflMode::bfly, mask, var, lane_mask,
                                            width, site);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return decodebench::emu::ballot(mask, predicate != 0, site);
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return decodebench::emu::ballot(mask, predicate != 0, site) != 0;
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  // Lanes that exited do not vote; every voting lane must hold the predicate.
  return decodebench::emu::ballot(mask, predicate == 0, site) == 0;
}

// Atomics: CUDA's are relaxed, and so are these (no happens-before for ThreadSanitizer).
namespace decodebench::emu::detail {
template <typename T>
T atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}
template <typename T>
T atomic_max(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (old < value && !ref.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}
template <typename T>
T atomic_min(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (value < old && !ref.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}
template <typename T>
T atomic_cas(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // the old value either way
}
}  // namespace decodebench::emu::detail

inline int atomicAdd(int* a, int v) { return decodebench::emu::detail::atomic_add(a, v); }
inline unsigned atomicAdd(unsigned* a, unsigned v) {
  return decodebench::emu::detail::atomic_add(a, v);
}
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  return decodebench::emu::detail::atomic_add(a, v);
}
inline float atomicAdd(float* a, float v) { return decodebench::emu::detail::atomic_add(a, v); }
inline int atomicMax(int* a, int v) { return decodebench::emu::detail::atomic_max(a, v); }
inline unsigned atomicMax(unsigned* a, unsigned v) {
  return decodebench::emu::detail::atomic_max(a, v);
}
inline int atomicMin(int* a, int v) { return decodebench::emu::detail::atomic_min(a, v); }
inline unsigned atomicMin(unsigned* a, unsigned v) {
  return decodebench::emu::detail::atomic_min(a, v);
}
inline int atomicExch(int* a, int v) {
  return std::atomic_ref<int>(*a).exchange(v, std::memory_order_relaxed);
}
inline unsigned atomicExch(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).exchange(v, std::memory_order_relaxed);
}
inline float atomicExch(float* a, float v) {
  return std::atomic_ref<float>(*a).exchange(v, std::memory_order_relaxed);
}
inline int atomicCAS(int* a, int compare, int v) {
  return decodebench::emu::detail::atomic_cas(a, compare, v);
}
inline unsigned atomicCAS(unsigned* a, unsigned compare, unsigned v) {
  return decodebench::emu::detail::atomic_cas(a, compare, v);
}
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long compare,
                                    unsigned long long v) {
  return decodebench::emu::detail::atomic_cas(a, compare, v);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// Math subset. exp2f/expf/logf/log2f/fmaxf/fminf/sqrtf come from <math.h>.
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a < b ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
