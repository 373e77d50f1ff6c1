// The kernel-facing argument packs of the metadata builders (validated by api/ before any variant
// runs, read by every variant) and the kernels of both variants (metadata/).
// Fields below "Derived by validation" are filled by the op's validate before any kernel runs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/registry.hpp"
#include "dsv4cpu/metadata.hpp"

namespace dsv4cpu::detail {

struct TokenPositionsArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView query_start_loc, seq_lens;
  MutableTensorView positions, token_to_req;
  // Derived by validation.
  int64_t R = 0, T = 0;
};

struct SlotMappingArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView positions, token_to_req, block_table;
  int64_t block_size;
  MutableTensorView slot_mapping;
  // Derived by validation: T tokens, `padded` = num_tokens_padded.
  int64_t T = 0, padded = 0;
};

struct SplitDecodesAndPrefillsArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView query_start_loc;
  int64_t threshold;
  DecodePrefillSplit* result;
  // Derived by validation.
  int64_t R = 0;
};

struct CompressedSlotMappingArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView query_start_loc, seq_lens, block_table;
  int64_t compress_ratio, block_size;
  TensorView token_slot_mapping;
  MutableTensorView slot_mapping;
  // Derived by validation.
  int64_t R = 0, T = 0, padded = 0;
};

struct SwaWindowIndicesArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView positions, token_to_req, block_table;
  int64_t window, block_size;
  MutableTensorView indices, lens;
  // Derived by validation.
  int64_t T = 0;
};

// §7.1 in both widths: ceil(max_model_len / 128) (c128a_topk_indices) or the compact width.
struct C128aTopkIndicesArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView positions, token_to_req, block_table;
  int64_t block_size;
  MutableTensorView indices;
  int64_t max_model_len;  // c128a_topk_indices: the width is ceil(max_model_len / 128)
  bool compact;           // c128a_topk_indices_compact: any width, no max_model_len
  // Derived by validation: T tokens, W columns (every token's n_t <= W).
  int64_t T = 0, W = 0;
};

struct C128aDecodeMetadataArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView positions, token_to_req, block_table;
  int64_t max_model_len, block_size, num_decode_tokens;
  TensorView token_slot_mapping;
  MutableTensorView decode_global, decode_lens, prefill_local;
  // Derived by validation: T tokens, W = the active width (every token's n_t <= W).
  int64_t T = 0, W = 0;
};

struct C4aGlobalTopkIndicesArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView topk_indices, token_to_req, block_table;
  int64_t block_size;
  TensorView token_slot_mapping;
  MutableTensorView indices, lens;
  // Derived by validation.
  int64_t T = 0, K = 0;
};

struct IndexerMetadataArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView query_start_loc, seq_lens, block_table;
  int64_t block_size, next_n;
  MutableTensorView slot_mapping;
  IndexerMetadata* result;
  // Derived by validation.
  int64_t R = 0, T = 0, padded = 0;
};

struct SplitIndexerPrefillChunksArgs {
  static constexpr bool kIndicesOnly = true;
  TensorView compressed_lens, query_lens;
  int64_t workspace, max_logits_bytes, request_offset;
  std::vector<PrefillChunk>* result;
  // Derived by validation.
  int64_t count = 0;
};

struct BuildTileSchedulerArgs {
  static constexpr bool kIndicesOnly = true;
  std::string_view layer_kind;
  std::string* result;
};

// ---- the kernels, registered in api/registry.cpp: void(const Args&, const RunContext&) on
// validated arguments ----

// The reference builders (the oracle; metadata/reference.cpp): the spec's per-token formulas.
namespace ref {

void token_positions(const TokenPositionsArgs& a, const RunContext& ctx);
void slot_mapping(const SlotMappingArgs& a, const RunContext& ctx);
void split_decodes_and_prefills(const SplitDecodesAndPrefillsArgs& a, const RunContext& ctx);
void compressed_slot_mapping(const CompressedSlotMappingArgs& a, const RunContext& ctx);
void swa_window_indices(const SwaWindowIndicesArgs& a, const RunContext& ctx);
void c128a_topk_indices(const C128aTopkIndicesArgs& a, const RunContext& ctx);
void c128a_decode_metadata(const C128aDecodeMetadataArgs& a, const RunContext& ctx);
void c4a_global_topk_indices(const C4aGlobalTopkIndicesArgs& a, const RunContext& ctx);
void indexer_metadata(const IndexerMetadataArgs& a, const RunContext& ctx);
void split_indexer_prefill_chunks(const SplitIndexerPrefillChunksArgs& a, const RunContext& ctx);
void build_tile_scheduler(const BuildTileSchedulerArgs& a, const RunContext& ctx);

}  // namespace ref

// The optimized builders ("opt", metadata/optimized.cpp): per-request loops, page walking, row
// fills, OpenMP for large steps. Integer-exact against the reference for any thread count.
namespace opt {

void token_positions(const TokenPositionsArgs& a, const RunContext& ctx);
void slot_mapping(const SlotMappingArgs& a, const RunContext& ctx);
void compressed_slot_mapping(const CompressedSlotMappingArgs& a, const RunContext& ctx);
void swa_window_indices(const SwaWindowIndicesArgs& a, const RunContext& ctx);
void c128a_topk_indices(const C128aTopkIndicesArgs& a, const RunContext& ctx);
void c128a_decode_metadata(const C128aDecodeMetadataArgs& a, const RunContext& ctx);
void c4a_global_topk_indices(const C4aGlobalTopkIndicesArgs& a, const RunContext& ctx);
void indexer_metadata(const IndexerMetadataArgs& a, const RunContext& ctx);

}  // namespace opt

}  // namespace dsv4cpu::detail
