// Rung `mla`: multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) decode on tensor cores, in
// its absorbed form (docs/design.md "MLA"): every query head of a sequence attends to the same
// latent row per token, keys 576 wide (the 512-value latent and the 64-value RoPE key), values
// the first 512 of the same row. No V cache: v_cache == k_cache.
//
// Why its own rung: `tc` serves one KV head's query group of at most 8 rows, padding the MMA's
// 16. MLA has one KV head and 16 to 128 query heads, so the heads fill the MMA's M whole and a
// thread block can serve many of them from one read of the latent tile: the arithmetic per byte
// grows with the heads (242 FLOP per latent byte at 128 heads, at the ridge of an H200's HBM and
// tensor-core roofs), which is what makes MLA decode interesting on a roofline.
//
// Shape: grid (mla_head_blocks, batch, num_splits); a block serves T = mla_head_tiles(p) MMA
// tiles of 16 heads (up to 4: 64 heads, as FlashMLA's thread block) with 4 warps per tile, so
// 128 T threads. Per tile of kTileTokens = 32 latent rows staged by cp.async:
//   S = Q K^T: warp (t, w) computes the scores of head tile t for tokens [8w, 8w + 8): one n8
//     tile, 36 k-steps of 16 dims (q from shared memory by ldmatrix.x4, K by ldmatrix.x4 for two
//     k-steps; fp8: byte loads + cvt), written scaled and masked to a [heads][32] score tile.
//   softmax: after a barrier every warp of head tile t reads its 16 rows' 32 scores in the A
//     fragment layout of P and runs the same online softmax (max over the quad, rescale,
//     exp2): the 4 warps of a tile hold the same running max and sum, bit for bit, so no merge
//     is needed at the end.
//   O += P V: warp (t, w) owns output dims [128 w, 128 w + 128) of its 16 heads (16 n8 tiles, 64
//     fp32 registers), V from the same latent rows by ldmatrix.x4.trans; P split in hi + lo in
//     the MMA type as `tc` does (the exactness argument: tc.cuh "Exact operands").
// Splits: the context is cut in whole 32-token units (kMlaTileTokens, what the planner counts);
// one split writes `out`, more write normalized partials + log2-sum-exp2 and split_kv's merge
// kernel (instantiated for the 512 value dims) combines them.
//
// Napkin math per tile of 32 tokens and 16 heads, bf16 (32 x 1,152 B = 36 KiB of HBM shared by
// the block's head tiles): S 36 MMAs x 4 warps, P V 2 x 16 x 2 = 64 MMAs x 4 warps: 400 MMAs =
// 1.64 MFLOP of tensor work for 1.14 MFLOP of attention (the hi + lo P costs 1.47x). Shared
// memory read per tile and head tile: q 18 KiB x 4 warps, K 36 KiB, V 32 KiB, so at 128 heads
// (8 head tiles) about 15 B of shared memory per byte of HBM: mma.sync's 16-row M makes every
// latent byte cross shared memory once per 16 heads. That, not HBM, is the bound at many heads
// (Hopper's wgmma reads its B operand from shared memory once per 64 rows: FlashMLA's design);
// at 16 heads (deepseek-v2-lite) it is 2 B per HBM byte. The static model reads the SASS.
//
// Registers: O 64, P hi + lo 16, the softmax's 8 scores and the S accumulator transient;
// __launch_bounds__(512, 1) allows 128 (build/kernel-resources.md has the count).
// Variants: none (no MLA model has a window, sinks or a soft-cap); the registry refuses them.
#pragma once

#include <cstdint>

#include "paged_decode/tc_common.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace mla_detail {

inline constexpr int kHeadDim = 576;  // the latent row: 512 latent values + 64 RoPE key
inline constexpr int kValueDim = 512;
inline constexpr int kTileTokens = kMlaTileTokens;  // 32
inline constexpr int kRowsPerTile = kMlaHeadTile;   // 16 heads: the MMA's M
inline constexpr int kWarpsPerTile = 4;
inline constexpr int kThreadsPerTile = 32 * kWarpsPerTile;
inline constexpr int kMaxThreads = kThreadsPerTile * kMlaMaxHeadTiles;  // 512
inline constexpr int kDimsPerWarp = kValueDim / kWarpsPerTile;          // 128 of O
inline constexpr int kNTiles = kDimsPerWarp / 8;                        // 16 n8 tiles of O
inline constexpr int kTokensPerWarp = kTileTokens / kWarpsPerTile;      // 8: one n8 tile of S
inline constexpr int kKSteps = kHeadDim / 16;                           // 36
inline constexpr int kPSteps = kTileTokens / 16;                        // 2 k-steps of P V
inline constexpr int kScoreStride = kTileTokens + 4;  // floats per score row, against conflicts
inline constexpr int kQRowBytes = kHeadDim * 2 + tc_detail::kPadBytes;    // 1,168: q in MMA type
inline constexpr int kCopyThreadsPerRow = kThreadsPerTile / kTileTokens;  // 4
static_assert(kTokensPerWarp == 8, "S: one n8 tile of tokens per warp");

template <DType kKv>
struct Geometry {
  static_assert(kKv == DType::f16 || kKv == DType::bf16 || is_fp8(kKv),
                "the mla rung reads the float KV formats");
  static constexpr int kRowBytes = static_cast<int>(kv_row_bytes(kKv, kHeadDim));
  static constexpr int kSmemRowBytes = kRowBytes + tc_detail::kPadBytes;
  static constexpr int kStageBytes = kTileTokens * kSmemRowBytes;
  static constexpr int kStagesWanted =
      1 + (tc_detail::kBytesInFlight + kStageBytes - 1) / kStageBytes;
  static constexpr int kStages = kStagesWanted < 2 ? 2 : kStagesWanted;
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kGranulesPerRow = kRowBytes / 16;
  static constexpr int kCopiesPerThread = kGranulesPerRow / kCopyThreadsPerRow;
  static_assert(kCopiesPerThread * kCopyThreadsPerRow == kGranulesPerRow,
                "a row's copying threads take whole granules");
  static_assert(kSmemRowBytes % 16 == 0 && kRingBytes % 16 == 0 && kQRowBytes % 16 == 0,
                "ldmatrix and cp.async need 16-byte aligned rows");
};

// Shared memory of a block of `tiles` head tiles: the ring, q (hi, and lo when split), scores.
template <DType kKv>
__host__ __device__ constexpr std::size_t smem_bytes(int tiles, bool q_split) {
  const std::size_t rows = static_cast<std::size_t>(tiles) * kRowsPerTile;
  return Geometry<kKv>::kRingBytes + rows * kQRowBytes * (q_split ? 2 : 1) +
         rows * kScoreStride * sizeof(float);
}

// B fragments of K^T for k-steps 2 ks2 and 2 ks2 + 1 over the warp's 8 tokens (rows of `k_rows`).
template <DType kKv>
__device__ __forceinline__ void load_k_pair(const unsigned char* k_rows, int ks2, int lane,
                                            dev::FragB (&b)[2]) {
  using G = Geometry<kKv>;
  if constexpr (is_fp8(kKv)) {
    // b_row (dim) = 2 (lane % 4) + {0, 1} (+ 8), b_col (token) = lane / 4: two adjacent bytes.
    const unsigned char* row = k_rows + (lane / 4) * G::kSmemRowBytes;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int d0 = (2 * ks2 + j) * 16 + 2 * (lane % 4);
      b[j].reg[0] = tc_detail::fp8_pair<kKv>(row + d0, 1);
      b[j].reg[1] = tc_detail::fp8_pair<kKv>(row + d0 + 8, 1);
    }
  } else {
    // Matrix m = lane / 8: the 8 tokens, dims 32 ks2 + 8 m + [0, 8).
    const unsigned char* addr =
        k_rows + (lane % 8) * G::kSmemRowBytes + (ks2 * 32 + (lane / 8) * 8) * 2;
    std::uint32_t r[4];
    dev::ldmatrix<4>(r, addr);
    b[0].reg[0] = r[0];
    b[0].reg[1] = r[1];
    b[1].reg[0] = r[2];
    b[1].reg[1] = r[3];
  }
}

// B fragments of V for dims dim0 + [0, 8) and dim0 + [8, 16), k = 16 tokens from `v_rows`.
template <DType kKv>
__device__ __forceinline__ void load_v_pair(const unsigned char* v_rows, int dim0, int lane,
                                            dev::FragB (&b)[2]) {
  using G = Geometry<kKv>;
  if constexpr (is_fp8(kKv)) {
    // b_row (token) = 2 (lane % 4) + {0, 1} (+ 8), b_col (dim) = lane / 4: bytes a row apart.
    const int t0 = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const unsigned char* col = v_rows + dim0 + j * 8 + lane / 4;
      b[j].reg[0] = tc_detail::fp8_pair<kKv>(col + t0 * G::kSmemRowBytes, G::kSmemRowBytes);
      b[j].reg[1] = tc_detail::fp8_pair<kKv>(col + (t0 + 8) * G::kSmemRowBytes, G::kSmemRowBytes);
    }
  } else {
    // Matrix m = lane / 8: tokens 8 (m % 2) + [0, 8), dims dim0 + 8 (m / 2) + [0, 8), transposed.
    const int m = lane / 8;
    const unsigned char* addr =
        v_rows + ((m & 1) * 8 + lane % 8) * G::kSmemRowBytes + (dim0 + (m >> 1) * 8) * 2;
    std::uint32_t r[4];
    dev::ldmatrix<4, /*kTranspose=*/true>(r, addr);
    b[0].reg[0] = r[0];
    b[0].reg[1] = r[1];
    b[1].reg[0] = r[2];
    b[1].reg[1] = r[3];
  }
}

// kLatentDim: always kHeadDim (576); a template argument so that the instance's name carries it
// (the static model and cuobjdump read head_dim from there).
template <DType kKv, int kLatentDim>
__global__ void __launch_bounds__(kMaxThreads, 1)
    mla_kernel(const __grid_constant__ PagedDecodeParams p) {
  static_assert(kLatentDim == kHeadDim, "the tiles are cut for the 576-wide latent");
  using G = Geometry<kKv>;
  constexpr DType kMma = tc_detail::kMmaType<kKv>;
  constexpr int kStages = G::kStages;
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int tiles = static_cast<int>(blockDim.x) / kThreadsPerTile;
  const int head_tile = warp / kWarpsPerTile;  // which 16 heads
  const int quarter = warp % kWarpsPerTile;    // which 8 tokens of S, which 128 dims of O
  const int seq = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int head0 = static_cast<int>(blockIdx.x) * tiles * kRowsPerTile;  // the block's first head
  const bool q_split = p.q_dtype != kMma;
  const int rows = tiles * kRowsPerTile;
  // q per head tile: 16 rows hi, then (q_split) 16 rows lo, so a tile's lo is at a constant
  // offset from its hi (one pointer live in the loop, not two).
  const int q_tile_bytes = kRowsPerTile * kQRowBytes * (q_split ? 2 : 1);
  unsigned char* ring = smem;                   // [S][32][576 + pad] KV
  unsigned char* q_all = smem + G::kRingBytes;  // [tiles][hi, lo][16][576 + pad] kMma
  float* scores = reinterpret_cast<float*>(q_all + tiles * q_tile_bytes);  // [rows][36] fp32

  // q of the block's heads in the MMA type, hi (+ lo); heads past Hq are zero rows. Unscaled: a
  // q already in the MMA type enters it exactly, and q x scale would round. Ordered before the
  // first ldmatrix by the main loop's first barrier.
  for (int i = tid; i < rows * kHeadDim / 2; i += static_cast<int>(blockDim.x)) {
    const int r = i / (kHeadDim / 2);
    const int c = (i % (kHeadDim / 2)) * 2;
    float a = 0.f;
    float b = 0.f;
    if (head0 + r < p.num_q_heads) {
      const int at = (seq * p.num_q_heads + head0 + r) * kHeadDim + c;
      a = dev::load_q<float>(p.q, p.q_dtype, at);
      b = dev::load_q<float>(p.q, p.q_dtype, at + 1);
    }
    std::uint32_t hi = 0u;
    std::uint32_t lo = 0u;
    tc_detail::split2<kMma>(a, b, hi, lo);
    unsigned char* row_hi =
        q_all + (r / kRowsPerTile) * q_tile_bytes + (r % kRowsPerTile) * kQRowBytes + c * 2;
    *reinterpret_cast<std::uint32_t*>(row_hi) = hi;
    if (q_split) *reinterpret_cast<std::uint32_t*>(row_hi + kRowsPerTile * kQRowBytes) = lo;
  }

  // This split's tokens, in whole 32-token units as the planner counts them.
  int t_begin = 0;
  int t_end = 0;
  tc_detail::split_range(0, p.context_lens[seq], kTileTokens, p.num_splits, split, t_begin, t_end);
  const int num_tiles = (t_end - t_begin + kTileTokens - 1) / kTileTokens;
  const int block_shift = decode::log2_pow2(p.block_size);
  const int slot_mask = p.block_size - 1;
  const auto* kv = static_cast<const unsigned char*>(p.k_cache);
  // The first head tile's 128 threads stage the tile: 4 per latent row, each one block-table
  // lookup and every 4th 16-byte granule of the row (an unrolled copy of immediate offsets: no
  // copy loop for the static model to take for the main loop, no address registers to spill O).
  const int copy_row = tid / kCopyThreadsPerRow;
  const int copy_first = (tid % kCopyThreadsPerRow) * 16;
  const auto issue = [&](int tile_index) {
    if (tid >= kThreadsPerTile) return;
    const int t = t_begin + tile_index * kTileTokens + copy_row;
    const bool valid = t < t_end;  // past the end: zero-filled, nothing read
    const unsigned char* src = kv + (valid ? kv_row_offset(decode::block_of(p, seq, t, block_shift),
                                                           0, t & slot_mask, 1, p.block_size, 1) *
                                                     G::kRowBytes +
                                                 copy_first
                                           : 0);
    unsigned char* dst =
        ring + (tile_index % kStages) * G::kStageBytes + copy_row * G::kSmemRowBytes + copy_first;
#pragma unroll
    for (int k = 0; k < G::kCopiesPerThread; ++k) {
      dev::cp_async<16>(dst + k * 16 * kCopyThreadsPerRow,
                        valid ? src + k * 16 * kCopyThreadsPerRow : src, valid ? 16 : 0);
    }
  };

  // Rows lane / 4 + 8 h (h = 0, 1) of this warp's head tile: running max (log2 domain), this
  // lane's part of the sum, and O: n8 tile n holds dims 128 quarter + 8 n + 2 (lane % 4) + {0, 1}
  // in o[n][2 h + {0, 1}].
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  float o[kNTiles][4];
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[n][i] = 0.f;
  }
  const float scale = decode::score_scale_log2(p);  // log2 domain, k_scale folded
  const unsigned char* q_tile_hi = q_all + head_tile * q_tile_bytes;
  // This lane's scores: row lane / 4 of the head tile, from token 2 (lane % 4) (the C fragment's
  // and P's A fragment's columns).
  float* my_scores = scores + (head_tile * kRowsPerTile + lane / 4) * kScoreStride + 2 * (lane % 4);

#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) issue(s);
    dev::cp_async_commit();
  }
#pragma unroll 1
  for (int i = 0; i < num_tiles; ++i) {
    dev::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i visible; everyone is done with tile i - 1 and its scores
    if (i + kStages - 1 < num_tiles) issue(i + kStages - 1);
    dev::cp_async_commit();
    const unsigned char* k_tile = ring + (i % kStages) * G::kStageBytes;
    const int tile_first = t_begin + i * kTileTokens;

    // S of the head tile over this warp's 8 tokens.
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const unsigned char* k_rows = k_tile + quarter * kTokensPerWarp * G::kSmemRowBytes;
#pragma unroll 1
    for (int ks2 = 0; ks2 < kKSteps / 2; ++ks2) {
      dev::FragB kb[2];
      load_k_pair<kKv>(k_rows, ks2, lane, kb);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const dev::FragA qa = tc_detail::load_q_fragment16<kHeadDim>(q_tile_hi, 2 * ks2 + j, lane);
        tc_detail::mma_live_rows<kMma>(qa, kb[j], acc);
        if (q_split) {  // block-uniform
          const dev::FragA ql = tc_detail::load_q_fragment16<kHeadDim>(
              q_tile_hi + kRowsPerTile * kQRowBytes, 2 * ks2 + j, lane);
          tc_detail::mma_live_rows<kMma>(ql, kb[j], acc);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int token = quarter * kTokensPerWarp + 2 * (lane % 4) + e;
        const bool live = tile_first + token < t_end;
        my_scores[8 * h * kScoreStride + quarter * kTokensPerWarp + e] =
            live ? acc[2 * h + e] * scale : -INFINITY;
      }
    }
    __syncthreads();  // the head tile's 32 scores per row are written

    // Online softmax of rows lane / 4 + 8 h over the tile's 32 tokens, read in P's A fragment
    // layout: k-step kk, tokens 16 kk + 2 (lane % 4) + {0, 1} and the same + 8. The max first,
    // then each k-step's weights read again and spent at once (fewer live registers: O is 64).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* row = my_scores + 8 * h * kScoreStride;
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < kTileTokens; c += 8)
        tile_max = fmaxf(tile_max, fmaxf(row[c], row[c + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      // The tile's first token is in range, so every row's max is finite.
      const float m_new = fmaxf(m_run[h], tile_max);
      const float factor = dev::fast_exp2(m_run[h] - m_new);  // m_run = -inf -> 0
      m_run[h] = m_new;
      l_run[h] *= factor;
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        o[n][2 * h] *= factor;
        o[n][2 * h + 1] *= factor;
      }
    }
    // O += P V, P split in hi + lo: A registers 0 / 1 are rows g / g + 8 at tokens 0..7 of the
    // k-step, 2 / 3 the same at tokens 8..15.
    // Not unrolled: unrolled, the two k-steps' P fragments push the 16-bit instances past 128
    // registers (a spill into O).
#pragma unroll 1
    for (int kk = 0; kk < kPSteps; ++kk) {
      dev::FragA p_hi;
      dev::FragA p_lo;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int h = r % 2;
        const float* at = my_scores + 8 * h * kScoreStride + 16 * kk + 8 * (r / 2);
        const float w0 = dev::fast_exp2(at[0] - m_run[h]);  // masked: exp2(-inf) = 0
        const float w1 = dev::fast_exp2(at[1] - m_run[h]);
        l_run[h] += w0 + w1;
        tc_detail::split2<kMma>(w0, w1, p_hi.reg[r], p_lo.reg[r]);
      }
      const unsigned char* v_rows = k_tile + kk * 16 * G::kSmemRowBytes;
#pragma unroll
      for (int n = 0; n < kNTiles; n += 2) {
        dev::FragB vb[2];
        load_v_pair<kKv>(v_rows, quarter * kDimsPerWarp + n * 8, lane, vb);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          tc_detail::mma_live_rows<kMma>(p_hi, vb[j], o[n + j]);
          tc_detail::mma_live_rows<kMma>(p_lo, vb[j], o[n + j]);
        }
      }
    }
  }
  dev::cp_async_wait_all();  // only empty groups can be left

  // Every warp of a head tile holds the same max and sum; each stores its 128 dims.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int head = head0 + head_tile * kRowsPerTile + lane / 4 + 8 * h;
    if (head >= p.num_q_heads) continue;
    const std::size_t q_row = static_cast<std::size_t>(seq) * p.num_q_heads + head;
    const float inv = l_run[h] > 0.f ? p.v_scale / l_run[h] : 0.f;
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = quarter * kDimsPerWarp + n * 8 + 2 * (lane % 4) + e;
        const float value = o[n][2 * h + e] * inv;
        if (p.num_splits == 1) {
          dev::store_out(p.out, p.q_dtype, static_cast<int>(q_row * kValueDim + d), value);
        } else {  // [batch][Hq][num_splits][512], [batch][Hq][num_splits]
          p.partial_out[(q_row * p.num_splits + split) * kValueDim + d] = value;
        }
      }
    }
    if (p.num_splits > 1 && quarter == 0 && lane % 4 == 0) {
      SoftmaxState<float> state;
      state.max = m_run[h];
      state.sum = l_run[h];
      p.partial_lse[q_row * p.num_splits + split] =
          state.sum > 0.f ? state.log2_sum_exp2() : -INFINITY;
    }
  }
}

inline dim3 grid_of(const PagedDecodeParams& p) {
  return dim3(static_cast<unsigned>(mla_head_blocks(p)), static_cast<unsigned>(p.batch),
              static_cast<unsigned>(p.num_splits));
}

inline dim3 block_of_threads(const PagedDecodeParams& p) {
  return dim3(static_cast<unsigned>(kThreadsPerTile * mla_head_tiles(p)));
}

}  // namespace mla_detail

// What launch_mla launches for `p`: the tensor-core MLA kernel, sized by p's heads.
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_mla(const PagedDecodeParams& p) {
  static_assert(kHeadDim == mla_detail::kHeadDim, "the mla rung is built for the 576-wide latent");
  return dev::launch_shape_of((mla_detail::mla_kernel<kKvDtype, kHeadDim>), "mla_kernel",
                              /*group_cap=*/0, mla_detail::grid_of(p),
                              mla_detail::block_of_threads(p),
                              mla_detail::smem_bytes<kKvDtype>(
                                  mla_head_tiles(p), p.q_dtype != tc_detail::kMmaType<kKvDtype>));
}

// MLA's absorbed shape only (one latent KV head, keys 576, values the first 512; checked once by
// unsupported_reason). One split writes `out`; more launch split_kv's merge over 512 dims.
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_mla(const PagedDecodeParams& p, void* stream) {
  static_assert(kHeadDim == mla_detail::kHeadDim, "the mla rung is built for the 576-wide latent");
  const std::size_t smem = mla_detail::smem_bytes<kKvDtype>(
      mla_head_tiles(p), p.q_dtype != tc_detail::kMmaType<kKvDtype>);
  LaunchResult main =
      DECODEBENCH_LAUNCH((mla_detail::mla_kernel<kKvDtype, kHeadDim>), mla_detail::grid_of(p),
                         mla_detail::block_of_threads(p), smem, stream, p);
  if (!main.ok() || p.num_splits == 1) return main;
  const dim3 merge_grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return DECODEBENCH_LAUNCH((split_kv_detail::merge_kernel<mla_detail::kValueDim>), merge_grid,
                            dim3(split_kv_detail::kMergeThreads), 0, stream, p);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
