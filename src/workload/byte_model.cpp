#include "workload/byte_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "device/paged_kv.h"
#include "quant/kv_quant.h"

namespace decodebench {

double kv_bytes_per_token_head(DType kv_dtype, int head_dim, int block_size) {
  return quant::bytes_per_token_head(kv_dtype, quant::KvTensor::k, head_dim, block_size) +
         quant::bytes_per_token_head(kv_dtype, quant::KvTensor::v, head_dim, block_size);
}

double kv_bytes_per_token(const ModelShape& m, DType kv_dtype, int block_size) {
  if (m.is_mla())
    return quant::bytes_per_token_head(kv_dtype, quant::KvTensor::k, m.head_dim, block_size);
  return m.num_kv_heads * kv_bytes_per_token_head(kv_dtype, m.head_dim, block_size);
}

WindowReads window_reads(const PagedLayout& layout, int block_size, int window) {
  WindowReads r;
  // Slots read of each physical block (at most block_size), over every row that reads it.
  std::vector<int> max_slots(static_cast<std::size_t>(layout.num_blocks), 0);
  for (std::size_t b = 0; b < layout.context_lens.size(); ++b) {
    const int len = layout.context_lens[b];
    const int first = window_first_block(len, window, block_size);
    const int blocks = (len + block_size - 1) / block_size;
    r.table_entries += blocks - first;
    r.tokens += len - std::int64_t{first} * block_size;
    r.attended += len - window_first_token(len, window);
    for (int j = first; j < blocks; ++j) {
      const std::int32_t block =
          layout.block_tables[b * static_cast<std::size_t>(layout.max_blocks_per_seq) + j];
      if (block < 0 || block >= layout.num_blocks) continue;  // a malformed table reads nothing
      // A block is read from slot 0: a shared block is one physical stretch for every reader.
      max_slots[static_cast<std::size_t>(block)] = std::max(
          max_slots[static_cast<std::size_t>(block)], std::min(block_size, len - j * block_size));
    }
  }
  r.unique_tokens = std::accumulate(max_slots.begin(), max_slots.end(), std::int64_t{0});
  if (window <= 0) {  // what the layout was built with (fill_read_stats): the same sums
    r.tokens = layout.total_tokens;
    r.unique_tokens = layout.unique_tokens;
  }
  return r;
}

ByteModel byte_model(const WorkloadSpec& spec, const PagedLayout& layout, int window) {
  const ModelShape& m = spec.model;
  const auto rows = static_cast<std::int64_t>(layout.context_lens.size());
  const auto q_size = static_cast<std::int64_t>(dtype_size(spec.q_dtype));
  const WindowReads reads = window_reads(layout, spec.block_size, window);

  ByteModel b;
  b.kv_bytes_per_token = kv_bytes_per_token(m, spec.kv_dtype, spec.block_size);
  b.kv_logical = std::llround(static_cast<double>(reads.tokens) * b.kv_bytes_per_token);
  b.kv_unique = std::llround(static_cast<double>(reads.unique_tokens) * b.kv_bytes_per_token);
  b.q = rows * m.num_q_heads * m.head_dim * q_size;
  b.out = rows * m.num_q_heads * m.value_dim() * q_size;
  b.block_table = reads.table_entries * std::int64_t{sizeof(std::int32_t)};
  b.context_lens = rows * std::int64_t{sizeof(std::int32_t)};
  b.sinks = m.sinks ? std::int64_t{m.num_q_heads} * std::int64_t{sizeof(float)} : 0;
  b.min = b.kv_unique + b.q + b.out + b.block_table + b.context_lens + b.sinks;
  b.flops =
      2.0 * m.num_q_heads * static_cast<double>(reads.attended) * (m.head_dim + m.value_dim());
  b.arithmetic_intensity = b.min > 0 ? b.flops / static_cast<double>(b.min) : 0.0;
  return b;
}

ByteModel byte_model(const WorkloadSpec& spec, const PagedLayout& layout) {
  const std::vector<ModelShape::LayerClass> classes = spec.model.layer_classes();
  if (classes.size() <= 1) {
    return byte_model(spec, layout, classes.empty() ? 0 : classes[0].window);
  }
  double kv_logical = 0, kv_unique = 0, table = 0, flops = 0, layers = 0;
  ByteModel mean;
  for (const ModelShape::LayerClass& c : classes) {
    const ByteModel one = byte_model(spec, layout, c.window);
    kv_logical += c.layers * static_cast<double>(one.kv_logical);
    kv_unique += c.layers * static_cast<double>(one.kv_unique);
    table += c.layers * static_cast<double>(one.block_table);
    flops += c.layers * one.flops;
    layers += c.layers;
    mean = one;  // the fields every layer shares: q, out, lens, sinks, bytes per token
  }
  mean.kv_logical = std::llround(kv_logical / layers);
  mean.kv_unique = std::llround(kv_unique / layers);
  mean.block_table = std::llround(table / layers);
  mean.flops = flops / layers;
  mean.min = mean.kv_unique + mean.q + mean.out + mean.block_table + mean.context_lens + mean.sinks;
  mean.arithmetic_intensity = mean.min > 0 ? mean.flops / static_cast<double>(mean.min) : 0.0;
  return mean;
}

KvHeld kv_held(const ModelShape& m, int context, int block_size, double bytes_per_token_layer) {
  KvHeld h;
  const double block_bytes = bytes_per_token_layer * block_size;
  const int windowed = m.windowed_layers();
  h.full_bytes_per_block = (m.num_layers - windowed) * block_bytes;
  if (windowed > 0) {
    const int blocks = (context + block_size - 1) / block_size;
    h.windowed_bytes_per_seq =
        windowed * (blocks - window_first_block(context, m.sliding_window, block_size)) *
        block_bytes;
  }
  return h;
}

double kv_bytes_held(const ModelShape& m, int context, int block_size,
                     double bytes_per_token_layer) {
  const KvHeld h = kv_held(m, context, block_size, bytes_per_token_layer);
  return h.full_bytes_per_block * ((context + block_size - 1) / block_size) +
         h.windowed_bytes_per_seq;
}

}  // namespace decodebench
