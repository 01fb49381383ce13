#include "backends/cuda/cuda_resources.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "common/errors.h"

namespace decodebench::cuda {

// ---- DeviceBuffer -------------------------------------------------------------------------
DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  DECODEBENCH_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaFree(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, cudaStream_t stream) {
  if (bytes > bytes_) {
    throw RuntimeFailure("DeviceBuffer::upload: " + std::to_string(bytes) +
                         " bytes requested from a " + std::to_string(bytes_) +
                         "-byte device buffer");
  }
  if (bytes == 0) return;
  DECODEBENCH_CUDA_CHECK(cudaMemcpyAsync(ptr_, host, bytes, cudaMemcpyHostToDevice, stream));
  DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void DeviceBuffer::download(void* host, std::size_t bytes, cudaStream_t stream) const {
  if (bytes > bytes_) {
    throw RuntimeFailure("DeviceBuffer::download: " + std::to_string(bytes) +
                         " bytes requested from a " + std::to_string(bytes_) +
                         "-byte device buffer");
  }
  if (bytes == 0) return;
  DECODEBENCH_CUDA_CHECK(cudaMemcpyAsync(host, ptr_, bytes, cudaMemcpyDeviceToHost, stream));
  DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ---- CudaEvent ----------------------------------------------------------------------------
CudaEvent::CudaEvent() { DECODEBENCH_CUDA_CHECK(cudaEventCreate(&event_)); }

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaEventDestroy(event_));
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaEventDestroy(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::record(cudaStream_t stream) {
  DECODEBENCH_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void CudaEvent::synchronize() { DECODEBENCH_CUDA_CHECK(cudaEventSynchronize(event_)); }

double CudaEvent::seconds_since(const CudaEvent& start) const {
  float ms = 0.f;
  DECODEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return static_cast<double>(ms) * 1e-3;
}

// ---- CudaStream ---------------------------------------------------------------------------
CudaStream::CudaStream() {
  DECODEBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::synchronize() { DECODEBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

// ---- L2Flusher ----------------------------------------------------------------------------
L2Flusher::L2Flusher(std::size_t l2_bytes) : buffer_(2 * l2_bytes) {}

void L2Flusher::flush(cudaStream_t stream) {
  if (buffer_.empty()) return;
  DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, buffer_.bytes(), stream));
}

}  // namespace decodebench::cuda
