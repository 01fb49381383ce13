#include "backends/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/cpu_busy.h"
#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_layer.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/host_facts.h"
#include "common/units.h"

namespace decodebench {
namespace {

namespace k = kernels;
// "cpu": paged_decode; "cascade": paged_decode_cascade with the prefix plan of the point's block
// tables (cpu_decode.h).
constexpr const char* kKernelName = "cpu";
constexpr const char* kCascadeName = "cascade";
// A point may use this share of the available host memory; the rest is the reference output,
// the report and the OS.
constexpr double kMemoryShare = 0.7;

std::string unknown_kernel(std::string_view kernel) {
  return "unknown kernel '" + std::string(kernel) + "' for the cpu backend (valid: " + kKernelName +
         ", " + kCascadeName + ")";
}

class CpuPoint final : public PreparedPoint {
 public:
  // `flusher` (owned by the backend) empties the caches before every timed sample; nullptr
  // times warm samples (--warm). `cascade`: the prefix-aware decode, planned here from w's
  // block tables (the plan is host work a serving engine does once per batch, not timed).
  CpuPoint(const Workload& w, cpu::CacheFlusher* flusher, bool cascade)
      : attention_(w, cascade), flusher_(flusher), busy_(omp_get_max_threads()) {}

  void run() override { attention_.run(); }

  std::vector<float> output() override {
    return decode_to_float(attention_.output(), attention_.dtype());
  }

  std::vector<double> paired_read_samples() const override { return paired_read_; }

  // The threads' CPU time in a window around each timed step (cpu_busy.h).
  void begin_utilization() override { busy_.reset(); }
  void end_utilization() override { busy_.finish(); }
  std::optional<UtilizationRecord> utilization() const override { return busy_.record(); }

  // A steady clock around one step; cold: after the flush, which is outside the clock reads.
  TimingRecord timing() const override {
    return {TimingMethod::host_clock_per_step, /*steps_per_sample=*/1,
            /*warm_l2=*/flusher_ == nullptr};
  }

  double time_one() override {
    if (flusher_) {
      // Cold: the point's own buffers out of every cache, then the timed read of a region that
      // empties the caches of everything else and samples the read bandwidth of this moment.
      for (const auto& [data, bytes] : attention_.buffers()) cpu::evict_from_caches(data, bytes);
      const auto f0 = std::chrono::steady_clock::now();
      flusher_->flush();
      const std::chrono::duration<double> df = std::chrono::steady_clock::now() - f0;
      paired_read_.push_back(static_cast<double>(flusher_->bytes()) / df.count());
    }
    busy_.start();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    busy_.stop();
    return dt.count();
  }

 private:
  cpu::CpuAttention attention_;
  cpu::CacheFlusher* flusher_;       // nullptr: warm samples
  std::vector<double> paired_read_;  // B/s of each timed flush, one per sample
  cpu::ThreadBusyMeter busy_;        // the step runs on the whole OpenMP team
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  DeviceInfo device_info() override {
    DeviceInfo info;
    info.backend = "cpu";
    info.name = cpu_model_name();
    info.sm_count = omp_get_max_threads();
    info.l2_bytes = cpu::last_level_cache_bytes();
    info.mem_bytes = cpu::available_memory_bytes();
    info.flops_peak = measured_.fma_flops;  // only the measured peak exists on the CPU
    info.measured = measured_;
    return info;
  }

  Ceilings measure_ceilings() override {
    measured_ = cpu::measure_ceilings();
    return measured_;
  }

  std::vector<std::string> kernel_names() const override { return {kKernelName, kCascadeName}; }

  // Every CPU kernel runs on the cores' fp32 FMA (the vector units), none on a matrix unit.
  ComputeUnit compute_unit(std::string_view) const override { return ComputeUnit::fma; }

  // cascade where the planner finds a shared prefix in the point's block tables (a group of two
  // or more sequences), else cpu: without one, cascade is cpu plus the planning.
  using Backend::choose_kernel;
  using Backend::layer_skip_reason;
  using Backend::skip_reason;

  std::string choose_kernel(const WorkloadSpec& spec, const PagedLayout& layout) override {
    const k::PagedDecodeParams p = shape_params(spec, layout);
    if (!cpu::cascade_unsupported_reason(p).empty()) return kKernelName;
    return k::plan_prefixes(p).num_groups() > 0 ? kCascadeName : kKernelName;
  }

  std::string skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                          std::string_view kernel) override {
    if (kernel != kKernelName && kernel != kCascadeName) return unknown_kernel(kernel);
    if (std::string why = cpu::unsupported_reason(shape_params(spec)); !why.empty()) return why;
    if (kernel == kCascadeName) {
      if (std::string why = cpu::cascade_unsupported_reason(shape_params(spec)); !why.empty())
        return why;
    }
    const double out_bytes = static_cast<double>(spec.batch) * spec.model.num_q_heads *
                             spec.model.value_dim() * dtype_size(spec.q_dtype);
    const double need = static_cast<double>(workload_host_bytes(spec, layout)) + out_bytes;
    const double avail = static_cast<double>(cpu::available_memory_bytes());
    if (avail > 0 && need > kMemoryShare * avail) {
      return "needs " + format_gb(need) + " of host memory; " +
             std::to_string(int(kMemoryShare * 100)) + " % of the " + format_gb(avail) +
             " available is " + format_gb(kMemoryShare * avail);
    }
    return {};
  }

  std::vector<SelfCheck> check_ceiling_kernels() override { return cpu::check_ceiling_kernels(); }

  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                         const TimingOptions& timing) override {
    if (kernel != kKernelName && kernel != kCascadeName) throw InputError(unknown_kernel(kernel));
    if (!timing.warm_l2 && !flusher_) flusher_ = std::make_unique<cpu::CacheFlusher>();
    return std::make_unique<CpuPoint>(w, timing.warm_l2 ? nullptr : flusher_.get(),
                                      kernel == kCascadeName);
  }

  // --- scope "layer" ---------------------------------------------------------------------------

  std::string layer_skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                                std::string_view kernel, const LayerOptions& layer) override {
    if (std::string why = skip_reason(spec, layout, kernel); !why.empty()) return why;
    if (std::string why = layer_support_error(spec.model, layer.weights_dtype, spec.q_dtype);
        !why.empty())
      return why;
    if (std::string why = library_skip_reason(layer.weights_dtype); !why.empty()) return why;
    // Host memory: the attention's workload, the step's activations and the weights, less what
    // the weights cache already holds (or frees for them).
    const DType wt = layer.weights_dtype;
    const std::int64_t rows = spec.batch;
    std::int64_t activations = rows * spec.model.hidden_size;  // x
    for (LayerStage s : {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                         LayerStage::down_proj, LayerStage::lm_head})
      activations += gemm_shape(spec.model, s, spec.batch).n * rows;
    activations += rows * spec.model.intermediate_size;  // down_proj's input made dense
    const double out_bytes = static_cast<double>(rows) * spec.model.num_q_heads *
                             spec.model.value_dim() * dtype_size(spec.q_dtype);
    const bool cached = weights_ && weights_->same_key(spec.model, wt, spec.seed);
    const double weights =
        cached ? 0.0
               : static_cast<double>(cpu::LayerWeights::host_bytes(spec.model, wt, /*packs=*/true));
    // Activations: bf16, and as much again for a library's fp32 output.
    const double need = static_cast<double>(workload_host_bytes(spec, layout)) + out_bytes +
                        static_cast<double>(activations) * (2 + 4) + weights;
    double avail = static_cast<double>(cpu::available_memory_bytes());
    if (weights_ && !cached) avail += static_cast<double>(weights_->bytes());
    if (avail > 0 && need > kMemoryShare * avail) {
      return "layer scope needs " + format_gb(need) + " of host memory (weights " +
             format_gb(weights) + " included); " + std::to_string(int(kMemoryShare * 100)) +
             " % of the " + format_gb(avail) + " available is " + format_gb(kMemoryShare * avail);
    }
    return {};
  }

  std::unique_ptr<PreparedLayer> prepare_layer(const Workload& w, std::string_view kernel,
                                               const LayerOptions& layer,
                                               const TimingOptions& timing) override {
    if (kernel != kKernelName && kernel != kCascadeName) throw InputError(unknown_kernel(kernel));
    const DType wt = layer.weights_dtype;
    if (std::string why = layer_support_error(w.spec.model, wt, w.spec.q_dtype); !why.empty())
      throw InputError(why);
    if (std::string why = library_skip_reason(wt); !why.empty()) throw InputError(why);
    cpu::GemmLibrary& lib = *library_for(wt);
    if (!weights_ || !weights_->same_key(w.spec.model, wt, w.spec.seed)) {
      weights_.reset();  // free the last model's before generating the next
      weights_ = std::make_shared<cpu::LayerWeights>(w.spec.model, wt, w.spec.seed, lib);
    }
    if (!timing.warm_l2 && !flusher_) flusher_ = std::make_unique<cpu::CacheFlusher>();
    return std::make_unique<cpu::CpuLayer>(w, kernel == kCascadeName, weights_, lib,
                                           timing.warm_l2 ? nullptr : flusher_.get());
  }

  // The library's own rate on a 2048^3 bf16 product, measured once (~0.2 s).
  GemmCeiling gemm_ceiling(DType weights) override {
    cpu::GemmLibrary* lib = library_for(weights);
    if (!lib) return {};
    GemmCeiling& c = gemm_ceilings_[weights];
    if (c.flops == 0) {
      c.flops = cpu::measure_square_flops(*lib, 2048, /*repetitions=*/3);
      c.name = lib->name() + " " + std::string(dtype_name(weights)) + " matmul 2048^3 (measured)";
    }
    return c;
  }

 private:
  std::vector<std::unique_ptr<cpu::GemmLibrary>>& libraries() {
    if (!libraries_loaded_) {
      libraries_ = cpu::gemm_libraries();
      libraries_loaded_ = true;
    }
    return libraries_;
  }
  // The first library of the preference order that runs `weights`, or null.
  cpu::GemmLibrary* library_for(DType weights) {
    for (const auto& lib : libraries())
      if (lib->supports(weights)) return lib.get();
    return nullptr;
  }
  std::string library_skip_reason(DType weights) {
    if (library_for(weights)) return {};
    if (libraries().empty()) return cpu::missing_gemm_library();
    std::vector<std::string> why;
    for (const auto& lib : libraries()) why.push_back(lib->unsupported_reason(weights));
    return "the cpu backend runs no " + std::string(dtype_name(weights)) +
           " weights here: " + fmt::format("{}", fmt::join(why, "; ")) +
           " (the cpu layer scope runs bf16 weights, --weights-dtype bf16, on oneDNN with "
           "AVX-512)";
  }

  Ceilings measured_;
  std::unique_ptr<cpu::CacheFlusher> flusher_;  // one for all points, made on first cold point
  std::vector<std::unique_ptr<cpu::GemmLibrary>> libraries_;  // gemm_libraries(), made on use
  bool libraries_loaded_ = false;
  // The last layer point's weights: consecutive points of one model (a batch series) share
  // them; llama-3.1-8b's layer and LM head are ~1.5 GB of bf16 to generate.
  std::shared_ptr<cpu::LayerWeights> weights_;
  std::map<DType, GemmCeiling> gemm_ceilings_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace decodebench
