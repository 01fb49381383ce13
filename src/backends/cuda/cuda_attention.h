// The attention of one sweep point on the device, ready to launch: Q, the K/V pool, the block
// tables and context lengths resident (uploaded, or generated on the device for a layout-only
// Workload, backend.h), the rung's prefix plan and split workspace bound. What both the
// attention-scope point (CudaPoint: the step alone) and the layer step (CudaLayer: the step
// between its GEMMs) launch, so the two run the same attention the same way.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "backends/cuda/cuda_resources.h"
#include "kernels.h"
#include "workload/workload.h"

namespace decodebench::cuda {

class AttentionStep {
 public:
  // `resident`: the residency of the instance of `kernel` for `w` (the split planner's input).
  // Returns with everything on the device (the stream synchronized, so a fault of the fill
  // kernels surfaces here). Throws RuntimeFailure (device, planner) or InputError (a workload
  // whose buffers do not match its layout).
  AttentionStep(const Workload& w, const kernels::KernelInfo& kernel,
                const kernels::ResidentCtas& resident, cudaStream_t stream);

  // Enqueues one step (every kernel of the rung) on the stream; throws on a launch failure.
  void launch();
  // The same without throwing: false when a launch failed (for graph capture).
  bool try_launch();
  // The output of the last step, decoded to float: [rows][Hq][d].
  std::vector<float> output();

  const std::string& kernel() const { return kernel_; }
  const kernels::PagedDecodeParams& params() const { return params_; }  // device pointers
  // [rows][Hq][d] q dtype: the step's output (o_proj's input at layer scope).
  const DeviceBuffer& out() const { return out_; }

 private:
  void fill_q(const Workload& w, std::size_t row_elems);
  void upload_or_fill_cache(const Workload& w, const std::vector<std::byte>& host,
                            DeviceBuffer& dst, Tensor tensor, const char* what);

  std::string kernel_;
  cudaStream_t stream_;                // the backend's
  kernels::PagedDecodeParams params_;  // device pointers
  DeviceBuffer q_, out_, k_cache_, v_cache_, tables_, lens_;
  // The integer KV formats' f16 scales and zeros (empty for the float formats).
  DeviceBuffer k_scales_, k_zeros_, v_scales_, v_zeros_;
  DeviceBuffer sinks_;      // [Hq] fp32, for a model with sinks
  DeviceBuffer workspace_;  // split_kv: partial_out and partial_lse (kernels::split_kv_workspace)
  DeviceBuffer plan_;       // prefix-aware rungs: kernels::PrefixPlan::packed()
};

}  // namespace decodebench::cuda
