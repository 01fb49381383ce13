// Planted fault: a tile staged through shared memory with cp.async, read after the barrier but
// without cp_async_wait. The emulator performs a thread's copies at its wait, so the reads see
// the shared-memory poison (NaN) and the reference comparison must catch the wrong result.
#include <vector>

#include "device/device.h"
#include "fault_main.h"

namespace {
struct Params {
  bool wait;
  const float* in;  // [grid][128]
  float* out;       // [grid][32]: sums of 4 neighbours
};

__global__ void stage_kernel(const __grid_constant__ Params p) {
  DECODEBENCH_SHARED(float, tile, 128);
  const int t = static_cast<int>(threadIdx.x);  // 32 threads, 16 bytes each
  const float* src = p.in + blockIdx.x * 128;
  decodebench::dev::cp_async<16>(&tile[4 * t], src + 4 * t, 16);
  decodebench::dev::cp_async_commit();
  if (p.wait) decodebench::dev::cp_async_wait<0>();  // the fault: skipped
  __syncthreads();
  const int r = (t + 1) % 32;  // read another thread's 16 bytes
  p.out[blockIdx.x * 32 + t] = tile[4 * r] + tile[4 * r + 1] + tile[4 * r + 2] + tile[4 * r + 3];
}
}  // namespace

int main(int argc, char** argv) {
  const bool fault = decodebench::faults::planted(argc, argv);
  constexpr int kGrid = 3;
  std::vector<float> in(kGrid * 128), out(kGrid * 32), expect(kGrid * 32);
  for (int i = 0; i < kGrid * 128; ++i)
    in[static_cast<std::size_t>(i)] = static_cast<float>(i % 17);
  for (int b = 0; b < kGrid; ++b) {
    for (int t = 0; t < 32; ++t) {
      const int r = (t + 1) % 32;
      float sum = 0;
      for (int e = 0; e < 4; ++e) sum += in[static_cast<std::size_t>(b * 128 + 4 * r + e)];
      expect[static_cast<std::size_t>(b * 32 + t)] = sum;
    }
  }
  const Params p{!fault, in.data(), out.data()};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(stage_kernel, dim3(kGrid), dim3(32), 0, nullptr, p))) {
    return rc;
  }
  return decodebench::faults::compare(out.data(), expect.data(), kGrid * 32, "out");
}
