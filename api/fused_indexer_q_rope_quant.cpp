// fused_indexer_q_rope_quant (indexer.md §2): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry points:
// pack the arguments, detail::run (api/registry.hpp). The second takes the model's scales.
#include <cmath>
#include <string>
#include <utility>

#include "api/registry.hpp"
#include "args/indexer.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(FusedIndexerQRopeQuantArgs& a, const Options& o) {
  constexpr const char* op = "fused_indexer_q_rope_quant";
  // (a) scalars
  for (const auto& [name, scale] :
       {std::pair{"softmax_scale", a.softmax_scale}, {"head_scale", a.head_scale}})
    if (!std::isfinite(scale) || !(scale > 0.0f))
      fail_value(op, name, format_float(scale), "not a finite positive scale",
                 "a finite value > 0");
  // (b) arrays
  check_array(op, "q", a.q, {DType::F32}, {kAny, kAny, kIndexerHeadDim}, Layout::contiguous);
  a.T = a.q.size(0);
  a.H = a.q.size(1);
  check_array(op, "weights", a.weights, {DType::F32}, {a.T, a.H}, Layout::contiguous);
  check_index_array(op, "positions", a.positions, {a.T});
  check_array(op, "cos_sin_cache", a.cos_sin_cache, {DType::F32}, {kAny, 64}, Layout::contiguous);
  check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {a.T, a.H, kIndexerHeadDim},
              Layout::contiguous);
  check_array(op, "weights_out", a.weights_out, {DType::F32}, {a.T, a.H}, Layout::contiguous);
  // (c) overlap
  for (const auto& [name, out] : {std::pair{"q_fp8", &a.q_fp8}, {"weights_out", &a.weights_out}})
    for (const auto& [in_name, in] : {std::pair{"q", &a.q},
                                      {"weights", &a.weights},
                                      {"positions", &a.positions},
                                      {"cos_sin_cache", &a.cos_sin_cache}})
      check_no_overlap(op, name, *out, in_name, *in);
  check_outputs_disjoint(op, "q_fp8", a.q_fp8, "weights_out", a.weights_out);
  // (d) positions index the table
  const int64_t R = a.cos_sin_cache.size(0);
  const Limit rows{R, "position beyond the cos/sin table", [](int64_t r) {
                     return "position < " + std::to_string(r) + " = rows of cos_sin_cache";
                   }};
  check_positions(op, a.positions, &rows);
  // (e) finiteness of q, weights and the table rows used (row-major over the table)
  if (!o.check_finite) return;
  check_finite(op, "q", a.q, o.num_threads);
  check_finite(op, "weights", a.weights, o.num_threads);
  check_finite_rows(op, "cos_sin_cache", a.cos_sin_cache, a.positions);
}

}  // namespace detail

void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                const TensorView& positions, const TensorView& cos_sin_cache,
                                float softmax_scale, float head_scale,
                                const MutableTensorView& q_fp8,
                                const MutableTensorView& weights_out, const Options& options) {
  detail::FusedIndexerQRopeQuantArgs a{q,          weights, positions,  cos_sin_cache,
                                       softmax_scale, head_scale, q_fp8, weights_out};
  detail::run("fused_indexer_q_rope_quant", a, options);
}

void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                const TensorView& positions, const TensorView& cos_sin_cache,
                                const MutableTensorView& q_fp8,
                                const MutableTensorView& weights_out, const Options& options) {
  fused_indexer_q_rope_quant(q, weights, positions, cos_sin_cache, kIndexerSoftmaxScale,
                             kIndexerHeadScale, q_fp8, weights_out, options);
}

}  // namespace dsv4cpu
