// indexer_metadata (metadata.md §9.1-9.5): the validation (bad-input.md §1.4 order, §4 tables), run
// before any variant so that every variant throws the same error, and the public entry point: pack
// the arguments, detail::run (api/registry.hpp).
#include <climits>
#include <string>

#include "api/metadata_checks.hpp"
#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"
#include "core/checked.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu {
namespace detail {

void validate(IndexerMetadataArgs& a, const Options&) {
  constexpr const char* op = "indexer_metadata";
  check_block_size(op, "block_size", a.block_size);
  if (a.next_n < 1)
    fail_value(op, "next_n", std::to_string(a.next_n), "not a positive token count", "next_n >= 1");
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "seq_lens", a.seq_lens);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  a.T = check_query_start_loc(op, a.query_start_loc, a.R);
  check_num_tokens_padded(op, a.padded, a.T);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
  // I32 outputs: compressed_seq_lens, and the prefill chunk's cu_seq_lens (which bound ks, ke).
  // The returned vectors whose size comes from values are bounded before any is built:
  // decode_seq_lens [num_decodes, next_n] and the chunk's token_to_seq [sum of seq_len / 4].
  const IndexReader seq(a.seq_lens);
  const int64_t first_prefill =
      compute_split(IndexReader(a.query_start_loc), a.R, a.next_n).num_decodes;
  const int64_t max_i32_entries = kMaxReturnedBytes / 4;
  int64_t decode_entries = 0;
  if (!checked_mul(first_prefill, a.next_n, &decode_entries) || decode_entries > max_i32_entries)
    fail_value(op, "next_n", std::to_string(a.next_n),
               "decode_seq_lens of " + std::to_string(first_prefill) +
                   " decode requests x next_n entries exceeds the returned-vector limit",
               "num_decodes x next_n <= " + std::to_string(max_i32_entries) + ", 256 MiB of I32");
  int64_t total = 0;
  for (int64_t r = 0; r < a.R; ++r) {
    const int64_t c = seq(r) / 4;
    if (c > INT32_MAX)
      fail<IndexError>(op, "seq_lens", {r}, std::to_string(seq(r)),
                       "compressed length overflows int32", "seq_len / 4 <= 2147483647");
    if (r < first_prefill) continue;
    total += c;
    if (total > max_i32_entries)
      fail<IndexError>(op, "seq_lens", {r}, std::to_string(seq(r)),
                       "prefill chunk's cumulative compressed length exceeds the returned-vector "
                       "limit of token_to_seq",
                       "sum of seq_len / 4 over prefill requests <= " +
                           std::to_string(max_i32_entries) + ", 256 MiB of I32");
  }
  check_compressed_slot_refs(op, a.query_start_loc, a.seq_lens, a.block_table, 4, a.block_size,
                             TensorView(), a.R);
}

}  // namespace detail

IndexerMetadata indexer_metadata(const TensorView& query_start_loc, const TensorView& seq_lens,
                                 const TensorView& block_table, int64_t block_size, int64_t next_n,
                                 const MutableTensorView& slot_mapping, const Options& options) {
  IndexerMetadata result;
  detail::IndexerMetadataArgs a{query_start_loc, seq_lens,     block_table, block_size,
                                next_n,          slot_mapping, &result};
  detail::run("indexer_metadata", a, options);
  return result;
}

}  // namespace dsv4cpu
