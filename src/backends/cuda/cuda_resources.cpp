#include "backends/cuda/cuda_resources.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "common/errors.h"
#include "kernels.h"

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

// ---- CudaGraphExec ------------------------------------------------------------------------
CudaGraphExec::~CudaGraphExec() {
  if (exec_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec_));
}

CudaGraphExec& CudaGraphExec::operator=(CudaGraphExec&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) DECODEBENCH_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec_));
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

CudaGraphExec CudaGraphExec::capture(cudaStream_t stream, const std::function<bool()>& enqueue,
                                     std::string* why) {
  auto failed = [&](const char* what, cudaError_t err) {
    (void)cudaGetLastError();  // capture errors are not sticky: clear, so the fallback runs
    if (why != nullptr) {
      *why = std::string(what) +
             (err != cudaSuccess ? std::string(": ") + cudaGetErrorName(err) : std::string());
    }
    return CudaGraphExec{};
  };
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) return failed("cudaStreamBeginCapture", err);
  bool enqueued = false;
  cudaGraph_t graph = nullptr;
  try {
    enqueued = enqueue();
  } catch (...) {
    // Out of capture mode before the error leaves: the stream stays usable.
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) {
      (void)cudaGraphDestroy(graph);
    }
    (void)cudaGetLastError();
    throw;
  }
  err = cudaStreamEndCapture(stream, &graph);  // also ends a capture that was invalidated
  if (!enqueued || err != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return failed(enqueued ? "cudaStreamEndCapture" : "a launch during the capture", err);
  }
  CudaGraphExec out;
  err = cudaGraphInstantiate(&out.exec_, graph, /*flags=*/0);
  (void)cudaGraphDestroy(graph);  // the executable graph does not need it
  if (err != cudaSuccess) {
    out.exec_ = nullptr;
    return failed("cudaGraphInstantiate", err);
  }
  // Upload now, so the first replay does not pay for it.
  err = cudaGraphUpload(out.exec_, stream);
  if (err != cudaSuccess) return failed("cudaGraphUpload", err);  // `out` frees the graph
  return out;
}

void CudaGraphExec::launch(cudaStream_t stream) {
  DECODEBENCH_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

// ---- L2Flusher ----------------------------------------------------------------------------
L2Flusher::L2Flusher(std::size_t l2_bytes, int sm_count)
    : l2_bytes_(l2_bytes),
      plan_(plan_l2_flush(l2_bytes, sm_count)),
      write_(plan_.write_bytes),
      read_(plan_.read_bytes),
      sink_(static_cast<std::size_t>(plan_.read_grid) * sizeof(float)) {
  // Defined contents for the read (a sum of zeros), once; the stream-less memset finishes
  // before any stream's work because of the synchronize.
  if (!read_.empty()) {
    DECODEBENCH_CUDA_CHECK(cudaMemset(read_.get(), 0, read_.bytes()));
    DECODEBENCH_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

void L2Flusher::flush(cudaStream_t stream) {
  if (plan_.empty()) return;
  // 1. Evict: overwrite 2x the L2. This leaves about one L2 of dirty lines.
  DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(write_.get(), 0, write_.bytes(), stream));
  // 2. Clean: read a second buffer, so the lines L2 holds when the step starts are clean.
  kernels::BandwidthParams p;
  p.src = read_.get();
  p.sink = sink_.as<float>();
  p.bytes = read_.bytes();
  p.grid = plan_.read_grid;
  p.block = plan_.read_block;
  DECODEBENCH_CHECK_LAUNCH(
      kernels::cuda::launch_bandwidth(kernels::BandwidthKernel::read, p, stream),
      "L2 flush (bandwidth kernel 'read')");
}

}  // namespace decodebench::cuda
