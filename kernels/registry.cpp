// The kernel ladder: names, ideas and what this build compiled. Plain C++ (no device code).
#include <algorithm>
#include <string>

#include "kernel_config.h"
#include "kernels.h"

namespace decodebench::kernels {
namespace {

struct Rung {
  const char* name;
  const char* idea;
  int max_group;
  bool uses_workspace;
};

// In ladder order. Each rung adds one idea over the one before it. The list is
// kernels/paged_decode/ladder.json, generated into this table by kernels/CMakeLists.txt.
constexpr Rung kRungs[] = {
#include "ladder_rungs.inc"
};

const char* dtype_label(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
  }
  return "?";
}

template <typename T>
std::string join(const std::vector<T>& items) {
  std::string s;
  for (const auto& item : items) {
    if (!s.empty()) s += ", ";
    if constexpr (std::is_same_v<T, DType>) {
      s += dtype_label(item);
    } else {
      s += std::to_string(item);
    }
  }
  return s;
}

bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

const std::vector<KernelInfo>& kernel_ladder() {
  static const std::vector<KernelInfo> ladder = [] {
    std::vector<KernelInfo> out;
    for (const Rung& rung : kRungs) {
      const bool compiled = std::any_of(std::begin(config::kKernels), std::end(config::kKernels),
                                        [&](const char* k) { return std::string(k) == rung.name; });
      if (!compiled) continue;
      KernelInfo info;
      info.name = rung.name;
      info.idea = rung.idea;
      info.head_dims.assign(std::begin(config::kHeadDims), std::end(config::kHeadDims));
      info.kv_dtypes.assign(std::begin(config::kKvDtypes), std::end(config::kKvDtypes));
      info.q_dtypes = {DType::f16, DType::bf16};
      info.min_block_size = 8;
      info.max_group = rung.max_group;
      info.uses_workspace = rung.uses_workspace;
      out.push_back(std::move(info));
    }
    return out;
  }();
  return ladder;
}

const KernelInfo* find_kernel(std::string_view name) {
  for (const KernelInfo& info : kernel_ladder()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string ladder_names() {
  std::string s;
  for (const KernelInfo& info : kernel_ladder()) s += (s.empty() ? "" : ", ") + info.name;
  return s.empty() ? "none compiled" : s;
}

std::string unsupported_reason(const KernelInfo& k, const PagedDecodeParams& p) {
  if (std::find(k.head_dims.begin(), k.head_dims.end(), p.head_dim) == k.head_dims.end()) {
    return "kernel '" + k.name + "' has no head_dim " + std::to_string(p.head_dim) +
           " in this build (compiled: " + join(k.head_dims) + ")";
  }
  if (std::find(k.kv_dtypes.begin(), k.kv_dtypes.end(), p.kv_dtype) == k.kv_dtypes.end()) {
    return "kernel '" + k.name + "' has no KV dtype " + dtype_label(p.kv_dtype) +
           " in this build (compiled: " + join(k.kv_dtypes) + ")";
  }
  if (std::find(k.q_dtypes.begin(), k.q_dtypes.end(), p.q_dtype) == k.q_dtypes.end()) {
    return "kernel '" + k.name + "' takes q/out dtype " + join(k.q_dtypes) + ", not " +
           dtype_label(p.q_dtype);
  }
  if (!is_power_of_two(p.block_size) || p.block_size < k.min_block_size) {
    return "kernel '" + k.name + "' needs a power-of-two block size >= " +
           std::to_string(k.min_block_size) + ", got " + std::to_string(p.block_size);
  }
  if (p.num_kv_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0) {
    return "num_q_heads (" + std::to_string(p.num_q_heads) + ") must be a multiple of num_kv_heads (" +
           std::to_string(p.num_kv_heads) + ")";
  }
  const int group = p.num_q_heads / p.num_kv_heads;
  if (k.max_group > 0 && group > k.max_group) {
    return "kernel '" + k.name + "' serves GQA groups up to " + std::to_string(k.max_group) +
           ", got " + std::to_string(group);
  }
  return {};
}

}  // namespace decodebench::kernels
