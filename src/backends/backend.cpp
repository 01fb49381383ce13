// The backend factory: the one place that knows which backends this build has.
#include "backends/backend.h"

#include <string>

#include "backends/cpu/cpu_backend.h"
#include "common/errors.h"
#if defined(DECODEBENCH_WITH_EMU)
#include "backends/emu/emu_backend.h"
#endif
#if defined(DECODEBENCH_WITH_CUDA)
#include "backends/cuda/cuda_backend.h"
#endif

namespace decodebench {

std::string_view warm_timing_name(WarmTiming t) {
  return t == WarmTiming::eager ? "eager" : "graph";
}

WarmTiming parse_warm_timing(std::string_view s) {
  if (s == "graph") return WarmTiming::graph;
  if (s == "eager") return WarmTiming::eager;
  throw InputError("unknown --timing '" + std::string(s) + "'; valid: graph, eager");
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  names.push_back("cpu");
#if defined(DECODEBENCH_WITH_EMU)
  names.push_back("emu");
#endif
#if defined(DECODEBENCH_WITH_CUDA)
  names.push_back("cuda");
#endif
  return names;
}

bool cuda_device_present() {
#if defined(DECODEBENCH_WITH_CUDA)
  return cuda_runtime_device_present();
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(std::string_view name, int device_index) {
  if (name == "auto") {
    // The fastest backend that can run here: a GPU when one is present, else the host.
    return make_backend(cuda_device_present() ? "cuda" : "cpu", device_index);
  }
  if (name == "cpu") {
    return make_cpu_backend();
  }
  if (name == "emu") {
#if defined(DECODEBENCH_WITH_EMU)
    return make_emu_backend();
#else
    throw RuntimeFailure(
        "backend 'emu' is not compiled into this build (scripts/run.sh's first build on a machine "
        "without a GPU leaves it out: -DDECODEBENCH_EMU=OFF); scripts/test.sh builds it, or "
        "configure with -DDECODEBENCH_EMU=ON");
#endif
  }
  if (name == "cuda") {
#if defined(DECODEBENCH_WITH_CUDA)
    if (!cuda_runtime_device_present()) {
      throw RuntimeFailure(
          "backend 'cuda': no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES); "
          "use --backend cpu or emu");
    }
    if (device_index < 0) {
      throw InputError("--device " + std::to_string(device_index) + " is negative");
    }
    return make_cuda_backend(device_index);
#else
    throw RuntimeFailure(
        "backend 'cuda' is not compiled into this build (configure with nvcc present and "
        "-DDECODEBENCH_CUDA=ON); use --backend cpu or emu");
#endif
  }
  std::string valid = "auto";
  for (const std::string& n : backend_names()) valid += ", " + n;
  throw InputError("unknown backend '" + std::string(name) + "' (valid: " + valid + ")");
}

}  // namespace decodebench
