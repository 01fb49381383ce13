// Layer-scope rows: a row's bytes are its weights, KV and activations and its time the sum of its
// stages; the kinds' KV at a shared prefix; the knee of a series built by hand; a model that
// does not fit gets no rows.
#include "calculator/layer_calc.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "support/host_test_util.h"  // expect_input_error

namespace decodebench::calculator {
namespace {

using decodebench::test::expect_input_error;

Request request(const std::string& model, std::vector<double> hit_rates, std::vector<int> batches) {
  Request r;
  r.models = {model};
  r.contexts = {ContextSpec::fixed(8192)};
  r.kv_dtypes = {DType::f16};
  r.hit_rates = std::move(hit_rates);
  r.batches = std::move(batches);
  r.kinds.assign(std::begin(kKernelKinds), std::end(kKernelKinds));
  return r;
}

Roofs h200() { return roofs_from_datasheet(resolve_device("h200"), DType::bf16); }

TEST(LayerRows, BytesAreWeightsKvAndActivationsAndTimeIsTheStagesSum) {
  const LayerResult l = layer_rows(request("llama-3.1-8b", {0, 0.9}, {1, 16}), h200());
  ASSERT_EQ(l.rows.size(), 2u * 2u * 3u);  // hit rates x batches x kinds
  EXPECT_EQ(l.activation_dtype, DType::bf16);
  for (const LayerRow& r : l.rows) {
    SCOPED_TRACE(r.kernel_kind + " h=" + std::to_string(r.hit_rate) +
                 " b=" + std::to_string(r.batch));
    EXPECT_EQ(r.bytes_step, r.weight_bytes_step + r.kv_streamed_step + r.activation_bytes_step);
    EXPECT_EQ(r.weight_bytes_step, 32.0 * 436207616 + 1050673152);  // every layer + the LM head
    EXPECT_EQ(r.kv_streamed_step, r.prefix_aware ? r.kv_unique_step : r.kv_logical_step);
    ASSERT_EQ(r.layer_stages.size(), 5u);
    EXPECT_EQ(r.layer_stages[1].stage, LayerStage::attention);
    double layer_bytes = 0, layer_t = 0;
    for (const StageTime& s : r.layer_stages) {
      layer_bytes += s.bytes;
      layer_t += s.t_s;
      EXPECT_EQ(s.t_s, std::max(s.bytes / 4.8e12, s.flops / s.flop_roof));
    }
    EXPECT_NEAR(32 * layer_bytes + r.lm_head.bytes, r.bytes_step, 1e-6 * r.bytes_step);
    EXPECT_NEAR(r.t_step_s, 32 * layer_t + r.lm_head.t_s, 1e-12 * r.t_step_s);
    EXPECT_DOUBLE_EQ(r.tokens_per_s, r.batch / r.t_step_s);
    EXPECT_NEAR(r.weight_share + r.kv_share, 1 - r.activation_bytes_step / r.bytes_step, 1e-12);
  }
  // At h = 0.9 (16 sequences, one group) cascade reads the shared prefix once.
  const LayerRow& cascade = l.rows.back();
  const LayerRow& tensor = l.rows[l.rows.size() - 2];
  ASSERT_EQ(cascade.kernel_kind, "cascade");
  ASSERT_EQ(cascade.batch, 16);
  EXPECT_LT(cascade.kv_streamed_step, 0.2 * tensor.kv_streamed_step);
  EXPECT_GT(cascade.tokens_per_s, tensor.tokens_per_s);
}

TEST(LayerRows, AModelThatDoesNotFitGetsNoRows) {
  const LayerResult l = layer_rows(request("llama-3.1-70b", {0}, {1, 2}), h200());
  EXPECT_TRUE(l.rows.empty());
  EXPECT_TRUE(l.series.empty());
  ASSERT_EQ(l.not_fitting.size(), 1u);
  EXPECT_EQ(l.not_fitting[0].devices_needed, 2);
}

TEST(LayerRows, BadInput) {
  Request r = request("llama-3.1-8b", {0}, {1});
  r.weights_bytes = -1;
  expect_input_error([&] { layer_rows(r, h200()); }, {"--weights-bytes", ">= 0"});
  r = request("llama-3.1-8b", {0}, {1});
  r.q_dtype = DType::f16;  // bf16 weights take bf16 activations only
  expect_input_error([&] { layer_rows(r, h200()); }, {"--scope layer"});
}

// Rows of one series given out of order with a repeated batch: sorted, made distinct, the knee
// the first batch at 90 % of the plateau (320 at batch 8: 288), i.e. batch 4.
TEST(FindKnees, ASeriesByHand) {
  std::vector<LayerRow> rows;
  const std::pair<int, double> points[] = {{4, 300}, {1, 100}, {2, 190}, {8, 320}, {4, 300}};
  for (const auto& [batch, tps] : points) {
    LayerRow r;
    r.series = 0;
    r.batch = batch;
    r.tokens_per_s = tps;
    r.max_batch = batch == 4 ? std::optional<std::int64_t>(6) : std::nullopt;
    rows.push_back(r);
  }
  LayerRow lone;
  lone.series = 1;
  lone.batch = 1;
  rows.push_back(lone);
  std::vector<Series> series(2);
  find_knees(series, rows);
  ASSERT_EQ(series[0].rows.size(), 4u);
  std::vector<int> batches;
  for (std::size_t i : series[0].rows) batches.push_back(rows[i].batch);
  EXPECT_EQ(batches, (std::vector<int>{1, 2, 4, 8}));
  ASSERT_TRUE(series[0].knee);
  EXPECT_EQ(series[0].knee->knee_batch, 4);
  EXPECT_EQ(series[0].knee->plateau, 320);
  EXPECT_EQ(series[0].knee->plateau_batch, 8);
  ASSERT_TRUE(series[0].at_knee);
  EXPECT_EQ(rows[*series[0].at_knee].batch, 4);
  EXPECT_EQ(series[0].max_batch, 6);  // the knee row's
  EXPECT_FALSE(series[1].knee);       // one batch: no knee
}

TEST(LayerRows, EachSeriesKneeIsItsRowsKnee) {
  const LayerResult l =
      layer_rows(request("llama-3.1-8b", {0}, {1, 2, 4, 8, 16, 32, 64, 128, 256}), h200());
  ASSERT_EQ(l.series.size(), 3u);
  for (const Series& s : l.series) {
    ASSERT_TRUE(s.knee) << s.kernel_kind;
    // h = 0, every kind reads the same: the knee of docs/design.md, batch 128.
    EXPECT_EQ(s.knee->knee_batch, 128) << s.kernel_kind;
    EXPECT_EQ(s.max_batch, 116) << s.kernel_kind;
    for (std::size_t i : s.rows) EXPECT_EQ(l.rows[i].kernel_kind, s.kernel_kind);
  }
}

}  // namespace
}  // namespace decodebench::calculator
