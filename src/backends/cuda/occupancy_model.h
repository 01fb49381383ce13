// Resident thread blocks per SM from a kernel's resources, with no GPU at hand: the CUDA
// Toolkit's own occupancy calculator (cuda_occupancy.h, the rules behind
// cudaOccupancyMaxActiveBlocksPerMultiprocessor, register allocation per sub-partition included)
// fed the SM figures of a compute capability. The planner's tests and the static model use it
// to plan for an H100 or H200 here; on a GPU the backend asks the runtime for the real kernel.
#pragma once

#include <cstddef>
#include <string>

namespace decodebench::cuda {

// What a kernel asks of an SM per thread block.
struct KernelResources {
  int registers = 0;             // per thread, as ptxas allocated them
  std::size_t static_smem = 0;   // bytes of __shared__ declared in the kernel
  std::size_t dynamic_smem = 0;  // bytes passed at launch
  int threads = 0;               // per thread block
};

// What an SM of one compute capability offers (cudaDeviceProp's names).
struct SmSpec {
  int cc_major = 0;
  int cc_minor = 0;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int regs_per_block = 65536;
  int regs_per_sm = 65536;
  std::size_t smem_per_block = 48 * 1024;  // without opting in
  std::size_t smem_per_sm = 228 * 1024;
  std::size_t smem_per_block_optin = 227 * 1024;  // after cudaFuncSetAttribute
  std::size_t reserved_smem_per_block = 1024;     // the driver's, per resident block
};

// Compute capability 9.0: H100 and H200 (SXM, PCIe and NVL alike).
SmSpec hopper_sm();

struct Occupancy {
  int ctas_per_sm = 0;     // 0: one block does not fit (error says why)
  std::string limited_by;  // every binding limit: "warps", "registers", "shared memory", ...
  std::string error;       // why no block fits; empty when one does
};

// The toolkit's answer for `k` on an SM of `sm`. The kernel is assumed to have opted into as
// much dynamic shared memory as it launches with (the launchers do, above 48 KiB).
Occupancy occupancy(const KernelResources& k, const SmSpec& sm);

}  // namespace decodebench::cuda
