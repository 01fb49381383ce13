// A backend runs the kernels of one kind of device: `cpu` (the optimized host decode), `emu`
// (the CUDA kernel source through the SIMT emulator, slow, for correctness) or `cuda` (the GPU).
// The harness (src/harness) drives every backend through this interface only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/errors.h"               // InputError
#include "results/device_info.h"         // DeviceInfo, Ceilings: what a report records of a device
#include "results/self_check_record.h"   // FlushRecord: what a cold flush touched
#include "results/timing_record.h"       // TimingRecord: how a point's samples were timed
#include "results/utilization_record.h"  // UtilizationRecord: how busy the device was
#include "workload/layer_model.h"        // LayerStage, GemmShape: scope "layer"
#include "workload/workload.h"

namespace decodebench {

struct TimingOptions {
  bool warm_l2 = false;  // --warm: skip the cache flush before each sample (cuda: L2, cpu: LLC)
};

// One sweep point made ready to run on a backend: inputs resident, workspace allocated.
class PreparedPoint {
 public:
  virtual ~PreparedPoint() = default;
  // One decode step, synchronous; used for validation and warm-up.
  virtual void run() = 0;
  // The output of the last run, decoded to float: [batch][Hq][d].
  virtual std::vector<float> output() = 0;
  // One timed sample: the time of one decode step, in seconds (every launch of the step
  // included). A sample may time several steps back to back and divide (timing()).
  virtual double time_one() = 0;
  // How time_one() times a sample (method, steps per sample, warm or cold caches), for the
  // report. Read after the samples: a backend may choose the steps per sample on the first.
  virtual TimingRecord timing() const = 0;
  // The read bandwidth (B/s) measured right before each timed sample, one per time_one() call
  // in order, or empty when the backend measures none. The cpu backend's cold-cache flush is a
  // timed read of 2x the LLC before every sample (rotating: a timed read of one copy of the
  // step's buffers, cpu_cold.h); on a host whose memory bandwidth drifts (a shared VM) this
  // pairs each step with the bandwidth of its own moment, where the sweep's ceilings are
  // minutes old (roofline.fraction_paired; compare's normalized space).
  virtual std::vector<double> paired_read_samples() const { return {}; }
  // The cold flush before each sample: the bytes it touches and the cache it must evict, for
  // the point's self-check (results/self_check.h check_flush). Empty where the backend records
  // none (default).
  virtual std::optional<FlushRecord> flush_record() const { return std::nullopt; }
  // How busy the device was over the timed samples (docs/design.md "Busy beside the roof"): the
  // measurement loop calls begin_utilization() after the warm-up, right before the first
  // time_one(), and end_utilization() right after the last; utilization() is read after that.
  // begin starts afresh (the sums of an earlier measurement are dropped). cpu: the CPU time of
  // the process's threads in a window around each timed step (the cold flush left out); cuda:
  // NVML over the whole span of the samples. Default: not measured (the emulator).
  virtual void begin_utilization() {}
  virtual void end_utilization() {}
  virtual std::optional<UtilizationRecord> utilization() const { return std::nullopt; }
};

// Scope "layer" (src/workload/layer_model.h): how the layer's GEMMs are set up.
struct LayerOptions {
  DType weights_dtype = DType::bf16;
};

// A layer-scope point made ready: one layer's decode step for the whole batch (the four GEMMs
// around the attention rung) and the LM head. run() runs every stage in order; output() is the
// attention's output, validated as at scope attention; time_one() times qkv_proj..down_proj
// (the LM head is run in the same sample after them but timed apart, stage_samples()).
class PreparedLayer : public PreparedPoint {
 public:
  // Per stage, in LayerStage order (attention included, lm_head last): the time of that stage in
  // each time_one() sample so far, seconds ([kNumLayerStages][samples]).
  virtual std::vector<std::vector<double>> stage_samples() const = 0;
  // After run(): GEMM `stage`'s input (the k elements of each row it read, packed [rows][k]) and
  // output ([rows][n]) on the given rows of the batch, decoded to float, for the harness's
  // reference product. Throws std::invalid_argument for attention.
  struct GemmValues {
    std::vector<float> input;
    std::vector<float> output;
  };
  virtual GemmValues gemm_values(LayerStage stage, std::span<const int> rows) = 0;
  // The GEMM library that ran them, with its version and where it was loaded from:
  // "OpenBLAS 0.3.21 (cblas_sbgemm)", "cuBLASLt 12.4.5 (/usr/local/cuda/lib64/libcublasLt.so.12)".
  virtual std::string gemm_library() const = 0;
};

// A link measured by a backend: what a KV cache tier's blocks cross (cuda: copies between pinned
// host memory and the device each way, a kernel reading mapped host memory, peer copies).
struct LinkMeasurement {
  std::string name;       // what was timed, e.g. "pinned host -> device, cudaMemcpyAsync"
  std::string direction;  // to_device, to_host, peer
  std::vector<std::pair<std::int64_t, double>> by_size;  // bytes per transfer, B/s
  double best_Bps = 0;
  // Per transfer: the smallest size's time less its bytes at best_Bps (what an engine pays per
  // batch of blocks it moves).
  double overhead_s = 0;
};

// How warm samples enqueue their N steps (sweep --timing): `graph` replays a CUDA graph of them
// where capture works, `eager` launches them one by one. The GPU check times one point both
// ways: a large gap says the step is short enough for the host's launch path to show.
enum class WarmTiming { graph, eager };
std::string_view warm_timing_name(WarmTiming t);   // "graph", "eager"
WarmTiming parse_warm_timing(std::string_view s);  // throws InputError listing the valid names

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // For the points prepared after it; a backend without CUDA graphs (cpu, emu: a host clock
  // around one step) has nothing to choose and ignores it.
  virtual void set_warm_timing(WarmTiming /*timing*/) {}
  virtual DeviceInfo device_info() = 0;
  // Runs the bandwidth and FMA ceiling kernels; may take a few seconds.
  virtual Ceilings measure_ceilings() = 0;
  // The links a KV tier crosses, measured where the backend has them (cuda); none elsewhere,
  // where `ceilings` shows the datasheet's.
  virtual std::vector<LinkMeasurement> measure_links() { return {}; }
  // Names of the kernels this backend can run (for `--kernel` validation and `kernels`).
  virtual std::vector<std::string> kernel_names() const = 0;
  // The units `kernel` (one of kernel_names()) does its multiply-adds on, which pick the FLOP
  // roof of its roofline (src/harness/roofline.h): cpu: fma for every kernel; emu, cuda: the
  // ladder's `compute` (KernelInfo::compute). Throws InputError for an unknown kernel.
  virtual ComputeUnit compute_unit(std::string_view kernel) const = 0;
  // The kernel `--kernel auto` picks for this point, whose block tables are `layout` (the
  // generator's, build_layout(spec), or a replayed step's, src/trace/replay_schedule.h).
  virtual std::string choose_kernel(const WorkloadSpec& spec, const PagedLayout& layout) = 0;
  // Empty if `kernel` can run `spec` with `layout` here; else why not (unsupported shape, does
  // not fit memory).
  virtual std::string skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                                  std::string_view kernel) = 0;
  // The same for the generator's layout of `spec`.
  std::string choose_kernel(const WorkloadSpec& spec) {
    return choose_kernel(spec, build_layout(spec));
  }
  std::string skip_reason(const WorkloadSpec& spec, std::string_view kernel) {
    return skip_reason(spec, build_layout(spec), kernel);
  }
  // Runs each ceiling kernel on a small buffer and checks its result (read sum, copy equality,
  // triad values) so `decodebench check` can report them correct. Default: none to check.
  struct SelfCheck {
    std::string name;  // "bandwidth.read", ...
    bool ok = false;
    std::string detail;  // what was compared, or the first mismatch
  };
  virtual std::vector<SelfCheck> check_ceiling_kernels() { return {}; }
  // How a point's samples will be made cold, and what each costs beside its timed step: the
  // sweep's --plan ETA asks this so that its estimate and prepare() agree. Default (cuda, emu):
  // a flush before each sample writing/reading 2x the device's L2 (`device.l2_bytes`).
  struct ColdSamplePlan {
    ColdMethod method = ColdMethod::flush;
    double overhead_bytes = 0;  // bytes moved per sample outside the timed step
  };
  virtual ColdSamplePlan cold_sample_plan(const WorkloadSpec& /*spec*/,
                                          const PagedLayout& /*layout*/, bool /*layer_scope*/,
                                          const TimingOptions& timing, const DeviceInfo& device) {
    // Inline: the backend libraries (emu, cuda) link without the factory that backend.cpp is.
    if (timing.warm_l2) return {ColdMethod::warm, 0.0};
    return {ColdMethod::flush, 2.0 * static_cast<double>(device.l2_bytes)};
  }
  // Makes `w` resident and ready to run `kernel`. Layout-only workloads: for a point too large
  // to materialize on the host, `w` may carry its spec, layout, sequences and source_block_ids
  // with q, k_cache and/or v_cache left EMPTY; a backend that accepts this (cuda) generates
  // the missing tensors where they live with the same counter-based values make_workload()
  // would have written (kernels::launch_fill), so the harness can still validate a subset
  // built on the host. A backend that cannot throws InputError. So does every backend, before
  // it uploads or launches anything, for w's block tables that kernels::unsupported_reason
  // refuses at layout scope (a context longer than its table, an entry read outside the pool).
  virtual std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                                 const TimingOptions& timing) = 0;

  // --- scope "layer" ---------------------------------------------------------------------------
  // Empty if this backend can run the layer step of `spec` with attention rung `kernel` (already
  // runnable: skip_reason() is empty) and these GEMMs; else why not (no GEMM library here, a
  // weights dtype it lacks, the weights do not fit memory). Default: this backend has no layer
  // scope.
  virtual std::string layer_skip_reason(const WorkloadSpec& /*spec*/, const PagedLayout& /*layout*/,
                                        std::string_view /*kernel*/,
                                        const LayerOptions& /*layer*/) {
    return "the " + name() + " backend has no layer scope (--scope layer runs on cpu and cuda)";
  }
  std::string layer_skip_reason(const WorkloadSpec& spec, std::string_view kernel,
                                const LayerOptions& layer) {
    return layer_skip_reason(spec, build_layout(spec), kernel, layer);
  }
  // Makes the layer step of `w` ready (weights generated where they live from the counter
  // generator, layer_model.h "test data"); `w` follows prepare()'s layout-only convention.
  // Default: throws InputError.
  virtual std::unique_ptr<PreparedLayer> prepare_layer(const Workload& w, std::string_view kernel,
                                                       const LayerOptions& layer,
                                                       const TimingOptions& /*timing*/) {
    throw InputError(layer_skip_reason(w.spec, w.layout, kernel, layer));
  }
  // The compute roof of the layer's GEMMs at `weights`, FLOP/s, named: cpu: the GEMM library's
  // rate measured on a large square product; cuda: the datasheet's dense tensor-core peak for
  // the dtype. flops 0 where unknown. Default: unknown.
  struct GemmCeiling {
    double flops = 0;
    std::string name;  // "OpenBLAS cblas_sbgemm 2048^3 (measured)", "tensor-core bf16 (datasheet)"
  };
  virtual GemmCeiling gemm_ceiling(DType /*weights*/) { return {}; }
};

// "cpu", "emu", "cuda" or "auto" (cuda when a GPU is present, else cpu). Throws InputError for
// an unknown name (listing the valid ones) and RuntimeFailure when the backend is not usable here.
std::unique_ptr<Backend> make_backend(std::string_view name, int device_index = 0);
std::vector<std::string> backend_names();  // those compiled into this build
bool cuda_device_present();

}  // namespace decodebench
