// indexer_topk (indexer.md §7): the validation (bad-input.md §1.4 order, §4 tables), run before any
// variant so that every variant throws the same error, and the public entry point: pack the
// arguments, detail::run (api/registry.hpp).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "api/indexer_checks.hpp"
#include "api/registry.hpp"
#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(IndexerTopkArgs& a, const Options& o) {
  constexpr const char* op = "indexer_topk";
  // (a) scalars
  check_power_of_two(op, "block_size", a.block_size);
  check_mode(op, a.mode);
  // (b) arrays
  check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {kAny, kAny, kIndexerHeadDim},
              Layout::contiguous);
  a.T = a.q_fp8.size(0);
  a.H = a.q_fp8.size(1);
  check_array(op, "weights", a.weights, {DType::F32}, {a.T, a.H}, Layout::contiguous);
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  const IndexReader qsl(a.query_start_loc);
  if (qsl(a.R) != a.T)
    fail<ShapeError>(op, "query_start_loc", {a.R}, std::to_string(qsl(a.R)),
                     "total query tokens differ from q_fp8's",
                     "query_start_loc[R] = T = " + std::to_string(a.T));
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  check_indexer_kv_cache(op, a.kv_cache, a.block_size);
  check_topk_output(op, "topk_indices", a.topk_indices, a.T, kIndexerTopk);
  // (c) overlap
  for (const auto& [name, in] : {std::pair{"q_fp8", &a.q_fp8},
                                 {"weights", &a.weights},
                                 {"query_start_loc", &a.query_start_loc},
                                 {"seq_lens", &a.seq_lens},
                                 {"block_table", &a.block_table},
                                 {"kv_cache", &a.kv_cache}})
    check_no_overlap(op, "topk_indices", a.topk_indices, name, *in);
  // (d) query_start_loc, seq_lens, then (long steps) the block-table entries read
  check_query_start_loc(op, a.query_start_loc, a.R);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
  const IndexReader seq_lens(a.seq_lens);
  int64_t max_entries = 0;
  for (int64_t r = 0; r < a.R; ++r) max_entries = std::max(max_entries, seq_lens(r) / 4);
  a.short_context = max_entries <= kIndexerTopk;  // §7.2
  if (a.short_context) return;
  check_i32_row_lengths(op, "seq_lens", a.seq_lens, 4, "topk_indices");
  const int64_t P = a.block_size, MB = a.block_table.size(1);
  check_pages_fit(
      op, "seq_lens", a.seq_lens,
      {4, P, MB, [](int64_t mb) {
         return "ceil((seq_len / 4) / block_size) <= " + std::to_string(mb) +
                " = block_table columns";
       }});
  std::vector<int64_t> covered(static_cast<size_t>(a.R));
  for (int64_t r = 0; r < a.R; ++r) covered[static_cast<size_t>(r)] = pages_for(seq_lens(r) / 4, P);
  check_covered_blocks(op, "block_table", a.block_table, covered,
                       blocks_in_cache(a.kv_cache.size(0)));
  // (e) finiteness (a long step reads every query row's codes and weights)
  if (!o.check_finite) return;
  check_fp8_codes(op, "q_fp8", a.q_fp8);
  check_finite(op, "weights", a.weights);
}

}  // namespace detail

void indexer_topk(const TensorView& q_fp8, const TensorView& weights,
                  const TensorView& query_start_loc, const TensorView& seq_lens,
                  const TensorView& block_table, const TensorView& kv_cache, int64_t block_size,
                  TopkMode mode, const MutableTensorView& topk_indices, const Options& options) {
  detail::IndexerTopkArgs a{q_fp8,       weights,  query_start_loc, seq_lens, block_table,
                            kv_cache,    block_size, mode,          topk_indices};
  detail::run("indexer_topk", a, options);
}

}  // namespace dsv4cpu
