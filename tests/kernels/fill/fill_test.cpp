// kernels::emu::launch_fill (the same kernel source nvcc compiles for the GPU) against the host
// workload generator: for every dtype, Q, K and V must match make_workload() bit for bit, a
// partial last granule must leave the bytes past `count` alone, and a subset pool must be
// reproducible block by block from source_block_ids.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "kernels.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

namespace k = kernels;

// A 16-byte aligned byte buffer with `canary` bytes of 0xA5 after `bytes`.
class AlignedBytes {
 public:
  static constexpr std::size_t kCanary = 64;
  explicit AlignedBytes(std::size_t bytes) : bytes_(bytes), chunks_((bytes + kCanary + 15) / 16) {
    std::memset(chunks_.data(), 0xA5, chunks_.size() * 16);
  }
  std::byte* data() { return reinterpret_cast<std::byte*>(chunks_.data()); }
  std::size_t size() const { return bytes_; }
  bool canary_intact() const {
    const auto* p = reinterpret_cast<const unsigned char*>(chunks_.data());
    for (std::size_t i = bytes_; i < chunks_.size() * 16; ++i) {
      if (p[i] != 0xA5) return false;
    }
    return true;
  }

 private:
  struct alignas(16) Chunk {
    unsigned char b[16];
  };
  std::size_t bytes_;
  std::vector<Chunk> chunks_;
};

// Empty when equal; else the first differing element with both values.
std::string first_difference(const std::byte* got, const std::byte* want, std::size_t elements,
                             DType t) {
  const std::size_t size = dtype_size(t);
  for (std::size_t i = 0; i < elements; ++i) {
    if (std::memcmp(got + i * size, want + i * size, size) != 0) {
      return "element " + std::to_string(i) + ": fill " +
             std::to_string(decode_value(t, got + i * size)) + ", host " +
             std::to_string(decode_value(t, want + i * size));
    }
  }
  return {};
}

k::FillParams fill_params(void* dst, DType t, std::size_t count, const WorkloadSpec& spec,
                          Tensor tensor, std::uint64_t offset) {
  k::FillParams p;
  p.dst = dst;
  p.dtype = t;
  p.count = count;
  p.seed = spec.seed;
  p.tensor = static_cast<std::uint32_t>(tensor);
  p.index_offset = offset;
  p.inv_scale = inv_scale_for(tensor, spec.kv_dtype);
  return p;
}

// Small and odd: GQA 2, ragged contexts with partial last blocks, shared prefix blocks. Large
// enough (tens of thousands of K elements) that the emulated grid-stride loop goes round more
// than once even for fp8, whose threads write 16 elements per step.
WorkloadSpec small_spec(DType kv, DType q) {
  WorkloadSpec s;
  s.model = {"fill-test",     /*num_q_heads=*/4, /*num_kv_heads=*/2,
             /*head_dim=*/64, /*num_layers=*/1,  ""};
  s.batch = 5;
  s.context = ContextSpec::ragged(1, 97);
  s.hit_rate = 0.5;
  s.prefix_groups = 2;
  s.kv_dtype = kv;
  s.q_dtype = q;
  s.block_size = 8;
  s.seed = 20240611;
  return s;
}

// Runs the emulated fill of `count` elements of `tensor` and compares with `want`.
std::string fill_and_compare(const WorkloadSpec& spec, Tensor tensor, DType t,
                             const std::vector<std::byte>& want) {
  const std::size_t count = want.size() / dtype_size(t);
  AlignedBytes got(want.size());
  const k::LaunchResult r =
      k::emu::launch_fill(fill_params(got.data(), t, count, spec, tensor, 0), /*stream=*/nullptr);
  if (!r.ok()) return "launch failed: " + r.message;
  if (!got.canary_intact()) return "wrote past the end of the buffer";
  return first_difference(got.data(), want.data(), count, t);
}

class FillMatchesHost : public ::testing::TestWithParam<DType> {};

TEST_P(FillMatchesHost, QKV) {
  const DType kv = GetParam();
  const DType q = kv == DType::bf16 ? DType::bf16 : DType::f16;
  const WorkloadSpec spec = small_spec(kv, q);
  const Workload w = make_workload(spec);
  ASSERT_FALSE(w.k_cache.empty());
  EXPECT_EQ(fill_and_compare(spec, Tensor::k, kv, w.k_cache), "") << "K, " << dtype_name(kv);
  EXPECT_EQ(fill_and_compare(spec, Tensor::v, kv, w.v_cache), "") << "V, " << dtype_name(kv);
  EXPECT_EQ(fill_and_compare(spec, Tensor::q, q, w.q), "") << "Q, " << dtype_name(q);
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, FillMatchesHost,
                         ::testing::Values(DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3,
                                           DType::fp8_e5m2),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

// Windows that start mid-tensor and end at every position inside a granule: index_offset is
// honoured, whole granules and the partial last one agree, and the bytes after the last element
// stay untouched.
TEST(Fill, OffsetWindowsAndPartialGranules) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    const WorkloadSpec spec = small_spec(t, DType::f16);
    const Workload w = make_workload(spec);
    const std::size_t size = dtype_size(t);
    const std::size_t per_granule = 16 / size;
    constexpr std::size_t kOffset = 1001;  // odd: not a granule boundary of the source
    for (std::size_t count = 1; count <= 2 * per_granule + 1; ++count) {
      ASSERT_GE(w.k_cache.size(), (kOffset + count) * size);
      AlignedBytes got(count * size);
      const k::LaunchResult r = k::emu::launch_fill(
          fill_params(got.data(), t, count, spec, Tensor::k, kOffset), /*stream=*/nullptr);
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_TRUE(got.canary_intact()) << dtype_name(t) << ", count " << count;
      EXPECT_EQ(first_difference(got.data(), w.k_cache.data() + kOffset * size, count, t), "")
          << dtype_name(t) << ", count " << count;
    }
  }
}

// A validation subset packs its blocks into a smaller pool; the CUDA backend regenerates such a
// pool with one fill per block at source_block_ids[n] * block_elems. Same values as the host.
TEST(Fill, SubsetPoolBlockByBlock) {
  const WorkloadSpec spec = small_spec(DType::fp8_e5m2, DType::f16);
  const PagedLayout layout = build_layout(spec);
  const std::vector<int> rows = {3, 0};
  const Workload w = make_workload(spec, layout, rows);
  ASSERT_EQ(w.source_block_ids.size(), static_cast<std::size_t>(w.layout.num_blocks));
  const std::size_t block_elems =
      static_cast<std::size_t>(spec.model.num_kv_heads) * spec.block_size * spec.model.head_dim;
  AlignedBytes got(w.k_cache.size());
  for (std::size_t n = 0; n < w.source_block_ids.size(); ++n) {
    const k::LaunchResult r = k::emu::launch_fill(
        fill_params(got.data() + n * block_elems * dtype_size(spec.kv_dtype), spec.kv_dtype,
                    block_elems, spec, Tensor::k,
                    static_cast<std::uint64_t>(w.source_block_ids[n]) * block_elems),
        /*stream=*/nullptr);
    ASSERT_TRUE(r.ok()) << r.message;
  }
  EXPECT_EQ(first_difference(got.data(), w.k_cache.data(), w.k_cache.size(), spec.kv_dtype), "");
}

// The comparison can fail: a fill with a wrong seed, the wrong tensor, or an fp8 fill without
// the scale is caught.
TEST(Fill, PlantedFaultsAreCaught) {
  const WorkloadSpec spec = small_spec(DType::fp8_e4m3, DType::f16);
  const Workload w = make_workload(spec);
  WorkloadSpec wrong_seed = spec;
  wrong_seed.seed += 1;
  EXPECT_NE(fill_and_compare(wrong_seed, Tensor::k, spec.kv_dtype, w.k_cache), "");
  EXPECT_NE(fill_and_compare(spec, Tensor::v, spec.kv_dtype, w.k_cache), "");
  WorkloadSpec unscaled = spec;
  unscaled.kv_dtype = DType::f16;  // inv_scale_for(k, f16) = 1, the fp8 scale is lost
  EXPECT_NE(fill_and_compare(unscaled, Tensor::k, spec.kv_dtype, w.k_cache), "");
}

TEST(Fill, Preconditions) {
  AlignedBytes buf(64);
  const WorkloadSpec spec = small_spec(DType::f16, DType::f16);
  // Nothing to do: no launch, nothing written.
  k::LaunchResult r =
      k::emu::launch_fill(fill_params(buf.data(), DType::f16, 0, spec, Tensor::k, 0), nullptr);
  EXPECT_TRUE(r.ok()) << r.message;
  const std::vector<std::byte> untouched(64, std::byte{0xA5});
  EXPECT_EQ(std::memcmp(buf.data(), untouched.data(), 64), 0);
  // The vector stores need 16-byte alignment: refused, with the reason.
  r = k::emu::launch_fill(fill_params(buf.data() + 2, DType::f16, 8, spec, Tensor::k, 0), nullptr);
  EXPECT_EQ(r.status, k::LaunchStatus::unsupported);
  EXPECT_NE(r.message.find("16-byte aligned"), std::string::npos) << r.message;
  r = k::emu::launch_fill(fill_params(nullptr, DType::f16, 8, spec, Tensor::k, 0), nullptr);
  EXPECT_EQ(r.status, k::LaunchStatus::unsupported);
}

}  // namespace
}  // namespace decodebench
