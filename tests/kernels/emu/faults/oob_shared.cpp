// Planted fault: an off-by-one read past a static shared-memory array. Each shared array is
// its own exact-size heap allocation, so AddressSanitizer must report a heap-buffer-overflow.
// Registered only in the ASan build.
#include <vector>

#include "device/device.h"
#include "fault_main.h"

namespace {
struct Params {
  int shift;  // 1 = the fault: thread 63 reads s[64]
  float* out;
};

__global__ void shift_kernel(const __grid_constant__ Params p) {
  DECODEBENCH_SHARED(float, s, 64);
  const int t = static_cast<int>(threadIdx.x);
  s[t] = static_cast<float>(t);
  __syncthreads();
  const float* row = s;  // through a pointer, as kernels index tiles (UBSan's array-bound
                         // check would see s[64] first; the point here is ASan's)
  p.out[t] = row[t + p.shift];
}
}  // namespace

int main(int argc, char** argv) {
  const bool fault = decodebench::faults::planted(argc, argv);
  std::vector<float> out(64), expect(64);
  for (int i = 0; i < 64; ++i) expect[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const Params p{fault ? 1 : 0, out.data()};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(shift_kernel, dim3(1), dim3(64), 0, nullptr, p))) {
    return rc;
  }
  return decodebench::faults::compare(out.data(), expect.data(), 64, "out");
}
