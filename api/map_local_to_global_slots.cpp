// map_local_to_global_slots (compressor.md §4.1): the validation (bad-input.md §1.4 order, §4
// tables), run before any variant so that every variant throws the same error, and the public entry
// point: pack the arguments, detail::run (api/registry.hpp).
#include <tuple>
#include <utility>

#include "api/registry.hpp"
#include "args/compressor.hpp"
#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(MapLocalToGlobalSlotsArgs& a, const Options& o) {
  constexpr const char* op = "map_local_to_global_slots";
  std::tie(a.N, a.K) = check_mapping_arrays(op, "local_indices", a.local_indices, "req_idx",
                                            a.req_idx, a.block_table, a.block_size);
  check_array(op, "slots", a.slots, {DType::I64}, {a.N, a.K}, Layout::contiguous);
  for (const auto& [name, in] : {std::pair{"local_indices", &a.local_indices},
                                 {"req_idx", &a.req_idx},
                                 {"block_table", &a.block_table}})
    check_no_overlap(op, "slots", a.slots, name, *in);
  check_request_indices(op, "req_idx", a.req_idx, a.block_table.size(0));
  check_local_refs(BlockTableRefs(op, a.block_table, a.block_size), "local_indices",
                   a.local_indices, a.req_idx, o.num_threads);
}

}  // namespace detail

void map_local_to_global_slots(const TensorView& local_indices, const TensorView& req_idx,
                               const TensorView& block_table, int64_t block_size,
                               const MutableTensorView& slots, const Options& options) {
  detail::MapLocalToGlobalSlotsArgs a{local_indices, req_idx, block_table, block_size, slots};
  detail::run("map_local_to_global_slots", a, options);
}

}  // namespace dsv4cpu
