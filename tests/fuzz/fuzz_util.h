// What every fuzz target shares: the input as text, and the one way a property fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace decodebench::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A broken property (not a bad input): libFuzzer keeps the input as a crash.
[[noreturn]] inline void property_failed(const char* what, const char* detail) {
  std::fprintf(stderr, "fuzz property failed: %s: %s\n", what, detail);
  std::abort();
}

}  // namespace decodebench::fuzz
