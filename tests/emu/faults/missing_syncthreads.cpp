// Planted fault: a shared-memory exchange without the __syncthreads between the writes and the
// reads. ThreadSanitizer must report a data race (emulated threads are OS threads and the
// emulator adds no happens-before of its own). Registered only in the TSan build.
#include <cstdlib>
#include <vector>

#include "common/device.h"
#include "fault_main.h"

namespace {
struct Params {
  bool barrier;
  float* out;  // [blockDim.x]
};

__global__ void reverse_kernel(const __grid_constant__ Params p) {
  DECODEBENCH_SHARED(float, s, 64);
  const int t = static_cast<int>(threadIdx.x);
  s[t] = static_cast<float>(t);
  if (p.barrier) __syncthreads();  // the fault: skipped
  p.out[blockIdx.x * 64 + t] = s[63 - t];
}
}  // namespace

int main(int argc, char** argv) {
  const bool fault = decodebench::faults::planted(argc, argv);
  std::vector<float> out(128), expect(128);
  for (int i = 0; i < 128; ++i) expect[static_cast<std::size_t>(i)] = static_cast<float>(63 - i % 64);
  const Params p{!fault, out.data()};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(reverse_kernel, dim3(2), dim3(64), 0, nullptr, p))) {
    return rc;
  }
  // Without the barrier the values may still come out right by luck of scheduling; the race
  // report is what the test asserts.
  return decodebench::faults::compare(out.data(), expect.data(), 128, "out");
}
