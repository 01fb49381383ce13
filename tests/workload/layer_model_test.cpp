// The layer model: the presets' GEMM shapes against their published configs, the parameter count
// that checks them, bytes and FLOPs by hand, what layer scope supports, the weights' test data,
// and the model file's layer keys.
#include "workload/layer_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"

namespace decodebench {
namespace {

GemmShape shape(const std::string& model, LayerStage s, int batch = 1) {
  return gemm_shape(load_model(model), s, batch);
}

// {n, k, lda} of a GEMM.
void expect_shape(const GemmShape& g, std::int64_t n, std::int64_t k, std::int64_t lda) {
  EXPECT_EQ(g.n, n) << stage_name(g.stage);
  EXPECT_EQ(g.k, k) << stage_name(g.stage);
  EXPECT_EQ(g.lda, lda) << stage_name(g.stage);
}

TEST(LayerShape, Llama31_8b) {
  const std::string m = "llama-3.1-8b";  // hidden 4096, 32 q heads, 8 KV heads, d 128, I 14336
  expect_shape(shape(m, LayerStage::qkv_proj), (32 + 16) * 128, 4096, 4096);
  expect_shape(shape(m, LayerStage::o_proj), 4096, 4096, 4096);
  expect_shape(shape(m, LayerStage::gate_up_proj), 28672, 4096, 4096);
  expect_shape(shape(m, LayerStage::down_proj), 4096, 14336, 28672);
  expect_shape(shape(m, LayerStage::lm_head), 128256, 4096, 4096);
  EXPECT_EQ(shape(m, LayerStage::down_proj, 7).m, 7);
}

TEST(LayerShape, Gemma2_9bHeadsAreWiderThanHidden) {
  // 16 heads x 256 = 4096 attention features around a 3584-wide residual stream.
  const std::string m = "gemma-2-9b";
  expect_shape(shape(m, LayerStage::qkv_proj), (16 + 16) * 256, 3584, 3584);
  expect_shape(shape(m, LayerStage::o_proj), 3584, 4096, 4096);
  expect_shape(shape(m, LayerStage::gate_up_proj), 2 * 14336, 3584, 3584);
  expect_shape(shape(m, LayerStage::down_proj), 3584, 14336, 2 * 14336);
  expect_shape(shape(m, LayerStage::lm_head), 256000, 3584, 3584);
}

TEST(LayerShape, OtherPresets) {
  expect_shape(shape("llama-3.1-70b", LayerStage::qkv_proj), (64 + 16) * 128, 8192, 8192);
  expect_shape(shape("llama-3.1-70b", LayerStage::down_proj), 8192, 28672, 57344);
  expect_shape(shape("llama-2-7b", LayerStage::qkv_proj), 3 * 4096, 4096, 4096);
  expect_shape(shape("llama-2-7b", LayerStage::gate_up_proj), 22016, 4096, 4096);
  expect_shape(shape("mistral-7b", LayerStage::lm_head), 32000, 4096, 4096);
  expect_shape(shape("qwen2.5-7b", LayerStage::qkv_proj), (28 + 8) * 128, 3584, 3584);
  expect_shape(shape("qwen2.5-7b", LayerStage::down_proj), 3584, 18944, 37888);
  expect_shape(shape("qwen2.5-7b", LayerStage::lm_head), 152064, 3584, 3584);
}

TEST(LayerShape, AttentionAndMissingShapeThrow) {
  EXPECT_THROW(shape("llama-3.1-8b", LayerStage::attention), std::invalid_argument);
  ModelShape m = load_model("llama-3.1-8b");
  m.intermediate_size = 0;
  EXPECT_FALSE(m.has_layer_shape());
  EXPECT_THROW(gemm_shape(m, LayerStage::qkv_proj, 1), std::invalid_argument);
  EXPECT_EQ(params_from_shape(m), 0);
}

// Norms and biases, which params_from_shape leaves out, are < 0.01 % of each preset; 0.1 % still
// catches an intermediate_size off by one step of 256 (0.7 % on llama-3.1-70b, the least
// sensitive dense preset), a vocabulary off by 32k (16k is 0.08 % of gpt-oss-120b, whose
// published count is rounded to 0.01B), a tied head counted twice or an expert missing.
::testing::AssertionResult params_match(const ModelShape& m) {
  const double got = static_cast<double>(params_from_shape(m));
  const double want = static_cast<double>(m.num_params);
  if (want > 0 && std::abs(got - want) <= 1e-3 * want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << m.name << ": params_from_shape " << got << " vs published num_params " << want;
}

TEST(LayerParams, EveryPresetMatchesItsPublishedCount) {
  const std::vector<std::string> presets = model_presets();
  ASSERT_GE(presets.size(), 6u);
  for (const std::string& name : presets) {
    const ModelShape m = load_model(name);
    ASSERT_TRUE(m.has_layer_shape()) << name;
    EXPECT_TRUE(params_match(m));
  }
  // By hand, llama-3.1-8b: embeddings and head 2 x 128256 x 4096, per layer 6144 x 4096 +
  // 4096 x 4096 + 3 x 14336 x 4096, x 32; the published 8030261248 adds 65 RMSNorms of 4096.
  EXPECT_EQ(params_from_shape(load_model("llama-3.1-8b")),
            2LL * 128256 * 4096 + 32LL * (6144 + 4096 + 3 * 14336) * 4096);
  EXPECT_EQ(params_from_shape(load_model("llama-3.1-8b")) + 65 * 4096, 8030261248LL);
}

TEST(LayerParams, TheCheckCatchesAWrongShape) {
  for (const std::string& name : model_presets()) {
    const ModelShape good = load_model(name);
    ModelShape m = good;
    m.intermediate_size -= 256;
    EXPECT_FALSE(params_match(m)) << name << " intermediate_size";
    m = good;
    // 32k rows more, or in the MoE giants (where 32k rows of embedding and head are < 0.1 % of
    // the model) as many as 0.2 % of it.
    const std::int64_t row_params =
        std::int64_t{good.hidden_size} * (good.tie_word_embeddings ? 1 : 2);
    m.vocab_size +=
        static_cast<int>(std::max<std::int64_t>(32768, good.num_params / 500 / row_params));
    EXPECT_FALSE(params_match(m)) << name << " vocab_size";
    m = good;
    m.tie_word_embeddings = !m.tie_word_embeddings;
    EXPECT_FALSE(params_match(m)) << name << " tie_word_embeddings";
    if (good.is_moe()) {
      m = good;
      m.num_experts -= 1;
      EXPECT_FALSE(params_match(m)) << name << " num_experts";
    }
  }
}

TEST(LayerParams, WeightBytesInMemory) {
  const ModelShape m = load_model("llama-3.1-8b");
  EXPECT_EQ(model_weight_bytes(m, DType::bf16), 2 * 8030261248LL);
  EXPECT_EQ(model_weight_bytes(m, DType::fp8_e4m3), 8030261248LL);
  ModelShape no_count = m;
  no_count.num_params = 0;  // falls back on the shapes
  EXPECT_EQ(model_weight_bytes(no_count, DType::f16), 2 * params_from_shape(m));
}

TEST(GemmModel, BytesAndFlopsByHand) {
  const GemmShape down = shape("llama-3.1-8b", LayerStage::down_proj, 8);
  const GemmModel g = gemm_model(down, DType::bf16, DType::bf16);
  EXPECT_EQ(g.weight_bytes, 4096LL * 14336 * 2);
  EXPECT_EQ(g.input_bytes, 8LL * 14336 * 2);  // k elements per row, not the stride
  EXPECT_EQ(g.output_bytes, 8LL * 4096 * 2);
  EXPECT_EQ(g.bytes(), g.weight_bytes + g.input_bytes + g.output_bytes);
  EXPECT_DOUBLE_EQ(g.flops, 2.0 * 8 * 4096 * 14336);
  // fp8 weights: one byte a weight and an fp8 input; the output stays in the activations' type.
  const GemmModel f = gemm_model(down, DType::fp8_e4m3, DType::bf16);
  EXPECT_EQ(f.weight_bytes, 4096LL * 14336);
  EXPECT_EQ(f.input_bytes, 8LL * 14336);
  EXPECT_EQ(f.output_bytes, 8LL * 4096 * 2);
  EXPECT_DOUBLE_EQ(f.flops, g.flops);
}

WorkloadSpec llama_spec(int batch, int context, DType q) {
  WorkloadSpec s;
  s.model = load_model("llama-3.1-8b");
  s.batch = batch;
  s.context = ContextSpec::fixed(context);
  s.q_dtype = q;
  s.kv_dtype = DType::f16;
  return s;
}

TEST(LayerModel, SumsOfTheStages) {
  const WorkloadSpec spec = llama_spec(4, 1024, DType::bf16);
  const PagedLayout layout = build_layout(spec);
  const LayerModel lm = layer_model(spec, layout, DType::bf16);
  const ByteModel bm = byte_model(spec, layout);
  const std::int64_t per_layer_params = (6144LL + 4096 + 3 * 14336) * 4096;
  EXPECT_EQ(lm.weight_bytes, 2 * per_layer_params);
  // Inputs and outputs of the four GEMMs, 4 rows of bf16.
  EXPECT_EQ(lm.activation_bytes,
            4LL * 2 * ((4096 + 6144) + (4096 + 4096) + (4096 + 28672) + (14336 + 4096)));
  EXPECT_EQ(lm.attention.min, bm.min);
  EXPECT_EQ(lm.bytes_min, lm.weight_bytes + lm.activation_bytes + bm.min);
  EXPECT_DOUBLE_EQ(lm.gemm_flops, 2.0 * 4 * static_cast<double>(per_layer_params));
  EXPECT_DOUBLE_EQ(lm.flops, lm.gemm_flops + bm.flops);
  for (std::size_t i = 0; i < kLayerGemms.size(); ++i) {
    EXPECT_EQ(lm.gemms[i].shape.stage, kLayerGemms[i]);
    EXPECT_EQ(lm.gemms[i].shape.m, 4);
  }
  // The LM head is not in the layer's sums.
  EXPECT_EQ(lm.lm_head.weight_bytes, 128256LL * 4096 * 2);
  EXPECT_EQ(lm.lm_head.output_bytes, 4LL * 128256 * 2);
  EXPECT_DOUBLE_EQ(lm.lm_head.flops, 2.0 * 4 * 128256 * 4096);
  // bf16 weights with f16 activations: not supported.
  EXPECT_THROW(layer_model(llama_spec(4, 1024, DType::f16), layout, DType::bf16),
               std::invalid_argument);
}

// A mixture of experts' MLP reads the experts a batch touches, expected under uniform routing:
// k at batch 1, E (1 - (1 - k/E)^B) in general, all E for a large batch; the shared experts
// always; the router in gate_up_proj; the first dense layers averaged in. The measured layer
// step still refuses it (the backends run a dense MLP), and an MLA model is not modeled.
TEST(LayerModel, MixtureOfExpertsReadsTheExpertsABatchTouches) {
  ModelShape moe = load_model("llama-3.1-8b");  // its attention, with an MoE MLP
  moe.num_experts = 16;
  moe.experts_per_token = 2;
  EXPECT_DOUBLE_EQ(expected_experts_touched(moe, 1), 2);
  EXPECT_NEAR(expected_experts_touched(moe, 4), 16 * (1 - std::pow(14.0 / 16, 4)), 1e-9);
  EXPECT_NEAR(expected_experts_touched(moe, 4096), 16, 1e-9);
  EXPECT_EQ(expected_experts_touched(load_model("llama-3.1-8b"), 4), 0);

  const std::int64_t gate_up = 2LL * 14336 * 4096 * 2, down = 4096LL * 14336 * 2;  // bf16
  const std::int64_t router = 16LL * 4096 * 2;
  const auto mlp_of = [&](const ModelShape& m, int batch) {
    WorkloadSpec spec = llama_spec(batch, 64, DType::bf16);
    spec.model = m;
    return layer_model(spec, build_layout(spec), DType::bf16);
  };
  for (int batch : {1, 4, 64}) {
    const LayerModel lm = mlp_of(moe, batch);
    const double read = expected_experts_touched(moe, batch);
    EXPECT_EQ(lm.gemms[2].weight_bytes, std::llround(read * gate_up + router)) << batch;
    EXPECT_EQ(lm.gemms[3].weight_bytes, std::llround(read * down)) << batch;
    // Every token goes through its 2 experts: twice a dense MLP's FLOPs, plus the router.
    EXPECT_DOUBLE_EQ(lm.gemms[3].flops, 2 * 2.0 * batch * 4096 * 14336) << batch;
    EXPECT_DOUBLE_EQ(lm.gemms[2].flops, 2 * 2.0 * batch * 28672 * 4096 + 2.0 * batch * 16 * 4096);
  }
  // A shared expert is read at every batch; a first dense layer is averaged in.
  ModelShape deep = moe;
  deep.shared_experts = 1;
  deep.first_dense_layers = 8;  // of 32
  deep.dense_intermediate_size = 4096;
  const LayerModel lm = mlp_of(deep, 1);
  const double moe_down = (2 + 1) * static_cast<double>(down);
  const double dense_down = 4096.0 * 4096 * 2;
  EXPECT_EQ(lm.gemms[3].weight_bytes, std::llround(0.75 * moe_down + 0.25 * dense_down));

  EXPECT_NE(layer_support_error(moe, DType::bf16, DType::bf16).find("mixture of experts"),
            std::string::npos);
  EXPECT_EQ(layer_model_error(moe, DType::bf16, DType::bf16), "");
  const std::string mla = layer_model_error(load_model("deepseek-v3"), DType::bf16, DType::bf16);
  EXPECT_NE(mla.find("MLA"), std::string::npos) << mla;
}

// Where no activation dtype is asked for, the one chosen is one the weights take.
TEST(LayerSupport, TheDefaultActivationDtypeIsOneTheWeightsTake) {
  const ModelShape m = load_model("llama-3.1-8b");
  for (DType w : {DType::bf16, DType::f16, DType::fp8_e4m3}) {
    for (DType otherwise : {DType::f16, DType::bf16}) {
      const DType a = default_activation_dtype(w, otherwise);
      EXPECT_EQ(layer_support_error(m, w, a), "") << dtype_name(w);
      EXPECT_EQ(a, is_fp8(w) ? otherwise : w) << dtype_name(w);
    }
  }
}

TEST(LayerSupport, Cases) {
  const ModelShape m = load_model("llama-3.1-8b");
  EXPECT_EQ(layer_support_error(m, DType::bf16, DType::bf16), "");
  EXPECT_EQ(layer_support_error(m, DType::f16, DType::f16), "");
  EXPECT_EQ(layer_support_error(m, DType::fp8_e4m3, DType::f16), "");
  EXPECT_EQ(layer_support_error(m, DType::fp8_e4m3, DType::bf16), "");
  const std::string mixed = layer_support_error(m, DType::bf16, DType::f16);
  EXPECT_NE(mixed.find("bf16 weights need bf16 activations"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("--q-dtype bf16"), std::string::npos) << mixed;
  EXPECT_NE(layer_support_error(m, DType::f16, DType::bf16), "");
  const std::string f32 = layer_support_error(m, DType::f32, DType::f16);
  EXPECT_NE(f32.find("bf16, f16 or fp8_e4m3"), std::string::npos) << f32;
  EXPECT_NE(layer_support_error(m, DType::fp8_e5m2, DType::f16), "");
  ModelShape attention_only = m;
  attention_only.vocab_size = 0;
  const std::string missing = layer_support_error(attention_only, DType::bf16, DType::bf16);
  for (const char* key : {"hidden_size", "intermediate_size", "vocab_size"}) {
    EXPECT_NE(missing.find(key), std::string::npos) << missing;
  }
}

double sample_std(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += static_cast<double>(x) * x;
  const double mean = sum / static_cast<double>(v.size());
  return std::sqrt(sq / static_cast<double>(v.size()) - mean * mean);
}

TEST(LayerWeights, ReproducibleAndScaledToOneOverSqrtK) {
  const GemmShape qkv = shape("llama-3.1-8b", LayerStage::qkv_proj, 1);    // k 4096
  const GemmShape down = shape("llama-3.1-8b", LayerStage::down_proj, 1);  // k 14336
  for (DType w : {DType::bf16, DType::f16, DType::fp8_e4m3}) {
    for (const GemmShape& g : {qkv, down}) {
      std::vector<float> values;
      std::vector<float> row(static_cast<std::size_t>(g.k));
      for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, g.n - 1}) {
        weight_row(7, g, w, n, row);
        for (const std::int64_t kk : {std::int64_t{0}, std::int64_t{5}, g.k - 1}) {
          EXPECT_EQ(row[kk], weight_value(7, g, w, n, kk)) << dtype_name(w);
        }
        values.insert(values.end(), row.begin(), row.end());
      }
      const double want = 1.0 / std::sqrt(static_cast<double>(g.k));
      EXPECT_NEAR(sample_std(values), want, 0.1 * want) << dtype_name(w) << " k=" << g.k;
    }
  }
  // The same seed gives the same value, another seed or another weight a different one.
  EXPECT_EQ(weight_value(7, qkv, DType::bf16, 3, 9), weight_value(7, qkv, DType::bf16, 3, 9));
  int differ_seed = 0, differ_tensor = 0;
  const GemmShape o = shape("llama-3.1-8b", LayerStage::o_proj, 1);  // same k as qkv
  for (int kk = 0; kk < 64; ++kk) {
    differ_seed +=
        weight_value(7, qkv, DType::bf16, 3, kk) != weight_value(8, qkv, DType::bf16, 3, kk);
    differ_tensor +=
        weight_value(7, qkv, DType::bf16, 3, kk) != weight_value(7, o, DType::bf16, 3, kk);
  }
  EXPECT_GT(differ_seed, 56);
  EXPECT_GT(differ_tensor, 56);
  std::vector<float> short_row(10);
  EXPECT_THROW(weight_row(7, qkv, DType::bf16, 0, short_row), std::invalid_argument);
}

// An fp8 weight stands for encoded x scale: value / scale is an fp8 number (it re-encodes to
// itself) no larger than the format's maximum, and one tensor uses one scale.
TEST(LayerWeights, Fp8ValueIsTheEncodedTimesTheTensorScale) {
  const GemmShape g = shape("llama-3.1-8b", LayerStage::gate_up_proj, 1);
  const TensorScale s = weight_scale(g, DType::fp8_e4m3);
  EXPECT_FLOAT_EQ(s.scale, kGeneratorBound / 448.0f / std::sqrt(4096.0f));
  EXPECT_FLOAT_EQ(s.inv_scale, 448.0f / kGeneratorBound);
  std::set<float> codes;
  for (std::int64_t i = 0; i < 4096; ++i) {
    const float v = weight_value(3, g, DType::fp8_e4m3, i % 97, i);
    const float encoded = v / s.scale;
    std::byte b[4];
    encode_value(DType::fp8_e4m3, encoded, b);
    EXPECT_FLOAT_EQ(decode_value(DType::fp8_e4m3, b), encoded) << i;
    EXPECT_LE(std::abs(encoded), 448.0f);
    codes.insert(encoded);
  }
  EXPECT_LE(codes.size(), 256u);  // one byte's worth of values
  EXPECT_GT(codes.size(), 64u);
  // 16-bit weights carry no scale.
  EXPECT_EQ(weight_scale(g, DType::bf16).scale, 1.0f);
  EXPECT_EQ(input_scale(DType::bf16).scale, 1.0f);
  EXPECT_EQ(input_scale(DType::fp8_e4m3).scale, kActivationFp8Scale);
}

TEST(LayerWeights, TensorsOfTheStages) {
  EXPECT_EQ(weight_tensor(LayerStage::qkv_proj), LayerTensor::w_qkv);
  EXPECT_EQ(weight_tensor(LayerStage::lm_head), LayerTensor::w_lm_head);
  EXPECT_THROW(weight_tensor(LayerStage::attention), std::invalid_argument);
  // Distinct from the attention's q, k, v tensors of the generator.
  EXPECT_GT(static_cast<std::uint32_t>(LayerTensor::x), static_cast<std::uint32_t>(Tensor::v));
}

// --- the model file's layer keys -----------------------------------------------------------

std::string model_file(const std::string& extra) {
  return R"({"name": "m", "num_q_heads": 32, "num_kv_heads": 8, "head_dim": 128, )"
         R"("num_layers": 32)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(ModelFile, LayerKeysAreOptional) {
  const ModelShape a = parse_model_json(model_file(""), "a.json");
  EXPECT_FALSE(a.has_layer_shape());
  EXPECT_EQ(a.num_params, 0);
  EXPECT_FALSE(a.tie_word_embeddings);
  const ModelShape b = parse_model_json(
      model_file(R"("hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 128256, )"
                 R"("num_params": 8030261248, "tie_word_embeddings": true)"),
      "b.json");
  EXPECT_TRUE(b.has_layer_shape());
  EXPECT_EQ(b.hidden_size, 4096);
  EXPECT_EQ(b.intermediate_size, 14336);
  EXPECT_EQ(b.vocab_size, 128256);
  EXPECT_EQ(b.num_params, 8030261248LL);  // over 2^31
  EXPECT_TRUE(b.tie_word_embeddings);
}

TEST(ModelFile, BadLayerKeysAreRejectedByName) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("hidden_size": -4096)", "hidden_size"},
      {R"("hidden_size": 0)", "hidden_size"},
      {R"("hidden_size": "4096")", "hidden_size"},
      {R"("intermediate_size": 1.5)", "intermediate_size"},
      {R"("intermediate_size": 3000000000)", "intermediate_size"},
      {R"("vocab_size": null)", "vocab_size"},
      {R"("num_params": -1)", "num_params"},
      {R"("num_params": 0)", "num_params"},
      {R"("num_params": "8e9")", "num_params"},
      {R"("num_params": 8.03e9)", "num_params"},
      {R"("tie_word_embeddings": 1)", "tie_word_embeddings"},
      {R"("tie_word_embeddings": "false")", "tie_word_embeddings"},
      {R"("hidden_sise": 4096)", "hidden_sise"},
  };
  for (const auto& [extra, key] : bad) {
    try {
      parse_model_json(model_file(extra), "bad.json");
      ADD_FAILURE() << extra << " accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("bad.json"), std::string::npos) << what;
      EXPECT_NE(what.find("'" + key + "'"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace decodebench
