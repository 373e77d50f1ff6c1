// verify/safetensors: the fixtures.md container (round trip and every malformed-file rule).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "verify/safetensors.hpp"

namespace dsv4cpu::verify {
namespace {

template <class T>
Tensor make_tensor(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  return Tensor{dtype, std::move(shape), Bytes(values.data(), values.size() * sizeof(T))};
}

// A file image from header text and payload bytes, written by hand (independent of the writer).
std::vector<uint8_t> image(const std::string& header, size_t payload_bytes = 0) {
  std::vector<uint8_t> out(8 + header.size() + payload_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < payload_bytes; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(i);
  return out;
}

// Parses and expects a SafetensorsError whose message contains `what`.
void expect_bad(const std::vector<uint8_t>& img, const std::string& what) {
  try {
    parse_safetensors(img.data(), img.size());
    ADD_FAILURE() << "accepted; expected an error containing '" << what << "'";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(Safetensors, RoundTripEveryDtype) {
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"}, {"op", "x"}, {"rms_norm_eps", "1e-06"}};
  f.tensors["a_f32"] = make_tensor<float>(DType::F32, {2, 2}, {1.5f, -0.0f, 3e38f, 1e-40f});
  f.tensors["b_bf16"] = make_tensor<uint16_t>(DType::BF16, {3}, {0x3F80, 0x7FC0, 0x8000});
  f.tensors["c_fp8"] = make_tensor<uint8_t>(DType::F8_E4M3, {1, 1, 3}, {0x38, 0x7F, 0x80});
  f.tensors["c_f16"] = make_tensor<uint16_t>(DType::F16, {3}, {0x3C00, 0x7E00, 0x0001});
  f.tensors["d_u8"] = make_tensor<uint8_t>(DType::U8, {5}, {0, 1, 2, 254, 255});
  f.tensors["e_i32"] = make_tensor<int32_t>(DType::I32, {2}, {-1, 2147483647});
  f.tensors["f_i64"] = make_tensor<int64_t>(DType::I64, {1, 2}, {-1, int64_t{1} << 40});
  f.tensors["g_empty"] = make_tensor<int64_t>(DType::I64, {0, 4}, {});
  const std::vector<uint8_t> img = serialize_safetensors(f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | img[static_cast<size_t>(i)];
  EXPECT_EQ((8 + n) % 8, 0u) << "header padded to a multiple of 8";
  const SafetensorsFile g = parse_safetensors(img.data(), img.size());
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    const Tensor& u = g.tensors.at(name);
    EXPECT_EQ(u.dtype, t.dtype) << name;
    EXPECT_EQ(u.shape, t.shape) << name;
    EXPECT_TRUE(u.bytes == t.bytes) << name;
  }
}

TEST(Safetensors, ReadsHandWrittenFile) {
  // Two I32 tensors laid out in reverse order of their names, no metadata.
  const std::string h = "{" + entry("b", "I32", "[1]", "[0,4]") + "," +
                        entry("a", "U8", "[2,2]", "[4,8]") + "}";
  const SafetensorsFile f = parse_safetensors(image(h, 8).data(), 8 + h.size() + 8);
  EXPECT_TRUE(f.metadata.empty());
  int32_t b;
  std::memcpy(&b, f.tensors.at("b").bytes.data(), 4);
  EXPECT_EQ(b, 0x03020100);  // payload bytes 0, 1, 2, 3 little-endian
  EXPECT_EQ(f.tensors.at("a").bytes.data()[0], 4);
  EXPECT_EQ(f.tensors.at("a").shape, (std::vector<int64_t>{2, 2}));
}

TEST(Safetensors, FileFramingRules) {
  expect_bad({1, 2, 3}, "shorter than the 8-byte header length");
  std::vector<uint8_t> img = image("{}");
  img[0] = 200;  // claims 200 header bytes, 2 present
  expect_bad(img, "exceeds the file");
  expect_bad(image("{\"a\":"), "not valid JSON");
  expect_bad(image("[1, 2]"), "not a JSON object");
}

TEST(Safetensors, MetadataRules) {
  expect_bad(image("{\"__metadata__\":[1]}"), "__metadata__ is not an object");
  expect_bad(image("{\"__metadata__\":{\"block_size\":4}}"), "'block_size' is not a string");
}

TEST(Safetensors, EntryRules) {
  expect_bad(image("{\"t\":3}"), "tensor 't': entry is not an object");
  expect_bad(image("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "missing \"dtype\"");
  expect_bad(image("{\"t\":{\"dtype\":\"I32\",\"data_offsets\":[0,4]}}", 4), "missing \"shape\"");
  expect_bad(image("{\"t\":{\"dtype\":\"I32\",\"shape\":[1]}}", 4), "missing \"data_offsets\"");
  expect_bad(image("{" + entry("t", "F64", "[1]", "[0,8]") + "}", 8), "unsupported dtype F64");
  expect_bad(image("{" + entry("t", "BOOL", "[1]", "[0,1]") + "}", 1), "unsupported dtype BOOL");
  expect_bad(image("{\"t\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
             "dtype is not a string");
}

TEST(Safetensors, ShapeRules) {
  expect_bad(image("{" + entry("t", "U8", "3", "[0,3]") + "}", 3), "shape is not an array");
  expect_bad(image("{" + entry("t", "U8", "[-3]", "[0,3]") + "}", 3), "shape extent is negative");
  expect_bad(image("{" + entry("t", "U8", "[1.5]", "[0,1]") + "}", 1),
             "shape extent is not an integer");
  expect_bad(image("{" + entry("t", "I64", "[4294967296,4294967296]", "[0,8]") + "}", 8),
             "shape too large");
}

TEST(Safetensors, OffsetRules) {
  expect_bad(image("{" + entry("t", "U8", "[1]", "[0]") + "}", 1), "not [begin, end]");
  expect_bad(image("{" + entry("t", "U8", "[1]", "[2,1]") + "}", 2), "begin > end");
  expect_bad(image("{" + entry("t", "U8", "[1]", "[-1,0]") + "}", 1),
             "data_offsets begin is negative");
  expect_bad(image("{" + entry("t", "U8", "[4]", "[0,4]") + "}", 3), "beyond the data (3 bytes)");
}

TEST(Safetensors, DtypeAndShapeMustMatchTheSpan) {
  // F32 [2] needs 8 bytes, I64 [2] 16, U8 [2, 3] 6.
  expect_bad(image("{" + entry("t", "F32", "[2]", "[0,4]") + "}", 8),
             "span 4 bytes, but F32 with this shape needs 8");
  expect_bad(image("{" + entry("t", "I64", "[2]", "[0,8]") + "}", 16), "needs 16");
  expect_bad(image("{" + entry("t", "U8", "[2,3]", "[0,5]") + "}", 6), "needs 6");
  // Zero-size tensors take an empty span.
  const std::string ok = "{" + entry("t", "F32", "[0,7]", "[0,0]") + "}";
  EXPECT_EQ(parse_safetensors(image(ok).data(), 8 + ok.size()).tensors.at("t").bytes.size(), 0u);
}

TEST(Safetensors, TensorsMustNotOverlap) {
  expect_bad(image("{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("b", "U8", "[4]", "[3,7]") +
                   "}",
                   8),
             "overlap");
  // Adjacent spans are fine.
  const std::string ok =
      "{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("b", "U8", "[4]", "[4,8]") + "}";
  EXPECT_EQ(parse_safetensors(image(ok, 8).data(), 8 + ok.size() + 8).tensors.size(), 2u);
}

TEST(Safetensors, WriterRejectsInconsistentTensor) {
  SafetensorsFile f;
  f.tensors["t"] = make_tensor<int32_t>(DType::I32, {3}, {1, 2});  // 8 bytes for 3 elements
  EXPECT_THROW(serialize_safetensors(f), SafetensorsError);
}

TEST(Safetensors, FileRoundTripAndMissingFile) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dsv4cpu_test_safetensors_" + std::to_string(getpid()) +
                             ".safetensors"))
                               .string();
  SafetensorsFile f;
  f.metadata["op"] = "x";
  f.tensors["v"] = make_tensor<float>(DType::F32, {2}, {1.0f, 2.0f});
  write_safetensors(path, f);
  const SafetensorsFile g = read_safetensors(path);
  EXPECT_TRUE(g.tensors.at("v").bytes == f.tensors.at("v").bytes);
  std::filesystem::remove(path);
  EXPECT_THROW(read_safetensors(path), SafetensorsError);
}

TEST(Safetensors, DtypeNames) {
  DType d;
  for (const char* name : {"F32", "BF16", "F16", "F8_E4M3", "U8", "I32", "I64"}) {
    ASSERT_TRUE(parse_dtype(name, &d)) << name;
    EXPECT_STREQ(dtype_name(d), name);
  }
  EXPECT_FALSE(parse_dtype("F64", &d));
  EXPECT_FALSE(parse_dtype("f32", &d));
}

}  // namespace
}  // namespace dsv4cpu::verify
