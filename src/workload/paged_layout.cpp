// The paged layout of a workload: the spec's checks, the context lengths, the shared prefix blocks
// and the shuffled block tables (build_layout), the read statistics the byte model uses, the
// pool a subset of rows reads (pack_layout) and the rows a validation checks. The values that
// fill a layout are workload.cpp's.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "device/math.h"  // is_power_of_two
#include "workload/workload.h"

namespace decodebench {
namespace {

// A small, fully specified generator for layout decisions (context lengths, the block shuffle):
// splitmix64. std::shuffle and std::uniform_int_distribution are implementation-defined, so
// the same seed would give different layouts with different standard libraries.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return rng_detail::mix64(state_);
  }
  // Uniform in [0, n), n >= 1: the high half of a 64x64 product (Lemire's method without the
  // rejection step; the bias is below n / 2^64, irrelevant for n < 2^32).
  std::uint64_t below(std::uint64_t n) {
    __extension__ using U128 = unsigned __int128;  // GCC/Clang; -Wpedantic knows no __int128
    return static_cast<std::uint64_t>((static_cast<U128>(next()) * n) >> 64);
  }

 private:
  std::uint64_t state_;
};

// Independent streams for the independent layout decisions, so e.g. changing the context range
// does not change the shuffle's stream.
constexpr std::uint64_t kStreamContext = 0x636f6e7465787431ull;  // "context1"
constexpr std::uint64_t kStreamShuffle = 0x73687566666c6531ull;  // "shuffle1"

int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

// Tokens of each row lying in its group's shared blocks, over all tokens.
double hit_rate_of(const PagedLayout& layout, int block_size) {
  std::int64_t hit = 0;
  std::int64_t total = 0;
  for (std::size_t b = 0; b < layout.context_lens.size(); ++b) {
    hit +=
        static_cast<std::int64_t>(layout.shared_blocks_of_group[layout.group_of[b]]) * block_size;
    total += layout.context_lens[b];
  }
  return total ? static_cast<double>(hit) / static_cast<double>(total) : 0.0;
}

}  // namespace

// Each row reads slots [0, n) of its j-th block, n = min(P, L - j*P), so the union over rows of
// a block's slots is [0, max n).
void fill_read_stats(PagedLayout& layout, int block_size) {
  std::vector<int> max_slots(static_cast<std::size_t>(layout.num_blocks), 0);
  std::vector<int> readers(static_cast<std::size_t>(layout.num_blocks), 0);
  layout.total_tokens = 0;
  for (std::size_t b = 0; b < layout.context_lens.size(); ++b) {
    const int len = layout.context_lens[b];
    layout.total_tokens += len;
    for (int j = 0; j < blocks_for(len, block_size); ++j) {
      const std::int32_t block =
          layout.block_tables[b * static_cast<std::size_t>(layout.max_blocks_per_seq) + j];
      const int slots = std::min(block_size, len - j * block_size);
      max_slots[block] = std::max(max_slots[block], slots);
      ++readers[block];
    }
  }
  layout.unique_tokens = std::accumulate(max_slots.begin(), max_slots.end(), std::int64_t{0});
  layout.num_shared_blocks =
      static_cast<int>(std::count_if(readers.begin(), readers.end(), [](int r) { return r > 1; }));
}

// ---- spec ---------------------------------------------------------------------------------

void validate(const WorkloadSpec& spec) {
  const ModelShape& m = spec.model;
  if (spec.batch <= 0) {
    throw InputError(fmt::format("batch must be >= 1, got {}", spec.batch));
  }
  if (spec.context.lo <= 0 || spec.context.hi < spec.context.lo) {
    throw InputError(fmt::format("context lengths must satisfy 1 <= lo <= hi, got lo={} hi={}",
                                 spec.context.lo, spec.context.hi));
  }
  if (spec.context.kind == ContextSpec::Kind::fixed && spec.context.lo != spec.context.hi) {
    throw InputError(fmt::format("a fixed context has lo == hi, got lo={} hi={}", spec.context.lo,
                                 spec.context.hi));
  }
  if (!(spec.hit_rate >= 0.0 && spec.hit_rate <= 1.0)) {  // also rejects NaN
    throw InputError(fmt::format("hit rate must be in [0, 1], got {}", spec.hit_rate));
  }
  if (spec.prefix_groups < 1) {
    throw InputError(fmt::format("prefix_groups must be >= 1, got {}", spec.prefix_groups));
  }
  if (m.num_q_heads <= 0 || m.num_kv_heads <= 0) {
    throw InputError(fmt::format("model '{}': num_q_heads ({}) and num_kv_heads ({}) must be >= 1",
                                 m.name, m.num_q_heads, m.num_kv_heads));
  }
  if (m.num_q_heads % m.num_kv_heads != 0) {
    throw InputError(
        fmt::format("model '{}': num_q_heads ({}) % num_kv_heads ({}) != 0; the "
                    "query heads must split evenly into KV groups",
                    m.name, m.num_q_heads, m.num_kv_heads));
  }
  if (m.is_mla()) {
    // The absorbed shape (ModelShape's MLA fields): one latent row per token, V its prefix.
    if (m.num_kv_heads != 1 || m.head_dim != m.kv_lora_rank + m.qk_rope_head_dim ||
        m.kv_lora_rank % 16 != 0 || m.qk_rope_head_dim % 16 != 0) {
      throw InputError(fmt::format(
          "model '{}': MLA needs num_kv_heads 1 and head_dim kv_lora_rank + qk_rope_head_dim, "
          "both multiples of 16; got num_kv_heads {}, head_dim {}, kv_lora_rank {}, "
          "qk_rope_head_dim {}",
          m.name, m.num_kv_heads, m.head_dim, m.kv_lora_rank, m.qk_rope_head_dim));
    }
    if (is_int_kv(spec.kv_dtype)) {
      throw InputError(fmt::format(
          "model '{}' uses MLA, whose latent cache is read in a float format; KV dtype {} is "
          "not supported there (valid: {})",
          m.name, dtype_name(spec.kv_dtype), dtype_names(DtypeKind::element)));
    }
  } else if (m.head_dim != 64 && m.head_dim != 128 && m.head_dim != 256) {
    throw InputError(fmt::format(
        "model '{}': head_dim {} is not supported; valid: 64, 128, 256 (576 for MLA models)",
        m.name, m.head_dim));
  }
  if (!is_power_of_two(spec.block_size) || spec.block_size > 1024) {
    throw InputError(fmt::format(
        "block size {} is not supported; valid: a power of two in [1, 1024] (e.g. 8, 16, 32)",
        spec.block_size));
  }
  if (spec.q_dtype != DType::f16 && spec.q_dtype != DType::bf16) {
    throw InputError(
        fmt::format("q dtype {} is not supported; valid: f16, bf16", dtype_name(spec.q_dtype)));
  }
}

// ---- layout -------------------------------------------------------------------------------

PagedLayout build_layout(const WorkloadSpec& spec) {
  validate(spec);
  const int batch = spec.batch;
  const int groups = spec.prefix_groups;
  const int block_size = spec.block_size;
  PagedLayout layout;

  // Context lengths: fixed, or uniform in [lo, hi] per sequence.
  layout.context_lens.resize(batch);
  SplitMix64 context_rng(spec.seed ^ kStreamContext);
  for (int b = 0; b < batch; ++b) {
    const std::uint64_t span = static_cast<std::uint64_t>(spec.context.hi - spec.context.lo) + 1;
    layout.context_lens[b] =
        spec.context.kind == ContextSpec::Kind::fixed
            ? spec.context.lo
            : spec.context.lo + static_cast<std::int32_t>(context_rng.below(span));
  }

  // Groups, round-robin; each group shares floor(h * L_min / P) leading blocks, L_min its
  // shortest context, so shared blocks are always full blocks every member reads entirely.
  layout.group_of.resize(batch);
  std::vector<int> min_len(groups, std::numeric_limits<int>::max());
  for (int b = 0; b < batch; ++b) {
    layout.group_of[b] = b % groups;
    min_len[b % groups] = std::min(min_len[b % groups], layout.context_lens[b]);
  }
  layout.shared_blocks_of_group.assign(groups, 0);
  for (int g = 0; g < groups && g < batch; ++g) {
    // The epsilon absorbs decimal hit rates that are not exact in binary (0.7 * 1000 / 10).
    layout.shared_blocks_of_group[g] =
        static_cast<int>(std::floor(spec.hit_rate * min_len[g] / block_size + 1e-9));
  }

  // Logical block numbering: each group's shared blocks, then each sequence's private blocks.
  std::int64_t num_blocks = 0;
  std::vector<std::int64_t> group_first(groups, 0);
  for (int g = 0; g < groups; ++g) {
    group_first[g] = num_blocks;
    num_blocks += layout.shared_blocks_of_group[g];
  }
  int max_blocks = 0;
  for (int b = 0; b < batch; ++b) {
    const int blocks = blocks_for(layout.context_lens[b], block_size);
    max_blocks = std::max(max_blocks, blocks);
    num_blocks += blocks - layout.shared_blocks_of_group[layout.group_of[b]];
  }
  if (num_blocks > std::numeric_limits<std::int32_t>::max()) {
    throw InputError(
        fmt::format("the point needs {} KV blocks, more than int32 block ids hold; "
                    "use a larger block size or fewer/shorter sequences",
                    num_blocks));
  }
  layout.num_blocks = static_cast<int>(num_blocks);
  layout.max_blocks_per_seq = max_blocks;

  // Physical ids: a seeded Fisher-Yates shuffle of the pool, so consecutive logical blocks land
  // anywhere, as after real allocator churn.
  std::vector<std::int32_t> physical(static_cast<std::size_t>(num_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  SplitMix64 shuffle_rng(spec.seed ^ kStreamShuffle);
  for (std::int64_t i = num_blocks - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(shuffle_rng.below(static_cast<std::uint64_t>(i) + 1));
    std::swap(physical[i], physical[j]);
  }

  // Block tables [batch][max_blocks], unused entries -1.
  layout.block_tables.assign(static_cast<std::size_t>(batch) * max_blocks, -1);
  std::int64_t next_private =
      group_first.empty() ? 0 : group_first.back() + layout.shared_blocks_of_group.back();
  for (int b = 0; b < batch; ++b) {
    const int g = layout.group_of[b];
    const int shared = layout.shared_blocks_of_group[g];
    std::int32_t* row = layout.block_tables.data() + static_cast<std::size_t>(b) * max_blocks;
    for (int j = 0; j < blocks_for(layout.context_lens[b], block_size); ++j) {
      row[j] = j < shared ? physical[group_first[g] + j] : physical[next_private++];
    }
  }

  fill_read_stats(layout, block_size);
  layout.hit_rate_actual = hit_rate_of(layout, block_size);
  return layout;
}

PagedLayout pack_layout(const PagedLayout& layout, std::span<const int> sequences, int block_size,
                        std::vector<std::int32_t>& source_block_ids) {
  const int batch = static_cast<int>(layout.context_lens.size());
  const int rows = static_cast<int>(sequences.size());
  if (sequences.empty()) throw InputError("pack_layout: no sequences selected");
  std::vector<bool> seen(static_cast<std::size_t>(batch), false);
  for (int s : sequences) {
    if (s < 0 || s >= batch) {
      throw InputError(fmt::format("pack_layout: sequence {} out of range [0, {})", s, batch));
    }
    if (seen[s]) throw InputError(fmt::format("pack_layout: sequence {} selected twice", s));
    seen[s] = true;
  }
  // For the full batch in order packing is still a renumbering, so keep the original ids then:
  // the values and the block tables stay exactly those of the layout.
  const bool full = rows == batch && std::is_sorted(sequences.begin(), sequences.end());
  PagedLayout sub;
  source_block_ids.clear();
  sub.shared_blocks_of_group = layout.shared_blocks_of_group;
  int max_blocks = 0;
  for (int s : sequences)
    max_blocks = std::max(max_blocks, blocks_for(layout.context_lens[s], block_size));
  sub.max_blocks_per_seq = max_blocks;
  sub.block_tables.assign(static_cast<std::size_t>(rows) * max_blocks, -1);
  if (full) {
    sub.block_tables = layout.block_tables;
    sub.max_blocks_per_seq = layout.max_blocks_per_seq;
    sub.num_blocks = layout.num_blocks;
    source_block_ids.resize(static_cast<std::size_t>(layout.num_blocks));
    std::iota(source_block_ids.begin(), source_block_ids.end(), 0);
  } else {
    std::unordered_map<std::int32_t, std::int32_t> remap;
    for (int r = 0; r < rows; ++r) {
      const int s = sequences[r];
      const std::int32_t* src =
          layout.block_tables.data() + static_cast<std::size_t>(s) * layout.max_blocks_per_seq;
      std::int32_t* dst = sub.block_tables.data() + static_cast<std::size_t>(r) * max_blocks;
      for (int j = 0; j < blocks_for(layout.context_lens[s], block_size); ++j) {
        auto [it, inserted] = remap.emplace(src[j], static_cast<std::int32_t>(remap.size()));
        if (inserted) source_block_ids.push_back(src[j]);
        dst[j] = it->second;
      }
    }
    sub.num_blocks = static_cast<int>(source_block_ids.size());
  }
  for (int s : sequences) {
    sub.context_lens.push_back(layout.context_lens[s]);
    sub.group_of.push_back(layout.group_of[s]);
  }
  fill_read_stats(sub, block_size);
  sub.hit_rate_actual = hit_rate_of(sub, block_size);
  return sub;
}

std::vector<int> validation_subset(const PagedLayout& layout, int max_rows) {
  const int batch = static_cast<int>(layout.context_lens.size());
  if (max_rows < 1)
    throw InputError(fmt::format("validation subset needs >= 1 row, got {}", max_rows));
  std::vector<int> rows;
  if (batch <= max_rows) {
    rows.resize(batch);
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  }
  // One sequence of every prefix group first (sequence g is in group g), then the last one,
  // then evenly spaced ones until max_rows are picked.
  std::set<int> picked;
  const int groups = static_cast<int>(layout.shared_blocks_of_group.size());
  for (int g = 0; g < std::min(groups, max_rows); ++g) picked.insert(g);
  if (static_cast<int>(picked.size()) < max_rows) picked.insert(batch - 1);
  for (int i = 1; static_cast<int>(picked.size()) < max_rows; ++i) {
    // Midpoints of ever finer subdivisions: 1/2, 1/4, 3/4, 1/8, ... of [0, batch - 1].
    const int level = 1 << static_cast<int>(std::log2(i) + 1);
    const int k = 2 * (i - level / 2) + 1;
    picked.insert(static_cast<int>(static_cast<std::int64_t>(k) * (batch - 1) / level));
  }
  return {picked.begin(), picked.end()};
}

}  // namespace decodebench
