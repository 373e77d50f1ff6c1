// Optimized metadata builders: per-request loops, page walking, row fills, OpenMP for large
// steps. Integer-exact against the reference for any thread count. Validated arguments.
#pragma once
#include "args/metadata.hpp"

namespace dsv4cpu::detail::opt {

void token_positions(const TokenPositionsArgs& a, const RunContext& ctx);
void slot_mapping(const SlotMappingArgs& a, const RunContext& ctx);
void compressed_slot_mapping(const CompressedSlotMappingArgs& a, const RunContext& ctx);
void swa_window_indices(const SwaWindowIndicesArgs& a, const RunContext& ctx);
void c128a_topk_indices(const C128aTopkIndicesArgs& a, const RunContext& ctx);
void c128a_decode_metadata(const C128aDecodeMetadataArgs& a, const RunContext& ctx);
void c4a_global_topk_indices(const C4aGlobalTopkIndicesArgs& a, const RunContext& ctx);
void indexer_metadata(const IndexerMetadataArgs& a, const RunContext& ctx);

}  // namespace dsv4cpu::detail::opt
