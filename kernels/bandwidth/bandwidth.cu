// Bandwidth-ceiling kernels: the measured roofline of docs/design.md "Ceilings". Each streams its
// buffers once with grid-stride 16-byte accesses, so the only limit is the memory system.
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
#include "common/device.h"
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

__global__ void read_kernel(const __grid_constant__ BandwidthParams p) {
  const std::size_t n = p.bytes / 16;  // 16-byte vectors
  const auto* src = static_cast<const unsigned char*>(p.src);
  float acc = 0.f;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = dev::ld_global_nc_v4(src + 16 * i);
    acc += (__uint_as_float(v.x) + __uint_as_float(v.y)) +
           (__uint_as_float(v.z) + __uint_as_float(v.w));
  }
  const float total = block_sum(acc);
  if (threadIdx.x == 0) p.sink[blockIdx.x] = total;
}

__global__ void copy_kernel(const __grid_constant__ BandwidthParams p) {
  const std::size_t n = p.bytes / 16;
  const auto* src = static_cast<const unsigned char*>(p.src);
  auto* dst = static_cast<unsigned char*>(p.dst);
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dev::st_v4(dst + 16 * i, dev::ld_global_nc_v4(src + 16 * i));
  }
}

__global__ void triad_kernel(const __grid_constant__ BandwidthParams p) {
  const std::size_t n = p.bytes / 16;  // float4s
  const auto* b = reinterpret_cast<const float4*>(p.b);
  const auto* c = reinterpret_cast<const float4*>(p.c);
  auto* a = reinterpret_cast<float4*>(p.a);
  const float s = p.scalar;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float4 vb = b[i];
    const float4 vc = c[i];
    a[i] = make_float4(vb.x + s * vc.x, vb.y + s * vc.y, vb.z + s * vc.z, vb.w + s * vc.w);
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
