// token_positions (metadata.md §2): the validation (bad-input.md §1.4 order, §4 tables), run before
// any variant so that every variant throws the same error, and the public entry point: pack the
// arguments, detail::run (api/registry.hpp).
#include <utility>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(TokenPositionsArgs& a, const Options&) {
  constexpr const char* op = "token_positions";
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_array(op, "positions", a.positions, {DType::I64}, {kAny}, Layout::contiguous);
  check_array(op, "token_to_req", a.token_to_req, {DType::I32}, {kAny}, Layout::contiguous);
  for (const auto& [name, in] :
       {std::pair{"query_start_loc", &a.query_start_loc}, std::pair{"seq_lens", &a.seq_lens}}) {
    check_no_overlap(op, "positions", a.positions, name, *in);
    check_no_overlap(op, "token_to_req", a.token_to_req, name, *in);
  }
  check_outputs_disjoint(op, "positions", a.positions, "token_to_req", a.token_to_req);
  a.T = check_query_start_loc(op, a.query_start_loc, a.R);
  check_array(op, "positions", a.positions, {DType::I64}, {a.T}, Layout::contiguous);
  check_array(op, "token_to_req", a.token_to_req, {DType::I32}, {a.T}, Layout::contiguous);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
}

}  // namespace detail

void token_positions(const TensorView& query_start_loc, const TensorView& seq_lens,
                     const MutableTensorView& positions, const MutableTensorView& token_to_req,
                     const Options& options) {
  detail::TokenPositionsArgs a{query_start_loc, seq_lens, positions, token_to_req};
  detail::run("token_positions", a, options);
}

}  // namespace dsv4cpu
