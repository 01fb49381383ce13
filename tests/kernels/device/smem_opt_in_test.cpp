// The once-per-kernel opt-in to large dynamic shared memory (kernels/device/smem_opt_in.h),
// with a counting setter in place of cudaFuncSetAttribute: one call per (kernel, device), again
// only for more bytes than granted, and a failure never remembered as a success.
#include "device/smem_opt_in.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace decodebench::dev {
namespace {

// Stands in for cudaError_t: 0 is success.
enum class Err { ok = 0, too_much = 1 };

struct FakeSetter {
  int calls = 0;
  std::size_t limit = 227 * 1024;  // the device's maximum
  Err operator()(std::size_t bytes) {
    ++calls;
    return bytes <= limit ? Err::ok : Err::too_much;
  }
};

const char kKernelA = 0, kKernelB = 0;  // two distinct addresses stand in for two kernels

TEST(SmemOptIn, SetsOncePerKernelAndDevice) {
  SmemOptInCache cache;
  FakeSetter set;
  auto ensure = [&](const void* kernel, int device, std::size_t bytes) {
    return cache.ensure(kernel, device, bytes, [&](std::size_t b) { return set(b); });
  };
  EXPECT_EQ(ensure(&kKernelA, 0, 100'000), Err::ok);
  EXPECT_EQ(set.calls, 1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ensure(&kKernelA, 0, 100'000), Err::ok);
  EXPECT_EQ(ensure(&kKernelA, 0, 60'000), Err::ok);  // less than granted: no call
  EXPECT_EQ(set.calls, 1);
  EXPECT_EQ(ensure(&kKernelB, 0, 100'000), Err::ok);  // another kernel
  EXPECT_EQ(ensure(&kKernelA, 1, 100'000), Err::ok);  // another device
  EXPECT_EQ(set.calls, 3);
  EXPECT_EQ(ensure(&kKernelA, 0, 150'000), Err::ok);  // more than granted: set again
  EXPECT_EQ(set.calls, 4);
  EXPECT_EQ(ensure(&kKernelA, 0, 120'000), Err::ok);
  EXPECT_EQ(set.calls, 4);
}

TEST(SmemOptIn, AFailureIsReturnedAndNotRemembered) {
  SmemOptInCache cache;
  FakeSetter set;
  auto ensure = [&](std::size_t bytes) {
    return cache.ensure(&kKernelA, 0, bytes, [&](std::size_t b) { return set(b); });
  };
  EXPECT_EQ(ensure(300'000), Err::too_much);
  EXPECT_EQ(ensure(300'000), Err::too_much);  // asked again, fails again with its error
  EXPECT_EQ(set.calls, 2);
  EXPECT_EQ(ensure(100'000), Err::ok);  // the failed size granted nothing
  EXPECT_EQ(set.calls, 3);
  EXPECT_EQ(ensure(300'000), Err::too_much);  // a grant of less does not cover more
  EXPECT_EQ(set.calls, 4);
  EXPECT_EQ(ensure(100'000), Err::ok);
  EXPECT_EQ(set.calls, 4);
}

TEST(SmemOptIn, ThreadsShareOneGrant) {
  SmemOptInCache cache;
  FakeSetter set;  // guarded by the cache's lock: calls happen under it
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        (void)cache.ensure(&kKernelA, 0, 100'000, [&](std::size_t b) { return set(b); });
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(set.calls, 1);
}

}  // namespace
}  // namespace decodebench::dev
