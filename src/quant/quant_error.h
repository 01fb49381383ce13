// What a KV format costs in accuracy (`decodebench quant-error`): one decode step of one
// attention layer, in the `--dump` layout, run in double precision over the unquantized cache and
// over the cache each format reads back, and compared.
//
// Measures, per (format, layer); "overall" pools every layer's sums:
//   k_rel_rms, v_rel_rms   ||X^ - X|| / ||X|| over every token some sequence reads
//   out_rel_l2             ||O^ - O|| / ||O|| over every (sequence, query head, channel)
//   out_max_rel            max |O^ - O| / max |O|
//   attn_kl_mean, _max     KL(p || p^) in nats of each (sequence, query head)'s attention weights
//                          over its context, p on the unquantized cache
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "quant/kv_quant.h"

namespace decodebench::quant {

// One layer's decode step, as `sweep --dump` and scripts/kv_dump.py write it.
struct AttentionCase {
  std::string name;  // "layer_07", the directory's name, or the built-in data's
  PoolShape shape;   // of k and v
  int num_q_heads = 0;
  float softmax_scale = 0.f;
  std::vector<float> q;  // [B][Hq][d]
  std::vector<float> k;  // [num_blocks][Hkv][P][d], real values (any stored scale applied)
  std::vector<float> v;
  std::vector<std::int32_t> block_tables;  // [B][max_blocks_per_seq]
  std::int64_t max_blocks_per_seq = 0;
  std::vector<std::int32_t> context_lens;  // [B]
  std::int64_t batch() const { return static_cast<std::int64_t>(context_lens.size()); }
};

// The files of one dump as bytes: what load_cases reads from a directory, so that the reader
// can be fed without a disk (tests/fuzz/fuzz_dump).
struct DumpFiles {
  std::string dir;   // the directory, as messages name the files: "DIR/q.npy"
  std::string name;  // the case's name
  std::string meta;  // meta.json's text
  std::string q, k_cache, v_cache, block_tables, context_lens;  // .npy bytes
};
// Throws InputError naming the file and what is wrong, before any value is used: meta.json's
// counts (num_q_heads, num_kv_heads, head_dim, block_size >= 1; batch, num_blocks and
// max_blocks_per_seq where given) against the arrays' shapes, scales finite and > 0, an empty
// pool or batch (nothing to measure), a NaN or infinity in q, K or V (the file and the index), a
// context length or table entry outside the pool.
AttentionCase parse_case(const DumpFiles& files);

// `dir` holding one dump (meta.json, q.npy, k_cache.npy, ...) or subdirectories that each hold
// one (scripts/kv_dump.py's layer_00/ ...), in name order. A directory holding a dump's arrays
// but no meta.json is a dump that did not finish: InputError. A subdirectory with none of them is
// not a layer: its name goes to `skipped` (the CLI says so on stderr).
std::vector<AttentionCase> load_cases(const std::filesystem::path& dir,
                                      std::vector<std::string>* skipped = nullptr);

// Built-in data with the heads of `model_q_heads`/`kv_heads`/`head_dim`: `tokens` tokens in
// blocks of `block_size`, 16 queries spread over the second half (kv_dump.py's choice).
//   gaussian  q, K and V independent N(0, 1)
//   outliers  V and q as above; K with kOutlierChannels channels per KV head offset and widened
//             (mean 6, sd 4) the way post-RoPE keys of Llama-style models are
inline constexpr int kOutlierChannels = 4;
std::vector<AttentionCase> builtin_cases(std::string_view kind, int num_q_heads, int num_kv_heads,
                                         int head_dim, int tokens, int block_size,
                                         std::uint64_t seed = 0);
// "gaussian", "outliers": the names builtin_cases takes.
bool is_builtin_data(std::string_view name);

// Sums, so that layers pool exactly.
struct ErrorSums {
  double k_err2 = 0, k_ref2 = 0;
  double v_err2 = 0, v_ref2 = 0;
  double out_err2 = 0, out_ref2 = 0;
  double out_max_err = 0, out_max_ref = 0;
  double kl_sum = 0, kl_max = 0;
  std::int64_t rows = 0;  // (sequence, query head) pairs
  void add(const ErrorSums& o);
};

struct ErrorMeasures {
  double k_rel_rms = 0, v_rel_rms = 0;
  double out_rel_l2 = 0, out_max_rel = 0;
  double attn_kl_mean = 0, attn_kl_max = 0;
};
ErrorMeasures measures(const ErrorSums& s);

// `format` applied to c's K and V (quantize, then dequantize: the values a kernel attends over)
// and the step compared with the unquantized one.
ErrorSums measure_format(const AttentionCase& c, KvFormat format);

}  // namespace decodebench::quant
