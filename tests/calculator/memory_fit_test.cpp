// max_batch_in_memory on layouts worked by hand (blocks of 100 bytes, 16-token blocks), and a
// model whose weights do not fit.
#include "calculator/memory_fit.h"

#include <gtest/gtest.h>

#include "backends/datasheet.h"
#include "workload/layer_model.h"

namespace decodebench::calculator {
namespace {

WorkloadSpec layout(ContextSpec ctx, double h, int groups) {
  WorkloadSpec s;
  s.block_size = 16;
  s.context = ctx;
  s.hit_rate = h;
  s.prefix_groups = groups;
  return s;
}

TEST(MaxBatchInMemory, PrivateBlocksOnly) {
  // 64 tokens: 4 blocks of 100 B a sequence; 1000 B hold 2 (800), not 3 (1200).
  const WorkloadSpec s = layout(ContextSpec::fixed(64), 0, 1);
  EXPECT_EQ(max_batch_in_memory(s, 100, 1000), 2);
  EXPECT_EQ(max_batch_in_memory(s, 100, 1200), 3);  // exactly full still fits
  // 50 B of workspace a sequence: 450 B each, 2 in 1000 B.
  EXPECT_EQ(max_batch_in_memory(s, 100, 1000, 50), 2);
  EXPECT_EQ(max_batch_in_memory(s, 100, 899, 50), 1);
  EXPECT_EQ(max_batch_in_memory(s, 100, 399), 0);  // not even one sequence
  // 65 tokens take a fifth, partly filled block.
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::fixed(65), 0, 1), 100, 1000), 2);
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::fixed(65), 0, 1), 100, 999), 1);
}

TEST(MaxBatchInMemory, SharedPrefixBlocksCountOncePerGroup) {
  // h = 0.5 of 64 tokens: 2 shared blocks, 2 private. One group: 200 + 200 B per sequence, so
  // 1000 B hold 4 sequences.
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::fixed(64), 0.5, 1), 100, 1000), 4);
  // Two groups: the second sequence brings the second prefix, 400 + 400 + 200 per further one:
  // 3 in 1000 B.
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::fixed(64), 0.5, 2), 100, 1000), 3);
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::fixed(64), 0.5, 2), 100, 799), 1);
  // h = 0.9: floor(0.9 x 64 / 16) = 3 shared blocks, 1 private.
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::fixed(64), 0.9, 1), 100, 1000), 7);
}

TEST(MaxBatchInMemory, RaggedTakesTheLongestAndSharesFromTheShortest) {
  // 32:64 at h = 1: blocks of the longest (4), shared of the shortest (2): as h = 0.5 of 64.
  EXPECT_EQ(max_batch_in_memory(layout(ContextSpec::ragged(32, 64), 1, 1), 100, 1000), 4);
}

TEST(MaxBatchInMemory, UnboundedWhenEveryBlockIsShared) {
  const WorkloadSpec s = layout(ContextSpec::fixed(64), 1, 1);
  EXPECT_FALSE(max_batch_in_memory(s, 100, 1000).has_value());
  EXPECT_EQ(max_batch_in_memory(s, 100, 1000, 10), 60);  // a workspace bounds it: 600 / 10
  EXPECT_EQ(max_batch_in_memory(s, 100, 399), 0);        // the prefix itself does not fit
}

TEST(DoesNotFit, NamesTheDevicesAndTheDtypeThatWouldFit) {
  const ModelShape m = load_model("llama-3.1-70b");
  const Datasheet h200 = datasheet_by_key("h200");
  const double bf16 = static_cast<double>(model_weight_bytes(m, DType::bf16));
  const DoesNotFit d = does_not_fit(m, h200, DType::bf16, bf16, false);
  EXPECT_EQ(d.devices_needed, 2);
  EXPECT_EQ(d.weights_dtypes_that_fit, std::vector<DType>{DType::fp8_e4m3});
  EXPECT_NE(d.message.find("llama-3.1-70b does not fit h200"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("--weights-dtype fp8_e4m3"), std::string::npos) << d.message;
  // Bytes given by hand: no dtype is suggested.
  const DoesNotFit given = does_not_fit(m, h200, DType::bf16, 300e9, true);
  EXPECT_EQ(given.devices_needed, 3);
  EXPECT_TRUE(given.weights_dtypes_that_fit.empty());
}

}  // namespace
}  // namespace decodebench::calculator
