// The kernel-facing argument packs of the attention ops (attention.md; validated by api/ before
// any variant runs, read by every variant) and the kernels of every variant (reference/,
// optimized/). The fp8_ds_mla entry and its dequantisation are in args/fp8_ds_mla.hpp.
#pragma once
#include <cstdint>

#include "core/registry.hpp"
#include "dsv4cpu/attention.hpp"

namespace dsv4cpu::detail {

struct SparseMlaAttentionArgs {
  TensorView q, window_cache;
  int64_t window_block_size;
  TensorView window_slots, compressed_cache;
  int64_t compressed_block_size;
  TensorView compressed_slots, attn_sink;
  float scale;
  NopeDecode nope_decode;
  MutableTensorView out, lse;  // lse may be absent (not requested)
  // Derived by validation: q [T, H, 512], window_slots [T, Nw], compressed_slots [T, Nc].
  int64_t T = 0, H = 0, Nw = 0, Nc = 0;
};

// attention.md §2.5: the softmax runs over blocks of this many columns per set.
inline constexpr int64_t kAttentionBlock = 128;

struct FusedQnormRopeKvInsertArgs {
  TensorView q, kv, positions, slot_mapping;
  MutableTensorView swa_cache;
  TensorView cos_sin_cache;
  int64_t q_head_padded;
  double eps;
  int64_t cache_block_size;
  ScaleClamp scale_clamp;
  Fp8Subnormals fp8_subnormals;
  MutableTensorView q_out;
  // Derived by validation: q [T, Hq, 512], slot_mapping [T_ins] (kv [T_kv, 512] with
  // T_ins <= T_kv <= T: rows from T_ins on are padding, never read), eps_f = RN(eps).
  int64_t T = 0, Hq = 0, T_ins = 0;
  float eps_f = 0.0f;
};

struct InverseGptjRopeOProjArgs {
  TensorView o, positions, cos_sin_cache;
  int64_t rope_dim;
  MutableTensorView out;
  // Derived by validation: o [T, H, D]; with check_finite, the largest |o| (max_magnitude16),
  // unless check_in_write: with check_finite and Options::fresh_outputs, validation leaves step (e)
  // to the kernel, which writes out, watching every value it writes, and only when one is not
  // finite runs check_inverse_rope_inputs and hands the call to the reference.
  int64_t T = 0, H = 0, D = 0;
  uint16_t o_max_magnitude = 0;
  bool check_in_write = false;
};

// Step (e) of inverse_gptj_rope_o_proj (bad-input.md §1.4): o, then the table rows the tokens use
// (when H > 0); throws the NonFiniteError of the first non-finite value. Returns the largest |o|
// (its bits, max_magnitude16). api/inverse_gptj_rope_o_proj.cpp.
uint16_t check_inverse_rope_inputs(const InverseGptjRopeOProjArgs& a, int num_threads);

// ---- the kernels, registered in api/registry.cpp: void(const Args&, const RunContext&) on
// validated arguments ----

// The scalar fp32 reference kernels (the oracle; reference/attention.cpp).
namespace ref {

// attention.md §2.5-§2.6 in the exact `ref` order.
void sparse_mla_attention(const SparseMlaAttentionArgs& a, const RunContext& ctx);
// attention.md §3: computes q_out and every written entry into scratch, checks them when
// ctx.check_finite (bad-input.md §1.4 (f), first offending token), then writes.
void fused_qnorm_rope_kv_insert(const FusedQnormRopeKvInsertArgs& a, const RunContext& ctx);
// attention.md §4.2: computes out into scratch, checks it when ctx.check_finite (bad-input.md
// §1.4 (f), first offending token, head, channel), then writes.
void inverse_gptj_rope_o_proj(const InverseGptjRopeOProjArgs& a, const RunContext& ctx);

}  // namespace ref

// The optimized variants. They obey the contracts of attention.md §2.8 and §3.4 on every target
// and for any thread count.
namespace opt {

// sparse_mla_attention: "hwy" (fp32 products on every Highway target), and one variant per bf16
// kernel (bf16 products where the operands are exact) from the family's table
// (DSV4CPU_ATTENTION_KERNELS, optimized/attention_kernel.hpp); optimized/attention_hwy.cpp, within
// numerics.md §11.8 of the reference and independent of the thread count.
void sparse_mla_attention_hwy(const SparseMlaAttentionArgs& a, const RunContext& ctx);

// fused_qnorm_rope_kv_insert "hwy" (optimized/attention_insert_hwy.cpp): bit-exact with the
// reference in q_out and every cache byte. When ctx.check_finite and a computed value is not
// finite, the reference kernel reruns the call and throws its NonFiniteError (the intermediates
// are bit-identical).
void fused_qnorm_rope_kv_insert(const FusedQnormRopeKvInsertArgs& a, const RunContext& ctx);

// inverse_gptj_rope_o_proj "hwy" (optimized/attention_inverse_rope_hwy.cpp): bit-exact with the
// reference. When ctx.check_finite, a first pass checks every head without writing (a bound on
// the rotated values, else the rotation itself); a non-finite value hands the call to the
// reference, which throws its NonFiniteError.
void inverse_gptj_rope_o_proj(const InverseGptjRopeOProjArgs& a, const RunContext& ctx);

}  // namespace opt

}  // namespace dsv4cpu::detail
