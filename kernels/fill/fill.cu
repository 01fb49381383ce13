// Device-side workload fill: writes a tensor of the workload with exactly the values the host
// generator (src/workload, fill_values) writes, so a point too large to materialize on the host
// is generated where it lives, and the harness can still rebuild any subset on the host and
// validate it bit for bit.
//
//   dst[i] = encode(dtype, counter_normal(seed, tensor, index_offset + i) * inv_scale), i < count
//
// counter_normal (device/counter_rng.h) and the encoders (device/float_formats.h) are written
// once for host and device with exactly rounded operations only, and the product below is an
// explicit round-to-nearest multiply (never contracted into an FMA), so the two targets agree
// to the bit. The hardware conversions (cvt.rn.f16.f32 ...) are deliberately not used: the
// portable encoders are the definition, and a fill is not on any timed path.
//
// Napkin math: on the order of 150 instructions per element (two 64-bit splitmix rounds, a
// division, a square root, two short polynomials, the encoder) against 1-4 bytes written, so
// this kernel is compute-bound: an H100's ~3e13 lane-instructions/s give ~1e11 elements/s, and
// a 140 GB fp16 KV cache (7e10 elements) fills in about a second (estimated, not yet measured).
// One thread writes one 16-byte granule per grid-stride step (4 f32, 8 f16/bf16 or 16 fp8
// values) with a single vector store, so the stores are fully coalesced.
#include <cstdint>

#include "device/counter_rng.h"
#include "device/device.h"
#include "device/float_formats.h"
#include "kernels.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
// Named (not anonymous) so the kernel's symbol says what it is: scripts/check-spills.sh
// classifies every kernel of the library by namespace.
namespace fill_detail {

constexpr int kGranuleBytes = 16;
constexpr int kFillBlock = 256;
#if defined(__CUDACC__)
// Enough blocks to fill any current GPU many times over (132 SMs x 8 resident blocks of 256);
// the grid-stride loop covers the rest.
constexpr std::uint64_t kFillMaxGrid = 4096;
#else
// The emulator runs one OS thread per CUDA thread and the blocks one after another: a few
// blocks keep a test's fill quick, and make the grid-stride loop go round many times.
constexpr std::uint64_t kFillMaxGrid = 4;
#endif

// Element storage and encoder per dtype (bits of the stored value, little-endian in memory).
template <DType kDtype>
struct Element;
template <>
struct Element<DType::f32> {
  using Bits = std::uint32_t;
  static DECODEBENCH_HD Bits encode(float x) { return floatfmt::float_as_bits(x); }
};
template <>
struct Element<DType::f16> {
  using Bits = std::uint16_t;
  static DECODEBENCH_HD Bits encode(float x) { return floatfmt::float_to_f16(x); }
};
template <>
struct Element<DType::bf16> {
  using Bits = std::uint16_t;
  static DECODEBENCH_HD Bits encode(float x) { return floatfmt::float_to_bf16(x); }
};
template <>
struct Element<DType::fp8_e4m3> {
  using Bits = std::uint8_t;
  static DECODEBENCH_HD Bits encode(float x) { return floatfmt::float_to_e4m3(x); }
};
template <>
struct Element<DType::fp8_e5m2> {
  using Bits = std::uint8_t;
  static DECODEBENCH_HD Bits encode(float x) { return floatfmt::float_to_e5m2(x); }
};

template <DType kDtype>
__device__ __forceinline__ typename Element<kDtype>::Bits fill_value(const FillParams& p,
                                                                     std::uint64_t i) {
  const float x = counter_normal(p.seed, p.tensor, p.index_offset + i);
  return Element<kDtype>::encode(rng_detail::mul_rn(x, p.inv_scale));
}

// dst: [count] elements of kDtype, 16-byte aligned (checked by the launcher).
template <DType kDtype>
__global__ void __launch_bounds__(kFillBlock) fill_kernel(const __grid_constant__ FillParams p) {
  using Bits = typename Element<kDtype>::Bits;
  constexpr int kPerGranule = kGranuleBytes / static_cast<int>(sizeof(Bits));
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(Bits));
  const std::uint64_t granules = (p.count + kPerGranule - 1) / kPerGranule;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t g = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       g < granules; g += stride) {
    const std::uint64_t first = g * kPerGranule;  // element index of this granule's first value
    if (first + kPerGranule <= p.count) {
      // A whole granule: pack the values into four little-endian 32-bit words, one 16-byte store.
      std::uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
      for (int e = 0; e < kPerGranule; ++e) {
        const std::uint32_t bits = fill_value<kDtype>(p, first + e);
        words[e / kPerWord] |= bits << (8 * sizeof(Bits) * (e % kPerWord));
      }
      dev::st_v4(static_cast<unsigned char*>(p.dst) + g * kGranuleBytes,
                 make_uint4(words[0], words[1], words[2], words[3]));
    } else {
      // The partial last granule: element stores, nothing past `count` is touched.
      Bits* dst = static_cast<Bits*>(p.dst);
      for (std::uint64_t i = first; i < p.count; ++i) dst[i] = fill_value<kDtype>(p, i);
    }
  }
}

template <DType kDtype>
LaunchResult launch_fill_typed(const FillParams& p, void* stream) {
  constexpr std::uint64_t kPerGranule = kGranuleBytes / sizeof(typename Element<kDtype>::Bits);
  const std::uint64_t granules = (p.count + kPerGranule - 1) / kPerGranule;
  const std::uint64_t blocks = (granules + kFillBlock - 1) / kFillBlock;
  const unsigned grid = static_cast<unsigned>(blocks < kFillMaxGrid ? blocks : kFillMaxGrid);
  return DECODEBENCH_LAUNCH(fill_kernel<kDtype>, dim3(grid), dim3(kFillBlock), /*smem_bytes=*/0,
                            stream, p);
}

}  // namespace fill_detail

// Fills p.count elements at p.dst (a device pointer on CUDA, a host pointer for the emulator).
// Preconditions: p.dst 16-byte aligned (cudaMalloc and operator new both give that), any count
// (0 launches nothing), any dtype of kernels.h.
LaunchResult launch_fill(const FillParams& p, void* stream) {
  using namespace fill_detail;
  if (p.count == 0) return {};
  if (p.dst == nullptr) return {LaunchStatus::unsupported, "fill: dst is null"};
  if (reinterpret_cast<std::uintptr_t>(p.dst) % kGranuleBytes != 0) {
    return {LaunchStatus::unsupported, "fill: dst must be 16-byte aligned"};
  }
  switch (p.dtype) {
    case DType::f32: return launch_fill_typed<DType::f32>(p, stream);
    case DType::f16: return launch_fill_typed<DType::f16>(p, stream);
    case DType::bf16: return launch_fill_typed<DType::bf16>(p, stream);
    case DType::fp8_e4m3: return launch_fill_typed<DType::fp8_e4m3>(p, stream);
    case DType::fp8_e5m2: return launch_fill_typed<DType::fp8_e5m2>(p, stream);
    case DType::int8:
    case DType::int4:
    case DType::int4_token: break;  // codes with scales: quantized on the host
  }
  return {LaunchStatus::unsupported, "fill: unknown dtype " +
                                         std::to_string(static_cast<int>(p.dtype)) +
                                         " (valid: f32, f16, bf16, fp8_e4m3, fp8_e5m2)"};
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
