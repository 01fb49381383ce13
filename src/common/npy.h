// Minimal NumPy .npy files (format version 1.0): float32 and int32 arrays (and the quantized
// cache's int8, uint8 and f16), little-endian, C order.
// What `decodebench sweep --dump DIR` writes, so anyone can recompute a point with numpy.load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace decodebench {

// Write `data` with `shape` (product of shape == data.size(), else InputError). Throws
// RuntimeFailure naming the path if the file cannot be written.
void write_npy(const std::filesystem::path& path, std::span<const float> data,
               std::span<const std::int64_t> shape);
void write_npy(const std::filesystem::path& path, std::span<const std::int32_t> data,
               std::span<const std::int64_t> shape);
// Quantized caches: int8 codes ("|i1"), packed int4 codes ("|u1"), f16 scales given as their
// bits ("<f2").
void write_npy(const std::filesystem::path& path, std::span<const std::int8_t> data,
               std::span<const std::int64_t> shape);
void write_npy(const std::filesystem::path& path, std::span<const std::uint8_t> data,
               std::span<const std::int64_t> shape);
void write_npy_f16(const std::filesystem::path& path, std::span<const std::uint16_t> bits,
                   std::span<const std::int64_t> shape);

struct NpyArray {
  std::string descr;  // numpy dtype string, e.g. "<f4", "<i4"
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;  // raw element bytes as stored
  std::size_t elements() const;
  std::vector<float> as_float() const;         // requires descr "<f4"
  std::vector<std::int32_t> as_int32() const;  // requires descr "<i4"
};
// as_float() of an array of real values: InputError "<source>: [i, j] is nan; every value must
// be finite" at the first NaN or infinity, so that no measure is computed over one.
std::vector<float> finite_floats(const NpyArray& a, std::string_view source);
// "[1, 0, 3]": flat element `index` of `shape` as a C-order index, for messages.
std::string npy_index(std::span<const std::int64_t> shape, std::size_t index);
// Reads a version 1.0/2.0/3.0 .npy file; throws InputError naming the path and what is wrong
// (RuntimeFailure only when reading an opened file fails).
NpyArray read_npy(const std::filesystem::path& path);
// The same from the file's bytes; `source` starts the messages. The shape is checked against
// the bytes present before anything is allocated.
NpyArray parse_npy(std::string_view bytes, std::string_view source);

}  // namespace decodebench
