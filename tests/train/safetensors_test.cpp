// safetensors: round trips, the exact bytes of the spec (checked by hand, not with the reader),
// and one test per way a header can be wrong.
#include <cstring>
#include <filesystem>

#include "tests/train/temp_dir.h"
#include "tests/test_util.h"
#include "train/safetensors.h"

namespace linea::train {
namespace {

// A file of the given header text and data, as the spec lays it out.
std::string file_of(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

void expect_same(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.describe(), expected.describe());
  EXPECT_EQ(actual.to_vector<double>(), expected.to_vector<double>());
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  linea::testing::TempDir dir;
  const Tensor matrix = randn({3, 5}, kFloat32);
  const NamedTensors tensors = {
      {"f32", matrix},
      {"f32.transposed", t(matrix)},  // a non-contiguous view is written row-major
      {"f64.scalar", scalar_tensor(-2.5, kFloat64)},
      {"i64", arange(-3, 4)},
      {"bool", tensor({1, 0, 1}, {3}, kBool)},
      {"empty", zeros({0, 4})},
      {"bf16", to(randn({2, 3}, kFloat32), kBFloat16)},
  };
  const Metadata metadata = {{"format", "linea"}, {"note", "héllo \"quoted\"\n"}};
  save_safetensors(dir / "w.safetensors", tensors, metadata);
  const Safetensors loaded = load_safetensors(dir / "w.safetensors");
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    expect_same(loaded.tensors.at(name), contiguous(t));
  }
  EXPECT_TRUE(decode_safetensors(encode_safetensors({})).tensors.empty());
}

// The layout of the spec, byte for byte: the length, the header text exactly (8-byte types first,
// then by name; padded with spaces to a multiple of 8), then the raw little-endian data.
TEST(Safetensors, WritesTheSpecsExactByteLayout) {
  const NamedTensors tensors = {
      {"a", tensor({1.5, -2.0}, {2}, kFloat32)},
      {"b", tensor({7, -1}, {1, 2}, kInt64)},
      {"c", tensor({1, 0, 1}, {3}, kBool)},
      {"d", tensor({0.25}, {}, kFloat64)},
  };
  const std::string bytes = encode_safetensors(tensors, {{"k", "v"}});
  const std::string expected_header =
      R"({"__metadata__":{"k":"v"},)"
      R"("b":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]},)"
      R"("d":{"dtype":"F64","shape":[],"data_offsets":[16,24]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[24,32]},)"
      R"("c":{"dtype":"BOOL","shape":[3],"data_offsets":[32,35]}})";
  const size_t padded = (expected_header.size() + 7) / 8 * 8;

  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(n, padded);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.substr(8, n), expected_header + std::string(padded - expected_header.size(), ' '));
  const std::string data = bytes_of<int64_t>({7, -1}) + bytes_of<double>({0.25}) + bytes_of<float>({1.5f, -2.0f}) +
                           std::string("\x01\x00\x01", 3);
  EXPECT_EQ(bytes.substr(8 + n), data);
  // Little-endian by the spec: the int64 7 is 07 00 ... 00 on every host.
  EXPECT_EQ(bytes.substr(8 + n, 8), std::string("\x07\0\0\0\0\0\0\0", 8));
}

// BF16 as PyTorch writes torch.bfloat16: the upper two bytes of the float32, little-endian (1.0 is
// 80 3F), placed after the 4-byte types and before the 1-byte ones.
TEST(Safetensors, Bfloat16IsTheUpperHalfOfAFloat32) {
  const NamedTensors tensors = {{"h", to(tensor({1.0, -1.5, 0.1}, {3}, kFloat32), kBFloat16)},
                                {"a", tensor({2.0}, {1}, kFloat32)},
                                {"c", tensor({1}, {1}, kBool)}};
  const std::string bytes = encode_safetensors(tensors);
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("h":{"dtype":"BF16","shape":[3],"data_offsets":[4,10]},)"
                             R"("c":{"dtype":"BOOL","shape":[1],"data_offsets":[10,11]}})";
  const size_t padded = (header.size() + 7) / 8 * 8;
  EXPECT_EQ(bytes.substr(8, padded), header + std::string(padded - header.size(), ' '));
  EXPECT_EQ(bytes.substr(8 + padded + 4, 6), std::string("\x80\x3f\xc0\xbf\xcd\x3d", 6));  // 0.1 -> 0x3dcd
  const Safetensors other = decode_safetensors(
      file_of(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", std::string("\x80\x3f\xc0\xbf", 4)));
  EXPECT_EQ(other.tensors.at("w").dtype(), kBFloat16);
  EXPECT_EQ(other.tensors.at("w").to_vector<double>(), (std::vector<double>{1.0, -1.5}));
}

TEST(Safetensors, ReadsFilesOfOtherWriters) {
  // No padding, members in any order, whitespace, data_offsets not in name order: all valid.
  const std::string header = R"({"y": {"shape": [2], "data_offsets": [8, 16], "dtype": "F32"},
                                  "x": {"dtype": "I64", "data_offsets": [0, 8], "shape": [1]}})";
  const Safetensors st = decode_safetensors(file_of(header, bytes_of<int64_t>({42}) + bytes_of<float>({1, 2})));
  EXPECT_EQ(st.tensors.at("x").to_vector<int64_t>(), std::vector<int64_t>{42});
  EXPECT_EQ(st.tensors.at("y").to_vector<float>(), (std::vector<float>{1, 2}));
  // Two empty tensors may share an offset.
  const Safetensors empties = decode_safetensors(file_of(
      R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"f":{"dtype":"BOOL","shape":[2,0],"data_offsets":[0,0]}})"));
  EXPECT_EQ(empties.tensors.at("f").shape(), (Shape{2, 0}));
}

struct BadFile {
  const char* what;
  std::string bytes;
  const char* message;
};

std::vector<BadFile> bad_files() {
  const std::string four = bytes_of<float>({1, 2, 3, 4});
  auto one = [&](const std::string& entry, const std::string& data) {
    return file_of(R"({"t":)" + entry + "}", data);
  };
  std::string huge_length = file_of("{}");
  huge_length[7] = '\x7f';
  return {
      {"empty file", "", "too short"},
      {"short length", std::string(5, '\0'), "too short"},
      {"length past the end", huge_length, "runs past the end"},
      {"not an object", file_of("[1, 2]"), "does not start with '{'"},
      {"empty header", file_of(""), "does not start with '{'"},
      {"bad json", file_of(R"({"t": {"dtype": )"), "not valid JSON"},
      {"trailing json", file_of(R"({} {})"), "not valid JSON"},
      {"duplicate name", file_of(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})"), "not valid JSON"},
      {"entry not object", file_of(R"({"t": 3})"), "must be an object"},
      {"unknown dtype", one(R"({"dtype":"F16","shape":[2],"data_offsets":[0,4]})", "abcd"), "F16"},
      {"dtype not string", one(R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})", "abcd"), "dtype 4"},
      {"missing shape", one(R"({"dtype":"F32","data_offsets":[0,16]})", four), "needs dtype, shape and data_offsets"},
      {"unknown key", one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1})", four), "unknown key 'x'"},
      {"negative size", one(R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})", four), "non-negative integers"},
      {"fractional size", one(R"({"dtype":"F32","shape":[4.0],"data_offsets":[0,16]})", four), "non-negative integers"},
      {"too many dims", one(R"({"dtype":"F32","shape":[1,1,1,1,1,1,1,1,4],"data_offsets":[0,16]})", four), "at most 8"},
      {"huge shape", one(R"({"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]})", ""), "too large"},
      {"shape mismatch", one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})", four), "needs 3 elements"},
      {"element size", one(R"({"dtype":"F64","shape":[1],"data_offsets":[0,6]})", "abcdef"), "needs 1 elements"},
      {"offsets arity", one(R"({"dtype":"F32","shape":[4],"data_offsets":[0]})", four), "[begin, end]"},
      {"offsets reversed", one(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})", four), "outside the data"},
      {"offsets past data", one(R"({"dtype":"F32","shape":[4],"data_offsets":[8,24]})", four), "outside the data"},
      {"trailing garbage", one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,12]})", four), "not part of any tensor"},
      {"gap", one(R"({"dtype":"F32","shape":[3],"data_offsets":[4,16]})", four), "gap"},
      {"overlap", file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four), "overlaps"},
      {"bool byte", one(R"({"dtype":"BOOL","shape":[2],"data_offsets":[0,2]})", std::string("\x01\x02", 2)), "neither 0 nor 1"},
      {"metadata not strings", file_of(R"({"__metadata__":{"step":3}})"), "must be a string"},
      {"metadata not object", file_of(R"({"__metadata__":"x"})"), "must be an object"},
  };
}

TEST(Safetensors, RejectsEveryKindOfBadFileWithAClearError) {
  for (const BadFile& bad : bad_files()) {
    SCOPED_TRACE(bad.what);
    EXPECT_LINEA_ERROR(decode_safetensors(bad.bytes, "bad.safetensors"), "safetensors", "'bad.safetensors'", bad.message);
  }
}

TEST(Safetensors, FileErrorsNameThePath) {
  linea::testing::TempDir dir;
  EXPECT_LINEA_ERROR(load_safetensors(dir / "missing.safetensors"), "missing.safetensors", "does not exist");
  const std::string path = dir / "short.safetensors";
  const std::string bytes = encode_safetensors({{"x", ones({4})}});
  save_safetensors(path, {{"x", ones({4})}});
  std::filesystem::resize_file(path, bytes.size() - 1);
  EXPECT_LINEA_ERROR(load_safetensors(path), path.c_str(), "outside the data section");
}

TEST(Safetensors, RefusesUnwritableTensors) {
  EXPECT_LINEA_ERROR(encode_safetensors({{"x", Tensor()}}), "'x'", "undefined");
  EXPECT_LINEA_ERROR(encode_safetensors({{"__metadata__", ones({1})}}), "invalid tensor name");
  EXPECT_LINEA_ERROR(encode_safetensors({{"", ones({1})}}), "invalid tensor name");
}

// A failed write leaves the previous file in place.
TEST(Safetensors, SaveIsAtomic) {
  linea::testing::TempDir dir;
  const std::string path = dir / "w.safetensors";
  save_safetensors(path, {{"x", ones({2})}});
  EXPECT_THROW(save_safetensors(path, {{"a", ones({2})}, {"b", Tensor()}}), Error);
  EXPECT_EQ(load_safetensors(path).tensors.at("x").to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);  // no temporary left
}

}  // namespace
}  // namespace linea::train
