// The KV formats' table (kernels/kv_formats.h) against every place that must know each format:
// name parsing, the kernel registry, the CPU backend, the byte model (host and CUDA footprint),
// the quantizer, the build's export (kv_formats.json) and the CMake lists read from it. A row
// that one of them misses, or an export that lacks a row, fails here naming the format.
// (`sweep --dump` and `quantize` of every format: tests/cli/cli_quant_test.cpp.)
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "kernels.h"
#include "quant/kv_quant.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

using nlohmann::json;

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<std::string> table_names(LadderUse use, bool any_use) {
  std::vector<std::string> out;
  for (const KvFormatInfo& f : kKvFormats) {
    if (any_use || f.ladder == use) out.emplace_back(f.name);
  }
  return out;
}

// Where an export differs from the table: "" when every row is there with the table's facts
// (and nothing else is), else the first difference, naming the format.
std::string export_mismatch(const json& exported) {
  if (exported.value("kind", "") != "decodebench-kv-formats")
    return "kind is not decodebench-kv-formats";
  const json& rows = exported.at("formats");
  for (const KvFormatInfo& f : kKvFormats) {
    const auto row = std::find_if(rows.begin(), rows.end(),
                                  [&](const json& r) { return r.at("name") == f.name; });
    const std::string name = f.name;
    if (row == rows.end()) return name + ": missing from the export";
    if (row->at("ordinal") != static_cast<int>(f.dtype)) return name + ": ordinal";
    if (row->at("float") != f.is_float) return name + ": float";
    if (row->at("code_bits") != f.code_bits) return name + ": code_bits";
    if (row->at("signed_codes") != f.signed_codes) return name + ": signed_codes";
    if (row->at("ladder") != ladder_use_name(f.ladder)) return name + ": ladder";
    std::vector<std::string> aliases;
    for (const std::string& a : split(f.aliases)) aliases.push_back(a);
    if (row->at("aliases") != aliases) return name + ": aliases";
    for (const bool key : {true, false}) {
      const json& t = row->at(key ? "k" : "v");
      const KvTensorLayout& l = kv_layout(f.dtype, key);
      const std::string which = name + (key ? " k" : " v");
      if (t.at("scale_axis") != kv_scale_axis_name(l.axis)) return which + ": scale_axis";
      if (t.at("zeros") != l.zeros) return which + ": zeros";
      if (t.at("group_channels") != l.group_channels) return which + ": group_channels";
      const json& m = t.at("bytes_per_token_head");
      for (const int d : {32, 64, 128, 256}) {
        for (const int p : {1, 8, 16, 64}) {
          const double per_block = m.at("per_d_over_block").get<double>() > 0
                                       ? m.at("per_d_over_block").get<double>() * d / p
                                       : 0.0;
          const double bytes =
              m.at("per_d").get<double>() * d + per_block + m.at("per_row").get<double>();
          if (bytes != kv_bytes_per_token_head(f.dtype, key, d, p))
            return which + ": bytes_per_token_head at d " + std::to_string(d);
        }
      }
    }
  }
  if (rows.size() != static_cast<std::size_t>(kNumKvFormats)) return "rows not in the table";
  return "";
}

json read_export() {
  std::ifstream in(DECODEBENCH_TEST_KV_FORMATS_JSON);
  EXPECT_TRUE(in) << DECODEBENCH_TEST_KV_FORMATS_JSON;
  return json::parse(in);
}

TEST(KvFormats, TableIsInEnumOrderAndConsistent) {
  for (const KvFormatInfo& f : kKvFormats) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(&kv_format(f.dtype), &f);
    EXPECT_GT(f.code_bits, 0);
    EXPECT_EQ(kv_row_bytes(f.dtype, 128) * 8, static_cast<std::size_t>(128 * f.code_bits));
    // A float format stands alone or has one scale per tensor; an integer one has row scales.
    for (const bool key : {true, false}) {
      const KvTensorLayout& l = kv_layout(f.dtype, key);
      EXPECT_EQ(f.is_float, l.axis == KvScaleAxis::none || l.axis == KvScaleAxis::tensor);
      EXPECT_EQ(l.group_channels > 0, l.axis == KvScaleAxis::token_head_group);
      if (l.group_channels > 0) {
        EXPECT_EQ(128 % l.group_channels, 0);
      }
    }
    EXPECT_EQ(is_int_kv(f.dtype), !f.is_float);
    EXPECT_EQ(is_fp8(f.dtype), f.is_float && f.code_bits == 8);
    EXPECT_EQ(is_int4_kv(f.dtype), !f.is_float && f.code_bits == 4);
    // Only integer formats are read by the int_kv rungs alone; host-only formats are float.
    if (f.ladder == LadderUse::int_kv) {
      EXPECT_FALSE(f.is_float);
    }
  }
}

TEST(KvFormats, EveryFormatParsesAndPrintsByItsNames) {
  for (const KvFormatInfo& f : kKvFormats) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(dtype_name(f.dtype), f.name);
    EXPECT_EQ(parse_dtype(f.name), f.dtype);
    EXPECT_EQ(quant::parse_format(f.name), f.dtype);
    EXPECT_EQ(quant::format_name(f.dtype), f.name);
    for (const std::string& alias : split(f.aliases)) EXPECT_EQ(parse_dtype(alias), f.dtype);
    const std::string all = dtype_names(DtypeKind::all);
    EXPECT_NE(all.find(f.name), std::string::npos);
    EXPECT_NE(std::find(quant::all_formats().begin(), quant::all_formats().end(), f.dtype),
              quant::all_formats().end());
    const auto elements = all_dtypes();
    EXPECT_EQ(std::find(elements.begin(), elements.end(), f.dtype) != elements.end(), f.is_float);
  }
}

TEST(KvFormats, TheBackendsAndTheRegistryKnowEveryFormat) {
  // The CPU backend reads every format (its instances: src/backends/cpu/CMakeLists.txt).
  const std::vector<DType>& cpu = cpu::decode_info().kv_dtypes;
  for (const KvFormatInfo& f : kKvFormats) {
    SCOPED_TRACE(f.name);
    EXPECT_NE(std::find(cpu.begin(), cpu.end(), f.dtype), cpu.end()) << "cpu backend";
  }
  // Each rung is built for formats of its kind only, and names a format it refuses.
  for (const kernels::KernelInfo& rung : kernels::kernel_ladder()) {
    SCOPED_TRACE(rung.name);
    for (const DType t : rung.kv_dtypes) EXPECT_NE(kv_format(t).ladder, LadderUse::none);
    if (rung.mla_only) continue;  // per-head shapes below; its formats: mla_test.cpp
    for (const KvFormatInfo& f : kKvFormats) {
      kernels::PagedDecodeParams p;
      p.head_dim = rung.head_dims.empty() ? 128 : rung.head_dims.front();
      p.kv_dtype = f.dtype;
      p.block_size = 16;
      p.num_q_heads = p.num_kv_heads = 1;
      p.batch = 1;
      const std::string reason = kernels::unsupported_reason(rung, p);
      const bool built =
          std::find(rung.kv_dtypes.begin(), rung.kv_dtypes.end(), f.dtype) != rung.kv_dtypes.end();
      if (!built) {
        EXPECT_NE(reason.find(std::string("KV dtype ") + f.name), std::string::npos) << reason;
      }
    }
  }
}

TEST(KvFormats, ByteModelAndQuantizerAgreeWithTheTable) {
  const quant::PoolShape shape{3, 2, 16, 64};
  std::vector<float> values(static_cast<std::size_t>(shape.elements()));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(0.37f * static_cast<float>(i)) * 3.f;
  for (const KvFormatInfo& f : kKvFormats) {
    SCOPED_TRACE(f.name);
    const double k = kv_bytes_per_token_head(f.dtype, true, 64, 16);
    const double v = kv_bytes_per_token_head(f.dtype, false, 64, 16);
    EXPECT_GT(k, 0);
    EXPECT_EQ(quant::bytes_per_token_head(f.dtype, quant::KvTensor::k, 64, 16), k);
    EXPECT_EQ(quant::bytes_per_token_head(f.dtype, quant::KvTensor::v, 64, 16), v);
    EXPECT_EQ(kv_bytes_per_token_head(f.dtype, 64, 16), k + v);  // the workload's byte model
    EXPECT_EQ(quant::has_zeros(f.dtype), f.k.zeros || f.v.zeros);
    for (const quant::KvTensor t : {quant::KvTensor::k, quant::KvTensor::v}) {
      const bool key = t == quant::KvTensor::k;
      EXPECT_EQ(quant::scale_axis(f.dtype, t), kv_layout(f.dtype, key).axis);
      // The quantizer stores exactly the bytes the table counts (fp8's per-tensor scale apart).
      const quant::QuantizedPool q = quant::quantize(f.dtype, t, shape, values);
      const std::int64_t rows = shape.tokens() * shape.kv_heads;
      const double tensor_scale =
          kv_layout(f.dtype, key).axis == KvScaleAxis::tensor ? kKvTensorScaleBytes : 0;
      EXPECT_EQ(
          static_cast<double>(q.stored_bytes()),
          kv_bytes_per_token_head(f.dtype, key, 64, 16) * static_cast<double>(rows) + tensor_scale);
      EXPECT_EQ(q.codes.size(), static_cast<std::size_t>(rows) * kv_row_bytes(f.dtype, 64));
      EXPECT_EQ(q.scales.size(), static_cast<std::size_t>(shape.num_blocks * shape.kv_heads) *
                                     kv_scales_per_block_head(f.dtype, key, 64, 16));
      const std::vector<float> back = quant::dequantize(q);
      ASSERT_EQ(back.size(), values.size());
      double err = 0;
      for (std::size_t i = 0; i < values.size(); ++i)
        err = std::max(err, static_cast<double>(std::fabs(back[i] - values[i])));
      EXPECT_LT(err, 1.0) << "the round trip is not near the values";
    }
  }
}

TEST(KvFormats, TheBuildExportsEveryFormat) {
  const json exported = read_export();
  EXPECT_EQ(export_mismatch(exported), "");
  // The CMake lists read from the export (cmake/kv_formats.cmake): every format, the ladder's
  // float formats and the int_kv rungs' integer ones (the defaults of DECODEBENCH_KV_DTYPES and
  // DECODEBENCH_INT_KV_DTYPES), and this build's lists within them.
  EXPECT_EQ(split(DECODEBENCH_TEST_CMAKE_KV_FORMATS), table_names(LadderUse::none, true));
  EXPECT_EQ(split(DECODEBENCH_TEST_CMAKE_KV_FORMATS_LADDER), table_names(LadderUse::all, false));
  EXPECT_EQ(split(DECODEBENCH_TEST_CMAKE_KV_FORMATS_INT_KV), table_names(LadderUse::int_kv, false));
  for (const std::string& name : split(DECODEBENCH_TEST_CMAKE_KV_DTYPES))
    EXPECT_EQ(kv_format(parse_dtype(name)).ladder, LadderUse::all) << name;
  for (const std::string& name : split(DECODEBENCH_TEST_CMAKE_INT_KV_DTYPES))
    EXPECT_EQ(kv_format(parse_dtype(name)).ladder, LadderUse::int_kv) << name;
}

TEST(KvFormats, AnExportMissingARowOrAFactFails) {
  // Planted faults: the check above must see them.
  const json good = read_export();
  for (std::size_t i = 0; i < good.at("formats").size(); ++i) {
    json missing = good;
    missing.at("formats").erase(i);
    EXPECT_NE(export_mismatch(missing), "") << "row " << i << " removed";
  }
  json wrong_bits = good;
  wrong_bits.at("formats").back().at("code_bits") = 3;
  EXPECT_NE(export_mismatch(wrong_bits).find("code_bits"), std::string::npos);
  json wrong_bytes = good;
  wrong_bytes.at("formats").back().at("v").at("bytes_per_token_head").at("per_row") = 1;
  EXPECT_NE(export_mismatch(wrong_bytes).find("bytes_per_token_head"), std::string::npos);
}

}  // namespace
}  // namespace decodebench
