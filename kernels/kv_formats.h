// decodebench KV formats: the one table of what each format of the KV cache is.
//
// Every fact about a format that more than one place needs lives here, once: its name and
// aliases, the bits of one stored code, whether an element stands alone (a float format) or is
// an integer code read through scales (and zeros), where the scales of K and of V sit, their
// group size, and from those the bytes per token and KV head. Plain C++17 without the standard
// library's containers, so the host (src/), the emulator and nvcc's device code (through
// kernels.h) all read the same table; the build exports it to CMake and the scripts
// (kernels/kv_formats_export.cpp writes <build>/kv_formats.json at configure time).
//
// The exact arithmetic of each format (how a code is computed from the values, what it reads
// back as) is src/quant/kv_quant.cpp's; docs/design.md "KV formats" defines them in words and
// "Adding a KV format" lists what a new one touches.
#pragma once

#include <cstddef>
#include <cstdint>

namespace decodebench {

// Element types of Q/out and of the KV cache, in the order of kKvFormats below (one entry each,
// at the index of its value). f32 KV exists for tests (the CPU reference and the CPU backend);
// the GPU kernels take the formats marked LadderUse::all, the integer ones (codes with f16
// scales and zeros beside them, src/quant/kv_quant.h) the rungs with "int_kv" in ladder.json.
enum class DType : std::uint8_t { f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, int4_token };

// Channels per scale group of the per-group int4 layouts (keys of int4_token, values of both).
inline constexpr int kInt4GroupChannels = 32;

// Where a format keeps its scales (and zeros) for one tensor of a pool [num_blocks][Hkv][P][d].
enum class KvScaleAxis : std::uint8_t {
  none,                // the values themselves (f32, f16, bf16)
  tensor,              // one f32 for the pool (fp8)
  token_head,          // [num_blocks][Hkv][P]
  token_head_group,    // [num_blocks][Hkv][P][d / group_channels]
  block_head_channel,  // [num_blocks][Hkv][d], over the block's P tokens
};
// Bytes of one stored scale or zero (f16) of the axes token_head and finer.
inline constexpr int kKvScaleBytes = 2;
// Bytes of a per-tensor scale (f32), held once per pool: 0 per token in the byte model.
inline constexpr int kKvTensorScaleBytes = 4;

// Which GPU kernels the build instantiates for a format: every rung of the ladder (the CMake
// list DECODEBENCH_KV_DTYPES), the rungs with "int_kv" in ladder.json (DECODEBENCH_INT_KV_DTYPES),
// or none (host only).
enum class LadderUse : std::uint8_t { none, all, int_kv };

// How one tensor (K or V) of a format is stored beside its codes.
struct KvTensorLayout {
  KvScaleAxis axis;
  bool zeros;          // an f16 zero beside each scale: fma(code, s, z) (asymmetric)
  int group_channels;  // channels per scale: token_head_group only, else 0
};

struct KvFormatInfo {
  DType dtype;
  const char* name;     // the spelling of flags, configs and reports
  const char* aliases;  // other accepted spellings, comma-separated ("" for none)
  bool is_float;        // an element stands alone (encode_value / decode_value); else codes
  int code_bits;        // bits of one stored element (two int4 codes a byte)
  bool signed_codes;    // integer codes: signed (int8's [-127, 127]) or unsigned ([0, 15])
  LadderUse ladder;
  KvTensorLayout k, v;
};

// The table. A new format: its DType value above and one row here (at that value's index); then
// docs/design.md "Adding a KV format".
// clang-format off
inline constexpr KvFormatInfo kKvFormats[] = {
    // dtype, name, aliases, float, bits, signed, ladder, K {axis, zeros, group}, V {...}
    {DType::f32, "f32", "fp32,float32", true, 32, true, LadderUse::none,
     {KvScaleAxis::none, false, 0}, {KvScaleAxis::none, false, 0}},
    {DType::f16, "f16", "fp16,float16,half", true, 16, true, LadderUse::all,
     {KvScaleAxis::none, false, 0}, {KvScaleAxis::none, false, 0}},
    {DType::bf16, "bf16", "bfloat16", true, 16, true, LadderUse::all,
     {KvScaleAxis::none, false, 0}, {KvScaleAxis::none, false, 0}},
    {DType::fp8_e4m3, "fp8_e4m3", "e4m3", true, 8, true, LadderUse::all,
     {KvScaleAxis::tensor, false, 0}, {KvScaleAxis::tensor, false, 0}},
    {DType::fp8_e5m2, "fp8_e5m2", "e5m2", true, 8, true, LadderUse::all,
     {KvScaleAxis::tensor, false, 0}, {KvScaleAxis::tensor, false, 0}},
    {DType::int8, "int8", "", false, 8, true, LadderUse::int_kv,
     {KvScaleAxis::token_head, false, 0}, {KvScaleAxis::token_head, false, 0}},
    {DType::int4, "int4", "", false, 4, false, LadderUse::int_kv,
     {KvScaleAxis::block_head_channel, true, 0},
     {KvScaleAxis::token_head_group, true, kInt4GroupChannels}},
    {DType::int4_token, "int4_token", "", false, 4, false, LadderUse::int_kv,
     {KvScaleAxis::token_head_group, true, kInt4GroupChannels},
     {KvScaleAxis::token_head_group, true, kInt4GroupChannels}},
};
// clang-format on
inline constexpr int kNumKvFormats = static_cast<int>(sizeof(kKvFormats) / sizeof(kKvFormats[0]));

// Every DType's row is at the index of its value, so a lookup is an index.
constexpr bool kv_formats_in_enum_order() {
  for (int i = 0; i < kNumKvFormats; ++i) {
    if (static_cast<int>(kKvFormats[i].dtype) != i) return false;
  }
  return true;
}
static_assert(kv_formats_in_enum_order(), "kKvFormats: one row per DType, in enum order");

constexpr const KvFormatInfo& kv_format(DType t) { return kKvFormats[static_cast<int>(t)]; }
constexpr const KvTensorLayout& kv_layout(DType t, bool key) {
  return key ? kv_format(t).k : kv_format(t).v;
}

// Bytes of one element. The int4 formats pack two codes a byte: 0 here, and every KV byte count
// goes through kv_row_bytes (codes) and the byte model (codes, scales and zeros).
constexpr std::size_t dtype_size(DType t) {
  return static_cast<std::size_t>(kv_format(t).code_bits) / 8;
}
constexpr bool is_fp8(DType t) { return kv_format(t).is_float && kv_format(t).code_bits == 8; }
// The integer KV formats: codes plus the scale (and zero) arrays of PagedDecodeParams.
constexpr bool is_int_kv(DType t) { return !kv_format(t).is_float; }
constexpr bool is_int4_kv(DType t) { return is_int_kv(t) && kv_format(t).code_bits == 4; }
// Bytes of the codes of one (token, KV head) row of `head_dim` channels.
constexpr std::size_t kv_row_bytes(DType t, int head_dim) {
  return static_cast<std::size_t>(head_dim) * static_cast<std::size_t>(kv_format(t).code_bits) / 8;
}

// The byte model of one tensor: bytes the cache holds per token and KV head, as
//   per_d * d + per_d_over_block * d / P + per_row
// (codes; scales and zeros: per row, per channel group, or per block channel counted as 1/P of
// it per token; a per-tensor scale counted as 0). What the byte model, the CUDA footprint and
// the export share.
struct KvBytesModel {
  double per_d;             // bytes per channel of a row: the codes and per-group scales
  double per_d_over_block;  // bytes per channel of a block: per-channel scales
  double per_row;           // bytes per (token, KV head): per-row scales
};
constexpr KvBytesModel kv_bytes_model(DType t, bool key) {
  const KvTensorLayout& l = kv_layout(t, key);
  const double per_scale = kKvScaleBytes * (l.zeros ? 2.0 : 1.0);
  KvBytesModel m{kv_format(t).code_bits / 8.0, 0.0, 0.0};
  switch (l.axis) {
    case KvScaleAxis::none:
    case KvScaleAxis::tensor: break;
    case KvScaleAxis::token_head: m.per_row = per_scale; break;
    case KvScaleAxis::token_head_group: m.per_d += per_scale / l.group_channels; break;
    case KvScaleAxis::block_head_channel: m.per_d_over_block = per_scale; break;
  }
  return m;
}
constexpr double kv_bytes_per_token_head(DType t, bool key, int head_dim, int block_size) {
  const KvBytesModel m = kv_bytes_model(t, key);
  const double d = head_dim;
  return m.per_d * d + (m.per_d_over_block > 0 ? m.per_d_over_block * d / block_size : 0.0) +
         m.per_row;
}
// Scales (and zeros) per (block, KV head) of a tensor: how many f16 values each array holds per
// block; 0 for the axes none and tensor.
constexpr std::size_t kv_scales_per_block_head(DType t, bool key, int head_dim, int block_size) {
  const KvTensorLayout& l = kv_layout(t, key);
  const std::size_t d = static_cast<std::size_t>(head_dim);
  const std::size_t p = static_cast<std::size_t>(block_size);
  switch (l.axis) {
    case KvScaleAxis::none:
    case KvScaleAxis::tensor: return 0;
    case KvScaleAxis::token_head: return p;
    case KvScaleAxis::token_head_group: return p * (d / static_cast<std::size_t>(l.group_channels));
    case KvScaleAxis::block_head_channel: return d;
  }
  return 0;
}

constexpr const char* kv_scale_axis_name(KvScaleAxis a) {
  switch (a) {
    case KvScaleAxis::none: return "none";
    case KvScaleAxis::tensor: return "tensor";
    case KvScaleAxis::token_head: return "token_head";
    case KvScaleAxis::token_head_group: return "token_head_group";
    case KvScaleAxis::block_head_channel: return "block_head_channel";
  }
  return "?";
}
constexpr const char* ladder_use_name(LadderUse u) {
  switch (u) {
    case LadderUse::none: return "none";
    case LadderUse::all: return "all";
    case LadderUse::int_kv: return "int_kv";
  }
  return "?";
}

}  // namespace decodebench
