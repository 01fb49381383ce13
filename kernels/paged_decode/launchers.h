// The paged-decode ladder's launchers, one template per rung, instantiated per
// (KV dtype, head_dim) in generated translation units (see kernels/CMakeLists.txt).
// Compiled for both targets: DECODEBENCH_TARGET_NS is `cuda` (nvcc) or `emu` (host compiler).
//
// Every launcher: checks its preconditions (returning LaunchStatus::unsupported with a reason),
// launches its kernel(s) on `stream` (a cudaStream_t on CUDA, ignored by the emulator), checks
// the launch, and returns. q_dtype (f16/bf16) and the GQA group are run-time values.
#pragma once

#include "kernels.h"

#ifndef DECODEBENCH_TARGET_NS
#error "DECODEBENCH_TARGET_NS must be defined (cuda or emu)"
#endif

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {

template <DType kKvDtype, int kHeadDim>
LaunchResult launch_naive(const PagedDecodeParams& p, void* stream);
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_gqa(const PagedDecodeParams& p, void* stream);
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_pipelined(const PagedDecodeParams& p, void* stream);
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_split_kv(const PagedDecodeParams& p, void* stream);

// Generated (dispatch.cpp): run-time (kernel, kv_dtype, head_dim) -> compiled instance.
LaunchResult dispatch_compiled(std::string_view kernel, const PagedDecodeParams& p, void* stream);

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
