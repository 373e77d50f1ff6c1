// The scalar fp32 reference kernels (the oracle). Each takes validated arguments.
#pragma once
#include "args/compressor.hpp"

namespace dsv4cpu::detail::ref {

void save_partial_states(const SavePartialStatesArgs& a, const RunContext& ctx);
void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext& ctx);
void compressor_window_slots(const CompressorWindowSlotsArgs& a, const RunContext& ctx);
// Both heads (a.layout): computes every emitting token's entry into scratch, checks it when
// ctx.check_finite (bad-input.md §1.4 (f)), then writes.
void compress_norm_rope_store(const CompressNormRopeStoreArgs& a, const RunContext& ctx);
void make_cos_sin_cache(const MakeCosSinCacheArgs& a, const RunContext& ctx);

}  // namespace dsv4cpu::detail::ref
