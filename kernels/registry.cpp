// The kernel ladder: names, ideas and what this build compiled. Plain C++ (no device code).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "device/math.h"
#include "kernel_config.h"
#include "kernels.h"

namespace decodebench::kernels {
namespace {

struct Rung {
  const char* name;
  const char* idea;
  int max_group;
  bool uses_workspace;
  bool prefix_aware;
  ComputeUnit compute;
  bool int_kv;  // also reads the integer KV formats (config::kIntKvDtypes)
  bool window;  // the attention variants it takes (ladder.json "variants")
  bool sinks;
  bool softcap;
  bool mla;      // MLA's absorbed shape only (ladder.json "mla")
  int head_dim;  // the one head_dim it is built for; 0: the build's list (config::kHeadDims)
};

// In ladder order. Each rung adds one idea over the one before it. The list is
// kernels/paged_decode/ladder.json, generated into this table by kernels/CMakeLists.txt.
constexpr Rung kRungs[] = {
#include "ladder_rungs.inc"
};

const char* dtype_label(DType t) { return kv_format(t).name; }

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
      if (rung.head_dim > 0) {
        info.head_dims = {rung.head_dim};
      } else {
        info.head_dims.assign(std::begin(config::kHeadDims), std::end(config::kHeadDims));
      }
      info.kv_dtypes.assign(std::begin(config::kKvDtypes), std::end(config::kKvDtypes));
      if (rung.int_kv) {
        info.kv_dtypes.insert(info.kv_dtypes.end(), config::kIntKvDtypes,
                              config::kIntKvDtypes + config::kNumIntKvDtypes);
      }
      info.q_dtypes = {DType::f16, DType::bf16};
      info.min_block_size = 8;
      info.max_group = rung.max_group;
      info.uses_workspace = rung.uses_workspace;
      info.prefix_aware = rung.prefix_aware;
      info.compute = rung.compute;
      info.window = rung.window;
      info.sinks = rung.sinks;
      info.softcap = rung.softcap;
      info.mla = rung.mla;
      info.mla_only = rung.mla;
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

std::string unsupported_reason(const KernelInfo& k, const PagedDecodeParams& p, CheckScope scope) {
  // One wording for every refusal: "kernel 'K' does not take <value> (valid: <choices>)".
  const auto refuse = [&](const std::string& value, const std::string& valid) {
    return "kernel '" + k.name + "' does not take " + value + " (valid: " + valid + ")";
  };
  const auto contains = [](const auto& items, const auto& x) {
    return std::find(items.begin(), items.end(), x) != items.end();
  };
  if (is_mla(p) && !k.mla) {
    std::string takers;
    for (const Rung& rung : kRungs) {
      if (rung.mla) takers += "kernel '" + std::string(rung.name) + "' and ";
    }
    return refuse("MLA attention (keys " + std::to_string(p.head_dim) + " wide, values the first " +
                      std::to_string(p.v_head_dim) + ")",
                  "per-head K and V; " + takers + "the cpu backend's kernel 'cpu' take MLA");
  }
  if (k.mla_only) {
    // The rung's tiles are cut for DeepSeek's latent: one KV head, the values the first
    // head_dim - 64 of each row (the last 64 the RoPE key).
    const int dv = k.head_dims.empty() ? 0 : k.head_dims.front() - 64;
    if (!is_mla(p) || p.num_kv_heads != 1 || p.v_head_dim != dv) {
      return refuse(is_mla(p) ? "MLA with " + std::to_string(p.num_kv_heads) +
                                    " KV heads and values " + std::to_string(p.v_head_dim) + " wide"
                              : std::string("per-head K and V"),
                    "MLA's absorbed shape: one latent KV head, keys " + std::to_string(dv + 64) +
                        " wide, values the first " + std::to_string(dv));
    }
  }
  if (!contains(k.head_dims, p.head_dim)) {
    return refuse("head_dim " + std::to_string(p.head_dim), join(k.head_dims) + " in this build");
  }
  if (!contains(k.kv_dtypes, p.kv_dtype)) {
    // An integer format: name who reads it (the ladder's int_kv rungs, compiled or not, and the
    // cpu backend) rather than only suggest another build.
    std::string why;
    if (is_int_kv(p.kv_dtype)) {
      std::string readers;
      for (const Rung& rung : kRungs) {
        if (rung.int_kv) readers += (readers.empty() ? "'" : ", '") + std::string(rung.name) + "'";
      }
      why = "; the integer KV formats are read by kernels " + readers +
            " (tensor cores, built for DECODEBENCH_INT_KV_DTYPES) and by the cpu backend "
            "(kernels 'cpu', 'cascade')";
    }
    return refuse("KV dtype " + std::string(dtype_label(p.kv_dtype)),
                  join(k.kv_dtypes) + " in this build" + why);
  }
  if (!contains(k.q_dtypes, p.q_dtype)) {
    return refuse("q/out dtype " + std::string(dtype_label(p.q_dtype)), join(k.q_dtypes));
  }
  if (!is_power_of_two(p.block_size) || p.block_size < k.min_block_size) {
    return refuse("block size " + std::to_string(p.block_size),
                  "a power of two >= " + std::to_string(k.min_block_size));
  }
  if (p.num_q_heads < 1 || p.num_kv_heads < 1 || p.num_q_heads % p.num_kv_heads != 0) {
    return refuse("num_q_heads " + std::to_string(p.num_q_heads) + " with num_kv_heads " +
                      std::to_string(p.num_kv_heads),
                  "num_q_heads a positive multiple of num_kv_heads");
  }
  const int group = p.num_q_heads / p.num_kv_heads;
  if (k.max_group > 0 && group > k.max_group) {
    return refuse("GQA group " + std::to_string(group),
                  "GQA groups up to " + std::to_string(k.max_group));
  }
  if (p.batch < 1 || (k.max_batch > 0 && p.batch > k.max_batch)) {
    return refuse("batch " + std::to_string(p.batch),
                  k.max_batch > 0 ? "1.." + std::to_string(k.max_batch) : ">= 1");
  }
  {
    // The variants set and not taken, and who takes all of them: the ladder's rungs, compiled or
    // not, and the cpu backend.
    const bool window = p.window > 0 && !k.window;
    const bool sinks = p.has_sinks && !k.sinks;
    const bool softcap = p.softcap > 0 && !k.softcap;
    if (window || sinks || softcap) {
      std::string what;
      if (window) what = "a sliding window of " + std::to_string(p.window) + " tokens";
      if (sinks) what += (what.empty() ? "" : ", ") + std::string("attention sinks");
      if (softcap) what += (what.empty() ? "" : ", ") + std::string("logit soft-capping");
      std::string takers;
      for (const Rung& rung : kRungs) {
        if ((!window || rung.window) && (!sinks || rung.sinks) && (!softcap || rung.softcap))
          takers += (takers.empty() ? "'" : ", '") + std::string(rung.name) + "'";
      }
      // The cpu backend's kernels 'cpu' and 'cascade' take all three.
      return refuse(what, "full attention without sinks or soft-capping; " +
                              (takers.empty() ? std::string("the cpu backend's kernels 'cpu' and "
                                                            "'cascade' take")
                                              : "kernels " + takers +
                                                    " and the cpu backend's kernels 'cpu' and "
                                                    "'cascade' take") +
                              " them");
    }
  }
  if (scope == CheckScope::shape) return {};

  // The layout scope needs only the tables; the tensors come with the launch.
  const bool tables_only = scope == CheckScope::layout;
  struct Pointer {
    const char* name;
    const void* ptr;
    bool table;
  };
  std::string null;  // "k_cache, out"
  for (const Pointer& t :
       {Pointer{"q", p.q, false}, Pointer{"out", p.out, false},
        Pointer{"k_cache", p.k_cache, false}, Pointer{"v_cache", p.v_cache, false},
        Pointer{"block_tables", p.block_tables, true},
        Pointer{"context_lens", p.context_lens, true}}) {
    if (t.ptr == nullptr && (t.table || !tables_only)) {
      null += (null.empty() ? "" : ", ") + std::string(t.name);
    }
  }
  if (!null.empty()) {
    return refuse("a null " + null, tables_only ? "block_tables and context_lens both set"
                                                : "q, out, k_cache, v_cache, block_tables and "
                                                  "context_lens all set");
  }
  if (p.max_blocks_per_seq < 1) {
    return refuse("max_blocks_per_seq " + std::to_string(p.max_blocks_per_seq), ">= 1");
  }
  if (p.num_blocks < 1) return refuse("num_blocks " + std::to_string(p.num_blocks), ">= 1");
  // The kernels index the cache through the tables unchecked: a context longer than its row or
  // an entry outside the pool would be an illegal address on a GPU. Device pointers are not
  // read here: the backend checked its host copy at layout scope.
  if (scope != CheckScope::launch_device) {
    const std::int64_t capacity = static_cast<std::int64_t>(p.max_blocks_per_seq) * p.block_size;
    for (std::int32_t b = 0; b < p.batch; ++b) {
      const std::int64_t len = p.context_lens[b];
      const auto seq = [b] { return std::to_string(b); };  // built only for a refusal
      if (len < 1 || len > capacity) {
        return refuse(
            "context_lens[" + seq() + "] = " + std::to_string(len) +
                (len > capacity ? ", more tokens than sequence " + seq() + "'s block table holds"
                                : ""),
            "1.." + std::to_string(capacity) + " = max_blocks_per_seq " +
                std::to_string(p.max_blocks_per_seq) + " x block_size " +
                std::to_string(p.block_size));
      }
      // Only the entries the context reads: the rest may hold anything (-1 by convention).
      const std::int64_t used = (len + p.block_size - 1) / p.block_size;
      const std::int32_t* row = p.block_tables + static_cast<std::size_t>(b) * p.max_blocks_per_seq;
      for (std::int64_t j = 0; j < used; ++j) {
        if (row[j] < 0 || row[j] >= p.num_blocks) {
          return refuse("block_tables[" + seq() + "][" + std::to_string(j) +
                            "] = " + std::to_string(row[j]) + ", one of the " +
                            std::to_string(used) + " entries sequence " + seq() +
                            " reads for its " + std::to_string(len) + " tokens",
                        "0.." + std::to_string(p.num_blocks - 1) + ", num_blocks " +
                            std::to_string(p.num_blocks) + " in the pool");
        }
      }
    }
  }
  if (tables_only) return {};
  const auto aligned16 = [](const void* ptr) {
    return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0;
  };
  if (!aligned16(p.k_cache) || !aligned16(p.v_cache)) {
    return refuse(std::string(aligned16(p.k_cache) ? "a v_cache" : "a k_cache") +
                      " that is not 16-byte aligned",
                  "16-byte aligned k_cache and v_cache, for the kernels' 16-byte loads");
  }
  for (const auto& [name, value] : {std::pair<const char*, float>{"softmax_scale", p.softmax_scale},
                                    {"k_scale", p.k_scale},
                                    {"v_scale", p.v_scale}}) {
    if (!(value > 0.f)) {  // also rejects NaN
      return refuse(std::string(name) + " " + std::to_string(value), "> 0");
    }
  }
  if (p.has_sinks && p.sinks == nullptr) {
    return refuse("has_sinks with a null sinks", "sinks [Hq] fp32 set when has_sinks");
  }
  if (k.uses_workspace) {
    if (p.num_splits < 1 || p.num_splits > 65535) {  // grid.z
      return refuse("num_splits " + std::to_string(p.num_splits), "1..65535");
    }
    if (p.partial_out == nullptr || p.partial_lse == nullptr) {
      return refuse(
          std::string("a null ") + (p.partial_out == nullptr ? "partial_out" : "partial_lse"),
          "the workspace set, laid out by split_kv_workspace()");
    }
  }
  if (k.prefix_aware && p.num_prefix_groups != 0) {
    if (scope == CheckScope::launch) {
      if (std::string why = prefix_plan_error(p); !why.empty()) {
        return refuse("a prefix plan that does not hold for its block tables (" + why + ")",
                      "a plan from plan_prefixes() or one prefix_plan_error() accepts");
      }
    } else if (p.num_prefix_groups < 0 || !p.prefix_group_start || !p.prefix_group_seqs ||
               !p.prefix_group_tokens || !p.seq_prefix_tokens) {
      return refuse(
          "a prefix plan with " + std::to_string(p.num_prefix_groups) + " groups and a null array",
          "a plan bound by PrefixPlan::bind");
    }
    if (p.num_prefix_chunks < 1 || p.num_prefix_chunks > 65535) {  // grid.z of the prefix pass
      return refuse("num_prefix_chunks " + std::to_string(p.num_prefix_chunks),
                    "1..65535 with a prefix plan, bound by split_kv_workspace()");
    }
    const int tiles = scope == CheckScope::launch ? prefix_tiles(p) : p.num_prefix_tiles;
    if (p.num_prefix_tiles < 1 || p.num_prefix_tiles > 65535 || p.num_prefix_tiles != tiles) {
      return refuse("num_prefix_tiles " + std::to_string(p.num_prefix_tiles),
                    "prefix_tiles() of the plan (" + std::to_string(tiles) + "), 1..65535");
    }
  }
  return {};
}

}  // namespace decodebench::kernels
