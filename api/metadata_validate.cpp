#include "api/metadata_validate.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_index.hpp"
#include "metadata/common.hpp"

namespace dsv4cpu::detail {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// An output's extent gives num_tokens_padded (§1): ValueError when it is below T.
void check_num_tokens_padded(const char* op, int64_t padded, int64_t T) {
  if (padded < T)
    fail_value(op, "num_tokens_padded", str(padded), "fewer entries than tokens",
               "num_tokens_padded >= T = " + str(T));
}

// positions >= 0, and < max_model_len when that is given (> 0).
void check_positions_below(const char* op, const TensorView& positions, int64_t max_model_len) {
  const Limit below{max_model_len, "not below max_model_len",
                    "position < max_model_len = " + str(max_model_len)};
  check_positions(op, positions, max_model_len > 0 ? &below : nullptr);
}

// The optional slot input: -1 or >= 0.
void check_token_slot_mapping(const char* op, const TensorView& v) {
  if (v.present()) check_slots(op, "token_slot_mapping", v);
}

template <class T>
using Unsigned = std::make_unsigned_t<std::remove_const_t<T>>;

// ---- block-table references (bad-input.md §3, core/check_block_table.hpp) ----

BlockTableReferrer by_position(int64_t position, int64_t t) {
  return {"positions", {t}, position, ""};
}

// Tokens reading the columns [first(p), last(p)] of row token_to_req[t], p = positions[t]
// (§3: one column, §6: the window's columns).
template <class First, class Last>
void check_token_columns(const char* op, const TensorView& positions,
                         const TensorView& token_to_req, const TensorView& block_table,
                         int64_t block_size, int64_t T, First&& first, Last&& last) {
  with_data(positions, token_to_req, [&](const auto* pos, const auto* req) {
    const BlockTableRefs refs(op, block_table, block_size);
    ColumnRuns runs(refs);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = pos[t];
      runs.check(req[t], refs.column(first(p)), refs.column(last(p)),
                 [&] { return by_position(p, t); });
    }
  });
}

// §5's block-table reads for a validated qsl and seq_lens: the emitting tokens of each request
// (every ratio-th position, (p + 1) % ratio = 0) whose own slot is not -1 read
// bt[r][(p / ratio) / P].
void check_compressed_slot_refs(const char* op, const TensorView& qsl_v, const TensorView& seq_v,
                                const TensorView& bt, int64_t ratio, int64_t block_size,
                                const TensorView& token_slot_mapping, int64_t R) {
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
            "seq_lens", {r}, seq(r), " at token " + str(t) + " (position " + str(p) + ")"};
      });
    }
  }
}

// §7: token t < readers reads the prefix [0, ceil(n_t / P)) of its request's row. Each
// request's longest prefix is walked once; the first token (in order) whose prefix holds a bad
// column fails at its first bad column.
void check_c128a_prefixes(const char* op, const TensorView& positions,
                          const TensorView& token_to_req, const TensorView& block_table,
                          int64_t block_size, int64_t readers) {
  const IndexReader pos(positions), req(token_to_req);
  const BlockTableRefs refs(op, block_table, block_size);
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

// Per-row maximum (-1 for K = 0) of an index matrix with unit inner stride, in one pass with
// the any_below(-1) test of all elements; returns whether some element may be < -1 (then the
// maxima are not used).
template <class I>
bool row_max_any_below_minus_one(const TensorView& v, std::vector<int64_t>& row_max) {
  using U = Unsigned<I>;
  const int64_t N = v.size(0), K = v.size(1);
  row_max.assign(static_cast<size_t>(N), -1);
  U any = 0;
  for (int64_t n = 0; n < N; ++n) {
    const I* row = v.ptr<const I>() + n * v.stride(0);
    I hi = -1;  // the true maximum whenever no element is below -1
    for (int64_t k = 0; k < K; ++k) {
      hi = row[k] > hi ? row[k] : hi;  // (this form vectorises; std::max here does not)
      any |= static_cast<U>(static_cast<U>(row[k]) + 1);
    }
    row_max[static_cast<size_t>(n)] = hi;
  }
  return (any >> (8 * sizeof(U) - 1)) != 0;
}

// §8's block-table reads: every local l >= 0 of row t reads column l / P of row
// token_to_req[t]; only those entries are read. Per request, the columns verified so far are
// marked and `sound` counts the leading run of marked columns: a row whose largest local lies in
// that run is sound without looking at its elements (after a few rows, every further row of a
// long prefill); any other row checks each element's unmarked column in order, so the first
// offending element in row-major order fails.
template <class I>
void check_c4a_refs(const char* op, const TensorView& topk_v, const TensorView& token_to_req,
                    const TensorView& block_table, int64_t block_size,
                    const std::vector<int64_t>& row_max) {
  const BlockTableRefs refs(op, block_table, block_size);
  const IndexReader req(token_to_req);
  const int64_t R = block_table.size(0), MB = refs.columns(), K = topk_v.size(1);
  std::vector<std::vector<char>> marked(static_cast<size_t>(R));
  std::vector<int64_t> sound(static_cast<size_t>(R), 0);
  for (size_t t = 0; t < row_max.size(); ++t) {
    if (row_max[t] < 0) continue;
    const int64_t r = req(static_cast<int64_t>(t));
    int64_t& n = sound[static_cast<size_t>(r)];
    if (refs.column(row_max[t]) < n) continue;
    std::vector<char>& mark = marked[static_cast<size_t>(r)];
    mark.resize(static_cast<size_t>(MB), 0);
    const I* row = topk_v.ptr<const I>() + static_cast<int64_t>(t) * topk_v.stride(0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t l = row[k];
      if (l < 0) continue;
      const int64_t c = refs.column(l);
      if (c < MB && mark[static_cast<size_t>(c)]) continue;
      refs.check(r, c, [&] {
        return BlockTableReferrer{"topk_indices", {static_cast<int64_t>(t), k}, l, ""};
      });
      mark[static_cast<size_t>(c)] = 1;
    }
    while (n < MB && mark[static_cast<size_t>(n)]) ++n;
  }
}

}  // namespace

void check_max_model_len(const char* op, int64_t max_model_len) {
  if (max_model_len < 1)
    fail_value(op, "max_model_len", str(max_model_len), "not a positive length",
               "max_model_len >= 1");
}

// ---- token_positions (§2) ----

void validate(TokenPositionsArgs& a, const Options&) {
  constexpr const char* op = "token_positions";
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_array(op, "positions", a.positions, {DType::I64}, {kAny}, Layout::contiguous);
  check_array(op, "token_to_req", a.token_to_req, {DType::I32}, {kAny}, Layout::contiguous);
  for (const auto& [name, in] :
       {std::pair{"query_start_loc", &a.query_start_loc}, std::pair{"seq_lens", &a.seq_lens}}) {
    check_no_overlap(op, "positions", a.positions, name, *in);
    check_no_overlap(op, "token_to_req", a.token_to_req, name, *in);
  }
  check_outputs_disjoint(op, "positions", a.positions, "token_to_req", a.token_to_req);
  a.T = check_query_start_loc(op, a.query_start_loc, a.R);
  check_array(op, "positions", a.positions, {DType::I64}, {a.T}, Layout::contiguous);
  check_array(op, "token_to_req", a.token_to_req, {DType::I32}, {a.T}, Layout::contiguous);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
}

// ---- slot_mapping (§3) ----

void validate(SlotMappingArgs& a, const Options&) {
  constexpr const char* op = "slot_mapping";
  check_block_size(op, "block_size", a.block_size);
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_num_tokens_padded(op, a.padded, a.T);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "positions", a.positions);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "token_to_req", a.token_to_req);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  check_positions(op, a.positions);
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  const auto position = [](int64_t p) { return p; };
  check_token_columns(op, a.positions, a.token_to_req, a.block_table, a.block_size, a.T, position,
                      position);
}

// ---- split_decodes_and_prefills (§4) ----

void validate(SplitDecodesAndPrefillsArgs& a, const Options&) {
  constexpr const char* op = "split_decodes_and_prefills";
  if (a.threshold < 0)
    fail_value(op, "threshold", str(a.threshold), "negative threshold", "threshold >= 0");
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_query_start_loc(op, a.query_start_loc, a.R);
}

// ---- compressed_slot_mapping (§5) ----

void validate(CompressedSlotMappingArgs& a, const Options&) {
  constexpr const char* op = "compressed_slot_mapping";
  check_compress_ratio(op, a.compress_ratio);
  check_block_size(op, "block_size", a.block_size);
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {kAny});
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "seq_lens", a.seq_lens);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "token_slot_mapping", a.token_slot_mapping);
  a.T = check_query_start_loc(op, a.query_start_loc, a.R);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  check_num_tokens_padded(op, a.padded, a.T);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
  check_compressed_slot_refs(op, a.query_start_loc, a.seq_lens, a.block_table, a.compress_ratio,
                             a.block_size, a.token_slot_mapping, a.R);
  check_token_slot_mapping(op, a.token_slot_mapping);
}

// ---- swa_window_indices (§6) ----

void validate(SwaWindowIndicesArgs& a, const Options&) {
  constexpr const char* op = "swa_window_indices";
  if (a.window < 1) fail_value(op, "window", str(a.window), "not a positive window", "window >= 1");
  check_block_size(op, "block_size", a.block_size);
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, a.window}, Layout::contiguous);
  if (a.lens.present()) check_array(op, "lens", a.lens, {DType::I32}, {a.T}, Layout::contiguous);
  for (const auto& [name, in] :
       {std::pair{"positions", &a.positions}, std::pair{"token_to_req", &a.token_to_req},
        std::pair{"block_table", &a.block_table}}) {
    check_no_overlap(op, "indices", a.indices, name, *in);
    check_no_overlap(op, "lens", a.lens, name, *in);
  }
  check_outputs_disjoint(op, "indices", a.indices, "lens", a.lens);
  check_positions(op, a.positions);
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  check_token_columns(
      op, a.positions, a.token_to_req, a.block_table, a.block_size, a.T,
      [W = a.window](int64_t p) { return std::max<int64_t>(p - W + 1, 0); },
      [](int64_t p) { return p; });
}

// ---- c128a_topk_indices (§7.1) and its compact form ----

// Shapes and elements common to both §7 forms once T and the width W are known: token_to_req,
// positions (>= 0, < max_model_len when > 0, n_t <= W) and the prefixes of the block-table rows
// the first `readers` tokens map (every token of the CPU form, the decode tokens of the GPU form).
static void check_c128a_elements(const char* op, const TensorView& positions,
                                 const TensorView& token_to_req, const TensorView& block_table,
                                 int64_t block_size, int64_t max_model_len, int64_t T, int64_t W,
                                 int64_t readers) {
  check_positions_below(op, positions, max_model_len);
  const IndexReader pos(positions);
  for (int64_t t = 0; t < T; ++t)
    if (completed_entries(pos(t), 128) > W)
      fail<IndexError>(op, "positions", {t}, str(pos(t)),
                       "more completed C128A entries than the row width",
                       "(position + 1) / 128 <= " + str(W));
  check_request_indices(op, "token_to_req", token_to_req, block_table.size(0));
  check_c128a_prefixes(op, positions, token_to_req, block_table, block_size, readers);
}

static void check_c128a_topk_arrays(const char* op, C128aTopkIndicesArgs& a, int64_t width) {
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, width}, Layout::contiguous);
  a.W = a.indices.size(1);
  check_no_overlap(op, "indices", a.indices, "positions", a.positions);
  check_no_overlap(op, "indices", a.indices, "token_to_req", a.token_to_req);
  check_no_overlap(op, "indices", a.indices, "block_table", a.block_table);
}

void validate(C128aTopkIndicesArgs& a, const Options&) {
  const char* op = a.compact ? "c128a_topk_indices_compact" : "c128a_topk_indices";
  if (!a.compact) check_max_model_len(op, a.max_model_len);
  check_block_size(op, "block_size", a.block_size);
  check_c128a_topk_arrays(op, a, a.compact ? kAny : ceil_div(a.max_model_len, 128));
  check_c128a_elements(op, a.positions, a.token_to_req, a.block_table, a.block_size,
                       a.compact ? 0 : a.max_model_len, a.T, a.W, a.T);
}

// ---- c128a_decode_metadata (§7.2) ----

void validate(C128aDecodeMetadataArgs& a, const Options&) {
  constexpr const char* op = "c128a_decode_metadata";
  check_max_model_len(op, a.max_model_len);
  check_block_size(op, "block_size", a.block_size);
  if (a.num_decode_tokens < 0)
    fail_value(op, "num_decode_tokens", str(a.num_decode_tokens), "negative count", ">= 0");
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  if (a.num_decode_tokens > a.T)
    fail_value(op, "num_decode_tokens", str(a.num_decode_tokens), "more than the tokens",
               "num_decode_tokens <= T = " + str(a.T));
  const int64_t nd = a.num_decode_tokens;
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  const int64_t wmax = c128a_decode_max_width(a.max_model_len);
  const std::string width_rule =
      "I64 [" + str(nd) + ", W], W a multiple of 128 and <= " + str(wmax) + ", contiguous";
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
  check_token_slot_mapping(op, a.token_slot_mapping);
}

// ---- c4a_global_topk_indices (§8) ----

void validate(C4aGlobalTopkIndicesArgs& a, const Options&) {
  constexpr const char* op = "c4a_global_topk_indices";
  std::tie(a.T, a.K) = check_mapping_arrays(op, "topk_indices", a.topk_indices, "token_to_req",
                                            a.token_to_req, a.block_table, a.block_size);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, a.K}, Layout::contiguous);
  check_array(op, "lens", a.lens, {DType::I32}, {a.T}, Layout::contiguous);
  for (const auto& [name, in] :
       {std::pair{"topk_indices", &a.topk_indices}, std::pair{"token_to_req", &a.token_to_req},
        std::pair{"block_table", &a.block_table},
        std::pair{"token_slot_mapping", &a.token_slot_mapping}}) {
    check_no_overlap(op, "indices", a.indices, name, *in);
    check_no_overlap(op, "lens", a.lens, name, *in);
  }
  check_outputs_disjoint(op, "indices", a.indices, "lens", a.lens);
  // One pass gives the row maxima and decides that no element is below -1; the elements are
  // scanned one by one (to report the first offender in row-major order) only otherwise.
  std::vector<int64_t> row_max;
  const bool maybe_bad = a.topk_indices.dtype() == DType::I32
                             ? row_max_any_below_minus_one<int32_t>(a.topk_indices, row_max)
                             : row_max_any_below_minus_one<int64_t>(a.topk_indices, row_max);
  const IndexReader topk(a.topk_indices);
  for (int64_t t = 0; t < a.T && maybe_bad; ++t)
    for (int64_t k = 0; k < a.K; ++k)
      if (topk(t, k) < -1)
        fail<IndexError>(op, "topk_indices", {t, k}, str(topk(t, k)),
                         "negative index other than -1", "-1 or >= 0");
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  if (a.topk_indices.dtype() == DType::I32)
    check_c4a_refs<int32_t>(op, a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                            row_max);
  else
    check_c4a_refs<int64_t>(op, a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                            row_max);
  check_token_slot_mapping(op, a.token_slot_mapping);
}

// ---- indexer_metadata (§9.1-9.5) ----

void validate(IndexerMetadataArgs& a, const Options&) {
  constexpr const char* op = "indexer_metadata";
  check_block_size(op, "block_size", a.block_size);
  if (a.next_n < 1)
    fail_value(op, "next_n", str(a.next_n), "not a positive token count", "next_n >= 1");
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "seq_lens", a.seq_lens);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  a.T = check_query_start_loc(op, a.query_start_loc, a.R);
  check_num_tokens_padded(op, a.padded, a.T);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
  // I32 outputs: compressed_seq_lens, and the prefill chunk's cu_seq_lens (which bound ks, ke).
  const IndexReader seq(a.seq_lens);
  const int64_t first_prefill =
      compute_split(IndexReader(a.query_start_loc), a.R, a.next_n).num_decodes;
  int64_t total = 0;
  for (int64_t r = 0; r < a.R; ++r) {
    const int64_t c = seq(r) / 4;
    if (c > INT32_MAX)
      fail<IndexError>(op, "seq_lens", {r}, str(seq(r)), "compressed length overflows int32",
                       "seq_len / 4 <= 2147483647");
    if (r < first_prefill) continue;
    total += c;
    if (total > INT32_MAX)
      fail<IndexError>(op, "seq_lens", {r}, str(seq(r)),
                       "prefill chunk's cumulative compressed length overflows int32",
                       "sum of seq_len / 4 over prefill requests <= 2147483647");
  }
  check_compressed_slot_refs(op, a.query_start_loc, a.seq_lens, a.block_table, 4, a.block_size,
                             TensorView(), a.R);
}

// ---- split_indexer_prefill_chunks (§9.3) ----

void validate(SplitIndexerPrefillChunksArgs& a, const Options&) {
  constexpr const char* op = "split_indexer_prefill_chunks";
  if (a.workspace < 1)
    fail_value(op, "workspace", str(a.workspace), "not a positive size", "workspace >= 1");
  if (a.max_logits_bytes < 4)
    fail_value(op, "max_logits_bytes", str(a.max_logits_bytes), "below one fp32 logit",
               "max_logits_bytes >= 4");
  if (a.request_offset < 0)
    fail_value(op, "request_offset", str(a.request_offset), "negative offset", ">= 0");
  check_index_array(op, "compressed_lens", a.compressed_lens, {kAny});
  a.count = a.compressed_lens.size(0);
  check_index_array(op, "query_lens", a.query_lens, {a.count});
  if (a.request_offset > INT64_MAX - a.count)
    fail_value(op, "request_offset", str(a.request_offset), "request indices overflow int64",
               "request_offset + " + str(a.count) + " <= 2^63 - 1");
  const IndexReader n(a.compressed_lens), m(a.query_lens);
  for (int64_t i = 0; i < a.count; ++i)
    if (n(i) < 0)
      fail<IndexError>(op, "compressed_lens", {i}, str(n(i)), "negative length", ">= 0");
  int64_t total = 0;
  for (int64_t i = 0; i < a.count; ++i) {
    if (m(i) < 1) fail<IndexError>(op, "query_lens", {i}, str(m(i)), "empty prefill query", ">= 1");
    if (m(i) > INT64_MAX - total)
      fail<IndexError>(op, "query_lens", {i}, str(m(i)), "total query length overflows int64",
                       "sum of query_lens <= 2^63 - 1");
    total += m(i);
  }
}

// ---- build_tile_scheduler (§10) ----

void validate(BuildTileSchedulerArgs& a, const Options&) {
  if (a.layer_kind != "swaonly" && a.layer_kind != "c4a" && a.layer_kind != "c128a")
    fail_value("build_tile_scheduler", "layer_kind", std::string(a.layer_kind),
               "unknown layer kind", "swaonly, c4a or c128a");
}

}  // namespace dsv4cpu::detail
