#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cublaslt_loader.h"
#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_ceilings.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_layer.h"
#include "backends/cuda/cuda_layer_plan.h"
#include "backends/cuda/cuda_links.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/datasheet.h"
#include "backends/ladder_backend.h"
#include "backends/nvml.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "kernels.h"

namespace decodebench {
namespace {

namespace k = kernels;
using cuda::CudaEvent;
using cuda::CudaStream;
using cuda::DeviceBuffer;
using cuda::L2Flusher;

using k::find_kernel;

// CMAKE_CUDA_ARCHITECTURES of this build (src/backends/cuda/CMakeLists.txt), ',' between entries.
#if defined(DECODEBENCH_CUDA_ARCHITECTURES)
constexpr const char* kCudaArchitectures = DECODEBENCH_CUDA_ARCHITECTURES;
#else
constexpr const char* kCudaArchitectures = "";
#endif

// An attribute, or 0 when this driver does not report it (cleared, so it is not mistaken for a
// sticky error later).
int device_attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// One prepared point: inputs resident on the device, workspace allocated, events ready.
// ---------------------------------------------------------------------------------------------
class CudaPoint final : public PreparedPoint {
 public:
  // `resident`: the residency of the instance of `kernel` for `w` (the split planner's input).
  // `nvml` (the backend's, may be unavailable) gives the busy, power and energy figures.
  CudaPoint(const Workload& w, const k::KernelInfo& kernel, const k::ResidentCtas& resident,
            cudaStream_t stream, L2Flusher& flusher, const TimingOptions& timing,
            WarmTiming warm_timing, nvml::Device* nvml)
      : attention_(w, kernel, resident, stream),
        stream_(stream),
        flusher_(flusher),
        warm_l2_(timing.warm_l2),
        graphs_(warm_timing == WarmTiming::graph),
        timing_(initial_timing(timing.warm_l2)),
        busy_(nvml) {}

  void run() override {
    launch();
    DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  std::vector<float> output() override { return attention_.output(); }

  // Every sample brackets whole steps with two events; one launch_paged_decode call enqueues
  // every kernel of a step (split_kv: the split kernel and the merge).
  double time_one() override { return warm_l2_ ? time_warm() : time_cold(); }

  TimingRecord timing() const override { return timing_; }
  std::optional<FlushRecord> flush_record() const override {
    if (warm_l2_) return std::nullopt;
    return flusher_.record();
  }

  // NVML over the span of the samples (nvml.h): the flushes between cold samples and the warm
  // lead-in steps are inside it, as they are inside what a dashboard samples.
  void begin_utilization() override { busy_.begin(); }
  void end_utilization() override { busy_.end(); }
  std::optional<UtilizationRecord> utilization() const override { return busy_.record(); }

 private:
  void launch() { attention_.launch(); }

  // Cold L2: one step per sample, since the flush must precede each step. The flush (a memset
  // and a read of ~2x the L2, cuda_plan.h plan_l2_flush) is enqueued before the start event:
  // ordered before the step, not timed. Enqueueing it returns at once while the GPU spends tens
  // of us on it, longer than the host takes to record the start event and run the step's launch
  // path (a few us per kernel); so when the GPU reaches the start event the step is already
  // queued behind it, and the window holds the step's GPU time, not the host's launch latency.
  double time_cold() {
    flusher_.flush(stream_);
    start_.record(stream_);
    launch();
    stop_.record(stream_);
    stop_.synchronize();
    return stop_.seconds_since(start_);
  }

  // Warm L2: N steps back to back between the events, divided by N (cuda_plan.h
  // steps_per_sample), preceded by untimed lead-in steps that keep the GPU busy while the host
  // records the start event and enqueues the timed steps. Both are CUDA graphs where capture
  // works (one cudaGraphLaunch for all N steps: the GPU never waits on the host's launch path
  // between steps), else plain launches, which the GPU may outrun when a step is shorter than
  // its launch path (the report says which: timing().method).
  double time_warm() {
    if (!warm_) plan_warm();
    enqueue(warm_->lead_in);
    start_.record(stream_);
    enqueue(warm_->timed);
    stop_.record(stream_);
    stop_.synchronize();
    return stop_.seconds_since(start_) / warm_->timed.steps;
  }

  // Warm: graph replay is the plan; plan_warm() settles the method and N on the first sample.
  static TimingRecord initial_timing(bool warm_l2) {
    if (warm_l2) return {TimingMethod::graph_replay, /*steps_per_sample=*/0, /*warm_l2=*/true};
    return {TimingMethod::events_per_step, /*steps_per_sample=*/1, /*warm_l2=*/false};
  }

  // `steps` steps enqueued as one unit: a replay of a graph of them, or that many launches.
  struct StepBatch {
    int steps = 0;
    cuda::CudaGraphExec graph;  // empty: plain launches
  };
  struct WarmPlan {
    StepBatch lead_in, timed;
  };

  void enqueue(StepBatch& b) {
    if (!b.graph.empty()) {
      b.graph.launch(stream_);
      return;
    }
    for (int i = 0; i < b.steps; ++i) launch();
  }

  // Untimed, once per point, on the first warm sample: a graph of `steps` steps, or plain
  // launches when `use_graph` is false or the capture fails (then use_graph becomes false, so
  // every batch of the point uses the same method).
  StepBatch make_batch(int steps, bool& use_graph) {
    StepBatch b;
    b.steps = steps;
    if (use_graph) {
      b.graph = cuda::CudaGraphExec::capture(stream_, [&] {
        for (int i = 0; i < steps; ++i) {
          if (!attention_.try_launch()) return false;
        }
        return true;
      });
      use_graph = !b.graph.empty();
    }
    return b;
  }

  double time_batch(StepBatch& b) {
    start_.record(stream_);
    enqueue(b);
    stop_.record(stream_);
    stop_.synchronize();
    return stop_.seconds_since(start_) / b.steps;
  }

  // Chooses N from two estimates: one step between events (an overestimate for short steps:
  // it holds the launch path), then a batch of the N that suggests (close to the GPU time).
  void plan_warm() {
    bool plain = false;
    StepBatch one = make_batch(1, plain);
    const double first = time_batch(one);
    bool use_graph = graphs_;  // --timing eager: plain launches, events_back_to_back
    StepBatch probe = make_batch(cuda::steps_per_sample(first), use_graph);
    (void)time_batch(probe);  // the first replay of a graph may still pay for setup
    const double estimate = time_batch(probe);
    const int n = cuda::steps_per_sample(estimate);
    WarmPlan plan;
    plan.timed = n == probe.steps ? std::move(probe) : make_batch(n, use_graph);
    plan.lead_in = make_batch(cuda::lead_in_steps(estimate), use_graph);
    if (!use_graph) {  // a late capture failure: the same method for both, plain launches
      plan.timed.graph = {};
      plan.lead_in.graph = {};
    }
    timing_.method = use_graph ? TimingMethod::graph_replay : TimingMethod::events_back_to_back;
    timing_.steps_per_sample = plan.timed.steps;
    warm_ = std::move(plan);
  }

  cuda::AttentionStep attention_;
  cudaStream_t stream_;  // the backend's
  L2Flusher& flusher_;   // the backend's
  bool warm_l2_;
  bool graphs_;  // warm: try a CUDA graph of the steps (--timing graph)
  TimingRecord timing_;
  std::optional<WarmPlan> warm_;  // made on the first warm sample
  CudaEvent start_, stop_;
  nvml::SpanMeter busy_;
};

// ---------------------------------------------------------------------------------------------
// The backend: one device, one stream, one L2 scrubber.
// ---------------------------------------------------------------------------------------------
class CudaBackend final : public LadderBackend {
 public:
  // Members are initialized in declaration order: the device is selected before the stream and
  // the scrub buffer are created on it.
  explicit CudaBackend(int device)
      : device_(select_device(device)),
        cc_major_(device_attribute(cudaDevAttrComputeCapabilityMajor, device_)),
        cc_minor_(device_attribute(cudaDevAttrComputeCapabilityMinor, device_)),
        limits_{cc_major_, cc_minor_,
                static_cast<std::size_t>(
                    device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device_))},
        info_(query_device(device_)),
        flusher_(static_cast<std::size_t>(info_.l2_bytes), info_.sm_count),
        nvml_(open_nvml(device_)) {}

  std::string name() const override { return "cuda"; }

  DeviceInfo device_info() override { return info_; }

  Ceilings measure_ceilings() override {
    activate();
    info_.measured = cuda::measure_ceilings(info_.l2_bytes, info_.sm_count, stream_.get());
    return info_.measured;
  }
  std::vector<LinkMeasurement> measure_links() override {
    activate();
    return cuda::measure_links(device_, info_.sm_count, stream_.get());
  }
  std::vector<SelfCheck> check_ceiling_kernels() override {
    activate();
    return cuda::check_ceiling_kernels(stream_.get());
  }

  using Backend::choose_kernel;
  using Backend::layer_skip_reason;
  using Backend::skip_reason;

  std::string choose_kernel(const WorkloadSpec& spec, const PagedLayout& layout) override {
    require_rungs();
    const k::PagedDecodeParams p = shape_params(spec, layout);
    return k::choose_kernel(k::kernel_ladder(), p,
                            [&](const k::KernelInfo& rung) { return resident_ctas(rung, p); });
  }

  std::string skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                          std::string_view kernel) override {
    if (std::string why = shape_skip_reason(spec, layout, kernel); !why.empty()) return why;
    const k::KernelInfo* info = find_kernel(kernel);
    const k::PagedDecodeParams p = shape_params(spec, layout);
    if (std::string why = device_fit_reason(*info, p); !why.empty()) return why;
    activate();
    std::size_t free_bytes = 0, total_bytes = 0;
    DECODEBENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return cuda::memory_skip_reason(cuda::point_footprint(p, *info, resident_ctas(*info, p)),
                                    free_bytes);
  }

  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                         const TimingOptions& timing) override {
    const k::KernelInfo* info = &runnable_rung(w, kernel);
    activate();
    return std::make_unique<CudaPoint>(w, *info, resident_ctas(*info, w.params()), stream_.get(),
                                       flusher_, timing, warm_timing_, nvml_.get());
  }

  void set_warm_timing(WarmTiming timing) override { warm_timing_ = timing; }

  // --- scope "layer" (cuda_layer.h) -----------------------------------------------------------
  std::string layer_skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                                std::string_view kernel, const LayerOptions& layer) override {
    const DType weights = layer.weights_dtype;
    if (std::string why = layer_support_error(spec.model, weights, spec.q_dtype); !why.empty()) {
      return why;
    }
    if (is_fp8(weights)) {
      if (std::string why = cuda::fp8_gemm_device_error(cc_major_, cc_minor_); !why.empty()) {
        return why;
      }
    }
    if (const cuda::CublasLtLoad& lt = cuda::cublaslt(); !lt.ok()) return lt.error;
    if (std::string why = shape_skip_reason(spec, layout, kernel); !why.empty()) return why;
    const k::KernelInfo* info = find_kernel(kernel);
    const k::PagedDecodeParams p = shape_params(spec, layout);
    if (std::string why = device_fit_reason(*info, p); !why.empty()) return why;
    for (LayerStage s : {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                         LayerStage::down_proj, LayerStage::lm_head}) {
      const GemmShape shape = gemm_shape(spec.model, s, spec.batch);
      if (std::string why = cuda::gemm_call_error(cuda::plan_gemm(shape, weights, spec.q_dtype));
          !why.empty()) {
        return why;
      }
    }
    activate();
    std::size_t free_bytes = 0, total_bytes = 0;
    DECODEBENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t attention = cuda::point_footprint(p, *info, resident_ctas(*info, p)).total();
    return cuda::layer_memory_skip_reason(
        cuda::layer_footprint(spec.model, spec.batch, weights, spec.q_dtype, attention),
        free_bytes);
  }

  std::unique_ptr<PreparedLayer> prepare_layer(const Workload& w, std::string_view kernel,
                                               const LayerOptions& layer,
                                               const TimingOptions& timing) override {
    const k::KernelInfo* info = &runnable_rung(w, kernel);
    if (std::string why = layer_support_error(w.spec.model, layer.weights_dtype, w.spec.q_dtype);
        !why.empty()) {
      throw InputError("cuda backend: " + why);
    }
    if (is_fp8(layer.weights_dtype)) {
      if (std::string why = cuda::fp8_gemm_device_error(cc_major_, cc_minor_); !why.empty()) {
        throw InputError("cuda backend: " + why);
      }
    }
    const cuda::CublasLtLoad& lt = cuda::cublaslt();
    if (!lt.ok()) throw InputError("cuda backend: " + lt.error);
    activate();
    return cuda::make_cuda_layer(w, *info, resident_ctas(*info, w.params()), stream_.get(),
                                 flusher_, timing, layer, lt.api, nvml_.get());
  }

  GemmCeiling gemm_ceiling(DType weights) override {
    return cuda::tensor_gemm_ceiling(info_, weights);
  }

 private:
  // The CUDA current device is per host thread; every entry point that touches the device
  // makes sure it is ours.
  void activate() { DECODEBENCH_CUDA_CHECK(cudaSetDevice(device_)); }

  // "" when this GPU can run the instance of `rung` that would launch for `p`
  // (cuda::device_skip_reason: its compute capability, and the static and dynamic shared memory
  // of one thread block of the kernel launch_shape names against what the device grants one).
  // Asked before anything queries the kernel's occupancy, which fails for such an instance.
  std::string device_fit_reason(const k::KernelInfo& rung, const k::PagedDecodeParams& p) {
    const k::LaunchShape shape = k::cuda::launch_shape(rung.name, p);
    if (!shape.status.ok()) return "kernel '" + rung.name + "': " + shape.status.message;
    std::size_t smem = shape.dynamic_smem;
    if (shape.device_function != nullptr) {
      activate();
      cudaFuncAttributes attr{};
      if (cudaFuncGetAttributes(&attr, shape.device_function) == cudaSuccess) {
        smem += attr.sharedSizeBytes;
      } else {
        (void)cudaGetLastError();  // judged on the dynamic part alone
      }
    }
    return cuda::device_skip_reason(limits_, rung, p, smem);
  }

  // What this device holds at once of the instance of `rung` that would run `p`: the SM count
  // and the runtime's occupancy of that kernel, asked once per instance (the planner's input).
  // Only a splitting rung reads it, so others are not asked.
  k::ResidentCtas resident_ctas(const k::KernelInfo& rung, const k::PagedDecodeParams& p) {
    if (!rung.uses_workspace) return {info_.sm_count, 0};
    const k::LaunchShape shape = k::cuda::launch_shape(rung.name, p);
    if (!shape.status.ok()) {
      throw InputError("cuda backend: kernel '" + rung.name + "': " + shape.status.message);
    }
    const std::string key = rung.name + "/" + std::string(shape.function) + "/" +
                            std::to_string(static_cast<int>(p.kv_dtype)) + "/" +
                            std::to_string(p.head_dim) + "/" + std::to_string(shape.group_cap);
    auto it = resident_ctas_.find(key);
    if (it == resident_ctas_.end()) {
      activate();
      const k::cuda::Residency r = k::cuda::resident_ctas_per_sm(rung.name, p);
      if (!r.status.ok()) {
        throw RuntimeFailure("cuda backend: occupancy of kernel '" + rung.name +
                             "': " + r.status.message);
      }
      it = resident_ctas_.emplace(key, r.ctas_per_sm).first;
    }
    return {info_.sm_count, it->second};
  }

  static int select_device(int device) {
    DECODEBENCH_CUDA_CHECK(cudaSetDevice(device));
    return device;
  }

  // NVML's view of this device, found by its PCI bus id (CUDA_VISIBLE_DEVICES renumbers the
  // CUDA devices, not NVML's); unavailable, with the reason, where NVML or the id is missing.
  static std::unique_ptr<nvml::Device> open_nvml(int device) {
    char bus_id[32] = {};
    if (const cudaError_t rc = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device);
        rc != cudaSuccess) {
      (void)cudaGetLastError();
      return nvml::Device::unavailable(std::string("cudaDeviceGetPCIBusId: ") +
                                       cudaGetErrorString(rc));
    }
    return nvml::Device::open(bus_id);
  }

  static DeviceInfo query_device(int device) {
    cudaDeviceProp prop{};
    DECODEBENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    DeviceInfo info;
    info.backend = "cuda";
    info.name = prop.name;
    info.sm_count = prop.multiProcessorCount;
    info.l2_bytes = prop.l2CacheSize;
    info.mem_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    // cudaDeviceProp lost memoryClockRate in CUDA 13; the attribute is still reported (kHz).
    info.bandwidth_theoretical =
        cuda::theoretical_bandwidth(device_attribute(cudaDevAttrMemoryClockRate, device),
                                    device_attribute(cudaDevAttrGlobalMemoryBusWidth, device));
    if (const std::optional<Datasheet> sheet = find_datasheet(info.name)) {
      info.bandwidth_datasheet = sheet->bandwidth;
      info.flops_peak = sheet->fp32_flops;
      info.flops_peak_tensor_f16 = sheet->tensor_f16_flops;
      info.flops_peak_tensor_fp8 = sheet->tensor_fp8_flops;
    }
    return info;
  }

  int device_;
  int cc_major_, cc_minor_;    // compute capability (fp8 GEMMs need 8.9)
  cuda::DeviceLimits limits_;  // what one thread block of a decode kernel may have
  DeviceInfo info_;
  CudaStream stream_;
  L2Flusher flusher_;
  WarmTiming warm_timing_ = WarmTiming::graph;
  std::unique_ptr<nvml::Device> nvml_;        // the busy, power and energy figures of points
  std::map<std::string, int> resident_ctas_;  // instance -> ctas per SM (resident_ctas)
};

}  // namespace

bool cuda_runtime_device_present() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: not an error worth keeping
    return false;
  }
  return count > 0;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  int count = 0;
  DECODEBENCH_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count == 0) {
    throw RuntimeFailure(
        "cuda backend: cudaGetDeviceCount reports no CUDA device (check "
        "nvidia-smi and CUDA_VISIBLE_DEVICES)");
  }
  if (device_index < 0 || device_index >= count) {
    std::vector<std::string> names;
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      DECODEBENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
      names.emplace_back(prop.name);
    }
    throw InputError(cuda::bad_device_message(device_index, names));
  }
  // Kernels compiled for other GPUs would fail at their first launch: refuse here, saying why.
  const int major = device_attribute(cudaDevAttrComputeCapabilityMajor, device_index);
  const int minor = device_attribute(cudaDevAttrComputeCapabilityMinor, device_index);
  if (std::string why = cuda::build_arch_error(kCudaArchitectures, major, minor); !why.empty()) {
    cudaDeviceProp prop{};
    DECODEBENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
    throw RuntimeFailure("cuda backend: device " + std::to_string(device_index) + " (" + prop.name +
                         "): " + why);
  }
  return std::make_unique<CudaBackend>(device_index);
}

}  // namespace decodebench
