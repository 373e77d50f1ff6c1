// Validation pieces the two attention ops share (api/sparse_mla_attention.cpp,
// fused_qnorm_rope_kv_insert.cpp), beside the vocabulary of core/.
#pragma once
#include <cstdint>
#include <string>

#include "args/fp8_ds_mla.hpp"
#include "core/check.hpp"
#include "core/errors.hpp"

namespace dsv4cpu::detail {

// A paged fp8_ds_mla cache U8 [pages, page_bytes] (compressor.md §6.3): unit inner stride, page
// stride >= page_bytes >= P·584 (bad-input.md §4).
inline void check_mla_cache(const char* op, const char* name, const TensorView& cache, int64_t P) {
  check_array(op, name, cache, {DType::U8}, {kAny, kAny}, Layout::rows_contiguous);
  if (cache.size(1) / kMlaEntryBytes < P)
    fail_shape(op, name, cache,
               "U8 [*, page_bytes >= P * 584] with P = " + std::to_string(P) +
                   ", unit inner stride, page stride >= page_bytes");
}

}  // namespace dsv4cpu::detail
