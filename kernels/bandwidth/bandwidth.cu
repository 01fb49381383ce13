// Bandwidth-ceiling kernels: the measured roofline of docs/design.md "Ceilings". Each streams its
// buffers once with grid-stride 16-byte accesses, kUnroll of them in flight per thread, so the
// only limit is the memory system.
//
//   read   sum src (as fp32) into one value per thread block: sink[blockIdx.x]. The sum keeps
//          every load live (an unused load would be dead code) and lets tests check the result.
//          Bytes moved: bytes.
//   copy   dst = src, 16 bytes per access. Bytes moved: 2 * bytes (read + write).
//   triad  a = b + scalar * c in fp32, float4 per access. Bytes moved: 3 * bytes.
//
// Napkin math (H200, 4.8 TB/s): a 1 GiB read takes ~0.22 ms; ~20 MB in flight (Little's law at
// ~4 us latency) needs all SMs issuing 16-byte loads from many warps, hence the grid of several
// blocks per SM chosen by the launcher unless the caller gives one.
#include "device/device.h"
#include "kernels.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
namespace bandwidth_detail {

constexpr int kDefaultBlock = 256;

// Block-wide sum; result valid in thread 0. Warp shuffles, then one value per warp through
// shared memory. blockDim.x is a multiple of 32 (the launcher checks).
__device__ __forceinline__ float block_sum(float v) {
  DECODEBENCH_SHARED(float, warp_sums, 32);
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0.f;
  if (threadIdx.x == 0) {
    const int warps = static_cast<int>(blockDim.x) / 32;
    for (int w = 0; w < warps; ++w) total += warp_sums[w];
  }
  return total;
}

// Grid-stride over 16-byte vectors, kUnroll of them per thread per iteration: thread t of T
// (= gridDim.x * blockDim.x) handles vectors t, t + T, t + 2T, ... The main loop takes them
// kUnroll at a time, loading all before using any, so kUnroll independent 16-byte loads are in
// flight per thread (one per iteration would leave the ceiling a few % low at moderate
// occupancy); each of the kUnroll accesses is still coalesced across the warp. The tail takes
// the fewer than kUnroll vectors of this thread that are left, one at a time. Sizes that are not
// a multiple of T * kUnroll * 16 bytes leave each thread 0 to kUnroll - 1 tail vectors, and
// sizes below T leave some threads none at all (tests/kernels/bandwidth covers each case).
constexpr int kUnroll = 4;

// Tests compile this file once more with DECODEBENCH_BANDWIDTH_PLANT_SKIP_TAIL, a planted
// fault that drops the tails, to show that the tests catch it.
#if defined(DECODEBENCH_BANDWIDTH_PLANT_SKIP_TAIL)
constexpr bool kRunTail = false;
#else
constexpr bool kRunTail = true;
#endif

__device__ __forceinline__ float sum4(uint4 v) {
  return (__uint_as_float(v.x) + __uint_as_float(v.y)) +
         (__uint_as_float(v.z) + __uint_as_float(v.w));
}

__global__ void read_kernel(const __grid_constant__ BandwidthParams p) {
  const std::size_t n = p.bytes / 16;  // 16-byte vectors
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto* src = static_cast<const unsigned char*>(p.src);
  float acc = 0.f;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = dev::ld_global_nc_v4(src + 16 * (i + u * stride));
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += sum4(v[u]);
  }
  if (kRunTail) {
    for (; i < n; i += stride) acc += sum4(dev::ld_global_nc_v4(src + 16 * i));
  }
  const float total = block_sum(acc);
  if (threadIdx.x == 0) p.sink[blockIdx.x] = total;
}

__global__ void copy_kernel(const __grid_constant__ BandwidthParams p) {
  const std::size_t n = p.bytes / 16;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto* src = static_cast<const unsigned char*>(p.src);
  auto* dst = static_cast<unsigned char*>(p.dst);
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = dev::ld_global_nc_v4(src + 16 * (i + u * stride));
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dev::st_v4(dst + 16 * (i + u * stride), v[u]);
  }
  if (kRunTail) {
    for (; i < n; i += stride) dev::st_v4(dst + 16 * i, dev::ld_global_nc_v4(src + 16 * i));
  }
}

__device__ __forceinline__ float4 triad4(float4 b, float4 c, float s) {
  return make_float4(b.x + s * c.x, b.y + s * c.y, b.z + s * c.z, b.w + s * c.w);
}

__global__ void triad_kernel(const __grid_constant__ BandwidthParams p) {
  const std::size_t n = p.bytes / 16;  // float4s
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto* b = reinterpret_cast<const float4*>(p.b);
  const auto* c = reinterpret_cast<const float4*>(p.c);
  auto* a = reinterpret_cast<float4*>(p.a);
  const float s = p.scalar;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    float4 vb[kUnroll], vc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      vb[u] = b[i + u * stride];
      vc[u] = c[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) a[i + u * stride] = triad4(vb[u], vc[u], s);
  }
  if (kRunTail) {
    for (; i < n; i += stride) a[i] = triad4(b[i], c[i], s);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Blocks to launch when the caller leaves it to us: enough to cover the buffer, capped at a
// few blocks per SM (grid-stride covers the rest). The emulator runs blocks one at a time, so
// there a handful is plenty.
int default_grid(std::size_t vectors, int block) {
#if defined(__CUDACC__)
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  const std::size_t cap = static_cast<std::size_t>(sms) * 8;
#else
  const std::size_t cap = 8;
#endif
  const std::size_t need =
      (vectors + static_cast<std::size_t>(block) - 1) / static_cast<std::size_t>(block);
  return static_cast<int>(need < 1 ? 1 : (need < cap ? need : cap));
}

}  // namespace bandwidth_detail

// Launches one bandwidth kernel. p.grid = 0 lets the launcher choose (see default_grid); a read
// launch then needs sink[] sized for that grid, so callers that read the sink pass p.grid.
LaunchResult launch_bandwidth(BandwidthKernel which, const BandwidthParams& p, void* stream) {
  using namespace bandwidth_detail;
  auto bad = [](const std::string& why) {
    return LaunchResult{LaunchStatus::unsupported, "bandwidth kernel: " + why};
  };
  if (p.bytes == 0 || p.bytes % 16 != 0) {
    return bad("bytes must be a positive multiple of 16, got " + std::to_string(p.bytes));
  }
  const int block = p.block > 0 ? p.block : kDefaultBlock;
  if (block % 32 != 0 || block > 1024) {
    return bad("block must be a multiple of 32 up to 1024, got " + std::to_string(block));
  }
  if (p.grid < 0)
    return bad("grid must be >= 0 (0 = launcher's choice), got " + std::to_string(p.grid));
  const int grid = p.grid > 0 ? p.grid : default_grid(p.bytes / 16, block);
  switch (which) {
    case BandwidthKernel::read:
      if (p.src == nullptr || p.sink == nullptr) return bad("read needs src and sink");
      if (!aligned16(p.src)) return bad("src must be 16-byte aligned");
      return DECODEBENCH_LAUNCH(read_kernel, dim3(grid), dim3(block), 0, stream, p);
    case BandwidthKernel::copy:
      if (p.src == nullptr || p.dst == nullptr) return bad("copy needs src and dst");
      if (!aligned16(p.src) || !aligned16(p.dst)) return bad("src and dst must be 16-byte aligned");
      return DECODEBENCH_LAUNCH(copy_kernel, dim3(grid), dim3(block), 0, stream, p);
    case BandwidthKernel::triad:
      if (p.a == nullptr || p.b == nullptr || p.c == nullptr) return bad("triad needs a, b and c");
      if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c)) {
        return bad("a, b and c must be 16-byte aligned");
      }
      return DECODEBENCH_LAUNCH(triad_kernel, dim3(grid), dim3(block), 0, stream, p);
  }
  return bad("unknown kernel " + std::to_string(static_cast<int>(which)));
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
