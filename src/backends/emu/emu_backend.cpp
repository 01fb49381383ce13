#include "backends/emu/emu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "backends/ladder_backend.h"
#include "common/errors.h"
#include "device/float_formats.h"
#include "kernels.h"

namespace decodebench {
namespace {

namespace k = kernels;

float decode_out(const std::byte* base, DType t, std::size_t i) {
  std::uint16_t bits;
  std::memcpy(&bits, base + 2 * i, 2);
  return t == DType::bf16 ? floatfmt::bf16_to_float(bits) : floatfmt::f16_to_float(bits);
}

class EmuPoint final : public PreparedPoint {
 public:
  // `rung` was checked against w's shapes and layout (LadderBackend::runnable_rung): the output
  // is never sized for a dtype the kernel does not write, and the planners below read the block
  // tables. The launch checks the rest.
  EmuPoint(const Workload& w, const k::KernelInfo& rung) : kernel_(rung.name) {
    w_ = w;
    params_ = w_.params();
    const k::KernelInfo* info = &rung;
    // [rows][Hq][dv] q_dtype (dv: MLA's value width, else d). Filled with 0xFF (NaN in f16 and
    // bf16) so an element the kernel never writes fails validation instead of passing on
    // leftover zeros.
    out_.assign(static_cast<std::size_t>(w_.rows()) * params_.num_q_heads *
                    w_.spec.model.value_dim() * dtype_size(params_.q_dtype),
                std::byte{0xFF});
    params_.out = out_.data();
    // A prefix-aware rung reads the shared prefixes the block tables hold, planned here once
    // (the plan's arrays live in this point: host pointers, as the emulator reads them).
    if (info->prefix_aware) {
      plan_ = k::plan_prefixes(params_);
      plan_.bind(params_);
    }
    if (info->uses_workspace) {
      const k::SplitKvWorkspace layout = k::plan_workspace(*info, params_, kEmuResidentCtas);
      // Whole floats, so the buffer is float-aligned (16-byte by the allocator).
      workspace_.assign((layout.total_bytes + sizeof(float) - 1) / sizeof(float), 0.f);
      layout.bind(params_, workspace_.data());
    }
  }

  void run() override {
    const k::LaunchResult r = k::emu::launch_paged_decode(kernel_, params_, /*stream=*/nullptr);
    if (!r.ok()) {
      throw RuntimeFailure("emu backend: kernel '" + kernel_ + "' " +
                           (r.status == k::LaunchStatus::unsupported ? "refused the point: "
                                                                     : "failed in the emulator: ") +
                           r.message);
    }
  }

  std::vector<float> output() override {
    const std::size_t n = out_.size() / dtype_size(params_.q_dtype);
    std::vector<float> out(n);  // [rows][Hq][d]
    for (std::size_t i = 0; i < n; ++i) out[i] = decode_out(out_.data(), params_.q_dtype, i);
    return out;
  }

  // Wall-clock time of one emulated step. Meaningless as a GPU figure; kept so the harness loop
  // runs unchanged on every backend.
  // The emulator flushes nothing, whatever --warm says: the host caches stay warm.
  TimingRecord timing() const override {
    return {TimingMethod::host_clock_per_step, /*steps_per_sample=*/1, /*warm_l2=*/true};
  }

  double time_one() override {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  Workload w_;  // an owned copy: emulated points are small (kEmuMaxKvElements)
  std::string kernel_;
  k::PagedDecodeParams params_;
  std::vector<std::byte> out_;    // [rows][Hq][d] q_dtype
  std::vector<float> workspace_;  // split_kv partials
  k::PrefixPlan plan_;            // prefix-aware rungs: what params_ points into
};

class EmuBackend final : public LadderBackend {
 public:
  std::string name() const override { return "emu"; }

  DeviceInfo device_info() override {
    DeviceInfo info;
    info.backend = "emu";
    info.name = "SIMT emulator on the CPU: correctness only, timings are not GPU timings";
    info.sm_count = kEmuSmCount;  // what the split_kv planner is told
    return info;
  }

  // Not measured: emulated bandwidth is a property of the emulator, not of any GPU. All zeros.
  Ceilings measure_ceilings() override { return {}; }

  using Backend::choose_kernel;
  using Backend::skip_reason;

  // The GPU's rule (kernels::choose_kernel) for the nominal kEmuResidentCtas: the emulated sweep
  // runs the rung a GPU of that shape would.
  std::string choose_kernel(const WorkloadSpec& spec, const PagedLayout& layout) override {
    require_rungs();
    return k::choose_kernel(k::kernel_ladder(), shape_params(spec, layout), kEmuResidentCtas);
  }

  std::string skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                          std::string_view kernel) override {
    if (std::string why = shape_skip_reason(spec, layout, kernel); !why.empty()) return why;
    const long long elements = static_cast<long long>(layout.total_tokens) *
                               spec.model.num_kv_heads * spec.model.head_dim *
                               spec.model.kv_tensors();
    if (elements > kEmuMaxKvElements) {
      return "too large for the emulator (" + std::to_string(elements) + " KV elements > " +
             std::to_string(kEmuMaxKvElements) + "); use --backend cpu or cuda";
    }
    return {};
  }

  std::vector<SelfCheck> check_ceiling_kernels() override;

  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                         const TimingOptions&) override {
    // The emulator reads host memory: it cannot fill a layout-only workload (backend.h) itself.
    if (w.q.empty() || w.k_cache.empty() || (w.v_cache.empty() && !w.spec.model.is_mla())) {
      throw InputError(
          "emu backend: needs a materialized workload (q, k_cache, v_cache on the host)");
    }
    return std::make_unique<EmuPoint>(w, runnable_rung(w, kernel));
  }
};

// Small buffers of small integers, so every sum and every b + 3c is exact in fp32 whatever the
// summation order or FMA contraction: the checks compare exactly.
std::vector<Backend::SelfCheck> EmuBackend::check_ceiling_kernels() {
  constexpr std::size_t kFloats = 16 * 1024 + 4;  // 64 KiB + 16 B: a partial last grid-stride step
  constexpr int kGrid = 5;
  constexpr int kBlock = 64;
  std::vector<Backend::SelfCheck> checks;
  auto launch_failed = [&](const char* name, const k::LaunchResult& r) {
    checks.push_back({name, false, "launch failed: " + r.message});
  };

  std::vector<float> src(kFloats), dst(kFloats, -1.f), b(kFloats), c(kFloats), a(kFloats, -1.f);
  double expected_sum = 0;
  for (std::size_t i = 0; i < kFloats; ++i) {
    src[i] = static_cast<float>(i % 13);
    b[i] = static_cast<float>(i % 7);
    c[i] = static_cast<float>(i % 5) - 2.f;
    expected_sum += src[i];
  }

  {  // read: the per-block partial sums in sink[grid] must add up to the sum of src.
    std::vector<float> sink(kGrid, 0.f);
    k::BandwidthParams p;
    p.src = src.data();
    p.sink = sink.data();
    p.bytes = kFloats * sizeof(float);
    p.grid = kGrid;
    p.block = kBlock;
    const k::LaunchResult r = k::emu::launch_bandwidth(k::BandwidthKernel::read, p, nullptr);
    if (!r.ok()) {
      launch_failed("bandwidth.read", r);
    } else {
      double got = 0;
      for (float s : sink) got += s;
      checks.push_back({"bandwidth.read", got == expected_sum,
                        "sum of sink[" + std::to_string(kGrid) + "] = " + std::to_string(got) +
                            ", sum of src = " + std::to_string(expected_sum)});
    }
  }
  {  // copy: dst == src bit for bit.
    k::BandwidthParams p;
    p.src = src.data();
    p.dst = dst.data();
    p.bytes = kFloats * sizeof(float);
    p.grid = kGrid;
    p.block = kBlock;
    const k::LaunchResult r = k::emu::launch_bandwidth(k::BandwidthKernel::copy, p, nullptr);
    if (!r.ok()) {
      launch_failed("bandwidth.copy", r);
    } else {
      std::size_t bad = kFloats;
      for (std::size_t i = 0; i < kFloats && bad == kFloats; ++i) {
        if (std::memcmp(&dst[i], &src[i], sizeof(float)) != 0) bad = i;
      }
      checks.push_back({"bandwidth.copy", bad == kFloats,
                        bad == kFloats
                            ? std::to_string(kFloats) + " floats equal"
                            : "dst[" + std::to_string(bad) + "] = " + std::to_string(dst[bad]) +
                                  ", src = " + std::to_string(src[bad])});
    }
  }
  {  // triad: a[i] == b[i] + scalar * c[i] exactly.
    k::BandwidthParams p;
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
    p.scalar = 3.f;
    p.bytes = kFloats * sizeof(float);
    p.grid = kGrid;
    p.block = kBlock;
    const k::LaunchResult r = k::emu::launch_bandwidth(k::BandwidthKernel::triad, p, nullptr);
    if (!r.ok()) {
      launch_failed("bandwidth.triad", r);
    } else {
      std::size_t bad = kFloats;
      for (std::size_t i = 0; i < kFloats && bad == kFloats; ++i) {
        if (a[i] != b[i] + p.scalar * c[i]) bad = i;
      }
      checks.push_back({"bandwidth.triad", bad == kFloats,
                        bad == kFloats
                            ? std::to_string(kFloats) + " values of b + 3c exact"
                            : "a[" + std::to_string(bad) + "] = " + std::to_string(a[bad]) +
                                  ", expected " + std::to_string(b[bad] + p.scalar * c[bad])});
    }
  }
  return checks;
}

}  // namespace

std::unique_ptr<Backend> make_emu_backend() { return std::make_unique<EmuBackend>(); }

}  // namespace decodebench
