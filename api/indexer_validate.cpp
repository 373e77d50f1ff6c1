#include "api/indexer_validate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu::detail {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_mode(const char* op, TopkMode mode) {
  if (mode != TopkMode::canonical && mode != TopkMode::vllm)
    fail_value(op, "mode", str(static_cast<int>(mode)), "unknown mode", "canonical or vllm");
}

// Indexer K cache: U8 [num_pages, page_bytes], unit inner stride, page stride >= page_bytes
// >= P·132 (indexer.md §3, compressor.md §7).
void check_indexer_kv_cache(const char* op, const TensorView& kv, int64_t P) {
  check_array(op, "kv_cache", kv, {DType::U8}, {kAny, kAny}, Layout::rows_contiguous);
  if (kv.size(1) / kIndexerEntryBytes < P)
    fail_shape(op, "kv_cache", kv,
               "U8 [num_pages, page_bytes] with page_bytes >= block_size x 132 = " +
                   (P > std::numeric_limits<int64_t>::max() / kIndexerEntryBytes
                        ? std::string("overflow")
                        : str(P * kIndexerEntryBytes)) +
                   ", unit inner stride, page stride >= page_bytes");
}

// A top-k output: I32 [rows, >= K], unit inner stride.
void check_topk_output(const char* op, const char* name, const TensorView& v, int64_t rows,
                       int64_t K) {
  check_array(op, name, v, {DType::I32}, {rows, kAny}, Layout::unit_inner);
  if (v.size(1) < K)
    fail_shape(op, name, v, "I32 [" + str(rows) + ", >= " + str(K) + "], unit inner stride");
}

// A table's covered block ids must name pages of the cache.
Limit in_cache(int64_t num_pages) {
  return {num_pages, "block id beyond the cache", "block id < " + str(num_pages) + " = num_pages"};
}

}  // namespace

// ---- fused_indexer_q_rope_quant (indexer.md §2) ----

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
  // (d) positions index the table
  const int64_t R = a.cos_sin_cache.size(0);
  const Limit rows{R, "position beyond the cos/sin table",
                   "position < " + str(R) + " = rows of cos_sin_cache"};
  check_positions(op, a.positions, &rows);
  // (e) finiteness of q, weights and the table rows used (row-major over the table)
  if (!o.check_finite) return;
  check_finite(op, "q", a.q);
  check_finite(op, "weights", a.weights);
  const IndexReader positions(a.positions);
  std::vector<int64_t> used(static_cast<size_t>(a.T));
  for (int64_t t = 0; t < a.T; ++t) used[static_cast<size_t>(t)] = positions(t);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  const float* table = a.cos_sin_cache.ptr<const float>();
  for (int64_t row : used) check_finite_row(op, "cos_sin_cache", row, table + row * 64, 64);
}

// ---- fp8_paged_mqa_logits (indexer.md §4, §8) ----

void validate(Fp8PagedMqaLogitsArgs& a, const Options& o) {
  constexpr const char* op = "fp8_paged_mqa_logits";
  // (a) scalars
  check_block_size(op, "block_size", a.block_size);
  if (a.max_seq_len < 0)
    fail_value(op, "max_seq_len", str(a.max_seq_len), "negative row width", "max_seq_len >= 0");
  if (a.next_n < 1)
    fail_value(op, "next_n", str(a.next_n), "not a positive number of query rows", "next_n >= 1");
  // (b) arrays: q_fp8 [B, next_n, H, 128] or [B·next_n, H, 128]
  const int64_t n = a.next_n;
  if (a.q_fp8.present() && a.q_fp8.rank() == 4) {
    check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {kAny, n, kAny, kIndexerHeadDim},
                Layout::contiguous);
    a.B = a.q_fp8.size(0);
    a.H = a.q_fp8.size(2);
  } else {
    check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {kAny, kAny, kIndexerHeadDim},
                Layout::contiguous);
    if (a.q_fp8.size(0) % n != 0)
      fail_shape(op, "q_fp8", a.q_fp8,
                 "F8_E4M3 [B, next_n, H, 128] or [B x next_n, H, 128] with next_n = " + str(n) +
                     ", contiguous");
    a.B = a.q_fp8.size(0) / n;
    a.H = a.q_fp8.size(1);
  }
  check_indexer_kv_cache(op, a.kv_cache, a.block_size);
  check_array(op, "weights", a.weights, {DType::F32}, {a.B * n, a.H}, Layout::contiguous);
  a.seq_lens_2d = a.seq_lens.present() && a.seq_lens.rank() == 2;
  if (a.seq_lens_2d)
    check_index_array(op, "seq_lens", a.seq_lens, {a.B, n});
  else
    check_index_array(op, "seq_lens", a.seq_lens, {a.B});
  check_index_array(op, "page_table", a.page_table, {a.B, kAny}, Layout::rows_contiguous);
  check_array(op, "logits", a.logits, {DType::F32}, {a.B * n, a.max_seq_len}, Layout::contiguous);
  // (c) overlap
  for (const auto& [name, in] : {std::pair{"q_fp8", &a.q_fp8},
                                 {"kv_cache", &a.kv_cache},
                                 {"weights", &a.weights},
                                 {"seq_lens", &a.seq_lens},
                                 {"page_table", &a.page_table}})
    check_no_overlap(op, "logits", a.logits, name, *in);
  // (d) every seq_lens element is a row length in [0, S] (1-D form: that of row next_n − 1, the
  // longest of its batch entry) whose pages fit the page table; then the covered entries.
  const int64_t S = a.max_seq_len, P = a.block_size, MP = a.page_table.size(1);
  const PageFit fit{1, P, MP, "ceil(seq_len / block_size) <= " + str(MP) + " = page_table columns"};
  check_lengths(op, "seq_lens", a.seq_lens, S, "max_seq_len = " + str(S), &fit);
  const IndexReader seq_lens(a.seq_lens);
  std::vector<int64_t> covered(static_cast<size_t>(a.B), 0);  // pages read per batch entry
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t j = 0; j < (a.seq_lens_2d ? n : 1); ++j)
      covered[static_cast<size_t>(b)] =
          std::max(covered[static_cast<size_t>(b)],
                   pages_for(a.seq_lens_2d ? seq_lens(b, j) : seq_lens(b), P));
  check_covered_blocks(op, "page_table", a.page_table, covered, in_cache(a.kv_cache.size(0)));
  // (e) finiteness
  if (!o.check_finite) return;
  check_fp8_codes(op, "q_fp8", a.q_fp8);
  check_finite(op, "weights", a.weights);
}

// ---- topk_transform_512 / topk_transform_1024 (indexer.md §5) ----

void validate(TopkTransformArgs& a, const Options&) {
  const char* op = a.K == 512 ? "topk_transform_512" : "topk_transform_1024";
  const bool paged = a.page_indices.present();
  // (a) scalars
  if (paged) {
    check_power_of_two(op, "page_size", a.page_size);
    while ((int64_t{1} << a.page_shift) < a.page_size) ++a.page_shift;
  }
  check_mode(op, a.mode);
  // (b) arrays
  check_array(op, "scores", a.scores, {DType::F32}, {kAny, kAny}, Layout::unit_inner);
  a.B = a.scores.size(0);
  a.S = a.scores.size(1);
  check_index_array(op, "seq_lens", a.seq_lens, {a.B});
  if (paged)
    check_array(op, "page_table", a.page_table, {DType::I32, DType::I64}, {a.B, kAny},
                Layout::rows_contiguous);
  else if (a.page_table.present())
    fail_shape(op, "page_table", a.page_table, "absent when page_indices is absent");
  check_topk_output(op, "raw_indices", a.raw_indices, a.B, a.K);
  if (paged)
    check_array(op, "page_indices", a.page_indices, {DType::I32}, {a.B, a.raw_indices.size(1)},
                Layout::unit_inner);
  // (c) overlap
  for (const auto& [name, out] :
       {std::pair{"raw_indices", &a.raw_indices}, {"page_indices", &a.page_indices}})
    for (const auto& [in_name, in] :
         {std::pair{"scores", &a.scores}, {"seq_lens", &a.seq_lens}, {"page_table", &a.page_table}})
      check_no_overlap(op, name, *out, in_name, *in);
  // (d) lengths, then (with page_indices) the covered page-table entries (§5.5), whose slots
  // (entry << log2 P) + P - 1 must fit int32.
  const int64_t P = a.page_size, MP = paged ? a.page_table.size(1) : 0;
  const PageFit fit{1, P, MP, "ceil(seq_len / page_size) <= " + str(MP) + " = page_table columns"};
  check_lengths(op, "seq_lens", a.seq_lens, a.S, str(a.S) + " = scores columns",
                paged ? &fit : nullptr);
  if (!paged) return;
  const IndexReader seq_lens(a.seq_lens);
  std::vector<int64_t> covered(static_cast<size_t>(a.B));
  for (int64_t b = 0; b < a.B; ++b) covered[static_cast<size_t>(b)] = pages_for(seq_lens(b), P);
  const int64_t limit = int64_t{std::numeric_limits<int32_t>::max()} - (P - 1);
  check_covered_blocks(op, "page_table", a.page_table, covered,
                       {limit < 0 ? 0 : (limit >> a.page_shift) + 1, "slot does not fit in int32",
                        "(block id << log2(page_size)) + page_size - 1 <= 2^31 - 1"});
}

// ---- short_context_topk (indexer.md §6) ----

void validate(ShortContextTopkArgs& a, const Options&) {
  constexpr const char* op = "short_context_topk";
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_topk_output(op, "topk_indices", a.topk_indices, a.T, kIndexerTopk);
  check_no_overlap(op, "topk_indices", a.topk_indices, "positions", a.positions);
  const Limit fill{4 * kIndexerTopk + 3, "too many entries for the short-context fill",
                   "(position + 1) / 4 <= 512"};  // positions up to 4·512 + 2
  check_positions(op, a.positions, &fill);
}

// ---- indexer_topk (indexer.md §7) ----

void validate(IndexerTopkArgs& a, const Options& o) {
  constexpr const char* op = "indexer_topk";
  // (a) scalars
  check_power_of_two(op, "block_size", a.block_size);
  check_mode(op, a.mode);
  // (b) arrays
  check_array(op, "q_fp8", a.q_fp8, {DType::F8_E4M3}, {kAny, kAny, kIndexerHeadDim},
              Layout::contiguous);
  a.T = a.q_fp8.size(0);
  a.H = a.q_fp8.size(1);
  check_array(op, "weights", a.weights, {DType::F32}, {a.T, a.H}, Layout::contiguous);
  a.R = check_query_start_loc_shape(op, a.query_start_loc);
  const IndexReader qsl(a.query_start_loc);
  if (qsl(a.R) != a.T)
    fail<ShapeError>(op, "query_start_loc", {a.R}, str(qsl(a.R)),
                     "total query tokens differ from q_fp8's",
                     "query_start_loc[R] = T = " + str(a.T));
  check_index_array(op, "seq_lens", a.seq_lens, {a.R});
  check_index_array(op, "block_table", a.block_table, {a.R, kAny}, Layout::rows_contiguous);
  check_indexer_kv_cache(op, a.kv_cache, a.block_size);
  check_topk_output(op, "topk_indices", a.topk_indices, a.T, kIndexerTopk);
  // (c) overlap
  for (const auto& [name, in] : {std::pair{"q_fp8", &a.q_fp8},
                                 {"weights", &a.weights},
                                 {"query_start_loc", &a.query_start_loc},
                                 {"seq_lens", &a.seq_lens},
                                 {"block_table", &a.block_table},
                                 {"kv_cache", &a.kv_cache}})
    check_no_overlap(op, "topk_indices", a.topk_indices, name, *in);
  // (d) query_start_loc, seq_lens, then (long steps) the block-table entries read
  check_query_start_loc(op, a.query_start_loc, a.R);
  check_seq_lens_cover_queries(op, a.query_start_loc, a.seq_lens, a.R);
  const IndexReader seq_lens(a.seq_lens);
  int64_t max_entries = 0;
  for (int64_t r = 0; r < a.R; ++r) max_entries = std::max(max_entries, seq_lens(r) / 4);
  a.short_context = max_entries <= kIndexerTopk;  // §7.2
  if (a.short_context) return;
  const int64_t P = a.block_size, MB = a.block_table.size(1);
  check_pages_fit(
      op, "seq_lens", a.seq_lens,
      {4, P, MB, "ceil((seq_len / 4) / block_size) <= " + str(MB) + " = block_table columns"});
  std::vector<int64_t> covered(static_cast<size_t>(a.R));
  for (int64_t r = 0; r < a.R; ++r) covered[static_cast<size_t>(r)] = pages_for(seq_lens(r) / 4, P);
  check_covered_blocks(op, "block_table", a.block_table, covered, in_cache(a.kv_cache.size(0)));
  // (e) finiteness (a long step reads every query row's codes and weights)
  if (!o.check_finite) return;
  check_fp8_codes(op, "q_fp8", a.q_fp8);
  check_finite(op, "weights", a.weights);
}

}  // namespace dsv4cpu::detail
