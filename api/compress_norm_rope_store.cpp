// compress_norm_rope_store and compress_norm_rope_store_indexer (compressor.md §6, §7): one
// validation for both heads (bad-input.md §1.4 order, §4 tables), run before any variant so that
// every variant throws the same error; the two public entry points (pack the arguments, detail::run
// of api/registry.hpp); parse_scale_clamp.
#include <cfloat>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "api/compressor_checks.hpp"
#include "api/registry.hpp"
#include "args/compressor.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"

namespace dsv4cpu {
namespace detail {

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
  check_state_cache(op, a.state_cache, kAny);
  check_index_array(op, "gather_slots", a.gather_slots, {kAny, kAny});
  a.N = a.gather_slots.size(0);
  a.W = a.gather_slots.size(1);
  if (a.W != r && a.W != 2 * r)
    fail_shape(op, "gather_slots", a.gather_slots,
               "I32 or I64 [*, W], contiguous, W = r or 2r = " + std::to_string(r) + " or " +
                   std::to_string(2 * r));
  a.SW = (a.W / r) * HD;
  check_state_cache(op, a.state_cache, 2 * a.SW);
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
  check_slots(op, "gather_slots", a.gather_slots, {a.nb, a.sbs, "the state cache", "rows"},
              o.num_threads);
  check_positions(op, a.positions);
  check_slots(op, "kv_slot_mapping", a.kv_slot_mapping,
              {a.nblk, P, "the compressed cache", "entries"});
  const IndexReader gather(a.gather_slots), pos(a.positions), kv_slot(a.kv_slot_mapping);
  thread_local std::vector<uint8_t> emitting;  // kept between calls: a decode call allocates none
  if (emitting.size() < static_cast<size_t>(a.N)) emitting.resize(static_cast<size_t>(a.N));
  int64_t bad = a.N;  // the first emitting token whose RoPE row or own row fails
  bool any_emits = false;
  for (int64_t t = 0; t < a.N; ++t) {
    emitting[static_cast<size_t>(t)] = emits(pos(t), kv_slot(t), r);
    any_emits |= emitting[static_cast<size_t>(t)] != 0;
    if (emitting[static_cast<size_t>(t)] && bad == a.N &&
        (rope_row(pos(t), r) >= a.R || gather(t, a.W - 1) < 0))
      bad = t;
  }
  if (const RepeatedSlot rep =
          first_repeated_slot(a.kv_slot_mapping, bad,
                              SlotRange{a.nblk, P, "the compressed cache", "entries"}.size(),
                              emitting.data()))
    fail_repeated_slot(op, "kv_slot_mapping", a.kv_slot_mapping, rep);
  if (bad < a.N) {
    const int64_t p = pos(bad), p0 = rope_row(p, r);
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
    const int64_t p0 = rope_row(pos(t), r);
    check_finite_row(op, "cos_sin_cache", p0, cs + p0 * 64, 64);
  }
  // (f) is the kernel's: it computes every entry into scratch and checks before writing.
}

}  // namespace detail

void compress_norm_rope_store(const TensorView& state_cache, const TensorView& gather_slots,
                              const TensorView& positions, const TensorView& kv_slot_mapping,
                              const TensorView& rms_norm_weight, const TensorView& cos_sin_cache,
                              const MutableTensorView& kv_cache, double rms_norm_eps,
                              int64_t kv_cache_block_size, int64_t compress_ratio,
                              ScaleClamp scale_clamp, const Options& options) {
  constexpr const char* op = "compress_norm_rope_store";
  detail::CompressNormRopeStoreArgs a{op,           detail::kMainEntry,  state_cache,
                                      gather_slots, positions,           kv_slot_mapping,
                                      rms_norm_weight, cos_sin_cache,    kv_cache,
                                      rms_norm_eps, kv_cache_block_size, compress_ratio,
                                      scale_clamp};
  detail::run(op, a, options);
}

void compress_norm_rope_store_indexer(const TensorView& state_cache, const TensorView& gather_slots,
                                      const TensorView& positions,
                                      const TensorView& kv_slot_mapping,
                                      const TensorView& rms_norm_weight,
                                      const TensorView& cos_sin_cache,
                                      const MutableTensorView& kv_cache, double rms_norm_eps,
                                      int64_t kv_cache_block_size, int64_t compress_ratio,
                                      ScaleClamp scale_clamp, const Options& options) {
  constexpr const char* op = "compress_norm_rope_store_indexer";
  detail::CompressNormRopeStoreArgs a{op,           detail::kIndexerEntry, state_cache,
                                      gather_slots, positions,             kv_slot_mapping,
                                      rms_norm_weight, cos_sin_cache,      kv_cache,
                                      rms_norm_eps, kv_cache_block_size,   compress_ratio,
                                      scale_clamp};
  detail::run(op, a, options);
}

ScaleClamp parse_scale_clamp(const char* op, std::string_view text) {
  if (text == "cpu") return ScaleClamp::cpu;
  if (text == "gpu") return ScaleClamp::gpu;
  detail::fail_value(op, "scale_clamp", std::string(text), "unknown mode", "cpu or gpu");
}

}  // namespace dsv4cpu
