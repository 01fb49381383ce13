// The cuda backend's layer step (scope "layer", src/workload/layer_model.h): one transformer
// layer's decode step for the whole batch on the GPU, with the GEMMs in cuBLASLt (loaded at run
// time, cublaslt_loader.h) around the attention rung (cuda_attention.h, exactly as at scope
// attention).
//
//   prepare   the attention's tensors (uploaded or generated, as CudaPoint); every weight and
//             the input x generated on the device by the counter generator (kernels::
//             launch_fill, the values of layer_model.h's weight_value); one cuBLASLt matmul
//             descriptor per GEMM (cuda_layer_plan.h plan_gemm) with the heuristic's first
//             algorithm for a 32 MiB workspace
//   a step    qkv_proj, attention, o_proj, gate_up_proj, down_proj, lm_head in one stream; with
//             fp8 weights each GEMM but qkv_proj starts with the cast of its input to e4m3
//             (kernels::launch_quantize, kActivationFp8Scale; x is generated in e4m3)
//   time_one  [L2 flushes, cold; an untimed step, warm] -> event -> stage -> event -> ... :
//             seven events, one sample of each stage; returns qkv_proj..down_proj
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "backends/backend.h"
#include "backends/cuda/cublaslt_loader.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/nvml.h"
#include "kernels.h"
#include "workload/workload.h"

namespace decodebench::cuda {

// The layer step of `w` (prepare()'s layout-only convention: q/k/v may be empty) with attention
// rung `kernel` (`resident`: its residency, as for CudaPoint), on the backend's stream and L2
// flusher, which must outlive it, as must `nvml` (the backend's NVML device: the busy, power
// and energy figures over the samples). The caller has checked layer_support_error and the rung's
// support. Throws InputError for a GEMM cuBLASLt has no algorithm for, RuntimeFailure for a
// device or cuBLASLt failure.
std::unique_ptr<PreparedLayer> make_cuda_layer(const Workload& w, const kernels::KernelInfo& kernel,
                                               const kernels::ResidentCtas& resident,
                                               cudaStream_t stream, L2Flusher& flusher,
                                               const TimingOptions& timing,
                                               const LayerOptions& layer, const CublasLtApi& lt,
                                               nvml::Device* nvml);

}  // namespace decodebench::cuda
