// c4a_global_topk_indices (metadata.md §8): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry point:
// pack the arguments, detail::run (api/registry.hpp).
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {
namespace {

template <class T>
using Unsigned = std::make_unsigned_t<std::remove_const_t<T>>;

// Per-row maximum (-1 for K = 0) of an index matrix with unit inner stride, in one pass with
// the any_below(-1) test of all elements; returns whether some element may be < -1 (then the
// maxima are not used).
template <class I>
bool row_max_any_below_minus_one(const TensorView& v, std::vector<int64_t>& row_max) {
  using U = Unsigned<I>;
  const int64_t N = v.size(0), K = v.size(1);
  row_max.assign(static_cast<size_t>(N), -1);
  U any = 0;
  for (int64_t n = 0; n < N; ++n) {
    const I* row = v.ptr<const I>() + n * v.stride(0);
    I hi = -1;  // the true maximum whenever no element is below -1
    for (int64_t k = 0; k < K; ++k) {
      hi = row[k] > hi ? row[k] : hi;  // (this form vectorises; std::max here does not)
      any |= static_cast<U>(static_cast<U>(row[k]) + 1);
    }
    row_max[static_cast<size_t>(n)] = hi;
  }
  return (any >> (8 * sizeof(U) - 1)) != 0;
}

// §8's block-table reads: every local l >= 0 of row t reads column l / P of row
// token_to_req[t]; only those entries are read. Per request, the columns verified so far are
// marked and `sound` counts the leading run of marked columns: a row whose largest local lies in
// that run is sound without looking at its elements (after a few rows, every further row of a
// long prefill); any other row checks each element's unmarked column in order, so the first
// offending element in row-major order fails.
template <class I>
void check_c4a_refs(const char* op, const TensorView& topk_v, const TensorView& token_to_req,
                    const TensorView& block_table, int64_t block_size,
                    const std::vector<int64_t>& row_max) {
  const BlockTableRefs refs(op, block_table, block_size);
  const IndexReader req(token_to_req);
  const int64_t R = block_table.size(0), MB = refs.columns(), K = topk_v.size(1);
  const auto fail_at = [&](size_t t, int64_t k, int64_t r, int64_t l) {
    refs.fail(r, refs.column(l), {"topk_indices", {static_cast<int64_t>(t), k}, l, ""});
  };
  if (MB == 0) {  // [R, 0]: the first local >= 0 fails, and R may be any size (no memory)
    for (size_t t = 0; t < row_max.size(); ++t)
      for (int64_t k = 0; row_max[t] >= 0 && k < K; ++k)
        if (const int64_t l = topk_v.ptr<const I>()[static_cast<int64_t>(t) * topk_v.stride(0) + k];
            l >= 0)
          fail_at(t, k, req(static_cast<int64_t>(t)), l);
    return;
  }
  std::vector<std::vector<char>> marked(static_cast<size_t>(R));
  std::vector<int64_t> sound(static_cast<size_t>(R), 0);
  for (size_t t = 0; t < row_max.size(); ++t) {
    if (row_max[t] < 0) continue;
    const int64_t r = req(static_cast<int64_t>(t));
    int64_t& n = sound[static_cast<size_t>(r)];
    if (refs.column(row_max[t]) < n) continue;
    std::vector<char>& mark = marked[static_cast<size_t>(r)];
    mark.resize(static_cast<size_t>(MB), 0);
    const I* row = topk_v.ptr<const I>() + static_cast<int64_t>(t) * topk_v.stride(0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t l = row[k];
      if (l < 0) continue;
      const int64_t c = refs.column(l);
      if (c < MB && mark[static_cast<size_t>(c)]) continue;
      if (!refs.ok(r, c)) fail_at(t, k, r, l);
      mark[static_cast<size_t>(c)] = 1;
    }
    while (n < MB && mark[static_cast<size_t>(n)]) ++n;
  }
}

}  // namespace

void validate(C4aGlobalTopkIndicesArgs& a, const Options&) {
  constexpr const char* op = "c4a_global_topk_indices";
  std::tie(a.T, a.K) = check_mapping_arrays(op, "topk_indices", a.topk_indices, "token_to_req",
                                            a.token_to_req, a.block_table, a.block_size);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, a.K}, Layout::contiguous);
  check_array(op, "lens", a.lens, {DType::I32}, {a.T}, Layout::contiguous);
  for (const auto& [name, in] :
       {std::pair{"topk_indices", &a.topk_indices}, std::pair{"token_to_req", &a.token_to_req},
        std::pair{"block_table", &a.block_table},
        std::pair{"token_slot_mapping", &a.token_slot_mapping}}) {
    check_no_overlap(op, "indices", a.indices, name, *in);
    check_no_overlap(op, "lens", a.lens, name, *in);
  }
  check_outputs_disjoint(op, "indices", a.indices, "lens", a.lens);
  // One pass gives the row maxima and decides that no element is below -1; the elements are
  // scanned one by one (to report the first offender in row-major order) only otherwise.
  std::vector<int64_t> row_max;
  const bool maybe_bad = a.topk_indices.dtype() == DType::I32
                             ? row_max_any_below_minus_one<int32_t>(a.topk_indices, row_max)
                             : row_max_any_below_minus_one<int64_t>(a.topk_indices, row_max);
  const IndexReader topk(a.topk_indices);
  for (int64_t t = 0; t < a.T && maybe_bad; ++t)
    for (int64_t k = 0; k < a.K; ++k)
      if (topk(t, k) < -1)
        fail<IndexError>(op, "topk_indices", {t, k}, std::to_string(topk(t, k)),
                         "negative index other than -1", "-1 or >= 0");
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  if (a.topk_indices.dtype() == DType::I32)
    check_c4a_refs<int32_t>(op, a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                            row_max);
  else
    check_c4a_refs<int64_t>(op, a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                            row_max);
  if (a.token_slot_mapping.present()) check_slots(op, "token_slot_mapping", a.token_slot_mapping);
}

}  // namespace detail

void c4a_global_topk_indices(const TensorView& topk_indices, const TensorView& token_to_req,
                             const TensorView& block_table, int64_t block_size,
                             const TensorView& token_slot_mapping, const MutableTensorView& indices,
                             const MutableTensorView& lens, const Options& options) {
  detail::C4aGlobalTopkIndicesArgs a{topk_indices, token_to_req, block_table, block_size,
                                     token_slot_mapping, indices, lens};
  detail::run("c4a_global_topk_indices", a, options);
}

}  // namespace dsv4cpu
