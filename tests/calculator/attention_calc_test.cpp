// Attention-scope rows: what each kind streams under its own roof, and the weights bytes' range.
#include "calculator/attention_calc.h"

#include <iterator>

#include <gtest/gtest.h>

#include "support/host_test_util.h"  // expect_input_error

namespace decodebench::calculator {
namespace {

using decodebench::test::expect_input_error;

TEST(AttentionRows, KindsStreamLogicalOrUniqueBytes) {
  Request r;
  r.models = {"llama-3.1-8b"};
  r.contexts = {ContextSpec::fixed(8192)};
  r.kv_dtypes = {DType::f16};
  r.hit_rates = {0.5};
  r.batches = {8};
  r.kinds.assign(std::begin(kKernelKinds), std::end(kKernelKinds));
  const Roofs roofs = roofs_from_datasheet(resolve_device("h200"), DType::bf16);
  const AttentionResult a = attention_rows(r, roofs);
  ASSERT_EQ(a.rows.size(), 3u);
  EXPECT_EQ(a.q_dtype, DType::f16);
  const AttentionRow& cuda = a.rows[0];
  const AttentionRow& cascade = a.rows[2];
  // 2 x 8 KV heads x 128 x 2 bytes a token a layer.
  EXPECT_EQ(cuda.kv_bytes_per_token_layer, 4096);
  EXPECT_EQ(cuda.kv_bytes_per_token_all, 32 * 4096);
  EXPECT_EQ(cascade.streamed_step_layer, cascade.bytes_step_layer);  // the unique bytes
  // Half of every context is one shared prefix: the prefix-unaware kinds read it 8 times.
  const double kv_logical = 8.0 * 8192 * 4096, kv_unique = (8192 / 2 + 8 * 8192 / 2) * 4096.0;
  EXPECT_NEAR(cuda.streamed_step_layer - cascade.streamed_step_layer, kv_logical - kv_unique, 1);
  for (const AttentionRow& row : a.rows) {
    EXPECT_EQ(row.streamed_step_all, 32 * row.streamed_step_layer);
    EXPECT_EQ(row.flop_roof, roofs.attention_flops(row.compute));
    EXPECT_EQ(row.bound_by, "memory");
    EXPECT_DOUBLE_EQ(row.t_roof_s, row.streamed_step_all / 4.8e12);
    EXPECT_DOUBLE_EQ(row.tokens_per_s, 8 / row.t_roof_s);
  }
  r.weights_bytes = 141e9;  // all of the memory
  expect_input_error([&] { attention_rows(r, roofs); }, {"--weights-bytes", "[0, 141000000000)"});
}

}  // namespace
}  // namespace decodebench::calculator
