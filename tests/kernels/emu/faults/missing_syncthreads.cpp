// Planted fault: a shared-memory exchange without the __syncthreads between the writes and the
// reads. ThreadSanitizer must report a data race (emulated threads are OS threads and the
// emulator adds no happens-before of its own). Registered only in the TSan build.
#include <cstdlib>
#include <vector>

#include "device/device.h"
#include "fault_main.h"

namespace {
constexpr int kRounds = 8;
constexpr int kGrid = 4;

struct Params {
  bool barrier;
  float* out;  // [blockDim.x]
};

__global__ void reverse_kernel(const __grid_constant__ Params p) {
  DECODEBENCH_SHARED(float, s, 64);
  const int t = static_cast<int>(threadIdx.x);
  // Several rounds and blocks: TSan samples a bounded history per memory word, so one racy
  // pair could be missed in an unlucky interleaving; 8 rounds x 4 blocks make that vanishingly
  // unlikely.
  float v = static_cast<float>(t);
  // Every thread of the block is running from here on: without this rendezvous one thread may
  // finish all its rounds before its partner starts, a schedule in which TSan missed the race
  // (about 1 run in 50 on a loaded 2-core machine). The barrier orders nothing that follows it.
  __syncthreads();
  for (int round = 0; round < kRounds; ++round) {
    s[t] = v;
    if (p.barrier) __syncthreads();  // the fault: skipped
    v = s[63 - t] + 1.f;
    if (p.barrier) __syncthreads();  // the fault: skipped
  }
  p.out[blockIdx.x * 64 + t] = v;
}
}  // namespace

int main(int argc, char** argv) {
  const bool fault = decodebench::faults::planted(argc, argv);
  std::vector<float> out(kGrid * 64), expect(kGrid * 64);
  for (int i = 0; i < kGrid * 64; ++i) {
    const int t = i % 64;  // after an even number of swaps each thread holds its own index
    expect[static_cast<std::size_t>(i)] = static_cast<float>(t + kRounds);
  }
  const Params p{!fault, out.data()};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(reverse_kernel, dim3(kGrid), dim3(64), 0, nullptr, p))) {
    return rc;
  }
  // Without the barrier the values may still come out right by luck of scheduling; the race
  // report is what the test asserts.
  return decodebench::faults::compare(out.data(), expect.data(), kGrid * 64, "out");
}
