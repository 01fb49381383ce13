#include "workload/byte_model.h"

#include <cmath>

#include "quant/kv_quant.h"

namespace decodebench {

double kv_bytes_per_token_head(DType kv_dtype, int head_dim, int block_size) {
  return quant::bytes_per_token_head(kv_dtype, quant::KvTensor::k, head_dim, block_size) +
         quant::bytes_per_token_head(kv_dtype, quant::KvTensor::v, head_dim, block_size);
}

ByteModel byte_model(const WorkloadSpec& spec, const PagedLayout& layout) {
  const ModelShape& m = spec.model;
  const auto rows = static_cast<std::int64_t>(layout.context_lens.size());
  const auto q_size = static_cast<std::int64_t>(dtype_size(spec.q_dtype));
  std::int64_t table_entries = 0;
  for (std::int32_t len : layout.context_lens)
    table_entries += (len + spec.block_size - 1) / spec.block_size;

  ByteModel b;
  b.kv_bytes_per_token =
      m.num_kv_heads * kv_bytes_per_token_head(spec.kv_dtype, m.head_dim, spec.block_size);
  b.kv_logical = std::llround(static_cast<double>(layout.total_tokens) * b.kv_bytes_per_token);
  b.kv_unique = std::llround(static_cast<double>(layout.unique_tokens) * b.kv_bytes_per_token);
  b.q = rows * m.num_q_heads * m.head_dim * q_size;
  b.out = rows * m.num_q_heads * m.head_dim * q_size;
  b.block_table = table_entries * std::int64_t{sizeof(std::int32_t)};
  b.context_lens = rows * std::int64_t{sizeof(std::int32_t)};
  b.min = b.kv_unique + b.q + b.out + b.block_table + b.context_lens;
  b.flops = 4.0 * m.num_q_heads * static_cast<double>(layout.total_tokens) * m.head_dim;
  b.arithmetic_intensity = b.min > 0 ? b.flops / static_cast<double>(b.min) : 0.0;
  return b;
}

}  // namespace decodebench
