// compressed_slot_mapping (metadata.md §5): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry point:
// pack the arguments, detail::run (api/registry.hpp).
#include "api/metadata_checks.hpp"
#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(CompressedSlotMappingArgs& a, const Options&) {
  constexpr const char* op = "compressed_slot_mapping";
  check_compress_ratio(op, a.compress_ratio);
  check_block_size(op, "block_size", a.block_size);
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {kAny});
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "seq_lens", a.seq_lens);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "token_slot_mapping", a.token_slot_mapping);
  a.T = check_query_start_loc(op, a.query_start_loc, a.R);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  check_num_tokens_padded(op, a.padded, a.T);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
  check_compressed_slot_refs(op, a.query_start_loc, a.seq_lens, a.block_table, a.compress_ratio,
                             a.block_size, a.token_slot_mapping, a.R);
  if (a.token_slot_mapping.present()) check_slots(op, "token_slot_mapping", a.token_slot_mapping);
}

}  // namespace detail

void compressed_slot_mapping(const TensorView& query_start_loc, const TensorView& seq_lens,
                             const TensorView& block_table, int64_t compress_ratio,
                             int64_t block_size, const TensorView& token_slot_mapping,
                             const MutableTensorView& slot_mapping, const Options& options) {
  detail::CompressedSlotMappingArgs a{query_start_loc, seq_lens,           block_table,
                                      compress_ratio,  block_size,         token_slot_mapping,
                                      slot_mapping};
  detail::run("compressed_slot_mapping", a, options);
}

}  // namespace dsv4cpu
