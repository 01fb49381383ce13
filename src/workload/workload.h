// The workload of one sweep point: a model's attention shape, a paged KV cache with prefix
// sharing, and seeded random inputs (docs/design.md "Workload and paged layout").
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels.h"  // DType, PagedDecodeParams
#include "workload/context_spec.h"

namespace decodebench {

struct ModelShape {
  std::string name;      // preset name ("llama-3.1-8b") or the config's "name"
  int num_q_heads = 0;   // Hq
  int num_kv_heads = 0;  // Hkv
  int head_dim = 0;      // d
  int num_layers = 0;    // tokens/s of the model, the calculator's all-layer sums
  std::string source;    // where the shape comes from (the preset's "source"), may be empty
  // The rest of one layer and the model, for layer scope and the calculator's weights
  // (src/workload/layer_model.h). 0: not given (a model file may describe attention only; the
  // presets give all of them, from the published configs).
  int hidden_size = 0;
  int intermediate_size = 0;  // the MLP's (gate and up each project hidden -> intermediate)
  int vocab_size = 0;
  std::int64_t num_params = 0;       // as published: every weight, embeddings included
  bool tie_word_embeddings = false;  // the LM head is the embedding matrix (one copy in memory)
  // Mixture of experts (the config's num_local_experts, num_experts_per_tok): every expert is
  // a parameter, num_experts_per_tok of them run per token. 0: a dense MLP.
  int num_experts = 0;
  int experts_per_token = 0;
  // DeepSeek's MoE (n_shared_experts, first_k_dense_replace): shared experts every token runs
  // beside the routed ones, and the first layers dense with an MLP of dense_intermediate_size
  // (intermediate_size is then the routed experts'). 0: none.
  int shared_experts = 0;
  int first_dense_layers = 0;
  int dense_intermediate_size = 0;
  // The attention's variants (docs/design.md "Attention patterns"). A windowed layer attends to
  // the last sliding_window tokens only; which layers are windowed: of every `window_every`
  // consecutive layers from layer 0, the first `window_local` (1 of 1: every layer, 1 of 2:
  // the even layers, 5 of 6: all but every sixth). 0: no window anywhere.
  int sliding_window = 0;
  int window_local = 0;
  int window_every = 0;
  bool sinks = false;                 // a learned logit per query head joins the denominator
  double attn_logit_softcapping = 0;  // scores become cap * tanh(score / cap); 0: none
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2; docs/design.md "MLA"): every layer
  // caches one latent of kv_lora_rank values plus a qk_rope_head_dim RoPE key per token, shared
  // by all query heads. With the up-projections absorbed into q and the output, decode is MQA:
  // num_kv_heads 1, keys of head_dim = kv_lora_rank + qk_rope_head_dim values, and values the
  // first kv_lora_rank of them (value_dim()). qk_nope_head_dim and v_head_dim are the per-head
  // widths before absorption (they set the softmax scale and the layer's projections). 0: not
  // MLA.
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  int q_lora_rank = 0;  // q through a rank-q_lora_rank bottleneck (q_a_proj, q_b_proj); 0: none
  // The model's own softmax scale: MLA's 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim) times
  // YaRN's mscale squared (the loader computes it from the config's rope_scaling), or Gemma's
  // 1 / sqrt(query_pre_attn_scalar); 0: 1 / sqrt(head_dim).
  double attention_scale = 0;
  bool is_mla() const { return kv_lora_rank > 0; }
  // Width of a value row and of the output per head: kv_lora_rank for MLA, else head_dim.
  int value_dim() const { return is_mla() ? kv_lora_rank : head_dim; }
  // The cache's tensors per token and KV head: K and V, or MLA's one latent (K; V is its prefix).
  int kv_tensors() const { return is_mla() ? 1 : 2; }
  // What every kernel multiplies q.k by: attention_scale, or 1 / sqrt(head_dim).
  float softmax_scale() const;
  int group() const { return num_kv_heads ? num_q_heads / num_kv_heads : 0; }
  bool has_layer_shape() const {
    return hidden_size > 0 && intermediate_size > 0 && vocab_size > 0;
  }
  bool is_moe() const { return num_experts > 0; }
  // The window of layer `layer` (0-based), 0 for a full-attention layer.
  int layer_window(int layer) const {
    return sliding_window > 0 && window_every > 0 && layer % window_every < window_local
               ? sliding_window
               : 0;
  }
  int windowed_layers() const;  // how many of num_layers have a window
  // The layers grouped by what one of them reads: (window, count), windowed first; one entry
  // when every layer is alike.
  struct LayerClass {
    int window = 0;  // 0: full attention
    int layers = 0;
  };
  std::vector<LayerClass> layer_classes() const;
  // This model with every layer attending as `window` does (0: full): the shape one layer step
  // of that class computes.
  ModelShape with_window(int window) const;
  // The window every layer has (0 for none); throws InputError when the layers differ (a step
  // computes one layer: take each of layer_classes() through with_window()).
  int uniform_window() const;
  // "window 4096 on 21 of 42 layers, sinks, soft-cap 50", "MLA: latent 512 + RoPE 64, 128 heads",
  // "" for plain full attention.
  std::string attention_summary() const;
};

// configs/models/<name>.json, or a path to such a file. Throws InputError naming the file and
// key (unknown keys rejected) or, for an unknown name, listing the presets.
ModelShape load_model(const std::string& name_or_path);
// A model file's text; `file` is what error messages start with.
ModelShape parse_model_json(std::string_view text, const std::string& file);
std::vector<std::string> model_presets();  // names of configs/models/*.json, sorted
// Where configs/ lives: $DECODEBENCH_CONFIGS, else <directory of the running binary>/../configs
// when it exists (a relocated bundle, scripts/gpu-bundle.sh), else the source tree's configs/
// (compiled in).
std::filesystem::path configs_dir();
// configs_dir()'s rule with its inputs given: env is $DECODEBENCH_CONFIGS (null or empty: unset),
// exe the running binary's path (empty: unknown), compiled_in the source tree's configs/.
std::filesystem::path configs_dir_for(const char* env, const std::filesystem::path& exe,
                                      const std::filesystem::path& compiled_in);

// Every field but the seed is set by an axis of the sweep (harness/sweep_axes.h, checked there at
// compile time), so it is part of the workload key.
struct WorkloadSpec {
  ModelShape model;
  int batch = 1;
  ContextSpec context = ContextSpec::fixed(1024);
  double hit_rate = 0;    // requested prefix-hit rate h in [0, 1]
  int prefix_groups = 1;  // G >= 1; sequences join groups round-robin
  DType kv_dtype = DType::f16;
  DType q_dtype = DType::f16;  // also the output dtype; f16 or bf16
  int block_size = 16;         // P, power of two
  std::uint64_t seed = 0;
};

// Throws InputError (listing valid values) for: batch <= 0, context <= 0 or lo > hi, h outside
// [0, 1], prefix_groups < 1, Hq % Hkv != 0, head_dim not in {64, 128, 256}, block size not a
// power of two in [1, 1024], q_dtype not f16/bf16.
void validate(const WorkloadSpec& spec);

// Block placement without any KV data: cheap even for huge points.
struct PagedLayout {
  std::vector<std::int32_t> context_lens;  // [batch]
  std::vector<std::int32_t> block_tables;  // [batch][max_blocks_per_seq], unused entries -1
  int max_blocks_per_seq = 0;
  int num_blocks = 0;         // physical pool size (shared + private blocks)
  int num_shared_blocks = 0;  // distinct physical blocks used by more than one sequence
  std::vector<int> group_of;  // [batch] prefix group of each sequence
  std::vector<int> shared_blocks_of_group;  // [G] number of leading shared blocks
  double hit_rate_actual = 0;               // tokens in shared blocks / sum of context lengths
  std::int64_t total_tokens = 0;            // sum of context lengths (logical)
  std::int64_t unique_tokens = 0;           // distinct (physical block, slot) pairs read
};
PagedLayout build_layout(const WorkloadSpec& spec);
// Fills total_tokens, unique_tokens (distinct (block, slot) pairs read) and num_shared_blocks
// (blocks read by more than one row) from context_lens, block_tables, max_blocks_per_seq and
// num_blocks: for layouts built elsewhere (the replay's steps).
void fill_read_stats(PagedLayout& layout, int block_size);
// The layout of `sequences` (rows of `layout`, each once) alone: the blocks they read packed into
// a compact pool in order of first use, `source_block_ids[i]` the layout's id of pool block i.
// The full batch in order keeps the layout's ids. Throws InputError for no rows, a row out of
// range or one given twice.
PagedLayout pack_layout(const PagedLayout& layout, std::span<const int> sequences, int block_size,
                        std::vector<std::int32_t>& source_block_ids);

// Per-tensor fp8 scales: the generator's values are bounded (|x| <= kGeneratorBound) and the
// scale maps that bound to the format's largest finite value. 1 for non-fp8 dtypes.
float kv_scale_for(DType kv_dtype);

// Every element is a pure function of (seed, tensor, flat index), see
// kernels/device/counter_rng.h, so a device can fill the same cache without a host copy and a
// subset can be rebuilt exactly.
enum class Tensor : std::uint32_t { q = 0, k = 1, v = 2, sinks = 3 };

// A materialized workload. For the full pool, physical block ids are those of the layout; a
// subset workload (some sequences only, for validating huge points) keeps the values of the
// original ids but packs the blocks it needs into a smaller pool and rewrites its block table.
struct Workload {
  WorkloadSpec spec;
  PagedLayout layout;
  std::vector<int> sequences;      // original sequence index of each row (all: 0..B-1)
  std::vector<std::byte> q;        // [rows][Hq][d] q_dtype
  std::vector<std::byte> k_cache;  // [num_blocks][Hkv][P][d] kv_dtype (an int4 format: d / 2)
  // [num_blocks][Hkv][P][d] kv_dtype (an int4 format: d / 2); empty for MLA, whose values are
  // the first value_dim() of each K row (params() points v_cache at k_cache).
  std::vector<std::byte> v_cache;
  // Integer KV formats: the f16 scales and zeros of kernels::PagedDecodeParams (empty otherwise).
  // Their values are the generator's (unscaled) quantized by quant::quantize.
  std::vector<std::uint16_t> k_scales, k_zeros, v_scales, v_zeros;
  // [num_blocks] the original physical id of each pool block (the counter the values come
  // from); the identity for the full pool.
  std::vector<std::int32_t> source_block_ids;
  // [Hq] fp32 sink logits (sink_logits()) when the model has sinks, else empty.
  std::vector<float> sinks;
  float softmax_scale = 0;  // ModelShape::softmax_scale()
  float k_scale = 1, v_scale = 1;
  int rows() const { return static_cast<int>(sequences.size()); }
  // A view for the kernels over this workload's host buffers (out left null).
  kernels::PagedDecodeParams params() const;
};
// A model's sink logits [Hq]: 1 + 2 x counter_normal(seed, Tensor::sinks, h), of the order of a
// context's largest scores (a few hundred N(0, 1) scores reach 3), so a kernel that drops them
// or counts them wrong is off by far more than the tolerance.
std::vector<float> sink_logits(const ModelShape& m, std::uint64_t seed);
// Kernel params carrying the shape (and, with a layout, its host block tables and context
// lengths) but no tensor data: what planners and support checks need before anything is built.
kernels::PagedDecodeParams shape_params(const WorkloadSpec& spec);
kernels::PagedDecodeParams shape_params(const WorkloadSpec& spec, const PagedLayout& layout);

Workload make_workload(const WorkloadSpec& spec);  // all sequences
Workload make_workload(const WorkloadSpec& spec, const PagedLayout& layout,
                       std::span<const int> sequences);  // a subset
// A deterministic subset of at most `max_rows` sequences for validating a huge point: always
// the first and the last sequence (shortest/longest are not known in advance, but ragged
// lengths are random), and evenly spaced ones in between, covering every prefix group when
// max_rows >= G. All sequences when batch <= max_rows.
std::vector<int> validation_subset(const PagedLayout& layout, int max_rows);

// The value generator: element `index` of `tensor` before encoding is
// counter_normal(seed, tensor, index) * inv_scale (inv_scale = 1 / kv_scale_for(kv_dtype) for
// K/V, 1 for Q), exactly what kernels::FillParams asks the device fill to compute.
float inv_scale_for(Tensor tensor, DType kv_dtype);
// The generator's values of `w`'s K or V pool before they were stored in the KV dtype (times
// inv_scale_for: what an fp8 cache divides by its scale), float [num_blocks][Hkv][P][d]: the
// source an integer format was quantized from.
std::vector<float> kv_source_values(const Workload& w, Tensor tensor);
// An integer format's K or V pool as the values its codes stand for (quant::dequantize: what
// the kernels attend over), float [num_blocks][Hkv][P][d]. Throws InputError for a float
// format, or when the scale or zero arrays do not match the format's layout.
std::vector<float> dequantized_kv(const Workload& w, Tensor tensor);
// Bytes one (token, KV head) holds in the cache, K and V together, codes, scales and zeros
// (quant::bytes_per_token_head; a per-block scale counted as 1/P of it).
double kv_bytes_per_token_head(DType kv_dtype, int head_dim, int block_size);
// Bytes one token holds in one layer's cache, every KV head: Hkv x kv_bytes_per_token_head, or
// for MLA the one latent row (head_dim values, no separate V): the byte model's unit.
double kv_bytes_per_token(const ModelShape& m, DType kv_dtype, int block_size);
// Host bytes make_workload(spec) would allocate (to skip points that do not fit).
std::int64_t workload_host_bytes(const WorkloadSpec& spec, const PagedLayout& layout);

}  // namespace decodebench
