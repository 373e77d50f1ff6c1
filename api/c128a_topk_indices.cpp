// c128a_topk_indices and c128a_topk_indices_compact (metadata.md §7.1): one validation for both
// forms (bad-input.md §1.4 order, §4 tables), run before any variant so that every variant throws
// the same error; the two public entry points (pack the arguments, detail::run of
// api/registry.hpp); their widths c128a_topk_width and c128a_compact_width.
#include <algorithm>

#include "api/metadata_checks.hpp"
#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu {
namespace detail {
namespace {

// The arrays of both forms; `width` is the expected number of columns (kAny: any).
void check_c128a_topk_arrays(const char* op, C128aTopkIndicesArgs& a, int64_t width) {
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, width}, Layout::contiguous);
  a.W = a.indices.size(1);
  check_no_overlap(op, "indices", a.indices, "positions", a.positions);
  check_no_overlap(op, "indices", a.indices, "token_to_req", a.token_to_req);
  check_no_overlap(op, "indices", a.indices, "block_table", a.block_table);
}

}  // namespace

void validate(C128aTopkIndicesArgs& a, const Options&) {
  const char* op = a.compact ? "c128a_topk_indices_compact" : "c128a_topk_indices";
  if (!a.compact) check_max_model_len(op, a.max_model_len);
  check_block_size(op, "block_size", a.block_size);
  check_c128a_topk_arrays(op, a, a.compact ? kAny : ceil_div(a.max_model_len, 128));
  check_c128a_elements(op, a.positions, a.token_to_req, a.block_table, a.block_size,
                       a.compact ? 0 : a.max_model_len, a.T, a.W, a.T);
}

}  // namespace detail

int64_t c128a_topk_width(int64_t max_model_len) {
  detail::check_max_model_len("c128a_topk_width", max_model_len);
  return detail::ceil_div(max_model_len, 128);
}

void c128a_topk_indices(const TensorView& positions, const TensorView& token_to_req,
                        const TensorView& block_table, int64_t max_model_len, int64_t block_size,
                        const MutableTensorView& indices, const Options& options) {
  detail::C128aTopkIndicesArgs a{positions, token_to_req,  block_table, block_size,
                                 indices,   max_model_len, false};
  detail::run("c128a_topk_indices", a, options);
}

int64_t c128a_compact_width(const TensorView& positions) {
  constexpr const char* op = "c128a_compact_width";
  detail::check_index_array(op, "positions", positions, {detail::kAny});
  const int64_t T = positions.size(0);
  detail::check_positions(op, positions);
  const detail::IndexReader pos(positions);
  int64_t width = 0;
  for (int64_t t = 0; t < T; ++t) width = std::max(width, detail::completed_entries(pos(t), 128));
  return width;
}

void c128a_topk_indices_compact(const TensorView& positions, const TensorView& token_to_req,
                                const TensorView& block_table, int64_t block_size,
                                const MutableTensorView& indices, const Options& options) {
  detail::C128aTopkIndicesArgs a{positions, token_to_req, block_table, block_size, indices,
                                 0,         true};
  detail::run("c128a_topk_indices_compact", a, options);
}

}  // namespace dsv4cpu
