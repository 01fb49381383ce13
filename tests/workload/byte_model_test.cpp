// The byte/FLOP model against numbers computed by hand.
#include "workload/byte_model.h"

#include <gtest/gtest.h>

namespace decodebench {
namespace {

WorkloadSpec llama_8b(int batch, int context, double h, DType kv) {
  WorkloadSpec s;
  s.model = load_model("llama-3.1-8b");  // Hq 32, Hkv 8, d 128
  s.batch = batch;
  s.context = ContextSpec::fixed(context);
  s.hit_rate = h;
  s.kv_dtype = kv;
  s.q_dtype = DType::f16;
  s.block_size = 16;
  return s;
}

TEST(ByteModel, Llama8bBatch8Context8192Fp16NoSharing) {
  const WorkloadSpec spec = llama_8b(8, 8192, 0.0, DType::f16);
  const ByteModel b = byte_model(spec, build_layout(spec));
  EXPECT_EQ(b.kv_bytes_per_token, 4096);  // 2 (K,V) * 8 heads * 128 * 2 bytes
  EXPECT_EQ(b.kv_logical, 268435456);     // 8 * 8192 * 4096 = 256 MiB
  EXPECT_EQ(b.kv_unique, 268435456);      // nothing shared
  EXPECT_EQ(b.q, 65536);                  // 8 * 32 * 128 * 2
  EXPECT_EQ(b.out, 65536);
  EXPECT_EQ(b.block_table, 16384);  // 8 * 512 entries * 4
  EXPECT_EQ(b.context_lens, 32);
  EXPECT_EQ(b.min, 268435456 + 65536 + 65536 + 16384 + 32);
  EXPECT_DOUBLE_EQ(b.flops, 1073741824.0);                               // 4 * 32 * 8192 * 128 * 8
  EXPECT_DOUBLE_EQ(b.arithmetic_intensity, 1073741824.0 / 268582944.0);  // ~4 FLOP/byte
}

TEST(ByteModel, Fp8HalvesKvBytes) {
  const WorkloadSpec spec = llama_8b(8, 8192, 0.0, DType::fp8_e4m3);
  const ByteModel b = byte_model(spec, build_layout(spec));
  EXPECT_EQ(b.kv_bytes_per_token, 2048);
  EXPECT_EQ(b.kv_unique, 134217728);
  EXPECT_EQ(b.q, 65536);  // q/out stay f16
  EXPECT_EQ(b.min, 134217728 + 65536 + 65536 + 16384 + 32);
}

TEST(ByteModel, SharedPrefixCountsUniqueBytesOnce) {
  // h = 0.5, one group: 256 shared blocks (4096 tokens) read by all 8 sequences.
  const WorkloadSpec spec = llama_8b(8, 8192, 0.5, DType::f16);
  const PagedLayout layout = build_layout(spec);
  const ByteModel b = byte_model(spec, layout);
  EXPECT_DOUBLE_EQ(layout.hit_rate_actual, 0.5);
  EXPECT_EQ(b.kv_logical, 268435456);  // a prefix-unaware kernel still streams all
  EXPECT_EQ(b.kv_unique, (8LL * 8192 - 7 * 4096) * 4096);  // 36864 distinct tokens
  EXPECT_EQ(b.block_table, 16384);                         // every entry is still read
  EXPECT_EQ(b.min, 150994944 + 65536 + 65536 + 16384 + 32);
  EXPECT_DOUBLE_EQ(b.flops, 1073741824.0);  // sharing saves bytes, not FLOPs
}

TEST(ByteModel, RaggedPartialBlocks) {
  // Mistral-like shape on 3 sequences of 1, 17 and 100 tokens, block 16, bf16 KV, h = 0.
  WorkloadSpec spec = llama_8b(3, 1, 0.0, DType::bf16);
  PagedLayout layout = build_layout(spec);
  layout.context_lens = {1, 17, 100};  // hand-made lengths (the model only reads these fields)
  layout.total_tokens = 118;
  layout.unique_tokens = 118;
  const ByteModel b = byte_model(spec, layout);
  EXPECT_EQ(b.block_table, (1 + 2 + 7) * 4);
  EXPECT_EQ(b.kv_logical, 118 * 4096);
  EXPECT_EQ(b.context_lens, 12);
  EXPECT_DOUBLE_EQ(b.flops, 4.0 * 32 * 118 * 128);
}

}  // namespace
}  // namespace decodebench
