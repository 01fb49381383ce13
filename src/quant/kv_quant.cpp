#include "quant/kv_quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/text.h"
#include "device/float_formats.h"

namespace decodebench::quant {
namespace {

constexpr std::array<KvFormat, kNumKvFormats> table_formats() {
  std::array<KvFormat, kNumKvFormats> out{};
  for (int i = 0; i < kNumKvFormats; ++i) out[i] = kKvFormats[i].dtype;
  return out;
}
constexpr std::array kAllFormats = table_formats();

std::uint16_t to_f16(float x) { return floatfmt::float_to_f16(x); }
float from_f16(std::uint16_t b) { return floatfmt::f16_to_float(b); }

// Round to nearest, ties to even: std::nearbyint in the default rounding mode.
float round_even(float x) { return std::nearbyint(x); }

// A scale or zero as stored; one that overflows f16 is an input error, not a silent inf.
std::uint16_t stored_f16(float x, std::string_view what, KvFormat f) {
  const std::uint16_t b = to_f16(x);
  if (!std::isfinite(from_f16(b))) {
    throw InputError(
        fmt::format("{}: a {} of {} does not fit f16 (largest 65504); the values "
                    "are too large for this format",
                    format_name(f), what, x));
  }
  return b;
}

// One scale group: `n` elements at stride `stride` from `first`.
struct Group {
  std::int64_t first;
  std::int64_t n;
  std::int64_t stride;
};

// int8: symmetric, codes in [-127, 127].
std::uint16_t quantize_symmetric(const float* x, const Group& g, std::int8_t* codes, KvFormat f) {
  float amax = 0.f;
  for (std::int64_t i = 0; i < g.n; ++i)
    amax = std::max(amax, std::fabs(x[g.first + i * g.stride]));
  const std::uint16_t s_bits = stored_f16(amax / 127.f, "scale", f);
  const float s = from_f16(s_bits);
  for (std::int64_t i = 0; i < g.n; ++i) {
    const std::int64_t at = g.first + i * g.stride;
    const float c = s > 0.f ? std::clamp(round_even(x[at] / s), -127.f, 127.f) : 0.f;
    codes[at] = static_cast<std::int8_t>(c);
  }
  return s_bits;
}

// int4: asymmetric, codes in [0, 15], written unpacked into `codes` (one per element).
std::pair<std::uint16_t, std::uint16_t> quantize_asymmetric(const float* x, const Group& g,
                                                            std::uint8_t* codes, KvFormat f) {
  float lo = x[g.first], hi = x[g.first];
  for (std::int64_t i = 1; i < g.n; ++i) {
    lo = std::min(lo, x[g.first + i * g.stride]);
    hi = std::max(hi, x[g.first + i * g.stride]);
  }
  const std::uint16_t s_bits = stored_f16((hi - lo) / 15.f, "scale", f);
  const std::uint16_t z_bits = stored_f16(lo, "zero", f);
  const float s = from_f16(s_bits), z = from_f16(z_bits);
  for (std::int64_t i = 0; i < g.n; ++i) {
    const std::int64_t at = g.first + i * g.stride;
    const float c = s > 0.f ? std::clamp(round_even((x[at] - z) / s), 0.f, 15.f) : 0.f;
    codes[at] = static_cast<std::uint8_t>(c);
  }
  return {s_bits, z_bits};
}

void check_shape(KvFormat f, const PoolShape& s, std::size_t values) {
  if (s.num_blocks < 0 || s.kv_heads <= 0 || s.block_size <= 0 || s.head_dim <= 0) {
    throw InputError(
        fmt::format("quantize: pool shape [{}, {}, {}, {}] must be positive "
                    "[num_blocks, kv_heads, block_size, head_dim]",
                    s.num_blocks, s.kv_heads, s.block_size, s.head_dim));
  }
  if (static_cast<std::size_t>(s.elements()) != values) {
    throw InputError(fmt::format("quantize: shape [{}, {}, {}, {}] holds {} values, got {}",
                                 s.num_blocks, s.kv_heads, s.block_size, s.head_dim, s.elements(),
                                 values));
  }
  for (const KvTensorLayout& l : {kv_format(f).k, kv_format(f).v}) {
    if (l.group_channels > 0 && s.head_dim % l.group_channels != 0) {
      throw InputError(
          fmt::format("{}: head_dim {} is not a multiple of {} (its scale groups); "
                      "valid: 32, 64, 128, 256",
                      format_name(f), s.head_dim, l.group_channels));
    }
  }
}

}  // namespace

std::string_view format_name(KvFormat f) { return dtype_name(f); }

std::span<const KvFormat> all_formats() { return kAllFormats; }

bool is_float_format(KvFormat f) { return !is_int_kv(f); }

DType float_format_dtype(KvFormat f) {
  if (is_int_kv(f)) throw std::logic_error("float_format_dtype: not a float format");
  return f;
}

KvFormat parse_format(std::string_view text, std::string_view what) {
  for (KvFormat f : kAllFormats) {
    if (!is_float_format(f) && text == format_name(f)) return f;
  }
  try {
    const DType t = parse_dtype(text, what);
    for (KvFormat f : kAllFormats) {
      if (is_float_format(f) && float_format_dtype(f) == t) return f;
    }
  } catch (const InputError&) {
  }
  std::vector<std::string> names;
  for (KvFormat f : kAllFormats) names.emplace_back(format_name(f));
  throw InputError(
      fmt::format("{}: unknown KV format '{}' (valid: {})", what, text, join(names, ", ")));
}

KvTensor parse_tensor(std::string_view text, std::string_view what) {
  if (text == "k" || text == "key") return KvTensor::k;
  if (text == "v" || text == "value") return KvTensor::v;
  throw InputError(fmt::format("{}: '{}' is not a KV tensor (valid: k, v)", what, text));
}

std::string_view tensor_name(KvTensor t) { return t == KvTensor::k ? "k" : "v"; }

ScaleAxis scale_axis(KvFormat f, KvTensor t) { return kv_layout(f, t == KvTensor::k).axis; }

bool has_zeros(KvFormat f) { return kv_format(f).k.zeros || kv_format(f).v.zeros; }

std::vector<std::int64_t> QuantizedPool::scale_shape() const {
  const PoolShape& s = shape;
  switch (scale_axis(format, tensor)) {
    case ScaleAxis::token_head: return {s.num_blocks, s.kv_heads, s.block_size};
    case ScaleAxis::token_head_group:
      return {s.num_blocks, s.kv_heads, s.block_size,
              s.head_dim / kv_layout(format, tensor == KvTensor::k).group_channels};
    case ScaleAxis::block_head_channel: return {s.num_blocks, s.kv_heads, s.head_dim};
    default: return {};
  }
}

std::int64_t QuantizedPool::stored_bytes() const {
  const std::int64_t tensor_bytes =
      scale_axis(format, tensor) == ScaleAxis::tensor ? kKvTensorScaleBytes : 0;
  return static_cast<std::int64_t>(codes.size() + 2 * (scales.size() + zeros.size())) +
         tensor_bytes;
}

QuantizedPool quantize(KvFormat format, KvTensor tensor, const PoolShape& shape,
                       std::span<const float> values) {
  check_shape(format, shape, values.size());
  for (float x : values) {
    if (!std::isfinite(x)) {
      throw InputError(fmt::format("quantize: the values hold {} (every value must be finite)", x));
    }
  }
  QuantizedPool q;
  q.format = format;
  q.tensor = tensor;
  q.shape = shape;
  const std::int64_t n = shape.elements();
  const std::int64_t d = shape.head_dim, p = shape.block_size;
  const std::int64_t rows = shape.num_blocks * shape.kv_heads * p;  // (block, head, token) rows

  if (is_float_format(format)) {
    const DType t = float_format_dtype(format);
    if (is_fp8(t)) {
      float amax = 0.f;
      for (float x : values) amax = std::max(amax, std::fabs(x));
      q.tensor_scale = amax > 0.f ? amax / fp8_max(t) : 1.f;
    }
    q.codes.resize(static_cast<std::size_t>(n) * dtype_size(t));
    const float inv = 1.f / q.tensor_scale;
    for (std::int64_t i = 0; i < n; ++i) {
      encode_value(t, values[i] * inv,
                   reinterpret_cast<std::byte*>(q.codes.data()) + i * dtype_size(t));
    }
    return q;
  }

  const float* x = values.data();
  if (format == KvFormat::int8) {
    q.codes.resize(static_cast<std::size_t>(n));
    q.scales.resize(static_cast<std::size_t>(rows));
    auto* codes = reinterpret_cast<std::int8_t*>(q.codes.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      q.scales[r] = quantize_symmetric(x, {r * d, d, 1}, codes, format);
    }
    return q;
  }

  // int4: unpacked codes first, packed two a byte at the end.
  std::vector<std::uint8_t> unpacked(static_cast<std::size_t>(n));
  if (scale_axis(format, tensor) == ScaleAxis::block_head_channel) {
    const std::int64_t groups = shape.num_blocks * shape.kv_heads * d;  // (block, head, channel)
    q.scales.resize(groups);
    q.zeros.resize(groups);
    for (std::int64_t bh = 0; bh < shape.num_blocks * shape.kv_heads; ++bh) {
      for (std::int64_t c = 0; c < d; ++c) {
        const auto [s, z] = quantize_asymmetric(x, {bh * p * d + c, p, d}, unpacked.data(), format);
        q.scales[bh * d + c] = s;
        q.zeros[bh * d + c] = z;
      }
    }
  } else {
    const std::int64_t per_row = d / kInt4GroupChannels;
    q.scales.resize(rows * per_row);
    q.zeros.resize(rows * per_row);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t g = 0; g < per_row; ++g) {
        const auto [s, z] = quantize_asymmetric(
            x, {r * d + g * kInt4GroupChannels, kInt4GroupChannels, 1}, unpacked.data(), format);
        q.scales[r * per_row + g] = s;
        q.zeros[r * per_row + g] = z;
      }
    }
  }
  q.codes.resize(static_cast<std::size_t>(n / 2));
  for (std::int64_t i = 0; i < n / 2; ++i) {
    q.codes[i] = static_cast<std::uint8_t>(unpacked[2 * i] | (unpacked[2 * i + 1] << 4));
  }
  return q;
}

std::vector<float> dequantize(const QuantizedPool& q) {
  const PoolShape& shape = q.shape;
  const std::int64_t n = shape.elements();
  const std::int64_t d = shape.head_dim, p = shape.block_size;
  std::vector<float> out(static_cast<std::size_t>(n));
  if (is_float_format(q.format)) {
    const DType t = float_format_dtype(q.format);
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] =
          decode_value(t, reinterpret_cast<const std::byte*>(q.codes.data()) + i * dtype_size(t)) *
          q.tensor_scale;
    }
    return out;
  }
  if (q.format == KvFormat::int8) {
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(static_cast<std::int8_t>(q.codes[i])) * from_f16(q.scales[i / d]);
    }
    return out;
  }
  const bool per_channel = scale_axis(q.format, q.tensor) == ScaleAxis::block_head_channel;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t byte = q.codes[i / 2];
    const float code = static_cast<float>(i % 2 == 0 ? byte & 0xf : byte >> 4);
    // i = ((bh * P) + token) * d + c
    const std::int64_t g = per_channel ? (i / (p * d)) * d + i % d : i / kInt4GroupChannels;
    out[i] = std::fma(code, from_f16(q.scales[g]),
                      from_f16(q.zeros[g]));  // one rounding, as a kernel's FMA
  }
  return out;
}

double bytes_per_token_head(KvFormat f, KvTensor t, int head_dim, int block_size) {
  return kv_bytes_per_token_head(f, t == KvTensor::k, head_dim, block_size);
}

}  // namespace decodebench::quant
