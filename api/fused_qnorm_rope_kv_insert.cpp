// fused_qnorm_rope_kv_insert (attention.md §3): the validation (bad-input.md §1.4 order, §4
// table), run before any variant so that every variant throws the same error, the public entry
// point (pack the arguments, detail::run of api/registry.hpp) and parse_fp8_subnormals.
#include <cfloat>
#include <cmath>
#include <string>
#include <utility>

#include "api/attention_checks.hpp"
#include "api/registry.hpp"
#include "args/attention.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(FusedQnormRopeKvInsertArgs& a, const Options& o) {
  constexpr const char* op = "fused_qnorm_rope_kv_insert";
  // (a) scalars in signature order; q_head_padded >= Hq depends on q's shape: step (b).
  if (!std::isfinite(a.eps) || a.eps < 0 || a.eps > FLT_MAX)
    fail_value(op, "eps", format_float(a.eps), "outside its domain", "finite, 0 <= eps <= FLT_MAX");
  a.eps_f = static_cast<float>(a.eps);
  check_block_size(op, "cache_block_size", a.cache_block_size);
  if (a.scale_clamp != ScaleClamp::cpu && a.scale_clamp != ScaleClamp::gpu)
    fail_value(op, "scale_clamp", std::to_string(static_cast<int>(a.scale_clamp)), "unknown mode",
               "cpu or gpu");
  if (a.fp8_subnormals != Fp8Subnormals::exact && a.fp8_subnormals != Fp8Subnormals::flush)
    fail_value(op, "fp8_subnormals", std::to_string(static_cast<int>(a.fp8_subnormals)),
               "unknown mode", "exact or flush");
  // (b) arrays in signature order.
  check_array(op, "q", a.q, {DType::BF16}, {kAny, kAny, kMlaDim}, Layout::contiguous);
  a.T = a.q.size(0);
  a.Hq = a.q.size(1);
  if (a.q_head_padded < a.Hq)
    fail_value(op, "q_head_padded", std::to_string(a.q_head_padded), "fewer than the query heads",
               "q_head_padded >= Hq = " + std::to_string(a.Hq));
  check_array(op, "kv", a.kv, {DType::BF16}, {kAny, kMlaDim}, Layout::contiguous);
  const int64_t T_kv = a.kv.size(0);
  if (T_kv > a.T)
    fail_shape(op, "kv", a.kv,
               "BF16 [T_kv, 512] with T_kv <= T = " + std::to_string(a.T) + ", contiguous");
  check_index_array(op, "positions", a.positions, {a.T});
  // slot_mapping's length T_ins is the number of tokens inserted; kv rows from T_ins on are
  // padding (attention.md §3.1).
  check_index_array(op, "slot_mapping", a.slot_mapping, {kAny});
  a.T_ins = a.slot_mapping.size(0);
  if (a.T_ins > T_kv)
    fail_shape(op, "slot_mapping", a.slot_mapping,
               "I32 or I64 [T_ins] with T_ins <= T_kv = " + std::to_string(T_kv) +
                   " = rows of kv, contiguous");
  check_mla_cache(op, "swa_cache", a.swa_cache, a.cache_block_size);
  check_array(op, "cos_sin_cache", a.cos_sin_cache, {DType::F32}, {kAny, 64}, Layout::contiguous);
  const int64_t R = a.cos_sin_cache.size(0);
  check_array(op, "q_out", a.q_out, {DType::BF16}, {a.T, a.q_head_padded, kMlaDim},
              Layout::contiguous);
  // (c) the outputs (swa_cache in place, q_out) against every input, and against each other.
  for (const auto& [name, out] : {std::pair{"swa_cache", &a.swa_cache}, {"q_out", &a.q_out}})
    for (const auto& [in_name, in] : {std::pair{"q", &a.q},
                                      {"kv", &a.kv},
                                      {"positions", &a.positions},
                                      {"slot_mapping", &a.slot_mapping},
                                      {"cos_sin_cache", &a.cos_sin_cache}})
      check_no_overlap(op, name, *out, in_name, *in);
  check_outputs_disjoint(op, "swa_cache", a.swa_cache, "q_out", a.q_out);
  // (d) positions index the table; slots in range and the valid ones distinct.
  const Limit rows{R, "position beyond the cos/sin table", [](int64_t r) {
                     return "position < " + std::to_string(r) + " = rows of cos_sin_cache";
                   }};
  check_positions(op, a.positions, &rows);
  check_distinct_slots(op, "slot_mapping", a.slot_mapping,
                       {a.swa_cache.size(0), a.cache_block_size, "the SWA cache", "entries"});
  if (!o.check_finite) return;
  // (e) q; the kv rows with a valid slot; the cos/sin rows used (every token's row when Hq > 0,
  // else the rows of the tokens with a valid slot), in token order.
  const uint16_t* q = a.q.ptr<const uint16_t>();
  const int64_t nq = a.T * a.Hq * kMlaDim;
  if (const int64_t i = first_non_finite_bf16(q, nq); i < nq)
    fail_non_finite(op, "q", {i / (a.Hq * kMlaDim), i / kMlaDim % a.Hq, i % kMlaDim},
                    bf16_to_f32(q[i]));
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  const uint16_t* kv = a.kv.ptr<const uint16_t>();
  for (int64_t t = 0; t < a.T_ins; ++t) {
    if (slot(t) < 0) continue;
    if (const int64_t d = first_non_finite_bf16(kv + t * kMlaDim, kMlaDim); d < kMlaDim)
      fail_non_finite(op, "kv", {t, d}, bf16_to_f32(kv[t * kMlaDim + d]));
  }
  const float* table = a.cos_sin_cache.ptr<const float>();
  for (int64_t t = 0; t < a.T; ++t) {
    if (a.Hq == 0 && (t >= a.T_ins || slot(t) < 0)) continue;
    check_finite_row(op, "cos_sin_cache", pos(t), table + pos(t) * 64, 64);
  }
  // (f) is the kernel's: it computes q_out and the entries into scratch and checks them first.
}

}  // namespace detail

void fused_qnorm_rope_kv_insert(const TensorView& q, const TensorView& kv,
                                const TensorView& positions, const TensorView& slot_mapping,
                                const MutableTensorView& swa_cache, const TensorView& cos_sin_cache,
                                int64_t q_head_padded, double eps, int64_t cache_block_size,
                                ScaleClamp scale_clamp, Fp8Subnormals fp8_subnormals,
                                const MutableTensorView& q_out, const Options& options) {
  detail::FusedQnormRopeKvInsertArgs a{q,         kv,           positions,
                                       slot_mapping, swa_cache, cos_sin_cache,
                                       q_head_padded, eps,      cache_block_size,
                                       scale_clamp, fp8_subnormals, q_out};
  detail::run("fused_qnorm_rope_kv_insert", a, options);
}

Fp8Subnormals parse_fp8_subnormals(const char* op, std::string_view text) {
  if (text == "exact") return Fp8Subnormals::exact;
  if (text == "flush") return Fp8Subnormals::flush;
  detail::fail_value(op, "fp8_subnormals", std::string(text), "unknown mode", "exact or flush");
}

}  // namespace dsv4cpu
