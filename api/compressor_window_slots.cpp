// compressor_window_slots (compressor.md §4.2): the validation (bad-input.md §1.4 order, §4
// tables), run before any variant so that every variant throws the same error, and the public entry
// point: pack the arguments, detail::run (api/registry.hpp).
#include <string>
#include <utility>

#include "api/registry.hpp"
#include "args/compressor.hpp"
#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

void validate(CompressorWindowSlotsArgs& a, const Options&) {
  constexpr const char* op = "compressor_window_slots";
  check_block_size(op, "block_size", a.block_size);
  check_compress_ratio(op, a.compress_ratio);
  a.W = (a.overlap ? 2 : 1) * a.compress_ratio;
  check_index_array(op, "positions", a.positions, {kAny});
  a.N = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.N});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "gather_slots", a.gather_slots, {DType::I64}, {a.N, a.W}, Layout::contiguous);
  for (const auto& [name, in] : {std::pair{"positions", &a.positions},
                                 {"token_to_req", &a.token_to_req},
                                 {"block_table", &a.block_table}})
    check_no_overlap(op, "gather_slots", a.gather_slots, name, *in);
  check_positions(op, a.positions);
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  // Window column w of token t reads local index l = p - W + 1 + w, when l >= 0.
  const IndexReader pos(a.positions), req(a.token_to_req);
  const BlockTableRefs refs(op, a.block_table, a.block_size);
  for (int64_t t = 0; t < a.N; ++t)
    for (int64_t w = 0; w < a.W; ++w) {
      const int64_t l = pos(t) - a.W + 1 + w;
      if (l >= 0)
        refs.check(req(t), refs.column(l), [&] {
          return BlockTableReferrer{
              "positions",
              {t},
              pos(t),
              " (window column " + std::to_string(w) + ", local index " + std::to_string(l) + ")"};
        });
    }
}

}  // namespace detail

void compressor_window_slots(const TensorView& positions, const TensorView& token_to_req,
                             const TensorView& block_table, int64_t block_size,
                             int64_t compress_ratio, bool overlap,
                             const MutableTensorView& gather_slots, const Options& options) {
  detail::CompressorWindowSlotsArgs a{positions,      token_to_req, block_table, block_size,
                                      compress_ratio, overlap,      gather_slots};
  detail::run("compressor_window_slots", a, options);
}

}  // namespace dsv4cpu
