// Shared driver of the planted-fault executables: each runs a tiny kernel with the fault
// planted (`fault`) or without it (`fixed`), compares the result with a host reference and
// prints what went wrong. The CTest entries in tests/kernels/emu/CMakeLists.txt assert that `fault`
// is reported (by the emulator, the comparison or a sanitizer) and that `fixed` runs clean,
// so the check is shown both to bite and not to cry wolf.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "kernels.h"

namespace decodebench::faults {

// Prints the launch result; returns the process exit code part for it.
inline int report_launch(const kernels::LaunchResult& r) {
  if (!r.ok()) {
    std::printf("launch failed: %s\n", r.message.c_str());
    return 1;
  }
  return 0;
}

// Element-by-element comparison; prints the first mismatch as "wrong result: ...".
template <typename T>
int compare(const T* out, const T* expect, int n, const char* what) {
  for (int i = 0; i < n; ++i) {
    if (!(out[i] == expect[i])) {
      std::printf("wrong result: %s[%d] = %s, expected %s\n", what, i,
                  std::to_string(out[i]).c_str(), std::to_string(expect[i]).c_str());
      return 1;
    }
  }
  std::printf("%s: %d values match the reference\n", what, n);
  return 0;
}

// argv[1] is "fault" or "fixed"; returns true for "fault". Exits with 2 on a bad argument.
inline bool planted(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "fault") == 0) return true;
  if (argc == 2 && std::strcmp(argv[1], "fixed") == 0) return false;
  std::fprintf(stderr, "usage: %s fault|fixed\n", argv[0]);
  std::exit(2);
}

}  // namespace decodebench::faults
