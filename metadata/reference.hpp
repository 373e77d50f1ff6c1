// Reference metadata builders (the oracle): the spec's per-token formulas. Validated arguments.
#pragma once
#include "args/metadata.hpp"

namespace dsv4cpu::detail::ref {

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

}  // namespace dsv4cpu::detail::ref
