#include "backends/cuda/cuda_links.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels.h"

namespace decodebench::cuda {
namespace {

namespace k = decodebench::kernels;

// From 64 KiB (a 16-token page of a small model's KV) to 256 MiB (hundreds of blocks in one
// batch): small transfers show the per-transfer cost, large ones the link's rate.
constexpr std::int64_t kSizes[] = {64 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20};
constexpr std::int64_t kLargest = 256 << 20;
constexpr int kRuns = 3;  // best of, after one warm-up

// Pinned (page-locked) host memory, optionally mapped into the device's address space.
class PinnedBuffer {
 public:
  PinnedBuffer(std::size_t bytes, unsigned flags) {
    DECODEBENCH_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, flags));
  }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Times `copy(bytes)` repeated enough to last ~the largest size's copy, best of kRuns, per size.
template <typename Copy>
LinkMeasurement time_sizes(std::string name, std::string direction, cudaStream_t stream,
                           Copy copy) {
  LinkMeasurement m;
  m.name = std::move(name);
  m.direction = std::move(direction);
  CudaEvent start, stop;
  for (std::int64_t size : kSizes) {
    const int reps = static_cast<int>(std::clamp<std::int64_t>(kLargest / size, 1, 256));
    double best = 0;
    for (int run = 0; run <= kRuns; ++run) {
      start.record(stream);
      for (int r = 0; r < reps; ++r) copy(static_cast<std::size_t>(size));
      stop.record(stream);
      stop.synchronize();
      const double t = stop.seconds_since(start) / reps;
      if (run > 0 && t > 0) best = std::max(best, static_cast<double>(size) / t);
    }
    m.by_size.emplace_back(size, best);
    m.best_Bps = std::max(m.best_Bps, best);
  }
  const auto& [smallest, rate] = m.by_size.front();
  if (rate > 0 && m.best_Bps > 0) {
    const double n = static_cast<double>(smallest);
    m.overhead_s = std::max(0.0, n / rate - n / m.best_Bps);
  }
  return m;
}

}  // namespace

std::vector<LinkMeasurement> measure_links(int device, int sm_count, cudaStream_t stream) {
  std::vector<LinkMeasurement> links;
  const auto bytes = static_cast<std::size_t>(kLargest);
  DeviceBuffer dev(bytes);
  PinnedBuffer host(bytes, cudaHostAllocDefault);
  links.push_back(
      time_sizes("pinned host -> device, cudaMemcpyAsync", "to_device", stream, [&](std::size_t n) {
        DECODEBENCH_CUDA_CHECK(
            cudaMemcpyAsync(dev.get(), host.get(), n, cudaMemcpyHostToDevice, stream));
      }));
  links.push_back(
      time_sizes("device -> pinned host, cudaMemcpyAsync", "to_host", stream, [&](std::size_t n) {
        DECODEBENCH_CUDA_CHECK(
            cudaMemcpyAsync(host.get(), dev.get(), n, cudaMemcpyDeviceToHost, stream));
      }));

  // A kernel reading host memory in place (zero-copy), as an engine reading an offloaded block
  // without staging it: the read ceiling kernel over mapped pinned memory.
  {
    PinnedBuffer mapped(bytes, cudaHostAllocMapped);
    void* mapped_dev = nullptr;
    DECODEBENCH_CUDA_CHECK(cudaHostGetDevicePointer(&mapped_dev, mapped.get(), 0));
    const int grid = 4 * sm_count;
    DeviceBuffer sink(static_cast<std::size_t>(grid) * sizeof(float));
    links.push_back(time_sizes(
        "device kernel reading mapped host memory", "to_device", stream, [&](std::size_t n) {
          k::BandwidthParams p;
          p.src = mapped_dev;
          p.sink = sink.as<float>();
          p.bytes = n;
          p.grid = grid;
          p.block = 256;
          DECODEBENCH_CHECK_LAUNCH(k::cuda::launch_bandwidth(k::BandwidthKernel::read, p, stream),
                                   "bandwidth kernel 'read' over mapped host memory");
        }));
  }

  // Peer copies into this device from every GPU that can reach it.
  int count = 0;
  DECODEBENCH_CUDA_CHECK(cudaGetDeviceCount(&count));
  for (int other = 0; other < count; ++other) {
    if (other == device) continue;
    int can = 0;
    DECODEBENCH_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, other));
    if (!can) continue;
    DECODEBENCH_CUDA_CHECK(cudaSetDevice(other));
    DeviceBuffer remote(bytes);
    DECODEBENCH_CUDA_CHECK(cudaSetDevice(device));
    const cudaError_t e = cudaDeviceEnablePeerAccess(other, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) DECODEBENCH_CUDA_CHECK(e);
    cudaGetLastError();  // an already-enabled peer leaves its error behind
    links.push_back(time_sizes(fmt::format("GPU {} -> GPU {}, cudaMemcpyPeerAsync", other, device),
                               "peer", stream, [&](std::size_t n) {
                                 DECODEBENCH_CUDA_CHECK(cudaMemcpyPeerAsync(
                                     dev.get(), device, remote.get(), other, n, stream));
                               }));
  }
  return links;
}

}  // namespace decodebench::cuda
