// kernels::emu::launch_quantize (the same source nvcc compiles for the GPU) against
// src/common/dtype.h's encode_value: every element of a strided f16/bf16 matrix cast to fp8 with
// the layer's activation scale, bit for bit, on the vector path (16-byte rows) and the scalar
// path (odd widths, strides, pointers); saturation, NaN, subnormals; nothing written outside
// the rows' first `cols` bytes; the preconditions; and a planted wrong scale that the
// comparison must catch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "device/counter_rng.h"
#include "kernels.h"
#include "workload/layer_model.h"

namespace decodebench {
namespace {

namespace k = kernels;

constexpr unsigned char kCanary = 0xA5;

// A 16-byte aligned byte buffer of `bytes` (+ `offset` in front, to misalign on purpose) filled
// with kCanary, and 64 canary bytes after it.
class Bytes {
 public:
  explicit Bytes(std::size_t bytes, std::size_t offset = 0)
      : offset_(offset), chunks_((offset + bytes + 64 + 15) / 16) {
    std::memset(chunks_.data(), kCanary, chunks_.size() * 16);
  }
  std::byte* data() { return reinterpret_cast<std::byte*>(chunks_.data()) + offset_; }
  const std::byte* data() const {
    return reinterpret_cast<const std::byte*>(chunks_.data()) + offset_;
  }

 private:
  struct alignas(16) Chunk {
    unsigned char b[16];
  };
  std::size_t offset_;
  std::vector<Chunk> chunks_;
};

struct Case {
  DType src = DType::bf16;
  DType dst = DType::fp8_e4m3;
  std::int64_t rows = 3, cols = 0, src_ld = 0, dst_ld = 0;
  std::size_t src_offset = 0, dst_offset = 0;  // bytes past 16-byte alignment
  float inv_scale = 1.0f / kActivationFp8Scale;
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.src)) + "->" + std::string(dtype_name(c.dst)) + " " +
         std::to_string(c.rows) + "x" + std::to_string(c.cols) + " ld " + std::to_string(c.src_ld) +
         "/" + std::to_string(c.dst_ld) + " offsets " + std::to_string(c.src_offset) + "/" +
         std::to_string(c.dst_offset);
}

// Source values: O(1) normals (what the layer's activations are), a few far outside the fp8
// range (saturation), tiny ones (fp8 subnormals and underflow to zero), exact zeros of both
// signs, and the specials of the 16-bit format (inf, NaN). Padding elements past `cols` hold
// values whose cast would be visible, so reading them would show.
std::vector<std::byte> make_src(const Case& c) {
  const std::size_t size = dtype_size(c.src);
  std::vector<std::byte> src(static_cast<std::size_t>(c.rows * c.src_ld) * size);
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (std::int64_t j = 0; j < c.src_ld; ++j) {
      const auto i = static_cast<std::uint64_t>(r * c.src_ld + j);
      float v = counter_normal(/*seed=*/99, /*tensor=*/7, i);
      switch (i % 23) {
        case 3: v *= 200.f; break;  // |v| up to ~1350: past 448 x kActivationFp8Scale
        case 5: v *= 1e-3f; break;  // e4m3 subnormals after the scale
        case 7: v *= 1e-6f; break;  // rounds to zero
        case 11: v = 0.f; break;
        case 13: v = -0.f; break;
        case 17: v = std::numeric_limits<float>::infinity(); break;
        case 19: v = -std::numeric_limits<float>::infinity(); break;
        case 21: v = std::numeric_limits<float>::quiet_NaN(); break;
        default: break;
      }
      encode_value(c.src, v, src.data() + i * size);
    }
  }
  return src;
}

// Runs the emulated cast of `c` (with `inv_scale` for the kernel, which a planted fault may
// change) and returns the first difference from encode_value(dst, decode(src) * c.inv_scale),
// or a write outside the rows' first `cols` bytes; empty when all agree.
std::string quantize_and_compare(const Case& c, float kernel_inv_scale) {
  const std::vector<std::byte> host_src = make_src(c);
  Bytes src(host_src.size(), c.src_offset);
  std::memcpy(src.data(), host_src.data(), host_src.size());
  const std::size_t dst_bytes = static_cast<std::size_t>(c.rows * c.dst_ld);
  Bytes dst(dst_bytes, c.dst_offset);
  k::QuantizeParams p;
  p.src = src.data();
  p.src_dtype = c.src;
  p.src_ld = c.src_ld;
  p.dst = dst.data();
  p.dst_dtype = c.dst;
  p.dst_ld = c.dst_ld;
  p.rows = c.rows;
  p.cols = c.cols;
  p.inv_scale = kernel_inv_scale;
  const k::LaunchResult r = k::emu::launch_quantize(p, /*stream=*/nullptr);
  if (!r.ok()) return "launch failed: " + r.message;
  const std::size_t size = dtype_size(c.src);
  for (std::int64_t row = 0; row < c.rows; ++row) {
    for (std::int64_t j = 0; j < c.dst_ld; ++j) {
      const std::size_t at = static_cast<std::size_t>(row * c.dst_ld + j);
      const auto got = static_cast<unsigned char>(dst.data()[at]);
      if (j >= c.cols) {
        if (got != kCanary)
          return "wrote padding at row " + std::to_string(row) + " col " + std::to_string(j);
        continue;
      }
      const float x = decode_value(c.src, host_src.data() + (row * c.src_ld + j) * size);
      std::byte want_byte;
      encode_value(c.dst, x * c.inv_scale, &want_byte);
      const auto want = static_cast<unsigned char>(want_byte);
      if (got != want) {
        return "row " + std::to_string(row) + " col " + std::to_string(j) + ": src " +
               std::to_string(x) + ", kernel " + std::to_string(got) + ", encode_value " +
               std::to_string(want);
      }
    }
  }
  for (std::size_t i = dst_bytes; i < dst_bytes + 48; ++i) {
    if (static_cast<unsigned char>(dst.data()[i]) != kCanary) return "wrote past the end";
  }
  return {};
}

class QuantizeMatchesEncode : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

// The vector path: rows of a multiple of 8 elements, wide enough that the emulated stride loop
// goes round more than once (2 blocks x 256 threads x 8 elements per pass); down_proj's case
// of a gate half read with stride 2 I into a compact row.
TEST_P(QuantizeMatchesEncode, VectorPath) {
  Case c;
  c.src = std::get<0>(GetParam());
  c.dst = std::get<1>(GetParam());
  c.rows = 3;
  c.cols = 8 * 700;
  c.src_ld = 2 * c.cols;
  c.dst_ld = c.cols;
  EXPECT_EQ(quantize_and_compare(c, c.inv_scale), "") << describe(c);
}

// The scalar path: an odd width, odd strides, padding after each dst row; and a misaligned
// source pointer with otherwise vector-friendly sizes.
TEST_P(QuantizeMatchesEncode, ScalarPath) {
  Case c;
  c.src = std::get<0>(GetParam());
  c.dst = std::get<1>(GetParam());
  c.rows = 5;
  c.cols = 37;
  c.src_ld = 41;
  c.dst_ld = 45;
  EXPECT_EQ(quantize_and_compare(c, c.inv_scale), "") << describe(c);
  Case misaligned = c;
  misaligned.rows = 2;
  misaligned.cols = 64;
  misaligned.src_ld = 64;
  misaligned.dst_ld = 72;
  misaligned.src_offset = 2;
  EXPECT_EQ(quantize_and_compare(misaligned, misaligned.inv_scale), "") << describe(misaligned);
  Case dst_misaligned = misaligned;
  dst_misaligned.src_offset = 0;
  dst_misaligned.dst_offset = 4;
  EXPECT_EQ(quantize_and_compare(dst_misaligned, dst_misaligned.inv_scale), "")
      << describe(dst_misaligned);
}

INSTANTIATE_TEST_SUITE_P(EveryPair, QuantizeMatchesEncode,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Values(DType::fp8_e4m3, DType::fp8_e5m2)),
                         [](const auto& param_info) {
                           return std::string(dtype_name(std::get<0>(param_info.param))) + "_to_" +
                                  std::string(dtype_name(std::get<1>(param_info.param)));
                         });

// What the layer relies on, spelled out: with kActivationFp8Scale the generator's bound maps to
// e4m3's largest value, beyond it the cast saturates (never NaN), NaN stays NaN.
TEST(Quantize, SaturatesAtTheActivationScale) {
  const std::vector<float> values = {kGeneratorBound, 2 * kGeneratorBound, -1e4f,
                                     std::numeric_limits<float>::quiet_NaN(), 0.f};
  const std::vector<unsigned char> want = {0x7e, 0x7e, 0xfe, 0x7f, 0x00};
  Bytes src(16), dst(16);
  for (std::size_t i = 0; i < values.size(); ++i) {
    encode_value(DType::bf16, values[i], src.data() + 2 * i);
  }
  k::QuantizeParams p;
  p.src = src.data();
  p.src_dtype = DType::bf16;
  p.src_ld = static_cast<std::int64_t>(values.size());
  p.dst = dst.data();
  p.dst_ld = p.src_ld;
  p.rows = 1;
  p.cols = p.src_ld;
  p.inv_scale = 1.0f / kActivationFp8Scale;
  ASSERT_TRUE(k::emu::launch_quantize(p, nullptr).ok());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(static_cast<unsigned char>(dst.data()[i]), want[i]) << "value " << values[i];
  }
}

// The comparison can fail: a kernel run with a scale off by 1 %, or with the
// inverse of the scale, is caught on both paths.
TEST(Quantize, PlantedWrongScaleIsCaught) {
  Case vec;
  vec.cols = 8 * 40;
  vec.src_ld = vec.dst_ld = vec.cols;
  Case scalar = vec;
  scalar.cols = 37;
  scalar.src_ld = scalar.dst_ld = 39;
  for (const Case& c : {vec, scalar}) {
    EXPECT_NE(quantize_and_compare(c, c.inv_scale * 1.01f), "") << describe(c);
    EXPECT_NE(quantize_and_compare(c, kActivationFp8Scale), "") << describe(c);
  }
}

TEST(Quantize, Preconditions) {
  Bytes src(64), dst(64);
  k::QuantizeParams p;
  p.src = src.data();
  p.src_dtype = DType::f16;
  p.dst = dst.data();
  p.rows = 2;
  p.cols = 8;
  p.src_ld = 8;
  p.dst_ld = 8;
  auto refused = [](const k::QuantizeParams& q, const std::string& why) {
    const k::LaunchResult r = k::emu::launch_quantize(q, nullptr);
    EXPECT_EQ(r.status, k::LaunchStatus::unsupported) << why;
    EXPECT_NE(r.message.find(why), std::string::npos) << r.message;
  };
  k::QuantizeParams q = p;
  q.src = nullptr;
  refused(q, "must not be null");
  q = p;
  q.src_dtype = DType::fp8_e4m3;
  refused(q, "src dtype must be f16 or bf16");
  q = p;
  q.dst_dtype = DType::bf16;
  refused(q, "dst dtype must be fp8_e4m3 or fp8_e5m2");
  q = p;
  q.dst_ld = 7;
  refused(q, "at least cols (8)");
  q = p;
  q.rows = 65536;
  refused(q, "at most 65535 rows");
  q = p;
  q.cols = -1;
  refused(q, "must not be negative");
  // Nothing to do: no launch, nothing written.
  q = p;
  q.rows = 0;
  EXPECT_TRUE(k::emu::launch_quantize(q, nullptr).ok());
  EXPECT_EQ(static_cast<unsigned char>(dst.data()[0]), kCanary);
}

}  // namespace
}  // namespace decodebench
