// Checks a `--dump` directory the way a numpy user would use it: shapes, meta keys, block-table
// padding, and the attention output recomputed in double from the dumped arrays alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "common/npy.h"

namespace decodebench::testing {

using nlohmann::json;

// Recomputes the attention output from the dumped arrays alone, as a numpy user would, in double.
// An MLA dump (meta "attention": "mla") has no v_cache: pass k as v; V is each K row's first
// kv_lora_rank values and the output [batch][Hq][kv_lora_rank].
inline std::vector<double> recompute(const NpyArray& q, const NpyArray& k, const NpyArray& v,
                                     const NpyArray& tables, const NpyArray& lens,
                                     const json& meta) {
  const std::vector<float> qv = q.as_float(), kv = k.as_float(), vv = v.as_float();
  const bool mla = meta.value("attention", "") == "mla";
  const std::vector<std::int32_t> tv = tables.as_int32(), lv = lens.as_int32();
  const int batch = static_cast<int>(q.shape[0]), hq = meta.at("num_q_heads"),
            hkv = meta.at("num_kv_heads");
  const int d = meta.at("head_dim"), p = meta.at("block_size");
  const int dv = mla ? meta.at("kv_lora_rank").get<int>() : d;
  const int max_blocks = static_cast<int>(tables.shape[1]);
  const double scale = meta.at("softmax_scale").get<double>() * meta.at("k_scale").get<double>();
  const double v_scale = meta.at("v_scale");
  std::vector<double> out(static_cast<std::size_t>(batch) * hq * dv);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < hq; ++h) {
      const int kvh = h / (hq / hkv);
      std::vector<double> s(lv[b]);
      double mx = -1e300;
      for (int t = 0; t < lv[b]; ++t) {
        const int block = tv[b * max_blocks + t / p];
        const std::size_t row = ((static_cast<std::size_t>(block) * hkv + kvh) * p + t % p) * d;
        double dot = 0;
        for (int i = 0; i < d; ++i)
          dot += qv[(b * hq + h) * d + i] * static_cast<double>(kv[row + i]);
        s[t] = dot * scale;
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int t = 0; t < lv[b]; ++t) {
        const int block = tv[b * max_blocks + t / p];
        const std::size_t row = ((static_cast<std::size_t>(block) * hkv + kvh) * p + t % p) * d;
        for (int i = 0; i < dv; ++i)
          out[(b * hq + h) * dv + i] += s[t] / sum * v_scale * vv[row + i];
      }
    }
  }
  return out;
}

inline void expect_valid_dump(const std::filesystem::path& dir, const std::string& backend,
                              int batch, double out_tolerance) {
  const json meta = read_json(dir / "meta.json");
  for (const char* key : {"kernel", "backend", "model", "num_q_heads", "num_kv_heads", "head_dim",
                          "block_size", "kv_dtype", "q_dtype", "softmax_scale", "k_scale",
                          "v_scale", "hit_rate", "hit_rate_actual", "prefix_groups", "seed"}) {
    EXPECT_TRUE(meta.contains(key)) << key;
  }
  EXPECT_EQ(meta.at("backend"), backend);
  const std::int64_t hq = meta.at("num_q_heads"), hkv = meta.at("num_kv_heads"),
                     d = meta.at("head_dim");
  const std::int64_t p = meta.at("block_size");
  const bool mla = meta.value("attention", "") == "mla";
  // MLA: no v_cache.npy (V lives in the K rows), and the output is kv_lora_rank wide.
  EXPECT_EQ(std::filesystem::exists(dir / "v_cache.npy"), !mla);
  const std::int64_t dv = mla ? meta.at("kv_lora_rank").get<std::int64_t>() : d;
  const NpyArray q = read_npy(dir / "q.npy"), k = read_npy(dir / "k_cache.npy"),
                 v = mla ? k : read_npy(dir / "v_cache.npy"),
                 tables = read_npy(dir / "block_tables.npy"),
                 lens = read_npy(dir / "context_lens.npy"), out = read_npy(dir / "out.npy"),
                 ref = read_npy(dir / "ref.npy");
  EXPECT_EQ(q.descr, "<f4");
  EXPECT_EQ(tables.descr, "<i4");
  EXPECT_EQ(q.shape, (std::vector<std::int64_t>{batch, hq, d}));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{batch, hq, dv}));
  EXPECT_EQ(ref.shape, out.shape);
  ASSERT_EQ(k.shape.size(), 4u);
  EXPECT_EQ(k.shape[1], hkv);
  EXPECT_EQ(k.shape[2], p);
  EXPECT_EQ(k.shape[3], d);
  EXPECT_EQ(v.shape, k.shape);
  ASSERT_EQ(tables.shape.size(), 2u);
  EXPECT_EQ(tables.shape[0], batch);
  EXPECT_EQ(lens.shape, (std::vector<std::int64_t>{batch}));
  // Block table: ceil(L / P) valid physical ids, then -1.
  const std::vector<std::int32_t> t = tables.as_int32(), l = lens.as_int32();
  for (int b = 0; b < batch; ++b) {
    for (std::int64_t j = 0; j < tables.shape[1]; ++j) {
      const std::int32_t id = t[b * tables.shape[1] + j];
      if (j < (l[b] + p - 1) / p) {
        EXPECT_GE(id, 0);
        EXPECT_LT(id, k.shape[0]);
      } else {
        EXPECT_EQ(id, -1) << "b " << b << " entry " << j;
      }
    }
  }
  const std::vector<double> mine = recompute(q, k, v, tables, lens, meta);
  const std::vector<float> r = ref.as_float(), o = out.as_float();
  ASSERT_EQ(mine.size(), r.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    ASSERT_NEAR(r[i], mine[i], 1e-5 + 1e-5 * std::abs(mine[i])) << "ref.npy[" << i << "]";
    ASSERT_NEAR(o[i], r[i], out_tolerance * (1 + std::abs(r[i]))) << "out.npy[" << i << "]";
  }
}

}  // namespace decodebench::testing
