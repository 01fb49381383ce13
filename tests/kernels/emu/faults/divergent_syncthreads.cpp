// Planted faults the emulator itself must report, promptly and without hanging:
//   fault     a __syncthreads inside a branch taken by part of the block, followed by one all
//             threads reach: one barrier phase sees two call sites.
//   deadlock  lane 0 waits at __syncthreads while the rest of its warp waits in a shuffle.
//   hang      one thread never reaches a primitive again (it sleeps forever) while the others
//             wait at the barrier: reported after DECODEBENCH_EMU_TIMEOUT_S of no progress.
//   fixed     the barrier outside the branch: runs clean.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "device/device.h"
#include "fault_main.h"

namespace {
enum class Variant { fixed, divergent, deadlock, hang };
struct Params {
  Variant variant;
  int* out;  // [blockDim.x]
};

__global__ void branchy_kernel(const __grid_constant__ Params p) {
  DECODEBENCH_SHARED(int, s, 64);
  const int t = static_cast<int>(threadIdx.x);
  s[t] = t;
  switch (p.variant) {
    case Variant::fixed: break;
    case Variant::divergent:
      if (t < 16) __syncthreads();  // the fault
      break;
    case Variant::deadlock:
      if (t == 0) {
        __syncthreads();
      } else if (t < 32) {
        (void)__shfl_xor_sync(0xffffffffu, t, 1);
      }
      break;
    case Variant::hang:
      if (t == 7) {
        for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      break;
  }
  __syncthreads();
  p.out[t] = s[63 - t];
}
}  // namespace

int main(int argc, char** argv) {
  Variant variant = Variant::fixed;
  if (argc == 2 && std::strcmp(argv[1], "fault") == 0)
    variant = Variant::divergent;
  else if (argc == 2 && std::strcmp(argv[1], "deadlock") == 0)
    variant = Variant::deadlock;
  else if (argc == 2 && std::strcmp(argv[1], "hang") == 0)
    variant = Variant::hang;
  else if (!(argc == 2 && std::strcmp(argv[1], "fixed") == 0)) {
    std::fprintf(stderr, "usage: %s fault|deadlock|hang|fixed\n", argv[0]);
    return 2;
  }
  std::vector<int> out(64), expect(64);
  for (int i = 0; i < 64; ++i) expect[static_cast<std::size_t>(i)] = 63 - i;
  const Params p{variant, out.data()};
  if (int rc = decodebench::faults::report_launch(
          DECODEBENCH_LAUNCH(branchy_kernel, dim3(2), dim3(64), 0, nullptr, p))) {
    return rc;
  }
  return decodebench::faults::compare(out.data(), expect.data(), 64, "out");
}
