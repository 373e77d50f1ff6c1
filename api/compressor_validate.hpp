// The validation of the compressor ops (bad-input.md §1.4 order, §4 tables): run before any
// variant, so every variant throws the same error; fills the derived fields of the packs.
#pragma once
#include "args/compressor.hpp"

namespace dsv4cpu::detail {

void validate(SavePartialStatesArgs& a, const Options& o);
void validate(MapLocalToGlobalSlotsArgs& a, const Options& o);
void validate(CompressorWindowSlotsArgs& a, const Options& o);
void validate(CompressNormRopeStoreArgs& a, const Options& o);  // both heads
void validate(MakeCosSinCacheArgs& a, const Options& o);

}  // namespace dsv4cpu::detail
