// build_tile_scheduler (metadata.md §10): the validation (bad-input.md §1.4 order, §4 tables), run
// before any variant so that every variant throws the same error, and the public entry point: pack
// the arguments, detail::run (api/registry.hpp).
#include <string>

#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/errors.hpp"

namespace dsv4cpu {
namespace detail {

void validate(BuildTileSchedulerArgs& a, const Options&) {
  if (a.layer_kind != "swaonly" && a.layer_kind != "c4a" && a.layer_kind != "c128a")
    fail_value("build_tile_scheduler", "layer_kind", std::string(a.layer_kind),
               "unknown layer kind", "swaonly, c4a or c128a");
}

}  // namespace detail

std::string build_tile_scheduler(std::string_view layer_kind, const Options& options) {
  std::string result;
  detail::BuildTileSchedulerArgs a{layer_kind, &result};
  detail::run("build_tile_scheduler", a, options);
  return result;
}

}  // namespace dsv4cpu
