// The const_output_rejected test (cmake/check_compile_fail.cmake) compiles this file once per
// case: without a case macro it must compile (the control: the same call with a writable output),
// with each case it must not, and the diagnostic must name the output's parameter type.
#include <cstdint>
#include <vector>

#include "dsv4cpu/compressor.hpp"

using dsv4cpu::DType;

int main() {
  const std::vector<int64_t> local = {0};
  const std::vector<int32_t> req = {0}, table = {7};
  const dsv4cpu::TensorView local_v(local.data(), DType::I64, {1, 1}),
      req_v(req.data(), DType::I32, {1}), table_v(table.data(), DType::I32, {1, 1});
#if defined(CASE_READ_ONLY_VIEW)
  // A read-only view of const memory passed as the output.
  const std::vector<int64_t> slots(1);
  const dsv4cpu::TensorView slots_v(slots.data(), DType::I64, {1, 1});
#elif defined(CASE_MUTABLE_VIEW_OF_CONST)
  // A mutable view built over const memory.
  const std::vector<int64_t> slots(1);
  const dsv4cpu::MutableTensorView slots_v(slots.data(), DType::I64, {1, 1});
#else
  std::vector<int64_t> slots(1);
  const dsv4cpu::MutableTensorView slots_v(slots.data(), DType::I64, {1, 1});
#endif
  dsv4cpu::map_local_to_global_slots(local_v, req_v, table_v, 4, slots_v);
  return slots[0] == 28 ? 0 : 1;
}
