#include "common/npy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/atomic_write.h"
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
  // Little-endian hosts only (x86-64, aarch64): the bytes are already in '<' order. Atomic, as
  // every file decodebench writes: a reader never sees half an array.
  write_bytes_atomic(path,
                     {header, std::string_view(static_cast<const char*>(data), count * elem_size)});
}

// Value of `key` in the header dict, as the raw text up to the next top-level ',' or '}'.
std::string dict_value(const std::string& dict, std::string_view key, std::string_view source) {
  const std::string quoted = fmt::format("'{}'", key);
  std::size_t pos = dict.find(quoted);
  if (pos == std::string::npos) {
    throw InputError(fmt::format("{}: .npy header has no '{}'", source, key));
  }
  pos = dict.find(':', pos + quoted.size());
  if (pos == std::string::npos)
    throw InputError(fmt::format("{}: bad .npy header: no ':' after '{}'", source, key));
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

void write_npy(const std::filesystem::path& path, std::span<const std::int8_t> data,
               std::span<const std::int64_t> shape) {
  write_raw(path, "|i1", data.data(), data.size(), 1, shape);
}

void write_npy(const std::filesystem::path& path, std::span<const std::uint8_t> data,
               std::span<const std::int64_t> shape) {
  write_raw(path, "|u1", data.data(), data.size(), 1, shape);
}

void write_npy_f16(const std::filesystem::path& path, std::span<const std::uint16_t> bits,
                   std::span<const std::int64_t> shape) {
  write_raw(path, "<f2", bits.data(), bits.size(), sizeof(std::uint16_t), shape);
}

std::size_t NpyArray::elements() const {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::vector<float> NpyArray::as_float() const {
  if (descr != "<f4") throw InputError(fmt::format("npy array is '{}', not '<f4'", descr));
  std::vector<float> out(data.size() / sizeof(float));
  // An empty vector's data() may be null, and memcpy from or to null is undefined even for 0.
  if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(float));
  return out;
}

std::string npy_index(std::span<const std::int64_t> shape, std::size_t index) {
  std::vector<std::int64_t> at(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] <= 0) continue;
    at[i] = static_cast<std::int64_t>(index % static_cast<std::size_t>(shape[i]));
    index /= static_cast<std::size_t>(shape[i]);
  }
  return fmt::format("[{}]", fmt::join(at, ", "));
}

std::vector<float> finite_floats(const NpyArray& a, std::string_view source) {
  std::vector<float> out = a.as_float();
  const auto bad = std::find_if(out.begin(), out.end(), [](float x) { return !std::isfinite(x); });
  if (bad != out.end()) {
    throw InputError(fmt::format("{}: {} is {}; every value must be finite", source,
                                 npy_index(a.shape, static_cast<std::size_t>(bad - out.begin())),
                                 *bad));
  }
  return out;
}

std::vector<std::int32_t> NpyArray::as_int32() const {
  if (descr != "<i4") throw InputError(fmt::format("npy array is '{}', not '<i4'", descr));
  std::vector<std::int32_t> out(data.size() / sizeof(std::int32_t));
  if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(std::int32_t));
  return out;
}

namespace {

// Unsigned decimal of the whole of `s`; false when empty, not digits or over `max`.
bool parse_size(std::string_view s, std::uint64_t max, std::uint64_t& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size() && out <= max;
}

// "(2, 3)", "(3,)" or "()": Python's tuple of non-negative integers, nothing else.
template <typename Bad>
std::vector<std::int64_t> parse_shape(const std::string& text, const Bad& bad) {
  const auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  std::string_view s = trim(text);
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') {
    throw bad(
        fmt::format("shape {} is not a tuple; valid: integers >= 0 as in (2, 3), (3,), ()", text));
  }
  s = s.substr(1, s.size() - 2);
  std::vector<std::int64_t> dims;
  while (!trim(s).empty()) {
    const std::size_t comma = s.find(',');
    const std::string_view item = trim(s.substr(0, comma));
    std::uint64_t d = 0;
    if (!item.empty() && item.front() == '-') {
      throw bad(
          fmt::format("shape {}: dimension {} is negative; valid: integers >= 0", text, item));
    }
    if (item.empty() ||
        !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw bad(fmt::format("shape {}: '{}' is not a dimension; valid: integers >= 0", text, item));
    }
    if (!parse_size(item, INT64_MAX, d)) {
      throw bad(fmt::format("shape {}: dimension '{}' is too large", text, item));
    }
    dims.push_back(static_cast<std::int64_t>(d));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return dims;
}

}  // namespace

NpyArray parse_npy(std::string_view bytes, std::string_view source) {
  const auto bad = [&](std::string_view what) {
    return InputError(fmt::format("{}: {}", source, what));
  };
  if (bytes.size() < kMagicSize + 2 || bytes.substr(0, kMagicSize) != std::string_view(kMagic)) {
    throw bad("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicSize]);
  std::size_t pos = kMagicSize + 2;
  std::size_t len_bytes = 0;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;
  } else {
    throw bad(fmt::format("unsupported .npy version {}; valid: 1, 2, 3", major));
  }
  if (bytes.size() < pos + len_bytes) throw bad("truncated .npy header");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) {
    header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
  }
  pos += len_bytes;
  // The header length comes from the file: compare it with what the file holds before using it.
  if (header_len > bytes.size() - pos) {
    throw bad(
        fmt::format("truncated .npy header: it claims {} bytes, the file has {} after the "
                    "preamble",
                    header_len, bytes.size() - pos));
  }
  const std::string dict(bytes.substr(pos, header_len));
  pos += header_len;

  NpyArray a;
  const std::string descr = dict_value(dict, "descr", source);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'') {
    throw bad(fmt::format("bad descr {} (expected a quoted dtype such as '<f4')", descr));
  }
  a.descr = descr.substr(1, descr.size() - 2);
  const std::string fortran = dict_value(dict, "fortran_order", source);
  if (fortran != "True" && fortran != "False") {
    throw bad(fmt::format("bad fortran_order {}; valid: True, False", fortran));
  }
  a.fortran_order = fortran == "True";
  const std::string shape = dict_value(dict, "shape", source);
  a.shape = parse_shape(shape, bad);
  // "<f4": byte order, kind, item size in bytes (numpy's largest is 32, complex256).
  std::uint64_t elem_size = 0;
  if (a.descr.size() < 3 || !parse_size(std::string_view(a.descr).substr(2), 64, elem_size) ||
      elem_size == 0) {
    throw bad(fmt::format("unsupported descr '{}' (expected e.g. '<f4' or '<i4')", a.descr));
  }
  // The data size the shape claims, checked against the bytes present before anything is
  // allocated: a header claiming a huge shape is rejected, not obeyed. A zero dimension must not
  // hide the others' overflow: callers multiply dimensions of an empty array too.
  const std::size_t available = bytes.size() - pos;
  const bool empty = std::find(a.shape.begin(), a.shape.end(), 0) != a.shape.end();
  std::uint64_t nonzero = elem_size;
  for (std::int64_t d : a.shape) {
    const auto ud = static_cast<std::uint64_t>(d);
    if (ud == 0) continue;
    if (nonzero > static_cast<std::uint64_t>(INT64_MAX) / ud) {
      throw bad(fmt::format("shape {}: the product of its dimensions overflows 64 bits", shape));
    }
    if (!empty && nonzero * ud > available) {
      throw bad(
          fmt::format("shape {} of {}-byte elements needs more than the {} data bytes the "
                      "file has",
                      shape, elem_size, available));
    }
    nonzero *= ud;
  }
  const std::uint64_t need = empty ? 0 : nonzero;
  // numpy writes exactly the array's bytes after the header: more or fewer is a damaged file.
  if (need != available) {
    throw bad(fmt::format("shape {} of {}-byte elements is {} data bytes, the file has {}", shape,
                          elem_size, need, available));
  }
  const auto* first = reinterpret_cast<const std::byte*>(bytes.data() + pos);
  a.data.assign(first, first + need);
  return a;
}

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("cannot open {}", path.string()));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw RuntimeFailure(fmt::format("cannot read {}", path.string()));
  return parse_npy(ss.view(), path.string());
}

}  // namespace decodebench
