// The reference against cases computed by hand, and the tolerance checker against planted faults.
#include "reference/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/errors.h"

namespace decodebench {
namespace {

// A hand-built workload: KV stored as `kv` dtype, Q as f16; the caller fills the values.
Workload hand_workload(int hq, int hkv, int d, int block_size, DType kv,
                       std::vector<std::int32_t> lens, std::vector<std::int32_t> tables,
                       int max_blocks, int num_blocks) {
  Workload w;
  w.spec.model = {"hand", hq, hkv, d, 1, ""};
  w.spec.batch = static_cast<int>(lens.size());
  w.spec.block_size = block_size;
  w.spec.kv_dtype = kv;
  w.spec.q_dtype = DType::f16;
  w.layout.context_lens = std::move(lens);
  w.layout.block_tables = std::move(tables);
  w.layout.max_blocks_per_seq = max_blocks;
  w.layout.num_blocks = num_blocks;
  for (int r = 0; r < w.spec.batch; ++r) w.sequences.push_back(r);
  w.q.resize(static_cast<std::size_t>(w.spec.batch) * hq * d * 2);
  const std::size_t cache = static_cast<std::size_t>(num_blocks) * hkv * block_size * d;
  w.k_cache.resize(cache * dtype_size(kv));
  w.v_cache.resize(cache * dtype_size(kv));
  // Poison every cache element: a slot the reference should not read would show up as 1e4.
  for (std::size_t i = 0; i < cache; ++i) {
    encode_value(kv, 1e4f, w.k_cache.data() + i * dtype_size(kv));
    encode_value(kv, 1e4f, w.v_cache.data() + i * dtype_size(kv));
  }
  return w;
}

void set(std::vector<std::byte>& buf, DType t, std::size_t index, float value) {
  encode_value(t, value, buf.data() + index * dtype_size(t));
}

TEST(Reference, ThreeTokensByHand) {
  // Hq = 2 query heads sharing Hkv = 1, d = 2, block size 2. Tokens 0, 1 live in physical
  // block 1, token 2 in slot 0 of block 0; slot 1 of block 0 is never read.
  Workload w = hand_workload(2, 1, 2, 2, DType::f32, {3}, {1, 0}, 2, 2);
  w.softmax_scale = 0.5f;
  const float k[3][2] = {{1, 0}, {0, 1}, {1, 1}};
  const float v[3][2] = {{1, 2}, {3, -1}, {0, 0.5f}};
  const int slot_of[3] = {1 * 2 + 0, 1 * 2 + 1, 0 * 2 + 0};  // (block * P + slot), Hkv = 1
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 2; ++i) {
      set(w.k_cache, DType::f32, slot_of[t] * 2 + i, k[t][i]);
      set(w.v_cache, DType::f32, slot_of[t] * 2 + i, v[t][i]);
    }
  }
  const float q[2][2] = {{1, 2}, {-1, 0.5f}};
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 2; ++i) set(w.q, DType::f16, h * 2 + i, q[h][i]);
  }
  // Head 0: scores 0.5 * (1, 2, 3); head 1: 0.5 * (-1, 0.5, -0.5).
  const double s[2][3] = {{0.5, 1.0, 1.5}, {-0.5, 0.25, -0.25}};
  const std::vector<float> out = reference_decode(w);
  ASSERT_EQ(out.size(), 4u);
  for (int h = 0; h < 2; ++h) {
    const double e0 = std::exp(s[h][0]), e1 = std::exp(s[h][1]), e2 = std::exp(s[h][2]);
    const double sum = e0 + e1 + e2;
    for (int i = 0; i < 2; ++i) {
      const double expected = (e0 * v[0][i] + e1 * v[1][i] + e2 * v[2][i]) / sum;
      EXPECT_NEAR(out[h * 2 + i], expected, 1e-6) << "head " << h << " i " << i;
    }
  }
}

TEST(Reference, GqaMapsQueryHeadsToTheirKvHeadWithScales) {
  // One token: softmax weight 1, so out[h] = v_scale * V[h / group] whatever the scores are.
  // Hq = 4, Hkv = 2 (group 2), fp8 e4m3 stored values, v_scale 0.25.
  Workload w = hand_workload(4, 2, 2, 1, DType::fp8_e4m3, {1}, {0}, 1, 1);
  w.softmax_scale = 1.0f;
  w.k_scale = 0.5f;
  w.v_scale = 0.25f;
  for (int i = 0; i < 2; ++i) {
    set(w.k_cache, DType::fp8_e4m3, 0 * 2 + i, 1.0f);      // kv head 0
    set(w.k_cache, DType::fp8_e4m3, 1 * 2 + i, 2.0f);      // kv head 1
    set(w.v_cache, DType::fp8_e4m3, 0 * 2 + i, 2.0f + i);  // (2, 3)
    set(w.v_cache, DType::fp8_e4m3, 1 * 2 + i, 8.0f - i);  // (8, 7)
  }
  for (int j = 0; j < 8; ++j) set(w.q, DType::f16, j, 1.0f);
  const std::vector<float> out = reference_decode(w);
  const std::vector<float> expected = {0.5f, 0.75f, 0.5f, 0.75f, 2.0f, 1.75f, 2.0f, 1.75f};
  EXPECT_EQ(out, expected);

  // Two tokens in one block: scores use k_scale. Token 1's K is 2x token 0's, so with
  // q = (1, 1), scale 1, k_scale 0.5: scores 1 and 2 (kv head 0).
  Workload w2 = hand_workload(1, 1, 2, 2, DType::fp8_e4m3, {2}, {0}, 1, 1);
  w2.softmax_scale = 1.0f;
  w2.k_scale = 0.5f;
  w2.v_scale = 1.0f;
  for (int i = 0; i < 2; ++i) {
    set(w2.k_cache, DType::fp8_e4m3, 0 * 2 + i, 1.0f);
    set(w2.k_cache, DType::fp8_e4m3, 1 * 2 + i, 2.0f);
    set(w2.v_cache, DType::fp8_e4m3, 0 * 2 + i, 0.0f);
    set(w2.v_cache, DType::fp8_e4m3, 1 * 2 + i, 1.0f);
    set(w2.q, DType::f16, i, 1.0f);
  }
  const double p1 = std::exp(2.0) / (std::exp(1.0) + std::exp(2.0));
  const std::vector<float> out2 = reference_decode(w2);
  EXPECT_NEAR(out2[0], p1, 1e-7);
  EXPECT_NEAR(out2[1], p1, 1e-7);
}

WorkloadSpec small_spec(DType kv, DType q = DType::f16, ContextSpec ctx = ContextSpec::fixed(97)) {
  WorkloadSpec s;
  s.model = {"small", 8, 2, 64, 1, ""};
  s.batch = 3;
  s.context = ctx;
  s.hit_rate = 0.5;
  s.prefix_groups = 2;
  s.kv_dtype = kv;
  s.q_dtype = q;
  s.block_size = 16;
  s.seed = 11;
  return s;
}

std::vector<float> round_to(DType t, std::vector<float> values) {
  std::byte b[4];
  for (float& x : values) {
    encode_value(t, x, b);
    x = decode_value(t, b);
  }
  return values;
}

TEST(Reference, RejectsInconsistentWorkloads) {
  Workload w = hand_workload(2, 1, 2, 2, DType::f32, {3}, {1, 0}, 2, 2);
  w.layout.block_tables[1] = 2;  // past the pool
  EXPECT_THROW(reference_decode(w), InputError);
  w.layout.block_tables[1] = 0;
  w.layout.context_lens[0] = 5;  // more tokens than the table covers
  EXPECT_THROW(reference_decode(w), InputError);
  w.layout.context_lens[0] = 3;
  w.k_cache.pop_back();
  EXPECT_THROW(reference_decode(w), InputError);
}

TEST(Reference, SubsetGivesTheSameRows) {
  const WorkloadSpec spec = small_spec(DType::fp8_e5m2, DType::f16, ContextSpec::ragged(1, 200));
  const Workload full = make_workload(spec);
  const std::vector<int> rows = {2, 0};
  const Workload sub = make_workload(spec, full.layout, rows);
  const std::vector<float> ref_full = reference_decode(full);
  const std::vector<float> ref_sub = reference_decode(sub);
  const std::vector<float> unq_full = reference_decode_unquantized(full);
  const std::vector<float> unq_sub = reference_decode_unquantized(sub);
  const std::size_t row = 8 * 64;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t i = 0; i < row; ++i) {
      ASSERT_EQ(ref_sub[r * row + i], ref_full[rows[r] * row + i]);
      ASSERT_EQ(unq_sub[r * row + i], unq_full[rows[r] * row + i]);
    }
  }
}

TEST(Reference, QuantizationErrorOrdersTheDtypes) {
  double err[5];
  const DType dtypes[5] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};
  for (int i = 0; i < 5; ++i) {
    const Workload w = make_workload(small_spec(dtypes[i]));
    err[i] = quantization_error(reference_decode(w), reference_decode_unquantized(w));
  }
  EXPECT_EQ(err[0], 0.0);  // f32 stores the generator's floats exactly
  EXPECT_GT(err[1], 0.0);
  EXPECT_LT(err[1], 2e-3);
  EXPECT_LT(err[1], err[2]);  // 11 significant bits, then 8, 4, 3
  EXPECT_LT(err[2], err[3]);
  EXPECT_LT(err[3], err[4]);
  EXPECT_LT(err[4], 0.25);
  EXPECT_THROW(quantization_error(std::vector<float>(3), std::vector<float>(4)), InputError);
  EXPECT_EQ(quantization_error(std::vector<float>{1, 2}, std::vector<float>{1, 4}), 0.5);
}

TEST(Tolerance, CoversOutputRoundingOfEachQDtype) {
  for (DType q : {DType::f16, DType::bf16}) {
    for (DType kv : {DType::f16, DType::fp8_e4m3}) {
      const Workload w = make_workload(small_spec(kv, q));
      const std::vector<float> ref = reference_decode(w);
      const Comparison c = compare_outputs(round_to(q, ref), ref, 8, 64, tolerance_for(q, kv));
      EXPECT_TRUE(c.ok) << dtype_name(q) << "/" << dtype_name(kv) << ": " << c.report;
      EXPECT_EQ(c.checked, ref.size());
      EXPECT_GT(c.max_abs, 0.0);
    }
  }
}

TEST(Tolerance, PlantedWrongElementIsCaughtWithItsIndex) {
  const Workload w = make_workload(small_spec(DType::f16));
  const std::vector<float> ref = reference_decode(w);
  std::vector<float> out = round_to(DType::f16, ref);
  const std::size_t idx = (1 * 8 + 3) * 64 + 5;  // [1][3][5]
  out[idx] += 0.01f;
  Comparison c = compare_outputs(out, ref, 8, 64, tolerance_for(DType::f16, DType::f16));
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_NE(c.report.find("[1][3][5]"), std::string::npos) << c.report;
  EXPECT_NEAR(c.max_abs, 0.01, 1e-3);

  out = round_to(DType::f16, ref);
  out[7] = std::numeric_limits<float>::quiet_NaN();  // [0][0][7]
  out[ref.size() - 1] = std::numeric_limits<float>::infinity();
  c = compare_outputs(out, ref, 8, 64, Tolerance{1e9, 1e9});  // NaN/inf fail whatever the bound
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 2u);
  EXPECT_NE(c.report.find("[0][0][7] out=nan"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("[2][7][63] out=inf"), std::string::npos) << c.report;

  EXPECT_THROW(compare_outputs(out, std::vector<float>(out.size() - 1), 8, 64, {}), InputError);
}

TEST(Tolerance, DroppedTokenIsCaught) {
  // A kernel that skips the last token of one sequence (an off-by-one in the tail block).
  const Workload w = make_workload(small_spec(DType::f16));
  Workload dropped = w;
  dropped.layout.context_lens[1] -= 1;
  const Comparison c =
      compare_outputs(round_to(DType::f16, reference_decode(dropped)), reference_decode(w), 8, 64,
                      tolerance_for(DType::f16, DType::f16));
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.report.find("  [1]["), std::string::npos) << c.report;
  EXPECT_EQ(c.report.find("  [0]["), std::string::npos) << c.report;  // other rows untouched
  EXPECT_EQ(c.report.find("  [2]["), std::string::npos) << c.report;
}

// ---- window, sinks, soft-cap ----------------------------------------------------------------

// A generated workload of a model with the given variants: ragged contexts around the window so
// some rows are shorter than it, some end mid-block, some start their window mid-block.
Workload variant_workload(int window, bool sinks, double softcap, int block_size = 8) {
  WorkloadSpec s;
  s.model = {"variants", 8, 2, 64, 1, ""};
  if (window > 0) s.model = s.model.with_window(window);
  s.model.sinks = sinks;
  s.model.attn_logit_softcapping = softcap;
  s.batch = 7;
  s.context = ContextSpec::ragged(1, 97);
  s.block_size = block_size;
  s.seed = 11;
  return make_workload(s);
}

// The attention by its definition, one token at a time: every token of the context is looked
// at and weighted by exp(capped score) if it is among the last `window`, else 0; the sink adds
// exp(sink) to the denominator. No running max, no block walk: a different route to the same
// numbers (scores here are O(1), so exp cannot overflow).
std::vector<double> brute_force(const Workload& w) {
  const ModelShape& m = w.spec.model;
  const int hq = m.num_q_heads, hkv = m.num_kv_heads, d = m.head_dim;
  std::vector<double> out(static_cast<std::size_t>(w.rows()) * hq * d, 0.0);
  const auto kv = [&](const std::vector<std::byte>& cache, std::size_t i) {
    return static_cast<double>(decode_value(w.spec.kv_dtype, cache.data() + i * 2));
  };
  for (int r = 0; r < w.rows(); ++r) {
    const int len = w.layout.context_lens[r];
    for (int h = 0; h < hq; ++h) {
      const int kvh = h / (hq / hkv);
      double denom = m.sinks ? std::exp(static_cast<double>(w.sinks[h])) : 0.0;
      std::vector<double> num(static_cast<std::size_t>(d), 0.0);
      for (int t = 0; t < len; ++t) {
        const bool in_window = m.sliding_window == 0 || t >= len - m.sliding_window;
        const std::size_t row =
            (static_cast<std::size_t>(
                 w.layout.block_tables[r * w.layout.max_blocks_per_seq + t / w.spec.block_size]) *
                 hkv +
             kvh) *
                w.spec.block_size * d +
            static_cast<std::size_t>(t % w.spec.block_size) * d;
        double score = 0;
        for (int i = 0; i < d; ++i) {
          score += decode_value(DType::f16, w.q.data() + ((r * hq + h) * d + i) * 2) *
                   kv(w.k_cache, row + i);
        }
        score *= w.softmax_scale;
        if (m.attn_logit_softcapping > 0)
          score = m.attn_logit_softcapping * std::tanh(score / m.attn_logit_softcapping);
        const double weight = in_window ? std::exp(score) : 0.0;
        denom += weight;
        for (int i = 0; i < d; ++i) num[i] += weight * kv(w.v_cache, row + i);
      }
      for (int i = 0; i < d; ++i)
        out[(static_cast<std::size_t>(r) * hq + h) * d + i] = num[i] / denom;
    }
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

TEST(ReferenceVariants, MatchesThePerTokenDefinition) {
  struct Case {
    int window;
    bool sinks;
    double softcap;
  };
  for (const Case c : {Case{20, false, 0}, Case{0, true, 0}, Case{0, false, 1.5},
                       Case{20, true, 1.5}, Case{8, true, 0}, Case{1, false, 0}}) {
    const Workload w = variant_workload(c.window, c.sinks, c.softcap);
    const std::vector<float> ref = reference_decode(w);
    const std::vector<double> want = brute_force(w);
    ASSERT_EQ(ref.size(), want.size());
    EXPECT_LT(max_abs_diff(ref, want), 1e-6)
        << "window " << c.window << " sinks " << c.sinks << " softcap " << c.softcap;
  }
}

// Each variant moves the output by far more than any tolerance, so a reference (or a kernel
// checked against it) that ignored one would be caught.
TEST(ReferenceVariants, EachVariantChangesTheOutput) {
  const std::vector<float> plain = reference_decode(variant_workload(0, false, 0));
  for (const Workload& w : {variant_workload(20, false, 0), variant_workload(0, true, 0),
                            variant_workload(0, false, 1.5)}) {
    const Comparison c =
        compare_outputs(reference_decode(w), plain, 8, 64, tolerance_for(DType::f16, DType::f16));
    EXPECT_FALSE(c.ok) << w.spec.model.attention_summary();
  }
}

TEST(ReferenceVariants, AModelWithMixedLayersIsRefused) {
  Workload w = variant_workload(20, false, 0);
  w.spec.model.window_every = 2;  // half the layers windowed: which one would this step be?
  w.spec.model.num_layers = 2;
  EXPECT_THROW(reference_decode(w), InputError);
}

}  // namespace
}  // namespace decodebench
