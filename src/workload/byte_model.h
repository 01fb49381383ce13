// The byte and FLOP model of one decode step of one layer (docs/design.md "Byte and FLOP model"),
// written once: the harness, the report and `decodebench model` all take their numbers here.
#pragma once

#include <cstdint>

#include "workload/workload.h"

namespace decodebench {

// One layer's reads depend on its window: a windowed layer reads, of each context of L tokens,
// the blocks from the one holding token L - W to the last (the first read whole, its tokens
// before the window masked), so its bytes stop growing once L > W. A model whose layers differ
// (ModelShape::layer_classes) is summed layer by layer; every figure that covers all layers
// (tokens/s, the calculator, cache-sim, replay) is num_layers x the mean layer below.
struct ByteModel {
  // K and V of one token, all KV heads: kv_bytes_per_token (Hkv * 2 * d * sizeof(kv) for a float
  // format; codes, scales and zeros for an integer one, a per-block scale as 1/P of it; MLA's
  // one latent row of d values).
  double kv_bytes_per_token = 0;
  std::int64_t kv_logical =
      0;  // sum_b L_b * kv_bytes_per_token: what a prefix-unaware kernel streams
  std::int64_t kv_unique = 0;  // distinct (block, slot) pairs read * kv_bytes_per_token: compulsory
  std::int64_t q = 0;          // [B][Hq][d] q_dtype, read once
  std::int64_t out = 0;        // [B][Hq][dv] q_dtype, written once (dv = value_dim(): d, or MLA's)
  std::int64_t block_table = 0;   // the entries actually read: sum_b ceil(L_b / P) int32
  std::int64_t context_lens = 0;  // [B] int32
  std::int64_t sinks = 0;         // [Hq] fp32 sink logits, for a model with sinks
  std::int64_t min = 0;           // kv_unique + q + out + block_table + context_lens + sinks
  // sum_b 2 * Hq * A_b * (d + dv) (QK^T and PV, a multiply-add = 2 FLOP; dv = d but for MLA's
  // 512-wide values under 576-wide keys), A_b the tokens attended:
  // L_b, or min(L_b, W) in a windowed layer (the masked tokens of its first block are not useful)
  double flops = 0;
  double arithmetic_intensity = 0;  // flops / min, FLOP per byte
};

// One layer attending with `window` (0: full attention), over the rows of `layout` (the whole
// batch, or a subset's rows). Per-tensor fp8 scales add no bytes per token (they are two floats
// per step, not counted); the integer formats' scales and zeros are counted with their codes.
ByteModel byte_model(const WorkloadSpec& spec, const PagedLayout& layout, int window);
// The model's mean layer: each field the sum over its num_layers layers (each with its own
// window) divided by num_layers, rounded to a byte; for a model whose layers are alike, exactly
// that layer's byte_model. So num_layers x any field is the per-layer sum.
ByteModel byte_model(const WorkloadSpec& spec, const PagedLayout& layout);

// What a layer with `window` reads of the rows of `layout`: tokens (sum over rows of the tokens
// in the blocks it walks, the first block whole), distinct (block, slot) pairs among them, block
// table entries, and the tokens it attends to. window 0: the whole contexts (PagedLayout's own
// total_tokens and unique_tokens).
struct WindowReads {
  std::int64_t tokens = 0;
  std::int64_t unique_tokens = 0;
  std::int64_t table_entries = 0;
  std::int64_t attended = 0;
};
WindowReads window_reads(const PagedLayout& layout, int block_size, int window);

// KV bytes one sequence of `context` tokens holds in memory over every layer: a full layer all
// its blocks, a windowed layer only the blocks from the one holding the window's first token
// (older ones are never read again and can be freed), `bytes_per_token_layer` per token slot.
double kv_bytes_held(const ModelShape& m, int context, int block_size,
                     double bytes_per_token_layer);
// The same split for memory planning: what the full layers hold per block of context (grows with
// the context, shared prefix blocks counted once) and what the windowed layers hold per sequence
// (bounded by the window).
struct KvHeld {
  double full_bytes_per_block = 0;    // full layers x block_size x bytes_per_token_layer
  double windowed_bytes_per_seq = 0;  // windowed layers' held blocks, at `context`
};
KvHeld kv_held(const ModelShape& m, int context, int block_size, double bytes_per_token_layer);

}  // namespace decodebench
