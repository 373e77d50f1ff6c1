// Maps the local indices of compressor.md §4.1's example to slots and prints them.
#include <cstdio>
#include <vector>

#include "dsv4cpu/compressor.hpp"

int main() {
  std::vector<int64_t> local = {-1, 0, 5, 11};
  std::vector<int32_t> req = {0, 0, 0, 0};
  std::vector<int32_t> block_table = {7, 3, 9};
  std::vector<int64_t> slots(4);
  dsv4cpu::map_local_to_global_slots(
      dsv4cpu::TensorView(local.data(), dsv4cpu::DType::I64, {4, 1}),
      dsv4cpu::TensorView(req.data(), dsv4cpu::DType::I32, {4}),
      dsv4cpu::TensorView(block_table.data(), dsv4cpu::DType::I32, {1, 3}), 4,
      dsv4cpu::MutableTensorView(slots.data(), dsv4cpu::DType::I64, {4, 1}));
  for (int64_t s : slots) std::printf("%lld ", static_cast<long long>(s));
  std::printf("\n");
  return slots == std::vector<int64_t>{-1, 28, 13, 39} ? 0 : 1;
}
