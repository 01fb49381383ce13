#include "quant/quant_error.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "common/json_in.h"
#include "common/json_text.h"
#include "common/npy.h"

namespace decodebench::quant {
namespace {

namespace fs = std::filesystem;

NpyArray read_expected(std::string_view bytes, const std::string& file, std::string_view descr,
                       std::size_t rank) {
  NpyArray a = parse_npy(bytes, file);
  if (a.descr != descr || a.shape.size() != rank || a.fortran_order) {
    throw InputError(fmt::format("{}: expected a {}-D array of {}, C order (the --dump layout)",
                                 file, rank, descr == "<f4" ? "float32" : "int32"));
  }
  return a;
}

// A count meta.json gives for the arrays: an integer >= 1.
std::int64_t meta_count(const JsonIn& meta, const std::string& file, std::string_view key) {
  const std::int64_t v = meta.at(key).integer();
  if (v < 1) {
    throw InputError(
        fmt::format("{}: '{}' is {}; valid: an integer >= 1 (the arrays' {})", file, key, v, key));
  }
  return v;
}

// A factor meta.json gives: finite and > 0, since 0, a negative or a NaN scale makes every
// format look as good as the unquantized cache.
float meta_factor(const JsonIn& meta, const std::string& file, std::string_view key,
                  double fallback) {
  // No fallback (NaN): the key is required, and its absence is named as such.
  const double v = meta.has(key) || std::isnan(fallback) ? meta.at(key).number() : fallback;
  if (!(v > 0) || !std::isfinite(v) || !std::isfinite(static_cast<float>(v))) {
    throw InputError(fmt::format("{}: '{}' is {}; valid: a finite number > 0", file, key, v));
  }
  return static_cast<float>(v);
}

std::string dims(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Reads the whole file; an absent file is bad input naming it.
std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw InputError(
        fmt::format("{}: cannot open it (a dump holds meta.json, q.npy, k_cache.npy, v_cache.npy, "
                    "block_tables.npy and context_lens.npy)",
                    file.string()));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw RuntimeFailure(fmt::format("cannot read {}", file.string()));
  return text.str();
}

// The files a dump directory holds besides meta.json: one of them without meta.json is a dump
// that was not finished (meta.json is written last), not a folder of something else.
constexpr std::string_view kDumpArrays[] = {
    "q.npy",   "k_cache.npy", "v_cache.npy", "block_tables.npy", "context_lens.npy",
    "ref.npy", "out.npy"};

std::string dump_files_in(const fs::path& dir) {
  std::string found;
  for (std::string_view f : kDumpArrays) {
    if (fs::exists(dir / f)) found += (found.empty() ? "" : ", ") + std::string(f);
  }
  return found;
}

AttentionCase load_case(const fs::path& dir) {
  DumpFiles f;
  f.dir = dir.string();
  // "dump/" names the case "dump", as "dump" does.
  const fs::path normal = dir.lexically_normal();
  f.name = (normal.has_filename() ? normal : normal.parent_path()).filename().string();
  f.meta = read_bytes(dir / "meta.json");
  f.q = read_bytes(dir / "q.npy");
  f.k_cache = read_bytes(dir / "k_cache.npy");
  f.v_cache = read_bytes(dir / "v_cache.npy");
  f.block_tables = read_bytes(dir / "block_tables.npy");
  f.context_lens = read_bytes(dir / "context_lens.npy");
  return parse_case(f);
}

// Log of the softmax of scale * K . q over one context, and the output: double throughout.
struct StepRow {
  std::vector<double> log_p;
  std::vector<double> out;
};

void attend(const AttentionCase& c, const std::vector<float>& k, const std::vector<float>& v,
            std::int64_t b, std::int64_t h, StepRow& r) {
  const std::int64_t d = c.shape.head_dim, p = c.shape.block_size;
  const std::int64_t kv_head = h / (c.num_q_heads / c.shape.kv_heads);
  const std::int64_t len = c.context_lens[b];
  const float* q = c.q.data() + (b * c.num_q_heads + h) * d;
  auto row = [&](std::int64_t t) {
    const std::int64_t blk = c.block_tables[b * c.max_blocks_per_seq + t / p];
    return ((blk * c.shape.kv_heads + kv_head) * p + t % p) * d;
  };
  r.log_p.assign(len, 0.0);
  double top = -INFINITY;
  for (std::int64_t t = 0; t < len; ++t) {
    const float* kt = k.data() + row(t);
    double s = 0;
    for (std::int64_t i = 0; i < d; ++i) s += static_cast<double>(q[i]) * kt[i];
    r.log_p[t] = s * c.softmax_scale;
    top = std::max(top, r.log_p[t]);
  }
  double sum = 0;
  for (double s : r.log_p) sum += std::exp(s - top);
  const double log_sum = top + std::log(sum);
  r.out.assign(d, 0.0);
  for (std::int64_t t = 0; t < len; ++t) {
    r.log_p[t] -= log_sum;
    const double w = std::exp(r.log_p[t]);
    const float* vt = v.data() + row(t);
    for (std::int64_t i = 0; i < d; ++i) r.out[i] += w * vt[i];
  }
}

// Which (block, head-independent slot) rows some sequence reads: [num_blocks][P].
std::vector<char> rows_read(const AttentionCase& c) {
  const std::int64_t p = c.shape.block_size;
  std::vector<char> used(static_cast<std::size_t>(c.shape.num_blocks * p), 0);
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    for (std::int64_t t = 0; t < c.context_lens[b]; ++t) {
      used[c.block_tables[b * c.max_blocks_per_seq + t / p] * p + t % p] = 1;
    }
  }
  return used;
}

void add_tensor_error(const AttentionCase& c, const std::vector<char>& used,
                      const std::vector<float>& ref, const std::vector<float>& got, double& err2,
                      double& ref2) {
  const std::int64_t d = c.shape.head_dim, p = c.shape.block_size;
  for (std::int64_t blk = 0; blk < c.shape.num_blocks; ++blk) {
    for (std::int64_t h = 0; h < c.shape.kv_heads; ++h) {
      for (std::int64_t t = 0; t < p; ++t) {
        if (!used[blk * p + t]) continue;
        const std::int64_t at = ((blk * c.shape.kv_heads + h) * p + t) * d;
        for (std::int64_t i = 0; i < d; ++i) {
          const double e = static_cast<double>(got[at + i]) - ref[at + i];
          err2 += e * e;
          ref2 += static_cast<double>(ref[at + i]) * ref[at + i];
        }
      }
    }
  }
}

double ratio(double num, double den) { return den > 0 ? num / den : (num > 0 ? INFINITY : 0); }

}  // namespace

AttentionCase parse_case(const DumpFiles& f) {
  const auto file = [&](std::string_view name) { return (fs::path(f.dir) / name).string(); };
  const std::string meta_file = file("meta.json");
  const nlohmann::json j = parse_json_text(f.meta, meta_file);
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", meta_file));
  const JsonIn meta(j, meta_file);
  AttentionCase c;
  c.name = f.name;
  // The shape the arrays must have, from meta.json's required keys (report-schema.md "dump").
  const std::int64_t hq = meta_count(meta, meta_file, "num_q_heads");
  const std::int64_t hkv = meta_count(meta, meta_file, "num_kv_heads");
  const std::int64_t d = meta_count(meta, meta_file, "head_dim");
  const std::int64_t p = meta_count(meta, meta_file, "block_size");
  if (hq > INT32_MAX) {
    throw InputError(
        fmt::format("{}: 'num_q_heads' is {}; valid: 1..{}", meta_file, hq, INT32_MAX));
  }
  if (hq % hkv != 0) {
    throw InputError(fmt::format(
        "{}: {} query heads are not a multiple of {} KV heads (query head h reads KV head "
        "h / (num_q_heads / num_kv_heads))",
        meta_file, hq, hkv));
  }
  c.num_q_heads = static_cast<int>(hq);
  c.softmax_scale = meta_factor(meta, meta_file, "softmax_scale", /*fallback=*/NAN);
  const float k_scale = meta_factor(meta, meta_file, "k_scale", /*fallback=*/1);
  const float v_scale = meta_factor(meta, meta_file, "v_scale", /*fallback=*/1);

  const NpyArray q = read_expected(f.q, file("q.npy"), "<f4", 3);
  const NpyArray k = read_expected(f.k_cache, file("k_cache.npy"), "<f4", 4);
  const NpyArray v = read_expected(f.v_cache, file("v_cache.npy"), "<f4", 4);
  const NpyArray tables = read_expected(f.block_tables, file("block_tables.npy"), "<i4", 2);
  const NpyArray lens = read_expected(f.context_lens, file("context_lens.npy"), "<i4", 1);
  const auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}: {}", f.dir, what));
  };
  // Every array against meta.json and the others, before a value is read: nothing below may
  // divide by, or index with, a count the files do not agree on.
  if (k.shape[1] != hkv || k.shape[2] != p || k.shape[3] != d) {
    fail(fmt::format(
        "k_cache.npy is {} [num_blocks, kv_heads, block_size, head_dim], meta.json says {} KV "
        "heads, block_size {}, head_dim {}",
        dims(k.shape), hkv, p, d));
  }
  if (v.shape != k.shape) {
    fail(fmt::format("v_cache.npy is {}, k_cache.npy {}: they must be the same", dims(v.shape),
                     dims(k.shape)));
  }
  if (q.shape[1] != hq || q.shape[2] != d) {
    fail(
        fmt::format("q.npy is {} [batch, num_q_heads, head_dim], meta.json says {} query heads "
                    "of head_dim {}",
                    dims(q.shape), hq, d));
  }
  if (lens.shape[0] != q.shape[0] || tables.shape[0] != q.shape[0]) {
    fail(fmt::format(
        "q.npy {}, block_tables.npy {} and context_lens.npy {} disagree on the batch (the "
        "first dimension)",
        dims(q.shape), dims(tables.shape), dims(lens.shape)));
  }
  // The optional keys that describe the arrays too (sweep --dump writes them).
  for (const auto& [key, got, what] :
       {std::tuple{"batch", q.shape[0], "q.npy's first dimension"},
        std::tuple{"num_blocks", k.shape[0], "k_cache.npy's first dimension"},
        std::tuple{"max_blocks_per_seq", tables.shape[1], "block_tables.npy's columns"}}) {
    if (meta.has(key) && meta.at(key).integer() != got) {
      throw InputError(fmt::format("{}: '{}' is {}, but the arrays have {} ({})", meta_file, key,
                                   meta.at(key).integer(), got, what));
    }
  }
  // An empty input has no error to measure: reporting 0 would read as a perfect format.
  if (k.shape[0] < 1)
    fail("k_cache.npy holds no block (num_blocks 0): there is nothing to measure");
  if (q.shape[0] < 1) fail("q.npy holds no query (batch 0): there is nothing to measure");
  if (tables.shape[1] < 1) fail("block_tables.npy has no column: no sequence reads a block");
  c.shape = {k.shape[0], hkv, p, d};

  c.q = finite_floats(q, file("q.npy"));
  c.k = finite_floats(k, file("k_cache.npy"));
  c.v = finite_floats(v, file("v_cache.npy"));
  for (auto [values, scale, name] :
       {std::tuple{&c.k, k_scale, "k_cache.npy"}, std::tuple{&c.v, v_scale, "v_cache.npy"}}) {
    for (std::size_t i = 0; i < values->size(); ++i) {
      const float x = (*values)[i];
      (*values)[i] = x * scale;
      if (!std::isfinite((*values)[i])) {
        throw InputError(fmt::format("{}: {} is {}, times the scale {} in meta.json overflows",
                                     file(name), npy_index(k.shape, i), x, scale));
      }
    }
  }
  c.block_tables = tables.as_int32();
  c.max_blocks_per_seq = tables.shape[1];
  c.context_lens = lens.as_int32();
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int64_t len = c.context_lens[b];
    if (len < 1 || len > c.max_blocks_per_seq * p) {
      fail(
          fmt::format("context_lens[{}] = {} is outside 1..{} (block_tables.npy's {} columns of "
                      "{} tokens)",
                      b, len, c.max_blocks_per_seq * p, c.max_blocks_per_seq, p));
    }
    for (std::int64_t i = 0; i < (len + p - 1) / p; ++i) {
      const std::int32_t blk = c.block_tables[b * c.max_blocks_per_seq + i];
      if (blk < 0 || blk >= c.shape.num_blocks) {
        fail(fmt::format("block_tables[{}][{}] = {} is outside the pool's 0..{}", b, i, blk,
                         c.shape.num_blocks - 1));
      }
    }
  }
  return c;
}

std::vector<AttentionCase> load_cases(const fs::path& dir, std::vector<std::string>* skipped) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(
        fmt::format("--data {}: not a directory (valid: gaussian, outliers, or a "
                    "directory written by `sweep --dump` or scripts/kv_dump.py)",
                    dir.string()));
  }
  if (fs::exists(dir / "meta.json")) return {load_case(dir)};
  const auto unfinished = [](const fs::path& d, const std::string& found) {
    return InputError(fmt::format(
        "--data {}: holds {} but no meta.json: a dump that did not finish (meta.json is "
        "written last); dump it again or remove it",
        d.string(), found));
  };
  if (const std::string found = dump_files_in(dir); !found.empty()) throw unfinished(dir, found);
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory()) subdirs.push_back(e.path());
  }
  std::sort(subdirs.begin(), subdirs.end());
  std::vector<fs::path> layers;
  for (const fs::path& d : subdirs) {
    if (fs::exists(d / "meta.json")) {
      layers.push_back(d);
    } else if (const std::string found = dump_files_in(d); !found.empty()) {
      throw unfinished(d, found);
    } else if (skipped != nullptr) {
      skipped->push_back(d.filename().string());
    }
  }
  if (layers.empty()) {
    throw InputError(
        fmt::format("--data {}: neither a dump (meta.json, q.npy, k_cache.npy, ...) "
                    "nor a directory of them (scripts/kv_dump.py's layer_NN/)",
                    dir.string()));
  }
  std::vector<AttentionCase> cases;
  for (const fs::path& d : layers) cases.push_back(load_case(d));
  return cases;
}

bool is_builtin_data(std::string_view name) { return name == "gaussian" || name == "outliers"; }

std::vector<AttentionCase> builtin_cases(std::string_view kind, int num_q_heads, int num_kv_heads,
                                         int head_dim, int tokens, int block_size,
                                         std::uint64_t seed) {
  if (!is_builtin_data(kind)) {
    throw InputError(
        fmt::format("--data: '{}' is not built-in data (valid: gaussian, "
                    "outliers, or a directory)",
                    kind));
  }
  AttentionCase c;
  c.name = std::string(kind);
  c.num_q_heads = num_q_heads;
  c.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const std::int64_t num_blocks = (tokens + block_size - 1) / block_size;
  c.shape = {num_blocks, num_kv_heads, block_size, head_dim};
  constexpr int kQueries = 16;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  c.q.resize(static_cast<std::size_t>(kQueries) * num_q_heads * head_dim);
  for (float& x : c.q) x = normal(rng);
  c.k.resize(c.shape.elements());
  c.v.resize(c.shape.elements());
  for (float& x : c.k) x = normal(rng);
  for (float& x : c.v) x = normal(rng);
  if (kind == "outliers") {
    // The same channels in every token of a head, as RoPE's slow dimensions are.
    for (std::int64_t h = 0; h < num_kv_heads; ++h) {
      std::vector<int> channels(head_dim);
      for (int i = 0; i < head_dim; ++i) channels[i] = i;
      std::shuffle(channels.begin(), channels.end(), rng);
      for (int o = 0; o < kOutlierChannels && o < head_dim; ++o) {
        const int ch = channels[o];
        const float sign = o % 2 == 0 ? 1.f : -1.f;
        for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
          for (int t = 0; t < block_size; ++t) {
            float& x = c.k[((blk * num_kv_heads + h) * block_size + t) * head_dim + ch];
            x = sign * 6.f + 4.f * x;
          }
        }
      }
    }
  }
  c.max_blocks_per_seq = num_blocks;
  for (int b = 0; b < kQueries; ++b) {
    for (std::int64_t i = 0; i < num_blocks; ++i) {
      c.block_tables.push_back(static_cast<std::int32_t>(i));
    }
    // Evenly over the second half, the last token included.
    const int half = tokens / 2;
    c.context_lens.push_back(half + (tokens - half) * (b + 1) / kQueries);
  }
  return {c};
}

void ErrorSums::add(const ErrorSums& o) {
  k_err2 += o.k_err2, k_ref2 += o.k_ref2;
  v_err2 += o.v_err2, v_ref2 += o.v_ref2;
  out_err2 += o.out_err2, out_ref2 += o.out_ref2;
  out_max_err = std::max(out_max_err, o.out_max_err);
  out_max_ref = std::max(out_max_ref, o.out_max_ref);
  kl_sum += o.kl_sum;
  kl_max = std::max(kl_max, o.kl_max);
  rows += o.rows;
}

ErrorMeasures measures(const ErrorSums& s) {
  ErrorMeasures m;
  m.k_rel_rms = std::sqrt(ratio(s.k_err2, s.k_ref2));
  m.v_rel_rms = std::sqrt(ratio(s.v_err2, s.v_ref2));
  m.out_rel_l2 = std::sqrt(ratio(s.out_err2, s.out_ref2));
  m.out_max_rel = ratio(s.out_max_err, s.out_max_ref);
  m.attn_kl_mean = s.rows > 0 ? s.kl_sum / static_cast<double>(s.rows) : 0;
  m.attn_kl_max = s.kl_max;
  return m;
}

ErrorSums measure_format(const AttentionCase& c, KvFormat format) {
  const std::vector<float> k = dequantize(quantize(format, KvTensor::k, c.shape, c.k));
  const std::vector<float> v = dequantize(quantize(format, KvTensor::v, c.shape, c.v));
  ErrorSums s;
  const std::vector<char> used = rows_read(c);
  add_tensor_error(c, used, c.k, k, s.k_err2, s.k_ref2);
  add_tensor_error(c, used, c.v, v, s.v_err2, s.v_ref2);
  StepRow ref, got;
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    for (std::int64_t h = 0; h < c.num_q_heads; ++h) {
      attend(c, c.k, c.v, b, h, ref);
      attend(c, k, v, b, h, got);
      double kl = 0;
      for (std::size_t t = 0; t < ref.log_p.size(); ++t) {
        kl += std::exp(ref.log_p[t]) * (ref.log_p[t] - got.log_p[t]);
      }
      kl = std::max(kl, 0.0);  // rounding can leave -1e-17 for identical distributions
      s.kl_sum += kl;
      s.kl_max = std::max(s.kl_max, kl);
      for (std::size_t i = 0; i < ref.out.size(); ++i) {
        const double e = got.out[i] - ref.out[i];
        s.out_err2 += e * e;
        s.out_ref2 += ref.out[i] * ref.out[i];
        s.out_max_err = std::max(s.out_max_err, std::fabs(e));
        s.out_max_ref = std::max(s.out_max_ref, std::fabs(ref.out[i]));
      }
      ++s.rows;
    }
  }
  return s;
}

}  // namespace decodebench::quant
