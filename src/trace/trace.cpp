#include "trace/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <numeric>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "common/json_text.h"

namespace decodebench {

namespace {

// Token counts are ints everywhere downstream (TraceRequest, the workload), hence < 2^31.
constexpr std::int64_t kMaxTokens = 2147483647;

// Calls f(line, 1-based number) for every line; a trailing '\r' (Windows) is dropped, and so is
// the empty piece after a final newline.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  std::size_t pos = 0;
  std::int64_t number = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    f(line, ++number);
    pos = end + 1;
  }
}

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

// Quotes a token for a message, cut short so a hostile line cannot make a megabyte message.
std::string shown(std::string_view token) {
  constexpr std::size_t kMax = 40;
  if (token.size() <= kMax) return fmt::format("'{}'", token);
  return fmt::format("'{}...'", token.substr(0, kMax));
}

// Orders by arrival (stable: ties keep file order), shifts the first arrival to 0 and fills the
// trace. key(i) orders request i; since_first(i, first) is its arrival in seconds after `first`.
// Keys are kept apart from the requests so the shift is computed in the key's own precision.
template <typename Key, typename SinceFirst>
void order_and_shift(Trace& trace, std::vector<TraceRequest> requests, const std::vector<Key>& keys,
                     SinceFirst since_first) {
  if (requests.empty()) {
    throw InputError(fmt::format("{}: the trace is empty: no requests in it", trace.source));
  }
  std::vector<std::size_t> order(requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&keys](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  const Key& first = keys[order.front()];
  trace.requests.clear();
  trace.requests.reserve(requests.size());
  for (const std::size_t i : order) {
    TraceRequest& r = requests[i];
    r.arrival_s = since_first(keys[i], first);
    trace.requests.push_back(std::move(r));
  }
}

// ---- Mooncake JSONL -----------------------------------------------------------------------

const char* json_kind(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    default: return "not a value";
  }
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where,
                            const char* valid) {
  const auto it = j.find(key);
  if (it == j.end()) throw InputError(fmt::format("{}: missing '{}' ({})", where, key, valid));
  return *it;
}

// An integer token count in [1, 2^31).
int token_count(const nlohmann::json& j, const char* key, const std::string& where) {
  constexpr const char* kValid = "an integer in [1, 2147483647]";
  const nlohmann::json& v = field(j, key, where, kValid);
  if (v.is_number_unsigned()) {
    const auto n = v.get<std::uint64_t>();
    if (n >= 1 && n <= static_cast<std::uint64_t>(kMaxTokens)) return static_cast<int>(n);
    throw InputError(fmt::format("{}: '{}' is {}; it must be {}", where, key, n, kValid));
  }
  if (v.is_number_integer()) {
    const auto n = v.get<std::int64_t>();
    if (n >= 1 && n <= kMaxTokens) return static_cast<int>(n);
    throw InputError(fmt::format("{}: '{}' is {}; it must be {}", where, key, n, kValid));
  }
  throw InputError(fmt::format("{}: '{}' is {} ({}); it must be {}", where, key, json_kind(v),
                               shown(v.dump()), kValid));
}

}  // namespace

std::string_view trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::mooncake: return "mooncake";
    case TraceFormat::csv: return "csv";
  }
  return "unknown";
}

Trace parse_mooncake_jsonl(std::string_view text, const std::string& source, int block_tokens) {
  if (block_tokens < 1) {
    throw InputError(fmt::format("trace block tokens must be >= 1, got {}", block_tokens));
  }
  Trace trace;
  trace.source = source;
  trace.format = TraceFormat::mooncake;
  trace.block_tokens = block_tokens;
  trace.has_prefix_info = true;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte-order mark
  std::vector<TraceRequest> requests;
  std::vector<double> timestamps_ms;
  for_each_line(text, [&](std::string_view line, std::int64_t number) {
    if (is_blank(line)) return;
    const std::string where = fmt::format("{}:{}", source, number);
    const nlohmann::json j = parse_json_text(line, where);
    if (!j.is_object()) {
      throw InputError(
          fmt::format("{}: the line is {}; each line must be a JSON object with "
                      "timestamp, input_length, output_length and hash_ids",
                      where, json_kind(j)));
    }
    constexpr const char* kTimeValid = "milliseconds from the trace's start, a number >= 0";
    const nlohmann::json& t = field(j, "timestamp", where, kTimeValid);
    if (!t.is_number()) {
      throw InputError(fmt::format("{}: 'timestamp' is {} ({}); it must be {}", where, json_kind(t),
                                   shown(t.dump()), kTimeValid));
    }
    const double ms = t.get<double>();
    if (!std::isfinite(ms) || ms < 0) {
      throw InputError(
          fmt::format("{}: 'timestamp' is {}; it must be {}", where, t.dump(), kTimeValid));
    }
    TraceRequest r;
    r.input_tokens = token_count(j, "input_length", where);
    r.output_tokens = token_count(j, "output_length", where);

    constexpr const char* kIdsValid = "an array of integers >= 0, one per block of the prompt";
    const nlohmann::json& ids = field(j, "hash_ids", where, kIdsValid);
    if (!ids.is_array()) {
      throw InputError(
          fmt::format("{}: 'hash_ids' is {}; it must be {}", where, json_kind(ids), kIdsValid));
    }
    const std::int64_t blocks = (std::int64_t{r.input_tokens} + block_tokens - 1) / block_tokens;
    if (static_cast<std::int64_t>(ids.size()) != blocks) {
      throw InputError(fmt::format(
          "{}: 'hash_ids' has {} ids, input_length {} needs {} block{} of {} tokens; is "
          "--trace-block-tokens right?",
          where, ids.size(), r.input_tokens, blocks, blocks == 1 ? "" : "s", block_tokens));
    }
    r.hash_ids.reserve(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const nlohmann::json& id = ids[k];
      if (id.is_number_unsigned()) {
        r.hash_ids.push_back(id.get<std::uint64_t>());
      } else if (id.is_number_integer() && id.get<std::int64_t>() >= 0) {
        r.hash_ids.push_back(static_cast<std::uint64_t>(id.get<std::int64_t>()));
      } else {
        throw InputError(fmt::format("{}: 'hash_ids'[{}] is {} ({}); ids must be integers >= 0",
                                     where, k, json_kind(id), shown(id.dump())));
      }
    }
    requests.push_back(std::move(r));
    timestamps_ms.push_back(ms);
  });
  order_and_shift(trace, std::move(requests), timestamps_ms,
                  [](double t, double first) { return (t - first) / 1000.0; });
  return trace;
}

// ---- CSV ----------------------------------------------------------------------------------

namespace {

// Azure timestamps: whole seconds since the epoch and nanoseconds, kept apart because a double
// of ~1.7e9 s holds only ~0.2 us.
struct WallTime {
  std::int64_t s = 0;
  std::int64_t ns = 0;
  bool operator<(const WallTime& o) const { return s != o.s ? s < o.s : ns < o.ns; }
};

constexpr const char* kAzureTimeValid = "'YYYY-MM-DD HH:MM:SS[.fraction]' (UTC, up to 9 digits)";

bool digits_at(std::string_view s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) return false;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]"; the shape is checked by hand first because strptime
// accepts single digits and surrounding blanks, and the date is checked to exist (timegm would
// turn Feb 30 into Mar 2). A UTC designator ("Z", "+00:00") is accepted: the times are UTC.
bool parse_azure_time(std::string_view tok, WallTime& out) {
  if (tok.size() < 19 || !digits_at(tok, 0, 4) || tok[4] != '-' || !digits_at(tok, 5, 2) ||
      tok[7] != '-' || !digits_at(tok, 8, 2) || tok[10] != ' ' || !digits_at(tok, 11, 2) ||
      tok[13] != ':' || !digits_at(tok, 14, 2) || tok[16] != ':' || !digits_at(tok, 17, 2)) {
    return false;
  }
  std::string_view rest = tok.substr(19);
  std::int64_t ns = 0;
  if (!rest.empty() && rest.front() == '.') {
    std::size_t n = 1;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    const std::size_t digits = n - 1;
    if (digits < 1 || digits > 9) return false;
    for (std::size_t i = 1; i <= 9; ++i) ns = ns * 10 + (i <= digits ? rest[i] - '0' : 0);
    rest.remove_prefix(n);
  }
  if (!rest.empty() && rest != "Z" && rest != "+00:00") return false;

  const std::string head(tok.substr(0, 19));  // strptime needs a terminated string
  std::tm tm{};
  const char* end = strptime(head.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return false;
  const std::tm asked = tm;
  const std::time_t t = timegm(&tm);
  std::tm back{};
  if (gmtime_r(&t, &back) == nullptr || back.tm_year != asked.tm_year ||
      back.tm_mon != asked.tm_mon || back.tm_mday != asked.tm_mday ||
      back.tm_hour != asked.tm_hour || back.tm_min != asked.tm_min || back.tm_sec != asked.tm_sec) {
    return false;  // Feb 30, hour 24, a leap second: not a time that exists
  }
  out.s = static_cast<std::int64_t>(t);
  out.ns = ns;
  return true;
}

// A whole token as an int64 (no sign, blanks or trailing characters).
bool parse_int(std::string_view tok, std::int64_t& out) {
  if (tok.empty()) return false;
  const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), out);
  return ec == std::errc() && p == tok.data() + tok.size();
}

bool parse_double(std::string_view tok, double& out) {
  if (tok.empty()) return false;
  const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), out);
  return ec == std::errc() && p == tok.data() + tok.size();
}

// Splits on commas; false when the count is not `n`.
bool split_fields(std::string_view line, std::string_view* fields, std::size_t n,
                  std::size_t& got) {
  got = 0;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = line.find(',', pos);
    const std::string_view f =
        line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (got < n) fields[got] = trim(f);
    ++got;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return got == n;
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

constexpr const char* kCsvHeaders =
    "'TIMESTAMP,ContextTokens,GeneratedTokens' (Azure: timestamps 'YYYY-MM-DD HH:MM:SS[.f]' UTC) "
    "or 'timestamp,input_length,output_length' (timestamps in ms)";

int csv_tokens(std::string_view tok, const std::string& where, std::string_view column) {
  std::int64_t n = 0;
  if (!parse_int(tok, n) || n < 1 || n > kMaxTokens) {
    throw InputError(fmt::format("{}: column '{}' is {}; it must be an integer in [1, {}]", where,
                                 column, shown(tok), kMaxTokens));
  }
  return static_cast<int>(n);
}

}  // namespace

Trace parse_csv_trace(std::string_view text, const std::string& source) {
  Trace trace;
  trace.source = source;
  trace.format = TraceFormat::csv;
  trace.has_prefix_info = false;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte-order mark

  enum class Kind { none, azure, ms };
  Kind kind = Kind::none;
  std::string_view names[3];
  std::vector<TraceRequest> requests;
  std::vector<WallTime> wall;  // Kind::azure
  std::vector<double> ms;      // Kind::ms
  for_each_line(text, [&](std::string_view line, std::int64_t number) {
    if (is_blank(line)) return;
    const std::string where = fmt::format("{}:{}", source, number);
    std::string_view f[3];
    std::size_t got = 0;
    const bool three = split_fields(line, f, 3, got);
    if (kind == Kind::none) {
      if (three && same_name(f[0], "TIMESTAMP") && same_name(f[1], "ContextTokens") &&
          same_name(f[2], "GeneratedTokens")) {
        kind = Kind::azure;
      } else if (three && same_name(f[0], "timestamp") && same_name(f[1], "input_length") &&
                 same_name(f[2], "output_length")) {
        kind = Kind::ms;
      } else {
        throw InputError(fmt::format("{}: the header {} is not one this reader knows; valid: {}",
                                     where, shown(trim(line)), kCsvHeaders));
      }
      std::copy(f, f + 3, names);
      return;
    }
    if (!three) {
      throw InputError(fmt::format("{}: {} column{}, the header has 3 ({}, {}, {})", where, got,
                                   got == 1 ? "" : "s", names[0], names[1], names[2]));
    }
    TraceRequest r;
    if (kind == Kind::azure) {
      WallTime t;
      if (!parse_azure_time(f[0], t)) {
        throw InputError(fmt::format("{}: column '{}' is {}; it must be a time {}", where, names[0],
                                     shown(f[0]), kAzureTimeValid));
      }
      wall.push_back(t);
    } else {
      double t = 0;
      if (!parse_double(f[0], t) || !std::isfinite(t) || t < 0) {
        throw InputError(fmt::format(
            "{}: column '{}' is {}; it must be milliseconds from the start, a number >= 0", where,
            names[0], shown(f[0])));
      }
      ms.push_back(t);
    }
    r.input_tokens = csv_tokens(f[1], where, names[1]);
    r.output_tokens = csv_tokens(f[2], where, names[2]);
    requests.push_back(std::move(r));
  });
  if (kind == Kind::none) {
    throw InputError(fmt::format("{}: the trace is empty: no header and no requests; expected {}",
                                 source, kCsvHeaders));
  }
  if (kind == Kind::azure) {
    order_and_shift(trace, std::move(requests), wall, [](const WallTime& t, const WallTime& first) {
      return static_cast<double>(t.s - first.s) + static_cast<double>(t.ns - first.ns) * 1e-9;
    });
  } else {
    order_and_shift(trace, std::move(requests), ms,
                    [](double t, double first) { return (t - first) / 1000.0; });
  }
  return trace;
}

// ---- files --------------------------------------------------------------------------------

namespace {

std::string read_whole_file(const std::filesystem::path& path) {
  // One read of the whole file: the conversation trace is 3 MB and its lines are parsed from
  // views into this buffer.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw InputError(fmt::format("cannot open trace file {}", path.string()));
  std::string text;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) {
    throw InputError(fmt::format("cannot read trace file {}", path.string()));
  }
  return text;
}

}  // namespace

Trace load_trace(const std::filesystem::path& path, std::string_view format, int block_tokens,
                 std::int64_t max_requests) {
  TraceFormat f = TraceFormat::mooncake;
  if (format == "mooncake") {
    f = TraceFormat::mooncake;
  } else if (format == "csv") {
    f = TraceFormat::csv;
  } else if (format == "auto") {
    const std::string ext = path.extension().string();
    if (same_name(ext, ".jsonl")) {
      f = TraceFormat::mooncake;
    } else if (same_name(ext, ".csv")) {
      f = TraceFormat::csv;
    } else {
      throw InputError(fmt::format(
          "cannot tell the format of trace {} from its extension (.jsonl: mooncake, .csv: csv); "
          "give the format: mooncake or csv",
          path.string()));
    }
  } else {
    throw InputError(fmt::format("unknown trace format '{}'; valid: auto, mooncake, csv", format));
  }
  if (block_tokens < 1) {
    throw InputError(fmt::format("trace block tokens must be >= 1, got {}", block_tokens));
  }
  if (max_requests < 0) {
    throw InputError(
        fmt::format("max requests must be >= 0 (0: the whole trace), got {}", max_requests));
  }
  if (std::error_code ec; !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(fmt::format("trace file {} does not exist or is not a file", path.string()));
  }
  const std::string text = read_whole_file(path);
  Trace trace = f == TraceFormat::mooncake ? parse_mooncake_jsonl(text, path.string(), block_tokens)
                                           : parse_csv_trace(text, path.string());
  trace.block_tokens = block_tokens;
  if (max_requests > 0 && static_cast<std::int64_t>(trace.requests.size()) > max_requests) {
    trace.requests.resize(static_cast<std::size_t>(max_requests));
  }
  return trace;
}

}  // namespace decodebench
