// Small text helpers every layer uses.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace decodebench {

// "a, b, c" (or with another separator); "" for none.
inline std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace decodebench
