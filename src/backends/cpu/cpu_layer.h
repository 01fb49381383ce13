// The cpu backend's layer scope (src/workload/layer_model.h): one transformer layer's decode
// step for the whole batch, its GEMMs on a GEMM library (cpu_gemm.h) around the backend's own
// attention, and the LM head. Pieces:
//   CpuAttention   the attention stage exactly as the backend's attention-scope point runs it
//                  (kernel "cpu" or "cascade"), shared by both scopes
//   LayerWeights   every GEMM's weight of one model, filled on the host from the counter
//                  generator and kept by the backend across the sweep points of that model
//   CpuLayer       the PreparedLayer: the step's activations and the library's plans
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_busy.h"
#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_gemm.h"
#include "workload/layer_model.h"
#include "workload/workload.h"

namespace decodebench::cpu {

// A host buffer of bytes left uninitialized (a std::vector would zero 1 GB on one thread
// before the parallel fill touches it), 64-byte aligned.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t bytes);
  HostBuffer(HostBuffer&& o) noexcept
      : data_(std::move(o.data_)), size_(std::exchange(o.size_, 0)) {}
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    data_ = std::move(o.data_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_ = 0;
};

// One large host buffer kept between the points of a sweep. A point's rotation copies take about
// 2x the last-level cache (a GB on a VM that reports 480 MiB): a fresh allocation per point pays
// that many page faults again, seconds per point on a VM, so the last buffer is kept mapped and
// reused by the next point that fits in it. Two points alive at once each get their own.
class HostBufferCache {
 public:
  // A buffer of at least `bytes`: the kept one when it is large enough, else a new one with room
  // to grow (the kept one freed first, so that the two are never mapped together).
  HostBuffer take(std::size_t bytes);
  // Keeps `b` when it is larger than the kept one.
  void give(HostBuffer b);
  std::size_t kept_bytes() const;

 private:
  mutable std::mutex mutex_;
  HostBuffer kept_;
};

// The attention of one point: the decode params over the workload's host tensors, the prefix
// plan for cascade, the output [rows][Hq][d] in the q dtype. Throws InputError for what the
// decode does not support and for a layout-only workload (backend.h), which the harness then
// materializes.
class CpuAttention {
 public:
  CpuAttention(const Workload& w, bool cascade);
  CpuAttention(const CpuAttention&) = delete;
  CpuAttention& operator=(const CpuAttention&) = delete;
  void run();
  std::span<const std::byte> output() const { return out_; }  // [rows][Hq][d] q dtype
  DType dtype() const { return params_.q_dtype; }
  // Every buffer run() reads or writes, for the eviction before a cold sample.
  const std::vector<Span>& buffers() const { return buffers_; }

  // Cold by rotation (cpu_cold.h): `copies` byte-identical copies of every buffer the step
  // reads (q, K, V, block tables, context lengths, an integer format's scales and zeros), each
  // one contiguous buffer, evicted from the caches once made; the output, small and written
  // every step, stays shared. 0 drops them. run() keeps running the workload's own buffers
  // (validation and the warm-up, which so leave the copies cold); the copies hold the same
  // bytes, so its output stands for each copy's (tests/backends/cpu/cpu_cold_test.cpp checks).
  // The copies live in one buffer taken from `cache` (given back when this is destroyed or the
  // copies are remade), or a new one when null.
  void make_copies(int copies, std::shared_ptr<HostBufferCache> cache = nullptr);
  ~CpuAttention();
  int copies() const { return static_cast<int>(copy_params_.size()); }
  void run_copy(int i);
  std::span<const std::byte> copy(int i) const {
    return {copies_.data() + static_cast<std::size_t>(i) * copy_stride_, copy_stride_};
  }
  // The bytes of one copy (64-byte aligned pieces) for this workload.
  std::int64_t copy_bytes() const;

 private:
  struct Piece {
    const void* source;
    std::size_t bytes;
  };
  std::vector<Piece> copy_pieces() const;

  const Workload& w_;
  kernels::PagedDecodeParams params_;
  bool cascade_;
  kernels::PrefixPlan plan_;  // bound into params_ when cascade_
  std::vector<std::byte> out_;
  std::vector<Span> buffers_;
  void release_copies();
  HostBuffer copies_;  // copy i at i * copy_stride_; empty: no rotation
  std::size_t copy_stride_ = 0;
  std::shared_ptr<HostBufferCache> copies_cache_;        // where copies_ goes back to
  std::vector<kernels::PagedDecodeParams> copy_params_;  // params_ over each copy
};

// Element i of `tensor` for i in [first, first + count): counter_normal(seed, tensor, i) *
// inv_scale encoded in `dtype` (bf16, f16 or fp8_e4m3), written to dst[0..count), on all OpenMP
// threads (each first-touches the pages it writes).
void fill_counter_values(std::byte* dst, DType dtype, std::int64_t count, std::uint64_t seed,
                         LayerTensor tensor, std::uint64_t first, float inv_scale);
// The weight of `shape` ([n][k]) in `weights` as layer_model.h defines it.
void fill_weight(std::uint64_t seed, const GemmShape& shape, DType weights, std::byte* dst);
// The step's input x [rows][hidden] in the GEMM input dtype: row r is sequence sequences[r]'s
// (LayerTensor::x, flat index sequence * hidden + i).
void fill_input(std::uint64_t seed, int hidden, DType weights, std::span<const int> sequences,
                std::byte* dst);

// The GEMMs of one model's layer and LM head, in layer_model.h's stage order (qkv_proj, o_proj,
// gate_up_proj, down_proj, lm_head), each in the weights dtype and prepared for `lib` (which
// must outlive this). Generated once per (model shape, weights dtype, seed).
class LayerWeights {
 public:
  LayerWeights(const ModelShape& model, DType weights, std::uint64_t seed, GemmLibrary& lib);
  bool same_key(const ModelShape& model, DType weights, std::uint64_t seed) const;
  static constexpr int kGemms = 5;
  static int index(LayerStage gemm);  // throws std::invalid_argument for attention
  const std::byte* data(LayerStage gemm) const { return raw_[index(gemm)].data(); }
  GemmWeights& prepared(LayerStage gemm) { return *prepared_[index(gemm)]; }
  DType dtype() const { return dtype_; }
  std::uint64_t seed() const { return seed_; }
  // Host bytes the weights take (the library's packed copies included).
  std::int64_t bytes() const;
  // Bytes of the weights a backend holds for this model: the matrices, and the packed copies
  // of a library that makes them (twice the matrices, an upper bound).
  static std::int64_t host_bytes(const ModelShape& model, DType weights, bool packs);

 private:
  ModelShape model_;
  DType dtype_;
  std::uint64_t seed_;
  std::array<HostBuffer, kGemms> raw_;
  std::array<std::unique_ptr<GemmWeights>, kGemms> prepared_;
};

class CpuLayer final : public PreparedLayer {
 public:
  // `weights` (shared with the backend's cache) must match w.spec.model and seed; `lib`
  // outlives this; `flusher` nullptr: warm samples.
  CpuLayer(const Workload& w, bool cascade, std::shared_ptr<LayerWeights> weights, GemmLibrary& lib,
           CacheFlusher* flusher);

  void run() override;
  std::vector<float> output() override;  // the attention's output [rows][Hq][d]
  double time_one() override;
  TimingRecord timing() const override;
  std::vector<double> paired_read_samples() const override { return paired_read_; }
  std::optional<FlushRecord> flush_record() const override {
    if (!flusher_) return std::nullopt;
    return flusher_->record();
  }
  // The threads' CPU time in a window around each timed step, the LM head included (cpu_busy.h).
  void begin_utilization() override { busy_.reset(); }
  void end_utilization() override { busy_.finish(); }
  std::optional<UtilizationRecord> utilization() const override { return busy_.record(); }
  std::vector<std::vector<double>> stage_samples() const override { return stage_samples_; }
  GemmValues gemm_values(LayerStage stage, std::span<const int> rows) override;
  std::string gemm_library() const override { return library_; }

  const LayerWeights& weights() const { return *weights_; }

 private:
  struct Gemm {
    GemmShape shape;
    const std::byte* input = nullptr;  // [rows][lda] bf16
    HostBuffer output;                 // [rows][n] bf16
    std::unique_ptr<GemmPlan> plan;
  };
  Gemm& gemm(LayerStage stage);
  void run_stage(LayerStage stage);

  const Workload& w_;
  std::shared_ptr<LayerWeights> weights_;
  CpuAttention attention_;
  HostBuffer x_;               // [rows][hidden]: qkv_proj's input
  std::array<Gemm, 5> gemms_;  // LayerWeights order
  CacheFlusher* flusher_;      // nullptr: warm samples
  std::string library_;        // "oneDNN 2.6.3 (OpenMP threads) (dnnl matmul ...)"
  std::vector<Span> evict_;    // every buffer a step reads, evicted before a cold sample
  std::vector<double> paired_read_;
  std::vector<std::vector<double>> stage_samples_;  // [kNumLayerStages][samples]
  ThreadBusyMeter busy_;  // the OpenMP team, which the GEMM libraries share (or a pool of theirs)
};

}  // namespace decodebench::cpu
