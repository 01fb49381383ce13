// RAII owners of CUDA runtime objects: device buffers, events, streams, graphs and the L2
// scrubber.
// Copying is deleted (a double free is the alternative); moving transfers ownership. Creation
// failures throw RuntimeFailure; destruction never throws (it logs), so an object can unwind
// after a sticky device error without terminating the process.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

#include "backends/cuda/cuda_plan.h"

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

// An instantiated CUDA graph of the work `enqueue` puts on a stream, replayed with one
// cudaGraphLaunch. capture() returns an empty graph when the capture or the instantiation
// fails (some driver or API call that cannot be captured); the stream is then out of capture
// mode again and the error cleared, so the caller can fall back to plain launches.
class CudaGraphExec {
 public:
  CudaGraphExec() = default;
  ~CudaGraphExec();
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;
  CudaGraphExec(CudaGraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  CudaGraphExec& operator=(CudaGraphExec&& other) noexcept;

  // Captures (thread-local mode: other threads' CUDA calls are unaffected) what `enqueue`
  // enqueues on `stream`; `enqueue` returns false when a launch of it failed. On failure
  // `why` (when given) says what failed. An exception from `enqueue` ends the capture and
  // propagates.
  static CudaGraphExec capture(cudaStream_t stream, const std::function<bool()>& enqueue,
                               std::string* why = nullptr);
  bool empty() const { return exec_ == nullptr; }
  void launch(cudaStream_t stream);

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// Leaves the L2 cold and clean before a cold sample (cuda_plan.h plan_l2_flush has the why and
// the sizes): a memset of one buffer evicts what the previous step left, then the bandwidth
// `read` kernel over a second buffer replaces the memset's dirty lines with clean ones, so no
// write-back of the flush falls into the timed window. The buffers are allocated once and
// reused: a flush costs a memset and a read, no allocation.
class L2Flusher {
 public:
  L2Flusher() = default;
  L2Flusher(std::size_t l2_bytes, int sm_count);
  // Enqueues the flush on `stream`; a no-op when the device reported no L2.
  void flush(cudaStream_t stream);
  std::size_t write_bytes() const { return write_.bytes(); }
  std::size_t read_bytes() const { return read_.bytes(); }
  // What a flush touches (the buffers as allocated) against the L2 it was sized for.
  FlushRecord record() const {
    L2FlushPlan touched;
    touched.write_bytes = write_.bytes();
    touched.read_bytes = read_.bytes();
    return flush_record(touched, l2_bytes_);
  }

 private:
  std::size_t l2_bytes_ = 0;
  L2FlushPlan plan_;
  DeviceBuffer write_;  // [plan_.write_bytes] bytes, overwritten by every flush
  DeviceBuffer read_;   // [plan_.read_bytes] bytes of zeros, read by every flush
  DeviceBuffer sink_;   // [plan_.read_grid] floats: the read kernel's per-block sums
};

}  // namespace decodebench::cuda
