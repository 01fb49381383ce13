// The values of a workload: q, the KV pool (float, fp8 or an integer format quantized from the
// generator), the sinks, as the counter-based generator fills them on the host and the device
// alike. The layout they fill is paged_layout.cpp's.
#include "workload/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_text.h"
#include "device/counter_rng.h"
#include "device/float_formats.h"
#include "device/math.h"
#include "quant/kv_quant.h"

#ifndef DECODEBENCH_SOURCE_CONFIGS_DIR
#error "DECODEBENCH_SOURCE_CONFIGS_DIR must be defined by src/workload/CMakeLists.txt"
#endif

namespace decodebench {
namespace {}  // namespace

namespace {

std::int64_t cache_elements(const ModelShape& m, int block_size, std::int64_t num_blocks) {
  return num_blocks * m.num_kv_heads * block_size * m.head_dim;
}

// The generator's polynomials are chains of fmaf. Without an FMA instruction in the baseline
// ISA each is a libm call; an FMA clone of the fill loop, picked at run time, is ~2x faster.
// fmaf is exactly rounded either way, so both clones produce the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) &&                                   \
    !defined(__SANITIZE_ADDRESS__)  // ifunc resolvers run before the sanitizer runtime starts
#define DECODEBENCH_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define DECODEBENCH_FMA_CLONES
#endif

// Stores one value in the storage type of `dtype` (the encode_value of common/dtype.h, inlined
// into the fill loop per dtype).
template <DType kType>
void store_as(float x, std::byte* dst) {
  if constexpr (kType == DType::f32) {
    std::memcpy(dst, &x, 4);
  } else if constexpr (kType == DType::f16 || kType == DType::bf16) {
    const std::uint16_t bits =
        kType == DType::f16 ? floatfmt::float_to_f16(x) : floatfmt::float_to_bf16(x);
    std::memcpy(dst, &bits, 2);
  } else {
    *dst = static_cast<std::byte>(kType == DType::fp8_e4m3 ? floatfmt::float_to_e4m3(x)
                                                           : floatfmt::float_to_e5m2(x));
  }
}

template <DType kType>
DECODEBENCH_FMA_CLONES void fill_chunk(std::byte* dst, std::int64_t count, std::uint64_t seed,
                                       Tensor tensor, std::uint64_t first_index, float inv_scale) {
  constexpr std::size_t kSize = dtype_size(kType);
  const auto t = static_cast<std::uint32_t>(tensor);
  std::int64_t i = 0;
  if (count > 0 && (first_index & 1u)) {  // an odd first element: the second of its pair
    store_as<kType>(counter_normal(seed, t, first_index) * inv_scale, dst);
    i = 1;
  }
  for (; i + 1 < count; i += 2) {  // whole pairs: elements 2p and 2p + 1
    const NormalPair p =
        counter_normal_pair(seed, t, (first_index + static_cast<std::uint64_t>(i)) >> 1);
    store_as<kType>(p.first * inv_scale, dst + static_cast<std::size_t>(i) * kSize);
    store_as<kType>(p.second * inv_scale, dst + static_cast<std::size_t>(i + 1) * kSize);
  }
  if (i < count) {
    store_as<kType>(
        counter_normal(seed, t, first_index + static_cast<std::uint64_t>(i)) * inv_scale,
        dst + static_cast<std::size_t>(i) * kSize);
  }
}

void fill_chunk(DType dtype, std::byte* dst, std::int64_t count, std::uint64_t seed, Tensor tensor,
                std::uint64_t first_index, float inv_scale) {
  switch (dtype) {
    case DType::f32:
      return fill_chunk<DType::f32>(dst, count, seed, tensor, first_index, inv_scale);
    case DType::f16:
      return fill_chunk<DType::f16>(dst, count, seed, tensor, first_index, inv_scale);
    case DType::bf16:
      return fill_chunk<DType::bf16>(dst, count, seed, tensor, first_index, inv_scale);
    case DType::fp8_e4m3:
      return fill_chunk<DType::fp8_e4m3>(dst, count, seed, tensor, first_index, inv_scale);
    case DType::fp8_e5m2:
      return fill_chunk<DType::fp8_e5m2>(dst, count, seed, tensor, first_index, inv_scale);
    default: break;  // an integer format: quantize_pieces, floats first, then the quantizer
  }
  throw InputError(fmt::format("fill: {} is not an element dtype", dtype_name(dtype)));
}

// dst[i] = encode(dtype, counter_normal(seed, tensor, first_index + i) * inv_scale), i < count:
// the host twin of the device fill (kernels::FillParams), in parallel chunks.
void fill_values(std::byte* dst, DType dtype, std::int64_t count, std::uint64_t seed, Tensor tensor,
                 std::uint64_t first_index, float inv_scale) {
  constexpr std::int64_t kChunk = 1 << 16;
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
  const std::size_t size = dtype_size(dtype);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kChunk;
    fill_chunk(dtype, dst + static_cast<std::size_t>(begin) * size, std::min(kChunk, count - begin),
               seed, tensor, first_index + static_cast<std::uint64_t>(begin), inv_scale);
  }
}

// An integer KV format's pool: the generator's values (unscaled) quantized by src/quant's
// quantizer, the one the kernels are checked against. Every scale group lies inside one block,
// so pieces of blocks quantize independently and a subset pool gets its blocks' exact codes.
void quantize_pieces(Workload& w, std::int64_t block_elems) {
  const WorkloadSpec& spec = w.spec;
  const ModelShape& m = spec.model;
  const int num_blocks = w.layout.num_blocks;
  constexpr int kPiece = 64;  // blocks quantized at once: a few MB of floats per thread
  const quant::PoolShape block{1, m.num_kv_heads, spec.block_size, m.head_dim};
  // Sizes of one block's codes, scales and zeros, from a one-block pool.
  const std::vector<float> zeros_block(static_cast<std::size_t>(block_elems), 0.f);
  std::size_t codes_per_block[2], scales_per_block[2], zeros_per_block[2];
  for (int t = 0; t < 2; ++t) {
    const quant::QuantizedPool one = quant::quantize(
        spec.kv_dtype, t == 0 ? quant::KvTensor::k : quant::KvTensor::v, block, zeros_block);
    codes_per_block[t] = one.codes.size();
    scales_per_block[t] = one.scales.size();
    zeros_per_block[t] = one.zeros.size();
  }
  std::vector<std::byte>* codes[2] = {&w.k_cache, &w.v_cache};
  std::vector<std::uint16_t>* scales[2] = {&w.k_scales, &w.v_scales};
  std::vector<std::uint16_t>* zeros[2] = {&w.k_zeros, &w.v_zeros};
  for (int t = 0; t < 2; ++t) {
    codes[t]->resize(codes_per_block[t] * num_blocks);
    scales[t]->resize(scales_per_block[t] * num_blocks);
    zeros[t]->resize(zeros_per_block[t] * num_blocks);
  }
  const int pieces = (num_blocks + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(dynamic, 1)
  for (int piece = 0; piece < pieces; ++piece) {
    const int first = piece * kPiece;
    const int count = std::min(kPiece, num_blocks - first);
    std::vector<float> values(static_cast<std::size_t>(count * block_elems));
    for (int t = 0; t < 2; ++t) {
      const Tensor tensor = t == 0 ? Tensor::k : Tensor::v;
      for (int n = 0; n < count; ++n)
        fill_chunk(DType::f32, reinterpret_cast<std::byte*>(values.data() + n * block_elems),
                   block_elems, spec.seed, tensor,
                   static_cast<std::uint64_t>(w.source_block_ids[first + n]) * block_elems, 1.0f);
      const quant::QuantizedPool q =
          quant::quantize(spec.kv_dtype, t == 0 ? quant::KvTensor::k : quant::KvTensor::v,
                          {count, m.num_kv_heads, spec.block_size, m.head_dim}, values);
      std::memcpy(codes[t]->data() + first * codes_per_block[t], q.codes.data(), q.codes.size());
      std::copy(q.scales.begin(), q.scales.end(),
                scales[t]->begin() + static_cast<std::ptrdiff_t>(first * scales_per_block[t]));
      std::copy(q.zeros.begin(), q.zeros.end(),
                zeros[t]->begin() + static_cast<std::ptrdiff_t>(first * zeros_per_block[t]));
    }
  }
}

}  // namespace

// ---- values -------------------------------------------------------------------------------

float kv_scale_for(DType kv_dtype) {
  return is_fp8(kv_dtype) ? kGeneratorBound / fp8_max(kv_dtype) : 1.0f;
}

float inv_scale_for(Tensor tensor, DType kv_dtype) {
  return tensor == Tensor::q ? 1.0f : 1.0f / kv_scale_for(kv_dtype);
}

kernels::PagedDecodeParams shape_params(const WorkloadSpec& spec) {
  kernels::PagedDecodeParams p;
  p.batch = spec.batch;
  p.num_q_heads = spec.model.num_q_heads;
  p.num_kv_heads = spec.model.num_kv_heads;
  p.head_dim = spec.model.head_dim;
  p.block_size = spec.block_size;
  p.q_dtype = spec.q_dtype;
  p.kv_dtype = spec.kv_dtype;
  p.v_head_dim = spec.model.is_mla() ? spec.model.value_dim() : 0;
  p.softmax_scale = spec.model.softmax_scale();
  p.k_scale = p.v_scale = kv_scale_for(spec.kv_dtype);
  // A model whose layers differ has no one window; the largest is what a support check must
  // see (each layer class is computed through ModelShape::with_window).
  p.window = spec.model.windowed_layers() > 0 ? spec.model.sliding_window : 0;
  p.has_sinks = spec.model.sinks;
  p.softcap = static_cast<float>(spec.model.attn_logit_softcapping);
  return p;
}

std::vector<float> sink_logits(const ModelShape& m, std::uint64_t seed) {
  std::vector<float> s(static_cast<std::size_t>(m.num_q_heads));
  for (int h = 0; h < m.num_q_heads; ++h) {
    s[static_cast<std::size_t>(h)] = static_cast<float>(
        1.0 + 2.0 * counter_normal(seed, static_cast<std::uint32_t>(Tensor::sinks),
                                   static_cast<std::uint64_t>(h)));
  }
  return s;
}

kernels::PagedDecodeParams shape_params(const WorkloadSpec& spec, const PagedLayout& layout) {
  kernels::PagedDecodeParams p = shape_params(spec);
  p.block_tables = layout.block_tables.data();                      // [rows][max_blocks_per_seq]
  p.context_lens = layout.context_lens.data();                      // [rows]
  p.batch = static_cast<std::int32_t>(layout.context_lens.size());  // a subset has fewer rows
  p.max_blocks_per_seq = layout.max_blocks_per_seq;
  p.num_blocks = layout.num_blocks;
  return p;
}

kernels::PagedDecodeParams Workload::params() const {
  kernels::PagedDecodeParams p = shape_params(spec, layout);
  p.q = q.data();
  p.out = nullptr;
  p.k_cache = k_cache.data();
  // MLA: the values are the first v_head_dim of each K row.
  p.v_cache = spec.model.is_mla() ? k_cache.data() : v_cache.data();
  p.batch = rows();
  p.softmax_scale = softmax_scale;
  p.k_scale = k_scale;
  p.v_scale = v_scale;
  p.window = spec.model.uniform_window();  // throws for a model whose layers differ
  p.sinks = sinks.empty() ? nullptr : sinks.data();
  auto or_null = [](const std::vector<std::uint16_t>& a) { return a.empty() ? nullptr : a.data(); };
  p.k_scales = or_null(k_scales);
  p.k_zeros = or_null(k_zeros);
  p.v_scales = or_null(v_scales);
  p.v_zeros = or_null(v_zeros);
  return p;
}

Workload make_workload(const WorkloadSpec& spec) {
  const PagedLayout layout = build_layout(spec);
  std::vector<int> all(static_cast<std::size_t>(spec.batch));
  std::iota(all.begin(), all.end(), 0);
  return make_workload(spec, layout, all);
}

Workload make_workload(const WorkloadSpec& spec, const PagedLayout& layout,
                       std::span<const int> sequences) {
  validate(spec);
  const int batch = static_cast<int>(layout.context_lens.size());
  if (batch != spec.batch) {
    throw InputError(fmt::format(
        "make_workload: the layout has {} sequences, the spec's batch is {}", batch, spec.batch));
  }
  const ModelShape& m = spec.model;
  const int block_size = spec.block_size;
  const int rows = static_cast<int>(sequences.size());

  Workload w;
  w.spec = spec;
  w.sequences.assign(sequences.begin(), sequences.end());
  w.softmax_scale = m.softmax_scale();
  w.k_scale = w.v_scale = kv_scale_for(spec.kv_dtype);
  if (m.sinks) w.sinks = sink_logits(m, spec.seed);

  w.layout = pack_layout(layout, sequences, block_size, w.source_block_ids);
  const PagedLayout& sub = w.layout;
  // The full batch in order kept the layout's block ids: its values are filled in one piece.
  const bool full = rows == batch && std::is_sorted(sequences.begin(), sequences.end());

  // Q [rows][Hq][d]: row r takes the values of original sequence sequences[r].
  const std::int64_t q_row = static_cast<std::int64_t>(m.num_q_heads) * m.head_dim;
  w.q.resize(static_cast<std::size_t>(rows * q_row) * dtype_size(spec.q_dtype));
  for (int r = 0; r < rows; ++r) {
    fill_values(w.q.data() + static_cast<std::size_t>(r * q_row) * dtype_size(spec.q_dtype),
                spec.q_dtype, q_row, spec.seed, Tensor::q,
                static_cast<std::uint64_t>(sequences[r]) * q_row, 1.0f);
  }

  // K/V [num_blocks][Hkv][P][d]: block n takes the values of original block source_block_ids[n].
  const std::int64_t block_elems = cache_elements(m, block_size, 1);
  const std::int64_t total = cache_elements(m, block_size, sub.num_blocks);
  if (is_int_kv(spec.kv_dtype)) {
    quantize_pieces(w, block_elems);
    return w;
  }
  const std::size_t kv_size = dtype_size(spec.kv_dtype);
  const bool has_v = !m.is_mla();  // MLA's values live in its K rows
  w.k_cache.resize(static_cast<std::size_t>(total) * kv_size);
  if (has_v) w.v_cache.resize(static_cast<std::size_t>(total) * kv_size);
  const float inv_scale = inv_scale_for(Tensor::k, spec.kv_dtype);
  if (full) {
    fill_values(w.k_cache.data(), spec.kv_dtype, total, spec.seed, Tensor::k, 0, inv_scale);
    if (has_v)
      fill_values(w.v_cache.data(), spec.kv_dtype, total, spec.seed, Tensor::v, 0, inv_scale);
  } else {
    for (int n = 0; n < sub.num_blocks; ++n) {
      const std::size_t offset = static_cast<std::size_t>(n * block_elems) * kv_size;
      const std::uint64_t first = static_cast<std::uint64_t>(w.source_block_ids[n]) * block_elems;
      fill_values(w.k_cache.data() + offset, spec.kv_dtype, block_elems, spec.seed, Tensor::k,
                  first, inv_scale);
      if (has_v)
        fill_values(w.v_cache.data() + offset, spec.kv_dtype, block_elems, spec.seed, Tensor::v,
                    first, inv_scale);
    }
  }
  return w;
}

std::vector<float> kv_source_values(const Workload& w, Tensor tensor) {
  const std::int64_t block_elems = cache_elements(w.spec.model, w.spec.block_size, 1);
  std::vector<float> values(static_cast<std::size_t>(block_elems * w.layout.num_blocks));
  const float inv_scale = inv_scale_for(tensor, w.spec.kv_dtype);
  for (int n = 0; n < w.layout.num_blocks; ++n) {
    const std::uint64_t source =
        w.source_block_ids.empty() ? n : static_cast<std::uint64_t>(w.source_block_ids[n]);
    fill_values(reinterpret_cast<std::byte*>(values.data() + n * block_elems), DType::f32,
                block_elems, w.spec.seed, tensor, source * block_elems, inv_scale);
  }
  return values;
}

std::vector<float> dequantized_kv(const Workload& w, Tensor t) {
  if (!is_int_kv(w.spec.kv_dtype))
    throw InputError(
        fmt::format("dequantized_kv: {} is not an integer KV format", dtype_name(w.spec.kv_dtype)));
  const bool is_k = t == Tensor::k;
  const quant::KvTensor tensor = is_k ? quant::KvTensor::k : quant::KvTensor::v;
  quant::QuantizedPool pool;
  pool.format = w.spec.kv_dtype;
  pool.tensor = tensor;
  pool.shape = {w.layout.num_blocks, w.spec.model.num_kv_heads, w.spec.block_size,
                w.spec.model.head_dim};
  const std::vector<std::byte>& codes = is_k ? w.k_cache : w.v_cache;
  pool.codes.resize(codes.size());
  std::memcpy(pool.codes.data(), codes.data(), codes.size());
  pool.scales = is_k ? w.k_scales : w.v_scales;
  pool.zeros = is_k ? w.k_zeros : w.v_zeros;
  std::int64_t groups = 1;
  for (std::int64_t extent : pool.scale_shape()) groups *= extent;
  const std::size_t want_zeros = quant::has_zeros(pool.format) ? groups : 0;
  if (pool.scales.size() != static_cast<std::size_t>(groups) || pool.zeros.size() != want_zeros) {
    throw InputError(
        fmt::format("the {} {} cache has {} scales and {} zeros; its layout needs {} and {}",
                    dtype_name(pool.format), quant::tensor_name(tensor), pool.scales.size(),
                    pool.zeros.size(), groups, want_zeros));
  }
  return quant::dequantize(pool);
}

std::int64_t workload_host_bytes(const WorkloadSpec& spec, const PagedLayout& layout) {
  const ModelShape& m = spec.model;
  const std::int64_t rows = static_cast<std::int64_t>(layout.context_lens.size());
  const std::int64_t q =
      rows * m.num_q_heads * m.head_dim * static_cast<std::int64_t>(dtype_size(spec.q_dtype));
  // Codes, scales and zeros of K and V (and, for an integer format, the float values of the
  // blocks being quantized: a few MB, not counted).
  const auto kv =
      static_cast<std::int64_t>(std::ceil(static_cast<double>(layout.num_blocks) * spec.block_size *
                                          kv_bytes_per_token(m, spec.kv_dtype, spec.block_size)));
  const std::int64_t tables = static_cast<std::int64_t>(layout.block_tables.size()) * 4 + rows * 4;
  const std::int64_t ids = static_cast<std::int64_t>(layout.num_blocks) * 4;  // source_block_ids
  return q + kv + tables + ids;
}

}  // namespace decodebench
