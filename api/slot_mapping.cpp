// slot_mapping (metadata.md §3): the validation (bad-input.md §1.4 order, §4 tables), run before
// any variant so that every variant throws the same error, and the public entry point: pack the
// arguments, detail::run (api/registry.hpp).
#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(SlotMappingArgs& a, const Options&) {
  constexpr const char* op = "slot_mapping";
  check_block_size(op, "block_size", a.block_size);
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_num_tokens_padded(op, a.padded, a.T);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "positions", a.positions);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "token_to_req", a.token_to_req);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  check_positions(op, a.positions);
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  // The passing path by runs of consecutive positions (a prefill's columns at once); a call with
  // a bad reference checks token by token.
  const BlockTableRefs refs(op, a.block_table, a.block_size);
  ColumnRuns runs(refs);
  const IndexReader pos(a.positions), req(a.token_to_req);
  bool ok = true;
  for (int64_t t = 0, e = 0; t < a.T && ok; t = e) {
    e = t + 1 < a.T && pos(t + 1) == pos(t) + 1 && req(t + 1) == req(t)
            ? position_run_end(a.positions, a.token_to_req, t)
            : t + 1;
    ok = runs.ok(req(t), refs.column(pos(t)), refs.column(pos(e - 1)));
  }
  if (ok) return;
  const auto position = [](int64_t p) { return p; };
  check_token_columns(op, a.positions, a.token_to_req, a.block_table, a.block_size, a.T, position,
                      position);
}

}  // namespace detail

void slot_mapping(const TensorView& positions, const TensorView& token_to_req,
                  const TensorView& block_table, int64_t block_size,
                  const MutableTensorView& slot_mapping, const Options& options) {
  detail::SlotMappingArgs a{positions, token_to_req, block_table, block_size, slot_mapping};
  detail::run("slot_mapping", a, options);
}

}  // namespace dsv4cpu
