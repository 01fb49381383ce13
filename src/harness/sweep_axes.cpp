// Value readers, writers and flag parsers of the axes and settings, and the workload key.
#include "harness/sweep_axes.h"

#include <charconv>

#include "common/errors.h"

namespace decodebench {

namespace {

// Runs f(); an InputError it throws is reported at the JSON value's key.
template <class F>
auto rethrow_at(const JsonIn& in, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    in.fail(e.what());
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
T parse_number(std::string_view item, std::string_view flag, const char* what) {
  T value{};
  const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
  if (ec != std::errc() || end != item.data() + item.size()) {
    throw InputError(fmt::format("{}: '{}' is not {}", flag, item, what));
  }
  return value;
}

// "auto" or a dtype name; an unknown name is told the q dtypes (InputError naming `what`).
QDtypeChoice parse_q_dtype(std::string_view text, std::string_view what) {
  if (text == "auto") return QDtypeChoice::automatic();
  const auto unknown = [&] {
    return InputError(fmt::format(
        "{}: unknown q dtype '{}'; valid: auto, f16, bf16 (aliases fp16, float16, half, bfloat16)",
        what, text));
  };
  DType t;
  try {
    t = parse_dtype(text, what);
  } catch (const InputError&) {
    throw unknown();
  }
  if (is_int_kv(t)) throw unknown();  // a KV format, never a q dtype
  return t;
}

// The part of workload_key() for one field; a new field type needs its overload here.
std::string key_part(int v) { return fmt::format("{}", v); }
std::string key_part(double v) { return fmt::format("{}", v); }
std::string key_part(DType t) { return std::string(dtype_name(t)); }
std::string key_part(const ContextSpec& c) {
  return fmt::format("{}:{}:{}", static_cast<int>(c.kind), c.lo, c.hi);
}
std::string key_part(const ModelShape& m) {
  // The numbers that shape the tensors and the attention's output; num_layers and source do
  // not (a layer class's model, ModelShape::with_window, differs from its model's here).
  return fmt::format("{}/{}/{}/{}/w{}:{}of{}/s{}/c{}/mla{}:{}", m.name, m.num_q_heads,
                     m.num_kv_heads, m.head_dim, m.sliding_window, m.window_local, m.window_every,
                     m.sinks ? 1 : 0, m.attn_logit_softcapping, m.kv_lora_rank, m.attention_scale);
}

}  // namespace

namespace axis_values {

std::string read_string(const JsonIn& v) { return v.string(); }
int read_int(const JsonIn& v) { return v.int32(); }
double read_number(const JsonIn& v) { return v.number(); }

DType read_dtype(const JsonIn& v) {
  return rethrow_at(v, [&] { return parse_dtype(v.string(), "dtype"); });
}

QDtypeChoice read_q_dtype(const JsonIn& v) {
  return rethrow_at(v, [&] { return parse_q_dtype(v.string(), "dtype"); });
}

Scope read_scope(const JsonIn& v) {
  return rethrow_at(v, [&] { return parse_scope(v.string()); });
}

nlohmann::json scope(const Scope& s) { return std::string(scope_name(s)); }

ContextSpec read_context(const JsonIn& v) {
  if (v.json().is_number()) return ContextSpec::fixed(v.int32());
  if (v.json().is_string()) return rethrow_at(v, [&] { return parse_context(v.string()); });
  v.fail(fmt::format("expected {}", kContextSyntax));
}

Shard read_shard(const JsonIn& v) {
  return rethrow_at(v, [&] {
    Shard s;
    parse_shard(v.string(), s.index, s.count);
    return s;
  });
}

nlohmann::json dtype(const DType& t) { return dtype_name(t); }
nlohmann::json q_dtype(const QDtypeChoice& q) { return q_dtype_name(q); }

nlohmann::json context(const ContextSpec& c) {
  if (c.kind == ContextSpec::Kind::fixed) return c.lo;
  return context_label(c);
}

}  // namespace axis_values

std::vector<std::string> split_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::size_t len =
        comma == std::string_view::npos ? std::string_view::npos : comma - start;
    const std::string_view item = trim(text.substr(start, len));
    if (item.empty()) {
      throw InputError(fmt::format(
          "{}: empty item in '{}' (give a comma-separated list, e.g. 1,8,64)", flag, text));
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<int> parse_int_list(std::string_view text, std::string_view flag) {
  std::vector<int> out;
  for (const std::string& item : split_list(text, flag)) {
    out.push_back(parse_number<int>(item, flag, "an integer"));
  }
  return out;
}

std::vector<double> parse_double_list(std::string_view text, std::string_view flag) {
  std::vector<double> out;
  for (const std::string& item : split_list(text, flag)) {
    out.push_back(parse_number<double>(item, flag, "a number"));
  }
  return out;
}

std::vector<ContextSpec> parse_context_list(std::string_view text, std::string_view flag) {
  std::vector<ContextSpec> out;
  for (std::string item : split_list(text, flag)) {
    // "512-4096" reads as the ragged range 512:4096; a leading '-' stays a (bad) negative value.
    const std::size_t dash = item.find('-', 1);
    if (dash != std::string::npos && item.find(':') == std::string::npos) item[dash] = ':';
    try {
      out.push_back(parse_context(item));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", flag, e.what()));
    }
  }
  return out;
}

std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag) {
  std::vector<DType> out;
  for (const std::string& item : split_list(text, flag)) out.push_back(parse_dtype(item, flag));
  return out;
}

std::vector<QDtypeChoice> parse_q_dtype_list(std::string_view text, std::string_view flag) {
  std::vector<QDtypeChoice> out;
  for (const std::string& item : split_list(text, flag)) out.push_back(parse_q_dtype(item, flag));
  return out;
}

std::vector<Scope> parse_scope_list(std::string_view text, std::string_view flag) {
  std::vector<Scope> out;
  for (const std::string& item : split_list(text, flag)) {
    try {
      out.push_back(parse_scope(item));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", flag, e.what()));
    }
  }
  return out;
}

std::string workload_key(const WorkloadSpec& spec) {
  std::string key;
  for_each_axis([&](const auto& axis) {
    if constexpr (kShapesWorkload<decltype(axis)>) {
      key += fmt::format("{}={}|", axis.json_key, key_part(spec.*axis.field));
    }
  });
  return key + fmt::format("seed={}", spec.seed);
}

}  // namespace decodebench
