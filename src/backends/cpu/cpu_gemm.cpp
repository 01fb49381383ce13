#include "backends/cpu/cpu_gemm.h"

#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "device/float_formats.h"

namespace decodebench::cpu {

// Defined by cpu_gemm_openblas.cpp / cpu_gemm_onednn.cpp when the build found the library.
#ifdef DECODEBENCH_WITH_OPENBLAS
std::unique_ptr<GemmLibrary> make_openblas();
#endif
#ifdef DECODEBENCH_WITH_ONEDNN
std::unique_ptr<GemmLibrary> make_onednn();
#endif

std::vector<std::unique_ptr<GemmLibrary>> gemm_libraries() {
  std::vector<std::unique_ptr<GemmLibrary>> libs;
  // The order is the decision's (docs/decisions.md "Layer GEMMs on the CPU"): the faster first.
#ifdef DECODEBENCH_WITH_ONEDNN
  libs.push_back(make_onednn());
#endif
#ifdef DECODEBENCH_WITH_OPENBLAS
  libs.push_back(make_openblas());
#endif
  return libs;
}

std::string missing_gemm_library() {
#if defined(DECODEBENCH_WITH_OPENBLAS) || defined(DECODEBENCH_WITH_ONEDNN)
  return "";
#else
  return "this build has no GEMM library for the layer's bf16 products: install libdnnl-dev "
         "(oneDNN; scripts/bootstrap.sh does) and configure again (DECODEBENCH_CPU_GEMM=auto)";
#endif
}

std::string library_path(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "static";
  return info.dli_fname;
}

void store_bf16(const float* src, std::size_t count, std::byte* dst) {
  auto* out = reinterpret_cast<std::uint16_t*>(dst);
  const auto n = static_cast<std::int64_t>(count);
  // Below ~1 M elements a parallel region costs more than the conversion (m = 1: a few k).
#pragma omp parallel for schedule(static) if (n >= (std::int64_t{1} << 20))
  for (std::int64_t i = 0; i < n; ++i) out[i] = floatfmt::float_to_bf16(src[i]);
}

double measure_square_flops(GemmLibrary& lib, std::int64_t size, int repetitions) {
  const auto elements = static_cast<std::size_t>(size * size);
  std::vector<std::uint16_t> x(elements), w(elements), y(elements);
  // Small values of the generator's range; what they are does not change the rate.
  for (std::size_t i = 0; i < elements; ++i) {
    x[i] = floatfmt::float_to_bf16(static_cast<float>(i % 13) * 0.0625f - 0.375f);
    w[i] = floatfmt::float_to_bf16(static_cast<float>(i % 7) * 0.03125f - 0.09375f);
  }
  const auto* wb = reinterpret_cast<const std::byte*>(w.data());
  std::unique_ptr<GemmWeights> weights = lib.prepare_weights(wb, size, size);
  std::unique_ptr<GemmPlan> plan = lib.plan(*weights, size, size);
  const auto* xb = reinterpret_cast<const std::byte*>(x.data());
  auto* yb = reinterpret_cast<std::byte*>(y.data());
  plan->run(xb, yb);  // warm-up: threads started, pages touched
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < std::max(1, repetitions); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    plan->run(xb, yb);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size) /
         best;
}

}  // namespace decodebench::cpu
