// bad-input.md §1.4 (f), the one rule of every optimized kernel for computed values: a kernel that
// finds some computed value not finite (it looks only when RunContext::check_finite, and before it
// writes any output byte, or while it writes outputs the caller drops on error:
// Options::fresh_outputs) hands the whole call to the reference kernel through hand_over. The
// reference computes the same values, finds the first offender in the spec's order and throws its
// NonFiniteError, so every message of (f) has one author, the reference (and no kernel has to
// find the first offender on its fast path). Each hand-over is counted, so that the tests see one
// on an input where the reference succeeds: there it would hide a bug of the optimized kernel
// behind the reference's result.
//
// The one computed-value check outside the kernels is save_partial_states' RN(score + ape): its
// validation checks it in the pass that checks the inputs (docs/decisions.md, "Validation speed").
#pragma once
#include <cstdint>

#include "core/registry.hpp"

namespace dsv4cpu::detail {

// The drivers that may hand a call over (the two compress ops share one driver).
enum class Fallback : int {
  compress_norm_rope_store,
  fused_indexer_q_rope_quant,
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

// An optimized kernel at `site` found a computed value not finite: counts the hand-over and runs
// `reference` on the call, which throws the reference's NonFiniteError (or, were the kernel wrong
// about the value, writes the reference's result).
template <class Args>
void hand_over(Fallback site, Kernel<Args> reference, const Args& a, const RunContext& ctx) {
  count_fallback(site);
  reference(a, ctx);
}

}  // namespace dsv4cpu::detail
