// `decodebench sweep --dump DIR`: one point written as NumPy files plus meta.json, so anyone can
// recompute it with numpy (README.md "Commands"):
//   q.npy             float32 [B, Hq, d]                     q values as stored (f16/bf16 decoded)
//   k_cache.npy       float32 [num_blocks, Hkv, P, d]        stored values, unscaled (real =
//                                                            x k_scale)
//   v_cache.npy       float32 [num_blocks, Hkv, P, d]        stored values, unscaled (real =
//                                                            x v_scale)
//   block_tables.npy  int32   [B, max_blocks_per_seq]        unused entries -1
//   context_lens.npy  int32   [B]
//   out.npy           float32 [B, Hq, d]                     the kernel's output
//   ref.npy           float32 [B, Hq, d]                     the CPU reference's output
// An integer KV format (int8, int4, int4_token) writes k_cache/v_cache as the dequantized values
// the kernel attended over (k_scale = v_scale = 1), and beside them k_source/v_source (float32,
// the same shape: the values before quantization), k_codes/v_codes (int8 [.., d], or uint8
// [.., d / 2] two int4 codes a byte), k_scales/v_scales and, for int4, k_zeros/v_zeros (float16,
// the format's scale shape: src/quant/kv_quant.h).
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
