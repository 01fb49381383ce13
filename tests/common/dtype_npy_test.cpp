// dtype names, parsing and scalar encode/decode; .npy writing and reading.
#include "common/dtype.h"
#include "common/errors.h"
#include "common/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace decodebench {
namespace {

TEST(Dtype, NamesAndParsing) {
  for (DType t : all_dtypes()) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("fp16"), DType::f16);
  EXPECT_EQ(parse_dtype("Float16"), DType::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("E4M3"), DType::fp8_e4m3);
  EXPECT_EQ(parse_dtype("e5m2"), DType::fp8_e5m2);
  EXPECT_EQ(parse_dtype("fp32"), DType::f32);
  EXPECT_EQ(dtype_name(DType::fp8_e5m2), "fp8_e5m2");
  for (DType t : {DType::int8, DType::int4, DType::int4_token})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);  // the integer KV formats
  try {
    parse_dtype("int2", "--kv-dtype");
    FAIL() << "int2 accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--kv-dtype"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'int2'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fp8_e4m3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("int4_token"), std::string::npos) << msg;
  }
  // Codes without their scales are not values: the element conversions refuse them.
  std::byte buf[1] = {};
  EXPECT_THROW(encode_value(DType::int8, 1.0f, buf), InputError);
  EXPECT_THROW(decode_value(DType::int4, buf), InputError);
}

TEST(Dtype, EncodeDecode) {
  std::byte buf[4];
  encode_value(DType::f16, 1.0f, buf);
  EXPECT_EQ(buf[0], std::byte{0x00});
  EXPECT_EQ(buf[1], std::byte{0x3c});  // little-endian 0x3c00
  EXPECT_EQ(decode_value(DType::f16, buf), 1.0f);
  encode_value(DType::bf16, -2.0f, buf);
  EXPECT_EQ(decode_value(DType::bf16, buf), -2.0f);
  encode_value(DType::fp8_e4m3, 1000.0f, buf);
  EXPECT_EQ(buf[0], std::byte{0x7e});
  EXPECT_EQ(decode_value(DType::fp8_e4m3, buf), 448.0f);
  encode_value(DType::fp8_e5m2, 1.0f, buf);
  EXPECT_EQ(buf[0], std::byte{0x3c});
  encode_value(DType::f32, 0.1f, buf);
  EXPECT_EQ(decode_value(DType::f32, buf), 0.1f);

  std::vector<std::byte> many(3 * 2);
  for (int i = 0; i < 3; ++i)
    encode_value(DType::f16, static_cast<float>(i) + 0.5f, many.data() + 2 * i);
  EXPECT_EQ(decode_to_float(many, DType::f16), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_THROW(decode_to_float(std::span(many).first(5), DType::f16), InputError);
  EXPECT_EQ(fp8_max(DType::fp8_e4m3), 448.0f);
  EXPECT_EQ(fp8_max(DType::fp8_e5m2), 57344.0f);
  EXPECT_THROW(fp8_max(DType::f16), InputError);
}

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("decodebench_npy_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(Npy, FloatRoundTripAndHeader) {
  const std::vector<float> data = {1.f, -2.5f, 3.25f, 0.f, 1e-8f, 7.f};
  const std::vector<std::int64_t> shape = {2, 3};
  write_npy(dir_ / "a.npy", data, shape);
  const NpyArray a = read_npy(dir_ / "a.npy");
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_FALSE(a.fortran_order);
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(a.as_float(), data);
  EXPECT_THROW(a.as_int32(), InputError);

  // The header numpy expects: magic, version 1.0, a dict padded so data starts at 64 bytes.
  std::ifstream in(dir_ / "a.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 64u + 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes.size(), 10 + header_len + data.size() * 4);
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
}

TEST_F(Npy, Int32OneDimensionalAndEmpty) {
  const std::vector<std::int32_t> data = {5, -1, 1 << 30};
  const std::vector<std::int64_t> shape = {3};
  write_npy(dir_ / "b.npy", data, shape);
  const NpyArray b = read_npy(dir_ / "b.npy");
  EXPECT_EQ(b.descr, "<i4");
  EXPECT_EQ(b.shape, shape);
  EXPECT_EQ(b.as_int32(), data);
  std::ifstream in(dir_ / "b.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("'shape': (3,)"), std::string::npos);  // a 1-tuple keeps its comma

  const std::vector<float> none;
  const std::vector<std::int64_t> shape0 = {0, 4};
  write_npy(dir_ / "c.npy", none, shape0);
  EXPECT_EQ(read_npy(dir_ / "c.npy").shape, shape0);
}

// A write that fails half-way (the disk fills up) leaves the old file whole and no temporary
// file behind: write_npy goes through write_bytes_atomic like every other file.
TEST_F(Npy, AFailedWriteLeavesTheOldFile) {
  const std::vector<float> old_data = {1.f, 2.f, 3.f};
  const std::vector<std::int64_t> shape = {3};
  write_npy(dir_ / "a.npy", old_data, shape);
  const std::vector<float> new_data = {4.f, 5.f, 6.f};
  ::setenv("DECODEBENCH_TEST_WRITE_FAIL", "ENOSPC", 1);
  EXPECT_THROW(write_npy(dir_ / "a.npy", new_data, shape), RuntimeFailure);
  ::unsetenv("DECODEBENCH_TEST_WRITE_FAIL");
  EXPECT_EQ(read_npy(dir_ / "a.npy").as_float(), old_data);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(Npy, Errors) {
  const std::vector<float> data = {1.f, 2.f};
  const std::vector<std::int64_t> wrong = {3};
  EXPECT_THROW(write_npy(dir_ / "x.npy", data, wrong), InputError);
  // A directory that cannot be made (a file is in the way): the atomic writer makes missing
  // directories, so only this fails.
  std::ofstream(dir_ / "a_file") << "x";
  EXPECT_THROW(write_npy(dir_ / "a_file" / "x.npy", data, std::vector<std::int64_t>{2}),
               RuntimeFailure);
  std::ofstream(dir_ / "bad.npy") << "not numpy";
  EXPECT_THROW(read_npy(dir_ / "bad.npy"), InputError);
  EXPECT_THROW(read_npy(dir_ / "missing.npy"), InputError);
  // Truncated data is reported, not read past.
  write_npy(dir_ / "t.npy", data, std::vector<std::int64_t>{2});
  std::filesystem::resize_file(dir_ / "t.npy", std::filesystem::file_size(dir_ / "t.npy") - 2);
  EXPECT_THROW(read_npy(dir_ / "t.npy"), InputError);
}

// A version 1.0 file: magic, version, little-endian header length, the header, then `data`.
std::string npy_bytes(const std::string& header, const std::string& data = "") {
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

std::string parse_error_of(const std::string& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// Inputs the fuzzer (tests/fuzz/fuzz_npy) found or is there to keep out: each once escaped as
// another exception, allocated what the header claimed, or was undefined behaviour.
TEST(NpyHostile, HeaderClaimsAreCheckedAgainstTheBytesPresent) {
  // A shape of 10^12 floats over 8 data bytes: rejected before allocating 4 TB.
  std::string msg = parse_error_of(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }\n",
                std::string(8, '\0')));
  EXPECT_NE(msg.find("8 data bytes"), std::string::npos) << msg;
  // Dimensions whose product overflows 64 bits.
  msg = parse_error_of(npy_bytes(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }\n"));
  EXPECT_NE(msg.find("needs more than"), std::string::npos) << msg;
  // A dimension beyond int64 (std::stoll threw std::out_of_range).
  msg = parse_error_of(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n"));
  EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
  // A version 2.0 header length of 4 GiB in a 16-byte file (a 4 GiB string was allocated).
  msg = parse_error_of(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{'d", 15));
  EXPECT_NE(msg.find("truncated .npy header"), std::string::npos) << msg;
  // An item size that is not a number (std::stoul threw std::invalid_argument).
  msg = parse_error_of(npy_bytes("{'descr': '<fx', 'fortran_order': False, 'shape': (1,), }\n"));
  EXPECT_NE(msg.find("unsupported descr '<fx'"), std::string::npos) << msg;
  msg = parse_error_of(npy_bytes("{'descr': <f4, 'fortran_order': False, 'shape': (1,), }\n"));
  EXPECT_NE(msg.find("bad descr"), std::string::npos) << msg;
  EXPECT_NE(parse_error_of("\x93NUMPY").find("bad magic"), std::string::npos);
  EXPECT_NE(parse_error_of(std::string("\x93NUMPY\x01\x00\x05", 9)).find("truncated"),
            std::string::npos);
  // A negative dimension was read as positive (the digits were taken, the '-' skipped).
  msg = parse_error_of(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }\n",
                                 std::string(24, '\0')));
  EXPECT_NE(msg.find("x.npy: shape (2, -3): dimension -3 is negative"), std::string::npos) << msg;
  for (const char* shape : {"(2, 3x)", "(2,, 3)", "[2, 3]", "(2.0, 3)"}) {
    msg = parse_error_of(npy_bytes(
        std::string("{'descr': '<f4', 'fortran_order': False, ") + "'shape': " + shape + ", }\n",
        std::string(24, '\0')));
    EXPECT_NE(msg.find("shape"), std::string::npos) << shape << ": " << msg;
    EXPECT_NE(msg.find("valid"), std::string::npos) << shape << ": " << msg;
  }
  // A zero dimension hid the overflow of the others: 0 x 2^62 x 2^62 read as an empty array.
  msg = parse_error_of(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, "
                "4611686018427387904), }\n"));
  EXPECT_NE(msg.find("overflows 64 bits"), std::string::npos) << msg;
  // Bytes beyond the shape's are a damaged file, not ignored.
  msg = parse_error_of(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
                                 std::string(28, '\0')));
  EXPECT_NE(msg.find("is 24 data bytes, the file has 28"), std::string::npos) << msg;
  msg = parse_error_of(npy_bytes("{'descr': '<f4', 'fortran_order': maybe, 'shape': (1,), }\n",
                                 std::string(4, '\0')));
  EXPECT_NE(msg.find("fortran_order maybe; valid: True, False"), std::string::npos) << msg;
  // The exact shape numpy writes still reads, a 1-tuple and a scalar included.
  EXPECT_EQ(parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
                                std::string(24, '\0')),
                      "ok.npy")
                .shape,
            (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(parse_npy(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n",
                                std::string(12, '\0')),
                      "ok.npy")
                .shape,
            (std::vector<std::int64_t>{3}));
  EXPECT_TRUE(parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n",
                                  std::string(4, '\0')),
                        "ok.npy")
                  .shape.empty());
  // An empty array reads (memcpy of nothing into an empty vector was undefined).
  const NpyArray empty = parse_npy(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }\n"), "e.npy");
  EXPECT_EQ(empty.elements(), 0u);
  EXPECT_TRUE(empty.as_float().empty());
}

// Non-finite values are named by file and C-order index, so that no measure is computed over one.
TEST(NpyHostile, FiniteFloatsNamesTheFirstNonFiniteValue) {
  NpyArray a;
  a.descr = "<f4";
  a.shape = {2, 3};
  const float values[] = {0.f, 1.f, 2.f, 3.f, std::numeric_limits<float>::quiet_NaN(), 5.f};
  a.data.resize(sizeof(values));
  std::memcpy(a.data.data(), values, sizeof(values));
  try {
    finite_floats(a, "q.npy");
    ADD_FAILURE() << "a NaN was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("q.npy: [1, 1] is nan"), std::string::npos) << e.what();
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(a.data.data() + 4 * sizeof(float), &inf, sizeof(float));
  EXPECT_THROW(finite_floats(a, "q.npy"), InputError);
  std::memcpy(a.data.data() + 4 * sizeof(float), &values[5], sizeof(float));
  EXPECT_EQ(finite_floats(a, "q.npy").size(), 6u);
  EXPECT_EQ(npy_index(a.shape, 5), "[1, 2]");
}

}  // namespace
}  // namespace decodebench
