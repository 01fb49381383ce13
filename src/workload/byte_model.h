// The byte and FLOP model of one decode step of one layer (docs/design.md "Byte and FLOP model"),
// written once: the harness, the report and `decodebench model` all take their numbers here.
#pragma once

#include <cstdint>

#include "workload/workload.h"

namespace decodebench {

struct ByteModel {
  // K and V of one token, all KV heads: Hkv * kv_bytes_per_token_head (2 * d * sizeof(kv) for
  // a float format; codes, scales and zeros for an integer one, a per-block scale as 1/P of it).
  double kv_bytes_per_token = 0;
  std::int64_t kv_logical =
      0;  // sum_b L_b * kv_bytes_per_token: what a prefix-unaware kernel streams
  std::int64_t kv_unique = 0;  // distinct (block, slot) pairs read * kv_bytes_per_token: compulsory
  std::int64_t q = 0;          // [B][Hq][d] q_dtype, read once
  std::int64_t out = 0;        // [B][Hq][d] q_dtype, written once
  std::int64_t block_table = 0;     // the entries actually read: sum_b ceil(L_b / P) int32
  std::int64_t context_lens = 0;    // [B] int32
  std::int64_t min = 0;             // kv_unique + q + out + block_table + context_lens
  double flops = 0;                 // sum_b 4 * Hq * L_b * d (QK^T and PV, a multiply-add = 2 FLOP)
  double arithmetic_intensity = 0;  // flops / min, FLOP per byte
};

// Over the rows of `layout` (the whole batch, or a subset's rows). Per-tensor fp8 scales add
// no bytes per token (they are two floats per step, not counted); the integer formats' scales
// and zeros are counted with their codes.
ByteModel byte_model(const WorkloadSpec& spec, const PagedLayout& layout);

}  // namespace decodebench
