// RAII owners of CUDA runtime objects: device buffers, events, streams and the L2 scrubber.
// Copying is deleted (a double free is the alternative); moving transfers ownership. Creation
// failures throw RuntimeFailure; destruction never throws (it logs), so an object can unwind
// after a sticky device error without terminating the process.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace decodebench::cuda {

// cudaMalloc'd bytes. Empty (null) when constructed with 0 bytes.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

  // Copies of `bytes` from/to host memory, ordered on `stream` after the work already queued
  // there, returning when the copy is complete. Ordering on the stream matters: a plain
  // cudaMemcpy runs on the legacy default stream, which a non-blocking stream does not wait for.
  void upload(const void* host, std::size_t bytes, cudaStream_t stream);
  void download(void* host, std::size_t bytes, cudaStream_t stream) const;

 private:
  void release() noexcept;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A timing event (cudaEventDefault: timing enabled).
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize();
  // Seconds from `start` to this event; both must have completed.
  double seconds_since(const CudaEvent& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// A non-blocking stream, so work on the legacy default stream (from a library, say) does not
// serialize with the timed launches.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;

  cudaStream_t get() const { return stream_; }
  void synchronize();

 private:
  cudaStream_t stream_ = nullptr;
};

// Evicts the L2 before a cold sample by overwriting a buffer twice its size (the nvbench
// l2flush idea): after the memset, nothing the timed kernel reads is still in L2. The buffer is
// allocated once and reused, so flushing costs one memset per sample and no allocation.
class L2Flusher {
 public:
  L2Flusher() = default;
  explicit L2Flusher(std::size_t l2_bytes);
  // Enqueues the scrub on `stream`; a no-op when the device reported no L2.
  void flush(cudaStream_t stream);
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;  // [2 * L2] bytes
};

}  // namespace decodebench::cuda
