#include "backends/cuda/cuda_layer.h"

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_layer_plan.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "workload/layer_model.h"

namespace decodebench::cuda {
namespace {

namespace k = kernels;

// L2 flushes enqueued before a cold sample (CudaLayer::time_one).
constexpr int kColdFlushes = 2;

// The five GEMMs in the order a step runs them; index i of CudaLayer::gemms_.
constexpr std::array<LayerStage, 5> kGemmOrder = {LayerStage::qkv_proj, LayerStage::o_proj,
                                                  LayerStage::gate_up_proj, LayerStage::down_proj,
                                                  LayerStage::lm_head};
int gemm_index(LayerStage s) {
  for (std::size_t i = 0; i < kGemmOrder.size(); ++i) {
    if (kGemmOrder[i] == s) return static_cast<int>(i);
  }
  throw std::invalid_argument("attention is not a GEMM");
}

// A cuBLASLt object and its destroy function; move-only. Destruction never throws (a failed
// destroy is ignored: nothing can be done about it at that point).
template <typename Handle>
class LtOwned {
 public:
  using Destroy = cublasStatus_t (*)(Handle);
  LtOwned() = default;
  LtOwned(Handle h, Destroy d) : h_(h), destroy_(d) {}
  ~LtOwned() {
    if (h_ != nullptr) (void)destroy_(h_);
  }
  LtOwned(const LtOwned&) = delete;
  LtOwned& operator=(const LtOwned&) = delete;
  LtOwned(LtOwned&& o) noexcept
      : h_(std::exchange(o.h_, nullptr)), destroy_(std::exchange(o.destroy_, nullptr)) {}
  LtOwned& operator=(LtOwned&& o) noexcept {
    if (this != &o) {
      if (h_ != nullptr) (void)destroy_(h_);
      h_ = std::exchange(o.h_, nullptr);
      destroy_ = std::exchange(o.destroy_, nullptr);
    }
    return *this;
  }
  Handle get() const { return h_; }

 private:
  Handle h_ = nullptr;
  Destroy destroy_ = nullptr;
};

class CudaLayer final : public PreparedLayer {
 public:
  CudaLayer(const Workload& w, const k::KernelInfo& kernel, const k::ResidentCtas& resident,
            cudaStream_t stream, L2Flusher& flusher, const TimingOptions& timing,
            const LayerOptions& layer, const CublasLtApi& lt, nvml::Device* nvml)
      : lt_(lt),
        attention_(w, kernel, resident, stream),
        stream_(stream),
        flusher_(flusher),
        warm_l2_(timing.warm_l2),
        weights_(layer.weights_dtype),
        activations_(w.spec.q_dtype),
        rows_(w.rows()),
        call_rows_(gemm_call_rows(w.rows(), layer.weights_dtype)),
        samples_(kNumLayerStages),
        busy_(nvml) {
    cublasLtHandle_t h = nullptr;
    check(lt_.create(&h), "cublasLtCreate");
    handle_ = LtOwned<cublasLtHandle_t>(h, lt_.destroy);
    workspace_ = DeviceBuffer(kCublasLtWorkspaceBytes);
    fill_x(w);
    for (std::size_t i = 0; i < kGemmOrder.size(); ++i) {
      prepare_gemm(w, gemm_shape(w.spec.model, kGemmOrder[i], rows_), gemms_[i]);
    }
    // Surfaces any fault of the fills here, with the point still attributable.
    DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void run() override {
    enqueue_step(/*timed=*/false);
    DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  std::vector<float> output() override { return attention_.output(); }

  // Cold: the L2 flush before the first event, as CudaPoint, whose GPU time gives the host a
  // head start on the step's launches. A layer step enqueues about a dozen launches and seven
  // events (~50 us of host time, estimated) against ~50 us of GPU time per flush of a Hopper
  // L2, so the flush is enqueued kColdFlushes times: the GPU must not reach a stage before the
  // host has enqueued it, or the stage's window would hold the host's latency. Warm: an untimed
  // step first, which leaves the caches warm and keeps the GPU busy the same way.
  double time_one() override {
    if (warm_l2_) {
      enqueue_step(/*timed=*/false);
    } else {
      for (int i = 0; i < kColdFlushes; ++i) flusher_.flush(stream_);
    }
    enqueue_step(/*timed=*/true);
    events_.back().synchronize();
    for (int s = 0; s < kNumLayerStages; ++s) {
      samples_[static_cast<std::size_t>(s)].push_back(events_[s + 1].seconds_since(events_[s]));
    }
    // qkv_proj .. down_proj: event 0 to the event after down_proj (stage 4).
    return events_[static_cast<int>(LayerStage::down_proj) + 1].seconds_since(events_[0]);
  }

  TimingRecord timing() const override {
    return {TimingMethod::events_per_step, /*steps_per_sample=*/1, warm_l2_};
  }
  std::optional<FlushRecord> flush_record() const override {
    if (warm_l2_) return std::nullopt;
    return flusher_.record();
  }

  // NVML over the span of the samples (nvml.h), the flushes or untimed steps between included.
  void begin_utilization() override { busy_.begin(); }
  void end_utilization() override { busy_.end(); }
  std::optional<UtilizationRecord> utilization() const override { return busy_.record(); }

  std::vector<std::vector<double>> stage_samples() const override { return samples_; }

  GemmValues gemm_values(LayerStage stage, std::span<const int> rows) override {
    const Gemm& g = gemms_[static_cast<std::size_t>(gemm_index(stage))];
    for (int r : rows) {
      if (r < 0 || r >= rows_) {
        throw std::invalid_argument(
            fmt::format("gemm_values({}): row {} outside [0, {})", stage_name(stage), r, rows_));
      }
    }
    GemmValues v;
    v.input = download_rows(g.read, g.in.read_dtype, g.in.read_ld, g.shape.k, g.in.scale, rows);
    v.output = download_rows(g.output.get(), activations_, g.shape.n, g.shape.n, 1.0f, rows);
    return v;
  }

  std::string gemm_library() const override {
    std::string s = lt_.description();
    if (is_fp8(weights_)) {
      s += fmt::format(", fp8 GEMMs on the batch padded to a multiple of {} rows", kFp8RowPad);
    }
    return s;
  }

 private:
  struct Gemm {
    GemmShape shape;
    GemmCall call;
    GemmInputPlan in;
    DeviceBuffer weight;     // [n][k] weights dtype
    DeviceBuffer quantized;  // cast only: [call rows][k] e4m3, what the matmul reads
    DeviceBuffer output;     // [call rows][n] q dtype
    std::optional<k::QuantizeParams> cast;
    const void* read = nullptr;  // the matmul's B: the source in place, or `quantized`
    LtOwned<cublasLtMatmulDesc_t> desc;
    LtOwned<cublasLtMatrixLayout_t> a_layout, b_layout, d_layout;
    cublasLtMatmulAlgo_t algo{};
  };

  void check(cublasStatus_t status, const std::string& what) const {
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw RuntimeFailure(fmt::format("cuda backend: {} failed: {} ({})", what,
                                       lt_.status_text(status), lt_.description()));
    }
  }

  // x [call rows][hidden] in the GEMM input dtype: row r is sequence w.sequences[r]'s row of
  // the generator (element index sequence * hidden + c), as the attention's Q rows; padding
  // rows (fp8) are zeros.
  void fill_x(const Workload& w) {
    const DType t = gemm_input_dtype(weights_);
    const auto hidden = static_cast<std::size_t>(w.spec.model.hidden_size);
    const std::size_t row_bytes = hidden * dtype_size(t);
    x_ = DeviceBuffer(static_cast<std::size_t>(call_rows_) * row_bytes);
    if (call_rows_ > rows_)
      DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(x_.get(), 0, x_.bytes(), stream_));
    bool identity = true;
    for (int r = 0; r < rows_; ++r)
      identity = identity && w.sequences[static_cast<std::size_t>(r)] == r;
    const TensorScale scale = input_scale(weights_);
    for (int r = 0; r < rows_; ++r) {
      if (identity && r > 0) break;  // one launch covers every row
      k::FillParams f;
      f.dst = x_.as<std::byte>() + static_cast<std::size_t>(r) * row_bytes;
      f.dtype = t;
      f.count = identity ? hidden * static_cast<std::size_t>(rows_) : hidden;
      f.seed = w.spec.seed;
      f.tensor = static_cast<std::uint32_t>(LayerTensor::x);
      f.index_offset =
          static_cast<std::uint64_t>(w.sequences[static_cast<std::size_t>(r)]) * hidden;
      f.inv_scale = scale.inv_scale;
      DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_fill(f, stream_), "fill kernel (layer x)");
    }
  }

  const void* source_of(const GemmInputPlan& in) const {
    if (in.from_x) return x_.get();
    if (in.source == LayerStage::attention) return attention_.out().get();
    return gemms_[static_cast<std::size_t>(gemm_index(in.source))].output.get();
  }

  void prepare_gemm(const Workload& w, const GemmShape& shape, Gemm& g) {
    const std::string stage(stage_name(shape.stage));
    g.shape = shape;
    g.call = plan_gemm(shape, weights_, activations_);
    if (std::string why = gemm_call_error(g.call); !why.empty()) {
      throw InputError("cuda backend: " + why);
    }
    g.in = gemm_input_plan(shape, weights_, activations_);

    // The weight, [n][k]: element n * k + kk is weight_value(seed, shape, weights, n, kk).
    const auto elems = static_cast<std::size_t>(shape.n * shape.k);
    g.weight = DeviceBuffer(elems * dtype_size(weights_));
    k::FillParams f;
    f.dst = g.weight.get();
    f.dtype = weights_;
    f.count = elems;
    f.seed = w.spec.seed;
    f.tensor = static_cast<std::uint32_t>(weight_tensor(shape.stage));
    f.index_offset = 0;
    f.inv_scale = weight_scale(shape, weights_).inv_scale;
    DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_fill(f, stream_),
                             "fill kernel (weight of " + stage + ")");

    // The output, poisoned (0xFF: NaN in f16 and bf16) so a row never written fails validation.
    g.output =
        DeviceBuffer(static_cast<std::size_t>(call_rows_ * shape.n) * dtype_size(activations_));
    DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(g.output.get(), 0xFF, g.output.bytes(), stream_));

    // The input as the matmul reads it.
    const void* source = source_of(g.in);
    if (g.in.cast) {
      g.quantized = DeviceBuffer(static_cast<std::size_t>(call_rows_ * shape.k) *
                                 dtype_size(g.in.read_dtype));
      DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(g.quantized.get(), 0, g.quantized.bytes(), stream_));
      k::QuantizeParams q;
      q.src = source;
      q.src_dtype = g.in.source_dtype;
      q.src_ld = g.in.source_ld;
      q.dst = g.quantized.get();
      q.dst_dtype = g.in.read_dtype;
      q.dst_ld = g.in.read_ld;
      q.rows = rows_;
      q.cols = g.in.cols;
      q.inv_scale = g.in.cast_inv_scale;
      g.cast = q;
      g.read = g.quantized.get();
    } else {
      g.read = source;
    }

    // The matmul: descriptor, layouts, the heuristic's first algorithm.
    cublasLtMatmulDesc_t desc = nullptr;
    check(lt_.matmul_desc_create(&desc, g.call.compute, g.call.scale_type),
          "cublasLtMatmulDescCreate (" + stage + ")");
    g.desc = LtOwned<cublasLtMatmulDesc_t>(desc, lt_.matmul_desc_destroy);
    auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value, const char* name) {
      check(lt_.matmul_desc_set_attribute(desc, attr, &value, sizeof(value)),
            fmt::format("cublasLtMatmulDescSetAttribute {} ({})", name, stage));
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, g.call.trans_a, "TRANSA");
    set(CUBLASLT_MATMUL_DESC_TRANSB, g.call.trans_b, "TRANSB");
    if (g.call.fp8) set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, g.call.fast_accum, "FAST_ACCUM");
    auto layout = [&](cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld,
                      const char* which) {
      cublasLtMatrixLayout_t l = nullptr;
      check(lt_.matrix_layout_create(&l, type, rows, cols, ld),
            fmt::format("cublasLtMatrixLayoutCreate {} ({})", which, stage));
      return LtOwned<cublasLtMatrixLayout_t>(l, lt_.matrix_layout_destroy);
    };
    g.a_layout = layout(g.call.a_type, g.call.a_rows, g.call.a_cols, g.call.lda, "A");
    g.b_layout = layout(g.call.b_type, g.call.b_rows, g.call.b_cols, g.call.ldb, "B");
    g.d_layout = layout(g.call.d_type, g.call.d_rows, g.call.d_cols, g.call.ldd, "D");

    cublasLtMatmulPreference_t pref_raw = nullptr;
    check(lt_.preference_create(&pref_raw), "cublasLtMatmulPreferenceCreate");
    const LtOwned<cublasLtMatmulPreference_t> pref(pref_raw, lt_.preference_destroy);
    const std::uint64_t workspace_bytes = workspace_.bytes();
    check(lt_.preference_set_attribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes, sizeof(workspace_bytes)),
          "cublasLtMatmulPreferenceSetAttribute MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = lt_.algo_get_heuristic(
        handle_.get(), desc, g.a_layout.get(), g.b_layout.get(), g.d_layout.get(), g.d_layout.get(),
        pref_raw, /*requestedAlgoCount=*/1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
      throw InputError(fmt::format(
          "cuda backend: {} has no cuBLASLt algorithm for {}: {} x {} x {} (cuBLASLt m n k), "
          "weights {}, output {}{}",
          lt_.description(), stage, g.call.m, g.call.n, g.call.k, dtype_name(weights_),
          dtype_name(activations_),
          st != CUBLAS_STATUS_SUCCESS ? ": " + lt_.status_text(st) : std::string()));
    }
    g.algo = result.algo;
  }

  // One GEMM stage: the cast of its input (fp8), then the matmul.
  void enqueue_gemm(const Gemm& g) {
    if (g.cast) {
      DECODEBENCH_CHECK_LAUNCH(
          k::cuda::launch_quantize(*g.cast, stream_),
          "quantize kernel (input of " + std::string(stage_name(g.shape.stage)) + ")");
    }
    check(lt_.matmul(handle_.get(), g.desc.get(), &g.call.alpha, g.weight.get(), g.a_layout.get(),
                     g.read, g.b_layout.get(), &g.call.beta, g.output.get(), g.d_layout.get(),
                     g.output.get(), g.d_layout.get(), &g.algo, workspace_.get(),
                     workspace_.bytes(), stream_),
          "cublasLtMatmul (" + std::string(stage_name(g.shape.stage)) + ")");
  }

  // Every stage in LayerStage order; `timed`: event s before stage s and one after the last.
  void enqueue_step(bool timed) {
    for (int s = 0; s < kNumLayerStages; ++s) {
      if (timed) events_[s].record(stream_);
      const auto stage = static_cast<LayerStage>(s);
      if (stage == LayerStage::attention) {
        attention_.launch();
      } else {
        enqueue_gemm(gemms_[static_cast<std::size_t>(gemm_index(stage))]);
      }
    }
    if (timed) events_.back().record(stream_);
  }

  // `cols` elements of each of `rows` (row stride `ld` elements of `t`) at device `base`,
  // decoded to float and multiplied by `scale`, packed [rows][cols].
  std::vector<float> download_rows(const void* base, DType t, std::int64_t ld, std::int64_t cols,
                                   float scale, std::span<const int> rows) const {
    const std::size_t size = dtype_size(t);
    const std::size_t row_bytes = static_cast<std::size_t>(cols) * size;
    std::vector<std::byte> bytes(rows.size() * row_bytes);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::size_t offset =
          static_cast<std::size_t>(rows[i]) * static_cast<std::size_t>(ld) * size;
      DECODEBENCH_CUDA_CHECK(cudaMemcpyAsync(bytes.data() + i * row_bytes,
                                             static_cast<const std::byte*>(base) + offset,
                                             row_bytes, cudaMemcpyDeviceToHost, stream_));
    }
    DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<float> values = decode_to_float(bytes, t);
    if (scale != 1.0f) {
      for (float& v : values) v *= scale;
    }
    return values;
  }

  CublasLtApi lt_;
  AttentionStep attention_;
  cudaStream_t stream_;  // the backend's
  L2Flusher& flusher_;   // the backend's
  bool warm_l2_;
  DType weights_;
  DType activations_;  // the q dtype
  int rows_;
  std::int64_t call_rows_;  // gemm_call_rows(rows_, weights_)
  LtOwned<cublasLtHandle_t> handle_;
  DeviceBuffer workspace_;  // kCublasLtWorkspaceBytes, shared by the GEMMs (one stream)
  DeviceBuffer x_;          // [call rows][hidden] gemm_input_dtype(weights)
  std::array<Gemm, kGemmOrder.size()> gemms_;
  std::array<CudaEvent, kNumLayerStages + 1> events_;
  std::vector<std::vector<double>> samples_;  // [stage][sample]
  nvml::SpanMeter busy_;
};

}  // namespace

std::unique_ptr<PreparedLayer> make_cuda_layer(const Workload& w, const k::KernelInfo& kernel,
                                               const k::ResidentCtas& resident, cudaStream_t stream,
                                               L2Flusher& flusher, const TimingOptions& timing,
                                               const LayerOptions& layer, const CublasLtApi& lt,
                                               nvml::Device* nvml) {
  return std::make_unique<CudaLayer>(w, kernel, resident, stream, flusher, timing, layer, lt, nvml);
}

}  // namespace decodebench::cuda
