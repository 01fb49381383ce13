// The CUDA backend's decisions that need no GPU: pure functions of device attributes and a
// sweep point, kept apart from the runtime calls so tests can check them on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels.h"
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
  std::size_t k_cache = 0;       // [num_blocks][Hkv][P][d]              kv_dtype
  std::size_t v_cache = 0;       // [num_blocks][Hkv][P][d]              kv_dtype
  std::size_t block_tables = 0;  // [batch][max_blocks_per_seq]          int32
  std::size_t context_lens = 0;  // [batch]                              int32
  std::size_t workspace = 0;     // kernels::split_kv_workspace() (split_kv; else 0)
  int num_splits = 1;            // the planner's split count (1 unless the kernel splits)
  std::size_t total() const {
    return q + out + k_cache + v_cache + block_tables + context_lens + workspace;
  }
};
// `gpu`: the residency of the instance of `kernel` that would run `p` (read only by a kernel
// that splits: the planner's input).
PointFootprint point_footprint(const kernels::PagedDecodeParams& p,
                               const kernels::KernelInfo& kernel, const kernels::ResidentCtas& gpu);

// Empty when `need` fits into `free_bytes` less the headroom; else
// "needs 151.20 GB of device memory (K/V cache 150.00 GB, ...), device has 139.10 GB free".
std::string memory_skip_reason(const PointFootprint& need, std::size_t free_bytes);

// "12.35 GB" (SI, GB = 1e9, as everywhere in decodebench).
std::string format_gb(double bytes);

// InputError text for a --device index outside [0, names.size()), listing the devices.
std::string bad_device_message(int requested, const std::vector<std::string>& device_names);

}  // namespace decodebench::cuda
