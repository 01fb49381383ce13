#include "backends/cuda/cuda_check.h"

#include <cstdio>
#include <string>

#include "common/errors.h"

namespace decodebench::cuda {
namespace {

// __FILE__ carries the build's absolute path; the part after src/ is what a reader needs.
std::string_view short_path(const char* file) {
  const std::string_view path(file);
  const std::size_t at = path.rfind("src/");
  return at == std::string_view::npos ? path : path.substr(at);
}

}  // namespace

std::string cuda_error_message(cudaError_t err, const char* call, const char* file, int line) {
  std::string msg(short_path(file));
  msg.append(":").append(std::to_string(line)).append(": ").append(call);
  msg.append(" failed: ").append(cudaGetErrorName(err));
  msg.append(" (").append(cudaGetErrorString(err)).append(")");
  return msg;
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw RuntimeFailure(cuda_error_message(err, call, file, line));
}

void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept {
  try {
    std::fprintf(stderr, "decodebench: warning: %s\n",
                 cuda_error_message(err, call, file, line).c_str());
  } catch (...) {
    std::fprintf(stderr, "decodebench: warning: %s failed (%d)\n", call, static_cast<int>(err));
  }
}

void check_launch(const kernels::LaunchResult& result, std::string_view what, const char* file,
                  int line) {
  if (result.ok()) return;
  std::string msg(short_path(file));
  msg.append(":").append(std::to_string(line)).append(": ").append(what);
  if (result.status == kernels::LaunchStatus::unsupported) {
    // The device is fine; this point is not: the harness records it as an error and goes on.
    msg += " cannot run this point: ";
    msg += result.message;
    throw InputError(msg);
  }
  msg += " failed on the device: ";
  msg += result.message;
  throw RuntimeFailure(msg);
}

}  // namespace decodebench::cuda
