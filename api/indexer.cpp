// Indexer ops: validation (bad-input.md §1.4 order, shared by all variants), the ordered variant
// lists (reference last), and the public entry points.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "api/indexer_args.hpp"
#include "core/check.hpp"
#include "optimized/indexer.hpp"
#include "reference/indexer.hpp"

namespace dsv4cpu {
namespace detail {
namespace {

// ---- shared checks ----

std::string str(int64_t v) { return std::to_string(v); }

// Multi-index of element `flat` of a C-contiguous view.
std::vector<int64_t> unflatten(const TensorView& v, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(v.rank()));
  for (int d = v.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % v.size(d);
    flat /= v.size(d);
  }
  return idx;
}

void check_power_of_two(const char* op, const char* name, int64_t value) {
  if (value < 1 || (value & (value - 1)) != 0)
    fail_value(op, name, str(value), "not a power of two", "1, 2, 4, ...");
}

void check_mode(const char* op, TopkMode mode) {
  if (mode != TopkMode::canonical && mode != TopkMode::vllm)
    fail_value(op, "mode", str(static_cast<int>(mode)), "unknown mode", "canonical or vllm");
}

// ceil(L / P) without overflow (L >= 0, P >= 1).
int64_t pages_for(int64_t L, int64_t P) { return L / P + (L % P != 0 ? 1 : 0); }

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

// bad-input.md §4: a NaN code (0x7F, 0xFF) in a contiguous F8_E4M3 array.
void check_fp8_codes(const char* op, const char* name, const TensorView& v) {
  const uint8_t* c = v.ptr<const uint8_t>();
  const int64_t n = v.numel();
  for (int64_t i = 0; i < n; ++i) {
    if ((c[i] & 0x7F) != 0x7F) continue;
    char text[8];
    std::snprintf(text, sizeof text, "0x%02X", static_cast<unsigned>(c[i]));
    fail<NonFiniteError>(op, name, unflatten(v, i), text, "NaN code",
                         "a finite fp8 e4m3 code");
  }
}

// NaN or ±inf in a contiguous F32 array.
void check_finite_f32(const char* op, const char* name, const TensorView& v) {
  const float* x = v.ptr<const float>();
  const int64_t n = v.numel();
  const int64_t i = first_non_finite(n, [x](int64_t k) { return x[k]; });
  if (i < n)
    fail<NonFiniteError>(op, name, unflatten(v, i), format_float(x[i]), "not finite",
                         "a finite value");
}

// ---- fused_indexer_q_rope_quant (indexer.md §2) ----

const VariantList<FusedIndexerQRopeQuantArgs> kFusedIndexerQRopeQuant = {
    {"hwy", nullptr, opt::hwy_target, opt::fused_indexer_q_rope_quant_hwy},
    {"ref", nullptr, nullptr, ref::fused_indexer_q_rope_quant},
};

void validate(FusedIndexerQRopeQuantArgs& a, const Options& o) {
  constexpr const char* op = "fused_indexer_q_rope_quant";
  // (a) scalars
  if (!std::isfinite(a.softmax_scale) || !(a.softmax_scale > 0.0f))
    fail_value(op, "softmax_scale", format_float(a.softmax_scale), "not a finite positive scale",
               "a finite value > 0");
  if (!std::isfinite(a.head_scale) || !(a.head_scale > 0.0f))
    fail_value(op, "head_scale", format_float(a.head_scale), "not a finite positive scale",
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
  for (const auto& [name, out] : {std::pair{"q_fp8", &a.q_fp8}, {"weights_out", &a.weights_out}}) {
    check_no_overlap(op, name, *out, "q", a.q);
    check_no_overlap(op, name, *out, "weights", a.weights);
    check_no_overlap(op, name, *out, "positions", a.positions);
    check_no_overlap(op, name, *out, "cos_sin_cache", a.cos_sin_cache);
  }
  // (d) positions index the table
  const int64_t R = a.cos_sin_cache.size(0);
  const IndexReader positions(a.positions);
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t p = positions(t);
    if (p < 0 || p >= R)
      fail<IndexError>(op, "positions", {t}, str(p),
                       p < 0 ? "negative position" : "position beyond the cos/sin table",
                       "0 <= position < " + str(R) + " = rows of cos_sin_cache");
  }
  // (e) finiteness of q, weights and the table rows used (row-major over the table)
  if (!o.check_finite) return;
  check_finite_f32(op, "q", a.q);
  check_finite_f32(op, "weights", a.weights);
  std::vector<int64_t> rows(static_cast<size_t>(a.T));
  for (int64_t t = 0; t < a.T; ++t) rows[static_cast<size_t>(t)] = positions(t);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const float* table = a.cos_sin_cache.ptr<const float>();
  for (int64_t row : rows)
    for (int64_t c = 0; c < 64; ++c)
      if (!std::isfinite(table[row * 64 + c]))
        fail<NonFiniteError>(op, "cos_sin_cache", {row, c}, format_float(table[row * 64 + c]),
                             "not finite", "a finite value");
}

// ---- fp8_paged_mqa_logits (indexer.md §4, §8) ----

const VariantList<Fp8PagedMqaLogitsArgs> kFp8PagedMqaLogits = {
    {"amx", opt::amx_available, opt::amx_target, opt::fp8_paged_mqa_logits_amx},
    {"avx512bf16", opt::avx512bf16_available, opt::avx512bf16_target,
     opt::fp8_paged_mqa_logits_avx512bf16},
    {"hwy", nullptr, opt::hwy_target, opt::fp8_paged_mqa_logits_hwy},
    {"ref", nullptr, nullptr, ref::fp8_paged_mqa_logits},
};

void validate(Fp8PagedMqaLogitsArgs& a, const Options& o) {
  constexpr const char* op = "fp8_paged_mqa_logits";
  // (a) scalars
  if (a.block_size < 1)
    fail_value(op, "block_size", str(a.block_size), "not a positive block size",
               "block_size >= 1");
  if (a.max_seq_len < 0)
    fail_value(op, "max_seq_len", str(a.max_seq_len), "negative row width", "max_seq_len >= 0");
  if (a.next_n < 1)
    fail_value(op, "next_n", str(a.next_n), "not a positive number of query rows",
               "next_n >= 1");
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
  check_array(op, "logits", a.logits, {DType::F32}, {a.B * n, a.max_seq_len},
              Layout::contiguous);
  // (c) overlap
  check_no_overlap(op, "logits", a.logits, "q_fp8", a.q_fp8);
  check_no_overlap(op, "logits", a.logits, "kv_cache", a.kv_cache);
  check_no_overlap(op, "logits", a.logits, "weights", a.weights);
  check_no_overlap(op, "logits", a.logits, "seq_lens", a.seq_lens);
  check_no_overlap(op, "logits", a.logits, "page_table", a.page_table);
  // (d) every seq_lens element is a row length in [0, S] (1-D form: that of row next_n − 1, the
  // longest of its batch entry) whose pages fit the page table; then the covered entries.
  const int64_t S = a.max_seq_len, P = a.block_size, MP = a.page_table.size(1);
  const int64_t num_pages = a.kv_cache.size(0);
  const IndexReader seq_lens(a.seq_lens), page_table(a.page_table);
  const int64_t per_b = a.seq_lens_2d ? n : 1;
  std::vector<int64_t> covered(static_cast<size_t>(a.B), 0);  // pages read per batch entry
  for (int64_t b = 0; b < a.B; ++b) {
    for (int64_t j = 0; j < per_b; ++j) {
      const int64_t L = a.seq_lens_2d ? seq_lens(b, j) : seq_lens(b);
      std::vector<int64_t> idx = a.seq_lens_2d ? std::vector<int64_t>{b, j}
                                               : std::vector<int64_t>{b};
      if (L < 0 || L > S)
        fail<IndexError>(op, "seq_lens", idx, str(L),
                         L < 0 ? "negative length" : "longer than the row width",
                         "0 <= seq_len <= max_seq_len = " + str(S));
      const int64_t pages = pages_for(L, P);
      if (pages > MP)
        fail<IndexError>(op, "seq_lens", idx, str(L),
                         "needs " + str(pages) + " pages of " + str(P) + " entries",
                         "ceil(seq_len / block_size) <= " + str(MP) + " = page_table columns");
      covered[static_cast<size_t>(b)] = std::max(covered[static_cast<size_t>(b)], pages);
    }
  }
  for (int64_t b = 0; b < a.B; ++b) {
    for (int64_t c = 0; c < covered[static_cast<size_t>(b)]; ++c) {
      const int64_t page = page_table(b, c);
      if (page < 0 || page >= num_pages)
        fail<IndexError>(op, "page_table", {b, c}, str(page),
                         page < 0 ? "negative page id in the covered range"
                                  : "page id beyond the cache",
                         "0 <= page < " + str(num_pages) + " = num_pages");
    }
  }
  // (e) finiteness
  if (!o.check_finite) return;
  check_fp8_codes(op, "q_fp8", a.q_fp8);
  check_finite_f32(op, "weights", a.weights);
}

// ---- topk_transform_512 / topk_transform_1024 (indexer.md §5) ----

const VariantList<TopkTransformArgs> kTopkTransform512 = {
    {"hwy", nullptr, opt::hwy_target, opt::topk_transform_hwy},
    {"ref", nullptr, nullptr, ref::topk_transform},
};
const VariantList<TopkTransformArgs> kTopkTransform1024 = {
    {"hwy", nullptr, opt::hwy_target, opt::topk_transform_hwy},
    {"ref", nullptr, nullptr, ref::topk_transform},
};

void validate_topk_transform(const char* op, TopkTransformArgs& a) {
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
       {std::pair{"raw_indices", &a.raw_indices}, {"page_indices", &a.page_indices}}) {
    check_no_overlap(op, name, *out, "scores", a.scores);
    check_no_overlap(op, name, *out, "seq_lens", a.seq_lens);
    check_no_overlap(op, name, *out, "page_table", a.page_table);
  }
  // (d) lengths, then (with page_indices) the covered page-table entries (§5.5)
  const IndexReader seq_lens(a.seq_lens);
  const int64_t P = a.page_size;
  const int64_t MP = paged ? a.page_table.size(1) : 0;
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t L = seq_lens(b);
    if (L < 0 || L > a.S)
      fail<IndexError>(op, "seq_lens", {b}, str(L),
                       L < 0 ? "negative length" : "longer than the row width",
                       "0 <= seq_len <= " + str(a.S) + " = scores columns");
    if (paged && pages_for(L, P) > MP)
      fail<IndexError>(op, "seq_lens", {b}, str(L),
                       "needs " + str(pages_for(L, P)) + " pages of " + str(P) + " entries",
                       "ceil(seq_len / page_size) <= " + str(MP) + " = page_table columns");
  }
  if (!paged) return;
  const IndexReader page_table(a.page_table);
  const int64_t limit = int64_t{std::numeric_limits<int32_t>::max()} - (P - 1);
  for (int64_t b = 0; b < a.B; ++b) {
    for (int64_t c = 0; c < pages_for(seq_lens(b), P); ++c) {
      const int64_t page = page_table(b, c);
      if (page < 0)
        fail<IndexError>(op, "page_table", {b, c}, str(page),
                         "negative page id in the covered range", ">= 0");
      if (limit < 0 || page > (limit >> a.page_shift))
        fail<IndexError>(op, "page_table", {b, c}, str(page), "slot does not fit in int32",
                         "(page << log2(page_size)) + page_size - 1 <= 2^31 - 1");
    }
  }
}

// ---- short_context_topk (indexer.md §6) ----

const VariantList<ShortContextTopkArgs> kShortContextTopk = {
    {"ref", nullptr, nullptr, ref::short_context_topk},
};

void validate(ShortContextTopkArgs& a, const Options&) {
  constexpr const char* op = "short_context_topk";
  check_index_array(op, "positions", a.positions, {kAny});
  a.T = a.positions.size(0);
  check_topk_output(op, "topk_indices", a.topk_indices, a.T, kIndexerTopk);
  check_no_overlap(op, "topk_indices", a.topk_indices, "positions", a.positions);
  const IndexReader positions(a.positions);
  constexpr int64_t kMaxPosition = 4 * kIndexerTopk + 2;  // (p + 1) / 4 <= 512
  for (int64_t t = 0; t < a.T; ++t) {
    const int64_t p = positions(t);
    if (p < 0 || p > kMaxPosition)
      fail<IndexError>(op, "positions", {t}, str(p),
                       p < 0 ? "negative position" : "too many entries for the short-context fill",
                       "0 <= position and (position + 1) / 4 <= 512");
  }
}

// ---- indexer_topk (indexer.md §7) ----

const VariantList<IndexerTopkArgs> kIndexerTopkList = {
    {"amx", opt::amx_available, opt::amx_target, opt::indexer_topk_amx},
    {"avx512bf16", opt::avx512bf16_available, opt::avx512bf16_target, opt::indexer_topk_avx512bf16},
    {"hwy", nullptr, opt::hwy_target, opt::indexer_topk_hwy},
    {"ref", nullptr, nullptr, ref::indexer_topk},
};

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
  check_index_array(op, "query_start_loc", a.query_start_loc, {kAny});
  if (a.query_start_loc.size(0) < 1)
    fail_shape(op, "query_start_loc", a.query_start_loc, "I32 or I64 [R + 1], contiguous");
  a.R = a.query_start_loc.size(0) - 1;
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
  check_no_overlap(op, "topk_indices", a.topk_indices, "q_fp8", a.q_fp8);
  check_no_overlap(op, "topk_indices", a.topk_indices, "weights", a.weights);
  check_no_overlap(op, "topk_indices", a.topk_indices, "query_start_loc", a.query_start_loc);
  check_no_overlap(op, "topk_indices", a.topk_indices, "seq_lens", a.seq_lens);
  check_no_overlap(op, "topk_indices", a.topk_indices, "block_table", a.block_table);
  check_no_overlap(op, "topk_indices", a.topk_indices, "kv_cache", a.kv_cache);
  // (d) query_start_loc, seq_lens, then (long steps) the block-table entries read
  if (qsl(0) != 0)
    fail<IndexError>(op, "query_start_loc", {0}, str(qsl(0)), "not zero",
                     "query_start_loc[0] = 0");
  for (int64_t r = 0; r < a.R; ++r)
    if (qsl(r + 1) < qsl(r))
      fail<IndexError>(op, "query_start_loc", {r + 1}, str(qsl(r + 1)), "decreasing",
                       ">= query_start_loc[" + str(r) + "] = " + str(qsl(r)));
  const IndexReader seq_lens(a.seq_lens), block_table(a.block_table);
  int64_t max_entries = 0;
  for (int64_t r = 0; r < a.R; ++r) {
    const int64_t len = seq_lens(r), q_len = qsl(r + 1) - qsl(r);
    if (len < q_len)
      fail<IndexError>(op, "seq_lens", {r}, str(len), "shorter than the request's query tokens",
                       "seq_len >= " + str(q_len) + " = query_start_loc[" + str(r + 1) +
                           "] - query_start_loc[" + str(r) + "]");
    max_entries = std::max(max_entries, len / 4);
  }
  a.short_context = max_entries <= kIndexerTopk;  // §7.2
  if (a.short_context) return;
  const int64_t P = a.block_size, MB = a.block_table.size(1), num_pages = a.kv_cache.size(0);
  for (int64_t r = 0; r < a.R; ++r) {
    const int64_t L = seq_lens(r) / 4;
    if (pages_for(L, P) > MB)
      fail<IndexError>(op, "seq_lens", {r}, str(seq_lens(r)),
                       "its " + str(L) + " compressed entries need " + str(pages_for(L, P)) +
                           " pages of " + str(P),
                       "ceil((seq_len / 4) / block_size) <= " + str(MB) +
                           " = block_table columns");
  }
  for (int64_t r = 0; r < a.R; ++r) {
    for (int64_t c = 0; c < pages_for(seq_lens(r) / 4, P); ++c) {
      const int64_t page = block_table(r, c);
      if (page < 0 || page >= num_pages)
        fail<IndexError>(op, "block_table", {r, c}, str(page),
                         page < 0 ? "negative block id in the covered range"
                                  : "block id beyond the cache",
                         "0 <= block id < " + str(num_pages) + " = num_pages");
    }
  }
  // (e) finiteness (a long step reads every query row's codes and weights)
  if (!o.check_finite) return;
  check_fp8_codes(op, "q_fp8", a.q_fp8);
  check_finite_f32(op, "weights", a.weights);
}

}  // namespace

void check_weights_out(const FusedIndexerQRopeQuantArgs& a, const float* weights_out,
                       const RunContext& ctx) {
  if (!ctx.check_finite) return;
  const IndexReader positions(a.positions);
  for (int64_t t = 0; t < a.T; ++t) {
    for (int64_t h = 0; h < a.H; ++h) {
      const float v = weights_out[t * a.H + h];
      if (std::isfinite(v)) continue;
      const std::string token = "token " + str(t);
      throw NonFiniteError("fused_indexer_q_rope_quant", token, {t, h}, format_float(v),
                           token + " (position " + str(positions(t)) + "): weights_out head " +
                               str(h) + " = " + format_float(v) +
                               ": intermediate overflow (expected finite; nothing was written)");
    }
  }
}

void list_indexer_ops(std::vector<OpInfo>& out) {
  out.push_back(make_op_info("fused_indexer_q_rope_quant", kFusedIndexerQRopeQuant));
  out.push_back(make_op_info("fp8_paged_mqa_logits", kFp8PagedMqaLogits));
  out.push_back(make_op_info("topk_transform_512", kTopkTransform512));
  out.push_back(make_op_info("topk_transform_1024", kTopkTransform1024));
  out.push_back(make_op_info("short_context_topk", kShortContextTopk));
  out.push_back(make_op_info("indexer_topk", kIndexerTopkList));
}

}  // namespace detail

void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                const TensorView& positions, const TensorView& cos_sin_cache,
                                float softmax_scale, float head_scale, const TensorView& q_fp8,
                                const TensorView& weights_out, const Options& options) {
  detail::FusedIndexerQRopeQuantArgs a{q,          weights, positions,  cos_sin_cache,
                                       softmax_scale, head_scale, q_fp8, weights_out};
  detail::run_op("fused_indexer_q_rope_quant", detail::kFusedIndexerQRopeQuant, a, options,
                 [](auto& args, const Options& o) { detail::validate(args, o); });
}

void fused_indexer_q_rope_quant(const TensorView& q, const TensorView& weights,
                                const TensorView& positions, const TensorView& cos_sin_cache,
                                const TensorView& q_fp8, const TensorView& weights_out,
                                const Options& options) {
  fused_indexer_q_rope_quant(q, weights, positions, cos_sin_cache, kIndexerSoftmaxScale,
                             kIndexerHeadScale, q_fp8, weights_out, options);
}

void fp8_paged_mqa_logits(const TensorView& q_fp8, const TensorView& kv_cache,
                          const TensorView& weights, const TensorView& seq_lens,
                          const TensorView& page_table, int64_t block_size, int64_t max_seq_len,
                          const TensorView& logits, int64_t next_n, const Options& options) {
  detail::Fp8PagedMqaLogitsArgs a{q_fp8,      kv_cache,    weights, seq_lens, page_table,
                                  block_size, max_seq_len, logits,  next_n};
  detail::run_op("fp8_paged_mqa_logits", detail::kFp8PagedMqaLogits, a, options,
                 [](auto& args, const Options& o) { detail::validate(args, o); });
}

TopkMode parse_topk_mode(const char* op, std::string_view text) {
  if (text == "canonical") return TopkMode::canonical;
  if (text == "vllm") return TopkMode::vllm;
  detail::fail_value(op, "mode", std::string(text), "unknown mode", "canonical or vllm");
}

void topk_transform_512(const TensorView& scores, const TensorView& seq_lens,
                        const TensorView& page_table, int64_t page_size, TopkMode mode,
                        const TensorView& raw_indices, const TensorView& page_indices,
                        const Options& options) {
  detail::TopkTransformArgs a{scores,      seq_lens,     page_table, page_size, mode,
                              raw_indices, page_indices, 512};
  detail::run_op("topk_transform_512", detail::kTopkTransform512, a, options,
                 [](auto& args, const Options&) {
                   detail::validate_topk_transform("topk_transform_512", args);
                 });
}

void topk_transform_1024(const TensorView& scores, const TensorView& seq_lens,
                         const TensorView& page_table, int64_t page_size,
                         const TensorView& raw_indices, const TensorView& page_indices,
                         const Options& options) {
  detail::TopkTransformArgs a{scores,      seq_lens,     page_table, page_size, TopkMode::canonical,
                              raw_indices, page_indices, 1024};
  detail::run_op("topk_transform_1024", detail::kTopkTransform1024, a, options,
                 [](auto& args, const Options&) {
                   detail::validate_topk_transform("topk_transform_1024", args);
                 });
}

void short_context_topk(const TensorView& positions, const TensorView& topk_indices,
                        const Options& options) {
  detail::ShortContextTopkArgs a{positions, topk_indices};
  detail::run_op("short_context_topk", detail::kShortContextTopk, a, options,
                 [](auto& args, const Options& o) { detail::validate(args, o); });
}

void indexer_topk(const TensorView& q_fp8, const TensorView& weights,
                  const TensorView& query_start_loc, const TensorView& seq_lens,
                  const TensorView& block_table, const TensorView& kv_cache, int64_t block_size,
                  TopkMode mode, const TensorView& topk_indices, const Options& options) {
  detail::IndexerTopkArgs a{q_fp8,       weights,  query_start_loc, seq_lens, block_table,
                            kv_cache,    block_size, mode,          topk_indices};
  detail::run_op("indexer_topk", detail::kIndexerTopkList, a, options,
                 [](auto& args, const Options& o) { detail::validate(args, o); });
}

}  // namespace dsv4cpu
