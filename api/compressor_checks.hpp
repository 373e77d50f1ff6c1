// Validation pieces that several compressor ops share (api/save_partial_states.cpp,
// api/compress_norm_rope_store.cpp), beside the vocabulary of core/.
#pragma once
#include <cstdint>

#include "core/check.hpp"

namespace dsv4cpu::detail {

// compressor.md §3.1: state_cache F32 [nb, sbs, row] with strides [>= sbs·row, row, 1], row = 2·SW
// (kAny while SW is not known). Shape errors also say how a padded 2-D page array is passed.
inline void check_state_cache(const char* op, const TensorView& state_cache, int64_t row) {
  check_array(op, "state_cache", state_cache, {DType::F32}, {kAny, kAny, row},
              Layout::rows_contiguous,
              "state_cache is [nb, sbs, 2·SW] with strides [page_floats, 2·SW, 1]: a padded 2-D "
              "[nb, page_floats] page array is passed as that 3-D view");
}

}  // namespace dsv4cpu::detail
