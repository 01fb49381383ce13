// `decodebench sweep --dump DIR`: one point written as NumPy files plus meta.json, so anyone can
// recompute it with numpy (README.md "Commands"):
//   q.npy             float32 [B, Hq, d]                     q values as stored (f16/bf16 decoded)
//   k_cache.npy       float32 [num_blocks, Hkv, P, d]        stored values, unscaled (x k_scale =
//   real) v_cache.npy       float32 [num_blocks, Hkv, P, d]        stored values, unscaled (x
//   v_scale = real) block_tables.npy  int32   [B, max_blocks_per_seq]        unused entries -1
//   context_lens.npy  int32   [B]
//   out.npy           float32 [B, Hq, d]                     the kernel's output
//   ref.npy           float32 [B, Hq, d]                     the CPU reference's output
//   meta.json         kernel, backend, model, num_q_heads, num_kv_heads, head_dim, block_size,
//                     kv_dtype, q_dtype, softmax_scale, k_scale, v_scale, hit_rate,
//                     hit_rate_actual, prefix_groups, seed (+ batch, status, context)
#pragma once

#include <filesystem>

#include "backends/backend.h"
#include "harness/sweep_config.h"
#include "results/point_result.h"

namespace decodebench::cli {

// Rebuilds `point`'s workload (deterministic from its seed), runs the kernel the sweep used
// (`result.kernel`) on `backend` and the reference, and writes the files above into `dir`
// (created if needed); meta.json goes last, atomically, so its presence means the set is whole.
// Throws InputError when the point was skipped (nothing ran to dump), RuntimeFailure for I/O
// or device errors.
void write_dump(const std::filesystem::path& dir, Backend& backend, const SweepPoint& point,
                const PointResult& result);

}  // namespace decodebench::cli
