// Optimized compressor kernels ("hwy" variants): Highway, dispatched at run time to the best
// compiled target, OpenMP across tokens and channel chunks. They take the validated argument packs
// of the reference and write the same bytes (compressor.md §10) on every target and for any
// thread count.
#pragma once
#include <cstddef>

#include "args/compressor.hpp"

namespace dsv4cpu::detail::opt {

// numerics.md §8.4 for channels [d0, d1) (multiples of 64) over `valid` >= 1 window rows in
// ascending w: c[d] = pooled value of channel d, from kv[j][d] and score[j][d]. The pooling step of
// compress_norm_rope_store, dispatched to the current Highway target.
void pool_window(const float* const* kv, const float* const* score, size_t valid, size_t d0,
                 size_t d1, float* c);

void save_partial_states(const SavePartialStatesArgs& a, const RunContext& ctx);
void map_local_to_global_slots(const MapLocalToGlobalSlotsArgs& a, const RunContext& ctx);
// Both heads (a.layout). When ctx.check_finite and an intermediate is not finite, the reference
// kernel recomputes the call and throws its NonFiniteError (the intermediates are bit-identical).
void compress_norm_rope_store(const CompressNormRopeStoreArgs& a, const RunContext& ctx);

}  // namespace dsv4cpu::detail::opt
