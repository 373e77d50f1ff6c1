#include "api/compressor_validate.hpp"

#include <cfloat>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/check.hpp"
#include "core/check_block_table.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu::detail {

// ---- save_partial_states (compressor.md §3) ----

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
  for (const auto& [name, in] : {std::pair{"kv", &a.kv},
                                 {"score", &a.score},
                                 {"ape", &a.ape},
                                 {"positions", &a.positions},
                                 {"slot_mapping", &a.slot_mapping}})
    check_no_overlap(op, "state_cache", a.state_cache, name, *in);
  // (d) index elements: positions, then slots (range and distinct valid slots, one pass).
  check_positions(op, a.positions);
  check_distinct_slots(op, "slot_mapping", a.slot_mapping,
                       {a.nb, a.sbs, "the state cache", "rows"});
  if (!o.check_finite) return;
  // (e) the inputs read: kv and score rows of written tokens, the ape rows they use.
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  auto row = [](const TensorView& v, int64_t t) { return v.ptr<const float>() + t * v.stride(0); };
  for (const auto& [name, view] : {std::pair{"kv", &a.kv}, {"score", &a.score}})
    for (int64_t t = 0; t < a.N; ++t)
      if (slot(t) >= 0) check_finite_row(op, name, t, row(*view, t), a.SW);
  const float* ape = a.ape.ptr<const float>();
  std::vector<int64_t> ape_bad(static_cast<size_t>(a.r));  // first non-finite column per ape row
  for (int64_t q = 0; q < a.r; ++q)
    ape_bad[static_cast<size_t>(q)] = first_non_finite(ape + q * a.SW, a.SW);
  for (int64_t t = 0; t < a.N; ++t) {
    const int64_t q = pos(t) % a.r, i = ape_bad[static_cast<size_t>(q)];
    if (slot(t) >= 0 && i < a.SW) fail_non_finite(op, "ape", {q, i}, ape[q * a.SW + i]);
  }
  // (f) the computed sums RN(score + ape) (finite inputs can overflow).
  for (int64_t t = 0; t < a.N; ++t) {
    if (slot(t) < 0) continue;
    const float* s = row(a.score, t);
    const float* e = ape + (pos(t) % a.r) * a.SW;
    const int64_t i = first_non_finite_sum(s, e, a.SW);
    if (i < a.SW) fail_computed(op, t, pos(t), "score + ape channel", i, s[i] + e[i]);
  }
}

// ---- map_local_to_global_slots (compressor.md §4.1) ----

void validate(MapLocalToGlobalSlotsArgs& a, const Options&) {
  constexpr const char* op = "map_local_to_global_slots";
  std::tie(a.N, a.K) = check_mapping_arrays(op, "local_indices", a.local_indices, "req_idx",
                                            a.req_idx, a.block_table, a.block_size);
  check_array(op, "slots", a.slots, {DType::I64}, {a.N, a.K}, Layout::contiguous);
  for (const auto& [name, in] : {std::pair{"local_indices", &a.local_indices},
                                 {"req_idx", &a.req_idx},
                                 {"block_table", &a.block_table}})
    check_no_overlap(op, "slots", a.slots, name, *in);
  check_request_indices(op, "req_idx", a.req_idx, a.block_table.size(0));
  check_local_refs(BlockTableRefs(op, a.block_table, a.block_size), "local_indices",
                   a.local_indices, a.req_idx);
}

// ---- compressor_window_slots (compressor.md §4.2) ----

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

// ---- compress_norm_rope_store, _indexer (compressor.md §6, §7; one validation for both) ----

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
  check_compress_ratio(op, r);
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
  for (const auto& [name, in] : {std::pair{"state_cache", &a.state_cache},
                                 {"gather_slots", &a.gather_slots},
                                 {"positions", &a.positions},
                                 {"kv_slot_mapping", &a.kv_slot_mapping},
                                 {"rms_norm_weight", &a.rms_norm_weight},
                                 {"cos_sin_cache", &a.cos_sin_cache}})
    check_no_overlap(op, "kv_cache", a.kv_cache, name, *in);
  // (d) index elements in signature order, then per emitting token in ascending order: its
  // RoPE row, its own row W - 1, distinct kv slots.
  check_slots(op, "gather_slots", a.gather_slots, {a.nb, a.sbs, "the state cache", "rows"});
  check_positions(op, a.positions);
  check_slots(op, "kv_slot_mapping", a.kv_slot_mapping,
              {a.nblk, P, "the compressed cache", "entries"});
  const IndexReader gather(a.gather_slots), pos(a.positions), kv_slot(a.kv_slot_mapping);
  std::vector<uint8_t> emitting(static_cast<size_t>(a.N));
  int64_t bad = a.N;  // the first emitting token whose RoPE row or own row fails
  bool any_emits = false;
  for (int64_t t = 0; t < a.N; ++t) {
    emitting[static_cast<size_t>(t)] = emits(pos(t), kv_slot(t), r);
    any_emits |= emitting[static_cast<size_t>(t)] != 0;
    if (emitting[static_cast<size_t>(t)] && bad == a.N &&
        ((pos(t) / r) * r >= a.R || gather(t, a.W - 1) < 0))
      bad = t;
  }
  if (const RepeatedSlot rep =
          first_repeated_slot(a.kv_slot_mapping, bad, a.nblk * P, emitting.data()))
    fail_repeated_slot(op, "kv_slot_mapping", a.kv_slot_mapping, rep);
  if (bad < a.N) {
    const int64_t p = pos(bad), p0 = (p / r) * r;
    if (p0 >= a.R)
      fail<IndexError>(op, "positions", {bad}, std::to_string(p),
                       "RoPE row (p / r) * r = " + std::to_string(p0) + " beyond cos_sin_cache",
                       "(p / r) * r < " + std::to_string(a.R) + " rows");
    fail<IndexError>(op, "gather_slots", {bad, a.W - 1}, std::to_string(gather(bad, a.W - 1)),
                     "emitting token " + std::to_string(bad) + " (position " + std::to_string(p) +
                         ") has no own state row",
                     "a valid slot in column W - 1 of an emitting token");
  }
  if (!o.check_finite || !any_emits) return;
  // (e) the float inputs read: the weight, the cos/sin rows of emitting tokens.
  check_finite(op, "rms_norm_weight", a.rms_norm_weight);
  const float* cs = a.cos_sin_cache.ptr<const float>();
  for (int64_t t = 0; t < a.N; ++t) {
    if (!emitting[static_cast<size_t>(t)]) continue;
    const int64_t p0 = (pos(t) / r) * r;
    check_finite_row(op, "cos_sin_cache", p0, cs + p0 * 64, 64);
  }
  // (f) is the kernel's: it computes every entry into scratch and checks before writing.
}

// ---- make_cos_sin_cache (compressor.md §8.2) ----

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
      if (!std::isfinite(v) || !ok)
        fail_value(op, name, format_float(v), "outside its domain", expected);
    };
    need("factor", y.factor, y.factor >= 1, "finite and >= 1");
    need("original_max", y.original_max, y.original_max >= 1, "finite and >= 1");
    need("beta_fast", y.beta_fast, y.beta_fast > y.beta_slow, "finite and > beta_slow");
    need("beta_slow", y.beta_slow, y.beta_slow > 0, "finite and > 0");
    need("mscale", y.mscale, y.mscale > 0, "finite and > 0");
  }
  check_array(op, "out", a.out, {DType::F32}, {a.rows, 64}, Layout::contiguous);
}

}  // namespace dsv4cpu::detail
