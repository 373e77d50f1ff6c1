// The validation of the indexer ops (bad-input.md §1.4 order, §4 tables): run before any variant,
// so every variant throws the same error; fills the derived fields of the packs.
#pragma once
#include "args/indexer.hpp"

namespace dsv4cpu::detail {

void validate(FusedIndexerQRopeQuantArgs& a, const Options& o);
void validate(Fp8PagedMqaLogitsArgs& a, const Options& o);
void validate(TopkTransformArgs& a, const Options& o);  // topk_transform_512 and _1024 (by a.K)
void validate(ShortContextTopkArgs& a, const Options& o);
void validate(IndexerTopkArgs& a, const Options& o);

}  // namespace dsv4cpu::detail
