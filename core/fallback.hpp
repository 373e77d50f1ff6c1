// Hand-overs from an optimized kernel to the reference. A kernel that meets a non-finite
// intermediate lets the reference recompute the call, which throws its error (bad-input.md). Each
// hand-over is counted, so that the tests see one on an input where the reference succeeds: there
// it would hide a bug of the optimized kernel behind the reference's result.
#pragma once
#include <cstdint>

namespace dsv4cpu::detail {

// The kernels that may hand a call over (the two compress ops share one kernel).
enum class Fallback : int {
  compress_norm_rope_store,
  fused_qnorm_rope_kv_insert,
  inverse_gptj_rope_o_proj,
  kSites
};

// Called at each hand-over; thread-safe.
void count_fallback(Fallback site);
// Hand-overs at `site` since the process started.
uint64_t fallback_count(Fallback site);
// Hand-overs at every site since the process started.
uint64_t fallback_count();

}  // namespace dsv4cpu::detail
