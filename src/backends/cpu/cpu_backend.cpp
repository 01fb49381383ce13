#include "backends/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/cpu_busy.h"
#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_cold.h"
#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_layer.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/host_facts.h"
#include "common/units.h"
#include "workload/byte_model.h"

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

// The rotation plan of an attention-scope point (cpu_cold.h): the step's unique bytes against
// `copy_bytes`. prepare() passes the copies' real size, --plan (cold_sample_plan) the workload's
// host bytes, a few KB apart; prepare() also counts its workload, already allocated, as
// available (`held`), as --plan's available memory still does. So only a point at the cap's
// exact edge could be planned apart.
cpu::ColdRotationPlan rotation_plan(const WorkloadSpec& spec, const PagedLayout& layout,
                                    std::int64_t copy_bytes, std::int64_t held) {
  return cpu::plan_cold_rotation(byte_model(spec, layout).min, copy_bytes,
                                 cpu::last_level_cache_bytes(), cpu::rotation_memory_cap(held));
}

// A test hook: DECODEBENCH_CPU_ROTATION_COPIES=N forces N copies (distance N / 2) on a point that
// rotates, so a test can plant a rotation too short to be cold and see prepare() refuse it.
void apply_forced_copies(cpu::ColdRotationPlan& plan) {
  const char* env = std::getenv("DECODEBENCH_CPU_ROTATION_COPIES");
  if (!env || !*env || plan.copies == 0) return;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 1 || v > 1'000'000)
    throw InputError("DECODEBENCH_CPU_ROTATION_COPIES='" + std::string(env) +
                     "' is not a copy count in [1, 1000000]");
  plan.copies = static_cast<int>(v);
  plan.distance = plan.copies / 2;
}

class CpuPoint final : public PreparedPoint {
 public:
  // Cold points (`cold`) rotate over copies kept in `copies` where they fit, else empty the
  // caches before every timed sample with the backend's flusher, which `flusher` makes on first
  // use (its regions are 2x the LLC each: a sweep whose points all rotate never maps them);
  // warm points do neither (--warm). `cascade`: the prefix-aware decode, planned here from w's
  // block tables (the plan is host work a serving engine does once per batch, not timed).
  CpuPoint(const Workload& w, bool cascade, bool cold,
           const std::function<cpu::CacheFlusher*()>& flusher,
           std::shared_ptr<cpu::HostBufferCache> copies)
      : attention_(w, cascade), cold_(cold), busy_(omp_get_max_threads()) {
    if (!cold_) return;
    // The kept buffer is this point's to reuse, so it counts as available.
    rotation_ = rotation_plan(
        w.spec, w.layout, attention_.copy_bytes(),
        workload_host_bytes(w.spec, w.layout) + static_cast<std::int64_t>(copies->kept_bytes()));
    apply_forced_copies(rotation_);
    if (rotation_.copies == 0) {
      flusher_ = flusher();
      return;
    }
    // The plan verified by the checker on the bytes the samples really touch, before any copy
    // is made: a rotation that is not cold would time warm steps as cold ones.
    const std::vector<cpu::Touch> turn =
        cpu::rotation_schedule(rotation_.copies, rotation_.distance,
                               byte_model(w.spec, w.layout).min, attention_.copy_bytes());
    if (std::string why = cpu::rotation_cold_error(turn, cpu::last_level_cache_bytes());
        !why.empty())
      throw std::logic_error(
          fmt::format("cold rotation over {} copies: {}", rotation_.copies, why));
    attention_.make_copies(rotation_.copies, std::move(copies));
  }

  void run() override { attention_.run(); }

  std::vector<float> output() override {
    return decode_to_float(attention_.output(), attention_.dtype());
  }

  std::vector<double> paired_read_samples() const override { return paired_read_; }
  std::optional<FlushRecord> flush_record() const override {
    if (!flusher_) return std::nullopt;
    return flusher_->record();
  }

  // The threads' CPU time in a window around each timed step (cpu_busy.h).
  void begin_utilization() override { busy_.reset(); }
  void end_utilization() override { busy_.finish(); }
  std::optional<UtilizationRecord> utilization() const override { return busy_.record(); }

  // A steady clock around one step; cold: after the flush, or on the next copy of a rotation.
  TimingRecord timing() const override {
    TimingRecord t{TimingMethod::host_clock_per_step, /*steps_per_sample=*/1,
                   /*warm_l2=*/!cold_};
    if (!t.warm_l2) {
      t.rotation_copies = rotation_.copies;
      t.rotation_bytes = rotation_.copies > 0 ? attention_.copies() * attention_.copy_bytes() : 0;
      t.flush_reason = rotation_.flush_reason;
    }
    return t;
  }

  double time_one() override {
    int copy = 0;
    if (rotation_.copies > 0) {
      // Cold by rotation: the paired read streams the copy half a turn ahead (last touched half
      // a turn ago), then the step runs on the next copy, last touched a whole turn ago. One
      // read per sample keeps paired_read_samples one per sample as with the flush, at the cost
      // of one copy's bytes (counted in the plan), where the flush read 2x the LLC; its rate is
      // that of a plain stream of the step's own size, so for a small step it is lower than the
      // flush's (the fork and join weigh more).
      const int n = rotation_.copies;
      copy = static_cast<int>(sample_ % n);
      const std::span<const std::byte> ahead = attention_.copy((copy + rotation_.distance) % n);
      const auto r0 = std::chrono::steady_clock::now();
      sink_ ^= cpu::stream_read(ahead.data(), ahead.size());
      const std::chrono::duration<double> dr = std::chrono::steady_clock::now() - r0;
      paired_read_.push_back(static_cast<double>(ahead.size()) / dr.count());
      ++sample_;
    } else if (flusher_) {
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
    if (rotation_.copies > 0)
      attention_.run_copy(copy);
    else
      run();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    busy_.stop();
    return dt.count();
  }

 private:
  cpu::CpuAttention attention_;
  bool cold_;
  cpu::CacheFlusher* flusher_ = nullptr;  // cold and not rotating: the backend's flusher
  cpu::ColdRotationPlan rotation_;        // copies 0: the flush (when cold)
  std::int64_t sample_ = 0;               // rotation: the sample's copy is sample_ % copies
  std::uint64_t sink_ = 0;                // the paired reads' XOR, kept so the loads stay live
  std::vector<double> paired_read_;       // B/s of each timed flush or read, one per sample
  cpu::ThreadBusyMeter busy_;             // the step runs on the whole OpenMP team
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

  // What prepare() will do: the attention scope rotates where rotation_plan allows (the paired
  // read, one copy, per sample), else flushes (CacheFlusher's read per sample, its eviction not
  // counted); the layer scope always flushes (cpu_layer.cpp).
  ColdSamplePlan cold_sample_plan(const WorkloadSpec& spec, const PagedLayout& layout,
                                  bool layer_scope, const TimingOptions& timing,
                                  const DeviceInfo&) override {
    if (timing.warm_l2) return {ColdMethod::warm, 0.0};
    const auto flush =
        static_cast<double>(cpu::CacheFlusher::bytes_for(cpu::last_level_cache_bytes()));
    if (layer_scope) return {ColdMethod::flush, flush};
    const cpu::ColdRotationPlan plan =
        rotation_plan(spec, layout, workload_host_bytes(spec, layout), 0);
    if (plan.copies > 0) return {ColdMethod::rotation, static_cast<double>(plan.copy_bytes)};
    return {ColdMethod::flush, flush};
  }

  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                         const TimingOptions& timing) override {
    if (kernel != kKernelName && kernel != kCascadeName) throw InputError(unknown_kernel(kernel));
    return std::make_unique<CpuPoint>(
        w, kernel == kCascadeName, !timing.warm_l2, [this] { return flusher(); }, copies_);
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
    return std::make_unique<cpu::CpuLayer>(w, kernel == kCascadeName, weights_, lib,
                                           timing.warm_l2 ? nullptr : flusher());
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
  cpu::CacheFlusher* flusher() {
    if (!flusher_) flusher_ = std::make_unique<cpu::CacheFlusher>();
    return flusher_.get();
  }
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
  std::unique_ptr<cpu::CacheFlusher> flusher_;  // one for all points, made on the first flush
  // The rotation copies' buffer, kept from point to point (HostBufferCache).
  std::shared_ptr<cpu::HostBufferCache> copies_ = std::make_shared<cpu::HostBufferCache>();
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
