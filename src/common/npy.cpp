#include "common/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "common/errors.h"

namespace decodebench {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes
constexpr std::size_t kMagicSize = 6;

// Header of version 1.0: magic, 1, 0, uint16 header length, then a Python dict literal padded
// with spaces and ended by '\n' so that the data starts at a multiple of 64 bytes.
std::string npy_header(std::string_view descr, std::span<const std::int64_t> shape) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += fmt::format("{}, ", shape[i]);
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);  // "(3, 4)"; one dim keeps "(3,)"
  else if (shape.size() == 1)
    dims.resize(dims.size() - 1);
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const std::size_t unpadded = kMagicSize + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back('\x01');
  out.push_back('\x00');
  const std::size_t len = dict.size();
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  return out + dict;
}

void write_raw(const std::filesystem::path& path, std::string_view descr, const void* data,
               std::size_t count, std::size_t elem_size, std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0)
      throw InputError(fmt::format("write_npy {}: negative dimension {}", path.string(), d));
    n *= d;
  }
  if (static_cast<std::size_t>(n) != count) {
    throw InputError(fmt::format("write_npy {}: shape has {} elements but data has {}",
                                 path.string(), n, count));
  }
  const std::string header = npy_header(descr, shape);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw RuntimeFailure(fmt::format("cannot open {} for writing", path.string()));
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  // Little-endian hosts only (x86-64, aarch64): the bytes are already in '<' order.
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(count * elem_size));
  f.flush();
  if (!f) throw RuntimeFailure(fmt::format("write to {} failed", path.string()));
}

// Value of `key` in the header dict, as the raw text up to the next top-level ',' or '}'.
std::string dict_value(const std::string& dict, std::string_view key,
                       const std::filesystem::path& path) {
  const std::string quoted = fmt::format("'{}'", key);
  std::size_t pos = dict.find(quoted);
  if (pos == std::string::npos) {
    throw RuntimeFailure(fmt::format("{}: .npy header has no '{}'", path.string(), key));
  }
  pos = dict.find(':', pos + quoted.size());
  if (pos == std::string::npos)
    throw RuntimeFailure(fmt::format("{}: bad .npy header", path.string()));
  ++pos;
  while (pos < dict.size() && dict[pos] == ' ') ++pos;
  std::size_t end = pos;
  int depth = 0;
  for (; end < dict.size(); ++end) {
    const char c = dict[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  return dict.substr(pos, end - pos);
}

}  // namespace

void write_npy(const std::filesystem::path& path, std::span<const float> data,
               std::span<const std::int64_t> shape) {
  write_raw(path, "<f4", data.data(), data.size(), sizeof(float), shape);
}

void write_npy(const std::filesystem::path& path, std::span<const std::int32_t> data,
               std::span<const std::int64_t> shape) {
  write_raw(path, "<i4", data.data(), data.size(), sizeof(std::int32_t), shape);
}

std::size_t NpyArray::elements() const {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::vector<float> NpyArray::as_float() const {
  if (descr != "<f4") throw InputError(fmt::format("npy array is '{}', not '<f4'", descr));
  std::vector<float> out(data.size() / sizeof(float));
  std::memcpy(out.data(), data.data(), out.size() * sizeof(float));
  return out;
}

std::vector<std::int32_t> NpyArray::as_int32() const {
  if (descr != "<i4") throw InputError(fmt::format("npy array is '{}', not '<i4'", descr));
  std::vector<std::int32_t> out(data.size() / sizeof(std::int32_t));
  std::memcpy(out.data(), data.data(), out.size() * sizeof(std::int32_t));
  return out;
}

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw RuntimeFailure(fmt::format("cannot open {}", path.string()));
  char preamble[kMagicSize + 2];
  f.read(preamble, sizeof preamble);
  if (!f || std::memcmp(preamble, kMagic, kMagicSize) != 0) {
    throw RuntimeFailure(fmt::format("{} is not a .npy file (bad magic)", path.string()));
  }
  const int major = static_cast<unsigned char>(preamble[kMagicSize]);
  std::size_t header_len = 0;
  if (major == 1) {
    unsigned char len[2];
    f.read(reinterpret_cast<char*>(len), 2);
    header_len = len[0] | (static_cast<std::size_t>(len[1]) << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    f.read(reinterpret_cast<char*>(len), 4);
    header_len = len[0] | (static_cast<std::size_t>(len[1]) << 8) |
                 (static_cast<std::size_t>(len[2]) << 16) |
                 (static_cast<std::size_t>(len[3]) << 24);
  } else {
    throw RuntimeFailure(fmt::format("{}: unsupported .npy version {}", path.string(), major));
  }
  std::string dict(header_len, '\0');
  f.read(dict.data(), static_cast<std::streamsize>(header_len));
  if (!f) throw RuntimeFailure(fmt::format("{}: truncated .npy header", path.string()));

  NpyArray a;
  std::string descr = dict_value(dict, "descr", path);
  if (descr.size() < 2) throw RuntimeFailure(fmt::format("{}: bad descr {}", path.string(), descr));
  a.descr = descr.substr(1, descr.size() - 2);  // strip the quotes
  a.fortran_order = dict_value(dict, "fortran_order", path) == "True";
  std::string shape = dict_value(dict, "shape", path);  // "(2, 3)" or "(3,)" or "()"
  std::size_t pos = 0;
  while (pos < shape.size()) {
    if (std::isdigit(static_cast<unsigned char>(shape[pos]))) {
      std::size_t end = pos;
      while (end < shape.size() && std::isdigit(static_cast<unsigned char>(shape[end]))) ++end;
      a.shape.push_back(std::stoll(shape.substr(pos, end - pos)));
      pos = end;
    } else {
      ++pos;
    }
  }
  std::size_t elem_size = 0;
  if (a.descr.size() >= 3) elem_size = static_cast<std::size_t>(std::stoul(a.descr.substr(2)));
  if (elem_size == 0)
    throw RuntimeFailure(fmt::format("{}: unsupported descr '{}'", path.string(), a.descr));
  a.data.resize(a.elements() * elem_size);
  f.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(a.data.size()));
  if (!f) {
    throw RuntimeFailure(
        fmt::format("{}: expected {} data bytes, file is shorter", path.string(), a.data.size()));
  }
  return a;
}

}  // namespace decodebench
