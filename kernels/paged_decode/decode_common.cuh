// Device code shared by the fast paged-decode rungs (gqa, pipelined, split_kv): the thread
// layout, the q/accumulator registers of one thread block, and the per-tile score / softmax /
// accumulate steps. The rungs differ only in where a tile's K/V rows come from (registers
// loaded straight from HBM, or a cp.async ring in shared memory) and where the result goes
// (the output, or a split's partial in the workspace).
//
// One thread block = one (sequence, KV head) [x one split]: 128 threads serve all `group`
// query heads of that KV head, so every K/V row is read from HBM once for the whole group.
//
// Thread layout (C = head_dim / 8 lanes per row, R = 128 / C rows per pass):
//   thread t -> lane c = t % C (owns dims [8c, 8c + 8)), row r = t / C
//   a tile of T = 4 * R tokens is covered in 4 passes; in pass p thread (r, c) handles token
//   p * R + r of the tile. A warp's 32 lanes read 32 consecutive 16-byte (16-bit KV) or
//   8-byte (fp8 KV) chunks: whole rows, fully coalesced.
//
//   head_dim  C   R   T   K+V bytes per tile (16-bit / fp8)
//   64        8   16  64  16 KiB / 8 KiB
//   128       16  8   32  16 KiB / 8 KiB
//   256       32  4   16  16 KiB / 8 KiB
//
// Why 8 elements per lane also for fp8 (an 8-byte chunk rather than 16): each thread keeps q
// for all its heads in registers, kGroupCap x 8 floats; 16 fp8 elements per lane would double
// that to 128 registers at group 8. The loads stay fully coalesced (a warp moves 256 contiguous
// bytes per instruction), there are just twice as many of them per byte.
//
// Scores without per-token shuffles: each thread writes its partial dot products (one per head
// and token) to shared memory; after one barrier, thread i sums the C partials of (head, token)
// pair i, scales to the log2 domain and writes the score; after a second barrier every row reads
// the scores of its tokens (broadcast) and updates its online softmax. So a tile costs two
// __syncthreads and no warp shuffles: cheap on the GPU (~2 smem wavefronts per KiB of K) and on
// the SIMT emulator, where every barrier is a real cross-thread rendezvous.
//
// Online softmax per row: each row r keeps its own (max, sum, acc) per head over the tokens it
// saw (base 2, k_scale and log2(e) folded into the score scale); the R rows are merged once at
// the end of the block through shared memory (SoftmaxState::merge from the max over rows),
// v_scale folded into the final weights. Masked tokens (past the context or the split) score
// -inf and their V registers / shared rows are zero, so they contribute exactly 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "device/device.h"
#include "device/math.h"
#include "device/paged_kv.h"
#include "device/softmax_state.h"
#include "kernels.h"
#include "paged_decode/launchers.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode::decode {

inline constexpr int kThreads = 128;  // 4 warps: small enough for the emulator, and a
                                      // 128-thread block keeps 2-3 blocks per SM
inline constexpr int kMaxGroup = 8;   // largest Hq / Hkv the rungs serve: the registry's
                                      // max_group of gqa/pipelined/split_kv, which
                                      // unsupported_reason enforces before any launch
inline constexpr int kVec = 8;        // KV elements per lane chunk
inline constexpr int kPasses = 4;     // passes (tokens per thread) per tile

// Compile-time tile geometry of one (KV dtype, head_dim).
template <DType kKv, int kHeadDim>
struct Tiling {
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "the decode rungs are instantiated for head_dim 64, 128 and 256");
  static_assert(kKv == DType::f16 || kKv == DType::bf16 || is_fp8(kKv),
                "KV cache dtype must be f16, bf16, fp8_e4m3 or fp8_e5m2");
  static constexpr int kElemBytes = static_cast<int>(dtype_size(kKv));
  static constexpr int kChunkBytes = kVec * kElemBytes;  // 16 (16-bit) or 8 (fp8)
  static constexpr int kLanes = kHeadDim / kVec;         // C: lanes per row
  static constexpr int kRows = kThreads / kLanes;        // R: rows per pass
  static constexpr int kTileTokens = kRows * kPasses;    // T
  static constexpr int kRowBytes = kHeadDim * kElemBytes;
  static constexpr int kTileBytes = kTileTokens * kRowBytes;  // K (or V) of one tile
  // Partial-dot rows are padded by 4 floats: the reducer reads its row as float4, and with a
  // stride of C + 4 words the 8 threads of a 128-byte phase hit 8 disjoint bank quads.
  static constexpr int kPartialStride = kLanes + 4;
  static_assert(kLanes * kRows == kThreads, "lanes x rows must cover the block");
  static_assert(kLanes % 4 == 0, "partials are reduced as float4");
};

// One lane chunk of raw KV: 8 elements, 16 bytes (f16/bf16) or 8 bytes (fp8).
template <DType kKv>
using RawChunk = std::conditional_t<is_fp8(kKv), uint2, uint4>;

template <DType kKv>
__device__ __forceinline__ RawChunk<kKv> zero_chunk() {
  if constexpr (is_fp8(kKv)) {
    return make_uint2(0u, 0u);
  } else {
    return make_uint4(0u, 0u, 0u, 0u);
  }
}

// Read-only load of a chunk from the KV cache (ld.global.nc).
template <DType kKv>
__device__ __forceinline__ RawChunk<kKv> load_chunk_global(const unsigned char* p) {
  if constexpr (is_fp8(kKv)) {
    return __ldg(reinterpret_cast<const uint2*>(p));
  } else {
    return dev::ld_global_nc_v4(p);
  }
}

// Load of a chunk staged in shared memory.
template <DType kKv>
__device__ __forceinline__ RawChunk<kKv> load_chunk_shared(const unsigned char* p) {
  return *reinterpret_cast<const RawChunk<kKv>*>(p);
}

// 8 raw elements -> 8 floats (exact). fp8 goes through dev::unpack16 with the upper 8 bytes
// zero: under nvcc the conversions of the unused half are dead code and disappear, so what is
// left is 4 x cvt.rn.f16x2.e4m3x2 (two elements per instruction) + f16 -> f32.
template <DType kKv>
__device__ __forceinline__ void unpack_chunk(const RawChunk<kKv>& raw, float (&out)[kVec]) {
  if constexpr (is_fp8(kKv)) {
    float wide[16];
    dev::unpack16<kKv>(make_uint4(raw.x, raw.y, 0u, 0u), wide);
#pragma unroll
    for (int e = 0; e < kVec; ++e) out[e] = wide[e];
  } else {
    dev::unpack8<kKv>(raw, out);
  }
}

// log2(block_size) for a power-of-two block size (run-time, so the hot loop shifts, never divides).
__device__ __forceinline__ int log2_pow2(int x) {
  int s = 0;
  while ((1 << s) < x) ++s;
  return s;
}

// Physical block of logical token `token` of sequence `seq`: physical_block() of the paged-KV
// view (device/paged_kv.h) with its run-time division by the block size done as a shift.
__device__ __forceinline__ int block_of(const PagedDecodeParams& p, int seq, int token,
                                        int block_shift) {
  return p
      .block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq + (token >> block_shift)];
}

// Byte offset of lane chunk `lane` of the K/V row of (physical block, kv head, slot).
template <DType kKv, int kHeadDim>
__device__ __forceinline__ std::size_t chunk_byte_offset(const PagedDecodeParams& p, int block,
                                                         int kv_head, int slot, int lane) {
  using Tl = Tiling<kKv, kHeadDim>;
  return kv_row_offset(block, kv_head, slot, p.num_kv_heads, p.block_size, kHeadDim) *
             Tl::kElemBytes +
         static_cast<std::size_t>(lane) * Tl::kChunkBytes;
}

// Shared-memory pieces every rung uses, in floats (sizes are multiples of 4 floats so every
// piece stays 16-byte aligned).
template <DType kKv, int kHeadDim, int kGroupCap>
struct ComputeSmem {
  using Tl = Tiling<kKv, kHeadDim>;
  // [kGroupCap][T][C + 4] partial dot products of one tile
  static constexpr int kPartialFloats = kGroupCap * Tl::kTileTokens * Tl::kPartialStride;
  // [kGroupCap][T] scores of one tile (log2 domain)
  static constexpr int kScoreFloats = kGroupCap * Tl::kTileTokens;
  // [R][kGroupCap][2] per-row (max, sum), then [kGroupCap][2] merged (max, sum)
  static constexpr int kStatFloats = (Tl::kRows + 1) * kGroupCap * 2;
  // [kGroupCap][R][d] weighted per-row accumulators for the final merge (aliases other pieces)
  static constexpr int kMergeFloats = kGroupCap * Tl::kRows * kHeadDim;
  static_assert(kStatFloats % 4 == 0 && kScoreFloats % 4 == 0, "16-byte aligned pieces");
};

// Where the block's result goes: the attention output (gqa, pipelined) or one split's
// normalized partial output and log2-sum-exp2 (split_kv).
struct OutputTarget {
  bool to_workspace = false;
  int split = 0;
};

// The per-thread state of one thread block over one (sequence, KV head): q and the running
// softmax of this thread's row for each head of the group, in registers.
template <DType kKv, int kHeadDim, int kGroupCap>
struct BlockDecoder {
  using Tl = Tiling<kKv, kHeadDim>;
  static_assert(kGroupCap >= 1 && kGroupCap <= kMaxGroup, "group cap 1..8");

  int lane;   // c: dims [8c, 8c + 8)
  int row;    // r
  int group;  // run-time Hq / Hkv (<= kGroupCap)
  float q[kGroupCap][kVec];
  float acc[kGroupCap][kVec];  // Σ exp2(s - m) v over this row's tokens
  float m[kGroupCap];          // running max (log2 domain), -inf until a token is seen
  float l[kGroupCap];          // Σ exp2(s - m)

  // Loads this thread's q slice of every head of the group: [batch][Hq][d] f16/bf16.
  __device__ __forceinline__ void init(const PagedDecodeParams& p, int seq, int kv_head) {
    lane = static_cast<int>(threadIdx.x) % Tl::kLanes;
    row = static_cast<int>(threadIdx.x) / Tl::kLanes;
    group = p.num_q_heads / p.num_kv_heads;
    const auto* q_base = static_cast<const unsigned char*>(p.q);
#pragma unroll
    for (int h = 0; h < kGroupCap; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        acc[h][e] = 0.f;
        q[h][e] = 0.f;
      }
      if (h < group) {
        const std::size_t q_row = static_cast<std::size_t>(seq) * p.num_q_heads +
                                  static_cast<std::size_t>(kv_head) * group + h;
        const uint4 raw = dev::ld_global_nc_v4(q_base + (q_row * kHeadDim + lane * kVec) * 2);
        if (p.q_dtype == DType::bf16) {
          dev::unpack8<DType::bf16>(raw, q[h]);
        } else {
          dev::unpack8<DType::f16>(raw, q[h]);
        }
      }
    }
  }

  // Pass `pass` of a tile: this thread's partial q.k over its 8 dims, one per head.
  __device__ __forceinline__ void partial_scores(int pass, const RawChunk<kKv>& k_raw,
                                                 float* partials) const {
    float k[kVec];
    unpack_chunk<kKv>(k_raw, k);
    const int t = pass * Tl::kRows + row;
#pragma unroll
    for (int h = 0; h < kGroupCap; ++h) {
      if (h < group) {
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < kVec; ++e) s = fmaf(q[h][e], k[e], s);
        partials[(h * Tl::kTileTokens + t) * Tl::kPartialStride + lane] = s;
      }
    }
  }

  // After a barrier: sums the C partials of each (head, token) pair into a score in the log2
  // domain; tokens at or past `valid` (tile-relative) score -inf. Block-wide, thread i takes
  // pairs i, i + 128, ...
  __device__ __forceinline__ void reduce_scores(int valid, float score_scale_log2,
                                                const float* partials, float* scores) const {
    const int pairs = group * Tl::kTileTokens;
    for (int i = static_cast<int>(threadIdx.x); i < pairs; i += kThreads) {
      const float* part = partials + i * Tl::kPartialStride;
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < Tl::kLanes; c += 4) {
        const float4 v = *reinterpret_cast<const float4*>(part + c);
        s += (v.x + v.y) + (v.z + v.w);
      }
      const int t = i % Tl::kTileTokens;
      scores[i] = t < valid ? s * score_scale_log2 : -INFINITY;
    }
  }

  // After a barrier: raises each head's running max to cover this row's tokens of the tile and
  // rescales the accumulator once per tile (not once per token).
  __device__ __forceinline__ void rescale(const float* scores) {
#pragma unroll
    for (int h = 0; h < kGroupCap; ++h) {
      if (h < group) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int pass = 0; pass < kPasses; ++pass) {
          tile_max = fmaxf(tile_max, scores[h * Tl::kTileTokens + pass * Tl::kRows + row]);
        }
        if (tile_max > m[h]) {  // false when all of this row's tokens are masked
          const float factor = dev::fast_exp2(m[h] - tile_max);  // m = -inf -> 0
          l[h] *= factor;
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[h][e] *= factor;
          m[h] = tile_max;
        }
      }
    }
  }

  // Pass `pass`: acc += exp2(s - m) * v for every head.
  __device__ __forceinline__ void accumulate(int pass, const RawChunk<kKv>& v_raw,
                                             const float* scores) {
    float v[kVec];
    unpack_chunk<kKv>(v_raw, v);
    const int t = pass * Tl::kRows + row;
#pragma unroll
    for (int h = 0; h < kGroupCap; ++h) {
      if (h < group) {
        // s = -inf (masked) gives exactly 0; m = -inf only if s is -inf too, so guard it.
        const float s = scores[h * Tl::kTileTokens + t];
        const float w = s == -INFINITY ? 0.f : dev::fast_exp2(s - m[h]);
        l[h] += w;
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[h][e] = fmaf(w, v[e], acc[h][e]);
      }
    }
  }

  // Merges the R rows' softmax states and writes the block's result. `stats` and `merge` are
  // shared memory (ComputeSmem sizes). `merge` may alias what the main loop used (scores,
  // partials, stages): it is written only after this function's first two barriers, when every
  // thread is done with the main loop (the caller must have no cp.async left in flight). Three
  // barriers.
  //   gqa / pipelined: out[seq][kv_head * group + h][:] = v_scale * acc / sum
  //   split_kv:        partial_out[seq][qh][split][:] = v_scale * acc / sum,
  //                    partial_lse[seq][qh][split] = max + log2(sum) (-inf for an empty split)
  __device__ __forceinline__ void finish(const PagedDecodeParams& p, int seq, int kv_head,
                                         OutputTarget target, float* stats, float* merge) {
    const int tid = static_cast<int>(threadIdx.x);
    float* row_stats = stats;                                // [R][kGroupCap][2]
    float* block_stats = stats + Tl::kRows * kGroupCap * 2;  // [kGroupCap][2]
    if (lane == 0) {
#pragma unroll
      for (int h = 0; h < kGroupCap; ++h) {
        row_stats[(row * kGroupCap + h) * 2] = m[h];
        row_stats[(row * kGroupCap + h) * 2 + 1] = l[h];
      }
    }
    __syncthreads();
    if (tid < group) {
      // The rows' states merged with SoftmaxState::merge, starting from a state that already
      // holds the block max M (and no mass), so no row raises the max: the block's factor is 1
      // at every step and the sum is the two-pass Σ_r l_r 2^(m_r - M), whatever the rows' order.
      // Rows without tokens (m_r = -inf) add 0. The block state is merged into the row's (then
      // taken over) so the sum is l_r * 2^(m_r - M) + sum: what nvcc fuses into one FMA.
      float mx = -INFINITY;
      for (int r = 0; r < Tl::kRows; ++r) mx = fmaxf(mx, row_stats[(r * kGroupCap + tid) * 2]);
      SoftmaxState<float> block;
      block.max = mx;
      for (int r = 0; r < Tl::kRows; ++r) {
        SoftmaxState<float> row_state;
        row_state.max = row_stats[(r * kGroupCap + tid) * 2];
        row_state.sum = row_stats[(r * kGroupCap + tid) * 2 + 1];
        float row_factor = 0.f;
        float block_factor = 0.f;
        row_state.merge(block, row_factor, block_factor, dev::FastExp2{});
        block = row_state;
      }
      block_stats[tid * 2] = block.max;
      block_stats[tid * 2 + 1] = block.sum;
    }
    __syncthreads();
    // Row weights: exp2(m_r - M) * v_scale / L, 0 for rows (or whole splits) without tokens.
#pragma unroll
    for (int h = 0; h < kGroupCap; ++h) {
      if (h < group) {
        const float mx = block_stats[h * 2];
        const float sum = block_stats[h * 2 + 1];
        const float w =
            (m[h] == -INFINITY || sum == 0.f) ? 0.f : dev::fast_exp2(m[h] - mx) * p.v_scale / sum;
        float* dst = merge + (h * Tl::kRows + row) * kHeadDim + lane * kVec;  // [h][r][d]
        *reinterpret_cast<float4*>(dst) =
            make_float4(acc[h][0] * w, acc[h][1] * w, acc[h][2] * w, acc[h][3] * w);
        *reinterpret_cast<float4*>(dst + 4) =
            make_float4(acc[h][4] * w, acc[h][5] * w, acc[h][6] * w, acc[h][7] * w);
      }
    }
    __syncthreads();
    const std::size_t head0 = static_cast<std::size_t>(seq) * p.num_q_heads +
                              static_cast<std::size_t>(kv_head) * group;  // first q row
    for (int o = tid; o < group * kHeadDim; o += kThreads) {
      const int h = o / kHeadDim;
      const int d = o % kHeadDim;
      float value = 0.f;
#pragma unroll
      for (int r = 0; r < Tl::kRows; ++r) value += merge[(h * Tl::kRows + r) * kHeadDim + d];
      if (target.to_workspace) {
        // [batch][Hq][num_splits][d]
        p.partial_out[((head0 + h) * p.num_splits + target.split) * kHeadDim + d] = value;
      } else {
        dev::store_out(p.out, p.q_dtype, static_cast<int>((head0 + h) * kHeadDim + d), value);
      }
    }
    if (target.to_workspace && tid < group) {
      SoftmaxState<float> block;
      block.max = block_stats[tid * 2];
      block.sum = block_stats[tid * 2 + 1];
      // [batch][Hq][num_splits]
      p.partial_lse[(head0 + tid) * p.num_splits + target.split] =
          block.sum > 0.f ? block.log2_sum_exp2() : -INFINITY;
    }
  }
};

// The score scale in the log2 domain: softmax_scale * k_scale * log2(e) (k_scale folded here,
// never applied per element).
__device__ __forceinline__ float score_scale_log2(const PagedDecodeParams& p) {
  return p.softmax_scale * p.k_scale * kLog2e;
}

// The group caps the rungs are compiled for: a block's q and accumulator registers are sized by
// the cap, so a group-4 model does not pay for group-8 registers. Groups 1, 2 -> cap 2.
template <typename Fn>
inline auto dispatch_group_cap(int group, Fn&& fn) {
  if (group <= 2) return fn(std::integral_constant<int, 2>{});
  if (group <= 4) return fn(std::integral_constant<int, 4>{});
  return fn(std::integral_constant<int, 8>{});
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode::decode
