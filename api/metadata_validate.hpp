// The validation of the metadata builders (bad-input.md §1.4 order, the metadata table of §4):
// run before any variant, so every variant throws the same error; fills the derived fields.
//
// Ops reading query_start_loc learn T = query_start_loc[R] from element values, so the extents
// tied to T (token_positions' outputs, token_slot_mapping, num_tokens_padded) are checked right
// after query_start_loc's element checks, before the other element checks.
#pragma once
#include "args/metadata.hpp"

namespace dsv4cpu::detail {

void validate(TokenPositionsArgs& a, const Options& o);
void validate(SlotMappingArgs& a, const Options& o);
void validate(SplitDecodesAndPrefillsArgs& a, const Options& o);
void validate(CompressedSlotMappingArgs& a, const Options& o);
void validate(SwaWindowIndicesArgs& a, const Options& o);
void validate(C128aTopkIndicesArgs& a, const Options& o);  // both widths (a.compact)
void validate(C128aDecodeMetadataArgs& a, const Options& o);
void validate(C4aGlobalTopkIndicesArgs& a, const Options& o);
void validate(IndexerMetadataArgs& a, const Options& o);
void validate(SplitIndexerPrefillChunksArgs& a, const Options& o);
void validate(BuildTileSchedulerArgs& a, const Options& o);

// max_model_len >= 1 (ValueError), also for the width helpers.
void check_max_model_len(const char* op, int64_t max_model_len);

}  // namespace dsv4cpu::detail
