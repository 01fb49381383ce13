// The KV-cache formats and their quantizers: the one definition of how each format stores a
// paged pool [num_blocks][Hkv][P][d] (codes, scales, zeros) and what it reads back as. What
// `decodebench quantize` writes, what `quant-error` measures and what the byte model counts.
// The facts of each format (name, code bits, scale axes, group sizes, bytes) are the table of
// kernels/kv_formats.h; this is their arithmetic. Definitions (docs/design.md "KV formats"),
// every scale and zero stored as f16:
//   f32, f16, bf16       the values rounded to the dtype (round to nearest even)
//   fp8_e4m3, fp8_e5m2   one f32 scale per tensor, s = max|x| / fp8 max; codes fp8(x / s)
//   int8                 per (token, KV head), symmetric: s = max|x| / 127,
//                        codes round(x / s) in [-127, 127]
//   int4                 asymmetric, s = (max - min) / 15, z = min, codes round((x - z) / s) in
//                        [0, 15], two a byte (even channel in the low nibble); keys per (block,
//                        KV head, channel) over the block's P tokens, values per (token, KV
//                        head, group of 32 channels) (KIVI's layout)
//   int4_token           int4's arithmetic, keys and values both per (token, KV head, group of
//                        32 channels): the naive layout, kept to show why keys want channels
// The codes are computed against the stored (f16-rounded) scale and zero, so dequantizing is
// exactly code * s, or fma(code, s, z), and a kernel reading the codes reads these values. Rounding
// is to nearest, ties to even (cvt.rni on the GPU).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels.h"  // DType

namespace decodebench::quant {

// The formats are the KV dtypes of kernels.h: the float ones (an element stands alone) and the
// integer ones (codes plus scale and zero arrays), one enum so a kernel and the quantizer name a
// format the same way.
using KvFormat = DType;
enum class KvTensor : std::uint8_t { k, v };

// dtype_name: "int8", "int4", "int4_token", or the float dtype's name.
std::string_view format_name(KvFormat f);
// Every row of kernels/kv_formats.h, in enum order.
std::span<const KvFormat> all_formats();
// Accepts the names above (the float formats with parse_dtype's aliases); throws InputError
// naming `what` and the valid names otherwise.
KvFormat parse_format(std::string_view text, std::string_view what = "--kv-dtype");
// "k" or "v" (also "key", "value"); InputError naming `what` otherwise.
KvTensor parse_tensor(std::string_view text, std::string_view what = "--tensor");
std::string_view tensor_name(KvTensor t);
// The float formats: an element stands alone (no scale arrays); !is_int_kv(f).
bool is_float_format(KvFormat f);
DType float_format_dtype(KvFormat f);  // std::logic_error for an integer format

struct PoolShape {
  std::int64_t num_blocks = 0;
  std::int64_t kv_heads = 0;
  std::int64_t block_size = 0;  // P tokens per block
  std::int64_t head_dim = 0;    // d channels
  std::int64_t elements() const { return num_blocks * kv_heads * block_size * head_dim; }
  std::int64_t tokens() const { return num_blocks * block_size; }
};

// Where a format keeps its scales (and zeros) for one tensor: the table's axis
// (kernels/kv_formats.h: none, tensor, token_head, token_head_group, block_head_channel).
using ScaleAxis = KvScaleAxis;
ScaleAxis scale_axis(KvFormat f, KvTensor t);
bool has_zeros(KvFormat f);  // an asymmetric format (the int4 ones): zeros beside its scales

// One tensor of a pool as the format stores it.
struct QuantizedPool {
  KvFormat format = KvFormat::f32;
  KvTensor tensor = KvTensor::k;
  PoolShape shape;
  // Float formats: the dtype's bytes, dtype_size each. int8: one signed byte per element.
  // int4: [num_blocks][Hkv][P][d / 2] bytes, channel 2i in the low nibble, 2i + 1 in the high.
  std::vector<std::uint8_t> codes;
  std::vector<std::uint16_t> scales;  // f16 bits, laid out by scale_axis (empty: none, tensor)
  std::vector<std::uint16_t> zeros;   // f16 bits, the scales' layout (int4 formats only)
  float tensor_scale = 1.f;           // fp8's per-tensor scale; 1 otherwise
  // The scales' (and zeros') array shape, for .npy files; empty when there are none.
  std::vector<std::int64_t> scale_shape() const;
  // Every byte the cache holds for this tensor: codes, scales, zeros (fp8's 4-byte scale too).
  std::int64_t stored_bytes() const;
};

// Quantizes `values` (float, [num_blocks][Hkv][P][d]) into `format`. Throws InputError when the
// shape does not hold the values, head_dim is odd or not a multiple of 32 for an int4 format, a
// value is not finite, or a scale does not fit f16.
QuantizedPool quantize(KvFormat format, KvTensor tensor, const PoolShape& shape,
                       std::span<const float> values);
// The values a kernel reading `q` attends over, [num_blocks][Hkv][P][d].
std::vector<float> dequantize(const QuantizedPool& q);

// Bytes the cache holds per token and KV head for one tensor (codes, scales and zeros; a
// per-block scale counted as 1/P of it per token; fp8's per-tensor scale as 0): the byte
// model's unit for the formats.
double bytes_per_token_head(KvFormat f, KvTensor t, int head_dim, int block_size);

}  // namespace decodebench::quant
