// The napkin calculator's input (`decodebench model`): the axes already parsed (lists split,
// contexts and dtypes read), and the kernel kinds it predicts for. Below the CLI nothing parses
// a string; a model is still named (a preset or a file), as load_model() takes it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workload/workload.h"  // ContextSpec, DType, ComputeUnit, WorkloadSpec

namespace decodebench::calculator {

// What a kernel reads and which peak caps it: the two axes the kinds differ on.
struct KernelKind {
  const char* name;
  bool prefix_aware;  // reads a shared prefix block once (unique bytes), else once per sequence
  ComputeUnit compute;
};
inline constexpr KernelKind kKernelKinds[] = {
    {"cuda-core", /*prefix_aware=*/false, ComputeUnit::fma},
    {"tensor-core", /*prefix_aware=*/false, ComputeUnit::tensor_core},
    {"cascade", /*prefix_aware=*/true, ComputeUnit::tensor_core},
};
// The kind of this name, nullptr for none.
const KernelKind* find_kernel_kind(std::string_view name);
// "cuda-core, tensor-core, cascade", for a message listing the valid kinds.
std::string kernel_kind_names();

// One prediction's axes: every combination of models x kv_dtypes x contexts x hit_rates x
// batches x kinds is a row.
struct Request {
  std::vector<std::string> models;  // preset names or model file paths
  std::vector<ContextSpec> contexts;
  std::vector<DType> kv_dtypes;
  // nullopt: f16 at attention scope; at layer scope the weights' own 16-bit type (bf16 with fp8
  // weights), the only activations 16-bit weights take.
  std::optional<DType> q_dtype;
  std::vector<double> hit_rates;
  std::vector<int> batches;
  std::vector<KernelKind> kinds;
  int block_size = 16;
  int prefix_groups = 1;
  DType weights_dtype = DType::bf16;  // layer scope
  // Device memory taken by weights (for the max batch). nullopt: none at attention scope, the
  // model's own weights at layer scope.
  std::optional<double> weights_bytes;
};

// The point's workload, validated (InputError for a bad block size, hit rate, ...).
WorkloadSpec point_spec(const Request& r, const ModelShape& model, DType kv, DType q,
                        const ContextSpec& ctx, double h, int batch);

}  // namespace decodebench::calculator
