// c128a_decode_metadata (metadata.md §7.2): the validation (bad-input.md §1.4 order, §4 tables),
// run before any variant so that every variant throws the same error, and the public entry point:
// pack the arguments, detail::run (api/registry.hpp). The width bound c128a_decode_max_width.
#include <string>
#include <utility>

#include "api/metadata_checks.hpp"
#include "api/registry.hpp"
#include "args/metadata.hpp"
#include "core/check.hpp"
#include "core/check_index.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu {
namespace detail {

void validate(C128aDecodeMetadataArgs& a, const Options&) {
  constexpr const char* op = "c128a_decode_metadata";
  check_max_model_len(op, a.max_model_len);
  check_block_size(op, "block_size", a.block_size);
  if (a.num_decode_tokens < 0)
    fail_value(op, "num_decode_tokens", std::to_string(a.num_decode_tokens), "negative count",
               ">= 0");
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  if (a.num_decode_tokens > a.T)
    fail_value(op, "num_decode_tokens", std::to_string(a.num_decode_tokens), "more than the tokens",
               "num_decode_tokens <= T = " + std::to_string(a.T));
  const int64_t nd = a.num_decode_tokens;
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  const int64_t wmax = c128a_decode_max_width(a.max_model_len);
  const std::string width_rule = "I64 [" + std::to_string(nd) +
                                 ", W], W a multiple of 128 and <= " + std::to_string(wmax) +
                                 ", contiguous";
  check_array(op, "decode_global", a.decode_global, {DType::I64}, {nd, kAny}, Layout::contiguous);
  a.W = a.decode_global.size(1);
  if (a.W % 128 != 0 || a.W > wmax) fail_shape(op, "decode_global", a.decode_global, width_rule);
  check_array(op, "decode_lens", a.decode_lens, {DType::I32}, {nd}, Layout::contiguous);
  check_array(op, "prefill_local", a.prefill_local, {DType::I32}, {a.T - nd, a.W},
              Layout::contiguous);
  const std::pair<const char*, const TensorView*> outputs[] = {{"decode_global", &a.decode_global},
                                                               {"decode_lens", &a.decode_lens},
                                                               {"prefill_local", &a.prefill_local}};
  for (const auto& [out_name, out] : outputs)
    for (const auto& [name, in] :
         {std::pair{"positions", &a.positions}, std::pair{"token_to_req", &a.token_to_req},
          std::pair{"block_table", &a.block_table},
          std::pair{"token_slot_mapping", &a.token_slot_mapping}})
      check_no_overlap(op, out_name, *out, name, *in);
  check_outputs_disjoint(op, "decode_global", a.decode_global, "decode_lens", a.decode_lens);
  check_outputs_disjoint(op, "decode_global", a.decode_global, "prefill_local", a.prefill_local);
  check_outputs_disjoint(op, "decode_lens", a.decode_lens, "prefill_local", a.prefill_local);
  check_c128a_elements(op, a.positions, a.token_to_req, a.block_table, a.block_size,
                       a.max_model_len, a.T, a.W, nd);
  if (a.token_slot_mapping.present()) check_slots(op, "token_slot_mapping", a.token_slot_mapping);
}

}  // namespace detail

int64_t c128a_decode_max_width(int64_t max_model_len) {
  detail::check_max_model_len("c128a_decode_max_width", max_model_len);
  return detail::ceil_div(detail::ceil_div(max_model_len, 128), 128) * 128;
}

void c128a_decode_metadata(const TensorView& positions, const TensorView& token_to_req,
                           const TensorView& block_table, int64_t max_model_len, int64_t block_size,
                           int64_t num_decode_tokens, const TensorView& token_slot_mapping,
                           const MutableTensorView& decode_global,
                           const MutableTensorView& decode_lens,
                           const MutableTensorView& prefill_local, const Options& options) {
  detail::C128aDecodeMetadataArgs a{positions,          token_to_req,  block_table,
                                    max_model_len,      block_size,    num_decode_tokens,
                                    token_slot_mapping, decode_global, decode_lens,
                                    prefill_local};
  detail::run("c128a_decode_metadata", a, options);
}

}  // namespace dsv4cpu
