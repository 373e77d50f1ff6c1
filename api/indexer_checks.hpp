// Validation pieces that several indexer ops share (api/fp8_paged_mqa_logits.cpp,
// topk_transform.cpp, short_context_topk.cpp, indexer_topk.cpp), beside the vocabulary of core/.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/errors.hpp"

namespace dsv4cpu::detail {

// The selection order: canonical (indexer.md §5.3) or vllm (§5.4).
inline void check_mode(const char* op, TopkMode mode) {
  if (mode != TopkMode::canonical && mode != TopkMode::vllm)
    fail_value(op, "mode", std::to_string(static_cast<int>(mode)), "unknown mode",
               "canonical or vllm");
}

// Indexer K cache: U8 [num_pages, page_bytes], unit inner stride, page stride >= page_bytes
// >= P·132 (indexer.md §3, compressor.md §7).
inline void check_indexer_kv_cache(const char* op, const TensorView& kv, int64_t P) {
  check_array(op, "kv_cache", kv, {DType::U8}, {kAny, kAny}, Layout::rows_contiguous);
  if (kv.size(1) / kIndexerKEntryBytes < P)
    fail_shape(op, "kv_cache", kv,
               "U8 [num_pages, page_bytes] with page_bytes >= block_size x 132 = " +
                   (P > std::numeric_limits<int64_t>::max() / kIndexerKEntryBytes
                        ? std::string("overflow")
                        : std::to_string(P * kIndexerKEntryBytes)) +
                   ", unit inner stride, page stride >= page_bytes");
}

// A top-k output: I32 [rows, >= K], unit inner stride.
inline void check_topk_output(const char* op, const char* name, const TensorView& v, int64_t rows,
                              int64_t K) {
  check_array(op, name, v, {DType::I32}, {rows, kAny}, Layout::unit_inner);
  if (v.size(1) < K)
    fail_shape(
        op, name, v,
        "I32 [" + std::to_string(rows) + ", >= " + std::to_string(K) + "], unit inner stride");
}

}  // namespace dsv4cpu::detail
