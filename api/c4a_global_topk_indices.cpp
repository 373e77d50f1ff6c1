// c4a_global_topk_indices (metadata.md §8): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry point:
// pack the arguments, detail::run (api/registry.hpp).
#include <string>
#include <tuple>
#include <utility>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {
void validate(C4aGlobalTopkIndicesArgs& a, const Options& o) {
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
  // topk_indices: -1 or >= 0; token_to_req; the references. One vector pass decides the first and
  // the last together once the requests are known good; only a failing call scans in order.
  const BlockTableRefs refs(op, a.block_table, a.block_size);
  if (first_outside(a.token_to_req, 0, a.block_table.size(0)) < a.T ||
      !local_refs_pass(refs, a.topk_indices, a.token_to_req, o.num_threads, -1)) {
    const int64_t bad = first_outside(a.topk_indices, -1, kNoLimit, o.num_threads);
    if (bad < a.T * a.K)
      fail<IndexError>(op, "topk_indices", unflatten(a.topk_indices, bad),
                       std::to_string(IndexReader(a.topk_indices)(bad / a.K, bad % a.K)),
                       "negative index other than -1", "-1 or >= 0");
    check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
    check_local_refs(refs, "topk_indices", a.topk_indices, a.token_to_req, o.num_threads);
  }
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
