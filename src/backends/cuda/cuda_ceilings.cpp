// The cuda backend's bandwidth ceilings and their self-check (Backend::measure_ceilings,
// check_ceiling_kernels), apart from the backend that calls them on its device and stream.
#include "backends/cuda/cuda_ceilings.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_resources.h"
#include "common/errors.h"
#include "common/units.h"
#include "kernels.h"

namespace decodebench::cuda {
namespace {

namespace k = kernels;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Launch shapes the ceiling kernels are timed with: (threads per block, blocks per SM). The
// kernels are grid-stride loops, so the grid is a choice; the best shape depends on each
// kernel's registers and the device, and a ceiling is the best the device can do, so each is
// tried and the best median kept.
struct LaunchShape {
  int block;
  int blocks_per_sm;
};
constexpr LaunchShape kCeilingShapes[] = {{256, 2}, {256, 4}, {256, 8}, {512, 4}, {1024, 2}};
std::string shape_name(const LaunchShape& s) {
  return std::to_string(s.block) + "x" + std::to_string(s.blocks_per_sm);
}
constexpr int kCeilingWarmup = 2;
constexpr int kCeilingRuns = 10;

}  // namespace

Ceilings measure_ceilings(std::int64_t l2_bytes, int sm_count, cudaStream_t stream) {
  Ceilings c;
  std::size_t bytes = ceiling_buffer_bytes(static_cast<std::size_t>(l2_bytes));
  std::size_t free_bytes = 0, total_bytes = 0;
  DECODEBENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t fit = ceiling_buffer_bytes_that_fit(free_bytes);
  if (fit < bytes) {
    if (fit == 0) {
      throw RuntimeFailure(
          "cuda backend: the bandwidth ceilings need 3 buffers of at least 1 MiB; "
          "device has " +
          format_gb(static_cast<double>(free_bytes)) + " free");
    }
    c.note = "ceiling buffers capped to " + format_gb(static_cast<double>(fit)) +
             " each to fit free device memory (wanted " + format_gb(static_cast<double>(bytes)) +
             ", 8x L2); the figures may include L2 hits";
    bytes = fit;
  }
  // Three buffers serve all kernels: read src=A; copy A -> B; triad A = B + s * C.
  DeviceBuffer a(bytes), b(bytes), cbuf(bytes);
  int max_grid = 0;
  for (const LaunchShape& s : kCeilingShapes) {
    max_grid = std::max(max_grid, s.blocks_per_sm * sm_count);
  }
  DeviceBuffer sink(static_cast<std::size_t>(max_grid) * sizeof(float));  // [grid] read partials
  for (DeviceBuffer* buf : {&a, &b, &cbuf}) {
    DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(buf->get(), 0, bytes, stream));  // fp32 zeros
  }
  CudaEvent start, stop;

  // Bytes that cross the memory bus per launch: read 1x, copy 2x (read + write), triad 3x.
  // Returns the best bandwidth and "<name> <block>x<blocks per SM>" of the shape that gave it.
  auto best_bandwidth = [&](k::BandwidthKernel which, double bytes_moved, const char* name,
                            const char* what, std::string& winner) {
    double best = 0;
    for (const LaunchShape& s : kCeilingShapes) {
      k::BandwidthParams p;
      p.src = a.get();
      p.dst = b.get();
      p.sink = sink.as<float>();
      p.a = a.as<float>();
      p.b = b.as<float>();
      p.c = cbuf.as<float>();
      p.scalar = 3.f;
      p.bytes = bytes;
      p.grid = s.blocks_per_sm * sm_count;
      p.block = s.block;
      std::vector<double> seconds;
      for (int i = 0; i < kCeilingWarmup + kCeilingRuns; ++i) {
        start.record(stream);
        DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_bandwidth(which, p, stream), what);
        stop.record(stream);
        stop.synchronize();
        if (i >= kCeilingWarmup) seconds.push_back(stop.seconds_since(start));
      }
      const double t = median(seconds);
      if (t > 0 && bytes_moved / t > best) {
        best = bytes_moved / t;
        winner = std::string(name) + " " + shape_name(s);
      }
    }
    return best;
  };
  const double n = static_cast<double>(bytes);
  std::string read_shape, copy_shape, triad_shape;
  c.read =
      best_bandwidth(k::BandwidthKernel::read, n, "read", "bandwidth kernel 'read'", read_shape);
  c.copy = best_bandwidth(k::BandwidthKernel::copy, 2 * n, "copy", "bandwidth kernel 'copy'",
                          copy_shape);
  c.triad = best_bandwidth(k::BandwidthKernel::triad, 3 * n, "triad", "bandwidth kernel 'triad'",
                           triad_shape);
  // Which shape won each, of which were tried: a winner at the edge of the set (the fewest or
  // the most threads per SM) says the set may be too narrow for this device.
  std::string tried;
  for (const LaunchShape& s : kCeilingShapes) {
    if (!tried.empty()) tried += ' ';
    tried += shape_name(s);
  }
  c.shapes = read_shape + ", " + copy_shape + ", " + triad_shape + " of " + tried +
             " (threads per block x blocks per SM)";
  // Not measured on the GPU: decode is memory-bound; DeviceInfo::flops_peak is the datasheet's.
  c.fma_flops = 0;
  c.buffer_bytes = static_cast<std::int64_t>(bytes);
  return c;
}

// Small buffers of small integers, so every sum and every b + 3c is exact in fp32 whatever the
// summation order or FMA contraction: the checks compare exactly. An odd grid of T = 5 x 64
// threads and sizes chosen against the kernels' unroll of 4 (kernels/bandwidth/bandwidth.cu)
// exercise every tail: each thread left 0 or 1 vectors (64 KiB + 16 B), 2 or 3, 3 but the last
// thread 2, fewer vectors than threads, and an exact multiple of 4T (no tail).
std::vector<Backend::SelfCheck> check_ceiling_kernels(cudaStream_t stream) {
  constexpr int kGrid = 5;
  constexpr int kBlock = 64;
  constexpr std::size_t kT = kGrid * kBlock;  // threads
  constexpr std::size_t kPass = 4 * kT;       // vectors per unrolled pass of all threads
  constexpr std::size_t kVectors[] = {16 * 1024 / 4 + 1, 3 * kPass + 2 * kT + 7,
                                      3 * kPass + 3 * kT - 1, kT - 3, 4 * kPass};
  constexpr std::size_t kMaxFloats = 4 * (4 * kPass);
  constexpr std::size_t kMaxBytes = kMaxFloats * sizeof(float);
  std::vector<Backend::SelfCheck> checks;

  std::vector<float> src(kMaxFloats), b(kMaxFloats), c(kMaxFloats);
  for (std::size_t i = 0; i < kMaxFloats; ++i) {
    src[i] = static_cast<float>(i % 13);
    b[i] = static_cast<float>(i % 7);
    c[i] = static_cast<float>(i % 5) - 2.f;
  }
  DeviceBuffer d_src(kMaxBytes), d_dst(kMaxBytes), d_a(kMaxBytes), d_b(kMaxBytes), d_c(kMaxBytes);
  DeviceBuffer d_sink(kGrid * sizeof(float));
  d_src.upload(src.data(), kMaxBytes, stream);
  d_b.upload(b.data(), kMaxBytes, stream);
  d_c.upload(c.data(), kMaxBytes, stream);

  k::BandwidthParams p;
  p.src = d_src.get();
  p.dst = d_dst.get();
  p.sink = d_sink.as<float>();
  p.a = d_a.as<float>();
  p.b = d_b.as<float>();
  p.c = d_c.as<float>();
  p.scalar = 3.f;
  p.grid = kGrid;
  p.block = kBlock;

  // Runs one kernel on the first `floats` of the buffers, its outputs poisoned first (0xFF
  // bytes: NaN, so an element never written cannot pass); empty on success, else what failed.
  auto run = [&](k::BandwidthKernel which, std::size_t floats) -> std::string {
    for (DeviceBuffer* out : {&d_dst, &d_a, &d_sink}) {
      DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(out->get(), 0xFF, out->bytes(), stream));
    }
    p.bytes = floats * sizeof(float);
    const k::LaunchResult r = k::cuda::launch_bandwidth(which, p, stream);
    if (!r.ok()) return "launch failed: " + r.message;
    if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
      return std::string("kernel failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
             ")";
    }
    return {};
  };
  // The first mismatch of `floats` floats of a kernel's result, or empty.
  auto check_read = [&](std::size_t floats) -> std::string {
    std::vector<float> sink(kGrid);
    d_sink.download(sink.data(), d_sink.bytes(), stream);
    double got = 0, want = 0;
    for (float v : sink) got += v;
    for (std::size_t i = 0; i < floats; ++i) want += src[i];
    if (got == want) return {};
    return "sum of sink[" + std::to_string(kGrid) + "] = " + std::to_string(got) +
           ", sum of src = " + std::to_string(want);
  };
  auto check_copy = [&](std::size_t floats) -> std::string {
    std::vector<float> dst(floats);
    d_dst.download(dst.data(), floats * sizeof(float), stream);
    for (std::size_t i = 0; i < floats; ++i) {
      if (std::memcmp(&dst[i], &src[i], sizeof(float)) != 0) {
        return "dst[" + std::to_string(i) + "] = " + std::to_string(dst[i]) +
               ", src = " + std::to_string(src[i]);
      }
    }
    return {};
  };
  auto check_triad = [&](std::size_t floats) -> std::string {
    std::vector<float> a(floats);
    d_a.download(a.data(), floats * sizeof(float), stream);
    for (std::size_t i = 0; i < floats; ++i) {
      if (a[i] != b[i] + p.scalar * c[i]) {
        return "a[" + std::to_string(i) + "] = " + std::to_string(a[i]) + ", expected " +
               std::to_string(b[i] + p.scalar * c[i]);
      }
    }
    return {};
  };

  // A launch or device failure is a failed check with its message; the next check still runs
  // unless the error is sticky (then its own calls fail the same way).
  struct Kernel {
    const char* name;
    k::BandwidthKernel which;
    std::function<std::string(std::size_t)> check;
    const char* passed;
  };
  const Kernel kernels[] = {
      {"bandwidth.read", k::BandwidthKernel::read, check_read, "per-block sums add up"},
      {"bandwidth.copy", k::BandwidthKernel::copy, check_copy, "dst equals src bit for bit"},
      {"bandwidth.triad", k::BandwidthKernel::triad, check_triad, "b + 3c exact"}};
  std::string sizes;
  for (std::size_t v : kVectors) {
    if (!sizes.empty()) sizes += ", ";
    sizes += std::to_string(16 * v);
  }
  for (const Kernel& kernel : kernels) {
    std::string failure;
    for (std::size_t v : kVectors) {
      const std::size_t floats = 4 * v;
      failure = run(kernel.which, floats);
      if (failure.empty()) failure = kernel.check(floats);
      if (!failure.empty()) {
        failure = std::to_string(16 * v) + " bytes: " + failure;
        break;
      }
    }
    checks.push_back({kernel.name, failure.empty(),
                      failure.empty()
                          ? std::string(kernel.passed) + " at " + sizes + " bytes, grid " +
                                std::to_string(kGrid) + " x " + std::to_string(kBlock)
                          : failure});
  }
  return checks;
}

}  // namespace decodebench::cuda
