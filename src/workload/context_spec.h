// A sequence's context length as a sweep names it: fixed (every sequence the same length) or
// ragged (each drawn uniformly in [lo, hi]), with its text forms: what --context and a config's
// "context" take, and the label tables and series print.
#pragma once

#include <string>
#include <string_view>

namespace decodebench {

struct ContextSpec {
  enum class Kind { fixed, ragged };
  Kind kind = Kind::fixed;
  int lo = 0;  // fixed: the length; ragged: uniform in [lo, hi] per sequence
  int hi = 0;
  static ContextSpec fixed(int n) { return {Kind::fixed, n, n}; }
  static ContextSpec ragged(int lo, int hi) { return {Kind::ragged, lo, hi}; }
  friend bool operator==(const ContextSpec&, const ContextSpec&) = default;
};

// What parse_context() takes, for its messages.
inline constexpr const char* kContextSyntax =
    "a length (1024), a length in units of 1024 (8k), or a ragged range lo:hi (512:4096, 1k:8k)";

ContextSpec parse_context(std::string_view s);    // "1024", "8k", "512:4096", "1k:8k"
std::string context_label(const ContextSpec& c);  // "8192" or "512:4096"

}  // namespace decodebench
