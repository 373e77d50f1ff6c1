// Metadata builders (metadata.md): validation (bad-input.md §1.4 order with the metadata table of
// §4, shared by all variants), the ordered variant lists (reference last), public entry points.
//
// Ops reading query_start_loc learn T = query_start_loc[R] from element values, so the extents
// tied to T (token_positions' outputs, token_slot_mapping, num_tokens_padded) are checked right
// after query_start_loc's element checks, before the other element checks.
#include <algorithm>
#include <climits>
#include <string>
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

void check_token_to_req_values(const char* op, const TensorView& v, int64_t T, int64_t R) {
  const IndexReader req(v);
  for (int64_t t = 0; t < T; ++t)
    if (req(t) < 0 || req(t) >= R)
      fail<IndexError>(op, "token_to_req", {t}, str(req(t)), "request index out of range",
                       "0 <= token_to_req < " + str(R));
}

// positions >= 0, and < max_model_len when given (> 0).
void check_positions_values(const char* op, const TensorView& v, int64_t T,
                            int64_t max_model_len = 0) {
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
  if (!v.present()) return;
  const IndexReader slots(v);
  for (int64_t t = 0; t < T; ++t)
    if (slots(t) < -1)
      fail<IndexError>(op, "token_slot_mapping", {t}, str(slots(t)),
                       "negative slot other than -1", "-1 or >= 0");
}

// The element whose formula reads a block-table entry, for messages.
struct Referrer {
  const char* argument;
  std::vector<int64_t> index;
  int64_t value;
  std::string token;  // "token t (position p)" when the argument is not per token, else empty
  std::string text() const {
    return std::string(argument) + format_index(index) + " = " + str(value) +
           (token.empty() ? "" : " at " + token);
  }
};

Referrer by_position(const TensorView& positions, int64_t t) {
  return {"positions", {t}, IndexReader(positions)(t), ""};
}

// log2 of a power of two >= 1.
int log2_exact(int64_t p) {
  int s = 0;
  while ((int64_t{1} << s) < p) ++s;
  return s;
}

// Block-table entries a formula reads (bad-input.md §3): column < MB, entry >= 0, and
// entry * P + P - 1 fits int64.
class BlockTableCheck {
 public:
  BlockTableCheck(const char* op, const TensorView& bt, int64_t block_size)
      : op_(op),
        bt_(bt),
        MB_(bt.size(1)),
        P_(block_size),
        max_page_((INT64_MAX - (block_size - 1)) / block_size),
        shift_((block_size & (block_size - 1)) == 0 ? log2_exact(block_size) : -1) {}
  // The column holding local index l >= 0 (l / P, a shift for power-of-two P).
  int64_t column(int64_t l) const { return shift_ >= 0 ? l >> shift_ : l / P_; }
  bool ok(int64_t r, int64_t col) const {
    if (col >= MB_) return false;
    const int64_t page = bt_(r, col);
    return page >= 0 && page <= max_page_;
  }
  // `by` makes the Referrer; it runs only on failure.
  template <class By>
  void check(int64_t r, int64_t col, By&& by) const {
    if (!ok(r, col)) fail(r, col, by());
  }
  [[noreturn]] void fail(int64_t r, int64_t col, const Referrer& by) const {
    if (col >= MB_)
      detail::fail<IndexError>(op_, by.argument, by.index, str(by.value),
                               (by.token.empty() ? "" : by.token + " ") +
                                   "references block-table column " + str(col) +
                                   " beyond the table",
                               "column < " + str(MB_));
    const int64_t page = bt_(r, col);
    if (page < 0)
      detail::fail<IndexError>(op_, "block_table", {r, col}, str(page),
                               "negative block id referenced by " + by.text(), ">= 0");
    detail::fail<IndexError>(op_, "block_table", {r, col}, str(page),
                             "slot overflows int64, referenced by " + by.text(),
                             "block id * block_size + block_size - 1 <= 2^63 - 1");
  }
  // Every token reads the prefix [0, need[t]) of its row (C128A). One pass over the prefixes:
  // the first token (in order) whose prefix holds a bad column fails at its first bad column.
  template <class By>
  void check_prefixes(const std::vector<int64_t>& need, const IndexReader& req, int64_t R,
                      By&& by) const {
    std::vector<int64_t> longest(static_cast<size_t>(R), 0);
    for (size_t t = 0; t < need.size(); ++t) {
      int64_t& l = longest[static_cast<size_t>(req(static_cast<int64_t>(t)))];
      l = std::max(l, need[t]);
    }
    std::vector<int64_t> first_bad(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) {
      int64_t c = 0;
      while (c < longest[static_cast<size_t>(r)] && ok(r, c)) ++c;
      first_bad[static_cast<size_t>(r)] = c;
    }
    for (size_t t = 0; t < need.size(); ++t) {
      const int64_t r = req(static_cast<int64_t>(t));
      if (need[t] > first_bad[static_cast<size_t>(r)])
        fail(r, first_bad[static_cast<size_t>(r)], by(static_cast<int64_t>(t)));
    }
  }

 private:
  const char* op_;
  IndexReader bt_;
  int64_t MB_, P_, max_page_;
  int shift_;
};

// Per-row minimum and maximum of an index matrix with unit inner stride (0 and -1 for K = 0).
template <class I>
void row_min_max(const TensorView& v, std::vector<int64_t>& row_min,
                 std::vector<int64_t>& row_max) {
  const int64_t N = v.size(0), K = v.size(1);
  row_min.assign(static_cast<size_t>(N), 0);
  row_max.assign(static_cast<size_t>(N), -1);
  if (K == 0) return;
  const I* data = v.ptr<const I>();
  for (int64_t n = 0; n < N; ++n) {
    const I* row = data + n * v.stride(0);
    I lo = row[0], hi = row[0];
    for (int64_t k = 1; k < K; ++k) {
      lo = std::min(lo, row[k]);
      hi = std::max(hi, row[k]);
    }
    row_min[static_cast<size_t>(n)] = lo;
    row_max[static_cast<size_t>(n)] = hi;
  }
}

// §5's block-table reads for a validated qsl and seq_lens: emitting tokens whose own slot is not
// -1 read bt[r][c / P] with c = pos / ratio.
void check_compressed_slot_refs(const char* op, const TensorView& qsl_v, const TensorView& seq_v,
                                const TensorView& bt, int64_t ratio, int64_t block_size,
                                const TensorView& token_slot_mapping, int64_t R) {
  const IndexReader qsl(qsl_v), seq(seq_v), own(token_slot_mapping);
  const BlockTableCheck check(op, bt, block_size);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t first = seq(r) - (qsl(r + 1) - qsl(r));  // position of token qsl[r]
    for (int64_t t = qsl(r); t < qsl(r + 1); ++t) {
      const int64_t p = first + (t - qsl(r));
      if ((p + 1) % ratio != 0 || (token_slot_mapping.present() && own(t) == -1)) continue;
      check.check(r, check.column(p / ratio), [&] {
        return Referrer{"seq_lens", {r}, seq(r),
                        "token " + str(t) + " (position " + str(p) + ")"};
      });
    }
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
  const IndexReader pos(a.positions), req(a.token_to_req);
  const BlockTableCheck check(op, a.block_table, a.block_size);
  for (int64_t t = 0; t < a.T; ++t)
    check.check(req(t), check.column(pos(t)), [&] { return by_position(a.positions, t); });
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
  const IndexReader pos(a.positions), req(a.token_to_req);
  const BlockTableCheck check(op, a.block_table, a.block_size);
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t p = pos(t), start = std::max<int64_t>(p - a.window + 1, 0);
    for (int64_t col = start / a.block_size; col <= p / a.block_size; ++col)
      check.check(req(t), col, [&] { return by_position(a.positions, t); });
  }
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
  const int64_t R = block_table.size(0);
  check_token_to_req_values(op, token_to_req, T, R);
  std::vector<int64_t> need(static_cast<size_t>(readers));
  for (int64_t t = 0; t < readers; ++t)
    need[static_cast<size_t>(t)] = ceil_div(completed_entries(pos(t), 128), block_size);
  BlockTableCheck(op, block_table, block_size)
      .check_prefixes(need, IndexReader(token_to_req), R,
                      [&](int64_t t) { return by_position(positions, t); });
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
  // Row minima and maxima decide most rows at once; a row is scanned element by element only
  // when it holds a bad value (to report the first one in row-major order).
  std::vector<int64_t> row_min, row_max;
  if (a.topk_indices.dtype() == DType::I32)
    row_min_max<int32_t>(a.topk_indices, row_min, row_max);
  else
    row_min_max<int64_t>(a.topk_indices, row_min, row_max);
  const IndexReader topk(a.topk_indices), req(a.token_to_req);
  for (int64_t t = 0; t < a.T; ++t) {
    if (row_min[static_cast<size_t>(t)] >= -1) continue;
    for (int64_t k = 0; k < a.K; ++k)
      if (topk(t, k) < -1)
        fail<IndexError>(op, "topk_indices", {t, k}, str(topk(t, k)),
                         "negative index other than -1", "-1 or >= 0");
  }
  check_token_to_req_values(op, a.token_to_req, a.T, a.block_table.size(0));
  // A row whose largest local lies in a verified prefix of sound columns of its request's table
  // row is sound; other rows are checked entry by entry (only referenced entries can fail).
  const BlockTableCheck check(op, a.block_table, a.block_size);
  std::vector<int64_t> sound(static_cast<size_t>(a.block_table.size(0)), 0);
  std::vector<char> blocked(sound.size(), 0);
  for (int64_t t = 0; t < a.T; ++t) {
    if (row_max[static_cast<size_t>(t)] < 0) continue;
    const int64_t r = req(t), need = check.column(row_max[static_cast<size_t>(t)]);
    int64_t& n = sound[static_cast<size_t>(r)];
    char& stop = blocked[static_cast<size_t>(r)];
    while (!stop && n <= need) {
      if (check.ok(r, n))
        ++n;
      else
        stop = 1;
    }
    if (need < n) continue;
    for (int64_t k = 0; k < a.K; ++k) {
      const int64_t l = topk(t, k);
      if (l >= 0)
        check.check(r, check.column(l),
                    [&] { return Referrer{"topk_indices", {t, k}, l, ""}; });
    }
  }
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
