// Error checking for the CUDA runtime (host code, compiled by the host compiler).
//
//   DECODEBENCH_CUDA_CHECK(cudaMalloc(&p, n));          throws RuntimeFailure on an error
//   DECODEBENCH_CUDA_CHECK_NOTHROW(cudaFree(p));        logs to stderr instead (destructors)
//   check_launch(kernels::launch_fill(p, s), "fill");   a kernels.h LaunchResult -> exception
//
// The message names the file:line, the call as written, and CUDA's error name and string, so a
// report of a failure says where it came from without a debugger. A sticky device error (an
// illegal address in a kernel, say) makes every later call fail the same way; each one turns
// into a RuntimeFailure, which the harness takes as "end the sweep, keep the finished points".
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "kernels.h"

namespace decodebench::cuda {

// "file.cpp:42: cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of memory)"
std::string cuda_error_message(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
// Writes the message to stderr; for destructors and other places that must not throw.
void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept;

// A launcher's result as an exception: `failed` -> RuntimeFailure (the CUDA error is in the
// message: the device is in doubt, the sweep ends), `unsupported` -> InputError (the launcher's
// preconditions refused this point: the harness records the point as an error with the reason
// and goes on). Backend::skip_reason consults the registry (kernels::unsupported_reason) first,
// so an `unsupported` here means the registry and the launcher disagree.
void check_launch(const kernels::LaunchResult& result, std::string_view what, const char* file,
                  int line);

}  // namespace decodebench::cuda

#define DECODEBENCH_CUDA_CHECK(call)                                                           \
  do {                                                                                         \
    const cudaError_t decodebench_cuda_err_ = (call);                                          \
    if (decodebench_cuda_err_ != cudaSuccess) {                                                \
      ::decodebench::cuda::throw_cuda_error(decodebench_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                          \
  } while (0)

#define DECODEBENCH_CUDA_CHECK_NOTHROW(call)                                                 \
  do {                                                                                       \
    const cudaError_t decodebench_cuda_err_ = (call);                                        \
    if (decodebench_cuda_err_ != cudaSuccess) {                                              \
      ::decodebench::cuda::log_cuda_error(decodebench_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                        \
  } while (0)

// Checks a kernels.h launch: DECODEBENCH_CHECK_LAUNCH(kernels::cuda::launch_fill(p, s), "fill").
#define DECODEBENCH_CHECK_LAUNCH(launch, what) \
  ::decodebench::cuda::check_launch((launch), (what), __FILE__, __LINE__)
