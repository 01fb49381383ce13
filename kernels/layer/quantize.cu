// Activation quantization for the layer step's fp8 GEMMs: a 16-bit activation matrix (the
// attention's output, o_proj's, gate_up_proj's gate half, down_proj's) cast to fp8 with a fixed
// per-tensor scale, right before the GEMM that reads it (src/workload/layer_model.h).
//
//   dst[r][c] = encode(dst_dtype, src[r][c] * inv_scale)   r < rows, c < cols, strided rows
//
// The encoders are the portable ones of device/float_formats.h (round to nearest even, fp8
// saturating to +-448 / +-57344), and the product an explicit round-to-nearest multiply, so the
// GPU and the emulator agree with src/common/dtype.h's encode_value to the bit; the hardware
// cvt.rn.satfinite.e4m3x2 would agree too, but the portable form is the definition and is
// checked through the emulator (tests/kernels/layer).
//
// Napkin math: at batch 256 the largest input (down_proj's gate half, I = 14336 for
// llama-3.1-8b) is 3.7M elements, 7.3 MB read and 3.7 MB written: about 2.5 us at the H200's
// ~4.5 TB/s, next to the ~25 us of down_proj's own 117 MB of weights (bf16) or ~13 us (fp8).
// Each thread converts 8 elements per step: one 16-byte load, one 8-byte store, so both
// are coalesced; rows whose strides or pointers are not aligned for that take a scalar path.
#include <cstdint>

#include "device/counter_rng.h"
#include "device/device.h"
#include "device/float_formats.h"
#include "kernels.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
// Named (not anonymous) so the kernel's symbol says what it is: scripts/check-spills.sh
// classifies every kernel of the library by namespace.
namespace quantize_detail {

constexpr int kVector = 8;  // elements per thread step on the vector path
constexpr int kBlock = 256;
#if defined(__CUDACC__)
// grid.x covers a row of up to kBlock x kVector x kMaxGridX = 256K elements in one pass; longer
// rows go round the stride loop.
constexpr std::int64_t kMaxGridX = 128;
#else
// The emulator runs one OS thread per CUDA thread and the blocks one after another: few blocks
// keep a test quick and make the stride loop go round.
constexpr std::int64_t kMaxGridX = 2;
#endif

template <DType kSrc>
__device__ __forceinline__ float load_src(const void* src, std::int64_t i) {
  static_assert(kSrc == DType::f16 || kSrc == DType::bf16, "quantize reads f16 or bf16");
  const std::uint16_t bits = static_cast<const std::uint16_t*>(src)[i];
  if constexpr (kSrc == DType::f16) {
    return floatfmt::f16_to_float(bits);
  } else {
    return floatfmt::bf16_to_float(bits);
  }
}

template <DType kDst>
__device__ __forceinline__ std::uint32_t encode_dst(float x, float inv_scale) {
  static_assert(kDst == DType::fp8_e4m3 || kDst == DType::fp8_e5m2, "quantize writes fp8");
  const float v = rng_detail::mul_rn(x, inv_scale);
  if constexpr (kDst == DType::fp8_e4m3) {
    return floatfmt::float_to_e4m3(v);
  } else {
    return floatfmt::float_to_e5m2(v);
  }
}

// grid (x: column blocks, y: rows), block kBlock. kVectorPath: cols, src_ld and dst_ld are
// multiples of kVector, src 16-byte and dst 8-byte aligned (checked by the launcher).
template <DType kSrc, DType kDst, bool kVectorPath>
__global__ void __launch_bounds__(kBlock)
    quantize_kernel(const __grid_constant__ QuantizeParams p) {
  const std::int64_t row = blockIdx.y;
  const auto* src_row =
      static_cast<const unsigned char*>(p.src) + row * p.src_ld * static_cast<std::int64_t>(2);
  auto* dst_row = static_cast<unsigned char*>(p.dst) + row * p.dst_ld;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kVectorPath) {
    // [cols / 8] groups: 16 bytes of src -> 8 bytes of dst, packed little-endian.
    const std::int64_t groups = p.cols / kVector;
    for (std::int64_t g = first; g < groups; g += stride) {
      float x[kVector];
      dev::unpack8<kSrc>(dev::ld_v4(src_row + g * kVector * 2), x);
      std::uint32_t words[2] = {0, 0};
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        words[e / 4] |= encode_dst<kDst>(x[e], p.inv_scale) << (8 * (e % 4));
      }
      *reinterpret_cast<uint2*>(dst_row + g * kVector) = make_uint2(words[0], words[1]);
    }
  } else {
    for (std::int64_t c = first; c < p.cols; c += stride) {
      dst_row[c] =
          static_cast<unsigned char>(encode_dst<kDst>(load_src<kSrc>(src_row, c), p.inv_scale));
    }
  }
}

template <DType kSrc, DType kDst>
LaunchResult launch_typed(const QuantizeParams& p, bool vector_path, void* stream) {
  const std::int64_t per_thread = vector_path ? kVector : 1;
  const std::int64_t items = (p.cols + per_thread - 1) / per_thread;
  const std::int64_t blocks = (items + kBlock - 1) / kBlock;
  const dim3 grid(static_cast<unsigned>(blocks < kMaxGridX ? blocks : kMaxGridX),
                  static_cast<unsigned>(p.rows));
  if (vector_path) {
    return DECODEBENCH_LAUNCH((quantize_kernel<kSrc, kDst, true>), grid, dim3(kBlock),
                              /*smem_bytes=*/0, stream, p);
  }
  return DECODEBENCH_LAUNCH((quantize_kernel<kSrc, kDst, false>), grid, dim3(kBlock),
                            /*smem_bytes=*/0, stream, p);
}

template <DType kSrc>
LaunchResult launch_from(const QuantizeParams& p, bool vector_path, void* stream) {
  if (p.dst_dtype == DType::fp8_e4m3) {
    return launch_typed<kSrc, DType::fp8_e4m3>(p, vector_path, stream);
  }
  return launch_typed<kSrc, DType::fp8_e5m2>(p, vector_path, stream);
}

}  // namespace quantize_detail

// Quantizes p.rows x p.cols elements (device pointers on CUDA, host pointers for the emulator).
// rows or cols 0 launches nothing.
LaunchResult launch_quantize(const QuantizeParams& p, void* stream) {
  using namespace quantize_detail;
  if (p.rows < 0 || p.cols < 0) {
    return {LaunchStatus::unsupported, "quantize: rows and cols must not be negative"};
  }
  if (p.rows == 0 || p.cols == 0) return {};
  if (p.src == nullptr || p.dst == nullptr) {
    return {LaunchStatus::unsupported, "quantize: src and dst must not be null"};
  }
  if (p.src_dtype != DType::f16 && p.src_dtype != DType::bf16) {
    return {LaunchStatus::unsupported, "quantize: src dtype must be f16 or bf16"};
  }
  if (p.dst_dtype != DType::fp8_e4m3 && p.dst_dtype != DType::fp8_e5m2) {
    return {LaunchStatus::unsupported, "quantize: dst dtype must be fp8_e4m3 or fp8_e5m2"};
  }
  if (p.src_ld < p.cols || p.dst_ld < p.cols) {
    return {LaunchStatus::unsupported,
            "quantize: src_ld and dst_ld must be at least cols (" + std::to_string(p.cols) +
                "), got " + std::to_string(p.src_ld) + " and " + std::to_string(p.dst_ld)};
  }
  if (p.rows > 65535) {
    return {LaunchStatus::unsupported,
            "quantize: at most 65535 rows (grid.y), got " + std::to_string(p.rows)};
  }
  const auto src_addr = reinterpret_cast<std::uintptr_t>(p.src);
  const auto dst_addr = reinterpret_cast<std::uintptr_t>(p.dst);
  const bool vector_path = p.cols % kVector == 0 && p.src_ld % kVector == 0 &&
                           p.dst_ld % kVector == 0 && src_addr % 16 == 0 && dst_addr % 8 == 0;
  if (p.src_dtype == DType::f16) return launch_from<DType::f16>(p, vector_path, stream);
  return launch_from<DType::bf16>(p, vector_path, stream);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
