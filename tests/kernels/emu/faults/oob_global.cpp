// Planted fault: a grid that covers one element more than the input holds, with no bounds
// check. The input is an exact-size host vector, so AddressSanitizer must report a
// heap-buffer-overflow. Registered only in the ASan build.
#include <vector>

#include "device/device.h"
#include "fault_main.h"

namespace {
struct Params {
  const float* in;  // [n]
  float* out;       // [n + 1]
  int n;
  bool bounds_check;
};

__global__ void scale_kernel(const __grid_constant__ Params p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (p.bounds_check && i >= p.n) return;  // the fault: skipped
  p.out[i] = 2.f * p.in[i];
}
}  // namespace

int main(int argc, char** argv) {
  const bool fault = decodebench::faults::planted(argc, argv);
  constexpr int kN = 95;  // 3 blocks of 32 cover 96 elements
  std::vector<float> in(kN), out(kN + 1), expect(kN);
  for (int i = 0; i < kN; ++i) {
    in[static_cast<std::size_t>(i)] = static_cast<float>(i);
    expect[static_cast<std::size_t>(i)] = 2.f * static_cast<float>(i);
  }
  const Params p{in.data(), out.data(), kN, !fault};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(scale_kernel, dim3(3), dim3(32), 0, nullptr, p))) {
    return rc;
  }
  return decodebench::faults::compare(out.data(), expect.data(), kN, "out");
}
