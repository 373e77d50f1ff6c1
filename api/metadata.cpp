// Metadata builders (metadata.md): validation (bad-input.md §1.4 order with the metadata table of
// §4, shared by all variants), the ordered variant lists (reference last), public entry points.
//
// Ops reading query_start_loc learn T = query_start_loc[R] from element values, so the extents
// tied to T (token_positions' outputs, token_slot_mapping, num_tokens_padded) are checked right
// after query_start_loc's element checks, before the other element checks.
#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>
#include <vector>

#include "api/metadata_args.hpp"
#include "core/check.hpp"
#include "metadata/common.hpp"
#include "metadata/optimized.hpp"
#include "metadata/reference.hpp"

namespace dsv4cpu {
namespace detail {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// ---- (a) scalar checks ----

void check_block_size(const char* op, int64_t block_size) {
  if (block_size < 1)
    fail_value(op, "block_size", str(block_size), "not a positive block size",
               "block_size >= 1");
}

void check_max_model_len(const char* op, int64_t max_model_len) {
  if (max_model_len < 1)
    fail_value(op, "max_model_len", str(max_model_len), "not a positive length",
               "max_model_len >= 1");
}

// ---- (b) shapes, (c) overlap ----

// query_start_loc I32 or I64 [R + 1]; returns R.
int64_t check_qsl_shape(const char* op, const TensorView& qsl) {
  check_index_array(op, "query_start_loc", qsl, {kAny});
  if (qsl.size(0) < 1)
    fail_shape(op, "query_start_loc", qsl, "I32 or I64 [R + 1] with R >= 0, contiguous");
  return qsl.size(0) - 1;
}

// An output's extent gives num_tokens_padded (§1): ValueError when it is below T.
void check_num_tokens_padded(const char* op, int64_t padded, int64_t T) {
  if (padded < T)
    fail_value(op, "num_tokens_padded", str(padded), "fewer entries than tokens",
               "num_tokens_padded >= T = " + str(T));
}

void check_outputs_disjoint(const char* op, const char* a_name, const TensorView& a,
                            const char* b_name, const TensorView& b) {
  if (!a.present() || !b.present() || !a.overlaps(b)) return;
  throw ShapeError(op, b_name, {}, std::string("overlaps ") + a_name,
                   std::string(b_name) + ": memory overlaps output " + a_name +
                       " (expected outputs that do not overlap)");
}

// ---- (d) element checks ----

// qsl[0] = 0 and non-decreasing; returns T = qsl[R].
int64_t check_qsl_values(const char* op, const TensorView& v, int64_t R) {
  const IndexReader qsl(v);
  if (qsl(0) != 0)
    fail<IndexError>(op, "query_start_loc", {0}, str(qsl(0)), "does not start at 0",
                     "query_start_loc[0] = 0");
  for (int64_t r = 1; r <= R; ++r)
    if (qsl(r) < qsl(r - 1))
      fail<IndexError>(op, "query_start_loc", {r}, str(qsl(r)), "decreasing",
                       ">= query_start_loc[" + str(r - 1) + "] = " + str(qsl(r - 1)));
  return qsl(R);
}

// seq_lens[r] >= q_r.
void check_seq_lens_values(const char* op, const TensorView& qsl_v, const TensorView& seq_v,
                           int64_t R) {
  const IndexReader qsl(qsl_v), seq(seq_v);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t q = qsl(r + 1) - qsl(r);
    if (seq(r) < q)
      fail<IndexError>(op, "seq_lens", {r}, str(seq(r)), "shorter than the request's query",
                       "seq_len >= query length " + str(q));
  }
}

// The element checks below first decide in one branch-free pass over the typed data
// (with_data, metadata/common.hpp) that no element can fail, and scan element by element (to
// report the first offender) only otherwise. The passes are written so that the compiler
// vectorises them (OR of sign bits, unsigned compares).

template <class T>
using Unsigned = std::make_unsigned_t<std::remove_const_t<T>>;

// Whether some of the n elements lies outside [0, limit), limit >= 1: one unsigned compare per
// element (negative values wrap above every limit the element type can hold).
bool any_outside(const TensorView& v, int64_t n, int64_t limit) {
  return with_data(v, [&](const auto* p) {
    using U = Unsigned<std::remove_pointer_t<decltype(p)>>;
    constexpr U kSignBit = U{1} << (8 * sizeof(U) - 1);
    const U bound = static_cast<uint64_t>(limit) >= kSignBit ? kSignBit : static_cast<U>(limit);
    U bad = 0;
    for (int64_t i = 0; i < n; ++i) bad |= static_cast<U>(static_cast<U>(p[i]) >= bound);
    return bad != 0;
  });
}

// Whether some of the n elements is < `least` (0 or -1): the sign bit of the OR of all
// element - least (an element whose difference wraps past the sign bit is flagged too; the
// exact scan then finds nothing).
bool any_below(const TensorView& v, int64_t n, int least) {
  return with_data(v, [&](const auto* p) {
    using U = Unsigned<std::remove_pointer_t<decltype(p)>>;
    const U shift = static_cast<U>(-least);
    U any = 0;
    for (int64_t i = 0; i < n; ++i) any |= static_cast<U>(static_cast<U>(p[i]) + shift);
    return (any >> (8 * sizeof(U) - 1)) != 0;
  });
}

void check_token_to_req_values(const char* op, const TensorView& v, int64_t T, int64_t R) {
  if (T == 0 || !any_outside(v, T, R)) return;
  const IndexReader req(v);
  for (int64_t t = 0; t < T; ++t)
    if (req(t) < 0 || req(t) >= R)
      fail<IndexError>(op, "token_to_req", {t}, str(req(t)), "request index out of range",
                       "0 <= token_to_req < " + str(R));
}

// positions >= 0, and < max_model_len when given (> 0).
void check_positions_values(const char* op, const TensorView& v, int64_t T,
                            int64_t max_model_len = 0) {
  if (T == 0) return;
  if (max_model_len > 0 ? !any_outside(v, T, max_model_len) : !any_below(v, T, 0)) return;
  const IndexReader pos(v);
  for (int64_t t = 0; t < T; ++t) {
    if (pos(t) < 0)
      fail<IndexError>(op, "positions", {t}, str(pos(t)), "negative position", ">= 0");
    if (max_model_len > 0 && pos(t) >= max_model_len)
      fail<IndexError>(op, "positions", {t}, str(pos(t)), "not below max_model_len",
                       "position < max_model_len = " + str(max_model_len));
  }
}

// Optional slot input: -1 or >= 0.
void check_token_slot_mapping_values(const char* op, const TensorView& v, int64_t T) {
  if (!v.present() || T == 0 || !any_below(v, T, -1)) return;
  const IndexReader slots(v);
  for (int64_t t = 0; t < T; ++t)
    if (slots(t) < -1)
      fail<IndexError>(op, "token_slot_mapping", {t}, str(slots(t)),
                       "negative slot other than -1", "-1 or >= 0");
}

// ---- block-table references (bad-input.md §3, core/check.hpp) ----

// "positions[5] = 70: references block-table column 1 beyond the table (expected column < 1)"
constexpr BlockTableRefs::ColumnWording kColumnWording{"references ", "column"};

BlockTableReferrer by_position(int64_t position, int64_t t) {
  return {"positions", {t}, position, ""};
}

// Checks the columns [c0, c1] of row r that one token reads, ascending, skipping those the
// previous tokens of the same row verified (kept as one interval): consecutive tokens of a
// request read the same or adjacent columns, so most tokens cost a few compares. A token fails
// at its first bad column, as when every column of every token is checked.
class ColumnRuns {
 public:
  explicit ColumnRuns(const BlockTableRefs& refs) : refs_(refs) {}
  template <class By>
  void check(int64_t r, int64_t c0, int64_t c1, By&& by) {
    if (r == r_ && c0 >= lo_ && c1 <= hi_) return;
    if (r != r_ || c1 < lo_ - 1 || c0 > hi_ + 1) {  // not touching the verified interval
      r_ = r;
      lo_ = c0;
      hi_ = c0 - 1;
    }
    for (int64_t c = c0; c <= c1; ++c)
      if (c < lo_ || c > hi_) refs_.check(r, c, by);
    lo_ = std::min(lo_, c0);
    hi_ = std::max(hi_, c1);  // verified columns are < MB: hi_ + 1 cannot overflow
  }

 private:
  const BlockTableRefs& refs_;
  int64_t r_ = -1, lo_ = 0, hi_ = -1;
};

// Tokens reading the columns [first(p), last(p)] of row token_to_req[t], p = positions[t]
// (§3: one column, §6: the window's columns).
template <class First, class Last>
void check_token_columns(const char* op, const TensorView& positions,
                         const TensorView& token_to_req, const TensorView& block_table,
                         int64_t block_size, int64_t T, First&& first, Last&& last) {
  with_data(positions, token_to_req, [&](const auto* pos, const auto* req) {
    const BlockTableRefs refs(op, block_table, block_size, kColumnWording);
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
  const BlockTableRefs refs(op, bt, block_size, kColumnWording);
  ColumnRuns runs(refs);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t q0 = qsl(r), q1 = qsl(r + 1), first = seq(r) - (q1 - q0);  // pos of token q0
    for (int64_t t = q0 + (ratio - 1 - first % ratio); t < q1; t += ratio) {
      if (token_slot_mapping.present() && own(t) == -1) continue;
      const int64_t p = first + (t - q0), col = refs.column(p / ratio);
      runs.check(r, col, col, [&] {
        return BlockTableReferrer{"seq_lens", {r}, seq(r),
                                  " at token " + str(t) + " (position " + str(p) + ")"};
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
  const BlockTableRefs refs(op, block_table, block_size, kColumnWording);
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
  const BlockTableRefs refs(op, block_table, block_size, kColumnWording);
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

// ---- token_positions (§2) ----

const VariantList<TokenPositionsArgs> kTokenPositions = {
    {"opt", nullptr, nullptr, opt::token_positions},
    {"ref", nullptr, nullptr, ref::token_positions},
};

void validate(TokenPositionsArgs& a, const Options&) {
  constexpr const char* op = "token_positions";
  a.R = check_qsl_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_array(op, "positions", a.positions, {DType::I64}, {kAny}, Layout::contiguous);
  check_array(op, "token_to_req", a.token_to_req, {DType::I32}, {kAny}, Layout::contiguous);
  for (const auto& [name, in] : {std::pair{"query_start_loc", &a.query_start_loc},
                                 std::pair{"seq_lens", &a.seq_lens}}) {
    check_no_overlap(op, "positions", a.positions, name, *in);
    check_no_overlap(op, "token_to_req", a.token_to_req, name, *in);
  }
  check_outputs_disjoint(op, "positions", a.positions, "token_to_req", a.token_to_req);
  a.T = check_qsl_values(op, a.query_start_loc, a.R);
  check_array(op, "positions", a.positions, {DType::I64}, {a.T}, Layout::contiguous);
  check_array(op, "token_to_req", a.token_to_req, {DType::I32}, {a.T}, Layout::contiguous);
  check_seq_lens_values(op, a.query_start_loc, a.seq_lens, a.R);
}

// ---- slot_mapping (§3) ----

const VariantList<SlotMappingArgs> kSlotMapping = {
    {"opt", nullptr, nullptr, opt::slot_mapping},
    {"ref", nullptr, nullptr, ref::slot_mapping},
};

void validate(SlotMappingArgs& a, const Options&) {
  constexpr const char* op = "slot_mapping";
  check_block_size(op, a.block_size);
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
  check_positions_values(op, a.positions, a.T);
  check_token_to_req_values(op, a.token_to_req, a.T, a.block_table.size(0));
  const auto position = [](int64_t p) { return p; };
  check_token_columns(op, a.positions, a.token_to_req, a.block_table, a.block_size, a.T,
                      position, position);
}

// ---- split_decodes_and_prefills (§4) ----

const VariantList<SplitDecodesAndPrefillsArgs> kSplitDecodesAndPrefills = {
    {"ref", nullptr, nullptr, ref::split_decodes_and_prefills},
};

void validate(SplitDecodesAndPrefillsArgs& a, const Options&) {
  constexpr const char* op = "split_decodes_and_prefills";
  if (a.threshold < 0)
    fail_value(op, "threshold", str(a.threshold), "negative threshold", "threshold >= 0");
  a.R = check_qsl_shape(op, a.query_start_loc);
  check_qsl_values(op, a.query_start_loc, a.R);
}

// ---- compressed_slot_mapping (§5) ----

const VariantList<CompressedSlotMappingArgs> kCompressedSlotMapping = {
    {"opt", nullptr, nullptr, opt::compressed_slot_mapping},
    {"ref", nullptr, nullptr, ref::compressed_slot_mapping},
};

void validate(CompressedSlotMappingArgs& a, const Options&) {
  constexpr const char* op = "compressed_slot_mapping";
  if (a.compress_ratio != 4 && a.compress_ratio != 128)
    fail_value(op, "compress_ratio", str(a.compress_ratio), "unsupported compress ratio",
               "4 or 128");
  check_block_size(op, a.block_size);
  a.R = check_qsl_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {kAny});
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "seq_lens", a.seq_lens);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "token_slot_mapping",
                   a.token_slot_mapping);
  a.T = check_qsl_values(op, a.query_start_loc, a.R);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  check_num_tokens_padded(op, a.padded, a.T);
  check_seq_lens_values(op, a.query_start_loc, a.seq_lens, a.R);
  check_compressed_slot_refs(op, a.query_start_loc, a.seq_lens, a.block_table, a.compress_ratio,
                             a.block_size, a.token_slot_mapping, a.R);
  check_token_slot_mapping_values(op, a.token_slot_mapping, a.T);
}

// ---- swa_window_indices (§6) ----

const VariantList<SwaWindowIndicesArgs> kSwaWindowIndices = {
    {"opt", nullptr, nullptr, opt::swa_window_indices},
    {"ref", nullptr, nullptr, ref::swa_window_indices},
};

void validate(SwaWindowIndicesArgs& a, const Options&) {
  constexpr const char* op = "swa_window_indices";
  if (a.window < 1)
    fail_value(op, "window", str(a.window), "not a positive window", "window >= 1");
  check_block_size(op, a.block_size);
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, a.window}, Layout::contiguous);
  if (a.lens.present())
    check_array(op, "lens", a.lens, {DType::I32}, {a.T}, Layout::contiguous);
  for (const auto& [name, in] : {std::pair{"positions", &a.positions},
                                 std::pair{"token_to_req", &a.token_to_req},
                                 std::pair{"block_table", &a.block_table}}) {
    check_no_overlap(op, "indices", a.indices, name, *in);
    check_no_overlap(op, "lens", a.lens, name, *in);
  }
  check_outputs_disjoint(op, "indices", a.indices, "lens", a.lens);
  check_positions_values(op, a.positions, a.T);
  check_token_to_req_values(op, a.token_to_req, a.T, a.block_table.size(0));
  check_token_columns(
      op, a.positions, a.token_to_req, a.block_table, a.block_size, a.T,
      [W = a.window](int64_t p) { return std::max<int64_t>(p - W + 1, 0); },
      [](int64_t p) { return p; });
}

// ---- c128a_topk_indices (§7.1) and its compact form ----

const VariantList<C128aTopkIndicesArgs> kC128aTopkIndices = {
    {"opt", nullptr, nullptr, opt::c128a_topk_indices},
    {"ref", nullptr, nullptr, ref::c128a_topk_indices},
};

// Shapes and elements common to both §7 forms once T and the width W are known: token_to_req,
// positions (>= 0, < max_model_len when > 0, n_t <= W) and the prefixes of the block-table rows
// the first `readers` tokens map (every token of the CPU form, the decode tokens of the GPU form).
void check_c128a_elements(const char* op, const TensorView& positions,
                          const TensorView& token_to_req, const TensorView& block_table,
                          int64_t block_size, int64_t max_model_len, int64_t T, int64_t W,
                          int64_t readers) {
  check_positions_values(op, positions, T, max_model_len);
  const IndexReader pos(positions);
  for (int64_t t = 0; t < T; ++t)
    if (completed_entries(pos(t), 128) > W)
      fail<IndexError>(op, "positions", {t}, str(pos(t)),
                       "more completed C128A entries than the row width",
                       "(position + 1) / 128 <= " + str(W));
  check_token_to_req_values(op, token_to_req, T, block_table.size(0));
  check_c128a_prefixes(op, positions, token_to_req, block_table, block_size, readers);
}

void check_c128a_topk_arrays(const char* op, C128aTopkIndicesArgs& a, int64_t width) {
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

void validate_c128a_topk(C128aTopkIndicesArgs& a, int64_t max_model_len) {
  constexpr const char* op = "c128a_topk_indices";
  check_max_model_len(op, max_model_len);
  check_block_size(op, a.block_size);
  check_c128a_topk_arrays(op, a, ceil_div(max_model_len, 128));
  check_c128a_elements(op, a.positions, a.token_to_req, a.block_table, a.block_size,
                       max_model_len, a.T, a.W, a.T);
}

void validate_c128a_topk_compact(C128aTopkIndicesArgs& a) {
  constexpr const char* op = "c128a_topk_indices_compact";
  check_block_size(op, a.block_size);
  check_c128a_topk_arrays(op, a, kAny);
  check_c128a_elements(op, a.positions, a.token_to_req, a.block_table, a.block_size, 0, a.T,
                       a.W, a.T);
}

// ---- c128a_decode_metadata (§7.2) ----

const VariantList<C128aDecodeMetadataArgs> kC128aDecodeMetadata = {
    {"opt", nullptr, nullptr, opt::c128a_decode_metadata},
    {"ref", nullptr, nullptr, ref::c128a_decode_metadata},
};

void validate(C128aDecodeMetadataArgs& a, const Options&) {
  constexpr const char* op = "c128a_decode_metadata";
  check_max_model_len(op, a.max_model_len);
  check_block_size(op, a.block_size);
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
  check_array(op, "decode_global", a.decode_global, {DType::I64}, {nd, kAny},
              Layout::contiguous);
  a.W = a.decode_global.size(1);
  if (a.W % 128 != 0 || a.W > wmax) fail_shape(op, "decode_global", a.decode_global, width_rule);
  check_array(op, "decode_lens", a.decode_lens, {DType::I32}, {nd}, Layout::contiguous);
  check_array(op, "prefill_local", a.prefill_local, {DType::I32}, {a.T - nd, a.W},
              Layout::contiguous);
  const std::pair<const char*, const TensorView*> outputs[] = {
      {"decode_global", &a.decode_global},
      {"decode_lens", &a.decode_lens},
      {"prefill_local", &a.prefill_local}};
  for (const auto& [out_name, out] : outputs)
    for (const auto& [name, in] : {std::pair{"positions", &a.positions},
                                   std::pair{"token_to_req", &a.token_to_req},
                                   std::pair{"block_table", &a.block_table},
                                   std::pair{"token_slot_mapping", &a.token_slot_mapping}})
      check_no_overlap(op, out_name, *out, name, *in);
  check_outputs_disjoint(op, "decode_global", a.decode_global, "decode_lens", a.decode_lens);
  check_outputs_disjoint(op, "decode_global", a.decode_global, "prefill_local", a.prefill_local);
  check_outputs_disjoint(op, "decode_lens", a.decode_lens, "prefill_local", a.prefill_local);
  check_c128a_elements(op, a.positions, a.token_to_req, a.block_table, a.block_size,
                       a.max_model_len, a.T, a.W, nd);
  check_token_slot_mapping_values(op, a.token_slot_mapping, a.T);
}

// ---- c4a_global_topk_indices (§8) ----

const VariantList<C4aGlobalTopkIndicesArgs> kC4aGlobalTopkIndices = {
    {"opt", nullptr, nullptr, opt::c4a_global_topk_indices},
    {"ref", nullptr, nullptr, ref::c4a_global_topk_indices},
};

void validate(C4aGlobalTopkIndicesArgs& a, const Options&) {
  constexpr const char* op = "c4a_global_topk_indices";
  check_block_size(op, a.block_size);
  check_array(op, "topk_indices", a.topk_indices, {DType::I32, DType::I64}, {kAny, kAny},
              Layout::unit_inner);
  a.T = a.topk_indices.size(0);
  a.K = a.topk_indices.size(1);
  check_index_array(op, "token_to_req", a.token_to_req, {a.T});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  if (a.token_slot_mapping.present())
    check_index_array(op, "token_slot_mapping", a.token_slot_mapping, {a.T});
  check_array(op, "indices", a.indices, {DType::I64}, {a.T, a.K}, Layout::contiguous);
  check_array(op, "lens", a.lens, {DType::I32}, {a.T}, Layout::contiguous);
  for (const auto& [name, in] : {std::pair{"topk_indices", &a.topk_indices},
                                 std::pair{"token_to_req", &a.token_to_req},
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
  check_token_to_req_values(op, a.token_to_req, a.T, a.block_table.size(0));
  if (a.topk_indices.dtype() == DType::I32)
    check_c4a_refs<int32_t>(op, a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                            row_max);
  else
    check_c4a_refs<int64_t>(op, a.topk_indices, a.token_to_req, a.block_table, a.block_size,
                            row_max);
  check_token_slot_mapping_values(op, a.token_slot_mapping, a.T);
}

// ---- indexer_metadata (§9.1-9.5) ----

const VariantList<IndexerMetadataArgs> kIndexerMetadata = {
    {"opt", nullptr, nullptr, opt::indexer_metadata},
    {"ref", nullptr, nullptr, ref::indexer_metadata},
};

void validate(IndexerMetadataArgs& a, const Options&) {
  constexpr const char* op = "indexer_metadata";
  check_block_size(op, a.block_size);
  if (a.next_n < 1)
    fail_value(op, "next_n", str(a.next_n), "not a positive token count", "next_n >= 1");
  a.R = check_qsl_shape(op, a.query_start_loc);
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  check_array(op, "slot_mapping", a.slot_mapping, {DType::I64}, {kAny}, Layout::contiguous);
  a.padded = a.slot_mapping.size(0);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "seq_lens", a.seq_lens);
  check_no_overlap(op, "slot_mapping", a.slot_mapping, "block_table", a.block_table);
  a.T = check_qsl_values(op, a.query_start_loc, a.R);
  check_num_tokens_padded(op, a.padded, a.T);
  check_seq_lens_values(op, a.query_start_loc, a.seq_lens, a.R);
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

const VariantList<SplitIndexerPrefillChunksArgs> kSplitIndexerPrefillChunks = {
    {"ref", nullptr, nullptr, ref::split_indexer_prefill_chunks},
};

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
    if (m(i) < 1)
      fail<IndexError>(op, "query_lens", {i}, str(m(i)), "empty prefill query", ">= 1");
    if (m(i) > INT64_MAX - total)
      fail<IndexError>(op, "query_lens", {i}, str(m(i)), "total query length overflows int64",
                       "sum of query_lens <= 2^63 - 1");
    total += m(i);
  }
}

// ---- build_tile_scheduler (§10) ----

const VariantList<BuildTileSchedulerArgs> kBuildTileScheduler = {
    {"ref", nullptr, nullptr, ref::build_tile_scheduler},
};

void validate(BuildTileSchedulerArgs& a, const Options&) {
  if (a.layer_kind != "swaonly" && a.layer_kind != "c4a" && a.layer_kind != "c128a")
    fail_value("build_tile_scheduler", "layer_kind", std::string(a.layer_kind),
               "unknown layer kind", "swaonly, c4a or c128a");
}

template <class Args>
void run(const char* op, const VariantList<Args>& list, Args& args, const Options& options) {
  run_op(op, list, args, options, [](auto& a, const Options& o) { validate(a, o); });
}

}  // namespace

void list_metadata_ops(std::vector<OpInfo>& out) {
  out.push_back(make_op_info("token_positions", kTokenPositions));
  out.push_back(make_op_info("slot_mapping", kSlotMapping));
  out.push_back(make_op_info("split_decodes_and_prefills", kSplitDecodesAndPrefills));
  out.push_back(make_op_info("compressed_slot_mapping", kCompressedSlotMapping));
  out.push_back(make_op_info("swa_window_indices", kSwaWindowIndices));
  out.push_back(make_op_info("c128a_topk_indices", kC128aTopkIndices));
  out.push_back(make_op_info("c128a_topk_indices_compact", kC128aTopkIndices));
  out.push_back(make_op_info("c128a_decode_metadata", kC128aDecodeMetadata));
  out.push_back(make_op_info("c4a_global_topk_indices", kC4aGlobalTopkIndices));
  out.push_back(make_op_info("indexer_metadata", kIndexerMetadata));
  out.push_back(make_op_info("split_indexer_prefill_chunks", kSplitIndexerPrefillChunks));
  out.push_back(make_op_info("build_tile_scheduler", kBuildTileScheduler));
}

}  // namespace detail

void token_positions(const TensorView& query_start_loc, const TensorView& seq_lens,
                     const TensorView& positions, const TensorView& token_to_req,
                     const Options& options) {
  detail::TokenPositionsArgs a{query_start_loc, seq_lens, positions, token_to_req};
  detail::run("token_positions", detail::kTokenPositions, a, options);
}

void slot_mapping(const TensorView& positions, const TensorView& token_to_req,
                  const TensorView& block_table, int64_t block_size,
                  const TensorView& slot_mapping, const Options& options) {
  detail::SlotMappingArgs a{positions, token_to_req, block_table, block_size, slot_mapping};
  detail::run("slot_mapping", detail::kSlotMapping, a, options);
}

DecodePrefillSplit split_decodes_and_prefills(const TensorView& query_start_loc,
                                              int64_t threshold, const Options& options) {
  DecodePrefillSplit result;
  detail::SplitDecodesAndPrefillsArgs a{query_start_loc, threshold, &result};
  detail::run("split_decodes_and_prefills", detail::kSplitDecodesAndPrefills, a, options);
  return result;
}

void compressed_slot_mapping(const TensorView& query_start_loc, const TensorView& seq_lens,
                             const TensorView& block_table, int64_t compress_ratio,
                             int64_t block_size, const TensorView& token_slot_mapping,
                             const TensorView& slot_mapping, const Options& options) {
  detail::CompressedSlotMappingArgs a{query_start_loc, seq_lens,           block_table,
                                      compress_ratio,  block_size,         token_slot_mapping,
                                      slot_mapping};
  detail::run("compressed_slot_mapping", detail::kCompressedSlotMapping, a, options);
}

void swa_window_indices(const TensorView& positions, const TensorView& token_to_req,
                        const TensorView& block_table, int64_t window, int64_t block_size,
                        const TensorView& indices, const TensorView& lens,
                        const Options& options) {
  detail::SwaWindowIndicesArgs a{positions,  token_to_req, block_table, window,
                                 block_size, indices,      lens};
  detail::run("swa_window_indices", detail::kSwaWindowIndices, a, options);
}

int64_t c128a_topk_width(int64_t max_model_len) {
  detail::check_max_model_len("c128a_topk_width", max_model_len);
  return detail::ceil_div(max_model_len, 128);
}

int64_t c128a_decode_max_width(int64_t max_model_len) {
  detail::check_max_model_len("c128a_decode_max_width", max_model_len);
  return detail::ceil_div(detail::ceil_div(max_model_len, 128), 128) * 128;
}

void c128a_topk_indices(const TensorView& positions, const TensorView& token_to_req,
                        const TensorView& block_table, int64_t max_model_len, int64_t block_size,
                        const TensorView& indices, const Options& options) {
  detail::C128aTopkIndicesArgs a{positions, token_to_req, block_table, block_size, indices};
  detail::run_op("c128a_topk_indices", detail::kC128aTopkIndices, a, options,
                 [max_model_len](auto& args, const Options&) {
                   detail::validate_c128a_topk(args, max_model_len);
                 });
}

int64_t c128a_compact_width(const TensorView& positions) {
  constexpr const char* op = "c128a_compact_width";
  detail::check_index_array(op, "positions", positions, {detail::kAny});
  const int64_t T = positions.size(0);
  detail::check_positions_values(op, positions, T);
  const detail::IndexReader pos(positions);
  int64_t width = 0;
  for (int64_t t = 0; t < T; ++t) width = std::max(width, detail::completed_entries(pos(t), 128));
  return width;
}

void c128a_topk_indices_compact(const TensorView& positions, const TensorView& token_to_req,
                                const TensorView& block_table, int64_t block_size,
                                const TensorView& indices, const Options& options) {
  detail::C128aTopkIndicesArgs a{positions, token_to_req, block_table, block_size, indices};
  detail::run_op("c128a_topk_indices_compact", detail::kC128aTopkIndices, a, options,
                 [](auto& args, const Options&) { detail::validate_c128a_topk_compact(args); });
}

void c128a_decode_metadata(const TensorView& positions, const TensorView& token_to_req,
                           const TensorView& block_table, int64_t max_model_len,
                           int64_t block_size, int64_t num_decode_tokens,
                           const TensorView& token_slot_mapping, const TensorView& decode_global,
                           const TensorView& decode_lens, const TensorView& prefill_local,
                           const Options& options) {
  detail::C128aDecodeMetadataArgs a{positions,          token_to_req,  block_table,
                                    max_model_len,      block_size,    num_decode_tokens,
                                    token_slot_mapping, decode_global, decode_lens,
                                    prefill_local};
  detail::run("c128a_decode_metadata", detail::kC128aDecodeMetadata, a, options);
}

void c4a_global_topk_indices(const TensorView& topk_indices, const TensorView& token_to_req,
                             const TensorView& block_table, int64_t block_size,
                             const TensorView& token_slot_mapping, const TensorView& indices,
                             const TensorView& lens, const Options& options) {
  detail::C4aGlobalTopkIndicesArgs a{topk_indices, token_to_req, block_table, block_size,
                                     token_slot_mapping, indices, lens};
  detail::run("c4a_global_topk_indices", detail::kC4aGlobalTopkIndices, a, options);
}

IndexerMetadata indexer_metadata(const TensorView& query_start_loc, const TensorView& seq_lens,
                                 const TensorView& block_table, int64_t block_size,
                                 int64_t next_n, const TensorView& slot_mapping,
                                 const Options& options) {
  IndexerMetadata result;
  detail::IndexerMetadataArgs a{query_start_loc, seq_lens,     block_table, block_size,
                                next_n,          slot_mapping, &result};
  detail::run("indexer_metadata", detail::kIndexerMetadata, a, options);
  return result;
}

std::vector<PrefillChunk> split_indexer_prefill_chunks(const TensorView& compressed_lens,
                                                       const TensorView& query_lens,
                                                       int64_t workspace,
                                                       int64_t max_logits_bytes,
                                                       int64_t request_offset,
                                                       const Options& options) {
  std::vector<PrefillChunk> result;
  detail::SplitIndexerPrefillChunksArgs a{compressed_lens,  query_lens,     workspace,
                                          max_logits_bytes, request_offset, &result};
  detail::run("split_indexer_prefill_chunks", detail::kSplitIndexerPrefillChunks, a, options);
  return result;
}

std::string build_tile_scheduler(std::string_view layer_kind, const Options& options) {
  std::string result;
  detail::BuildTileSchedulerArgs a{layer_kind, &result};
  detail::run("build_tile_scheduler", detail::kBuildTileScheduler, a, options);
  return result;
}

}  // namespace dsv4cpu
