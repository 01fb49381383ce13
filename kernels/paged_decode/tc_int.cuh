// The integer KV formats (int8, int4, int4_token) on the tensor-core rungs: tc's grid, tile loop,
// splits and merge (tc.cuh), with the MMA's operands swapped: the warp's 16 tokens are M and the
// query rows N (8 a tile: the group; cascade's prefix pass has two tiles of 8).
//
// Why swapped: with the query group on M (tc's float path) a group of 4 fills 4 of 16 rows and
// every MMA moves its dead rows' zeros in and out; with tokens on M no row is padding, S = K Q^T
// takes one MMA per k-step instead of two, and O^T = V^T P^T one per 16 channels. The price is
// that P (S's accumulator, tokens x rows) must become a B fragment (rows x tokens): one
// movmatrix.trans per 8 x 8 (kernels/device/mma.h), with no trip through shared memory.
//
// Where the scales go (every one folded outside the codes, which enter the MMA exactly; never an
// f16 dequantization, which would cost 2^-11 relative per element):
//   int8 K      S row t times s_K(t) after the MMA (two scales a lane)
//   int8 V      P's weights times s_V(t) in fp32 before the hi + lo split
//   int4 K      per (block, channel): S = codes . (q * s) + z . q. q * s is a B operand formed
//               once per k-step as an exact f16 TwoProduct (mul + fma: hi + lo), the codes' A
//               used twice; z . q is one more MMA whose A rows are the block's zeros, so S starts
//               at the block's bias. A warp's 16 tokens lie in one block when P >= 16; at P = 8
//               (kHalfBlocks, its own instance) rows 0..7 and 8..15 take their own q * s, each
//               against half of A: two more MMAs a k-step
//   int4_token  per (token, group of 32): each group's two k-steps accumulate apart, added as
//   K           s(t, g) S_g + z(t, g) sum(q_g) (sums of q per group in shared memory)
//   int4 V      per (token, group): P split hi + lo once, then per group a TwoProduct of each
//               with (s(t, g), s(t, g)) in f16x2 before the movmatrix; the zeros are
//               sum_t p_t z(t, g), one MMA pair per 16 tokens whose A rows are the groups, rescaled
//               with O and added to each group's channels at the end
// Scales and zeros are staged by cp.async with the codes (kv_convert::SideLayout), through L1
// (cp.async.ca: a block's key scales serve every warp of its tokens, and the static model tells
// these copies from the codes' by it: docs/design.md "Static model"): per-token
// arrays as stored, 16-byte granules of whole tokens, the bytes past the context zero-filled, so
// a masked token's scale is 0 whatever is stored there; int4's per-block rows per warp slot.
//
// Napkin math per warp and 16 tokens at d = 128 (instructions; the static model reads the SASS):
//   int4: codes -> f16 9 per 8 codes (kv_convert.cuh), 144; K MMAs 8 k-steps x (2 + 1 bias);
//   q * s 16 TwoProducts; V MMAs 8 tiles x 2; per group a TwoProduct pair and 4 movmatrix;
//   softmax ~80 (max over the 16 tokens: 3 shuffles a row pair). ~500 against 2816 bytes
//   (176 B per token and head at P = 16): ~.18 instructions per byte.
//   int8: ~380 against 4160 bytes (260 B per token and head): ~.09.
#pragma once

#include <cstdint>

#include "paged_decode/kv_convert.cuh"
#include "paged_decode/tc_common.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace tc_detail {

// kMRows query rows (8: tc and cascade's suffix pass, 16: cascade's prefix pass); kHalfBlocks:
// int4 at P = 8 (a warp's two 8-token halves in different blocks).
template <DType kKv, int kHeadDim, int kMRows = kRows, bool kHalfBlocks = false>
struct IntGeometry {
  static_assert(is_int_kv(kKv), "the integer formats' geometry");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "tc is instantiated for head_dim 64, 128 and 256");
  static_assert(kMRows == 8 || kMRows == 16, "one or two n8 tiles of query rows");
  using Side = kv_convert::SideLayout<kKv, kHeadDim, kHalfBlocks>;
  static constexpr int kRowBytes = static_cast<int>(kv_row_bytes(kKv, kHeadDim));
  static constexpr int kSmemRowBytes = kRowBytes + kPadBytes;
  static constexpr int kTileBytes = kTileTokens * kSmemRowBytes;  // K (or V): [64][row + pad]
  // A stage: K tile, V tile, the side arrays.
  static constexpr int kStageBytes = 2 * kTileBytes + Side::kBytes;
  static constexpr int kStagesWanted = 1 + (kBytesInFlight + kStageBytes - 1) / kStageBytes;
  static constexpr int kStages = kStagesWanted < 2 ? 2 : kStagesWanted;
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kMergeBytes = kWarps * kMRows * (kHeadDim + 2) * 4;
  static constexpr int kRegionBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
  static constexpr int kQRowBytes = kHeadDim * 2 + kPadBytes;
  static constexpr int kQBytes = 2 * kMRows * kQRowBytes;  // q hi and lo, [kMRows][d + pad]
  static constexpr int kGroups = Side::kGroups;
  // int4_token: sums of q per (group of 32 channels, row), fp32 [d / 32][kMRows].
  static constexpr int kQSumBytes = kKv == DType::int4_token ? kGroups * kMRows * 4 : 0;
  static constexpr std::size_t kBytes = kRegionBytes + kQBytes + kQSumBytes;
  static constexpr int kGranulesPerRow = kRowBytes / 16;
  static constexpr int kCopyRowStride = kThreads / kGranulesPerRow;
  static constexpr int kCopies = kTileTokens / kCopyRowStride;  // per thread, per K (or V)
  static constexpr int kChunks = kRowBytes / 16;  // 16 channels (int8) or 32 (int4) each
  static constexpr int kOTiles = kHeadDim / 16;   // m16 tiles of O^T's channels
  static constexpr int kNTiles = kMRows / 8;      // n8 tiles of query rows
  static_assert(kChunks % 2 == 0, "ldmatrix.x4 takes two chunks");
  static_assert(kTileTokens % kCopyRowStride == 0, "whole rows per copy pass");
  static_assert(kSmemRowBytes % 16 == 0 && kStageBytes % 16 == 0 && kRegionBytes % 16 == 0,
                "ldmatrix and cp.async need 16-byte aligned rows");
};

// kN f16 values at `p` (shared memory, 4-byte aligned) as floats.
template <int kN>
__device__ __forceinline__ void load_f16_floats(const unsigned char* p, float (&out)[kN]) {
  static_assert(kN % 2 == 0, "pairs");
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    const float2 f = unpack2<DType::f16>(reinterpret_cast<const std::uint32_t*>(p)[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// attend() of the integer formats; its contract is tc.cuh's attend().
template <DType kKv, int kHeadDim, int kMRows, bool kHalfBlocks, bool kWindow, typename QRowOf,
          typename Store>
__device__ __forceinline__ void attend_int(const PagedDecodeParams& p, unsigned char* smem,
                                           int kv_head, int table_seq, int t_begin, int t_first,
                                           int t_end, int live_rows, QRowOf q_row_of, Store store) {
  using G = IntGeometry<kKv, kHeadDim, kMRows, kHalfBlocks>;
  using Side = typename G::Side;
  constexpr DType kMma = DType::f16;
  constexpr int kStages = G::kStages;
  constexpr int kNT = G::kNTiles;
  constexpr int kSPW = Side::kSlotsPerWarp;
  constexpr bool kVZeros = is_int4_kv(kKv);
  unsigned char* ring = smem;                           // [S][K tile, V tile, side]
  unsigned char* q_hi = smem + G::kRegionBytes;         // [kMRows][d + pad] f16
  unsigned char* q_lo = q_hi + kMRows * G::kQRowBytes;  // [kMRows][d + pad] f16
  float* q_sums = reinterpret_cast<float*>(q_lo + kMRows * G::kQRowBytes);  // [d / 32][kMRows]

  const int tid = static_cast<int>(threadIdx.x);
  // Masks, not / and %: with those ptxas spills a lane index across the loop at d = 64 and 256.
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;  // C rows g, g + 8 (tokens); A rows (channels); B column (query row)
  const int qd = lane & 3;  // C columns 2 qd, 2 qd + 1 (query rows)

  // q [kMRows][d] as hi + lo in f16, in K's channel order; rows past live_rows are zero.
  const bool q_split = p.q_dtype != kMma;
  for (int i = tid; i < kMRows * kHeadDim / 2; i += kThreads) {
    const int r = i / (kHeadDim / 2);
    const int c = (i % (kHeadDim / 2)) * 2;
    float a = 0.f;
    float b = 0.f;
    if (r < live_rows) {
      const std::size_t row = q_row_of(r) * kHeadDim;
      a = dev::load_q<float>(p.q, p.q_dtype, static_cast<int>(row + kv_convert::k_channel<kKv>(c)));
      b = dev::load_q<float>(p.q, p.q_dtype,
                             static_cast<int>(row + kv_convert::k_channel<kKv>(c + 1)));
    }
    std::uint32_t hi = 0u;
    std::uint32_t lo = 0u;
    split2<kMma>(a, b, hi, lo);
    *reinterpret_cast<std::uint32_t*>(q_hi + r * G::kQRowBytes + c * 2) = hi;
    *reinterpret_cast<std::uint32_t*>(q_lo + r * G::kQRowBytes + c * 2) = lo;
  }
  if constexpr (kKv == DType::int4_token) {
    for (int i = tid; i < G::kGroups * kMRows; i += kThreads) {
      const int u = i / kMRows;
      const int r = i % kMRows;
      float sum = 0.f;
      if (r < live_rows) {
        const int at = static_cast<int>(q_row_of(r) * kHeadDim) + u * kInt4GroupChannels;
        for (int c = 0; c < kInt4GroupChannels; ++c) {
          sum += dev::load_q<float>(p.q, p.q_dtype, at + c);
        }
      }
      q_sums[i] = sum;
    }
  }

  // cp.async ring over tiles of 64 tokens from t_begin: codes as tc's float path, then the side.
  const int copy_row = tid / G::kGranulesPerRow;
  const int copy_byte = (tid % G::kGranulesPerRow) * 16;
  const int block_shift = decode::log2_pow2(p.block_size);
  const int slot_mask = p.block_size - 1;
  const auto* k_base = static_cast<const unsigned char*>(p.k_cache);
  const auto* v_base = static_cast<const unsigned char*>(p.v_cache);
  const auto* k_scales = reinterpret_cast<const unsigned char*>(p.k_scales);
  const auto* k_zeros = reinterpret_cast<const unsigned char*>(p.k_zeros);
  const auto* v_scales = reinterpret_cast<const unsigned char*>(p.v_scales);
  const auto* v_zeros = reinterpret_cast<const unsigned char*>(p.v_zeros);
  const int num_tiles = t_end > t_begin ? (t_end - t_begin + kTileTokens - 1) / kTileTokens : 0;
  int block[G::kCopies];  // physical blocks of the rows this thread copies in the next tile
  const int span = t_end - t_begin;
  auto fetch_blocks = [&](int tile_index) {
#pragma unroll
    for (int k = 0; k < G::kCopies; ++k) {
      // The row compared with the span, not the token with t_end: the same test, but ptxas then
      // keeps cascade's int8 suffix pass (d 64) free of a spill.
      const int row = tile_index * kTileTokens + copy_row + k * G::kCopyRowStride;
      block[k] = row < span ? decode::block_of(p, table_seq, t_begin + row, block_shift) : 0;
    }
  };
  auto issue = [&](int tile_index) {
    unsigned char* k_dst = ring + (tile_index % kStages) * G::kStageBytes;
    unsigned char* v_dst = k_dst + G::kTileBytes;
    unsigned char* side = v_dst + G::kTileBytes;
    const int first = t_begin + tile_index * kTileTokens;
#pragma unroll
    for (int k = 0; k < G::kCopies; ++k) {
      const int row = copy_row + k * G::kCopyRowStride;
      const int t = first + row;
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
    // Per-token scales and zeros: granule `tid` holds tokens [tid, tid + 1) x kTokensPerGranule,
    // the bytes past the context zero-filled. K's and V's arrays share the token, so one lookup.
    if (tid < Side::kTokenGranules) {
      const int t = first + tid * Side::kTokensPerGranule;
      const bool valid = t < t_end;
      const int blk = valid ? decode::block_of(p, table_seq, t, block_shift) : 0;
      const std::size_t off =
          valid ? ((static_cast<std::size_t>(blk) * p.num_kv_heads + kv_head) * p.block_size +
                   static_cast<unsigned>(t & slot_mask)) *
                      Side::kTokenBytes
                : 0;
      const int left = (t_end - t) * Side::kTokenBytes;
      const int bytes = valid ? (left < 16 ? left : 16) : 0;
      const int dst = tid * 16;
      if constexpr (Side::kKTokenArrays >= 1) {
        dev::cp_async<16, /*kThroughL1=*/true>(side + Side::kKScales + dst, k_scales + off, bytes);
      }
      if constexpr (Side::kKTokenArrays >= 2) {
        dev::cp_async<16, /*kThroughL1=*/true>(side + Side::kKZeros + dst, k_zeros + off, bytes);
      }
      dev::cp_async<16, /*kThroughL1=*/true>(side + Side::kVScales + dst, v_scales + off, bytes);
      if constexpr (Side::kVTokenArrays >= 2) {
        dev::cp_async<16, /*kThroughL1=*/true>(side + Side::kVZeros + dst, v_zeros + off, bytes);
      }
    }
    // int4 keys: each slot's block row of scales and zeros, from the second half of the threads
    // (the first copy the per-token granules).
    if constexpr (Side::kSlots > 0) {
      constexpr int kN = Side::kSlots * Side::kSlotGranules;
#pragma unroll
      for (int base = 0; base < kN; base += kThreads) {
        const int idx = base + (tid + kThreads / 2) % kThreads;
        if (kN % kThreads == 0 || idx < kN) {
          const int slot = idx / Side::kSlotGranules;
          const int granule = idx % Side::kSlotGranules;
          const int t = first + (slot / kSPW) * kWarpTokens + (slot % kSPW) * 8;
          const bool valid = t < t_end;
          const int blk = valid ? decode::block_of(p, table_seq, t, block_shift) : 0;
          const std::size_t off =
              valid ? (static_cast<std::size_t>(blk) * p.num_kv_heads + kv_head) * kHeadDim * 2 +
                          granule * 16
                    : 0;
          unsigned char* dst = side + Side::kSlotBase + slot * Side::kSlotBytes + granule * 16;
          dev::cp_async<16, /*kThroughL1=*/true>(dst, k_scales + off, valid ? 16 : 0);
          dev::cp_async<16, /*kThroughL1=*/true>(dst + kHeadDim * 2, k_zeros + off, valid ? 16 : 0);
        }
      }
    }
  };

  // This warp's state for query rows 8 nt + 2 qd + e: running max (log2 domain), this lane's part
  // of the sum, and O^T: tile T holds channels o_channel(T, g) (registers 0, 1) and
  // o_channel(T, g + 8) (2, 3) of those rows (registers e, 2 + e).
  float m_run[kNT][2];
  float l_run[kNT][2];
  float o[G::kOTiles][kNT][4];
  // int4 values: sum_t p_t z(t, group), C of groups x query rows (rows 8.. stay zero).
  float z_acc[kNT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) z_acc[nt][i] = 0.f;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      m_run[nt][e] = -INFINITY;
      l_run[nt][e] = 0.f;
    }
#pragma unroll
    for (int t = 0; t < G::kOTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) o[t][nt][i] = 0.f;
    }
  }
  const float scale = decode::score_scale_log2(p);

#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) {
    fetch_blocks(s);
    if (s < num_tiles) issue(s);
    dev::cp_async_commit();
  }
  fetch_blocks(kStages - 1);

  // ldmatrix addresses: matrix m = lane / 8 is rows 8 (m % 2) + [0, 8) of chunk m / 2.
  const int mat = lane / 8;
  const int lane_row = (mat & 1) * 8 + lane % 8;

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
    const unsigned char* stage = ring + (i % kStages) * G::kStageBytes;
    const unsigned char* k_rows = stage + warp * kWarpTokens * G::kSmemRowBytes;
    const unsigned char* v_rows = k_rows + G::kTileBytes;
    const unsigned char* side = stage + 2 * G::kTileBytes;
    const unsigned char* k_addr = k_rows + lane_row * G::kSmemRowBytes + (mat >> 1) * 16;
    const unsigned char* v_addr = v_rows + lane_row * G::kSmemRowBytes + (mat >> 1) * 16;
    const int lt = warp * kWarpTokens + g;  // this lane's tokens lt, lt + 8 of the tile
    const bool live0 = warp_first + g < t_end && (!kWindow || warp_first + g >= t_first);
    const bool live1 = warp_first + g + 8 < t_end && (!kWindow || warp_first + g + 8 >= t_first);

    // q's B fragments for k-steps ks and ks + 1 of n-tile nt: matrix mat is k-step ks + mat / 2,
    // positions 8 (mat % 2) + [0, 8), rows 8 nt + [0, 8).
    const auto q_frags = [&](const unsigned char* q_tile, int ks, int nt, dev::FragB(&b)[2]) {
      std::uint32_t r[4];
      dev::ldmatrix<4>(r, q_tile + (8 * nt + lane % 8) * G::kQRowBytes + (16 * ks + 8 * mat) * 2);
      b[0].reg[0] = r[0];
      b[0].reg[1] = r[1];
      b[1].reg[0] = r[2];
      b[1].reg[1] = r[3];
    };

    // ---- S^T = K Q^T: [16 tokens][query rows] ----
    float s[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) s[nt][c] = 0.f;
    }
#pragma unroll
    for (int u = 0; u < G::kChunks; u += 2) {
      std::uint32_t w[4];  // w[2 cu + h]: rows 8 h + [0, 8) of chunk u + cu
      dev::ldmatrix<4>(w, k_addr + u * 16);
      if constexpr (kKv == DType::int8) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          dev::FragB qh[2];
          dev::FragB ql[2];
          q_frags(q_hi, u, nt, qh);
          if (q_split) q_frags(q_lo, u, nt, ql);
#pragma unroll
          for (int cu = 0; cu < 2; ++cu) {
            const std::uint32_t b0 = w[2 * cu] ^ 0x80808080u;
            const std::uint32_t b1 = w[2 * cu + 1] ^ 0x80808080u;
            const dev::FragA a = {{kv_convert::int8_pair(b0, kv_convert::kInt8Bytes01),
                                   kv_convert::int8_pair(b1, kv_convert::kInt8Bytes01),
                                   kv_convert::int8_pair(b0, kv_convert::kInt8Bytes23),
                                   kv_convert::int8_pair(b1, kv_convert::kInt8Bytes23)}};
            mma_live_rows<kMma>(a, qh[cu], s[nt]);
            if (q_split) mma_live_rows<kMma>(a, ql[cu], s[nt]);
          }
        }
      } else {
#pragma unroll
        for (int cu = 0; cu < 2; ++cu) {
          const int c = u + cu;  // 32-channel chunk: k-steps 2c, 2c + 1
          std::uint32_t x0[4];   // rows 0..7
          std::uint32_t x1[4];   // rows 8..15
          kv_convert::int4_pairs(w[2 * cu], x0);
          kv_convert::int4_pairs(w[2 * cu + 1], x1);
          if constexpr (kKv == DType::int4) {
            // The slot rows' scales and zeros of this lane's channels 32 c + 8 qd + [0, 8), as
            // the pairs the codes' registers hold.
            std::uint32_t sp[kSPW][4];
            std::uint32_t zp[kSPW][4];
#pragma unroll
            for (int sl = 0; sl < kSPW; ++sl) {
              const unsigned char* row = side + Side::kSlotBase +
                                         (warp * kSPW + sl) * Side::kSlotBytes +
                                         (32 * c + 8 * qd) * 2;
              const uint4 sv = *reinterpret_cast<const uint4*>(row);
              const uint4 zv = *reinterpret_cast<const uint4*>(row + kHeadDim * 2);
              kv_convert::f16_pairs_4_apart({sv.x, sv.y, sv.z, sv.w}, sp[sl]);
              kv_convert::f16_pairs_4_apart({zv.x, zv.y, zv.z, zv.w}, zp[sl]);
            }
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              dev::FragB qh[2];
              dev::FragB ql[2];
              q_frags(q_hi, 2 * c, nt, qh);
              if (q_split) q_frags(q_lo, 2 * c, nt, ql);
#pragma unroll
              for (int st = 0; st < 2; ++st) {
                // The bias z . q: A rows are the zeros of their token's block.
                const dev::FragA az = {{zp[0][2 * st], zp[kSPW - 1][2 * st], zp[0][2 * st + 1],
                                        zp[kSPW - 1][2 * st + 1]}};
                mma_live_rows<kMma>(az, qh[st], s[nt]);
                if (q_split) mma_live_rows<kMma>(az, ql[st], s[nt]);
                const dev::FragA a = {{x0[2 * st], x1[2 * st], x0[2 * st + 1], x1[2 * st + 1]}};
#pragma unroll
                for (int sl = 0; sl < kSPW; ++sl) {
                  dev::FragB qs_hi;
                  dev::FragB qs_lo;
#pragma unroll
                  for (int r = 0; r < 2; ++r) {
                    kv_convert::f16x2_two_product(qh[st].reg[r], sp[sl][2 * st + r], qs_hi.reg[r],
                                                  qs_lo.reg[r]);
                    if (q_split) {
                      qs_lo.reg[r] =
                          kv_convert::f16x2_fma(ql[st].reg[r], sp[sl][2 * st + r], qs_lo.reg[r]);
                    }
                  }
                  dev::FragA as = a;
                  if constexpr (kHalfBlocks) {  // slot sl is rows 8 sl + [0, 8)
                    as.reg[1 - sl] = 0u;
                    as.reg[3 - sl] = 0u;
                  }
                  mma_live_rows<kMma>(as, qs_hi, s[nt]);
                  mma_live_rows<kMma>(as, qs_lo, s[nt]);
                }
              }
            }
          } else {  // int4_token: per (token, group) s and z; the group is chunk c
            // This group's scale and zero of the lane's two tokens (one group at a time: all of
            // them at once cost cascade's prefix pass a spill at d = 256).
            const auto side_f16 = [&](int array, int token) {
              return unpack2<DType::f16>(*reinterpret_cast<const std::uint16_t*>(
                                             side + array + (token * G::kGroups + c) * 2))
                  .x;
            };
            const float ks[2][1] = {{side_f16(Side::kKScales, lt)},
                                    {side_f16(Side::kKScales, lt + 8)}};
            const float kz[2][1] = {{side_f16(Side::kKZeros, lt)},
                                    {side_f16(Side::kKZeros, lt + 8)}};
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              dev::FragB qh[2];
              dev::FragB ql[2];
              q_frags(q_hi, 2 * c, nt, qh);
              if (q_split) q_frags(q_lo, 2 * c, nt, ql);
              float sg[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
              for (int st = 0; st < 2; ++st) {
                const dev::FragA a = {{x0[2 * st], x1[2 * st], x0[2 * st + 1], x1[2 * st + 1]}};
                mma_live_rows<kMma>(a, qh[st], sg);
                if (q_split) mma_live_rows<kMma>(a, ql[st], sg);
              }
              const float2 qs =
                  *reinterpret_cast<const float2*>(q_sums + c * kMRows + 8 * nt + 2 * qd);
              s[nt][0] += sg[0] * ks[0][0] + kz[0][0] * qs.x;
              s[nt][1] += sg[1] * ks[0][0] + kz[0][0] * qs.y;
              s[nt][2] += sg[2] * ks[1][0] + kz[1][0] * qs.x;
              s[nt][3] += sg[3] * ks[1][0] + kz[1][0] * qs.y;
            }
          }
        }
      }
    }
    if constexpr (kKv == DType::int8) {  // per (token, head) scale: S row t times s_K(t)
      const float2 k0 = unpack2<DType::f16>(
          *reinterpret_cast<const std::uint16_t*>(side + Side::kKScales + lt * 2));
      const float2 k1 = unpack2<DType::f16>(
          *reinterpret_cast<const std::uint16_t*>(side + Side::kKScales + (lt + 8) * 2));
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        s[nt][0] *= k0.x;
        s[nt][1] *= k0.x;
        s[nt][2] *= k1.x;
        s[nt][3] *= k1.x;
      }
    }

    soft_cap(p, s);
    // ---- Online softmax of each query row (a C column) over the 16 tokens ----
    float wt[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float v0 = live0 ? s[nt][e] * scale : -INFINITY;
        const float v1 = live1 ? s[nt][2 + e] * scale : -INFINITY;
        float tile_max = fmaxf(v0, v1);
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
        // One of the warp's tokens is valid (warp_first, or t_first in the window's first
        // warp), so tile_max is finite and so is m_new.
        const float m_new = fmaxf(m_run[nt][e], tile_max);
        const float factor = dev::fast_exp2(m_run[nt][e] - m_new);  // m_run = -inf -> 0
        m_run[nt][e] = m_new;
        l_run[nt][e] *= factor;
#pragma unroll
        for (int t = 0; t < G::kOTiles; ++t) {
          o[t][nt][e] *= factor;
          o[t][nt][2 + e] *= factor;
        }
        if constexpr (kVZeros) z_acc[nt][e] *= factor;  // rows 8.. are zero
        wt[nt][e] = dev::fast_exp2(v0 - m_new);         // masked: exp2(-inf) = 0
        wt[nt][2 + e] = dev::fast_exp2(v1 - m_new);
        l_run[nt][e] += wt[nt][e] + wt[nt][2 + e];
      }
    }

    // ---- O^T += V^T P^T: P's rows made B fragments by movmatrix ----
    // (hi, lo) of C-layout rows g (tokens 0..7) and g + 8 (8..15) -> B fragments.
    const auto to_b = [](std::uint32_t row0, std::uint32_t row1) {
      dev::FragB b;
      b.reg[0] = dev::movmatrix_trans(row0);
      b.reg[1] = dev::movmatrix_trans(row1);
      return b;
    };
    if constexpr (kKv == DType::int8) {
      const float v0 = unpack2<DType::f16>(
                           *reinterpret_cast<const std::uint16_t*>(side + Side::kVScales + lt * 2))
                           .x;
      const float v1 = unpack2<DType::f16>(*reinterpret_cast<const std::uint16_t*>(
                                               side + Side::kVScales + (lt + 8) * 2))
                           .x;
      dev::FragB p_hi[kNT];
      dev::FragB p_lo[kNT];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        std::uint32_t h0, l0, h1, l1;
        split2<kMma>(wt[nt][0] * v0, wt[nt][1] * v0, h0, l0);
        split2<kMma>(wt[nt][2] * v1, wt[nt][3] * v1, h1, l1);
        p_hi[nt] = to_b(h0, h1);
        p_lo[nt] = to_b(l0, l1);
      }
#pragma unroll
      for (int u = 0; u < G::kChunks; u += 2) {
        std::uint32_t x[4];  // x[2 cu + h]: tokens 8 h + [0, 8) of chunk u + cu, transposed
        dev::ldmatrix<4, /*kTranspose=*/true>(x, v_addr + u * 16);
#pragma unroll
        for (int cu = 0; cu < 2; ++cu) {
          const std::uint32_t t0 = x[2 * cu] ^ 0x80808080u;
          const std::uint32_t t1 = x[2 * cu + 1] ^ 0x80808080u;
          const dev::FragA a = {{kv_convert::int8_pair(t0, kv_convert::kInt8Bytes02),
                                 kv_convert::int8_pair(t0, kv_convert::kInt8Bytes13),
                                 kv_convert::int8_pair(t1, kv_convert::kInt8Bytes02),
                                 kv_convert::int8_pair(t1, kv_convert::kInt8Bytes13)}};
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            mma_live_rows<kMma>(a, p_hi[nt], o[u + cu][nt]);
            mma_live_rows<kMma>(a, p_lo[nt], o[u + cu][nt]);
          }
        }
      }
    } else {
      // P split once; per group its TwoProduct with the group's scale pair per token row.
      std::uint32_t ph[kNT][2];
      std::uint32_t pl[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        split2<kMma>(wt[nt][0], wt[nt][1], ph[nt][0], pl[nt][0]);
        split2<kMma>(wt[nt][2], wt[nt][3], ph[nt][1], pl[nt][1]);
      }
      {
        // Zeros: A rows are the groups (g < d / 32), k this lane's tokens 2 qd + {0, 1} (+ 8).
        const unsigned char* zrow = side + Side::kVZeros;
        const int t0 = warp * kWarpTokens + 2 * qd;
        const auto z_pair = [&](int t) -> std::uint32_t {
          if (g >= G::kGroups) return 0u;
          const auto* z = reinterpret_cast<const std::uint16_t*>(zrow);
          return static_cast<std::uint32_t>(z[t * G::kGroups + g]) |
                 (static_cast<std::uint32_t>(z[(t + 1) * G::kGroups + g]) << 16);
        };
        const dev::FragA az = {{z_pair(t0), 0u, z_pair(t0 + 8), 0u}};
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          mma_live_rows<kMma>(az, to_b(ph[nt][0], ph[nt][1]), z_acc[nt]);
          mma_live_rows<kMma>(az, to_b(pl[nt][0], pl[nt][1]), z_acc[nt]);
        }
      }
      // The scales of this lane's token rows, f16 pairs of groups.
      std::uint32_t vs[2][G::kGroups / 2];
#pragma unroll
      for (int k = 0; k < G::kGroups / 2; ++k) {
        vs[0][k] = reinterpret_cast<const std::uint32_t*>(side + Side::kVScales +
                                                          lt * Side::kTokenBytes)[k];
        vs[1][k] = reinterpret_cast<const std::uint32_t*>(side + Side::kVScales +
                                                          (lt + 8) * Side::kTokenBytes)[k];
      }
#pragma unroll
      for (int u = 0; u < G::kChunks; u += 2) {
        std::uint32_t x[4];  // x[2 cu + h]: tokens 8 h + [0, 8) of chunk u + cu, transposed
        dev::ldmatrix<4, /*kTranspose=*/true>(x, v_addr + u * 16);
#pragma unroll
        for (int cu = 0; cu < 2; ++cu) {
          const int c = u + cu;  // chunk = scale group
          const std::uint32_t sel = c % 2 == 0 ? 0x1010u : 0x3232u;
          const std::uint32_t s0 = kv_convert::byte_perm(vs[0][c / 2], 0u, sel);  // (s, s)
          const std::uint32_t s1 = kv_convert::byte_perm(vs[1][c / 2], 0u, sel);
          dev::FragB b_hi[kNT];
          dev::FragB b_lo[kNT];
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            std::uint32_t h0, e0, h1, e1;
            kv_convert::f16x2_two_product(ph[nt][0], s0, h0, e0);
            kv_convert::f16x2_two_product(ph[nt][1], s1, h1, e1);
            b_hi[nt] = to_b(h0, h1);
            b_lo[nt] = to_b(kv_convert::f16x2_fma(pl[nt][0], s0, e0),
                            kv_convert::f16x2_fma(pl[nt][1], s1, e1));
          }
          std::uint32_t y0[4];  // tokens 0..7: channel 4 g + j of the group, as (t, t + 1)
          std::uint32_t y1[4];  // tokens 8..15
          kv_convert::int4_pairs(x[2 * cu], y0);
          kv_convert::int4_pairs(x[2 * cu + 1], y1);
#pragma unroll
          for (int pr = 0; pr < 2; ++pr) {
            const dev::FragA a = {{y0[2 * pr], y0[2 * pr + 1], y1[2 * pr], y1[2 * pr + 1]}};
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              mma_live_rows<kMma>(a, b_hi[nt], o[2 * c + pr][nt]);
              mma_live_rows<kMma>(a, b_lo[nt], o[2 * c + pr][nt]);
            }
          }
        }
      }
    }
  }
  dev::cp_async_wait_all();  // only empty groups can be left

  if constexpr (kVZeros) {
    // O^T[ch][row] += Z[group of ch][row]; Z[c][2 qd + e] is register e of lane 4 c + qd.
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int c = 0; c < G::kGroups; ++c) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float z = __shfl_sync(0xffffffffu, z_acc[nt][e], 4 * c + qd);
#pragma unroll
          for (int pr = 0; pr < 2; ++pr) {
            o[2 * c + pr][nt][e] += z;
            o[2 * c + pr][nt][2 + e] += z;
          }
        }
      }
    }
  }

  // Merge the 4 warps' states of each row and hand every (row, dim) to `store`.
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      l_run[nt][e] += __shfl_xor_sync(0xffffffffu, l_run[nt][e], 4);
      l_run[nt][e] += __shfl_xor_sync(0xffffffffu, l_run[nt][e], 8);
      l_run[nt][e] += __shfl_xor_sync(0xffffffffu, l_run[nt][e], 16);
    }
  }
  __syncthreads();  // every warp is done with the ring, which the merge buffers alias
  float* merge_o = reinterpret_cast<float*>(smem);            // [warp][row][d]
  float* merge_stats = merge_o + kWarps * kMRows * kHeadDim;  // [warp][row][2]
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = 8 * nt + 2 * qd + e;
      if (g == 0) {
        merge_stats[(warp * kMRows + row) * 2] = m_run[nt][e];
        merge_stats[(warp * kMRows + row) * 2 + 1] = l_run[nt][e];
      }
      float* dst = merge_o + (warp * kMRows + row) * kHeadDim;
#pragma unroll
      for (int t = 0; t < G::kOTiles; ++t) {
        dst[kv_convert::o_channel<kKv>(t, g)] = o[t][nt][e];
        dst[kv_convert::o_channel<kKv>(t, g + 8)] = o[t][nt][2 + e];
      }
    }
  }
  __syncthreads();
  store_merged<kHeadDim, kMRows>(p, smem, live_rows, store);
}

}  // namespace tc_detail

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
