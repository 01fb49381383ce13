// Compiled with the emulator target (host C++), where the launchers' constexpr shapes are the
// same as under nvcc: they are plain constants and templates of the rung headers.
#include "launch_shape.h"

#include "paged_decode/gqa.cuh"
#include "paged_decode/naive.cuh"
#include "paged_decode/pipelined.cuh"
#include "paged_decode/split_kv.cuh"

namespace decodebench::kernels {
namespace {

namespace pd = DECODEBENCH_TARGET_NS::paged_decode;

// Calls fn(integral_constant<DType>, integral_constant<head_dim>, integral_constant<cap>) for the
// run-time triple, or returns nullopt when a value is outside the rungs' template domain.
template <typename Fn>
std::optional<LaunchShape> with_constants(DType kv, int head_dim, int cap, Fn&& fn) {
  auto by_cap = [&](auto t, auto d) -> std::optional<LaunchShape> {
    switch (cap) {
      case 2: return fn(t, d, std::integral_constant<int, 2>{});
      case 4: return fn(t, d, std::integral_constant<int, 4>{});
      case 8: return fn(t, d, std::integral_constant<int, 8>{});
      default: return std::nullopt;
    }
  };
  auto by_dim = [&](auto t) -> std::optional<LaunchShape> {
    switch (head_dim) {
      case 64: return by_cap(t, std::integral_constant<int, 64>{});
      case 128: return by_cap(t, std::integral_constant<int, 128>{});
      case 256: return by_cap(t, std::integral_constant<int, 256>{});
      default: return std::nullopt;
    }
  };
  switch (kv) {
    case DType::f16: return by_dim(std::integral_constant<DType, DType::f16>{});
    case DType::bf16: return by_dim(std::integral_constant<DType, DType::bf16>{});
    case DType::fp8_e4m3: return by_dim(std::integral_constant<DType, DType::fp8_e4m3>{});
    case DType::fp8_e5m2: return by_dim(std::integral_constant<DType, DType::fp8_e5m2>{});
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<LaunchShape> launch_shape(std::string_view rung, std::string_view kernel, DType kv,
                                        int head_dim, int group_cap) {
  if (rung == "naive" && kernel == "naive_kernel") {
    return LaunchShape{pd::naive_detail::kThreads, 0};
  }
  if (rung == "split_kv" && kernel == "merge_kernel") {
    return LaunchShape{pd::split_kv_detail::kMergeThreads, 0};
  }
  const bool gqa = rung == "gqa" && kernel == "gqa_kernel";
  const bool pipelined = (rung == "pipelined" && kernel == "pipelined_kernel") ||
                         (rung == "split_kv" && kernel == "split_kernel");
  if (!gqa && !pipelined) return std::nullopt;
  return with_constants(kv, head_dim, group_cap, [&](auto t, auto d, auto c) {
    constexpr DType kKv = decltype(t)::value;
    constexpr int kHeadDim = decltype(d)::value;
    constexpr int kCap = decltype(c)::value;
    const std::size_t smem = gqa ? pd::gqa_detail::Smem<kKv, kHeadDim, kCap>::kBytes
                                 : pd::pipelined_detail::Smem<kKv, kHeadDim, kCap>::kBytes;
    return std::optional<LaunchShape>(LaunchShape{pd::decode::kThreads, smem});
  });
}

}  // namespace decodebench::kernels
