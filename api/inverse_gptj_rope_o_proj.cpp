// inverse_gptj_rope_o_proj (attention.md §4): the validation (bad-input.md §1.4 order, attention.md
// §4.3), run before any variant so that every variant throws the same error, and the public entry
// point (pack the arguments, detail::run of api/registry.hpp).
#include <string>

#include "api/registry.hpp"
#include "args/attention.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(InverseGptjRopeOProjArgs& a, const Options& o) {
  constexpr const char* op = "inverse_gptj_rope_o_proj";
  // (a) scalars; rope_dim <= D depends on o's shape: step (b).
  if (a.rope_dim < 2 || a.rope_dim % 2 != 0)
    fail_value(op, "rope_dim", std::to_string(a.rope_dim),
               a.rope_dim < 2 ? "below 2" : "odd", "an even rope_dim >= 2");
  // (b) arrays in signature order.
  check_array(op, "o", a.o, {DType::BF16, DType::F16}, {kAny, kAny, kAny}, Layout::contiguous);
  a.T = a.o.size(0);
  a.H = a.o.size(1);
  a.D = a.o.size(2);
  if (a.rope_dim > a.D)
    fail_value(op, "rope_dim", std::to_string(a.rope_dim), "more than the head's dims",
               "rope_dim <= D = " + std::to_string(a.D));
  check_index_array(op, "positions", a.positions, {a.T});
  check_array(op, "cos_sin_cache", a.cos_sin_cache, {DType::F32}, {kAny, a.rope_dim},
              Layout::contiguous);
  check_array(op, "out", a.out, {DType::F32}, {a.T, a.H, a.D}, Layout::contiguous);
  // (c) out against every input.
  check_no_overlap(op, "out", a.out, "o", a.o);
  check_no_overlap(op, "out", a.out, "positions", a.positions);
  check_no_overlap(op, "out", a.out, "cos_sin_cache", a.cos_sin_cache);
  // (d) positions index the table.
  const int64_t R = a.cos_sin_cache.size(0);
  const Limit rows{R, "position beyond the cos/sin table", [](int64_t r) {
                     return "position < " + std::to_string(r) + " = rows of cos_sin_cache";
                   }};
  check_positions(op, a.positions, &rows);
  // (e) o, then the table rows used, unless the kernel checks them while writing out.
  if (!o.check_finite || a.out.empty()) return;
  a.check_in_write = o.fresh_outputs;
  if (!a.check_in_write) a.o_max_magnitude = check_inverse_rope_inputs(a, o.num_threads);
  // (f) is the kernel's: it checks every rotated value before it writes (or, with
  // check_in_write, while it writes).
}

uint16_t check_inverse_rope_inputs(const InverseGptjRopeOProjArgs& a, int num_threads) {
  constexpr const char* op = "inverse_gptj_rope_o_proj";
  const uint16_t* x = a.o.ptr<const uint16_t>();
  const int64_t n = a.o.numel();
  const bool f16 = a.o.dtype() == DType::F16;
  // One pass finds both whether o is finite and its largest |o|, which spares the kernel its
  // check of rotated values for most calls.
  const uint16_t max_magnitude = max_magnitude16(x, n, num_threads);
  if (max_magnitude >= (f16 ? 0x7C00 : 0x7F80)) {
    const int64_t i = f16 ? first_non_finite_f16(x, n) : first_non_finite_bf16(x, n);
    fail_non_finite(op, "o", unflatten(a.o, i), f16 ? f16_to_f32(x[i]) : bf16_to_f32(x[i]));
  }
  check_finite_rows(op, "cos_sin_cache", a.cos_sin_cache, a.positions);
  return max_magnitude;
}

}  // namespace detail

void inverse_gptj_rope_o_proj(const TensorView& o, const TensorView& positions,
                              const TensorView& cos_sin_cache, int64_t rope_dim,
                              const MutableTensorView& out, const Options& options) {
  detail::InverseGptjRopeOProjArgs a{o, positions, cos_sin_cache, rope_dim, out};
  detail::run("inverse_gptj_rope_o_proj", a, options);
}

}  // namespace dsv4cpu
