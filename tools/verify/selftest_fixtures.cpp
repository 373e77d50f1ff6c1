// Writes the inputs of the CLI tests (tools/CMakeLists.txt) into the folder given as argument:
//   malformed.safetensors   header that is not JSON
//   mixed/pass.safetensors  map_local_to_global_slots, compressor.md §4.1 example
//   mixed/fail.safetensors  the same with one wrong expected slot
//   empty/                  no fixture (only a text file)
//   loop/pass.safetensors   as mixed/pass.safetensors, beside loop/self.safetensors, a symbolic
//                           link to itself (a per-path failure, never an abort)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/verify/safetensors.hpp"

using namespace dsv4cpu;
using namespace dsv4cpu::verify;

namespace {

template <class T>
Tensor tensor(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  return Tensor{dtype, std::move(shape), Bytes(values.data(), values.size() * sizeof(T))};
}

// compressor.md §4.1: P = 4, block_table[0] = [7, 3, 9], locals [-1, 0, 5, 11] -> [-1, 28, 13, 39].
SafetensorsFile map_example(int64_t last_slot) {
  SafetensorsFile f;
  f.metadata = {{"format", "dsv4cpu-fixture/1"},
                {"op", "map_local_to_global_slots"},
                {"block_size", "4"}};
  f.tensors["local_indices"] = tensor<int64_t>(DType::I64, {4, 1}, {-1, 0, 5, 11});
  f.tensors["req_idx"] = tensor<int32_t>(DType::I32, {4}, {0, 0, 0, 0});
  f.tensors["block_table"] = tensor<int32_t>(DType::I32, {1, 3}, {7, 3, 9});
  f.tensors["expected.slots"] = tensor<int64_t>(DType::I64, {4, 1}, {-1, 28, 13, last_slot});
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  fs::create_directories(dir / "mixed");
  fs::create_directories(dir / "empty");
  {
    const std::string header = "{not json";
    std::string image(8, '\0');
    image[0] = static_cast<char>(header.size());
    image += header;
    std::ofstream(dir / "malformed.safetensors", std::ios::binary) << image;
  }
  std::ofstream(dir / "empty" / "README.txt") << "no fixtures here\n";
  write_safetensors((dir / "mixed" / "pass.safetensors").string(), map_example(39));
  write_safetensors((dir / "mixed" / "fail.safetensors").string(), map_example(40));
  fs::create_directories(dir / "loop");
  write_safetensors((dir / "loop" / "pass.safetensors").string(), map_example(39));
  std::error_code ec;
  fs::remove(dir / "loop" / "self.safetensors", ec);
  fs::create_symlink("self.safetensors", dir / "loop" / "self.safetensors");
  return 0;
}
