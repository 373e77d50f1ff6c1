// swa_window_indices (metadata.md §6): the validation (bad-input.md §1.4 order, §4 tables), run
// before any variant so that every variant throws the same error, and the public entry point: pack
// the arguments, detail::run (api/registry.hpp).
#include <algorithm>
#include <string>
#include <utility>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(SwaWindowIndicesArgs& a, const Options&) {
  constexpr const char* op = "swa_window_indices";
  if (a.window < 1)
    fail_value(op, "window", std::to_string(a.window), "not a positive window", "window >= 1");
  check_block_size(op, "block_size", a.block_size);
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, a.window}, Layout::contiguous);
  if (a.lens.present()) check_array(op, "lens", a.lens, {DType::I32}, {a.T}, Layout::contiguous);
  for (const auto& [name, in] :
       {std::pair{"positions", &a.positions}, std::pair{"token_to_req", &a.token_to_req},
        std::pair{"block_table", &a.block_table}}) {
    check_no_overlap(op, "indices", a.indices, name, *in);
    check_no_overlap(op, "lens", a.lens, name, *in);
  }
  check_outputs_disjoint(op, "indices", a.indices, "lens", a.lens);
  check_positions(op, a.positions);
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  check_token_columns(
      op, a.positions, a.token_to_req, a.block_table, a.block_size, a.T,
      [W = a.window](int64_t p) { return std::max<int64_t>(p - W + 1, 0); },
      [](int64_t p) { return p; });
}

}  // namespace detail

void swa_window_indices(const TensorView& positions, const TensorView& token_to_req,
                        const TensorView& block_table, int64_t window, int64_t block_size,
                        const MutableTensorView& indices, const MutableTensorView& lens,
                        const Options& options) {
  detail::SwaWindowIndicesArgs a{positions,  token_to_req, block_table, window,
                                 block_size, indices,      lens};
  detail::run("swa_window_indices", a, options);
}

}  // namespace dsv4cpu
