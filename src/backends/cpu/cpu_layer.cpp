#include "backends/cpu/cpu_layer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "device/float_formats.h"

namespace decodebench::cpu {

// ---- the attention -----------------------------------------------------------------------------

CpuAttention::CpuAttention(const Workload& w, bool cascade)
    : w_(w), params_(w.params()), cascade_(cascade) {
  // The layout too: the planner below and every timed step read the tables unchecked.
  if (const std::string why = unsupported_reason(params_, kernels::CheckScope::layout);
      !why.empty())
    throw InputError(why);
  // A layout-only workload (backend.h) is refused here, so the harness materializes it.
  if (w.q.empty() || w.k_cache.empty() || (w.v_cache.empty() && !w.spec.model.is_mla()))
    throw InputError("the cpu backend needs the workload's host tensors (q, k_cache, v_cache)");
  if (cascade_) {
    plan_ = kernels::plan_prefixes(params_);
    plan_.bind(params_);
  }
  out_.resize(static_cast<std::size_t>(w.rows()) * params_.num_q_heads * w.spec.model.value_dim() *
              dtype_size(params_.q_dtype));
  params_.out = out_.data();
  advise_huge_pages(w.k_cache.data(), w.k_cache.size());
  advise_huge_pages(w.v_cache.data(), w.v_cache.size());
  buffers_ = {{w.k_cache.data(), w.k_cache.size()},
              {w.v_cache.data(), w.v_cache.size()},
              {w.q.data(), w.q.size()},
              {w.layout.block_tables.data(), w.layout.block_tables.size() * sizeof(std::int32_t)},
              {w.layout.context_lens.data(), w.layout.context_lens.size() * sizeof(std::int32_t)},
              {out_.data(), out_.size()}};
  // An integer format's scales and zeros are read every step too (cold like the codes).
  for (const std::vector<std::uint16_t>* a : {&w.k_scales, &w.k_zeros, &w.v_scales, &w.v_zeros})
    if (!a->empty()) buffers_.push_back({a->data(), a->size() * sizeof(std::uint16_t)});
}

void CpuAttention::run() {
  if (cascade_)
    paged_decode_cascade(params_);
  else
    paged_decode(params_);
}

void CpuAttention::run_copy(int i) {
  const kernels::PagedDecodeParams& p = copy_params_.at(static_cast<std::size_t>(i));
  if (cascade_)
    paged_decode_cascade(p);
  else
    paged_decode(p);
}

namespace {
constexpr std::size_t kPieceAlign = 64;  // each piece of a copy starts on a cache line
std::size_t aligned(std::size_t bytes) {
  return (bytes + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
}
}  // namespace

// In copy order; MLA's V is K's first value_dim() (no piece of its own).
std::vector<CpuAttention::Piece> CpuAttention::copy_pieces() const {
  const Workload& w = w_;
  std::vector<Piece> pieces = {
      {w.q.data(), w.q.size()},
      {w.k_cache.data(), w.k_cache.size()},
      {w.v_cache.data(), w.v_cache.size()},
      {w.layout.block_tables.data(), w.layout.block_tables.size() * sizeof(std::int32_t)},
      {w.layout.context_lens.data(), w.layout.context_lens.size() * sizeof(std::int32_t)},
      {w.k_scales.data(), w.k_scales.size() * sizeof(std::uint16_t)},
      {w.k_zeros.data(), w.k_zeros.size() * sizeof(std::uint16_t)},
      {w.v_scales.data(), w.v_scales.size() * sizeof(std::uint16_t)},
      {w.v_zeros.data(), w.v_zeros.size() * sizeof(std::uint16_t)}};
  return pieces;
}

std::int64_t CpuAttention::copy_bytes() const {
  std::size_t total = 0;
  for (const Piece& p : copy_pieces()) total += aligned(p.bytes);
  return static_cast<std::int64_t>(total);
}

CpuAttention::~CpuAttention() { release_copies(); }

void CpuAttention::release_copies() {
  copy_params_.clear();
  if (copies_cache_) copies_cache_->give(std::move(copies_));
  copies_ = HostBuffer();
  copy_stride_ = 0;
}

void CpuAttention::make_copies(int copies, std::shared_ptr<HostBufferCache> cache) {
  release_copies();
  copies_cache_ = std::move(cache);
  const std::vector<Piece> pieces = copy_pieces();
  const auto bytes = static_cast<std::size_t>(copy_bytes());
  const std::size_t total = bytes * static_cast<std::size_t>(std::max(copies, 0));
  if (copies_cache_) {
    copies_ = copies_cache_->take(total);
  } else {
    copies_ = HostBuffer(total);
    advise_huge_pages(copies_.data(), total);
  }
  copy_stride_ = bytes;
  for (int c = 0; c < copies; ++c) {
    kernels::PagedDecodeParams p = params_;
    std::size_t offset = static_cast<std::size_t>(c) * bytes;
    for (const Piece& piece : pieces) {
      std::byte* dst = copies_.data() + offset;
      if (piece.bytes > 0) {
        // Copied by all threads in a static partition: each first-touches what it writes.
        constexpr std::size_t kChunk = std::size_t{1} << 20;
        const auto chunks = static_cast<std::int64_t>((piece.bytes + kChunk - 1) / kChunk);
        const auto* src = static_cast<const std::byte*>(piece.source);
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (std::int64_t i = 0; i < chunks; ++i) {
          const std::size_t begin = static_cast<std::size_t>(i) * kChunk;
          std::memcpy(dst + begin, src + begin, std::min(kChunk, piece.bytes - begin));
        }
      }
      // Repoint the params' field that held this piece's source (MLA's V follows its K).
      const void* from = piece.source;
      if (piece.bytes > 0) {
        if (params_.q == from) p.q = dst;
        if (params_.k_cache == from) p.k_cache = dst;
        if (params_.v_cache == from) p.v_cache = dst;
        if (params_.block_tables == from)
          p.block_tables = reinterpret_cast<const std::int32_t*>(dst);
        if (params_.context_lens == from)
          p.context_lens = reinterpret_cast<const std::int32_t*>(dst);
        if (params_.k_scales == from) p.k_scales = reinterpret_cast<const std::uint16_t*>(dst);
        if (params_.k_zeros == from) p.k_zeros = reinterpret_cast<const std::uint16_t*>(dst);
        if (params_.v_scales == from) p.v_scales = reinterpret_cast<const std::uint16_t*>(dst);
        if (params_.v_zeros == from) p.v_zeros = reinterpret_cast<const std::uint16_t*>(dst);
      }
      offset += aligned(piece.bytes);
    }
    copy_params_.push_back(p);
  }
  // Out of every cache once, so that the first turn's steps and paired reads come from DRAM too
  // (the copies just written, the last ones most recently, would otherwise be partly cached).
  evict_from_caches(copies_.data(), total);
}

// ---- host buffers and the generator ------------------------------------------------------------

HostBuffer::HostBuffer(std::size_t bytes)
    : data_(static_cast<std::byte*>(
          ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t(64)))),
      size_(bytes) {}

void HostBuffer::Free::operator()(std::byte* p) const {
  ::operator delete(p, std::align_val_t(64));
}

HostBuffer HostBufferCache::take(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (kept_.data() && kept_.size() >= bytes) return std::move(kept_);
  kept_ = HostBuffer();
  // A quarter more than asked: a batch series' copies grow a little from point to point, and
  // the pages past what a point writes are never touched, so they cost no faults until used.
  HostBuffer b(bytes + bytes / 4);
  advise_huge_pages(b.data(), b.size());  // once: advice on a reused buffer would collapse again
  return b;
}

void HostBufferCache::give(HostBuffer b) {
  if (!b.data()) return;
  std::lock_guard lock(mutex_);
  if (b.size() > kept_.size()) kept_ = std::move(b);
}

std::size_t HostBufferCache::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

namespace {

template <DType kType>
void store_as(float x, std::byte* dst) {
  if constexpr (kType == DType::f16 || kType == DType::bf16) {
    const std::uint16_t bits =
        kType == DType::f16 ? floatfmt::float_to_f16(x) : floatfmt::float_to_bf16(x);
    std::memcpy(dst, &bits, 2);
  } else {
    static_assert(kType == DType::fp8_e4m3, "weights are bf16, f16 or fp8_e4m3");
    *dst = static_cast<std::byte>(floatfmt::float_to_e4m3(x));
  }
}

// dst[j] = encode(counter_normal(seed, tensor, first + j) * inv_scale), j < count: whole
// Box-Muller pairs where the range allows (one hash for two values), as workload.cpp's fill.
template <DType kType>
void fill_chunk(std::byte* dst, std::int64_t count, std::uint64_t seed, std::uint32_t tensor,
                std::uint64_t first, float inv_scale) {
  constexpr std::size_t kSize = dtype_size(kType);
  std::int64_t j = 0;
  if (count > 0 && (first & 1u)) {
    store_as<kType>(counter_normal(seed, tensor, first) * inv_scale, dst);
    j = 1;
  }
  for (; j + 1 < count; j += 2) {
    const NormalPair p =
        counter_normal_pair(seed, tensor, (first + static_cast<std::uint64_t>(j)) >> 1);
    store_as<kType>(p.first * inv_scale, dst + static_cast<std::size_t>(j) * kSize);
    store_as<kType>(p.second * inv_scale, dst + static_cast<std::size_t>(j + 1) * kSize);
  }
  if (j < count)
    store_as<kType>(counter_normal(seed, tensor, first + static_cast<std::uint64_t>(j)) * inv_scale,
                    dst + static_cast<std::size_t>(j) * kSize);
}

template <DType kType>
void fill_parallel(std::byte* dst, std::int64_t count, std::uint64_t seed, std::uint32_t tensor,
                   std::uint64_t first, float inv_scale) {
  constexpr std::int64_t kChunk = 1 << 16;
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kChunk;
    fill_chunk<kType>(dst + static_cast<std::size_t>(begin) * dtype_size(kType),
                      std::min(kChunk, count - begin), seed, tensor,
                      first + static_cast<std::uint64_t>(begin), inv_scale);
  }
}

}  // namespace

void fill_counter_values(std::byte* dst, DType dtype, std::int64_t count, std::uint64_t seed,
                         LayerTensor tensor, std::uint64_t first, float inv_scale) {
  const auto t = static_cast<std::uint32_t>(tensor);
  switch (dtype) {
    case DType::bf16: return fill_parallel<DType::bf16>(dst, count, seed, t, first, inv_scale);
    case DType::f16: return fill_parallel<DType::f16>(dst, count, seed, t, first, inv_scale);
    case DType::fp8_e4m3:
      return fill_parallel<DType::fp8_e4m3>(dst, count, seed, t, first, inv_scale);
    default: break;
  }
  throw InputError(
      fmt::format("layer tensors are bf16, f16 or fp8_e4m3, got {}", dtype_name(dtype)));
}

void fill_weight(std::uint64_t seed, const GemmShape& shape, DType weights, std::byte* dst) {
  fill_counter_values(dst, weights, shape.n * shape.k, seed, weight_tensor(shape.stage), 0,
                      weight_scale(shape, weights).inv_scale);
}

void fill_input(std::uint64_t seed, int hidden, DType weights, std::span<const int> sequences,
                std::byte* dst) {
  const DType in = gemm_input_dtype(weights);
  const float inv_scale = input_scale(weights).inv_scale;
  const std::size_t row_bytes = static_cast<std::size_t>(hidden) * dtype_size(in);
  for (std::size_t r = 0; r < sequences.size(); ++r)
    fill_counter_values(
        dst + r * row_bytes, in, hidden, seed, LayerTensor::x,
        static_cast<std::uint64_t>(sequences[r]) * static_cast<std::uint64_t>(hidden), inv_scale);
}

// ---- the weights -------------------------------------------------------------------------------

namespace {
constexpr std::array<LayerStage, LayerWeights::kGemms> kGemmStages = {
    LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj, LayerStage::down_proj,
    LayerStage::lm_head};

bool same_shape(const ModelShape& a, const ModelShape& b) {
  return a.num_q_heads == b.num_q_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.vocab_size == b.vocab_size;
}
}  // namespace

int LayerWeights::index(LayerStage gemm) {
  for (int i = 0; i < kGemms; ++i)
    if (kGemmStages[i] == gemm) return i;
  throw std::invalid_argument("attention has no weight");
}

LayerWeights::LayerWeights(const ModelShape& model, DType weights, std::uint64_t seed,
                           GemmLibrary& lib)
    : model_(model), dtype_(weights), seed_(seed) {
  for (int i = 0; i < kGemms; ++i) {
    const GemmShape shape = gemm_shape(model, kGemmStages[i], 1);
    raw_[i] = HostBuffer(static_cast<std::size_t>(shape.n * shape.k) * dtype_size(weights));
    // Huge pages before the first touch: a step streams every page of them.
    advise_huge_pages(raw_[i].data(), raw_[i].size());
    fill_weight(seed, shape, weights, raw_[i].data());
    prepared_[i] = lib.prepare_weights(raw_[i].data(), shape.n, shape.k);
  }
}

bool LayerWeights::same_key(const ModelShape& model, DType weights, std::uint64_t seed) const {
  return same_shape(model_, model) && dtype_ == weights && seed_ == seed;
}

std::int64_t LayerWeights::bytes() const {
  std::int64_t total = 0;
  for (int i = 0; i < kGemms; ++i) {
    total += static_cast<std::int64_t>(raw_[i].size());
    for (const Span& s : prepared_[i]->buffers())
      if (s.first != raw_[i].data()) total += static_cast<std::int64_t>(s.second);
  }
  return total;
}

std::int64_t LayerWeights::host_bytes(const ModelShape& model, DType weights, bool packs) {
  std::int64_t total = 0;
  for (LayerStage s : kGemmStages) {
    const GemmShape g = gemm_shape(model, s, 1);
    total += g.n * g.k * static_cast<std::int64_t>(dtype_size(weights));
  }
  return packs ? 2 * total : total;
}

// ---- the layer ---------------------------------------------------------------------------------

CpuLayer::CpuLayer(const Workload& w, bool cascade, std::shared_ptr<LayerWeights> weights,
                   GemmLibrary& lib, CacheFlusher* flusher)
    : w_(w),
      weights_(std::move(weights)),
      attention_(w, cascade),
      flusher_(flusher),
      busy_(omp_get_max_threads()) {
  const ModelShape& model = w.spec.model;
  if (!weights_ || !weights_->same_key(model, weights_->dtype(), w.spec.seed))
    throw std::invalid_argument("CpuLayer: weights of another model or seed");
  const DType wt = weights_->dtype();
  if (const std::string why = layer_support_error(model, wt, w.spec.q_dtype); !why.empty())
    throw InputError(why);
  if (const std::string why = lib.unsupported_reason(wt); !why.empty()) throw InputError(why);
  const int rows = w.rows();
  x_ = HostBuffer(static_cast<std::size_t>(rows) * model.hidden_size * dtype_size(wt));
  fill_input(w.spec.seed, model.hidden_size, wt, w.sequences, x_.data());
  // Each GEMM reads the previous stage's output: qkv_proj x, o_proj the attention's, down_proj
  // the gate half of gate_up_proj's (row stride 2 I), lm_head down_proj's.
  const std::byte* input = x_.data();
  std::vector<std::string> entries;
  for (int i = 0; i < LayerWeights::kGemms; ++i) {
    Gemm& g = gemms_[i];
    g.shape = gemm_shape(model, kGemmStages[i], rows);
    if (g.shape.stage == LayerStage::o_proj) input = attention_.output().data();
    g.input = input;
    g.output = HostBuffer(static_cast<std::size_t>(rows * g.shape.n) * dtype_size(w.spec.q_dtype));
    g.plan = lib.plan(weights_->prepared(g.shape.stage), rows, g.shape.lda);
    input = g.output.data();
    if (std::find(entries.begin(), entries.end(), g.plan->entry_point()) == entries.end())
      entries.push_back(g.plan->entry_point());
  }
  library_ = fmt::format("{} {} ({})", lib.name(), lib.version(), fmt::join(entries, ", "));
  evict_ = attention_.buffers();
  evict_.emplace_back(x_.data(), x_.size());
  for (const Gemm& g : gemms_) {
    evict_.emplace_back(g.output.data(), g.output.size());
    for (const Span& s : weights_->prepared(g.shape.stage).buffers()) evict_.push_back(s);
    for (const Span& s : g.plan->buffers()) evict_.push_back(s);
  }
  stage_samples_.resize(kNumLayerStages);
}

CpuLayer::Gemm& CpuLayer::gemm(LayerStage stage) { return gemms_[LayerWeights::index(stage)]; }

void CpuLayer::run_stage(LayerStage stage) {
  if (stage == LayerStage::attention) return attention_.run();
  Gemm& g = gemm(stage);
  g.plan->run(g.input, g.output.data());
}

void CpuLayer::run() {
  for (int s = 0; s < kNumLayerStages; ++s) run_stage(static_cast<LayerStage>(s));
}

std::vector<float> CpuLayer::output() {
  return decode_to_float(attention_.output(), attention_.dtype());
}

TimingRecord CpuLayer::timing() const {
  TimingRecord t{TimingMethod::host_clock_per_step, /*steps_per_sample=*/1,
                 /*warm_l2=*/flusher_ == nullptr};
  // The layer keeps the flush: rotating its KV alone would leave the weights (most of its bytes)
  // warm, and copies of the weights (llama-3.1-8b: ~1.5 GB with the LM head) rarely fit the cap.
  if (!t.warm_l2) t.flush_reason = "layer scope: the weights are not rotated";
  return t;
}

double CpuLayer::time_one() {
  if (flusher_) {
    // Cold, as the attention-scope point: every buffer of the step out of the caches, then the
    // timed read that empties them of everything else and samples this moment's read bandwidth.
    for (const auto& [data, bytes] : evict_) evict_from_caches(data, bytes);
    const auto f0 = std::chrono::steady_clock::now();
    flusher_->flush();
    const std::chrono::duration<double> df = std::chrono::steady_clock::now() - f0;
    paired_read_.push_back(static_cast<double>(flusher_->bytes()) / df.count());
  }
  // One clock read between stages: stage s is t[s + 1] - t[s].
  std::array<std::chrono::steady_clock::time_point, kNumLayerStages + 1> t;
  busy_.start();
  t[0] = std::chrono::steady_clock::now();
  for (int s = 0; s < kNumLayerStages; ++s) {
    run_stage(static_cast<LayerStage>(s));
    t[s + 1] = std::chrono::steady_clock::now();
  }
  busy_.stop();
  for (int s = 0; s < kNumLayerStages; ++s)
    stage_samples_[s].push_back(std::chrono::duration<double>(t[s + 1] - t[s]).count());
  // The layer: qkv_proj through down_proj; the LM head is its own term.
  const int last = static_cast<int>(LayerStage::down_proj);
  return std::chrono::duration<double>(t[last + 1] - t[0]).count();
}

PreparedLayer::GemmValues CpuLayer::gemm_values(LayerStage stage, std::span<const int> rows) {
  if (!is_gemm(stage)) throw std::invalid_argument("gemm_values: attention is not a GEMM");
  const Gemm& g = gemm(stage);
  const DType in = gemm_input_dtype(weights_->dtype());
  const DType out = w_.spec.q_dtype;
  GemmValues v;
  v.input.reserve(rows.size() * static_cast<std::size_t>(g.shape.k));
  v.output.reserve(rows.size() * static_cast<std::size_t>(g.shape.n));
  for (int r : rows) {
    if (r < 0 || r >= w_.rows())
      throw std::invalid_argument(fmt::format("gemm_values: row {} of {}", r, w_.rows()));
    const std::byte* x = g.input + static_cast<std::size_t>(r * g.shape.lda) * dtype_size(in);
    for (std::int64_t i = 0; i < g.shape.k; ++i)
      v.input.push_back(decode_value(in, x + static_cast<std::size_t>(i) * dtype_size(in)));
    const std::byte* y =
        g.output.data() + static_cast<std::size_t>(r * g.shape.n) * dtype_size(out);
    for (std::int64_t i = 0; i < g.shape.n; ++i)
      v.output.push_back(decode_value(out, y + static_cast<std::size_t>(i) * dtype_size(out)));
  }
  return v;
}

}  // namespace decodebench::cpu
