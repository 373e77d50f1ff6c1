// Safetensors reader and writer (fixtures.md: 8-byte little-endian header length, JSON header,
// raw little-endian C-contiguous data), limited to the dtypes of the spec README, "Arrays".
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4cpu/tensor.hpp"

namespace dsv4cpu::verify {

// A malformed file: the message says which rule failed.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Tensor bytes in a buffer aligned for every dtype (8 bytes).
class Bytes {
 public:
  Bytes() = default;
  explicit Bytes(size_t n) : size_(n), words_((n + 7) / 8, 0) {}
  Bytes(const void* src, size_t n);
  uint8_t* data() noexcept { return reinterpret_cast<uint8_t*>(words_.data()); }
  const uint8_t* data() const noexcept { return reinterpret_cast<const uint8_t*>(words_.data()); }
  size_t size() const noexcept { return size_; }
  bool operator==(const Bytes& o) const noexcept;

 private:
  size_t size_ = 0;
  std::vector<uint64_t> words_;
};

struct Tensor {
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  Bytes bytes;  // C-contiguous, numel(shape) * dtype_size(dtype) bytes
  int64_t numel() const noexcept;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::map<std::string, Tensor> tensors;
};

// "F32" -> DType::F32 ...; false for any other name.
bool parse_dtype(const std::string& name, DType* out) noexcept;

// Parses and validates a whole file image. Rules (each failure throws SafetensorsError):
// at least 8 bytes; header length <= remaining bytes; header is a JSON object; "__metadata__",
// when present, maps strings to strings; every other entry is an object with "dtype" (one of
// F32 BF16 F16 F8_E4M3 U8 I32 I64), "shape" (non-negative integers) and "data_offsets" [begin, end]
// with begin <= end <= data size and end - begin = numel * dtype size; tensors do not overlap.
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size);
// The most bytes a fixture file may have (4 GiB).
inline constexpr int64_t kMaxFileBytes = int64_t{1} << 32;
// parse_safetensors of the file at `path` (symbolic links followed), which must be a regular file
// of at most kMaxFileBytes: a FIFO, a device or a socket is a SafetensorsError, never read.
SafetensorsFile read_safetensors(const std::string& path);

// Serialises tensors in name order, header padded with spaces to a multiple of 8 bytes.
// Throws SafetensorsError when a tensor's byte count disagrees with its dtype and shape.
std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file);
void write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace dsv4cpu::verify
