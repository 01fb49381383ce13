#include "common/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/errors.h"
#include "device/float_formats.h"

namespace decodebench {
namespace {

// The element dtypes: every float format of the table, in enum order.
constexpr std::size_t count_float_formats() {
  std::size_t n = 0;
  for (const KvFormatInfo& f : kKvFormats) n += f.is_float ? 1 : 0;
  return n;
}
constexpr std::array<DType, count_float_formats()> element_dtypes() {
  std::array<DType, count_float_formats()> out{};
  std::size_t n = 0;
  for (const KvFormatInfo& f : kKvFormats) {
    if (f.is_float) out[n++] = f.dtype;
  }
  return out;
}
constexpr std::array kAllDtypes = element_dtypes();

// A table row's comma-separated aliases, one at a time.
std::vector<std::string_view> split_aliases(std::string_view aliases) {
  std::vector<std::string_view> out;
  while (!aliases.empty()) {
    const std::size_t comma = aliases.find(',');
    out.push_back(aliases.substr(0, comma));
    if (comma == std::string_view::npos) break;
    aliases.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::string_view dtype_name(DType t) {
  if (static_cast<int>(t) >= kNumKvFormats) {
    throw InputError(fmt::format("unknown DType value {}", static_cast<int>(t)));
  }
  return kv_format(t).name;
}

std::span<const DType> all_dtypes() { return kAllDtypes; }

std::string dtype_names(DtypeKind kind) {
  std::string s;
  for (const KvFormatInfo& f : kKvFormats) {
    if (kind == DtypeKind::element && !f.is_float) continue;
    if (kind == DtypeKind::integer && f.is_float) continue;
    if (!s.empty()) s += ", ";
    s += f.name;
  }
  return s;
}

DType parse_dtype(std::string_view text, std::string_view what) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string aliases;
  for (const KvFormatInfo& f : kKvFormats) {
    if (lower == f.name) return f.dtype;
    for (std::string_view alias : split_aliases(f.aliases)) {
      if (lower == alias) return f.dtype;
      aliases += (aliases.empty() ? "" : ", ") + std::string(alias);
    }
  }
  throw InputError(
      fmt::format("{}: unknown dtype '{}'; valid: {}, and for the KV cache {} (aliases {})", what,
                  text, dtype_names(DtypeKind::element), dtype_names(DtypeKind::integer), aliases));
}

void encode_value(DType t, float value, std::byte* dst) {
  switch (t) {
    case DType::f32: {
      const std::uint32_t bits = floatfmt::float_as_bits(value);
      std::memcpy(dst, &bits, 4);
      return;
    }
    case DType::f16: {
      const std::uint16_t bits = floatfmt::float_to_f16(value);
      std::memcpy(dst, &bits, 2);
      return;
    }
    case DType::bf16: {
      const std::uint16_t bits = floatfmt::float_to_bf16(value);
      std::memcpy(dst, &bits, 2);
      return;
    }
    case DType::fp8_e4m3: *dst = static_cast<std::byte>(floatfmt::float_to_e4m3(value)); return;
    case DType::fp8_e5m2: *dst = static_cast<std::byte>(floatfmt::float_to_e5m2(value)); return;
    default: break;  // an integer format: codes need their scales (src/quant/kv_quant.h)
  }
  throw InputError(fmt::format("encode_value: {} is not an element dtype (valid: {})",
                               dtype_name(t), dtype_names(DtypeKind::element)));
}

float decode_value(DType t, const std::byte* src) {
  switch (t) {
    case DType::f32: {
      std::uint32_t bits;
      std::memcpy(&bits, src, 4);
      return floatfmt::bits_as_float(bits);
    }
    case DType::f16: {
      std::uint16_t bits;
      std::memcpy(&bits, src, 2);
      return floatfmt::f16_to_float(bits);
    }
    case DType::bf16: {
      std::uint16_t bits;
      std::memcpy(&bits, src, 2);
      return floatfmt::bf16_to_float(bits);
    }
    case DType::fp8_e4m3: return floatfmt::e4m3_to_float(static_cast<std::uint8_t>(*src));
    case DType::fp8_e5m2: return floatfmt::e5m2_to_float(static_cast<std::uint8_t>(*src));
    default: break;  // an integer format: codes need their scales (src/quant/kv_quant.h)
  }
  throw InputError(fmt::format("decode_value: {} is not an element dtype (valid: {})",
                               dtype_name(t), dtype_names(DtypeKind::element)));
}

std::vector<float> decode_to_float(std::span<const std::byte> data, DType t) {
  const std::size_t size = dtype_size(t);
  if (size == 0 || data.size() % size != 0) {
    throw InputError(fmt::format("decode_to_float: {} bytes is not a whole number of {} elements",
                                 data.size(), dtype_name(t)));
  }
  std::vector<float> out(data.size() / size);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode_value(t, data.data() + i * size);
  return out;
}

float fp8_max(DType t) {
  switch (t) {
    case DType::fp8_e4m3: return floatfmt::kE4m3Max;
    case DType::fp8_e5m2: return floatfmt::kE5m2Max;
    default:
      throw InputError(
          fmt::format("fp8_max: {} is not an fp8 dtype; valid: fp8_e4m3, fp8_e5m2", dtype_name(t)));
  }
}

}  // namespace decodebench
