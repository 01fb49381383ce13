#include "workload/context_spec.h"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "common/errors.h"

namespace decodebench {
namespace {

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

}  // namespace

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

}  // namespace decodebench
