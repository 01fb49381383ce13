// Every axis and setting of harness/sweep_axes.h, run through the command-line flags, the JSON
// config (reader, writer, unknown keys), validate(), expand()/expansion_size() and the workload
// key: an entry that one of them misses fails here. A struct member without an entry fails to
// compile (the static_asserts of sweep_axes.h). Also pins the flags and the resolved config
// JSON to what they were before the tables.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "common/errors.h"
#include "harness/sweep_axes.h"

namespace decodebench::cli {
namespace {

using nlohmann::json;

// `args` parsed as `decodebench sweep` (measure) or `check` (no measure flags) parses them.
SweepConfig parse_flags(const std::string& args, bool measure = true) {
  CLI::App app;
  SweepFlags flags;
  add_sweep_flags(app, flags, measure);
  app.parse(args, /*program_name_included=*/false);
  return resolve_sweep_config(flags);
}

template <class F>
void expect_input_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// `a` with the value at `group`.`key` (or `key`) taken from `b`.
json with_value_of(json a, const json& b, std::string_view group, std::string_view key) {
  const std::string k(key);
  if (group.empty()) {
    a[k] = b.at(k);
  } else {
    a[std::string(group)][k] = b.at(std::string(group)).at(k);
  }
  return a;
}

TEST(SweepAxes, NoFlagsGiveTheDefaults) { EXPECT_EQ(parse_flags(""), SweepConfig{}); }

TEST(SweepAxes, EveryAxisGoesThroughFlagsJsonValidationExpansionAndTheKey) {
  const SweepConfig base;
  const json base_json = to_json(base);
  int n = 0;
  for_each_axis([&](const auto& axis) {
    SCOPED_TRACE(std::string(axis.json_key));
    ++n;
    // The flag exists and sets this axis, and only this one.
    const SweepConfig c = parse_flags(fmt::format("{} {}", axis.flag, axis.example));
    EXPECT_EQ(c.*axis.values, axis.parse_flag(axis.example, axis.flag));
    EXPECT_NE(c.*axis.values, base.*axis.values) << "the example must differ from the default";
    const json j = to_json(c);
    ASSERT_TRUE(j.contains(std::string(axis.json_key)));
    EXPECT_NE(j, base_json);
    EXPECT_EQ(with_value_of(j, base_json, "", axis.json_key), base_json);
    // The config file reads it back, whole or as the one key.
    EXPECT_EQ(sweep_config_from_json(j, "x"), c);
    const std::string key(axis.json_key);
    EXPECT_EQ(sweep_config_from_json({{key, j.at(key)}}, "x"), c);
    // An empty axis is reported by its key.
    SweepConfig empty = base;
    (empty.*axis.values).clear();
    expect_input_error([&] { validate(empty); }, fmt::format("axis '{}' is empty", axis.json_key));
    // Two values, two points, differing in this axis's field and no other: q is pinned, as
    // auto follows the scope (auto_q_dtype).
    SweepConfig two = base;
    two.q_dtypes = {DType::f16};
    (two.*axis.values).push_back((c.*axis.values).front());
    EXPECT_EQ(expansion_size(two, /*num_kernels_for_all=*/2), 2u);
    const std::vector<SweepPoint> points = expand(two, {"naive", "gqa"});
    ASSERT_EQ(points.size(), 2u);
    EXPECT_EQ(points[1].index, 1);
    const std::string key0 = workload_key(points[0].spec), key1 = workload_key(points[1].spec);
    if constexpr (kShapesWorkload<decltype(axis)>) {
      EXPECT_NE(key0, key1) << "the workload key misses this axis";
    } else {
      EXPECT_NE(axis_field(points[0], axis), axis_field(points[1], axis));
      EXPECT_EQ(key0, key1) << "this axis does not shape the workload";
    }
  });
  EXPECT_EQ(n, 10);
}

TEST(SweepAxes, EverySettingGoesThroughFlagsAndJson) {
  const SweepConfig base;
  const json base_json = to_json(base);
  for_each_setting([&](const auto& s) {
    SCOPED_TRACE(std::string(s.json_key));
    const std::string args =
        s.example.empty() ? std::string(s.flag) : fmt::format("{} {}", s.flag, s.example);
    const SweepConfig c = parse_flags(args);
    EXPECT_FALSE(s.get(c) == s.get(base)) << "the example must differ from the default";
    const json j = to_json(c);
    EXPECT_NE(j, base_json);
    EXPECT_EQ(with_value_of(j, base_json, s.group, s.json_key), base_json);
    EXPECT_EQ(sweep_config_from_json(j, "x"), c);
    // The measurement settings have flags only where measuring is asked for (sweep, not check).
    if (s.group.empty()) {
      EXPECT_EQ(parse_flags(args, /*measure=*/false), c);
    } else {
      EXPECT_THROW(parse_flags(args, /*measure=*/false), CLI::ParseError);
    }
  });
}

// The model axis reads a name and sets a shape: an axis whose point field differs from its
// config value must say how to resolve one into the other.
TEST(SweepAxes, EveryConvertingAxisResolves) {
  EXPECT_TRUE(detail::every_converting_axis_resolves());
}

// The q dtype is auto where neither the command line nor the config file gives it, and what
// was given where either does.
TEST(SweepAxes, QDtypeIsAutoOnlyWhereNotGiven) {
  const std::vector<QDtypeChoice> autos = {QDtypeChoice::automatic()};
  EXPECT_EQ(parse_flags("--scope layer").q_dtypes, autos);
  std::vector<SweepPoint> points = expand(parse_flags("--scope attention,layer"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].spec.q_dtype, DType::f16);
  EXPECT_EQ(points[1].spec.q_dtype, DType::bf16);
  EXPECT_EQ(expand(parse_flags("--scope layer --weights-dtype f16"))[0].spec.q_dtype, DType::f16);

  const SweepConfig named = parse_flags("--scope layer --q-dtype f16");
  EXPECT_EQ(named.q_dtypes, std::vector<QDtypeChoice>{DType::f16});
  EXPECT_EQ(expand(named)[0].spec.q_dtype, DType::f16);
  EXPECT_EQ(parse_flags("--q-dtype auto,bf16").q_dtypes,
            (std::vector<QDtypeChoice>{QDtypeChoice::automatic(), DType::bf16}));
  // configs/sweeps/default.json gives q_dtype f16: the file's value holds at scope layer too.
  const std::string file = (configs_dir() / "sweeps" / "default.json").string();
  EXPECT_EQ(parse_flags(fmt::format("--config '{}' --scope layer", file)).q_dtypes,
            std::vector<QDtypeChoice>{DType::f16});
  EXPECT_EQ(parse_flags(fmt::format("--config '{}' --q-dtype auto", file)).q_dtypes, autos);

  expect_input_error([] { parse_flags("--q-dtype int4"); },
                     "--q-dtype: unknown q dtype 'int4'; valid: auto, f16, bf16");
  expect_input_error([] { validate(parse_flags("--q-dtype fp8_e4m3")); },
                     "q dtype must be auto, f16 or bf16, got fp8_e4m3");
}

TEST(SweepAxes, TheSeedShapesTheWorkload) {
  SweepConfig c;
  const std::string key = workload_key(expand(c).front().spec);
  c.seed = 1;
  EXPECT_NE(workload_key(expand(c).front().spec), key);
}

TEST(SweepAxes, UnknownKeysListTheValidOnes) {
  expect_input_error(
      [] {
        sweep_config_from_json({{"batchs", 1}}, "f.json");
      },
      "f.json: key 'batchs': unknown key; valid keys: model, scope, kernel, kv_dtype, "
      "q_dtype, block_size, prefix_groups, hit_rate, context, batch, backend, weights_dtype, "
      "shard, seed, validate_max_rows, measure, name, description");
  expect_input_error(
      [] {
        sweep_config_from_json({{"measure", {{"warm", true}}}}, "f.json");
      },
      "f.json: key 'measure.warm': unknown key; valid keys: min_time_s, max_noise, "
      "min_samples, timeout_s, warm_l2");
  expect_input_error(
      [] {
        sweep_config_from_json({{"measure", 1}}, "f.json");
      },
      "f.json: key 'measure': expected an object, got number");
}

// The field counter the static_asserts rely on sees one more member.
struct WorkloadSpecPlusOne {
  ModelShape model;
  int batch = 1;
  ContextSpec context;
  double hit_rate = 0;
  int prefix_groups = 1;
  DType kv_dtype = DType::f16;
  DType q_dtype = DType::f16;
  int block_size = 16;
  std::uint64_t seed = 0;
  int num_sinks = 0;
};
static_assert(detail::field_count<WorkloadSpec>() == 9);
static_assert(detail::field_count<WorkloadSpecPlusOne>() == 10);
static_assert(detail::field_count<SweepConfig>() == 17);
static_assert(detail::field_count<MeasureOptions>() == 5);

// --- the same as before the tables ------------------------------------------------------------

// Option names and CLI11 type names of `sweep` (measure) and `check`.
std::map<std::string, std::string> options_of(bool measure) {
  CLI::App app;
  SweepFlags flags;
  add_sweep_flags(app, flags, measure);
  std::map<std::string, std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_name() == "--help") continue;
    out[o->get_name()] = o->get_type_name();
  }
  return out;
}

TEST(SweepAxes, FlagsAndTheirTypesAreThoseOfBefore) {
  std::map<std::string, std::string> check = {
      {"--config", "TEXT"},   {"--model", "TEXT"},         {"--batch", "TEXT"},
      {"--context", "TEXT"},  {"--hit-rate", "TEXT"},      {"--prefix-groups", "TEXT"},
      {"--kv-dtype", "TEXT"}, {"--q-dtype", "TEXT"},       {"--block-size", "TEXT"},
      {"--kernel", "TEXT"},   {"--backend", "TEXT"},       {"--shard", "TEXT"},
      {"--device", "INT"},    {"--seed", "UINT"},          {"--validate-rows", "INT"},
      {"--scope", "TEXT"},    {"--weights-dtype", "TEXT"},  // added with scope layer
  };
  EXPECT_EQ(options_of(/*measure=*/false), check);
  std::map<std::string, std::string> sweep = check;
  sweep.insert({{"--min-time", "FLOAT"},
                {"--max-noise", "FLOAT"},
                {"--min-samples", "INT"},
                {"--timeout", "FLOAT"},
                {"--warm", ""}});
  EXPECT_EQ(options_of(/*measure=*/true), sweep);
}

// What to_json wrote before the tables, for the built-in defaults, configs/sweeps/default.json,
// and default.json under every flag (derived from the code before; dump() compares number
// types too, 0 vs 0.0). One change: the defaults' q_dtype is "auto" (auto_q_dtype), so the
// layer scope's activations follow its weights.
TEST(SweepAxes, ResolvedConfigJsonIsThatOfBefore) {
  EXPECT_EQ(to_json(SweepConfig{}).dump(), json::parse(R"({
    "model": ["llama-3.1-8b"], "batch": [1], "context": [1024], "hit_rate": [0.0],
    "prefix_groups": [1], "kv_dtype": ["f16"], "q_dtype": ["auto"], "block_size": [16],
    "kernel": ["auto"], "backend": "auto", "seed": 0, "validate_max_rows": 64, "shard": "0/1",
    "scope": ["attention"], "weights_dtype": "bf16",
    "measure": {"min_samples": 10, "min_time_s": 0.5, "max_noise": 0.005, "timeout_s": 10.0,
                "warm_l2": false}})")
                                               .dump());

  const std::string file = (configs_dir() / "sweeps" / "default.json").string();
  EXPECT_EQ(to_json(parse_flags(fmt::format("--config '{}'", file))).dump(), json::parse(R"({
    "model": ["llama-3.1-8b"], "batch": [1, 8], "context": [1024, 8192], "hit_rate": [0.0, 0.5],
    "prefix_groups": [1], "kv_dtype": ["f16", "fp8_e4m3"], "q_dtype": ["f16"],
    "block_size": [16], "kernel": ["auto"], "backend": "auto", "seed": 0,
    "validate_max_rows": 64, "shard": "0/1", "scope": ["attention"], "weights_dtype": "bf16",
    "measure": {"min_samples": 10, "min_time_s": 0.3, "max_noise": 0.02, "timeout_s": 4.0,
                "warm_l2": false}})")
                                                                                 .dump());

  const SweepConfig flagged = parse_flags(fmt::format(
      "--config '{}' --model qwen2.5-7b,llama-3.1-8b --batch 2,4 --context 17,9-40,1k "
      "--hit-rate 1,0.25 --prefix-groups 3 --kv-dtype bf16,e4m3 --q-dtype bf16 --block-size 8 "
      "--kernel gqa,all --backend cpu --shard 1/3 --seed 9 --min-time 0.1 --max-noise 0.01 "
      "--min-samples 4 --timeout 2.5 --warm --validate-rows 7",
      file));
  EXPECT_EQ(to_json(flagged).dump(), json::parse(R"({
    "model": ["qwen2.5-7b", "llama-3.1-8b"], "batch": [2, 4], "context": [17, "9:40", 1024],
    "hit_rate": [1.0, 0.25], "prefix_groups": [3], "kv_dtype": ["bf16", "fp8_e4m3"],
    "q_dtype": ["bf16"], "block_size": [8], "kernel": ["gqa", "all"], "backend": "cpu",
    "seed": 9, "validate_max_rows": 7, "shard": "1/3", "scope": ["attention"],
    "weights_dtype": "bf16",
    "measure": {"min_samples": 4, "min_time_s": 0.1, "max_noise": 0.01, "timeout_s": 2.5,
                "warm_l2": true}})")
                                         .dump());
}

// Expansion order and indices of before: the nested loops model > kernel > kv_dtype > q_dtype >
// block_size > prefix_groups > hit_rate > context > batch, shards by index % n.
TEST(SweepAxes, ExpansionIsTheNestedLoopsOfBefore) {
  SweepConfig c;
  c.models = {"llama-3.1-8b", "qwen2.5-7b"};
  c.kernels = {"a", "all"};
  c.kv_dtypes = {DType::f16, DType::bf16};
  c.q_dtypes = {DType::f16, DType::bf16};
  c.block_sizes = {8, 16};
  c.prefix_groups = {1, 2};
  c.hit_rates = {0, 0.5};
  c.contexts = {ContextSpec::fixed(17), ContextSpec::ragged(9, 40)};
  c.batches = {1, 3, 5};
  c.seed = 4;
  const std::vector<std::string> all = {"b", "c"};
  std::vector<SweepPoint> want;
  int index = 0;
  for (const auto& m : c.models)
    for (const auto& k : std::vector<std::string>{"a", "b", "c"})
      for (DType kv : c.kv_dtypes)
        for (const QDtypeChoice& q : c.q_dtypes)
          for (int p : c.block_sizes)
            for (int g : c.prefix_groups)
              for (double h : c.hit_rates)
                for (const auto& ctx : c.contexts)
                  for (int b : c.batches) {
                    SweepPoint pt;
                    pt.spec.model = load_model(m);
                    pt.spec.batch = b;
                    pt.spec.context = ctx;
                    pt.spec.hit_rate = h;
                    pt.spec.prefix_groups = g;
                    pt.spec.kv_dtype = kv;
                    pt.spec.q_dtype = *q.dtype;
                    pt.spec.block_size = p;
                    pt.spec.seed = c.seed;
                    pt.kernel = k;
                    pt.index = index++;
                    want.push_back(pt);
                  }
  EXPECT_EQ(expansion_size(c, all.size()), want.size());
  for (int n : {1, 3}) {
    for (int i = 0; i < n; ++i) {
      c.shard_index = i;
      c.shard_count = n;
      const std::vector<SweepPoint> got = expand(c, all);
      std::size_t j = 0;
      for (const SweepPoint& w : want) {
        if (w.index % n != i) continue;
        ASSERT_LT(j, got.size());
        EXPECT_EQ(got[j].index, w.index);
        EXPECT_EQ(got[j].kernel, w.kernel);
        EXPECT_EQ(got[j].spec.model.name, w.spec.model.name);
        EXPECT_EQ(workload_key(got[j].spec), workload_key(w.spec)) << "index " << w.index;
        ++j;
      }
      EXPECT_EQ(j, got.size());
    }
  }
}

}  // namespace
}  // namespace decodebench::cli
