// Planted fault: a segmented scan (segments of 8 lanes) whose segment totals are broadcast
// with __shfl_sync(v, 7, width) but with the default width of 32, so every segment gets the
// first segment's total. The reference comparison must catch it.
#include <vector>

#include "device/device.h"
#include "fault_main.h"

namespace {
constexpr int kSegment = 8;
struct Params {
  int width;  // kSegment is right; 32 is the fault
  const int* in;
  int* out;
};

__global__ void segmented_scan_kernel(const __grid_constant__ Params p) {
  const int t = static_cast<int>(threadIdx.x);
  int v = p.in[t];
  for (int delta = 1; delta < kSegment; delta *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, v, static_cast<unsigned>(delta), p.width);
    if (t % kSegment >= delta) v += up;
  }
  // Broadcast the segment total from the segment's last lane (lane 7 of the segment).
  const int total = __shfl_sync(0xffffffffu, v, kSegment - 1, p.width);
  p.out[t] = 1000 * total + v;  // inclusive prefix and the segment's total
}
}  // namespace

int main(int argc, char** argv) {
  const bool fault = decodebench::faults::planted(argc, argv);
  constexpr int kThreads = 64;
  std::vector<int> in(kThreads), out(kThreads), expect(kThreads);
  for (int i = 0; i < kThreads; ++i) in[static_cast<std::size_t>(i)] = 1 + i % 5;
  for (int i = 0; i < kThreads; ++i) {
    int sum = 0;
    for (int j = i / kSegment * kSegment; j <= i; ++j) sum += in[static_cast<std::size_t>(j)];
    int total = 0;
    for (int j = i / kSegment * kSegment; j < i / kSegment * kSegment + kSegment; ++j) {
      total += in[static_cast<std::size_t>(j)];
    }
    expect[static_cast<std::size_t>(i)] = 1000 * total + sum;
  }
  const Params p{fault ? 32 : kSegment, in.data(), out.data()};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(segmented_scan_kernel, dim3(1), dim3(kThreads), 0, nullptr, p))) {
    return rc;
  }
  return decodebench::faults::compare(out.data(), expect.data(), kThreads, "out");
}
