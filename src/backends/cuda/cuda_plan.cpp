#include "backends/cuda/cuda_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/units.h"

namespace decodebench::cuda {

double theoretical_bandwidth(std::int64_t memory_clock_khz, std::int64_t bus_width_bits) {
  if (memory_clock_khz <= 0 || bus_width_bits <= 0) return 0;
  return 2.0 * static_cast<double>(memory_clock_khz) * 1e3 * static_cast<double>(bus_width_bits) /
         8.0;
}

std::size_t ceiling_buffer_bytes(std::size_t l2_bytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t want = std::max(8 * l2_bytes, kMinCeilingBufferBytes);
  return (want + kMiB - 1) / kMiB * kMiB;
}

std::size_t ceiling_buffer_bytes_that_fit(std::size_t free_bytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  if (free_bytes <= kMemoryHeadroomBytes) return 0;
  return (free_bytes - kMemoryHeadroomBytes) / 3 / kMiB * kMiB;
}

namespace {

// One tensor's pool: its codes (kv_row_bytes a row) and, for an integer format, the f16 scales
// (and zeros) beside them, laid out by the format's scale axis (kernels/kv_formats.h).
std::size_t pool_bytes(const kernels::PagedDecodeParams& p, bool key) {
  const std::size_t rows = static_cast<std::size_t>(p.num_blocks) * p.num_kv_heads * p.block_size;
  const std::size_t codes = rows * kv_row_bytes(p.kv_dtype, p.head_dim);
  const std::size_t block_heads = static_cast<std::size_t>(p.num_blocks) * p.num_kv_heads;
  const std::size_t scales =
      block_heads * kv_scales_per_block_head(p.kv_dtype, key, p.head_dim, p.block_size);
  const std::size_t arrays = kv_layout(p.kv_dtype, key).zeros ? 2 : 1;
  return codes + scales * arrays * kKvScaleBytes;
}

}  // namespace

PointFootprint point_footprint(const kernels::PagedDecodeParams& p,
                               const kernels::KernelInfo& kernel,
                               const kernels::ResidentCtas& gpu) {
  PointFootprint f;
  const std::size_t rows = static_cast<std::size_t>(p.batch) * p.num_q_heads * p.head_dim;
  f.q = rows * dtype_size(p.q_dtype);
  // MLA: out is [rows][Hq][v_head_dim], and there is no V pool (the values are in the K rows).
  f.out = kernels::is_mla(p) ? f.q / p.head_dim * p.v_head_dim : f.q;
  f.k_cache = pool_bytes(p, /*key=*/true);
  f.v_cache = kernels::is_mla(p) ? 0 : pool_bytes(p, /*key=*/false);
  f.block_tables = static_cast<std::size_t>(p.batch) * p.max_blocks_per_seq * sizeof(std::int32_t);
  f.context_lens = static_cast<std::size_t>(p.batch) * sizeof(std::int32_t);
  kernels::PagedDecodeParams planned = p;
  kernels::PrefixPlan plan;
  if (kernel.prefix_aware) {
    plan = kernels::plan_prefixes(p);
    plan.bind(planned);
    f.prefix_plan = plan.packed().size() * sizeof(std::int32_t);
  }
  if (kernel.uses_workspace) {
    const kernels::SplitKvWorkspace w = kernels::plan_workspace(kernel, planned, gpu);
    f.num_splits = w.num_splits;
    f.workspace = w.total_bytes;
  }
  return f;
}

std::string memory_skip_reason(const PointFootprint& need, std::size_t free_bytes) {
  const std::size_t usable =
      free_bytes > kMemoryHeadroomBytes ? free_bytes - kMemoryHeadroomBytes : 0;
  if (need.total() <= usable) return {};
  std::string reason = "needs " + format_gb(static_cast<double>(need.total())) +
                       " of device memory (K/V cache " +
                       format_gb(static_cast<double>(need.k_cache + need.v_cache));
  if (need.workspace > 0) {
    reason += ", split workspace " + format_gb(static_cast<double>(need.workspace));
  }
  reason += ", plus " + format_gb(static_cast<double>(kMemoryHeadroomBytes)) +
            " headroom), device has " + format_gb(static_cast<double>(free_bytes)) + " free";
  return reason;
}

std::string bad_device_message(int requested, const std::vector<std::string>& device_names) {
  std::string msg = "--device " + std::to_string(requested) + " is not a CUDA device here; ";
  if (device_names.empty()) return msg + "no CUDA device is visible";
  msg += "valid: ";
  for (std::size_t i = 0; i < device_names.size(); ++i) {
    if (i > 0) msg += ", ";
    msg += std::to_string(i) + " (" + device_names[i] + ")";
  }
  return msg;
}

L2FlushPlan plan_l2_flush(std::size_t l2_bytes, int sm_count) {
  L2FlushPlan plan;
  if (l2_bytes == 0) return plan;
  auto round16 = [](std::size_t b) { return (b + 15) / 16 * 16; };
  plan.write_bytes = round16(2 * l2_bytes);
  plan.read_bytes = round16(std::max(2 * l2_bytes, kMinFlushReadBytes));
  plan.read_block = kFlushReadBlock;
  plan.read_grid = kFlushReadBlocksPerSm * std::max(1, sm_count);
  return plan;
}

FlushRecord flush_record(const L2FlushPlan& plan, std::size_t l2_bytes) {
  return {static_cast<double>(std::min(plan.write_bytes, plan.read_bytes)),
          static_cast<double>(l2_bytes)};
}

namespace {
// ceil(window / estimate) clamped to [1, kMaxStepsPerSample]; the cap for a non-positive or
// NaN estimate. A ratio within 1e-9 above an integer counts as that integer (50e-6 / 1e-6 is
// 50.000000000000007 in doubles). Clamped as a double: the ratio can exceed int.
int steps_covering(double window_s, double estimate_s) {
  if (!(estimate_s > 0)) return kMaxStepsPerSample;
  const double n = std::ceil(window_s / estimate_s * (1 - 1e-9));
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(kMaxStepsPerSample)));
}
}  // namespace

int steps_per_sample(double estimate_s) { return steps_covering(kWarmSampleSeconds, estimate_s); }

int lead_in_steps(double estimate_s) { return steps_covering(kLeadInSeconds, estimate_s); }

// ---- what the GPU can run --------------------------------------------------------------------

namespace {

// One CMAKE_CUDA_ARCHITECTURES entry, read: "90a" -> {90, 'a', sass, ptx}.
struct ArchEntry {
  int number = 0;   // 10 x major + minor
  char suffix = 0;  // 0, 'a' (arch-specific) or 'f' (family)
  bool sass = false;
  bool ptx = false;
};

std::optional<ArchEntry> read_arch(std::string_view e) {
  ArchEntry a;
  a.sass = a.ptx = true;
  for (const auto& [tail, sass, ptx] : {std::tuple{std::string_view("-real"), true, false},
                                        std::tuple{std::string_view("-virtual"), false, true}}) {
    if (e.size() > tail.size() && e.substr(e.size() - tail.size()) == tail) {
      e.remove_suffix(tail.size());
      a.sass = sass;
      a.ptx = ptx;
    }
  }
  if (!e.empty() && (e.back() == 'a' || e.back() == 'f')) {
    a.suffix = e.back();
    e.remove_suffix(1);
  }
  if (e.size() < 2 || e.size() > 3) return std::nullopt;
  for (const char c : e) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return std::nullopt;
  }
  for (const char c : e) a.number = 10 * a.number + (c - '0');
  return a;
}

// Whether code of `a` runs on a device of compute capability `cc` (10 x major + minor).
bool runs_on(const ArchEntry& a, int cc) {
  const bool same_major = a.number / 10 == cc / 10;
  if (a.suffix == 'a') return a.number == cc;
  if (a.suffix == 'f') return same_major && cc >= a.number;
  return (a.sass && same_major && cc >= a.number) || (a.ptx && cc >= a.number);
}

}  // namespace

std::string build_arch_error(std::string_view cuda_architectures, int cc_major, int cc_minor) {
  const int cc = 10 * cc_major + cc_minor;
  if (cc < kMinComputeCapability) {
    return fmt::format(
        "this GPU has compute capability {}.{}; the decode kernels use cp.async, ldmatrix and "
        "mma.sync, which need 8.0 or newer",
        cc_major, cc_minor);
  }
  std::string archs;
  std::string_view rest = cuda_architectures;
  while (!rest.empty()) {
    const std::size_t cut = rest.find_first_of(";,");
    const std::string_view entry = rest.substr(0, cut);
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
    if (entry.empty()) continue;
    const std::optional<ArchEntry> a = read_arch(entry);
    if (!a || runs_on(*a, cc)) return "";
    archs += (archs.empty() ? "" : ", ") + std::string(entry);
  }
  if (archs.empty()) return "";  // nothing listed: nothing to judge
  return fmt::format(
      "this build's CUDA kernels are compiled for CMAKE_CUDA_ARCHITECTURES {}, none of which runs "
      "on this GPU (compute capability {}.{}); rebuild for it: scripts/run.sh chooses the "
      "architecture from nvidia-smi, or configure with the one scripts/cuda-arch.sh {}.{} prints",
      archs, cc_major, cc_minor, cc_major, cc_minor);
}

std::string device_skip_reason(const DeviceLimits& gpu, const kernels::KernelInfo& kernel,
                               const kernels::PagedDecodeParams& p, std::size_t smem_bytes) {
  if (10 * gpu.cc_major + gpu.cc_minor < kMinComputeCapability) {
    return fmt::format(
        "kernel '{}' needs compute capability 8.0 or newer (cp.async, ldmatrix, mma.sync); this "
        "GPU: {}.{}",
        kernel.name, gpu.cc_major, gpu.cc_minor);
  }
  if (gpu.smem_per_block_optin > 0 && smem_bytes > gpu.smem_per_block_optin) {
    const auto kib = [](std::size_t b) { return fmt::format("{:.1f} KiB", b / 1024.0); };
    return fmt::format(
        "kernel '{}' needs {} of shared memory per thread block for {} KV at head_dim {}; this GPU "
        "(compute capability {}.{}) allows {}",
        kernel.name, kib(smem_bytes), dtype_name(p.kv_dtype), p.head_dim, gpu.cc_major,
        gpu.cc_minor, kib(gpu.smem_per_block_optin));
  }
  return "";
}

}  // namespace decodebench::cuda
