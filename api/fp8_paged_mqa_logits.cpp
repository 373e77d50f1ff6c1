// fp8_paged_mqa_logits (indexer.md §4, §8): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry point:
// pack the arguments, detail::run (api/registry.hpp).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "api/indexer_checks.hpp"
#include "api/registry.hpp"
#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/checked.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(Fp8PagedMqaLogitsArgs& a, const Options& o) {
  constexpr const char* op = "fp8_paged_mqa_logits";
  // (a) scalars
  check_block_size(op, "block_size", a.block_size);
  if (a.max_seq_len < 0)
    fail_value(op, "max_seq_len", std::to_string(a.max_seq_len), "negative row width",
               "max_seq_len >= 0");
  if (a.next_n < 1)
    fail_value(op, "next_n", std::to_string(a.next_n), "not a positive number of query rows",
               "next_n >= 1");
  // (b) arrays: q_fp8 [B, next_n, H, 128] or [B·next_n, H, 128]
  const int64_t n = a.next_n;
  if (a.q_fp8.present() && a.q_fp8.rank() == 4) {
    check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {kAny, n, kAny, kIndexerHeadDim},
                Layout::contiguous);
    a.B = a.q_fp8.size(0);
    a.H = a.q_fp8.size(2);
  } else {
    check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {kAny, kAny, kIndexerHeadDim},
                Layout::contiguous);
    if (a.q_fp8.size(0) % n != 0)
      fail_shape(op, "q_fp8", a.q_fp8,
                 "F8_E4M3 [B, next_n, H, 128] or [B x next_n, H, 128] with next_n = " +
                     std::to_string(n) + ", contiguous");
    a.B = a.q_fp8.size(0) / n;
    a.H = a.q_fp8.size(1);
  }
  check_indexer_kv_cache(op, a.kv_cache, a.block_size);
  const int64_t rows = shape_product(op, "B x next_n", a.B, n);
  check_array(op, "weights", a.weights, {DType::F32}, {rows, a.H}, Layout::contiguous);
  a.seq_lens_2d = a.seq_lens.present() && a.seq_lens.rank() == 2;
  if (a.seq_lens_2d)
    check_index_array(op, "seq_lens", a.seq_lens, {a.B, n});
  else
    check_index_array(op, "seq_lens", a.seq_lens, {a.B});
  check_index_array(op, "page_table", a.page_table, {a.B, kAny}, Layout::rows_contiguous);
  check_array(op, "logits", a.logits, {DType::F32}, {rows, a.max_seq_len}, Layout::contiguous);
  // (c) overlap
  for (const auto& [name, in] : {std::pair{"q_fp8", &a.q_fp8},
                                 {"kv_cache", &a.kv_cache},
                                 {"weights", &a.weights},
                                 {"seq_lens", &a.seq_lens},
                                 {"page_table", &a.page_table}})
    check_no_overlap(op, "logits", a.logits, name, *in);
  // (d) every seq_lens element is a row length in [0, S] (1-D form: that of row next_n − 1, the
  // longest of its batch entry) whose pages fit the page table; then the covered entries.
  const int64_t S = a.max_seq_len, P = a.block_size, MP = a.page_table.size(1);
  const PageFit fit{1, P, MP, [](int64_t mp) {
                      return "ceil(seq_len / block_size) <= " + std::to_string(mp) +
                             " = page_table columns";
                    }};
  check_lengths(op, "seq_lens", a.seq_lens, S,
                [](int64_t s) { return "max_seq_len = " + std::to_string(s); }, &fit);
  const IndexReader seq_lens(a.seq_lens);
  std::vector<int64_t> covered(static_cast<size_t>(a.B), 0);  // pages read per batch entry
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t j = 0; j < (a.seq_lens_2d ? n : 1); ++j)
      covered[static_cast<size_t>(b)] =
          std::max(covered[static_cast<size_t>(b)],
                   pages_for(a.seq_lens_2d ? seq_lens(b, j) : seq_lens(b), P));
  check_covered_blocks(op, "page_table", a.page_table, covered,
                       blocks_in_cache(a.kv_cache.size(0)));
  // (e) finiteness
  if (!o.check_finite) return;
  check_fp8_codes(op, "q_fp8", a.q_fp8);
  check_finite(op, "weights", a.weights);
}

}  // namespace detail

void fp8_paged_mqa_logits(const TensorView& q_fp8, const TensorView& kv_cache,
                          const TensorView& weights, const TensorView& seq_lens,
                          const TensorView& page_table, int64_t block_size, int64_t max_seq_len,
                          const MutableTensorView& logits, int64_t next_n, const Options& options) {
  detail::Fp8PagedMqaLogitsArgs a{q_fp8,      kv_cache,    weights, seq_lens, page_table,
                                  block_size, max_seq_len, logits,  next_n};
  detail::run("fp8_paged_mqa_logits", a, options);
}

}  // namespace dsv4cpu
