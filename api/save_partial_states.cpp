// save_partial_states (compressor.md §3): the validation (bad-input.md §1.4 order, §4 tables), run
// before any variant so that every variant throws the same error, and the public entry point: pack
// the arguments, detail::run (api/registry.hpp).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "api/compressor_checks.hpp"
#include "api/registry.hpp"
#include "args/compressor.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "core/check_index.hpp"
#include "core/parallel.hpp"

namespace dsv4cpu {
namespace detail {

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
  check_state_cache(op, a.state_cache, 2 * a.SW);
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
  const IndexReader pos(a.positions), slot(a.slot_mapping);
  auto row = [](const TensorView& v, int64_t t) { return v.ptr<const float>() + t * v.stride(0); };
  const float* ape = a.ape.ptr<const float>();
  // (e) and (f) in one pass over the rows a written token reads; only a failing call runs the
  // scans below, which find the first offender in the order of the steps. Each ape row a written
  // token uses is read once: when it and the token's score row are below 2^127 in magnitude, every
  // sum is finite (|score + ape| <= 2·(2^127 - 2^103) = FLT_MAX), so the pass reads only the kv
  // and score rows; a token past that bound is decided by its sums.
  bool small_ape[128], seen[128];  // r <= 128; small_ape[q] is set where seen[q]
  std::fill_n(seen, a.r, false);
  for (int64_t t = 0; t < a.N; ++t) {
    const auto q = static_cast<size_t>(pos(t) % a.r);
    if (slot(t) < 0 || seen[q]) continue;
    seen[q] = true;
    small_ape[q] = finite_and_below(nullptr, 0, ape + static_cast<int64_t>(q) * a.SW, a.SW, 127);
  }
  const int threads = threads_for(o.num_threads, a.N * a.SW * 8);
  if (parallel_first(a.N, threads, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          if (slot(t) < 0) continue;
          const int64_t q = pos(t) % a.r;
          const float *kv = row(a.kv, t), *score = row(a.score, t);
          if (!(small_ape[q] && finite_and_below(kv, a.SW, score, a.SW, 127)) &&
              !finite_with_sum(kv, score, ape + q * a.SW, a.SW))
            return t;
        }
        return t1;
      }) == a.N)
    return;
  // (e) the inputs read: kv and score rows of written tokens, the ape rows they use.
  for (const auto& [name, view] : {std::pair{"kv", &a.kv}, {"score", &a.score}})
    for (int64_t t = 0; t < a.N; ++t)
      if (slot(t) >= 0) check_finite_row(op, name, t, row(*view, t), a.SW);
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
    const int64_t q = pos(t) % a.r;
    const float* e = ape + q * a.SW;
    const int64_t i = first_non_finite_sum(s, e, a.SW);
    if (i < a.SW)
      fail_computed(op, t, pos(t), "score + ape channel", i, s[i] + e[i],
                    ", from score" + format_index({t, i}) + " = " + format_f32(s[i]) + " and ape" +
                        format_index({q, i}) + " = " + format_f32(e[i]));
  }
}

}  // namespace detail

void save_partial_states(const TensorView& kv, const TensorView& score, const TensorView& ape,
                         const TensorView& positions, const MutableTensorView& state_cache,
                         const TensorView& slot_mapping, const Options& options) {
  detail::SavePartialStatesArgs a{kv, score, ape, positions, state_cache, slot_mapping};
  detail::run("save_partial_states", a, options);
}

}  // namespace dsv4cpu
