// short_context_topk (indexer.md §6): the validation (bad-input.md §1.4 order, §4 tables), run
// before any variant so that every variant throws the same error, and the public entry point: pack
// the arguments, detail::run (api/registry.hpp).
#include "api/indexer_checks.hpp"
#include "api/registry.hpp"
#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(ShortContextTopkArgs& a, const Options&) {
  constexpr const char* op = "short_context_topk";
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_topk_output(op, "topk_indices", a.topk_indices, a.T, kIndexerTopk);
  check_no_overlap(op, "topk_indices", a.topk_indices, "positions", a.positions);
  // Positions up to 4·512 + 2.
  const Limit fill{4 * kIndexerTopk + 3, "too many entries for the short-context fill",
                   [](int64_t) { return std::string("(position + 1) / 4 <= 512"); }};
  check_positions(op, a.positions, &fill);
}

}  // namespace detail

void short_context_topk(const TensorView& positions, const MutableTensorView& topk_indices,
                        const Options& options) {
  detail::ShortContextTopkArgs a{positions, topk_indices};
  detail::run("short_context_topk", a, options);
}

}  // namespace dsv4cpu
