// Host-side helpers for the element types of kernels.h: names, parsing, and scalar
// encode/decode through the bit-exact conversions of kernels/device/float_formats.h.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels.h"  // DType, dtype_size, is_fp8

namespace decodebench {

// The table's name of `t` (kernels/kv_formats.h: "f32", "f16", "int8", ...): the spelling used
// in flags, configs and reports.
std::string_view dtype_name(DType t);
// The element dtypes (every DType but the integer KV formats), in enum order: what
// encode_value and decode_value take. The integer formats: quant::all_formats().
std::span<const DType> all_dtypes();
// The names of the table's formats (kernels/kv_formats.h), in enum order, ", "-separated: every
// one, the element dtypes ("f32, f16, bf16, fp8_e4m3, fp8_e5m2") or the integer KV formats.
enum class DtypeKind { all, element, integer };
std::string dtype_names(DtypeKind kind);
// Accepts the names above and the table's aliases (fp32/float32, fp16/float16/half, bfloat16,
// e4m3, e5m2; case-insensitive). Throws InputError naming `what` (e.g. "--kv-dtype") and the valid
// names otherwise.
DType parse_dtype(std::string_view text, std::string_view what = "dtype");

// Stores `value` rounded to `t` (round to nearest even; fp8 saturating) at dst, little-endian,
// dtype_size(t) bytes. `t` is an element dtype: an integer KV format is an InputError (its codes
// need their scales, src/quant/kv_quant.h), here and in decode_value.
void encode_value(DType t, float value, std::byte* dst);
// The float the dtype_size(t) bytes at src stand for (exact: every narrow value is a float).
float decode_value(DType t, const std::byte* src);
// Decodes a whole buffer of `t` elements; throws InputError if the size is not a multiple of
// dtype_size(t).
std::vector<float> decode_to_float(std::span<const std::byte> data, DType t);
// Largest finite value of an fp8 format (448 for e4m3, 57344 for e5m2); throws InputError for
// any other dtype.
float fp8_max(DType t);

}  // namespace decodebench
