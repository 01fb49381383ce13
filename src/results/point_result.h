// The data model of one report entry (docs/report-schema.md: results[]) and its pieces. Plain
// structs only: the harness fills them, the report layer writes, reads, merges and prints them.
//
// Convention for "not available": a double that has no value for this point (the time of a
// point that was never timed, a roofline fraction without a ceiling) is NaN here and `null` in
// the JSON. Scripts test for null, never for 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results/device_info.h"         // DeviceInfo (one devices[] entry)
#include "results/self_check_record.h"   // FlushRecord, PointFlag (self_check.h)
#include "results/timing_record.h"       // TimingRecord (how the samples were timed)
#include "results/utilization_record.h"  // UtilizationRecord (how busy the device was)
#include "workload/scope.h"
#include "workload/workload.h"  // ContextSpec, DType

namespace decodebench {

inline constexpr double kNotAvailable = std::numeric_limits<double>::quiet_NaN();
inline bool available(double x) { return !std::isnan(x); }

// Summary of the timed samples of one point, seconds (docs/design.md "Timing").
//   rel_noise: the relative standard error of the median, a robust estimate:
//     sigma     = (p90 - p10) / 2.5631      (p90 - p10 spans 2 * 1.2816 sigma of a normal)
//     rel_noise = 1.2533 * sigma / sqrt(samples) / median
//   i.e. "the median is known to about +-rel_noise". Unlike stddev/mean it shrinks as samples
//   accumulate (so the stopping rule converges on a noisy machine) and a few preempted samples
//   do not move it. The spread of single samples is what p10..p90 report. NaN below 2 samples.
struct SampleStats {
  double median = kNotAvailable;
  double min = kNotAvailable;
  double max = kNotAvailable;
  double p10 = kNotAvailable;
  double p90 = kNotAvailable;
  double mean = kNotAvailable;
  double rel_noise = kNotAvailable;
  int samples = 0;
};

// docs/design.md "Byte and FLOP model", one decode step of one layer.
struct BytesRecord {
  double kv_logical = 0;  // what a prefix-unaware kernel streams
  double kv_unique = 0;   // distinct (block, slot) pairs: the compulsory KV traffic
  double min = 0;         // kv_unique + q + out + block tables + context_lens
};

enum class Bound { memory, compute };
std::string_view bound_name(Bound b);

std::string_view compute_unit_name(ComputeUnit u);   // "fma", "tensor_core"
ComputeUnit parse_compute_unit(std::string_view s);  // throws InputError listing the valid names

// The FLOP roof a point's roofline used: the peak of the units its kernel runs on.
struct ComputeCeiling {
  ComputeUnit unit = ComputeUnit::fma;
  std::string name;              // "fp32 FMA (measured)", "tensor-core f16/bf16 (datasheet)", ...
  double flops = kNotAvailable;  // FLOP/s; NaN: the device has no figure for that unit
};

// src/harness/roofline.h computes these.
struct RooflineRecord {
  Bound bound = Bound::memory;      // which roof is lower for this point (measured ceilings)
  double t_roof_s = kNotAvailable;  // max(bytes_min / BW_measured, flops / compute_ceiling)
  double fraction_measured = kNotAvailable;   // t_roof_s / t_median
  double fraction_datasheet = kNotAvailable;  // same against the datasheet bandwidth
  // Against the read bandwidth measured right before the samples (PreparedPoint::
  // paired_read_Bps: the cpu backend's timed cache flush); NaN where none was measured.
  double paired_read_Bps = kNotAvailable;
  double fraction_paired = kNotAvailable;  // max(bytes_min / paired_read_Bps, flop roof) / t
  // The compute roof `bound` and the times were judged against; empty where no roofline was
  // computed (a point not ok) or the report predates the field (unknown).
  std::optional<ComputeCeiling> compute_ceiling = std::nullopt;
};

// The bound in a word for the tables: "mem", "fma" (compute-bound on the fp32 FMA roof), "tc"
// (on the tensor-core roof), or "compute" where the report does not say which roof.
std::string_view bound_label(const RooflineRecord& r);

struct BandwidthRecord {
  double achieved = kNotAvailable;  // bytes.min / t_median, B/s
  double logical = kNotAvailable;   // (bytes.min - kv_unique + kv_logical) / t_median, B/s
};

// Validation against the CPU reference (src/reference), done before timing.
struct ErrorRecord {
  double max_abs = kNotAvailable;    // max |out - ref| over the validated rows
  double max_rel = kNotAvailable;    // max |out - ref| / max(|ref|, tiny)
  double quant_rel = kNotAvailable;  // fp8 KV only: reference on fp8 values vs on unquantized
                                     // values; the dtype's accuracy cost, not a kernel error
  int rows_checked = 0;              // sequences compared (all, or a deterministic subset)
  std::string first_mismatch;        // for status wrong: where and by how much
};

// Scope "layer" (src/workload/layer_model.h): one stage of the layer step.
struct StageRecord {
  std::string name;                      // stage_name(): qkv_proj, attention, ..., lm_head
  std::int64_t m = 0, n = 0, k = 0;      // the GEMM's shape; 0 for attention
  double bytes = 0;                      // the model's bytes (GEMM: weight + input + output)
  double flops = 0;                      // useful FLOPs
  SampleStats time_s;                    // the stage's time over the samples
  double t_roof_s = kNotAvailable;       // max(bytes / BW, flops / the stage's FLOP roof)
  double max_rel_error = kNotAvailable;  // GEMMs: against the reference product (validation)
};

// The layer step's split into weights and KV, its GEMM library and what it leaves out.
struct LayerRecord {
  DType weights_dtype = DType::bf16;
  std::string gemm_library;           // PreparedLayer::gemm_library()
  std::vector<std::string> left_out;  // kLayerLeftOut
  std::vector<StageRecord> stages;    // kNumLayerStages, LayerStage order (lm_head last)
  double weight_bytes = 0;            // the four GEMMs' weights, read once per step
  double kv_bytes = 0;                // the attention's compulsory KV (bytes.kv_unique)
  double activation_bytes = 0;        // the GEMMs' inputs and outputs
  double gemm_flops = 0;              // the four GEMMs
  double attention_flops = 0;
  double time_weights_s = kNotAvailable;       // the four GEMM stages' medians summed
  double time_kv_s = kNotAvailable;            // the attention stage's median
  std::optional<ComputeCeiling> gemm_ceiling;  // the GEMM stages' FLOP roof
  // tokens/s of the model with the LM head once per step: batch / (t_layer * num_layers +
  // lm_head's median). PointResult::tokens_per_s leaves it out.
  double tokens_per_s_with_lm_head = kNotAvailable;
};

// not_run: planned but not (yet) run, because the sweep is still running, was interrupted, or
// stopped at a device failure; only the identity is filled (docs/report-schema.md).
enum class PointStatus { ok, wrong, skipped, error, not_run };
std::string_view status_name(PointStatus s);
PointStatus parse_status(std::string_view s);  // throws InputError listing the valid names

struct PointResult {
  int index = 0;                 // position in the full (unsharded) sweep expansion
  std::string kernel;            // the kernel that ran ("auto" already resolved)
  std::string kernel_requested;  // "auto" or the name the sweep asked for
  std::string backend;
  Scope scope = Scope::attention;
  std::string model;
  int num_q_heads = 0, num_kv_heads = 0, head_dim = 0, num_layers = 0;
  // The model's attention variants (ModelShape): a window on windowed_layers of num_layers,
  // sinks, soft-cap. JSON: in model_shape, written only when set (absent: none, as in reports
  // from before them).
  int sliding_window = 0, windowed_layers = 0;
  bool sinks = false;
  double attn_logit_softcapping = 0;
  // MLA (ModelShape::is_mla): the latent's width and its RoPE part; head_dim is their sum and
  // num_kv_heads 1. JSON: in model_shape, written only for MLA.
  int kv_lora_rank = 0, qk_rope_head_dim = 0;
  DType kv_dtype = DType::f16;
  DType q_dtype = DType::f16;
  int block_size = 0;
  int batch = 0;
  ContextSpec context;         // JSON: {kind: fixed|ragged, values: [n] | [lo, hi]}
  double hit_rate = 0;         // requested
  double hit_rate_actual = 0;  // from the built layout
  int prefix_groups = 1;
  std::uint64_t seed = 0;
  PointStatus status = PointStatus::ok;
  std::string reason;           // why skipped / wrong / error; empty when ok
  SampleStats time_s;           // NaN unless status ok
  std::vector<double> samples;  // every timed sample, seconds (kept, STYLE.md 18)
  // Read bandwidth (B/s) measured right before each sample, aligned with `samples`; empty where
  // none was measured (PreparedPoint::paired_read_samples).
  std::vector<double> paired_read_samples;
  std::optional<TimingRecord> timing;  // how they were timed; empty unless timed (JSON null)
  // The cold flush's size beside the cache it had to beat; empty where the backend records none
  // or the point is warm (JSON: absent).
  std::optional<FlushRecord> flush;
  // The self-checks it failed (results/self_check.h); empty: none (JSON: absent). A flagged
  // point keeps status ok and every figure, but is no result (counts_as_result).
  std::vector<PointFlag> flags;
  // How busy the device was over the samples, set beside the roofline fraction; empty unless
  // timed on a backend that measures it (cpu, cuda; JSON null).
  std::optional<UtilizationRecord> utilization;
  BytesRecord bytes;
  double flops = 0;
  double arithmetic_intensity = 0;  // flops / bytes.min
  BandwidthRecord bandwidth;        // NaN unless status ok
  RooflineRecord roofline;          // times NaN unless status ok
  // batch / (t_median * num_layers): attention only at scope attention, the model's layers (LM
  // head not included: layer->tokens_per_s_with_lm_head) at scope layer.
  double tokens_per_s = kNotAvailable;
  ErrorRecord error;  // the attention's (scope layer: each GEMM's in layer->stages)
  // Scope layer: bytes, flops, bandwidth and roofline above are the whole layer step's
  // (weights + activations + the attention's); this splits them. Empty at scope attention.
  std::optional<LayerRecord> layer;
};

// One devices[] entry: what the backend reports about its device, ceilings included.
using DeviceRecord = DeviceInfo;

}  // namespace decodebench
