#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "device/paged_kv.h"

namespace decodebench {
namespace {

// Where the reference takes K/V values from: the stored cache (times the dequantization
// scales) or the generator's real values.
enum class KvSource { stored, generator };

std::vector<float> decode_reference(const Workload& w, KvSource source) {
  const ModelShape& m = w.spec.model;
  const int hq = m.num_q_heads;
  const int hkv = m.num_kv_heads;
  const int d = m.head_dim;
  const int dv = m.value_dim();  // MLA: V is the first dv values of each K row
  const bool mla = m.is_mla();
  const int group = hq / hkv;
  const int block_size = w.spec.block_size;
  const DType kv_dtype = w.spec.kv_dtype;
  const std::size_t q_size = dtype_size(w.spec.q_dtype);
  const PagedLayout& layout = w.layout;
  const int rows = w.rows();
  const int window = m.uniform_window();  // a step computes one kind of layer
  const double softcap = m.attn_logit_softcapping;
  if (m.sinks && w.sinks.size() != static_cast<std::size_t>(hq)) {
    throw InputError(
        fmt::format("reference: the model has sinks but the workload holds {} sink "
                    "logits; valid: {} (one per query head)",
                    w.sinks.size(), hq));
  }
  if (hkv <= 0 || hq % hkv != 0) {
    throw InputError(
        fmt::format("reference: num_q_heads {} is not a multiple of num_kv_heads {}", hq, hkv));
  }

  // Check the workload's shape up front: nothing may throw inside the parallel loop, and the
  // oracle must never read out of bounds.
  if (layout.context_lens.size() != static_cast<std::size_t>(rows) ||
      layout.block_tables.size() != static_cast<std::size_t>(rows) * layout.max_blocks_per_seq ||
      (!w.source_block_ids.empty() &&
       w.source_block_ids.size() != static_cast<std::size_t>(layout.num_blocks))) {
    throw InputError(
        fmt::format("reference: inconsistent workload ({} rows, {} context lengths, {} "
                    "block-table entries for {} per row, {} source ids for {} blocks)",
                    rows, layout.context_lens.size(), layout.block_tables.size(),
                    layout.max_blocks_per_seq, w.source_block_ids.size(), layout.num_blocks));
  }
  for (int r = 0; r < rows; ++r) {
    const int len = layout.context_lens[r];
    if (len < 1 || len > layout.max_blocks_per_seq * block_size) {
      throw InputError(fmt::format("reference: row {} has context length {}; valid: 1..{}", r, len,
                                   layout.max_blocks_per_seq * block_size));
    }
    for (int j = 0; j < (len + block_size - 1) / block_size; ++j) {
      const std::int32_t id =
          layout.block_tables[static_cast<std::size_t>(r) * layout.max_blocks_per_seq + j];
      if (id < 0 || id >= layout.num_blocks) {
        throw InputError(fmt::format("reference: row {} block {} is {}; valid: 0..{}", r, j, id,
                                     layout.num_blocks - 1));
      }
    }
  }
  const std::size_t cache_elems =
      static_cast<std::size_t>(layout.num_blocks) * hkv * block_size * d;
  const std::size_t cache_bytes = cache_elems / d * kv_row_bytes(kv_dtype, d);
  if (w.k_cache.size() != cache_bytes || w.v_cache.size() != (mla ? 0 : cache_bytes) ||
      w.q.size() != static_cast<std::size_t>(rows) * hq * d * q_size) {
    throw InputError("reference: cache or q buffer size does not match the workload's shape");
  }

  // An integer format's pools dequantized once by its own definition (quant::dequantize).
  std::vector<float> k_dequantized, v_dequantized;
  if (source == KvSource::stored && is_int_kv(kv_dtype)) {
    k_dequantized = dequantized_kv(w, Tensor::k);
    v_dequantized = dequantized_kv(w, Tensor::v);
  }

  // The element at cache offset `offset` of tensor `t`, as a real (dequantized) value.
  const std::size_t block_elems = static_cast<std::size_t>(hkv) * block_size * d;
  auto kv_value = [&](Tensor t, std::size_t offset) -> double {
    if (source == KvSource::stored) {
      if (is_int_kv(kv_dtype)) return (t == Tensor::k ? k_dequantized : v_dequantized)[offset];
      const std::vector<std::byte>& cache = t == Tensor::k ? w.k_cache : w.v_cache;
      const double scale = t == Tensor::k ? w.k_scale : w.v_scale;
      return decode_value(kv_dtype, cache.data() + offset * dtype_size(kv_dtype)) * scale;
    }
    // The generator's value at the same element of the original pool.
    // A hand-built workload without source ids is its own original pool.
    const std::size_t block = offset / block_elems;
    const std::uint64_t source_block =
        w.source_block_ids.empty() ? block
                                   : static_cast<std::uint64_t>(w.source_block_ids.at(block));
    const std::uint64_t original = source_block * block_elems + offset % block_elems;
    return counter_normal(w.spec.seed, static_cast<std::uint32_t>(t), original);
  };

  std::vector<float> out(static_cast<std::size_t>(rows) * hq * dv);
  // One (row, kv head) at a time: its K/V rows are decoded once and serve the whole group.
#pragma omp parallel for schedule(dynamic)
  for (int task = 0; task < rows * hkv; ++task) {
    const int r = task / hkv;
    const int kv_head = task % hkv;
    // The tokens this layer attends to: the last `window` of the context, or all of it.
    const int first = window_first_token(layout.context_lens[r], window);
    const int len = layout.context_lens[r] - first;
    std::vector<double> k(static_cast<std::size_t>(len) * d);   // [L][d]
    std::vector<double> v(static_cast<std::size_t>(len) * dv);  // [L][dv]
    for (int t = 0; t < len; ++t) {
      const std::size_t row =
          token_row_offset(layout.block_tables.data(), layout.max_blocks_per_seq, r, first + t,
                           kv_head, hkv, block_size, d);
      for (int i = 0; i < d; ++i)
        k[static_cast<std::size_t>(t) * d + i] = kv_value(Tensor::k, row + i);
      for (int i = 0; i < dv; ++i) {
        v[static_cast<std::size_t>(t) * dv + i] =
            mla ? k[static_cast<std::size_t>(t) * d + i] : kv_value(Tensor::v, row + i);
      }
    }
    std::vector<double> score(static_cast<std::size_t>(len));
    std::vector<double> q(static_cast<std::size_t>(d));
    for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {  // query heads of this kv head
      const std::size_t q_row = (static_cast<std::size_t>(r) * hq + h) * d;     // [rows][Hq][d]
      const std::size_t out_row = (static_cast<std::size_t>(r) * hq + h) * dv;  // [rows][Hq][dv]
      for (int i = 0; i < d; ++i)
        q[i] = decode_value(w.spec.q_dtype, w.q.data() + (q_row + i) * q_size);
      // Scores (soft-capped if the model caps them), then a numerically safe softmax
      // (subtract the max). A sink is one more logit in the max and the denominator, with no
      // value.
      const double sink = m.sinks ? w.sinks[static_cast<std::size_t>(h)] : 0.0;
      double max_score = m.sinks ? sink : -std::numeric_limits<double>::infinity();
      for (int t = 0; t < len; ++t) {
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += q[i] * k[static_cast<std::size_t>(t) * d + i];
        score[t] = dot * w.softmax_scale;
        if (softcap > 0) score[t] = softcap * std::tanh(score[t] / softcap);
        max_score = std::max(max_score, score[t]);
      }
      double sum = m.sinks ? std::exp(sink - max_score) : 0.0;
      for (int t = 0; t < len; ++t) {
        score[t] = std::exp(score[t] - max_score);
        sum += score[t];
      }
      for (int i = 0; i < dv; ++i) {
        double acc = 0;
        for (int t = 0; t < len; ++t) acc += score[t] * v[static_cast<std::size_t>(t) * dv + i];
        out[out_row + i] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<float> reference_decode(const Workload& w) {
  return decode_reference(w, KvSource::stored);
}

std::vector<float> reference_decode_unquantized(const Workload& w) {
  return decode_reference(w, KvSource::generator);
}

// Why these numbers. The kernels accumulate in fp32 and round the output once to q_dtype; the
// reference is exact to ~1e-15. So, per element:
//  - rounding the output to f16 costs up to half an ulp, 2^-11 = 4.9e-4 relative; bf16 has 8
//    significant bits, 2^-8 = 3.9e-3. rtol is twice that, leaving room for the fp32 error of
//    scores and softmax weights (exp2 approximations are good to ~2^-22 relative; a d = 256 dot
//    product in fp32 is good to ~1e-6 relative) and for the order in which split_kv merges.
//  - outputs are weighted means of N(0,1) values, so they shrink like 1/sqrt(context) and some
//    elements are near zero, where the relative bound vanishes. atol covers the fp32
//    accumulation error there: sum_t p_t v_t over up to 32k tokens with sum p_t = 1 has a
//    rounding error around sqrt(L) * 2^-24 * max|v| ~ 1e-5, and below 6e-5 f16 output is
//    subnormal with a fixed spacing of 6e-8. bf16 rounding near zero is coarser, so its atol is
//    larger too.
//  - the KV dtype does not change the bound: the reference reads the same stored (fp8) values,
//    with the same per-tensor scales, so quantization is not a kernel error (it is reported
//    separately, by quantization_error). Every dtype here gets an fp32 accumulator.
// A kernel that drops or double-counts one token of a context of a few hundred moves outputs by
// ~1/L, far outside these bounds; the planted-fault tests check that such faults are caught.
Tolerance tolerance_for(DType q_dtype, DType kv_dtype) {
  (void)kv_dtype;  // see above: the bound is set by the output rounding and fp32 accumulation
  switch (q_dtype) {
    case DType::f16: return {2e-5, 1e-3};
    case DType::bf16: return {1e-4, 8e-3};
    case DType::f32: return {1e-5, 1e-5};  // fp32 output: accumulation error only
    default:
      throw InputError(
          fmt::format("no tolerance for q dtype {}; valid: f16, bf16, f32", dtype_name(q_dtype)));
  }
}

Comparison compare_outputs(std::span<const float> out, std::span<const float> ref, int num_q_heads,
                           int head_dim, Tolerance tol) {
  const std::size_t row_elems = static_cast<std::size_t>(num_q_heads) * head_dim;
  if (out.size() != ref.size() || row_elems == 0 || out.size() % row_elems != 0) {
    throw InputError(
        fmt::format("compare_outputs: out has {} elements, ref has {}; both must be [rows][{}][{}]",
                    out.size(), ref.size(), num_q_heads, head_dim));
  }
  constexpr std::size_t kReported = 8;
  Comparison c;
  c.checked = out.size();
  std::string details;
  for (std::size_t idx = 0; idx < out.size(); ++idx) {
    const double o = out[idx];
    const double r = ref[idx];
    const double diff = std::fabs(o - r);
    const double allowed = tol.atol + tol.rtol * std::fabs(r);
    // Written so that NaN (in either) fails: every comparison with NaN is false.
    const bool good = std::isfinite(o) && std::isfinite(r) && diff <= allowed;
    if (std::isfinite(diff)) {
      c.max_abs = std::max(c.max_abs, diff);
      if (r != 0) c.max_rel = std::max(c.max_rel, diff / std::fabs(r));
    }
    if (good) continue;
    ++c.mismatches;
    if (c.mismatches <= kReported) {
      const std::size_t row = idx / row_elems;
      const std::size_t head = idx % row_elems / head_dim;
      const std::size_t i = idx % head_dim;
      details += fmt::format("  [{}][{}][{}] out={:.8g} ref={:.8g} |diff|={:.3g} allowed={:.3g}\n",
                             row, head, i, o, r, diff, allowed);
    }
  }
  c.ok = c.mismatches == 0;
  if (c.ok) {
    c.report = fmt::format(
        "all {} elements within atol={:g} + rtol={:g}*|ref| (max abs {:.3g}, "
        "max rel {:.3g})",
        c.checked, tol.atol, tol.rtol, c.max_abs, c.max_rel);
  } else {
    c.report = fmt::format(
        "{} of {} elements outside atol={:g} + rtol={:g}*|ref| (max abs {:.3g}, "
        "max rel {:.3g}); first {}:\n{}",
        c.mismatches, c.checked, tol.atol, tol.rtol, c.max_abs, c.max_rel,
        std::min(c.mismatches, kReported), details);
  }
  return c;
}

double quantization_error(std::span<const float> quantized_ref,
                          std::span<const float> unquantized_ref) {
  if (quantized_ref.size() != unquantized_ref.size()) {
    throw InputError(fmt::format("quantization_error: sizes differ ({} vs {})",
                                 quantized_ref.size(), unquantized_ref.size()));
  }
  double max_diff = 0;
  double max_ref = 0;
  for (std::size_t i = 0; i < quantized_ref.size(); ++i) {
    max_diff =
        std::max(max_diff, std::fabs(static_cast<double>(quantized_ref[i]) - unquantized_ref[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(unquantized_ref[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

}  // namespace decodebench
