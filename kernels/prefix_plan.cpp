// The prefix planner: which sequences of a batch share leading KV blocks, found in the block
// tables themselves. Plain C++, host only.
//
// Rule: sequences whose first physical block is the same (with at least one whole block of
// context) are candidates for one group; a group needs two members, since a prefix pass over
// one sequence saves nothing. The group's prefix is the longest run of leading table entries
// common to every member, cut to whole blocks inside every member's context (floor(L_b / P)
// blocks), so each member reads every token of every prefix block.
//
// Why from the tables and not from the workload generator's groups: what a prefix-aware kernel
// can save is what the physical blocks actually share, whoever built them (the generator, a
// trace replay, a serving engine's prefix cache). A prefix tree (A and B share ten blocks, C
// shares two of them) gets one group with the two blocks all three share; the deeper sharing
// is left to the private passes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels.h"

namespace decodebench::kernels {

std::int64_t PrefixPlan::tokens_shared() const {
  std::int64_t saved = 0;
  for (int g = 0; g < num_groups(); ++g)
    saved += static_cast<std::int64_t>(group_size(g) - 1) * group_tokens[g];
  return saved;
}

std::vector<std::int32_t> PrefixPlan::packed() const {
  std::vector<std::int32_t> all;
  all.reserve(group_start.size() + group_seqs.size() + group_tokens.size() +
              seq_prefix_tokens.size());
  for (const auto* part : {&group_start, &group_seqs, &group_tokens, &seq_prefix_tokens})
    all.insert(all.end(), part->begin(), part->end());
  return all;
}

void PrefixPlan::bind(PagedDecodeParams& p, const std::int32_t* base) const {
  p.num_prefix_groups = num_groups();
  p.prefix_group_start = base;
  p.prefix_group_seqs = p.prefix_group_start + group_start.size();
  p.prefix_group_tokens = p.prefix_group_seqs + group_seqs.size();
  p.seq_prefix_tokens = p.prefix_group_tokens + group_tokens.size();
}

void PrefixPlan::bind(PagedDecodeParams& p) const {
  p.num_prefix_groups = num_groups();
  p.prefix_group_start = group_start.data();
  p.prefix_group_seqs = group_seqs.data();
  p.prefix_group_tokens = group_tokens.data();
  p.seq_prefix_tokens = seq_prefix_tokens.data();
}

PrefixPlan plan_prefixes(const PagedDecodeParams& p) {
  PrefixPlan plan;
  plan.group_start.push_back(0);
  plan.seq_prefix_tokens.assign(static_cast<std::size_t>(std::max(p.batch, 0)), 0);
  if (p.batch <= 0 || p.block_size <= 0 || !p.block_tables || !p.context_lens) return plan;
  auto row = [&](int b) {
    return p.block_tables + static_cast<std::ptrdiff_t>(b) * p.max_blocks_per_seq;
  };
  auto whole_blocks = [&](int b) {
    return std::min(p.context_lens[b] / p.block_size, p.max_blocks_per_seq);
  };

  // Candidates by first block, in order of each group's first member.
  std::unordered_map<std::int32_t, int> index_of_first_block;
  std::vector<std::vector<int>> candidates;
  for (int b = 0; b < p.batch; ++b) {
    if (whole_blocks(b) < 1) continue;
    const auto [it, inserted] =
        index_of_first_block.try_emplace(row(b)[0], static_cast<int>(candidates.size()));
    if (inserted) candidates.emplace_back();
    candidates[it->second].push_back(b);
  }

  for (const std::vector<int>& members : candidates) {
    if (members.size() < 2) continue;
    int blocks = whole_blocks(members[0]);
    for (int b : members) blocks = std::min(blocks, whole_blocks(b));
    const std::int32_t* first = row(members[0]);
    for (std::size_t m = 1; m < members.size(); ++m) {
      const std::int32_t* other = row(members[m]);
      blocks = static_cast<int>(std::mismatch(first, first + blocks, other).first - first);
    }
    // blocks >= 1: the members share their first entry and each has a whole block.
    const std::int32_t tokens = blocks * p.block_size;
    plan.group_seqs.insert(plan.group_seqs.end(), members.begin(), members.end());
    plan.group_start.push_back(static_cast<std::int32_t>(plan.group_seqs.size()));
    plan.group_tokens.push_back(tokens);
    for (int b : members) plan.seq_prefix_tokens[b] = tokens;
  }
  return plan;
}

std::string prefix_plan_error(const PagedDecodeParams& p) {
  const int groups = p.num_prefix_groups;
  if (groups < 0)
    return "prefix plan: num_prefix_groups is negative (" + std::to_string(groups) + ")";
  if (groups == 0) return {};
  if (!p.prefix_group_start || !p.prefix_group_seqs || !p.prefix_group_tokens ||
      !p.seq_prefix_tokens || !p.block_tables || !p.context_lens)
    return "prefix plan: a plan or block-table pointer is null";
  if (p.block_size <= 0) return "prefix plan: block size must be positive";
  if (p.prefix_group_start[0] != 0) return "prefix plan: group 0 must start at member 0";
  std::vector<int> group_of(static_cast<std::size_t>(std::max(p.batch, 0)), -1);
  for (int g = 0; g < groups; ++g) {
    const std::string name = "prefix plan: group " + std::to_string(g);
    const int begin = p.prefix_group_start[g];
    const int end = p.prefix_group_start[g + 1];
    if (end <= begin) return name + " has no member (offsets must increase)";
    const std::int32_t tokens = p.prefix_group_tokens[g];
    if (tokens <= 0 || tokens % p.block_size != 0)
      return name + " shares " + std::to_string(tokens) +
             " tokens; valid: a positive multiple of the block size " +
             std::to_string(p.block_size);
    const int blocks = tokens / p.block_size;
    if (blocks > p.max_blocks_per_seq)
      return name + " shares " + std::to_string(blocks) + " blocks, more than a table row holds (" +
             std::to_string(p.max_blocks_per_seq) + ")";
    const std::int32_t* first = nullptr;
    for (int m = begin; m < end; ++m) {
      const int b = p.prefix_group_seqs[m];
      if (b < 0 || b >= p.batch)
        return name + " names sequence " + std::to_string(b) + "; valid: 0.." +
               std::to_string(p.batch - 1);
      if (m > begin && b <= p.prefix_group_seqs[m - 1])
        return name + "'s members are not in ascending order";
      if (group_of[b] >= 0)
        return name + " repeats sequence " + std::to_string(b) + " of group " +
               std::to_string(group_of[b]);
      group_of[b] = g;
      if (p.context_lens[b] < tokens)
        return name + " shares " + std::to_string(tokens) + " tokens but sequence " +
               std::to_string(b) + " has only " + std::to_string(p.context_lens[b]);
      const std::int32_t* r =
          p.block_tables + static_cast<std::ptrdiff_t>(b) * p.max_blocks_per_seq;
      if (!first) {
        first = r;
      } else if (const auto* diff = std::mismatch(first, first + blocks, r).first;
                 diff != first + blocks) {
        return name + ": sequence " + std::to_string(b) + "'s block " +
               std::to_string(diff - first) + " is not the group's shared block";
      }
    }
  }
  for (int b = 0; b < p.batch; ++b) {
    const std::int32_t want = group_of[b] >= 0 ? p.prefix_group_tokens[group_of[b]] : 0;
    if (p.seq_prefix_tokens[b] != want)
      return "prefix plan: seq_prefix_tokens[" + std::to_string(b) + "] is " +
             std::to_string(p.seq_prefix_tokens[b]) + ", its group shares " + std::to_string(want);
  }
  return {};
}

}  // namespace decodebench::kernels
