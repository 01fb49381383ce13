// Where the full request traces are (../shared/data/traces beside the checkout): tests that read
// them skip with a message where the directory does not exist.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace decodebench::testing {

inline std::filesystem::path shared_traces_dir() {
  // The environment overrides the build's path (a checkout whose ../shared is elsewhere).
  if (const char* env = std::getenv("DECODEBENCH_SHARED_TRACES_DIR"); env && *env) return env;
  return DECODEBENCH_SHARED_TRACES_DIR;
}

}  // namespace decodebench::testing
