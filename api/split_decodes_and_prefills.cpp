// split_decodes_and_prefills (metadata.md §4): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry point:
// pack the arguments, detail::run (api/registry.hpp).
#include <string>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(SplitDecodesAndPrefillsArgs& a, const Options&) {
  constexpr const char* op = "split_decodes_and_prefills";
  if (a.threshold < 0)
    fail_value(op, "threshold", std::to_string(a.threshold), "negative threshold",
               "threshold >= 0");
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_query_start_loc(op, a.query_start_loc, a.R);
}

}  // namespace detail

DecodePrefillSplit split_decodes_and_prefills(const TensorView& query_start_loc,
                                              int64_t threshold, const Options& options) {
  DecodePrefillSplit result;
  detail::SplitDecodesAndPrefillsArgs a{query_start_loc, threshold, &result};
  detail::run("split_decodes_and_prefills", a, options);
  return result;
}

}  // namespace dsv4cpu
