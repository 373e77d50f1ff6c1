// The public entry points of the metadata builders (metadata.md): each packs its arguments and
// runs the op (api/registry.hpp: variant selection, validation in api/metadata_validate.cpp, the
// kernel); and the width helpers of §7.
#include <algorithm>

#include "api/metadata_validate.hpp"
#include "api/registry.hpp"
#include "core/check_index.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu {

void token_positions(const TensorView& query_start_loc, const TensorView& seq_lens,
                     const TensorView& positions, const TensorView& token_to_req,
                     const Options& options) {
  detail::TokenPositionsArgs a{query_start_loc, seq_lens, positions, token_to_req};
  detail::run("token_positions", a, options);
}

void slot_mapping(const TensorView& positions, const TensorView& token_to_req,
                  const TensorView& block_table, int64_t block_size,
                  const TensorView& slot_mapping, const Options& options) {
  detail::SlotMappingArgs a{positions, token_to_req, block_table, block_size, slot_mapping};
  detail::run("slot_mapping", a, options);
}

DecodePrefillSplit split_decodes_and_prefills(const TensorView& query_start_loc,
                                              int64_t threshold, const Options& options) {
  DecodePrefillSplit result;
  detail::SplitDecodesAndPrefillsArgs a{query_start_loc, threshold, &result};
  detail::run("split_decodes_and_prefills", a, options);
  return result;
}

void compressed_slot_mapping(const TensorView& query_start_loc, const TensorView& seq_lens,
                             const TensorView& block_table, int64_t compress_ratio,
                             int64_t block_size, const TensorView& token_slot_mapping,
                             const TensorView& slot_mapping, const Options& options) {
  detail::CompressedSlotMappingArgs a{query_start_loc, seq_lens,           block_table,
                                      compress_ratio,  block_size,         token_slot_mapping,
                                      slot_mapping};
  detail::run("compressed_slot_mapping", a, options);
}

void swa_window_indices(const TensorView& positions, const TensorView& token_to_req,
                        const TensorView& block_table, int64_t window, int64_t block_size,
                        const TensorView& indices, const TensorView& lens,
                        const Options& options) {
  detail::SwaWindowIndicesArgs a{positions,  token_to_req, block_table, window,
                                 block_size, indices,      lens};
  detail::run("swa_window_indices", a, options);
}

int64_t c128a_topk_width(int64_t max_model_len) {
  detail::check_max_model_len("c128a_topk_width", max_model_len);
  return detail::ceil_div(max_model_len, 128);
}

int64_t c128a_decode_max_width(int64_t max_model_len) {
  detail::check_max_model_len("c128a_decode_max_width", max_model_len);
  return detail::ceil_div(detail::ceil_div(max_model_len, 128), 128) * 128;
}

void c128a_topk_indices(const TensorView& positions, const TensorView& token_to_req,
                        const TensorView& block_table, int64_t max_model_len, int64_t block_size,
                        const TensorView& indices, const Options& options) {
  detail::C128aTopkIndicesArgs a{positions, token_to_req,  block_table, block_size,
                                 indices,   max_model_len, false};
  detail::run("c128a_topk_indices", a, options);
}

int64_t c128a_compact_width(const TensorView& positions) {
  constexpr const char* op = "c128a_compact_width";
  detail::check_index_array(op, "positions", positions, {detail::kAny});
  const int64_t T = positions.size(0);
  detail::check_positions(op, positions);
  const detail::IndexReader pos(positions);
  int64_t width = 0;
  for (int64_t t = 0; t < T; ++t) width = std::max(width, detail::completed_entries(pos(t), 128));
  return width;
}

void c128a_topk_indices_compact(const TensorView& positions, const TensorView& token_to_req,
                                const TensorView& block_table, int64_t block_size,
                                const TensorView& indices, const Options& options) {
  detail::C128aTopkIndicesArgs a{positions, token_to_req, block_table, block_size, indices,
                                 0,         true};
  detail::run("c128a_topk_indices_compact", a, options);
}

void c128a_decode_metadata(const TensorView& positions, const TensorView& token_to_req,
                           const TensorView& block_table, int64_t max_model_len,
                           int64_t block_size, int64_t num_decode_tokens,
                           const TensorView& token_slot_mapping, const TensorView& decode_global,
                           const TensorView& decode_lens, const TensorView& prefill_local,
                           const Options& options) {
  detail::C128aDecodeMetadataArgs a{positions,          token_to_req,  block_table,
                                    max_model_len,      block_size,    num_decode_tokens,
                                    token_slot_mapping, decode_global, decode_lens,
                                    prefill_local};
  detail::run("c128a_decode_metadata", a, options);
}

void c4a_global_topk_indices(const TensorView& topk_indices, const TensorView& token_to_req,
                             const TensorView& block_table, int64_t block_size,
                             const TensorView& token_slot_mapping, const TensorView& indices,
                             const TensorView& lens, const Options& options) {
  detail::C4aGlobalTopkIndicesArgs a{topk_indices, token_to_req, block_table, block_size,
                                     token_slot_mapping, indices, lens};
  detail::run("c4a_global_topk_indices", a, options);
}

IndexerMetadata indexer_metadata(const TensorView& query_start_loc, const TensorView& seq_lens,
                                 const TensorView& block_table, int64_t block_size,
                                 int64_t next_n, const TensorView& slot_mapping,
                                 const Options& options) {
  IndexerMetadata result;
  detail::IndexerMetadataArgs a{query_start_loc, seq_lens,     block_table, block_size,
                                next_n,          slot_mapping, &result};
  detail::run("indexer_metadata", a, options);
  return result;
}

std::vector<PrefillChunk> split_indexer_prefill_chunks(const TensorView& compressed_lens,
                                                       const TensorView& query_lens,
                                                       int64_t workspace,
                                                       int64_t max_logits_bytes,
                                                       int64_t request_offset,
                                                       const Options& options) {
  std::vector<PrefillChunk> result;
  detail::SplitIndexerPrefillChunksArgs a{compressed_lens,  query_lens,     workspace,
                                          max_logits_bytes, request_offset, &result};
  detail::run("split_indexer_prefill_chunks", a, options);
  return result;
}

std::string build_tile_scheduler(std::string_view layer_kind, const Options& options) {
  std::string result;
  detail::BuildTileSchedulerArgs a{layer_kind, &result};
  detail::run("build_tile_scheduler", a, options);
  return result;
}

}  // namespace dsv4cpu
