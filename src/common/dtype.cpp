#include "common/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "common/errors.h"
#include "device/float_formats.h"

namespace decodebench {
namespace {

constexpr std::array<DType, 5> kAllDtypes = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3,
                                             DType::fp8_e5m2};

struct Alias {
  std::string_view name;
  DType type;
};
constexpr std::array<Alias, 16> kAliases = {{
    {"f32", DType::f32},
    {"fp32", DType::f32},
    {"float32", DType::f32},
    {"f16", DType::f16},
    {"fp16", DType::f16},
    {"float16", DType::f16},
    {"half", DType::f16},
    {"bf16", DType::bf16},
    {"bfloat16", DType::bf16},
    {"fp8_e4m3", DType::fp8_e4m3},
    {"e4m3", DType::fp8_e4m3},
    {"fp8_e5m2", DType::fp8_e5m2},
    {"e5m2", DType::fp8_e5m2},
    {"int8", DType::int8},
    {"int4", DType::int4},
    {"int4_token", DType::int4_token},
}};

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::int8: return "int8";
    case DType::int4: return "int4";
    case DType::int4_token: return "int4_token";
  }
  throw InputError(fmt::format("unknown DType value {}", static_cast<int>(t)));
}

std::span<const DType> all_dtypes() { return kAllDtypes; }

DType parse_dtype(std::string_view text, std::string_view what) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const Alias& a : kAliases) {
    if (a.name == lower) return a.type;
  }
  throw InputError(fmt::format(
      "{}: unknown dtype '{}'; valid: f32, f16, bf16, fp8_e4m3, fp8_e5m2, and for the KV cache "
      "int8, int4, int4_token (aliases fp32, fp16, float16, half, bfloat16, e4m3, e5m2)",
      what, text));
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
    case DType::int8:
    case DType::int4:
    case DType::int4_token: break;  // codes need their scales: src/quant/kv_quant.h
  }
  throw InputError(fmt::format("encode_value: {} is not an element dtype (valid: {})",
                               dtype_name(t), "f32, f16, bf16, fp8_e4m3, fp8_e5m2"));
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
    case DType::int8:
    case DType::int4:
    case DType::int4_token: break;  // codes need their scales: src/quant/kv_quant.h
  }
  throw InputError(fmt::format("decode_value: {} is not an element dtype (valid: {})",
                               dtype_name(t), "f32, f16, bf16, fp8_e4m3, fp8_e5m2"));
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
