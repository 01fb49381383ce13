// Planted faults in a workload's paged layout, the same for every backend: each must be refused
// at prepare with the registry's sentence (kernels::unsupported_reason, layout scope), so no
// kernel ever launches on it; and an out-of-range entry in a slot its sequence never reads,
// which must be accepted.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "workload/workload.h"

namespace decodebench::test {

struct PlantedTable {
  std::string name;
  Workload workload;
  std::vector<std::string> refusal;  // every piece the message names; empty: accepted
};

// `spec` with 3 sequences of 40 tokens in private blocks of 16: every row of the table holds 3
// entries and uses all 3. Its model, dtypes and seed are kept.
inline std::vector<PlantedTable> planted_tables(WorkloadSpec spec) {
  spec.batch = 3;
  spec.context = ContextSpec::fixed(40);
  spec.block_size = 16;
  spec.hit_rate = 0;
  const Workload good = make_workload(spec);
  const int width = good.layout.max_blocks_per_seq;
  if (width != 3) throw std::logic_error("planted_tables: the messages below assume 3 per row");
  const std::string pool = std::to_string(good.layout.num_blocks);
  const std::string last = std::to_string(good.layout.num_blocks - 1);
  const auto entry = [&](Workload& w, int seq, int slot) -> std::int32_t& {
    return w.layout.block_tables[static_cast<std::size_t>(seq) * width + slot];
  };
  std::vector<PlantedTable> cases;

  PlantedTable longer{"a context longer than its table", good, {}};
  longer.workload.layout.context_lens[1] = 16 * width + 1;
  longer.refusal = {"context_lens[1] = 49", "more tokens than sequence 1's block table holds",
                    "valid: 1..48 = max_blocks_per_seq 3 x block_size 16"};
  cases.push_back(longer);

  PlantedTable past_pool{"a used entry equal to num_blocks", good, {}};
  entry(past_pool.workload, 2, 2) = good.layout.num_blocks;
  past_pool.refusal = {"block_tables[2][2] = " + pool,
                       "one of the 3 entries sequence 2 reads for its 40 tokens",
                       "valid: 0.." + last + ", num_blocks " + pool + " in the pool"};
  cases.push_back(past_pool);

  PlantedTable negative{"a negative used entry", good, {}};
  entry(negative.workload, 0, 0) = -1;
  negative.refusal = {"block_tables[0][0] = -1", "valid: 0.." + last};
  cases.push_back(negative);

  // Sequence 1 shortened to 2 blocks: its third entry is never read, whatever it holds.
  PlantedTable unused{"an out-of-range entry in an unused slot", good, {}};
  unused.workload.layout.context_lens[1] = 20;
  entry(unused.workload, 1, 2) = 1 << 30;
  cases.push_back(unused);
  return cases;
}

}  // namespace decodebench::test
