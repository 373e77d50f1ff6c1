// sparse_mla_attention (attention.md §2): the validation (bad-input.md §1.4 order, §4 table), run
// before any variant so that every variant throws the same error, the public entry point (pack
// the arguments, detail::run of api/registry.hpp) and parse_nope_decode.
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

void validate(SparseMlaAttentionArgs& a, const Options& o) {
  constexpr const char* op = "sparse_mla_attention";
  // (a) scalars in signature order.
  check_block_size(op, "window_block_size", a.window_block_size);
  check_block_size(op, "compressed_block_size", a.compressed_block_size);
  if (!std::isfinite(a.scale) || !(a.scale > 0.0f))
    fail_value(op, "scale", format_float(a.scale), "not a finite positive scale",
               "a finite value > 0");
  if (a.nope_decode != NopeDecode::exact && a.nope_decode != NopeDecode::vllm)
    fail_value(op, "nope_decode", std::to_string(static_cast<int>(a.nope_decode)), "unknown mode",
               "exact or vllm");
  // (b) arrays in signature order. q: stride(2) = 1, stride(1) = 512, stride(0) >= H·512.
  check_array(op, "q", a.q, {DType::BF16}, {kAny, kAny, kMlaDim}, Layout::rows_contiguous);
  a.T = a.q.size(0);
  a.H = a.q.size(1);
  check_mla_cache(op, "window_cache", a.window_cache, a.window_block_size);
  check_index_array(op, "window_slots", a.window_slots, {a.T, kAny});
  a.Nw = a.window_slots.size(1);
  check_mla_cache(op, "compressed_cache", a.compressed_cache, a.compressed_block_size);
  check_index_array(op, "compressed_slots", a.compressed_slots, {a.T, kAny});
  a.Nc = a.compressed_slots.size(1);
  if (a.attn_sink.present())
    check_array(op, "attn_sink", a.attn_sink, {DType::F32}, {a.H}, Layout::contiguous);
  check_array(op, "out", a.out, {DType::BF16}, {a.T, a.H, kMlaDim}, Layout::contiguous);
  if (a.lse.present())
    check_array(op, "lse", a.lse, {DType::F32}, {a.T, a.H}, Layout::contiguous);
  // (c) outputs against every input, and against each other.
  for (const auto& [name, out] : {std::pair{"out", &a.out}, {"lse", &a.lse}})
    for (const auto& [in_name, in] : {std::pair{"q", &a.q},
                                      {"window_cache", &a.window_cache},
                                      {"window_slots", &a.window_slots},
                                      {"compressed_cache", &a.compressed_cache},
                                      {"compressed_slots", &a.compressed_slots},
                                      {"attn_sink", &a.attn_sink}})
      check_no_overlap(op, name, *out, in_name, *in);
  check_outputs_disjoint(op, "out", a.out, "lse", a.lse);
  // (d) slots in signature order (vLLM skips out-of-range slots; this library rejects them).
  check_slots(op, "window_slots", a.window_slots,
              {a.window_cache.size(0), a.window_block_size, "the window cache", "entries"},
              o.num_threads);
  check_slots(op, "compressed_slots", a.compressed_slots,
              {a.compressed_cache.size(0), a.compressed_block_size, "the compressed cache",
               "entries"},
              o.num_threads);
  if (!o.check_finite) return;
  // (e) q finite (the H heads of every token); attn_sink finite or -inf.
  const uint16_t* q = a.q.ptr<const uint16_t>();
  const int64_t n = a.H * kMlaDim;
  for (int64_t t = 0; t < a.T && n > 0; ++t) {  // H = 0: no loop over T (bad-input.md §1.5)
    const uint16_t* row = q + t * a.q.stride(0);
    if (const int64_t i = first_non_finite_bf16(row, n); i < n)
      fail_non_finite(op, "q", {t, i / kMlaDim, i % kMlaDim}, bf16_to_f32(row[i]));
  }
  if (a.attn_sink.present()) {
    const float* sink = a.attn_sink.ptr<const float>();
    for (int64_t h = 0; h < a.H; ++h)
      if (std::isnan(sink[h]) || sink[h] == HUGE_VALF)
        fail<NonFiniteError>(op, "attn_sink", {h}, format_float(sink[h]), "not finite",
                             "a finite value or -inf");
  }
}

}  // namespace detail

void sparse_mla_attention(const TensorView& q, const TensorView& window_cache,
                          int64_t window_block_size, const TensorView& window_slots,
                          const TensorView& compressed_cache, int64_t compressed_block_size,
                          const TensorView& compressed_slots, const TensorView& attn_sink,
                          float scale, NopeDecode nope_decode, const MutableTensorView& out,
                          const MutableTensorView& lse, const Options& options) {
  detail::SparseMlaAttentionArgs a{q,          window_cache, window_block_size, window_slots,
                                   compressed_cache, compressed_block_size, compressed_slots,
                                   attn_sink,  scale,        nope_decode,       out,
                                   lse};
  detail::run("sparse_mla_attention", a, options);
}

NopeDecode parse_nope_decode(const char* op, std::string_view text) {
  if (text == "exact") return NopeDecode::exact;
  if (text == "vllm") return NopeDecode::vllm;
  detail::fail_value(op, "nope_decode", std::string(text), "unknown mode", "exact or vllm");
}

}  // namespace dsv4cpu
