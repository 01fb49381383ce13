// The once-per-kernel bookkeeping behind DECODEBENCH_LAUNCH's opt-in to more than 48 KiB of
// dynamic shared memory (kernels/device/device.h). cudaFuncSetAttribute takes a driver lock and
// costs microseconds; called on every launch it sits on the host path of every timed step.
// The attribute is a per-function, per-device upper bound, so it is set once per (kernel,
// device) and again only when a launch asks for more than was granted. Plain C++ (no CUDA
// types), so the rule is tested on any machine (tests/kernels/device/smem_opt_in_test.cpp).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace decodebench::dev {

class SmemOptInCache {
 public:
  // Makes sure `kernel` on `device` may use `bytes` of dynamic shared memory: calls
  // `set(bytes)` unless an earlier call already granted at least that much, and returns its
  // result. A value-initialized result (cudaSuccess, 0) means success; only a success is
  // remembered, so a failed opt-in is tried again (and fails again, with its error) next time.
  // Thread-safe: the lock is held across `set`, so two threads never race on one attribute.
  template <typename Set>
  auto ensure(const void* kernel, int device, std::size_t bytes, Set&& set)
      -> decltype(set(bytes)) {
    using Result = decltype(set(bytes));
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = granted_.find({kernel, device});
    if (it != granted_.end() && it->second >= bytes) return Result{};
    const Result r = set(bytes);
    if (r == Result{}) granted_[{kernel, device}] = bytes;
    return r;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<const void*, int>, std::size_t> granted_;  // (kernel, device) -> bytes
};

}  // namespace decodebench::dev
