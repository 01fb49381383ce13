#include "backends/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/host_facts.h"

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

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

class CpuPoint final : public PreparedPoint {
 public:
  // `flusher` (owned by the backend) empties the caches before every timed sample; nullptr
  // times warm samples (--warm). `cascade`: the prefix-aware decode, planned here from w's
  // block tables (the plan is host work a serving engine does once per batch, not timed).
  CpuPoint(const Workload& w, cpu::CacheFlusher* flusher, bool cascade)
      : w_(w), params_(w.params()), flusher_(flusher), cascade_(cascade) {
    if (const std::string why = cpu::unsupported_reason(params_); !why.empty())
      throw InputError(why);
    // A layout-only workload (backend.h) is refused here, so the harness materializes it.
    if (w.q.empty() || w.k_cache.empty() || w.v_cache.empty())
      throw InputError("the cpu backend needs the workload's host tensors (q, k_cache, v_cache)");
    if (cascade_) {
      plan_ = k::plan_prefixes(params_);
      plan_.bind(params_);
    }
    out_.resize(static_cast<std::size_t>(w.rows()) * params_.num_q_heads * params_.head_dim *
                dtype_size(params_.q_dtype));
    params_.out = out_.data();
    cpu::advise_huge_pages(w.k_cache.data(), w.k_cache.size());
    cpu::advise_huge_pages(w.v_cache.data(), w.v_cache.size());
    inputs_ = {{w.k_cache.data(), w.k_cache.size()},
               {w.v_cache.data(), w.v_cache.size()},
               {w.q.data(), w.q.size()},
               {w.layout.block_tables.data(), w.layout.block_tables.size() * sizeof(std::int32_t)},
               {w.layout.context_lens.data(), w.layout.context_lens.size() * sizeof(std::int32_t)},
               {out_.data(), out_.size()}};
  }

  void run() override {
    if (cascade_)
      cpu::paged_decode_cascade(params_);
    else
      cpu::paged_decode(params_);
  }

  std::vector<float> output() override { return decode_to_float(out_, params_.q_dtype); }

  std::vector<double> paired_read_samples() const override { return paired_read_; }

  // A steady clock around one step; cold: after the flush, which is outside the clock reads.
  TimingRecord timing() const override {
    return {TimingMethod::host_clock_per_step, /*steps_per_sample=*/1,
            /*warm_l2=*/flusher_ == nullptr};
  }

  double time_one() override {
    if (flusher_) {
      // Cold: the point's own buffers out of every cache, then the timed read of a region that
      // empties the caches of everything else and samples the read bandwidth of this moment.
      for (const auto& [data, bytes] : inputs_) cpu::evict_from_caches(data, bytes);
      const auto f0 = std::chrono::steady_clock::now();
      flusher_->flush();
      const std::chrono::duration<double> df = std::chrono::steady_clock::now() - f0;
      paired_read_.push_back(static_cast<double>(flusher_->bytes()) / df.count());
    }
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    return dt.count();
  }

 private:
  const Workload& w_;  // owned by the caller; outlives this point
  k::PagedDecodeParams params_;
  std::vector<std::byte> out_;  // [rows][Hq][d] q_dtype
  cpu::CacheFlusher* flusher_;  // nullptr: warm samples
  bool cascade_;
  k::PrefixPlan plan_;               // bound into params_ when cascade_
  std::vector<double> paired_read_;  // B/s of each timed flush, one per sample
  std::vector<std::pair<const void*, std::size_t>> inputs_;  // evicted before a cold sample
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
  std::string choose_kernel(const WorkloadSpec& spec) override {
    const PagedLayout layout = build_layout(spec);
    return k::plan_prefixes(shape_params(spec, layout)).num_groups() > 0 ? kCascadeName
                                                                         : kKernelName;
  }

  std::string skip_reason(const WorkloadSpec& spec, std::string_view kernel) override {
    if (kernel != kKernelName && kernel != kCascadeName) return unknown_kernel(kernel);
    if (std::string why = cpu::unsupported_reason(shape_params(spec)); !why.empty()) return why;
    const PagedLayout layout = build_layout(spec);
    const double out_bytes = static_cast<double>(spec.batch) * spec.model.num_q_heads *
                             spec.model.head_dim * dtype_size(spec.q_dtype);
    const double need = static_cast<double>(workload_host_bytes(spec, layout)) + out_bytes;
    const double avail = static_cast<double>(cpu::available_memory_bytes());
    if (avail > 0 && need > kMemoryShare * avail) {
      return "needs " + gb(need) + " of host memory; " + std::to_string(int(kMemoryShare * 100)) +
             " % of the " + gb(avail) + " available is " + gb(kMemoryShare * avail);
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

 private:
  Ceilings measured_;
  std::unique_ptr<cpu::CacheFlusher> flusher_;  // one for all points, made on first cold point
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace decodebench
