// topk_transform_512 and topk_transform_1024 (indexer.md §5): one validation for both widths
// (bad-input.md §1.4 order, §4 tables), run before any variant so that every variant throws the
// same error; the two public entry points (pack the arguments, detail::run of api/registry.hpp);
// parse_topk_mode (the modes of §5.3, §5.4).
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "api/indexer_checks.hpp"
#include "api/registry.hpp"
#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(TopkTransformArgs& a, const Options&) {
  const char* op = a.K == 512 ? "topk_transform_512" : "topk_transform_1024";
  const bool paged = a.page_indices.present();
  // (a) scalars. page_size is page_table's page size: used only with page_indices, but a value
  // that is no page size is rejected either way (docs/decisions.md).
  check_power_of_two(op, "page_size", a.page_size);
  while ((int64_t{1} << a.page_shift) < a.page_size) ++a.page_shift;
  check_mode(op, a.mode);
  // (b) arrays
  check_array(op, "scores", a.scores, {DType::F32}, {kAny, kAny}, Layout::unit_inner);
  a.B = a.scores.size(0);
  a.S = a.scores.size(1);
  check_index_array(op, "seq_lens", a.seq_lens, {a.B});
  if (paged)
    check_array(op, "page_table", a.page_table, {DType::I32, DType::I64}, {a.B, kAny},
                Layout::rows_contiguous);
  else if (a.page_table.present())
    fail_shape(op, "page_table", a.page_table, "absent when page_indices is absent");
  check_topk_output(op, "raw_indices", a.raw_indices, a.B, a.K);
  if (paged)
    check_array(op, "page_indices", a.page_indices, {DType::I32}, {a.B, a.raw_indices.size(1)},
                Layout::unit_inner);
  // (c) overlap
  for (const auto& [name, out] :
       {std::pair{"raw_indices", &a.raw_indices}, {"page_indices", &a.page_indices}})
    for (const auto& [in_name, in] :
         {std::pair{"scores", &a.scores}, {"seq_lens", &a.seq_lens}, {"page_table", &a.page_table}})
      check_no_overlap(op, name, *out, in_name, *in);
  check_outputs_disjoint(op, "raw_indices", a.raw_indices, "page_indices", a.page_indices);
  // (d) lengths, then (with page_indices) the covered page-table entries (§5.5), whose slots
  // (entry << log2 P) + P - 1 must fit int32.
  const int64_t P = a.page_size, MP = paged ? a.page_table.size(1) : 0;
  const PageFit fit{1, P, MP, [](int64_t mp) {
                      return "ceil(seq_len / page_size) <= " + std::to_string(mp) +
                             " = page_table columns";
                    }};
  check_lengths(op, "seq_lens", a.seq_lens, a.S,
                [](int64_t s) { return std::to_string(s) + " = scores columns"; },
                paged ? &fit : nullptr);
  if (a.S > (int64_t{1} << 31))  // a row of more than 8 GiB: its indices may not fit I32
    check_i32_row_lengths(op, "seq_lens", a.seq_lens, 1, "raw_indices");
  if (!paged) return;
  const IndexReader seq_lens(a.seq_lens);
  std::vector<int64_t> covered(static_cast<size_t>(a.B));
  for (int64_t b = 0; b < a.B; ++b) covered[static_cast<size_t>(b)] = pages_for(seq_lens(b), P);
  const int64_t limit = int64_t{std::numeric_limits<int32_t>::max()} - (P - 1);
  check_covered_blocks(op, "page_table", a.page_table, covered,
                       {limit < 0 ? 0 : (limit >> a.page_shift) + 1, "slot does not fit in int32",
                        [](int64_t) {
                          return std::string(
                              "(block id << log2(page_size)) + page_size - 1 <= 2^31 - 1");
                        }});
}

}  // namespace detail

TopkMode parse_topk_mode(const char* op, std::string_view text) {
  if (text == "canonical") return TopkMode::canonical;
  if (text == "vllm") return TopkMode::vllm;
  detail::fail_value(op, "mode", std::string(text), "unknown mode", "canonical or vllm");
}

void topk_transform_512(const TensorView& scores, const TensorView& seq_lens,
                        const TensorView& page_table, int64_t page_size, TopkMode mode,
                        const MutableTensorView& raw_indices, const MutableTensorView& page_indices,
                        const Options& options) {
  detail::TopkTransformArgs a{scores,      seq_lens,     page_table, page_size, mode,
                              raw_indices, page_indices, 512};
  detail::run("topk_transform_512", a, options);
}

void topk_transform_1024(const TensorView& scores, const TensorView& seq_lens,
                         const TensorView& page_table, int64_t page_size,
                         const MutableTensorView& raw_indices,
                         const MutableTensorView& page_indices, const Options& options) {
  detail::TopkTransformArgs a{scores,      seq_lens,     page_table, page_size, TopkMode::canonical,
                              raw_indices, page_indices, 1024};
  detail::run("topk_transform_1024", a, options);
}

}  // namespace dsv4cpu
