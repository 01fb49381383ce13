// Tensor-core primitives for the portable device layer: the warp-level f16/bf16 MMA, ldmatrix and
// the fp8 -> f16 conversion that feeds it. Under nvcc they are inline PTX; under the host
// compiler each is a warp-collective step of the SIMT emulator (emu::warp_gather), computed from
// the fragments exactly as the PTX ISA lays them out, so a kernel whose fragments are wrong gets
// a wrong product in the emulated tests too.
//
// CONTRACT (namespace decodebench::dev, identical on both targets; every lane of the warp must
// take part, as the .aligned instructions require):
//   FragA {uint32 reg[4]}  A of m16n8k16, 16x16 row-major: 8 f16/bf16, two per register
//   FragB {uint32 reg[2]}  B of m16n8k16, 16x8 "col" (k-major per column): 4 f16/bf16
//   FragC {float reg[4]}   C and D of m16n8k16, 16x8 f32
//   mma_layout::a_row/a_col/b_row/b_col/c_row/c_col(lane, i)   which element of the matrix
//       element i of a lane's fragment is (element i is register i / 2, half i % 2, low half
//       first; for C/D register i). constexpr, host and device.
//   mma_m16n8k16<kAB>(a, b, c) -> FragC   D = A * B + C, kAB = DType::f16 or DType::bf16
//       (mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32)
//   ldmatrix<kMatrices, kTranspose>(uint32 (&d)[kMatrices], const void* smem_row)
//       kMatrices = 1, 2 or 4 8x8 b16 matrices (ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans]
//       .shared.b16). Lane l supplies the address of row l % 8 of matrix l / 8 (16 bytes,
//       16-byte aligned, in shared memory; lanes past 8 * kMatrices supply nothing); d[m] of
//       lane l holds row l / 4, elements 2 * (l % 4) and 2 * (l % 4) + 1 of matrix m (low half
//       first), of its transpose with kTranspose.
//   movmatrix_trans(uint32 x) -> uint32   the transpose of an 8x8 b16 matrix held as ldmatrix
//       hands it out (lane l: row l / 4, elements 2 (l % 4), +1), in the same layout
//       (movmatrix.sync.aligned.m8n8.trans.b16, sm_75+): an MMA accumulator row pair made a B
//       fragment of the next MMA without shared memory.
//   fp8x2_to_f16x2<kFp8>(uint32 two_codes) -> uint32   the low two bytes (kFp8 = DType::fp8_e4m3
//       or fp8_e5m2) as an f16x2 (byte 0 -> low half): cvt.rn.f16x2.{e4m3x2,e5m2x2} on sm_89+,
//       cuda_fp8.h's integer conversion below (same bits). Exact (every fp8 value is an f16
//       value); NaN becomes the canonical f16 NaN 0x7fff, as cvt does.
//
// The emulated MMA multiplies in fp32 (products of f16 or bf16 values are exact there) and adds
// k = 0..15 onto C in order, in fp32. The tensor core's adder tree rounds differently, so
// compare GPU products with a tolerance; the emulator's are those of a plain fp32 loop.
#pragma once

#include <cstdint>

#include "device/device.h"

namespace decodebench::dev {

// m16n8k16 fragments. Registers hold two 16-bit elements each, the lower-indexed one in bits
// 0..15 (the PTX ISA's packing of .f16x2 / .bf16x2 operands).
struct FragA {
  std::uint32_t reg[4];
};
struct FragB {
  std::uint32_t reg[2];
};
struct FragC {
  float reg[4];
};

// The PTX ISA's tables "Matrix Fragments for mma.m16n8k16 with floating point type" (section
// "Warp Level Matrix Multiply-Accumulate Instructions"), for the f16/bf16 multiplicands and the
// f32 accumulator. The emulated MMA rebuilds the matrices with these; kernels use them to know
// where an element lives.
namespace mma_layout {
DECODEBENCH_HD constexpr int group_id(int lane) { return lane >> 2; }
DECODEBENCH_HD constexpr int thread_in_group(int lane) { return lane % 4; }
// A, 16x16: element i in [0, 8).
DECODEBENCH_HD constexpr int a_row(int lane, int i) {
  return group_id(lane) + ((i & 2) ? 8 : 0);  // a0,a1,a4,a5: groupID; a2,a3,a6,a7: groupID + 8
}
DECODEBENCH_HD constexpr int a_col(int lane, int i) {
  return thread_in_group(lane) * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}
// B, 16x8 (row = k, col = n): element i in [0, 4).
DECODEBENCH_HD constexpr int b_row(int lane, int i) {
  return thread_in_group(lane) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
}
DECODEBENCH_HD constexpr int b_col(int lane, int /*i*/) { return group_id(lane); }
// C and D, 16x8: element i in [0, 4).
DECODEBENCH_HD constexpr int c_row(int lane, int i) { return group_id(lane) + (i >= 2 ? 8 : 0); }
DECODEBENCH_HD constexpr int c_col(int lane, int i) { return thread_in_group(lane) * 2 + (i & 1); }
}  // namespace mma_layout

// =============================================================================================
// CUDA: inline PTX.
// =============================================================================================
#if defined(__CUDACC__)

// sm_80+ for mma.m16n8k16 and ldmatrix (sm_75); the fp8 conversion instruction is sm_89+, with
// an integer fallback below that (fp8x2_to_f16x2).
template <DType kAB>
__device__ __forceinline__ FragC mma_m16n8k16(const FragA& a, const FragB& b, const FragC& c) {
  static_assert(kAB == DType::f16 || kAB == DType::bf16, "mma_m16n8k16 takes f16 or bf16");
  FragC d;
  if constexpr (kAB == DType::f16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d.reg[0]), "=f"(d.reg[1]), "=f"(d.reg[2]), "=f"(d.reg[3])
        : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]),
          "f"(c.reg[0]), "f"(c.reg[1]), "f"(c.reg[2]), "f"(c.reg[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d.reg[0]), "=f"(d.reg[1]), "=f"(d.reg[2]), "=f"(d.reg[3])
        : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]),
          "f"(c.reg[0]), "f"(c.reg[1]), "f"(c.reg[2]), "f"(c.reg[3]));
  }
  return d;
}

// No "memory" clobber (as CUTLASS): the shared-memory writes it reads are ordered by the
// __syncthreads / __syncwarp that must precede it anyway, and those are compiler barriers.
template <int kMatrices, bool kTranspose = false>
__device__ __forceinline__ void ldmatrix(std::uint32_t (&d)[kMatrices], const void* smem_row) {
  static_assert(kMatrices == 1 || kMatrices == 2 || kMatrices == 4,
                "ldmatrix loads 1, 2 or 4 8x8 matrices");
  const std::uint32_t addr = ptx::smem_address(smem_row);
  if constexpr (kMatrices == 1 && !kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(d[0]) : "r"(addr));
  } else if constexpr (kMatrices == 1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(d[0])
                 : "r"(addr));
  } else if constexpr (kMatrices == 2 && !kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(addr));
  } else if constexpr (kMatrices == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(addr));
  } else if constexpr (!kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(addr));
  }
}

__device__ __forceinline__ std::uint32_t movmatrix_trans(std::uint32_t x) {
  std::uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(x));
  return d;
}

template <DType kFp8>
__device__ __forceinline__ std::uint32_t fp8x2_to_f16x2(std::uint32_t two_codes) {
  static_assert(kFp8 == DType::fp8_e4m3 || kFp8 == DType::fp8_e5m2,
                "fp8x2_to_f16x2 takes fp8_e4m3 or fp8_e5m2");
  const auto in = static_cast<unsigned short>(two_codes & 0xffffu);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  // sm_80 to sm_87 have no fp8 conversion instruction: cuda_fp8.h's integer path, which gives
  // the same f16 bits (exact values, the canonical NaN 0x7fff) in about ten instructions per
  // code instead of half of one.
  constexpr __nv_fp8_interpretation_t kInterp = kFp8 == DType::fp8_e4m3 ? __NV_E4M3 : __NV_E5M2;
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(in), kInterp);
  return static_cast<std::uint32_t>(h.x) | (static_cast<std::uint32_t>(h.y) << 16);
#else
  std::uint32_t out;
  if constexpr (kFp8 == DType::fp8_e4m3) {
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(out) : "h"(in));
  } else {
    asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(out) : "h"(in));
  }
  return out;
#endif
}

// =============================================================================================
// Host compiler: warp-collective steps of the SIMT emulator.
// =============================================================================================
#else

namespace detail {
template <DType kAB>
inline float mma_element(std::uint32_t reg, int half) {
  const auto bits = static_cast<std::uint16_t>(half == 0 ? reg & 0xffffu : reg >> 16);
  return kAB == DType::f16 ? floatfmt::f16_to_float(bits) : floatfmt::bf16_to_float(bits);
}
}  // namespace detail

template <DType kAB>
inline FragC mma_m16n8k16(const FragA& a, const FragB& b, const FragC& c,
                          std::source_location site = std::source_location::current()) {
  static_assert(kAB == DType::f16 || kAB == DType::bf16, "mma_m16n8k16 takes f16 or bf16");
  constexpr int kWords = 6;  // A's 4 registers, B's 2; C/D stay in the lane (same layout)
  const std::uint32_t mine[kWords] = {a.reg[0], a.reg[1], a.reg[2], a.reg[3], b.reg[0], b.reg[1]};
  std::uint32_t all[32 * kWords];
  emu::warp_gather(kAB == DType::f16 ? "mma.sync.m16n8k16.f16" : "mma.sync.m16n8k16.bf16", mine,
                   kWords, all, site);
  float am[16][16];
  float bm[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const std::uint32_t* w = all + lane * kWords;
    for (int i = 0; i < 8; ++i) {
      am[mma_layout::a_row(lane, i)][mma_layout::a_col(lane, i)] =
          detail::mma_element<kAB>(w[i / 2], i % 2);
    }
    for (int i = 0; i < 4; ++i) {
      bm[mma_layout::b_row(lane, i)][mma_layout::b_col(lane, i)] =
          detail::mma_element<kAB>(w[4 + i / 2], i % 2);
    }
  }
  const int lane =
      static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
  FragC d;
  for (int i = 0; i < 4; ++i) {
    const int row = mma_layout::c_row(lane, i);
    const int col = mma_layout::c_col(lane, i);
    float acc = c.reg[i];
    for (int k = 0; k < 16; ++k) acc += am[row][k] * bm[k][col];
    d.reg[i] = acc;
  }
  return d;
}

template <int kMatrices, bool kTranspose = false>
inline void ldmatrix(std::uint32_t (&d)[kMatrices], const void* smem_row,
                     std::source_location site = std::source_location::current()) {
  static_assert(kMatrices == 1 || kMatrices == 2 || kMatrices == 4,
                "ldmatrix loads 1, 2 or 4 8x8 matrices");
  static constexpr const char* kName[2][5] = {
      {"", "ldmatrix.x1", "ldmatrix.x2", "", "ldmatrix.x4"},
      {"", "ldmatrix.x1.trans", "ldmatrix.x2.trans", "", "ldmatrix.x4.trans"}};
  const char* name = kName[kTranspose ? 1 : 0][kMatrices];
  const auto addr = reinterpret_cast<std::uintptr_t>(smem_row);
  const std::uint32_t mine[2] = {
      static_cast<std::uint32_t>(addr),
      static_cast<std::uint32_t>(static_cast<std::uint64_t>(addr) >> 32)};
  std::uint32_t all[32 * 2];
  emu::warp_gather(name, mine, 2, all, site);
  // Row r of matrix m comes from lane 8 * m + r; lanes past 8 * kMatrices are not read.
  const std::uint16_t* rows[kMatrices][8];
  for (int m = 0; m < kMatrices; ++m) {
    for (int r = 0; r < 8; ++r) {
      const int src = 8 * m + r;
      const std::uint64_t a = all[2 * src] | (static_cast<std::uint64_t>(all[2 * src + 1]) << 32);
      const void* p = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(a));
      emu::check_aligned(p, 16, name);
      emu::check_shared(p, 16, name);
      rows[m][r] = static_cast<const std::uint16_t*>(p);
    }
  }
  const int lane =
      static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
  const int r = lane / 4;
  const int c = 2 * (lane % 4);
  for (int m = 0; m < kMatrices; ++m) {
    // Element (row, col) of matrix m; .trans hands out the transpose: (col, row).
    const std::uint16_t lo = kTranspose ? rows[m][c][r] : rows[m][r][c];
    const std::uint16_t hi = kTranspose ? rows[m][c + 1][r] : rows[m][r][c + 1];
    d[m] = lo | (static_cast<std::uint32_t>(hi) << 16);
  }
}

inline std::uint32_t movmatrix_trans(std::uint32_t x,
                                     std::source_location site = std::source_location::current()) {
  std::uint32_t all[32];
  emu::warp_gather("movmatrix.trans", &x, 1, all, site);
  // Element (r, c) of the matrix is half c % 2 of lane 4 r + c / 2's word.
  const auto element = [&](int r, int c) -> std::uint32_t {
    return (all[4 * r + c / 2] >> (16 * (c % 2))) & 0xffffu;
  };
  const int lane =
      static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
  // Lane l holds row l / 4 of the transpose: elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l /
  // 4).
  return element(2 * (lane % 4), lane / 4) | (element(2 * (lane % 4) + 1, lane / 4) << 16);
}

template <DType kFp8>
inline std::uint32_t fp8x2_to_f16x2(std::uint32_t two_codes) {
  static_assert(kFp8 == DType::fp8_e4m3 || kFp8 == DType::fp8_e5m2,
                "fp8x2_to_f16x2 takes fp8_e4m3 or fp8_e5m2");
  auto one = [](std::uint8_t code) -> std::uint32_t {
    const float v =
        kFp8 == DType::fp8_e4m3 ? floatfmt::e4m3_to_float(code) : floatfmt::e5m2_to_float(code);
    if (v != v) return 0x7fffu;        // cvt's canonical NaN (sign and payload dropped)
    return floatfmt::float_to_f16(v);  // exact: every fp8 value is an f16 value
  };
  return one(static_cast<std::uint8_t>(two_codes & 0xffu)) |
         (one(static_cast<std::uint8_t>((two_codes >> 8) & 0xffu)) << 16);
}

#endif  // __CUDACC__

}  // namespace decodebench::dev
