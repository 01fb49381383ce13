// What the CPU decode's tile kernels and driver share: which tile kernels are compiled in, the
// width of a pass and the tile sizes.
#pragma once

#include "device/math.h"  // kLog2e
#include "kernels.h"      // PagedDecodeParams, DType

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define DECODEBENCH_CPU_AVX512 1
#else
#define DECODEBENCH_CPU_AVX512 0
#endif
// The AVX2 tile kernels: AVX2 integer ops, F16C's vcvtph2ps and FMA (-march=x86-64-v3 or
// -march=native on any core since Haswell / Zen 1). Compiled beside the AVX-512 ones where both
// exist, so either can be asked for by name.
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define DECODEBENCH_CPU_AVX2 1
#else
#define DECODEBENCH_CPU_AVX2 0
#endif

namespace decodebench::cpu::detail {

using kernels::PagedDecodeParams;

using ::decodebench::kLog2e;
inline constexpr int kMaxPassHeads = 8;  // query heads served together by one tile pass

// Tokens per tile. Per-tile costs (one scalar exp2 per head for the running-max rescale, a
// block-table lookup per block) are amortized over the tile, and one tile of one KV head (a
// unit) is the prefetch distance (the next unit's rows are requested while this one is computed).
//   portable: 4096 / d tokens, so the tile's K and V rows converted to fp32 (2 x 16 KiB) stay
//             in L1;
//   avx512:   8192 / d tokens, rounded up to a multiple of 16 (score groups): 64 at d = 128, a
//             unit's fp16 K and V 32 KiB.
//   avx2:     8192 / d tokens, rounded up to a multiple of 8 (score groups): as avx512, 64 at
//             d = 128. Half that (a unit's fp16 K and V in 16 KiB, beside the next unit's in
//             Zen 3's 32 KiB L1) was not consistently faster on the loaded Zen 3 VM (B16 slower,
//             B1 faster, both within the noise): results/cpu-amd-epyc-zen3-2vcpu/README.md,
//             "The AVX2 path".
// 64-token tiles at d = 128: 1.7-4 % faster than 48 on Zen 5 with fast memory, prefetcht0;
// the sizes measured: results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md, "Tile size".
template <int kHeadDim>
inline constexpr int kPortableTileTokens = 4096 / kHeadDim;
template <int kHeadDim>
inline constexpr int kAvx512TileTokens = (8192 / kHeadDim + 15) / 16 * 16;
template <int kHeadDim>
inline constexpr int kAvx2TileTokens = (8192 / kHeadDim + 7) / 8 * 8;

}  // namespace decodebench::cpu::detail
