// The byte/FLOP model against numbers computed by hand.
#include "workload/byte_model.h"

#include <gtest/gtest.h>

#include <cmath>

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

// DeepSeek-V3 at B 8 x 8192, bf16 latent: one 576-value row per token (no V of its own), q 576
// wide and out 512 wide per head, 2 x 128 x (576 + 512) FLOP per token: ~235 FLOP per byte.
TEST(ByteModel, MlaCountsTheLatentOnce) {
  WorkloadSpec spec;
  spec.model = load_model("deepseek-v3");
  spec.batch = 8;
  spec.context = ContextSpec::fixed(8192);
  spec.kv_dtype = DType::bf16;
  spec.q_dtype = DType::bf16;
  spec.block_size = 64;
  const ByteModel b = byte_model(spec, build_layout(spec));
  EXPECT_EQ(b.kv_bytes_per_token, 1152);  // 576 x 2 bytes, once
  EXPECT_EQ(b.kv_logical, 8LL * 8192 * 1152);
  EXPECT_EQ(b.q, 8 * 128 * 576 * 2);
  EXPECT_EQ(b.out, 8 * 128 * 512 * 2);
  EXPECT_EQ(b.block_table, 8 * 128 * 4);
  EXPECT_DOUBLE_EQ(b.flops, 2.0 * 128 * (576 + 512) * 8192 * 8);
  EXPECT_NEAR(b.arithmetic_intensity, 18253611008.0 / 77729824.0, 1e-9);  // q and out count too
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

// ---- windows ----------------------------------------------------------------------------

WorkloadSpec preset(const char* name, int batch, int context, double h = 0) {
  WorkloadSpec s = llama_8b(batch, context, h, DType::f16);
  s.model = load_model(name);
  return s;
}

// mistral-7b at 32k: every layer reads the blocks holding its last 4096 tokens. 32768 - 4096 =
// 28672 is block 1792 exactly, so 256 blocks, 4096 tokens, 4096 x 4096 bytes per sequence.
TEST(ByteModelWindow, Mistral7bAt32kReadsItsWindow) {
  const WorkloadSpec spec = preset("mistral-7b", 8, 32768);
  const ByteModel b = byte_model(spec, build_layout(spec));
  EXPECT_EQ(b.kv_bytes_per_token, 4096);  // as llama-3.1-8b: Hkv 8, d 128, f16
  EXPECT_EQ(b.kv_logical, 8LL * 4096 * 4096);
  EXPECT_EQ(b.kv_unique, 8LL * 4096 * 4096);
  EXPECT_EQ(b.block_table, 8LL * 256 * 4);
  EXPECT_DOUBLE_EQ(b.flops, 4.0 * 32 * 4096 * 128 * 8);
  // The full-attention reading of the same point is 8x more KV.
  const ByteModel full = byte_model(spec, build_layout(spec), /*window=*/0);
  EXPECT_EQ(full.kv_logical, 8 * b.kv_logical);
}

// A windowed layer's bytes stop growing past W (a context whose window starts mid-block reads
// that block whole, so up to W + P - 1 tokens); a full layer's keep growing.
TEST(ByteModelWindow, AWindowedLayersBytesAreFlatBeyondW) {
  std::int64_t at_w = 0;
  for (int context : {4096, 4097, 4111, 4112, 8192, 32768, 131072}) {
    const WorkloadSpec spec = preset("mistral-7b", 1, context);
    const ByteModel b = byte_model(spec, build_layout(spec));
    if (context == 4096) at_w = b.kv_logical;
    EXPECT_GE(b.kv_logical, at_w) << context;
    EXPECT_LE(b.kv_logical, at_w + 15 * 4096) << context;  // at most P - 1 masked tokens more
    const ByteModel full = byte_model(spec, build_layout(spec), 0);
    EXPECT_EQ(full.kv_logical, std::int64_t{context} * 4096) << context;
  }
  // 4097 tokens: the window starts at token 1, in block 0: all 257 blocks, 4097 tokens.
  const WorkloadSpec mid = preset("mistral-7b", 1, 4097);
  EXPECT_EQ(byte_model(mid, build_layout(mid)).kv_logical, 4097LL * 4096);
  // 4113: starts at token 17, in block 1: blocks 1..257, 4113 - 16 tokens.
  const WorkloadSpec next = preset("mistral-7b", 1, 4113);
  EXPECT_EQ(byte_model(next, build_layout(next)).kv_logical, 4097LL * 4096);
}

// gemma-2-9b alternates window and full layers: the mean layer is half of each, so 42 x the
// mean is 21 layers of 4096 tokens plus 21 of the context.
TEST(ByteModelWindow, MixedLayersAreSummedLayerByLayer) {
  const WorkloadSpec spec = preset("gemma-2-9b", 4, 32768);
  const PagedLayout layout = build_layout(spec);
  const ByteModel mean = byte_model(spec, layout);
  const ByteModel local = byte_model(spec, layout, 4096);
  const ByteModel global = byte_model(spec, layout, 0);
  EXPECT_EQ(mean.kv_logical, (local.kv_logical + global.kv_logical) / 2);
  EXPECT_EQ(local.kv_logical, 4LL * 4096 * static_cast<std::int64_t>(local.kv_bytes_per_token));
  EXPECT_DOUBLE_EQ(mean.flops, (local.flops + global.flops) / 2);
  // gemma-3-27b: 52 local layers of 1024, 10 global.
  const WorkloadSpec g3 = preset("gemma-3-27b", 2, 65536);
  const PagedLayout l3 = build_layout(g3);
  EXPECT_EQ(byte_model(g3, l3).kv_unique,
            std::llround((52.0 * static_cast<double>(byte_model(g3, l3, 1024).kv_unique) +
                          10.0 * static_cast<double>(byte_model(g3, l3, 0).kv_unique)) /
                         62));
  // Sinks: Hq fp32 logits per layer.
  const WorkloadSpec oss = preset("gpt-oss-20b", 1, 1000);
  EXPECT_EQ(byte_model(oss, build_layout(oss)).sinks, 64 * 4);
}

// A window past a shared prefix does not read it: h = 0.5 of 8192 shares blocks 0..255, and a
// 4096-token window starts at block 256, so nothing read is shared.
TEST(ByteModelWindow, AWindowPastTheSharedPrefixReadsNoSharedBlock) {
  const WorkloadSpec spec = preset("mistral-7b", 8, 8192, 0.5);
  const PagedLayout layout = build_layout(spec);
  const ByteModel b = byte_model(spec, layout);
  EXPECT_EQ(b.kv_unique, b.kv_logical);
  EXPECT_EQ(b.kv_logical, 8LL * 4096 * 4096);
  // At h = 0.75 (6144 shared tokens) the window's first 2048 tokens are the shared prefix's
  // last 128 blocks, read once; each sequence's last 2048 are its own.
  const WorkloadSpec more = preset("mistral-7b", 8, 8192, 0.75);
  const ByteModel m = byte_model(more, build_layout(more));
  EXPECT_EQ(m.kv_unique, (2048LL + 8 * 2048) * 4096);
  EXPECT_EQ(m.kv_logical, 8LL * 4096 * 4096);
}

}  // namespace
}  // namespace decodebench
