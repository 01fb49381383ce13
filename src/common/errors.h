// Exceptions the CLI maps to exit codes (README.md "Commands"): library code never exits.
#pragma once

#include <stdexcept>
#include <string>

namespace decodebench {

// Bad input from the user: a flag, a config file, a model preset. Exit code 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A runtime or device failure (CUDA error, emulator fault, I/O). Exit code 3.
struct RuntimeFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitWrongOrRegression = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitRuntimeFailure = 3;

}  // namespace decodebench
