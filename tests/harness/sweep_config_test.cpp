// Sweep configs: expansion order and sizes, sharding, config errors, round trip.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "harness/sweep_config.h"
#include "support/host_test_util.h"

#include <fmt/format.h>

namespace decodebench {
namespace {

using test::TempDir;

SweepConfig small_config() {
  SweepConfig c;
  c.models = {"llama-3.1-8b", "qwen2.5-7b"};
  c.batches = {1, 8, 64};
  c.contexts = {ContextSpec::fixed(1024), ContextSpec::ragged(512, 4096)};
  c.hit_rates = {0, 0.5};
  c.kv_dtypes = {DType::f16, DType::fp8_e4m3};
  c.kernels = {"auto"};
  return c;
}

using test::expect_input_error;

TEST(Expand, SizeIsTheProductOfTheAxes) {
  const SweepConfig c = small_config();
  const auto points = expand(c);
  EXPECT_EQ(points.size(), 2u * 3 * 2 * 2 * 2);
  EXPECT_EQ(points.size(), expansion_size(c));
}

TEST(Expand, OrderIsModelKernelDtypeThenHitRateContextBatchInnermost) {
  const auto points = expand(small_config());
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].index, static_cast<int>(i));
  // Batch innermost.
  EXPECT_EQ(points[0].spec.batch, 1);
  EXPECT_EQ(points[1].spec.batch, 8);
  EXPECT_EQ(points[2].spec.batch, 64);
  // Then context.
  EXPECT_EQ(points[3].spec.context.kind, ContextSpec::Kind::ragged);
  EXPECT_EQ(points[3].spec.context.lo, 512);
  EXPECT_EQ(points[3].spec.batch, 1);
  // Then hit rate (after 2 contexts x 3 batches).
  EXPECT_EQ(points[5].spec.hit_rate, 0.0);
  EXPECT_EQ(points[6].spec.hit_rate, 0.5);
  // Then kv dtype (after 2 hit rates x 6).
  EXPECT_EQ(points[11].spec.kv_dtype, DType::f16);
  EXPECT_EQ(points[12].spec.kv_dtype, DType::fp8_e4m3);
  // Model outermost.
  EXPECT_EQ(points[23].spec.model.name, "llama-3.1-8b");
  EXPECT_EQ(points[24].spec.model.name, "qwen2.5-7b");
  EXPECT_EQ(points[24].spec.model.num_kv_heads, 4);
  for (const auto& p : points) {
    EXPECT_EQ(p.kernel, "auto");
    EXPECT_EQ(p.spec.seed, 0u);
  }
}

TEST(Expand, AllExpandsToTheBackendsKernels) {
  SweepConfig c = small_config();
  c.models = {"llama-3.1-8b"};
  c.kernels = {"all"};
  const auto points = expand(c, {"naive", "gqa"});
  ASSERT_EQ(points.size(), 2u * 24);
  EXPECT_EQ(points[0].kernel, "naive");
  EXPECT_EQ(points[24].kernel, "gqa");
  expect_input_error([&] { expand(c); }, {"all"});
}

TEST(Expand, ShardsPartitionThePoints) {
  SweepConfig c = small_config();
  const auto all = expand(c);
  for (int n : {1, 2, 3, 5, 7, 100}) {
    std::multiset<int> seen;
    for (int i = 0; i < n; ++i) {
      c.shard_index = i;
      c.shard_count = n;
      for (const auto& p : expand(c)) {
        EXPECT_EQ(p.index % n, i);
        // Same point as in the unsharded expansion.
        EXPECT_EQ(p.spec.batch, all[p.index].spec.batch);
        EXPECT_EQ(p.spec.hit_rate, all[p.index].spec.hit_rate);
        seen.insert(p.index);
      }
    }
    ASSERT_EQ(seen.size(), all.size()) << "n=" << n;
    for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(seen.count(static_cast<int>(i)), 1u);
  }
}

// The q dtype of the points of `c`, in expansion order.
std::vector<DType> q_dtypes_of(const SweepConfig& c) {
  std::vector<DType> out;
  for (const SweepPoint& p : expand(c)) out.push_back(p.spec.q_dtype);
  return out;
}

// Left out, the q dtype is auto: a layer point's activations are its 16-bit weights' type (bf16
// by default) and an attention point's q is f16. Before, the default was f16 at both scopes, so
// every layer point of a default sweep was skipped against the bf16 weights.
TEST(Expand, DefaultQDtypeIsTheLayersWeightsTypeAndF16ForTheAttention) {
  SweepConfig c;
  c.scopes = {Scope::attention, Scope::layer};
  EXPECT_EQ(c.q_dtypes, std::vector<QDtypeChoice>{QDtypeChoice::automatic()});
  EXPECT_EQ(q_dtypes_of(c), (std::vector<DType>{DType::f16, DType::bf16}));
  c.weights_dtype = DType::f16;
  EXPECT_EQ(q_dtypes_of(c), (std::vector<DType>{DType::f16, DType::f16}));
  // fp8 weights take either activation type: q stays f16.
  c.weights_dtype = DType::fp8_e4m3;
  EXPECT_EQ(q_dtypes_of(c), (std::vector<DType>{DType::f16, DType::f16}));
  EXPECT_EQ(auto_q_dtype(Scope::layer, DType::bf16), DType::bf16);
  EXPECT_EQ(auto_q_dtype(Scope::attention, DType::bf16), DType::f16);
}

// A q dtype that is named is run as named at every scope, never replaced by the weights' type (a
// layer that cannot take it is skipped with the reason: layer_step_test).
TEST(Expand, ANamedQDtypeIsKept) {
  SweepConfig c;
  c.scopes = {Scope::attention, Scope::layer};
  c.q_dtypes = {DType::f16};
  EXPECT_EQ(q_dtypes_of(c), (std::vector<DType>{DType::f16, DType::f16}));
  c.q_dtypes = {DType::bf16};
  c.weights_dtype = DType::f16;
  EXPECT_EQ(q_dtypes_of(c), (std::vector<DType>{DType::bf16, DType::bf16}));
  // auto next to a dtype: a point of each, q inside scope.
  c.weights_dtype = DType::bf16;
  c.q_dtypes = {QDtypeChoice::automatic(), DType::f16};
  EXPECT_EQ(q_dtypes_of(c), (std::vector<DType>{DType::f16, DType::f16, DType::bf16, DType::f16}));
  EXPECT_EQ(expansion_size(c), 4u);
}

TEST(ParseContext, AcceptsLengthsKilosAndRanges) {
  EXPECT_EQ(parse_context("1024").lo, 1024);
  EXPECT_EQ(parse_context("8k").lo, 8192);
  EXPECT_EQ(parse_context("8k").kind, ContextSpec::Kind::fixed);
  const ContextSpec r = parse_context("1k:32K");
  EXPECT_EQ(r.kind, ContextSpec::Kind::ragged);
  EXPECT_EQ(r.lo, 1024);
  EXPECT_EQ(r.hi, 32768);
  for (const char* bad : {"", "abc", "12x", "1:", ":5", "1:2:3", "99999999999"}) {
    expect_input_error([&] { parse_context(bad); }, {"context", "lo:hi"});
  }
}

TEST(ParseShard, ChecksRange) {
  int i = -1, n = -1;
  parse_shard("2/4", i, n);
  EXPECT_EQ(i, 2);
  EXPECT_EQ(n, 4);
  for (const char* bad : {"4/4", "-1/4", "0/0", "1", "a/b", "1/2/3"}) {
    expect_input_error([&] { parse_shard(bad, i, n); }, {"shard"});
  }
}

TEST(LoadSweepConfig, ReadsEveryKey) {
  TempDir dir;
  const auto file = dir.write("s.json", R"({
    "name": "test", "description": "every key",
    "model": "llama-3.1-8b", "batch": [1, 7], "context": [15, "1k", "8:97"],
    "hit_rate": [0, 1], "prefix_groups": 2, "kv_dtype": ["fp16", "e4m3"], "q_dtype": "bf16",
    "block_size": [8, 32], "kernel": ["gqa"], "backend": "cpu", "seed": 42,
    "validate_max_rows": 5, "shard": "1/3",
    "measure": {"min_samples": 3, "min_time_s": 0.01, "max_noise": 0.02, "timeout_s": 2,
                "warm_l2": true}})");
  const SweepConfig c = load_sweep_config(file);
  EXPECT_EQ(c.models, std::vector<std::string>{"llama-3.1-8b"});
  EXPECT_EQ(c.batches, (std::vector<int>{1, 7}));
  ASSERT_EQ(c.contexts.size(), 3u);
  EXPECT_EQ(c.contexts[1].lo, 1024);
  EXPECT_EQ(c.contexts[2].kind, ContextSpec::Kind::ragged);
  EXPECT_EQ(c.contexts[2].hi, 97);
  EXPECT_EQ(c.prefix_groups, std::vector<int>{2});
  EXPECT_EQ(c.kv_dtypes, (std::vector<DType>{DType::f16, DType::fp8_e4m3}));
  EXPECT_EQ(c.q_dtypes, std::vector<QDtypeChoice>{DType::bf16});
  EXPECT_EQ(c.block_sizes, (std::vector<int>{8, 32}));
  EXPECT_EQ(c.kernels, std::vector<std::string>{"gqa"});
  EXPECT_EQ(c.backend, "cpu");
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.validate_max_rows, 5);
  EXPECT_EQ(c.shard_index, 1);
  EXPECT_EQ(c.shard_count, 3);
  EXPECT_EQ(c.measure.min_samples, 3);
  EXPECT_DOUBLE_EQ(c.measure.min_time_s, 0.01);
  EXPECT_DOUBLE_EQ(c.measure.max_noise, 0.02);
  EXPECT_DOUBLE_EQ(c.measure.timeout_s, 2);
  EXPECT_TRUE(c.measure.warm_l2);
}

TEST(LoadSweepConfig, ToJsonRoundTripsAndIsItselfAConfig) {
  SweepConfig c = small_config();
  c.seed = 7;
  c.shard_index = 1;
  c.shard_count = 2;
  c.measure.warm_l2 = true;
  c.q_dtypes = {DType::bf16};
  TempDir dir;
  const auto file = dir.write("c.json", to_json(c).dump(2));
  EXPECT_EQ(load_sweep_config(file), c);
  EXPECT_EQ(sweep_config_from_json(to_json(c), "x"), c);
}

// A report's config reruns the same sweep: auto is written as "auto" and read back as auto (not
// as the dtype it gave), and a config file may write it itself.
TEST(LoadSweepConfig, AutoQDtypeRoundTripsAsAuto) {
  SweepConfig c;
  c.scopes = {Scope::attention, Scope::layer};
  EXPECT_EQ(to_json(c).at("q_dtype"), nlohmann::json::array({"auto"}));
  const SweepConfig back = sweep_config_from_json(to_json(c), "x");
  EXPECT_EQ(back, c);
  EXPECT_EQ(q_dtypes_of(back), (std::vector<DType>{DType::f16, DType::bf16}));
  c.q_dtypes = {QDtypeChoice::automatic(), DType::f16};
  EXPECT_EQ(to_json(c).at("q_dtype"), nlohmann::json::array({"auto", "f16"}));
  EXPECT_EQ(sweep_config_from_json(to_json(c), "x"), c);
  EXPECT_EQ(parse_sweep_config(R"({"q_dtype": "auto"})", "x"), SweepConfig{});
  EXPECT_EQ(parse_sweep_config(R"({"q_dtype": ["auto", "fp16"]})", "x").q_dtypes,
            (std::vector<QDtypeChoice>{QDtypeChoice::automatic(), DType::f16}));
}

TEST(LoadSweepConfig, LayersOnABase) {
  SweepConfig base = small_config();
  const SweepConfig c = sweep_config_from_json({{"batch", 3}}, "flags", base);
  EXPECT_EQ(c.batches, std::vector<int>{3});
  EXPECT_EQ(c.models, base.models);
}

TEST(LoadSweepConfig, ErrorsNameTheFileAndTheKey) {
  TempDir dir;
  struct Case {
    const char* json;
    std::vector<std::string> expect;  // substrings of the message (besides the file name)
  };
  const std::vector<Case> cases = {
      {R"({"batchs": [1]})", {"batchs", "unknown key", "valid keys", "batch"}},
      {R"({"measure": {"min_time": 1}})", {"measure.min_time", "unknown key", "min_time_s"}},
      {R"({"batch": [1, 0]})", {"batch[1]", "positive"}},
      {R"({"batch": [1, -4]})", {"batch[1]", "-4"}},
      {R"({"batch": [1.5]})", {"batch[0]", "integer"}},
      {R"({"batch": []})", {"batch", "at least one"}},
      {R"({"context": [0]})", {"context[0]", ">= 1"}},
      {R"({"context": ["9:3"]})", {"context[0]", "lo <= hi"}},
      {R"({"context": ["many"]})", {"context[0]", "lo:hi"}},
      {R"({"hit_rate": [0.5, 1.5]})", {"hit_rate[1]", "[0, 1]"}},
      {R"({"hit_rate": -0.1})", {"hit_rate", "[0, 1]"}},
      {R"({"block_size": [16, 24]})", {"block_size[1]", "power of two"}},
      {R"({"prefix_groups": [0]})", {"prefix_groups[0]", ">= 1"}},
      {R"({"kv_dtype": ["int2"]})", {"kv_dtype[0]", "int2", "fp8_e4m3", "int4_token"}},
      {R"({"q_dtype": "fp8_e4m3"})", {"q_dtype", "auto, f16 or bf16"}},
      {R"({"q_dtype": ["auto", "int4"]})", {"q_dtype[1]", "'int4'", "valid: auto, f16, bf16"}},
      {R"({"shard": "3/3"})", {"shard", "0 <= i < n"}},
      {R"({"seed": -1})", {"seed", "non-negative"}},
      {R"({"measure": {"timeout_s": 0}})", {"measure.timeout_s", "> 0"}},
      {R"({"measure": {"min_samples": 0}})", {"measure.min_samples", ">= 1"}},
      {R"({"model": 3})", {"model", "string"}},
      {R"([1, 2])", {"object"}},
      {R"({"batch": [1,)", {"not valid JSON"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto file = dir.write(fmt::format("bad{}.json", i), cases[i].json);
    std::vector<std::string> parts = cases[i].expect;
    parts.push_back(file.string());
    SCOPED_TRACE(cases[i].json);
    try {
      load_sweep_config(file);
      ADD_FAILURE() << "expected InputError for " << cases[i].json;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      for (const auto& p : parts)
        EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    }
  }
  expect_input_error([&] { load_sweep_config(dir.path() / "missing.json"); },
                     {"missing.json", "cannot open"});
}

// Inputs the fuzzer (tests/fuzz/fuzz_sweep_config) is there to keep out: a number beyond double
// escaped as nlohmann's out_of_range, not InputError; deep nesting overflowed the stack in
// whatever copied or printed the value.
TEST(ParseSweepConfig, HostileTextIsAnInputError) {
  const auto message = [](const std::string& text) {
    try {
      parse_sweep_config(text, "x.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no InputError)");
  };
  std::string msg = message(R"({"hit_rate": 1e400})");
  EXPECT_NE(msg.find("x.json: not valid JSON"), std::string::npos) << msg;
  msg = message(R"({"batch": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_NE(msg.find("nested deeper than"), std::string::npos) << msg;
  msg = message("[1]");
  EXPECT_NE(msg.find("expected a JSON object"), std::string::npos) << msg;
  // Comments are allowed in a config file, as load_sweep_config always allowed them.
  EXPECT_EQ(parse_sweep_config("// the default\n{}", "x.json"), SweepConfig{});
}

TEST(Validate, ListsEveryProblemWithTheValidChoices) {
  SweepConfig c;
  c.batches = {0};
  c.hit_rates = {2};
  c.block_sizes = {12};
  c.prefix_groups = {0};
  c.contexts = {ContextSpec::fixed(0)};
  c.q_dtypes = {DType::fp8_e5m2};
  c.kernels = {};
  c.shard_index = 2;
  c.shard_count = 2;
  expect_input_error([&] { validate(c); },
                     {"batch must be >= 1", "hit rate must be in [0, 1]", "power of two",
                      "prefix_groups must be >= 1", "context must be >= 1", "f16 or bf16",
                      "axis 'kernel' is empty", "shard 2/2"});
  EXPECT_NO_THROW(validate(SweepConfig{}));
}

TEST(Expand, UnknownModelListsPresets) {
  SweepConfig c;
  c.models = {"llama-9"};
  expect_input_error([&] { expand(c); }, {"llama-9", "llama-3.1-8b"});
}

TEST(ShippedConfigs, EverySweepInConfigsLoadsAndExpands) {
  const auto dir = configs_dir() / "sweeps";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    // A replay's table (trace-*.json: `decodebench replay --config`, keys its options, a trace
    // among them) is no sweep; tests/cli/cli_replay_test.cpp runs those.
    {
      std::ifstream in(e.path());
      if (nlohmann::json::parse(in).contains("trace")) continue;
    }
    const SweepConfig c = load_sweep_config(e.path());
    const auto points = expand(c, {"naive", "gqa", "pipelined", "split_kv"});
    EXPECT_FALSE(points.empty());
    // Each names its q dtype, so its points are those it had before auto was the default.
    for (const QDtypeChoice& q : c.q_dtypes) EXPECT_FALSE(q.is_auto());
    ++n;
  }
  EXPECT_GE(n, 4);  // default, cpu-target, gpu-check, smoke
  const SweepConfig target = load_sweep_config(dir / "cpu-target.json");
  EXPECT_EQ(expansion_size(target), 1u);
  EXPECT_EQ(target.batches, std::vector<int>{8});
  EXPECT_EQ(target.contexts[0].lo, 8192);
}

}  // namespace
}  // namespace decodebench
