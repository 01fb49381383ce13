// Rung 0 of the paged-decode ladder: `naive`, the baseline every other rung is measured against.
//
// One thread block per (sequence, query head): grid = (Hq, batch), 128 threads. The block walks
// its sequence's context in chunks of kChunk tokens:
//   1. scores: thread t computes the full q.k dot product of token t of the chunk (16-byte loads
//      of its K row; q, pre-scaled into the log2 domain, sits in shared memory) -> s[kChunk];
//   2. online softmax: every thread scans the chunk's scores (a shared-memory broadcast) for the
//      max and the sum of exp2, so all threads hold the same (max, sum) without a reduction;
//   3. P.V: the head dimension is split into 16-byte lanes (C = d / elements-per-16-bytes), the
//      128 threads form R = 128 / C rows, and row r accumulates tokens r, r + R, ... of the
//      chunk for its lane's elements (the V loads of a row are coalesced);
// then the R partial accumulators are summed through shared memory, divided by the softmax sum
// and scaled by v_scale. Scales are folded once: softmax_scale * k_scale * log2(e) into q, and
// v_scale into the final normalization, never per element.
//
// Its documented weakness: with GQA, each KV head is read from memory once per query head
// (group times), and the score loads are strided (each thread reads a different row). Bytes
// moved ~ group x kv_bytes_logical; the `gqa` rung fixes the first, `pipelined` the latency.
#pragma once

#include <cmath>
#include <cstdint>

#include "device/device.h"
#include "device/math.h"
#include "device/paged_kv.h"
#include "device/softmax_state.h"
#include "kernels.h"
#include "paged_decode/launchers.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {
namespace naive_detail {

inline constexpr int kThreads = 128;
inline constexpr int kChunk = 256;  // tokens whose scores sit in shared memory at once

template <DType kKv, int kHeadDim>
struct Layout {
  static_assert(kKv == DType::f16 || kKv == DType::bf16 || is_fp8(kKv),
                "naive takes f16, bf16, fp8_e4m3 or fp8_e5m2 KV");
  static constexpr int kElemBytes = static_cast<int>(dtype_size(kKv));
  static constexpr int kVec = 16 / kElemBytes;     // elements per 16-byte load
  static constexpr int kLanes = kHeadDim / kVec;   // C: 16-byte lanes per row
  static constexpr int kRows = kThreads / kLanes;  // R: token rows in the P.V step
  static_assert(kHeadDim % kVec == 0, "a row is a whole number of 16-byte vectors");
  static_assert(kLanes <= kThreads && kThreads % kLanes == 0, "lanes must tile the block");
};

// 16 raw bytes -> kVec floats (exact).
template <DType kKv>
__device__ __forceinline__ void unpack_vec(uint4 raw, float (&out)[16 / dtype_size(kKv)]) {
  if constexpr (is_fp8(kKv)) {
    dev::unpack16<kKv>(raw, out);
  } else {
    dev::unpack8<kKv>(raw, out);
  }
}

template <DType kKv, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    naive_kernel(const __grid_constant__ PagedDecodeParams p) {
  using L = Layout<kKv, kHeadDim>;
  const int q_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int kv_head = q_head / (p.num_q_heads / p.num_kv_heads);
  const int context = p.context_lens[seq];
  const auto* k_bytes = static_cast<const unsigned char*>(p.k_cache);  // [num_blocks][Hkv][P][d]
  const auto* v_bytes = static_cast<const unsigned char*>(p.v_cache);  // [num_blocks][Hkv][P][d]

  DECODEBENCH_SHARED(float, s_q, kHeadDim);              // q * scale, log2 domain
  DECODEBENCH_SHARED(float, s_scores, kChunk);           // this chunk's scores
  DECODEBENCH_SHARED(float, s_acc, L::kRows* kHeadDim);  // [R][d] partial P.V per row

  // q row of (seq, q_head): [batch][Hq][d]. softmax_scale and k_scale fold into q once.
  const float q_scale = p.softmax_scale * p.k_scale * kLog2e;
  const std::size_t q_row = (static_cast<std::size_t>(seq) * p.num_q_heads + q_head) * kHeadDim;
  for (int i = tid; i < kHeadDim; i += kThreads) {
    s_q[i] = dev::load_q<float>(p.q, p.q_dtype, static_cast<int>(q_row) + i) * q_scale;
  }
  __syncthreads();

  const int lane = tid % L::kLanes;  // owns elements [lane * kVec, lane * kVec + kVec) in P.V
  const int row = tid / L::kLanes;
  float acc[L::kVec];
  for (float& a : acc) a = 0.f;
  SoftmaxState<float> state;  // identical in every thread

  for (int chunk_start = 0; chunk_start < context; chunk_start += kChunk) {
    const int chunk_len = context - chunk_start < kChunk ? context - chunk_start : kChunk;

    // 1. Scores: one thread per token, the whole dot product.
    for (int j = tid; j < chunk_len; j += kThreads) {
      const std::size_t row_offset =
          token_row_offset(p.block_tables, p.max_blocks_per_seq, seq, chunk_start + j, kv_head,
                           p.num_kv_heads, p.block_size, kHeadDim);
      const unsigned char* k_row = k_bytes + row_offset * L::kElemBytes;
      float dot = 0.f;
      for (int v = 0; v < L::kLanes; ++v) {
        float k[L::kVec];
        unpack_vec<kKv>(dev::ld_global_nc_v4(k_row + 16 * v), k);
#pragma unroll
        for (int e = 0; e < L::kVec; ++e) dot += s_q[v * L::kVec + e] * k[e];
      }
      s_scores[j] = dot;
    }
    __syncthreads();

    // 2. Online softmax over the chunk, computed redundantly by every thread.
    float chunk_max = -INFINITY;
    for (int j = 0; j < chunk_len; ++j) chunk_max = fmaxf(chunk_max, s_scores[j]);
    const float new_max = fmaxf(state.max, chunk_max);
    const float factor = state.raise_max(new_max);
    float chunk_sum = 0.f;
    for (int j = 0; j < chunk_len; ++j) chunk_sum += dev::fast_exp2(s_scores[j] - new_max);
    state.sum += chunk_sum;

    // 3. P.V: row `row` takes tokens row, row + R, ... of the chunk.
#pragma unroll
    for (int e = 0; e < L::kVec; ++e) acc[e] *= factor;
    for (int j = row; j < chunk_len; j += L::kRows) {
      const float weight = dev::fast_exp2(s_scores[j] - new_max);
      const std::size_t row_offset =
          token_row_offset(p.block_tables, p.max_blocks_per_seq, seq, chunk_start + j, kv_head,
                           p.num_kv_heads, p.block_size, kHeadDim);
      float v[L::kVec];
      unpack_vec<kKv>(dev::ld_global_nc_v4(v_bytes + row_offset * L::kElemBytes + 16 * lane), v);
#pragma unroll
      for (int e = 0; e < L::kVec; ++e) acc[e] += weight * v[e];
    }
    __syncthreads();  // s_scores is rewritten by the next chunk
  }

  // Sum the R rows' partial accumulators, normalize, fold v_scale, store.
#pragma unroll
  for (int e = 0; e < L::kVec; ++e) s_acc[row * kHeadDim + lane * L::kVec + e] = acc[e];
  __syncthreads();
  const float out_scale = p.v_scale / state.sum;
  for (int i = tid; i < kHeadDim; i += kThreads) {
    float total = 0.f;
    for (int r = 0; r < L::kRows; ++r) total += s_acc[r * kHeadDim + i];
    dev::store_out(p.out, p.q_dtype, static_cast<int>(q_row) + i, total * out_scale);
  }
}

}  // namespace naive_detail

// Launches `naive` for one compiled (KV dtype, head_dim). Shapes: see PagedDecodeParams.
// Preconditions: unsupported_reason(kernel, p, CheckScope::launch) is empty (launch_paged_decode
// checks it once; the instance matches p's KV dtype and head_dim by dispatch).
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_naive(const PagedDecodeParams& p, void* stream) {
  const dim3 grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return DECODEBENCH_LAUNCH((naive_detail::naive_kernel<kKvDtype, kHeadDim>), grid,
                            dim3(naive_detail::kThreads), 0, stream, p);
}

// What launch_naive launches for `p` (kernels::launch_shape): no group cap, static shared only.
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_naive(const PagedDecodeParams& p) {
  const dim3 grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return dev::launch_shape_of((naive_detail::naive_kernel<kKvDtype, kHeadDim>), "naive_kernel",
                              /*group_cap=*/0, grid, dim3(naive_detail::kThreads),
                              /*smem_bytes=*/0);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
