// Rung `tc`: the query group on tensor cores. `split_kv`'s grid, splits and merge, with the two
// products of a tile, S = Q K^T and O += P V, on mma.m16n8k16 (fp32 accumulation) instead of
// per-thread FMAs.
//
// Why: the SIMT rungs spend 2 x group FMAs per KV element (q.k and p.v for every head of the
// group), plus the unpack, the partial-dot round trip through shared memory and the per-row
// softmax. At group 8 with f16 KV that is 8 FMA per KV byte per thread-lane; an H200 SM takes
// ~20 B/clk from HBM and issues 128 FP32 lanes/clk, so 20 B/clk x 8 = 160 FMA lanes/clk > 128:
// gqa/pipelined are issue-bound at groups 4-8 (what the static model shows), not memory-bound.
// A tensor-core MMA does 16 x 8 x 16 multiply-adds per warp instruction whatever the group (the
// group is padded to the MMA's 16 rows), so the work per KV byte stops growing with the group.
//
// Napkin math per warp and 16 tokens (head_dim d, 16-bit KV: 16 x d x 2 x 2 B = 64 d bytes):
//   S:   d/16 k-steps x 2 n8 halves = d/8 MMAs (+ d/8 when q has another dtype than the MMA,
//        see "exact operands"), d/16 ldmatrix.x4 for K, d/16 ldmatrix.x2 for q
//   P V: d/8 n8 tiles x 2 (P split in hi + lo) = d/4 MMAs, d/16 ldmatrix.x4.trans for V
//   softmax: ~40 instructions (mask, 2 quad shuffles for the max, 4 exp2, rescale of d/4 floats)
//   d = 128: 8 KiB of K+V for ~48 MMA + 24 ldmatrix + ~70 other warp instructions, the same
//   count at group 1 and at group 8. The MMAs are 8 KiB x 24 FLOP/B = 196 kFLOP, ~5x below the
//   SM's mma.sync rate at 20 B/clk. The static model (SASS of the main loop, README) reads
//   .09 / .18 instructions per KV byte (f16 / fp8; fp8 fragments are byte loads + cvt; the
//   soft-cap's block counted though a model without one skips it) against .35 / .65 for
//   pipelined at cap 8: an issue bound of 11.8 / 5.9 TB/s, above HBM's 4.8.
// Integer KV (int8, int4, int4_token): tc_int.cuh, with tokens on the MMA's M and the query rows
//   on N (no padded rows), the codes converted by kv_convert.cuh and the scales staged with them;
//   its header has the layout, the scale folds and the napkin math.
//
// Shape: grid (Hkv, batch, num_splits), 128 threads = 4 warps. A tile is 64 tokens: warp w owns
// tokens [16w, 16w + 16) of it and keeps its own online softmax (per query row: max, sum, O);
// the 4 warps' states are merged at the end through shared memory (SoftmaxState::merge).
//   MMA M = query rows: head h of the group is row h (<= 8 live; rows 8..15 are zero padding,
//     so A registers 1 and 3 are 0 and C registers 2 and 3 stay 0: half the MMA is wasted; the
//     "swap A and B" layout, M = tokens, N = 8 heads, would not waste it but needs P transposed
//     between the two products)
//   S = Q K^T: A = q [16][d] (ldmatrix.x2 from a q tile in shared memory), B = K^T: K is
//     [token][d] in shared memory, i.e. B's columns, so ldmatrix without .trans
//   P: the S accumulator of two n8 halves is the A fragment of P (rows = heads, k = 16 tokens):
//     registers (0,1) of half 0 and of half 1 -> A registers 0 and 2, no data movement
//   O += P V: B = V [token][d] with k = token, so ldmatrix.trans
//   row max / sum: a C row lives in the 4 lanes of a quad -> two __shfl_xor_sync (1, 2); the sum
//     is kept per lane and reduced once at the end
// Staging: K/V tiles in a cp.async ring as in `pipelined` (S - 1 tiles in flight, at least one),
// rows padded by 16 bytes so the 8 rows of an ldmatrix hit 8 different 16-byte bank groups.
//   ring: 2 stages (34 KiB each, 16-bit KV, d = 128) or up to 5 (fp8, d = 64); d = 256 16-bit:
//     2 x 66 KiB, one block per SM with 66 KiB in flight, still above Little's law's ~21 KiB
//   registers (ptxas sm_90a): d 64 / 128 / 256 = 82 / 120 / 186 (16-bit), 74 / 116 / 182 (fp8),
//     no spills (build/kernel-resources.md has every instance, the integer ones included);
//     O is d/4 floats per lane (only the live C registers are kept), q and K/V fragments are
//     reloaded from shared memory per k-step
//
// Exact operands (the tests hold the kernels to the fp32 reference's tolerance, 1e-3 relative
// for f16 out):
//   - the MMA type is the KV dtype (f16 or bf16); fp8 KV uses the f16 MMA: every e4m3/e5m2 value
//     is an f16 value, so K and V enter the MMA exactly. ldmatrix moves 16-bit elements, so fp8
//     fragments are read from the fp8 tile directly (two bytes per register) and converted with
//     cvt.rn.f16x2.e4m3x2 / e5m2x2 (dev::fp8x2_to_f16x2)
//   - q of another dtype than the MMA (bf16 q with f16 or fp8 KV, f16 q with bf16 KV) is split
//     into hi + lo in the MMA type (q = hi + lo to ~2^-16 or better) and S takes two MMAs
//   - P (in [0, 1], fp32) is split the same way, so O += P V is two MMAs; rounding P to one
//     bf16 would cost 2^-9 relative per weight, far outside the bf16-out tolerance near zero
//   k_scale is folded into the score scale, v_scale into the final weights, as the other rungs.
//   - integer KV: tc_int.cuh ("Where the scales go").
//
// Shared with cascade (cascade.cuh): the block's whole tile loop and warp merge, attend(), for 8
// live rows (tc, cascade's suffix pass) or 16 (cascade's prefix pass, several sequences' query
// groups in one MMA), with the rows' q and the destination of each result as parameters.
//
// Splits: the context is cut in whole units of kv_tile_tokens(d) exactly as split_kv does (the
// planner counts work in that unit); a split's range is walked in 64-token tiles, the last one
// masked. One split writes the output directly (no merge launch); more write normalized
// partials + log2-sum-exp2 to the workspace and split_kv's merge kernel combines them.
// Variants (docs/design.md "Attention patterns"): a sliding window starts the split range at the
// block holding the window's first token and masks the tokens before it (attend's kWindow); the
// soft-cap rewrites the raw scores in place (soft_cap); a sink joins the row's final softmax
// state at the store (one split) or in the merge kernel (several).
// `--kernel auto` does not pick tc (kernels::choose_kernel takes the first splitting rung of the
// ladder, split_kv, and otherwise only rungs without a workspace): name it, `--kernel tc`.
#pragma once

#include <cstdint>

#include "paged_decode/tc_common.cuh"
#include "paged_decode/tc_int.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace tc_detail {

// attend() of the float formats (heads on the MMA's M).
template <DType kKv, int kHeadDim, int kMRows, bool kWindow, typename QRowOf, typename Store>
__device__ __forceinline__ void attend_float(const PagedDecodeParams& p, unsigned char* smem,
                                             int kv_head, int table_seq, int t_begin, int t_first,
                                             int t_end, int live_rows, QRowOf q_row_of,
                                             Store store) {
  static_assert(kMRows == 8 || kMRows == 16, "8 live rows (one C half) or all 16");
  using G = Geometry<kKv, kHeadDim, kMRows>;
  constexpr DType kMma = kMmaType<kKv>;
  constexpr int kStages = G::kStages;
  constexpr int kHalves = kMRows / 8;            // a lane holds C rows lane / 4 + 8 h, h < kHalves
  constexpr int kC = 2 * kHalves;                // live C registers per n8 tile
  unsigned char* ring = smem;                    // [S][2][64][d + pad]
  unsigned char* q_hi = smem + G::kRegionBytes;  // [kMRows][d + pad] kMma
  unsigned char* q_lo = q_hi + kMRows * G::kQRowBytes;  // [kMRows][d + pad] kMma

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;

  // q of the rows, [kMRows][d] in the MMA type as hi + lo, in K's channel order (k_channel);
  // rows past live_rows are zero. Ordered before the first ldmatrix by the main loop's first
  // barrier.
  const bool q_split = p.q_dtype != kMma;
  for (int i = tid; i < kMRows * kHeadDim / 2; i += kThreads) {
    const int r = i / (kHeadDim / 2);
    const int c = (i % (kHeadDim / 2)) * 2;
    float a = 0.f;
    float b = 0.f;
    if (r < live_rows) {
      const int at = static_cast<int>(q_row_of(r) * kHeadDim + c);  // c+1: +1
      a = dev::load_q<float>(p.q, p.q_dtype, at);
      b = dev::load_q<float>(p.q, p.q_dtype, at + 1);
    }
    std::uint32_t hi = 0u;
    std::uint32_t lo = 0u;
    split2<kMma>(a, b, hi, lo);
    *reinterpret_cast<std::uint32_t*>(q_hi + r * G::kQRowBytes + c * 2) = hi;
    *reinterpret_cast<std::uint32_t*>(q_lo + r * G::kQRowBytes + c * 2) = lo;
  }
  // cp.async ring over tiles of 64 tokens from t_begin.
  const int copy_row = tid / G::kGranulesPerRow;
  const int copy_byte = (tid % G::kGranulesPerRow) * 16;
  const int block_shift = decode::log2_pow2(p.block_size);
  const int slot_mask = p.block_size - 1;
  const auto* k_base = static_cast<const unsigned char*>(p.k_cache);
  const auto* v_base = static_cast<const unsigned char*>(p.v_cache);
  const int num_tiles = t_end > t_begin ? (t_end - t_begin + kTileTokens - 1) / kTileTokens : 0;
  int block[G::kCopies];  // physical blocks of the rows this thread copies in the next tile
  auto fetch_blocks = [&](int tile_index) {
#pragma unroll
    for (int k = 0; k < G::kCopies; ++k) {
      const int row = tile_index * kTileTokens + copy_row + k * G::kCopyRowStride;
      const bool valid = t_begin + row < t_end;
      block[k] = valid ? decode::block_of(p, table_seq, t_begin + row, block_shift) : 0;
    }
  };
  auto issue = [&](int tile_index) {
    unsigned char* k_dst = ring + (tile_index % kStages) * G::kStageBytes;
    unsigned char* v_dst = k_dst + G::kTileBytes;
#pragma unroll
    for (int k = 0; k < G::kCopies; ++k) {
      const int row = copy_row + k * G::kCopyRowStride;
      const int t = t_begin + tile_index * kTileTokens + row;
      const bool valid = t < t_end;  // past the end: zero-filled, nothing read
      const std::size_t off =
          valid ? kv_row_offset(block[k], kv_head, t & slot_mask, p.num_kv_heads, p.block_size, 1) *
                          G::kRowBytes +
                      copy_byte
                : 0;
      const int dst = row * G::kSmemRowBytes + copy_byte;
      dev::cp_async<16>(k_dst + dst, k_base + off, valid ? 16 : 0);
      dev::cp_async<16>(v_dst + dst, v_base + off, valid ? 16 : 0);
    }
  };

  // This warp's state for query rows lane / 4 + 8 h: running max (log2 domain), this lane's
  // part of the sum, and O: n8 tile n holds dims 8n + 2 (lane % 4) + {0, 1} of row lane / 4 + 8 h
  // in o[n][2h + {0, 1}] (C registers 2h, 2h + 1; with 8 rows, registers 2, 3 are padding).
  float m_run[kHalves];
  float l_run[kHalves];
  float o[G::kNTiles][kC];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    m_run[h] = -INFINITY;
    l_run[h] = 0.f;
  }
#pragma unroll
  for (int n = 0; n < G::kNTiles; ++n) {
#pragma unroll
    for (int i = 0; i < kC; ++i) o[n][i] = 0.f;
  }
  const float scale = decode::score_scale_log2(p);

#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) {
    fetch_blocks(s);
    if (s < num_tiles) issue(s);
    dev::cp_async_commit();
  }
  fetch_blocks(kStages - 1);

#pragma unroll 1
  for (int i = 0; i < num_tiles; ++i) {
    dev::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i visible to all; everyone is done with tile i - 1
    const int next = i + kStages - 1;
    if (next < num_tiles) issue(next);
    dev::cp_async_commit();
    fetch_blocks(next + 1);

    const int warp_first = t_begin + i * kTileTokens + warp * kWarpTokens;  // first token
    if (warp_first >= t_end) continue;  // warp-uniform: nothing of this warp's is valid
    if (kWindow && warp_first + kWarpTokens <= t_first) continue;  // all before the window
    const unsigned char* k_rows =
        ring + (i % kStages) * G::kStageBytes + warp * kWarpTokens * G::kSmemRowBytes;
    const unsigned char* v_rows = k_rows + G::kTileBytes;

    // S = Q K^T over 16 tokens: halves j = 0 (tokens 0..7) and 1 (8..15).
    float s[2][kC];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int c = 0; c < kC; ++c) s[j][c] = 0.f;
    }
    // acc += q K^T for k-step ks (q as hi, and lo when split).
    const auto mma_qk = [&](int ks, const dev::FragB(&kb)[2], float(&acc)[2][kC]) {
      dev::FragA qa;
      if constexpr (kHalves == 1) {
        qa = load_q_fragment<kHeadDim>(q_hi, ks, lane);
      } else {
        qa = load_q_fragment16<kHeadDim>(q_hi, ks, lane);
      }
      mma_live_rows<kMma>(qa, kb[0], acc[0]);
      mma_live_rows<kMma>(qa, kb[1], acc[1]);
      if (q_split) {  // block-uniform
        dev::FragA ql;
        if constexpr (kHalves == 1) {
          ql = load_q_fragment<kHeadDim>(q_lo, ks, lane);
        } else {
          ql = load_q_fragment16<kHeadDim>(q_lo, ks, lane);
        }
        mma_live_rows<kMma>(ql, kb[0], acc[0]);
        mma_live_rows<kMma>(ql, kb[1], acc[1]);
      }
    };
#pragma unroll
    for (int ks = 0; ks < G::kKSteps; ++ks) {
      dev::FragB kb[2];
      load_k_fragments<kKv, kHeadDim>(k_rows, ks, lane, kb);
      mma_qk(ks, kb, s);
    }
    soft_cap(p, s);
    // Online softmax of rows lane / 4 + 8 h over their tokens j 8 + 2 (lane % 4) + e.
    float w[2][kC];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      float sc[2][2];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int t = warp_first + j * 8 + 2 * (lane % 4) + e;
          const bool live = t < t_end && (!kWindow || t >= t_first);
          sc[j][e] = live ? s[j][2 * h + e] * scale : -INFINITY;
          tile_max = fmaxf(tile_max, sc[j][e]);
        }
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      // One of the warp's tokens is valid (warp_first, or t_first in the window's first warp),
      // so tile_max is finite and so is m_new.
      const float m_new = fmaxf(m_run[h], tile_max);
      const float factor = dev::fast_exp2(m_run[h] - m_new);  // m_run = -inf -> 0
      m_run[h] = m_new;
      l_run[h] *= factor;
#pragma unroll
      for (int n = 0; n < G::kNTiles; ++n) {
        o[n][2 * h] *= factor;
        o[n][2 * h + 1] *= factor;
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          w[j][2 * h + e] = dev::fast_exp2(sc[j][e] - m_new);  // masked: exp2(-inf) = 0
          l_run[h] += w[j][2 * h + e];
        }
      }
    }
    // P as the A fragment (rows = query rows, k = the 16 tokens), split into hi + lo: registers
    // 0 and 2 are rows 0..7 (tokens 0..7, 8..15), 1 and 3 rows 8..15.
    const auto split_p = [&](const float(&wt)[2][kC], dev::FragA& p_hi, dev::FragA& p_lo) {
      if constexpr (kHalves == 1) p_hi.reg[1] = p_hi.reg[3] = p_lo.reg[1] = p_lo.reg[3] = 0u;
      split2<kMma>(wt[0][0], wt[0][1], p_hi.reg[0], p_lo.reg[0]);
      split2<kMma>(wt[1][0], wt[1][1], p_hi.reg[2], p_lo.reg[2]);
      if constexpr (kHalves == 2) {
        split2<kMma>(wt[0][2], wt[0][3], p_hi.reg[1], p_lo.reg[1]);
        split2<kMma>(wt[1][2], wt[1][3], p_hi.reg[3], p_lo.reg[3]);
      }
    };
    dev::FragA p_hi;
    dev::FragA p_lo;
    split_p(w, p_hi, p_lo);
#pragma unroll
    for (int n = 0; n < G::kNTiles; n += 2) {
      dev::FragB vb[2];
      load_v_fragments<kKv, kHeadDim>(v_rows, n, lane, vb);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        mma_live_rows<kMma>(p_hi, vb[j], o[n + j]);
        mma_live_rows<kMma>(p_lo, vb[j], o[n + j]);
      }
    }
  }
  dev::cp_async_wait_all();  // only empty groups can be left

  // Merge the 4 warps' states of each row and hand every (row, dim) to `store`.
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  __syncthreads();  // every warp is done with the ring, which the merge buffers alias
  float* merge_o = reinterpret_cast<float*>(smem);            // [warp][row][d]
  float* merge_stats = merge_o + kWarps * kMRows * kHeadDim;  // [warp][row][2]
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int row = lane / 4 + 8 * h;
    if (lane % 4 == 0) {
      merge_stats[(warp * kMRows + row) * 2] = m_run[h];
      merge_stats[(warp * kMRows + row) * 2 + 1] = l_run[h];
    }
#pragma unroll
    for (int n = 0; n < G::kNTiles; ++n) {
      float* dst = merge_o + (warp * kMRows + row) * kHeadDim;
      dst[8 * n + 2 * (lane % 4)] = o[n][2 * h];
      dst[8 * n + 2 * (lane % 4) + 1] = o[n][2 * h + 1];
    }
  }
  __syncthreads();
  store_merged<kHeadDim, kMRows>(p, smem, live_rows, store);
}

// Shared memory of attend() for these template arguments.
template <DType kKv, int kHeadDim, int kMRows = kRows, bool kHalfBlocks = false>
constexpr std::size_t smem_bytes() {
  if constexpr (is_int_kv(kKv)) {
    return IntGeometry<kKv, kHeadDim, kMRows, kHalfBlocks>::kBytes;
  } else {
    return Geometry<kKv, kHeadDim, kMRows>::kBytes;
  }
}

// One thread block's attention over tokens [t_begin, t_end) of KV head `kv_head`, read through
// sequence `table_seq`'s block table, for kMRows MMA rows of queries: 8 (tc: the query group)
// or 16 (cascade's prefix pass: the groups of several sequences). Row r < live_rows is q row
// q_row_of(r) ([batch x Hq] index); rows past live_rows are zero. kWindow: the tokens before
// t_first (a sliding window's first token, in the range's first block) are read and masked, and
// a warp whose 16 tokens all lie before it skips them; t_begin stays a block boundary, which the
// integer formats' per-block scales and the byte model (a window reads whole blocks) assume.
// Scores are soft-capped when PagedDecodeParams::softcap is set (soft_cap). Ends with the 4
// warps merged and store(r, dim, value, state) called once per live (row, dim): value is the
// row's normalized output (v_scale applied, 0 for an empty range), state its softmax state (sum
// 0 when empty). `smem` holds smem_bytes<kKv, kHeadDim, kMRows, kHalfBlocks>(). kHalfBlocks:
// int4 at block size 8 (tc_int.cuh).
template <DType kKv, int kHeadDim, int kMRows, bool kHalfBlocks = false, bool kWindow = false,
          typename QRowOf, typename Store>
__device__ __forceinline__ void attend(const PagedDecodeParams& p, unsigned char* smem, int kv_head,
                                       int table_seq, int t_begin, int t_first, int t_end,
                                       int live_rows, QRowOf q_row_of, Store store) {
  if constexpr (is_int_kv(kKv)) {
    attend_int<kKv, kHeadDim, kMRows, kHalfBlocks, kWindow>(
        p, smem, kv_head, table_seq, t_begin, t_first, t_end, live_rows, q_row_of, store);
  } else {
    attend_float<kKv, kHeadDim, kMRows, kWindow>(p, smem, kv_head, table_seq, t_begin, t_first,
                                                 t_end, live_rows, q_row_of, store);
  }
}

// Whether int4 keys at this block size need the two-blocks-a-warp instance (P = 8).
template <DType kKv>
__device__ __host__ constexpr bool half_blocks(int block_size) {
  return kKv == DType::int4 && block_size < kWarpTokens;
}

template <DType kKv, int kHeadDim, bool kHalfBlocks = false>
__global__ void __launch_bounds__(kThreads) tc_kernel(const __grid_constant__ PagedDecodeParams p) {
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int kv_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int group = p.num_q_heads / p.num_kv_heads;
  // The split's range, in whole units of kv_tile_tokens(d) as split_kv cuts it, from the block
  // holding the window's first token (the whole context without a window).
  const int len = p.context_lens[seq];
  const int t_first = window_first_token(len, p.window);
  int t_begin = 0;
  int t_end = 0;
  split_range(window_first_block(len, p.window, p.block_size) * p.block_size, len,
              kv_tile_tokens(kHeadDim), p.num_splits, split, t_begin, t_end);
  const std::size_t head0 = static_cast<std::size_t>(seq) * p.num_q_heads +
                            static_cast<std::size_t>(kv_head) * group;  // first q row
  const bool to_workspace = p.num_splits > 1;
  attend<kKv, kHeadDim, kRows, kHalfBlocks, /*kWindow=*/true>(
      p, smem, kv_head, seq, t_begin, t_first, t_end, group, [&](int r) { return head0 + r; },
      [&](int h, int d, float value, const SoftmaxState<float>& state) {
        if (to_workspace) {
          // [batch][Hq][num_splits][d], [batch][Hq][num_splits]
          p.partial_out[((head0 + h) * p.num_splits + split) * kHeadDim + d] = value;
          if (d == 0) {
            p.partial_lse[(head0 + h) * p.num_splits + split] =
                state.sum > 0.f ? state.log2_sum_exp2() : -INFINITY;
          }
        } else {  // the whole context: the sink joins here (else in the merge)
          dev::store_out(p.out, p.q_dtype, static_cast<int>((head0 + h) * kHeadDim + d),
                         with_sink(p, kv_head * group + h, value, state));
        }
      });
}

}  // namespace tc_detail

// What launch_tc launches for `p` (kernels::launch_shape): the tensor-core kernel; it has no
// group cap (every group up to 8 is one MMA tile). int4 at block size 8: its own instance.
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_tc(const PagedDecodeParams& p) {
  if constexpr (kKvDtype == DType::int4) {
    if (tc_detail::half_blocks<kKvDtype>(p.block_size)) {
      return dev::launch_shape_of(
          (tc_detail::tc_kernel<kKvDtype, kHeadDim, true>), "tc_kernel",
          /*group_cap=*/0, split_kv_detail::split_grid(p), dim3(tc_detail::kThreads),
          tc_detail::smem_bytes<kKvDtype, kHeadDim, tc_detail::kRows, true>());
    }
  }
  return dev::launch_shape_of((tc_detail::tc_kernel<kKvDtype, kHeadDim>), "tc_kernel",
                              /*group_cap=*/0, split_kv_detail::split_grid(p),
                              dim3(tc_detail::kThreads),
                              tc_detail::smem_bytes<kKvDtype, kHeadDim>());
}

// Same tensors, limits and workspace as launch_split_kv (group <= 8, num_splits in 1..65535,
// checked once by unsupported_reason). One split writes `out` directly; more launch split_kv's
// merge kernel.
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_tc(const PagedDecodeParams& params, void* stream) {
  const PagedDecodeParams p = tc_detail::with_score_cap(params);
  LaunchResult main;
  if (tc_detail::half_blocks<kKvDtype>(p.block_size)) {
    if constexpr (kKvDtype == DType::int4) {
      main = DECODEBENCH_LAUNCH(
          (tc_detail::tc_kernel<kKvDtype, kHeadDim, true>), split_kv_detail::split_grid(p),
          dim3(tc_detail::kThreads),
          (tc_detail::smem_bytes<kKvDtype, kHeadDim, tc_detail::kRows, true>()), stream, p);
    }
  } else {
    main = DECODEBENCH_LAUNCH((tc_detail::tc_kernel<kKvDtype, kHeadDim>),
                              split_kv_detail::split_grid(p), dim3(tc_detail::kThreads),
                              (tc_detail::smem_bytes<kKvDtype, kHeadDim>()), stream, p);
  }
  if (!main.ok() || p.num_splits == 1) return main;
  const dim3 merge_grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return DECODEBENCH_LAUNCH((split_kv_detail::merge_kernel<kHeadDim>), merge_grid,
                            dim3(split_kv_detail::kMergeThreads), 0, stream, p);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
