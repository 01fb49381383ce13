// The sweep's axes and settings, each written once. Everything that handles them is driven by
// the two tables below: the config reader and its unknown-key check, validate(), to_json(),
// expand() and expansion_size() (sweep_config.cpp), the command-line flags
// (cli/cli_common.cpp) and the key of a point's workload (workload_key(), the runner's
// reference cache).
//
// Long by design: one entry per axis and setting, so that each is written once.
//
// Adding an axis is one entry in kAxes, at the position it takes in the expansion, plus the
// SweepConfig member it reads and the WorkloadSpec (or SweepPoint) field it sets. The
// static_asserts at the end of this file fail to compile when a member or field has no entry,
// and tests/harness/sweep_axes_test.cpp runs every entry through the flags, JSON, validation,
// expansion and the workload key.
//
// E.g. an axis of attention sinks: `std::vector<int> sinks{0};` in SweepConfig, `int sinks = 0;`
// in WorkloadSpec, and an AxisDef<int, WorkloadSpec> with json_key "sinks", flag "--sinks",
// `.values = &SweepConfig::sinks, .field = &WorkloadSpec::sinks`, the int reader and parser and
// a check. What the tables do not reach: the kernels and backends that use the field, and a
// report's per-point record (report/point_result.h, filled by the runner's describe()).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "common/json_in.h"
#include "device/math.h"  // is_power_of_two
#include "harness/sweep_config.h"
#include "workload/workload.h"

namespace decodebench {

// One axis: a list of values in the config, one value of it per point.
//   T      what the config holds (SweepConfig::*values is a std::vector<T>)
//   Target WorkloadSpec (the value shapes the workload, so it is part of workload_key()) or
//          SweepPoint (it does not: the kernel)
//   F      the field it sets; T except for the model (a name in the config, a shape in the
//          point) and the q dtype (auto in the config, a dtype in the point)
//   R      what resolve() makes of a config value, once per sweep; F unless bind() makes the
//          field of it per point (q auto: it depends on the point's scope)
template <class T, class Target_, class F = T, class R = F>
struct AxisDef {
  using Value = T;
  using Target = Target_;
  using Field = F;
  using Resolved = R;
  std::string_view json_key;  // the config file's key
  std::string_view flag;      // the command-line flag: a comma-separated list
  std::string_view help;
  std::vector<T> SweepConfig::*values;
  F Target::*field;
  // One value of the config file (JsonIn's type errors name the key, e.g. 'batch[2]').
  T (*read_json)(const JsonIn&);
  // The flag's whole comma-separated text; errors name the flag and the item.
  std::vector<T> (*parse_flag)(std::string_view text, std::string_view flag);
  // What is wrong with one value, with the valid choices; "" when it is valid. Both the config
  // reader (at the value's key) and validate() report it.
  std::string (*check)(const T&) = nullptr;
  nlohmann::json (*write_json)(const T&);
  // The point values one config value stands for (the model's shape; "all" kernels); null:
  // the value itself.
  void (*resolve)(const T&, std::span<const std::string> all_kernels,
                  std::vector<R>& out) = nullptr;
  // How many points values resolve() makes of one config value, without loading anything;
  // null: 1.
  std::size_t (*count)(const T&, std::size_t num_kernels_for_all) = nullptr;
  // The field of one point from a resolved value that stands for different values at different
  // points (q auto). It may read the settings and the axes before this one in kAxes, which are
  // set by then. Null: the resolved value itself (R is F).
  F (*bind)(const R&, const SweepPoint& p, const SweepConfig& c) = nullptr;
  // A valid value other than the default, as the flag takes it (tests perturb the axis with it).
  std::string_view example;
};

// One scalar setting: one value for the whole sweep.
//   T    the value (get/set reach it in the SweepConfig)
//   CliT what the command-line flag holds (a CLI11 option of that type; bool: a flag)
template <class T, class CliT = T>
struct SettingDef {
  using Value = T;
  using Cli = CliT;
  std::string_view json_key;  // the key inside `group`
  std::string_view group;     // "" (top level) or the sub-object ("measure")
  std::string_view flag;      // "measure" settings have flags only where measuring is asked for
  std::string_view help;
  int members;  // how many SweepConfig (or MeasureOptions) members the setting covers
  T (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, const T&);
  T (*read_json)(const JsonIn&);
  T (*from_cli)(const CliT&) = nullptr;  // null: the flag's value itself
  std::string (*check)(const T&) = nullptr;
  nlohmann::json (*write_json)(const T&);
  std::string_view example;  // as the flag takes it; "" for a flag without a value
};

// --shard i/n as one value.
struct Shard {
  int index = 0;
  int count = 1;
  friend bool operator==(const Shard&, const Shard&) = default;
};

// Shared value readers, writers and flag parsers (sweep_axes.cpp).
namespace axis_values {
std::string read_string(const JsonIn& v);
int read_int(const JsonIn& v);
double read_number(const JsonIn& v);
DType read_dtype(const JsonIn& v);
QDtypeChoice read_q_dtype(const JsonIn& v);  // "auto" or a dtype
ContextSpec read_context(const JsonIn& v);   // 1024, "8k", "512:4096"
Scope read_scope(const JsonIn& v);           // "attention", "layer"
Shard read_shard(const JsonIn& v);           // "i/n"
template <class T>
nlohmann::json plain(const T& v) {
  return v;
}
nlohmann::json dtype(const DType& t);           // "f16"
nlohmann::json q_dtype(const QDtypeChoice& q);  // "auto" or "f16"
nlohmann::json context(const ContextSpec& c);   // 1024 or "512:4096"
nlohmann::json scope(const Scope& s);           // "layer"
}  // namespace axis_values

// "1,8,64" -> {1, 8, 64}. Each parser throws InputError naming the flag and the bad item.
std::vector<std::string> split_list(std::string_view text, std::string_view flag);
std::vector<int> parse_int_list(std::string_view text, std::string_view flag);
std::vector<double> parse_double_list(std::string_view text, std::string_view flag);
// Items as parse_context() takes them ("1024", "8k", "512:4096"); "512-4096" is accepted as a
// spelling of the ragged range "512:4096".
std::vector<ContextSpec> parse_context_list(std::string_view text, std::string_view flag);
std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag);
// Items "auto" or dtype names.
std::vector<QDtypeChoice> parse_q_dtype_list(std::string_view text, std::string_view flag);
std::vector<Scope> parse_scope_list(std::string_view text, std::string_view flag);

// --- the axes ---------------------------------------------------------------------------------
// In expansion order: the first is outermost, the last (batch) innermost, so a batch series is
// contiguous (plots, knees). The flags are listed in --help in this order too.
inline constexpr auto kAxes = std::tuple{
    AxisDef<std::string, WorkloadSpec, ModelShape>{
        .json_key = "model",
        .flag = "--model",
        .help = "Model presets (configs/models) or model JSON paths, e.g. llama-3.1-8b,mistral-7b",
        .values = &SweepConfig::models,
        .field = &WorkloadSpec::model,
        .read_json = axis_values::read_string,
        .parse_flag = split_list,
        .check = [](const std::string& m) -> std::string {
          return m.empty() ? "a model name or path must not be empty" : "";
        },
        .write_json = axis_values::plain<std::string>,
        .resolve = [](const std::string& name, std::span<const std::string>,
                      std::vector<ModelShape>& out) { out.push_back(load_model(name)); },
        .example = "qwen2.5-7b",
    },
    AxisDef<Scope, SweepPoint>{
        .json_key = "scope",
        .flag = "--scope",
        .help = "What a point times: attention (the rung's kernels alone) and/or layer (one "
                "transformer layer's step: the QKV, output and MLP GEMMs around the attention, "
                "and the LM head timed apart)",
        .values = &SweepConfig::scopes,
        .field = &SweepPoint::scope,
        .read_json = axis_values::read_scope,
        .parse_flag = parse_scope_list,
        .write_json = axis_values::scope,
        .example = "layer",
    },
    AxisDef<std::string, SweepPoint>{
        .json_key = "kernel",
        .flag = "--kernel",
        .help = "Kernels: auto (backend's choice per point), all, or names "
                "(see `decodebench kernels`)",
        .values = &SweepConfig::kernels,
        .field = &SweepPoint::kernel,
        .read_json = axis_values::read_string,
        .parse_flag = split_list,
        .check = [](const std::string& k) -> std::string {
          return k.empty() ? "a kernel name must not be empty" : "";
        },
        .write_json = axis_values::plain<std::string>,
        .resolve =
            [](const std::string& k, std::span<const std::string> all_kernels,
               std::vector<std::string>& out) {
              if (k != "all") {
                out.push_back(k);
                return;
              }
              if (all_kernels.empty()) {
                throw InputError(
                    "kernel 'all' needs the backend's kernel list; name the kernels instead");
              }
              out.insert(out.end(), all_kernels.begin(), all_kernels.end());
            },
        .count = [](const std::string& k, std::size_t num_kernels_for_all) -> std::size_t {
          return k == "all" ? num_kernels_for_all : 1;
        },
        .example = "gqa",
    },
    AxisDef<DType, WorkloadSpec>{
        .json_key = "kv_dtype",
        .flag = "--kv-dtype",
        .help =
            "KV dtypes: f16, bf16, fp8_e4m3, fp8_e5m2; on the cpu backend also f32, int8, int4, "
            "int4_token",
        .values = &SweepConfig::kv_dtypes,
        .field = &WorkloadSpec::kv_dtype,
        .read_json = axis_values::read_dtype,
        .parse_flag = parse_dtype_list,
        .write_json = axis_values::dtype,
        .example = "fp8_e4m3",
    },
    AxisDef<QDtypeChoice, WorkloadSpec, DType, QDtypeChoice>{
        .json_key = "q_dtype",
        .flag = "--q-dtype",
        .help = "Q/output (at scope layer: activation) dtypes: auto (the default: at scope "
                "layer the weights' dtype when they are 16-bit, else f16), f16, bf16",
        .values = &SweepConfig::q_dtypes,
        .field = &WorkloadSpec::q_dtype,
        .read_json = axis_values::read_q_dtype,
        .parse_flag = parse_q_dtype_list,
        .check = [](const QDtypeChoice& q) -> std::string {
          if (q.is_auto() || q.dtype == DType::f16 || q.dtype == DType::bf16) return "";
          return fmt::format("q dtype must be auto, f16 or bf16, got {}", q_dtype_name(q));
        },
        .write_json = axis_values::q_dtype,
        .bind =
            [](const QDtypeChoice& q, const SweepPoint& p, const SweepConfig& c) {
              return q.dtype ? *q.dtype : auto_q_dtype(p.scope, c.weights_dtype);
            },
        .example = "bf16",
    },
    AxisDef<int, WorkloadSpec>{
        .json_key = "block_size",
        .flag = "--block-size",
        .help = "KV block sizes (tokens per block, powers of two), e.g. 16",
        .values = &SweepConfig::block_sizes,
        .field = &WorkloadSpec::block_size,
        .read_json = axis_values::read_int,
        .parse_flag = parse_int_list,
        .check = [](const int& p) -> std::string {
          if (is_power_of_two(p) && p <= 1024) return "";
          return fmt::format(
              "block size must be a power of two in [1, 1024] (e.g. 8, 16, 32), got {}", p);
        },
        .write_json = axis_values::plain<int>,
        .example = "32",
    },
    AxisDef<int, WorkloadSpec>{
        .json_key = "prefix_groups",
        .flag = "--prefix-groups",
        .help = "Prefix groups G >= 1 (sequences join groups round-robin)",
        .values = &SweepConfig::prefix_groups,
        .field = &WorkloadSpec::prefix_groups,
        .read_json = axis_values::read_int,
        .parse_flag = parse_int_list,
        .check = [](const int& g) -> std::string {
          return g >= 1 ? "" : fmt::format("prefix_groups must be >= 1, got {}", g);
        },
        .write_json = axis_values::plain<int>,
        .example = "2",
    },
    AxisDef<double, WorkloadSpec>{
        .json_key = "hit_rate",
        .flag = "--hit-rate",
        .help = "Prefix-hit rates h in [0,1], e.g. 0,0.5,0.9",
        .values = &SweepConfig::hit_rates,
        .field = &WorkloadSpec::hit_rate,
        .read_json = axis_values::read_number,
        .parse_flag = parse_double_list,
        .check = [](const double& h) -> std::string {
          return h >= 0 && h <= 1 ? "" : fmt::format("hit rate must be in [0, 1], got {}", h);
        },
        .write_json = axis_values::plain<double>,
        .example = "0.5",
    },
    AxisDef<ContextSpec, WorkloadSpec>{
        .json_key = "context",
        .flag = "--context",
        .help = "Context lengths: n, nk (n*1024), or ragged lo:hi / lo-hi (uniform per "
                "sequence), e.g. 1024,8k,512-4096",
        .values = &SweepConfig::contexts,
        .field = &WorkloadSpec::context,
        .read_json = axis_values::read_context,
        .parse_flag = parse_context_list,
        .check = [](const ContextSpec& c) -> std::string {
          if (c.lo > 0 && c.hi >= c.lo && (c.kind == ContextSpec::Kind::ragged || c.lo == c.hi)) {
            return "";
          }
          return fmt::format("context must be >= 1 (ragged: 1 <= lo <= hi), got {}",
                             context_label(c));
        },
        .write_json = axis_values::context,
        .example = "9:40",
    },
    AxisDef<int, WorkloadSpec>{
        .json_key = "batch",
        .flag = "--batch",
        .help = "Batch sizes, e.g. 1,8,64",
        .values = &SweepConfig::batches,
        .field = &WorkloadSpec::batch,
        .read_json = axis_values::read_int,
        .parse_flag = parse_int_list,
        .check = [](const int& b) -> std::string {
          return b >= 1 ? "" : fmt::format("batch must be >= 1 (a positive integer), got {}", b);
        },
        .write_json = axis_values::plain<int>,
        .example = "7",
    },
};

// --- the settings -----------------------------------------------------------------------------
// In the order --help lists their flags.
inline constexpr auto kSettings = std::tuple{
    SettingDef<std::string>{
        .json_key = "backend",
        .group = "",
        .flag = "--backend",
        .help = "Backend: auto (cuda when a GPU is present, else cpu), cpu, emu, cuda",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.backend; },
        .set = [](SweepConfig& c, const std::string& v) { c.backend = v; },
        .read_json = axis_values::read_string,
        .write_json = axis_values::plain<std::string>,
        .example = "cpu",
    },
    SettingDef<DType, std::string>{
        .json_key = "weights_dtype",
        .group = "",
        .flag = "--weights-dtype",
        .help = "Layer scope: the weights' dtype, bf16, f16 or fp8_e4m3 (default bf16; 16-bit "
                "weights take activations of their type: --q-dtype auto or the same)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.weights_dtype; },
        .set = [](SweepConfig& c, const DType& v) { c.weights_dtype = v; },
        .read_json = axis_values::read_dtype,
        .from_cli = [](const std::string& text) { return parse_dtype(text, "--weights-dtype"); },
        .check = [](const DType& t) -> std::string {
          if (t == DType::bf16 || t == DType::f16 || t == DType::fp8_e4m3) return "";
          return fmt::format("weights dtype must be bf16, f16 or fp8_e4m3, got {}", dtype_name(t));
        },
        .write_json = axis_values::dtype,
        .example = "f16",
    },
    SettingDef<Shard, std::string>{
        .json_key = "shard",
        .group = "",
        .flag = "--shard",
        .help = "Run shard i of n of the points (index % n == i), e.g. 0/4",
        .members = 2,  // shard_index, shard_count
        .get =
            [](const SweepConfig& c) {
              return Shard{c.shard_index, c.shard_count};
            },
        .set =
            [](SweepConfig& c, const Shard& v) {
              c.shard_index = v.index;
              c.shard_count = v.count;
            },
        .read_json = axis_values::read_shard,
        .from_cli =
            [](const std::string& text) {
              Shard s;
              parse_shard(text, s.index, s.count);
              return s;
            },
        .check = [](const Shard& s) -> std::string {
          if (s.count >= 1 && s.index >= 0 && s.index < s.count) return "";
          return fmt::format("shard {}/{} is not valid: need n >= 1 and 0 <= i < n", s.index,
                             s.count);
        },
        .write_json = [](const Shard& s) -> nlohmann::json {
          return fmt::format("{}/{}", s.index, s.count);
        },
        .example = "1/2",
    },
    SettingDef<std::uint64_t>{
        .json_key = "seed",
        .group = "",
        .flag = "--seed",
        .help = "Seed of the workload generator",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.seed; },
        .set = [](SweepConfig& c, const std::uint64_t& v) { c.seed = v; },
        .read_json = [](const JsonIn& v) { return v.uint64(); },
        .write_json = axis_values::plain<std::uint64_t>,
        .example = "7",
    },
    SettingDef<double>{
        .json_key = "min_time_s",
        .group = "measure",
        .flag = "--min-time",
        .help = "Stop rule: at least this many seconds of samples (default 0.5)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.measure.min_time_s; },
        .set = [](SweepConfig& c, const double& v) { c.measure.min_time_s = v; },
        .read_json = axis_values::read_number,
        .check = [](const double& v) -> std::string {
          if (std::isfinite(v) && v >= 0) return "";
          return fmt::format("measure.min_time_s must be a finite number of seconds >= 0, got {}",
                             v);
        },
        .write_json = axis_values::plain<double>,
        .example = "0.25",
    },
    SettingDef<double>{
        .json_key = "max_noise",
        .group = "measure",
        .flag = "--max-noise",
        .help = "Stop rule: relative noise of the median at most this fraction (default 0.005)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.measure.max_noise; },
        .set = [](SweepConfig& c, const double& v) { c.measure.max_noise = v; },
        .read_json = axis_values::read_number,
        .check = [](const double& v) -> std::string {
          if (std::isfinite(v) && v >= 0) return "";
          return fmt::format(
              "measure.max_noise must be a finite fraction >= 0 (0.005 = 0.5 %), got {}", v);
        },
        .write_json = axis_values::plain<double>,
        .example = "0.02",
    },
    SettingDef<int>{
        .json_key = "min_samples",
        .group = "measure",
        .flag = "--min-samples",
        .help = "Stop rule: at least this many samples (default 10)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.measure.min_samples; },
        .set = [](SweepConfig& c, const int& v) { c.measure.min_samples = v; },
        .read_json = axis_values::read_int,
        .check = [](const int& v) -> std::string {
          return v >= 1 ? "" : fmt::format("measure.min_samples must be >= 1, got {}", v);
        },
        .write_json = axis_values::plain<int>,
        .example = "3",
    },
    SettingDef<double>{
        .json_key = "timeout_s",
        .group = "measure",
        .flag = "--timeout",
        .help = "Per-point time limit in seconds; stops sampling (default 10)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.measure.timeout_s; },
        .set = [](SweepConfig& c, const double& v) { c.measure.timeout_s = v; },
        .read_json = axis_values::read_number,
        .check = [](const double& v) -> std::string {
          if (std::isfinite(v) && v > 0) return "";
          return fmt::format("measure.timeout_s must be a finite number of seconds > 0, got {}", v);
        },
        .write_json = axis_values::plain<double>,
        .example = "2",
    },
    SettingDef<bool>{
        .json_key = "warm_l2",
        .group = "measure",
        .flag = "--warm",
        .help = "Do not flush the caches before each sample (GPU: L2, CPU: last-level cache)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.measure.warm_l2; },
        .set = [](SweepConfig& c, const bool& v) { c.measure.warm_l2 = v; },
        .read_json = [](const JsonIn& v) { return v.boolean(); },
        .write_json = axis_values::plain<bool>,
        .example = "",
    },
    SettingDef<int>{
        .json_key = "validate_max_rows",
        .group = "",
        .flag = "--validate-rows",
        .help = "Validate all sequences up to this batch, else this many evenly spaced ones "
                "(default 64)",
        .members = 1,
        .get = [](const SweepConfig& c) { return c.validate_max_rows; },
        .set = [](SweepConfig& c, const int& v) { c.validate_max_rows = v; },
        .read_json = axis_values::read_int,
        .check = [](const int& v) -> std::string {
          return v >= 1 ? "" : fmt::format("validate_max_rows must be >= 1, got {}", v);
        },
        .write_json = axis_values::plain<int>,
        .example = "5",
    },
};

// Keys a config file may have besides the axes and settings (a sweep's own documentation).
inline constexpr std::string_view kConfigDocKeys[] = {"name", "description"};

// Calls fn(entry) for every axis / setting, in table order.
template <class Fn>
constexpr void for_each_axis(Fn&& fn) {
  std::apply([&](const auto&... axis) { (fn(axis), ...); }, kAxes);
}
template <class Fn>
constexpr void for_each_setting(Fn&& fn) {
  std::apply([&](const auto&... setting) { (fn(setting), ...); }, kSettings);
}

// Whether an axis shapes the workload (and so is part of workload_key()).
template <class Axis>
inline constexpr bool kShapesWorkload =
    std::is_same_v<typename std::remove_cvref_t<Axis>::Target, WorkloadSpec>;

// The field an axis sets in a point.
template <class Axis>
auto& axis_field(SweepPoint& p, const Axis& axis) {
  if constexpr (kShapesWorkload<Axis>) {
    return p.spec.*axis.field;
  } else {
    return p.*axis.field;
  }
}
template <class Axis>
const auto& axis_field(const SweepPoint& p, const Axis& axis) {
  if constexpr (kShapesWorkload<Axis>) {
    return p.spec.*axis.field;
  } else {
    return p.*axis.field;
  }
}

// Identifies a workload: every field of the spec that shapes the generated data (each axis
// that sets a WorkloadSpec field, and the seed). Equal keys, equal inputs and reference.
std::string workload_key(const WorkloadSpec& spec);

// --- every member has an entry ----------------------------------------------------------------
namespace detail {
// Counts the members of an aggregate: the most initializers T{...} takes.
struct AnyInit {
  template <class T>
  operator T() const;
};
template <class T, class... Inits>
constexpr std::size_t field_count() {
  if constexpr (requires { T{Inits{}..., AnyInit{}}; }) {
    return field_count<T, Inits..., AnyInit>();
  } else {
    return sizeof...(Inits);
  }
}
constexpr std::size_t kNumAxes = std::tuple_size_v<decltype(kAxes)>;
template <class Target>
constexpr std::size_t axes_setting() {
  std::size_t n = 0;
  for_each_axis([&](const auto& a) {
    n += std::is_same_v<typename std::remove_cvref_t<decltype(a)>::Target, Target>;
  });
  return n;
}
constexpr std::size_t setting_members(std::string_view group) {
  std::size_t n = 0;
  for_each_setting([&](const auto& s) { n += s.group == group ? s.members : 0; });
  return n;
}
// An axis whose point field is not its config value has resolve (the model: name -> shape) or
// bind (q: auto -> the point's dtype), whichever conversion its types name.
constexpr bool every_converting_axis_resolves() {
  bool ok = true;
  for_each_axis([&](const auto& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if constexpr (!std::is_same_v<typename A::Value, typename A::Resolved>) {
      ok = ok && a.resolve != nullptr;
    }
    if constexpr (!std::is_same_v<typename A::Resolved, typename A::Field>) {
      ok = ok && a.bind != nullptr;
    }
  });
  return ok;
}
}  // namespace detail

static_assert(detail::field_count<SweepConfig>() ==
                  detail::kNumAxes + detail::setting_members("") + /*measure=*/1,
              "a SweepConfig member has no entry in kAxes or kSettings (sweep_axes.h)");
static_assert(detail::field_count<MeasureOptions>() == detail::setting_members("measure"),
              "a MeasureOptions member has no \"measure\" entry in kSettings (sweep_axes.h)");
static_assert(detail::field_count<WorkloadSpec>() ==
                  detail::axes_setting<WorkloadSpec>() + /*seed=*/1,
              "a WorkloadSpec field is set by no axis in kAxes (sweep_axes.h)");
static_assert(detail::field_count<SweepPoint>() ==
                  detail::axes_setting<SweepPoint>() + /*spec, index=*/2,
              "a SweepPoint field is set by no axis in kAxes (sweep_axes.h)");
// detail::every_converting_axis_resolves() is checked by sweep_axes_test.cpp, not here: under
// -fsanitize=undefined GCC cannot compare a function pointer with nullptr at compile time.

}  // namespace decodebench
