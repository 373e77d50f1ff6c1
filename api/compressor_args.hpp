// Validated argument packs of the compressor ops, shared by every variant (ref and opt).
#pragma once
#include <cstdint>

#include "core/registry.hpp"
#include "dsv4cpu/compressor.hpp"

namespace dsv4cpu::detail {

struct MapLocalToGlobalSlotsArgs {
  TensorView local_indices, req_idx, block_table;
  int64_t block_size;
  TensorView slots;
  // Derived by validation.
  int64_t N = 0, K = 0;
};

}  // namespace dsv4cpu::detail
