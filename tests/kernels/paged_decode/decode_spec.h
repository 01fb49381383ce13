// The workload of a paged-decode test case, built once for every rung's tests: a one-layer
// "test" model with the case's heads, and the case's batch, contexts, sharing and block size.
// A case is any struct with batch, context, num_q_heads, num_kv_heads, q_dtype, block_size and
// hit_rate; prefix_groups where it has one (else 1).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "workload/workload.h"

namespace decodebench::testing_support {

template <typename Case>
WorkloadSpec decode_spec(const Case& c, int head_dim, DType kv_dtype, std::uint64_t seed) {
  WorkloadSpec s;
  s.model.name = "test";
  s.model.num_q_heads = c.num_q_heads;
  s.model.num_kv_heads = c.num_kv_heads;
  s.model.head_dim = head_dim;
  s.model.num_layers = 1;
  s.batch = c.batch;
  s.context = c.context;
  s.hit_rate = c.hit_rate;
  if constexpr (requires { c.prefix_groups; }) {
    s.prefix_groups = c.prefix_groups;
  } else {
    s.prefix_groups = 1;
  }
  s.kv_dtype = kv_dtype;
  s.q_dtype = c.q_dtype;
  s.block_size = c.block_size;
  s.seed = seed;
  return s;
}

}  // namespace decodebench::testing_support
