// Sweep configs: reading, validating, writing back, and expanding into points.
#include "harness/sweep_config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_in.h"
#include "common/json_text.h"
#include "harness/sweep_axes.h"
#include "workload/layer_model.h"

namespace decodebench {

using nlohmann::json;

namespace {

// "123" or "8k" (x1024) -> int; false on anything else.

}  // namespace

std::string_view q_dtype_name(const QDtypeChoice& q) {
  return q.dtype ? dtype_name(*q.dtype) : "auto";
}

DType auto_q_dtype(Scope scope, DType weights) {
  return scope == Scope::layer ? default_activation_dtype(weights, DType::f16) : DType::f16;
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

// JsonIn::reject_unknown_keys with a list built at run time (from the tables).
void reject_unknown_keys(const JsonIn& in, const std::vector<std::string_view>& allowed) {
  if (!in.json().is_object()) {
    in.fail(fmt::format("expected an object, got {}", in.json().type_name()));
  }
  for (const auto& [key, value] : in.json().items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    in.at(key).fail(fmt::format("unknown key; valid keys: {}", fmt::join(allowed, ", ")));
  }
}

// An axis: one value or a non-empty list of values, each checked where it stands.
template <class Axis>
auto read_axis(const JsonIn& in, const Axis& axis) {
  const auto read_one = [&](const JsonIn& v) {
    auto value = axis.read_json(v);
    if (axis.check) {
      if (const std::string problem = axis.check(value); !problem.empty()) v.fail(problem);
    }
    return value;
  };
  std::vector<typename Axis::Value> out;
  if (!in.json().is_array()) {
    out.push_back(read_one(in));
    return out;
  }
  if (in.size() == 0) in.fail("an axis needs at least one value");
  for (std::size_t i = 0; i < in.size(); ++i) out.push_back(read_one(in.at(i)));
  return out;
}

}  // namespace

SweepConfig sweep_config_from_json(const json& j, std::string_view source,
                                   const SweepConfig& base) {
  const JsonIn in(j, std::string(source));
  // Top-level keys: the axes, the top-level settings, the settings' groups, the doc keys.
  std::vector<std::string_view> keys;
  std::vector<std::string_view> groups;
  for_each_axis([&](const auto& axis) { keys.push_back(axis.json_key); });
  for_each_setting([&](const auto& s) {
    if (s.group.empty()) {
      keys.push_back(s.json_key);
    } else if (std::find(groups.begin(), groups.end(), s.group) == groups.end()) {
      groups.push_back(s.group);
    }
  });
  keys.insert(keys.end(), groups.begin(), groups.end());
  keys.insert(keys.end(), std::begin(kConfigDocKeys), std::end(kConfigDocKeys));
  reject_unknown_keys(in, keys);
  for (std::string_view g : groups) {
    if (!in.has(g)) continue;
    std::vector<std::string_view> group_keys;
    for_each_setting([&](const auto& s) {
      if (s.group == g) group_keys.push_back(s.json_key);
    });
    reject_unknown_keys(in.at(g), group_keys);
  }

  SweepConfig c = base;
  for_each_axis([&](const auto& axis) {
    if (in.has(axis.json_key)) c.*axis.values = read_axis(in.at(axis.json_key), axis);
  });
  for_each_setting([&](const auto& s) {
    const bool top = s.group.empty();
    if (!(top ? in.has(s.json_key) : in.has(s.group) && in.at(s.group).has(s.json_key))) return;
    const JsonIn v = top ? in.at(s.json_key) : in.at(s.group).at(s.json_key);
    const auto value = s.read_json(v);
    if (s.check) {
      if (const std::string problem = s.check(value); !problem.empty()) v.fail(problem);
    }
    s.set(c, value);
  });
  // Cross-key checks and anything a layered base got wrong.
  try {
    validate(c);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", source, e.what()));
  }
  return c;
}

SweepConfig parse_sweep_config(std::string_view text, std::string_view source) {
  const json j = parse_json_text(text, source, /*ignore_comments=*/true);
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", source));
  return sweep_config_from_json(j, source);
}

SweepConfig load_sweep_config(const std::filesystem::path& file) {
  std::ifstream f(file);
  if (!f) throw InputError(fmt::format("{}: cannot open the sweep config", file.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_sweep_config(ss.view(), file.string());
}

// --- writing ----------------------------------------------------------------------------------

json to_json(const SweepConfig& c) {
  json j = json::object();
  for_each_axis([&](const auto& axis) {
    json values = json::array();
    for (const auto& v : c.*axis.values) values.push_back(axis.write_json(v));
    j[std::string(axis.json_key)] = std::move(values);
  });
  for_each_setting([&](const auto& s) {
    json& dst = s.group.empty() ? j : j[std::string(s.group)];
    dst[std::string(s.json_key)] = s.write_json(s.get(c));
  });
  return j;
}

// --- validation -------------------------------------------------------------------------------

void validate(const SweepConfig& c) {
  std::vector<std::string> problems;
  for_each_axis([&](const auto& axis) {
    if ((c.*axis.values).empty()) {
      problems.push_back(fmt::format("axis '{}' is empty; give at least one value", axis.json_key));
    }
  });
  for_each_axis([&](const auto& axis) {
    if (!axis.check) return;
    for (const auto& v : c.*axis.values) {
      if (std::string problem = axis.check(v); !problem.empty()) {
        problems.push_back(std::move(problem));
      }
    }
  });
  for_each_setting([&](const auto& s) {
    if (!s.check) return;
    if (std::string problem = s.check(s.get(c)); !problem.empty()) {
      problems.push_back(std::move(problem));
    }
  });
  if (problems.empty()) return;
  std::string msg = problems.size() == 1
                        ? problems[0]
                        : fmt::format("{} problems in the sweep:", problems.size());
  if (problems.size() > 1) {
    for (const auto& p : problems) msg += "\n  " + p;
  }
  throw InputError(msg);
}

// --- expansion --------------------------------------------------------------------------------

std::size_t expansion_size(const SweepConfig& c, std::size_t num_kernels_for_all) {
  std::size_t size = 1;
  for_each_axis([&](const auto& axis) {
    std::size_t n = 0;
    for (const auto& v : c.*axis.values) n += axis.count ? axis.count(v, num_kernels_for_all) : 1;
    size *= n;
  });
  return size;
}

namespace {

// The values the points take on one axis (models loaded, "all" kernels listed), before bind().
template <class Axis>
auto resolve_axis(const Axis& axis, const SweepConfig& c,
                  const std::vector<std::string>& all_kernels) {
  std::vector<typename Axis::Resolved> out;
  for (const auto& v : c.*axis.values) {
    if constexpr (std::is_same_v<typename Axis::Value, typename Axis::Resolved>) {
      if (!axis.resolve) {
        out.push_back(v);
        continue;
      }
    }
    axis.resolve(v, all_kernels, out);  // never null here (sweep_axes_test)
  }
  return out;
}

// Sets the axis's field of `p` from its resolved value.
template <class Axis>
void set_field(SweepPoint& p, const Axis& axis, const typename Axis::Resolved& v,
               const SweepConfig& c) {
  if constexpr (std::is_same_v<typename Axis::Resolved, typename Axis::Field>) {
    axis_field(p, axis) = v;
  } else {
    axis_field(p, axis) = axis.bind(v, p, c);  // never null here (sweep_axes_test)
  }
}

}  // namespace

std::vector<SweepPoint> expand(const SweepConfig& c, const std::vector<std::string>& all_kernels) {
  validate(c);
  constexpr std::size_t kNumAxes = std::tuple_size_v<decltype(kAxes)>;
  const auto values = std::apply(
      [&](const auto&... axis) { return std::tuple{resolve_axis(axis, c, all_kernels)...}; },
      kAxes);
  // Point i has digit (i / stride[k]) % size[k] on axis k: a mixed-radix count with the first
  // axis outermost and the last (batch) innermost, i.e. nested loops in table order. The fields
  // are set in table order too, so bind() sees the axes before its own.
  std::array<std::size_t, kNumAxes> size{}, stride{};
  std::apply([&](const auto&... v) { size = {v.size()...}; }, values);
  std::size_t total = 1;
  for (std::size_t k = kNumAxes; k-- > 0;) {
    stride[k] = total;
    total *= size[k];
  }

  std::vector<SweepPoint> points;
  for (std::size_t i = 0; i < total; ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(c.shard_count)) != c.shard_index) continue;
    SweepPoint p;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (set_field(p, std::get<K>(kAxes), std::get<K>(values)[i / stride[K] % size[K]], c), ...);
    }
    (std::make_index_sequence<kNumAxes>{});
    p.spec.seed = c.seed;
    p.index = static_cast<int>(i);
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace decodebench
