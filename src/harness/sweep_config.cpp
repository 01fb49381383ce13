// Sweep configs: reading, validating, writing back, and expanding into points.
#include "harness/sweep_config.h"

#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/math.h"
#include "report/json_util.h"

namespace decodebench {

using nlohmann::json;

bool operator==(const MeasureOptions& a, const MeasureOptions& b) {
  return a.min_samples == b.min_samples && a.min_time_s == b.min_time_s &&
         a.max_noise == b.max_noise && a.timeout_s == b.timeout_s && a.warm_l2 == b.warm_l2;
}

namespace {

bool same_contexts(const std::vector<ContextSpec>& a, const std::vector<ContextSpec>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].lo != b[i].lo || a[i].hi != b[i].hi) return false;
  }
  return true;
}

// "123" or "8k" (x1024) -> int; nullopt-like -1 on anything else.
bool parse_length(std::string_view s, int& out) {
  std::int64_t scale = 1;
  if (!s.empty() && (s.back() == 'k' || s.back() == 'K')) {
    scale = 1024;
    s.remove_suffix(1);
  }
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return false;
  v *= scale;
  if (v < INT32_MIN || v > INT32_MAX) return false;
  out = static_cast<int>(v);
  return true;
}

constexpr const char* kContextSyntax = "a length (1024), a length in units of 1024 (8k), or a "
                                       "ragged range lo:hi (512:4096, 1k:8k)";

}  // namespace

bool operator==(const SweepConfig& a, const SweepConfig& b) {
  return a.models == b.models && a.batches == b.batches && same_contexts(a.contexts, b.contexts) &&
         a.hit_rates == b.hit_rates && a.prefix_groups == b.prefix_groups &&
         a.kv_dtypes == b.kv_dtypes && a.q_dtypes == b.q_dtypes &&
         a.block_sizes == b.block_sizes && a.kernels == b.kernels && a.backend == b.backend &&
         a.seed == b.seed && a.measure == b.measure && a.shard_index == b.shard_index &&
         a.shard_count == b.shard_count && a.validate_max_rows == b.validate_max_rows;
}

ContextSpec parse_context(std::string_view s) {
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) {
    int n = 0;
    if (!parse_length(s, n)) {
      throw InputError(fmt::format("context '{}' is not {}", s, kContextSyntax));
    }
    return ContextSpec::fixed(n);
  }
  int lo = 0, hi = 0;
  if (!parse_length(s.substr(0, colon), lo) || !parse_length(s.substr(colon + 1), hi)) {
    throw InputError(fmt::format("context '{}' is not {}", s, kContextSyntax));
  }
  return ContextSpec::ragged(lo, hi);
}

std::string context_label(const ContextSpec& c) {
  return c.kind == ContextSpec::Kind::fixed ? fmt::format("{}", c.lo)
                                            : fmt::format("{}:{}", c.lo, c.hi);
}

void parse_shard(std::string_view s, int& index, int& count) {
  const auto slash = s.find('/');
  int i = 0, n = 0;
  const auto parse = [](std::string_view t, int& v) {
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && ptr == t.data() + t.size() && !t.empty();
  };
  if (slash == std::string_view::npos || !parse(s.substr(0, slash), i) ||
      !parse(s.substr(slash + 1), n)) {
    throw InputError(fmt::format("shard '{}' is not i/n (e.g. 0/4: the first of 4 shards)", s));
  }
  if (n < 1 || i < 0 || i >= n) {
    throw InputError(fmt::format("shard '{}': need n >= 1 and 0 <= i < n", s));
  }
  index = i;
  count = n;
}

// --- reading ----------------------------------------------------------------------------------

namespace {

// An axis: one value or a non-empty list of values.
template <class F>
auto read_axis(const JsonIn& in, F&& read_one) {
  using T = decltype(read_one(in));
  std::vector<T> out;
  if (!in.json().is_array()) {
    out.push_back(read_one(in));
    return out;
  }
  if (in.size() == 0) in.fail("an axis needs at least one value");
  for (std::size_t i = 0; i < in.size(); ++i) out.push_back(read_one(in.at(i)));
  return out;
}

template <class F>
auto rethrow_at(const JsonIn& in, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    in.fail(e.what());
  }
}

}  // namespace

SweepConfig sweep_config_from_json(const json& j, std::string_view source,
                                   const SweepConfig& base) {
  const JsonIn in(j, std::string(source));
  in.reject_unknown_keys({"model", "batch", "context", "hit_rate", "prefix_groups", "kv_dtype",
                          "q_dtype", "block_size", "kernel", "backend", "seed",
                          "validate_max_rows", "shard", "measure", "name", "description"});
  SweepConfig c = base;
  if (in.has("model")) c.models = read_axis(in.at("model"), [](const JsonIn& v) {
    const std::string s = v.string();
    if (s.empty()) v.fail("a model name or path must not be empty");
    return s;
  });
  if (in.has("batch")) {
    c.batches = read_axis(in.at("batch"), [](const JsonIn& v) {
      const int b = v.int32();
      if (b <= 0) v.fail(fmt::format("batch must be a positive integer, got {}", b));
      return b;
    });
  }
  if (in.has("context")) {
    c.contexts = read_axis(in.at("context"), [](const JsonIn& v) {
      ContextSpec cs;
      if (v.json().is_number()) {
        cs = ContextSpec::fixed(v.int32());
      } else if (v.json().is_string()) {
        cs = rethrow_at(v, [&] { return parse_context(v.string()); });
      } else {
        v.fail(fmt::format("expected {}", kContextSyntax));
      }
      if (cs.lo <= 0 || cs.hi < cs.lo) {
        v.fail(fmt::format("context lengths must be >= 1 and lo <= hi, got {}",
                           context_label(cs)));
      }
      return cs;
    });
  }
  if (in.has("hit_rate")) {
    c.hit_rates = read_axis(in.at("hit_rate"), [](const JsonIn& v) {
      const double h = v.number();
      if (!(h >= 0 && h <= 1)) v.fail(fmt::format("hit rate must be in [0, 1], got {}", h));
      return h;
    });
  }
  if (in.has("prefix_groups")) {
    c.prefix_groups = read_axis(in.at("prefix_groups"), [](const JsonIn& v) {
      const int g = v.int32();
      if (g < 1) v.fail(fmt::format("prefix_groups must be >= 1, got {}", g));
      return g;
    });
  }
  const auto read_dtype = [](const JsonIn& v) {
    return rethrow_at(v, [&] { return parse_dtype(v.string(), "dtype"); });
  };
  if (in.has("kv_dtype")) c.kv_dtypes = read_axis(in.at("kv_dtype"), read_dtype);
  if (in.has("q_dtype")) {
    c.q_dtypes = read_axis(in.at("q_dtype"), [&](const JsonIn& v) {
      const DType t = read_dtype(v);
      if (t != DType::f16 && t != DType::bf16) {
        v.fail(fmt::format("q dtype must be f16 or bf16, got {}", dtype_name(t)));
      }
      return t;
    });
  }
  if (in.has("block_size")) {
    c.block_sizes = read_axis(in.at("block_size"), [](const JsonIn& v) {
      const int p = v.int32();
      if (!is_power_of_two(p) || p > 1024) {
        v.fail(fmt::format("block size must be a power of two in [1, 1024] (e.g. 8, 16, 32), "
                           "got {}", p));
      }
      return p;
    });
  }
  if (in.has("kernel")) c.kernels = read_axis(in.at("kernel"), [](const JsonIn& v) {
    const std::string s = v.string();
    if (s.empty()) v.fail("a kernel name must not be empty");
    return s;
  });
  if (in.has("backend")) c.backend = in.at("backend").string();
  if (in.has("seed")) c.seed = in.at("seed").uint64();
  if (in.has("validate_max_rows")) {
    const JsonIn v = in.at("validate_max_rows");
    c.validate_max_rows = v.int32();
    if (c.validate_max_rows < 1) {
      v.fail(fmt::format("validate_max_rows must be >= 1, got {}", c.validate_max_rows));
    }
  }
  if (in.has("shard")) {
    const JsonIn v = in.at("shard");
    rethrow_at(v, [&] {
      parse_shard(v.string(), c.shard_index, c.shard_count);
      return 0;
    });
  }
  if (in.has("measure")) {
    const JsonIn m = in.at("measure");
    m.reject_unknown_keys({"min_samples", "min_time_s", "max_noise", "timeout_s", "warm_l2"});
    if (m.has("min_samples")) {
      const JsonIn v = m.at("min_samples");
      c.measure.min_samples = v.int32();
      if (c.measure.min_samples < 1) v.fail("min_samples must be >= 1");
    }
    const auto non_negative = [&](std::string_view key, double& dst, bool strictly) {
      if (!m.has(key)) return;
      const JsonIn v = m.at(key);
      dst = v.number();
      if (strictly ? !(dst > 0) : !(dst >= 0)) {
        v.fail(fmt::format("must be {} 0, got {}", strictly ? ">" : ">=", dst));
      }
    };
    non_negative("min_time_s", c.measure.min_time_s, false);
    non_negative("max_noise", c.measure.max_noise, false);
    non_negative("timeout_s", c.measure.timeout_s, true);
    if (m.has("warm_l2")) c.measure.warm_l2 = m.at("warm_l2").boolean();
  }
  // Cross-key checks (e.g. shard) and anything a layered base got wrong.
  try {
    validate(c);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", source, e.what()));
  }
  return c;
}

SweepConfig load_sweep_config(const std::filesystem::path& file) {
  std::ifstream f(file);
  if (!f) throw InputError(fmt::format("{}: cannot open the sweep config", file.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  json j;
  try {
    j = json::parse(ss.str(), /*cb=*/nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", file.string()));
  return sweep_config_from_json(j, file.string());
}

// --- writing ----------------------------------------------------------------------------------

json to_json(const SweepConfig& c) {
  json contexts = json::array();
  for (const auto& cs : c.contexts) {
    if (cs.kind == ContextSpec::Kind::fixed) {
      contexts.push_back(cs.lo);
    } else {
      contexts.push_back(context_label(cs));
    }
  }
  json kv = json::array(), q = json::array();
  for (DType t : c.kv_dtypes) kv.push_back(dtype_name(t));
  for (DType t : c.q_dtypes) q.push_back(dtype_name(t));
  return {
      {"model", c.models},
      {"batch", c.batches},
      {"context", contexts},
      {"hit_rate", c.hit_rates},
      {"prefix_groups", c.prefix_groups},
      {"kv_dtype", kv},
      {"q_dtype", q},
      {"block_size", c.block_sizes},
      {"kernel", c.kernels},
      {"backend", c.backend},
      {"seed", c.seed},
      {"validate_max_rows", c.validate_max_rows},
      {"shard", fmt::format("{}/{}", c.shard_index, c.shard_count)},
      {"measure",
       {{"min_samples", c.measure.min_samples},
        {"min_time_s", c.measure.min_time_s},
        {"max_noise", c.measure.max_noise},
        {"timeout_s", c.measure.timeout_s},
        {"warm_l2", c.measure.warm_l2}}},
  };
}

// --- validation -------------------------------------------------------------------------------

void validate(const SweepConfig& c) {
  std::vector<std::string> problems;
  const auto need = [&](bool ok, std::string what) {
    if (!ok) problems.push_back(std::move(what));
  };
  const auto non_empty = [&](std::size_t n, std::string_view axis) {
    need(n > 0, fmt::format("axis '{}' is empty; give at least one value", axis));
  };
  non_empty(c.models.size(), "model");
  non_empty(c.batches.size(), "batch");
  non_empty(c.contexts.size(), "context");
  non_empty(c.hit_rates.size(), "hit_rate");
  non_empty(c.prefix_groups.size(), "prefix_groups");
  non_empty(c.kv_dtypes.size(), "kv_dtype");
  non_empty(c.q_dtypes.size(), "q_dtype");
  non_empty(c.block_sizes.size(), "block_size");
  non_empty(c.kernels.size(), "kernel");
  for (int b : c.batches) need(b > 0, fmt::format("batch must be >= 1, got {}", b));
  for (const auto& cs : c.contexts) {
    need(cs.lo > 0 && cs.hi >= cs.lo && (cs.kind == ContextSpec::Kind::ragged || cs.lo == cs.hi),
         fmt::format("context must be >= 1 (ragged: 1 <= lo <= hi), got {}", context_label(cs)));
  }
  for (double h : c.hit_rates) {
    need(h >= 0 && h <= 1, fmt::format("hit rate must be in [0, 1], got {}", h));
  }
  for (int g : c.prefix_groups) need(g >= 1, fmt::format("prefix_groups must be >= 1, got {}", g));
  for (int p : c.block_sizes) {
    need(is_power_of_two(p) && p <= 1024,
         fmt::format("block size must be a power of two in [1, 1024] (e.g. 8, 16, 32), got {}", p));
  }
  for (DType t : c.q_dtypes) {
    need(t == DType::f16 || t == DType::bf16,
         fmt::format("q dtype must be f16 or bf16, got {}", dtype_name(t)));
  }
  for (const auto& m : c.models) need(!m.empty(), "a model name must not be empty");
  for (const auto& k : c.kernels) need(!k.empty(), "a kernel name must not be empty");
  need(c.measure.min_samples >= 1,
       fmt::format("measure.min_samples must be >= 1, got {}", c.measure.min_samples));
  need(c.measure.min_time_s >= 0,
       fmt::format("measure.min_time_s must be >= 0, got {}", c.measure.min_time_s));
  need(c.measure.max_noise >= 0,
       fmt::format("measure.max_noise must be >= 0 (0.005 = 0.5 %), got {}", c.measure.max_noise));
  need(c.measure.timeout_s > 0,
       fmt::format("measure.timeout_s must be > 0, got {}", c.measure.timeout_s));
  need(c.validate_max_rows >= 1,
       fmt::format("validate_max_rows must be >= 1, got {}", c.validate_max_rows));
  need(c.shard_count >= 1 && c.shard_index >= 0 && c.shard_index < c.shard_count,
       fmt::format("shard {}/{} is not valid: need n >= 1 and 0 <= i < n", c.shard_index,
                   c.shard_count));
  if (problems.empty()) return;
  std::string msg = problems.size() == 1 ? problems[0]
                                         : fmt::format("{} problems in the sweep:", problems.size());
  if (problems.size() > 1) {
    for (const auto& p : problems) msg += "\n  " + p;
  }
  throw InputError(msg);
}

// --- expansion --------------------------------------------------------------------------------

std::size_t expansion_size(const SweepConfig& c, std::size_t num_kernels_for_all) {
  std::size_t kernels = 0;
  for (const auto& k : c.kernels) kernels += k == "all" ? num_kernels_for_all : 1;
  return c.models.size() * kernels * c.kv_dtypes.size() * c.q_dtypes.size() *
         c.block_sizes.size() * c.prefix_groups.size() * c.hit_rates.size() *
         c.contexts.size() * c.batches.size();
}

std::vector<SweepPoint> expand(const SweepConfig& c, const std::vector<std::string>& all_kernels) {
  validate(c);
  std::vector<std::string> kernels;
  for (const auto& k : c.kernels) {
    if (k != "all") {
      kernels.push_back(k);
      continue;
    }
    if (all_kernels.empty()) {
      throw InputError("kernel 'all' needs the backend's kernel list; name the kernels instead");
    }
    kernels.insert(kernels.end(), all_kernels.begin(), all_kernels.end());
  }
  std::vector<ModelShape> models;
  for (const auto& m : c.models) models.push_back(load_model(m));

  std::vector<SweepPoint> points;
  int index = 0;
  // Outermost first; batch innermost so each batch series is contiguous (knees, plots).
  for (const auto& model : models)
    for (const auto& kernel : kernels)
      for (DType kv : c.kv_dtypes)
        for (DType q : c.q_dtypes)
          for (int block : c.block_sizes)
            for (int groups : c.prefix_groups)
              for (double h : c.hit_rates)
                for (const auto& ctx : c.contexts)
                  for (int batch : c.batches) {
                    const int i = index++;
                    if (i % c.shard_count != c.shard_index) continue;
                    SweepPoint p;
                    p.spec.model = model;
                    p.spec.batch = batch;
                    p.spec.context = ctx;
                    p.spec.hit_rate = h;
                    p.spec.prefix_groups = groups;
                    p.spec.kv_dtype = kv;
                    p.spec.q_dtype = q;
                    p.spec.block_size = block;
                    p.spec.seed = c.seed;
                    p.kernel = kernel;
                    p.index = i;
                    points.push_back(std::move(p));
                  }
  return points;
}

}  // namespace decodebench
