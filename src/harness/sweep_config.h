// A sweep: the axes of docs/design.md (model x batch x context x hit rate x ... x kernel), how each
// point is measured, and which shard of the points this process runs.
//
// Config file (configs/sweeps/*.json). Every axis takes one value or a list; keys are the
// command-line flag names with '_' for '-'; unknown keys are rejected; all keys optional:
//   {
//     "model":         ["llama-3.1-8b"],          preset names or paths to model JSON
//     "scope":         ["attention"],             "attention" and/or "layer"
//     "batch":         [1, 8, 64],
//     "context":       [1024, "8k", "512:4096"],  n, "nk" (n*1024), or "lo:hi" ragged uniform
//     "hit_rate":      [0, 0.5, 0.9],
//     "prefix_groups": [1],
//     "kv_dtype":      ["f16", "fp8_e4m3"],
//     "q_dtype":       ["auto"],                  "auto" (auto_q_dtype), "f16", "bf16"
//     "block_size":    [16],
//     "kernel":        ["auto"],                  "auto", "all", or names from the backend
//     "backend":       "auto",
//     "weights_dtype": "bf16",                    layer scope: bf16, f16, fp8_e4m3
//     "seed":          0,
//     "validate_max_rows": 64,
//     "shard":         "0/1",
//     "measure": {"min_samples": 10, "min_time_s": 0.5, "max_noise": 0.005,
//                 "timeout_s": 10, "warm_l2": false}
//   }
// to_json(SweepConfig) writes exactly this shape (every key present), so a report's "config" is
// itself a valid config file that reruns the sweep.
//
// The axes and settings are described once, in harness/sweep_axes.h: each has its key, flag,
// parser, check, JSON form and the member below it reads. A member without an entry there does
// not compile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "workload/scope.h"
#include "workload/workload.h"

namespace decodebench {

// The stopping rule (docs/design.md "Timing"), per point: stop once samples >= min_samples AND
// the samples sum to >= min_time_s AND rel_noise (stats.h) <= max_noise; or when timeout_s of
// wall time has passed since the first sample (then at least one sample has been taken).
struct MeasureOptions {
  int min_samples = 10;
  double min_time_s = 0.5;
  double max_noise = 0.005;
  double timeout_s = 10;
  bool warm_l2 = false;  // --warm: no cache flush before each sample (GPU L2, CPU LLC)
  friend bool operator==(const MeasureOptions&, const MeasureOptions&) = default;
};

// One value of the q_dtype axis: f16, bf16, or auto, which stands for auto_q_dtype() of each
// point. Auto is the default so that both scopes run with the defaults (the layer's bf16 weights
// need bf16 activations); a dtype that is named is run as named, and a layer point whose weights
// cannot take it is skipped with the reason.
struct QDtypeChoice {
  std::optional<DType> dtype;  // empty: auto
  constexpr QDtypeChoice() = default;
  // Implicit: a dtype is a choice, so `q_dtypes = {DType::bf16}` reads as it says.
  constexpr QDtypeChoice(DType t) : dtype(t) {}  // NOLINT(google-explicit-constructor)
  static constexpr QDtypeChoice automatic() { return {}; }
  bool is_auto() const { return !dtype.has_value(); }
  friend bool operator==(const QDtypeChoice&, const QDtypeChoice&) = default;
};
std::string_view q_dtype_name(const QDtypeChoice& q);  // "auto", "f16", "bf16"

// The q (and activation) dtype of a point whose q_dtype is auto. At scope layer q is every
// GEMM's activations, and 16-bit weights read them in their own type: the weights' dtype. Scope
// attention, and fp8 weights (which take either), keep f16.
DType auto_q_dtype(Scope scope, DType weights);

// Each member is read and written through its entry in kAxes or kSettings (sweep_axes.h); a
// member without one fails to compile.
struct SweepConfig {
  std::vector<std::string> models{"llama-3.1-8b"};
  std::vector<Scope> scopes{Scope::attention};  // what a point times (layer_model.h)
  std::vector<int> batches{1};
  std::vector<ContextSpec> contexts{ContextSpec::fixed(1024)};
  std::vector<double> hit_rates{0.0};
  std::vector<int> prefix_groups{1};
  std::vector<DType> kv_dtypes{DType::f16};
  std::vector<QDtypeChoice> q_dtypes{QDtypeChoice::automatic()};
  std::vector<int> block_sizes{16};
  std::vector<std::string> kernels{"auto"};  // "auto" (backend's choice per point), "all"
                                             // (every kernel of the backend), or names
  std::string backend = "auto";
  DType weights_dtype = DType::bf16;  // the layer scope's weights
  std::uint64_t seed = 0;
  MeasureOptions measure;
  int shard_index = 0;  // --shard i/n: this process runs the points with index % n == i
  int shard_count = 1;
  int validate_max_rows = 64;  // validate every sequence up to this batch, else a
                               // deterministic subset of this many sequences
  friend bool operator==(const SweepConfig&, const SweepConfig&) = default;
};

// Reads a config file. Throws InputError whose message starts with the file name and names the
// key and the value's check ("configs/sweeps/x.json: key 'batch[2]': batch must be >= 1 (a
// positive integer), got -1"). Unknown keys are rejected with the list of valid keys. The
// result is validate()d.
SweepConfig load_sweep_config(const std::filesystem::path& file);
// The same from the file's text; `source` is what error messages start with.
SweepConfig parse_sweep_config(std::string_view text, std::string_view source);
// The same from parsed JSON; `source` is what error messages start with (a file name or
// "--config"). Keys absent from `j` keep the values of `base`, so a CLI can layer flags on a
// file: sweep_config_from_json(file_json, name, defaults) then overwrite with flags.
SweepConfig sweep_config_from_json(const nlohmann::json& j, std::string_view source,
                                   const SweepConfig& base = {});
nlohmann::json to_json(const SweepConfig& c);

// Throws InputError listing every problem found (the checks of sweep_axes.h), each with the
// valid choices: an empty axis,
// batch <= 0, context <= 0 or lo > hi, h outside [0, 1], prefix_groups < 1, a block size not a
// power of two in [1, 1024], a q dtype other than auto/f16/bf16, measure values out of range, a
// shard index outside [0, n). Model names and kernel names are checked by expand()/the runner
// (they need the presets and the backend).
void validate(const SweepConfig& c);

// Value parsers shared with the CLI; each throws InputError naming the value and the choices.
void parse_shard(std::string_view s, int& index, int& count);  // "i/n", 0 <= i < n

struct SweepPoint {
  WorkloadSpec spec;  // model loaded, seed = config seed
  Scope scope = Scope::attention;
  std::string kernel;  // as requested: "auto" or a kernel name
  int index = 0;       // position in the full expansion (stable across shards)
};

// The cartesian product, in the order of kAxes (sweep_axes.h; outermost first, batch innermost
// so a batch series is contiguous): model, scope, kernel, kv_dtype, q_dtype, block_size,
// prefix_groups, hit_rate, context, batch; each axis in the order the config lists it. A q_dtype
// of auto becomes auto_q_dtype(the point's scope, weights_dtype): a point's q is a dtype. Then only
// the shard's points (index % shard_count == shard_index). "all" in kernels expands to
// `all_kernels` (the backend's kernel_names(); empty = leave "all" as InputError). Loads each model
// once (load_model).
std::vector<SweepPoint> expand(const SweepConfig& c,
                               const std::vector<std::string>& all_kernels = {});
// Size of the full expansion without loading models (for progress / sanity).
std::size_t expansion_size(const SweepConfig& c, std::size_t num_kernels_for_all = 1);

}  // namespace decodebench
