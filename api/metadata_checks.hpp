// Validation pieces that several metadata builders share: the block-table reads of metadata.md §5
// (api/compressed_slot_mapping.cpp, indexer_metadata.cpp) and the element checks of the two §7
// layouts (api/c128a_topk_indices.cpp, c128a_decode_metadata.cpp), beside the vocabulary of core/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu::detail {

// positions >= 0, and < max_model_len when that is given (> 0).
inline void check_positions_below(const char* op, const TensorView& positions,
                                  int64_t max_model_len) {
  const Limit below{max_model_len, "not below max_model_len", [](int64_t m) {
                      return "position < max_model_len = " + std::to_string(m);
                    }};
  check_positions(op, positions, max_model_len > 0 ? &below : nullptr);
}

// §5's block-table reads for a validated qsl and seq_lens: the emitting tokens of each request
// (every ratio-th position, (p + 1) % ratio = 0) whose own slot is not -1 read
// bt[r][(p / ratio) / P].
inline void check_compressed_slot_refs(const char* op, const TensorView& qsl_v,
                                       const TensorView& seq_v, const TensorView& bt, int64_t ratio,
                                       int64_t block_size, const TensorView& token_slot_mapping,
                                       int64_t R) {
  const IndexReader qsl(qsl_v), seq(seq_v), own(token_slot_mapping);
  const BlockTableRefs refs(op, bt, block_size);
  ColumnRuns runs(refs);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t q0 = qsl(r), q1 = qsl(r + 1), first = seq(r) - (q1 - q0);  // pos of token q0
    for (int64_t t = q0 + (ratio - 1 - first % ratio); t < q1; t += ratio) {
      if (token_slot_mapping.present() && own(t) == -1) continue;
      const int64_t p = first + (t - q0), col = refs.column(p / ratio);
      runs.check(r, col, col, [&] {
        return BlockTableReferrer{
            "seq_lens",
            {r},
            seq(r),
            " at token " + std::to_string(t) + " (position " + std::to_string(p) + ")"};
      });
    }
  }
}

// §7: token t < readers reads the prefix [0, ceil(n_t / P)) of its request's row. Each
// request's longest prefix is walked once; the first token (in order) whose prefix holds a bad
// column fails at its first bad column.
inline void check_c128a_prefixes(const char* op, const TensorView& positions,
                                 const TensorView& token_to_req, const TensorView& block_table,
                                 int64_t block_size, int64_t readers) {
  const IndexReader pos(positions), req(token_to_req);
  const BlockTableRefs refs(op, block_table, block_size);
  if (refs.columns() == 0) {  // [R, 0]: nothing to read, and R may be any size (no memory)
    for (int64_t t = 0; t < readers; ++t)
      if (completed_entries(pos(t), 128) > 0) refs.fail(req(t), 0, by_position(pos(t), t));
    return;
  }
  const size_t R = static_cast<size_t>(block_table.size(0));
  std::vector<int64_t> need(static_cast<size_t>(readers)), longest(R, 0), first_bad(R);
  for (int64_t t = 0; t < readers; ++t) {
    need[static_cast<size_t>(t)] = ceil_div(completed_entries(pos(t), 128), block_size);
    int64_t& l = longest[static_cast<size_t>(req(t))];
    l = std::max(l, need[static_cast<size_t>(t)]);
  }
  for (size_t r = 0; r < R; ++r) {
    int64_t c = 0;
    while (c < longest[r] && refs.ok(static_cast<int64_t>(r), c)) ++c;
    first_bad[r] = c;
  }
  for (int64_t t = 0; t < readers; ++t) {
    const int64_t r = req(t);
    if (need[static_cast<size_t>(t)] > first_bad[static_cast<size_t>(r)])
      refs.fail(r, first_bad[static_cast<size_t>(r)], by_position(pos(t), t));
  }
}

// Shapes and elements common to both §7 forms once T and the width W are known: token_to_req,
// positions (>= 0, < max_model_len when > 0, n_t <= W) and the prefixes of the block-table rows
// the first `readers` tokens map (every token of the CPU form, the decode tokens of the GPU form).
inline void check_c128a_elements(const char* op, const TensorView& positions,
                                 const TensorView& token_to_req, const TensorView& block_table,
                                 int64_t block_size, int64_t max_model_len, int64_t T, int64_t W,
                                 int64_t readers) {
  check_positions_below(op, positions, max_model_len);
  const IndexReader pos(positions);
  for (int64_t t = 0; t < T; ++t)
    if (completed_entries(pos(t), 128) > W)
      fail<IndexError>(op, "positions", {t}, std::to_string(pos(t)),
                       "more completed C128A entries than the row width",
                       "(position + 1) / 128 <= " + std::to_string(W));
  check_request_indices(op, "token_to_req", token_to_req, block_table.size(0));
  check_c128a_prefixes(op, positions, token_to_req, block_table, block_size, readers);
}

}  // namespace dsv4cpu::detail
