// Writes the inputs of the CLI tests (tools/CMakeLists.txt) into FOLDER, hostile ones built from
// the embedded fixtures in FIXTURES:
//   malformed.safetensors   header that is not JSON
//   mixed/pass.safetensors  map_local_to_global_slots, compressor.md §4.1 example
//   mixed/fail.safetensors  the same with one wrong expected slot
//   empty/                  no fixture (only a text file)
//   loop/pass.safetensors   as mixed/pass.safetensors, beside loop/self.safetensors, a symbolic
//                           link to itself (a per-path failure, never an abort)
//   hostile/                a_fifo (a FIFO) and b_zero (a symbolic link to /dev/zero), both
//                           skipped; expected_error cases whose scalar makes an output extent
//                           negative or huge (c_q_head_padded -1, d_window -5, e_max_seq_len -7,
//                           f_q_head_padded_huge 2^40), each judged on the op's error;
//                           g_malformed; h_integer_plus ("+4") and i_integer_nul ("4\0"),
//                           outside the metadata grammar; y_link (a symbolic link to z_pass,
//                           taken by its own name) and z_pass, reported after them all
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "verify/safetensors.hpp"

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

// The embedded fixture `fixtures`/`op`/`name`.safetensors turned into an expected_error case: its
// expected.* tensors dropped, `key` set to `value`.
SafetensorsFile error_case(const std::string& fixtures, const std::string& op,
                           const std::string& name, const std::string& key,
                           const std::string& value, const std::string& expected_error) {
  SafetensorsFile f = read_safetensors(fixtures + "/" + op + "/" + name + ".safetensors");
  for (auto it = f.tensors.begin(); it != f.tensors.end();)
    it = it->first.rfind("expected.", 0) == 0 ? f.tensors.erase(it) : std::next(it);
  f.metadata[key] = value;
  f.metadata["expected_error"] = expected_error;
  return f;
}

void write_malformed(const std::string& path) {
  const std::string header = "{not json";
  std::string image(8, '\0');
  image[0] = static_cast<char>(header.size());
  image += header;
  std::ofstream(path, std::ios::binary) << image;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FOLDER FIXTURES\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  fs::create_directories(dir / "mixed");
  fs::create_directories(dir / "empty");
  write_malformed((dir / "malformed.safetensors").string());
  std::ofstream(dir / "empty" / "README.txt") << "no fixtures here\n";
  write_safetensors((dir / "mixed" / "pass.safetensors").string(), map_example(39));
  write_safetensors((dir / "mixed" / "fail.safetensors").string(), map_example(40));
  fs::create_directories(dir / "loop");
  write_safetensors((dir / "loop" / "pass.safetensors").string(), map_example(39));
  std::error_code ec;
  fs::remove(dir / "loop" / "self.safetensors", ec);
  fs::create_symlink("self.safetensors", dir / "loop" / "self.safetensors");

  const fs::path hostile = dir / "hostile";
  fs::remove_all(hostile);
  fs::create_directories(hostile);
  if (::mkfifo((hostile / "a_fifo.safetensors").c_str(), 0600) != 0) {
    std::perror("mkfifo");
    return 1;
  }
  fs::create_symlink("/dev/zero", hostile / "b_zero.safetensors");
  const std::string fixtures = argv[2];
  const auto write = [&](const char* name, const SafetensorsFile& f) {
    write_safetensors((hostile / name).string(), f);
  };
  write("c_q_head_padded.safetensors",
        error_case(fixtures, "fused_qnorm_rope_kv_insert", "spec_example_3_5", "q_head_padded",
                   "-1", "ValueError"));
  write("d_window.safetensors", error_case(fixtures, "swa_window_indices", "spec_example_w4",
                                           "window", "-5", "ValueError"));
  write("e_max_seq_len.safetensors", error_case(fixtures, "fp8_paged_mqa_logits",
                                                "h64_single_page", "max_seq_len", "-7",
                                                "ValueError"));
  // 2^40 heads of q_out cannot be allocated: the op reports q_out's shape.
  write("f_q_head_padded_huge.safetensors",
        error_case(fixtures, "fused_qnorm_rope_kv_insert", "spec_example_3_5", "q_head_padded",
                   "1099511627776", "ShapeError"));
  write_malformed((hostile / "g_malformed.safetensors").string());
  SafetensorsFile plus = map_example(39), nul = map_example(39);
  plus.metadata["block_size"] = "+4";
  nul.metadata["block_size"] = std::string("4\0", 2);
  write("h_integer_plus.safetensors", plus);
  write("i_integer_nul.safetensors", nul);
  write("z_pass.safetensors", map_example(39));
  fs::create_symlink("z_pass.safetensors", hostile / "y_link.safetensors");
  return 0;
}
