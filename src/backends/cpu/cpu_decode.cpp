// Validation, split planning and dispatch of the CPU decode; the driver is in cpu_decode_driver.h.
#include "backends/cpu/cpu_decode.h"

#include <omp.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_decode_avx2_loads.h"
#include "backends/cpu/cpu_decode_avx512_loads.h"
#include "backends/cpu/cpu_decode_cascade.h"
#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_driver.h"
#include "backends/cpu/cpu_decode_mla.h"
#include "backends/cpu/cpu_decode_scalar.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "device/paged_kv.h"

namespace decodebench::cpu {
namespace detail {
// Instantiated in the generated per-dtype translation units (cpu_decode_<dtype>.cpp).
#define DECODEBENCH_CPU_EXTERN(dtype)                                                            \
  extern template void decode_for_dtype<DType::dtype>(const PagedDecodeParams&, int, int,        \
                                                      DecodePath);                               \
  extern template std::uint64_t read_walk_for_dtype<DType::dtype>(const PagedDecodeParams&, int, \
                                                                  int, DecodePath);              \
  extern template void cascade_for_dtype<DType::dtype>(const PagedDecodeParams&, int, int, int,  \
                                                       DecodePath, bool);
#include "cpu_decode_extern.inc"  // every format of kernels/kv_formats.h
#undef DECODEBENCH_CPU_EXTERN

namespace {
// AMD family 0x1A (Zen 5) and later: the one kind of core where prefetcht0 measured faster.
bool amd_zen5_or_later() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // AuthenticAMD
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  unsigned family = (eax >> 8) & 0xf;
  if (family == 0xf) family += (eax >> 20) & 0xff;
  return family >= 0x1a;
#else
  return false;
#endif
}

// DECODEBENCH_CPU_PREFETCH=l1|l2 overrides the choice, for A/B runs on one binary.
bool choose_prefetch_into_l1() {
  if (const char* env = std::getenv("DECODEBENCH_CPU_PREFETCH")) {
    const std::string_view level = env;
    if (level == "l1") return true;
    if (level == "l2") return false;
    std::fprintf(stderr,
                 "decodebench: DECODEBENCH_CPU_PREFETCH='%s' ignored (valid: l1, l2); the CPU "
                 "decode chooses its prefetch level from the CPU\n",
                 env);
  }
  return amd_zen5_or_later();
}
}  // namespace

const bool kPrefetchIntoL1 = choose_prefetch_into_l1();

// f.template operator()<kv>() for the DType `kv`: the one run-time -> compile-time switch, over
// every format of the table (kernels/kv_formats.h).
template <int kIndex = 0, class F>
decltype(auto) with_kv_dtype(DType kv, F&& f) {
  constexpr DType kType = kKvFormats[kIndex].dtype;
  if constexpr (kIndex + 1 < kNumKvFormats) {
    if (kv != kType) return with_kv_dtype<kIndex + 1>(kv, std::forward<F>(f));
  }
  return f.template operator()<kType>();  // the last format, or `kv`
}
}  // namespace detail

namespace {

// A split shorter than this many tokens costs more in merging and scheduling than it gains.
constexpr int kMinSplitTokens = 256;

}  // namespace

bool avx512_compiled() { return DECODEBENCH_CPU_AVX512 != 0; }
bool avx2_compiled() { return DECODEBENCH_CPU_AVX2 != 0; }

namespace {
// What `automatic` runs: the first compiled in of avx512 > avx2 > portable.
DecodePath best_compiled_path() {
  return avx512_compiled() ? DecodePath::avx512
         : avx2_compiled() ? DecodePath::avx2
                           : DecodePath::portable;
}
}  // namespace

const char* prefetch_level_name() { return detail::kPrefetchIntoL1 ? "l1" : "l2"; }

const char* resolved_path_name(DecodePath path) {
  switch (path) {
    case DecodePath::portable: return "portable";
    case DecodePath::avx2: return "avx2";
    case DecodePath::avx512: return "avx512";
    case DecodePath::automatic: break;
  }
  return resolved_path_name(best_compiled_path());
}

namespace {
// `path` made concrete: automatic -> best_compiled_path(); a named path that this build lacks
// is an InputError naming the paths it has.
DecodePath checked_path(DecodePath path) {
  const bool compiled = path == DecodePath::avx512 ? avx512_compiled()
                        : path == DecodePath::avx2 ? avx2_compiled()
                                                   : true;
  if (!compiled) {
    std::string valid = "automatic";
    if (avx512_compiled()) valid += ", avx512";
    if (avx2_compiled()) valid += ", avx2";
    valid += ", portable";
    throw InputError(std::string("the ") + resolved_path_name(path) +
                     " cpu path is not compiled into this build (valid here: " + valid +
                     "; avx512 needs DECODEBENCH_CPU_ARCH=native on an AVX-512 machine, avx2 "
                     "native on an AVX2 machine or x86-64-v3)");
  }
  return path == DecodePath::automatic ? best_compiled_path() : path;
}
}  // namespace

const kernels::KernelInfo& decode_info() {
  static const kernels::KernelInfo info = [] {
    kernels::KernelInfo k;
    k.name = "cpu";
    k.idea = "the optimized host decode (OpenMP, AVX-512, AVX2 or portable tile kernels)";
    // Every head_dim instantiated in cpu_decode_<dtype>.cpp, and MLA's 576-wide latent
    // (cpu_decode_mla.cpp, any width a multiple of 16; 576 is every MLA model's).
    k.head_dims = {64, 128, 256, 576};
    for (const KvFormatInfo& f : kKvFormats) k.kv_dtypes.push_back(f.dtype);  // every format
    k.q_dtypes = {DType::f16, DType::bf16};
    k.min_block_size = 1;
    k.max_group = 0;  // any
    k.max_batch = 0;  // any: no grid limits on the host
    // window, sinks, soft-cap: decode_step (and the cascade, cpu_decode_cascade.h)
    k.window = k.sinks = k.softcap = true;
    k.mla = true;  // cpu_decode_mla.cpp
    return k;
  }();
  return info;
}

std::string unsupported_reason(const kernels::PagedDecodeParams& p, kernels::CheckScope scope) {
  if (std::string why = kernels::unsupported_reason(decode_info(), p, scope); !why.empty())
    return why;
  const bool mla = kernels::is_mla(p);
  if (!mla && p.head_dim == 576)
    return "kernel 'cpu' takes head_dim 576 for MLA only (v_head_dim 512, values inside the "
           "keys; valid for per-head K and V: 64, 128, 256)";
  if (!mla) return {};
  if (is_int_kv(p.kv_dtype))
    return "kernel 'cpu' does not take KV dtype " + std::string(kv_format(p.kv_dtype).name) +
           " with MLA (valid: " + dtype_names(DtypeKind::element) + ")";
  if (p.num_kv_heads != 1 || p.v_head_dim % 16 != 0 || p.v_head_dim > p.head_dim)
    return "kernel 'cpu' does not take MLA with " + std::to_string(p.num_kv_heads) +
           " KV heads and v_head_dim " + std::to_string(p.v_head_dim) +
           " (valid: one latent KV head, v_head_dim a multiple of 16 up to head_dim)";
  if (p.window > 0 || p.has_sinks || p.softcap > 0)
    return "kernel 'cpu' does not take a window, sinks or soft-capping with MLA (valid: full "
           "attention; no MLA model has them)";
  if (scope != kernels::CheckScope::shape && p.v_cache != p.k_cache)
    return "kernel 'cpu' reads MLA's values from the K rows: v_cache must be k_cache";
  return {};
}

int plan_cpu_splits(const kernels::PagedDecodeParams& p, int num_threads) {
  if (num_threads <= 1 || p.batch <= 0) return 1;
  int max_len = 1;
  for (int b = 0; b < p.batch; ++b) {  // what an item walks: a window's tokens, or all
    max_len =
        std::max(max_len, p.context_lens[b] - window_first_token(p.context_lens[b], p.window));
  }
  const int by_length = std::max(1, max_len / kMinSplitTokens);
  // Work items are (sequence, split), handed out dynamically. With equal contexts the busiest
  // thread gets ceil(items / threads) of them: take the fewest splits that keep every thread
  // within ~6 % of that (batch 8 on 2 threads: 1 split; batch 7: 2; batch 1: 2).
  const int max_splits = std::min(by_length, 4 * num_threads);
  for (int splits = 1; splits <= max_splits; ++splits) {
    const int items = p.batch * splits;
    const int rounds = (items + num_threads - 1) / num_threads;
    if (items >= num_threads && 16 * items >= 15 * rounds * num_threads) return splits;
  }
  return max_splits;
}

namespace {
// What paged_decode and paged_kv_read run with, after checking `p` and `options`.
struct Launch {
  DecodePath path;  // concrete and compiled in
  int threads;
  int splits;
};
Launch checked_launch(const kernels::PagedDecodeParams& p, const DecodeOptions& options,
                      bool needs_q_out) {
  if (std::string why = unsupported_reason(p); !why.empty()) throw InputError(why);
  const DecodePath path = checked_path(options.path);
  if (!p.k_cache || !p.v_cache || !p.block_tables || !p.context_lens ||
      (needs_q_out && (!p.q || !p.out)))
    throw InputError("cpu decode: a tensor pointer of the params is null");
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  return {path, threads, options.num_splits > 0 ? options.num_splits : plan_cpu_splits(p, threads)};
}
}  // namespace

void paged_decode(const kernels::PagedDecodeParams& p, const DecodeOptions& options) {
  const Launch l = checked_launch(p, options, /*needs_q_out=*/true);
  if (kernels::is_mla(p)) {
    if (std::string why = unsupported_reason(p, kernels::CheckScope::launch); !why.empty())
      throw InputError(why);
    detail::decode_mla(p, l.threads, l.splits, l.path);
    return;
  }
  detail::with_kv_dtype(p.kv_dtype, [&]<DType kKv>() {
    detail::decode_for_dtype<kKv>(p, l.threads, l.splits, l.path);
  });
}

int plan_prefix_chunks(const kernels::PagedDecodeParams& p, int num_threads) {
  const int groups = p.num_prefix_groups;
  if (num_threads <= 1 || groups <= 0) return 1;
  // What a group's prefix items read: from its earliest member's window block to the end.
  int max_tokens = 0;
  for (int g = 0; g < groups; ++g) {
    int begin = p.window > 0 ? p.prefix_group_tokens[g] : 0;
    for (int m = p.prefix_group_start[g]; p.window > 0 && m < p.prefix_group_start[g + 1]; ++m) {
      const int len = p.context_lens[p.prefix_group_seqs[m]];
      begin = std::min(begin, window_first_block(len, p.window, p.block_size) * p.block_size);
    }
    max_tokens = std::max(max_tokens, p.prefix_group_tokens[g] - begin);
  }
  // Items are (group, piece, KV head), handed out dynamically with the suffix items behind
  // them: four per thread keep the threads' shares within a quarter item of each other.
  const int items = groups * p.num_kv_heads;
  const int wanted = (4 * num_threads + items - 1) / items;
  return std::clamp(wanted, 1, std::max(1, max_tokens / kMinSplitTokens));
}

std::string cascade_unsupported_reason(const kernels::PagedDecodeParams& p) {
  // Windows, sinks and the soft-cap are taken (cpu_decode_cascade.h).
  if (kernels::is_mla(p))
    return "kernel 'cascade' does not take MLA (valid: per-head K and V; kernel 'cpu' takes MLA)";
  return "";
}

void paged_decode_cascade(const kernels::PagedDecodeParams& p, const DecodeOptions& options) {
  if (std::string why = cascade_unsupported_reason(p); !why.empty()) throw InputError(why);
  const Launch l = checked_launch(p, options, /*needs_q_out=*/true);
  if (std::string why = kernels::prefix_plan_error(p); !why.empty()) throw InputError(why);
  const int chunks =
      options.prefix_chunks > 0 ? options.prefix_chunks : plan_prefix_chunks(p, l.threads);
  int splits = options.num_splits;
  if (splits <= 0) {  // planned on what the suffix items read
    std::vector<std::int32_t> suffix_lens(p.context_lens, p.context_lens + p.batch);
    if (p.num_prefix_groups > 0)
      for (int b = 0; b < p.batch; ++b) suffix_lens[b] -= p.seq_prefix_tokens[b];
    kernels::PagedDecodeParams suffixes = p;
    suffixes.context_lens = suffix_lens.data();
    splits = plan_cpu_splits(suffixes, l.threads);
  }
  detail::with_kv_dtype(p.kv_dtype, [&]<DType kKv>() {
    detail::cascade_for_dtype<kKv>(p, l.threads, splits, chunks, l.path,
                                   !options.planted_prefix_ignores_window);
  });
}

std::uint64_t paged_kv_read(const kernels::PagedDecodeParams& p, const DecodeOptions& options) {
  if (kernels::is_mla(p)) throw InputError("paged_kv_read: the memory walk is not written for MLA");
  const Launch l = checked_launch(p, options, /*needs_q_out=*/false);
  return detail::with_kv_dtype(p.kv_dtype, [&]<DType kKv>() {
    return detail::read_walk_for_dtype<kKv>(p, l.threads, l.splits, l.path);
  });
}

namespace {
template <DType kKv>
void convert_typed(const std::byte* src, std::size_t count, float* dst, DecodePath path) {
  std::size_t i = 0;
#if DECODEBENCH_CPU_AVX512
  if (path == DecodePath::avx512) {
    // Through the tile kernels' loader: 64 elements at a time (the fp8 table path), then 16.
    const __m512 scale = _mm512_set1_ps(detail::kAvx512LoadScale<kKv>);
    for (; i + 64 <= count; i += 64) {
      __m512 v[4];
      detail::load_chunks<kKv, 4>(src + i * dtype_size(kKv), 0, v);
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(dst + i + 16 * c, _mm512_mul_ps(v[c], scale));
    }
    for (; i + 16 <= count; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_mul_ps(detail::load16<kKv>(src, i), scale));
  }
#endif
#if DECODEBENCH_CPU_AVX2
  if (path == DecodePath::avx2) {
    // Through the tile kernels' loaders: 16 elements at a time (the fp8 16-code path), then 8.
    const __m256 scale = _mm256_set1_ps(detail::kAvx2LoadScale<kKv>);
    for (; i + 16 <= count; i += 16) {
      __m256 v[2];
      detail::avx2::load_chunks<kKv, 2>(src + i * dtype_size(kKv), 0, v);
      for (int c = 0; c < 2; ++c) _mm256_storeu_ps(dst + i + 8 * c, _mm256_mul_ps(v[c], scale));
    }
    for (; i + 8 <= count; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_mul_ps(detail::avx2::load8<kKv>(src, i), scale));
  }
#endif
  (void)path;
  for (; i < count; ++i) dst[i] = detail::decode_element<kKv>(src, i);
}
}  // namespace

void convert_kv_to_float(DType kv_dtype, const void* src, std::size_t count, float* dst,
                         DecodePath path) {
  const DecodePath resolved = checked_path(path);
  const auto* bytes = static_cast<const std::byte*>(src);
  if (is_int_kv(kv_dtype))
    throw InputError(std::string("convert_kv_to_float: ") + std::string(dtype_name(kv_dtype)) +
                     " codes need their scales (valid: " + dtype_names(DtypeKind::element) + ")");
  detail::with_kv_dtype(kv_dtype, [&]<DType kKv>() {
    if constexpr (!is_int_kv(kKv)) convert_typed<kKv>(bytes, count, dst, resolved);
  });
}

void advise_huge_pages(const void* data, std::size_t bytes) {
#if defined(__linux__)
  constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kHuge - 1) & ~(kHuge - 1);  // whole huge pages inside
  const std::uintptr_t end = (first + bytes) & ~(kHuge - 1);
  if (end <= begin) return;
  void* start = reinterpret_cast<void*>(begin);
#if !defined(MADV_COLLAPSE)
  constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older C library headers lack the name
#endif
  if (::madvise(start, end - begin, MADV_COLLAPSE) != 0)
    ::madvise(start, end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace decodebench::cpu
