#include "verify/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

namespace dsv4cpu::verify {

using json = nlohmann::json;

Bytes::Bytes(const void* src, size_t n) : Bytes(n) {
  if (n != 0) std::memcpy(data(), src, n);
}

bool Bytes::operator==(const Bytes& o) const noexcept {
  return size_ == o.size_ && (size_ == 0 || std::memcmp(data(), o.data(), size_) == 0);
}

int64_t Tensor::numel() const noexcept {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

bool parse_dtype(const std::string& name, DType* out) noexcept {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::F8_E4M3, DType::U8, DType::I32,
                  DType::I64}) {
    if (name == dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

namespace {

[[noreturn]] void bad(const std::string& msg) { throw SafetensorsError(msg); }

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative integer that fits int64 (shape extents, offsets).
uint64_t json_uint(const json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad(what + " too large");
    return u;
  }
  if (v.is_number_integer()) bad(what + " is negative");
  bad(what + " is not an integer");
}

// A parser callback that rejects a key repeated within one object (the parser would keep the
// last value and hide the first entry from every check) and nesting deeper than kMaxDepth (the
// format nests three levels: header, entry, shape).
json::parser_callback_t json_guard() {
  constexpr int kMaxDepth = 8;
  auto keys = std::make_shared<std::vector<std::set<std::string>>>();
  return [keys](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxDepth)
          bad("header nests deeper than " + std::to_string(kMaxDepth) + " levels");
        if (event == json::parse_event_t::object_start) keys->emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys->pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys->back().insert(parsed.get<std::string>()).second)
          bad("header repeats the key \"" + parsed.get<std::string>() + "\" in one object");
        break;
      default:
        break;
    }
    return true;
  };
}

Tensor parse_entry(const std::string& name, const json& e, const uint8_t* payload,
                   uint64_t payload_size, uint64_t* begin_out, uint64_t* end_out) {
  const std::string where = "tensor '" + name + "': ";
  if (!e.is_object()) bad(where + "entry is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key)) bad(where + "missing \"" + key + "\"");
  Tensor t;
  if (!e["dtype"].is_string()) bad(where + "dtype is not a string");
  const std::string dt = e["dtype"].get<std::string>();
  if (!parse_dtype(dt, &t.dtype))
    bad(where + "unsupported dtype " + dt + " (expected F32, BF16, F16, F8_E4M3, U8, I32 or I64)");
  if (!e["shape"].is_array()) bad(where + "shape is not an array");
  // The product of the non-zero extents times the dtype size must fit int64, so that no
  // partial product of the shape overflows.
  uint64_t bytes = dtype_size(t.dtype);
  bool zero = false;
  for (const json& d : e["shape"]) {
    const uint64_t extent = json_uint(d, where + "shape extent");
    t.shape.push_back(static_cast<int64_t>(extent));
    if (extent == 0) {
      zero = true;
      continue;
    }
    if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / extent)
      bad(where + "shape too large");
    bytes *= extent;
  }
  if (zero) bytes = 0;
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2) bad(where + "data_offsets is not [begin, end]");
  const uint64_t begin = json_uint(off[0], where + "data_offsets begin");
  const uint64_t end = json_uint(off[1], where + "data_offsets end");
  if (begin > end) bad(where + "data_offsets begin > end");
  if (end > payload_size)
    bad(where + "data_offsets end " + std::to_string(end) + " beyond the data (" +
        std::to_string(payload_size) + " bytes)");
  if (end - begin != bytes)
    bad(where + "data_offsets span " + std::to_string(end - begin) + " bytes, but " + dt +
        " with this shape needs " + std::to_string(bytes));
  t.bytes = Bytes(payload + begin, static_cast<size_t>(bytes));
  *begin_out = begin;
  *end_out = end;
  return t;
}

}  // namespace

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size) {
  if (size < 8) bad("file shorter than the 8-byte header length");
  const uint64_t n = read_u64_le(data);
  if (n > size - 8)
    bad("header length " + std::to_string(n) + " exceeds the file (" + std::to_string(size - 8) +
        " bytes after the length)");
  // JSON text holds no control character but whitespace (strings escape them); the parser would
  // stop at a NUL byte and ignore what follows.
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t c = data[8 + i];
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
      bad("header byte " + std::to_string(i) + " is control character " + std::to_string(c) +
          " (expected JSON text)");
  }
  json header;
  try {
    header = json::parse(data + 8, data + 8 + n, json_guard());
  } catch (const json::exception& e) {
    bad(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad("header is not a JSON object");
  const uint8_t* payload = data + 8 + n;
  const uint64_t payload_size = size - 8 - n;
  SafetensorsFile file;
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::string>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) bad("__metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) bad("__metadata__ value '" + m.key() + "' is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    uint64_t begin = 0, end = 0;
    file.tensors[it.key()] = parse_entry(it.key(), it.value(), payload, payload_size, &begin, &end);
    if (end > begin) ranges.push_back({{begin, end}, it.key()});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first.first < ranges[i - 1].first.second)
      bad("tensors '" + ranges[i - 1].second + "' and '" + ranges[i].second +
          "' overlap in the data");
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  // O_NONBLOCK: opening a FIFO returns at once, so that it is rejected below, not waited on.
  struct File {
    int fd;
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  const int fd = file.fd;
  if (fd < 0) bad("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) bad("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) bad(path + " is not a regular file");
  if (st.st_size > kMaxFileBytes)
    bad(path + " has " + std::to_string(st.st_size) + " bytes (at most " +
        std::to_string(kMaxFileBytes) + ")");
  // The size found above bounds the read: a file that grows meanwhile is read to that size.
  std::vector<uint8_t> image(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < image.size()) {
    const ssize_t n = ::read(fd, image.data() + got, image.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) bad("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return parse_safetensors(image.data(), got);
}

std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file) {
  json header = json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype);
    if (bytes != t.bytes.size())
      bad("tensor '" + name + "': " + std::to_string(t.bytes.size()) + " bytes for " +
          dtype_name(t.dtype) + " with " + std::to_string(t.numel()) + " elements");
    header[name] = {{"dtype", dtype_name(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  std::vector<uint8_t> out(static_cast<size_t>(8 + n + offset));
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t pos = static_cast<size_t>(8 + n);
  for (const auto& entry : file.tensors) {
    const Bytes& b = entry.second.bytes;
    if (b.size() != 0) std::memcpy(out.data() + pos, b.data(), b.size());
    pos += b.size();
  }
  return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  const std::vector<uint8_t> image = serialize_safetensors(file);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
  if (!out) bad("cannot write " + path);
}

}  // namespace dsv4cpu::verify
