// The `cuda` backend: the kernel ladder of kernels/ (namespace kernels::cuda) on an NVIDIA GPU,
// timed with CUDA events, cold L2 by default. Host code only; the device code it launches lives
// in decodebench_kernels_cuda.
//
// What it does for the harness (src/backends/backend.h):
//   device_info        name, SMs, L2, memory, theoretical peak (2 x memory clock x bus width / 8
//                      from device attributes), datasheet peak (configs/devices.json)
//   measure_ceilings   read / copy / triad kernels on buffers >= 8x L2, several launch shapes,
//                      median of the runs of each shape, best shape reported
//   skip_reason        the registry's reason, or "needs X GB, device has Y GB free"
//   prepare            uploads the workload, or fills K/V/Q on the device when the Workload
//                      carries the layout only (see backend.h); allocates the split workspace
//   time_one           [L2 scrub] -> event -> every launch of the step -> event
#pragma once

#include <memory>

#include "backends/backend.h"

namespace decodebench {

// The backend on CUDA device `device_index`. Throws InputError (listing the devices) for an
// index out of range and RuntimeFailure when no device or driver is usable. The backend must
// outlive the PreparedPoints it makes (they share its stream and L2 scrubber).
std::unique_ptr<Backend> make_cuda_backend(int device_index);

// True when the CUDA runtime sees at least one device (false, without throwing, when there is no
// driver, no device, or CUDA_VISIBLE_DEVICES hides them all).
bool cuda_runtime_device_present();

}  // namespace decodebench
