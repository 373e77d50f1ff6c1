// Hostile fixture files: header bytes the JSON grammar does not allow, repeated keys, deep nesting,
// and sizes taken from the file that would wrap or exhaust memory. Each ends in a SafetensorsError
// or a failed case with a message, never a crash or an allocation sized by the file's claims.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "testing/runs.hpp"
#include "verify/runner.hpp"
#include "verify/safetensors.hpp"

namespace dsv4cpu::verify {
namespace {

// A file image from header bytes and a zero payload.
std::vector<uint8_t> image(const std::string& header, size_t payload_bytes = 0) {
  std::vector<uint8_t> out(8 + header.size() + payload_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

// The SafetensorsError message of parsing `img` ("" when it parses).
std::string error_of(const std::vector<uint8_t>& img) {
  try {
    parse_safetensors(img.data(), img.size());
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

const std::string kEntry = R"("t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]})";

TEST(HostileFixtures, HeaderWithNulByteIsRejected) {
  // The parser would stop at the NUL and accept the header; the bytes after it are not JSON.
  std::string header = "{" + kEntry + "}";
  header += std::string(1, '\0') + R"({"u":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  EXPECT_EQ(error_of(image(header, 4)),
            "header byte 53 is control character 0 (expected JSON text)");
  // Any other control character outside whitespace likewise, also inside a string.
  EXPECT_EQ(error_of(image("{\"a\x01\":" + kEntry.substr(4) + "}", 4)),
            "header byte 3 is control character 1 (expected JSON text)");
  // Whitespace (tab, newline, carriage return) is JSON text.
  EXPECT_EQ(error_of(image("{\t\r\n" + kEntry + "}", 4)), "");
}

TEST(HostileFixtures, RepeatedKeysAreRejected) {
  // A second "t" would silently replace the first and skip its overlap check.
  EXPECT_EQ(error_of(image("{" + kEntry + R"(,"t":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                           4)),
            "header repeats the key \"t\" in one object");
  EXPECT_EQ(error_of(image(R"({"__metadata__":{"op":"a","op":"b"}})")),
            "header repeats the key \"op\" in one object");
  EXPECT_EQ(error_of(image(R"({"t":{"dtype":"U8","dtype":"I64","shape":[4],"data_offsets":[0,4]}})",
                           4)),
            "header repeats the key \"dtype\" in one object");
  // The same key in different objects is fine.
  EXPECT_EQ(error_of(image(R"({"__metadata__":{"t":"x"},)" + kEntry + "}", 4)), "");
}

TEST(HostileFixtures, DeepNestingIsRejected) {
  EXPECT_EQ(error_of(image(R"({"__metadata__":)" + std::string(20, '[') + std::string(20, ']') +
                           "}")),
            "header nests deeper than 8 levels");
}

// q_fp8 [4, 2^42, 0, 128] with next_n = 2^42 and max_seq_len = 2^20: the
// logits the verifier would allocate, [2^44, 2^20] F32, wrapped to 0 bytes before.
std::vector<uint8_t> wrapping_logits_fixture() {
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"}, {"op", "fp8_paged_mqa_logits"},
                {"block_size", "1"},             {"max_seq_len", "1048576"},
                {"next_n", "4398046511104"},     {"expected_error", "ShapeError"}};
  f.tensors["q_fp8"] = Tensor{DType::F8_E4M3, {4, int64_t{1} << 42, 0, 128}, Bytes()};
  f.tensors["kv_cache"] = Tensor{DType::U8, {1, 132}, Bytes(132)};
  f.tensors["weights"] = Tensor{DType::F32, {4, 0}, Bytes()};
  f.tensors["seq_lens"] = Tensor{DType::I32, {4}, Bytes(16)};
  f.tensors["page_table"] = Tensor{DType::I32, {4, 1}, Bytes(16)};
  return serialize_safetensors(f);
}

TEST(HostileFixtures, OutputSizeFromTheFileIsBounded) {
  const std::vector<uint8_t> file = wrapping_logits_fixture();
  const FileResult r = run_fixture_image(file.data(), file.size(), "wrap", ImplMode::all);
  size_t judged = 0;  // the cases of variants this machine runs (the others are skipped)
  for (const CaseResult& c : r.cases) {
    if (c.outcome == Outcome::skipped) continue;
    ++judged;
    EXPECT_FALSE(c.passed()) << c.variant;
    EXPECT_EQ(c.detail,
              "fixture: output 'logits' F32 [17592186044416, 1048576] exceeds the verifier's "
              "limit of 268436768 bytes (8 x the file's tensor bytes + 256 MiB)")
        << c.variant;
  }
  EXPECT_EQ(judged, testing::runs("fp8_paged_mqa_logits").runs.size());
}

TEST(HostileFixtures, OutputWhoseSizeOverflowsIsBounded) {
  // [2^40, 2^40] F32 rows: the element count itself overflows int64.
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"}, {"op", "fp8_paged_mqa_logits"},
                {"block_size", "1"}, {"max_seq_len", "1048576"}, {"next_n", "1"}};
  f.tensors["q_fp8"] = Tensor{DType::F8_E4M3, {int64_t{1} << 40, int64_t{1} << 13, 0, 128}, Bytes()};
  const std::vector<uint8_t> file = serialize_safetensors(f);
  const FileResult r = run_fixture_image(file.data(), file.size(), "overflow", ImplMode::reference);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_FALSE(r.cases[0].passed());
  EXPECT_EQ(r.cases[0].detail.rfind("fixture: output 'logits' F32 [9007199254740992, 1048576] "
                                    "exceeds the verifier's limit",
                                    0),
            0u)
      << r.cases[0].detail;
}

// The message of reading `path` ("" when it reads).
std::string read_error(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

// Only a regular file is read: opening a FIFO would wait for a writer, and /dev/zero never ends.
TEST(HostileFixtures, OnlyRegularFilesAreRead) {
  const std::string dir = ::testing::TempDir() + "hostile_files_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string fifo = dir + "/fifo.safetensors", zero = dir + "/zero.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  EXPECT_EQ(read_error(fifo), fifo + " is not a regular file");
  EXPECT_EQ(read_error(zero), zero + " is not a regular file");
  EXPECT_EQ(read_error("/dev/zero"), "/dev/zero is not a regular file");
  EXPECT_EQ(read_error(dir), dir + " is not a regular file");
  EXPECT_EQ(read_error(dir + "/absent.safetensors"),
            "cannot open " + dir + "/absent.safetensors: No such file or directory");
  ::unlink(fifo.c_str());
  ::unlink(zero.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace dsv4cpu::verify
