// What fits in device memory: the largest batch whose KV pool (and workspace) fits next to the
// weights, the workspace one sequence needs, and the record of a model whose weights alone do
// not fit (with what would).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/datasheet.h"
#include "workload/workload.h"

namespace decodebench::calculator {

// Largest batch whose KV pool plus `extra_per_seq` bytes per sequence fits `budget` bytes, for
// the layout rule of build_layout(): each of min(B, G) groups shares S = floor(h * L / P)
// leading blocks, every sequence owns ceil(L / P) - S private blocks. Ragged contexts take hi
// (every sequence at its longest) and share from lo (the shortest a group can have): a safe
// upper bound on memory. 0 when not even one sequence fits; nullopt when nothing grows with
// batch (every block shared, no extra). `bytes_per_block`: one block of every layer.
std::optional<std::int64_t> max_batch_in_memory(const WorkloadSpec& s, double bytes_per_block,
                                                double budget, double extra_per_seq = 0);

// Workspace per sequence, an estimate: one layer's activations (every GEMM's input and output,
// the attention's q and output) and the LM head's logits, as if all were live at once. A
// serving engine's allocator slack, GEMM workspaces and CUDA graphs are not counted.
double workspace_bytes_per_sequence(const ModelShape& m, DType weights, DType act);

// A model whose weights alone take the device's memory: no batch of it can run there, so it
// gets this instead of rows of throughput. What would fit: tensor parallel over enough devices
// to leave room for a KV cache, or a smaller weights dtype.
struct DoesNotFit {
  std::string model;
  std::string weights;  // "bf16 weights", or "--weights-bytes"
  double weight_bytes = 0, mem_bytes = 0;
  int devices_needed = 0;                      // weights split evenly, some memory left on each
  std::vector<DType> weights_dtypes_that_fit;  // empty with --weights-bytes
  std::string message;                         // one line saying all of the above
};
// `bytes_given`: weight_bytes came from --weights-bytes rather than the model's own weights.
DoesNotFit does_not_fit(const ModelShape& m, const Datasheet& device, DType weights,
                        double weight_bytes, bool bytes_given);

}  // namespace decodebench::calculator
