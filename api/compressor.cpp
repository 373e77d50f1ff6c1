// Compressor ops: validation (bad-input.md §4, shared by all variants), the ordered variant lists
// (reference last), and the public entry points.
#include <cfloat>
#include <cmath>
#include <unordered_map>

#include "api/compressor_args.hpp"
#include "core/check.hpp"
#include "optimized/compressor.hpp"
#include "reference/compressor.hpp"

namespace dsv4cpu {
namespace detail {

void fail_intermediate(const char* op, int64_t t, int64_t position, const char* quantity,
                       int64_t channel, float value) {
  const std::string token = "token " + std::to_string(t);
  const std::string what = std::string(quantity) +
                           (channel >= 0 ? " " + std::to_string(channel) : std::string());
  const std::string text = format_float(value);
  const std::string problem = std::isnan(value) ? "not finite" : "intermediate overflow";
  throw NonFiniteError(op, token,
                       channel >= 0 ? std::vector<int64_t>{channel} : std::vector<int64_t>{},
                       text,
                       token + " (position " + std::to_string(position) + "): " + what + " = " +
                           text + ": " + problem + " (expected finite; nothing was written)");
}

namespace {

// ---- checks shared by several ops ----

// bad-input.md §3: a write or gather slot is -1 or in [0, pages × per_page) of its cache.
// Index lists are initializer lists so that the passing path allocates nothing.
void check_slot(const char* op, const char* name, std::initializer_list<int64_t> idx, int64_t slot,
                int64_t pages, int64_t per_page, const char* cache, const char* unit) {
  if (slot >= -1 && slot < pages * per_page) return;
  fail<IndexError>(op, name, std::vector<int64_t>(idx), std::to_string(slot),
                   slot < 0 ? "negative slot other than -1" : std::string("slot beyond ") + cache,
                   "-1 or 0 <= slot < " + std::to_string(pages * per_page) + " = " +
                       std::to_string(pages) + " pages x " + std::to_string(per_page) + " " +
                       unit);
}

void check_positions(const char* op, const TensorView& positions) {
  const IndexReader pos(positions);
  for (int64_t t = 0; t < positions.size(0); ++t)
    if (pos(t) < 0)
      fail<IndexError>(op, "positions", {t}, std::to_string(pos(t)), "negative position", ">= 0");
}

void check_request_indices(const char* op, const char* name, const TensorView& req_idx,
                           int64_t R) {
  const IndexReader req(req_idx);
  for (int64_t n = 0; n < req_idx.size(0); ++n)
    if (req(n) < 0 || req(n) >= R)
      fail<IndexError>(op, name, {n}, std::to_string(req(n)), "request index out of range",
                       "0 <= " + std::string(name) + " < " + std::to_string(R));
}

// compressor.md §4.1: a valid local index l >= 0 reads block-table column l / P (core/check.hpp).
constexpr BlockTableRefs::ColumnWording kLocalIndexColumn{"", "local index / block_size"};

void check_block_size(const char* op, const char* name, int64_t P) {
  if (P < 1)
    fail_value(op, name, std::to_string(P), "not a positive block size",
               std::string(name) + " >= 1");
}

void check_ratio(const char* op, int64_t r) {
  if (r != 4 && r != 128)
    fail_value(op, "compress_ratio", std::to_string(r), "unsupported compress ratio", "4 or 128");
}

void check_finite_element(const char* op, const char* name, std::initializer_list<int64_t> idx,
                          float v) {
  if (!std::isfinite(v))
    fail<NonFiniteError>(op, name, std::vector<int64_t>(idx), format_float(v), "not finite",
                         "a finite value");
}

// ---- save_partial_states (compressor.md §3) ----

const VariantList<SavePartialStatesArgs> kSavePartialStates = {
    {"hwy", nullptr, opt::hwy_target, opt::save_partial_states},
    {"ref", nullptr, nullptr, ref::save_partial_states},
};

void validate(SavePartialStatesArgs& a, const Options& o) {
  constexpr const char* op = "save_partial_states";
  // (b) shapes; r and SW come from ape (bad-input.md §3).
  check_array(op, "ape", a.ape, {DType::F32}, {kAny, kAny}, Layout::contiguous);
  a.r = a.ape.size(0);
  a.SW = a.ape.size(1);
  if (a.r != 4 && a.r != 128)
    fail_value(op, "ape.shape[0]", std::to_string(a.r), "unsupported compress ratio r",
               "r = 4 or 128");
  if (a.SW != 128 && a.SW != 256 && a.SW != 512 && a.SW != 1024)
    fail_value(op, "ape.shape[1]", std::to_string(a.SW), "unsupported state width SW",
               "SW = coff * HD in {128, 256, 512, 1024}");
  check_array(op, "kv", a.kv, {DType::F32}, {kAny, a.SW}, Layout::unit_inner);
  a.N = a.kv.size(0);
  check_array(op, "score", a.score, {DType::F32}, {a.N, a.SW}, Layout::unit_inner);
  check_index_array(op, "positions", a.positions, {a.N});
  check_array(op, "state_cache", a.state_cache, {DType::F32}, {kAny, kAny, 2 * a.SW},
              Layout::rows_contiguous);
  a.nb = a.state_cache.size(0);
  a.sbs = a.state_cache.size(1);
  check_index_array(op, "slot_mapping", a.slot_mapping, {a.N});
  // (c) the in-place state cache against every input.
  check_no_overlap(op, "state_cache", a.state_cache, "kv", a.kv);
  check_no_overlap(op, "state_cache", a.state_cache, "score", a.score);
  check_no_overlap(op, "state_cache", a.state_cache, "ape", a.ape);
  check_no_overlap(op, "state_cache", a.state_cache, "positions", a.positions);
  check_no_overlap(op, "state_cache", a.state_cache, "slot_mapping", a.slot_mapping);
  // (d) index elements: positions, then slots (range, then distinct among valid slots).
  check_positions(op, a.positions);
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  std::unordered_map<int64_t, int64_t> writer;  // slot -> first token writing it
  for (int64_t t = 0; t < a.N; ++t) {
    const int64_t g = slot(t);
    check_slot(op, "slot_mapping", {t}, g, a.nb, a.sbs, "the state cache", "rows");
    if (g < 0) continue;
    const auto [it, fresh] = writer.emplace(g, t);
    if (!fresh)
      fail<IndexError>(op, "slot_mapping", {t}, std::to_string(g),
                       "state slot already written by token " + std::to_string(it->second),
                       "distinct valid slots");
  }
  if (!o.check_finite) return;
  // (e) the inputs read: kv and score rows of written tokens, the ape rows they use.
  auto row = [](const TensorView& v, int64_t t) { return v.ptr<const float>() + t * v.stride(0); };
  const float* ape = a.ape.ptr<const float>();
  for (const auto& [name, view] : {std::pair<const char*, const TensorView*>{"kv", &a.kv},
                                   {"score", &a.score}})
    for (int64_t t = 0; t < a.N; ++t) {
      if (slot(t) < 0) continue;
      const float* x = row(*view, t);
      const int64_t i = first_non_finite(a.SW, [x](int64_t k) { return x[k]; });
      if (i < a.SW) check_finite_element(op, name, {t, i}, x[i]);
    }
  std::vector<int64_t> ape_bad(static_cast<size_t>(a.r));  // first non-finite column per ape row
  for (int64_t q = 0; q < a.r; ++q)
    ape_bad[static_cast<size_t>(q)] =
        first_non_finite(a.SW, [&](int64_t k) { return ape[q * a.SW + k]; });
  for (int64_t t = 0; t < a.N; ++t) {
    const int64_t q = pos(t) % a.r, i = ape_bad[static_cast<size_t>(q)];
    if (slot(t) >= 0 && i < a.SW) check_finite_element(op, "ape", {q, i}, ape[q * a.SW + i]);
  }
  // (f) the computed sums RN(score + ape) (finite inputs can overflow).
  for (int64_t t = 0; t < a.N; ++t) {
    if (slot(t) < 0) continue;
    const float* s = row(a.score, t);
    const float* e = ape + (pos(t) % a.r) * a.SW;
    const int64_t i = first_non_finite(a.SW, [s, e](int64_t k) { return s[k] + e[k]; });
    if (i < a.SW) fail_intermediate(op, t, pos(t), "score + ape channel", i, s[i] + e[i]);
  }
}

// ---- map_local_to_global_slots (compressor.md §4.1) ----

const VariantList<MapLocalToGlobalSlotsArgs> kMapLocalToGlobalSlots = {
    {"hwy", nullptr, opt::hwy_target, opt::map_local_to_global_slots},
    {"ref", nullptr, nullptr, ref::map_local_to_global_slots},
};

void validate(MapLocalToGlobalSlotsArgs& a, const Options&) {
  constexpr const char* op = "map_local_to_global_slots";
  check_block_size(op, "block_size", a.block_size);
  check_array(op, "local_indices", a.local_indices, {DType::I32, DType::I64}, {kAny, kAny},
              Layout::unit_inner);
  a.N = a.local_indices.size(0);
  a.K = a.local_indices.size(1);
  check_index_array(op, "req_idx", a.req_idx, {a.N});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "slots", a.slots, {DType::I64}, {a.N, a.K}, Layout::contiguous);
  check_no_overlap(op, "slots", a.slots, "local_indices", a.local_indices);
  check_no_overlap(op, "slots", a.slots, "req_idx", a.req_idx);
  check_no_overlap(op, "slots", a.slots, "block_table", a.block_table);
  check_request_indices(op, "req_idx", a.req_idx, a.block_table.size(0));
  const IndexReader local(a.local_indices), req(a.req_idx);
  const BlockTableRefs refs(op, a.block_table, a.block_size, kLocalIndexColumn);
  for (int64_t n = 0; n < a.N; ++n)
    for (int64_t k = 0; k < a.K; ++k) {
      const int64_t l = local(n, k);
      if (l >= 0)
        refs.check(req(n), refs.column(l), [&] {
          return BlockTableReferrer{"local_indices", {n, k}, l, ""};
        });
    }
}

// ---- compressor_window_slots (compressor.md §4.2) ----

const VariantList<CompressorWindowSlotsArgs> kCompressorWindowSlots = {
    {"ref", nullptr, nullptr, ref::compressor_window_slots},
};

void validate(CompressorWindowSlotsArgs& a, const Options&) {
  constexpr const char* op = "compressor_window_slots";
  check_block_size(op, "block_size", a.block_size);
  check_ratio(op, a.compress_ratio);
  a.W = (a.overlap ? 2 : 1) * a.compress_ratio;
  check_index_array(op, "positions", a.positions, {kAny});
  a.N = a.positions.size(0);
  check_index_array(op, "token_to_req", a.token_to_req, {a.N});
  check_index_array(op, "block_table", a.block_table, {kAny, kAny}, Layout::rows_contiguous);
  check_array(op, "gather_slots", a.gather_slots, {DType::I64}, {a.N, a.W}, Layout::contiguous);
  check_no_overlap(op, "gather_slots", a.gather_slots, "positions", a.positions);
  check_no_overlap(op, "gather_slots", a.gather_slots, "token_to_req", a.token_to_req);
  check_no_overlap(op, "gather_slots", a.gather_slots, "block_table", a.block_table);
  check_positions(op, a.positions);
  check_request_indices(op, "token_to_req", a.token_to_req, a.block_table.size(0));
  const IndexReader pos(a.positions), req(a.token_to_req);
  const BlockTableRefs refs(op, a.block_table, a.block_size, kLocalIndexColumn);
  for (int64_t t = 0; t < a.N; ++t)
    for (int64_t w = 0; w < a.W; ++w) {
      const int64_t l = pos(t) - a.W + 1 + w;
      if (l >= 0)
        refs.check(req(t), refs.column(l), [&] {
          return BlockTableReferrer{"positions", {t}, pos(t),
                                    " (window column " + std::to_string(w) + ", local index " +
                                        std::to_string(l) + ")"};
        });
    }
}

// ---- compress_norm_rope_store, _indexer (compressor.md §6, §7; one validation, one kernel) ----

const VariantList<CompressNormRopeStoreArgs> kCompressNormRopeStore = {
    {"hwy", nullptr, opt::hwy_target, opt::compress_norm_rope_store},
    {"ref", nullptr, nullptr, ref::compress_norm_rope_store},
};

const VariantList<CompressNormRopeStoreArgs> kCompressNormRopeStoreIndexer = {
    {"hwy", nullptr, opt::hwy_target, opt::compress_norm_rope_store},
    {"ref", nullptr, nullptr, ref::compress_norm_rope_store},
};

void validate(CompressNormRopeStoreArgs& a, const Options& o) {
  const char* op = a.op;
  const int HD = a.layout.hd;
  const int64_t r = a.compress_ratio, P = a.kv_cache_block_size;
  // (a) scalars in signature order.
  if (!std::isfinite(a.rms_norm_eps) || a.rms_norm_eps < 0 || a.rms_norm_eps > FLT_MAX)
    fail_value(op, "rms_norm_eps", format_float(a.rms_norm_eps), "outside its domain",
               "finite, 0 <= eps <= FLT_MAX");
  a.eps_f = static_cast<float>(a.rms_norm_eps);
  check_block_size(op, "kv_cache_block_size", P);
  check_ratio(op, r);
  a.clamp = a.layout.raw_scale ? ScaleClamp::gpu : a.scale_clamp;
  // (b) shapes in signature order; W from gather_slots fixes SW = (W / r)·HD.
  check_array(op, "state_cache", a.state_cache, {DType::F32}, {kAny, kAny, kAny},
              Layout::rows_contiguous);
  check_index_array(op, "gather_slots", a.gather_slots, {kAny, kAny});
  a.N = a.gather_slots.size(0);
  a.W = a.gather_slots.size(1);
  if (a.W != r && a.W != 2 * r)
    fail_shape(op, "gather_slots", a.gather_slots,
               "I32 or I64 [*, W], contiguous, W = r or 2r = " + std::to_string(r) + " or " +
                   std::to_string(2 * r));
  a.SW = (a.W / r) * HD;
  check_array(op, "state_cache", a.state_cache, {DType::F32}, {kAny, kAny, 2 * a.SW},
              Layout::rows_contiguous);
  a.nb = a.state_cache.size(0);
  a.sbs = a.state_cache.size(1);
  check_index_array(op, "positions", a.positions, {a.N});
  check_index_array(op, "kv_slot_mapping", a.kv_slot_mapping, {a.N});
  check_array(op, "rms_norm_weight", a.rms_norm_weight, {DType::F32}, {HD}, Layout::contiguous);
  check_array(op, "cos_sin_cache", a.cos_sin_cache, {DType::F32}, {kAny, 64}, Layout::contiguous);
  a.R = a.cos_sin_cache.size(0);
  check_array(op, "kv_cache", a.kv_cache, {DType::U8}, {kAny, kAny}, Layout::rows_contiguous);
  a.nblk = a.kv_cache.size(0);
  const int64_t entry = a.layout.entry_bytes();
  if (a.kv_cache.size(1) / entry < P)
    fail_shape(op, "kv_cache", a.kv_cache,
               "U8 [*, page_bytes >= P * " + std::to_string(entry) + "] with P = " +
                   std::to_string(P) + ", unit inner stride, page stride >= page_bytes");
  // (c) the in-place cache against every input.
  check_no_overlap(op, "kv_cache", a.kv_cache, "state_cache", a.state_cache);
  check_no_overlap(op, "kv_cache", a.kv_cache, "gather_slots", a.gather_slots);
  check_no_overlap(op, "kv_cache", a.kv_cache, "positions", a.positions);
  check_no_overlap(op, "kv_cache", a.kv_cache, "kv_slot_mapping", a.kv_slot_mapping);
  check_no_overlap(op, "kv_cache", a.kv_cache, "rms_norm_weight", a.rms_norm_weight);
  check_no_overlap(op, "kv_cache", a.kv_cache, "cos_sin_cache", a.cos_sin_cache);
  // (d) index elements in signature order, then the rules of emitting tokens.
  const IndexReader gather(a.gather_slots), pos(a.positions), kv_slot(a.kv_slot_mapping);
  for (int64_t t = 0; t < a.N; ++t)
    for (int64_t w = 0; w < a.W; ++w)
      check_slot(op, "gather_slots", {t, w}, gather(t, w), a.nb, a.sbs, "the state cache",
                 "rows");
  check_positions(op, a.positions);
  for (int64_t t = 0; t < a.N; ++t)
    check_slot(op, "kv_slot_mapping", {t}, kv_slot(t), a.nblk, P, "the compressed cache",
               "entries");
  std::unordered_map<int64_t, int64_t> writer;  // kv slot -> first emitting token
  bool any_emits = false;
  for (int64_t t = 0; t < a.N; ++t) {
    const int64_t p = pos(t);
    if (!emits(p, kv_slot(t), r)) continue;
    any_emits = true;
    const int64_t p0 = (p / r) * r;
    if (p0 >= a.R)
      fail<IndexError>(op, "positions", {t}, std::to_string(p),
                       "RoPE row (p / r) * r = " + std::to_string(p0) + " beyond cos_sin_cache",
                       "(p / r) * r < " + std::to_string(a.R) + " rows");
    if (gather(t, a.W - 1) < 0)
      fail<IndexError>(op, "gather_slots", {t, a.W - 1}, std::to_string(gather(t, a.W - 1)),
                       "emitting token " + std::to_string(t) + " (position " + std::to_string(p) +
                           ") has no own state row",
                       "a valid slot in column W - 1 of an emitting token");
    const auto [it, fresh] = writer.emplace(kv_slot(t), t);
    if (!fresh)
      fail<IndexError>(op, "kv_slot_mapping", {t}, std::to_string(kv_slot(t)),
                       "slot already written by emitting token " + std::to_string(it->second),
                       "distinct slots among emitting tokens");
  }
  if (!o.check_finite || !any_emits) return;
  // (e) the float inputs read: the weight, the cos/sin rows of emitting tokens.
  const float* weight = a.rms_norm_weight.ptr<const float>();
  for (int64_t d = 0; d < HD; ++d) check_finite_element(op, "rms_norm_weight", {d}, weight[d]);
  const float* cs = a.cos_sin_cache.ptr<const float>();
  for (int64_t t = 0; t < a.N; ++t) {
    if (!emits(pos(t), kv_slot(t), r)) continue;
    const int64_t p0 = (pos(t) / r) * r;
    for (int64_t k = 0; k < 64; ++k) check_finite_element(op, "cos_sin_cache", {p0, k}, cs[p0 * 64 + k]);
  }
  // (f) is the kernel's: it computes every entry into scratch and checks before writing.
}

// ---- make_cos_sin_cache (compressor.md §8.2) ----

const VariantList<MakeCosSinCacheArgs> kMakeCosSinCache = {
    {"ref", nullptr, nullptr, ref::make_cos_sin_cache},
};

void validate(MakeCosSinCacheArgs& a, const Options&) {
  constexpr const char* op = "make_cos_sin_cache";
  if (a.rows < 0 || a.rows > (int64_t{1} << 24))
    fail_value(op, "rows", std::to_string(a.rows), "outside the table range",
               "0 <= rows <= 2^24 = 16777216");
  if (!std::isfinite(a.theta) || !(a.theta > 1))
    fail_value(op, "theta", format_float(a.theta), "outside its domain", "finite and > 1");
  if (a.yarn) {
    const YarnParams& y = *a.yarn;
    auto need = [&](const char* name, double v, bool ok, const char* expected) {
      if (!std::isfinite(v) || !ok) fail_value(op, name, format_float(v), "outside its domain",
                                               expected);
    };
    need("factor", y.factor, y.factor >= 1, "finite and >= 1");
    need("original_max", y.original_max, y.original_max >= 1, "finite and >= 1");
    need("beta_fast", y.beta_fast, y.beta_fast > y.beta_slow, "finite and > beta_slow");
    need("beta_slow", y.beta_slow, y.beta_slow > 0, "finite and > 0");
    need("mscale", y.mscale, y.mscale > 0, "finite and > 0");
  }
  check_array(op, "out", a.out, {DType::F32}, {a.rows, 64}, Layout::contiguous);
}

template <class Args>
void run(const char* op, const VariantList<Args>& list, Args& a, const Options& o) {
  run_op(op, list, a, o, [](Args& args, const Options& opts) { validate(args, opts); });
}

}  // namespace

void list_compressor_ops(std::vector<OpInfo>& out) {
  out.push_back(make_op_info("save_partial_states", kSavePartialStates));
  out.push_back(make_op_info("map_local_to_global_slots", kMapLocalToGlobalSlots));
  out.push_back(make_op_info("compressor_window_slots", kCompressorWindowSlots));
  out.push_back(make_op_info("compress_norm_rope_store", kCompressNormRopeStore));
  out.push_back(make_op_info("compress_norm_rope_store_indexer", kCompressNormRopeStoreIndexer));
  out.push_back(make_op_info("make_cos_sin_cache", kMakeCosSinCache));
}

}  // namespace detail

void save_partial_states(const TensorView& kv, const TensorView& score, const TensorView& ape,
                         const TensorView& positions, const TensorView& state_cache,
                         const TensorView& slot_mapping, const Options& options) {
  detail::SavePartialStatesArgs a{kv, score, ape, positions, state_cache, slot_mapping};
  detail::run("save_partial_states", detail::kSavePartialStates, a, options);
}

void map_local_to_global_slots(const TensorView& local_indices, const TensorView& req_idx,
                               const TensorView& block_table, int64_t block_size,
                               const TensorView& slots, const Options& options) {
  detail::MapLocalToGlobalSlotsArgs a{local_indices, req_idx, block_table, block_size, slots};
  detail::run("map_local_to_global_slots", detail::kMapLocalToGlobalSlots, a, options);
}

void compressor_window_slots(const TensorView& positions, const TensorView& token_to_req,
                             const TensorView& block_table, int64_t block_size,
                             int64_t compress_ratio, bool overlap, const TensorView& gather_slots,
                             const Options& options) {
  detail::CompressorWindowSlotsArgs a{positions,      token_to_req, block_table, block_size,
                                      compress_ratio, overlap,      gather_slots};
  detail::run("compressor_window_slots", detail::kCompressorWindowSlots, a, options);
}

void compress_norm_rope_store(const TensorView& state_cache, const TensorView& gather_slots,
                              const TensorView& positions, const TensorView& kv_slot_mapping,
                              const TensorView& rms_norm_weight, const TensorView& cos_sin_cache,
                              const TensorView& kv_cache, double rms_norm_eps,
                              int64_t kv_cache_block_size, int64_t compress_ratio,
                              ScaleClamp scale_clamp, const Options& options) {
  constexpr const char* op = "compress_norm_rope_store";
  detail::CompressNormRopeStoreArgs a{op,           detail::kMainEntry,  state_cache,
                                      gather_slots, positions,           kv_slot_mapping,
                                      rms_norm_weight, cos_sin_cache,    kv_cache,
                                      rms_norm_eps, kv_cache_block_size, compress_ratio,
                                      scale_clamp};
  detail::run(op, detail::kCompressNormRopeStore, a, options);
}

void compress_norm_rope_store_indexer(const TensorView& state_cache,
                                      const TensorView& gather_slots, const TensorView& positions,
                                      const TensorView& kv_slot_mapping,
                                      const TensorView& rms_norm_weight,
                                      const TensorView& cos_sin_cache, const TensorView& kv_cache,
                                      double rms_norm_eps, int64_t kv_cache_block_size,
                                      int64_t compress_ratio, ScaleClamp scale_clamp,
                                      const Options& options) {
  constexpr const char* op = "compress_norm_rope_store_indexer";
  detail::CompressNormRopeStoreArgs a{op,           detail::kIndexerEntry, state_cache,
                                      gather_slots, positions,             kv_slot_mapping,
                                      rms_norm_weight, cos_sin_cache,      kv_cache,
                                      rms_norm_eps, kv_cache_block_size,   compress_ratio,
                                      scale_clamp};
  detail::run(op, detail::kCompressNormRopeStoreIndexer, a, options);
}

void make_cos_sin_cache(int64_t rows, double theta, const std::optional<YarnParams>& yarn,
                        const TensorView& out) {
  detail::MakeCosSinCacheArgs a{rows, theta, yarn, out};
  detail::run("make_cos_sin_cache", detail::kMakeCosSinCache, a, Options{});
}

ScaleClamp parse_scale_clamp(const char* op, std::string_view text) {
  if (text == "cpu") return ScaleClamp::cpu;
  if (text == "gpu") return ScaleClamp::gpu;
  detail::fail_value(op, "scale_clamp", std::string(text), "unknown mode", "cpu or gpu");
}

}  // namespace dsv4cpu
