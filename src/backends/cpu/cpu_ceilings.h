// Measured CPU ceilings: the roofs of the CPU roofline (docs/design.md "Ceilings").
//
//   read   vectorized sum over one buffer (the sum is returned, so the loads stay live)
//   copy   dst = src; counted as bytes read + bytes written (STREAM convention: the
//          write-allocate read of dst is real traffic that is not counted)
//   triad  a = b + s * c; 3 arrays counted
//   fma    fp32 FMAs on registers only: 16 independent 16-wide chains per thread, enough to
//          cover FMA latency x ports on any current x86 core; 2 FLOP per FMA
//
// Bandwidth buffers are >= 8x the last-level cache so no repetition is served from cache; every
// thread first-touches exactly the part it later streams (static partition), and the best of
// several repetitions is kept. All kernels run on all OpenMP threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"  // Ceilings, Backend::SelfCheck

namespace decodebench::cpu {

struct CeilingOptions {
  // Bytes of each bandwidth buffer; 0 = llc_multiple x the last-level cache. The environment
  // variable DECODEBENCH_CEILING_BYTES, when set, overrides both (for tests and small machines).
  std::int64_t buffer_bytes = 0;
  double llc_multiple = 8;
  // The most llc_multiple x LLC may ask for: past a few times the cache a stream measures nothing
  // new, and some VMs report the host's whole L3 (480 MiB: 11 GiB of buffers at x 8), which
  // leaves nothing for the sweep or a second process.
  std::int64_t max_buffer_bytes = std::int64_t{2} << 30;
  int repetitions = 5;                       // best of
  int num_threads = 0;                       // 0: omp_get_max_threads()
  std::int64_t fma_iterations = 20'000'000;  // per thread per repetition
};

// Runs read, copy, triad and the FMA peak. If the three buffers of llc_multiple x LLC do not fit
// in half the available memory, the buffers are shrunk to fit and Ceilings::note says so.
Ceilings measure_ceilings(const CeilingOptions& options = {});

// Runs every ceiling kernel on a small buffer and verifies its result.
std::vector<Backend::SelfCheck> check_ceiling_kernels();

// ---- The kernels (multi-threaded; `threads` <= 0 means omp_get_max_threads()) ---------------
// Element counts are multiples of kCeilingChunk floats; pointers 64-byte aligned.
inline constexpr std::size_t kCeilingChunk = 64;  // floats per inner step: 4 x 16-wide vectors

// First-touch fill with the same static partition the kernels use: x[i] = pattern(i).
// pattern(i) = (i % 4) + offset, small integers, so sums stay exact in fp32.
void fill_pattern(float* x, std::size_t n, float offset, int threads);
double read_kernel(const float* src, std::size_t n, int threads);  // returns the sum
void copy_kernel(const float* src, float* dst, std::size_t n, int threads);
void triad_kernel(float* a, const float* b, const float* c, float scalar, std::size_t n,
                  int threads);
// x <- x * m + (1 - m) on every lane of 16 independent chains, `iterations` times, chain k
// starting from 0.5 k / 16, on each thread; returns the mean final value over all lanes
// (1 - (1 - mean start) m^iterations analytically).
double fma_kernel(std::int64_t iterations, float m, int threads);
// FLOPs fma_kernel performs per iteration per thread.
std::int64_t fma_flops_per_iteration();

// ---- Result checkers (each has a test that plants a fault) ----------------------------------
Backend::SelfCheck verify_read(std::span<const float> src, double kernel_sum);
Backend::SelfCheck verify_copy(std::span<const float> src, std::span<const float> dst);
Backend::SelfCheck verify_triad(std::span<const float> a, std::span<const float> b,
                                std::span<const float> c, float scalar);
Backend::SelfCheck verify_fma(double kernel_value, std::int64_t iterations, float m);

// ---- Host facts ----------------------------------------------------------------------------
std::int64_t last_level_cache_bytes();  // sysfs cache hierarchy, else sysconf; 0 if unknown
std::int64_t available_memory_bytes();  // /proc/meminfo MemAvailable; 0 if unknown

// ---- Cold caches for the timed samples --------------------------------------------------------
// The CPU counterpart of the GPU's L2 flush (docs/design.md "Timing"). Before a cold sample the cpu
// backend (1) writes back and evicts every line of the point's own buffers with
// evict_from_caches (clflushopt), and (2) reads a region of 2x the last-level cache (at least
// 64 MiB) on every thread with CacheFlusher, which empties the caches of everything else. Step
// (1) is what makes small points cold: on the Zen 5 VM a 32 MiB KV cache re-read after step (2)
// alone still came at 80 GB/s, mostly from the L3 (its victim policy keeps streamed lines
// out), against 53 GB/s after clflushopt. Costs ~0.3 ms per 32 MiB evicted plus ~1 ms for the
// read. The reads rotate over kRegions disjoint regions, so the region read was last touched two
// flushes ago and comes from DRAM: timed, each is a read-bandwidth sample of the sample's own
// moment (PreparedPoint::paired_read_Bps); re-reading one 2x-LLC buffer back to back instead
// measured ~115 GB/s against the ~88 GB/s DRAM reads of the Zen 5 VM.

// Writes back and evicts from every cache level the lines of [data, data + bytes), on
// `threads` threads (<= 0: all). clflushopt where the build targets it, else clflush; a no-op
// off x86-64. Contents are unchanged.
void evict_from_caches(const void* data, std::size_t bytes, int threads = 0);
class CacheFlusher {
 public:
  explicit CacheFlusher(std::int64_t llc_bytes = last_level_cache_bytes(), int threads = 0);
  ~CacheFlusher();
  CacheFlusher(const CacheFlusher&) = delete;
  CacheFlusher& operator=(const CacheFlusher&) = delete;

  static constexpr int kRegions = 3;

  // Reads the next region; returns the sum read (the regions hold fill_pattern's values, so the
  // caller can check every element was read).
  double flush();
  std::size_t bytes() const { return floats_ * sizeof(float); }  // read by one flush
  // What bytes() is for a flusher of `llc_bytes` (the sweep's --plan, without making one).
  static std::size_t bytes_for(std::int64_t llc_bytes);
  std::size_t floats() const { return floats_; }
  // The read of one flush beside the last-level cache it must beat (the self-check small_flush:
  // 2x an LLC of 0, unknown, passes trivially, so the floor of bytes_for is all that holds then).
  FlushRecord record() const {
    return {static_cast<double>(bytes()), static_cast<double>(llc_bytes_)};
  }

 private:
  float* data_ = nullptr;  // kRegions regions of floats_ floats
  std::size_t floats_ = 0;
  int threads_ = 0;
  int next_ = 0;  // region the next flush reads
  std::int64_t llc_bytes_ = 0;
};

}  // namespace decodebench::cpu
