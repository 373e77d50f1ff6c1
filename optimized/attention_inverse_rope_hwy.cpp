// Optimized inverse_gptj_rope_o_proj (attention.md §4), written once with Highway and compiled for
// every target of HWY_TARGETS; the driver at the end (HWY_ONCE) runs (token, head) rows on OpenMP
// threads in up to two passes: with check_finite, unless a bound over the whole call proves every
// rotated value finite, the first checks every head's rotated values without writing
// (bad-input.md §1.2); the second writes out. With check_in_write (a fresh out) one pass writes
// out and watches every value it writes. Widening is exact and the
// rotation keeps the reference's operation order (RopePairs of optimized/numerics_hwy-inl.h), so
// the bytes equal the reference's on every target and for any thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optimized/attention_inverse_rope_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "args/attention.hpp"
#include "core/check.hpp"
#include "core/check_finite.hpp"
#include "optimized/numerics_hwy-inl.h"

#ifndef DSV4CPU_INVERSE_ROPE_ONCE  // once per translation unit, for every target and the driver
#define DSV4CPU_INVERSE_ROPE_ONCE
namespace dsv4cpu::detail::opt {
// max_i(|c_i| + |s_i|) of a table row cs (cos_i at i, sin_i at half + i): |x|·bound <= 2^127 for
// every RoPE value x a row rotates with it keeps every rotated value below 2^127·(1 + 2^-23).
inline double rope_row_bound(const float* cs, int64_t half) {
  double bound = 0.0;
  for (int64_t i = 0; i < half; ++i)
    bound = std::max(bound, std::fabs(double{cs[i]}) + std::fabs(double{cs[half + i]}));
  return bound;
}

// What InverseRows does with each row.
enum class RowPass : int {
  kCheck,         // (inputs known finite) check the rotated values, write nothing
  kWrite,         // write the row (WriteRow)
  kWriteWatched,  // write the row, testing every value written (inputs not checked)
};
}  // namespace dsv4cpu::detail::opt
#endif

HWY_BEFORE_NAMESPACE();
namespace dsv4cpu::detail::opt::HWY_NAMESPACE {

// Pairs per step of the exact check: its scratch lives on the stack.
constexpr size_t kCheckPairs = 64;
// Pairs whose RoPE lanes (RopeLanes, reused by the rows of a token) fit on the stack.
constexpr size_t kLanePairs = 256;

// One row's output: o's first n values widened into y, its rope_dim = 2·half RoPE values widened
// kCheckPairs pairs at a time into a stack buffer and rotated back into y + n with the token's
// lanes (each output byte is stored once). Returns, with kWatch, whether every value written is
// finite (else true).
template <bool kWatch>
HWY_INLINE bool WriteRow(const uint16_t* HWY_RESTRICT x, bool f16, size_t n, size_t half,
                         const float* HWY_RESTRICT cd, const float* HWY_RESTRICT sd,
                         float* HWY_RESTRICT y) {
  HWY_ALIGN float rot[2 * kCheckPairs];
  bool finite = Widen16<kWatch>(x, f16, n, y);
  for (size_t i = 0; i < half; i += kCheckPairs) {
    const size_t pairs = std::min(kCheckPairs, half - i);
    Widen16(x + n + 2 * i, f16, 2 * pairs, rot);
    finite = RopePairsWithLanes<true, kWatch>(cd + 2 * i, sd + 2 * i, rot, pairs, y + n + 2 * i) &&
             finite;
  }
  return finite;
}

// The rows [begin, end) of the flattened (token, head) rows, table row positions[t] per token:
// each row's RoPE pairs rotated back (attention.md §4.2). kWrite and kWriteWatched write each row
// to out (WriteRow); kWriteWatched also tests every value written (a non-finite o value widens to
// a non-finite value, and a non-finite cos or sin rotates every pair to one). kCheck checks each
// row: a row whose RoPE values x all have |x|·rope_row_bound <= 2^127 rotates to finite values;
// other rows are rotated into a stack buffer, kCheckPairs pairs at a time, and tested.
// Returns the first row with a non-finite value (end for kWrite).
int64_t InverseRows(const InverseGptjRopeOProjArgs& a, int64_t begin, int64_t end, RowPass pass) {
  const IndexReader pos(a.positions);
  const bool f16 = a.o.dtype() == DType::F16;
  const auto half = static_cast<size_t>(a.rope_dim / 2);
  const auto n = static_cast<size_t>(a.D - a.rope_dim);
  HWY_ALIGN float rot[2 * kCheckPairs];
  double bound = 0.0;  // rope_row_bound of the row's token
  HWY_ALIGN float stack_lanes[4 * kLanePairs];
  std::vector<float> heap_lanes(half > kLanePairs ? 4 * half : 0);
  float* const cd = half > kLanePairs ? heap_lanes.data() : stack_lanes;
  float* const sd = cd + 2 * half;
  int64_t lanes_token = -1;  // the token whose lanes cd and sd hold
  for (int64_t r = begin; r < end; ++r) {
    const float* cs = a.cos_sin_cache.ptr<const float>() + pos(r / a.H) * a.rope_dim;
    const uint16_t* x = a.o.ptr<const uint16_t>() + r * a.D;
    if (pass != RowPass::kCheck) {
      if (r / a.H != lanes_token) {  // the token's lanes, shared by its H rows
        lanes_token = r / a.H;
        RopeLanes<true>(cs, cs + half, half, cd, sd);
      }
      float* y = a.out.ptr<float>() + r * a.D;
      if (pass == RowPass::kWrite)
        WriteRow<false>(x, f16, n, half, cd, sd, y);
      else if (!WriteRow<true>(x, f16, n, half, cd, sd, y))
        return r;
      continue;
    }
    if (r == begin || r % a.H == 0) bound = rope_row_bound(cs, a.rope_dim / 2);
    const uint16_t m = max_magnitude16(x + n, static_cast<int64_t>(2 * half));
    if (static_cast<double>(f16 ? f16_to_f32(m) : bf16_to_f32(m)) * bound <= 0x1p127) continue;
    for (size_t i = 0; i < half; i += kCheckPairs) {
      const size_t pairs = std::min(kCheckPairs, half - i);
      Widen16(x + n + 2 * i, f16, 2 * pairs, rot);
      RopePairs<true>(cs + i, cs + half + i, rot, pairs, rot);
      for (size_t k = 0; k < 2 * pairs; ++k)
        if (!std::isfinite(rot[k])) return r;
    }
  }
  return end;
}

}  // namespace dsv4cpu::detail::opt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/fallback.hpp"
#include "core/parallel.hpp"

namespace dsv4cpu::detail::opt {

HWY_EXPORT(InverseRows);

namespace {

// Whether every rotated value is finite by the bound of InverseRows' row check taken over the
// whole call: |o|max (found by the validation's scan of o) · the largest rope_row_bound of the
// tokens' table rows <= 2^127. When so, no row needs the check.
bool rotation_bounded(const InverseGptjRopeOProjArgs& a) {
  const double x = a.o.dtype() == DType::F16 ? f16_to_f32(a.o_max_magnitude)
                                              : bf16_to_f32(a.o_max_magnitude);
  const IndexReader pos(a.positions);
  double bound = 0.0;
  for (int64_t t = 0; t < a.T; ++t)
    bound = std::max(bound, rope_row_bound(a.cos_sin_cache.ptr<const float>() +
                                               pos(t) * a.rope_dim,
                                           a.rope_dim / 2));
  return x * bound <= 0x1p127;
}

}  // namespace

void inverse_gptj_rope_o_proj(const InverseGptjRopeOProjArgs& a, const RunContext& ctx) {
  const int64_t rows = a.T * a.H;
  if (rows == 0) return;  // bad-input.md §1.5
  const auto run = HWY_DYNAMIC_DISPATCH(InverseRows);
  const int write_threads = threads_for(ctx.num_threads, rows * a.D * 6);
  if (ctx.check_finite && a.check_in_write) {
    // One pass: out (fresh, Options::fresh_outputs) written and every value watched. A value not
    // finite: the inputs' error, step (e), or else the reference's of step (f).
    if (parallel_first(rows, write_threads, [&](int64_t b, int64_t e) {
          return run(a, b, e, RowPass::kWriteWatched);
        }) == rows)
      return;
    check_inverse_rope_inputs(a, ctx.num_threads);
    return hand_over(Fallback::inverse_gptj_rope_o_proj, ref::inverse_gptj_rope_o_proj, a, ctx);
  }
  if (ctx.check_finite && !rotation_bounded(a)) {
    // Pass 1: every row checked, nothing written (reads 2·rope_dim bytes a row).
    const int threads = threads_for(ctx.num_threads, rows * a.rope_dim * 2);
    if (parallel_first(rows, threads, [&](int64_t b, int64_t e) {
          return run(a, b, e, RowPass::kCheck);
        }) < rows)
      return hand_over(Fallback::inverse_gptj_rope_o_proj, ref::inverse_gptj_rope_o_proj, a, ctx);
  }
  // Pass 2: every row of out (reads 2·D bytes a row, writes 4·D). Plain stores, also for large
  // calls: out is read next (the output projection), and a buffer just allocated comes zeroed by
  // the kernel, which leaves its pages in the caches (non-temporal stores measured slower there).
  parallel_ranges(rows, write_threads,
                  [&](int64_t b, int64_t e) { run(a, b, e, RowPass::kWrite); });
}

}  // namespace dsv4cpu::detail::opt
#endif  // HWY_ONCE
