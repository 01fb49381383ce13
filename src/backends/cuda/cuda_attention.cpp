#include "backends/cuda/cuda_attention.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "common/dtype.h"
#include "common/errors.h"

namespace decodebench::cuda {
namespace {

namespace k = kernels;

void expect_bytes(std::size_t have, std::size_t want, const char* what) {
  if (have != want) {
    throw RuntimeFailure("cuda backend: workload " + std::string(what) + " holds " +
                         std::to_string(have) + " bytes, its layout needs " + std::to_string(want));
  }
}

}  // namespace

AttentionStep::AttentionStep(const Workload& w, const k::KernelInfo& kernel,
                             const k::ResidentCtas& resident, cudaStream_t stream)
    : kernel_(kernel.name), stream_(stream) {
  params_ = w.params();  // shapes and scales; the host pointers are replaced below
  // The integer formats are quantized on the host (quant::quantize, per block and token): the
  // device fill writes float formats only, so a layout-only point of these is refused and the
  // harness materializes it on the host (backend.h's convention).
  if (is_int_kv(params_.kv_dtype) && (w.k_cache.empty() || w.v_cache.empty())) {
    throw InputError("cuda backend: the integer KV format " +
                     std::string(dtype_name(params_.kv_dtype)) +
                     " is quantized on the host; the device fill writes float formats only, "
                     "so the point needs its host cache");
  }
  const std::size_t rows = static_cast<std::size_t>(w.rows());
  const std::size_t q_elems = rows * params_.num_q_heads * params_.head_dim;
  const std::size_t cache_rows =
      static_cast<std::size_t>(params_.num_blocks) * params_.num_kv_heads * params_.block_size;

  // [rows][Hq][d] q_dtype
  q_ = DeviceBuffer(q_elems * dtype_size(params_.q_dtype));
  if (!w.q.empty()) {
    expect_bytes(w.q.size(), q_.bytes(), "q");
    q_.upload(w.q.data(), w.q.size(), stream_);
  } else {
    fill_q(w, static_cast<std::size_t>(params_.num_q_heads) * params_.head_dim);
  }
  // [num_blocks][Hkv][P][row bytes] kv_dtype, K and V alike (d / 2 bytes a row for int4); MLA
  // has no V pool: its values are the first v_head_dim of each K row.
  const bool mla = w.spec.model.is_mla();
  k_cache_ = DeviceBuffer(cache_rows * kv_row_bytes(params_.kv_dtype, params_.head_dim));
  upload_or_fill_cache(w, w.k_cache, k_cache_, Tensor::k, "k_cache");
  if (!mla) {
    v_cache_ = DeviceBuffer(cache_rows * kv_row_bytes(params_.kv_dtype, params_.head_dim));
    upload_or_fill_cache(w, w.v_cache, v_cache_, Tensor::v, "v_cache");
  }
  // The integer formats' scales and zeros, f16 in the layouts of src/quant/kv_quant.h.
  const auto upload_f16 = [&](const std::vector<std::uint16_t>& host, DeviceBuffer& dst,
                              const std::uint16_t*& param) {
    if (host.empty()) return;
    dst = DeviceBuffer(host.size() * sizeof(std::uint16_t));
    dst.upload(host.data(), dst.bytes(), stream_);
    param = dst.as<const std::uint16_t>();
  };
  upload_f16(w.k_scales, k_scales_, params_.k_scales);
  upload_f16(w.k_zeros, k_zeros_, params_.k_zeros);
  upload_f16(w.v_scales, v_scales_, params_.v_scales);
  upload_f16(w.v_zeros, v_zeros_, params_.v_zeros);
  // [Hq] fp32 sink logits, for a model with sinks (the rungs that take them read them once).
  if (!w.sinks.empty()) {
    sinks_ = DeviceBuffer(w.sinks.size() * sizeof(float));
    sinks_.upload(w.sinks.data(), sinks_.bytes(), stream_);
    params_.sinks = sinks_.as<const float>();
  }
  // [rows][max_blocks_per_seq] and [rows] int32
  tables_ = DeviceBuffer(w.layout.block_tables.size() * sizeof(std::int32_t));
  tables_.upload(w.layout.block_tables.data(), tables_.bytes(), stream_);
  lens_ = DeviceBuffer(w.layout.context_lens.size() * sizeof(std::int32_t));
  lens_.upload(w.layout.context_lens.data(), lens_.bytes(), stream_);
  // [rows][Hq][dv] q_dtype (dv: MLA's value width, else d), all bytes 0xFF (NaN in f16 and
  // bf16): an element the kernel never writes fails validation instead of passing on a leftover.
  out_ = DeviceBuffer(rows * params_.num_q_heads * w.spec.model.value_dim() *
                      dtype_size(params_.q_dtype));
  DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(out_.get(), 0xFF, out_.bytes(), stream_));

  params_.q = q_.get();
  params_.out = out_.get();
  params_.k_cache = k_cache_.get();
  params_.v_cache = mla ? k_cache_.get() : v_cache_.get();
  params_.block_tables = tables_.as<std::int32_t>();
  params_.context_lens = lens_.as<std::int32_t>();

  // The planners read the host layout (shapes, context lengths, block tables), never device
  // memory: the prefix plan is found and checked on the host, then its packed copy is bound.
  k::PagedDecodeParams host_view = params_;
  host_view.block_tables = w.layout.block_tables.data();
  host_view.context_lens = w.layout.context_lens.data();
  if (kernel.prefix_aware) {
    const k::PrefixPlan plan = k::plan_prefixes(host_view);
    plan.bind(host_view);
    if (std::string why = k::prefix_plan_error(host_view); !why.empty()) {
      throw RuntimeFailure("cuda backend: the planner's " + why);
    }
    const std::vector<std::int32_t> packed = plan.packed();
    plan_ = DeviceBuffer(packed.size() * sizeof(std::int32_t));
    plan_.upload(packed.data(), plan_.bytes(), stream_);
    plan.bind(params_, plan_.as<std::int32_t>());
  }
  if (kernel.uses_workspace) {
    // == point_footprint(...).workspace
    const k::SplitKvWorkspace layout = k::plan_workspace(kernel, host_view, resident);
    workspace_ = DeviceBuffer(layout.total_bytes);
    layout.bind(params_, workspace_.get());
  }
  // Surfaces any fault of the fill kernels here, with the point still attributable.
  DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void AttentionStep::launch() {
  DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_paged_decode(kernel_, params_, stream_),
                           "paged decode kernel '" + kernel_ + "'");
}

bool AttentionStep::try_launch() {
  return k::cuda::launch_paged_decode(kernel_, params_, stream_).ok();
}

std::vector<float> AttentionStep::output() {
  std::vector<std::byte> bytes(out_.bytes());
  out_.download(bytes.data(), bytes.size(), stream_);
  return decode_to_float(bytes, params_.q_dtype);  // [rows][Hq][d]
}

// The workload's own rows are sequences w.sequences[i] of the full sweep point; Q row r of the
// host generator is element index sequence * Hq * d + ..., so each row keeps its values.
void AttentionStep::fill_q(const Workload& w, std::size_t row_elems) {
  const std::size_t row_bytes = row_elems * dtype_size(params_.q_dtype);
  bool identity = true;  // rows are sequences 0..rows-1, contiguous in the generator's order
  for (int r = 0; r < w.rows(); ++r) {
    identity = identity && w.sequences[static_cast<std::size_t>(r)] == r;
  }
  for (int r = 0; r < w.rows(); ++r) {
    if (identity && r > 0) break;  // one launch covers every row
    k::FillParams f;
    f.dst = q_.as<std::byte>() + static_cast<std::size_t>(r) * row_bytes;
    f.dtype = params_.q_dtype;
    f.count = identity ? row_elems * static_cast<std::size_t>(w.rows()) : row_elems;
    f.seed = w.spec.seed;
    f.tensor = static_cast<std::uint32_t>(Tensor::q);
    f.index_offset =
        static_cast<std::uint64_t>(w.sequences[static_cast<std::size_t>(r)]) * row_elems;
    f.inv_scale = inv_scale_for(Tensor::q, params_.kv_dtype);  // 1: Q is not scaled
    DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_fill(f, stream_), "fill kernel (q)");
  }
}

// Uploads the host cache, or (a layout-only Workload: empty host buffer) generates the pool on
// the device with the values the host generator would have written: pool block n holds the
// values of original block source_block_ids[n] (the identity for a full workload).
void AttentionStep::upload_or_fill_cache(const Workload& w, const std::vector<std::byte>& host,
                                         DeviceBuffer& dst, Tensor tensor, const char* what) {
  if (!host.empty()) {
    expect_bytes(host.size(), dst.bytes(), what);
    dst.upload(host.data(), host.size(), stream_);
    return;
  }
  const std::size_t block_elems =
      static_cast<std::size_t>(params_.num_kv_heads) * params_.block_size * params_.head_dim;
  const std::size_t blocks = static_cast<std::size_t>(params_.num_blocks);
  bool identity = true;  // pool block n holds original block n (one launch fills the pool)
  if (!w.source_block_ids.empty()) {
    if (w.source_block_ids.size() != blocks) {
      throw InputError("cuda backend: workload source_block_ids has " +
                       std::to_string(w.source_block_ids.size()) + " entries for a pool of " +
                       std::to_string(blocks) + " blocks");
    }
    for (std::size_t n = 0; n < blocks && identity; ++n) {
      identity = w.source_block_ids[n] == static_cast<std::int32_t>(n);
    }
  }
  k::FillParams f;
  f.dtype = params_.kv_dtype;
  f.seed = w.spec.seed;
  f.tensor = static_cast<std::uint32_t>(tensor);
  f.inv_scale = inv_scale_for(tensor, params_.kv_dtype);
  const std::string label = std::string("fill kernel (") + what + ")";
  if (identity) {  // one launch over the whole pool
    f.dst = dst.get();
    f.count = blocks * block_elems;
    f.index_offset = 0;
    DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_fill(f, stream_), label);
    return;
  }
  // A packed subset pool (small: a validation subset): one launch per block. Block offsets are
  // multiples of 16 bytes (Hkv * P * d * size is), as the fill requires.
  const std::size_t block_bytes = block_elems * dtype_size(params_.kv_dtype);
  for (std::size_t n = 0; n < blocks; ++n) {
    f.dst = dst.as<std::byte>() + n * block_bytes;
    f.count = block_elems;
    f.index_offset = static_cast<std::uint64_t>(w.source_block_ids[n]) * block_elems;
    DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_fill(f, stream_), label);
  }
}

}  // namespace decodebench::cuda
