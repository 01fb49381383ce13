// The CUDA backend's decisions that need no GPU: pure functions of device attributes and a
// sweep point, kept apart from the runtime calls so tests can check them on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels.h"
#include "results/self_check_record.h"
#include "workload/workload.h"

namespace decodebench::cuda {

// Headroom left free when deciding whether a point fits: the runtime's own allocations, the
// launch of the kernels and allocator rounding.
inline constexpr std::size_t kMemoryHeadroomBytes = std::size_t{256} << 20;

// Theoretical DRAM bandwidth in B/s: 2 transfers per memory clock (DDR) x bus width in bytes.
// `memory_clock_khz` as cudaDevAttrMemoryClockRate reports it; 0 when either input is unknown.
// H100 SXM: 2 x 2619 MHz x 5120 bit / 8 = 3.35 TB/s.
double theoretical_bandwidth(std::int64_t memory_clock_khz, std::int64_t bus_width_bits);

// Bytes of each bandwidth-ceiling buffer: at least 8x the L2 so the ceilings measure DRAM and
// not the cache (docs/design.md "Ceilings"), at least kMinCeilingBufferBytes for devices that
// report a small or no L2, rounded up to whole MiB (a multiple of 16, as the kernels require).
inline constexpr std::size_t kMinCeilingBufferBytes = std::size_t{256} << 20;
std::size_t ceiling_buffer_bytes(std::size_t l2_bytes);
// The largest buffer size (whole MiB) of which three, plus kMemoryHeadroomBytes, fit into
// `free_bytes`; 0 when not even 1 MiB does.
std::size_t ceiling_buffer_bytes_that_fit(std::size_t free_bytes);

// Device memory one prepared point holds, per tensor, in bytes.
struct PointFootprint {
  std::size_t q = 0;             // [batch][Hq][d]                       q_dtype
  std::size_t out = 0;           // [batch][Hq][d]                       q_dtype
  std::size_t k_cache = 0;       // [num_blocks][Hkv][P][d]  kv_dtype (+ scales, zeros: int formats)
  std::size_t v_cache = 0;       // [num_blocks][Hkv][P][d]  kv_dtype (+ scales, zeros: int formats)
  std::size_t block_tables = 0;  // [batch][max_blocks_per_seq]          int32
  std::size_t context_lens = 0;  // [batch]                              int32
  std::size_t workspace = 0;     // kernels::plan_workspace() (a workspace rung; else 0)
  std::size_t prefix_plan = 0;   // kernels::PrefixPlan::packed()   int32 (prefix-aware rungs)
  int num_splits = 1;            // the planner's split count (1 unless the kernel splits)
  std::size_t total() const {
    return q + out + k_cache + v_cache + block_tables + context_lens + workspace + prefix_plan;
  }
};
// `gpu`: the residency of the instance of `kernel` that would run `p` (read only by a kernel
// that splits: the planner's input). A prefix-aware kernel's plan is found in p's host block
// tables (plan_prefixes; none without tables).
PointFootprint point_footprint(const kernels::PagedDecodeParams& p,
                               const kernels::KernelInfo& kernel, const kernels::ResidentCtas& gpu);

// Empty when `need` fits into `free_bytes` less the headroom; else
// "needs 151.20 GB of device memory (K/V cache 150.00 GB, ...), device has 139.10 GB free".
std::string memory_skip_reason(const PointFootprint& need, std::size_t free_bytes);

// InputError text for a --device index outside [0, names.size()), listing the devices.
std::string bad_device_message(int requested, const std::vector<std::string>& device_names);

// ---- what the GPU can run (docs/design.md "GPU architectures") ---------------------------

// The decode kernels' floor: cp.async, ldmatrix and mma.sync need compute capability 8.0.
inline constexpr int kMinComputeCapability = 80;  // 10 x major + minor

// "" when a device of compute capability cc_major.cc_minor can run kernels compiled for
// `cuda_architectures` (CMAKE_CUDA_ARCHITECTURES as CMake takes it, ';' or ',' between entries:
// "80;90a", "100a-real", "121-virtual"); else why not, in one sentence that names both and how to
// rebuild. An entry runs there when its SASS matches (sm_XY, and sm_XYf: major X, minor Y or above;
// sm_XYa: exactly X.Y) or its PTX can be compiled for the device by the driver (compute_XY: X.Y or
// newer; compute_XYa / XYf: as their SASS). A plain "XY" or "XYa" carries both, "-real" SASS
// only, "-virtual" PTX only. An entry it cannot read ("all", "native") is taken to run. A
// device below kMinComputeCapability is refused whatever the build.
std::string build_arch_error(std::string_view cuda_architectures, int cc_major, int cc_minor);

// What the device offers one thread block of a decode kernel.
struct DeviceLimits {
  int cc_major = 0;
  int cc_minor = 0;
  std::size_t smem_per_block_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin; 0: unknown
};
// "" when the device can run `kernel` on p's shape; else why not, one sentence: a device below
// kMinComputeCapability, or `smem_bytes` (the static plus dynamic shared memory of one thread
// block of the kernel launch_shape reports for p) over what the device grants a block ("kernel
// 'tc' needs 140.2 KiB of shared memory per thread block for f16 KV at head_dim 256; this GPU
// (compute capability 8.9) allows 99.0 KiB"). Pure: the backend passes its device's limits.
std::string device_skip_reason(const DeviceLimits& gpu, const kernels::KernelInfo& kernel,
                               const kernels::PagedDecodeParams& p, std::size_t smem_bytes);

// ---- cold-L2 flush and warm-L2 timing (docs/design.md "Timing") ---------------------------

// What the cold-L2 flush (cuda::L2Flusher) enqueues before each cold sample, in this order, all
// of it before the start event (ordered before the step, not timed):
//   1. a memset of `write_bytes` (2x the L2): evicts every line the previous step left in L2,
//      the K/V it read and the output it wrote;
//   2. the bandwidth `read` kernel over `read_bytes` of a second buffer, `read_grid` blocks of
//      `read_block` threads. The memset leaves about one L2 of dirty lines; left there, the
//      timed step would write them back inside its window (~40 % extra DRAM traffic at batch 1
//      x 32k). The read replaces them with clean lines, so their write-back happens here. 2x the
//      L2 like the write, since the replacement is not exact LRU, and at least
//      kMinFlushReadBytes: the flush must keep the GPU busy for longer than the host takes to
//      record the start event and launch the step (CudaPoint::time_one relies on it). What
//      stays dirty is the read's own sink, read_grid floats.
// An L2 of 0 (not reported) gives an empty plan: nothing to evict.
inline constexpr std::size_t kMinFlushReadBytes = std::size_t{64} << 20;
inline constexpr int kFlushReadBlock = 256;
inline constexpr int kFlushReadBlocksPerSm = 4;
struct L2FlushPlan {
  std::size_t write_bytes = 0;  // multiple of 16
  std::size_t read_bytes = 0;   // multiple of 16, as the read kernel requires
  int read_grid = 0;            // also the read's sink size, floats
  int read_block = 0;
  bool empty() const { return write_bytes == 0 && read_bytes == 0; }
};
L2FlushPlan plan_l2_flush(std::size_t l2_bytes, int sm_count);
// What a point records of its flush (results/self_check.h check_flush): the smaller of the two
// passes, since each must cover 2x the L2 for its purpose (the memset to evict, the read to
// replace the dirty lines), against the L2 it had to beat.
FlushRecord flush_record(const L2FlushPlan& plan, std::size_t l2_bytes);

// Warm-L2 samples time N steps back to back between two events and divide by N (one step of a
// few us is too close to the launch latency and the events' 0.5 us resolution). N is chosen
// once per point from an estimate of one step, so that a sample covers at least
// kWarmSampleSeconds of GPU time: ceil(kWarmSampleSeconds / estimate_s), clamped to
// [1, kMaxStepsPerSample]; an estimate that is not positive (below the events' resolution, or
// NaN) gives kMaxStepsPerSample.
inline constexpr double kWarmSampleSeconds = 1e-3;
inline constexpr int kMaxStepsPerSample = 1000;
int steps_per_sample(double estimate_s);

// Untimed steps enqueued right before a warm sample's start event, so the GPU is still busy
// with them while the host records the event and launches the timed steps: the window then
// starts with the GPU, not with the host's launch path. They cover kLeadInSeconds (longer than
// that host path): ceil(kLeadInSeconds / estimate_s), clamped to [1, kMaxStepsPerSample];
// kMaxStepsPerSample for an estimate that is not positive. They run on warm data, so the
// timed steps still find the L2 warm.
inline constexpr double kLeadInSeconds = 50e-6;
int lead_in_steps(double estimate_s);

}  // namespace decodebench::cuda
