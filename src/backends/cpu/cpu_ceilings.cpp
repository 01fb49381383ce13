// CPU ceiling kernels. Written with GCC/Clang vector extensions (16 floats = one zmm with
// AVX-512, two ymm with AVX2, four xmm otherwise), so the same source is explicit about vector
// width and independent accumulators on any x86-64.
#include "backends/cpu/cpu_ceilings.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <utility>

#include "common/errors.h"
#include "common/units.h"

namespace decodebench::cpu {
namespace {

using V16 = float __attribute__((vector_size(64)));

inline V16 load_v(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_v(float* p, V16 v) { std::memcpy(p, &v, sizeof v); }

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// The static partition every kernel and the first-touch fill share: thread t of nt owns chunks
// [begin, end) of n / kCeilingChunk chunks.
std::pair<std::size_t, std::size_t> my_chunks(std::size_t n) {
  const std::size_t chunks = n / kCeilingChunk;
  const auto t = static_cast<std::size_t>(omp_get_thread_num());
  const auto nt = static_cast<std::size_t>(omp_get_num_threads());
  return {chunks * t / nt, chunks * (t + 1) / nt};
}

void require_chunked(std::size_t n, const char* what) {
  if (n % kCeilingChunk != 0)
    throw InputError(std::string(what) + ": element count " + std::to_string(n) +
                     " is not a multiple of " + std::to_string(kCeilingChunk));
}

// 64-byte aligned, uninitialized (first touch happens in fill_pattern, by the owning threads).
struct AlignedFree {
  void operator()(float* p) const { ::operator delete(p, std::align_val_t(64)); }
};
using Buffer = std::unique_ptr<float, AlignedFree>;
Buffer allocate(std::size_t floats) {
  void* p = ::operator new(floats * sizeof(float), std::align_val_t(64));
#if defined(MADV_HUGEPAGE)
  // Fewer TLB misses while streaming GiBs; advice only, failure is harmless.
  ::madvise(p, floats * sizeof(float), MADV_HUGEPAGE);
#endif
  return Buffer(static_cast<float*>(p));
}

template <typename F>
double best_seconds(int repetitions, F&& body) {
  double best = INFINITY;
  for (int r = 0; r < repetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return best;
}

Backend::SelfCheck make_check(std::string name, bool ok, std::string detail) {
  return {std::move(name), ok, std::move(detail)};
}

}  // namespace

// ---- kernels ------------------------------------------------------------------------------

void fill_pattern(float* x, std::size_t n, float offset, int threads) {
  require_chunked(n, "fill_pattern");
#pragma omp parallel num_threads(resolve_threads(threads))
  {
    const auto [begin, end] = my_chunks(n);
    for (std::size_t i = begin * kCeilingChunk; i < end * kCeilingChunk; ++i)
      x[i] = static_cast<float>(i % 4) + offset;
  }
}

// ---- cold caches -----------------------------------------------------------------------------

void evict_from_caches(const void* data, std::size_t bytes, int threads) {
#if defined(__x86_64__)
  if (bytes == 0) return;
  const auto first = reinterpret_cast<std::uintptr_t>(data) & ~std::uintptr_t{63};
  const auto end = reinterpret_cast<std::uintptr_t>(data) + bytes;
  const auto lines = static_cast<std::int64_t>((end - first + 63) / 64);
#pragma omp parallel for schedule(static) num_threads(resolve_threads(threads))
  for (std::int64_t i = 0; i < lines; ++i) {
    auto* line = reinterpret_cast<void*>(first + static_cast<std::uintptr_t>(i) * 64);
#if defined(__CLFLUSHOPT__)
    _mm_clflushopt(line);
#else
    _mm_clflush(line);
#endif
  }
  _mm_sfence();  // clflushopt is weakly ordered: done before the timed read starts
#else
  (void)data;
  (void)bytes;
  (void)threads;
#endif
}

std::size_t CacheFlusher::bytes_for(std::int64_t llc_bytes) {
  constexpr std::size_t kMinBytes = std::size_t{64} << 20;
  const std::size_t want =
      std::max(kMinBytes, 2 * static_cast<std::size_t>(std::max<std::int64_t>(llc_bytes, 0)));
  const std::size_t per_chunk = kCeilingChunk * sizeof(float);
  return (want + per_chunk - 1) / per_chunk * per_chunk;
}

CacheFlusher::CacheFlusher(std::int64_t llc_bytes, int threads)
    : threads_(threads), llc_bytes_(std::max<std::int64_t>(llc_bytes, 0)) {
  floats_ = bytes_for(llc_bytes) / sizeof(float);
  data_ = allocate(kRegions * floats_).release();
  fill_pattern(data_, kRegions * floats_, 0.0f, threads_);
}

CacheFlusher::~CacheFlusher() { AlignedFree{}(data_); }

double CacheFlusher::flush() {
  const float* region = data_ + static_cast<std::size_t>(next_) * floats_;
  next_ = (next_ + 1) % kRegions;
  return read_kernel(region, floats_, threads_);
}

double read_kernel(const float* src, std::size_t n, int threads) {
  require_chunked(n, "read_kernel");
  double total = 0;
#pragma omp parallel num_threads(resolve_threads(threads)) reduction(+ : total)
  {
    const auto [begin, end] = my_chunks(n);
    // Four independent vector accumulators: the adds of one chunk do not wait on each other.
    V16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (std::size_t c = begin; c < end; ++c) {
      const float* p = src + c * kCeilingChunk;
      a0 += load_v(p);
      a1 += load_v(p + 16);
      a2 += load_v(p + 32);
      a3 += load_v(p + 48);
    }
    const V16 a = (a0 + a1) + (a2 + a3);
    double sum = 0;
    for (int l = 0; l < 16; ++l) sum += a[l];
    total += sum;
  }
  return total;
}

void copy_kernel(const float* src, float* dst, std::size_t n, int threads) {
  require_chunked(n, "copy_kernel");
#pragma omp parallel num_threads(resolve_threads(threads))
  {
    const auto [begin, end] = my_chunks(n);
    for (std::size_t c = begin; c < end; ++c) {
      const std::size_t i = c * kCeilingChunk;
      store_v(dst + i, load_v(src + i));
      store_v(dst + i + 16, load_v(src + i + 16));
      store_v(dst + i + 32, load_v(src + i + 32));
      store_v(dst + i + 48, load_v(src + i + 48));
    }
  }
}

void triad_kernel(float* a, const float* b, const float* c, float scalar, std::size_t n,
                  int threads) {
  require_chunked(n, "triad_kernel");
#pragma omp parallel num_threads(resolve_threads(threads))
  {
    const auto [begin, end] = my_chunks(n);
    for (std::size_t k = begin; k < end; ++k) {
      for (std::size_t i = k * kCeilingChunk; i < (k + 1) * kCeilingChunk; i += 16)
        store_v(a + i, load_v(b + i) + scalar * load_v(c + i));
    }
  }
}

namespace {
// The FMA peak is measured in the widest vector the build targets, as many independent chains as
// latency (4-5 cycles) x FMA ports (2) need, all in registers. A 64-byte vector on an AVX2 build
// is two ymm halves that GCC keeps in memory (a "peak" of 14 GFLOP/s on a Zen 3 VM whose decode
// reaches 50), so the vector is the register's width.
#if defined(__AVX512F__)
constexpr int kFmaLanes = 16;
constexpr int kFmaChains = 16;  // 16 of the 32 zmm registers, with room to spare
#elif defined(__AVX__)
constexpr int kFmaLanes = 8;
constexpr int kFmaChains = 10;  // 10 ymm chains + 2 constants within the 16 ymm registers
#else
constexpr int kFmaLanes = 4;
constexpr int kFmaChains = 10;
#endif
using VFma = float __attribute__((vector_size(kFmaLanes * sizeof(float))));
// Chain k starts at a different value: identical chains would be merged into one by the
// compiler (equal recurrences from equal starts are one value), leaving a single latency-bound
// chain and a "peak" many times too high.
constexpr float fma_start(int chain) { return 0.5f * static_cast<float>(chain) / kFmaChains; }
double fma_mean_start() {
  double sum = 0;
  for (int k = 0; k < kFmaChains; ++k) sum += fma_start(k);
  return sum / kFmaChains;
}
}  // namespace

std::int64_t fma_flops_per_iteration() { return std::int64_t{kFmaChains} * kFmaLanes * 2; }

double fma_kernel(std::int64_t iterations, float m, int threads) {
  double total = 0;
  const int nt = resolve_threads(threads);
#pragma omp parallel num_threads(nt) reduction(+ : total)
  {
    VFma x[kFmaChains];
    for (int k = 0; k < kFmaChains; ++k) x[k] = VFma{} + fma_start(k);
    const VFma vm = VFma{} + m;
    const VFma va = VFma{} + (1.0f - m);
    for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
      for (int k = 0; k < kFmaChains; ++k) x[k] = x[k] * vm + va;  // one FMA (-ffp-contract=fast)
    }
    double sum = 0;
    for (int k = 0; k < kFmaChains; ++k)
      for (int l = 0; l < kFmaLanes; ++l) sum += x[k][l];
    total += sum / (kFmaChains * kFmaLanes);
  }
  return total / nt;
}

// ---- checkers -----------------------------------------------------------------------------

Backend::SelfCheck verify_read(std::span<const float> src, double kernel_sum) {
  double expected = 0;
  for (float x : src) expected += x;
  const bool ok = kernel_sum == expected;  // small integers: every partial sum is exact
  return make_check("bandwidth.read", ok,
                    "sum of " + std::to_string(src.size()) + " floats: kernel " +
                        std::to_string(kernel_sum) + ", expected " + std::to_string(expected));
}

Backend::SelfCheck verify_copy(std::span<const float> src, std::span<const float> dst) {
  if (src.size() != dst.size()) return make_check("bandwidth.copy", false, "sizes differ");
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (std::memcmp(&src[i], &dst[i], sizeof(float)) != 0)
      return make_check("bandwidth.copy", false,
                        "dst[" + std::to_string(i) + "] = " + std::to_string(dst[i]) +
                            ", src = " + std::to_string(src[i]));
  }
  return make_check("bandwidth.copy", true, std::to_string(src.size()) + " floats equal");
}

Backend::SelfCheck verify_triad(std::span<const float> a, std::span<const float> b,
                                std::span<const float> c, float scalar) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    // Small integers and an integer scalar: exact with or without FMA contraction.
    const float expected = b[i] + scalar * c[i];
    if (a[i] != expected)
      return make_check("bandwidth.triad", false,
                        "a[" + std::to_string(i) + "] = " + std::to_string(a[i]) + ", expected " +
                            std::to_string(expected));
  }
  return make_check("bandwidth.triad", true, std::to_string(a.size()) + " elements = b + s*c");
}

Backend::SelfCheck verify_fma(double kernel_value, std::int64_t iterations, float m) {
  // Every lane converges to 1: x_n = 1 - (1 - x_0) m^n; the mean over lanes likewise.
  const double expected =
      1.0 -
      (1.0 - fma_mean_start()) * std::pow(static_cast<double>(m), static_cast<double>(iterations));
  const double rel = std::abs(kernel_value - expected) / std::abs(expected);
  return make_check("flops.fma", rel <= 1e-3,
                    "mean lane after " + std::to_string(iterations) + " iterations: kernel " +
                        std::to_string(kernel_value) + ", expected " + std::to_string(expected) +
                        " (rel err " + std::to_string(rel) + ", limit 1e-3)");
}

std::vector<Backend::SelfCheck> check_ceiling_kernels() {
  constexpr std::size_t n = 1 << 18;  // 1 MiB per buffer: small, still split over all threads
  constexpr float kScalar = 3.0f;
  Buffer a = allocate(n), b = allocate(n), c = allocate(n);
  fill_pattern(b.get(), n, 1.0f, 0);
  fill_pattern(c.get(), n, 2.0f, 0);
  std::vector<Backend::SelfCheck> out;
  out.push_back(verify_read({b.get(), n}, read_kernel(b.get(), n, 0)));
  copy_kernel(b.get(), a.get(), n, 0);
  out.push_back(verify_copy({b.get(), n}, {a.get(), n}));
  triad_kernel(a.get(), b.get(), c.get(), kScalar, n, 0);
  out.push_back(verify_triad({a.get(), n}, {b.get(), n}, {c.get(), n}, kScalar));
  constexpr std::int64_t kIters = 1000;
  constexpr float kM = 0.999f;
  out.push_back(verify_fma(fma_kernel(kIters, kM, 0), kIters, kM));
  return out;
}

// ---- measurement --------------------------------------------------------------------------

Ceilings measure_ceilings(const CeilingOptions& options) {
  const int threads = resolve_threads(options.num_threads);
  const int reps = std::max(1, options.repetitions);
  Ceilings out;

  std::int64_t bytes = options.buffer_bytes;
  std::string how;
  if (const char* env = std::getenv("DECODEBENCH_CEILING_BYTES"); env && *env) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (*end != '\0' || v <= 0)
      throw InputError("DECODEBENCH_CEILING_BYTES='" + std::string(env) +
                       "' is not a positive byte count");
    bytes = v;
    how = "buffer size from DECODEBENCH_CEILING_BYTES";
  } else if (bytes <= 0) {
    const std::int64_t llc = last_level_cache_bytes();
    const std::int64_t llc_or_default = llc > 0 ? llc : (std::int64_t{64} << 20);
    bytes = static_cast<std::int64_t>(options.llc_multiple * static_cast<double>(llc_or_default));
    if (llc <= 0) how = "last-level cache size unknown, assumed 64 MiB";
    if (options.max_buffer_bytes > 0 && bytes > options.max_buffer_bytes) {
      std::ostringstream why;
      why << "buffers capped at " << format_gb(static_cast<double>(options.max_buffer_bytes))
          << " each (wanted " << format_gb(static_cast<double>(bytes)) << ": "
          << options.llc_multiple << " x the last-level cache)";
      how += (how.empty() ? "" : "; ") + why.str();
      bytes = options.max_buffer_bytes;
    }
  }
  // Three buffers must fit in half the available memory (the rest is the process and the OS).
  const std::int64_t avail = available_memory_bytes();
  if (avail > 0 && 3 * bytes > avail / 2) {
    const std::int64_t capped = avail / 6;
    how += (how.empty() ? "" : "; ") + std::string("buffers capped at ") +
           format_gb(static_cast<double>(capped)) + " each (wanted " +
           format_gb(static_cast<double>(bytes)) + "; 3 buffers must fit in half of the " +
           format_gb(static_cast<double>(avail)) + " available)";
    bytes = capped;
  }
  const std::int64_t chunk_bytes = kCeilingChunk * sizeof(float);
  bytes = std::max(chunk_bytes, bytes / chunk_bytes * chunk_bytes);
  const auto n = static_cast<std::size_t>(bytes) / sizeof(float);
  out.buffer_bytes = bytes;
  out.note = how;

  Buffer a = allocate(n), b = allocate(n), c = allocate(n);
  fill_pattern(a.get(), n, 0.0f, threads);
  fill_pattern(b.get(), n, 1.0f, threads);
  fill_pattern(c.get(), n, 2.0f, threads);
  const double dbytes = static_cast<double>(bytes);

  volatile double sink = 0;  // keeps the read sum live across repetitions
  out.read = dbytes / best_seconds(reps, [&] { sink = sink + read_kernel(b.get(), n, threads); });
  out.copy = 2 * dbytes / best_seconds(reps, [&] { copy_kernel(b.get(), a.get(), n, threads); });
  out.triad = 3 * dbytes / best_seconds(reps, [&] {
                triad_kernel(a.get(), b.get(), c.get(), 3.0f, n, threads);
              });

  const std::int64_t iters = std::max<std::int64_t>(1, options.fma_iterations);
  const double t_fma =
      best_seconds(reps, [&] { sink = sink + fma_kernel(iters, 0.9999999f, threads); });
  out.fma_flops =
      static_cast<double>(fma_flops_per_iteration()) * static_cast<double>(iters) * threads / t_fma;
  return out;
}

// ---- host facts ---------------------------------------------------------------------------

std::int64_t last_level_cache_bytes() {
  // sysfs: the highest cache level of cpu0 ("size" like "307200K").
  int best_level = 0;
  std::int64_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_in(dir + "level"), size_in(dir + "size"), type_in(dir + "type");
    if (!level_in || !size_in) break;
    int level = 0;
    std::string size, type;
    level_in >> level;
    size_in >> size;
    type_in >> type;
    if (type == "Instruction" || size.empty()) continue;
    std::int64_t value = std::strtoll(size.c_str(), nullptr, 10);
    const char unit = size.back();
    if (unit == 'K') value <<= 10;
    if (unit == 'M') value <<= 20;
    if (unit == 'G') value <<= 30;
    if (level > best_level) {
      best_level = level;
      best = value;
    }
  }
  if (best > 0) return best;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  if (const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE); l3 > 0) return l3;
  if (const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0) return l2;
#endif
  return 0;
}

std::int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::int64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // reported in kB
  }
#if defined(_SC_AVPHYS_PAGES)
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::int64_t>(pages) * page;
#endif
  return 0;
}

}  // namespace decodebench::cpu
