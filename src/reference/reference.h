// The CPU reference: the oracle every backend and kernel is checked against (docs/design.md
// "Correctness"). Plain loops, double accumulation, GQA, every KV dtype; K/V rows are found
// through kernels/device/paged_kv.h, the same view the kernels use.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kernels.h"
#include "workload/workload.h"

namespace decodebench {

// out[r][h][i] = sum_t softmax_t(scale * k_scale * q[r][h] . K[t]) * v_scale * V[t][i], over the
// context of row r, where K/V are the stored values of kv head h / (Hq / Hkv). [rows][Hq][d];
// for MLA (ModelShape::is_mla) V is the first value_dim() values of each K row and the output
// [rows][Hq][value_dim()].
// The model's variants: a window keeps the last `sliding_window` tokens of the context; a
// soft-cap replaces each scaled score s by c tanh(s / c); a sink adds exp(sink_h) to the
// denominator (and joins the max). Throws InputError for a model whose layers differ (one step
// computes one kind of layer: ModelShape::with_window).
std::vector<float> reference_decode(const Workload& w);
// The same with K/V at the generator's real values (counter_normal, before any rounding to the
// KV dtype); Q stays as stored. Against reference_decode this isolates the KV dtype's
// quantization error: its accuracy cost.
std::vector<float> reference_decode_unquantized(const Workload& w);

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};
// Elementwise |out - ref| <= atol + rtol * |ref| for kernels whose output is rounded to q_dtype.
Tolerance tolerance_for(DType q_dtype, DType kv_dtype);

struct Comparison {
  bool ok = false;
  std::size_t checked = 0;
  std::size_t mismatches = 0;  // elements outside the tolerance (NaN/inf count, always)
  double max_abs = 0;          // max |out - ref| over finite elements
  double max_rel = 0;          // max |out - ref| / |ref| over elements with ref != 0
  std::string report;          // the first few mismatches as [row][head][i] out=.. ref=..
};
// `out` and `ref` are [rows][Hq][d]; throws InputError if their sizes differ or are not a
// multiple of Hq * d.
Comparison compare_outputs(std::span<const float> out, std::span<const float> ref, int num_q_heads,
                           int head_dim, Tolerance tol);

// max |a - b| / max |b|: the quantization error of `quantized_ref` against `unquantized_ref`
// (0 when both are all zeros). Throws InputError if the sizes differ.
double quantization_error(std::span<const float> quantized_ref,
                          std::span<const float> unquantized_ref);

}  // namespace decodebench
