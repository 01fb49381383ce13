// The integer KV conversions of kernels/paged_decode/kv_convert.cuh through the emulator's f16x2
// arithmetic: every int8 code through each byte selector, every int4 nibble value at every
// position of a word, against the codes read off the word by plain shifts (the layout of
// src/quant/kv_quant.h: nibble i of a word is bits 4i..4i+3). Planted faults (the nibbles of each
// byte swapped, the two 16-bit halves swapped, int8's bias left out) must fail the same checkers.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>

#include "device/float_formats.h"
#include "kernels.h"

#define DECODEBENCH_TARGET_NS emu
#include "paged_decode/kv_convert.cuh"

namespace decodebench {
namespace {

namespace cv = kernels::emu::paged_decode::kv_convert;

float lo(std::uint32_t x) {
  return floatfmt::f16_to_float(static_cast<std::uint16_t>(x & 0xffffu));
}
float hi(std::uint32_t x) { return floatfmt::f16_to_float(static_cast<std::uint16_t>(x >> 16)); }
int nibble(std::uint32_t w, int i) { return static_cast<int>((w >> (4 * i)) & 0xfu); }

using Int4Pairs = std::function<void(std::uint32_t, std::uint32_t (&)[4])>;

// Mismatches of `convert` against int4_pairs' contract, x[j] = (nibble j, nibble 4 + j), over
// words that put every value 0..15 at every nibble position, plus random words.
int int4_mismatches(const Int4Pairs& convert) {
  std::mt19937 rng(4);
  int bad = 0;
  const auto check = [&](std::uint32_t w) {
    std::uint32_t x[4];
    convert(w, x);
    for (int j = 0; j < 4; ++j) {
      bad += lo(x[j]) != static_cast<float>(nibble(w, j));
      bad += hi(x[j]) != static_cast<float>(nibble(w, 4 + j));
    }
  };
  for (int pos = 0; pos < 8; ++pos) {
    for (std::uint32_t v = 0; v < 16; ++v) {
      // The other nibbles differ from v, so a code read from the wrong place is seen.
      check((0x9E3779B9u & ~(0xfu << (4 * pos))) | (v << (4 * pos)));
      check(v << (4 * pos));
    }
  }
  for (int i = 0; i < 1000; ++i) check(static_cast<std::uint32_t>(rng()));
  return bad;
}

TEST(KvConvert, Int4PairsGiveEveryNibbleInItsHalf) {
  EXPECT_EQ(int4_mismatches([](std::uint32_t w, std::uint32_t(&x)[4]) { cv::int4_pairs(w, x); }),
            0);
}

TEST(KvConvert, PlantedInt4OrderFaultsAreCaught) {
  // A converter reading each byte's nibbles the other way round (high nibble first).
  EXPECT_GT(int4_mismatches([](std::uint32_t w, std::uint32_t(&x)[4]) {
              cv::int4_pairs(((w & 0x0F0F0F0Fu) << 4) | ((w >> 4) & 0x0F0F0F0Fu), x);
            }),
            0);
  // One taking the word's 16-bit halves in the other order.
  EXPECT_GT(int4_mismatches([](std::uint32_t w, std::uint32_t(&x)[4]) {
              cv::int4_pairs((w << 16) | (w >> 16), x);
            }),
            0);
}

// Mismatches of `pair` (one f16x2 of two codes from a word of 4 int8 codes, selector `sel`)
// against the signed codes of bytes (lo, hi) of the word.
int int8_mismatches(const std::function<std::uint32_t(std::uint32_t, std::uint32_t)>& pair) {
  struct Sel {
    std::uint32_t sel;
    int lo_byte, hi_byte;
  };
  const Sel sels[] = {{cv::kInt8Bytes01, 0, 1},
                      {cv::kInt8Bytes23, 2, 3},
                      {cv::kInt8Bytes02, 0, 2},
                      {cv::kInt8Bytes13, 1, 3}};
  int bad = 0;
  for (int code = -128; code < 128; ++code) {
    for (const Sel& s : sels) {
      const auto byte = static_cast<std::uint32_t>(static_cast<std::uint8_t>(code));
      // The code at the selector's low byte, its negation - 1 at the high one, 0x5A elsewhere.
      const auto other = static_cast<std::uint32_t>(static_cast<std::uint8_t>(~code));
      std::uint32_t w = 0x5A5A5A5Au;
      w = (w & ~(0xffu << (8 * s.lo_byte))) | (byte << (8 * s.lo_byte));
      w = (w & ~(0xffu << (8 * s.hi_byte))) | (other << (8 * s.hi_byte));
      const std::uint32_t x = pair(w ^ 0x80808080u, s.sel);  // the kernels bias a whole word
      bad += lo(x) != static_cast<float>(code);
      bad += hi(x) != static_cast<float>(static_cast<std::int8_t>(~code));
    }
  }
  return bad;
}

TEST(KvConvert, Int8PairsGiveEveryCodeThroughEverySelector) {
  EXPECT_EQ(int8_mismatches(
                [](std::uint32_t biased, std::uint32_t sel) { return cv::int8_pair(biased, sel); }),
            0);
}

TEST(KvConvert, PlantedInt8FaultsAreCaught) {
  // The bias of 128 left out (the word converted as unsigned codes).
  EXPECT_GT(int8_mismatches([](std::uint32_t biased, std::uint32_t sel) {
              return cv::f16x2_sub(cv::byte_perm(biased, 0x64646464u, sel), cv::kF16Magic);
            }),
            0);
  // The two halves of the pair swapped.
  EXPECT_GT(int8_mismatches([](std::uint32_t biased, std::uint32_t sel) {
              const std::uint32_t x = cv::int8_pair(biased, sel);
              return (x << 16) | (x >> 16);
            }),
            0);
}

}  // namespace
}  // namespace decodebench
