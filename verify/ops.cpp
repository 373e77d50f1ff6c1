#include "verify/ops.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "dsv4cpu/attention.hpp"
#include "dsv4cpu/compressor.hpp"
#include "dsv4cpu/indexer.hpp"
#include "dsv4cpu/metadata.hpp"
#include "testing/attention.hpp"
#include "testing/cache_compare.hpp"
#include "testing/oracle.hpp"

namespace dsv4cpu::verify {

namespace {

using testing::compare_exact;
using testing::layout_mismatch;

// ---- shared helpers ----

int64_t extent(const TensorView& v, int dim) {
  return v.present() && dim < v.rank() ? v.size(dim) : 0;
}

std::vector<int64_t> shape_of(const TensorView& v) {
  std::vector<int64_t> s;
  for (int d = 0; v.present() && d < v.rank(); ++d) s.push_back(v.size(d));
  return s;
}

// A fallback extent for a returned array whose expected tensor is absent (expected_error cases):
// the value when it is a modest size, else 0 (the library reports the bad scalar either way, and
// the verifier never allocates gigabytes for a case that must fail).
int64_t plausible(int64_t n) { return n >= 0 && n <= (int64_t{1} << 20) ? n : 0; }

// T = query_start_loc[R] when the view is a usable index vector, else 0.
int64_t total_tokens(const TensorView& qsl) {
  if (!qsl.present() || qsl.rank() != 1 || qsl.size(0) < 1 || !is_index_dtype(qsl.dtype()))
    return 0;
  return plausible(qsl.index_at({qsl.size(0) - 1}));
}

// fixtures.md: a padded state cache may be stored F32 [nb, page_floats] with the scalar
// state_block_size; the op sees [nb, state_block_size, row_floats] with page stride page_floats.
// row_floats = 2·SW is derived from the other arguments (0 when they do not determine it; the
// library then reports them).
template <class View>  // TensorView (an input) or MutableTensorView (in place)
View state_cache_view(Case& c, const View& v, int64_t row_floats) {
  if (!v.present() || v.rank() != 2) {
    if (v.present() && v.rank() == 3 && c.has("state_block_size") &&
        c.integer("state_block_size") != v.size(1))
      throw FixtureError("state_block_size differs from state_cache.shape[1]");
    return v;
  }
  const int64_t sbs = c.integer("state_block_size");  // required for the 2-D form
  if (row_floats <= 0) return v;
  if (sbs < 1 || sbs > v.size(1) / row_floats)
    throw FixtureError("state_cache pages of " + std::to_string(v.size(1)) +
                       " floats cannot hold state_block_size = " + std::to_string(sbs) +
                       " rows of " + std::to_string(row_floats));
  return View(v.data(), v.dtype(), {v.size(0), sbs, row_floats}, {v.size(1), row_floats, 1});
}

Verdict fp8_codes(const std::string& n, const ArrayRef& g, const ArrayRef& w, const Tolerance& t) {
  return testing::compare_fp8_codes(n, g, w, t);
}
Verdict f32_rel(const std::string& n, const ArrayRef& g, const ArrayRef& w, const Tolerance& t) {
  return testing::compare_f32_rel(n, g, w, t);
}

std::vector<int64_t> index_row(const TensorView& table, int64_t r) {
  std::vector<int64_t> out(static_cast<size_t>(table.size(1)));
  for (int64_t k = 0; k < table.size(1); ++k) out[static_cast<size_t>(k)] = table.index_at({r, k});
  return out;
}

template <class T>
void result_vector(Case& c, const std::string& name, DType dtype, std::vector<int64_t> shape,
                   const std::vector<T>& values) {
  c.result(name, dtype, shape, values.data());
}

void split_results(Case& c, const DecodePrefillSplit& s) {
  const int64_t v[4] = {s.num_decodes, s.num_prefills, s.num_decode_tokens, s.num_prefill_tokens};
  const char* names[4] = {"num_decodes", "num_prefills", "num_decode_tokens",
                          "num_prefill_tokens"};
  for (int i = 0; i < 4; ++i) c.result(names[i], DType::I64, {1}, &v[i]);
}

// ---- compressor (compressor.md) ----

void run_save_partial_states(Case& c, const Options& o) {
  const TensorView kv = c.input("kv"), score = c.input("score"), ape = c.input("ape"),
                   positions = c.input("positions"), slots = c.input("slot_mapping");
  const MutableTensorView state =
      state_cache_view(c, c.inout("state_cache"), 2 * plausible(extent(kv, 1)));
  save_partial_states(kv, score, ape, positions, state, slots, o);
}

void run_map_local_to_global_slots(Case& c, const Options& o) {
  const TensorView local = c.input("local_indices"), req = c.input("req_idx"),
                   table = c.input("block_table");
  const int64_t P = c.integer("block_size");
  map_local_to_global_slots(local, req, table, P, c.output("slots", DType::I64, shape_of(local)),
                            o);
}

void run_compressor_window_slots(Case& c, const Options& o) {
  const TensorView positions = c.input("positions"), req = c.input("token_to_req"),
                   table = c.input("block_table");
  const int64_t P = c.integer("block_size"), r = c.integer("compress_ratio");
  const bool overlap = c.boolean("overlap");
  const int64_t W = (overlap ? 2 : 1) * plausible(r);
  compressor_window_slots(positions, req, table, P, r, overlap,
                          c.output("gather_slots", DType::I64, {extent(positions, 0), W}), o);
}

// compressor.md §5: the entries the op writes are those of the emitting tokens.
std::vector<int64_t> emitted_slots(const TensorView& positions, const TensorView& kv_slots,
                                   int64_t r) {
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < positions.size(0); ++t) {
    const int64_t p = positions.index_at({t}), s = kv_slots.index_at({t});
    if (p >= 0 && p % r == r - 1 && s >= 0) slots.push_back(s);
  }
  return slots;
}

template <bool kIndexer>
void run_compress(Case& c, const Options& o) {
  const char* op = kIndexer ? "compress_norm_rope_store_indexer" : "compress_norm_rope_store";
  const int64_t head = kIndexer ? 128 : 512;
  const TensorView gather = c.input("gather_slots"), positions = c.input("positions"),
                   kv_slots = c.input("kv_slot_mapping"), weight = c.input("rms_norm_weight"),
                   table = c.input("cos_sin_cache");
  const double eps = c.real("rms_norm_eps");
  const int64_t P = c.integer("kv_cache_block_size"), r = c.integer("compress_ratio");
  const std::string clamp = c.text("scale_clamp", kIndexer ? "gpu" : "cpu");
  const int64_t W = extent(gather, 1);
  const int64_t row = (r == 4 || r == 128) && (W == r || W == 2 * r) ? 2 * (W / r) * head : 0;
  const TensorView state = state_cache_view(c, c.input("state_cache"), row);
  const testing::EntryLayout layout =
      kIndexer ? testing::EntryLayout::indexer_k : testing::EntryLayout::fp8_ds_mla;
  const MutableTensorView cache = c.inout("kv_cache", [=](const std::string& n, const ArrayRef& g,
                                                          const ArrayRef& w, const Tolerance& t) {
    return testing::compare_compressed_cache(n, g, w, layout, P,
                                             emitted_slots(positions, kv_slots, r), t);
  });
  const ScaleClamp sc = parse_scale_clamp(op, clamp);
  if (kIndexer)
    compress_norm_rope_store_indexer(state, gather, positions, kv_slots, weight, table, cache, eps,
                                     P, r, sc, o);
  else
    compress_norm_rope_store(state, gather, positions, kv_slots, weight, table, cache, eps, P, r,
                             sc, o);
}

void run_make_cos_sin_cache(Case& c, const Options&) {
  const int64_t rows = c.integer("rows");
  const double theta = c.real("theta");
  std::optional<YarnParams> yarn;
  if (c.has("yarn_factor"))  // all five YaRN scalars, none defaulted
    yarn = YarnParams{c.real("yarn_factor"), c.real("yarn_original_max"), c.real("yarn_beta_fast"),
                      c.real("yarn_beta_slow"), c.real("yarn_mscale")};
  make_cos_sin_cache(rows, theta, yarn,
                     c.output("cos_sin_cache", DType::F32, {plausible(rows), 64}));
}

// ---- indexer (indexer.md) ----

void run_fused_indexer_q_rope_quant(Case& c, const Options& o) {
  const TensorView q = c.input("q"), weights = c.input("weights"),
                   positions = c.input("positions"), table = c.input("cos_sin_cache");
  const float softmax_scale = c.real32("softmax_scale", kIndexerSoftmaxScale);
  const float head_scale = c.real32("head_scale", kIndexerHeadScale);
  fused_indexer_q_rope_quant(q, weights, positions, table, softmax_scale, head_scale,
                             c.output("q_fp8", DType::F8_E4M3, shape_of(q), fp8_codes),
                             c.output("weights_out", DType::F32, shape_of(weights), f32_rel), o);
}

void run_fp8_paged_mqa_logits(Case& c, const Options& o) {
  const TensorView q = c.input("q_fp8"), cache = c.input("kv_cache"), weights = c.input("weights"),
                   seq_lens = c.input("seq_lens"), page_table = c.input("page_table");
  const int64_t P = c.integer("block_size"), S = c.integer("max_seq_len"),
                next_n = c.integer("next_n", 1);
  const int64_t rows = q.present() && q.rank() == 4 ? q.size(0) * q.size(1) : extent(q, 0);
  // numerics.md §11.6 against exact logits computed from the (validated) inputs.
  const auto cmp = [=](const std::string& n, const ArrayRef& g, const ArrayRef& w,
                       const Tolerance& t) -> Verdict {
    if (std::string m = layout_mismatch(n, g, w); !m.empty()) return {false, m};
    const int64_t H = q.size(q.rank() - 2);
    std::vector<testing::ExactLogits> exact;
    for (int64_t rho = 0; rho < rows; ++rho) {
      const int64_t b = rho / next_n, j = rho % next_n;
      const int64_t L = seq_lens.rank() == 2
                            ? seq_lens.index_at({b, j})
                            : std::max<int64_t>(0, seq_lens.index_at({b}) - next_n + j + 1);
      try {
        exact.push_back(testing::exact_logits(q.ptr<const uint8_t>() + rho * H * 128,
                                              weights.ptr<const float>() + rho * H, H, cache, P,
                                              index_row(page_table, b), L));
      } catch (const std::out_of_range& e) {
        return {false, "logits row " + std::to_string(rho) + ": " + e.what() + " (page table)"};
      }
    }
    return testing::compare_logits(exact, reinterpret_cast<const float*>(g.data),
                                   reinterpret_cast<const float*>(w.data), w.shape[1],
                                   t.bound_factor.value_or(2));
  };
  fp8_paged_mqa_logits(q, cache, weights, seq_lens, page_table, P, S,
                       c.output("logits", DType::F32, {rows, plausible(S)}, cmp), next_n, o);
}

template <int64_t K>
void run_topk_transform(Case& c, const Options& o) {
  constexpr const char* op = K == 512 ? "topk_transform_512" : "topk_transform_1024";
  const TensorView scores = c.input("scores"), seq_lens = c.input("seq_lens"),
                   page_table = c.input("page_table");
  // page_size matters only with page_indices, which is requested iff page_table is given.
  const int64_t page_size =
      page_table.present() ? c.integer("page_size") : c.integer("page_size", 1);
  const int64_t B = extent(scores, 0);
  const MutableTensorView raw = c.output("raw_indices", DType::I32, {B, K});
  const MutableTensorView pages =
      page_table.present() ? c.output("page_indices", DType::I32, {B, K}) : MutableTensorView();
  if constexpr (K == 512) {
    const TopkMode mode = parse_topk_mode(op, c.text("mode", "canonical"));
    topk_transform_512(scores, seq_lens, page_table, page_size, mode, raw, pages, o);
  } else {
    topk_transform_1024(scores, seq_lens, page_table, page_size, raw, pages, o);
  }
}

void run_short_context_topk(Case& c, const Options& o) {
  const TensorView positions = c.input("positions");
  short_context_topk(positions,
                     c.output("topk_indices", DType::I32, {extent(positions, 0), 512}), o);
}

// numerics.md §11.7 on the rows of indexer_topk (indexer.md §7.2): short-context steps and rows
// with L <= 512 exact, other rows by the band rule against exact scores, for the library's rows
// and the fixture's.
Verdict indexer_topk_compare(const TensorView& q, const TensorView& weights,
                             const TensorView& qsl, const TensorView& seq_lens,
                             const TensorView& table, const TensorView& cache, int64_t P,
                             bool canonical, const std::string& n, const ArrayRef& g,
                             const ArrayRef& w, const Tolerance& t) {
  if (std::string m = layout_mismatch(n, g, w); !m.empty()) return {false, m};
  const int64_t R = seq_lens.size(0), width = w.shape[1];
  bool short_step = true;
  for (int64_t r = 0; r < R; ++r) short_step = short_step && seq_lens.index_at({r}) / 4 <= 512;
  if (short_step) return compare_exact(n, g, w);
  const int64_t H = q.size(1);
  const double factor = t.bound_factor.value_or(1);
  const auto* got = reinterpret_cast<const int32_t*>(g.data);
  const auto* want = reinterpret_cast<const int32_t*>(w.data);
  int64_t banded = 0, differing = 0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t q0 = qsl.index_at({r}), q1 = qsl.index_at({r + 1});
    for (int64_t tok = q0; tok < q1; ++tok) {
      const int32_t* gr = got + tok * width;
      const int32_t* wr = want + tok * width;
      const int64_t L = (seq_lens.index_at({r}) - (q1 - q0) + (tok - q0) + 1) / 4;
      if (std::equal(gr, gr + width, wr)) {
        banded += L > 512;
        continue;
      }
      const std::string row = n + "[" + std::to_string(tok) + "]";
      // Rows with L <= 512 and the columns past 512 must be exact.
      if (L <= 512 || !std::equal(gr + 512, gr + width, wr + 512)) {
        const ArrayRef grow{g.dtype, {width}, g.data + tok * width * 4};
        const ArrayRef wrow{w.dtype, {width}, w.data + tok * width * 4};
        return {false, compare_exact(row, grow, wrow).detail};
      }
      ++banded;
      ++differing;
      testing::ExactLogits exact;
      try {
        exact = testing::exact_logits(q.ptr<const uint8_t>() + tok * H * 128,
                                      weights.ptr<const float>() + tok * H, H, cache, P,
                                      index_row(table, r), L);
      } catch (const std::out_of_range& e) {
        return {false, row + ": " + e.what()};
      }
      if (std::string v = testing::band_rule_violation(gr, 512, exact, factor, canonical);
          !v.empty())
        return {false, row + " (L = " + std::to_string(L) + "): " + v};
      if (std::string v = testing::band_rule_violation(wr, 512, exact, factor, canonical);
          !v.empty())
        return {false, "expected." + row + " (L = " + std::to_string(L) +
                           ") violates the band rule itself: " + v};
    }
  }
  if (differing == 0) return {true, "exact"};
  return {true, "band rule: " + std::to_string(differing) + " of " + std::to_string(banded) +
                    " long rows differ, all accepted"};
}

void run_indexer_topk(Case& c, const Options& o) {
  const TensorView q = c.input("q_fp8"), weights = c.input("weights"),
                   qsl = c.input("query_start_loc"), seq_lens = c.input("seq_lens"),
                   table = c.input("block_table"), cache = c.input("kv_cache");
  const int64_t P = c.integer("block_size");
  const TopkMode mode = parse_topk_mode("indexer_topk", c.text("mode", "canonical"));
  const auto cmp = [=](const std::string& n, const ArrayRef& g, const ArrayRef& w,
                       const Tolerance& t) {
    return indexer_topk_compare(q, weights, qsl, seq_lens, table, cache, P,
                                mode == TopkMode::canonical, n, g, w, t);
  };
  indexer_topk(q, weights, qsl, seq_lens, table, cache, P, mode,
               c.output("topk_indices", DType::I32, {extent(q, 0), 512}, cmp), o);
}

// ---- metadata (metadata.md) ----

void run_token_positions(Case& c, const Options& o) {
  const TensorView qsl = c.input("query_start_loc"), seq_lens = c.input("seq_lens");
  const int64_t T = total_tokens(qsl);
  token_positions(qsl, seq_lens, c.output("positions", DType::I64, {T}),
                  c.output("token_to_req", DType::I32, {T}), o);
}

// The extent of a per-token slot array: num_tokens_padded when given, else T.
int64_t padded_tokens(Case& c, int64_t T) {
  return plausible(c.integer("num_tokens_padded", T));
}

void run_slot_mapping(Case& c, const Options& o) {
  const TensorView positions = c.input("positions"), req = c.input("token_to_req"),
                   table = c.input("block_table");
  const int64_t P = c.integer("block_size");
  const int64_t n = padded_tokens(c, extent(positions, 0));
  slot_mapping(positions, req, table, P, c.output("slot_mapping", DType::I64, {n}), o);
}

void run_split_decodes_and_prefills(Case& c, const Options& o) {
  const TensorView qsl = c.input("query_start_loc");
  split_results(c, split_decodes_and_prefills(qsl, c.integer("threshold"), o));
}

void run_compressed_slot_mapping(Case& c, const Options& o) {
  const TensorView qsl = c.input("query_start_loc"), seq_lens = c.input("seq_lens"),
                   table = c.input("block_table"), own = c.input("token_slot_mapping");
  const int64_t r = c.integer("compress_ratio"), P = c.integer("block_size");
  const int64_t n = padded_tokens(c, total_tokens(qsl));
  compressed_slot_mapping(qsl, seq_lens, table, r, P, own,
                          c.output("slot_mapping", DType::I64, {n}), o);
}

void run_swa_window_indices(Case& c, const Options& o) {
  const TensorView positions = c.input("positions"), req = c.input("token_to_req"),
                   table = c.input("block_table");
  const int64_t window = c.integer("window"), P = c.integer("block_size");
  const int64_t T = extent(positions, 0);
  const MutableTensorView indices = c.output("indices", DType::I64, {T, plausible(window)});
  // lens is optional and requested when the fixture expects it (docs/fixture-ops.md).
  const MutableTensorView lens =
      c.expected("lens") ? c.output("lens", DType::I32, {T}) : MutableTensorView();
  swa_window_indices(positions, req, table, window, P, indices, lens, o);
}

void run_c128a_topk_indices(Case& c, const Options& o) {
  const TensorView positions = c.input("positions"), req = c.input("token_to_req"),
                   table = c.input("block_table");
  const int64_t mml = c.integer("max_model_len"), P = c.integer("block_size");
  const int64_t Wc = mml >= 1 ? plausible(mml / 128 + (mml % 128 != 0)) : 0;
  c128a_topk_indices(positions, req, table, mml, P,
                     c.output("indices", DType::I64, {extent(positions, 0), Wc}), o);
}

void run_c128a_topk_indices_compact(Case& c, const Options& o) {
  const TensorView positions = c.input("positions"), req = c.input("token_to_req"),
                   table = c.input("block_table");
  const int64_t P = c.integer("block_size");
  // The width of expected.indices, else the scalar `width`, else the step's compact width.
  const int64_t W = c.expected("indices") ? 0
                    : c.has("width")      ? plausible(c.integer("width"))
                                          : plausible(c128a_compact_width(positions));
  c128a_topk_indices_compact(positions, req, table, P,
                             c.output("indices", DType::I64, {extent(positions, 0), W}), o);
}

void run_c128a_decode_metadata(Case& c, const Options& o) {
  const TensorView positions = c.input("positions"), req = c.input("token_to_req"),
                   table = c.input("block_table"), own = c.input("token_slot_mapping");
  const int64_t mml = c.integer("max_model_len"), P = c.integer("block_size"),
                nd = c.integer("num_decode_tokens");
  const int64_t T = extent(positions, 0);
  const int64_t width = plausible(c.has("width") ? c.integer("width")
                                                 : c128a_decode_max_width(mml));
  const int64_t ndc = std::clamp<int64_t>(nd, 0, T);
  c128a_decode_metadata(positions, req, table, mml, P, nd, own,
                        c.output("decode_global", DType::I64, {ndc, width}),
                        c.output("decode_lens", DType::I32, {ndc}),
                        c.output("prefill_local", DType::I32, {T - ndc, width}), o);
}

void run_c4a_global_topk_indices(Case& c, const Options& o) {
  const TensorView topk = c.input("topk_indices"), req = c.input("token_to_req"),
                   table = c.input("block_table"), own = c.input("token_slot_mapping");
  const int64_t P = c.integer("block_size");
  const int64_t T = extent(topk, 0);
  c4a_global_topk_indices(topk, req, table, P, own,
                          c.output("indices", DType::I64, {T, extent(topk, 1)}),
                          c.output("lens", DType::I32, {T}), o);
}

void run_indexer_metadata(Case& c, const Options& o) {
  const TensorView qsl = c.input("query_start_loc"), seq_lens = c.input("seq_lens"),
                   table = c.input("block_table");
  const int64_t P = c.integer("block_size"), next_n = c.integer("next_n", 1);
  const IndexerMetadata m =
      indexer_metadata(qsl, seq_lens, table, P, next_n,
                       c.output("slot_mapping", DType::I64, {total_tokens(qsl)}), o);
  split_results(c, m.split);
  const auto R = static_cast<int64_t>(m.compressed_seq_lens.size());
  result_vector(c, "compressed_seq_lens", DType::I32, {R}, m.compressed_seq_lens);
  const IndexerDecodeMetadata decode = m.decode.value_or(IndexerDecodeMetadata{{}, false, next_n, {}});
  const auto nd = static_cast<int64_t>(decode.decode_lens.size());
  result_vector(c, "decode_lens", DType::I32, {nd}, decode.decode_lens);
  result_vector(c, "decode_seq_lens", DType::I32, {nd, decode.next_n}, decode.decode_seq_lens);
  if (!m.prefill) return;  // no prefill chunk: its expected.* tensors fail as not produced
  const IndexerPrefillChunk& p = *m.prefill;
  const std::vector<int64_t> chunk = {p.req_start,   p.req_end,        p.token_start,
                                      p.token_end,   p.total_seq_lens, p.skip_kv_gather ? 1 : 0};
  result_vector(c, "chunk", DType::I64, {6}, chunk);
  const auto size = [](const std::vector<int32_t>& v) { return static_cast<int64_t>(v.size()); };
  result_vector(c, "cu_seq_lens", DType::I32, {size(p.cu_seq_lens)}, p.cu_seq_lens);
  result_vector(c, "cu_seqlen_ks", DType::I32, {size(p.cu_seqlen_ks)}, p.cu_seqlen_ks);
  result_vector(c, "cu_seqlen_ke", DType::I32, {size(p.cu_seqlen_ke)}, p.cu_seqlen_ke);
  result_vector(c, "token_req", DType::I32, {size(p.token_req)}, p.token_req);
  result_vector(c, "token_to_seq", DType::I32, {size(p.token_to_seq)}, p.token_to_seq);
}

void run_split_indexer_prefill_chunks(Case& c, const Options& o) {
  const TensorView compressed = c.input("compressed_lens"), query = c.input("query_lens");
  const int64_t workspace = c.integer("workspace"), budget = c.integer("max_logits_bytes"),
                offset = c.integer("request_offset");
  const std::vector<PrefillChunk> chunks =
      split_indexer_prefill_chunks(compressed, query, workspace, budget, offset, o);
  std::vector<int64_t> rows;
  for (const PrefillChunk& ch : chunks)
    rows.insert(rows.end(), {ch.req_start, ch.req_end, ch.q_start, ch.q_end});
  result_vector(c, "chunks", DType::I64, {static_cast<int64_t>(chunks.size()), 4}, rows);
}

// ---- attention (attention.md) ----

// attention.md §2; lse is requested iff the fixture holds expected.lse. out and lse follow
// numerics.md §11.8 against the fixture, with the bound computed from the inputs.
void run_sparse_mla_attention(Case& c, const Options& o) {
  constexpr const char* op = "sparse_mla_attention";
  const testing::AttentionInputs in{c.input("q"),
                                    c.input("window_cache"),
                                    c.integer("window_block_size"),
                                    c.input("window_slots"),
                                    c.input("compressed_cache"),
                                    c.integer("compressed_block_size"),
                                    c.input("compressed_slots"),
                                    c.input("attn_sink"),
                                    c.real32("scale", kAttentionScale),
                                    parse_nope_decode(op, c.text("nope_decode", "exact"))};
  const int64_t T = extent(in.q, 0), H = extent(in.q, 1);
  const Comparator bound = [in](const std::string& name, const ArrayRef& got,
                                const ArrayRef& want, const Tolerance&) -> Verdict {
    if (std::string m = layout_mismatch(name, got, want); !m.empty()) return {false, m};
    return testing::compare_attention(testing::attention_bound(in), name, got, want);
  };
  const MutableTensorView out = c.output("out", DType::BF16, {T, H, 512}, bound);
  const MutableTensorView lse =
      c.expected("lse") ? c.output("lse", DType::F32, {T, H}, bound) : MutableTensorView();
  sparse_mla_attention(in.q, in.window_cache, in.window_block_size, in.window_slots,
                       in.compressed_cache, in.compressed_block_size, in.compressed_slots,
                       in.attn_sink, in.scale, in.nope_decode, out, lse, o);
}

void run_fused_qnorm_rope_kv_insert(Case& c, const Options& o) {
  constexpr const char* op = "fused_qnorm_rope_kv_insert";
  const TensorView q = c.input("q"), kv = c.input("kv"), positions = c.input("positions"),
                   slots = c.input("slot_mapping"), table = c.input("cos_sin_cache");
  const int64_t Hpad = c.integer("q_head_padded"), P = c.integer("cache_block_size");
  const double eps = c.real("eps");
  const ScaleClamp clamp = parse_scale_clamp(op, c.text("scale_clamp", "cpu"));
  const Fp8Subnormals subnormals = parse_fp8_subnormals(op, c.text("fp8_subnormals", "exact"));
  const MutableTensorView cache = c.inout("swa_cache");
  const MutableTensorView q_out = c.output("q_out", DType::BF16, {extent(q, 0), plausible(Hpad), 512});
  fused_qnorm_rope_kv_insert(q, kv, positions, slots, cache, table, Hpad, eps, P, clamp,
                             subnormals, q_out, o);
}

// attention.md §4; out exact (numerics.md §11.1).
void run_inverse_gptj_rope_o_proj(Case& c, const Options& o) {
  const TensorView x = c.input("o");
  const MutableTensorView out =
      c.output("out", DType::F32, {extent(x, 0), extent(x, 1), extent(x, 2)});
  inverse_gptj_rope_o_proj(x, c.input("positions"), c.input("cos_sin_cache"),
                           c.integer("rope_dim"), out, o);
}

}  // namespace

const std::vector<OpAdapter>& op_adapters() {
  static const std::vector<OpAdapter> table = {
      {"save_partial_states", run_save_partial_states},
      {"map_local_to_global_slots", run_map_local_to_global_slots},
      {"compressor_window_slots", run_compressor_window_slots},
      {"compress_norm_rope_store", run_compress<false>},
      {"compress_norm_rope_store_indexer", run_compress<true>},
      {"make_cos_sin_cache", run_make_cos_sin_cache},
      {"fused_indexer_q_rope_quant", run_fused_indexer_q_rope_quant},
      {"fp8_paged_mqa_logits", run_fp8_paged_mqa_logits},
      {"topk_transform_512", run_topk_transform<512>},
      {"topk_transform_1024", run_topk_transform<1024>},
      {"short_context_topk", run_short_context_topk},
      {"indexer_topk", run_indexer_topk},
      {"token_positions", run_token_positions},
      {"slot_mapping", run_slot_mapping},
      {"split_decodes_and_prefills", run_split_decodes_and_prefills},
      {"compressed_slot_mapping", run_compressed_slot_mapping},
      {"swa_window_indices", run_swa_window_indices},
      {"c128a_topk_indices", run_c128a_topk_indices},
      {"c128a_topk_indices_compact", run_c128a_topk_indices_compact},
      {"c128a_decode_metadata", run_c128a_decode_metadata},
      {"c4a_global_topk_indices", run_c4a_global_topk_indices},
      {"indexer_metadata", run_indexer_metadata},
      {"split_indexer_prefill_chunks", run_split_indexer_prefill_chunks},
      {"sparse_mla_attention", run_sparse_mla_attention},
      {"fused_qnorm_rope_kv_insert", run_fused_qnorm_rope_kv_insert},
      {"inverse_gptj_rope_o_proj", run_inverse_gptj_rope_o_proj},
  };
  return table;
}

const OpAdapter* find_op_adapter(const std::string& name) {
  for (const OpAdapter& a : op_adapters())
    if (name == a.name) return &a;
  return nullptr;
}

}  // namespace dsv4cpu::verify
