// The tensor-core primitives of device/mma.h through the SIMT emulator: the m16n8k16 fragment
// tables against literal entries of the PTX ISA and against the ISA's formulas (written here
// from the ISA text, not taken from mma.h), the emulated MMA against a plain fp32 product,
// ldmatrix x1/x2/x4 and .trans against expected per-lane values, an ldmatrix -> mma pipeline,
// the fp8 -> f16x2 conversion for every code, the misuse reports, and planted faults (a
// transposed fragment layout, a transposed ldmatrix expectation, swapped conversion halves) that
// the same checkers must catch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/mma.h"

namespace decodebench {
namespace {

using dev::FragA;
using dev::FragB;
using dev::FragC;

// --- the ISA's fragment formulas ("Matrix Fragments for mma.m16n8k16 with floating point type")
// groupID = laneid >> 2, threadID_in_group = laneid % 4.
//   A: row = groupID for a0,a1,a4,a5, groupID + 8 otherwise;
//      col = threadID_in_group * 2 + (i & 1), + 8 for i >= 4
//   B: row = threadID_in_group * 2 + (i & 1), + 8 for i >= 2;  col = groupID
//   C/D: row = groupID for i < 2, groupID + 8 otherwise;  col = threadID_in_group * 2 + (i & 1)
namespace isa {
struct Pos {
  int row, col;
  bool operator==(const Pos&) const = default;
};
Pos a(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  const bool low_rows = (0 <= i && i < 2) || (4 <= i && i < 6);
  return {low_rows ? g : g + 8, i < 4 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8};
}
Pos b(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8, g};
}
Pos c(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}
}  // namespace isa

TEST(MmaLayout, LiteralEntriesOfTheIsaTables) {
  struct Entry {
    char matrix;
    int lane, i, row, col;
  };
  const Entry entries[] = {
      // A (16x16): lane 0 holds rows 0 and 8, columns 0,1 and 8,9.
      {'a', 0, 0, 0, 0},
      {'a', 0, 1, 0, 1},
      {'a', 0, 2, 8, 0},
      {'a', 0, 3, 8, 1},
      {'a', 0, 4, 0, 8},
      {'a', 0, 5, 0, 9},
      {'a', 0, 6, 8, 8},
      {'a', 0, 7, 8, 9},
      {'a', 5, 0, 1, 2},
      {'a', 5, 7, 9, 11},
      {'a', 31, 0, 7, 6},
      {'a', 31, 3, 15, 7},
      {'a', 31, 4, 7, 14},
      {'a', 31, 7, 15, 15},
      // B (16x8, row = k): lane 0 holds k 0,1 and 8,9 of column 0.
      {'b', 0, 0, 0, 0},
      {'b', 0, 1, 1, 0},
      {'b', 0, 2, 8, 0},
      {'b', 0, 3, 9, 0},
      {'b', 6, 0, 4, 1},
      {'b', 6, 2, 12, 1},
      {'b', 31, 0, 6, 7},
      {'b', 31, 3, 15, 7},
      // C/D (16x8).
      {'c', 0, 0, 0, 0},
      {'c', 0, 1, 0, 1},
      {'c', 0, 2, 8, 0},
      {'c', 0, 3, 8, 1},
      {'c', 13, 0, 3, 2},
      {'c', 13, 2, 11, 2},
      {'c', 31, 0, 7, 6},
      {'c', 31, 3, 15, 7},
  };
  namespace L = dev::mma_layout;
  for (const Entry& e : entries) {
    const isa::Pos want{e.row, e.col};
    isa::Pos formula{}, header{};
    switch (e.matrix) {
      case 'a':
        formula = isa::a(e.lane, e.i);
        header = {L::a_row(e.lane, e.i), L::a_col(e.lane, e.i)};
        break;
      case 'b':
        formula = isa::b(e.lane, e.i);
        header = {L::b_row(e.lane, e.i), L::b_col(e.lane, e.i)};
        break;
      default:
        formula = isa::c(e.lane, e.i);
        header = {L::c_row(e.lane, e.i), L::c_col(e.lane, e.i)};
    }
    const std::string where =
        std::string(1, e.matrix) + std::to_string(e.i) + " of lane " + std::to_string(e.lane);
    EXPECT_EQ(formula, want) << where << " (test's formula)";
    EXPECT_EQ(header, want) << where << " (mma_layout)";
  }
}

TEST(MmaLayout, EveryEntryMatchesTheIsaFormulasAndCoversTheMatrixOnce) {
  namespace L = dev::mma_layout;
  std::vector<int> a_seen(16 * 16, 0), b_seen(16 * 8, 0), c_seen(16 * 8, 0);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const isa::Pos p = isa::a(lane, i);
      EXPECT_EQ((isa::Pos{L::a_row(lane, i), L::a_col(lane, i)}), p)
          << "a" << i << " lane " << lane;
      ++a_seen[static_cast<std::size_t>(p.row * 16 + p.col)];
    }
    for (int i = 0; i < 4; ++i) {
      const isa::Pos pb = isa::b(lane, i);
      const isa::Pos pc = isa::c(lane, i);
      EXPECT_EQ((isa::Pos{L::b_row(lane, i), L::b_col(lane, i)}), pb) << "b" << i << " " << lane;
      EXPECT_EQ((isa::Pos{L::c_row(lane, i), L::c_col(lane, i)}), pc) << "c" << i << " " << lane;
      ++b_seen[static_cast<std::size_t>(pb.row * 8 + pb.col)];
      ++c_seen[static_cast<std::size_t>(pc.row * 8 + pc.col)];
    }
  }
  for (int n : a_seen) EXPECT_EQ(n, 1);
  for (int n : b_seen) EXPECT_EQ(n, 1);
  for (int n : c_seen) EXPECT_EQ(n, 1);
}

// --- the emulated MMA against a plain fp32 product --------------------------------------------

// How the test kernel places elements into fragments: the ISA's layout, or a planted fault.
enum class Plant { none, a_transposed, d_rows_swapped };

isa::Pos a_pos(Plant plant, int lane, int i) {
  const isa::Pos p = isa::a(lane, i);
  return plant == Plant::a_transposed ? isa::Pos{p.col, p.row} : p;
}
isa::Pos d_pos(Plant plant, int lane, int i) {
  const isa::Pos p = isa::c(lane, i);
  return plant == Plant::d_rows_swapped ? isa::Pos{p.row ^ 8, p.col} : p;
}

struct MmaParams {
  DType ab;
  Plant plant;
  const std::uint16_t* a;  // [warps][16][16] f16/bf16 bits, row-major (m, k)
  const std::uint16_t* b;  // [warps][16][8] (k, n)
  const float* c;          // [warps][16][8]
  float* d;                // [warps][16][8]
};

// Each warp multiplies its own matrices: fragments packed from global memory by the ISA's
// formulas, one mma, D written back by the same formulas.
__global__ void mma_kernel(const __grid_constant__ MmaParams p) {
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32;
  const std::size_t w = static_cast<std::size_t>(t / 32);
  const std::uint16_t* a = p.a + w * 256;
  const std::uint16_t* b = p.b + w * 128;
  FragA fa{};
  FragB fb{};
  FragC fc{};
  for (int i = 0; i < 8; ++i) {
    const isa::Pos q = a_pos(p.plant, lane, i);
    fa.reg[i / 2] |= static_cast<std::uint32_t>(a[q.row * 16 + q.col]) << (16 * (i % 2));
  }
  for (int i = 0; i < 4; ++i) {
    const isa::Pos q = isa::b(lane, i);
    fb.reg[i / 2] |= static_cast<std::uint32_t>(b[q.row * 8 + q.col]) << (16 * (i % 2));
    const isa::Pos r = isa::c(lane, i);
    fc.reg[i] = p.c[w * 128 + static_cast<std::size_t>(r.row * 8 + r.col)];
  }
  const FragC fd = p.ab == DType::f16 ? dev::mma_m16n8k16<DType::f16>(fa, fb, fc)
                                      : dev::mma_m16n8k16<DType::bf16>(fa, fb, fc);
  for (int i = 0; i < 4; ++i) {
    const isa::Pos q = d_pos(p.plant, lane, i);
    p.d[w * 128 + static_cast<std::size_t>(q.row * 8 + q.col)] = fd.reg[i];
  }
}

float to_float(DType t, std::uint16_t bits) {
  return t == DType::f16 ? floatfmt::f16_to_float(bits) : floatfmt::bf16_to_float(bits);
}
std::uint16_t from_float(DType t, float v) {
  return t == DType::f16 ? floatfmt::float_to_f16(v) : floatfmt::float_to_bf16(v);
}

// Random values over a wide range of magnitudes (f16 subnormals included), signs mixed.
std::vector<std::uint16_t> random_matrix(DType t, std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-20, 3);
  std::vector<std::uint16_t> m(n);
  for (auto& x : m) {
    const float v = std::ldexp(mant(rng), exp(rng)) * (rng() % 2 ? -1.f : 1.f);
    x = from_float(t, v);
  }
  return m;
}

// D = A * B + C as a plain loop in fp32, k ascending (the emulator's order). [warps][16][8]
std::vector<float> plain_product(DType t, int warps, const std::vector<std::uint16_t>& a,
                                 const std::vector<std::uint16_t>& b, const std::vector<float>& c) {
  std::vector<float> d(static_cast<std::size_t>(warps) * 128);
  for (int w = 0; w < warps; ++w) {
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 8; ++n) {
        const std::size_t o = static_cast<std::size_t>(w * 128 + m * 8 + n);
        float acc = c[o];
        for (int k = 0; k < 16; ++k) {
          acc += to_float(t, a[static_cast<std::size_t>(w * 256 + m * 16 + k)]) *
                 to_float(t, b[static_cast<std::size_t>(w * 128 + k * 8 + n)]);
        }
        d[o] = acc;
      }
    }
  }
  return d;
}

// The checker: elements of `got` that differ from `want` (bit for bit: the emulator adds in the
// same order as the plain loop, and the products are exact); the first few are described.
int mismatches(const std::vector<float>& got, const std::vector<float>& want, std::string* first) {
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
    if (++bad <= 3 && first != nullptr) {
      *first += " [warp " + std::to_string(i / 128) + " m " + std::to_string(i % 128 / 8) + " n " +
                std::to_string(i % 8) + "] " + std::to_string(got[i]) +
                " != " + std::to_string(want[i]);
    }
  }
  return bad;
}

// Runs one mma per warp on seeded random matrices; returns the checker's mismatch count.
int run_mma(DType t, unsigned seed, bool zero_c, Plant plant, std::string* report) {
  constexpr int kWarps = 2;
  std::mt19937 rng(seed);
  const auto a = random_matrix(t, kWarps * 256, rng);
  const auto b = random_matrix(t, kWarps * 128, rng);
  std::vector<float> c(kWarps * 128, 0.f);
  if (!zero_c) {
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    for (float& x : c) x = u(rng);
  }
  std::vector<float> d(kWarps * 128, -1.f);
  const MmaParams p{t, plant, a.data(), b.data(), c.data(), d.data()};
  const auto r = DECODEBENCH_LAUNCH(mma_kernel, dim3(1), dim3(32 * kWarps), 0, nullptr, p);
  EXPECT_TRUE(r.ok()) << r.message;
  return mismatches(d, plain_product(t, kWarps, a, b, c), report);
}

TEST(EmuMma, EqualsThePlainFp32Product) {
  for (DType t : {DType::f16, DType::bf16}) {
    for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
      for (bool zero_c : {true, false}) {
        std::string report;
        EXPECT_EQ(run_mma(t, seed, zero_c, Plant::none, &report), 0)
            << (t == DType::f16 ? "f16" : "bf16") << " seed " << seed << " zero_c " << zero_c << ":"
            << report;
      }
    }
  }
}

TEST(EmuMma, PlantedLayoutFaultsAreCaught) {
  for (DType t : {DType::f16, DType::bf16}) {
    for (Plant plant : {Plant::a_transposed, Plant::d_rows_swapped}) {
      // Most of the 256 elements move: far more than a rounding difference could explain.
      EXPECT_GT(run_mma(t, 7, /*zero_c=*/false, plant, nullptr), 128)
          << "plant " << static_cast<int>(plant);
    }
  }
}

// A = identity, B(k, n) = 8 k + n + 1, C = 0: D = B, so each lane's D element i names the
// position it holds, which must be the ISA's.
TEST(EmuMma, EachLaneHoldsTheIsaElementsOfD) {
  std::vector<std::uint16_t> a(256), b(128);
  for (int m = 0; m < 16; ++m) {
    for (int k = 0; k < 16; ++k) a[static_cast<std::size_t>(m * 16 + k)] = m == k ? 0x3c00 : 0;
  }
  for (int k = 0; k < 16; ++k) {
    for (int n = 0; n < 8; ++n) {
      b[static_cast<std::size_t>(k * 8 + n)] = floatfmt::float_to_f16(8.f * k + n + 1);
    }
  }
  const std::vector<float> c(128, 0.f);
  std::vector<float> d(128, -1.f);
  const MmaParams p{DType::f16, Plant::none, a.data(), b.data(), c.data(), d.data()};
  const auto r = DECODEBENCH_LAUNCH(mma_kernel, dim3(1), dim3(32), 0, nullptr, p);
  ASSERT_TRUE(r.ok()) << r.message;
  // d was written through isa::c, so d[row][col] must hold 8 row + col + 1.
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      EXPECT_EQ(d[static_cast<std::size_t>(m * 8 + n)], 8.f * m + n + 1) << m << "," << n;
    }
  }
}

struct MisuseParams {
  int which;
  std::uint16_t* global;
};

__global__ void mma_misuse_kernel(const __grid_constant__ MisuseParams p) {
  DECODEBENCH_DYNAMIC_SHARED(std::uint16_t, s);
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::uint32_t d4[4];
  std::uint32_t d2[2];
  switch (p.which) {
    case 0:  // a lane exits before the mma
      if (lane == 5) return;
      (void)dev::mma_m16n8k16<DType::f16>(FragA{}, FragB{}, FragC{});
      break;
    case 1: (void)dev::mma_m16n8k16<DType::f16>(FragA{}, FragB{}, FragC{}); break;  // 16 threads
    case 2: dev::ldmatrix<4>(d4, s + 8 * lane + 1); break;     // rows not 16-byte aligned
    case 3: dev::ldmatrix<4>(d4, p.global + 8 * lane); break;  // rows outside shared memory
    case 4:  // half the warp asks for x2, the other half for x4
      if (lane < 16) {
        dev::ldmatrix<2>(d2, s + 8 * lane);
      } else {
        dev::ldmatrix<4>(d4, s + 8 * lane);
      }
      break;
  }
}

TEST(EmuMma, MisuseIsReported) {
  alignas(16) std::uint16_t global[32 * 8] = {};
  struct Case {
    int which, threads;
    const char* expect;
  };
  const Case cases[] = {
      {0, 32, "mma.sync.m16n8k16.f16 at "},
      {1, 16, "needs all 32 lanes of the warp; only the lanes of mask 0x0000ffff took part"},
      {2, 32, "ldmatrix.x4: address"},
      {3, 32, "ldmatrix.x4: 16 bytes at"},
      {4, 32, "mixes ldmatrix.x"},
  };
  for (const Case& c : cases) {
    const auto r = DECODEBENCH_LAUNCH(mma_misuse_kernel, dim3(1), dim3(c.threads),
                                      32 * 8 * sizeof(std::uint16_t), nullptr,
                                      (MisuseParams{c.which, global}));
    ASSERT_FALSE(r.ok()) << c.which;
    EXPECT_NE(r.message.find(c.expect), std::string::npos) << c.which << ": " << r.message;
  }
  // Case 0's report says why: lane 5 exited.
  const auto r = DECODEBENCH_LAUNCH(mma_misuse_kernel, dim3(1), dim3(32), 512, nullptr,
                                    (MisuseParams{0, global}));
  EXPECT_NE(r.message.find("only the lanes of mask 0xffffffdf took part"), std::string::npos)
      << r.message;
}

// --- ldmatrix ---------------------------------------------------------------------------------

constexpr int kRowStride = 24;  // elements per shared row: 48 bytes, rows 16-byte aligned apart

// Element (r, c) of 8x8 matrix m in the test tile: distinct, and readable in a report.
std::uint16_t tile_value(int m, int r, int c) {
  return static_cast<std::uint16_t>(m * 64 + r * 8 + c);
}

struct LdParams {
  int matrices;
  bool trans;
  std::uint32_t* out;  // [32][4]
};

__global__ void ldmatrix_kernel(const __grid_constant__ LdParams p) {
  DECODEBENCH_DYNAMIC_SHARED(std::uint16_t, s);  // [4 matrices][8 rows][kRowStride]
  const int lane = static_cast<int>(threadIdx.x);
  // Each lane fills row lane % 8 of matrix lane / 8.
  for (int c = 0; c < 8; ++c) s[lane * kRowStride + c] = tile_value(lane / 8, lane % 8, c);
  __syncthreads();
  // Lanes that supply no row for this shape pass a null pointer: it must not be read.
  const std::uint16_t* row = lane < 8 * p.matrices ? s + lane * kRowStride : nullptr;
  std::uint32_t d1[1] = {0};
  std::uint32_t d2[2] = {0, 0};
  std::uint32_t d4[4] = {0, 0, 0, 0};
  switch (p.matrices * 2 + (p.trans ? 1 : 0)) {
    case 2: dev::ldmatrix<1>(d1, row); break;
    case 3: dev::ldmatrix<1, true>(d1, row); break;
    case 4: dev::ldmatrix<2>(d2, row); break;
    case 5: dev::ldmatrix<2, true>(d2, row); break;
    case 8: dev::ldmatrix<4>(d4, row); break;
    case 9: dev::ldmatrix<4, true>(d4, row); break;
  }
  const std::uint32_t* d = p.matrices == 1 ? d1 : p.matrices == 2 ? d2 : d4;
  for (int m = 0; m < 4; ++m) p.out[lane * 4 + m] = m < p.matrices ? d[m] : 0u;
}

// What lane `lane` must receive in d[m]: row lane / 4, elements 2 (lane % 4) and + 1, of matrix m
// (of its transpose with .trans), low half first.
std::uint32_t expected_ld(int lane, int m, bool trans) {
  const int r = lane / 4, c = 2 * (lane % 4);
  const std::uint16_t lo = trans ? tile_value(m, c, r) : tile_value(m, r, c);
  const std::uint16_t hi = trans ? tile_value(m, c + 1, r) : tile_value(m, r, c + 1);
  return lo | (static_cast<std::uint32_t>(hi) << 16);
}

std::vector<std::uint32_t> run_ldmatrix(int matrices, bool trans) {
  std::vector<std::uint32_t> out(32 * 4, 0xdeadbeefu);
  const LdParams p{matrices, trans, out.data()};
  const auto r = DECODEBENCH_LAUNCH(ldmatrix_kernel, dim3(1), dim3(32),
                                    4 * 8 * kRowStride * sizeof(std::uint16_t), nullptr, p);
  EXPECT_TRUE(r.ok()) << r.message;
  return out;
}

// The checker: d[m] of every lane for the loaded matrices against expected_ld(..., want_trans);
// the first few mismatches are described in `first`.
int ld_mismatches(const std::vector<std::uint32_t>& out, int matrices, bool want_trans,
                  std::string* first) {
  int bad = 0;
  for (int lane = 0; lane < 32; ++lane) {
    for (int m = 0; m < matrices; ++m) {
      const std::uint32_t got = out[static_cast<std::size_t>(lane * 4 + m)];
      const std::uint32_t want = expected_ld(lane, m, want_trans);
      if (got != want && ++bad <= 3 && first != nullptr) {
        char text[96];
        std::snprintf(text, sizeof text, " [lane %d d%d] 0x%08x != 0x%08x", lane, m, got, want);
        *first += text;
      }
    }
  }
  return bad;
}

TEST(EmuLdmatrix, LiteralEntries) {
  // Matrix m, row r, column c holds 64 m + 8 r + c.
  EXPECT_EQ(expected_ld(0, 0, false), 0x00010000u);   // lane 0: (0,0), (0,1)
  EXPECT_EQ(expected_ld(5, 0, false), 0x000b000au);   // lane 5: row 1, columns 2, 3
  EXPECT_EQ(expected_ld(5, 0, true), 0x00190011u);    // .trans: (2,1) = 17, (3,1) = 25
  EXPECT_EQ(expected_ld(31, 3, false), 0x00ff00feu);  // lane 31, matrix 3: (7,6), (7,7)
  const auto x4 = run_ldmatrix(4, false);
  EXPECT_EQ(x4[5 * 4 + 0], 0x000b000au);
  EXPECT_EQ(x4[31 * 4 + 3], 0x00ff00feu);
  const auto x4t = run_ldmatrix(4, true);
  EXPECT_EQ(x4t[5 * 4 + 0], 0x00190011u);
}

TEST(EmuLdmatrix, EveryShapeMatchesTheExpectedLanes) {
  for (int matrices : {1, 2, 4}) {
    for (bool trans : {false, true}) {
      const auto out = run_ldmatrix(matrices, trans);
      std::string report;
      EXPECT_EQ(ld_mismatches(out, matrices, trans, &report), 0)
          << "x" << matrices << " trans " << trans << ":" << report;
      // Registers past the loaded matrices are untouched.
      for (int lane = 0; lane < 32; ++lane) {
        for (int m = matrices; m < 4; ++m)
          EXPECT_EQ(out[static_cast<std::size_t>(lane * 4 + m)], 0u);
      }
    }
  }
}

TEST(EmuLdmatrix, PlantedTransposedExpectationIsCaught) {
  // The same checker, told to expect the other orientation, must fail on every shape.
  for (int matrices : {1, 2, 4}) {
    const auto out = run_ldmatrix(matrices, /*trans=*/true);
    // No register agrees with the other orientation: a pair spans two columns, so at most one
    // of its halves can sit on the diagonal.
    EXPECT_EQ(ld_mismatches(out, matrices, /*want_trans=*/false, nullptr), 32 * matrices)
        << "x" << matrices;
  }
}

// --- ldmatrix -> mma --------------------------------------------------------------------------

struct PipelineParams {
  DType ab;
  bool b_trans;            // B from a (k, n) row-major tile with .trans, else from an (n, k) tile
  const std::uint16_t* a;  // [warps][16][16] (m, k)
  const std::uint16_t* b;  // [warps][16][8] (k, n)
  const float* c;          // [warps][16][8]
  float* d;                // [warps][16][8]
};

constexpr int kAStride = 24;   // shared A rows: 16 elements + 8 padding (48 bytes)
constexpr int kBtStride = 24;  // shared B^T rows (n, k): 16 + 8
constexpr int kBStride = 8;    // shared B rows (k, n): 8 elements, 16 bytes, no padding
constexpr int kWarpSmem = 16 * kAStride + 8 * kBtStride + 16 * kBStride;  // elements per warp

__global__ void pipeline_kernel(const __grid_constant__ PipelineParams p) {
  DECODEBENCH_DYNAMIC_SHARED(std::uint16_t, smem);
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32;
  const std::size_t w = static_cast<std::size_t>(t / 32);
  std::uint16_t* sa = smem + w * kWarpSmem;  // [16][kAStride]
  std::uint16_t* sbt = sa + 16 * kAStride;   // [8][kBtStride]: B transposed, (n, k)
  std::uint16_t* sb = sbt + 8 * kBtStride;   // [16][kBStride]: B as is, (k, n)
  const std::uint16_t* a = p.a + w * 256;
  const std::uint16_t* b = p.b + w * 128;
  for (int e = lane; e < 256; e += 32) sa[e / 16 * kAStride + e % 16] = a[e];
  for (int e = lane; e < 128; e += 32) {
    const int k = e / 8, n = e % 8;
    sbt[n * kBtStride + k] = b[e];
    sb[k * kBStride + n] = b[e];
  }
  __syncthreads();
  FragA fa;
  // x4: lanes 0-15 rows 0-15 at column 0 (a0..a3), lanes 16-31 the same rows at column 8.
  dev::ldmatrix<4>(fa.reg, sa + (lane % 16) * kAStride + (lane / 16) * 8);
  FragB fb;
  if (p.b_trans) {
    // x2.trans of the (k, n) tile: lanes 0-15 address rows k = 0..15.
    dev::ldmatrix<2, true>(fb.reg, sb + (lane % 16) * kBStride);
  } else {
    // x2 of the (n, k) tile: lanes 0-7 rows n at k = 0, lanes 8-15 the same rows at k = 8.
    dev::ldmatrix<2>(fb.reg, sbt + (lane % 8) * kBtStride + (lane / 8 % 2) * 8);
  }
  FragC fc;
  for (int i = 0; i < 4; ++i) {
    fc.reg[i] =
        p.c[w * 128 + static_cast<std::size_t>(isa::c(lane, i).row * 8 + isa::c(lane, i).col)];
  }
  const FragC fd = p.ab == DType::f16 ? dev::mma_m16n8k16<DType::f16>(fa, fb, fc)
                                      : dev::mma_m16n8k16<DType::bf16>(fa, fb, fc);
  for (int i = 0; i < 4; ++i) {
    p.d[w * 128 + static_cast<std::size_t>(isa::c(lane, i).row * 8 + isa::c(lane, i).col)] =
        fd.reg[i];
  }
}

TEST(EmuLdmatrix, LoadedFragmentsMultiplyToThePlainProduct) {
  constexpr int kWarps = 2;
  for (DType t : {DType::f16, DType::bf16}) {
    for (bool b_trans : {false, true}) {
      for (unsigned seed : {11u, 12u, 13u}) {
        std::mt19937 rng(seed);
        const auto a = random_matrix(t, kWarps * 256, rng);
        const auto b = random_matrix(t, kWarps * 128, rng);
        std::vector<float> c(kWarps * 128);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        for (float& x : c) x = u(rng);
        std::vector<float> d(kWarps * 128, -1.f);
        const PipelineParams p{t, b_trans, a.data(), b.data(), c.data(), d.data()};
        const auto r = DECODEBENCH_LAUNCH(pipeline_kernel, dim3(1), dim3(32 * kWarps),
                                          kWarps * kWarpSmem * sizeof(std::uint16_t), nullptr, p);
        ASSERT_TRUE(r.ok()) << r.message;
        std::string report;
        EXPECT_EQ(mismatches(d, plain_product(t, kWarps, a, b, c), &report), 0)
            << (t == DType::f16 ? "f16" : "bf16") << " b_trans " << b_trans << " seed " << seed
            << ":" << report;
      }
    }
  }
}

// --- fp8 -> f16x2 -----------------------------------------------------------------------------

// The checker: every code of `fp8` in both halves of a pair, against float_formats (value, bit
// for bit through f16_to_float) and the canonical NaN. Returns the number of wrong halves.
template <typename Convert>
int fp8_mismatches(DType fp8, Convert convert) {
  int bad = 0;
  for (int code = 0; code < 256; ++code) {
    const int other = 255 - code;  // a different code in the other half: catches swapped halves
    const std::uint32_t pair = convert(static_cast<std::uint32_t>(code | (other << 8)));
    for (int half = 0; half < 2; ++half) {
      const auto c = static_cast<std::uint8_t>(half == 0 ? code : other);
      const auto got = static_cast<std::uint16_t>(half == 0 ? pair & 0xffffu : pair >> 16);
      const float want =
          fp8 == DType::fp8_e4m3 ? floatfmt::e4m3_to_float(c) : floatfmt::e5m2_to_float(c);
      const float got_value = floatfmt::f16_to_float(got);
      const bool ok =
          want != want ? got == 0x7fffu : std::memcmp(&got_value, &want, sizeof(float)) == 0;
      bad += ok ? 0 : 1;
    }
  }
  return bad;
}

TEST(Fp8ToF16x2, EveryCodeOfBothFormats) {
  EXPECT_EQ(fp8_mismatches(DType::fp8_e4m3, dev::fp8x2_to_f16x2<DType::fp8_e4m3>), 0);
  EXPECT_EQ(fp8_mismatches(DType::fp8_e5m2, dev::fp8x2_to_f16x2<DType::fp8_e5m2>), 0);
  // Literal values: e4m3 1.0 (0x38) and 448 (0x7e), -2^-9 (0x81, the smallest subnormal); the
  // NaNs; e5m2 is the top byte of an f16, so its non-NaN codes shift into place.
  EXPECT_EQ(dev::fp8x2_to_f16x2<DType::fp8_e4m3>(0x7e38u), 0x5f003c00u);
  EXPECT_EQ(dev::fp8x2_to_f16x2<DType::fp8_e4m3>(0xff81u), 0x7fff9800u);
  EXPECT_EQ(dev::fp8x2_to_f16x2<DType::fp8_e4m3>(0x7f00u), 0x7fff0000u);
  EXPECT_EQ(dev::fp8x2_to_f16x2<DType::fp8_e5m2>(0xfe7cu), 0x7fff7c00u);  // NaN, +inf
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) > 0x7c) continue;  // NaN
    EXPECT_EQ(dev::fp8x2_to_f16x2<DType::fp8_e5m2>(static_cast<std::uint32_t>(code)),
              static_cast<std::uint32_t>(code) << 8)
        << code;
  }
  // Only the low two bytes are read.
  EXPECT_EQ(dev::fp8x2_to_f16x2<DType::fp8_e4m3>(0xabcd7e38u), 0x5f003c00u);
}

TEST(Fp8ToF16x2, PlantedSwappedHalvesAreCaught) {
  auto swapped = [](std::uint32_t w) {
    const std::uint32_t r = dev::fp8x2_to_f16x2<DType::fp8_e4m3>(w);
    return (r >> 16) | (r << 16);
  };
  EXPECT_GT(fp8_mismatches(DType::fp8_e4m3, swapped), 400);
  auto wrong_format = [](std::uint32_t w) { return dev::fp8x2_to_f16x2<DType::fp8_e5m2>(w); };
  EXPECT_GT(fp8_mismatches(DType::fp8_e4m3, wrong_format), 400);
}

}  // namespace
}  // namespace decodebench
